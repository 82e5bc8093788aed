"""One self-contained HTML page per run (pure: report, images and log text in; text out).

No scripts and nothing fetched from the network: CSS is inline, histograms are ``data:``
PNGs, collapsible parts are ``<details>``. Order of the page: run header, summary table
(cost of each scenario, the slowest marked), the "Failures" and "Flaky" cards, then a
section per scenario (:mod:`harness.report.html_scenario`). A scenario that passed on a
retry is *flaky*, with a badge and colour of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.report.html_format import anchor, badge, duration, esc, retry_note, timestamp
from harness.report.html_scenario import TIMELINE_LIMIT, attempt_problems, scenario_section
from harness.report.model import AttemptReport, RunReport, ScenarioReport, Status

CSS = """
:root { --ok:#1b7f3b; --ok-bg:#e8f5e9; --bad:#b71c1c; --bad-bg:#fdecea; --err:#8a4b00;
        --err-bg:#fff3e0; --skip:#555; --skip-bg:#eeeeee; --line:#dde1e6; --muted:#5f6b7a;
        --flaky:#8e24aa; --flaky-bg:#f5e6fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:#1f2328;
       margin: 0; background:#f6f8fa; }
main { max-width: 1200px; margin: 0 auto; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 0; display:flex; align-items:center; gap:10px; flex-wrap:wrap; }
h3 { font-size: 15px; margin: 18px 0 8px; }
a { color:#0b5cad; text-decoration:none; } a:hover { text-decoration:underline; }
.meta { color: var(--muted); font-size: 13px; }
.meta span + span::before { content: " · "; }
section.card { background:#fff; border:1px solid var(--line); border-radius:8px;
               padding:16px 20px; margin: 16px 0; }
section.card.failed, section.card.error { border-left: 5px solid var(--bad); }
section.card.error { border-left-color: var(--err); }
section.card.passed { border-left: 5px solid var(--ok); }
section.card.flaky { border-left: 5px solid var(--flaky); }
section.card.skipped { border-left: 5px solid var(--skip); }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align:left; padding: 5px 8px; border-bottom: 1px solid var(--line);
         vertical-align: top; }
th { background:#f0f2f5; font-weight:600; white-space:nowrap; }
td.num, th.num { text-align:right; font-variant-numeric: tabular-nums; white-space:nowrap; }
td.mono, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
                 font-size: 12px; overflow-wrap:anywhere; }
tr.pass td { background: var(--ok-bg); }
tr.fail td { background: var(--bad-bg); }
.badge { display:inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
         font-weight:600; text-transform: uppercase; letter-spacing: .03em; }
.badge.passed { color: var(--ok); background: var(--ok-bg); }
.badge.failed { color: var(--bad); background: var(--bad-bg); }
.badge.error { color: var(--err); background: var(--err-bg); }
.badge.skipped { color: var(--skip); background: var(--skip-bg); }
.badge.flaky { color: var(--flaky); background: var(--flaky-bg); }
.retry { color: var(--flaky); font-size: 12px; font-weight: 600; }
.attempt { border-left: 3px solid var(--line); padding: 2px 0 2px 12px; margin: 8px 0; }
.errorbox { background: var(--bad-bg); color: var(--bad); border-radius:6px; padding:8px 12px;
            white-space: pre-wrap; font-family: ui-monospace, Menlo, Consolas, monospace;
            font-size:12px; margin: 10px 0; }
.skipbox { background: var(--skip-bg); color: var(--skip); border-radius:6px; padding:8px 12px;
           white-space: pre-wrap; font-size:12px; margin: 10px 0; }
.note { color: var(--muted); font-size: 12px; margin: 6px 0; }
.logbox { max-height: 420px; overflow:auto; display:flex; flex-direction:column-reverse;
          background:#0d1117; border-radius:6px; margin:6px 0; }
pre.log { color:#e6edf3; padding:10px 12px; font-size:12px; line-height:1.35; margin:0;
          white-space: pre-wrap; overflow-wrap:anywhere; }
td.result { white-space: nowrap; font-weight:600; }
tr.pass td.result { color: var(--ok); } tr.fail td.result { color: var(--bad); }
ul.failures { margin: 6px 0 0; padding-left: 20px; }
ul.failures li { margin: 3px 0; }
details { margin: 8px 0; }
tr.extra td { border-top: none; padding-top: 0; }
tr.extra pre { background: #f6f8fa; padding: 8px 10px; border-radius: 6px; margin: 4px 0;
               max-height: 480px; overflow: auto; white-space: pre; font-size: 12px; }
details > summary { cursor: pointer; font-weight: 600; margin: 6px 0; }
.tl-mutation { color:#0b5cad; } .tl-event { color:#1b7f3b; } .tl-reconcile { color:#6a1b9a; }
.tl-fault { color:#b71c1c; font-weight:600; } .tl-step { color:#5f6b7a; }
.tl-object { color:#8a5a00; }
table.compact td { padding: 2px 8px; }
.histogram img { max-width: 100%; height: auto; display:block; }
.stats { display:flex; gap: 18px; flex-wrap: wrap; margin: 4px 0 8px; }
.stats div { background:#f0f2f5; border-radius:6px; padding:4px 10px; }
.stats b { font-variant-numeric: tabular-nums; }
.bar { display:inline-block; height:8px; border-radius:4px; background: var(--bad-bg);
       width: 80px; vertical-align: middle; overflow:hidden; margin-right:6px; }
.bar i { display:block; height:100%; background: var(--ok); }
.cost { display:inline-flex; height:8px; width:80px; vertical-align: middle; margin-right:6px; }
.cost i { display:block; height:100%; } .cost .env { background:#9aa5b1; }
.cost .steps { background:#0b5cad; }
.overall { font-size: 15px; margin: 10px 0 0; }
"""


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


def _card(status: str, title: str, items: list[str]) -> str:
    """A card listing ``items`` (nothing when there are none)."""
    if not items:
        return ""
    return (
        f'<section class="card {status}"><h2>{title} ({len(items)})</h2>'
        f'<ul class="failures">{"".join(items)}</ul></section>'
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
    return _card("failed", "Failures", items)


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
    return _card("flaky", "Flaky", items)


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
