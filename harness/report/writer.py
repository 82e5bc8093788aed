"""Writing a run's reports to disk: the one place here that reads logs and writes files.

``write_reports`` reads the log tails of scenarios that did not pass (the pure writers
take them as a mapping ``log path → tail``), draws the latency histograms, renders with
the pure writers and writes each file atomically (temp file in the same directory, then
rename), so a reader never sees half a report.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from harness.report.html import render_html
from harness.report.junit import render_junit
from harness.report.model import RunReport
from harness.report.plot import latency_histogram_png

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


INDEX_HTML = "index.html"
REPORT_JSON = "report.json"


@dataclass(frozen=True)
class WrittenReports:
    """Paths of what :func:`write_reports` wrote (None: not asked for)."""

    html: Path | None = None
    json: Path | None = None
    junit: Path | None = None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file and rename; parents are created."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # what open() would give, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def histograms(report: RunReport) -> dict[str, bytes]:
    """Latency histogram PNGs, per scenario name, for the scenarios that have samples."""
    return {
        s.name: latency_histogram_png(s.latencies_ms, title=f"{s.name}: delivery latency")
        for s in report.scenarios
        if s.latencies_ms
    }


def write_reports(
    report: RunReport,
    *,
    report_dir: Path | None = None,
    junit: Path | None = None,
    json_path: Path | None = None,
    log_lines: int = DEFAULT_TAIL_LINES,
) -> WrittenReports:
    """Write what is asked for: ``report_dir/index.html`` + ``report_dir/report.json``,
    a JUnit file, and/or a JSON file elsewhere. Returns the paths written."""
    tails = read_log_tails(report, lines=log_lines) if (report_dir or junit) else {}
    html_path = json_out = junit_out = None
    json_text = report.to_json() if (report_dir or json_path) else ""
    if report_dir is not None:
        html_path = Path(report_dir) / INDEX_HTML
        write_text_atomic(
            html_path, render_html(report, histograms=histograms(report), log_tails=tails)
        )
        json_out = Path(report_dir) / REPORT_JSON
        write_text_atomic(json_out, json_text)
    if json_path is not None:
        json_out = Path(json_path)
        write_text_atomic(json_out, json_text)
    if junit is not None:
        junit_out = Path(junit)
        write_text_atomic(junit_out, render_junit(report, log_tails=tails))
    return WrittenReports(html=html_path, json=json_out, junit=junit_out)
