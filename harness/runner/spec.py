"""Scenario → :class:`~harness.environment.EnvironmentSpec`: what the environment must bring up.

Pure. SKRs keep their names, runtime ids, domains, certificate overrides and delivery
modes; Watchers become the CR dicts the KCP gets at startup (``{default: true}`` is KLM's
``klm-watcher``); ``listeners`` are the extra managers; ``settings`` become SAN pinning
and the Lifecycle-Manager's requeue intervals. Logs go to ``log_dir`` so a report can
attach them after the environment is gone. ``backend`` (chosen by the caller from the
command line, the environment and the file: :func:`harness.clusters.selection.choose_backend`)
says where the clusters come from; a scenario needing what that backend cannot do raises
:class:`~harness.runner.errors.BackendUnsupported`.
"""

from __future__ import annotations

import datetime as dt
import shlex
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.clusters.backends import in_cluster_reason, unsupported_reason
from harness.clusters.selection import BackendChoice, backend_name
from harness.environment.spec import EnvironmentSpec, ListenerSpec, SkrSpec
from harness.kcp.lifecycle_manager.certificates.policy import CertificateTimings
from harness.kcp.lifecycle_manager.kyma.modules import catalog_fixture
from harness.kcp.lifecycle_manager.queue.reconciler import RequeueIntervals
from harness.runner.errors import BackendUnsupported
from harness.scenario import (
    KCP,
    BreakFault,
    Certificate,
    Certificates,
    FaultOp,
    Health,
    ProcessFault,
    RotateFault,
    Scenario,
)
from harness.scenario.modules import Module
from harness.scenario.operations import WatcherOp
from harness.scenario.requirements import (
    derived_from_clusters,
    derived_from_operations,
    derived_klm_from_operations,
    derived_klm_from_scenario,
    missing_features,
    missing_klm_features,
)
from harness.scenario.steps import Step
from harness.skr.certs import CertificateOverride
from watcher.health.state import Policy


def fault_ops(scenario: Scenario) -> Iterator[FaultOp]:
    """Every fault operation of the scenario's steps."""
    for step in scenario.steps:
        for _, operations in step.blocks():
            for op in operations:
                if isinstance(op, FaultOp):
                    yield op


def fault_targets(scenario: Scenario) -> Iterator[str]:
    """Every process fault target the scenario's steps name (``apiserver/kcp``, ...)."""
    for op in fault_ops(scenario):
        if isinstance(op.fault, ProcessFault):
            yield op.fault.target


def scenario_backend(scenario: Scenario, backend: BackendChoice | None) -> BackendChoice:
    """``backend`` if given (checked against the scenario), else the file's choice."""
    choice = backend or BackendChoice(name=backend_name(scenario.backend.value, "backend"))
    reason = unsupported_reason(choice, fault_targets(scenario)) or in_cluster_reason(
        choice,
        rotates=any(isinstance(op.fault, RotateFault | BreakFault) for op in fault_ops(scenario)),
        sync_skrs=[s.name for s in scenario.clusters.skrs if s.delivery_mode == "sync"],
    )
    if reason is None and choice.webhook_command:
        reason = missing_features(
            derived_from_clusters(scenario.clusters),
            scenario.requires.webhook,
            shlex.join(choice.webhook_command),
        )
    if reason is None and choice.klm_command:
        needs = derived_klm_from_scenario(
            scenario.settings,
            modules=len(scenario.modules),
            changes_watchers=any(
                isinstance(op, WatcherOp)
                for step in scenario.steps
                for _, operations in step.blocks()
                for op in operations
            ),
        )
        reason = missing_klm_features(
            needs, scenario.requires.klm, choice.klm_features, shlex.join(choice.klm_command)
        )
    if reason is not None:
        raise BackendUnsupported(f"scenario {scenario.name!r}: {reason}")
    return choice


