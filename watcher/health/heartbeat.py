"""The heartbeat's objects and timing: what the KCP writes, what brings it back, when.

No new wire contract: the heartbeat is an ordinary ConfigMap ``kyma-system/
watcher-health-heartbeat`` in each SKR, labelled so that an ordinary Watcher CR
(``kcp-system/watcher-health``, manager ``watcher-health``) puts it under the SKR's
``skr-webhook`` configuration. Every write is an admission request, the webhook — ours or
upstream's, unchanged — sends the usual WatchEvent to ``/v2/watcher-health/event``, and the
KCP's ``watcher-health`` listener hands it to the monitor. ConfigMaps have no ``spec``, so
every UPDATE is an event (reference §3).

A WatchEvent carries no data, so the echo names only the runtime (the client
certificate's CN) and the object; the monitor takes an echo for the runtime's newest
heartbeat. The sequence number in the ConfigMap is for people reading the SKR.

Timing is pure too: each runtime's first heartbeat falls at a phase derived from its id
(evenly spread, the same across KCP restarts), and each next one comes a probe interval
later, shortened by up to ``jitter`` (never lengthened: detection stays within two
intervals), so a fleet's writes do not bunch up.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from watcher.domain import KCP_NAMESPACE, MANAGED_BY_LABEL, SKR_NAMESPACE, WATCHED_BY_LABEL
from watcher.model import WatchEvent
from watcher.render.watcher_cr import watcher_dict

MANAGER: Final = "watcher-health"
"""The manager name: the event path is ``/v2/watcher-health/event``."""
WATCHER_NAME: Final = "watcher-health"
HEARTBEAT_NAME: Final = "watcher-health-heartbeat"
HEARTBEAT_NAMESPACE: Final = SKR_NAMESPACE
HEARTBEAT_LABELS: Final = {WATCHED_BY_LABEL: MANAGER, MANAGED_BY_LABEL: MANAGER}
SEQ_KEY: Final = "seq"
SENT_AT_KEY: Final = "sentAt"
DEFAULT_SERVICE: Final = ("watcher-health-events", KCP_NAMESPACE, 8083)
"""Where the health Watcher routes echoes: (Service name, namespace, port)."""


def heartbeat_configmap(seq: int, sent_at: str) -> dict[str, Any]:
    """The heartbeat object as the KCP writes it (``sent_at``: an RFC 3339 time)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": HEARTBEAT_NAME,
            "namespace": HEARTBEAT_NAMESPACE,
            "labels": dict(HEARTBEAT_LABELS),
        },
        "data": {SEQ_KEY: str(seq), SENT_AT_KEY: sent_at},
    }


def health_watcher(
    service: tuple[str, str, int] = DEFAULT_SERVICE, *, namespace: str = KCP_NAMESPACE
) -> dict[str, Any]:
    """The Watcher CR that brings heartbeats back: ConfigMaps labelled
    ``watched-by: watcher-health`` → manager ``watcher-health`` at ``service``."""
    return watcher_dict(
        WATCHER_NAME,
        namespace=namespace,
        manager=MANAGER,
        labels={MANAGED_BY_LABEL: MANAGER},
        labels_to_watch={WATCHED_BY_LABEL: MANAGER},
        resource=("", "v1", "configmaps"),
        field="spec",
        service=service,
    )


def is_heartbeat(event: WatchEvent) -> bool:
    """Whether ``event`` is the echo of a heartbeat (anything else on the path is not)."""
    gvk = event.watched_gvk
    return (
        event.watched.name == HEARTBEAT_NAME
        and event.watched.namespace == HEARTBEAT_NAMESPACE
        and (gvk.group, gvk.kind) == ("", "ConfigMap")
    )


def phase(runtime_id: str, interval: float) -> float:
    """Seconds into the interval at which ``runtime_id``'s heartbeats start: a hash of the
    id, so a fleet spreads evenly and a runtime keeps its slot across restarts."""
    digest = hashlib.sha256(runtime_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * interval


def next_delay(probe_interval: float, jitter: float, draw: float) -> float:
    """Seconds until the next heartbeat: ``probe_interval`` shortened by up to ``jitter``
    (a fraction) — ``draw`` is a random number in [0, 1) from the caller."""
    if not 0 <= jitter < 1:
        raise ValueError("jitter must be in [0, 1)")
    return probe_interval * (1 - jitter * draw)


__all__ = [
    "DEFAULT_SERVICE",
    "HEARTBEAT_LABELS",
    "HEARTBEAT_NAME",
    "HEARTBEAT_NAMESPACE",
    "MANAGER",
    "SENT_AT_KEY",
    "SEQ_KEY",
    "WATCHER_NAME",
    "health_watcher",
    "heartbeat_configmap",
    "is_heartbeat",
    "next_delay",
    "phase",
]
