"""Matrix instances: one scenario file, one scenario per combination of its ``matrix``.

Pure. ``matrix: {skrs: [1, 3], mode: [sync, async]}`` makes four instances named
``<name>-skrs-1-mode-sync`` and so on; each gets its values as ``${{ matrix.<key> }}``
(:mod:`harness.scenario.bindings` fills them in).
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.scenario.errors import Problem


@dataclass(frozen=True)
class Instance:
    """One matrix combination: its name suffix and its ``matrix.<key>`` values."""

    suffix: str
    values: Mapping[str, Any]


def _label(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def instances(matrix: Any) -> tuple[list[Instance], list[Problem]]:
    """Every combination of ``matrix`` (keys in file order); one plain instance without."""
    if matrix is None:
        return [Instance("", {})], []
    if not isinstance(matrix, dict) or not matrix:
        return [], [Problem(("matrix",), "matrix is a mapping of key: [values...]")]
    problems = [
        Problem(("matrix", k), f"matrix.{k} needs a non-empty list of values")
        for k, v in matrix.items()
        if not isinstance(v, list) or not v
    ]
    problems += [
        Problem(("matrix", k, i), "matrix values are strings, numbers or booleans")
        for k, v in matrix.items()
        if isinstance(v, list)
        for i, item in enumerate(v)
        if not isinstance(item, str | int | float | bool)
    ]
    if problems:
        return [], problems
    keys = list(matrix)
    out = []
    for combo in itertools.product(*(matrix[k] for k in keys)):
        suffix = "-".join(
            f"{_label(str(k))}-{_label(str(v))}" for k, v in zip(keys, combo, strict=True)
        )
        out.append(Instance(suffix, {f"matrix.{k}": v for k, v in zip(keys, combo, strict=True)}))
    return out, []


def instance_name(name: str, suffix: str) -> str:
    """``fleet`` + ``skrs-3`` → ``fleet-skrs-3`` (a DNS label; shortened stably if long)."""
    if not suffix:
        return name
    full = f"{name}-{suffix}"
    if len(full) <= 63:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{full[:54].rstrip('-')}-{digest}"
