"""Soak: minutes of churn at a steady write rate across SKRs, checked by the ground-truth
oracle, with the memory and file descriptors of every watcher process sampled over time
(``make soak``; see docs/soak.md).
"""
