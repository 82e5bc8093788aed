"""Running one scenario's plan: environment up, Kymas, steps in order, observations into
the report, environment down.

Everything that could be decided beforehand was, in the plan
(:func:`harness.runner.plan.plan_scenario`): this only carries it out. A plan that is not
runnable is reported as it says (skipped, or an error); a step the plan skips is reported
skipped with its reason.

The scenario's ``timeout`` bounds its steps (the environment's start and stop have
deadlines of their own). A failing step ends the scenario: later steps are reported as
skipped. Background churns still running at the end are cancelled. Before the environment
goes, the report gets the timeline of received events and reconciles and a metrics
snapshot; after it is gone, the records of every process it ran (exit codes, log paths).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from harness.aio import stop_tasks
from harness.environment import EnvironmentSpec
from harness.kcp.lifecycle_manager.kyma.skr_access import kubeconfig_secret
from harness.report.builder import ScenarioBuilder
from harness.report.model import ProcessRecordLike, ScenarioReport, Status, TimelineKind
from harness.runner.context import RunContext
from harness.runner.object_watches import recording_objects
from harness.runner.plan import PlannedStep, ScenarioPlan
from harness.runner.session import LiveSession, Session
from harness.runner.steps import OPERATION_ERRORS, run_step
from harness.scenario import KCP, ResourceRef, Scenario, default_kymas
from harness.scenario.values import format_duration
from watcher.domain import RUNTIME_ID_LABEL

OpenSession = Callable[[EnvironmentSpec], AbstractAsyncContextManager[Session]]
KYMA_RESOURCE = ResourceRef(group="operator.kyma-project.io", version="v1beta2", resource="kymas")


@asynccontextmanager
async def live_session(spec: EnvironmentSpec) -> AsyncIterator[Session]:
    """A real environment: the harness's own (:func:`harness.environment
    .watcher_environment`), or one around a KLM process (``--klm-command``:
    :class:`harness.runner.klm_session.KlmSession`)."""
    if spec.backend.klm_command:
        from harness.environment.any_klm import klm_environment
        from harness.runner.klm_session import KlmSession

        async with klm_environment(spec) as klm_env:
            yield KlmSession(klm_env)
        return
    from harness.environment import watcher_environment

    async with watcher_environment(spec) as env:
        yield LiveSession(env)


@dataclass(frozen=True)
class RunOptions:
    """``log_dir``: process logs go to ``log_dir/<scenario>`` (kept for the report)."""

    log_dir: Path | None = None
    open_session: OpenSession = live_session
    run_id: str = ""


async def setup_kymas(session: Session, scenario: Scenario) -> None:
    """Given ``kymas``: exactly those (the environment created the defaults). A KCP Kyma
    whose runtime id names one of the scenario's SKRs gets that SKR's access Secret first
    (labelled with the Kyma's name, whatever it is called), as provisioning writes it."""
    if scenario.kymas is None:
        return
    wanted = {(k.cluster, k.key) for k in scenario.kymas}
    for kyma in default_kymas(scenario.clusters.skrs):
        if (kyma.cluster, kyma.key) not in wanted:
            await session.delete(kyma.cluster, KYMA_RESOURCE, kyma.effective_namespace, kyma.name)
    skr_of = {skr.runtime_id: skr.name for skr in scenario.clusters.skrs}
    for kyma in scenario.kymas:
        skr = skr_of.get(kyma.labels.get(RUNTIME_ID_LABEL, "")) if kyma.cluster == KCP else None
        if skr is not None:
            kubeconfig = session.kubeconfig(skr).read_text(encoding="utf-8")
            await session.apply(KCP, kubeconfig_secret(kyma.name, kubeconfig))
        await session.apply(kyma.cluster, kyma.to_dict())


async def run_steps(ctx: RunContext, steps: Sequence[PlannedStep]) -> None:
    for index, planned in enumerate(steps):
        if planned.skip_reason is not None:
            ctx.report.step(planned.step.name, Status.SKIPPED, 0.0, error=planned.skip_reason)
            continue
        if not await run_step(ctx, planned.step):
            for later in steps[index + 1 :]:
                ctx.report.step(
                    later.step.name, Status.SKIPPED, 0.0, error="an earlier step failed"
                )
            return


async def observe(ctx: RunContext, session: Session) -> None:
    """Received events, reconciles and a metrics snapshot into the report."""
    for e in session.events:
        obj = f"{e.namespace}/{e.kind}/{e.name}" if e.namespace else f"{e.kind}/{e.name}"
        ctx.report.event(TimelineKind.EVENT, e.manager, obj, e.runtime_id, at=e.received_at)
    for r in session.reconciles(None, None, ctx.report.started_at):
        triggers = ",".join(sorted(r.triggers))
        ctx.report.event(TimelineKind.RECONCILE, KCP, r.kyma, f"{triggers}: {r.outcome}", at=r.at)
    ctx.report.set_metrics(await session.metrics_snapshot())


async def run_scenario(
    plan: ScenarioPlan, report: ScenarioBuilder, options: RunOptions = RunOptions()
) -> ScenarioReport:
    """Carry out ``plan``, filling ``report``; the finished scenario report."""
    if plan.skip_reason is not None:
        return report.finish(Status.SKIPPED, error=plan.skip_reason)
    if plan.spec is None:
        return report.finish(error=plan.error)
    scenario = plan.scenario
    log_dir = options.log_dir / scenario.name if options.log_dir else None
    spec = replace(plan.spec, log_dir=log_dir)
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
    error: str | None = None
    processes: list[ProcessRecordLike] = []
    base_dir = Path(scenario.source).parent if scenario.source else Path(".")
    try:
        async with options.open_session(spec) as session:
            ctx = RunContext(
                scenario,
                session,
                report,
                base_dir=base_dir,
                clock=time.time,
                log_dir=log_dir,
                run_id=options.run_id or secrets.token_hex(4),
            )
            try:
                async with asyncio.timeout(scenario.timeout) as scope:
                    await setup_kymas(session, scenario)
                    async with recording_objects(ctx):
                        await run_steps(ctx, plan.steps)
            except TimeoutError:
                if not scope.expired():
                    raise
                error = f"scenario timed out after {format_duration(scenario.timeout)}"
            finally:
                await stop_tasks([c.task for c in ctx.churns if c.task is not None])
                processes = session.processes()
                await observe(ctx, session)
    except OPERATION_ERRORS as exc:
        error = f"{type(exc).__name__}: {exc}"
    for record in processes:
        report.process(record)
    if error is not None:
        report.finish(Status.ERROR if not report.steps else Status.FAILED, error=error)
        assert report.report is not None
        return report.report
    return report.finish()
