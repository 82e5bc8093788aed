"""JUnit XML: parses, one testcase per expectation with stable names, failures explained."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from report_kit import make_sample_report

from harness.report import MachineInfo, ReportBuilder, RunReport, Status
from harness.report.junit import render_junit
from harness.report.writer import read_log_tails


def _cases(root: ET.Element) -> dict[str, ET.Element]:
    return {case.get("name", ""): case for case in root.iter("testcase")}


def test_one_suite_per_scenario_and_one_case_per_expectation(sample_report: RunReport) -> None:
    root = ET.fromstring(render_junit(sample_report))
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["spec-watch", "kcp-outage", "foreign-ca"]
    assert [c.get("name") for c in suites["spec-watch"].iter("testcase")] == [
        "spec-watch/expect-events/1-events",
        "spec-watch/expect-events/2-latency",
    ]
    for case in suites["kcp-outage"].iter("testcase"):
        assert case.get("classname") == "scenario.kcp-outage"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("5", "1", "1")
    assert suites["spec-watch"].get("time") == f"{sample_report.scenarios[0].duration:.3f}"
    assert float(_cases(root)["spec-watch/expect-events/1-events"].get("time", "")) == 1.2


def test_names_are_stable_across_runs(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = ET.fromstring(render_junit(make_sample_report(tmp_path / "a")))
    second = ET.fromstring(render_junit(make_sample_report(tmp_path / "b", timeline_entries=5)))
    names = [(c.get("classname"), c.get("name")) for c in first.iter("testcase")]
    assert names == [(c.get("classname"), c.get("name")) for c in second.iter("testcase")]
    assert len(set(names)) == len(names)


def test_failure_carries_expected_and_actual(sample_report: RunReport) -> None:
    case = _cases(ET.fromstring(render_junit(sample_report)))[
        "kcp-outage/expect-nothing-lost/1-events"
    ]
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == (
        "expected exactly 12, actual 10 (missing: default/ConfigMap/cm-3, default/ConfigMap/cm-7)"
    )
    assert failure.get("type") == "events"
    assert "every mutation reaches klm after recovery" in (failure.text or "")


def test_setup_error_is_an_error_testcase(sample_report: RunReport) -> None:
    case = _cases(ET.fromstring(render_junit(sample_report)))["foreign-ca/error"]
    error = case.find("error")
    assert error is not None
    assert error.get("message", "").startswith("etcd not ready after 20 s")
    assert case.find("failure") is None


def test_failed_suites_carry_log_tails(sample_report: RunReport) -> None:
    tails = read_log_tails(sample_report, lines=3)
    root = ET.fromstring(render_junit(sample_report, log_tails=tails))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    out = suites["kcp-outage"].find("system-out")
    assert out is not None and out.text is not None
    assert "===== gateway (pid 4242, exit -15)" in out.text
    assert "line 299: upstream ok" in out.text and "line 200:" not in out.text
    assert "\x1b" not in out.text  # ANSI escape replaced: XML 1.0 cannot carry it
    assert "(log not available)" in out.text  # the listener's log does not exist
    first_failure = _cases(root)["kcp-outage/expect-nothing-lost/1-events"]
    assert first_failure.find("system-out") is not None
    assert suites["spec-watch"].find("system-out") is None


def test_failed_step_without_failed_expectation_is_reported() -> None:
    builder = ReportBuilder("r", machine=MachineInfo(cores=1, python="3"), clock=lambda: 0.0)
    s = builder.scenario("s", "s.yaml")
    s.step("apply", Status.FAILED, 2.0, error="cluster skr-b not found")
    s.finish()
    skipped = builder.scenario("later", "l.yaml")
    skipped.finish(Status.SKIPPED, error="needs docker")
    root = ET.fromstring(render_junit(builder.build()))
    failure = _cases(root)["s/steps"].find("failure")
    assert failure is not None and "cluster skr-b not found" in failure.get("message", "")
    skip = _cases(root)["later/skipped"].find("skipped")
    assert skip is not None and skip.get("message") == "needs docker"
    assert root.get("skipped") == "1"


@settings(max_examples=40, deadline=None)
@given(st.text(), st.text())
def test_any_text_gives_parseable_xml(name: str, actual: str) -> None:
    builder = ReportBuilder("r", machine=MachineInfo(cores=1, python="3"), clock=lambda: 0.0)
    s = builder.scenario(name, name)
    s.expectation(step=name, kind="k", description=name, expected="x", actual=actual, passed=False)
    s.finish(error=actual or None)
    ET.fromstring(render_junit(builder.build()))
