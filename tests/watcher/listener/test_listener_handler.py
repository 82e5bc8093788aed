"""The HTTP handler over real HTTP: every status of the upstream check order, in order."""

from __future__ import annotations

import gzip
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from listener_testing import (
    BODY,
    CERT,
    COMPONENT,
    EVENT,
    NOW,
    PATH,
    XFCC,
    Kymas,
    call,
    make_cert,
    next_event,
    rejected,
    running,
)
from multidict import CIMultiDict

from watcher.listener import (
    XFCC_HEADER,
    Listener,
    ListenerEvent,
    Rejection,
    VerificationFailed,
    VerifyRequest,
    format_xfcc,
    san_pinning,
)
from watcher.model import ObjectKey

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

# --------------------------------------------------------------------------------------
# 200


async def test_accepted_event_reaches_the_stream(
    session: aiohttp.ClientSession, listener: Listener
) -> None:
    status, payload, headers = await call(session, listener.event_url)
    assert (status, payload) == (200, {"status": "accepted", "runtime_id": "runtime-a"})
    assert "Server" not in headers  # upstream's Go listener names no server either
    received = await next_event(listener)
    assert received == ListenerEvent(
        runtime_id="runtime-a", event=EVENT, received_at=NOW, contract="v2"
    )
    assert received.certificate == CERT
    assert listener.metrics.value("watcher_listener_events_accepted_total") == 1
    assert listener.metrics.value("watcher_listener_requests_total", {"code": "200"}) == 1
    # upstream's names, labelled as upstream labels them; no *_created samples
    text = listener.metrics.exposition().decode()
    assert 'watcher_listener_requests_total{code="200",server_name="listener"} 1.0' in text
    assert 'watcher_listener_request_duration{server_name="listener"} ' in text
    assert 'watcher_listener_inflight_requests{server_name="listener"} 0.0' in text
    assert 'watcher_listener_request_errors_total{server_name="listener"} 0.0' in text
    assert "_created" not in text


async def test_body_of_exactly_the_limit_is_accepted(
    session: aiohttp.ClientSession, listener: Listener
) -> None:
    body = BODY + b" " * (16384 - len(BODY))
    assert (await call(session, listener.event_url, body=body))[0] == 200


async def test_first_xfcc_header_counts(session: aiohttp.ClientSession, listener: Listener) -> None:
    other = format_xfcc(make_cert("runtime-b"))
    headers = CIMultiDict([(XFCC_HEADER, XFCC[XFCC_HEADER]), (XFCC_HEADER, other)])
    assert (await call(session, listener.event_url, headers=headers))[0] == 200
    assert (await next_event(listener)).runtime_id == "runtime-a"


# --------------------------------------------------------------------------------------
# The error statuses, in the order they are checked


@pytest.mark.parametrize(
    ("method", "path", "headers"),
    [("POST", PATH, XFCC), ("GET", PATH, XFCC), ("POST", f"/v1/{COMPONENT}/event", {})],
)
async def test_413_comes_first_by_content_length(
    session: aiohttp.ClientSession,
    listener: Listener,
    method: str,
    path: str,
    headers: dict[str, str],
) -> None:
    status, payload, _ = await call(
        session, listener.url + path, body=b"x" * 16385, headers=headers, method=method
    )
    assert status == 413
    assert payload == {
        "error": "request body too large",
        "reason": "Content-Length is 16385 bytes, limit is 16384",
    }
    assert rejected(listener, "body-too-large") == 1
    m = listener.metrics
    assert m.value("watcher_listener_exceeding_size_limit_requests_total") == 1
    assert m.value("watcher_listener_request_errors_total", {"server_name": "listener"}) == 1


