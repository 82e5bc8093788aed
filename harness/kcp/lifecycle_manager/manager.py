"""KLM's Kyma controller: what makes a Kyma reconcile (events from SKRs among them).

As KLM (reference §7, klm-reference §1): every KCP Kyma is reconciled at startup, when it
appears, when its generation or labels change, and then requeued by outcome; a Kyma
labelled ``skip-reconciliation`` is not; an SKR event enqueues the one Kyma whose
``kyma-project.io/runtime-id`` label is the event's runtime id (logging ``event received
from SKR, adding kcp-system/<kyma> to queue``), zero or several matches drop it.
:class:`LifecycleManager` is KLM's controller runtime with this controller set up on it
(:meth:`LifecycleManager.setup`); the other controllers are set up on the same runtime.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from collections.abc import Callable

from kubernetes_asyncio.client import ApiClient

from harness.kcp.lifecycle_manager.events import ListenerHost
from harness.kcp.lifecycle_manager.kyma.cache import DEFAULT_NAMESPACE, KymaCache
from harness.kcp.lifecycle_manager.metrics import KlmMetrics
from harness.kcp.lifecycle_manager.queue.reconciler import (
    Outcome,
    Reconcile,
    ReconcileFn,
    Reconciler,
    ReconcileTimeout,
    RequeueIntervals,
)
from harness.kcp.lifecycle_manager.queue.reconciler import logger as reconciler_logger
from harness.kcp.lifecycle_manager.queue.runtime import ControllerRuntime
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.kube import KYMAS, get, merge_patch
from watcher.domain import RUNTIME_ID_LABEL
from watcher.listener import Listener, ListenerConfig, ListenerEvent, san_pinning

logger = logging.getLogger("harness.kcp.lifecycle_manager.manager")

COMPONENT = "lifecycle-manager"

__all__ = [  # the Kyma controller's record, as its users read it
    "COMPONENT",
    "LifecycleManager",
    "Outcome",
    "Reconcile",
    "ReconcileTimeout",
    "Reconciler",
    "RequeueIntervals",
    "Trigger",
]


def mark_ready(api: ApiClient) -> ReconcileFn:
    """The default reconcile: read the KCP Kyma; set ``status.state: Ready`` if it is not."""

    async def reconcile(key: str) -> Outcome:
        namespace, _, name = key.partition("/")
        kyma = await get(api, KYMAS, name, namespace)
        if kyma is None:
            return Outcome.GONE
        if (kyma.get("status") or {}).get("state") != "Ready":
            await merge_patch(
                api, KYMAS, name, namespace, {"status": {"state": "Ready"}}, subresource="status"
            )
        return Outcome.SUCCESS

    return reconcile


class LifecycleManager(ControllerRuntime):
    """``async with LifecycleManager(api, listener_config=...) as klm:`` — KLM on the KCP.

    With a ``listener_config`` the manager owns its listener (a :class:`ListenerHost`, which
    faults stop and start on the same port), with SAN pinning against its Kyma cache when
    ``pin_san`` is set; without, events come only through :meth:`handle_event`.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        listener_config: ListenerConfig | None = None,
        pin_san: bool = False,
        namespace: str = DEFAULT_NAMESPACE,
        workers: int = 1,
        intervals: RequeueIntervals = RequeueIntervals(),  # noqa: B008 - frozen
        reconcile: ReconcileFn | None = None,
        clock: Callable[[], float] | None = None,
        metrics: KlmMetrics | None = None,
        event_settle: float = 0.0,
        reconcile_log: logging.Logger | None = None,
    ) -> None:
        """``reconcile``: the Kyma reconcile (may be set later, before the start);
        ``event_settle``: seconds a Kyma queued by an SKR event waits (see
        :meth:`handle_event`; 0 as upstream's KLM)."""
        if pin_san and listener_config is None:
            raise ValueError("pin_san needs listener_config (the manager adds the hook)")
        super().__init__(api, clock=clock)
        self.namespace = namespace
        self.event_settle = event_settle
        self.metrics = metrics or KlmMetrics()
        self.reconcile = reconcile or mark_ready(api)
        self.cache = KymaCache(namespace)
        self.host: ListenerHost | None = None
        if listener_config is not None:
            hooks = listener_config.verify_hooks
            if pin_san:
                hooks = (*hooks, san_pinning(self.cache.lookup))
            config = dataclasses.replace(listener_config, verify_hooks=hooks)
            self.host = ListenerHost(config, self.handle_event)
        self.event_counters: collections.Counter[str] = collections.Counter()
        self.observers: list[Callable[[ListenerEvent], None]] = []
        """Told every event before it is resolved (the harness's event log)."""
        self.reconciler = self.setup(workers, intervals, reconcile_log or reconciler_logger)
        self.reconciles = self.reconciler.reconciles
        self.wait_for_reconcile = self.reconciler.wait_for_reconcile

    def setup(self, workers: int, intervals: RequeueIntervals, log: logging.Logger) -> Reconciler:
        """The Kyma controller (KLM's ``SetupWithManager``)."""
        reconciler = self.controller(
            "kyma", self._reconcile_unless_skipped, intervals=intervals, workers=workers, log=log
        )
        self.cache.on_change = self._kyma_changed
        self.watch(KYMAS, self.cache.apply, self.namespace)
        self.on_synced.append(self._startup)
        if self.host is not None:
            self.add(self.host)
        return reconciler

    @property
    def listener(self) -> Listener | None:
        """The listener receiving events right now (None while an owned one is stopped)."""
        return self.host.listener if self.host is not None and self.host.running else None

    @property
    def counters(self) -> collections.Counter[str]:
        return self.reconciler.counters + self.event_counters

    def _startup(self) -> None:
        for kyma in self.cache.all():
            self.reconciler.enqueue(kyma.key, Trigger.STARTUP)

    def _kyma_changed(self, key: str, trigger: Trigger) -> None:
        logger.info("%s %s, adding it to queue", key, trigger.value)
        self.reconciler.enqueue(key, trigger)

    async def _reconcile_unless_skipped(self, key: str) -> Outcome | float:
        """Removing KLM's ``skip-reconciliation`` label is a label change: reconciled again."""
        info = self.cache.get(key)
        if info is not None and info.skip_reconciliation:
            return Outcome.SKIPPED
        return await self.reconcile(key)

    async def handle_event(self, event: ListenerEvent) -> None:
        """Resolve the event's runtime id to one Kyma and enqueue it (trigger watch-event)."""
        self.event_counters["events:received"] += 1
        for observe in list(self.observers):
            observe(event)
        matches = self.cache.by_runtime_id(event.runtime_id, self.namespace)
        if len(matches) != 1:
            reason = "unknown-runtime" if not matches else "ambiguous-runtime"
            self.event_counters[f"events:dropped-{reason}"] += 1
            logger.info(
                "dropping event from SKR: %d Kymas in %s have %s=%s%s",
                len(matches),
                self.namespace,
                RUNTIME_ID_LABEL,
                event.runtime_id,
                f" ({', '.join(k.key for k in matches)})" if matches else "",
            )
            return
        key = matches[0].key
        logger.info("event received from SKR, adding %s to queue", key)
        self.event_counters["events:enqueued"] += 1
        if self.event_settle > 0:
            # An event may leave the SKR before the write it reports is stored (a webhook
            # delivering in admission, or answering first and racing the API server's
            # write): a reconcile that starts within milliseconds reads the old spec.
            self.reconciler.enqueue_after(key, Trigger.WATCH_EVENT, self.event_settle)
        else:
            self.reconciler.enqueue(key, Trigger.WATCH_EVENT)
