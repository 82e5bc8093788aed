"""The scenario JSON Schema, generated from the model: ``python -m harness.scenario.schema``.

Editors use it for completion and checks (``# yaml-language-server: $schema=...``);
``docs/scenario.schema.json`` is this module's output, and a test keeps them equal.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from harness.scenario.model import Scenario

SCHEMA_ID = "https://github.com/kyma-project/runtime-watcher/harness/scenario.schema.json"


def scenario_schema() -> dict[str, Any]:
    schema = Scenario.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
    }


def render() -> str:
    return json.dumps(scenario_schema(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
