"""Watcher changes reach the SKRs at the Kyma reconcile (KLM's rollout) or at once (ours).

With ``watcher_rollout="reconcile"`` and a success interval far away, a new Watcher is
routed by the gateway at once but the SKR's ``skr-webhook`` keeps its old webhooks until
the Kyma is reconciled; ``immediate`` re-renders every SKR before ``apply_watcher``
returns. Both modes render every reconcile from all Watchers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from harness.environment import (
    KCP_NAMESPACE,
    EnvironmentSpec,
    SkrSpec,
    WatcherEnvironment,
    watcher_environment,
)
from harness.environment.spec import KLM_SERVICE, WatcherRollout
from harness.kcp.lifecycle_manager.manager import Trigger
from harness.kcp.lifecycle_manager.queue.reconciler import RequeueIntervals
from harness.kube import VALIDATING_WEBHOOK_CONFIGURATIONS, get
from watcher.render.watcher_cr import klm_watcher_dict, watcher_dict

pytestmark = pytest.mark.e2e
KYMA = f"{KCP_NAMESPACE}/kyma-skr-a"


@pytest_asyncio.fixture(params=["reconcile", "immediate"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[WatcherEnvironment]:
    rollout: WatcherRollout = request.param
    spec = EnvironmentSpec(
        skrs=(SkrSpec("skr-a", "runtime-a", "skr-a.kyma.example.com"),),
        watchers=(klm_watcher_dict(),),
        intervals=RequeueIntervals(success=300),
        watcher_rollout=rollout,
    )
    async with watcher_environment(spec) as environment:
        yield environment


async def webhook_names(env: WatcherEnvironment) -> list[str]:
    vwc = await get(env.skr_apis["skr-a"], VALIDATING_WEBHOOK_CONFIGURATIONS, "skr-webhook")
    assert vwc is not None
    return sorted(w["name"] for w in vwc.get("webhooks") or [])


async def test_a_new_watcher_reaches_the_skr_as_the_mode_says(env: WatcherEnvironment) -> None:
    klm_only = ["kcp-system.klm-watcher.operator.kyma-project.io"]
    both = sorted([*klm_only, "kcp-system.cm-watcher.operator.kyma-project.io"])
    assert await webhook_names(env) == klm_only
    cm = watcher_dict(
        "cm-watcher",
        manager="lifecycle-manager",
        resource=("", "v1", "configmaps"),
        service=KLM_SERVICE,
        labels_to_watch={"watch-me": "yes"},
    )
    await env.apply_watcher(cm)  # returns once routed (and, immediate, wired)
    if env.rolls_out_immediately:
        assert await webhook_names(env) == both
        return
    await asyncio.sleep(1.0)  # a reconcile-less second: nothing reaches the SKR
    assert await webhook_names(env) == klm_only
    since = time.time()
    env.klm.reconciler.enqueue(KYMA, Trigger.WATCH_EVENT)
    await env.klm.wait_for_reconcile(KYMA, since=since, timeout=10)
    assert await webhook_names(env) == both
