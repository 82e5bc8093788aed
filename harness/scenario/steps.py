"""A step: named ``try`` / ``catch`` / ``finally`` blocks of operations, like chainsaw's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import Field

from harness.scenario.operations import Operation
from harness.scenario.requirements import Requirements
from harness.scenario.values import Model, PositiveDuration, Text

DEFAULT_STEP_TIMEOUT = 60.0


class Step(Model):
    """``try`` runs in order and stops at the first failure; then ``catch`` runs if it
    failed; ``finally`` always runs. ``timeout`` bounds the whole step."""

    name: Text
    timeout: PositiveDuration = DEFAULT_STEP_TIMEOUT
    try_: tuple[Operation, ...] = Field(alias="try", min_length=1)
    catch: tuple[Operation, ...] = ()
    finally_: tuple[Operation, ...] = Field(default=(), alias="finally")
    bindings: dict[str, Any] = Field(default_factory=dict)
    """``${{ name }}`` values for this step, over the scenario's (substituted when loaded)."""
    requires: Requirements = Field(default_factory=Requirements)
    """Our webhook's features this step needs (:mod:`harness.scenario.requirements`);
    against another webhook it is skipped with the reason, and the scenario goes on."""

    def operations(self) -> Iterator[Any]:
        for _, operations in self.blocks():
            yield from operations

    def blocks(self) -> Iterator[tuple[str, tuple[Any, ...]]]:
        yield "try", self.try_
        yield "catch", self.catch
        yield "finally", self.finally_
