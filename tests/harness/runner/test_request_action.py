"""The ``request`` operation against an in-memory session, the HTTP outcome of a real
client, and gateway stat names resolved by the live session."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest
from runner_fake import FakeSession, event, opener

from harness.report import ReportBuilder, ScenarioReport, Status
from harness.report.model import TimelineKind
from harness.runner import RunOptions, plan_scenario, run_scenario
from harness.runner.https_requests import HttpOutcome, request_body, send_request
from harness.runner.session import LiveSession
from harness.scenario import Request, ScenarioError, loads_scenario

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

HEAD = "name: req\nclusters: {skrs: [{name: skr-a}, {name: skr-b}]}\n"


@dataclass
class RequestSession(FakeSession):
    outcome: HttpOutcome = field(default_factory=lambda: HttpOutcome(status=200))
    sent: list[tuple[str | None, str, str, dict[str, str], Any]] = field(default_factory=list)
    certificates: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)

    async def request(self, op: Request) -> HttpOutcome:
        self.sent.append((op.cluster, op.method, op.path, dict(op.headers), op.body))
        self.certificates.append(op.certificate or "foreign")
        self.targets.append(op.to)
        if self.outcome.status == 200 and op.cluster is not None:
            self.events.append(event("lifecycle-manager", f"runtime-{op.cluster}", "ns", "obj"))
        return self.outcome


async def run(text: str, session: RequestSession) -> ScenarioReport:
    builder = ReportBuilder("test")
    return await run_scenario(
        plan_scenario(loads_scenario(HEAD + text)),
        builder.scenario("req", "req.yaml"),
        RunOptions(open_session=opener(session)),
    )


SEND = """steps:
  - name: send
    try:
      - request:
          cluster: skr-a
          path: /v2/lifecycle-manager/event
          headers: {X-Forwarded-Client-Cert: 'Subject="CN=runtime-skr-b"'}
          body: {watched: {namespace: ns, name: obj}}
          expect: EXPECT
      - expect:
          within: 1s
          events:
            - {manager: lifecycle-manager, cluster: skr-a, count: {exactly: 1}}
            - {manager: lifecycle-manager, cluster: skr-b, none: true}
"""


async def test_request_is_sent_recorded_and_checked() -> None:
    session = RequestSession()
    report = await run(SEND.replace("EXPECT", "{status: 200}"), session)
    assert report.status is Status.PASSED
    assert session.sent == [
        (
            "skr-a",
            "POST",
            "/v2/lifecycle-manager/event",
            {"X-Forwarded-Client-Cert": 'Subject="CN=runtime-skr-b"'},
            {"watched": {"namespace": "ns", "name": "obj"}},
        )
    ]
    first = report.expectations[0]
    assert first.kind == "request" and first.passed
    assert first.id == "req/send/1-request"
    assert first.description == "request POST /v2/lifecycle-manager/event as skr-a"
    assert (first.expected, first.actual) == ("status 200", "status 200")
    entries = [e for e in report.timeline if e.object == "POST /v2/lifecycle-manager/event"]
    assert len(entries) == 1
    assert entries[0].kind is TimelineKind.MUTATION and entries[0].source == "skr-a"
    assert entries[0].detail == "request: status 200"


async def test_a_wrong_status_fails_the_step() -> None:
    session = RequestSession(outcome=HttpOutcome(status=403))
    report = await run(SEND.replace("EXPECT", "{statusIn: [200, 202]}"), session)
    assert report.status is Status.FAILED
    (result,) = report.expectations  # the step stopped at the request
    assert not result.passed
    assert (result.expected, result.actual) == ("status in 200, 202", "status 403")


async def test_refused_is_expected_for_a_foreign_certificate() -> None:
    session = RequestSession(outcome=HttpOutcome(refused=True, detail="reset"))
    text = """steps:
  - name: foreign
    try:
      - request: {certificate: foreign, path: /v2/x/event, expect: {refused: true}}
"""
    report = await run(text, session)
    assert report.status is Status.PASSED
    assert session.sent[0][0] is None
    assert session.certificates == ["foreign"]
    assert report.expectations[0].actual == "refused (reset)"
    assert [e.source for e in report.timeline if e.object.startswith("POST")] == ["foreign"]

    session = RequestSession(outcome=HttpOutcome(status=200))
    report = await run(text, session)
    assert report.status is Status.FAILED
    assert report.expectations[0].actual == "status 200"


@pytest.mark.parametrize("kind", ["expired", "not-yet-valid", "empty-cn"])
async def test_broken_certificate_kinds_reach_the_session(kind: str) -> None:
    session = RequestSession(outcome=HttpOutcome(status=400))
    text = f"""steps:
  - name: broken
    try:
      - request: {{certificate: {kind}, path: /v2/x/event, expect: {{status: 400}}}}
