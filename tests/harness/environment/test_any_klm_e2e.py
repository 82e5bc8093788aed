"""Your Lifecycle Manager in the loop: a KLM build as a process, the harness as its cluster.

Runs only with a KLM command (``WATCHER_HARNESS_KLM_COMMAND``): ``make e2e-klm`` gives
ours (``watcher-klm``); upstream's Go KLM, built outside this project, runs the same way
with ``WATCHER_HARNESS_KLM_CRDS`` naming its CRDs.

What it proves of that KLM, with our webhook run by the harness's kubelet from the
Deployment the KLM applied, behind the Service it applied, and Envoy serving the
gateway Secret the KLM wrote:
* every Kyma becomes Ready (certificates issued by the harness's cert-manager, the
  webhook Deployment ready, the VirtualService routed);
* a change of an SKR Kyma's spec reaches the KLM as an event — the listener accepted it
  (seen on the wire by the sidecar), its log says it queued that Kyma and reconciled it —
  and the change shows in the KCP Kyma's status;
* a killed webhook pod is restarted by the kubelet and the next change gets through.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator

import pytest

from harness.clusters.selection import ENV_KLM_COMMAND, choose_backend
from harness.environment.any_klm import KlmEnvironment, klm_environment
from harness.environment.spec import EnvironmentSpec, SkrSpec
from harness.kube import KYMAS, get, merge_patch
from watcher.domain import KCP_NAMESPACE, SKR_KYMA_NAME, SKR_NAMESPACE

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        not os.environ.get(ENV_KLM_COMMAND),
        reason=f"bring your own KLM: set {ENV_KLM_COMMAND} (and WATCHER_HARNESS_KLM_CRDS)",
    ),
]


@pytest.fixture
async def env() -> AsyncIterator[KlmEnvironment]:
    spec = EnvironmentSpec(
        skrs=(
            SkrSpec("skr-a", "runtime-a", "skr-a.kyma.example.com"),
            SkrSpec("skr-b", "runtime-b", "skr-b.kyma.example.com"),
        ),
        backend=choose_backend("local"),
    )
    async with klm_environment(spec) as environment:
        yield environment


async def _active_channel(env: KlmEnvironment, kyma: str, channel: str, within: float) -> None:
    async with asyncio.timeout(within):
        while True:
            obj = await get(env.kcp_api, KYMAS, kyma, KCP_NAMESPACE) or {}
            if (obj.get("status") or {}).get("activeChannel") == channel:
                return
            await asyncio.sleep(0.1)


async def _change_channel(env: KlmEnvironment, skr: str, channel: str) -> float:
    since = time.time()
    await merge_patch(
        env.skr_apis[skr], KYMAS, SKR_KYMA_NAME, SKR_NAMESPACE, {"spec": {"channel": channel}}
    )
    return since


async def test_an_skr_kyma_change_reaches_the_klm_and_its_status(env: KlmEnvironment) -> None:
    for skr in ("skr-a", "skr-b"):
        pod = await env.kubelets[skr].wait_ready(SKR_NAMESPACE, "skr-webhook", within=30)
        assert pod.pid is not None
    since = await _change_channel(env, "skr-a", "fast")
    kyma = env.kyma_key("skr-a")
    reconcile = await env.klm.wait_for_reconcile(kyma, "watch-event", since, timeout=20)
    assert reconcile.latency < 5.0
    # the listener accepted it, as the sidecar saw on the wire: the SKR Kyma, from runtime-a
    seen = [e for e in env.events if e.received_at >= since]
    assert [(e.runtime_id, e.kind, e.namespace, e.name) for e in seen][:1] == [
        ("runtime-a", "Kyma", SKR_NAMESPACE, SKR_KYMA_NAME)
    ]
    await _active_channel(env, "kyma-skr-a", "fast", within=20)
    # the other SKR's Kyma was not queued by an event
    assert env.klm.reconciles(env.kyma_key("skr-b"), "watch-event", since) == []


async def test_a_killed_webhook_pod_is_restarted_and_events_flow_again(
    env: KlmEnvironment,
) -> None:
    kubelet = env.kubelets["skr-b"]
    before = await kubelet.wait_ready(SKR_NAMESPACE, "skr-webhook", within=30)
    killed = await kubelet.kill_pod(SKR_NAMESPACE, "skr-webhook")
    assert killed == before.pid
    async with asyncio.timeout(30):  # the kubelet notices the exit, then restarts it
        while (after := kubelet.pods[f"{SKR_NAMESPACE}/skr-webhook"]).pid in (None, killed):
            await asyncio.sleep(0.1)
    after = await kubelet.wait_ready(SKR_NAMESPACE, "skr-webhook", within=30)
    assert after.pid != killed
    assert after.restart_count == before.restart_count + 1
    since = await _change_channel(env, "skr-b", "fast")
    await env.klm.wait_for_reconcile(env.kyma_key("skr-b"), "watch-event", since, timeout=20)
    await _active_channel(env, "kyma-skr-b", "fast", within=20)
