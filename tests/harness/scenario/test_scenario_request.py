"""The ``request`` operation and dotted gateway stat names in the scenario model."""

from __future__ import annotations

import pytest

from harness.runner.spec import certificate_override
from harness.scenario import InvalidScenario, Request, RequestOp, loads_scenario
from harness.scenario.expectations import MetricExpectation, gateway_stat_name

HEAD = """\
name: demo
clusters:
  skrs:
    - name: skr-a
    - name: skr-b
"""
# HEAD is five lines: a step list starts on line 6.


def steps(*ops: str) -> str:
    body = "".join(f"      - {op}\n" for op in ops)
    return HEAD + "steps:\n  - name: s\n    try:\n" + body


def errors(text: str) -> list[str]:
    with pytest.raises(InvalidScenario) as info:
        loads_scenario(text, source="s.yaml")
    return [e.line() for e in info.value.errors]


def test_request_defaults_and_shapes() -> None:
    scenario = loads_scenario(
        steps(
            "request: {cluster: skr-a, path: /v2/lifecycle-manager/event, "
            "headers: {X-Forwarded-Client-Cert: 'Hash=x;Subject=\"CN=b\"'}, "
            "body: {watched: {name: default}}, expect: {status: 200}}",
            "request: {certificate: foreign, method: GET, path: /v2/x/event, body: raw, "
            "expect: {refused: true}}",
            "request: {cluster: skr-b, path: /v2/x/event, expect: {statusIn: [403, 404]}}",
        )
    )
    ops = scenario.steps[0].try_
    assert all(isinstance(op, RequestOp) for op in ops)
    first, second, third = (op.request for op in ops if isinstance(op, RequestOp))
    assert first.method == "POST" and first.identity == "skr-a"
    assert first.headers == {"X-Forwarded-Client-Cert": 'Hash=x;Subject="CN=b"'}
    assert first.body == {"watched": {"name": "default"}}
    assert first.expect.holds(200, False) and not first.expect.holds(403, False)
    assert not first.expect.holds(None, True)
    assert second.identity == "foreign" and second.body == "raw" and second.method == "GET"
    assert second.expect.holds(None, True) and not second.expect.holds(200, False)
    assert third.expect.holds(404, False) and not third.expect.holds(200, False)
    assert third.expect.describe() == "status in 403, 404"


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (
            "request: {path: /v2/x/event, expect: {status: 200}}",
            "request needs exactly one of cluster",
        ),
        (
            "request: {cluster: skr-a, certificate: foreign, path: /v2/x/event, "
            "expect: {status: 200}}",
            "request needs exactly one of cluster",
        ),
        (
            "request: {cluster: skr-a, path: /v2/x/event, expect: {status: 200, refused: true}}",
            "request expect needs exactly one of status, statusIn, refused: true",
        ),
        (
            "request: {cluster: skr-a, path: /v2/x/event, expect: {}}",
            "request expect needs exactly one of status, statusIn, refused: true",
        ),
        ("request: {cluster: skr-a, path: v2/x, expect: {status: 200}}", "path"),
        ("request: {cluster: skr-a, path: /v2/x, expect: {status: 99}}", "status"),
        ("request: {certificate: mine, path: /v2/x, expect: {status: 200}}", "certificate"),
        ("request: {cluster: skr-a, path: /v2/x, method: BREW, expect: {status: 200}}", "method"),
    ],
)
def test_invalid_requests_are_located(op: str, message: str) -> None:
    found = errors(steps(op))
    assert len(found) == 1 and found[0].startswith("s.yaml:9:") and message in found[0]


def test_request_cluster_must_be_an_skr() -> None:
    (kcp,) = errors(steps("request: {cluster: kcp, path: /v2/x/event, expect: {status: 200}}"))
    assert "request.cluster: 'kcp' is not an SKR here" in kcp
    (unknown,) = errors(steps("request: {cluster: skr-c, path: /v2/x/event, expect: {status: 1}}"))
    assert "status" in unknown  # field errors come first
    (unknown,) = errors(
        steps("request: {cluster: skr-c, path: /v2/x/event, expect: {status: 200}}")
    )
    assert "unknown SKR 'skr-c'" in unknown and "did you mean" in unknown


def test_request_is_in_the_schema() -> None:
    from harness.scenario.schema import scenario_schema

    text = str(scenario_schema())
    assert "statusIn" in text and "refused" in text and "foreign" in text


# Gateway stats -------------------------------------------------------------------------


