"""Scenario → :class:`~harness.environment.EnvironmentSpec`: what the environment must bring up.

Pure. SKRs keep their names, runtime ids, domains, certificate overrides and delivery
modes; Watchers become the CR dicts the KCP gets at startup (``{default: true}`` is KLM's
``klm-watcher``); ``listeners`` are the extra managers; ``settings`` become SAN pinning
and the Lifecycle-Manager's requeue intervals. Logs go to ``log_dir`` so a report can
attach them after the environment is gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.environment.spec import EnvironmentSpec, ListenerSpec, SkrSpec
from harness.kcp.reconciler import RequeueIntervals
from harness.runner.errors import UnsupportedScenario
from harness.scenario import Backend, Scenario


def environment_spec(
    scenario: Scenario,
    *,
    log_dir: Path | None = None,
    webhook_env: Mapping[str, str] | None = None,
) -> EnvironmentSpec:
    """The environment ``scenario`` runs in (see the module doc)."""
    if scenario.backend is not Backend.LOCAL:
        raise UnsupportedScenario(
            f"scenario {scenario.name!r}: backend {scenario.backend.value!r} is not supported "
            "by the runner yet; use backend: local"
        )
    skrs = tuple(
        SkrSpec(
            name=skr.name,
            runtime_id=skr.runtime_id,
            skr_domain=skr.skr_domain,
            certificate=skr.certificate.to_override(),
            delivery_mode=skr.delivery_mode,
        )
        for skr in scenario.clusters.skrs
    )
    requeue = scenario.settings.requeue
    return EnvironmentSpec(
        skrs=skrs,
        watchers=tuple(w.to_dict() for w in scenario.watchers),
        listeners=tuple(
            ListenerSpec(component=listener.component, service=listener.service.key)
            for listener in scenario.listeners
        ),
        pin_san=scenario.settings.san_pinning,
        intervals=RequeueIntervals(
            success=requeue.success,
            busy=requeue.busy,
            error=requeue.error,
            warning=requeue.warning,
        ),
        webhook_env=dict(webhook_env or {}),
        log_dir=log_dir,
    )
