"""``requires``: what a scenario or step needs of our webhook; against a bring-your-own
webhook it is skipped with the reason, derived needs included."""

from __future__ import annotations

import functools
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from runner_fake import FakeSession, opener

from harness.cli import main
from harness.clusters.selection import BackendChoice, BackendOverride
from harness.report import ReportBuilder, Status
from harness.runner import RunOptions, plan_scenario, run_scenario
from harness.runner.plan import backend_refusal, step_skip_reason
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
NO_EVENT = (
    "{expect: {within: 10ms, events: [{manager: lifecycle-manager, cluster: skr-a, "
    "count: {exactly: 0}}]}}"
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
    assert backend_refusal(scenario, BackendChoice()) is None  # ours: runs
    reason = backend_refusal(scenario, BYO) or ""
    assert "needs our webhook's spool" in reason and "'upstream-webhook --flag'" in reason


def test_a_chosen_delivery_mode_is_a_derived_need() -> None:
    scenario = loads_scenario(
        "name: req\nclusters: {skrs: [{name: skr-a, deliveryMode: sync}]}\n"
        "steps: [{name: a, try: [{wait: 1ms}]}]\n"
    )
    assert "settings (sets deliveryMode of skr-a" in (backend_refusal(scenario, BYO) or "")


def test_a_step_reading_our_metrics_needs_them_and_upstreams_do_not() -> None:
    scenario = loads_scenario(
        HEAD + f"steps: [{{name: ours, try: [{OURS_METRIC}]}}, "
        f"{{name: upstreams, try: [{UPSTREAM_METRIC}]}}, "
        "{name: declared, requires: {webhook: [async-delivery]}, try: [{wait: 1ms}]}]\n"
    )
    ours, upstreams, declared = scenario.steps
    reason = step_skip_reason(ours, BYO)
    assert reason is not None and "metrics (reads watcher_delivery_retries_total" in reason
    assert step_skip_reason(upstreams, BYO) is None
    assert step_skip_reason(ours, BackendChoice()) is None  # our webhook has everything
    assert "async-delivery" in (step_skip_reason(declared, BYO) or "")
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
        f"{{name: plain, try: [{{wait: 1ms}}, {NO_EVENT}]}}]\n"
    )
    monkeypatch.setenv("WATCHER_HARNESS_WEBHOOK_COMMAND", "my-webhook")
    report = await run_scenario(
        plan_scenario(scenario, BackendOverride()),
        ReportBuilder("t").scenario("req", "req.yaml"),
        RunOptions(open_session=opener(FakeSession())),
    )
    steps = {s.name: s for s in report.steps}
    assert steps["ours"].status is Status.SKIPPED
    assert "needs our webhook's metrics" in (steps["ours"].error or "")
    assert steps["plain"].status is Status.PASSED
    assert report.status is Status.PASSED


ALL_SKIPPED = (
    "name: needs-ours\nclusters: {skrs: [{name: skr-a}]}\nsteps:\n"
    "  - {name: setup, try: [{wait: 1ms}]}\n"
    f"  - {{name: burst, try: [{{wait: 1ms}}, {OURS_METRIC}]}}\n"
    f"  - {{name: drain, try: [{OURS_METRIC}]}}\n"
    "  - {name: spool, requires: {webhook: [spool]}, try: [{wait: 1ms}, "
    "{collect: {cluster: skr-a, resource: configmaps, namespace: default}}]}\n"
    "  - {name: notes, try: [{collect: {cluster: skr-a, resource: configmaps, "
    "namespace: default}}]}\n"
)


async def test_a_scenario_whose_checks_were_all_skipped_is_skipped_not_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Against another webhook every checking step is skipped: the rest ran (a collect entry
    too), nothing was checked, so the scenario is skipped with the steps' reasons."""
    monkeypatch.setenv("WATCHER_HARNESS_WEBHOOK_COMMAND", "my-webhook")
    session = FakeSession()
    report = await run_scenario(
        plan_scenario(loads_scenario(ALL_SKIPPED), BackendOverride()),
        ReportBuilder("t").scenario("needs-ours", "needs-ours.yaml"),
        RunOptions(open_session=opener(session)),
    )
    assert report.status is Status.SKIPPED and report.ok
    assert [(s.name, s.status) for s in report.steps] == [
        ("setup", Status.PASSED),
        ("burst", Status.SKIPPED),
        ("drain", Status.SKIPPED),
        ("spool", Status.SKIPPED),
        ("notes", Status.PASSED),
    ]
    assert [e.kind for e in report.expectations] == ["collect"]  # ran, checks nothing
    reason = report.error or ""
    assert reason.startswith("checked nothing; skipped steps burst, drain: needs our webhook's ")
    assert "metrics (reads watcher_delivery_retries_total" in reason
    assert "; step spool: needs our webhook's spool" in reason
    assert "'my-webhook'" in reason
    with_ours = await run_scenario(  # against our webhook the same file checks something
        plan_scenario(loads_scenario(ALL_SKIPPED), BackendOverride(webhook_command="")),
        ReportBuilder("t").scenario("needs-ours", "needs-ours.yaml"),
        RunOptions(open_session=opener(FakeSession())),
    )
    assert with_ours.status is Status.FAILED  # the fake session has no such metric
    assert len([e for e in with_ours.expectations if e.kind != "collect"]) == 1


def test_the_cli_reports_a_scenario_that_checked_nothing_as_skipped_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``watcher-harness run --webhook-command``: the table, report.json, JUnit and the HTML
    report say skipped with the reason, and the exit status is 0 as for any skip."""
    import harness.runner.scenario as runner_scenario

    monkeypatch.setattr(
        runner_scenario,
        "RunOptions",
        functools.partial(runner_scenario.RunOptions, open_session=opener(FakeSession())),
    )
    monkeypatch.setenv("COLUMNS", "400")  # the table's reason column unwrapped
    (tmp_path / "needs-ours.yaml").write_text(ALL_SKIPPED)
    junit, reports = tmp_path / "junit.xml", tmp_path / "reports"
    code = main(
        ["run", str(tmp_path / "needs-ours.yaml"), "--webhook-command", "my-webhook",
         "--junit", str(junit), "--report-dir", str(reports)]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    row = next(line for line in out.splitlines() if "needs-ours" in line and "skipped" in line)
    assert "1/1" in row and "checked nothing; skipped steps burst, drain" in row
    (scenario,) = json.loads((reports / "report.json").read_text())["scenarios"]
    assert scenario["status"] == "skipped"
    assert scenario["error"].startswith("checked nothing; skipped steps burst, drain")
    case = ET.parse(junit).getroot().find(".//testcase[@name='needs-ours/skipped']")
    assert case is not None
    skipped = case.find("skipped")
    assert skipped is not None
    assert (skipped.get("message") or "").startswith("checked nothing; skipped steps burst")
    page = (reports / "index.html").read_text()
    assert '<span class="badge skipped">skipped</span>' in page
    assert "<b>Skipped:</b> checked nothing; skipped steps burst, drain" in page
