"""SKR installation end to end: a write to a real kube-apiserver goes through its admission
chain to the real ``watcher-webhook`` process, which delivers the event over mTLS to a real
``watcher.listener.Listener`` (direct mTLS, certificates from the same KCP CA)."""

from __future__ import annotations

import asyncio
import ssl
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from harness.clusters import procfs
from harness.clusters.binaries import Binaries
from harness.clusters.plane import Environment, LocalBackend
from harness.skr import CertificateOverride, SkrFleet, SkrInstallation
from watcher import pki
from watcher.listener import EventStream, Listener, ListenerConfig, ListenerEvent
from watcher.listener.tls import direct_mtls_context
from watcher.render.watcher_cr import Watcher, klm_watcher_dict, parse_watcher, watcher_dict
from watcher.webhook.settings import DeliveryMode

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

GROUP, VERSION, KYMAS = "operator.kyma-project.io", "v1beta2", "kymas"
NS = "kyma-system"
WATCHED_BY = {"operator.kyma-project.io/watched-by": "kyma"}
CRD = Path(__file__).resolve().parents[3] / "fixtures" / "crds" / "kyma.yaml"
EVENT_TIMEOUT = 10.0  # s: an expected event must arrive within this
QUIET_WINDOW = 1.5  # s: an event that must not come is given this long to show up
PROBE = "probe-"  # objects created only to check the wiring; their events are skipped
MERGE = "application/merge-patch+json"


# -- KCP side ---------------------------------------------------------------------------


def kcp_files(ca: pki.CertificateAuthority, directory: Path, name: str) -> dict[str, Path]:
    directory.mkdir(parents=True)
    server = pki.issue_server_certificate(ca, name)
    return pki.write_secret_files(directory, pki.secret_data(server, ca.cert_pem))


def mtls_server_context(files: Mapping[str, Path]) -> ssl.SSLContext:
    return direct_mtls_context(files["tls.crt"], files["tls.key"], files["ca.crt"])


def listener(component: str, files: Mapping[str, Path]) -> Listener:
    return Listener(
        ListenerConfig(
            component=component,
            identity="direct-mtls",
            ssl_context=mtls_server_context(files),
            port=0,
        )
    )


@asynccontextmanager
async def path_router(
    files: Mapping[str, Path], routes: Mapping[str, Listener], identity: list[ssl.SSLContext]
) -> AsyncIterator[str]:
    """A stand-in for the KCP gateway's path routing: terminates mTLS (KCP CA), forwards
    each event to the Listener serving its path, presenting ``identity[0]``'s client
    certificate (the SKR's own), so direct-mTLS Listeners see the SKR's runtime id."""
    async with aiohttp.ClientSession() as session:

        async def forward(request: web.Request) -> web.Response:
            target = routes.get(request.path)
            if target is None:
                return web.json_response({"error": f"no route {request.path}"}, status=404)
            async with session.request(
                request.method,
                target.url + request.path,
                data=await request.read(),
                headers={"Content-Type": request.content_type},
                ssl=identity[0],
            ) as answer:
                return web.Response(status=answer.status, body=await answer.read())

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=mtls_server_context(files))
            await site.start()
            yield f"127.0.0.1:{runner.addresses[0][1]}"
        finally:
            await runner.cleanup()


# -- SKR side ---------------------------------------------------------------------------


async def apply_kyma_crd(api: ApiClient) -> None:
    ext: Any = client.ApiextensionsV1Api(api)
    await ext.create_custom_resource_definition(yaml.safe_load(CRD.read_text()))
    objects: Any = client.CustomObjectsApi(api)
    deadline = time.monotonic() + 30
    while True:  # served once the CRD is Established and discovery knows it
        try:
            await objects.list_namespaced_custom_object(GROUP, VERSION, "default", KYMAS)
            return
        except client.ApiException as e:
            if e.status != 404 or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.1)


def kyma(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Kyma",
        "metadata": {"name": name, "namespace": NS, "labels": dict(labels)},
        "spec": {"channel": "regular"},
    }


