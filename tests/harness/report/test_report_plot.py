"""Charts are PNG bytes; an empty sample still gives an image."""

from __future__ import annotations

import struct

import pytest

from harness.report.plot import (
    PNG_SIGNATURE,
    bar_chart_png,
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


def test_generic_charts() -> None:
    assert _size(bar_chart_png(["a", "b"], {"p50": [1, 2], "p99": [3, 4]}, title="t"))
    assert _size(line_chart_png([1, 2, 3], {"p99": [1, 10, 100]}, log_y=True))
    with pytest.raises(ValueError, match="2 values for 3"):
        line_chart_png([1, 2, 3], {"p99": [1, 2]})
    with pytest.raises(ValueError, match="1 values for 2 labels"):
        bar_chart_png(["a", "b"], {"x": [1]})
