"""Scenario errors: each one names the file, line and column and says what to change."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import HarnessError


@dataclass(frozen=True)
class Location:
    """Where a problem is: ``file`` and, when known, 1-based ``line`` and ``column``."""

    file: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        if self.line is None:
            return self.file
        if self.column is None:
            return f"{self.file}:{self.line}"
        return f"{self.file}:{self.line}:{self.column}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


class ScenarioError(HarnessError, ValueError):
    """One problem in a scenario file; ``str()`` is ``file:line:column: what; hint``."""

    def __init__(self, message: str, *, location: Location, hint: str = "") -> None:
        self.message = _one_line(message)
        self.hint = _one_line(hint)
        self.location = location
        super().__init__(self.line())

    def line(self) -> str:
        text = f"{self.location}: {self.message}"
        return f"{text}; {self.hint}" if self.hint else text


class InvalidScenario(ScenarioError):
    """Every problem found in one or more files; ``str()`` has one line per problem."""

    def __init__(self, errors: Sequence[ScenarioError]) -> None:
        if not errors:
            raise ValueError("InvalidScenario needs at least one error")
        self.errors: tuple[ScenarioError, ...] = tuple(
            e
            for err in errors
            for e in (err.errors if isinstance(err, InvalidScenario) else (err,))
        )
        first = self.errors[0]
        super().__init__(first.message, location=first.location, hint=first.hint)
        self.args = ("\n".join(e.line() for e in self.errors),)

    def __str__(self) -> str:
        return "\n".join(e.line() for e in self.errors)