class Skr:
    """Writes to one SKR's Kymas and ConfigMaps."""

    def __init__(self, api: ApiClient) -> None:
        self.objects: Any = client.CustomObjectsApi(api)
        self.core: Any = client.CoreV1Api(api)

    async def create_kyma(self, name: str, labels: Mapping[str, str] = WATCHED_BY) -> None:
        await self.objects.create_namespaced_custom_object(
            GROUP, VERSION, NS, KYMAS, kyma(name, labels)
        )

    async def patch_kyma(self, name: str, patch: dict[str, Any], **kw: Any) -> None:
        await self.objects.patch_namespaced_custom_object(
            GROUP, VERSION, NS, KYMAS, name, patch, _content_type=MERGE, **kw
        )

    async def patch_kyma_status(self, name: str, patch: dict[str, Any], **kw: Any) -> None:
        await self.objects.patch_namespaced_custom_object_status(
            GROUP, VERSION, NS, KYMAS, name, patch, _content_type=MERGE, **kw
        )

    async def create_config_map(self, name: str, labels: Mapping[str, str], **kw: Any) -> None:
        body = {"metadata": {"name": name, "labels": dict(labels)}, "data": {"k": "v"}}
        await self.core.create_namespaced_config_map(NS, body, **kw)


# -- events -----------------------------------------------------------------------------


async def next_event(
    stream: EventStream, name: str, within: float = EVENT_TIMEOUT, *, runtime: str = ""
) -> ListenerEvent:
    """The next event, which must be about ``name`` (events about probes are skipped).

    With ``runtime``, late events from other runtimes are skipped too: an API server may
    run admission twice for one write (a PATCH retried on a conflict), and the coalescing
    rule allows that duplicate to arrive after the test moved on to the next SKR.
    """
    async with asyncio.timeout(within):
        while True:
            event = await stream.get()
            if event.event.watched.name.startswith(PROBE):
                continue
            if runtime and event.runtime_id != runtime:
                continue
            assert event.event.watched.name == name, f"unexpected event {event}"
            return event


async def assert_no_event(stream: EventStream, window: float = QUIET_WINDOW) -> None:
    try:
        async with asyncio.timeout(window):
            while True:
                event = await stream.get()
                assert event.event.watched.name.startswith(PROBE), f"unexpected event {event}"
    except TimeoutError:
        pass


async def wait_wired(
    skr: SkrInstallation, poke: Callable[[int], Awaitable[None]], within: float = 15.0
) -> None:
    """Repeat ``poke`` (a write that reaches the webhook but is no event, or is a probe)
    until the webhook counts it: the API server uses the configuration just stored."""
    deadline = time.monotonic() + within
    for attempt in range(10_000):
        before = await skr.metric("watcher_admission_request_total")
        await poke(attempt)
        if await skr.metric("watcher_admission_request_total") > before:
            return
        assert time.monotonic() < deadline, "the API server never called the webhook"
        await asyncio.sleep(0.05)  # polling interval, not a readiness guess


def klm_watcher(field: str = "spec") -> Watcher:
    obj = klm_watcher_dict()
    obj["spec"]["field"] = field
    return parse_watcher(obj)


CM_LABELS = {"watcher.example/watch": "yes"}


def cm_watcher() -> Watcher:
    return parse_watcher(
        watcher_dict(
            "cm-watcher",
            manager="cm-manager",
            resource=("", "v1", "configmaps"),
            service=("cm-manager-events", "kcp-system", 8080),
            labels_to_watch=CM_LABELS,
        )
    )


# -- tests ------------------------------------------------------------------------------


@asynccontextmanager
async def skr_clusters(
    binaries: Binaries, tmp_path: Path, names: list[str]
) -> AsyncIterator[Environment]:
    async with LocalBackend(binaries, log_dir=tmp_path / "logs").start(names) as env:
        async with asyncio.TaskGroup() as group:
            for name in names:
                group.create_task(_crd(env, name))
        yield env


async def _crd(env: Environment, name: str) -> None:
    async with env[name].api_client() as api:
        await apply_kyma_crd(api)


