"""Scenario → :class:`~harness.environment.EnvironmentSpec`: what the environment must bring up.

Pure. SKRs keep their names, runtime ids, domains, certificate overrides and delivery
modes; Watchers become the CR dicts the KCP gets at startup (``{default: true}`` is KLM's
``klm-watcher``); ``listeners`` are the extra managers; ``settings`` become SAN pinning
and the Lifecycle-Manager's requeue intervals. ``backend`` says where the clusters come
from: whether it can run the scenario at all was decided before, with the rest of the
scenario's plan (:func:`harness.runner.plan.plan_scenario`), so this is only the mapping.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from harness.clusters.selection import BackendChoice
from harness.environment.spec import EnvironmentSpec, ListenerSpec, SkrSpec
from harness.kcp.lifecycle_manager.certificates.policy import CertificateTimings
from harness.kcp.lifecycle_manager.kyma.modules import catalog_fixture
from harness.kcp.lifecycle_manager.queue.reconciler import RequeueIntervals
from harness.scenario import KCP, Certificate, Certificates, Health, Scenario
from harness.scenario.modules import Module
from harness.skr.certs import CertificateOverride
from watcher.health.state import Policy


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
    backend: BackendChoice,
    *,
    webhook_env: Mapping[str, str] | None = None,
) -> EnvironmentSpec:
    """The environment ``scenario`` runs in on ``backend`` (see the module doc)."""
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
        intervals=RequeueIntervals(**scenario.settings.requeue.model_dump()),
        catalog=module_catalog(scenario.modules),
        klm_workers=scenario.settings.klm.concurrency,
        manifest_ready_after=scenario.settings.klm.manifest_ready_after,
        certificates=certificate_timings(scenario.settings.klm.certificates),
        watcher_rollout=scenario.settings.klm.watcher_rollout,
        health=health_policy(scenario.settings.klm.health),
        webhook_env=dict(webhook_env or {}),
        backend=backend,
    )
