"""Judging ``assert`` and ``error``: do the selected objects match a partial tree?

``assert`` holds when, on every selected cluster, at least one selected object matches;
``error`` holds when, on every selected cluster, none does (also when none exists). A
failure shows the closest candidate's differences (path, expected, actual subtree) and
attaches the selected objects' YAML, so the report says why without a re-run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from harness.expect.capture import capture_values
from harness.expect.check import Check
from harness.expect.checks import Verdict
from harness.expect.observations import ObjectsSeen
from harness.matching.mismatches import diff, select_mismatch_summary
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
    kind = obj.get("kind", "object")
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
    actual_parts: list[str] = []
    details: list[str] = []
    attachments: list[tuple[str, str]] = []
    ok = True
    for cluster in seen:
        prefix = f"{cluster.cluster}: " if len(seen) > 1 else ""
        if cluster.error is not None:
            ok = False
            actual_parts.append(f"{prefix}cannot read: {cluster.error}")
            continue
        found, results = match_any(spec.match, cluster.objects)
        matching = [i for i, r in enumerate(results) if r.ok]
        if spec.count is not None and not negate:
            n = len(matching)
            names = ", ".join(object_name(cluster.objects[i]) for i in matching[:5])
            shown = f" ({names}{', …' if n > 5 else ''})" if names else ""
            text = f"{prefix}{n} of {len(cluster.objects)} selected match{shown}"
            actual_parts.append(text)
            if low <= n and (high is None or n <= high):
                continue
            ok = False
            attachments += _attachments(cluster)
            if n < low and results:
                best = closest([r for r in results if not r.ok])
                others = [i for i, r in enumerate(results) if not r.ok]
                if best is not None:
                    name = object_name(cluster.objects[others[best]])
                    details.append(f"{prefix}{name} (closest that does not match):")
                    details.append(diff(results[others[best]]))
            continue
        holds = (found is None) if negate else (found is not None)
        if holds:
            actual_parts.append(
                f"{prefix}{len(cluster.objects)} selected, none matches"
                if negate
                else f"{prefix}{object_name(cluster.objects[found or 0])} matches"
            )
            continue
        ok = False
        attachments += _attachments(cluster)
        if negate:
            assert found is not None
            name = object_name(cluster.objects[found])
            actual_parts.append(f"{prefix}{name} matches")
            details.append(f"{prefix}{name} matches, but no selected object may")
        elif not cluster.objects:
            actual_parts.append(f"{prefix}no object selected")
        else:
            best = closest(results)
            assert best is not None
            name = object_name(cluster.objects[best])
            summary = select_mismatch_summary(results[best])
            actual_parts.append(
                f"{prefix}{len(cluster.objects)} selected, none matches; closest {name}: {summary}"
            )
            details.append(f"{prefix}{name} (closest of {len(cluster.objects)}):")
            details.append(diff(results[best]))
    actual = "; ".join(actual_parts) or "no cluster selected"
    text = actual if ok else f"{description}: expected {expected}; got {actual}"
    return Check(
        "error" if negate else "assert",
        description,
        Verdict(ok, text, expected, actual),
        details="\n".join(details),
        attachments=tuple(attachments),
        bounded=high is not None and not negate,
    )


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
