"""Retried scenarios in the report: the builder keeps earlier attempts, passed after a
failure is flaky, the JSON form round-trips (and reads reports written before attempts
existed), and the JUnit and HTML writers show the attempts."""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from report_kit import timeline_entries

from harness.report import (
    AttemptReport,
    ExpectationResult,
    MachineInfo,
    ProcessInfo,
    ReportBuilder,
    RunReport,
    ScenarioBuilder,
    ScenarioReport,
    Status,
    StepReport,
    TimelineKind,
)
from harness.report.html import render_html
from harness.report.junit import render_junit
from harness.runner.summary import failure_lines


def _builder() -> ReportBuilder:
    ticks = itertools.count()
    return ReportBuilder(
        "run-1",
        machine=MachineInfo(cores=2, python="3.11.7"),
        clock=lambda: 1_760_000_000.0 + next(ticks),
    )


def _expect(s: ScenarioBuilder, passed: bool, actual: str = "0") -> None:
    s.expectation(
        step="check",
        kind="events",
        description="klm gets <one> event",
        expected="exactly 1",
        actual="1" if passed else actual,
        passed=passed,
    )


def _flaky_report() -> RunReport:
    builder = _builder()
    first = builder.scenario("spec", "spec.yaml")
    first.step("check", Status.FAILED, 2.0, error="expectation failed")
    _expect(first, passed=False)
    first.process(ProcessInfo("gateway", 7, ("envoy",), 0, "logs/spec/gateway.log"))  # type: ignore[arg-type]
    first.finish()
    second = builder.retry(first)
    second.step("check", Status.PASSED, 1.0)
    _expect(second, passed=True)
    second.finish()
    return builder.build()


def test_passing_after_a_failed_attempt_is_flaky_and_ok() -> None:
    report = _flaky_report()
    (s,) = report.scenarios  # the retry took the first attempt's place
    assert s.status is Status.FLAKY and s.ok and report.ok
    assert s.retry == 1 and s.status_text == "flaky (passed on retry 1)"
    (a,) = s.attempts
    assert (a.number, a.status, a.error) == (1, Status.FAILED, None)
    assert [e.id for e in a.failed_expectations] == ["spec/check/1-events"]
    assert [st.name for st in a.failed_steps] == ["check"]
    assert a.processes[0].name == "gateway"
    assert s.total_duration == s.duration + a.duration
    assert report.count(Status.FLAKY) == 1


def test_failing_every_attempt_keeps_them_all_and_fails() -> None:
    builder = _builder()
    attempt = builder.scenario("spec", "spec.yaml")
    attempt.finish(error="etcd did not start")
    for _ in range(2):
        attempt = builder.retry(attempt)
        _expect(attempt, passed=False)
        attempt.finish()
    (s,) = builder.build().scenarios
    assert s.status is Status.FAILED and not s.ok
    assert [(a.number, a.status) for a in s.attempts] == [(1, Status.ERROR), (2, Status.FAILED)]
    assert s.status_text == "failed (3 attempts)"
    lines = failure_lines(s)
    assert lines[0] == "spec/check/1-events: expected exactly 1, got 0"
    assert "attempt 1/3 error (1.0 s):" in lines
    assert "  error: etcd did not start" in lines
    assert "attempt 2/3 failed (1.0 s):" in lines


def test_a_retry_needs_a_finished_attempt_of_this_report() -> None:
    builder = _builder()
    open_attempt = builder.scenario("spec", "spec.yaml")
    with pytest.raises(ValueError, match="finish an attempt"):
        builder.retry(open_attempt)
    with pytest.raises(ValueError, match="not in report"):
        builder.retry(ScenarioBuilder("other", "o.yaml", clock=lambda: 0.0))


def test_flaky_failure_lines_say_which_retry_passed_and_what_failed_before() -> None:
    (s,) = _flaky_report().scenarios
    assert failure_lines(s) == [
        "flaky: passed on retry 1",
        "attempt 1/2 failed (1.0 s):",
        "  step check (try): expectation failed",
        "  spec/check/1-events: expected exactly 1, got 0",
    ]


# -- JSON ------------------------------------------------------------------------------------

text = st.text(max_size=12)
durations = st.floats(min_value=0, max_value=1e6, allow_nan=False)
attempts = st.builds(
    AttemptReport,
    number=st.integers(1, 9),
    status=st.sampled_from([Status.FAILED, Status.ERROR]),
    started_at=durations,
    duration=durations,
    error=st.none() | text,
    failed_steps=st.lists(
        st.builds(StepReport, name=text, status=st.just(Status.FAILED), duration=durations),
        max_size=2,
    ).map(tuple),
    failed_expectations=st.lists(
        st.builds(
            ExpectationResult,
            id=text,
            kind=text,
            description=text,
            expected=text,
            actual=text,
            passed=st.just(False),
            details=text,
        ),
        max_size=2,
    ).map(tuple),
    timeline=st.lists(timeline_entries, max_size=2).map(tuple),
)


