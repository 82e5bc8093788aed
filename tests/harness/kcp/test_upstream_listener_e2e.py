"""Our webhook → the real Envoy gateway → upstream's own Go listener, across two SKRs.

Upstream's ``github.com/kyma-project/runtime-watcher/listener`` (``tools/upstream-listener``,
built with Go and cached) serves ``probe-operator``; a spec Watcher and a status Watcher
route Kyma writes to it. Every write of the four kinds (create, spec update, status
update, delete) is exactly one event with the writing SKR's runtime id, read from the
client certificate Envoy forwards in XFCC — upstream's parsing, not ours.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

import pytest

from harness.environment import (
    SKR_NAMESPACE,
    EnvironmentSpec,
    ObservedEvent,
    SkrSpec,
    WatcherEnvironment,
    watcher_environment,
)
from harness.environment.spec import ListenerSpec
from harness.kcp.listener_process import ListenerProcess
from harness.kube import KYMAS, create_or_replace, delete, merge_patch
from watcher.render.watcher_cr import klm_watcher_dict, watcher_dict

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

MANAGER = "probe-operator"
SERVICE = ("probe-operator-events", "kcp-system", 8086)
LABELS = {"app.kubernetes.io/part-of": "upstream-probe"}
KYMA_RESOURCE = ("operator.kyma-project.io", "*", "kymas")
SKRS = {"skr-a": "runtime-a", "skr-b": "runtime-b"}


def probe_watcher(field: Literal["spec", "status"]) -> dict[str, Any]:
    return watcher_dict(
        f"probe-{field}",
        manager=MANAGER,
        resource=KYMA_RESOURCE,
        field=field,
        service=SERVICE,
        labels_to_watch=LABELS,
    )


@pytest.fixture
async def env() -> AsyncIterator[WatcherEnvironment]:
    spec = EnvironmentSpec(
        skrs=tuple(SkrSpec(n, rt, f"{n}.kyma.example.com") for n, rt in SKRS.items()),
        watchers=(klm_watcher_dict(), probe_watcher("spec"), probe_watcher("status")),
        listeners=(ListenerSpec(MANAGER, SERVICE, implementation="upstream"),),
    )
    async with watcher_environment(spec) as environment:
        yield environment


async def events_after(env: WatcherEnvironment, since: float, count: int) -> list[ObservedEvent]:
    """The probe-operator events since ``since`` once there are ``count`` (then 1 s more,
    so a duplicate would show)."""
    async with asyncio.timeout(10):
        while len(env.events_since(since, MANAGER)) < count:
            await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)
    return env.events_since(since, MANAGER)


def identities(events: list[ObservedEvent]) -> list[tuple[str, str, str, str]]:
    return sorted((e.runtime_id, e.namespace, e.name, e.kind) for e in events)


EXPECTED = sorted((rt, SKR_NAMESPACE, "probe", "Kyma") for rt in SKRS.values())


async def test_each_write_kind_is_one_event_at_upstreams_listener(
    env: WatcherEnvironment,
) -> None:
    host = env.listeners[MANAGER]
    assert isinstance(host, ListenerProcess) and host.implementation == "upstream"
    assert host.url.startswith("http://")
    probe = {
        "apiVersion": "operator.kyma-project.io/v1beta2",
        "kind": "Kyma",
        "metadata": {"name": "probe", "namespace": SKR_NAMESPACE, "labels": LABELS},
        "spec": {"channel": "regular"},
    }
    writes: list[tuple[str, Any]] = [
        ("create", lambda api: create_or_replace(api, KYMAS, probe)),
        (
            "spec update",
            lambda api: merge_patch(
                api, KYMAS, "probe", SKR_NAMESPACE, {"spec": {"channel": "fast"}}
            ),
        ),
        (
            "status update",
            lambda api: merge_patch(
                api,
                KYMAS,
                "probe",
                SKR_NAMESPACE,
                {"status": {"state": "Processing"}},
                subresource="status",
            ),
        ),
        ("delete", lambda api: delete(api, KYMAS, "probe", SKR_NAMESPACE)),
    ]
    start = time.time()
    for what, write in writes:
        since = time.time()
        await asyncio.gather(*(write(env.skr_apis[skr]) for skr in SKRS))
        assert identities(await events_after(env, since, len(SKRS))) == EXPECTED, what
    # The requests reached upstream's handler (its own counter, upstream's labels), and
    # lifecycle-manager saw none of the probe's writes.
    requests = await host.read_metric(
        "watcher_listener_requests_total", {"server_name": "listener"}
    )
    assert requests >= len(writes) * len(SKRS)
    assert [e for e in env.events_since(start, "lifecycle-manager") if e.name == "probe"] == []
