"""VirtualServices in a real KCP API server become routes in a real Envoy, and go away."""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from gateway_kit import client_context, eventually, make_pki, post_event, virtual_service
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from harness.clusters.binaries import Binaries, ensure_binaries
from harness.clusters.plane import LocalBackend
from harness.errors import BinaryUnavailable
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.routes import GROUP, PLURAL, VERSION, ServiceRegistry, setup_route_sync
from harness.kcp.lifecycle_manager.queue.runtime import ControllerRuntime
from watcher.listener import Listener, ListenerConfig

pytestmark = pytest.mark.e2e

ISTIO_CRDS = Path(__file__).resolve().parents[3] / "fixtures" / "crds" / "istio.yaml"
NAMESPACE = "kcp-system"


@pytest.fixture(scope="module")
def cluster_binaries() -> Binaries:
    try:
        return ensure_binaries()
    except BinaryUnavailable as e:
        pytest.skip(f"cluster binaries unavailable: {e}")


async def install_istio_crds(api: ApiClient) -> None:
    crds = client.ApiextensionsV1Api(api)
    names = []
    for doc in yaml.safe_load_all(ISTIO_CRDS.read_text()):
        if doc:
            await crds.create_custom_resource_definition(body=doc)
            names.append(doc["metadata"]["name"])

    async def established() -> bool:
        for name in names:
            crd = await crds.read_custom_resource_definition(name)
            conditions = crd.status.conditions or []
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True

    await eventually(established, within=20, what="Istio CRDs established")


async def test_routes_follow_virtual_services(cluster_binaries: Binaries, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    context = client_context(pki, pki.runtime_cert, pki.runtime_key)
    async with AsyncExitStack() as stack:
        env = await stack.enter_async_context(
            LocalBackend(cluster_binaries, log_dir=tmp_path / "logs").start(["kcp"])
        )
        api = await stack.enter_async_context(env["kcp"].api_client())
        await install_istio_crds(api)
        await client.CoreV1Api(api).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE))
        )
        gateway = await stack.enter_async_context(
            EnvoyGateway(pki.gateway, log_dir=tmp_path / "logs", concurrency=1)
        )
        listener = await stack.enter_async_context(Listener(ListenerConfig(component="klm")))
        session = await stack.enter_async_context(
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        )
        registry = ServiceRegistry()
        istio = ControllerRuntime(api)
        sync = setup_route_sync(istio, gateway, registry)
        await stack.enter_async_context(istio)
        async with asyncio.timeout(10):
            await sync.wait_listed()
        objects = client.CustomObjectsApi(api)
        url = gateway.url + "/v2/klm/event"

        def answers(status: int) -> Any:
            async def check() -> bool:
                return (await post_event(session, url, context))[0] == status

            return check

        # Created, but its service is not registered yet: a route without endpoints.
        vs = virtual_service("klm-watcher", "klm", "klm-listener")
        created = time.perf_counter()
        await objects.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, vs)
        await eventually(answers(503), what="route without endpoint (503)")
        print(f"VirtualService created → route served in {time.perf_counter() - created:.3f} s")

        registry.register("klm-listener", NAMESPACE, 8080, ("127.0.0.1", listener.port))
        await eventually(answers(200), what="route to the registered listener (200)")
        event = await asyncio.wait_for(listener.events().get(), 2)
        assert event.runtime_id == pki.runtime_id

        # A VirtualService the gateway cannot map is left out; the others keep routing.
        broken = virtual_service("broken-watcher", "broken", "broken-listener")
        broken["spec"]["http"][0]["match"] = [{"uri": {"regex": ".*"}}]
        await objects.create_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL, broken)

        async def broken_reported() -> bool:
            return f"{NAMESPACE}/broken-watcher" in sync.invalid

        await eventually(broken_reported, what="invalid VirtualService reported")
        assert await answers(200)()
        await asyncio.wait_for(listener.events().get(), 2)

        # Updated: the destination moves to a port nobody registered.
        moved = await objects.get_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, PLURAL, "klm-watcher"
        )
        moved["spec"]["http"][0]["route"][0]["destination"]["port"]["number"] = 9090
        await objects.replace_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, PLURAL, "klm-watcher", moved
        )
        await eventually(answers(503), what="route after update (503)")

        # Deleted: the catch-all answers.
        await objects.delete_namespaced_custom_object(
            GROUP, VERSION, NAMESPACE, PLURAL, "klm-watcher"
        )
        await eventually(answers(404), what="route removed (404)")
        assert sync.last_error is None and sync.applied >= 4
        assert len(gateway.records) == 1  # never restarted
