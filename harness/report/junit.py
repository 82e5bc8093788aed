"""JUnit XML for CI (pure): one ``<testsuite>`` per scenario, one testcase per expectation.

Names are stable across runs: ``classname="scenario.<scenario>"`` and
``name="<scenario>/<step>/<index>-<kind>"``. A scenario that errored (setup failure, crash)
gets a ``<scenario>/error`` testcase with an ``<error>``; one that failed without a failed
expectation (a step failed) gets ``<scenario>/steps`` with a ``<failure>``; a skipped one
gets ``<scenario>/skipped`` whose ``<skipped message=...>`` says why (the backend cannot
run it, or it checked nothing: its steps were skipped for what the webhook under test
lacks). Suites that did not pass carry the tails of their process
logs in ``<system-out>``; the writer is given that text, it reads no files.

Retried scenarios (``--retries``) follow Maven Surefire's rerun convention, which CI
consumers read (Jenkins, the Surefire report parser): the testcases are the last attempt's,
and each earlier attempt's failure of the same testcase is added to it — as
``<flakyFailure>`` / ``<flakyError>`` when the testcase passed in the end (it still counts
as passed), as ``<rerunFailure>`` / ``<rerunError>`` when it failed again — each with
``message``, ``type`` and the failure text in ``<stackTrace>``. A testcase with flaky
entries says so in its ``<system-out>``; the suite gets ``flakes="n"`` and the properties
``status=flaky`` and ``attempts``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.report.model import (
    AttemptReport,
    ExpectationResult,
    ProcessInfo,
    RunReport,
    ScenarioReport,
    Status,
    StepReport,
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


def _step_failure(steps: tuple[StepReport, ...], error: str | None) -> tuple[str, str]:
    """Message and text of a failure without a failed expectation: the failed steps."""
    bad_steps = [st for st in steps if st.status in (Status.FAILED, Status.ERROR)]
    lines = [f"{st.branch.value} {st.name}: {st.error or st.status.value}" for st in bad_steps]
    message = error or (lines[0] if lines else "the scenario failed")
    return message, "\n".join(lines) or message


def _expectation_text(e: ExpectationResult) -> str:
    """What a failure body shows: the verdict, then the details (an ``assert``'s diff, a
    ``script``'s output)."""
    text = f"{e.description}\nexpected: {e.expected}\nactual:   {e.actual}"
    return f"{text}\n\n{e.details}" if e.details else text


def _attachments_text(e: ExpectationResult) -> str:
    """Attached material (the selected objects' YAML, events) for ``<system-out>``."""
    return "\n".join(f"--- {a.name} ---\n{a.text}" for a in e.attachments)


@dataclass(frozen=True)
class _Problem:
    """How one testcase of an earlier attempt went wrong."""

    error: bool  # an <error> (the scenario could not run), else a <failure>
    message: str
    type: str
    text: str


def attempt_problems(scenario: str, a: AttemptReport) -> dict[str, _Problem]:
    """Testcase name → what went wrong in attempt ``a``, named as the testcases of a
    scenario report that ended like ``a`` are (see the module doc)."""
    out: dict[str, _Problem] = {}
    if a.status is Status.ERROR:
        message = a.error or "the scenario could not be run"
        out[f"{scenario}/error"] = _Problem(True, message.splitlines()[0], "ScenarioError", message)
    for e in a.failed_expectations:
        out[e.id] = _Problem(False, failure_message(e), e.kind, _expectation_text(e))
    if a.status is Status.FAILED and not out:
        message, text = _step_failure(a.failed_steps, a.error)
        out[f"{scenario}/steps"] = _Problem(False, message, "StepFailure", text)
    return out


def _add_attempts(
    suite: ET.Element, s: ScenarioReport, cases: dict[str, tuple[ET.Element, bool]]
) -> int:
    """The earlier attempts' failures into the testcases (see the module doc); how many
    testcases are flaky."""
    total = s.retry + 1
    flaky: dict[str, list[int]] = {}
    for a in s.attempts:
        for name, problem in attempt_problems(s.name, a).items():
            if name not in cases:
                cases[name] = (_testcase(suite, s, name, 0.0), False)
            case, failed = cases[name]
            prefix = "rerun" if failed else "flaky"
            tag = prefix + ("Error" if problem.error else "Failure")
            element = ET.SubElement(case, tag, message=clean(problem.message))
            element.set("type", clean(problem.type))
            header = f"attempt {a.number} of {total}: {a.status.value} ({a.duration:.1f} s)"
            ET.SubElement(element, "stackTrace").text = clean(f"{header}\n{problem.text}")
            if not failed:
                flaky.setdefault(name, []).append(a.number)
    for name, numbers in flaky.items():
        case, _ = cases[name]
        failed_on = ", ".join(str(n) for n in numbers)
        outcome = (
            f"passed on retry {s.retry}"
            if s.status is Status.FLAKY
            else f"passed in attempt {total}, the last"
        )
        ET.SubElement(case, "system-out").text = clean(
            f"flaky: failed in attempt {failed_on} of {total}, {outcome}"
        )
    return len(flaky)


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
    if s.attempts:
        ET.SubElement(props, "property", name="attempts", value=str(s.retry + 1))
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    logs = clean(process_logs_text(s.processes, log_tails)) if not s.ok else ""
    cases: dict[str, tuple[ET.Element, bool]] = {}  # name → (testcase, failed)
    # The last attempt's problems, named as an earlier attempt's are: an error or failed
    # steps (without a failed expectation) get a testcase of their own.
    problems = attempt_problems(s.name, AttemptReport.of(0, s))

    def problem_case(what: str, seconds: float) -> None:
        name = f"{s.name}/{what}"
        if name not in problems:
            return
        problem = problems[name]
        case = _testcase(suite, s, name, seconds)
        tag = "error" if problem.error else "failure"
        element = ET.SubElement(case, tag, message=clean(problem.message))
        element.set("type", problem.type)
        element.text = clean(problem.text)
        counts["tests"] += 1
        counts[f"{tag}s"] += 1
        cases[name] = (case, True)

    problem_case("error", s.duration)
    if s.status is Status.SKIPPED:
        case = _testcase(suite, s, f"{s.name}/skipped", 0.0)
        ET.SubElement(case, "skipped", message=clean(s.error or "skipped"))
        counts["tests"] += 1
        counts["skipped"] += 1
    for e in s.expectations:
        cases[e.id] = (_expectation_case(suite, s, e), not e.passed)
        counts["tests"] += 1
        counts["failures"] += not e.passed
    bad_steps = (st for st in s.steps if st.status in (Status.FAILED, Status.ERROR))
    problem_case("steps", sum(st.duration for st in bad_steps))

    if s.attempts:
        before = len(cases)
        flakes = _add_attempts(suite, s, cases)
        counts["tests"] += len(cases) - before
        suite.set("flakes", str(flakes))

    if logs:
        first_bad = next((case for case, failed in cases.values() if failed), None)
        if first_bad is not None:
            ET.SubElement(first_bad, "system-out").text = logs
        ET.SubElement(suite, "system-out").text = logs

    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", _seconds(s.duration))
    suite.set("timestamp", _timestamp(s.started_at))
    return counts


def _expectation_case(suite: ET.Element, s: ScenarioReport, e: ExpectationResult) -> ET.Element:
    """One expectation's testcase: its details and attachments, and why it failed."""
    case = _testcase(suite, s, e.id, e.duration)
    if e.attachments or (e.passed and e.details):
        shown = "\n".join(t for t in (e.details if e.passed else "", _attachments_text(e)) if t)
        ET.SubElement(case, "system-out").text = clean(shown)
    if not e.passed:
        failure = ET.SubElement(case, "failure", message=clean(failure_message(e)))
        failure.set("type", clean(e.kind))
        failure.text = clean(_expectation_text(e))
    return case


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
