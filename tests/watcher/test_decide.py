"""The admission decision: upstream's table, edge cases, and properties against an oracle."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from watcher.decide import Reason, decide, go_deep_equal, go_deep_equal_walk
from watcher.model import GroupVersionKind, ObjectKey, WatchEvent, encode_event


def review(
    operation: str,
    obj: dict[str, Any] | None = None,
    old: dict[str, Any] | None = None,
    sub_resource: str = "",
    kind: dict[str, str] | None = None,
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": "a1b2",
        "operation": operation,
        "kind": kind or {"group": "operator.kyma-project.io", "version": "v1beta2", "kind": "Kyma"},
        "name": "kyma-1",
        "namespace": "kyma-system",
        "object": obj,
        "oldObject": old,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def kyma(spec: Any = None, status: Any = None, *, with_spec: bool = True) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "operator.kyma-project.io/v1beta2",
        "kind": "Kyma",
        "metadata": {"name": "kyma-1", "namespace": "kyma-system"},
    }
    if with_spec:
        obj["spec"] = {"channel": "regular"} if spec is None else spec
    if status is not None:
        obj["status"] = status
    return obj


KYMA_EVENT = WatchEvent(
    ObjectKey("kyma-system", "kyma-1"),
    GroupVersionKind("operator.kyma-project.io", "v1beta2", "Kyma"),
)


# Upstream's webhook table (reference §8): operation x object shape → send?, message.
TABLE = [
    ("CREATE", kyma(), None, "", True, Reason.CREATED),
    ("DELETE", None, kyma(), "", True, Reason.DELETED),
    ("UPDATE", kyma(), kyma(), "", False, Reason.NO_CHANGE),
    ("UPDATE", kyma({"channel": "fast"}), kyma(), "", True, Reason.SPEC_CHANGED),
    ("UPDATE", kyma(status={"state": "Ready"}), kyma(), "", False, Reason.NO_CHANGE),
    ("UPDATE", kyma(with_spec=False), kyma(with_spec=False), "", True, Reason.NO_SPEC),
    ("UPDATE", kyma(status={"state": "Ready"}), kyma(), "status", True, Reason.STATUS_CHANGED),
    ("UPDATE", kyma({"channel": "fast"}), kyma(), "status", False, Reason.NO_CHANGE),
    ("UPDATE", kyma(), kyma(), "scale", False, Reason.INVALID_SUBRESOURCE),
    ("CONNECT", kyma(), None, "", False, Reason.CONNECT),
]


@pytest.mark.parametrize(("op", "obj", "old", "sub", "send", "reason"), TABLE)
def test_upstream_table(op: str, obj: Any, old: Any, sub: str, send: bool, reason: Reason) -> None:
    decision = decide(review(op, obj, old, sub), manager="lifecycle-manager")
    assert (decision.send, decision.reason) == (send, reason)
    assert decision.uid == "a1b2"
    if send:
        assert decision.event == KYMA_EVENT
        assert encode_event(KYMA_EVENT) == (
            b'{"watched":{"Namespace":"kyma-system","Name":"kyma-1"},'
            b'"watchedGvk":{"group":"operator.kyma-project.io","version":"v1beta2","kind":"Kyma"}}'
        )
    else:
        assert decision.event is None


def test_upstream_messages() -> None:
    no_change = decide(review("UPDATE", kyma(), kyma()), manager="m")
    assert no_change.message == "no change detected on watched resource kyma-system/kyma-1"
    connect = decide(review("CONNECT", kyma()), manager="m")
    assert connect.message == (
        "operation CONNECT not supported for operator.kyma-project.io/v1beta2, Kind=Kyma"
    )
    invalid = decide(review("UPDATE", kyma(), kyma(), "scale"), manager="m")
    assert invalid.message == "invalid subresource: watched resource kyma-system/kyma-1"


def test_empty_spec_counts_as_spec_and_null_spec_as_missing() -> None:
    assert decide(review("UPDATE", kyma({}), kyma({})), manager="m").reason is Reason.NO_CHANGE
    assert decide(review("UPDATE", kyma({"a": 1}), kyma({})), manager="m").send
    null_spec = decide(review("UPDATE", kyma(), {**kyma(), "spec": None}), manager="m")
    assert null_spec.reason is Reason.NO_SPEC and null_spec.send
    list_spec = decide(
        review("UPDATE", {**kyma(), "spec": [1]}, {**kyma(), "spec": [1]}), manager="m"
    )
    assert list_spec.reason is Reason.NO_SPEC


def test_status_missing_differs_from_empty() -> None:
    d = decide(review("UPDATE", kyma(status={}), kyma(), "status"), manager="m")
    assert d.send and d.reason is Reason.STATUS_CHANGED
    same = decide(review("UPDATE", kyma(), kyma(), "Status"), manager="m")
    assert same.reason is Reason.NO_CHANGE


def test_numbers_compare_like_go_float64() -> None:
    assert decide(review("UPDATE", kyma({"n": 1}), kyma({"n": 1.0})), manager="m").reason is (
        Reason.NO_CHANGE
    )
    assert decide(review("UPDATE", kyma({"n": True}), kyma({"n": 1})), manager="m").send
    assert go_deep_equal(2**53, 2**53 + 1)  # float64 rounding, exactly as Go decodes them
    assert not go_deep_equal({"a": None}, {})
    assert not go_deep_equal([True], [1]) and not go_deep_equal({"a": [0]}, {"a": [False]})


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, -0.0, 2**53]),
    st.sampled_from(["", "a"]),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner),
    max_leaves=8,
)


@given(_json, _json)
def test_fast_path_agrees_with_the_walk(a: Any, b: Any) -> None:
    """The C fast path may only shortcut; it never changes an answer."""
    assert go_deep_equal(a, b) == go_deep_equal_walk(a, b)
    assert go_deep_equal(a, copy.deepcopy(a)) == go_deep_equal_walk(a, copy.deepcopy(a))


def test_core_group_and_cluster_scoped_object() -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    d = decide(
        review("CREATE", ns, kind={"group": "", "version": "v1", "kind": "Namespace"}), manager="m"
    )
    assert d.event == WatchEvent(ObjectKey("", "team-a"), GroupVersionKind("", "v1", "Namespace"))
    assert encode_event(d.event) == (
        b'{"watched":{"Namespace":"","Name":"team-a"},'
        b'"watchedGvk":{"group":"","version":"v1","kind":"Namespace"}}'
    )


def test_object_without_api_version_uses_request_kind() -> None:
    obj = {"metadata": {"name": "kyma-1", "namespace": "kyma-system"}}
    d = decide(review("CREATE", obj), manager="m")
    assert d.event is not None
    assert d.event.watched_gvk == GroupVersionKind("operator.kyma-project.io", "v1beta2", "Kyma")


def test_object_without_name_falls_back_to_request_then_refuses() -> None:
    d = decide(review("DELETE", None, {"kind": "Kyma", "apiVersion": "v1"}), manager="m")
    assert d.event is not None and d.event.watched == ObjectKey("kyma-system", "kyma-1")
    r = review("DELETE", None, None)
    r["request"]["name"] = ""
    assert decide(r, manager="m").reason is Reason.INVALID_OBJECT


def test_legacy_owner_is_opt_in() -> None:
    owned = kyma()
    owned["metadata"]["annotations"] = {"operator.kyma-project.io/owned-by": "kcp-system/kyma-1"}
    today = decide(review("CREATE", owned), manager="m")
    assert today.event is not None and today.event.owner is None
    assert decide(review("CREATE", kyma()), manager="m").send
    d = decide(review("CREATE", owned), manager="m", legacy_owner=True)
    assert d.event is not None and d.event.owner == ObjectKey("kcp-system", "kyma-1")
    assert encode_event(d.event).startswith(
        b'{"owner":{"Namespace":"kcp-system","Name":"kyma-1"},"watched":'
    )
    missing = decide(review("CREATE", kyma()), manager="m", legacy_owner=True)
    assert (missing.send, missing.reason) == (False, Reason.UNKNOWN_OWNER)
    owned["metadata"]["annotations"]["operator.kyma-project.io/owned-by"] = "a/b/c"
    malformed = decide(review("CREATE", owned), manager="m", legacy_owner=True)
    assert malformed.reason is Reason.UNKNOWN_OWNER
    assert "not set correctly" in malformed.message


def test_huge_object() -> None:
    big = kyma({"items": [{"k": str(i) * 50} for i in range(20_000)]})
    changed = copy.deepcopy(big)
    changed["spec"]["items"][-1]["k"] = "x"
    assert decide(review("UPDATE", changed, big), manager="m").reason is Reason.SPEC_CHANGED
    assert decide(review("UPDATE", big, copy.deepcopy(big)), manager="m").reason is Reason.NO_CHANGE


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ([], "JSON object"),
        ({"apiVersion": "v1", "kind": "AdmissionReview"}, "apiVersion"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}, "kind"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "request is missing"),
        ({**review("CREATE", kyma()), "request": {"operation": "CREATE"}}, "uid"),
        ({**review("CREATE", kyma()), "request": {"uid": "x", "operation": "PATCH"}}, "operation"),
        (
            {
                **review("CREATE", kyma()),
                "request": {"uid": "x", "operation": "CREATE", "object": 1},
            },
            "request.object must be an object",
        ),
    ],
)
def test_invalid_reviews_are_explained(body: Any, fragment: str) -> None:
    d = decide(body, manager="m")
    assert (d.send, d.reason) == (False, Reason.INVALID_REVIEW)
    assert fragment in d.message


# ---- properties ------------------------------------------------------------------------

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
@settings(max_examples=300)
def test_decide_is_total_on_arbitrary_json(value: Any) -> None:
    d = decide(value, manager="m")
    assert d.reason is Reason.INVALID_REVIEW or isinstance(d.reason, Reason)


@given(
    st.dictionaries(
        st.sampled_from(
            ["uid", "operation", "kind", "object", "oldObject", "subResource", "name", "namespace"]
        ),
        json_values,
    )
)
@settings(max_examples=300)
def test_decide_is_total_on_arbitrary_requests(request: dict[str, Any]) -> None:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    first = decide(body, manager="m")
    assert decide(body, manager="m") == first  # deterministic


names = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)
specs = st.one_of(st.none(), st.dictionaries(st.text(max_size=4), json_values, max_size=3))


def _object(name: str, spec: Any, status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "example.io/v1",
        "kind": "Thing",
        "metadata": {"name": name, "namespace": "ns"},
    }
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


def _canonical(value: Any) -> str:
    """Independent oracle for Go equality: compare via a JSON round trip with float numbers."""

    def norm(v: Any) -> Any:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, int | float):
            return ("num", float(v) + 0.0 if abs(v) < 1e300 else v)
        if isinstance(v, list):
            return [norm(x) for x in v]
        return {k: norm(x) for k, x in v.items()}

    return json.dumps(norm(value), sort_keys=True)


@given(names, specs, specs, specs, specs, st.sampled_from(["CREATE", "DELETE"]))
def test_create_and_delete_always_send(
    name: str, spec: Any, status: Any, _s: Any, _t: Any, op: str
) -> None:
    obj = _object(name, spec, status)
    d = decide(
        review(op, obj if op == "CREATE" else None, obj if op == "DELETE" else None), manager="m"
    )
    assert d.send and d.event is not None and d.event.watched == ObjectKey("ns", name)


@given(names, specs, specs, specs, specs)
def test_update_sends_iff_watched_part_differs(
    name: str, old_spec: Any, new_spec: Any, old_status: Any, new_status: Any
) -> None:
    old, new = _object(name, old_spec, old_status), _object(name, new_spec, new_status)
    spec_decision = decide(review("UPDATE", new, old), manager="m")
    if old_spec is None or new_spec is None:
        expect_spec = True
    else:
        expect_spec = _canonical(old_spec) != _canonical(new_spec)
    assert spec_decision.send == expect_spec

    status_decision = decide(review("UPDATE", new, old, "status"), manager="m")
    expect_status = (old_status is None) != (new_status is None) or (
        old_status is not None and _canonical(old_status) != _canonical(new_status)
    )
    assert status_decision.send == expect_status
