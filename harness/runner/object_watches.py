"""Object watches for ``timeline`` expectations: what changed, and when it arrived.

One list+watch (:meth:`~harness.runner.session.Session.watch`) per distinct (cluster,
type, namespace) the scenario's ``timeline`` entries name, from before the first step
until the steps end, rather than a poll, so every change is seen with its arrival time.
What the first list reports is the baseline, not a change; what is kept of each change
and how it goes onto the report's timeline: docs/scenarios.md, *Object watches*.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from harness.aio import spawn, stop_tasks
from harness.expect.observations import ObjectChange
from harness.report.model import TimelineKind
from harness.runner.context import RunContext, expects
from harness.scenario import ObjectWatch, TimelineExpectation, object_watches
from harness.scenario.timeline import kept_keys

logger = logging.getLogger(__name__)

SYNC_TIMEOUT = 10.0
"""Seconds the first step waits, at most, for every watch's first list."""
CHANGES = {"ADDED": "added", "MODIFIED": "modified", "DELETED": "deleted"}
ALWAYS_KEPT = ("apiVersion", "kind")
NOISE = ("managedFields",)


def slim(obj: Mapping[str, Any], keys: frozenset[str] | None) -> dict[str, Any]:
    """``obj`` with only what matching needs (``keys``: top-level keys besides
    ``apiVersion``, ``kind`` and ``metadata``; ``None``: all of them)."""
    kept = {k: v for k, v in obj.items() if keys is None or k in keys or k in ALWAYS_KEPT}
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        kept["metadata"] = {k: v for k, v in meta.items() if k not in NOISE}
    return kept


def object_label(obj: Mapping[str, Any], watch: ObjectWatch) -> str:
    """``namespace/Kind/name`` (or ``Kind/name``), as other timeline entries name objects."""
    meta = obj.get("metadata") or {}
    kind = obj.get("kind") or watch.kind or (watch.resource.resource if watch.resource else "")
    name = f"{kind}/{meta.get('name', '')}"
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else name


class _Recorder:
    def __init__(self, ctx: RunContext, entries: Iterable[TimelineExpectation]) -> None:
        self.ctx = ctx
        entries = list(entries)
        self.watches = object_watches(entries)
        self.keys = {w: kept_keys(entries, w) for w in self.watches}
        self.synced = {w: asyncio.Event() for w in self.watches}
        self.live = False
        """Set when the steps begin: from then on every object reported is a change."""

    async def consume(self, watch: ObjectWatch) -> None:
        async for kind, obj in self.ctx.session.watch(watch):
            if kind == "SYNCED":
                self.synced[watch].set()
                continue
            change = CHANGES.get(kind)
            if change is None or not (self.live or self.synced[watch].is_set()):
                continue  # the baseline: what existed when the watch started
            at = self.ctx.clock()
            self.ctx.object_changes.append(
                ObjectChange(watch.key, change, at, slim(obj, self.keys[watch]))
            )
            label = object_label(obj, watch)
            self.ctx.report.event(TimelineKind.OBJECT, watch.cluster, label, change, at=at)

    async def wait_synced(self) -> None:
        waits = [e.wait() for e in self.synced.values()]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), SYNC_TIMEOUT)
        except TimeoutError:
            for watch, synced in self.synced.items():
                if not synced.is_set():
                    logger.warning("object watch %s: not listed after %gs", watch.key, SYNC_TIMEOUT)
                    self.ctx.report.event(
                        TimelineKind.OBJECT,
                        watch.cluster,
                        watch.type_name,
                        f"watch not listed after {SYNC_TIMEOUT:g} s: objects it lists later "
                        "count as added",
                    )
        self.live = True


@asynccontextmanager
async def recording_objects(ctx: RunContext) -> AsyncIterator[None]:
    """Watch what the scenario's ``timeline`` entries name while the body runs (nothing
    when they name no objects)."""
    recorder = _Recorder(ctx, [t for e in expects(ctx.scenario) for t in e.timeline])
    if not recorder.watches:
        yield
        return
    tasks = [spawn(recorder.consume(w), f"object-watch {w.key}") for w in recorder.watches]
    try:
        await recorder.wait_synced()
        yield
    finally:
        await stop_tasks(tasks)
