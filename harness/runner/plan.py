"""One scenario's plan: everything about its run decided once, before anything starts.

Pure: the scenario, the command line's override and the ``WATCHER_HARNESS_*`` variables
in, a :class:`ScenarioPlan` out. Every entry point (``watcher-harness run``, the pytest
plugin, ``up``) plans a scenario once and hands the plan down;
:func:`harness.runner.scenario.run_scenario` carries it out and decides nothing again. A
plan holds the backend (command line over ``WATCHER_HARNESS_*`` over the file: a wrong
choice is the user's to fix, an :attr:`~ScenarioPlan.error`); whether that backend can
run the scenario at all (:func:`backend_refusal`; if not, nothing is wrong, the scenario
does not apply: a :attr:`~ScenarioPlan.skip_reason`); the environment to bring up
(:func:`harness.runner.spec.environment_spec`); and why a step is skipped
(:func:`step_skip_reason`: what it needs of the webhook or KLM under test). Whether the
backend's tools are on this machine is I/O, asked apart of runnable plans
(:func:`missing_tools`: kind needs its CLI and a Docker engine).
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from harness.clusters.backends import in_cluster_reason, unsupported_reason
from harness.clusters.selection import (
    BackendChoice,
    BackendOverride,
    BackendSelectionError,
    choose_backend,
)
from harness.environment.spec import EnvironmentSpec
from harness.runner.spec import environment_spec
from harness.scenario import BreakFault, FaultOp, ProcessFault, RotateFault, Scenario
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


@dataclass(frozen=True)
class PlannedStep:
    """A step, and why it is skipped (None: it runs)."""

    step: Step
    skip_reason: str | None = None


@dataclass(frozen=True)
class ScenarioPlan:
    """What running ``scenario`` means. Runnable when it has a ``spec`` (and a
    :class:`PlannedStep` per step); otherwise ``skip_reason`` (the backend cannot run it)
    or ``error`` (the backend choice itself is wrong) says why not."""

    scenario: Scenario
    spec: EnvironmentSpec | None = None
    steps: tuple[PlannedStep, ...] = ()
    skip_reason: str | None = None
    error: str | None = None

    @property
    def backend(self) -> BackendChoice | None:
        """The backend a runnable plan brings its clusters up on (None: not runnable)."""
        return self.spec.backend if self.spec is not None else None


def plan_scenario(
    scenario: Scenario,
    override: BackendOverride | None = None,
    *,
    env: Mapping[str, str] | None = None,
    webhook_env: Mapping[str, str] | None = None,
) -> ScenarioPlan:
    """The plan of ``scenario`` (see the module doc). ``env``: the ``WATCHER_HARNESS_*``
    variables (default: the process's); ``webhook_env``: ``WATCHER_*`` knobs for every
    SKR webhook (:attr:`~harness.environment.EnvironmentSpec.webhook_env`)."""
    try:
        choice = choose_backend(scenario.backend.value, override=override, env=env)
    except BackendSelectionError as exc:
        return ScenarioPlan(scenario, error=str(exc))
    refusal = backend_refusal(scenario, choice)
    if refusal is not None:
        return ScenarioPlan(scenario, skip_reason=f"scenario {scenario.name!r}: {refusal}")
    return ScenarioPlan(
        scenario,
        environment_spec(scenario, choice, webhook_env=webhook_env),
        tuple(PlannedStep(step, step_skip_reason(step, choice)) for step in scenario.steps),
    )


def backend_refusal(scenario: Scenario, choice: BackendChoice) -> str | None:
    """Why ``choice`` cannot run ``scenario`` at all (None: it can): the faults it injects,
    its SKRs' delivery modes, or what it needs of the webhook or KLM under test."""
    operations = [op for step in scenario.steps for op in step.operations()]
    faults = [op.fault for op in operations if isinstance(op, FaultOp)]
    reason = unsupported_reason(
        choice, (f.target for f in faults if isinstance(f, ProcessFault))
    ) or in_cluster_reason(
        choice,
        rotates=any(isinstance(f, RotateFault | BreakFault) for f in faults),
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
            changes_watchers=any(isinstance(op, WatcherOp) for op in operations),
        )
        reason = missing_klm_features(
            needs, scenario.requires.klm, choice.klm_features, shlex.join(choice.klm_command)
        )
    return reason


def step_skip_reason(step: Step, choice: BackendChoice) -> str | None:
    """Why ``step`` cannot run against the webhook or the KLM of ``choice`` (None: it can;
    the harness's own webhook and KLM have everything)."""
    reason = None
    if choice.webhook_command:
        reason = missing_features(
            derived_from_operations(step.operations()),
            step.requires.webhook,
            shlex.join(choice.webhook_command),
        )
    if reason is None and choice.klm_command:
        reason = missing_klm_features(
            derived_klm_from_operations(step.operations()),
            step.requires.klm,
            choice.klm_features,
            shlex.join(choice.klm_command),
        )
    return reason


ToolCheck = Callable[[BackendChoice], Awaitable[str | None]]
"""What is missing for a backend on this machine, as one line (None: nothing)."""


async def backend_tools(choice: BackendChoice) -> str | None:
    """The default :data:`ToolCheck`: kind needs its CLI and a Docker engine; the other
    backends need nothing checked up front."""
    if choice.name != "kind":
        return None
    from harness.clusters.kind import KindUnavailable, SubprocessRunner, preflight

    try:
        await preflight(SubprocessRunner())
    except KindUnavailable as exc:
        return str(exc)
    return None


async def missing_tools(
    plans: Sequence[ScenarioPlan], tools: ToolCheck = backend_tools
) -> list[str | None]:
    """Per plan, what its backend lacks here (None: nothing, or the plan is not runnable);
    each backend is asked once."""
    seen: dict[str, str | None] = {}
    out: list[str | None] = []
    for plan in plans:
        choice = plan.backend
        if choice is not None and choice.name not in seen:
            seen[choice.name] = await tools(choice)
        out.append(seen[choice.name] if choice is not None else None)
    return out


__all__ = [
    "PlannedStep",
    "ScenarioPlan",
    "backend_refusal",
    "missing_tools",
    "plan_scenario",
    "step_skip_reason",
]
