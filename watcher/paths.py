"""URL paths shared by webhook, listener and renderers, and the names allowed in them.

Manager and component names end up in URL paths and Envoy route prefixes, so they are
restricted to what a Kubernetes DNS label allows; anything else (``..``, ``/``, encoded
slashes, very long names) is refused before it reaches a path.
"""

from __future__ import annotations

import re

from watcher.model import Contract

# fullmatch, not ``$``: ``$`` also matches before a trailing newline ("name\n").
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_NAME_LENGTH = 63


def validate_manager_name(name: str) -> str:
    """Return ``name`` if it is a DNS label, else raise ``ValueError`` saying why."""
    if not name:
        raise ValueError("must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"must be at most {MAX_NAME_LENGTH} characters, got {len(name)}")
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a DNS label (lower-case letters, digits and '-', "
            "starting and ending with a letter or digit)"
        )
    return name


def event_path(contract: Contract, manager: str) -> str:
    """``/v2/<manager>/event``: where the KCP gateway routes a manager's events."""
    return f"/{contract}/{manager}/event"


def validate_path(manager: str) -> str:
    """``/validate/<manager>``: the SKR webhook path for one manager."""
    return f"/validate/{manager}"