async def test_413_for_a_chunked_body_over_the_limit(
    session: aiohttp.ClientSession, listener: Listener
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b" " * 4096

    status, payload, _ = await call(session, listener.event_url, body=chunks())
    assert status == 413
    assert payload["reason"].startswith("body has more than 16384 bytes")


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
async def test_405_for_other_methods(
    session: aiohttp.ClientSession, listener: Listener, method: str
) -> None:
    status, payload, headers = await call(session, listener.event_url, method=method, body=None)
    assert status == 405
    assert headers["Allow"] == "POST"
    assert payload["reason"] == f"{method} is not allowed, events must be POSTed"


@pytest.mark.parametrize("version", ["v1", "v3", "2"])
async def test_400_for_another_contract_version(
    session: aiohttp.ClientSession, listener: Listener, version: str
) -> None:
    url = f"{listener.url}/{version}/{COMPONENT}/event"
    status, payload, _ = await call(session, url, headers={})
    assert status == 400
    assert payload == {
        "error": "wrong contract version",
        "reason": f"path has contract {version!r}, this listener serves {PATH}",
    }


@pytest.mark.parametrize(
    "path", ["/", "/v2/other-manager/event", f"{PATH}/", f"{PATH}/x", "/v2/event"]
)
async def test_404_for_any_other_path(
    session: aiohttp.ClientSession, listener: Listener, path: str
) -> None:
    status, payload, _ = await call(session, listener.url + path)
    assert status == 404
    assert payload["error"] == "not found"
    assert PATH in payload["reason"]


async def test_500_when_the_body_cannot_be_read(
    session: aiohttp.ClientSession, listener: Listener
) -> None:
    headers = {**XFCC, "Content-Encoding": "gzip"}
    status, payload, _ = await call(session, listener.event_url, body=b"not gzip", headers=headers)
    assert status == 500
    assert payload == {
        "error": "request body unreadable",
        "reason": "reading the body failed: 400, message: Can not decode content-encoding: gzip",
    }
    assert rejected(listener, "unreadable-body") == 1


async def test_compressed_bodies_are_limited_after_decompression(
    session: aiohttp.ClientSession, listener: Listener
) -> None:
    bomb = gzip.compress(b" " * 100_000)
    headers = {**XFCC, "Content-Encoding": "gzip"}
    status, _, _ = await call(session, listener.event_url, body=bomb, headers=headers)
    assert status == 413
    ok = gzip.compress(BODY)
    assert (await call(session, listener.event_url, body=ok, headers=headers))[0] == 200


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{", "body is not valid JSON"),
        (b"[]", "event must be a JSON object, got an array"),
        (b'{"watched":{"Name":1}}', "watched.Name must be a string"),
    ],
)
async def test_400_for_a_body_that_is_not_a_watch_event(
    session: aiohttp.ClientSession, listener: Listener, body: bytes, reason: str
) -> None:
    # No XFCC either: the body is checked first.
    status, payload, _ = await call(session, listener.event_url, body=body, headers={})
    assert status == 400
    assert payload["error"] == "invalid event"
    assert payload["reason"].startswith(reason)
    assert rejected(listener, "invalid-event") == 1


PEM_GARBAGE = "-----BEGIN%20CERTIFICATE-----%0AZ2FyYmFnZQ%3D%3D%0A-----END%20CERTIFICATE-----%0A"


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "X-Forwarded-Client-Cert header is missing"),
        (
            {XFCC_HEADER: XFCC[XFCC_HEADER] + ";Pad=" + "x" * 33_000},
            "bytes, limit is 32768",
        ),
        ({XFCC_HEADER: 'Hash=abc;Subject="CN=runtime-a";DNS=skr-a'}, "no Cert="),
        ({XFCC_HEADER: 'Cert="-----BEGIN%2"'}, "invalid URL escape '%2'"),
        ({XFCC_HEADER: 'Cert="%Zz"'}, "invalid URL escape '%Zz'"),
        ({XFCC_HEADER: f'Cert="{PEM_GARBAGE}"'}, "not a valid X.509 certificate"),
        ({XFCC_HEADER: 'Cert="garbage"'}, "not PEM"),
        ({XFCC_HEADER: 'Cert="unterminated'}, "unterminated quoted value"),
    ],
)
async def test_401_without_a_usable_forwarded_certificate(
    session: aiohttp.ClientSession, listener: Listener, headers: dict[str, str], reason: str
) -> None:
    status, payload, _ = await call(session, listener.event_url, headers=headers)
    assert status == 401
    assert payload["error"] == "no usable client certificate"
    assert reason in payload["reason"]
    assert rejected(listener, "invalid-client-cert") == 1


async def test_400_when_the_certificate_has_no_common_name(
    session: aiohttp.ClientSession, listener: Listener
) -> None:
    headers = {XFCC_HEADER: format_xfcc(make_cert(None, dns=["skr-a.example.com"]))}
    status, payload, _ = await call(session, listener.event_url, headers=headers)
    assert status == 400
    assert payload["error"] == "no runtime id"
    assert "no Subject CN" in payload["reason"]


# --------------------------------------------------------------------------------------
# Verify hooks and SAN pinning (403)