async def test_watcher_flows_through_the_real_admission_chain(
    cluster_binaries: Binaries, tmp_path: Path
) -> None:
    ca = pki.create_ca()
    files = kcp_files(ca, tmp_path / "kcp", "kcp-gateway")
    identity: list[ssl.SSLContext] = []
    async with AsyncExitStack() as stack:
        env = await stack.enter_async_context(skr_clusters(cluster_binaries, tmp_path, ["skr-a"]))
        klm = await stack.enter_async_context(listener("lifecycle-manager", files))
        cms = await stack.enter_async_context(listener("cm-manager", files))
        routes = {klm.config.event_path: klm, cms.config.event_path: cms}
        kcp_addr = await stack.enter_async_context(path_router(files, routes, identity))
        installation = SkrInstallation(
            env["skr-a"],
            runtime_id="runtime-a",
            skr_domain="skr-a.example.com",
            ca=ca,
            ca_bundle_pem=ca.cert_pem,
            kcp_addr=kcp_addr,
            log_dir=tmp_path / "logs",
        )
        skr = await stack.enter_async_context(installation)
        client_ctx = ssl.create_default_context(cafile=str(skr.tls.ca_cert))
        client_ctx.load_cert_chain(skr.tls.tls_cert, skr.tls.tls_key)
        identity.append(client_ctx)
        api = await stack.enter_async_context(env["skr-a"].api_client())
        writer = Skr(api)
        pid, directory = skr.pid, skr.directory
        assert pid is not None and procfs.is_alive(pid) and directory.is_dir()

        secret = await writer.core.read_namespaced_secret("skr-webhook-tls", NS)
        assert secret.type == "kubernetes.io/tls"
        assert set(secret.data) == {"tls.crt", "tls.key", "ca.crt"}

        # KLM's default Watcher: labelled Kyma spec changes → lifecycle-manager. The Kyma
        # exists first, so the only events are those of the patches below.
        await writer.create_kyma("default-kyma")
        await skr.apply_watchers([klm_watcher()])

        async def annotate(n: int) -> None:  # reaches the webhook, spec unchanged: no event
            await writer.patch_kyma(
                "default-kyma", {"metadata": {"annotations": {"probe": str(n)}}}, dry_run="All"
            )

        await wait_wired(skr, annotate)
        await writer.patch_kyma("default-kyma", {"spec": {"channel": "fast"}})
        event = await next_event(klm.events(), "default-kyma")
        assert event.runtime_id == "runtime-a"
        assert str(event.event.watched) == f"{NS}/default-kyma"
        gvk = event.event.watched_gvk
        assert (gvk.group, gvk.version, gvk.kind) == (GROUP, VERSION, "Kyma")

        await writer.patch_kyma("default-kyma", {"spec": {"channel": "regular"}})
        assert (await next_event(klm.events(), "default-kyma")).runtime_id == "runtime-a"

        # Status-only change and an unlabelled Kyma: no event.
        await writer.patch_kyma_status("default-kyma", {"status": {"state": "Ready"}})
        await writer.create_kyma("unwatched-kyma", labels={})
        await writer.patch_kyma("unwatched-kyma", {"spec": {"channel": "fast"}})
        await assert_no_event(klm.events())

        # Switch the Watcher to the status field: now status changes are events.
        await skr.apply_watchers([klm_watcher("status")])

        async def same_status(n: int) -> None:  # status subresource, unchanged: no event
            await writer.patch_kyma_status(
                "default-kyma", {"status": {"state": "Ready"}}, dry_run="All"
            )

        await wait_wired(skr, same_status)
        await writer.patch_kyma_status("default-kyma", {"status": {"state": "Processing"}})
        event = await next_event(klm.events(), "default-kyma")
        assert event.runtime_id == "runtime-a"
        await writer.patch_kyma("default-kyma", {"spec": {"channel": "fast"}})
        await assert_no_event(klm.events())

        # A second Watcher for labelled ConfigMaps, on its own manager's path.
        await skr.apply_watchers([klm_watcher("status"), cm_watcher()])

        async def probe_cm(n: int) -> None:  # an event, but for a probe name
            await writer.create_config_map(f"{PROBE}{n}", CM_LABELS, dry_run="All")

        await wait_wired(skr, probe_cm)
        await writer.create_config_map("plain", {})
        await writer.create_config_map("labelled", CM_LABELS)
        event = await next_event(cms.events(), "labelled")
        assert event.runtime_id == "runtime-a"
        gvk = event.event.watched_gvk
        assert (gvk.group, gvk.version, gvk.kind) == ("", "v1", "ConfigMap")
        await assert_no_event(cms.events())
        await assert_no_event(klm.events(), window=0.1)

        # SIGKILL: the SKR stays writable (failurePolicy Ignore); after a restart on the
        # same port events flow again.
        port = skr.webhook_port
        assert await skr.kill() == -9 and not procfs.is_alive(pid)
        started = time.monotonic()
        await writer.patch_kyma_status("default-kyma", {"status": {"state": "Error"}})
        await writer.create_config_map("while-down", CM_LABELS)
        down_write = time.monotonic() - started
        assert down_write < 5.0, f"writes stalled {down_write:.1f} s with the webhook down"
        await skr.start()
        assert skr.webhook_port == port and skr.pid not in (None, pid)
        await wait_wired(skr, same_status)
        await writer.patch_kyma_status("default-kyma", {"status": {"state": "Ready"}})
        assert (await next_event(klm.events(), "default-kyma")).runtime_id == "runtime-a"
        second_pid = skr.pid
        assert second_pid is not None

        # Uninstall: configuration and Secret removed, process gone, directory deleted.
        await skr.uninstall()
        assert not procfs.is_alive(second_pid) and not directory.exists()
        admission: Any = client.AdmissionregistrationV1Api(api)
        names = [
            c.metadata.name for c in (await admission.list_validating_webhook_configuration()).items
        ]
        assert "skr-webhook" not in names
        with pytest.raises(client.ApiException) as missing:
            await writer.core.read_namespaced_secret("skr-webhook-tls", NS)
        assert missing.value.status == 404
        await writer.patch_kyma("default-kyma", {"spec": {"channel": "regular"}})  # no webhook


