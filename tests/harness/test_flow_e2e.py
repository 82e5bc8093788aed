"""The whole flow with real processes: SKR write → webhook → Envoy → listener → reconcile.

One KCP and three SKRs (real kube-apiserver + etcd), the real Envoy gateway, the Python
webhook per SKR, the Watcher controller and the KLM stand-in with SAN pinning. Nothing of
Kubernetes admission is simulated.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from harness.environment import (
    KCP_NAMESPACE,
    SKR_NAMESPACE,
    EnvironmentSpec,
    ObservedEvent,
    SkrSpec,
    WatcherEnvironment,
    watcher_environment,
)
from harness.kcp.lifecycle_manager.manager import Trigger
from harness.kube import KYMAS, WATCHERS, Resource, create_or_replace, delete, merge_patch
from harness.skr.certs import CertificateOverride
from watcher.render.watcher_cr import klm_watcher_dict, watcher_dict

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
QUIET_WINDOW = 2.0  # seconds in which a "no event" claim is checked


@pytest.fixture
async def env() -> AsyncIterator[WatcherEnvironment]:
    spec = EnvironmentSpec(
        skrs=(
            SkrSpec("skr-a", "runtime-a", "skr-a.kyma.example.com"),
            SkrSpec("skr-b", "runtime-b", "skr-b.kyma.example.com"),
            SkrSpec(
                "skr-bad",
                "runtime-bad",
                "skr-bad.kyma.example.com",
                CertificateOverride.wrong_san("elsewhere.example.com"),
            ),
        )
    )
    async with watcher_environment(spec) as environment:
        yield environment


async def patch_skr_kyma(
    env: WatcherEnvironment, skr: str, patch: dict[str, Any], sub: str = ""
) -> float:
    started = time.time()
    await merge_patch(env.skr_apis[skr], KYMAS, "default", SKR_NAMESPACE, patch, subresource=sub)
    return started


def watch_reconciles(env: WatcherEnvironment, kyma: str, since: float) -> list[object]:
    return list(env.klm.reconciles(f"{KCP_NAMESPACE}/{kyma}", Trigger.WATCH_EVENT, since))


async def test_spec_change_reconciles_only_the_right_kyma_within_2s(
    env: WatcherEnvironment,
) -> None:
    since = await patch_skr_kyma(env, "skr-a", {"spec": {"channel": "fast"}})
    rec = await env.klm.wait_for_reconcile(
        f"{KCP_NAMESPACE}/kyma-skr-a", Trigger.WATCH_EVENT, since, timeout=2.0
    )
    assert rec.at - since < 2.0
    await asyncio.sleep(QUIET_WINDOW)
    assert watch_reconciles(env, "kyma-skr-b", since) == []


async def test_status_watch_follows_the_watcher_field(env: WatcherEnvironment) -> None:
    since = await patch_skr_kyma(env, "skr-a", {"status": {"state": "Warning"}}, "status")
    await asyncio.sleep(QUIET_WINDOW)
    assert watch_reconciles(env, "kyma-skr-a", since) == []

    status_watcher = klm_watcher_dict()
    status_watcher["spec"]["field"] = "status"
    await env.apply_watcher(status_watcher)
    await asyncio.sleep(0.5)  # the controller and fleet rewire; then prove it by an event
    deadline = time.monotonic() + 15
    while True:
        since = await patch_skr_kyma(
            env, "skr-a", {"status": {"state": f"Ready-{time.monotonic()}"}}, "status"
        )
        try:
            await env.klm.wait_for_reconcile(
                f"{KCP_NAMESPACE}/kyma-skr-a", Trigger.WATCH_EVENT, since, timeout=2.0
            )
            break
        except TimeoutError:
            assert time.monotonic() < deadline, "status watch never took effect"


async def test_second_watcher_routes_labelled_configmaps_to_its_own_listener(
    env: WatcherEnvironment,
) -> None:
    await env.add_listener("cm-manager", ("cm-events", KCP_NAMESPACE, 9090))
    await env.apply_watcher(
        watcher_dict(
            "cm-watcher",
            manager="cm-manager",
            resource=("", "v1", "configmaps"),
            service=("cm-events", KCP_NAMESPACE, 9090),
            labels_to_watch={"watch-me": "yes"},
        )
    )
    await env.wait_watchers_applied([f"{KCP_NAMESPACE}/klm-watcher", f"{KCP_NAMESPACE}/cm-watcher"])
    await env.wait_route("cm-watcher", KCP_NAMESPACE, present=True)
    klm_events_before = env.klm.counters["events:received"]

    api = env.skr_apis["skr-b"]

    def got() -> list[ObservedEvent]:
        return [e for e in env.events if e.manager == "cm-manager"]

    async def configmap(name: str, labels: dict[str, str]) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "data": {"k": "v"},
        }
        await create_or_replace(api, CONFIGMAPS, body)

    # The SKR API server picks the new webhook up through an informer: write labelled
    # ConfigMaps until the first event proves the wiring, then check the filter.
    deadline = time.monotonic() + 15
    n = 0
    while not got():
        assert time.monotonic() < deadline, "no ConfigMap event arrived within 15 s"
        n += 1
        await configmap(f"labelled-{n}", {"watch-me": "yes"})
        await asyncio.sleep(0.3)
    await configmap("plain", {})
    await asyncio.sleep(QUIET_WINDOW)
    names = [e.name for e in got()]
    assert "plain" not in names
    assert set(names) <= {f"labelled-{i}" for i in range(1, n + 1)}
    assert {e.runtime_id for e in got()} == {"runtime-b"}
    assert env.klm.counters["events:received"] == klm_events_before

    await delete(env.kcp_api, WATCHERS, "cm-watcher", KCP_NAMESPACE)
    await env.wait_watchers_applied([f"{KCP_NAMESPACE}/klm-watcher"])
    await env.wait_route("cm-watcher", KCP_NAMESPACE, present=False)
    seen = len(got())
    await merge_patch(api, CONFIGMAPS, "labelled-1", "default", {"data": {"k": "changed"}})
    await asyncio.sleep(QUIET_WINDOW)
    assert len(got()) == seen, "events kept arriving after the Watcher was removed"


async def test_wrong_san_is_refused_with_403_and_never_reconciled(env: WatcherEnvironment) -> None:
    since = await patch_skr_kyma(env, "skr-bad", {"spec": {"channel": "fast"}})
    listener = env.klm.listener
    assert listener is not None
    async with asyncio.timeout(10):
        while (
            listener.metrics.value(
                "watcher_listener_verification_failed_total", {"reason": "san-mismatch"}
            )
            < 1
        ):
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    assert watch_reconciles(env, "kyma-skr-bad", since) == []


async def test_foreign_ca_never_reaches_a_listener(env: WatcherEnvironment) -> None:
    """A client certificate from another CA is stopped by Envoy's TLS verification."""
    from watcher import pki

    foreign = pki.create_ca(common_name="not-the-kcp-ca")
    leaf = pki.issue_runtime_certificate(foreign, "runtime-a", "skr-a.kyma.example.com")
    directory = env.workdir / "foreign"
    directory.mkdir()
    files = pki.write_secret_files(directory, pki.secret_data(leaf, env.ca.cert_pem))
    import ssl

    import aiohttp

    ctx = ssl.create_default_context(cafile=str(files["ca.crt"]))
    ctx.load_cert_chain(files["tls.crt"], files["tls.key"])
    before = await env.gateway.counters()
    accepted_before = env.klm.counters["events:received"]
    async with aiohttp.ClientSession() as session:
        try:
            async with session.post(
                f"https://127.0.0.1:{env.gateway.port}/v2/lifecycle-manager/event",
                data=b'{"watched":{"Namespace":"kyma-system","Name":"default"},"watchedGvk":{}}',
                ssl=ctx,
            ) as resp:
                status = resp.status
        except (aiohttp.ClientError, ConnectionError):
            status = 0
    after = await env.gateway.counters()
    assert status != 200
    assert after.ssl_fail_verify_error > before.ssl_fail_verify_error
    assert env.klm.counters["events:received"] == accepted_before