@pytest.mark.parametrize(
    ("annotations", "cert", "status", "category", "reason"),
    [
        ({"runtime-a": {"skr-domain": "skr-a.example.com"}}, CERT, 200, None, None),
        (
            {"runtime-a": {"skr-domain": "skr-b.example.com"}},
            CERT,
            403,
            "san-mismatch",
            "client certificate SANs do not include the Kyma's skr-domain 'skr-b.example.com' "
            "(certificate has 2 DNS/URI/IP SANs)",
        ),
        ({}, CERT, 403, "unknown-kyma", "no Kyma found in KCP for runtime id 'runtime-a'"),
        (
            {"runtime-a": {"region": "eu"}},
            CERT,
            403,
            "missing-skr-domain",
            "the KCP Kyma for runtime id 'runtime-a' has no 'skr-domain' annotation",
        ),
        (
            {"runtime-a": {"skr-domain": "skr-a.example.com"}},
            make_cert("runtime-a", dns=[f"s{i}.example.com" for i in range(101)]),
            403,
            "too-many-sans",
            "client certificate has 101 SANs, at most 100 are allowed",
        ),
    ],
)
async def test_san_pinning_over_http(
    session: aiohttp.ClientSession,
    annotations: dict[str, dict[str, str]],
    cert: Any,
    status: int,
    category: str | None,
    reason: str | None,
) -> None:
    async with running(verify_hooks=(san_pinning(Kymas(annotations)),)) as listener:
        headers = {XFCC_HEADER: format_xfcc(cert)}
        got, payload, _ = await call(session, listener.event_url, headers=headers)
        assert got == status
        if category is None:
            assert (await next_event(listener)).runtime_id == "runtime-a"
            return
        assert payload == {"error": "verification failed", "reason": reason}
        assert listener.metrics.value(
            "watcher_listener_verification_failed_total", {"reason": category}
        )
        labels = {"server_name": "listener", "request_uri_label": "/v2/lifecycle-manager/event"}
        failed = listener.metrics.value(
            "watcher_listener_failed_verification_requests_total", labels
        )
        assert failed == (1 if status == 403 else 0)
        assert listener.metrics.value("watcher_listener_events_accepted_total") == 0


async def test_hooks_run_in_order_and_the_first_rejection_wins(
    session: aiohttp.ClientSession,
) -> None:
    seen: list[str] = []

    async def first(request: VerifyRequest) -> None:
        seen.append(f"first:{request.runtime_id}:{request.event.watched}")

    async def refuse(request: VerifyRequest) -> None:
        seen.append("refuse")
        raise VerificationFailed("runtime is being deprovisioned", category="deprovisioning")

    async def never(request: VerifyRequest) -> None:
        seen.append("never")

    told: list[Rejection] = []
    hooks = (first, refuse, never)
    async with running(verify_hooks=hooks, rejection_observers=(told.append,)) as listener:
        status, payload, _ = await call(session, listener.event_url)
        no_cert, _, _ = await call(session, listener.event_url, headers={})
    assert (status, payload["reason"]) == (403, "runtime is being deprovisioned")
    assert seen == ["first:runtime-a:kyma-system/default", "refuse"]
    # the observers hear of the identified runtime's refusal, not of the anonymous 401
    assert no_cert == 401
    assert told == [Rejection("runtime-a", 403, "deprovisioning", "runtime is being deprovisioned")]


async def test_a_failing_hook_is_a_500_and_logged(
    session: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(request: VerifyRequest) -> None:
        raise ConnectionError("KCP API server unreachable")

    caplog.set_level(logging.ERROR, logger="watcher.listener")
    async with running(verify_hooks=(broken,)) as listener:
        status, payload, _ = await call(session, listener.event_url)
        assert rejected(listener, "verify-hook-error") == 1
    assert status == 500
    assert "broken" in payload["reason"] and "ConnectionError" in payload["reason"]
    [record] = [r for r in caplog.records if r.msg == "verify hook failed"]
    assert record.exc_info is not None and "unreachable" in str(record.exc_info[1])


# --------------------------------------------------------------------------------------
# Contract v1: the path only (upstream webhook 2.1+ sends the v2 body there)


async def test_contract_v1_takes_the_v2_body_and_a_legacy_owner(
    session: aiohttp.ClientSession,
) -> None:
    legacy = b'{"owner":{"Namespace":"kcp-system","Name":"kyma-a"},' + BODY[1:]
    async with running(contract="v1") as listener:
        assert listener.event_url.endswith(f"/v1/{COMPONENT}/event")
        assert (await call(session, listener.event_url, body=BODY))[0] == 200
        received = await next_event(listener)
        assert (received.event.owner, received.contract) == (None, "v1")
        assert (await call(session, listener.event_url, body=legacy))[0] == 200
        received = await next_event(listener)
        assert received.event.owner == ObjectKey("kcp-system", "kyma-a")
