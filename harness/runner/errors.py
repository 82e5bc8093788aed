"""The runner's exception tree: what can go wrong while a scenario runs."""

from __future__ import annotations

from collections.abc import Sequence

from harness.errors import HarnessError


class RunnerError(HarnessError):
    """Base of every error the scenario runner raises on purpose."""


class OperationFailed(RunnerError):
    """An operation of a step failed; the message says which and why."""


class ExpectationFailed(OperationFailed):
    """An ``expect`` did not hold by its deadline; ``failures`` are the report lines."""

    def __init__(self, failures: Sequence[str]) -> None:
        self.failures = tuple(failures)
        super().__init__("; ".join(self.failures))
