"""The HTTPS client that POSTs events to the KCP gateway, over pooled mTLS connections.

One ``ClientSession`` with one ``TCPConnector`` keeps connections alive between events
(upstream opened one per request). The client certificate and CA come from
``TLSReloader.client_context`` *per request*: aiohttp keys pooled connections by SSL
context, so after a rotation new requests open connections with the new files, requests
in flight finish on their old connection, and idle old connections are closed by the
connector's keep-alive timeout. Nothing is re-read from disk per request.

``keepalive_timeout=0`` opens a new connection (and TLS handshake) per event, as upstream
does: a choice for gateways that must not see long-lived connections, and the baseline the
benchmarks compare pooling against. The session is lean on purpose (no cookie jar, one
timeout object per limit): per-event client work is a large share of the webhook's CPU.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from datetime import UTC

import aiohttp
from yarl import URL

from watcher.errors import WatcherError
from watcher.webhook.tlsreload import TLSReloader

MAX_ERROR_BODY = 1024


class KcpRequestSetupError(WatcherError):
    """The request could not be built (bad URL); upstream's ``request-setup`` reason."""


@dataclass(frozen=True)
class KcpResponse:
    status: int
    body: str
    retry_after: float | None = None


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    wall = time.time() if now is None else now
    return max(0.0, when.timestamp() - wall)


class KcpClient:
    """POSTs bodies to ``base_url`` + path; call ``start`` and ``close`` around its use."""

    def __init__(
        self,
        base_url: str,
        tls: TLSReloader,
        *,
        pool_size: int = 16,
        keepalive_timeout: float = 30.0,
    ) -> None:
        try:
            self.base_url = URL(base_url)
        except ValueError as exc:
            raise KcpRequestSetupError(f"invalid KCP address {base_url!r}: {exc}") from None
        self._tls = tls
        self._pool_size = pool_size
        self._keepalive = keepalive_timeout
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    async def start(self) -> None:
        if self._keepalive > 0:
            connector = aiohttp.TCPConnector(
                limit=self._pool_size,
                keepalive_timeout=self._keepalive,
                ssl=self._tls.client_context,
            )
        else:
            connector = aiohttp.TCPConnector(
                limit=self._pool_size, force_close=True, ssl=self._tls.client_context
            )
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers={"Content-Type": "application/json"},
            skip_auto_headers=("User-Agent",),
            cookie_jar=aiohttp.DummyCookieJar(),
        )

    def _timeout(self, seconds: float) -> aiohttp.ClientTimeout:
        timeout = self._timeouts.get(seconds)
        if timeout is None:
            timeout = self._timeouts[seconds] = aiohttp.ClientTimeout(total=seconds)
        return timeout

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def url(self, path: str) -> URL:
        try:
            return self.base_url.join(URL(path))
        except ValueError as exc:
            raise KcpRequestSetupError(f"cannot build KCP URL for {path!r}: {exc}") from None

    async def post(self, path: str, body: bytes, *, time_limit: float) -> KcpResponse:
        """One POST. Raises ``aiohttp.ClientError``/``TimeoutError`` on transport failure."""
        if self._session is None:
            raise KcpRequestSetupError("KCP client is not started")
        url = self.url(path)
        async with self._session.post(
            url,
            data=body,
            ssl=self._tls.client_context,
            timeout=self._timeout(time_limit),
            allow_redirects=False,
        ) as resp:
            raw = await resp.content.read(MAX_ERROR_BODY)
            return KcpResponse(
                status=resp.status,
                body=raw.decode("utf-8", "replace"),
                retry_after=parse_retry_after(resp.headers.get("Retry-After")),
            )
