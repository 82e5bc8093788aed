"""One scenario's section of the HTML report (pure: its report, histogram and log text in).

In order: earlier attempts, the error or skip reason, expectations with details and
attachments, the latency histogram, steps, timeline (capped), metrics, processes and —
when it did not pass — the tails of its process logs.
"""

from __future__ import annotations

import base64
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.report.html_format import anchor, badge, duration, esc, retry_note, timestamp
from harness.report.model import (
    AttemptReport,
    ExpectationResult,
    ScenarioReport,
    Status,
    TimelineEntry,
)
from harness.report.stats import LatencySummary

TIMELINE_LIMIT = 2000
"""Timeline rows shown per scenario; the rest is in report.json."""


def attempt_problems(a: AttemptReport) -> list[str]:
    """What went wrong in an earlier attempt, one line each."""
    lines = [f"error: {a.error}"] if a.error else []
    lines += [
        f"{st.branch.value} {st.name}: {st.error or st.status.value}" for st in a.failed_steps
    ]
    lines += [f"{e.id}: expected {e.expected}, actual {e.actual}" for e in a.failed_expectations]
    return lines


def _attempts(s: ScenarioReport, limit: int) -> str:
    if not s.attempts:
        return ""
    total = s.retry + 1
    parts = []
    for a in s.attempts:
        problems = "".join(f"<li>{esc(line)}</li>" for line in attempt_problems(a))
        logs = "".join(
            f'<li><a href="{esc(_log_href(p.log_path))}">{esc(p.name)}</a> '
            f'<span class="mono">{esc(p.log_path)}</span></li>'
            for p in a.processes
        )
        parts.append(
            f'<div class="attempt"><b>Attempt {a.number} of {total}</b> {badge(a.status)} '
            f'<span class="meta"><span>started {esc(timestamp(a.started_at))}</span>'
            f"<span>{esc(duration(a.duration))}</span></span>"
            + (f'<ul class="failures mono">{problems}</ul>' if problems else "")
            + _timeline_table(a.timeline, a.started_at, limit, opened=False)
            + (
                f"<details><summary>Process logs ({len(a.processes)})</summary>"
                f'<ul class="failures">{logs}</ul></details>'
                if logs
                else ""
            )
            + "</div>"
        )
    summary = f"Earlier attempts ({len(s.attempts)}); what follows is attempt {total}'s"
    return f"<details open><summary>{esc(summary)}</summary>{''.join(parts)}</details>"


def _expectation_extra(e: ExpectationResult) -> str:
    """An entry's details (open when it failed) and attachments, under its row."""
    parts = []
    if e.details:
        opened = "" if e.passed else " open"
        title = "Difference" if e.kind in ("assert", "error") else "Details"
        parts.append(
            f"<details{opened}><summary>{title}</summary><pre>{esc(e.details)}</pre></details>"
        )
    for a in e.attachments:
        cut = " (truncated; full text in the logs)" if a.truncated else ""
        parts.append(
            f"<details><summary>{esc(a.name)}{cut}</summary><pre>{esc(a.text)}</pre></details>"
        )
    return "".join(parts)


def _expectations(s: ScenarioReport) -> str:
    if not s.expectations and s.status in (Status.ERROR, Status.SKIPPED):
        return ""
    if not s.expectations:
        return '<h3>Expectations</h3><p class="note">No expectations were checked.</p>'
    rows = []
    for e in s.expectations:
        mark = "✔ pass" if e.passed else "✘ fail"
        rows.append(
            f'<tr class="{"pass" if e.passed else "fail"}" id="{esc(e.id)}">'
            f'<td class="mono">{esc(e.id)}</td><td>{esc(e.description)}</td>'
            f'<td class="mono">{esc(e.expected)}</td><td class="mono">{esc(e.actual)}</td>'
            f'<td class="result">{mark}</td></tr>'
        )
        extra = _expectation_extra(e)
        if extra:
            rows.append(f'<tr class="extra"><td></td><td colspan="4">{extra}</td></tr>')
    return (
        f"<h3>Expectations ({s.expectations_passed}/{len(s.expectations)} passed)</h3>"
        "<table><tr><th>id</th><th>description</th><th>expected</th><th>actual</th>"
        "<th>result</th></tr>" + "".join(rows) + "</table>"
    )


def _latency(s: ScenarioReport, png: bytes | None) -> str:
    summary = LatencySummary.of(s.latencies_ms)
    if summary is None and s.status in (Status.ERROR, Status.SKIPPED):
        return ""
    if summary is None:
        return '<h3>Latency</h3><p class="note">No latency samples.</p>'
    stats = (
        '<div class="stats">'
        f"<div>samples <b>{summary.count}</b></div>"
        f"<div>p50 <b>{summary.p50:.1f} ms</b></div>"
        f"<div>p99 <b>{summary.p99:.1f} ms</b></div>"
        f"<div>max <b>{summary.max:.1f} ms</b></div></div>"
    )
    image = ""
    if png is not None:
        data = base64.b64encode(png).decode("ascii")
        image = (
            f'<div class="histogram"><img alt="latency histogram of {esc(s.name)}" '
            f'src="data:image/png;base64,{data}"></div>'
        )
    return f"<h3>Latency</h3>{stats}{image}"


