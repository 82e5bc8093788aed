"""The ``frozen`` fixture: the matching functions' clock stopped at ``functions_kit.NOW``."""

from __future__ import annotations

import pytest
from functions_kit import NOW_EPOCH

from harness.matching import functions


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(functions, "clock", lambda: float(NOW_EPOCH))
    return float(NOW_EPOCH)
