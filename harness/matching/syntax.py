"""What a partial object tree may say, and where it says something invalid. Pure.

Matching (``harness.matching.objects``) and the scenario loader read the same syntax: maps
with one ``$anyOrder``/``$contains``/``$oneOf`` key, ``(expression)`` keys holding JMESPath
(with ``harness.matching.functions``). An invalid expression (syntax, unknown function,
wrong argument count) or a malformed special map is an ``ExpressionError`` before anything
is compared; ``check_expressions`` finds all of them without an actual object, so the
loader reports them, located, at load time. Paths name a place in a tree the way reports
show it (``webhooks[1].rules[0]``, ``<root>`` for the top).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from jmespath.exceptions import JMESPathError

from harness.matching.functions import FUNCTION_TABLE, CompiledExpression, compile_expression

ANY_ORDER: Final = "$anyOrder"
CONTAINS: Final = "$contains"
ONE_OF: Final = "$oneOf"
SPECIAL_KEYS: Final = frozenset({ANY_ORDER, CONTAINS, ONE_OF})
MAX_DEPTH: Final = 200
"""An expected tree deeper than this is an ``ExpressionError``: matching recurses only
along ``expected``, so this bounds the stack (a few frames a level; the limit is 1000)
however deep ``actual`` is."""

ROOT: Final = "<root>"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

PathPart = str | int
Path = tuple[PathPart, ...]


class ExpressionError(ValueError):
    """The expected tree itself is wrong (bad JMESPath or special map), not the object."""


def is_expression_key(key: object) -> bool:
    """``(…)`` keys are JMESPath; Kubernetes field and label names never look like that."""
    return isinstance(key, str) and len(key) >= 2 and key[0] == "(" and key[-1] == ")"


def special_key(node: Mapping[Any, Any]) -> str | None:
    """The ``$anyOrder``/``$contains``/``$oneOf`` key of a map, or None for an ordinary map."""
    for key in node:
        if key in SPECIAL_KEYS:
            return str(key)
    return None


def format_path(path: Path) -> str:
    """``webhooks[1].rules[0]``; keys that are not identifiers are quoted,
    ``(expression)`` keys are shown as written."""
    text = ""
    for part in path:
        if isinstance(part, int) and not isinstance(part, bool):
            text += f"[{part}]"
        elif isinstance(part, str) and (_IDENTIFIER.fullmatch(part) or is_expression_key(part)):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(str(part), ensure_ascii=False)}]"
    return text or ROOT


def json_kind(value: Any) -> str:
    """JSON's name for a value's type, as reports show it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map"
    if is_list(value):
        return "list"
    return type(value).__name__


def is_list(value: Any) -> bool:
    """JSON arrays; tuples count too, so frozen specs can be written with them."""
    return isinstance(value, list | tuple)


def _special_problem(node: Mapping[Any, Any], key: str) -> str | None:
    if len(node) != 1:
        others = ", ".join(sorted(repr(k) for k in node if k != key))
        return f"{key} must be the only key of its map, found also {others}"
    if key == ONE_OF:
        if not is_list(node[key]) or not node[key]:
            got = "an empty list" if is_list(node[key]) else json_kind(node[key])
            return f"{key} needs a non-empty list of alternatives, got {got}"
        return None
    if not is_list(node[key]):
        return f"{key} needs a list of items, got {json_kind(node[key])}"
    return None


def _parse_error_text(error: JMESPathError) -> str:
    """jmespath's first line without its caret drawing (the caller names the expression)."""
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    for prefix in ("Invalid jmespath expression: ", "Bad jmespath expression: "):
        first = first.removeprefix(prefix)
    return first.removesuffix(":").removesuffix(", for expression")


def _static_problems(compiled: CompiledExpression) -> Iterator[str]:
    """Unknown functions, wrong argument counts and zero slice steps, which jmespath only
    finds when that part is evaluated: inside a filter over a missing field it never is."""
    stack: list[Any] = [compiled.parsed.parsed]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        children = node.get("children") or []
        stack.extend(children)
        if node.get("type") == "function_expression":
            yield from _call_problems(str(node.get("value")), len(children))
        elif node.get("type") == "slice" and len(children) == 3 and children[2] == 0:
            yield "slice step cannot be zero"


def _call_problems(name: str, given: int) -> Iterator[str]:
    """Against the standard and the harness's functions (``functions.FUNCTION_TABLE``)."""
    if name not in FUNCTION_TABLE:
        yield f"unknown function {name}()"
        return
    signature = FUNCTION_TABLE[name]["signature"]
    variadic = bool(signature) and bool(signature[-1].get("variadic"))
    if given < len(signature) or (given > len(signature) and not variadic):
        least = "at least " if variadic else ""
        yield f"{name}() takes {least}{len(signature)} argument(s), got {given}"


def expression_problem(key: str) -> str | None:
    """Why an ``(expression)`` key is invalid, or None; ``key`` includes the parentheses."""
    expression = key[1:-1]
    try:
        compiled = compile_expression(expression)
    except JMESPathError as error:
        return f"invalid JMESPath {expression!r}: {_parse_error_text(error)}"
    problem = next(_static_problems(compiled), None)
    return None if problem is None else f"invalid JMESPath {expression!r}: {problem}"


def check_expressions(expected: Any) -> list[tuple[Path, str]]:
    """Every invalid ``(expr)`` key and malformed special map in ``expected``, located.

    Needs no actual object, so scenario files are rejected at load time, all at once.
    """
    problems: list[tuple[Path, str]] = []
    _check(expected, (), problems)
    return problems


def _check(node: Any, path: Path, problems: list[tuple[Path, str]]) -> None:
    """Depth-first in document order; stops descending past ``MAX_DEPTH``."""
    if len(path) > MAX_DEPTH:
        problems.append((path, f"deeper than {MAX_DEPTH} levels"))
    elif isinstance(node, Mapping):
        _check_map(node, path, problems)
    elif is_list(node):
        for i, item in enumerate(node):
            _check(item, (*path, i), problems)


def _check_map(node: Mapping[Any, Any], path: Path, problems: list[tuple[Path, str]]) -> None:
    special = special_key(node)
    if special is not None:
        problem = _special_problem(node, special)
        if problem is not None:
            problems.append(((*path, special), problem))
            return
        for i, item in enumerate(node[special]):
            _check(item, (*path, special, i), problems)
        return
    for key, value in node.items():
        problem = expression_problem(key) if is_expression_key(key) else None
        if problem is not None:
            problems.append(((*path, key), problem))
        _check(value, (*path, key), problems)


def raise_on_problems(expected: Any) -> None:
    """``ExpressionError`` naming the first problem of ``expected`` (and how many more)."""
    problems = check_expressions(expected)
    if problems:
        path, problem = problems[0]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ExpressionError(f"{format_path(path)}: {problem}{more}")
