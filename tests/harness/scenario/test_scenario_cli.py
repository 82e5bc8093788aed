"""``watcher-harness validate`` / ``list`` as a user runs them: a subprocess, exit codes,
one line per problem, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BROKEN = """\
name: broken
clusters:
  skrs: [{name: skr-a}]
steps:
  - name: first
    tyr:
      - wait: 1s
"""


def harness(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_broken_file_gives_one_located_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN.replace("    tyr:\n", "    try:\n").replace("wait: 1s", "wiat: 1s"))
    result = harness("validate", path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{path}:7:9: step 'first', try[0]: unknown operation 'wiat'; did you mean 'wait'? "
        "(operations: apply, patch, delete, churn, fault, wait, expect, watcher, request, "
        "assert, error, script, collect, set)"
    ]
    assert "Traceback" not in result.stderr


def test_yaml_syntax_error_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "syntax.yaml"
    path.write_text("name: x\nclusters: {skrs: [\n")
    result = harness("validate", path)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}:3:1: YAML syntax error:")


def test_every_problem_of_every_file(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(BROKEN)
    (tmp_path / "b.yaml").write_text(BROKEN)
    result = harness("validate", tmp_path, ROOT / "scenarios" / "spec-watch.yaml")
    assert result.returncode == 2
    assert result.stdout.splitlines() == [f"ok: {ROOT / 'scenarios' / 'spec-watch.yaml'}"]
    assert result.stderr.splitlines() == [
        f"{tmp_path / name}:{pos}"
        for name in ("a.yaml", "b.yaml")
        for pos in (
            "5:5: missing key 'try' in step 'first'",
            "6:5: unknown key 'tyr' in step 'first'; did you mean 'try'?",
        )
    ]


def test_examples_are_valid() -> None:
    result = harness("validate", ROOT / "scenarios")
    assert result.returncode == 0, result.stderr
    assert "ok: " in result.stdout and result.stderr == ""


def test_duplicate_names_across_files(tmp_path: Path) -> None:
    text = (ROOT / "scenarios" / "spec-watch.yaml").read_text()
    (tmp_path / "one.yaml").write_text(text)
    (tmp_path / "two.yaml").write_text(text)
    result = harness("validate", tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{tmp_path / 'two.yaml'}: scenario name 'spec-watch' is already used by "
        f"{tmp_path / 'one.yaml'}; scenario names must be unique"
    ]


def test_missing_path_and_empty_directory(tmp_path: Path) -> None:
    result = harness("validate", tmp_path / "nope.yaml", tmp_path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{tmp_path}: no scenario files (*.yaml, *.yml) in this directory",
        f"{tmp_path / 'nope.yaml'}: cannot read the file: No such file or directory",
    ]


def test_list() -> None:
    result = harness("list", ROOT / "scenarios")
    assert result.returncode == 0, result.stderr
    first = next(line for line in result.stdout.splitlines() if line.startswith("spec-watch "))
    assert "[smoke,spec]" in first and "KLM's default Watcher" in first
