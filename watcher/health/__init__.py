"""Watcher health on the KCP: whether each runtime's watcher still delivers, from the
round trip of heartbeats through the real path (``state``: the pure state machine)."""
