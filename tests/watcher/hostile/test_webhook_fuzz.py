"""Fuzzing the webhook's admission endpoint with 10,000+ generated hostile requests.

The real aiohttp application (``watcher.webhook.app.build_app``) with a real ``Delivery``
runs on a loopback socket (plain HTTP: TLS is not what is fuzzed, and the handshake would
cost most of the time budget); requests are raw bytes, so paths, methods and
Content-Length arrive exactly as generated. Properties, for every request:

* nothing is logged at ERROR except aiohttp's own refusal of input that is not HTTP/1.1
  (an ``HttpProcessingError``, answered 400 text/plain before the application runs, so
  without the security headers every application answer carries);
* no 5xx at all (docs/webhook.md documents none for the admission endpoint);
* every 4xx that our handler produced is JSON ``{"error": "<explanation>"}``;
* every 200 is an AdmissionReview answer with ``allowed: true`` for the request's uid;
* memory stays bounded: over a window of requests after a warm-up, the Python heap
  (tracemalloc) keeps less than ``RETAINED_BOUND`` and no single request needs more than
  ``PEAK_BOUND`` (bodies go up to 1.2 MB). Process RSS is no measure here: hypothesis's
  own generation grows it by ~40 MiB per 1,000 examples even with no server at all.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web
from hostile_fuzz import fuzz, protocol_refusal
from hostile_http import (
    ErrorTrap,
    RawResponse,
    close_loop,
)
from hostile_inputs import (
    METHODS,
    SPECS,
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

from watcher.model import OWNED_BY_ANNOTATION
from watcher.webhook.app import AdmissionConfig, AdmissionHandler, build_runner
from watcher.webhook.delivery import Delivery
from watcher.webhook.kcpclient import KcpResponse
from watcher.webhook.metrics import WebhookMetrics
from watcher.webhook.settings import DeliverySettings

pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

EXAMPLES = 10_000
WARMUP = 1_000  # requests before the memory window: caches fill up
WINDOW = 1_000  # requests traced by tracemalloc
RETAINED_BOUND = 4 * 2**20  # heap kept over the window
PEAK_BOUND = 16 * 2**20  # heap one request may need (measured: about 3 MiB)
GOOD_PATH = "/validate/lifecycle-manager"
ALLOWED_STATUSES = {200, 400, 404, 405, 408, 413, 417}

# ----------------------------------------------------------------- AdmissionReview shapes

_text = st.text(max_size=12)
_meta = st.fixed_dictionaries(
    {},
    optional={
        "name": maybe(st.sampled_from(["kyma-1", "default", "", "a/b"])),
        "namespace": maybe(st.sampled_from(["kyma-system", "", "../x"])),
        "labels": maybe(st.dictionaries(_text, _text, max_size=2)),
        "annotations": maybe(
            st.dictionaries(
                st.sampled_from([OWNED_BY_ANNOTATION, "x"]),
                st.sampled_from(["kcp-system/kyma-1", "a/b/c", "", "/", "kyma-1"]),
                max_size=2,
            )
        ),
    },
)
_object = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": maybe(st.sampled_from(["operator.kyma-project.io/v1beta2", "v1", "///"])),
        "kind": maybe(st.sampled_from(["Kyma", "ConfigMap", ""])),
        "metadata": maybe(_meta),
        "spec": maybe(st.sampled_from(SPECS)),
        "status": maybe(st.sampled_from(SPECS)),
    },
)
_request = st.fixed_dictionaries(
    {"uid": maybe(st.text(min_size=1, max_size=10))},
    optional={
        "operation": maybe(st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", "create"])),
        "kind": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "group": maybe(_text),
                    "version": maybe(_text),
                    "kind": maybe(_text),
                },
            )
        ),
        "subResource": maybe(st.sampled_from(["", "status", "scale", "STATUS", "../status"])),
        "name": maybe(_text),
        "namespace": maybe(_text),
        "object": maybe(_object),
        "oldObject": maybe(_object),
    },
)
reviews = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": maybe(st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])),
        "kind": maybe(st.just("AdmissionReview")),
        "request": maybe(_request),
    },
)


def _deep_spec_review(depth: int) -> bytes:
    """A valid UPDATE whose specs are nested ``depth`` levels (json.dumps cannot build it)."""
    spec = b'{"a":' * depth + b"0" + b"}" * depth
    old = b'{"a":' * depth + b"1" + b"}" * depth
    return (
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":'
        b'{"uid":"deep","operation":"UPDATE","name":"kyma-1","namespace":"kyma-system",'
        b'"object":{"metadata":{"name":"kyma-1"},"spec":' + spec + b"},"
        b'"oldObject":{"metadata":{"name":"kyma-1"},"spec":' + old + b"}}}"
    )


_good_object = st.fixed_dictionaries(
    {
        "apiVersion": st.just("operator.kyma-project.io/v1beta2"),
        "kind": st.just("Kyma"),
        "metadata": st.fixed_dictionaries(
            {"name": st.sampled_from(["kyma-1", "default"]), "namespace": st.just("kcp-system")}
        ),
    },
    optional={"spec": st.sampled_from(SPECS), "status": st.sampled_from(SPECS)},
)
good_reviews = st.fixed_dictionaries(
    {
        "apiVersion": st.just("admission.k8s.io/v1"),
        "kind": st.just("AdmissionReview"),
        "request": st.fixed_dictionaries(
            {
                "uid": st.text(min_size=1, max_size=10),
                "operation": st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"]),
                "kind": st.just(
                    {"group": "operator.kyma-project.io", "version": "v1beta2", "kind": "Kyma"}
                ),
                "name": st.just("kyma-1"),
                "namespace": st.just("kcp-system"),
                "object": _good_object,
                "oldObject": _good_object,
            },
            optional={"subResource": st.sampled_from(["", "status", "scale"])},
        ),
    }
)
valid_bodies = st.one_of(good_reviews, reviews).map(lambda r: json.dumps(r).encode())
bodies = st.one_of(
    valid_bodies,
    valid_bodies,
    valid_bodies,
    valid_bodies,
    st.sampled_from([100, 500, 900, 990, 2000, 100_000]).map(_deep_spec_review),
    generic_bodies(valid_bodies),
)

requests = st.one_of(
    # a well-formed POST to the right path: the body is what is fuzzed
    st.builds(
        assemble,
        st.just("POST"),
        st.just(GOOD_PATH),
        st.just((("Content-Type", "application/json"),)),
        bodies,
        st.just(("true", 0)),
    ),
    # everything at once
    st.builds(
        assemble,
        METHODS,
        path_strategy(GOOD_PATH, "/validate/"),
        headers_strategy(st.just(("Content-Type", "application/json"))),
        bodies,
        content_lengths(),
    ),
)

# ------------------------------------------------------------------------ the server


class AcceptingKcp:
    """Stands in for the KCP client: every event is taken (the fuzz target is the handler)."""

    def __init__(self) -> None:
        self.posts = 0

    async def post(self, path: str, body: bytes, *, time_limit: float) -> KcpResponse:
        self.posts += 1
        return KcpResponse(200, "")


class WebhookUnderFuzz:
    def __init__(self) -> None:
        self.kcp = AcceptingKcp()
        self.metrics = WebhookMetrics()
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._delivery: Delivery | None = None

    async def start(self) -> None:
        delivery = Delivery(
            self.kcp,
            settings=DeliverySettings(queue_size=100, workers=1),
            metrics=self.metrics,
        )
        delivery.start()
        self._delivery = delivery
        handler = AdmissionHandler(
            config=AdmissionConfig(kcp_addr="127.0.0.1:1", kcp_contract="v2"),
            delivery=delivery,
            metrics=self.metrics,
        )
        runner = build_runner(handler, header_timeout=15.0)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._delivery is not None:
            await self._delivery.drain(within=1.0)


def check_answer(request: FuzzRequest, response: RawResponse, new_errors: list[Any]) -> None:
    """The properties of the module docstring for one request/answer pair."""
    assert all(protocol_refusal(r) for r in new_errors), (request, new_errors)
    if request.method == "CONNECT":
        # CONNECT names an authority, not a path: it never reaches a route, and what
        # follows its head is tunnel data, which aiohttp then refuses as a request
        assert response.status in (0, 400, 404, 417), (request, response)
        return
    if response.status == 0:
        # unanswered only if the client gave up mid-body (EOF), aiohttp refused the
        # request line while the client was still sending, or a large body was refused
        # unread: the server closes with the answer (no lingering read), and a client
        # still sending gets a reset instead (test_slow_clients reads such answers)
        assert needs_eof(request) or new_errors or len(request.body) > UNREAD_RESET, request
        return
    if "strict-transport-security" not in response.headers:
        # not from the application: aiohttp's parser refused bytes that are not HTTP/1.1
        assert response.status == 400, (request, response)
        assert response.headers["content-type"].startswith("text/plain"), (request, response)
        assert response.body, (request, response)
        return
    assert not new_errors, (request, new_errors)
    assert response.status in ALLOWED_STATUSES, (request, response)
    if request.method == "HEAD":
        return
    if response.status >= 400:
        assert response.is_json, (request, response)
        error = response.json["error"]
        assert isinstance(error, str) and error, (request, response)
    else:
        answer = response.json
        assert answer["response"]["allowed"] is True, (request, answer)
        uid = json.loads(request.body)["request"]["uid"]
        assert answer["response"]["uid"] == uid, (request, answer)


@pytest.mark.slow  # ~60 s: in `make test`; skip with -m "not e2e and not bench and not slow"
@pytest.mark.timeout(600)  # ~60 s alone; a loaded two-core machine can double that
def test_webhook_survives_10000_hostile_requests() -> None:
    loop = asyncio.new_event_loop()
    server = WebhookUnderFuzz()
    try:
        loop.run_until_complete(server.start())
        tally = fuzz(
            loop,
            server.port,
            requests,
            check_answer,
            examples=EXAMPLES,
            warmup=WARMUP,
            window=WINDOW,
        )
    finally:
        loop.run_until_complete(server.stop())
        close_loop(loop)
    print(f"webhook fuzz: {tally.summary()}, KCP posts {server.kcp.posts}")
    assert tally.sent >= EXAMPLES
    assert not tally.unexpected, ErrorTrap(tally.unexpected).describe()
    heap, statuses = tally.heap, tally.statuses
    assert heap.requests == WINDOW, str(heap)
    assert heap.retained < RETAINED_BOUND and heap.request_peak < PEAK_BOUND, str(heap)
    # the generator reached every layer: accepted reviews, refusals and unknown routes
    assert statuses.get(200, 0) > 100 and statuses.get(400, 0) > 100 and statuses.get(404, 0)
