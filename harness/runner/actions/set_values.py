"""``set``: give names values for the rest of the run (bindings and captured values in
them are already filled in by the step runner)."""

from __future__ import annotations

from typing import Any

from harness.runner.context import RunContext


async def run(ctx: RunContext, values: dict[str, Any]) -> None:
    ctx.capture(dict(values), "set")
