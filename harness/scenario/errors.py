"""Scenario errors: each one names the file, line and column and says what to change.

Checks that read the data, not the file (bindings, cross-references), report a
:class:`Problem` at a path of YAML keys and list indexes; the loader locates it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.errors import HarnessError

Loc = tuple[str | int, ...]
"""The YAML keys and list indexes from the top of a scenario to one value."""


@dataclass(frozen=True)
class Problem:
    """What is wrong at ``loc`` and, in ``hint``, what to change."""

    loc: Loc
    message: str
    hint: str = ""


def suggest(name: str, known: Iterable[str], what: str) -> str:
    """``did you mean 'x'? (<what>: a, b, c)`` or just the list."""
    known = sorted(set(known))
    close = difflib.get_close_matches(name, known, n=1)
    listing = f"{what}: {', '.join(known)}" if known else f"no {what} declared"
    return f"did you mean {close[0]!r}? ({listing})" if close else listing


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
