"""Scenario files as pytest items (run in a child pytest against the fake session)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
CONFTEST = f"""
import functools
import sys

sys.path.insert(0, {str(HERE)!r})
from runner_fake import FakeSession, opener

import harness.runner.pytest_plugin as plugin
from harness.runner.pytest_plugin import (
    pytest_addoption, pytest_collect_file, pytest_configure, pytest_sessionfinish,
    pytest_sessionstart,
)

plugin.RunOptions = functools.partial(plugin.RunOptions, open_session=opener(FakeSession()))
"""
PASSING = """name: passing
clusters: {skrs: [{name: skr-a}]}
steps:
  - name: a
    try:
      - wait: 10ms
      - expect:
          within: 10ms
          events: [{manager: lifecycle-manager, cluster: skr-a, count: {exactly: 0}}]
"""
UNCHECKED = """name: unchecked
clusters: {skrs: [{name: skr-a}]}
steps: [{name: a, try: [{wait: 10ms}]}]
"""
FAILING = """name: failing
clusters: {skrs: [{name: skr-a}]}
steps:
  - name: quiet
    try:
      - expect:
          within: 100ms
          events: [{manager: lifecycle-manager, cluster: skr-a}]
"""
BROKEN = "name: broken\nclusters: {skrs: [{name: skr-a}]}\nsteps: [{name: a, tyr: []}]\n"


def pytest_run(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "e2e", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_each_file_is_an_e2e_item_and_failures_show_expectations(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "passing.yaml").write_text(PASSING)
    (tmp_path / "failing.yaml").write_text(FAILING)
    (tmp_path / "unchecked.yaml").write_text(UNCHECKED)
    reports = tmp_path / "reports"
    result = pytest_run(
        tmp_path,
        "-rs",
        "--junitxml",
        str(tmp_path / "junit.xml"),
        "--scenario-report-dir",
        str(reports),
    )
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "1 failed, 1 passed, 1 skipped" in out
    assert "checked nothing" in out, out
    assert "scenario failing failed:" in out
    assert "failing/quiet/1-events: expected at least 1 event, got 0" in out, out
    assert "Traceback" not in out and "runtest" not in out
    assert (tmp_path / "junit.xml").is_file()
    assert (reports / "index.html").is_file()
    assert "failing" in (reports / "report.json").read_text()
    assert "passing" in (reports / "report.json").read_text()
    statuses = {s["name"]: s["status"] for s in json.loads(
        (reports / "report.json").read_text())["scenarios"]}  # fmt: skip
    assert statuses == {"failing": "failed", "passing": "passed", "unchecked": "skipped"}


def test_without_the_e2e_marker_nothing_is_selected(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "passing.yaml").write_text(PASSING)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "not e2e"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert "1 deselected" in result.stdout, result.stdout


def test_a_broken_file_is_a_collection_error_with_its_location(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "broken.yaml").write_text(BROKEN)
    result = pytest_run(tmp_path)
    assert result.returncode != 0
    assert "broken.yaml:3:19: unknown key 'tyr' in step 'a'; did you mean 'try'?" in result.stdout
