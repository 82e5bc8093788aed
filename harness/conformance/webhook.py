"""Conformance of an SKR webhook implementation: run it, feed it the table, judge the wire.

The command runs as the harness runs every bring-your-own webhook (upstream's environment
contract, a network namespace of its own: :class:`harness.skr.webhook.WebhookProcess`)
against a recording KCP (:class:`~harness.conformance.kcp_stub.KcpStub`). Checks, in
order: the admission table (answer and exact KCP request per case), headers, the KCP
requests' mTLS identity, TLS version and content type, bad input, the admission server's
TLS, metric names, ``KCP_CONTRACT=v1`` and an unset ``KCP_ADDR``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

from harness.clusters.selection import WebhookIsolation
from harness.conformance.kcp_stub import KcpRequest, KcpStub
from harness.conformance.verdicts import CheckResult, Expectation
from harness.conformance.webhook_cases import (
    CASES,
    EVENT_PATH,
    KYMA_BODY,
    MANAGER,
    QUEUED,
    QUEUED_WHY,
    RUNTIME_ID,
    SECURITY_HEADERS,
    SUCCEEDED,
    UPSTREAM_METRICS,
    AdmissionCase,
)
from harness.errors import ProcessError
from harness.expect.prom import parse_samples
from harness.skr.certs import issue_webhook_certificate
from harness.skr.webhook import TlsPaths, WebhookConfig, WebhookProcess
from watcher import pki

EVENT_WAIT = 5.0
"""How long an event may take to reach the KCP (async delivery answers first)."""
QUIET = 0.5
"""How long no request must come for a case that sends none."""
MISSING_KCP_ADDR = "kcp request failed: KCP_ADDR or KCP_CONTRACT is not set"


class Certificates:
    """One CA; the runtime's certificate (the webhook's serving and client certificate)
    as the mounted Secret; the KCP's serving certificate."""

    def __init__(self, directory: Path) -> None:
        ca = pki.create_ca()
        self.tls = TlsPaths(directory / "skr-webhook-tls")
        self.tls.directory.mkdir(parents=True)
        leaf = issue_webhook_certificate(ca, RUNTIME_ID, "conformance.kyma.example.com")
        pki.write_secret_files(self.tls.directory, pki.secret_data(leaf, ca.cert_pem))
        kcp = directory / "kcp"
        kcp.mkdir()
        server = pki.issue_server_certificate(ca, "kcp-gateway")
        files = pki.write_secret_files(kcp, pki.secret_data(server, ca.cert_pem))
        self.kcp_cert, self.kcp_key, self.ca = files["tls.crt"], files["tls.key"], files["ca.crt"]

    def client_context(self, *, max_version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
        """What the API server does: TLS to the webhook, trusting the CA bundle."""
        context = ssl.create_default_context(cafile=str(self.ca))
        if max_version is not None:
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.maximum_version = max_version
        return context


def _answer(status: int, body: bytes, uid: str) -> str:
    """An admission answer in one line: status, allowed, uid echoed, status and message."""
    try:
        response = json.loads(body)["response"]
        echoed = "echoed" if response.get("uid") == uid else repr(response.get("uid"))
        state = (response.get("status") or {}).get("status", "")
        message = (response.get("status") or {}).get("message", "")
        return f"{status} allowed={response.get('allowed')} uid={echoed} {state}: {message}"
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"{status} {body[:120]!r}"


def _request_line(requests: Sequence[KcpRequest]) -> str:
    if not requests:
        return "none"
    return "; ".join(f"{r.method} {r.path} {r.body.decode(errors='replace')}" for r in requests)


async def _admit(
    session: aiohttp.ClientSession, hook: WebhookProcess, body: Any, context: ssl.SSLContext
) -> tuple[int, dict[str, str], bytes]:
    url = f"https://127.0.0.1:{hook.webhook_port}/validate/{MANAGER}"
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    async with session.post(url, data=data, headers=headers, ssl=context) as answer:
        return answer.status, dict(answer.headers), await answer.read()


async def _case(
    session: aiohttp.ClientSession,
    hook: WebhookProcess,
    kcp: KcpStub,
    case: AdmissionCase,
    context: ssl.SSLContext,
) -> tuple[list[CheckResult], dict[str, str]]:
    before = len(kcp.requests)
    status, headers, body = await _admit(session, hook, case.review, context)
    uid = case.review["request"]["uid"]
    answer = Expectation(
        upstream=f"200 allowed=True uid=echoed Success: {case.message}",
        documented=(
            f"200 allowed=True uid=echoed Success: {QUEUED}" if case.message == SUCCEEDED else None
        ),
        why=QUEUED_WHY,
    )
    if case.body is not None:
        arrived = (await kcp.wait(before + 1, EVENT_WAIT))[before:]
    else:
        await asyncio.sleep(QUIET)
        arrived = kcp.requests[before:]
    expected = "none" if case.body is None else f"POST {EVENT_PATH} {case.body.decode()}"
    return [
        answer.judge("admission", case.name, _answer(status, body, uid)),
        Expectation(expected).judge("KCP request", case.name, _request_line(arrived)),
    ], headers


def _headers(answers: Sequence[dict[str, str]]) -> list[CheckResult]:
    missing = sorted(
        {name for h in answers for name, value in SECURITY_HEADERS.items() if h.get(name) != value}
    )
    servers = sorted({h["Server"] for h in answers if "Server" in h})
    wanted = ", ".join(f"{k}: {v}" for k, v in SECURITY_HEADERS.items())
    return [
        Expectation(f"on every answer: {wanted}").judge(
            "admission",
            "security headers",
            f"missing or different: {', '.join(missing)}"
            if missing
            else f"on every answer: {wanted}",
        ),
        Expectation("none").judge(
            "admission", "Server header", ", ".join(servers) if servers else "none"
        ),
    ]


def _kcp_requests(requests: Sequence[KcpRequest]) -> list[CheckResult]:
    def values(attribute: str) -> str:
        return ", ".join(sorted({str(getattr(r, attribute)) for r in requests})) or "none"

    return [
        Expectation(RUNTIME_ID).judge(
            "KCP request", "mTLS client certificate CN", values("client_cn")
        ),
        Expectation("TLSv1.3").judge("KCP request", "TLS version", values("tls_version")),
        Expectation("application/json").judge(
            "KCP request", "Content-Type", values("content_type")
        ),
    ]


async def _bad_input(
    session: aiohttp.ClientSession, hook: WebhookProcess, context: ssl.SSLContext
) -> list[CheckResult]:
    status, _, body = await _admit(session, hook, b"{not json", context)
    if not body:
        actual = f"{status}, empty body"
    else:
        try:
            actual = f"{status}, JSON error" if "error" in json.loads(body) else f"{status}, JSON"
        except ValueError:
            actual = f"{status}, {body[:60]!r}"
    return [
        Expectation(
            "200, empty body",
            documented="400, JSON error",
            why="a body that is not an AdmissionReview is the caller's fault, and a 200 "
            "without a review makes the API server log a decoding error instead "
            "(docs/webhook.md, Answers)",
        ).judge("admission", "body that is not JSON", actual)
    ]


async def _handshake(port: int, context: ssl.SSLContext) -> str:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    except (ssl.SSLError, OSError) as exc:
        return f"refused ({type(exc).__name__})"
    ssl_object = writer.get_extra_info("ssl_object")
    version = ssl_object.version() if ssl_object is not None else "?"
    alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
    writer.close()
    with contextlib.suppress(ssl.SSLError, OSError):
        await writer.wait_closed()
    return f"{version} alpn={alpn or 'none'}"


async def _tls(hook: WebhookProcess, certificates: Certificates) -> list[CheckResult]:
    old = await _handshake(
        hook.webhook_port, certificates.client_context(max_version=ssl.TLSVersion.TLSv1_2)
    )
    context = certificates.client_context()
    context.set_alpn_protocols(["h2", "http/1.1"])
    alpn = await _handshake(hook.webhook_port, context)
    return [
        Expectation("refused").judge(
            "TLS", "admission server with TLS 1.2 at most", old.split(" (")[0]
        ),
        Expectation(
            "TLSv1.3 alpn=h2",
            documented="TLSv1.3 alpn=none",
            why="aiohttp serves HTTP/1.1 only; the API server's webhook client then uses "
            "HTTP/1.1 with keep-alive (docs/compatibility.md)",
        ).judge("TLS", "admission server offered h2 and http/1.1", alpn),
    ]


async def _metrics(session: aiohttp.ClientSession, hook: WebhookProcess) -> list[CheckResult]:
    async with session.get(f"http://127.0.0.1:{hook.metrics_port}/metrics") as answer:
        text = await answer.text()
    names = {s.name for s in parse_samples(text)}
    missing = [n for n in UPSTREAM_METRICS if n not in names]
    created = sorted(n for n in names if n.endswith("_created"))
    go = sorted(n for n in names if n.startswith("go_"))
    return [
        Expectation("all present").judge(
            "metrics",
            "upstream's names (" + ", ".join(UPSTREAM_METRICS) + ")",
            f"missing: {', '.join(missing)}" if missing else "all present",
        ),
        Expectation("none").judge(
            "metrics", "*_created samples", ", ".join(created) if created else "none"
        ),
        Expectation(
            "present",
            documented="none",
            why="no Go runtime to report; the process_* metrics stand in (docs/webhook.md)",
        ).judge("metrics", "go_* runtime metrics", "present" if go else "none"),
    ]


async def _contract_v1(
    command: Sequence[str], isolation: WebhookIsolation, certificates: Certificates, log: Path
) -> list[CheckResult]:
    async with KcpStub(certificates.kcp_cert, certificates.kcp_key, certificates.ca) as kcp:
        config = WebhookConfig(
            kcp_addr=kcp.address, contract="v1", command=tuple(command), isolation=isolation
        )
        async with (
            WebhookProcess(
                "conformance-webhook-v1", config, certificates.tls, log_path=log
            ) as hook,
            aiohttp.ClientSession() as session,
        ):
            await _admit(session, hook, CASES[0].review, certificates.client_context())
            arrived = await kcp.wait(1, EVENT_WAIT)
    expected = f"POST /v1/{MANAGER}/event {KYMA_BODY.decode()}"
    return [
        Expectation(expected).judge(
            "KCP request", "KCP_CONTRACT=v1 (the v2 body to /v1, no owner)", _request_line(arrived)
        )
    ]


async def _without_kcp_addr(
    command: Sequence[str], isolation: WebhookIsolation, certificates: Certificates, log: Path
) -> list[CheckResult]:
    config = WebhookConfig(kcp_addr="", command=tuple(command), isolation=isolation)
    hook = WebhookProcess("conformance-webhook-no-kcp", config, certificates.tls, log_path=log)
    try:
        async with hook, aiohttp.ClientSession() as session:
            status, _, body = await _admit(
                session, hook, CASES[0].review, certificates.client_context()
            )
            actual = f"serves; answers {_answer(status, body, 'u-create')}"
    except ProcessError:
        code = hook.records[-1].exit_code if hook.records else None
        actual = f"exits {code} at start"
    return [
        Expectation(
            "exits 0 at start",
            documented=f"serves; answers 200 allowed=True uid=echoed Success: {MISSING_KCP_ADDR}",
            why="a webhook that exits leaves a closed port that failurePolicy Ignore hides; "
            "ours keeps answering and counts missing-address-or-contract (docs/webhook.md)",
        ).judge("startup", "KCP_ADDR unset", actual)
    ]


async def check_webhook(
    command: Sequence[str], workdir: Path, *, isolation: WebhookIsolation = "netns"
) -> list[CheckResult]:
    """Every webhook check against ``command`` (files and logs under ``workdir``)."""
    certificates = await asyncio.to_thread(Certificates, workdir)
    results: list[CheckResult] = []
    async with KcpStub(certificates.kcp_cert, certificates.kcp_key, certificates.ca) as kcp:
        config = WebhookConfig(kcp_addr=kcp.address, command=tuple(command), isolation=isolation)
        log = workdir / "webhook.log"
        async with (
            WebhookProcess("conformance-webhook", config, certificates.tls, log_path=log) as hook,
            aiohttp.ClientSession() as session,
        ):
            context = certificates.client_context()
            answers = []
            for case in CASES:
                checks, headers = await _case(session, hook, kcp, case, context)
                results += checks
                answers.append(headers)
            results += _headers(answers)
            results += _kcp_requests(kcp.requests)
            results += await _bad_input(session, hook, context)
            results += await _tls(hook, certificates)
            results += await _metrics(session, hook)
    results += await _contract_v1(command, isolation, certificates, workdir / "webhook-v1.log")
    results += await _without_kcp_addr(
        command, isolation, certificates, workdir / "webhook-no-kcp.log"
    )
    return results