async def first_refusal(writer: Skr, within: float = 10.0) -> client.ApiException:
    """Write until the API server refuses (the Fail policy may take a moment to apply)."""
    deadline = time.monotonic() + within
    for i in range(10_000):
        try:
            await writer.patch_kyma("default-kyma", {"spec": {"channel": f"refused-{i}"}})
        except client.ApiException as e:
            return e
        assert time.monotonic() < deadline, "writes were never refused with failurePolicy Fail"
        await asyncio.sleep(0.05)  # polling interval
    raise AssertionError("unreachable")


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return (
        f"n={len(values)} p50={statistics.median(values) * 1000:.1f} ms "
        f"p95={p95 * 1000:.1f} ms max={ordered[-1] * 1000:.1f} ms"
    )


async def test_fleet_rewires_every_skr_at_once_and_latency(
    cluster_binaries: Binaries, tmp_path: Path
) -> None:
    ca = pki.create_ca()
    files = kcp_files(ca, tmp_path / "kcp", "kcp-listener")
    modes: tuple[tuple[str, DeliveryMode], ...] = (("skr-a", "async"), ("skr-b", "sync"))
    async with AsyncExitStack() as stack:
        env = await stack.enter_async_context(
            skr_clusters(cluster_binaries, tmp_path, ["skr-a", "skr-b"])
        )
        klm = await stack.enter_async_context(listener("lifecycle-manager", files))
        kcp_addr = f"127.0.0.1:{klm.port}"
        fleet = SkrFleet(
            SkrInstallation(
                env[name],
                runtime_id=f"runtime-{name}",
                skr_domain=f"{name}.example.com",
                ca=ca,
                ca_bundle_pem=ca.cert_pem,
                kcp_addr=kcp_addr,
                delivery_mode=mode,
                log_level="WARNING",
            )
            for name, mode in modes
        )
        await stack.enter_async_context(fleet)
        pids = [inst.pid for inst in fleet]
        directories = [inst.directory for inst in fleet]
        writers = {
            inst.cluster.name: Skr(await stack.enter_async_context(inst.cluster.api_client()))
            for inst in fleet
        }

        for writer in writers.values():
            await writer.create_kyma("default-kyma")
        started = time.monotonic()
        await fleet.apply_watchers([klm_watcher()])
        rewire = time.monotonic() - started
        assert all(inst.watchers == fleet.watchers for inst in fleet)

        latencies: dict[str, list[float]] = {"skr-a": [], "skr-b": []}
        for inst in fleet:
            name = inst.cluster.name
            writer = writers[name]

            async def annotate(n: int, writer: Skr = writer) -> None:
                await writer.patch_kyma(
                    "default-kyma", {"metadata": {"annotations": {"probe": str(n)}}}, dry_run="All"
                )

            await wait_wired(inst, annotate)
            for i in range(20):
                sent = time.time()
                await writer.patch_kyma("default-kyma", {"spec": {"channel": f"c{i}"}})
                event = await next_event(klm.events(), "default-kyma", runtime=f"runtime-{name}")
                latencies[name].append(event.received_at - sent)
            assert await inst.metric("watcher_failed_kcp_total", error_reason="failed-request") == 0

        print(f"\nfleet rewire of 2 SKRs: {rewire * 1000:.1f} ms")
        print(f"admission→listener, async delivery (skr-a): {summary(latencies['skr-a'])}")
        print(f"admission→listener, sync delivery (skr-b):  {summary(latencies['skr-b'])}")
        assert max(latencies["skr-a"] + latencies["skr-b"]) < EVENT_TIMEOUT

        # Renewal: a new leaf from the same CA is picked up without a restart.
        a, b = fleet["skr-a"], fleet["skr-b"]
        renewed = pki.issue_runtime_certificate(
            ca, "runtime-skr-a", "skr-a.example.com", extra_ip_addresses=["127.0.0.1"]
        )
        pid_a = a.pid
        await a.rotate(ca.cert_pem, renewed)
        reload_s = await a.wait_serving(renewed)
        assert a.pid == pid_a and a.leaf is renewed
        print(f"certificate reload after rotate: {reload_s * 1000:.0f} ms")
        await writers["skr-a"].patch_kyma("default-kyma", {"spec": {"channel": "renewed"}})
        await next_event(klm.events(), "default-kyma", runtime="runtime-skr-a")

        # failurePolicy Fail makes a dead webhook visible: watched writes are refused.
        b.failure_policy = "Fail"
        await b.apply_watchers(fleet.watchers)
        await b.kill()
        refused = await first_refusal(writers["skr-b"])
        # The stub types ApiException.body as bytes; ApiClient.call_api decodes it to str.
        assert refused.status == 500 and "failed calling webhook" in refused.body  # type: ignore[operator]
        await b.start()

        # Removing every Watcher removes the configuration everywhere.
        await fleet.apply_watchers([])
        for inst in fleet:
            async with inst.cluster.api_client() as api:
                admission: Any = client.AdmissionregistrationV1Api(api)
                items = (await admission.list_validating_webhook_configuration()).items
                assert [c.metadata.name for c in items] == []

    assert not any(pid and procfs.is_alive(pid) for pid in pids)
    assert not any(d.exists() for d in directories)


