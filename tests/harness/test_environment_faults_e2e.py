"""Faults and observation on the whole flow: every part goes away and comes back.

One environment for the module (KCP + two SKRs, Envoy, KLM stand-in, a second manager
from the spec); every test leaves it running as it found it. Async delivery with a short
retry ceiling, so an event held back by a fault arrives within seconds of the recovery.
Measured recovery times are printed (``-s``) for docs/numbers.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from harness.environment import (
    KCP_NAMESPACE,
    KLM_COMPONENT,
    SKR_NAMESPACE,
    EnvironmentSpec,
    FaultError,
    ListenerSpec,
    ObservedEvent,
    SkrSpec,
    WatcherEnvironment,
    watcher_environment,
)
from harness.faults import (
    DropOldCa,
    KcpFault,
    PartFault,
    RotateCa,
    RotateLeaves,
    kcp_injection,
)
from harness.kcp.lifecycle_manager.certificates.policy import CertificateTimings
from harness.kcp.lifecycle_manager.manager import Trigger
from harness.kcp.lifecycle_manager.queue.reconciler import RequeueIntervals
from harness.kube import KYMAS, Resource, create_or_replace, delete, merge_patch
from watcher.render.watcher_cr import klm_watcher_dict, watcher_dict

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(180),
]

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
CM_SERVICE = ("cm-events", KCP_NAMESPACE, 9090)
FAILED = ("watcher_failed_kcp_total", {"error_reason": "failed-request"})


def cm_watcher(labels: dict[str, str]) -> dict[str, object]:
    return watcher_dict(
        "cm-watcher",
        manager="cm-manager",
        resource=("", "v1", "configmaps"),
        service=CM_SERVICE,
        labels_to_watch=labels,
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def env() -> AsyncIterator[WatcherEnvironment]:
    spec = EnvironmentSpec(
        skrs=(
            SkrSpec("skr-a", "runtime-a", "skr-a.kyma.example.com"),
            SkrSpec("skr-b", "runtime-b", "skr-b.kyma.example.com", delivery_mode="async"),
        ),
        watchers=(klm_watcher_dict(), cm_watcher({"watch-me": "yes"})),
        listeners=(ListenerSpec("cm-manager", CM_SERVICE),),
        webhook_env={"WATCHER_RETRY_BASE_SECONDS": "0.1", "WATCHER_RETRY_MAX_SECONDS": "1"},
        # KLM's rotation re-issues in each Kyma's next reconcile; the gateway switches after
        # the grace period: both short here.
        intervals=RequeueIntervals(success=1.0),
        certificates=CertificateTimings(grace=dt.timedelta(seconds=2)),
    )
    async with watcher_environment(spec) as environment:
        yield environment


async def touch_kyma(env: WatcherEnvironment, skr: str) -> float:
    """A spec change of the SKR's default Kyma (one event for KLM); returns when it started."""
    started = time.time()
    patch = {"spec": {"channel": f"c{time.monotonic_ns()}"}}
    await merge_patch(env.skr_apis[skr], KYMAS, "default", SKR_NAMESPACE, patch)
    return started


async def wait_event(
    env: WatcherEnvironment,
    since: float,
    match: Callable[[ObservedEvent], bool],
    within: float = 15.0,
) -> ObservedEvent:
    deadline = time.monotonic() + within
    while True:
        found = [e for e in env.events_since(since) if match(e)]
        if found:
            return found[0]
        assert time.monotonic() < deadline, (
            f"no matching event within {within:g} s; since then: {env.events_since(since)}"
        )
        await asyncio.sleep(0.05)


def klm_event(runtime_id: str) -> Callable[[ObservedEvent], bool]:
    return lambda e: e.manager == KLM_COMPONENT and e.runtime_id == runtime_id


async def failed_requests(env: WatcherEnvironment) -> dict[str, float]:
    return {
        inst.cluster.name: await env.metric(f"webhook/{inst.cluster.name}", *FAILED)
        for inst in env.fleet
    }


