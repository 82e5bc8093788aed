"""An entry's details (an assert's diff, a script's output) and attachments (objects' YAML)
reach every report: the console lines, JUnit (failure body, system-out) and HTML."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from harness.report import Attachment, ReportBuilder, RunReport, Status
from harness.report.html import render_html
from harness.report.junit import render_junit
from harness.runner.summary import DETAIL_LINES, failure_lines

DIFF = "skr-b: ValidatingWebhookConfiguration skr-webhook (closest of 1):\nwebhooks[1].rules\n  - expected: [configmaps]\n  + actual: [secrets]"  # noqa: E501


def report(*, passed: bool = False, details: str = DIFF) -> RunReport:
    builder = ReportBuilder("r")
    s = builder.scenario("vwc", "vwc.yaml")
    s.step("check", Status.PASSED if passed else Status.FAILED, 1.0)
    s.expectation(
        step="check",
        kind="assert",
        description="assert ValidatingWebhookConfiguration skr-webhook on every SKR",
        expected="an object matching {...}",
        actual="skr-b: 1 selected, none matches",
        passed=passed,
        details=details,
        attachments=[Attachment("skr-b: ValidatingWebhookConfiguration skr-webhook", "kind: <x>")],
    )
    s.finish()
    return builder.build()


def test_round_trip_keeps_details_and_attachments() -> None:
    original = report()
    again = RunReport.from_json(original.to_json())
    assert again == original
    (e,) = again.scenarios[0].expectations
    assert e.details == DIFF and e.attachments[0].text == "kind: <x>"


def test_junit_failure_body_has_the_diff_and_system_out_the_objects() -> None:
    root = ET.fromstring(render_junit(report()))
    case = next(c for c in root.iter("testcase") if c.get("name") == "vwc/check/1-assert")
    failure = case.find("failure")
    assert failure is not None and "+ actual: [secrets]" in (failure.text or "")
    assert "--- skr-b: ValidatingWebhookConfiguration skr-webhook ---" in (
        case.findtext("system-out") or ""
    )


def test_html_shows_the_diff_open_and_escapes_the_attachment() -> None:
    page = render_html(report())
    assert "<details open><summary>Difference</summary><pre>" in page
    assert "+ actual: [secrets]" in page
    assert "kind: &lt;x&gt;" in page and "<x>" not in page


def test_console_lines_show_the_diff_capped() -> None:
    lines = failure_lines(report().scenarios[0])
    assert "  webhooks[1].rules" in lines and "    + actual: [secrets]" in lines
    long = "\n".join(f"line {i}" for i in range(100))
    capped = failure_lines(report(details=long).scenarios[0])
    assert f"  line {DETAIL_LINES - 1}" in capped and f"  line {DETAIL_LINES}" not in capped
    assert capped[-1] == f"  … {100 - DETAIL_LINES} more lines in the HTML report and JUnit"


def test_a_passed_entry_keeps_its_details_closed() -> None:
    page = render_html(report(passed=True))
    assert "<details><summary>Difference</summary>" in page
