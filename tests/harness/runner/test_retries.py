"""``watcher-harness run --retries N`` against the fake session: a scenario failing on its
first attempt only is flaky with a retry (exit 0, JUnit ``flakyFailure``, HTML badge) and
failed without; retries exhausted report the last attempt and list the others."""

from __future__ import annotations

import functools
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from flaky_fake import FLAKY, METRIC, FlakyOpener

import harness.runner.scenario as scenario_module
from harness.cli import main
from harness.report import ReportBuilder, RunReport, Status
from harness.runner.plan import plan_scenario
from harness.runner.run import run_with_retries
from harness.runner.scenario import RunOptions
from harness.scenario import loads_scenario

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

SKIPPED_ON_KUBECONFIG = """name: stops
clusters: {skrs: [{name: skr-a}]}
steps: [{name: a, try: [{fault: {target: apiserver/skr-a, action: stop}}]}]
"""


@pytest.fixture
def opener(monkeypatch: pytest.MonkeyPatch) -> FlakyOpener:
    """``watcher-harness run`` opens fake sessions failing the first attempt."""
    flaky = FlakyOpener(failures=1)
    monkeypatch.setattr(
        scenario_module, "RunOptions", functools.partial(RunOptions, open_session=flaky)
    )
    for name in ("WATCHER_HARNESS_BACKEND", "WATCHER_HARNESS_WEBHOOK_MODE"):
        monkeypatch.delenv(name, raising=False)
    return flaky


def _run(tmp_path: Path, *args: str) -> int:
    path = tmp_path / "ready.yaml"
    path.write_text(FLAKY)
    return main(
        [
            "run",
            str(path),
            "--junit",
            str(tmp_path / "junit.xml"),
            "--report-dir",
            str(tmp_path / "report"),
            *args,
        ]
    )


def test_failing_once_with_a_retry_is_flaky_and_exits_0(
    tmp_path: Path, opener: FlakyOpener, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(tmp_path, "--retries", "1") == 0
    out = capsys.readouterr().out
    assert len(opener.sessions) == 2  # a fresh environment for the retry
    assert "flaky (passed on retry 1)" in out
    assert "sometimes-ready: flaky: passed on retry 1" in out
    assert "sometimes-ready: attempt 1/2 failed" in out
    assert "  sometimes-ready/check/1-metrics: expected watcher_ready == 1, got 0" in out

    report = RunReport.from_json((tmp_path / "report" / "report.json").read_text())
    (scenario,) = report.scenarios
    assert scenario.status is Status.FLAKY and scenario.ok and report.ok
    (attempt,) = scenario.attempts
    assert (attempt.number, attempt.status) == (1, Status.FAILED)
    assert [e.id for e in attempt.failed_expectations] == ["sometimes-ready/check/1-metrics"]
    assert all(e.passed for e in scenario.expectations)
    # the second attempt logs apart from the first
    assert (tmp_path / "report" / "logs" / "sometimes-ready").is_dir()
    assert (tmp_path / "report" / "logs" / "attempt-2" / "sometimes-ready").is_dir()

    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("failures"), suite.get("errors"), suite.get("flakes")) == ("0", "0", "1")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["status"] == "flaky" and props["attempts"] == "2"
    (case,) = suite.findall("testcase")
    assert case.get("name") == "sometimes-ready/check/1-metrics"
    assert case.find("failure") is None  # it passed in the end
    (flaky,) = case.findall("flakyFailure")
    assert flaky.get("type") == "metrics" and "expected" in (flaky.get("message") or "")
    trace = flaky.findtext("stackTrace") or ""
    assert trace.startswith("attempt 1 of 2: failed") and METRIC in trace
    assert "passed on retry 1" in (case.findtext("system-out") or "")

    html = (tmp_path / "report" / "index.html").read_text()
    assert '<span class="badge flaky">flaky</span>' in html
    assert "passed on retry 1" in html
    assert "Attempt 1 of 2" in html and "Flaky (1)" in html


def test_without_retries_the_same_scenario_fails(
    tmp_path: Path, opener: FlakyOpener, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(tmp_path) == 1
    assert len(opener.sessions) == 1
    report = RunReport.from_json((tmp_path / "report" / "report.json").read_text())
    assert [s.status for s in report.scenarios] == [Status.FAILED]
    assert report.scenarios[0].attempts == ()
    junit = (tmp_path / "junit.xml").read_text()
    assert "<failure" in junit and "flaky" not in junit and "rerun" not in junit
    assert "attempt" not in capsys.readouterr().out


def test_retries_exhausted_report_the_last_attempt_and_list_the_others(
    tmp_path: Path, opener: FlakyOpener, capsys: pytest.CaptureFixture[str]
) -> None:
    opener.failures = 5
    assert _run(tmp_path, "--retries", "2") == 1
    assert len(opener.sessions) == 3
    out = capsys.readouterr().out
    assert "failed (3 attempts)" in out
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    (scenario,) = report["scenarios"]
    assert scenario["status"] == "failed"
    assert [a["number"] for a in scenario["attempts"]] == [1, 2]
    root = ET.parse(tmp_path / "junit.xml").getroot()
    (case,) = root.iter("testcase")
    assert case.find("failure") is not None
    assert len(case.findall("rerunFailure")) == 2 and not case.findall("flakyFailure")


def test_retries_must_be_a_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _run(tmp_path, "--retries", "-1")
    assert exc.value.code == 2
    assert "is not a number of retries" in capsys.readouterr().err


async def test_a_skipped_scenario_is_not_retried(tmp_path: Path) -> None:
    from harness.clusters.selection import BackendOverride

    opener = FlakyOpener(failures=0)
    plan = plan_scenario(
        loads_scenario(SKIPPED_ON_KUBECONFIG), BackendOverride(name="kubeconfig", kubeconfig="/k")
    )
    builder = ReportBuilder("r")
    report = await run_with_retries(plan, builder, RunOptions(open_session=opener), retries=3)
    assert report.status is Status.SKIPPED and report.attempts == ()
    assert opener.sessions == []


MARKER_SCENARIO = """name: marker
clusters: {{skrs: [{{name: skr-a}}]}}
steps:
  - name: check
    try:
      - script: {{command: "test -e {marker} || {{ touch {marker}; exit 1; }}"}}
"""


@pytest.mark.parametrize(("retries", "code", "status"), [("1", 0, "flaky"), ("0", 1, "failed")])
def test_a_script_failing_only_first_is_flaky_with_a_retry_and_failed_without(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    retries: str,
    code: int,
    status: str,
) -> None:
    """The issue's own example: a ``script`` that checks a marker file (a real process)."""
    from runner_fake import FakeSession
    from runner_fake import opener as fake_opener

    monkeypatch.setattr(
        scenario_module,
        "RunOptions",
        functools.partial(RunOptions, open_session=fake_opener(FakeSession())),
    )
    for name in ("WATCHER_HARNESS_BACKEND", "WATCHER_HARNESS_WEBHOOK_MODE"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "marker.yaml"
    path.write_text(MARKER_SCENARIO.format(marker=tmp_path / "marker"))
    report_dir = tmp_path / "report"
    argv = ["run", str(path), "--retries", retries, "--report-dir", str(report_dir)]
    assert main(argv) == code
    report = RunReport.from_json((report_dir / "report.json").read_text())
    (scenario,) = report.scenarios
    assert scenario.status.value == status
    assert len(scenario.attempts) == (1 if status == "flaky" else 0)
