"""Soak report: JSON document, Markdown rendering, the RSS/fd plot, and the pieces that
read processes (``/proc`` readings)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.soak.config import SoakConfig
from harness.soak.model import Growth, OracleCounts, Sample, decide
from harness.soak.plot import PNG_SIGNATURE, rss_fd_png
from harness.soak.progress import SoakProgress
from harness.soak.report import render_markdown
from harness.soak.result import ProcessInfo, SoakResult, latency_summary, to_json
from harness.soak.sampler import (
    Target,
    command_name,
    established_inodes,
    fd_counts,
    read,
)

MIB = 1024 * 1024


def result(*, missing: int = 0, webhook_end: int = 41 * MIB) -> SoakResult:
    config = SoakConfig(duration=100, min_warmup=20, interval=10)
    samples = tuple(
        Sample(t, name, pid, rss, fds)
        for t in range(0, 101, 10)
        for name, pid, rss, fds in (
            ("webhook/skr-a", 11, 40 * MIB if t < 90 else webhook_end, 11),
            ("harness", 12, 100 * MIB + t * MIB, 20 + t // 10),
        )
    )
    growths = (
        Growth("webhook/skr-a", "watcher", 40 * MIB, webhook_end, 11, 11, 11, 12, 11, False),
        Growth("harness", "info", 120 * MIB, 195 * MIB, 22, 29, 23, 30, 11, False),
    )
    oracle = OracleCounts(100, 100, 1, 0, 70, 30, 70, 30 - missing, missing, 0, 0, 0, 0)
    criteria = decide(oracle, growths, target_rate=50, achieved=49.5)
    return SoakResult(
        config=config,
        started_at=1_700_000_000.0,
        elapsed=101.2,
        achieved_rate=49.5,
        samples=samples,
        processes=(
            ProcessInfo("webhook/skr-a", "watcher", 11, "watcher-webhook"),
            ProcessInfo("harness", "info", 12, "python"),
        ),
        growths=growths,
        oracle=oracle,
        latency_ms=latency_summary([0.005, 0.007, 0.020]),
        criteria=criteria,
        findings=("missing: manager=m runtime=r object=default/x (ConfigMap)",) if missing else (),
        machine={"cores": 2, "load_1min": 1.5, "python": "3.11", "platform": "Linux"},
    )


def test_json_document_holds_every_figure_and_round_trips() -> None:
    doc = json.loads(json.dumps(to_json(result(), command="make soak")))
    assert doc["passed"] is True
    assert doc["date"] == "2023-11-14 22:13:20 UTC"
    assert doc["oracle"]["writes_ok"] == 99
    webhook = next(p for p in doc["processes"] if p["name"] == "webhook/skr-a")
    assert webhook["rss_growth"] == pytest.approx(0.025)
    assert webhook["fd_growth"] == 0
    assert webhook["command"] == "watcher-webhook"
    assert doc["windows_s"] == {"warmup": 20, "first_end": 30, "last_start": 90, "end": 100}
    assert len(doc["samples"]["by_process"]["harness"]) == 11
    assert doc["latency_ms"] == {"count": 3, "p50": 7.0, "p99": 20.0, "max": 20.0}


def test_markdown_shows_verdict_tables_and_method() -> None:
    text = render_markdown(to_json(result(), command="make soak"))
    assert "**PASSED** — every criterion held." in text
    assert "| webhook/skr-a (watcher-webhook) | yes | 40.0 | 41.0 | +2.5 % | 11 | 11 | +0 |" in text
    assert "| harness (python) | info | 120.0 | 195.0 | +62.5 % |" in text
    assert "| writes sent / accepted / failed | 100 / 99 / 1 |" in text
    assert "| send decisions minus events received (see Method) | 0 |" in text
    assert "p50 7 ms, p99 20 ms, max 20 ms (n=3)" in text
    assert "![RSS and open file descriptors over time](soak-rss.png)" in text
    assert "`make soak`" in text and "2 cores" in text


def test_markdown_names_failed_criteria_findings_and_notes() -> None:
    doc = {**to_json(result(missing=2, webhook_end=48 * MIB), command="x"), "notes": ["n1"]}
    text = render_markdown(doc)
    assert "## Notes\n\n- n1\n" in text
    assert text.startswith("# Soak")
    assert "**FAILED** — failed: oracle: nothing missing, webhook/skr-a: RSS growth." in text
    assert "| webhook/skr-a: RSS growth | < 10% | +20.0% | **no** |" in text
    assert "- missing: manager=m runtime=r object=default/x (ConfigMap)" in text


def test_plot_is_a_png_and_skips_processes_without_readings() -> None:
    doc = to_json(result(), command="x")
    by_process = {**doc["samples"]["by_process"], "gone": [[0.0, None, None, None]]}
    png = rss_fd_png(by_process, doc["windows_s"], title="t")
    assert png.startswith(PNG_SIGNATURE) and len(png) > 5000


def test_reading_this_process_from_proc() -> None:
    pid = os.getpid()
    sample = read(Target("me", "info", os.getpid), 1.5)
    assert sample.pid == pid and sample.t == 1.5
    assert sample.rss is not None and sample.rss > MIB
    assert sample.fds is not None and sample.fds >= 3
    assert fd_counts(2**31 - 1, frozenset()) == (None, None)
    assert command_name(pid) != ""
    assert read(Target("gone", "info", lambda: None), 0).rss is None


def test_progress_prints_a_short_plain_line_when_not_on_a_terminal() -> None:
    import io

    from rich.console import Console

    out = io.StringIO()
    progress = SoakProgress(Console(file=out, width=200), every=0)
    progress.start(10)
    progress.wrote(True)
    progress.wrote(False)
    progress.sampled(
        [Sample(1, "webhook/skr-a", 1, 40 * MIB, 12), Sample(1, "envoy", 2, MIB, 30)], 7
    )
    progress.close()
    assert "2/10 writes  7 events, 1 failed; webhooks <= 40.0 MiB, <= 12 fds" in out.getvalue()


def test_established_inodes_come_from_tcp_and_tcp6(tmp_path: Path) -> None:
    net = tmp_path / "net"
    net.mkdir()
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
    head += "timeout inode\n"
    row = "   {n}: 0100007F:1F90 0100007F:C350 {st} 00000000:00000000 00:00000000 00000000 "
    row += "0 0 {ino} 1\n"
    (net / "tcp").write_text(
        head + row.format(n=0, st="01", ino=111) + row.format(n=1, st="0A", ino=222)
    )
    (net / "tcp6").write_text(
        head + row.format(n=0, st="08", ino=333) + row.format(n=1, st="01", ino=444)
    )
    assert established_inodes(tmp_path) == {"111", "444"}
    assert established_inodes(tmp_path / "nowhere") == frozenset()


def test_fd_counts_tell_established_connections_from_other_descriptors() -> None:
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    try:
        total, connections = fd_counts(os.getpid(), established_inodes())
        assert total is not None and connections is not None
        assert connections >= 2  # both ends live in this process
        assert total - connections >= 4  # stdio and the listening socket at least
        sample = Sample(0, "me", os.getpid(), 1, total, connections)
        assert sample.other_fds == total - connections
    finally:
        for s in (client, accepted, server):
            s.close()
    assert fd_counts(2**31 - 1, frozenset()) == (None, None)
