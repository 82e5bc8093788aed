"""How the HTML report writes values, shared by the page and its scenario sections.

Every value from the run goes through :func:`esc`: ANSI colours and control characters
stripped (logs have them), then ``html.escape``. Status badges, times and section anchors
are formatted here so that the summary and the sections agree.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import escape

from harness.report.model import ScenarioReport, Status

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
