"""Mismatches of a partial tree, and how reports show them. Pure.

``Mismatch`` is one place where an actual object differs from what was expected (path,
both subtrees, why); ``ObjectMatch`` holds all of them, so one failed run shows everything
that is wrong. ``diff`` renders each mismatch's subtrees as YAML for reports,
``select_mismatch_summary`` gives one line for tables; both prune and cap what they show,
so a huge or deep object costs little to report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml

from harness.matching.syntax import is_list

_INLINE_CHARS: Final = 80
_RENDER_LINES: Final = 40
_RENDER_CHARS: Final = 4000
_RENDER_DEPTH: Final = 30
_RENDER_ITEMS: Final = 200
_SUMMARY_VALUE_CHARS: Final = 60


class _Missing:
    """Stands for an absent key in ``Mismatch.actual``; ``None`` would mean JSON null."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


@dataclass(frozen=True)
class Mismatch:
    """One place where ``actual`` differs; ``expected``/``actual`` are the subtrees there."""

    path: str
    expected: Any
    actual: Any
    reason: str


@dataclass(frozen=True)
class ObjectMatch:
    """Every mismatch, not just the first, so one failed run shows all that is wrong."""

    ok: bool
    mismatches: tuple[Mismatch, ...] = ()


def diff(match: ObjectMatch) -> str:
    """Each mismatch as its path and reason, then ``- expected:`` and ``+ actual:`` with
    only the subtrees at that path, as YAML: enough to see the problem in a report."""
    blocks = []
    for mismatch in match.mismatches:
        lines = [f"{mismatch.path}: {mismatch.reason}"]
        lines.extend(_marked("- expected:", mismatch.expected))
        lines.extend(_marked("+ actual:", mismatch.actual))
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def _marked(marker: str, value: Any) -> list[str]:
    """``marker value`` for one-line renders, else the YAML indented under the marker."""
    rendered = render_yaml(value)
    if "\n" not in rendered:
        return [f"  {marker} {rendered}"]
    return [f"  {marker}", *(f"      {line}" for line in rendered.splitlines())]


def render_yaml(value: Any, *, flow: bool = False) -> str:
    """Compact YAML of a subtree: one flow-style line if it is short (or ``flow``), else
    block style; capped at ~40 lines / 4000 characters; ``(missing)`` for an absent key.
    Deep or huge subtrees are pruned first, so rendering stays cheap and stack-safe."""
    if value is MISSING:
        return "(missing)"
    pruned = _prune(value, _RENDER_DEPTH)
    line = _dump(pruned, flow=True)
    if flow or ("\n" not in line and len(line) <= _INLINE_CHARS):
        return _cap(line)
    return _cap(_dump(pruned, flow=False))


def _dump(value: Any, *, flow: bool) -> str:
    """``yaml.safe_dump`` without the document end marker; ``repr`` for non-YAML values."""
    try:
        text = yaml.safe_dump(
            value,
            default_flow_style=flow,
            sort_keys=False,
            allow_unicode=True,
            width=1_000_000 if flow else 100,
        )
    except yaml.YAMLError:
        return repr(value)
    return text.removesuffix("\n").removesuffix("\n...").removesuffix("...")


def _prune(value: Any, depth: int) -> Any:
    """A copy with containers below ``depth`` levels and items past the first 200 elided."""
    if isinstance(value, Mapping):
        if depth <= 0:
            return "… (map)"
        items = list(value.items())
        pruned = {k: _prune(v, depth - 1) for k, v in items[:_RENDER_ITEMS]}
        if len(items) > _RENDER_ITEMS:
            pruned["…"] = f"{len(items) - _RENDER_ITEMS} more keys"
        return pruned
    if is_list(value):
        if depth <= 0:
            return "… (list)"
        listed = [_prune(v, depth - 1) for v in value[:_RENDER_ITEMS]]
        if len(value) > _RENDER_ITEMS:
            listed.append(f"… {len(value) - _RENDER_ITEMS} more items")
        return listed
    return value


def _cap(text: str) -> str:
    lines = text.splitlines()
    cut = len(lines) > _RENDER_LINES or len(text) > _RENDER_CHARS
    if not cut:
        return text
    kept = "\n".join(lines[:_RENDER_LINES])[:_RENDER_CHARS]
    return f"{kept}\n… (truncated)"


def select_mismatch_summary(match: ObjectMatch) -> str:
    """One line for tables: the first mismatch, and how many more there are."""
    if not match.mismatches:
        return ""
    first = match.mismatches[0]
    expected = short_value(first.expected)
    if first.actual is MISSING:
        line = f"{first.path}: {first.reason}, expected {expected}"
    elif first.reason == "not equal" or first.reason.startswith("expected "):
        line = f"{first.path}: expected {expected}, got {short_value(first.actual)}"
    else:
        line = f"{first.path}: {first.reason}"
    more = len(match.mismatches) - 1
    return f"{line} (+{more} more)" if more else line


def short_value(value: Any) -> str:
    """``value`` as one flow-style line of at most 60 characters, for summaries."""
    text = " ".join(render_yaml(value, flow=True).split())
    limit = _SUMMARY_VALUE_CHARS
    return text if len(text) <= limit else text[: limit - 1] + "…"