def test_dotted_names_only_for_the_gateway() -> None:
    ok = MetricExpectation(target="gateway", name="ssl.fail_verify_error", op=">=", value=1)
    assert ok.name == "ssl.fail_verify_error"
    full = "cluster.klm-listener_kcp-system_8080.upstream_rq_2xx"
    assert MetricExpectation(target="gateway", name=full, value=0).name == full
    with pytest.raises(ValueError, match="dotted Envoy stat names are for target gateway"):
        MetricExpectation(target="webhook/skr-a", name="ssl.fail_verify_error", value=0)
    with pytest.raises(ValueError, match="gateway stats have no labels"):
        MetricExpectation(target="gateway", name="ssl.handshake", labels={"a": "b"}, value=0)


def test_dotted_gateway_metric_in_a_file() -> None:
    text = steps(
        "expect: {metrics: [{target: gateway, name: ssl.fail_verify_error, op: '>=', value: 1}]}"
    )
    assert loads_scenario(text).steps[0].try_
    (bad,) = errors(
        steps("expect: {metrics: [{target: listener/lifecycle-manager, name: a.b, value: 1}]}")
    )
    assert bad.startswith("s.yaml:9:") and "for target gateway only" in bad


@pytest.mark.parametrize(
    ("short", "full"),
    [
        ("ssl.fail_verify_error", "listener.127.0.0.1_8443.ssl.fail_verify_error"),
        ("ssl.handshake", "listener.127.0.0.1_8443.ssl.handshake"),
        ("downstream_cx_total", "listener.127.0.0.1_8443.downstream_cx_total"),
        ("downstream_rq_2xx", "http.kcp_gateway.downstream_rq_2xx"),
        ("listener.127.0.0.1_8443.ssl.handshake", "listener.127.0.0.1_8443.ssl.handshake"),
        ("http.kcp_gateway.downstream_rq_4xx", "http.kcp_gateway.downstream_rq_4xx"),
        ("server.live", "server.live"),
    ],
)
def test_gateway_stat_name(short: str, full: str) -> None:
    got = gateway_stat_name(
        short, listener_prefix="listener.127.0.0.1_8443", http_prefix="http.kcp_gateway"
    )
    assert got == full


def test_request_model_in_code() -> None:
    r = Request.model_validate(
        {"certificate": "foreign", "path": "/v2/x/event", "expect": {"refused": True}}
    )
    assert r.cluster is None and r.headers == {} and r.body is None


# Broken client certificates, CA drop, write round trips ---------------------------------


@pytest.mark.parametrize("kind", ["expired", "not-yet-valid", "empty-cn"])
def test_broken_certificate_kinds(kind: str) -> None:
    scenario = loads_scenario(
        steps(f"request: {{certificate: {kind}, path: /v2/x/event, expect: {{refused: true}}}}")
    )
    (op,) = scenario.steps[0].try_
    assert isinstance(op, RequestOp) and op.request.identity == kind


def test_empty_cn_skr_certificate() -> None:
    text = HEAD.replace(
        "    - name: skr-b\n", "    - {name: skr-b, certificate: {override: empty-cn}}\n"
    )
    scenario = loads_scenario(text + "steps:\n  - name: s\n    try:\n      - wait: 1s\n")
    override = certificate_override(scenario.clusters.skrs[1].certificate)
    assert override.common_name == "" and not override.is_default


def test_drop_old_ca_and_rotation_clusters() -> None:
    from harness.faults import DropOldCa, RotateLeaves
    from harness.scenario import FaultOp, RotateFault

    scenario = loads_scenario(steps("fault: {rotate: drop-old-ca}", "fault: {rotate: leaf}"))
    drop, leaf = (op.fault for op in scenario.steps[0].try_ if isinstance(op, FaultOp))
    assert isinstance(drop, RotateFault) and drop.fault == DropOldCa()
    assert isinstance(leaf, RotateFault) and leaf.fault == RotateLeaves()
    (found,) = errors(steps("fault: {rotate: ca, clusters: [skr-a]}"))
    assert "clusters is for leaf only" in found


def test_writes_expectation() -> None:
    scenario = loads_scenario(steps("expect: {writes: {cluster: skr-a, p99: 200ms}}"))
    assert "writes" in str(scenario.model_dump(by_alias=True))
    (found,) = errors(steps("expect: {writes: {cluster: skr-z, p99: 200ms}}"))
    assert "unknown SKR 'skr-z'" in found
    (found,) = errors(steps("expect: {writes: {cluster: skr-a}}"))
    assert "writes needs at least one of p50, p99, max" in found
