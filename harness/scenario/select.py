"""Choosing scenarios by tag or name: ``tag=cert-rotation``, ``tag!=slow``, ``name=spec-*``.

Pure. A selector is ``KEY=PATTERN`` (the scenario matches) or ``KEY!=PATTERN`` (it does
not), ``KEY`` being ``tag`` or ``name``; patterns are shell-style (``fnmatch``: ``*``,
``?``, ``[...]``), case-sensitive. ``tag=PATTERN`` matches a scenario with at least one
tag matching it, ``tag!=PATTERN`` one with none. Several selectors are ANDed:
``watcher-harness run --selector tag=smoke --selector 'name!=*-slow'``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from difflib import get_close_matches
from fnmatch import fnmatchcase
from typing import Literal

from harness.errors import HarnessError
from harness.scenario.model import Scenario

SelectorKey = Literal["tag", "name"]
KEYS: tuple[SelectorKey, ...] = ("tag", "name")
SYNTAX = "tag=PATTERN, tag!=PATTERN, name=PATTERN or name!=PATTERN"
_PATTERN = re.compile(r"[a-z0-9*?\[\]!-]+")
"""What can match a DNS label (tags and names are DNS labels), wildcards included."""


class InvalidSelector(HarnessError, ValueError):
    """A selector that cannot be parsed; the message says what is wrong and how to write it."""


@dataclass(frozen=True)
class Selector:
    """One parsed selector; ``str()`` gives it back as ``key=pattern`` / ``key!=pattern``."""

    key: SelectorKey
    pattern: str
    negated: bool = False

    def __str__(self) -> str:
        return f"{self.key}{'!=' if self.negated else '='}{self.pattern}"

    def matches(self, scenario: Scenario) -> bool:
        values = scenario.tags if self.key == "tag" else (scenario.name,)
        hit = any(fnmatchcase(value, self.pattern) for value in values)
        return hit != self.negated


def _key(text: str, key: str) -> SelectorKey:
    for known in KEYS:
        if key == known:
            return known
    close = get_close_matches(key.lower(), KEYS, n=1, cutoff=0.6)
    did_you_mean = f"; did you mean {close[0]!r}?" if close else ""
    raise InvalidSelector(f"selector {text!r}: unknown key {key!r}{did_you_mean} (write {SYNTAX})")


def parse_selector(text: str) -> Selector:
    """``tag=x`` / ``tag!=x`` / ``name=x`` / ``name!=x`` → :class:`Selector`;
    :class:`InvalidSelector` (a ``ValueError``) with a message saying what to write."""
    negated = "!=" in text
    key, sep, pattern = text.partition("!=" if negated else "=")
    key, pattern = key.strip(), pattern.strip()
    if not sep:
        raise InvalidSelector(f"selector {text!r} has no '=' or '!=' (write {SYNTAX})")
    if not key:
        raise InvalidSelector(f"selector {text!r} has nothing before '{sep}' (write {SYNTAX})")
    checked = _key(text, key)
    if not pattern:
        raise InvalidSelector(
            f"selector {text!r} has nothing after '{sep}': give a {checked} or a pattern "
            "such as 'spec-*'"
        )
    if pattern.startswith("="):
        raise InvalidSelector(f"selector {text!r}: write a single '=' (write {SYNTAX})")
    if not _PATTERN.fullmatch(pattern):
        suggestion = re.sub(r"[^a-z0-9*?\[\]!-]", "-", pattern.lower().replace("_", "-"))
        raise InvalidSelector(
            f"selector {text!r}: {checked}s are DNS labels (a-z, 0-9, '-'), so {pattern!r} "
            f"matches none; did you mean '{checked}{sep}{suggestion}'?"
        )
    return Selector(checked, pattern, negated)


def parse_selectors(texts: Iterable[str]) -> tuple[Selector, ...]:
    return tuple(parse_selector(t) for t in texts)


def selected(scenario: Scenario, selectors: Iterable[Selector]) -> bool:
    """True when ``scenario`` matches every selector (no selectors: every scenario)."""
    return all(s.matches(scenario) for s in selectors)


def describe(selectors: Iterable[Selector]) -> str:
    """The selectors as a person wrote them, ANDed: ``tag=smoke and name!=*-slow``."""
    return " and ".join(str(s) for s in selectors) or "(none)"
