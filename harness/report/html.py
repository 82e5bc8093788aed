"""One self-contained HTML page per run (pure: report, images and log text in; text out).

No scripts and nothing fetched from the network: CSS is inline, histograms are ``data:``
PNGs, collapsible parts are ``<details>``. Every value from the run goes through
``html.escape``. Order of the page: run header, summary table (cost of each scenario, the
slowest marked), the "Failures" and "Flaky" cards, then a section per scenario
(:mod:`harness.report.html_scenario`). A scenario that passed on a retry is *flaky*, with
a badge and colour of its own. Styles and value formatting: :mod:`harness.report.html_style`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.report.html_scenario import TIMELINE_LIMIT, attempt_problems, scenario_section
from harness.report.html_style import CSS, anchor, badge, duration, esc, retry_note, timestamp
from harness.report.model import AttemptReport, RunReport, ScenarioReport, Status

SLOWEST = 3
"""How many of the costliest scenarios the summary marks (with more than twice as many)."""


def slowest(report: RunReport) -> set[str]:
    """The scenarios that cost the most time (every attempt), so slow ones stand out."""
    if len(report.scenarios) < 2 * SLOWEST:
        return set()
    ranked = sorted(report.scenarios, key=lambda s: s.total_duration, reverse=True)
    return {s.name for s in ranked[:SLOWEST]}


def _cost(s: ScenarioReport, longest: float) -> str:
    """Total time as a bar against the costliest scenario: environment, then steps."""
    if longest <= 0:
        return esc(duration(s.total_duration))
    env = round(80 * s.environment_duration / longest)
    steps = round(80 * s.steps_duration / longest)
    title = (
        f"environment {duration(s.environment_duration)}, steps {duration(s.steps_duration)}"
        + (f", earlier attempts {duration(s.total_duration - s.duration)}" if s.attempts else "")
    )
    return (
        f'<span class="cost" title="{esc(title)}"><i class="env" style="width:{env}px"></i>'
        f'<i class="steps" style="width:{steps}px"></i></span>{esc(duration(s.total_duration))}'
    )


def _skip_note(s: ScenarioReport) -> str:
    """Why a scenario was skipped, under its badge in the summary."""
    if s.status is not Status.SKIPPED or not s.error:
        return ""
    return f'<div class="note">{esc(s.error.splitlines()[0])}</div>'


def _summary(report: RunReport) -> str:
    rows = []
    marked = slowest(report)
    longest = max((s.total_duration for s in report.scenarios), default=0.0)
    for i, s in enumerate(report.scenarios):
        total = len(s.expectations)
        passed = s.expectations_passed
        width = 100 if total == 0 else round(100 * passed / total)
        bar = f'<span class="bar"><i style="width:{width}%"></i></span>' if total else ""
        slow = ' <span class="retry">slowest</span>' if s.name in marked else ""
        rows.append(
            f'<tr><td><a href="#{anchor(i)}">{esc(s.name)}</a>{slow}</td>'
            f"<td>{badge(s.status)}{retry_note(s)}{_skip_note(s)}</td>"
            f'<td class="num">{_cost(s, longest)}</td>'
            f'<td class="num">{esc(duration(s.environment_duration))}</td>'
            f'<td class="num">{bar}{passed}/{total}</td>'
            f'<td class="mono">{esc(s.file)}</td></tr>'
        )
    spent = sum(s.total_duration for s in report.scenarios)
    environments = sum(s.environment_duration for s in report.scenarios)
    share = f"{100 * environments / spent:.0f} %" if spent > 0 else "-"
    return (
        '<section class="card"><h2>Summary</h2>'
        f"<p>{esc(duration(spent))} of scenario time, {share} of it bringing environments "
        "up and down (the bar: environment, then steps).</p><table>"
        '<tr><th>scenario</th><th>status</th><th class="num">cost</th>'
        '<th class="num">of it environment</th>'
        '<th class="num">expectations passed</th><th>file</th></tr>'
        + "".join(rows)
        + "</table></section>"
    )


def _failures(report: RunReport) -> str:
    items = []
    for i, s in enumerate(report.scenarios):
        if s.status is Status.ERROR:
            first = (s.error or "error").splitlines()[0]
            items.append(f'<li><a href="#{anchor(i)}">{esc(s.name)}</a>: {esc(first)}</li>')
        for e in s.expectations:
            if not e.passed:
                items.append(
                    f'<li><a href="#{esc(e.id)}" class="mono">{esc(e.id)}</a>: '
                    f"expected <b>{esc(e.expected)}</b>, actual <b>{esc(e.actual)}</b></li>"
                )
    if not items:
        return ""
    return (
        f'<section class="card failed"><h2>Failures ({len(items)})</h2>'
        f'<ul class="failures">{"".join(items)}</ul></section>'
    )


def _headline(a: AttemptReport) -> str:
    """The most telling problem of an attempt: a failed expectation, else its error."""
    for e in a.failed_expectations:
        return f"{e.id}: expected {e.expected}, actual {e.actual}"
    return (attempt_problems(a) or [a.status.value])[0]


def _flaky(report: RunReport) -> str:
    items = []
    for i, s in enumerate(report.scenarios):
        if s.status is not Status.FLAKY:
            continue
        first = [f"attempt {a.number}: {_headline(a)}" for a in s.attempts]
        items.append(
            f'<li><a href="#{anchor(i)}">{esc(s.name)}</a> passed on retry {s.retry}; '
            + "; ".join(esc(line) for line in first)
            + "</li>"
        )
    if not items:
        return ""
    return (
        f'<section class="card flaky"><h2>Flaky ({len(items)})</h2>'
        f'<ul class="failures">{"".join(items)}</ul></section>'
    )


def render_html(
    report: RunReport,
    *,
    histograms: Mapping[str, bytes] | None = None,
    log_tails: Mapping[Path, str] | None = None,
    timeline_limit: int = TIMELINE_LIMIT,
) -> str:
    """The whole page. ``histograms``: scenario name → PNG; ``log_tails``: log path → text."""
    histograms = histograms or {}
    log_tails = log_tails or {}
    overall = Status.PASSED if report.ok else Status.FAILED
    counts = ", ".join(
        f"{report.count(st)} {st.value}" for st in Status if report.count(st) or st is Status.PASSED
    )
    versions = "".join(
        f"<span>{esc(k)} {esc(v)}</span>" for k, v in sorted(report.machine.versions.items())
    )
    header = (
        f"<h1>watcher-harness run {esc(report.run_id)}</h1>"
        f'<div class="meta"><span>started {esc(timestamp(report.started_at))}</span>'
        f"<span>took {esc(duration(report.duration))}</span>"
        f"<span>{report.machine.cores} cores</span>"
        f"<span>Python {esc(report.machine.python)}</span>{versions}</div>"
        f'<p class="overall">{badge(overall)} {len(report.scenarios)} scenarios: '
        f"{esc(counts)}</p>"
    )
    scenarios = "".join(
        scenario_section(i, s, histograms.get(s.name), log_tails, timeline_limit)
        for i, s in enumerate(report.scenarios)
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(overall.value)} · watcher-harness run {esc(report.run_id)}</title>"
        f"<style>{CSS}</style></head><body><main>"
        f"{header}{_summary(report)}{_failures(report)}{_flaky(report)}{scenarios}"
        "</main></body></html>\n"
    )
