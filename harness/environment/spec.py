"""What an environment is made of: SKRs, Watchers, extra listeners, knobs (frozen, pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.clusters.selection import BackendChoice
from harness.kcp.lifecycle_manager.certificates.policy import CertificateTimings
from harness.kcp.lifecycle_manager.kyma.reconcile import (
    SKR_KYMA_LABELS as SKR_KYMA_LABELS,  # re-exported
)
from harness.kcp.lifecycle_manager.queue.reconciler import RequeueIntervals
from harness.kcp.listeners import Implementation
from harness.skr.certs import CertificateOverride
from watcher.domain import KCP_NAMESPACE
from watcher.health.heartbeat import health_watcher
from watcher.health.state import Policy
from watcher.render.watcher_cr import klm_watcher_dict
from watcher.webhook.settings import DeliveryMode

KLM_COMPONENT = "lifecycle-manager"
KLM_SERVICE = ("klm-controller-manager-events", KCP_NAMESPACE, 8082)

WatcherRollout = Literal["immediate", "reconcile"]
"""How a Watcher change reaches the SKRs: ``immediate`` — every SKR's configuration is
re-rendered at once (ours; the default); ``reconcile`` — at each Kyma's next reconcile
(KLM's). In both, every reconcile renders from all Watchers."""

Service = tuple[str, str, int]
"""(name, namespace, port) of a KCP Service, as a Watcher's ``serviceInfo`` names it."""


@dataclass(frozen=True)
class SkrSpec:
    """One SKR: its cluster name, identity and (for negative tests) certificate override.

    ``delivery_mode`` overrides :attr:`EnvironmentSpec.delivery_mode` for this SKR.
    """

    name: str
    runtime_id: str
    skr_domain: str
    certificate: CertificateOverride = field(default_factory=CertificateOverride)
    delivery_mode: DeliveryMode | None = None
    create_kyma: bool = True
    """False: only provisioned (kubeconfig Secret); the Kyma is created later."""

    @property
    def kyma_name(self) -> str:
        return f"kyma-{self.name}"


@dataclass(frozen=True)
class ListenerSpec:
    """Another manager's listener behind the gateway, reachable as ``service``, served by
    ours or by upstream's Go listener (``harness.kcp.listener_process``)."""

    component: str
    service: Service
    implementation: Implementation = "ours"


def _default_watchers() -> tuple[Mapping[str, Any], ...]:
    return (klm_watcher_dict(),)


@dataclass(frozen=True)
class EnvironmentSpec:
    """Everything ``watcher_environment`` brings up; the defaults are KLM's setup.

    ``watchers`` are Watcher CR dicts applied at startup (default: KLM's ``klm-watcher``);
    ``listeners`` are extra managers' listeners; ``webhook_env`` adds ``WATCHER_*`` knobs
    to every SKR webhook (e.g. a short ``WATCHER_RETRY_MAX_SECONDS`` for fault tests);
    ``backend`` says where the clusters come from (default: ``local`` processes).
    """

    skrs: tuple[SkrSpec, ...] = (
        SkrSpec("skr-a", "runtime-a", "skr-a.kyma.example.com"),
        SkrSpec("skr-b", "runtime-b", "skr-b.kyma.example.com"),
    )
    watchers: tuple[Mapping[str, Any], ...] = field(default_factory=_default_watchers)
    listeners: tuple[ListenerSpec, ...] = ()
    pin_san: bool = True
    delivery_mode: DeliveryMode = "async"
    intervals: RequeueIntervals = field(default_factory=RequeueIntervals)
    catalog: tuple[Mapping[str, Any], ...] = ()
    """ModuleTemplates and ModuleReleaseMetas created in the KCP before the Kymas."""
    klm_workers: int = 1
    """KLM's ``max-concurrent-kyma-reconciles``."""
    manifest_ready_after: float = 0.5
    """Seconds until the Manifest stand-in makes a new Manifest Ready (or Error)."""
    certificates: CertificateTimings = field(default_factory=CertificateTimings)
    """KLM's CA and client-certificate validities, renewals and the gateway's grace."""
    watcher_rollout: WatcherRollout = "immediate"
    health: Policy | None = None
    """Watcher health (``harness.kcp.lifecycle_manager.watcher_health``); None: off."""
    webhook_env: Mapping[str, str] = field(default_factory=dict)
    log_dir: Path | None = None
    upstream_mtls: bool = True
    """Gateway → listener hop over mTLS (mesh CA, gateway allow-list; ``harness.kcp.gateway.mesh``).
    ``False`` is the plain-HTTP opt-out: listeners then believe XFCC from anyone."""
    backend: BackendChoice = field(default_factory=BackendChoice)
    host_address: str | None = None
    """How the API servers (and in-cluster webhooks) reach this host; None: the backend
    choice's (``WATCHER_HARNESS_HOST_ADDRESS``), else the backend's default (kind: the
    kind network's gateway), else ``127.0.0.1``."""

    @property
    def all_watchers(self) -> tuple[Mapping[str, Any], ...]:
        """``watchers`` plus, with health on, the ``watcher-health`` Watcher."""
        return (*self.watchers, health_watcher()) if self.health is not None else self.watchers

    def delivery_mode_of(self, skr: SkrSpec) -> DeliveryMode:
        return skr.delivery_mode or self.delivery_mode
