"""Delivery to a real mTLS KCP: async answers, outages, coalescing, retries, overflow, drain."""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from webhook_helpers import (
    FakeKcp,
    MakeWebhook,
    Pki,
    create,
    event_body,
    eventually,
    kyma,
    review,
)

from watcher.webhook.coalesce import Offer
from watcher.webhook.delivery import Delivery
from watcher.webhook.kcpclient import KcpClient
from watcher.webhook.metrics import WebhookMetrics
from watcher.webhook.settings import DeliverySettings
from watcher.webhook.tlsreload import TLSReloader

PATH = "/v2/lifecycle-manager/event"


def message(answer: Any) -> str:
    return str(answer.json["response"]["status"]["message"])


async def test_admission_does_not_wait_for_a_slow_kcp(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook()
    kcp.hold()
    loop = asyncio.get_running_loop()
    loop.call_later(2.0, kcp.release)
    started = time.monotonic()
    answer = await api_server(hook, create("kyma-1"))
    assert time.monotonic() - started < 0.5
    assert message(answer) == "kcp request queued"
    assert kcp.received == []
    await eventually(lambda: kcp.bodies() == [event_body()], within=5, what="delivery")


async def test_sync_mode_waits_like_upstream(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook(mode="sync")
    kcp.hold()
    asyncio.get_running_loop().call_later(0.5, kcp.release)
    started = time.monotonic()
    answer = await api_server(hook, create("kyma-1"))
    assert time.monotonic() - started >= 0.5
    assert message(answer) == "kcp request succeeded"


async def test_kcp_outage_then_recovery_delivers_everything_once(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook(workers=3)
    await kcp.stop()
    outage_started = time.monotonic()
    names = [f"kyma-{i}" for i in range(8)]
    for name in names:
        assert message(await api_server(hook, create(name))) == "kcp request queued"
    # Identical events while the first ones are waiting: coalesced, not queued again.
    for name in names[:4]:
        await api_server(hook, create(name))
    m = hook.metrics
    await eventually(lambda: m.value("watcher_delivery_retries_total") >= 6, what="retries")
    # The outage lasts a few seconds (simulated downtime, not a readiness wait).
    await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - outage_started)))
    await kcp.start()  # same port
    await eventually(lambda: len(kcp.received) >= len(names), what="all events after recovery")
    await asyncio.sleep(0.3)  # a duplicate, if any, would arrive within a few backoffs
    counts = Counter(kcp.bodies())
    # The coalescing rule: a repeat is merged while its event waits; if the event was in
    # flight at that moment (a retry attempt), the repeat queues again and arrives too.
    assert set(counts) == {event_body(n) for n in names}
    assert all(counts[event_body(n)] == 1 for n in names[4:])
    extra = sum(counts[event_body(n)] - 1 for n in names[:4])
    assert all(counts[event_body(n)] in (1, 2) for n in names[:4])
    assert m.value("watcher_events_coalesced_total") == 4 - extra
    assert m.value("watcher_events_delivered_total") == len(names) + extra
    assert m.value("watcher_failed_kcp_total", {"error_reason": "failed-request"}) == 0


