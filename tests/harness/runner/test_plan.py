"""``plan_scenario``: a scenario's backend, whether it can run there, its environment and
its skipped steps, decided once; ``missing_tools``: what the machine lacks, asked apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.clusters.kind import INSTALL_KIND
from harness.clusters.selection import BackendChoice, BackendOverride
from harness.runner.plan import missing_tools, plan_scenario
from harness.scenario import loads_scenario

PLAIN = loads_scenario(
    "name: plain\nclusters: {skrs: [{name: skr-a}]}\nsteps: [{name: a, try: [{wait: 10ms}]}]\n"
)
STOPS = loads_scenario(
    "name: stops\nclusters: {skrs: [{name: skr-a}]}\n"
    "steps: [{name: a, try: [{fault: {target: apiserver/skr-a, action: stop}}]}]\n"
)
KUBECONFIG = BackendOverride(name="kubeconfig", kubeconfig="/k")


def test_a_runnable_plan_has_its_backend_environment_and_steps() -> None:
    plan = plan_scenario(PLAIN, KUBECONFIG, env={})
    assert plan.skip_reason is None and plan.error is None
    assert plan.spec is not None and plan.backend is plan.spec.backend
    assert plan.spec.backend.kubeconfigs == (Path("/k"),)
    assert [s.name for s in plan.spec.skrs] == ["skr-a"]
    assert [(p.step.name, p.skip_reason) for p in plan.steps] == [("a", None)]


def test_the_files_backend_is_kept_and_an_override_wins() -> None:
    scenario = loads_scenario(
        "name: k\nbackend: kind\nclusters: {skrs: [{name: skr-a}]}\n"
        "steps: [{name: s, try: [{wait: 1}]}]\n"
    )
    assert plan_scenario(scenario, env={}).backend == BackendChoice(name="kind")
    assert plan_scenario(scenario, BackendOverride(name="local"), env={}).backend == (
        BackendChoice(name="local")
    )
    webhook_env = {"WATCHER_RETRY_MAX_SECONDS": "1"}
    plan = plan_scenario(scenario, env={}, webhook_env=webhook_env)
    assert plan.spec is not None and plan.spec.webhook_env == webhook_env


def test_an_invalid_choice_is_an_error() -> None:
    plan = plan_scenario(PLAIN, env={"WATCHER_HARNESS_BACKEND": "minikube"})
    assert plan.spec is None and plan.backend is None and plan.skip_reason is None
    assert plan.error is not None and "unknown cluster backend 'minikube'" in plan.error


@pytest.mark.parametrize("name", ["kubeconfig", "kind"])
def test_what_the_backend_cannot_do_is_a_skip_with_the_reason(name: str) -> None:
    assert plan_scenario(STOPS, env={}).backend == BackendChoice(name="local")
    plan = plan_scenario(STOPS, BackendOverride(name=name, kubeconfig="/k"), env={})
    assert plan.spec is None and plan.error is None and plan.steps == ()
    assert plan.skip_reason is not None
    assert plan.skip_reason.startswith("scenario 'stops': ")
    assert f"the {name} backend does not own the clusters' API server processes" in (
        plan.skip_reason
    )
    assert "apiserver/skr-a" in plan.skip_reason


def test_steps_needing_what_the_webhook_under_test_lacks_are_planned_skipped() -> None:
    scenario = loads_scenario(
        "name: s\nclusters: {skrs: [{name: skr-a}]}\nsteps:\n"
        "  - {name: plain, try: [{wait: 1ms}]}\n"
        "  - {name: spool, requires: {webhook: [spool]}, try: [{wait: 1ms}]}\n"
    )
    plan = plan_scenario(scenario, BackendOverride(webhook_command="my-webhook"), env={})
    plain, spool = plan.steps
    assert plain.skip_reason is None
    assert "needs our webhook's spool" in (spool.skip_reason or "")
    assert "'my-webhook'" in (spool.skip_reason or "")


async def test_missing_tools_are_asked_of_runnable_plans_once_per_backend() -> None:
    asked: list[str] = []

    async def no_kind(choice: BackendChoice) -> str | None:
        asked.append(choice.name)
        return INSTALL_KIND if choice.name == "kind" else None

    kind = BackendOverride(name="kind")
    plans = [plan_scenario(s, kind, env={}) for s in (PLAIN, PLAIN, STOPS)]
    # what the backend cannot do comes first: kind owns no API server processes either
    assert await missing_tools(plans, no_kind) == [INSTALL_KIND, INSTALL_KIND, None]
    assert asked == ["kind"]
    assert await missing_tools([plan_scenario(PLAIN, env={})], no_kind) == [None]
