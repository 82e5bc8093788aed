"""The admission endpoint over real HTTPS: upstream's table, bad input, async answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from webhook_helpers import (
    MANAGER,
    Answer,
    FakeKcp,
    MakeWebhook,
    Pki,
    event_body,
    eventually,
    kyma,
    review,
    webhook_settings,
)

from watcher.webhook.app import MISSING_KCP_CONFIG, SECURITY_HEADERS
from watcher.webhook.server import Webhook

NO_CHANGE = "no change detected on watched resource kyma-system/kyma-1"
SUCCEEDED = "kcp request succeeded"
CONNECT = "operation CONNECT not supported for operator.kyma-project.io/v1beta2, Kind=Kyma"

# Object shapes of upstream's table: (object, oldObject, subResource).
SHAPES: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    "no change": (kyma(), kyma(), ""),
    "spec change": (kyma({"channel": "fast"}), kyma({"channel": "regular"}), ""),
    "status subresource": (
        kyma(status={"state": "Ready"}),
        kyma(status={"state": "Error"}),
        "status",
    ),
    "object without spec": (kyma(with_spec=False), kyma(with_spec=False), ""),
}
# (operation, shape) → expected message; every cell not listed sends an event.
NOT_SENT = {("UPDATE", "no change"): NO_CHANGE} | {("CONNECT", s): CONNECT for s in SHAPES}
TABLE = [(op, shape) for op in ("CREATE", "UPDATE", "DELETE", "CONNECT") for shape in SHAPES]


def assert_admitted(answer: Answer, message: str, uid: str = "a1b2") -> None:
    assert answer.status == 200
    for header, value in SECURITY_HEADERS.items():
        assert answer.headers.get(header) == value
    assert answer.json == {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "response": {
            "uid": uid,
            "allowed": True,
            "status": {"metadata": {}, "status": "Success", "message": message},
        },
    }


@pytest.mark.parametrize(("operation", "shape"), TABLE, ids=[f"{o}-{s}" for o, s in TABLE])
async def test_upstream_table_in_sync_mode(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp, operation: str, shape: str
) -> None:
    hook = await make_webhook(mode="sync")
    obj, old, sub = SHAPES[shape]
    answer = await api_server(hook, review(operation, obj, old, sub))
    expected = NOT_SENT.get((operation, shape), SUCCEEDED)
    assert_admitted(answer, expected)
    if expected == SUCCEEDED:
        assert [(r.path, r.body) for r in kcp.received] == [(f"/v2/{MANAGER}/event", event_body())]
        assert kcp.received[0].headers["Content-Type"] == "application/json"
        assert kcp.received[0].client_cn == "runtime-a"
    else:
        assert kcp.attempts == []
    m = hook.metrics
    assert m.value("watcher_admission_request_total") == 1
    assert m.value("watcher_kcp_requests_total") == (1 if expected == SUCCEEDED else 0)
    assert m.value("watcher_request_duration") > 0


async def test_async_mode_answers_queued_then_delivers(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp
) -> None:
    hook = await make_webhook()
    answer = await api_server(hook, review("CREATE", kyma()))
    assert_admitted(answer, "kcp request queued")
    await eventually(lambda: kcp.bodies() == [event_body()], what="event at KCP")
    await eventually(lambda: hook.metrics.value("watcher_events_delivered_total") == 1)
    assert hook.metrics.value("watcher_delivery_latency_seconds_count") == 1


async def test_invalid_subresource_is_counted(make_webhook: MakeWebhook, api_server: Any) -> None:
    hook = await make_webhook(mode="sync")
    answer = await api_server(hook, review("UPDATE", kyma(), kyma(), "scale"))
    assert_admitted(answer, "invalid subresource: watched resource kyma-system/kyma-1")
    labels = {"error_reason": "invalid-subresource"}
    assert hook.metrics.value("watcher_failed_kcp_total", labels) == 1


async def test_contract_v1_sends_the_v2_body_to_the_v1_path(
    make_webhook: MakeWebhook, api_server: Any, pki: Pki, kcp: FakeKcp
) -> None:
    """Upstream 2.1+: the contract names the path only; no owner, no annotation needed."""
    settings = webhook_settings(pki, kcp, mode="sync")
    hook = await make_webhook(
        settings=type(settings)(**{**settings.__dict__, "kcp_contract": "v1"})
    )
    answer = await api_server(hook, review("CREATE", kyma()))
    assert_admitted(answer, SUCCEEDED)
    assert [(r.path, r.body) for r in kcp.received] == [(f"/v1/{MANAGER}/event", event_body())]


async def test_legacy_owner_is_an_explicit_opt_in(
    make_webhook: MakeWebhook, api_server: Any, pki: Pki, kcp: FakeKcp
) -> None:
    """WATCHER_LEGACY_OWNER: upstream before 2.1 (owner first; no annotation, no event)."""
    settings = webhook_settings(pki, kcp, mode="sync")
    hook = await make_webhook(
        settings=type(settings)(**{**settings.__dict__, "legacy_owner": True})
    )
    answer = await api_server(hook, review("CREATE", kyma()))
    assert_admitted(answer, "resource owner name could not be determined")
    labels = {"error_reason": "unknown-owner"}
    assert hook.metrics.value("watcher_failed_kcp_total", labels) == 1
    assert kcp.attempts == []
    owned = kyma()
    owned["metadata"]["annotations"] = {"operator.kyma-project.io/owned-by": "kcp-system/k"}
    assert_admitted(await api_server(hook, review("CREATE", owned)), SUCCEEDED)
    [received] = kcp.received
    assert received.path == f"/v2/{MANAGER}/event"
    assert received.body.startswith(b'{"owner":{"Namespace":"kcp-system","Name":"k"},"watched"')


async def test_missing_kcp_address(pki: Pki, api_server: Any) -> None:
    async with Webhook(webhook_settings(pki, None)) as hook:
        answer = await api_server(hook, review("CREATE", kyma()))
        assert_admitted(answer, MISSING_KCP_CONFIG)
        labels = {"error_reason": "missing-address-or-contract"}
        assert hook.metrics.value("watcher_failed_kcp_total", labels) == 1


BAD_BODIES = [
    (b"", "body is empty"),
    (b"{not json", "body is not valid JSON"),
    (b"\xff\xfe", "body is not valid JSON"),
    (b"[1, 2]", "body must be a JSON object"),
    (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "request is missing"),
    (
        json.dumps(review("PATCH", kyma())).encode(),
        "request.operation must be one of",
    ),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
]


@pytest.mark.parametrize(("body", "error"), BAD_BODIES, ids=[e for _, e in BAD_BODIES])
async def test_malformed_body_is_400_json(
    make_webhook: MakeWebhook, api_server: Any, body: bytes, error: str
) -> None:
    hook = await make_webhook()
    answer = await api_server(hook, None, raw=body)
    assert answer.status == 400
    assert error in answer.json["error"]
    assert answer.headers["Content-Type"].startswith("application/json")
    assert answer.headers["Content-Security-Policy"] == "default-src 'self'"
    assert hook.metrics.value("watcher_admission_request_error_total") == 1


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/validate", "must not be empty"),
        ("/validate/", "must not be empty"),
        ("/validate/Lifecycle-Manager", "is not a DNS label"),
        ("/validate/a/b", "is not a DNS label"),
        ("/validate/" + "a" * 64, "at most 63"),
    ],
)
async def test_bad_manager_is_400(
    make_webhook: MakeWebhook, api_server: Any, path: str, error: str
) -> None:
    hook = await make_webhook()
    answer = await api_server(hook, review("CREATE", kyma()), path=path)
    assert answer.status == 400
    assert error in answer.json["error"]


async def test_wrong_method_is_405(make_webhook: MakeWebhook, api_server: Any) -> None:
    hook = await make_webhook()
    answer = await api_server(hook, None, method="GET", raw=b"")
    assert answer.status == 405
    assert answer.headers["Allow"] == "POST"
    assert "use POST" in answer.json["error"]
    assert hook.metrics.value("watcher_admission_request_error_total") == 1


async def test_oversized_body_is_413(
    make_webhook: MakeWebhook, api_server: Any, pki: Pki, kcp: FakeKcp
) -> None:
    settings = webhook_settings(pki, kcp)
    hook = await make_webhook(
        settings=type(settings)(**{**settings.__dict__, "max_body_bytes": 1000})
    )
    answer = await api_server(hook, None, raw=b" " * 1001)
    assert answer.status == 413
    assert "exceeds 1000" in answer.json["error"]
    ok = await api_server(hook, review("CREATE", kyma()))
    assert ok.status == 200


async def test_unknown_path_is_404_json(make_webhook: MakeWebhook, api_server: Any) -> None:
    hook = await make_webhook()
    answer = await api_server(hook, None, path="/mutate/x", raw=b"{}")
    assert answer.status == 404
    assert "error" in answer.json
    assert (
        answer.headers["Strict-Transport-Security"] == SECURITY_HEADERS["Strict-Transport-Security"]
    )
