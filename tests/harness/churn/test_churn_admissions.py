"""Repeated admissions: the API server's webhook call counters against the routed writes."""

from __future__ import annotations

from collections import Counter

from harness.churn.admissions import (
    admissions_made,
    admissions_routed,
    repeated_admissions,
    webhook_calls,
)
from harness.churn.model import KYMAS, ExecutedMutation, Mutation, frozen_map
from harness.churn.truth import Rule, ground_truth

REQUESTS = "apiserver_admission_webhook_request_total"
METRICS = "\n".join(
    [
        f"# TYPE {REQUESTS} counter",
        f'{REQUESTS}{{code="200",name="a.example.com",operation="UPDATE",type="validating"}} 7',
        f'{REQUESTS}{{code="200",name="a.example.com",operation="CREATE",type="validating"}} 3',
        f'{REQUESTS}{{code="0",name="a.example.com",operation="UPDATE",type="validating"}} 1',
        f'{REQUESTS}{{code="200",name="m.example.com",operation="UPDATE",type="admit"}} 5',
        f'{REQUESTS}{{code="200",name="b.example.com",operation="DELETE",type="validating"}} 2',
        "# TYPE apiserver_request_total counter",
        'apiserver_request_total{code="200",verb="PATCH"} 99',
        "",
    ]
)


def test_validating_calls_are_summed_per_webhook() -> None:
    assert webhook_calls(METRICS) == {"a.example.com": 11.0, "b.example.com": 2.0}
    assert webhook_calls("") == {}


def test_admissions_made_between_two_readings() -> None:
    hooks = {"a.example.com": "klm", "b.example.com": "klm", "c.example.com": "other"}
    before = {"a.example.com": 4.0, "b.example.com": 1.0}
    after = {"a.example.com": 11.0, "b.example.com": 2.0, "c.example.com": 3.0}
    assert admissions_made(before, after, hooks) == {"klm": 8, "other": 3}
    assert admissions_made(None, after, hooks) is None
    assert admissions_made(before, None, hooks) is None
    # A counter that went down: the API server restarted, the count is unknown.
    assert admissions_made(after, before, hooks) is None


def test_admissions_made_over_restarts_sum_the_incarnations() -> None:
    """Each restart's counters start from zero; the gap holds the last reading before."""
    hooks = {"a.example.com": "klm"}
    gaps = [{"a.example.com": 9.0}, {"a.example.com": 2.0}]
    made = admissions_made({"a.example.com": 4.0}, {"a.example.com": 3.0}, hooks, gaps)
    assert made == {"klm": (9 - 4) + 2 + 3}
    # A reading that failed (the server was already down) makes the count unknown.
    assert admissions_made({}, {}, hooks, [None]) is None


def mutation(i: int, op: str, at: float) -> ExecutedMutation:
    labels = frozen_map({"operator.kyma-project.io/watched-by": "kyma"})
    body = (
        {"apiVersion": KYMAS.api_version, "kind": "Kyma",
         "metadata": {"name": "k1", "namespace": "kyma-system", "labels": dict(labels)},
         "spec": {"channel": "regular"}}
        if op == "create"
        else {"spec": {"channel": f"c{i}"}}
    )  # fmt: skip
    m = Mutation(i, at, "skr-a", KYMAS, "kyma-system", "k1", op, body,  # type: ignore[arg-type]
                 frozen_map() if op == "create" else labels, labels, True)  # fmt: skip
    before = frozen_map() if op == "create" else labels
    return ExecutedMutation(m, at, at + 0.01, True, "", before, labels)


def test_repeats_are_admissions_beyond_one_per_routed_write() -> None:
    executed = [mutation(0, "create", 0.0), mutation(1, "spec-update", 1.0)]
    rule = Rule("klm", "operator.kyma-project.io", "v1beta2", "kymas",
                labels={"operator.kyma-project.io/watched-by": "kyma"}, name="klm")  # fmt: skip
    truth = ground_truth(executed, [rule], {"skr-a": "rt-a"})
    routed = admissions_routed(truth, executed)
    assert routed == Counter({("skr-a", "klm"): 2})
    ids = {"skr-a": "rt-a", "skr-b": "rt-b"}
    assert repeated_admissions(routed, {"skr-a": {"klm": 3}}, ids) == {("klm", "rt-a"): 1}
    assert repeated_admissions(routed, {"skr-a": {"klm": 2}}, ids) == {}
    assert repeated_admissions(routed, {"skr-a": None}, ids) == {}
    # Writes besides the churn may have been admitted once each: not repeats.
    assert repeated_admissions(routed, {"skr-a": {"klm": 3}}, ids, other_writes={"skr-a": 1}) == {}
    # A cluster without churn writes: everything counted is beyond the (zero) routed.
    assert repeated_admissions(routed, {"skr-b": {"klm": 1}}, ids) == {("klm", "rt-b"): 1}
