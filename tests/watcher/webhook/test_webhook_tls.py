"""Certificate rotation on disk: client side (towards KCP) and server side (admissions)."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

from webhook_helpers import (
    FakeKcp,
    MakeWebhook,
    Pki,
    create,
    event_body,
    eventually,
    serial_of,
)

from watcher.webhook.server import Webhook


async def test_client_cert_and_ca_bundle_rotation_mid_run(
    make_webhook: MakeWebhook, api_server: Any, pki: Pki, kcp: FakeKcp
) -> None:
    hook = await make_webhook(workers=2)
    await api_server(hook, create("before"))
    await eventually(lambda: len(kcp.received) == 1)
    old_serial = kcp.received[0].client_serial

    sent = 0
    stop = asyncio.Event()

    async def churn() -> None:
        nonlocal sent
        while not stop.is_set():
            await api_server(hook, create(f"churn-{sent}"))
            sent += 1
            await asyncio.sleep(0.01)

    churner = asyncio.create_task(churn())
    try:
        await eventually(lambda: sent >= 5, what="churn running")
        # Renewal by a new CA: the bundle lists the new CA first and keeps the old one.
        new_leaf = pki.issue(pki.ca2)
        pki.write(new_leaf, [pki.ca2, pki.ca1])
        await eventually(lambda: hook.tls.generation == 2, what="reload")
        seen = sent
        await eventually(lambda: sent >= seen + 5, what="churn after rotation")
    finally:
        stop.set()
        await churner
    await eventually(lambda: len(kcp.received) == sent + 1, what="all churn delivered")
    m = hook.metrics
    assert m.value("watcher_failed_kcp_total", {"error_reason": "failed-request"}) == 0
    assert m.value("watcher_events_dropped_total", {"reason": "expired"}) == 0
    serials = [r.client_serial for r in kcp.received]
    new_serial = serials[-1]
    assert new_serial != old_serial
    # Once the new cert is used, the old one never comes back.
    first_new = serials.index(new_serial)
    assert set(serials[first_new:]) == {new_serial}


async def _https_post(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: bytes
) -> tuple[int, bytes]:
    """One HTTP/1.1 request on an existing (keep-alive) connection."""
    writer.write(
        b"POST /validate/lifecycle-manager HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    await writer.drain()
    status_line = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return int(status_line.split()[1]), await reader.readexactly(length)


async def _connect(hook: Webhook, ctx: ssl.SSLContext) -> tuple[Any, Any, str]:
    reader, writer = await asyncio.open_connection("127.0.0.1", hook.port, ssl=ctx)
    return reader, writer, serial_of(writer.get_extra_info("peercert"))


async def test_serving_cert_rotation_keeps_existing_connections(
    make_webhook: MakeWebhook, pki: Pki
) -> None:
    hook = await make_webhook(mode="sync")
    ctx = pki.trust_all()
    body = json.dumps(create("kyma-1")).encode()
    r1, w1, serial1 = await _connect(hook, ctx)
    try:
        assert (await _https_post(r1, w1, body))[0] == 200

        pki.write(pki.issue(pki.ca2), [pki.ca2, pki.ca1])
        await eventually(lambda: hook.tls.generation == 2, what="reload")

        r2, w2, serial2 = await _connect(hook, ctx)
        try:
            assert serial2 != serial1
            assert (await _https_post(r2, w2, body))[0] == 200
        finally:
            w2.close()
            await w2.wait_closed()
        # The connection opened before the rotation still works, with its old cert.
        status, answer = await _https_post(r1, w1, body)
        assert status == 200
        assert json.loads(answer)["response"]["allowed"] is True
        assert serial_of(w1.get_extra_info("peercert")) == serial1
    finally:
        w1.close()
        await w1.wait_closed()


async def test_half_written_files_keep_the_old_context(
    make_webhook: MakeWebhook, api_server: Any, pki: Pki, kcp: FakeKcp
) -> None:
    hook = await make_webhook()
    good_cert = pki.files.tls_cert.read_bytes()
    pki.files.tls_cert.write_bytes(good_cert[: len(good_cert) // 2])  # torn write
    await eventually(lambda: hook.tls.failures >= 1, what="failed reload attempt")
    assert hook.tls.generation == 1
    answer = await api_server(hook, create("kyma-1"))  # new connection: old context
    assert answer.status == 200
    await eventually(lambda: kcp.bodies() == [event_body()], what="delivery with old cert")

    pki.write(pki.issue(pki.ca1, "runtime-a"), [pki.ca1])
    await eventually(lambda: hook.tls.generation == 2, what="recovery")
    await api_server(hook, create("kyma-2"))
    await eventually(lambda: len(kcp.received) == 2)
    assert kcp.received[1].client_serial != kcp.received[0].client_serial
