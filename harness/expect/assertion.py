"""Judging ``assert`` and ``error``: do the selected objects match a partial tree?

``assert`` holds when, on every selected cluster, at least one selected object matches;
``error`` holds when, on every selected cluster, none does (also when none exists). A
failure shows the closest candidate's differences (path, expected, actual subtree) and
attaches the selected objects' YAML, so the report says why without a re-run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import yaml

from harness.expect.capture import capture_values
from harness.expect.check import Check
from harness.expect.checks import Verdict
from harness.expect.observations import ObjectsSeen
from harness.matching.mismatches import ObjectMatch, diff, select_mismatch_summary
from harness.matching.objects import closest, match_any
from harness.matching.output import truncate
from harness.scenario import Assert

MAX_ATTACHED = 5
"""Objects attached per cluster to a failed check (the rest are counted)."""
NOISE = ("managedFields",)
"""Metadata left out of attached YAML: long and never what a check is about."""


def object_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    kind = obj.get("kind") or "object"
    return f"{kind} {namespace}/{meta.get('name')}" if namespace else f"{kind} {meta.get('name')}"


def object_yaml(obj: Mapping[str, Any]) -> str:
    """The object as YAML, without :data:`NOISE`, truncated for a report."""
    shown = dict(obj)
    meta = {k: v for k, v in (shown.get("metadata") or {}).items() if k not in NOISE}
    if meta:
        shown["metadata"] = meta
    text, _ = truncate(yaml.safe_dump(shown, sort_keys=False, allow_unicode=True))
    return text


def _attachments(seen: ObjectsSeen) -> list[tuple[str, str]]:
    out = [
        (f"{seen.cluster}: {object_name(obj)}", object_yaml(obj))
        for obj in seen.objects[:MAX_ATTACHED]
    ]
    if len(seen.objects) > MAX_ATTACHED:
        out.append((f"{seen.cluster}: …", f"{len(seen.objects) - MAX_ATTACHED} more not shown"))
    return out


def _summary(match: dict[str, Any]) -> str:
    text = yaml.safe_dump(match, default_flow_style=True, sort_keys=False, width=10_000).strip()
    return text if len(text) <= 160 else text[:157] + "..."


def _count_text(low: int, high: int | None) -> str:
    if high is None:
        return f"at least {low}"
    if low == high:
        return f"exactly {low}"
    return f"at most {high}" if low == 0 else f"{low} to {high}"


class _ClusterVerdict(NamedTuple):
    """One selected cluster's part of an ``assert`` or ``error`` check."""

    ok: bool
    actual: str
    details: tuple[str, ...] = ()
    attachments: tuple[tuple[str, str], ...] = ()


def judge(spec: Assert, seen: Sequence[ObjectsSeen], *, negate: bool = False) -> Check:
    """``assert`` (``negate=False``) or ``error`` (``negate=True``) over what each selected
    cluster holds now. With ``count``, ``assert`` holds when the number of matching
    objects is within it on every cluster."""
    verb = "error" if negate else "assert"
    description = f"{verb} {spec.describe()}"
    what = f"matching {_summary(spec.match)}" if spec.match else ""
    low, high = spec.bounds
    if negate:
        expected = f"no object {what}".strip()
    elif spec.count is None:
        expected = f"an object {what}".strip()
    else:
        expected = f"{_count_text(low, high)} objects {what}".strip()
    prefixes = [f"{c.cluster}: " if len(seen) > 1 else "" for c in seen]
    verdicts = [_judge_cluster(spec, c, p, negate) for c, p in zip(seen, prefixes, strict=True)]
    ok = all(v.ok for v in verdicts)
    actual = "; ".join(v.actual for v in verdicts) or "no cluster selected"
    text = actual if ok else f"{description}: expected {expected}; got {actual}"
    return Check(
        verb,
        description,
        Verdict(ok, text, expected, actual),
        details="\n".join(d for v in verdicts for d in v.details),
        attachments=tuple(a for v in verdicts for a in v.attachments),
        bounded=high is not None and not negate,
    )


def _judge_cluster(
    spec: Assert, cluster: ObjectsSeen, prefix: str, negate: bool
) -> _ClusterVerdict:
    if cluster.error is not None:
        return _ClusterVerdict(False, f"{prefix}cannot read: {cluster.error}")
    found, results = match_any(spec.match, cluster.objects)
    if spec.count is not None and not negate:
        return _judge_count(spec, cluster, results, prefix)
    objects = cluster.objects
    if negate and found is None:
        return _ClusterVerdict(True, f"{prefix}{len(objects)} selected, none matches")
    if found is not None and not negate:
        return _ClusterVerdict(True, f"{prefix}{object_name(objects[found])} matches")
    attachments = tuple(_attachments(cluster))
    if found is not None:
        name = object_name(objects[found])
        detail = f"{prefix}{name} matches, but no selected object may"
        return _ClusterVerdict(False, f"{prefix}{name} matches", (detail,), attachments)
    best = closest(results)
    if best is None:
        return _ClusterVerdict(False, f"{prefix}no object selected", (), attachments)
    name = object_name(objects[best])
    summary = select_mismatch_summary(results[best])
    actual = f"{prefix}{len(objects)} selected, none matches; closest {name}: {summary}"
    details = (f"{prefix}{name} (closest of {len(objects)}):", diff(results[best]))
    return _ClusterVerdict(False, actual, details, attachments)


def _judge_count(
    spec: Assert, cluster: ObjectsSeen, results: Sequence[ObjectMatch], prefix: str
) -> _ClusterVerdict:
    """``assert`` with ``count``: how many selected objects match."""
    low, high = spec.bounds
    matching = [i for i, r in enumerate(results) if r.ok]
    n = len(matching)
    names = ", ".join(object_name(cluster.objects[i]) for i in matching[:5])
    shown = f" ({names}{', …' if n > 5 else ''})" if names else ""
    actual = f"{prefix}{n} of {len(cluster.objects)} selected match{shown}"
    if low <= n and (high is None or n <= high):
        return _ClusterVerdict(True, actual)
    others = [i for i, r in enumerate(results) if not r.ok]
    best = closest([results[i] for i in others]) if n < low else None
    details: tuple[str, ...] = ()
    if best is not None:
        name = object_name(cluster.objects[others[best]])
        details = (f"{prefix}{name} (closest that does not match):", diff(results[others[best]]))
    return _ClusterVerdict(False, actual, details, tuple(_attachments(cluster)))


def captured(spec: Assert, seen: ObjectsSeen) -> tuple[dict[str, Any], list[str]]:
    """The values ``spec.capture`` takes from the first object of ``seen`` that matches,
    and every problem (no object matches; an expression fails or gives null)."""
    if not spec.capture:
        return {}, []
    found, _ = match_any(spec.match, seen.objects)
    if found is None:
        return {}, ["capture: no selected object matches"]
    obj = seen.objects[found]
    return capture_values(spec.capture, obj, object_name(obj))
