"""Readiness probes (HTTP, or a TCP connect) for :class:`~harness.clusters.process.OwnedProcess`.

A probe answers "ready?" once. Transport failures (connection refused, TLS handshake
still impossible, a reset) mean "not yet" and are turned into
:class:`~harness.clusters.process.NotReady` with a short reason, so a timeout message can
say what the last attempt saw.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from harness.clusters.process import NotReady, Probe


async def http_get(
    session: aiohttp.ClientSession,
    url: str,
    *,
    ssl_context: ssl.SSLContext | None = None,
    post: Mapping[str, Any] | None = None,
) -> tuple[int, str]:
    """GET ``url`` (or POST ``post`` to it as JSON); return status and body, mapping client
    errors to :class:`NotReady`."""
    method = "GET" if post is None else "POST"
    ssl_arg = ssl_context if ssl_context is not None else True
    try:
        async with session.request(method, url, json=post, ssl=ssl_arg) as r:
            return r.status, await r.text()
    except aiohttp.ClientError as e:
        raise NotReady(f"{method} {url}: {type(e).__name__}: {e}") from e


def http_probe(
    session: aiohttp.ClientSession,
    url: str,
    accept: Callable[[int, str], bool],
    *,
    ssl_context: ssl.SSLContext | None = None,
) -> Probe:
    """A probe that passes when ``accept(status, body)`` is true for a GET of ``url``."""

    async def probe() -> bool:
        status, body = await http_get(session, url, ssl_context=ssl_context)
        if not accept(status, body):
            raise NotReady(f"GET {url}: {status} {body.strip()[:200]!r}")
        return True

    return probe


def readyz_probe(session: aiohttp.ClientSession, base_url: str) -> Probe:
    """Ready once ``<base_url>/readyz`` answers 200 (controller-runtime's and our webhook's)."""
    return http_probe(session, f"{base_url}/readyz", lambda status, _: status == 200)


def tcp_probe(host: str, port: int) -> Probe:
    """A probe that passes once ``host:port`` accepts a connection (for a server whose
    requests need a client certificate the prober does not have)."""

    async def probe() -> bool:
        try:
            _, writer = await asyncio.open_connection(host, port)
        except OSError as exc:
            raise NotReady(f"connect {host}:{port}: {exc}") from exc
        writer.close()
        await writer.wait_closed()
        return True

    return probe
