"""Invalid scenario files never start clusters: ``watcher-harness run`` and the pytest
plugin refuse them with ``file:line:col`` messages before any process exists.

The ``run`` tests replace everything that could start a process (the runner, asyncio's and
subprocess's process creation) with tripwires, so "nothing started" is checked, not assumed.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import harness.runner
from harness.cli import main

GOOD = """\
name: {name}
clusters: {{skrs: [{{name: skr-a}}]}}
steps:
  - name: spec-patch-reaches-klm
    try:
      - patch: {{cluster: skr-a, resource: kymas, namespace: kyma-system, name: default,
                patch: {{spec: {{channel: fast}}}}}}
      - expect:
          within: 2s
          events: [{{manager: lifecycle-manager, cluster: skr-a, count: {{exactly: 1}}}}]
"""

# (what is wrong, (text replaced, replacement), line:col of the problem)
BAD = [
    ("unknown top-level key", ("name: ", "nme: "), "1:1"),
    ("path-trick manager", ("manager: lifecycle-manager", "manager: ../x"), "10:30"),
    ("encoded-slash manager", ("manager: lifecycle-manager", "manager: a%2Fb"), "10:30"),
    ("unknown cluster", ("cluster: skr-a, resource", "cluster: skr-z, resource"), "6:26"),
    ("bad duration", ("within: 2s", "within: soon"), "9:19"),
    ("wrong type", ("{skrs: [{name: skr-a}]}", "{skrs: 3}"), "2:18"),
    ("YAML syntax", ("steps:\n", "steps: [\n"), ""),
]
LOCATED = re.compile(r"^\S+\.yaml:\d+:\d+: \S")


def _write(tmp_path: Path, wrong: tuple[str, str], name: str = "bad") -> Path:
    text = GOOD.format(name=name)
    old, new = wrong
    assert old in text
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.fixture
def tripwires(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Anything that would start a cluster, a gateway or a process fails the test."""
    calls: list[str] = []

    def trip(what: str) -> Any:
        def tripped(*args: Any, **kwargs: Any) -> Any:
            calls.append(what)
            raise AssertionError(f"{what} called for an invalid scenario")

        return tripped

    monkeypatch.setattr(harness.runner, "run_all", trip("run_all"))
    monkeypatch.setattr(asyncio, "create_subprocess_exec", trip("create_subprocess_exec"))
    monkeypatch.setattr(subprocess, "Popen", trip("subprocess.Popen"))
    return calls


@pytest.mark.parametrize(("what", "wrong", "where"), BAD, ids=[b[0] for b in BAD])
def test_run_refuses_an_invalid_file_before_starting_anything(
    tmp_path: Path,
    tripwires: list[str],
    capsys: pytest.CaptureFixture[str],
    what: str,
    wrong: tuple[str, str],
    where: str,
) -> None:
    bad = _write(tmp_path, wrong)
    good = tmp_path / "good.yaml"
    good.write_text(GOOD.format(name="good"))
    status = main(["run", str(good), str(bad)])  # the valid file does not run either
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2, err
    assert tripwires == []
    assert err and all(LOCATED.match(line) for line in err), err
    assert all(line.startswith(f"{bad}:") for line in err), err
    if where:
        assert any(line.startswith(f"{bad}:{where}: ") for line in err), err


def test_the_tripwires_would_catch_a_start(tmp_path: Path, tripwires: list[str]) -> None:
    """Control: a valid file does reach the runner (and trips the wire)."""
    good = tmp_path / "good.yaml"
    good.write_text(GOOD.format(name="good"))
    with pytest.raises(AssertionError, match="run_all called"):
        main(["run", str(good)])
    assert tripwires == ["run_all"]


def test_the_pytest_plugin_refuses_an_invalid_file_at_collection(tmp_path: Path) -> None:
    """The scenario plugin in a fresh pytest: a collection error, so no item ever runs."""
    _write(tmp_path, ("manager: lifecycle-manager", "manager: ../x"))
    (tmp_path / "conftest.py").write_text(
        "from harness.runner.pytest_plugin import pytest_collect_file, pytest_configure\n"
        "__all__ = ['pytest_collect_file', 'pytest_configure']\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - start
    assert result.returncode == 2, result.stdout + result.stderr  # interrupted: collection
    assert f"{tmp_path / 'bad.yaml'}:10:30: " in result.stdout, result.stdout
    assert "error" in result.stdout.splitlines()[-1]
    assert " passed" not in result.stdout and " failed" not in result.stdout
    assert elapsed < 30  # a scenario that started clusters takes longer than its timeout
