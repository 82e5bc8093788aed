"""Conformance of a KCP listener implementation: status codes and the events it hands over.

The listener runs as a process of its own (:class:`harness.kcp.listener_process.ListenerProcess`:
a command template with ``{component}``, ``{host}``, ``{port}``, ``{metrics_port}``,
printing each event as a JSON line) behind no gateway: the checks send what the gateway
would (``X-Forwarded-Client-Cert`` with the client certificate) and what it would never
let through, over plain HTTP on loopback, and compare each answer and each event with
upstream's listener (``watcher-reference.md`` §5).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from harness.conformance.verdicts import CheckResult, Expectation
from harness.kcp.listener_process import ListenerCommand, ListenerProcess
from harness.kcp.listeners import Implementation
from watcher import pki
from watcher.listener import XFCC_HEADER, ListenerEvent, format_xfcc

COMPONENT = "conformance"
RUNTIME_ID = "runtime-listener"
BODY = (
    b'{"watched":{"Namespace":"kyma-system","Name":"default"},'
    b'"watchedGvk":{"group":"operator.kyma-project.io","version":"v1beta2","kind":"Kyma"}}'
)
LOWERCASE_BODY = (
    b'{"watched":{"namespace":"kyma-system","name":"lowercase"},'
    b'"watchedGvk":{"group":"operator.kyma-project.io","version":"v1beta2","kind":"Kyma"}}'
)
EVENT_WAIT = 5.0
BAD_JSON_WHY = (
    "a body that is not a WatchEvent is the sender's fault: 400 tells the webhook not to "
    "retry it, where upstream's 500 invites retries of a request that cannot succeed "
    "(docs/listener.md)"
)


@dataclass(frozen=True)
class ListenerCase:
    name: str
    method: str
    path: str
    body: bytes
    xfcc: str | None
    status: int
    """Upstream's status code."""
    documented: int | None = None
    why: str = ""


def cases(xfcc: str, empty_cn_xfcc: str) -> tuple[ListenerCase, ...]:
    """Upstream's answers, in the order its handler checks (reference §5)."""
    path = f"/v2/{COMPONENT}/event"
    return (
        ListenerCase("WatchEvent with the client certificate", "POST", path, BODY, xfcc, 200),
        ListenerCase(
            "lower-case keys (Go decodes case-insensitively)",
            "POST",
            path,
            LOWERCASE_BODY,
            xfcc,
            200,
        ),
        ListenerCase("body over 16384 bytes", "POST", path, b" " * 16385, xfcc, 413),
        ListenerCase("GET", "GET", path, b"", xfcc, 405),
        ListenerCase(
            "contract v1 path",
            "POST",
            f"/v1/{COMPONENT}/event",
            BODY,
            xfcc,
            404,
            400,
            "the answer names the contract the listener serves, where a 404 reads like a "
            "wrong component or route (docs/listener.md)",
        ),
        ListenerCase("another component's path", "POST", "/v2/other/event", BODY, xfcc, 404),
        ListenerCase(
            "body that is not JSON", "POST", path, b"{not json", xfcc, 500, 400, BAD_JSON_WHY
        ),
        ListenerCase("no X-Forwarded-Client-Cert", "POST", path, BODY, None, 401),
        ListenerCase("XFCC without Cert=", "POST", path, BODY, 'Subject="CN=x"', 401),
        ListenerCase("XFCC with a broken certificate", "POST", path, BODY, 'Cert="garbage"', 401),
        ListenerCase("certificate without a CN", "POST", path, BODY, empty_cn_xfcc, 400),
    )


def _identities() -> tuple[str, str]:
    ca = pki.create_ca(key_type="ec")
    good = pki.issue(ca, RUNTIME_ID, dns_names=["skr.kyma.example.com"], key_type="ec")
    empty = pki.issue(ca, "", dns_names=["skr.kyma.example.com"], key_type="ec")
    return format_xfcc(good.certificate), format_xfcc(empty.certificate)


def _event_line(event: ListenerEvent) -> str:
    watched, gvk = event.event.watched, event.event.watched_gvk
    return (
        f"{event.runtime_id} {watched.namespace}/{watched.name} "
        f"{gvk.group}/{gvk.version} {gvk.kind}"
    )


async def check_listener(
    command: ListenerCommand,
    workdir: Path,
    *,
    implementation: Implementation = "upstream",
    metrics_on_own_port: bool = True,
) -> list[CheckResult]:
    """Every listener check against the listener ``command`` builds (logs under ``workdir``)."""
    events: list[ListenerEvent] = []

    async def take(event: ListenerEvent) -> None:
        events.append(event)

    xfcc, empty_cn = await asyncio.to_thread(_identities)
    results: list[CheckResult] = []
    listener = ListenerProcess(
        COMPONENT,
        take,
        command=command,
        log_path=workdir / "listener.log",
        implementation=implementation,
        metrics_on_own_port=metrics_on_own_port,
    )
    async with listener, aiohttp.ClientSession() as session:
        for case in cases(xfcc, empty_cn):
            headers = {"Content-Type": "application/json"}
            if case.xfcc is not None:
                headers[XFCC_HEADER] = case.xfcc
            url = f"{listener.url}{case.path}"
            try:
                async with session.request(
                    case.method, url, data=case.body or None, headers=headers
                ) as answer:
                    await answer.read()
                    actual = str(answer.status)
            except aiohttp.ClientError as exc:
                actual = f"no answer ({type(exc).__name__})"
            expectation = Expectation(
                str(case.status),
                documented=str(case.documented) if case.documented is not None else None,
                why=case.why,
            )
            results.append(expectation.judge("listener", case.name, actual))
        accepted = sum(1 for r in results if r.actual == "200")
        with contextlib.suppress(TimeoutError):  # fewer events than 200s is judged below
            async with asyncio.timeout(EVENT_WAIT):
                while len(events) < accepted:  # noqa: ASYNC110 - filled by the reader task
                    await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)  # an event for a refused request would show now
        results.append(_events(events))
        results += await _metrics(listener)
    return results


def _events(events: Sequence[ListenerEvent]) -> CheckResult:
    expected = "; ".join(
        [
            f"{RUNTIME_ID} kyma-system/default operator.kyma-project.io/v1beta2 Kyma",
            f"{RUNTIME_ID} kyma-system/lowercase operator.kyma-project.io/v1beta2 Kyma",
        ]
    )
    actual = "; ".join(_event_line(e) for e in events) or "none"
    return Expectation(expected).judge(
        "listener", "events handed over (runtime id = the CN; none for refusals)", actual
    )


async def _metrics(listener: ListenerProcess) -> list[CheckResult]:
    requests = await listener.read_metric(
        "watcher_listener_requests_total", {"server_name": "listener"}
    )
    return [
        Expectation("counted").judge(
            "metrics",
            'watcher_listener_requests_total{server_name="listener"}',
            "counted" if requests > 0 else "absent",
        )
    ]
