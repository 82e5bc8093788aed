"""Charts are PNG bytes; an empty sample still gives an image."""

from __future__ import annotations

import struct

import pytest

from harness.report.plot import (
    PNG_SIGNATURE,
    latency_histogram_png,
    line_chart_png,
)


def _size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG_SIGNATURE)
    width, height = struct.unpack(">II", png[16:24])  # IHDR
    return width, height


def test_histogram_is_a_png() -> None:
    png = latency_histogram_png([float(v % 37) for v in range(500)])
    assert _size(png) == (640, 280)


def test_no_samples_is_a_small_png() -> None:
    width, height = _size(latency_histogram_png([]))
    assert width < 640 and height < 280


def test_identical_values_still_plot() -> None:
    assert _size(latency_histogram_png([5.0, 5.0, 5.0]))[0] == 640


def test_line_chart() -> None:
    assert _size(line_chart_png([1, 2, 3], {"p99": [1, 10, 100]}, log_y=True))
    with pytest.raises(ValueError, match="2 values for 3"):
        line_chart_png([1, 2, 3], {"p99": [1, 2]})
