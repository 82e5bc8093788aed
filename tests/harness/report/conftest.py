"""Fixtures of the report tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_kit import make_sample_report

from harness.report import RunReport


@pytest.fixture
def sample_report(tmp_path: Path) -> RunReport:
    logs = tmp_path / "logs"
    logs.mkdir()
    return make_sample_report(logs)