async def test_identical_events_coalesce_while_pending(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook(workers=1)
    kcp.hold()
    await api_server(hook, create("first"))
    await eventually(lambda: kcp.in_flight == 1, what="first event in flight")
    for _ in range(3):
        await api_server(hook, create("second"))
    # The in-flight event is not pending any more: a new identical one queues again.
    await api_server(hook, create("first"))
    assert hook.metrics.value("watcher_events_coalesced_total") == 2
    assert hook.metrics.value("watcher_queue_depth") == 2
    kcp.release()
    await eventually(lambda: len(kcp.received) == 3, what="three deliveries")
    assert kcp.bodies() == [event_body("first"), event_body("second"), event_body("first")]


async def test_no_retry_on_404(make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp) -> None:
    hook = await make_webhook()
    kcp.answer(404)
    await api_server(hook, create("kyma-1"))
    m = hook.metrics
    labels = {"error_reason": "failed-request"}
    await eventually(lambda: m.value("watcher_failed_kcp_total", labels) == 1)
    assert len(kcp.attempts) == 1
    assert m.value("watcher_delivery_retries_total") == 0
    assert m.value("watcher_events_delivered_total") == 0


async def test_retry_on_500_and_429(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook()
    kcp.answer(500, 503, 429)
    await api_server(hook, create("kyma-1"))
    m = hook.metrics
    await eventually(lambda: m.value("watcher_events_delivered_total") == 1)
    assert len(kcp.attempts) == 4
    assert kcp.bodies() == [event_body()]
    assert m.value("watcher_delivery_retries_total") == 3


async def test_sync_mode_failure_messages_are_upstreams(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook(mode="sync")
    kcp.answer(404)
    answer = await api_server(hook, create("kyma-1"))
    assert message(answer) == ("kcp request failed: responseBody: answer 404 with StatusCode: 404")
    kcp.answer(500, 500, 500)
    answer = await api_server(hook, create("kyma-1"))
    assert message(answer).startswith("kcp request failed: responseBody: answer 500")
    assert len(kcp.attempts) == 4  # 404 once, 500 three times (sync_attempts)
    await kcp.stop()
    answer = await api_server(hook, create("kyma-1"))
    assert message(answer).startswith("kcp request failed\n")
    labels = {"error_reason": "failed-request"}
    assert hook.metrics.value("watcher_failed_kcp_total", labels) == 3


async def test_reject_newest_when_full(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook(workers=1, queue_size=1, overflow_policy="reject-newest")
    kcp.hold()
    await api_server(hook, create("a"))
    await eventually(lambda: kcp.in_flight == 1)
    assert message(await api_server(hook, create("b"))) == "kcp request queued"
    answer = await api_server(hook, create("c"))
    assert answer.json["response"]["allowed"] is True
    assert message(answer) == "kcp request failed: delivery queue is full"
    assert hook.metrics.value("watcher_events_dropped_total", {"reason": "overflow"}) == 1
    kcp.release()
    await eventually(lambda: len(kcp.received) == 2)
    assert kcp.bodies() == [event_body("a"), event_body("b")]


async def test_drop_oldest_when_full(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook(workers=1, queue_size=2)
    kcp.hold()
    await api_server(hook, create("a"))
    await eventually(lambda: kcp.in_flight == 1)
    for name in "bcd":
        assert message(await api_server(hook, create(name))) == "kcp request queued"
    assert hook.metrics.value("watcher_events_dropped_total", {"reason": "overflow"}) == 1
    kcp.release()
    await eventually(lambda: len(kcp.received) == 3)
    assert kcp.bodies() == [event_body("a"), event_body("c"), event_body("d")]


async def test_graceful_drain_delivers_queued_events(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook(workers=1)
    kcp.hold()
    for name in "abc":
        await api_server(hook, create(name))
    await eventually(lambda: kcp.in_flight == 1)
    stopping = asyncio.create_task(hook.stop())
    await asyncio.sleep(0.1)  # let stop() close the admission server first
    assert not stopping.done()
    kcp.release()
    report = await stopping
    assert report is not None
    assert (report.delivered, report.left, report.timed_out) == (3, 0, False)
    assert len(kcp.received) == 3


async def test_drain_deadline_reports_what_is_left(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook(workers=1, drain_timeout=0.3)
    kcp.hold()
    for name in "abc":
        await api_server(hook, create(name))
    await eventually(lambda: kcp.in_flight == 1)
    report = await hook.stop()
    assert report is not None
    assert (report.delivered, report.left, report.timed_out) == (0, 3, True)
    assert hook.metrics.value("watcher_events_dropped_total", {"reason": "shutdown"}) == 3


async def test_status_update_and_delete_payloads(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook()
    await api_server(hook, review("UPDATE", kyma(status={"a": 1}), kyma(status={}), "status"))
    await api_server(hook, review("DELETE", None, kyma(name="gone"), name="gone"))
    await eventually(lambda: len(kcp.received) == 2)
    assert sorted(kcp.bodies()) == sorted([event_body(), event_body("gone")])


# ------------------------------------------------------------------ Delivery on its own


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def client(pki: Pki, kcp: FakeKcp) -> AsyncIterator[KcpClient]:
    tls = TLSReloader(pki.files)
    tls.load()
    c = KcpClient(f"https://{kcp.addr}", tls, pool_size=4)
    await c.start()
    yield c
    await c.close()


@pytest.mark.parametrize(("keepalive", "connections"), [(30.0, 1), (0.0, 3)])
async def test_keepalive_zero_opens_a_connection_per_event(
    pki: Pki, kcp: FakeKcp, keepalive: float, connections: int
) -> None:
    """Pooled by default; ``WATCHER_KEEPALIVE_SECONDS=0`` is upstream's one per event."""
    tls = TLSReloader(pki.files)
    tls.load()
    c = KcpClient(f"https://{kcp.addr}", tls, pool_size=4, keepalive_timeout=keepalive)
    await c.start()
    try:
        for _ in range(3):
            assert (await c.post(PATH, event_body(), time_limit=5.0)).status == 200
    finally:
        await c.close()
    assert len({r.client_port for r in kcp.received}) == connections


def make_delivery(
    client: KcpClient, clock: FakeClock, delays: list[float], **settings: Any
) -> Delivery:
    base: dict[str, Any] = {"workers": 1, "retry_base": 1.0, "retry_max": 8.0}

    async def record_sleep(seconds: float) -> None:
        delays.append(seconds)
        await asyncio.sleep(0)

    return Delivery(
        client,
        settings=DeliverySettings(**{**base, **settings}),
        metrics=WebhookMetrics(),
        clock=clock,
        rng=random.Random(7),
        sleep=record_sleep,
    )


async def test_retry_after_is_honoured_and_backoff_is_jittered(
    client: KcpClient, kcp: FakeKcp
) -> None:
    delays: list[float] = []
    delivery = make_delivery(client, FakeClock(), delays)
    kcp.answer(429, Retry_After="3")
    kcp.answer(500, 500, 500)
    delivery.start()
    assert delivery.submit(PATH, event_body()) is Offer.QUEUED
    await eventually(lambda: len(kcp.received) == 1)
    report = await delivery.drain(1.0)
    assert report.left == 0
    assert delays[0] == 3.0
    expected_rng = random.Random(7)
    assert delays[1:] == [expected_rng.uniform(0, c) for c in (2.0, 4.0, 8.0)]


async def test_expired_events_are_dropped(client: KcpClient, kcp: FakeKcp) -> None:
    clock = FakeClock()
    delivery = make_delivery(client, clock, [], max_event_age=60.0)
    delivery.submit(PATH, event_body("old"))
    clock.now += 61
    delivery.submit(PATH, event_body("new"))
    delivery.start()
    await eventually(lambda: len(kcp.received) == 1)
    await delivery.drain(1.0)
    assert kcp.bodies() == [event_body("new")]
    m = delivery._metrics
    assert m.value("watcher_events_dropped_total", {"reason": "expired"}) == 1
    assert m.value("watcher_failed_kcp_total", {"error_reason": "failed-request"}) == 0


async def test_retrying_event_expires_and_counts_failed_request(
    client: KcpClient, kcp: FakeKcp
) -> None:
    clock = FakeClock()
    delays: list[float] = []
    delivery = make_delivery(client, clock, delays, max_event_age=60.0)
    kcp.answer(*[503] * 50)

    async def sleep_and_age(seconds: float) -> None:
        clock.now += 25
        await asyncio.sleep(0)

    delivery._sleep = sleep_and_age
    delivery.submit(PATH, event_body())
    delivery.start()
    m = delivery._metrics
    await eventually(lambda: m.value("watcher_events_dropped_total", {"reason": "expired"}) == 1)
    assert len(kcp.attempts) == 3  # at 0, 25 and 50 s; at 75 s it is too old
    assert m.value("watcher_failed_kcp_total", {"error_reason": "failed-request"}) == 1
    await delivery.drain(1.0)


async def test_submit_after_drain_is_rejected(client: KcpClient) -> None:
    delivery = make_delivery(client, FakeClock(), [])
    delivery.start()
    await delivery.drain(1.0)
    assert delivery.submit(PATH, event_body()) is Offer.REJECTED


async def test_a_new_admission_cuts_a_parked_events_backoff_short(
    client: KcpClient, kcp: FakeKcp
) -> None:
    """An event waiting out a long backoff is attempted at once when the same change is
    admitted again: a KCP that is back hears of it then, not at the backoff's end."""
    delays: list[float] = []
    delivery = make_delivery(client, FakeClock(), delays, retry_base=60.0, retry_max=60.0)
    forever = asyncio.Event()

    async def long_sleep(seconds: float) -> None:
        delays.append(seconds)
        await forever.wait()  # the backoff would outlast the test

    delivery._sleep = long_sleep
    kcp.answer(503)  # the first attempt fails; the KCP is fine afterwards
    delivery.start()
    delivery.submit(PATH, event_body())
    await eventually(lambda: delivery.queue.parked == 1, what="the event parked")
    assert delivery.submit(PATH, event_body()) is Offer.COALESCED
    await eventually(lambda: len(kcp.received) == 1, what="the nudged attempt")
    assert len(kcp.attempts) == 2 and len(delays) == 1
    assert delivery._metrics.value("watcher_events_delivered_total") == 1
    await delivery.drain(1.0)
