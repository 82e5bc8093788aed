"""``requires: {klm: [...]}``: what a scenario or step needs of the Lifecycle Manager beyond
upstream's; against a KLM process that does not show it, it is skipped with the reason,
derived needs included."""

from __future__ import annotations

import pytest

from harness.clusters.selection import (
    BackendChoice,
    BackendOverride,
    BackendSelectionError,
    choose_backend,
)
from harness.runner.plan import backend_refusal, step_skip_reason
from harness.scenario import InvalidScenario, loads_scenario

HEAD = "name: req\nclusters: {skrs: [{name: skr-a}]}\n"
KLM = ("manager", "--oci-registry-host=x")
UPSTREAM = BackendChoice(klm_command=KLM)
OURS = BackendChoice(klm_command=KLM, klm_features=("reconcile-triggers", "reconcile-outcomes"))


def _showing(*features: str) -> BackendChoice:
    return BackendChoice(klm_command=KLM, klm_features=features)


def _steps(*operations: str) -> str:
    return (
        HEAD
        + "steps: ["
        + ", ".join(f"{{name: s{i}, try: [{op}]}}" for i, op in enumerate(operations))
        + "]\n"
    )


def test_a_declared_need_skips_the_scenario_unless_the_klm_shows_it() -> None:
    scenario = loads_scenario(
        HEAD + "requires: {klm: [san-pinning]}\nsteps: [{name: a, try: [{wait: 1ms}]}]\n"
    )
    assert backend_refusal(scenario, BackendChoice()) is None  # in process: runs
    reason = backend_refusal(scenario, UPSTREAM) or ""
    assert "san-pinning (a KLM that refuses an event" in reason
    assert "'manager --oci-registry-host=x'" in reason
    assert backend_refusal(scenario, _showing("san-pinning")) is None


@pytest.mark.parametrize(
    ("declaration", "feature"),
    [
        ("settings: {klm: {health: {interval: 2s, timeout: 1s}}}", "harness-klm"),
        ("settings: {klm: {certificates: {grace: 1s}}}", "harness-klm"),
        ("settings: {sanPinning: false}", "harness-klm"),
    ],
)
def test_what_only_the_harnesss_own_klm_has_is_a_derived_need(
    declaration: str, feature: str
) -> None:
    scenario = loads_scenario(HEAD + declaration + "\nsteps: [{name: a, try: [{wait: 1ms}]}]\n")
    assert feature in (backend_refusal(scenario, OURS) or "")


def test_reconcile_triggers_and_outcomes_are_needed_only_beyond_a_watch_event() -> None:
    scenario = loads_scenario(
        _steps(
            "{expect: {reconciles: [{kyma: kyma-skr-a, trigger: watch-event}]}}",
            "{expect: {reconciles: [{kyma: kyma-skr-a, trigger: requeue-timer}]}}",
            "{expect: {reconciles: [{kyma: kyma-skr-a, outcome: [success, busy]}]}}",
            "{expect: {reconciles: [{kyma: kyma-skr-a, outcome: error}]}}",
        )
    )
    watch, timer, outcome, error = scenario.steps
    assert step_skip_reason(watch, UPSTREAM) is None
    assert "reconcile-triggers" in (step_skip_reason(timer, UPSTREAM) or "")
    assert "reconcile-outcomes" in (step_skip_reason(outcome, UPSTREAM) or "")
    assert step_skip_reason(error, UPSTREAM) is None  # its log says when one failed
    assert step_skip_reason(timer, OURS) is None
    assert step_skip_reason(timer, BackendChoice()) is None  # the harness's own KLM: everything


def test_certificate_faults_webhook_stops_and_refusal_reasons_need_more() -> None:
    scenario = loads_scenario(
        _steps(
            "{fault: {rotate: ca}}",
            "{expect: {rejections: [{listener: lifecycle-manager, reason: san-mismatch}]}}",
            "{fault: {action: restart, target: listener/lifecycle-manager}}",
            "{fault: {action: stop, target: webhook/skr-a}}",
            "{fault: {action: kill, target: webhook/skr-a}}",
        )
    )
    rotate, rejections, restart, stop, kill = scenario.steps
    assert "harness-klm" in (step_skip_reason(rotate, OURS) or "")
    reason = step_skip_reason(rejections, _showing("san-pinning")) or ""
    assert "rejection-reasons" in reason and "san-pinning (" not in reason
    assert step_skip_reason(restart, UPSTREAM) is None
    assert "harness-klm (stops webhook/skr-a" in (step_skip_reason(stop, UPSTREAM) or "")
    assert step_skip_reason(kill, UPSTREAM) is None


def test_an_unknown_klm_feature_is_a_scenario_error() -> None:
    with pytest.raises(InvalidScenario, match="klm"):
        loads_scenario(
            HEAD + "requires: {klm: [telepathy]}\nsteps: [{name: a, try: [{wait: 1ms}]}]\n"
        )


def test_the_features_a_klm_shows_come_from_the_command_line_or_the_environment() -> None:
    env = {"WATCHER_HARNESS_KLM_COMMAND": "manager", "WATCHER_HARNESS_KLM_FEATURES": "modules, "}
    assert choose_backend(env=env).klm_features == ("modules",)
    flags = BackendOverride(klm_command="mine", klm_features="san-pinning")
    assert choose_backend(override=flags, env=env).klm_features == ("san-pinning",)
    typo = BackendOverride(klm_command="mine", klm_features="san-pining")
    with pytest.raises(BackendSelectionError, match="unknown san-pining; known: reconcile-"):
        choose_backend(override=typo, env=env)
