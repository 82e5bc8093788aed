"""The report builder: stable expectation ids, derived status, timeline order."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report import (
    ProcessInfo,
    ReportBuilder,
    Status,
    TimelineKind,
    expectation_id,
)


def test_expectation_ids_are_stable_and_numbered_per_step() -> None:
    builder = ReportBuilder("r", clock=lambda: 0.0)
    s = builder.scenario("spec-watch", "f.yaml")

    def check(step: str, kind: str) -> str:
        return s.expectation(
            step=step, kind=kind, description="", expected="1", actual="1", passed=True
        ).id

    ids = [
        check("expect", "events"),
        check("expect", "metric"),
        check("later", "events"),
        check("expect", "events"),  # the same step name again continues the count
    ]
    assert ids == [
        "spec-watch/expect/1-events",
        "spec-watch/expect/2-metric",
        "spec-watch/later/1-events",
        "spec-watch/expect/3-events",
    ]
    assert ids[0] == expectation_id("spec-watch", "expect", 1, "events")


def test_status_is_derived_unless_given() -> None:
    ticks = iter(range(100))
    builder = ReportBuilder("r", clock=lambda: float(next(ticks)))
    ok = builder.scenario("ok", "ok.yaml")
    ok.step("a", Status.PASSED, 0.1)
    ok.expectation(step="a", kind="events", description="", expected="1", actual="1", passed=True)
    failed_check = builder.scenario("check", "c.yaml")
    failed_check.expectation(
        step="e", kind="events", description="", expected="1", actual="0", passed=False
    )
    failed_step = builder.scenario("step", "s.yaml")
    failed_step.step("a", Status.FAILED, 0.1, error="boom")
    errored = builder.scenario("setup", "x.yaml")
    skipped = builder.scenario("skip", "y.yaml")
    builder.scenario("unfinished", "z.yaml")
    assert ok.finish().status is Status.PASSED
    assert failed_check.finish().status is Status.FAILED
    assert failed_step.finish().status is Status.FAILED
    assert errored.finish(error="etcd did not start").status is Status.ERROR
    assert skipped.finish(Status.SKIPPED).status is Status.SKIPPED
    report = builder.build()
    assert [s.status for s in report.scenarios][-1] is Status.ERROR
    assert "did not finish" in (report.scenarios[-1].error or "")
    assert not report.ok
    assert report.count(Status.FAILED) == 2
    assert report.duration > 0


def test_a_scenario_that_checked_nothing_is_skipped_with_the_skipped_steps_reasons() -> None:
    builder = ReportBuilder("r", clock=lambda: 0.0)
    nothing = builder.scenario("nothing", "n.yaml")
    nothing.step("a", Status.PASSED, 0.1)
    report = nothing.finish()
    assert (report.status, report.error) == (Status.SKIPPED, "checked nothing")
    assert report.ok  # skipped is not a failure

    needs = builder.scenario("needs", "m.yaml")
    needs.step("setup", Status.PASSED, 0.1)
    needs.step("burst", Status.SKIPPED, 0.0, error="needs our webhook's metrics")
    needs.step("drain", Status.SKIPPED, 0.0, error="needs our webhook's metrics")
    needs.step("spool", Status.SKIPPED, 0.0, error="needs our webhook's spool")
    assert needs.finish().error == (
        "checked nothing; skipped steps burst, drain: needs our webhook's metrics; "
        "step spool: needs our webhook's spool"
    )

    # a collect entry is material for the report, not a check: still skipped
    collected = builder.scenario("collected", "c.yaml")
    collected.expectation(
        step="a", kind="collect", description="", expected="", actual="", passed=True
    )
    assert not collected.checked
    assert collected.finish().status is Status.SKIPPED

    # a failed step still fails the scenario, checked or not
    failed = builder.scenario("failed", "f.yaml")
    failed.step("a", Status.FAILED, 0.1, error="boom")
    assert failed.finish().status is Status.FAILED
    # an explicit status is kept as it is
    given = builder.scenario("given", "g.yaml")
    assert given.finish(Status.PASSED).status is Status.PASSED


def test_builder_sorts_timeline_and_copies_process_records() -> None:
    builder = ReportBuilder("r", clock=lambda: 10.0)
    s = builder.scenario("s", "s.yaml")
    s.event(TimelineKind.EVENT, "klm", "b", at=12.0)
    s.event(TimelineKind.MUTATION, "skr-a", "a", at=11.0)
    s.event(TimelineKind.STEP, "runner", "expect")  # stamped by the clock

    class Record:  # the shape of harness.clusters.process.ProcessRecord
        name = "etcd"
        pid = 7
        argv = ("etcd", "--data-dir", "x")
        exit_code = 0
        log_path = Path("/tmp/etcd.log")

    s.process(Record())
    s.latencies([1, 2.5])
    s.set_metrics({"m": 1.0})
    r = s.finish()
    assert [t.object for t in r.timeline] == ["expect", "a", "b"]
    assert r.processes == (
        ProcessInfo("etcd", 7, ("etcd", "--data-dir", "x"), 0, Path("/tmp/etcd.log")),
    )
    assert r.latencies_ms == (1.0, 2.5)
    with pytest.raises(ValueError, match="already"):
        builder.scenario("s", "other.yaml")
