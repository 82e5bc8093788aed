"""One accepted event as one JSON line: what ``watcher-listener`` prints on stdout.

The same line is what the harness reads from any listener it runs as a process (ours, or
upstream's Go listener wrapped by ``tools/upstream-listener``), so every implementation's
events count alike::

    {"runtime_id":"rt","watched":{"namespace":"ns","name":"n"},
     "watched_gvk":{"group":"g","version":"v","kind":"K"},"received_at":1764000000.5}

``owner`` follows only for an event that carries one (the legacy owner contract).
"""

from __future__ import annotations

import json
from typing import Any

from watcher.listener.stream import ListenerEvent
from watcher.model import GroupVersionKind, ObjectKey, WatchEvent


def event_line(event: ListenerEvent) -> str:
    """The stdout representation of one accepted event."""
    watched = event.event.watched
    gvk = event.event.watched_gvk
    line: dict[str, Any] = {
        "runtime_id": event.runtime_id,
        "watched": {"namespace": watched.namespace, "name": watched.name},
        "watched_gvk": {"group": gvk.group, "version": gvk.version, "kind": gvk.kind},
        "received_at": event.received_at,
    }
    if event.event.owner is not None:
        owner = event.event.owner
        line["owner"] = {"namespace": owner.namespace, "name": owner.name}
    return json.dumps(line, separators=(",", ":"))


def parse_event_line(line: str | bytes) -> ListenerEvent | None:
    """The event a line carries; None for anything else (a log line, a torn line)."""
    try:
        data: Any = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or "runtime_id" not in data or "watched" not in data:
        return None
    try:
        watched, gvk, owner = data["watched"], data["watched_gvk"], data.get("owner")
        return ListenerEvent(
            runtime_id=str(data["runtime_id"]),
            event=WatchEvent(
                watched=ObjectKey(str(watched.get("namespace", "")), str(watched["name"])),
                watched_gvk=GroupVersionKind(
                    str(gvk["group"]), str(gvk["version"]), str(gvk["kind"])
                ),
                owner=(
                    ObjectKey(str(owner.get("namespace", "")), str(owner["name"]))
                    if isinstance(owner, dict)
                    else None
                ),
            ),
            received_at=float(data["received_at"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
