"""How values look on the run's HTML page: its stylesheet, escaping, badges and times.

Shared by the page (:mod:`harness.report.html`) and its scenario sections
(:mod:`harness.report.html_scenario`), so both escape and format alike. Every value from the
run goes through :func:`esc`: ANSI colours and control characters stripped (logs have
them), then ``html.escape``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import escape

from harness.report.model import ScenarioReport, Status

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


_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def plain(text: str) -> str:
    """``text`` without ANSI colour sequences and other control characters (logs have them)."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def esc(value: object) -> str:
    return escape(plain(str(value)), quote=True)


def badge(status: Status) -> str:
    return f'<span class="badge {esc(status.value)}">{esc(status.value)}</span>'


def retry_note(s: ScenarioReport) -> str:
    """``passed on retry k`` (flaky) or ``n attempts`` (retried, still not passed)."""
    if s.status is Status.FLAKY:
        return f' <span class="retry">passed on retry {s.retry}</span>'
    if s.attempts:
        return f' <span class="retry">{s.retry + 1} attempts</span>'
    return ""


def timestamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def anchor(index: int) -> str:
    """The page-local id of the ``index``-th scenario's section."""
    return f"scenario-{index}"
