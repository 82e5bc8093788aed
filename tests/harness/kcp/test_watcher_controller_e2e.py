"""The Watcher controller against a real KCP API server: VirtualService, status, deletion."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import pytest
from kubernetes_asyncio.client import ApiClient

from harness.clusters.plane import Cluster
from harness.kcp.lifecycle_manager.queue.runtime import ControllerRuntime
from harness.kcp.lifecycle_manager.watcher_controller import (
    CONDITION_TYPE,
    FINALIZER,
    WatcherController,
    setup_watcher_controller,
)
from harness.kube import GATEWAYS, VIRTUAL_SERVICES, WATCHERS, apply, create, get, merge_patch
from harness.kube import delete as delete_object
from watcher.render.virtualservice import gateway_dict
from watcher.render.watcher_cr import Watcher, klm_watcher_dict, watcher_dict

pytestmark = pytest.mark.e2e
T = TypeVar("T")


@asynccontextmanager
async def running(api: ApiClient) -> AsyncIterator[WatcherController]:
    """The Watcher controller alone on a runtime of its own."""
    runtime = ControllerRuntime(api)
    controller = setup_watcher_controller(runtime)
    async with runtime:
        yield controller


async def eventually(
    probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], within: float = 10.0
) -> T:
    """Poll ``probe`` until ``ok``; on timeout fail with the last value seen."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = await probe()
        if ok(value):
            return value
        if loop.time() >= deadline:
            pytest.fail(f"condition not met within {within} s; last value: {value!r}")
        await asyncio.sleep(0.05)


def state(obj: dict[str, Any] | None) -> str | None:
    return ((obj or {}).get("status") or {}).get("state")


def condition(obj: dict[str, Any]) -> dict[str, Any]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next(c for c in conditions if c["type"] == CONDITION_TYPE)


async def test_watcher_lifecycle_renders_updates_rejects_and_cleans_up(kcp: Cluster) -> None:
    async with kcp.api_client() as api:
        await create(api, GATEWAYS, gateway_dict())
        changes: list[list[Watcher]] = []

        async def record(watchers: list[Watcher]) -> None:
            changes.append(watchers)

        async def last_change() -> list[Watcher] | None:
            return changes[-1] if changes else None

        async with running(api) as controller:
            controller.on_change.append(record)
            created = await create(api, WATCHERS, klm_watcher_dict())
            uid = created["metadata"]["uid"]

            async def read_watcher() -> dict[str, Any] | None:
                return await get(api, WATCHERS, "klm-watcher", "kcp-system")

            async def read_vs() -> dict[str, Any] | None:
                return await get(api, VIRTUAL_SERVICES, "klm-watcher", "kcp-system")

            # created → VirtualService with route and owner, Watcher Ready with finalizer
            vs = await eventually(read_vs, lambda v: v is not None)
            assert vs is not None
            route = vs["spec"]["http"][0]
            assert route["name"] == "kcp-system/klm-watcher"
            assert route["match"] == [{"uri": {"prefix": "/v2/lifecycle-manager/event"}}]
            assert route["route"][0]["destination"] == {
                "host": "klm-controller-manager-events.kcp-system.svc.cluster.local",
                "port": {"number": 8082},
            }
            assert vs["spec"]["gateways"] == ["kcp-system/klm-watcher"]
            assert vs["spec"]["hosts"] == ["listener.kyma.local"]
            [owner] = vs["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"]) == ("Watcher", "klm-watcher", uid)
            ready = await eventually(read_watcher, lambda w: state(w) == "Ready")
            assert ready is not None
            assert FINALIZER in ready["metadata"]["finalizers"]
            assert condition(ready)["status"] == "True"
            assert [w.name for w in controller.watchers()] == ["klm-watcher"]
            await eventually(last_change, lambda c: bool(c))

            # manager changed → route follows
            await merge_patch(
                api, WATCHERS, "klm-watcher", "kcp-system", {"spec": {"manager": "other-manager"}}
            )
            await eventually(
                read_vs,
                lambda v: (
                    v is not None
                    and v["spec"]["http"][0]["match"][0]["uri"]["prefix"]
                    == "/v2/other-manager/event"
                ),
            )
            await eventually(last_change, lambda c: bool(c and c[0].manager == "other-manager"))

            # made invalid → Error with the reasons, VirtualService removed
            await merge_patch(
                api, WATCHERS, "klm-watcher", "kcp-system", {"spec": {"manager": "Not_Valid!"}}
            )
            broken = await eventually(read_watcher, lambda w: state(w) == "Error")
            assert broken is not None
            assert condition(broken)["status"] == "False"
            assert "spec.manager" in condition(broken)["message"]
            await eventually(read_vs, lambda v: v is None)
            await eventually(last_change, lambda c: c == [])

            # deleted → VirtualService and Watcher gone (finalizer released)
            await merge_patch(
                api,
                WATCHERS,
                "klm-watcher",
                "kcp-system",
                {"spec": {"manager": "lifecycle-manager"}},
            )
            await eventually(read_vs, lambda v: v is not None)
            await delete_object(api, WATCHERS, "klm-watcher", "kcp-system")
            await eventually(read_vs, lambda v: v is None)
            await eventually(read_watcher, lambda w: w is None)
            assert controller.errors == 0


async def test_invalid_watcher_gets_error_and_no_virtual_service(kcp: Cluster) -> None:
    async with kcp.api_client() as api:
        await create(api, GATEWAYS, gateway_dict())
        invalid = watcher_dict(
            "broken",
            manager="",
            resource=("operator.kyma-project.io", "*", "kymas"),
            service=("svc", "kcp-system", 8082),
        )
        async with running(api):
            await create(api, WATCHERS, invalid)
            broken = await eventually(
                lambda: get(api, WATCHERS, "broken", "kcp-system"), lambda w: state(w) == "Error"
            )
            assert broken is not None
            assert "spec.manager: empty" in condition(broken)["message"]
            assert await get(api, VIRTUAL_SERVICES, "broken", "kcp-system") is None


async def test_watcher_without_matching_gateway_becomes_ready_when_one_appears(
    kcp: Cluster,
) -> None:
    async with kcp.api_client() as api, running(api):
        await create(api, WATCHERS, klm_watcher_dict())
        waiting = await eventually(
            lambda: get(api, WATCHERS, "klm-watcher", "kcp-system"), lambda w: state(w) == "Error"
        )
        assert waiting is not None
        assert "matches none" in condition(waiting)["message"]
        await apply(api, GATEWAYS, gateway_dict())
        await eventually(
            lambda: get(api, WATCHERS, "klm-watcher", "kcp-system"), lambda w: state(w) == "Ready"
        )
        assert await get(api, VIRTUAL_SERVICES, "klm-watcher", "kcp-system") is not None
