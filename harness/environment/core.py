"""Handles to every running part of one environment, and what flows and scenarios ask of it.

Observation: :attr:`WatcherEnvironment.log` (every accepted event, every fault) and
:meth:`~WatcherEnvironment.metric` / :meth:`~WatcherEnvironment.rejections`. Change:
:meth:`~WatcherEnvironment.apply_watcher` / :meth:`~WatcherEnvironment.delete_watcher`
(return once the change is live) and :meth:`~WatcherEnvironment.inject` (see
:mod:`harness.faults`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.environment.events import FaultRecord, ObservedEvent
from harness.environment.inject import (
    act,
    apiserver_fault,
    gateway_fault,
    inject,
    listener_fault,
    named,
)
from harness.environment.parts import EnvironmentParts
from harness.environment.rotation import CertificateRotation
from harness.environment.spec import SKR_KYMA_LABELS, SkrSpec
from harness.faults import Fault, FaultError, Part, PartFault
from harness.kcp.gateway.routes import (
    wait_route,
)
from harness.kcp.klm_log import ReconcileHistory
from harness.kcp.lifecycle_manager.manager import LifecycleManager
from harness.kcp.lifecycle_manager.watcher_controller import WatcherController, valid_watcher
from harness.kcp.lifecycle_manager.watcher_health import WatcherHealth
from harness.kcp.listeners import ManagerListener
from harness.kube import (
    KYMAS,
    WATCHERS,
    create_or_replace,
    delete,
    ensure_namespace,
    get,
    request,
)
from harness.skr.fleet import SkrFleet
from watcher import pki
from watcher.domain import KCP_NAMESPACE, SKR_KYMA_NAME, SKR_NAMESPACE
from watcher.render.watcher_cr import Watcher

VERIFICATION_FAILED = "watcher_listener_verification_failed_total"


def probes_kyma(watcher: Watcher) -> bool:
    """Whether a metadata-only write of an SKR's default Kyma reaches ``watcher``'s webhook."""
    res = watcher.spec.resource_to_watch
    labels = watcher.spec.labels_to_watch
    return (
        res.group in ("operator.kyma-project.io", "*")
        and res.resource in ("kymas", "*")
        and watcher.spec.field == "spec"
        and all(SKR_KYMA_LABELS.get(k) == v for k, v in labels.items())
    )


@dataclass(kw_only=True)
class WatcherEnvironment(EnvironmentParts):
    """Handles to every running part, for flows, tests and the scenario runner; its
    :attr:`listeners` include KLM's (``lifecycle-manager``)."""

    klm: LifecycleManager
    fleet: SkrFleet
    controller: WatcherController
    rotation: CertificateRotation
    health: WatcherHealth | None = None
    """KLM's watcher health (``spec.health``; None: off)."""
    reconciles: ReconcileHistory = field(default_factory=ReconcileHistory)
    """The KLM's reconciles as its log shows them (as a KLM process is observed)."""

    # -- facts ------------------------------------------------------------------------

    @property
    def ca(self) -> pki.CertificateAuthority:
        """The KCP CA issuing certificates right now (changes with ``rotate("ca")``)."""
        return self.rotation.ca

    @property
    def timeline(self) -> list[FaultRecord]:
        """Every fault action, in the order they started."""
        return self.log.timeline

    def events_since(self, t: float, manager: str | None = None) -> list[ObservedEvent]:
        return self.log.events_since(t, manager)

    def skr(self, name: str) -> SkrSpec:
        for s in self.spec.skrs:
            if s.name == name:
                return s
        raise KeyError(f"no SKR {name!r}; have {[s.name for s in self.spec.skrs]}")

    # -- observation ------------------------------------------------------------------

    def rejections(self) -> dict[str, dict[str, float]]:
        """Per listener component: verification failures (HTTP 403) by reason."""
        out: dict[str, dict[str, float]] = {}
        for component, host in self.listeners.items():
            by_reason: dict[str, float] = {}
            for labels, value in host.samples(VERIFICATION_FAILED).items():
                reason = dict(labels).get("reason", "")
                by_reason[reason] = by_reason.get(reason, 0.0) + value
            out[component] = by_reason
        return out

    async def metric(
        self, target: str, name: str, labels: Mapping[str, str] | None = None
    ) -> float:
        """One sample now: ``webhook/<skr>`` (scraped), ``listener/<component>`` (summed
        over restarts), ``gateway`` (an Envoy stat by its full name; no labels) or ``klm``
        (the Lifecycle Manager's own metrics)."""
        kind, _, which = target.partition("/")
        labels = dict(labels or {})
        if kind == "webhook":
            return await self.fleet[which].metric(name, **labels)
        if kind == "listener":
            return await self._listener(which).read_metric(name, labels)
        if kind == "klm" and not which:
            return self.klm.metrics.value(name, labels)
        if kind == "gateway" and not which:
            if labels:
                raise FaultError(f"gateway stats have no labels; got {labels} for {name}")
            stats = await self.gateway.stats()
            return float(stats.get(name, 0))
        raise FaultError(
            f"unknown metric target {target!r}; use webhook/<skr>, listener/<component>, "
            "gateway or klm"
        )

    def _listener(self, component: str) -> ManagerListener:
        try:
            return self.listeners[component]
        except KeyError:
            raise FaultError(f"no listener {component!r}; have {sorted(self.listeners)}") from None

    # -- managers and Watchers --------------------------------------------------------

    async def apply_watcher(self, obj: Mapping[str, Any], within: float = 20.0) -> None:
        """Create or replace a Watcher; return once controller, fleet, route and every SKR's
        webhook configuration reflect it (an invalid Watcher: once it is not routed)."""
        meta = obj["metadata"]
        await ensure_namespace(self.kcp_api, meta["namespace"])
        await create_or_replace(self.kcp_api, WATCHERS, dict(obj))
        await self._wait_live(meta["name"], meta["namespace"], valid_watcher(obj), within)

    async def delete_watcher(self, name: str, namespace: str, within: float = 20.0) -> None:
        """Delete a Watcher; return once its route and webhooks are gone everywhere."""
        await delete(self.kcp_api, WATCHERS, name, namespace)
        await self._wait_live(name, namespace, None, within)

    async def _wait_live(
        self, name: str, namespace: str, expected: Watcher | None, within: float
    ) -> None:
        key = f"{namespace}/{name}"
        async with asyncio.timeout(within):
            while True:
                current = {f"{w.namespace}/{w.name}": w for w in self.controller.watchers()}
                have = current.get(key)
                matches = (
                    have is None
                    if expected is None
                    else have is not None and have.spec == expected.spec
                )
                if matches and (
                    not self.rolls_out_immediately
                    or self.fleet.watchers == tuple(self.controller.watchers())
                ):
                    break
                await asyncio.sleep(0.02)
            await self.wait_route(name, namespace, present=expected is not None, within=within)
            await self.wait_wired(within=within)

    @property
    def rolls_out_immediately(self) -> bool:
        """Watcher changes re-render every SKR at once (else: at each Kyma's reconcile)."""
        return self.spec.watcher_rollout == "immediate"

    async def wait_watchers_applied(self, names: Sequence[str], within: float = 15.0) -> None:
        """Until the controller reports exactly ``names`` valid and (rolled out
        immediately) every SKR is rewired."""
        wanted = sorted(names)
        async with asyncio.timeout(within):
            while True:
                fleet_names = sorted(f"{w.namespace}/{w.name}" for w in self.fleet.watchers)
                ctl_names = sorted(f"{w.namespace}/{w.name}" for w in self.controller.watchers())
                if ctl_names == wanted and (
                    fleet_names == wanted or not self.rolls_out_immediately
                ):
                    return
                await asyncio.sleep(0.02)

    async def wait_wired(self, within: float = 15.0) -> None:
        """Until every SKR API server calls its webhook for the SKR Kyma (SKRs without
        one yet, or whose Watchers do not select it, are skipped).

        A new ValidatingWebhookConfiguration reaches the API server's admission chain
        through an informer, a moment after the write; dry-run writes probe it without
        changing anything (metadata only: no event is sent), and the webhook's admission
        counter proves it was called. Skipped when no Watcher matches such a write.
        """
        async with asyncio.timeout(within):
            for inst in self.fleet:
                if not inst.running or not any(probes_kyma(w) for w in inst.watchers):
                    continue
                api = self.skr_apis[inst.cluster.name]
                if await get(api, KYMAS, SKR_KYMA_NAME, SKR_NAMESPACE) is None:
                    continue  # no SKR Kyma yet (its KCP Kyma comes later): nothing to probe
                before = await inst.metric("watcher_admission_request_total")
                probe = 0
                while await inst.metric("watcher_admission_request_total") <= before:
                    if not any(probes_kyma(w) for w in inst.watchers):
                        break  # rewired meanwhile to Watchers such a write does not reach
                    probe += 1
                    await request(
                        api,
                        "PATCH",
                        KYMAS.path(SKR_NAMESPACE, SKR_KYMA_NAME),
                        query=[("dryRun", "All")],
                        body={"metadata": {"annotations": {"harness/probe": str(probe)}}},
                        content_type="application/merge-patch+json",
                    )
                    await asyncio.sleep(0.05)

    async def wait_route(
        self, name: str, namespace: str, *, present: bool, within: float = 15.0
    ) -> None:
        """Until the VirtualService exists (or not) in KCP and Envoy confirmed that route."""
        await wait_route(
            self.kcp_api, self.gateway, name, namespace, present=present, within=within
        )

    # -- faults -----------------------------------------------------------------------

    @property
    def certificates(self) -> CertificateRotation:
        return self.rotation

    async def lifecycle(self, fault: PartFault) -> str:
        """Stop, start, kill or restart the part ``fault`` names (a :class:`FaultPorts`
        port of :func:`~harness.environment.inject.inject`)."""
        match fault.part:
            case Part.GATEWAY:
                return await gateway_fault(self.gateway, fault.action)
            case Part.WEBHOOK:
                inst = named({i.cluster.name: i for i in self.fleet}, fault)
                await act(inst, fault.action)
                return inst.state
            case Part.LISTENER:
                return await listener_fault(named(self.listeners, fault), fault.action)
            case Part.APISERVER:
                return await apiserver_fault(self.clusters, fault)

    async def inject(self, fault: Fault) -> FaultRecord:
        """Inject one fault (see :mod:`harness.faults`); returns once the target is
        really down/up; recorded in :attr:`timeline`."""
        at = time.time()
        detail = await inject(self, fault)
        record = FaultRecord(at, fault.target, fault.action, time.time(), detail)
        self.log.timeline.append(record)
        return record


__all__ = ["KCP_NAMESPACE", "SKR_NAMESPACE", "WatcherEnvironment", "probes_kyma"]
