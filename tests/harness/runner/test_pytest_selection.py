"""The pytest plugin: a marker per scenario tag (``-m "e2e and cert_rotation"``, also with
``--strict-markers``), ``--scenario-selector`` and ``--scenario-retries`` (run in a child
pytest against the fake session)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from flaky_fake import FLAKY

from harness.runner.pytest_plugin import pytest_configure, tag_marker

HERE = Path(__file__).parent
CONFTEST = f"""
import functools
import sys

sys.path.insert(0, {str(HERE)!r})
from flaky_fake import FlakyOpener

import harness.runner.pytest_plugin as plugin
from harness.runner.pytest_plugin import (
    pytest_addoption, pytest_collect_file, pytest_configure, pytest_sessionfinish,
    pytest_sessionstart,
)

plugin.RunOptions = functools.partial(plugin.RunOptions, open_session=FlakyOpener({{failures}}))
"""


def scenario(name: str, *tags: str) -> str:
    return (
        f"name: {name}\ntags: [{', '.join(tags)}]\nclusters: {{skrs: [{{name: skr-a}}]}}\n"
        "steps: [{name: a, try: [{wait: 10ms}, "
        "{expect: {within: 10ms, events: [{manager: lifecycle-manager, cluster: skr-a, "
        "count: {exactly: 0}}]}}]}]\n"
    )


def library(directory: Path, failures: int = 0) -> None:
    (directory / "conftest.py").write_text(CONFTEST.format(failures=failures))
    (directory / "rotation.yaml").write_text(scenario("cert-rotation", "cert-rotation", "slow"))
    (directory / "spec.yaml").write_text(scenario("spec-watch", "smoke"))
    (directory / "plain.yaml").write_text(scenario("plain"))


def pytest_run(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", *args],
        cwd=directory, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_tag_markers_and_the_scenario_selector_both_select(tmp_path: Path) -> None:
    """``-m`` on the tag markers drops ``plain`` (strict markers: they are registered),
    ``--scenario-selector`` drops ``cert-rotation``; only ``spec-watch`` is left."""
    library(tmp_path)
    result = pytest_run(
        tmp_path,
        "--strict-markers",
        "-m", "e2e and (smoke or cert_rotation)",
        "--scenario-selector", "tag!=slow",
        "--scenario-selector", "name=*-*",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "spec.yaml::spec-watch PASSED" in result.stdout
    assert "1 passed, 2 deselected" in result.stdout


def test_a_malformed_scenario_selector_is_a_usage_error() -> None:
    class Options:
        def getoption(self, name: str, default: object = None) -> object:
            return ["tag"] if name == "--scenario-selector" else default

        def addinivalue_line(self, name: str, line: str) -> None:
            pass

        def getini(self, name: str) -> list[str]:
            return []

    config = Options()
    config.stash = pytest.Stash()  # type: ignore[attr-defined]
    with pytest.raises(pytest.UsageError, match="--scenario-selector: selector 'tag' has no"):
        pytest_configure(config)  # type: ignore[arg-type]


def test_a_scenario_passing_on_a_retry_passes_and_is_flaky(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST.format(failures=1))
    (tmp_path / "ready.yaml").write_text(FLAKY)
    reports = tmp_path / "reports"
    result = pytest_run(
        tmp_path,
        "-p", "no:xdist",
        "--scenario-retries", "1",
        "--scenario-report-dir", str(reports),
        "--junitxml", str(tmp_path / "junit.xml"),
    )  # fmt: skip
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "1 passed" in out
    assert "PASSED (flaky: passed on retry 1)" in out
    assert "FLAKY sometimes-ready passed on retry 1" in out
    (scenario,) = json.loads((reports / "report.json").read_text())["scenarios"]
    assert scenario["status"] == "flaky"
    assert [a["status"] for a in scenario["attempts"]] == ["failed"]
    assert "passed on retry 1" in (reports / "index.html").read_text()
    props = {
        p.get("name"): p.get("value") for p in ET.parse(tmp_path / "junit.xml").iter("property")
    }
    assert props == {"attempts": "2", "flaky": "passed on retry 1"}


def test_tags_named_like_pytest_markers_are_prefixed() -> None:
    assert tag_marker("cert-rotation") == "cert_rotation"
    assert tag_marker("skip") == "tag_skip"
    assert tag_marker("timeout") == "tag_timeout"
