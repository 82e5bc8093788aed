"""A command's output against what a scenario expects of it. Pure.

``OutputSpec`` lists the checks (all must hold): substrings that must and must not occur,
a regular expression (``re.search`` with ``MULTILINE``) and a partial JSON tree matched
with the rules of ``harness.matching.objects``. The spec validates its regex and JSON tree
when built, so a bad scenario fails at load time, not after a slow run; ``regex_problem``
and ``syntax.check_expressions`` give the same answers without raising.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from harness.matching.mismatches import diff, select_mismatch_summary
from harness.matching.objects import match_object
from harness.matching.syntax import ExpressionError, check_expressions, format_path

TRUNCATE_LIMIT: Final = 4000


def regex_problem(pattern: str) -> str | None:
    """Why ``pattern`` does not compile (with ``MULTILINE``, as checks use it), or None."""
    try:
        re.compile(pattern, re.MULTILINE)
    except re.error as error:
        return f"invalid regex {pattern!r}: {error}"
    return None


@dataclass(frozen=True)
class OutputSpec:
    """What the output must satisfy; ``json=None`` means no JSON check.

    Raises ``ValueError`` for an invalid ``regex`` and ``ExpressionError`` (a ``ValueError``)
    for an invalid expression or special map in ``json``.
    """

    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()
    regex: str | None = None
    json: Any | None = None

    def __post_init__(self) -> None:
        if self.regex is not None:
            problem = regex_problem(self.regex)
            if problem is not None:
                raise ValueError(problem)
        problems = check_expressions(self.json)
        if problems:
            path, problem = problems[0]
            raise ExpressionError(f"json: {format_path(path)}: {problem}")


@dataclass(frozen=True)
class OutputResult:
    """``problems`` are one line each; ``diff`` is the JSON mismatch detail ("" if none)."""

    ok: bool
    problems: tuple[str, ...] = ()
    diff: str = ""


def check_output(spec: OutputSpec, text: str) -> OutputResult:
    """Every problem with ``text`` under ``spec``, not just the first, so one run shows all."""
    problems = [f"output does not contain {s!r}" for s in spec.contains if s not in text]
    problems += [f"output contains {s!r}" for s in spec.not_contains if s in text]
    if spec.regex is not None and not re.search(spec.regex, text, re.MULTILINE):
        problems.append(f"output does not match regex {spec.regex!r}")
    detail = ""
    if spec.json is not None:
        problem, detail = _check_json(spec.json, text)
        if problem is not None:
            problems.append(problem)
    return OutputResult(ok=not problems, problems=tuple(problems), diff=detail)


def _check_json(expected: Any, text: str) -> tuple[str | None, str]:
    """(problem, diff) of the output parsed as JSON against the partial tree ``expected``."""
    try:
        parsed = json.loads(text)
    except ValueError as error:
        return f"not JSON: {error}", ""
    except RecursionError:
        return "not JSON: nested too deeply to parse", ""
    match = match_object(expected, parsed)
    if match.ok:
        return None, ""
    return f"JSON does not match: {select_mismatch_summary(match)}", diff(match)


def truncate(text: str, limit: int = TRUNCATE_LIMIT) -> tuple[str, bool]:
    """``text`` cut to about ``limit`` characters, keeping the head and the tail (where
    commands print what went wrong) around a ``… N characters cut …`` line; and whether
    anything was cut."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if len(text) <= limit:
        return text, False
    head = limit // 2
    tail = limit - head
    cut = len(text) - limit
    return f"{text[:head]}\n… {cut} characters cut …\n{text[len(text) - tail :]}", True
