"""``requires``: what a scenario or step needs of our webhook; against a bring-your-own
webhook it is skipped with the reason, derived needs included."""

from __future__ import annotations

import pytest
from runner_fake import FakeSession, opener

from harness.clusters.selection import BackendChoice, BackendOverride
from harness.report import ReportBuilder, Status
from harness.runner import RunOptions, run_scenario
from harness.runner.errors import BackendUnsupported
from harness.runner.spec import scenario_backend, step_skip_reason
from harness.scenario import InvalidScenario, loads_scenario
from harness.scenario.requirements import (
    derived_from_operations,
    missing_features,
    upstream_webhook_metric,
)

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

HEAD = "name: req\nclusters: {skrs: [{name: skr-a}]}\n"
COMMAND = ("upstream-webhook", "--flag")
BYO = BackendChoice(webhook_command=COMMAND)
OURS_METRIC = (
    "{expect: {metrics: [{target: webhook/skr-a, name: watcher_delivery_retries_total, "
    "op: '>=', value: 1}]}}"
)
UPSTREAM_METRIC = (
    "{expect: {metrics: [{target: webhook/skr-a, name: watcher_failed_kcp_total, "
    "labels: {error_reason: failed-request}, op: '==', value: 0}]}}"
)


def test_upstreams_metric_names_are_known() -> None:
    assert upstream_webhook_metric("watcher_admission_request_total")
    assert upstream_webhook_metric("process_resident_memory_bytes")
    assert not upstream_webhook_metric("watcher_delivery_retries_total")


def test_a_declared_scenario_need_skips_it_against_another_webhook() -> None:
    scenario = loads_scenario(
        HEAD + "requires: {webhook: [spool]}\nsteps: [{name: a, try: [{wait: 1ms}]}]\n"
    )
    assert scenario_backend(scenario, BackendChoice()) == BackendChoice()  # ours: runs
    with pytest.raises(BackendUnsupported) as caught:
        scenario_backend(scenario, BYO)
    reason = str(caught.value)
    assert "needs our webhook's spool" in reason and "'upstream-webhook --flag'" in reason


def test_a_chosen_delivery_mode_is_a_derived_need() -> None:
    scenario = loads_scenario(
        "name: req\nclusters: {skrs: [{name: skr-a, deliveryMode: sync}]}\n"
        "steps: [{name: a, try: [{wait: 1ms}]}]\n"
    )
    with pytest.raises(BackendUnsupported, match=r"settings \(sets deliveryMode of skr-a"):
        scenario_backend(scenario, BYO)


def test_a_step_reading_our_metrics_needs_them_and_upstreams_do_not() -> None:
    scenario = loads_scenario(
        HEAD + f"steps: [{{name: ours, try: [{OURS_METRIC}]}}, "
        f"{{name: upstreams, try: [{UPSTREAM_METRIC}]}}, "
        "{name: declared, requires: {webhook: [async-delivery]}, try: [{wait: 1ms}]}]\n"
    )
    ours, upstreams, declared = scenario.steps
    reason = step_skip_reason(ours, COMMAND)
    assert reason is not None and "metrics (reads watcher_delivery_retries_total" in reason
    assert step_skip_reason(upstreams, COMMAND) is None
    assert step_skip_reason(ours, ()) is None  # our webhook has everything
    assert "async-delivery" in (step_skip_reason(declared, COMMAND) or "")
    assert derived_from_operations(upstreams.operations()) == {}


def test_an_unknown_feature_is_a_located_error() -> None:
    with pytest.raises(InvalidScenario) as caught:
        loads_scenario(
            HEAD + "requires: {webhook: [teleport]}\nsteps: [{name: a, try: [{wait: 1ms}]}]\n"
        )
    assert "requires" in str(caught.value) and "async-delivery" in str(caught.value)


def test_nothing_needed_is_no_reason() -> None:
    assert missing_features({}, (), "x") is None


async def test_skipped_steps_are_reported_and_the_rest_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = loads_scenario(
        HEAD + f"steps: [{{name: ours, try: [{OURS_METRIC}]}}, "
        "{name: plain, try: [{wait: 1ms}]}]\n"
    )
    monkeypatch.setenv("WATCHER_HARNESS_WEBHOOK_COMMAND", "my-webhook")
    report = await run_scenario(
        scenario,
        ReportBuilder("t").scenario("req", "req.yaml"),
        RunOptions(open_session=opener(FakeSession()), backend=BackendOverride()),
    )
    steps = {s.name: s for s in report.steps}
    assert steps["ours"].status is Status.SKIPPED
    assert "needs our webhook's metrics" in (steps["ours"].error or "")
    assert steps["plain"].status is Status.PASSED
    assert report.status is Status.PASSED
