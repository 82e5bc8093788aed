"""``capture: {name: expression}``: the values a passing ``assert`` or ``script`` keeps for
later operations. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.matching.functions import search


def capture_values(
    capture: Mapping[str, str], document: Any, where: str
) -> tuple[dict[str, Any], list[str]]:
    """Each JMESPath ``expression`` of ``capture`` over ``document`` (the matching object,
    a command's JSON output), and every problem: an expression that fails or gives null,
    said with ``where`` the document came from."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for name, expression in capture.items():
        try:
            value = search(expression, document)
        except (TypeError, ValueError) as error:  # JMESPathError is a ValueError
            problems.append(f"capture {name}: {expression!r} failed on {where}: {error}")
            continue
        if value is None:
            problems.append(f"capture {name}: {expression!r} is null on {where}")
            continue
        values[name] = value
    return values, problems
