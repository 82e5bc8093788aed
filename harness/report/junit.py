"""JUnit XML for CI (pure): one ``<testsuite>`` per scenario, one testcase per expectation.

Names are stable across runs: ``classname="scenario.<scenario>"`` and
``name="<scenario>/<step>/<index>-<kind>"``. A scenario that errored (setup failure, crash)
gets a ``<scenario>/error`` testcase with an ``<error>``; one that failed without a failed
expectation (a step failed) gets ``<scenario>/steps`` with a ``<failure>``; a skipped one
gets ``<scenario>/skipped``. Suites that did not pass carry the tails of their process
logs in ``<system-out>``; the writer is given that text, it reads no files.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from harness.report.model import (
    ExpectationResult,
    ProcessInfo,
    RunReport,
    ScenarioReport,
    Status,
)

SUITES_NAME = "watcher-harness"

# Characters XML 1.0 cannot carry at all (not even as references): most C0 controls,
# surrogates and U+FFFE/U+FFFF. Process logs contain ANSI escapes, so this matters.
_INVALID_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean(text: str) -> str:
    """``text`` with characters XML cannot represent replaced by U+FFFD."""
    return _INVALID_XML.sub("\ufffd", text)


def _seconds(value: float) -> str:
    return f"{max(value, 0.0):.3f}"


def _timestamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def failure_message(e: ExpectationResult) -> str:
    """One line for CI summaries: ``expected …, actual …``."""
    return f"expected {e.expected}, actual {e.actual}"


def process_logs_text(processes: tuple[ProcessInfo, ...], log_tails: Mapping[Path, str]) -> str:
    """The log tails of ``processes`` as one text, each under a header naming the process."""
    parts = []
    for p in processes:
        header = f"===== {p.name} (pid {p.pid}, exit {p.exit_code}) {p.log_path}"
        tail = log_tails.get(p.log_path)
        parts.append(f"{header}\n{tail if tail is not None else '(log not available)'}")
    return "\n\n".join(parts)


def _testcase(parent: ET.Element, s: ScenarioReport, name: str, seconds: float) -> ET.Element:
    return ET.SubElement(
        parent,
        "testcase",
        classname=clean(f"scenario.{s.name}"),
        name=clean(name),
        file=clean(s.file),
        time=_seconds(seconds),
    )


def _suite(parent: ET.Element, s: ScenarioReport, log_tails: Mapping[Path, str]) -> dict[str, int]:
    suite = ET.SubElement(parent, "testsuite", name=clean(s.name))
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="file", value=clean(s.file))
    ET.SubElement(props, "property", name="status", value=s.status.value)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    logs = clean(process_logs_text(s.processes, log_tails)) if not s.ok else ""
    first_bad: ET.Element | None = None

    if s.status is Status.ERROR:
        case = _testcase(suite, s, f"{s.name}/error", s.duration)
        message = s.error or "the scenario could not be run"
        error = ET.SubElement(
            case, "error", message=clean(message.splitlines()[0] if message else "")
        )
        error.set("type", "ScenarioError")
        error.text = clean(message)
        counts["tests"] += 1
        counts["errors"] += 1
        first_bad = case
    elif s.status is Status.SKIPPED:
        case = _testcase(suite, s, f"{s.name}/skipped", 0.0)
        ET.SubElement(case, "skipped", message=clean(s.error or "skipped"))
        counts["tests"] += 1
        counts["skipped"] += 1

    for e in s.expectations:
        case = _testcase(suite, s, e.id, e.duration)
        counts["tests"] += 1
        if not e.passed:
            failure = ET.SubElement(case, "failure", message=clean(failure_message(e)))
            failure.set("type", clean(e.kind))
            failure.text = clean(f"{e.description}\nexpected: {e.expected}\nactual:   {e.actual}")
            counts["failures"] += 1
            first_bad = first_bad if first_bad is not None else case

    if s.status is Status.FAILED and first_bad is None:
        # Failed without a failed expectation: a step failed; say which.
        bad_steps = [st for st in s.steps if st.status in (Status.FAILED, Status.ERROR)]
        case = _testcase(suite, s, f"{s.name}/steps", sum(st.duration for st in bad_steps))
        lines = [f"{st.branch.value} {st.name}: {st.error or st.status.value}" for st in bad_steps]
        message = s.error or (lines[0] if lines else "the scenario failed")
        failure = ET.SubElement(case, "failure", message=clean(message))
        failure.set("type", "StepFailure")
        failure.text = clean("\n".join(lines) or message)
        counts["tests"] += 1
        counts["failures"] += 1
        first_bad = case

    if logs:
        if first_bad is not None:
            ET.SubElement(first_bad, "system-out").text = logs
        ET.SubElement(suite, "system-out").text = logs

    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", _seconds(s.duration))
    suite.set("timestamp", _timestamp(s.started_at))
    return counts


def render_junit(report: RunReport, *, log_tails: Mapping[Path, str] | None = None) -> str:
    """The report as JUnit XML text (with an XML declaration)."""
    root = ET.Element("testsuites", name=SUITES_NAME)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for scenario in report.scenarios:
        for key, value in _suite(root, scenario, log_tails or {}).items():
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", _seconds(report.duration))
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'
