"""Short text about a finished scenario: what a person reads first when it failed."""

from __future__ import annotations

from harness.report import ScenarioReport, Status


def failure_lines(scenario: ScenarioReport) -> list[str]:
    """The scenario error, failed steps and failed expectations (expected vs actual)."""
    lines = [f"error: {scenario.error}"] if scenario.error else []
    lines += [
        f"step {s.name} ({s.branch.value}): {s.error}"
        for s in scenario.steps
        if s.status is Status.FAILED and s.error
    ]
    lines += [
        f"{e.id}: expected {e.expected}, got {e.actual}"
        for e in scenario.expectations
        if not e.passed
    ]
    return lines
