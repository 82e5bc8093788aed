"""Durations: strings with units or numbers of seconds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.scenario import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("2s", 2.0),
        ("1m", 60.0),
        ("1h", 3600.0),
        ("1m30s", 90.0),
        ("1.5s", 1.5),
        (3, 3.0),
        (0.25, 0.25),
        ("0s", 0.0),
    ],
)
def test_parse(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "bad", ["5", "5 minutes", "2x", "-1s", "", True, None, [], -3, float("inf")]
)
def test_invalid(bad: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(bad)


@given(st.integers(min_value=0, max_value=10**7).map(lambda ms: ms / 1000))
def test_format_round_trips(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds)
