"""Helpers shared by the webhook tests: certificates, the KCP stand-in, review builders.

The KCP stand-in is a small aiohttp HTTPS server that requires a client certificate, so
the webhook's mTLS, pooling and rotation are exercised for real. It records every attempt
and every accepted event, can answer scripted statuses, can hold requests until released,
and can be stopped and restarted on the same port.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trustme
from aiohttp import web

from watcher.webhook.server import Webhook
from watcher.webhook.settings import DeliverySettings, TLSFiles, WebhookSettings

MANAGER = "lifecycle-manager"


async def eventually(
    predicate: Callable[[], bool], *, within: float = 5.0, what: str = "condition"
) -> None:
    """Poll ``predicate`` until true; fail after ``within`` seconds naming ``what``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what} not reached within {within} s")
        await asyncio.sleep(0.01)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` in one step, as Kubernetes does for Secret volumes."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@dataclass
class Pki:
    """Two CAs; the webhook's files start as CA1-issued and can be rotated to CA2."""

    dir: Path
    ca1: trustme.CA
    ca2: trustme.CA
    files: TLSFiles

    def issue(self, ca: trustme.CA, cn: str = "runtime-a") -> trustme.LeafCert:
        return ca.issue_cert("127.0.0.1", "localhost", common_name=cn)

    def write(self, leaf: trustme.LeafCert, bundle: list[trustme.CA]) -> None:
        """Write cert, key and CA bundle, each atomically (key first, as a renewal does)."""
        atomic_write(self.files.tls_key, leaf.private_key_pem.bytes())
        atomic_write(self.files.tls_cert, b"".join(p.bytes() for p in leaf.cert_chain_pems))
        atomic_write(self.files.ca_cert, b"".join(ca.cert_pem.bytes() for ca in bundle))

    def trust_all(self) -> ssl.SSLContext:
        """A client context trusting both CAs (what the API server's caBundle holds)."""
        ctx = ssl.create_default_context()
        self.ca1.configure_trust(ctx)
        self.ca2.configure_trust(ctx)
        return ctx


def serial_of(peercert: dict[str, Any] | None) -> str:
    return str((peercert or {}).get("serialNumber", ""))


def cn_of(peercert: dict[str, Any] | None) -> str:
    for rdn in (peercert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return ""


@dataclass
class Received:
    path: str
    body: bytes
    headers: dict[str, str]
    client_cn: str
    client_serial: str
    client_port: int = 0
    """The connection's source port: tells a reused connection from a new one."""


@dataclass
class FakeKcp:
    """The KCP gateway stand-in; see the module docstring."""

    ctx: ssl.SSLContext
    port: int = 0
    attempts: list[Received] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    script: deque[tuple[int, dict[str, str]]] = field(default_factory=deque)
    gate: asyncio.Event | None = None
    in_flight: int = 0
    _runner: web.AppRunner | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def answer(self, *statuses: int, **headers: str) -> None:
        """Answer the next requests with ``statuses`` (then 200 again)."""
        hdrs = {k.replace("_", "-"): v for k, v in headers.items()}
        self.script.extend((s, hdrs) for s in statuses)

    def hold(self) -> None:
        """Keep requests waiting until ``release``."""
        self.gate = asyncio.Event()

    def release(self) -> None:
        if self.gate is not None:
            self.gate.set()
            self.gate = None

    def bodies(self) -> list[bytes]:
        return [r.body for r in self.received]

    async def _handle(self, request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        rec = Received(
            request.path,
            await request.read(),
            dict(request.headers),
            cn_of(peer),
            serial_of(peer),
            (request.transport.get_extra_info("peername") or ("", 0))[1]
            if request.transport
            else 0,
        )
        self.attempts.append(rec)
        self.in_flight += 1
        try:
            gate = self.gate
            if gate is not None:
                await gate.wait()
            status, headers = self.script.popleft() if self.script else (200, {})
        finally:
            self.in_flight -= 1
        if status == 200:
            self.received.append(rec)
        return web.Response(status=status, text=f"answer {status}", headers=headers)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.port, ssl_context=self.ctx, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self.port = runner.addresses[0][1]
        self._runner = runner

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if self.gate is not None:
            self.release()
        if runner is not None:
            await runner.cleanup()


FAST_DELIVERY = DeliverySettings(
    mode="async",
    queue_size=100,
    workers=2,
    retry_base=0.02,
    retry_max=0.1,
    max_event_age=30.0,
    request_timeout=5.0,
    sync_attempts=3,
    sync_timeout=2.0,
    drain_timeout=5.0,
)


def webhook_settings(pki: Pki, kcp: FakeKcp | None, **delivery: Any) -> WebhookSettings:
    fields = {**FAST_DELIVERY.__dict__, **delivery}
    return WebhookSettings(
        tls=pki.files,
        kcp_addr=kcp.addr if kcp else None,
        kcp_contract="v2" if kcp else None,
        host="127.0.0.1",
        port=0,
        metrics_host="127.0.0.1",
        metrics_port=0,
        delivery=DeliverySettings(**fields),
        tls_reload_interval=0.05,
    )


MakeWebhook = Callable[..., Awaitable[Webhook]]


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    json: Any


def review(
    operation: str,
    obj: dict[str, Any] | None = None,
    old: dict[str, Any] | None = None,
    sub_resource: str = "",
    *,
    name: str = "kyma-1",
    uid: str = "a1b2",
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": uid,
        "operation": operation,
        "kind": {"group": "operator.kyma-project.io", "version": "v1beta2", "kind": "Kyma"},
        "name": name,
        "namespace": "kyma-system",
        "object": obj,
        "oldObject": old,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def kyma(
    spec: Any = None, status: Any = None, *, with_spec: bool = True, name: str = "kyma-1"
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "operator.kyma-project.io/v1beta2",
        "kind": "Kyma",
        "metadata": {"name": name, "namespace": "kyma-system"},
    }
    if with_spec:
        obj["spec"] = {"channel": "regular"} if spec is None else spec
    if status is not None:
        obj["status"] = status
    return obj


def create(name: str) -> dict[str, Any]:
    """A CREATE review for Kyma ``name``: one distinct event per name."""
    return review("CREATE", kyma(name=name), name=name, uid=f"uid-{name}")


def event_body(name: str = "kyma-1") -> bytes:
    return (
        b'{"watched":{"Namespace":"kyma-system","Name":"' + name.encode() + b'"},'
        b'"watchedGvk":{"group":"operator.kyma-project.io","version":"v1beta2","kind":"Kyma"}}'
    )