def step_skip_reason(
    step: Step,
    webhook_command: tuple[str, ...],
    klm_command: tuple[str, ...] = (),
    klm_features: tuple[str, ...] = (),
) -> str | None:
    """Why ``step`` cannot run against the webhook ``webhook_command`` or the KLM
    ``klm_command`` showing ``klm_features`` (None: it can)."""
    reason = None
    if webhook_command:
        reason = missing_features(
            derived_from_operations(step.operations()),
            step.requires.webhook,
            shlex.join(webhook_command),
        )
    if reason is None and klm_command:
        reason = missing_klm_features(
            derived_klm_from_operations(step.operations()),
            step.requires.klm,
            klm_features,
            shlex.join(klm_command),
        )
    return reason


def certificate_override(certificate: Certificate) -> CertificateOverride:
    """The SKR installation's :class:`~harness.skr.certs.CertificateOverride` for a
    scenario's ``certificate`` setting."""
    return CertificateOverride.named(certificate.override.value, skr_domain=certificate.skr_domain)


def certificate_timings(settings: Certificates) -> CertificateTimings:
    """The Lifecycle Manager's certificate timings from ``settings.klm.certificates``."""
    return CertificateTimings(
        ca_validity=dt.timedelta(seconds=settings.ca_validity),
        ca_renew_before=dt.timedelta(seconds=settings.ca_renew_before),
        client_validity=dt.timedelta(seconds=settings.client_validity),
        client_renew_before=dt.timedelta(seconds=settings.client_renew_before),
        grace=dt.timedelta(seconds=settings.grace),
    )


def health_policy(settings: Health | None) -> Policy | None:
    """The watcher-health policy from ``settings.klm.health`` (None: health off)."""
    if settings is None:
        return None
    return Policy(interval=settings.interval, timeout=settings.timeout, slow=settings.slow)


def module_catalog(modules: Iterable[Module]) -> tuple[dict[str, Any], ...]:
    """The KCP catalog objects (ModuleTemplates, ModuleReleaseMetas) of ``modules``."""
    return tuple(
        obj
        for m in modules
        for obj in catalog_fixture(
            m.name, m.channels, install_fails=m.install == "fail", labels=m.labels
        )
    )


def environment_spec(
    scenario: Scenario,
    *,
    log_dir: Path | None = None,
    webhook_env: Mapping[str, str] | None = None,
    backend: BackendChoice | None = None,
) -> EnvironmentSpec:
    """The environment ``scenario`` runs in (see the module doc)."""
    choice = scenario_backend(scenario, backend)
    # Given ``kymas``, the environment provisions only the default KCP Kymas among them:
    # one written and deleted again would race the scenario's own for the same runtime.
    wanted = None if scenario.kymas is None else {(k.cluster, k.name) for k in scenario.kymas}
    skrs = tuple(
        SkrSpec(
            name=skr.name,
            runtime_id=skr.runtime_id,
            skr_domain=skr.skr_domain,
            certificate=certificate_override(skr.certificate),
            delivery_mode=skr.delivery_mode,
            create_kyma=skr.kyma and (wanted is None or (KCP, skr.kyma_name) in wanted),
        )
        for skr in scenario.clusters.skrs
    )
    requeue = scenario.settings.requeue
    return EnvironmentSpec(
        skrs=skrs,
        watchers=tuple(w.to_dict() for w in scenario.watchers),
        listeners=tuple(
            ListenerSpec(
                component=listener.component,
                service=listener.service.key,
                implementation=listener.implementation,
            )
            for listener in scenario.listeners
        ),
        pin_san=scenario.settings.san_pinning,
        intervals=RequeueIntervals(
            success=requeue.success,
            busy=requeue.busy,
            error=requeue.error,
            warning=requeue.warning,
            error_max=requeue.error_max,
        ),
        catalog=module_catalog(scenario.modules),
        klm_workers=scenario.settings.klm.concurrency,
        manifest_ready_after=scenario.settings.klm.manifest_ready_after,
        certificates=certificate_timings(scenario.settings.klm.certificates),
        watcher_rollout=scenario.settings.klm.watcher_rollout,
        health=health_policy(scenario.settings.klm.health),
        webhook_env=dict(webhook_env or {}),
        log_dir=log_dir,
        backend=choice,
    )