def _steps(s: ScenarioReport) -> str:
    if not s.steps:
        return ""
    rows = "".join(
        f"<tr><td>{esc(st.branch.value)}</td><td>{esc(st.name)}</td><td>{badge(st.status)}</td>"
        f'<td class="num">{esc(duration(st.duration))}</td>'
        f'<td class="mono">{esc(st.error or "")}</td></tr>'
        for st in s.steps
    )
    return (
        "<h3>Steps</h3><table><tr><th>block</th><th>step</th><th>status</th>"
        f'<th class="num">duration</th><th>error</th></tr>{rows}</table>'
    )


def _timeline_table(
    timeline: Sequence[TimelineEntry], started_at: float, limit: int, *, opened: bool
) -> str:
    """A timeline (a scenario's or an earlier attempt's), times relative to its start."""
    if not timeline:
        return ""
    rows = "".join(
        f'<tr><td class="num" title="{esc(timestamp(t.at))}">+{t.at - started_at:.3f} s</td>'
        f'<td class="tl-{esc(t.kind.value)}">{esc(t.kind.value)}</td><td>{esc(t.source)}</td>'
        f'<td class="mono">{esc(t.object)}</td><td class="mono">{esc(t.detail)}</td></tr>'
        for t in timeline[:limit]
    )
    note = ""
    if len(timeline) > limit:
        note = (
            f'<p class="note">Showing the first {limit} of {len(timeline)} entries; '
            "report.json has all of them.</p>"
        )
    return (
        f"<details{' open' if opened else ''}><summary>Timeline ({len(timeline)} entries)"
        f"</summary>{note}"
        '<table class="compact"><tr><th class="num">at</th><th>kind</th><th>cluster / manager</th>'
        f"<th>object</th><th>detail</th></tr>{rows}</table></details>"
    )


def _metrics(s: ScenarioReport) -> str:
    if not s.metrics:
        return ""
    rows = "".join(
        f'<tr><td class="mono">{esc(k)}</td><td class="num">{v:g}</td></tr>'
        for k, v in sorted(s.metrics.items())
    )
    return (
        f"<details><summary>Metrics at the end ({len(s.metrics)})</summary>"
        f'<table><tr><th>sample</th><th class="num">value</th></tr>{rows}</table></details>'
    )


def _exit(code: int | None) -> str:
    if code is None:
        return "running"
    if code < 0:
        try:
            return f"{code} ({signal.Signals(-code).name})"
        except ValueError:
            return str(code)
    return str(code)


def _log_href(path: Path) -> str:
    return path.as_uri() if path.is_absolute() else str(path)


def _processes(s: ScenarioReport, log_tails: Mapping[Path, str]) -> str:
    if not s.processes:
        return ""
    rows = "".join(
        f"<tr><td>{esc(p.name)}</td><td class='num'>{esc(p.pid if p.pid is not None else '-')}</td>"
        f"<td class='num'>{esc(_exit(p.exit_code))}</td>"
        f'<td class="mono">{esc(" ".join(p.argv))}</td>'
        f'<td class="mono"><a href="{esc(_log_href(p.log_path))}">{esc(p.log_path)}</a></td></tr>'
        for p in s.processes
    )
    table = (
        "<table><tr><th>process</th><th class='num'>pid</th><th class='num'>exit</th>"
        f"<th>command</th><th>log</th></tr>{rows}</table>"
    )
    if s.ok:
        return f"<details><summary>Processes ({len(s.processes)})</summary>{table}</details>"
    logs = []
    for p in s.processes:
        tail = log_tails.get(p.log_path)
        if tail is None:
            logs.append(
                f"<details><summary>{esc(p.name)} — log not available</summary>"
                f'<p class="note">{esc(p.log_path)} could not be read.</p></details>'
            )
            continue
        lines = tail.count("\n") + 1 if tail else 0
        logs.append(
            f"<details open><summary>{esc(p.name)} — last {lines} lines</summary>"
            f'<div class="logbox"><pre class="log">{esc(tail)}</pre></div></details>'
        )
    return f"<h3>Processes</h3>{table}<h3>Process logs</h3>{''.join(logs)}"


def scenario_section(
    i: int, s: ScenarioReport, png: bytes | None, log_tails: Mapping[Path, str], limit: int
) -> str:
    error = ""
    if s.error and s.status is Status.SKIPPED:
        error = f'<div class="skipbox"><b>Skipped:</b> {esc(s.error)}</div>'
    elif s.error:
        error = f'<div class="errorbox">{esc(s.error)}</div>'
    meta = (
        f'<div class="meta"><span class="mono">{esc(s.file)}</span>'
        f"<span>started {esc(timestamp(s.started_at))}</span>"
        f"<span>{esc(duration(s.duration))}</span></div>"
    )
    parts = [
        f'<section class="card {esc(s.status.value)}" id="{anchor(i)}">',
        f"<h2>{esc(s.name)} {badge(s.status)}{retry_note(s)}</h2>",
        meta,
        _attempts(s, limit),
        error,
        _expectations(s),
        _latency(s, png),
        _steps(s),
        _timeline_table(s.timeline, s.started_at, limit, opened=not s.ok),
        _metrics(s),
        _processes(s, log_tails),
        "</section>",
    ]
    return "".join(parts)
