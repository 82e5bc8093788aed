"""Errors of the renderers that are not about a Watcher CR itself."""

from __future__ import annotations

from watcher.errors import WatcherError


class RenderError(WatcherError, ValueError):
    """An input other than a Watcher (a VirtualService, a resolver entry) cannot be rendered."""
