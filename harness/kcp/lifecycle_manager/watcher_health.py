"""KLM's watcher health: every Kyma whose Runtime Watcher is installed is probed.

The product's :class:`~watcher.health.monitor.HealthMonitor` judges; this is KLM's use of
it, set up on KLM's runtime (:func:`setup_watcher_health`). The Kyma reconcile adds a
runtime once its watcher is installed and writes the ``WatcherHealth`` condition;
heartbeats are server-side applies of ``kyma-system/watcher-health-heartbeat`` into the
SKR (a write whose admission webhook could not be called reached the watcher's side of the
path: it counts as written without an echo); echoes arrive at the ``watcher-health``
listener behind the same gateway and verify hooks as KLM's own; a transition enqueues the
runtime's Kyma — ``watcher-recovered`` on the way back to Healthy (the catch-up reconcile
for what the watcher missed), ``watcher-health`` otherwise (which repairs the watcher).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
from collections.abc import Mapping
from typing import Any, Final

from harness.kcp.lifecycle_manager.events import ListenerHost
from harness.kcp.lifecycle_manager.kyma.skr_access import SkrAccessError, SkrClients
from harness.kcp.lifecycle_manager.kyma.status import timestamp
from harness.kcp.lifecycle_manager.queue.reconciler import Reconciler
from harness.kcp.lifecycle_manager.queue.runtime import ControllerRuntime
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.kube import CONFIG_MAPS, KubeError, apply
from watcher.domain import RUNTIME_ID_LABEL
from watcher.health.heartbeat import DEFAULT_SERVICE, MANAGER, heartbeat_configmap, is_heartbeat
from watcher.health.metrics import HealthMetrics
from watcher.health.monitor import HealthMonitor, HeartbeatNotAdmitted, HeartbeatWriteError
from watcher.health.state import Policy, Reason, RuntimeHealth, State
from watcher.listener import ListenerConfig, ListenerEvent

logger = logging.getLogger("harness.kcp.lifecycle_manager.watcher_health")

CONDITION_TYPE: Final = "WatcherHealth"
SERVICE: Final = DEFAULT_SERVICE

_EXPLAINED: Final = {
    Reason.NO_HEARTBEAT_YET: "no heartbeat has come back yet",
    Reason.HEARTBEAT_RECEIVED: "heartbeats come back through webhook, gateway and listener",
    Reason.SLOW_ROUND_TRIP: "heartbeats come back, but slowly",
    Reason.NO_EVENT: (
        "heartbeats are written to the SKR but no event comes back (webhook, its "
        "configuration, certificate, network, gateway or route)"
    ),
    Reason.SKR_WRITE_FAILED: "heartbeats cannot be written to the SKR",
    Reason.EVENT_REFUSED: "the listener refuses the runtime's events",
}


def health_condition(health: RuntimeHealth, since: float) -> dict[str, Any]:
    """The Kyma condition for ``health``, last changed at ``since`` (epoch seconds)."""
    status = {State.HEALTHY: "True", State.UNKNOWN: "Unknown"}.get(health.state, "False")
    message = _EXPLAINED[health.reason]
    if health.state in (State.DEGRADED, State.BROKEN):
        message = f"{health.state.value}: {message}" + (
            f" ({health.detail})" if health.detail else ""
        )
    return {
        "type": CONDITION_TYPE,
        "status": status,
        "reason": health.reason.value,
        "message": message,
        "lastTransitionTime": timestamp(since),
    }


_WEBHOOK_CALL_FAILED: Final = re.compile(r'failed calling webhook "([^"]+)"(.*)', re.DOTALL)


def webhook_call_failure(exc: KubeError) -> str | None:
    """A short detail if calling an admission webhook failed (``failurePolicy: Fail``: 500
    ``failed calling webhook "<name>"``); None for any other refusal."""
    if exc.status != 500:
        return None
    found = _WEBHOOK_CALL_FAILED.search(str(exc))
    if found is None:
        return None
    name, rest = found.groups()
    timed_out = "deadline exceeded" in rest  # (the URL's ``?timeout=15s`` says nothing)
    return f"webhook {name} {'timed out' if timed_out else 'call failed'}"


def _write_failure(exc: Exception) -> str:
    """A short, bounded reason for a failed heartbeat write (a metric label)."""
    if isinstance(exc, SkrAccessError):
        return "no SKR access"
    if isinstance(exc, KubeError):
        if exc.status:
            return f"{exc.status} {exc.reason}".strip()
        return "unreachable" if not exc.reached else "no answer"
    return type(exc).__name__


class WatcherHealth:
    """The health prober; runs on the runtime it is set up on (:func:`setup_watcher_health`)."""

    def __init__(
        self,
        skrs: SkrClients,
        reconciler: Reconciler,
        *,
        policy: Policy,
        listener_config: ListenerConfig,
        metrics: HealthMetrics | None = None,
    ) -> None:
        if listener_config.component != MANAGER:
            raise ValueError(f"the health listener's component must be {MANAGER!r}")
        self._skrs = skrs
        self._reconciler = reconciler
        self.monitor = HealthMonitor(self._write, policy=policy, metrics=metrics)
        self.monitor.on_transition.append(self._transition)
        config = dataclasses.replace(
            listener_config,
            rejection_observers=(*listener_config.rejection_observers, self.monitor.refused),
        )
        self.host = ListenerHost(config, self._event)
        self._kymas: dict[str, str] = {}
        """runtime id → its Kyma's key (``kcp-system/<name>``)."""
        self._doubtful: set[str] = set()
        """Kymas whose last heartbeat write failed: the next one re-reads the kubeconfig."""

    def watch(self, kyma: Mapping[str, Any]) -> None:
        """The Kyma's watcher is installed: probe its runtime (again: nothing changes)."""
        meta = kyma.get("metadata") or {}
        runtime_id = (meta.get("labels") or {}).get(RUNTIME_ID_LABEL)
        if not runtime_id:
            return
        self._kymas[runtime_id] = f"{meta['namespace']}/{meta['name']}"
        self.monitor.add(runtime_id)

    def forget(self, kyma: Mapping[str, Any]) -> None:
        meta = kyma.get("metadata") or {}
        runtime_id = (meta.get("labels") or {}).get(RUNTIME_ID_LABEL)
        if runtime_id and self._kymas.get(runtime_id) == f"{meta['namespace']}/{meta['name']}":
            del self._kymas[runtime_id]
            self.monitor.remove(runtime_id)

    def condition(self, kyma: Mapping[str, Any]) -> dict[str, Any] | None:
        """The Kyma's ``WatcherHealth`` condition (None: its runtime is not probed)."""
        runtime_id = ((kyma.get("metadata") or {}).get("labels") or {}).get(RUNTIME_ID_LABEL)
        status = self.monitor.status(runtime_id) if runtime_id else None
        return health_condition(status.health, status.since) if status else None

    async def _write(self, runtime_id: str, seq: int) -> None:
        key = self._kymas.get(runtime_id)
        if key is None:
            raise HeartbeatWriteError("no Kyma")
        name = key.partition("/")[2]
        sent_at = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")
        try:
            if name in self._doubtful:
                skr = await self._skrs.client(name)
            else:
                skr = await self._skrs.cached(name)
            # the harness's field manager, as every write of this stand-in: a shared
            # cluster's clean-up (harness.clusters.ownership) then knows it is the run's
            await apply(skr, CONFIG_MAPS, heartbeat_configmap(seq, sent_at))
        except KubeError as exc:
            held = webhook_call_failure(exc)
            if held is not None:  # the SKR answered: its admission chain held the heartbeat
                self._doubtful.discard(name)
                raise HeartbeatNotAdmitted(held) from exc
            self._doubtful.add(name)
            raise HeartbeatWriteError(_write_failure(exc)) from exc
        except SkrAccessError as exc:
            self._doubtful.add(name)
            raise HeartbeatWriteError(_write_failure(exc)) from exc
        self._doubtful.discard(name)

    async def _event(self, event: ListenerEvent) -> None:
        if is_heartbeat(event.event):
            self.monitor.echo(event.runtime_id)

    def _transition(self, runtime_id: str, before: RuntimeHealth, after: RuntimeHealth) -> None:
        key = self._kymas.get(runtime_id)
        if key is None:
            return
        trigger = Trigger.WATCHER_RECOVERED if after.recovered else Trigger.WATCHER_HEALTH
        if after.recovered:
            logger.info("watcher of %s works again: reconciling it to catch up", key)
        self._reconciler.enqueue(key, trigger)


def setup_watcher_health(
    runtime: ControllerRuntime, skrs: SkrClients, kymas: Reconciler, **options: Any
) -> WatcherHealth:
    """Listener and monitor run on ``runtime``; transitions enqueue Kymas on ``kymas``."""
    health = WatcherHealth(skrs, kymas, **options)
    runtime.add(health.host)
    runtime.add(health.monitor)
    return health
