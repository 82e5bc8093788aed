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
