"""The committed JSON Schema is the one the model generates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.scenario.schema import render, scenario_schema

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "docs" / "scenario.schema.json"


def test_committed_schema_is_current() -> None:
    assert COMMITTED.read_text() == render(), (
        "docs/scenario.schema.json is stale; regenerate it with "
        "`.venv/bin/python -m harness.scenario.schema > docs/scenario.schema.json`"
    )


def test_module_prints_the_schema() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "harness.scenario.schema"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    assert json.loads(out) == scenario_schema()


def test_schema_describes_the_yaml_keys() -> None:
    schema = scenario_schema()
    step = schema["$defs"]["Step"]["properties"]
    assert {"try", "catch", "finally", "timeout", "name"} <= set(step)
    assert schema["additionalProperties"] is False
    assert "labelsToWatch" in schema["$defs"]["WatcherDef"]["properties"]
    duration = schema["properties"]["timeout"]
    assert {"type": "number", "minimum": 0} in duration["anyOf"]