async def test_certificate_overrides_break_the_intended_hop(
    cluster_binaries: Binaries, tmp_path: Path
) -> None:
    """Foreign CA: the API server still calls the webhook (its caBundle is the foreign CA)
    but the KCP refuses the client certificate. Expired: the API server cannot call the
    webhook at all (seen as refused writes with failurePolicy Fail)."""
    ca = pki.create_ca()
    files = kcp_files(ca, tmp_path / "kcp", "kcp-listener")
    overrides = {
        "skr-a": CertificateOverride.foreign_ca(),
        "skr-b": CertificateOverride.expired(),
    }
    async with AsyncExitStack() as stack:
        env = await stack.enter_async_context(
            skr_clusters(cluster_binaries, tmp_path, ["skr-a", "skr-b"])
        )
        klm = await stack.enter_async_context(listener("lifecycle-manager", files))
        fleet = SkrFleet(
            SkrInstallation(
                env[name],
                runtime_id=f"runtime-{name}",
                skr_domain=f"{name}.example.com",
                ca=ca,
                ca_bundle_pem=ca.cert_pem,
                kcp_addr=f"127.0.0.1:{klm.port}",
                delivery_mode="sync",
                certificate=override,
                failure_policy="Fail" if name == "skr-b" else "Ignore",
                extra_env={"WATCHER_SYNC_ATTEMPTS": "1"},
            )
            for name, override in overrides.items()
        )
        await stack.enter_async_context(fleet)
        writers = {
            inst.cluster.name: Skr(await stack.enter_async_context(inst.cluster.api_client()))
            for inst in fleet
        }
        for writer in writers.values():
            await writer.create_kyma("default-kyma")
        await fleet.apply_watchers([klm_watcher()])
        foreign, expired = fleet["skr-a"], fleet["skr-b"]

        async def annotate(n: int) -> None:
            await writers["skr-a"].patch_kyma(
                "default-kyma", {"metadata": {"annotations": {"probe": str(n)}}}, dry_run="All"
            )

        await wait_wired(foreign, annotate)
        await writers["skr-a"].patch_kyma("default-kyma", {"spec": {"channel": "fast"}})
        failed = await foreign.metric("watcher_failed_kcp_total", error_reason="failed-request")
        assert failed == 1.0, await foreign.metrics()

        refused = await first_refusal(writers["skr-b"])  # skr-b uses failurePolicy Fail
        # The stub types ApiException.body as bytes; ApiClient.call_api decodes it to str.
        assert refused.status == 500 and "expired" in refused.body, refused.body  # type: ignore[operator]
        assert await expired.metric("watcher_admission_request_total") == 0.0
        await assert_no_event(klm.events())