"""
    report = await run(text, session)
    assert report.status is Status.PASSED
    assert session.sent[0][0] is None
    assert session.certificates == [kind]
    assert [e.source for e in report.timeline if e.object.startswith("POST")] == [kind]


def test_probe_certificates_are_broken_as_named() -> None:
    import datetime as dt

    from cryptography.x509.oid import NameOID

    from harness.runner.https_requests import probe_certificate
    from watcher import pki

    ca = pki.create_ca("kcp-ca")
    now = dt.datetime.now(dt.UTC)
    expired = probe_certificate(ca, "expired").certificate
    assert expired.not_valid_after_utc < now
    early = probe_certificate(ca, "not-yet-valid").certificate
    assert early.not_valid_before_utc > now
    no_cn = probe_certificate(ca, "empty-cn").certificate
    assert no_cn.subject.get_attributes_for_oid(NameOID.COMMON_NAME) == []
    for cert in (expired, early, no_cn):
        assert cert.issuer == ca.certificate.subject
    foreign = probe_certificate(ca, "foreign").certificate
    assert foreign.issuer != ca.certificate.subject
    with pytest.raises(ValueError, match="unknown probe certificate"):
        probe_certificate(ca, "bogus")


def test_request_body_encoding() -> None:
    assert request_body(None) == (None, {})
    assert request_body("raw") == (b"raw", {})
    assert request_body({"a": 1}) == (b'{"a": 1}', {"Content-Type": "application/json"})


def test_outcome_descriptions() -> None:
    assert HttpOutcome(status=200).describe() == "status 200"
    assert HttpOutcome(refused=True).describe() == "refused"
    assert HttpOutcome(detail="timed out").describe() == "no response (timed out)"


async def test_a_closed_port_is_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    outcome = await send_request(
        f"https://127.0.0.1:{port}/v2/x/event", ssl.create_default_context(), "POST", {}, {}
    )
    assert outcome.refused and outcome.status is None


def test_live_session_resolves_gateway_short_names() -> None:
    env = SimpleNamespace(gateway=SimpleNamespace(port=40123, listen_address="127.0.0.1"))
    live = LiveSession(cast(Any, env))
    assert live.gateway_stat("ssl.fail_verify_error") == (
        "listener.127.0.0.1_40123.ssl.fail_verify_error"
    )
    assert live.gateway_stat("downstream_rq_2xx") == "http.kcp_gateway.downstream_rq_2xx"
    assert live.gateway_stat("cluster_manager.active_clusters") == (
        "cluster_manager.active_clusters"
    )


async def test_live_session_metric_passes_the_full_name() -> None:
    asked: list[tuple[str, str]] = []

    async def metric(target: str, name: str, labels: Mapping[str, str]) -> float:
        asked.append((target, name))
        return 6.0

    env = SimpleNamespace(
        gateway=SimpleNamespace(port=40123, listen_address="127.0.0.1"), metric=metric
    )
    live = LiveSession(cast(Any, env))
    assert await live.metric("gateway", "ssl.fail_verify_error", {}) == 6.0
    assert await live.metric("webhook/skr-a", "watcher_x_total", {}) == 6.0
    assert asked == [
        ("gateway", "listener.127.0.0.1_40123.ssl.fail_verify_error"),
        ("webhook/skr-a", "watcher_x_total"),
    ]


async def test_a_request_can_bypass_the_gateway_to_a_listener() -> None:
    session = RequestSession(outcome=HttpOutcome(refused=True, detail="handshake"))
    text = """steps:
  - name: direct
    try:
      - request:
          cluster: skr-a
          to: listener/lifecycle-manager
          path: /v2/lifecycle-manager/event
          expect: {refused: true}
"""
    report = await run(text, session)
    assert report.status is Status.PASSED
    assert session.targets == ["listener/lifecycle-manager"]
    assert "directly to listener/lifecycle-manager" in report.expectations[0].description


@pytest.mark.parametrize(
    ("to", "message"),
    [("listener/nobody", "listener"), ("envoy", "to"), ("listener/../x", "to")],
)
def test_request_targets_are_checked_before_anything_starts(to: str, message: str) -> None:
    text = f"""steps:
  - name: direct
    try:
      - request: {{cluster: skr-a, to: "{to}", path: /v2/x/event, expect: {{status: 403}}}}
"""
    with pytest.raises(ScenarioError, match=message):
        loads_scenario(HEAD + text)
