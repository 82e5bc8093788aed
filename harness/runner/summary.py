"""Short text about a finished scenario: what a person reads first when it failed, when it
passed only on a retry (flaky), or why it was skipped."""

from __future__ import annotations

from collections.abc import Sequence

from harness.report import ExpectationResult, ScenarioReport, Status, StepReport


def _problems(
    error: str | None,
    steps: Sequence[StepReport],
    expectations: Sequence[ExpectationResult],
) -> list[str]:
    lines = [f"error: {error}"] if error else []
    lines += [
        f"step {s.name} ({s.branch.value}): {s.error}"
        for s in steps
        if s.status is Status.FAILED and s.error
    ]
    for e in expectations:
        if not e.passed:
            lines.append(f"{e.id}: expected {e.expected}, got {e.actual}")
            lines += [f"  {line}" for line in _detail_lines(e)]
    return lines


DETAIL_LINES = 30
"""Lines of a failed entry's details (an ``assert`` diff, a ``script`` output) shown in the
console; the HTML report and JUnit have them all."""


def _detail_lines(e: ExpectationResult) -> list[str]:
    lines = e.details.splitlines()
    if len(lines) > DETAIL_LINES:
        cut = len(lines) - DETAIL_LINES
        lines = [*lines[:DETAIL_LINES], f"… {cut} more lines in the HTML report and JUnit"]
    return lines


def attempt_lines(scenario: ScenarioReport) -> list[str]:
    """One header per earlier attempt (``attempt 1/2 failed (3.1 s):``) and its problems,
    indented."""
    total = scenario.retry + 1
    lines = []
    for a in scenario.attempts:
        lines.append(f"attempt {a.number}/{total} {a.status.value} ({a.duration:.1f} s):")
        problems = _problems(a.error, a.failed_steps, a.failed_expectations)
        lines += [f"  {line}" for line in problems or ["(no details recorded)"]]
    return lines


def problem_lines(scenario: ScenarioReport) -> list[str]:
    """This attempt's scenario error, failed steps and failed expectations (expected vs
    actual); for a skipped scenario, why (``skipped: ...``)."""
    if scenario.status is Status.SKIPPED:
        return [f"skipped: {scenario.error or 'no reason recorded'}"]
    return _problems(scenario.error, scenario.steps, scenario.expectations)


def failure_lines(scenario: ScenarioReport) -> list[str]:
    """:func:`problem_lines`, then the earlier attempts' (``--retries``). Flaky: which
    retry passed, and what failed before."""
    if scenario.status is Status.FLAKY:
        return [f"flaky: passed on retry {scenario.retry}", *attempt_lines(scenario)]
    return problem_lines(scenario) + attempt_lines(scenario)
