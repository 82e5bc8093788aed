"""``watcher-harness run|list --selector EXPR``: only the matching scenarios are run or
listed; a selection matching none, or a malformed selector, exits 2 with one line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import harness.runner
from harness.cli import main
from harness.report import ReportBuilder, Status, WrittenReports
from harness.runner import RunResult, ScenarioPlan


def scenario(name: str, *tags: str) -> str:
    return (
        f"name: {name}\ntags: [{', '.join(tags)}]\nclusters: {{skrs: [{{name: skr-a}}]}}\n"
        "steps: [{name: a, try: [{wait: 10ms}]}]\n"
    )


@pytest.fixture
def library(tmp_path: Path) -> Path:
    (tmp_path / "cert-rotation.yaml").write_text(scenario("cert-rotation", "cert-rotation", "slow"))
    (tmp_path / "spec-watch.yaml").write_text(scenario("spec-watch", "smoke", "spec"))
    (tmp_path / "spec-status.yaml").write_text(scenario("spec-status", "spec", "slow"))
    return tmp_path


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the scenarios ``run`` hands to the runner (which runs nothing)."""
    names: list[str] = []

    async def fake_run_all(plans: Sequence[ScenarioPlan], **kwargs: Any) -> RunResult:
        builder = ReportBuilder("r")
        for s in (p.scenario for p in plans):
            names.append(s.name)
            builder.scenario(s.name, s.source or "").finish(Status.PASSED)
        return RunResult(builder.build(), WrittenReports())

    monkeypatch.setattr(harness.runner, "run_all", fake_run_all)
    monkeypatch.delenv("WATCHER_HARNESS_BACKEND", raising=False)
    return names


def test_run_runs_only_what_every_selector_matches(
    library: Path, ran: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", str(library), "--selector", "tag=slow", "--selector", "name!=cert-*"])
    assert code == 0, capsys.readouterr().err
    assert ran == ["spec-status"]


def test_run_with_a_selection_matching_nothing_exits_2_with_one_line(
    library: Path, ran: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(library), "--selector", "tag=nightly"]) == 2
    out, err = capsys.readouterr()
    assert ran == [] and out == ""
    assert err == (
        "watcher-harness run: --selector tag=nightly matches none of the 3 scenarios given\n"
    )


def test_run_with_a_malformed_selector_exits_2_before_reading_files(
    tmp_path: Path, ran: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(tmp_path / "missing.yaml"), "--selector", "tags=slow"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "watcher-harness run: --selector: selector 'tags=slow': unknown key 'tags'; did you "
        "mean 'tag'? (write tag=PATTERN, tag!=PATTERN, name=PATTERN or name!=PATTERN)"
    ]
    assert ran == []


def test_an_invalid_file_stops_the_run_even_when_not_selected(
    library: Path, ran: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    (library / "broken.yaml").write_text("name: broken\n")
    assert main(["run", str(library), "--selector", "tag=smoke"]) == 2
    assert ran == []
    assert all(
        line.startswith(str(library / "broken.yaml"))
        for line in capsys.readouterr().err.splitlines()
    )


def test_list_shows_only_the_selected(library: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", str(library), "--selector", "tag=spec"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == ["spec-status", "spec-watch"]
    assert main(["list", str(library), "--selector", "name=*-watch"]) == 0
    assert capsys.readouterr().out.startswith("spec-watch  [smoke,spec]")


def test_list_selecting_nothing_exits_2_with_one_line(
    library: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["list", str(library), "--selector", "tag!=slow", "--selector", "tag!=smoke"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "watcher-harness list: --selector tag!=slow and tag!=smoke matches none of the 3 "
        "scenarios given\n"
    )
