"""``collect``: the selected objects' YAML and/or a cluster's Kubernetes events, attached to
the report as one always-passing ``collect`` entry (for ``catch`` and ``finally``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.expect.assertion import object_name, object_yaml
from harness.expect.check import Check
from harness.expect.checks import Verdict
from harness.runner.actions.assertion import selected_clusters
from harness.runner.actions.expect import record
from harness.runner.context import RunContext
from harness.scenario import Collect, ResourceRef, Selection

EVENTS = ResourceRef(group="", version="v1", resource="events")
MAX_OBJECTS = 20


def event_line(event: Mapping[str, Any]) -> str:
    involved = event.get("involvedObject") or {}
    when = event.get("lastTimestamp") or event.get("eventTime") or ""
    what = f"{involved.get('kind', '')}/{involved.get('name', '')}"
    kind, reason = event.get("type", ""), event.get("reason", "")
    return f"{when} {kind} {reason} {what}: {event.get('message', '')}"


async def run(ctx: RunContext, spec: Collect) -> None:
    attachments: list[tuple[str, str]] = []
    counts: list[str] = []
    for cluster in selected_clusters(ctx, spec.cluster):
        selection = spec.selection()
        if selection is not None:
            seen = await ctx.session.select(selection, cluster)
            if seen.error is not None:
                attachments.append((f"{cluster}: error", seen.error))
            for obj in seen.objects[:MAX_OBJECTS]:
                attachments.append((f"{cluster}: {object_name(obj)}", object_yaml(obj)))
            counts.append(f"{cluster}: {len(seen.objects)} objects")
        if spec.events:
            events = Selection(cluster=cluster, resource=EVENTS, namespace=spec.namespace)
            seen = await ctx.session.select(events, cluster)
            lines = sorted(event_line(e) for e in seen.objects)
            attachments.append((f"{cluster}: events", "\n".join(lines) or seen.error or "none"))
            counts.append(f"{cluster}: {len(lines)} events")
    actual = "; ".join(counts)
    chosen = spec.selection()
    description = f"collect {chosen.describe() if chosen is not None else 'events'}"
    check = Check(
        "collect",
        description,
        Verdict(True, actual, "material for the report", actual),
        attachments=tuple(attachments),
    )
    record(ctx, check, 0.0)
