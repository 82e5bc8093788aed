"""``watcher-harness run``: invalid files never start anything; exit codes; summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main

BROKEN = """name: broken
clusters: {skrs: [{name: skr-a}]}
steps:
  - name: a
    timeout: soon
    try: [{wait: 1s}]
"""


def test_a_broken_file_gives_one_located_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.runner.run as run_module

    async def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("an invalid file started a run")

    monkeypatch.setattr(run_module, "run_all", must_not_run)
    good = tmp_path / "good.yaml"
    good.write_text(
        "name: good\nclusters: {skrs: [{name: skr-a}]}\nsteps: [{name: a, try: [{wait: 1}]}]\n"
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text(BROKEN)
    code = main(["run", str(good), str(broken), "--report-dir", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{broken}:5:14: ")
    assert "invalid duration 'soon'" in lines[0]
    assert out == ""
    assert not (tmp_path / "r").exists()


def test_an_empty_directory_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path)]) == 2
    assert "no scenario files" in capsys.readouterr().err
