"""Reading process logs for a report (the one I/O step before the pure writers render).

Writers take log text as a mapping ``log path → tail``; :func:`read_log_tails` fills it
at render time for the scenarios a person will look at (those that did not pass).
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from harness.report.model import RunReport

DEFAULT_TAIL_LINES = 200

LogTails = dict[Path, str]


def read_tail(path: Path, lines: int = DEFAULT_TAIL_LINES) -> str | None:
    """The last ``lines`` lines of ``path`` (undecodable bytes replaced); None if unreadable."""
    try:
        with path.open("rb") as f:
            tail = deque(f, maxlen=lines)
    except OSError:
        return None
    return b"".join(tail).decode("utf-8", "replace").rstrip("\n")


def read_log_tails(
    report: RunReport, *, lines: int = DEFAULT_TAIL_LINES, failed_only: bool = True
) -> LogTails:
    """Tails of the logs of every process of every scenario that did not pass.

    A log that cannot be read (deleted temp dir, permissions) is left out; writers say so.
    """
    tails: LogTails = {}
    for scenario in report.scenarios:
        if failed_only and scenario.ok:
            continue
        for process in scenario.processes:
            if process.log_path in tails:
                continue
            text = read_tail(process.log_path, lines)
            if text is not None:
                tails[process.log_path] = text
    return tails
