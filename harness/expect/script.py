"""Judging a ``script`` step: exit code, then stdout/stderr checks (contains, notContains,
regex, JSON partial tree); the report shows the output, truncated."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from harness.expect.capture import capture_values
from harness.expect.check import Check
from harness.expect.checks import Verdict
from harness.expect.observations import ScriptResult
from harness.matching.output import OutputSpec, check_output, truncate
from harness.scenario import OutputCheck, Script

OUTPUT_LIMIT = 4000
"""Characters of each stream kept in the report (head and tail); the log has everything."""


def _spec(check: OutputCheck) -> OutputSpec:
    return OutputSpec(
        contains=check.contains,
        not_contains=check.not_contains,
        regex=check.regex,
        json=check.json_,
    )


def _expected(spec: Script) -> str:
    parts = [f"exit {spec.expect.exit_code}"]
    for stream, check in (("stdout", spec.expect.stdout), ("stderr", spec.expect.stderr)):
        if check is None:
            continue
        if check.contains:
            parts.append(f"{stream} contains {', '.join(map(repr, check.contains))}")
        if check.not_contains:
            parts.append(f"{stream} lacks {', '.join(map(repr, check.not_contains))}")
        if check.regex is not None:
            parts.append(f"{stream} matches /{check.regex}/")
        if check.json_ is not None:
            parts.append(f"{stream} is JSON matching the tree")
    return "; ".join(parts)


def output_details(result: ScriptResult) -> str:
    """``$ command`` then both streams, each cut to :data:`OUTPUT_LIMIT` characters."""
    lines = [f"$ {result.command}"]
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        if text:
            shown, cut = truncate(text, OUTPUT_LIMIT)
            lines.append(f"--- {name}{' (truncated; full text in the logs)' if cut else ''} ---")
            lines.append(shown.rstrip("\n"))
    return "\n".join(lines)


def judge(spec: Script, result: ScriptResult, *, attempts: int = 1) -> Check:
    """The exit code and output checks of one run (``attempts``: how many runs a polling
    script took, this one included; said in the verdict when more than one)."""
    description = f"script {result.command}"
    problems: list[str] = []
    diffs: list[str] = []
    if result.exit_code is None:
        problems.append(result.error or "did not finish")
    elif result.exit_code != spec.expect.exit_code:
        problems.append(f"exit {result.exit_code}")
    for stream, check, text in (
        ("stdout", spec.expect.stdout, result.stdout),
        ("stderr", spec.expect.stderr, result.stderr),
    ):
        if check is None:
            continue
        outcome = check_output(_spec(check), text)
        problems += [f"{stream}: {p}" for p in outcome.problems]
        if outcome.diff:
            diffs.append(f"{stream}:\n{outcome.diff}")
    expected = _expected(spec)
    ok = not problems
    actual = f"exit {result.exit_code} in {result.duration:.1f} s" if ok else "; ".join(problems)
    if attempts > 1:
        actual += f" (run {attempts})" if ok else f" (last of {attempts} runs)"
    details = "\n".join([*diffs, output_details(result)])
    text = actual if ok else f"{description}: expected {expected}; got {actual}"
    return Check("script", description, Verdict(ok, text, expected, actual), details=details)


def captured_output(spec: Script, result: ScriptResult) -> tuple[dict[str, Any], list[str]]:
    """The values ``spec.capture`` takes from the run's stdout parsed as JSON, and every
    problem (not JSON; an expression fails or gives null)."""
    if not spec.capture:
        return {}, []
    try:
        document = json.loads(result.stdout)
    except ValueError as error:
        return {}, [f"capture: stdout is not JSON: {error}"]
    return capture_values(spec.capture, document, "the JSON output")


def judged_with_problems(check: Check, problems: list[str]) -> Check:
    """``check`` failed for ``problems`` found after it passed (a capture that failed)."""
    actual = "; ".join(problems)
    text = f"{check.description}: expected {check.verdict.expected}; got {actual}"
    return replace(check, verdict=Verdict(False, text, check.verdict.expected, actual))
