"""Fuzzing the listener's event endpoint with 10,000+ generated hostile requests.

A real ``Listener`` (XFCC identity, plain HTTP on loopback: the listener behind a gateway
that terminates TLS) with a consumer draining its stream; requests are raw bytes with
generated methods, paths, headers (XFCC garbage, real certificates without a usable CN,
Content-Length that lies) and bodies (WatchEvent-shaped with wrong types, random bytes,
invalid UTF-8, truncated JSON, deep nesting, huge strings). Properties, per request:

* nothing is logged at ERROR except aiohttp's own refusal of input that is not HTTP/1.1;
* every answer is JSON ``{"error", "reason"}`` (or ``{"status": "accepted"}`` for 200),
  except aiohttp's parser refusals (400 text/plain, before the application runs);
* the only 5xx are the documented ones: 500 ``request body unreadable`` and 503 with
  ``Retry-After``; no verify hook is configured, so no 500 ``verification error``;
* every accepted event reaches the consumer;
* the heap stays bounded, measured as in the webhook fuzzer.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import urllib.parse
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hostile_fuzz import fuzz, protocol_refusal
from hostile_http import (
    ErrorTrap,
    RawResponse,
    close_loop,
)
from hostile_inputs import (
    METHODS,
    UNREAD_RESET,
    FuzzRequest,
    assemble,
    content_lengths,
    generic_bodies,
    headers_strategy,
    maybe,
    needs_eof,
    path_strategy,
)
from hypothesis import strategies as st

from watcher.listener import XFCC_HEADER, Listener, ListenerConfig, format_xfcc

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

EXAMPLES = 10_000
WARMUP = 1_000
WINDOW = 1_000
RETAINED_BOUND = 4 * 2**20
PEAK_BOUND = 16 * 2**20
GOOD_PATH = "/v2/lifecycle-manager/event"
MAX_BODY = ListenerConfig(component="x").max_body_bytes
ALLOWED_STATUSES = {200, 400, 401, 403, 404, 405, 408, 413, 417, 500, 503}

# ---------------------------------------------------------------------- certificates

_KEY = ec.generate_private_key(ec.SECP256R1())
_NOW = datetime.datetime.now(datetime.UTC)


def _cert(common_name: str | None) -> x509.Certificate:
    attributes = (
        [] if common_name is None else [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    )
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attributes))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fuzz-ca")]))
        .public_key(_KEY.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_NOW - datetime.timedelta(hours=1))
        .not_valid_after(_NOW + datetime.timedelta(days=1))
        .sign(_KEY, hashes.SHA256())
    )


GOOD_XFCC = format_xfcc(_cert("runtime-a"))
_PEM = _cert("runtime-b").public_bytes(serialization.Encoding.PEM).decode()
XFCC_VALUES = st.one_of(
    st.just(GOOD_XFCC),
    st.just(GOOD_XFCC),
    st.sampled_from(
        [
            format_xfcc(_cert(None)),  # no CN
            format_xfcc(_cert(" ")),  # blank CN
            format_xfcc(_cert("a" * 64)),
            format_xfcc(_cert("../..")),
            "",
            "Cert=",
            'Cert=""',
            'Cert="not a pem"',
            'Cert="' + urllib.parse.quote(_PEM[: len(_PEM) // 2]) + '"',  # truncated PEM
            'Cert="' + urllib.parse.quote(_PEM.replace("A", "B", 5)) + '"',  # corrupted
            "Cert=" + urllib.parse.quote(_PEM),  # unquoted
            'Cert="%ZZ%"',
            GOOD_XFCC + "," + GOOD_XFCC,  # two elements
            GOOD_XFCC[: len(GOOD_XFCC) // 2],
            'Hash=x;Cert="' + "%41" * 11_000 + '"',  # over max_xfcc_bytes
            '"' * 100,
            ";" * 100,
            "By=spiffe://x;Hash=abc",
        ]
    ),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=300),
)

# --------------------------------------------------------------------- WatchEvent shapes

_key = st.fixed_dictionaries(
    {},
    optional={
        "Namespace": maybe(st.sampled_from(["kyma-system", "", "../x"])),
        "Name": maybe(st.sampled_from(["default", "", "a/b"])),
        "namespace": maybe(st.just("kcp-system")),
    },
)
_gvk = st.fixed_dictionaries(
    {},
    optional={
        "group": maybe(st.just("operator.kyma-project.io")),
        "version": maybe(st.just("v1beta2")),
        "kind": maybe(st.just("Kyma")),
        "KIND": maybe(st.just("Kyma")),
    },
)
events = st.fixed_dictionaries(
    {},
    optional={
        "watched": maybe(_key),
        "watchedGvk": maybe(_gvk),
        "owner": maybe(_key),
        "WATCHED": maybe(_key),
        "extra": maybe(st.just("ignored")),
    },
)
GOOD_EVENT = {
    "watched": {"Namespace": "kyma-system", "Name": "default"},
    "watchedGvk": {"group": "operator.kyma-project.io", "version": "v1beta2", "kind": "Kyma"},
}
valid_bodies = st.one_of(st.just(GOOD_EVENT), events).map(lambda e: json.dumps(e).encode())
bodies = st.one_of(valid_bodies, valid_bodies, valid_bodies, generic_bodies(valid_bodies))

xfcc_headers = XFCC_VALUES.map(lambda v: (XFCC_HEADER, v))
requests = st.one_of(
    # a well-formed POST to the right path: certificate and body are what is fuzzed
    st.builds(
        assemble,
        st.just("POST"),
        st.just(GOOD_PATH),
        st.lists(xfcc_headers, min_size=1, max_size=2).map(tuple),
        bodies,
        st.just(("true", 0)),
    ),
    # everything at once
    st.builds(
        assemble,
        METHODS,
        path_strategy(GOOD_PATH, "/v2/"),
        headers_strategy(xfcc_headers),
        bodies,
        content_lengths(),
    ),
)

# ------------------------------------------------------------------------ the checks


def check_answer(request: FuzzRequest, response: RawResponse, new_errors: list[Any]) -> None:
    assert all(protocol_refusal(r) for r in new_errors), (request, new_errors)
    if request.method == "CONNECT":
        # CONNECT names an authority, not a path, and what follows its head is tunnel data
        assert response.status in (0, 400, 404, 417), (request, response)
        return
    if response.status == 0:
        # unanswered only if the client gave up mid-body (EOF), aiohttp refused the
        # request line while the client was still sending, or the body is over the limit:
        # the listener answers 413 and closes at once, and the client, still sending,
        # gets a reset instead of the answer (the slow-client tests read the 413)
        too_large = len(request.body) > min(MAX_BODY, UNREAD_RESET)
        assert needs_eof(request) or new_errors or too_large, request
        return
    if request.target == "/metrics" and response.status == 200:
        assert response.headers["content-type"].startswith("text/plain")  # Prometheus
        return
    if not response.is_json:
        # aiohttp's parser refused bytes that are not HTTP/1.1
        assert response.status == 400, (request, response)
        assert response.headers["content-type"].startswith("text/plain"), (request, response)
        return
    assert not new_errors, (request, new_errors)
    assert response.status in ALLOWED_STATUSES, (request, response)
    if request.method == "HEAD":
        return
    answer = response.json
    if response.status == 200:
        assert answer["status"] == "accepted", (request, answer)
        return
    assert isinstance(answer["error"], str) and answer["error"], (request, answer)
    assert isinstance(answer["reason"], str) and answer["reason"], (request, answer)
    if response.status == 500:
        assert answer["error"] == "request body unreadable", (request, answer)
    if response.status == 503:
        assert response.headers.get("retry-after"), (request, response)


@pytest.mark.slow  # ~60 s: in `make test`; skip with -m "not e2e and not bench and not slow"
@pytest.mark.timeout(600)  # ~60 s alone; a loaded two-core machine can double that
def test_listener_survives_10000_hostile_requests() -> None:
    loop = asyncio.new_event_loop()
    listener = Listener(ListenerConfig(component="lifecycle-manager"))
    consumed: list[str] = []
    accepted: list[str] = []

    async def consume() -> None:
        async for event in listener.events():
            consumed.append(event.runtime_id)

    def note_accepted(response: RawResponse) -> None:
        if response.status == 200 and response.is_json:
            accepted.append(response.json["runtime_id"])

    try:
        loop.run_until_complete(listener.start())
        consumer = loop.create_task(consume())
        tally = fuzz(
            loop,
            listener.port,
            requests,
            check_answer,
            examples=EXAMPLES,
            warmup=WARMUP,
            window=WINDOW,
            on_answer=note_accepted,
        )
        loop.run_until_complete(listener.stop())
        loop.run_until_complete(asyncio.wait_for(consumer, 5))
    finally:
        loop.run_until_complete(listener.stop())
        close_loop(loop)
    print(f"listener fuzz: {tally.summary()}, events consumed {len(consumed)}")
    assert tally.sent >= EXAMPLES
    assert not tally.unexpected, ErrorTrap(tally.unexpected).describe()
    heap, statuses = tally.heap, tally.statuses
    assert heap.requests == WINDOW, str(heap)
    assert heap.retained < RETAINED_BOUND and heap.request_peak < PEAK_BOUND, str(heap)
    assert consumed == accepted  # every accepted event was delivered, in order
    # runtime ids come only from parsable certificates with a CN (the gateway CA vouches
    # for the CN, so "../.." or " " pass as ids: they name a runtime, never a path)
    assert set(consumed) <= {"runtime-a", "runtime-b", " ", "../..", "a" * 64}
    assert "runtime-a" in consumed
    assert statuses.get(200, 0) > 100 and statuses.get(400, 0) > 100 and statuses.get(401, 0)
