"""``python -m harness.soak``: flags, the command line shown in the report, and refusing a
duration without room for the windows before anything starts."""

from __future__ import annotations

import pytest

from harness.soak.cli import build_parser, config_from, describe_command, main


def test_defaults_are_ten_minutes_at_50_writes_per_second_over_3_skrs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SOAK_DURATION", raising=False)
    config = config_from(build_parser().parse_args([]))
    assert (config.duration, config.rate, config.skrs) == (600, 50, 3)
    assert config.churn_spec().per_cluster * 3 == 30_000


def test_soak_duration_sets_the_default_and_the_flag_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOAK_DURATION", "120")
    assert config_from(build_parser().parse_args([])).duration == 120
    assert config_from(build_parser().parse_args(["--duration", "90"])).duration == 90


def test_command_shows_make_when_make_ran_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAKELEVEL", raising=False)
    assert describe_command(["--duration", "30"]) == "python -m harness.soak --duration 30"
    monkeypatch.setenv("MAKELEVEL", "1")
    monkeypatch.setenv("SOAK_DURATION", "600")
    assert describe_command([]) == "SOAK_DURATION=600 make soak"
    assert describe_command(["--note", "a b", "--seed", "3", "--note=c"]) == (
        "SOAK_DURATION=600 make soak SOAK_ARGS='--seed 3'"
    )


def test_too_short_a_run_exits_2_without_starting_anything(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--duration", "10"]) == 2
    assert "fewer than two samples at the 2 s sampling period" in capsys.readouterr().err