async def test_events_are_recorded_with_manager_and_runtime_id(env: WatcherEnvironment) -> None:
    since = await touch_kyma(env, "skr-a")
    kyma = await wait_event(env, since, klm_event("runtime-a"))
    assert (kyma.namespace, kyma.name, kyma.kind) == (SKR_NAMESPACE, "default", "Kyma")
    assert kyma.group == "operator.kyma-project.io"

    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm-1", "namespace": "default", "labels": {"watch-me": "yes"}},
        "data": {"k": "v"},
    }
    await create_or_replace(env.skr_apis["skr-b"], CONFIGMAPS, body)
    cm = await wait_event(env, since, lambda e: e.manager == "cm-manager")
    assert (cm.runtime_id, cm.name, cm.kind, cm.version) == ("runtime-b", "cm-1", "ConfigMap", "v1")
    assert all(e.runtime_id == "runtime-a" for e in env.events_since(since, KLM_COMPONENT))
    assert (
        await env.metric("listener/lifecycle-manager", "watcher_listener_events_accepted_total")
        >= 1
    )
    assert await env.metric("gateway", "http.kcp_gateway.downstream_rq_2xx") >= 2
    assert env.rejections() == {KLM_COMPONENT: {}, "cm-manager": {}}
    with pytest.raises(FaultError, match="no webhook named 'skr-z'"):
        await env.inject(PartFault.parse("webhook/skr-z", "kill"))


async def test_listener_restart_keeps_events_flowing(env: WatcherEnvironment) -> None:
    port = env.listeners[KLM_COMPONENT].port
    await env.inject(PartFault.parse("listener/lifecycle-manager", "stop"))
    since = await touch_kyma(env, "skr-a")  # Envoy answers 503; the webhook retries
    await asyncio.sleep(0.5)
    assert env.events_since(since, KLM_COMPONENT) == []
    record = await env.inject(PartFault.parse("listener/lifecycle-manager", "start"))
    assert env.listeners[KLM_COMPONENT].port == port
    event = await wait_event(env, since, klm_event("runtime-a"))
    print(
        f"listener stop→start: held event arrived "
        f"{event.received_at - record.done_at:.2f} s after start"
    )
    await env.klm.wait_for_reconcile(f"{KCP_NAMESPACE}/kyma-skr-a", Trigger.WATCH_EVENT, since)

    await env.inject(PartFault.parse("listener/lifecycle-manager", "restart"))
    since = await touch_kyma(env, "skr-b")
    await wait_event(env, since, klm_event("runtime-b"), within=5)
    assert [r.action for r in env.timeline[-3:]] == ["stop", "start", "restart"]


async def test_gateway_outage_during_writes_delivers_after_recovery(
    env: WatcherEnvironment,
) -> None:
    failed_before = await failed_requests(env)
    await env.inject(PartFault.parse("gateway", "stop"))
    since = time.time()
    for _ in range(3):
        await touch_kyma(env, "skr-a")
    await touch_kyma(env, "skr-b")
    record = await env.inject(PartFault.parse("gateway", "start"))
    a = await wait_event(env, since, klm_event("runtime-a"))
    b = await wait_event(env, since, klm_event("runtime-b"))
    assert min(a.received_at, b.received_at) >= record.at
    print(
        f"gateway stop→start took {record.done_at - record.at:.2f} s; held events arrived "
        f"{max(a.received_at, b.received_at) - record.done_at:.2f} s after it was up"
    )
    assert await failed_requests(env) == failed_before


async def test_webhook_sigkill_and_start(env: WatcherEnvironment) -> None:
    await env.inject(PartFault.parse("webhook/skr-b", "kill"))
    assert env.fleet["skr-b"].webhook.records[-1].stop_signal == "SIGKILL"
    await touch_kyma(env, "skr-b")  # failurePolicy Ignore: the write passes, the event is lost
    record = await env.inject(PartFault.parse("webhook/skr-b", "start"))
    since = await touch_kyma(env, "skr-b")
    event = await wait_event(env, since, klm_event("runtime-b"))
    print(
        f"webhook SIGKILL→start: start took {record.done_at - record.at:.2f} s, next event "
        f"{event.received_at - since:.2f} s after its write"
    )


async def test_kcp_abort_counts_retries_then_clear_delivers(env: WatcherEnvironment) -> None:
    retries = "watcher_delivery_retries_total"
    before = await env.metric("webhook/skr-a", retries)
    await env.inject(KcpFault(kcp_injection(abort_percent=100, abort_status=503)))
    try:
        since = await touch_kyma(env, "skr-a")
        deadline = time.monotonic() + 10
        while await env.metric("webhook/skr-a", retries) < before + 2:
            assert time.monotonic() < deadline, "no retries counted under a 100% abort"
            await asyncio.sleep(0.1)
        assert env.events_since(since, KLM_COMPONENT) == []
        assert await env.metric("gateway", "http.kcp_gateway.fault.aborts_injected") >= 2
    finally:
        cleared = await env.inject(KcpFault(None))
    event = await wait_event(env, since, klm_event("runtime-a"))
    print(f"kcp abort cleared: event arrived {event.received_at - cleared.done_at:.2f} s later")
    assert (await failed_requests(env))["skr-a"] == 0


