"""Fixtures for the webhook tests; the pieces they assemble live in ``webhook_helpers``."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
from webhook_helpers import (
    MANAGER,
    Answer,
    FakeKcp,
    MakeWebhook,
    Pki,
    webhook_settings,
)

from watcher.webhook.server import Webhook
from watcher.webhook.settings import TLSFiles, WebhookSettings


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    files = TLSFiles(tmp_path / "ca.crt", tmp_path / "tls.crt", tmp_path / "tls.key")
    p = Pki(tmp_path, trustme.CA(), trustme.CA(), files)
    p.write(p.issue(p.ca1), [p.ca1])
    return p


@pytest.fixture
async def kcp(pki: Pki) -> AsyncIterator[FakeKcp]:
    """The KCP: server cert from CA1, client certs verified against CA1 + CA2."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    pki.issue(pki.ca1, "kcp-gateway").configure_cert(ctx)
    ctx.verify_mode = ssl.CERT_REQUIRED
    pki.ca1.configure_trust(ctx)
    pki.ca2.configure_trust(ctx)
    server = FakeKcp(ctx)
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def make_webhook(pki: Pki, kcp: FakeKcp) -> AsyncIterator[MakeWebhook]:
    """``await make_webhook(mode="sync", ...)``: a started webhook, stopped at teardown."""
    hooks: list[Webhook] = []

    async def make(*, settings: WebhookSettings | None = None, **delivery: Any) -> Webhook:
        hook = Webhook(settings or webhook_settings(pki, kcp, **delivery))
        await hook.start()
        hooks.append(hook)
        return hook

    yield make
    kcp.release()
    for hook in reversed(hooks):
        await hook.stop()


@pytest.fixture
async def api_server(pki: Pki) -> AsyncIterator[Callable[..., Awaitable[Answer]]]:
    """Plays the SKR API server: POSTs bodies to a webhook over HTTPS."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=pki.trust_all())) as s:

        async def post(
            hook: Webhook,
            body: Any,
            *,
            path: str = f"/validate/{MANAGER}",
            method: str = "POST",
            raw: bytes | None = None,
        ) -> Answer:
            data = raw if raw is not None else aiohttp.payload.JsonPayload(body)
            async with s.request(method, hook.url + path, data=data) as resp:
                text = await resp.text()
                try:
                    parsed = await resp.json(content_type=None) if text else None
                except ValueError:
                    parsed = text
                return Answer(resp.status, dict(resp.headers), parsed)

        yield post


@pytest.fixture(autouse=True)
def _fail_on_leaked_tasks(no_leaked_tasks: None) -> None:
    """Every test here must leave no asyncio task behind (the repository's ``conftest.py``)."""
