"""``watcher-harness run`` end to end: a real environment runs scenarios/spec-watch.yaml."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.clusters.binaries import Binaries

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(400)]

ROOT = Path(__file__).resolve().parents[3]
CLI = [sys.executable, "-m", "harness.cli"]


@pytest.mark.exclusive  # spec-watch bounds latencies
def test_spec_watch_runs_through_the_cli_with_reports(
    tmp_path: Path, cluster_binaries: Binaries
) -> None:
    junit = tmp_path / "junit.xml"
    reports = tmp_path / "reports"
    result = subprocess.run(
        [*CLI, "run", str(ROOT / "scenarios" / "spec-watch.yaml"), "--junit", str(junit),
         "--report-dir", str(reports)],
        cwd=ROOT, capture_output=True, text=True, timeout=360, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "spec-watch" in result.stdout and "passed" in result.stdout
    assert f"HTML report: {reports / 'index.html'}" in result.stdout
    assert (reports / "index.html").is_file()
    report = json.loads((reports / "report.json").read_text())
    (scenario,) = report["scenarios"]
    assert scenario["status"] == "passed"
    assert {e["kind"] for e in scenario["expectations"]} >= {"events", "truth", "latency"}
    assert scenario["processes"] and all(
        Path(p["log_path"]).is_file() for p in scenario["processes"]
    )
    assert 'name="spec-watch/spec-patch-reaches-klm/1-events"' in junit.read_text()


def test_a_broken_scenario_exits_2_with_one_located_line_and_starts_nothing(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "name: broken\nclusters: {skrs: [{name: skr-a}]}\n"
        "steps: [{name: a, try: [{patch: {cluster: skr-z, resource: kymas, name: x, "
        "patch: {}}}]}]\n"
    )
    started = time.monotonic()
    result = subprocess.run(
        [*CLI, "run", str(broken), "--report-dir", str(tmp_path / "reports")],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{broken}:3:")
    assert "unknown cluster 'skr-z'" in lines[0]
    assert result.stdout == ""
    assert not (tmp_path / "reports").exists()
    assert time.monotonic() - started < 30


@pytest.mark.skipif(
    __import__("os").geteuid() != 0, reason="the webhook's network namespace needs root"
)
def test_the_library_runs_against_another_webhook_and_says_what_it_skips(
    tmp_path: Path, cluster_binaries: Binaries
) -> None:
    """Bring your own webhook inside `make e2e`: our webhook started as a foreign command
    (upstream's environment contract, sync mode) passes a scenario that needs nothing of
    ours, and a scenario that needs async delivery is skipped with that reason (`make
    e2e-byo` runs the whole library this way)."""
    command = f"env WATCHER_DELIVERY_MODE=sync {Path(sys.executable).parent / 'watcher-webhook'}"
    reports = tmp_path / "reports"
    result = subprocess.run(
        [*CLI, "run", str(ROOT / "scenarios" / "wrong-san.yaml"),
         str(ROOT / "scenarios" / "kcp-outage.yaml"), "--keep-going",
         "--webhook-command", command, "--report-dir", str(reports)],
        cwd=ROOT, capture_output=True, text=True, timeout=360, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((reports / "report.json").read_text())
    status = {s["name"]: s for s in report["scenarios"]}
    assert status["wrong-san"]["status"] == "passed"
    assert status["kcp-outage"]["status"] == "skipped"
    assert "needs our webhook's async-delivery" in status["kcp-outage"]["error"]
    webhook_logs = [
        p for p in status["wrong-san"]["processes"] if p["name"].startswith("watcher-webhook")
    ]
    assert webhook_logs and all("harness.skr.isolate" in p["argv"] for p in webhook_logs)