async def test_kcp_api_server_restart_controllers_recover(env: WatcherEnvironment) -> None:
    stopped = await env.inject(PartFault.parse("apiserver/kcp", "stop"))
    record = await env.inject(PartFault.parse("apiserver/kcp", "start"))
    restarted = record.done_at
    print(
        f"KCP API server stop took {stopped.done_at - stopped.at:.2f} s "
        f"({env.clusters.control('kcp').records[-2].stop_signal}), "
        f"start {record.done_at - record.at:.2f} s"
    )

    # KLM's Kyma cache watches again: a Kyma created now becomes known.
    extra = {
        "apiVersion": "operator.kyma-project.io/v1beta2",
        "kind": "Kyma",
        "metadata": {
            "name": "kyma-extra",
            "namespace": KCP_NAMESPACE,
            "labels": {"kyma-project.io/runtime-id": "runtime-extra"},
        },
        "spec": {"channel": "regular"},
    }
    await create_or_replace(env.kcp_api, KYMAS, extra)
    await env.klm.cache.wait_for(f"{KCP_NAMESPACE}/kyma-extra", within=15)
    print(f"KLM cache saw a new Kyma {time.time() - restarted:.2f} s after the restart")
    await delete(env.kcp_api, KYMAS, "kyma-extra", KCP_NAMESPACE)

    # The Watcher controller watches again: a Watcher change re-renders every SKR.
    await env.apply_watcher(cm_watcher({"watch-me": "yes", "tier": "two"}))
    print(f"Watcher change live {time.time() - restarted:.2f} s after the restart")
    try:
        since = await touch_kyma(env, "skr-a")
        await env.klm.wait_for_reconcile(
            f"{KCP_NAMESPACE}/kyma-skr-a", Trigger.WATCH_EVENT, since, timeout=10
        )
    finally:
        await env.apply_watcher(cm_watcher({"watch-me": "yes"}))


async def test_rotation_under_writes_has_no_failed_delivery(env: WatcherEnvironment) -> None:
    before = await failed_requests(env)
    stop = asyncio.Event()
    writes = 0

    async def writer() -> None:
        nonlocal writes
        while not stop.is_set():
            for skr in ("skr-a", "skr-b"):
                await touch_kyma(env, skr)
                writes += 1
            await asyncio.sleep(0.2)

    task = asyncio.create_task(writer())
    try:
        started = time.monotonic()
        await env.inject(RotateLeaves(("skr-a",)))
        leaf = time.monotonic()
        await env.inject(RotateCa())
        with pytest.raises(FaultError, match="still serves a certificate of kcp-ca-1"):
            await env.inject(DropOldCa())  # before the grace period: it would cut off the SKRs
        await env.rotation.wait_current(within=20)
        ca = time.monotonic()
        await env.inject(DropOldCa())
        dropped = time.monotonic()
    finally:
        stop.set()
        await task
    print(
        f"rotation with {writes} writes: leaf {leaf - started:.2f} s, CA (re-issued in the "
        f"next reconciles, gateway after 2 s grace) {ca - leaf:.2f} s, "
        f"drop old CA {dropped - ca:.2f} s"
    )
    since = await touch_kyma(env, "skr-a")
    await wait_event(env, since, klm_event("runtime-a"))
    since = await touch_kyma(env, "skr-b")
    await wait_event(env, since, klm_event("runtime-b"))
    assert await failed_requests(env) == before
    assert env.rejections()[KLM_COMPONENT] == {}
    assert env.ca.common_name == "kcp-ca-2"
    assert env.rotation.cas.serving_ca.common_name == "kcp-ca-2"
    assert env.rotation.bundle_pem == env.ca.cert_pem
    for kyma in ("kyma-skr-a", "kyma-skr-b"):
        labels = {"kyma_name": kyma}
        assert await env.metric("klm", "lifecycle_mgr_self_signed_cert_not_renew", labels) == 0