@settings(max_examples=40, deadline=None)
@given(st.lists(attempts, max_size=3), st.sampled_from(Status))
def test_attempts_round_trip_through_json(attempts: list[AttemptReport], status: Status) -> None:
    scenario = ScenarioReport("s", "s.yaml", status, 1.0, 2.0, attempts=tuple(attempts))
    report = RunReport("r", 1.0, 3.0, MachineInfo(cores=1, python="3.11"), (scenario,))
    assert RunReport.from_json(report.to_json()) == report


def test_a_report_written_before_attempts_existed_still_loads() -> None:
    old = _flaky_report().to_dict()
    for s in old["scenarios"]:
        del s["attempts"]
        s["status"] = "passed"
    loaded = RunReport.from_dict(json.loads(json.dumps(old)))
    assert loaded.scenarios[0].attempts == ()
    assert loaded.scenarios[0].status is Status.PASSED
    assert old["schema"] == 1


def test_a_flaky_report_round_trips() -> None:
    report = _flaky_report()
    again = RunReport.from_json(report.to_json())
    assert again == report
    assert again.scenarios[0].attempts[0].failed_expectations[0].actual == "0"


# -- writers ---------------------------------------------------------------------------------


def test_junit_attempt_without_failed_expectation_gets_its_own_flaky_testcase() -> None:
    builder = _builder()
    first = builder.scenario("spec", "spec.yaml")
    first.finish(error="etcd did not start\nfull log: /tmp/etcd.log")
    second = builder.retry(first)
    second.step("patch", Status.FAILED, 1.0, error="patch refused")
    second.finish()
    third = builder.retry(second)
    _expect(third, passed=True)
    third.finish()
    root = ET.fromstring(render_junit(builder.build()))
    suite = root.find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == ["spec/check/1-events", "spec/error", "spec/steps"]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "0", "0")
    assert suite.get("flakes") == "2"
    (error,) = cases["spec/error"].findall("flakyError")
    assert error.get("message") == "etcd did not start" and error.get("type") == "ScenarioError"
    assert "full log: /tmp/etcd.log" in (error.findtext("stackTrace") or "")
    (failure,) = cases["spec/steps"].findall("flakyFailure")
    assert failure.get("message") == "try patch: patch refused"
    assert (error.findtext("stackTrace") or "").startswith("attempt 1 of 3: error")
    assert "passed on retry 2" in (cases["spec/steps"].findtext("system-out") or "")
    assert cases["spec/check/1-events"].find("flakyFailure") is None


def test_html_shows_the_flaky_badge_and_the_attempts_escaped() -> None:
    builder = _builder()
    first = builder.scenario("spec", "spec.yaml")
    first.finish(error="<script>alert(1)</script>")
    second = builder.retry(first)
    _expect(second, True)
    second.finish()
    html = render_html(builder.build())
    assert '<span class="badge flaky">flaky</span>' in html
    assert '<section class="card flaky" id="scenario-0">' in html
    assert "Attempt 1 of 2" in html and "Flaky (1)" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "1 flaky" in html  # the run's counts


def test_an_earlier_attempt_keeps_its_timeline_and_the_html_shows_it() -> None:
    """A flake's story is in its timing (a restart that took 6 s, a reconcile that never
    came): the failed attempt's timeline stays, though the passing one replaces it."""
    builder = _builder()
    first = builder.scenario("spec", "spec.yaml")
    first.event(TimelineKind.FAULT, "certificates", "rotate-leaf", "leaves of <skr-a>")
    first.step("back-to-healthy", Status.FAILED, 4.0, error="expectation failed")
    first.finish()
    second = builder.retry(first)
    second.event(TimelineKind.RECONCILE, "kcp", "kcp-system/kyma-skr-a", "watcher-recovered")
    second.finish()
    report = builder.build()
    (s,) = report.scenarios
    (a,) = s.attempts
    assert [(t.kind, t.object) for t in a.timeline] == [(TimelineKind.FAULT, "rotate-leaf")]
    assert [t.object for t in s.timeline] == ["kcp-system/kyma-skr-a"]
    assert RunReport.from_json(report.to_json()) == report
    html = render_html(report)
    attempts_html = html.split("Earlier attempts", 1)[1].split("</details></details>", 1)[0]
    assert "Timeline (1 entries)" in attempts_html and "rotate-leaf" in attempts_html
    assert "leaves of &lt;skr-a&gt;" in attempts_html


def test_a_report_written_before_attempts_had_timelines_still_loads() -> None:
    old = _flaky_report().to_dict()
    for s in old["scenarios"]:
        for a in s["attempts"]:
            del a["timeline"]
    loaded = RunReport.from_dict(json.loads(json.dumps(old)))
    assert loaded.scenarios[0].attempts[0].timeline == ()
