"""harness.bench.spool's embedded loss scenarios are valid scenario files."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.bench.spool import SCENARIOS
from harness.scenario import load_scenario


@pytest.mark.parametrize("key", sorted(SCENARIOS))
def test_loss_scenarios_load_and_end_with_a_truth_check(key: str, tmp_path: Path) -> None:
    path = tmp_path / f"{key}.yaml"
    path.write_text(SCENARIOS[key])
    scenario = load_scenario(path)
    assert scenario.name == f"spool-loss-{key}"
    (step,) = scenario.steps
    assert "kill" in step.name
    text = SCENARIOS[key]
    assert "{action: kill, target: webhook/skr-a}" in text
    assert text.rstrip().endswith("truth: {manager: lifecycle-manager}")
