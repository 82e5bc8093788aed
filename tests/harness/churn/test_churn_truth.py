"""The ground-truth oracle: routing by resource, labels and field; decisions by decide."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.churn.model import (
    CONFIGMAPS,
    KYMAS,
    ExecutedMutation,
    KindInfo,
    Mutation,
    MutationOp,
    WriteFailure,
)
from harness.churn.plan import ChurnSpec, make_plan
from harness.churn.truth import Rule, ground_truth, rules_from_watchers
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher

WATCHED = {"operator.kyma-project.io/watched-by": "kyma"}
RUNTIMES = {"skr-a": "rt-a", "skr-b": "rt-b"}
KLM = rules_from_watchers([parse_watcher(klm_watcher_dict())])
KYMA_STATUS = Rule("status-mgr", "operator.kyma-project.io", "*", "kymas", "status", WATCHED)
ALL_CONFIGMAPS = Rule("cm-mgr", "", "v1", "configmaps")
WATCHED_CONFIGMAPS = Rule("cm-watched", "", "*", "configmaps", labels=WATCHED)


def executed_all(plan: Sequence[Mutation], step: float = 0.01) -> list[ExecutedMutation]:
    return [
        ExecutedMutation(m, m.at, m.at + step, True, "", m.labels_before, m.labels_after)
        for m in plan
    ]


class Writer:
    """Hand-made mutations with consistent labels, for precise cases."""

    def __init__(self) -> None:
        self.plan: list[Mutation] = []
        self.labels: dict[tuple[str, str], Mapping[str, str]] = {}

    def add(
        self,
        op: MutationOp,
        name: str,
        kind: KindInfo = KYMAS,
        body: dict[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
        cluster: str = "skr-a",
    ) -> Mutation:
        before = self.labels.get((cluster, name), {})
        after = dict(labels if labels is not None else before)
        if op == "delete":
            after = {}
        if op == "create":
            meta = {"name": name, "namespace": kind.namespace, "labels": after}
            body = {
                "apiVersion": kind.api_version,
                "kind": kind.kind,
                "metadata": meta,
                **(body or {}),
            }
        elif op == "label-flip":
            body = {"metadata": {"labels": {**{k: None for k in before}, **after}}}
        m = Mutation(len(self.plan), len(self.plan) * 0.1, cluster, kind, kind.namespace, name,
                     op, body, before, after, kind.has_spec)  # fmt: skip
        self.labels[(cluster, name)] = after
        self.plan.append(m)
        return m


def test_klm_watcher_sees_spec_changes_of_labelled_kymas_only() -> None:
    w = Writer()
    w.add("create", "k1", body={"spec": {"channel": "regular"}}, labels=WATCHED)
    w.add("spec-update", "k1", body={"spec": {"channel": "fast"}})
    w.add("status-update", "k1", body={"status": {"state": "Ready"}})
    w.add("spec-update", "k1", body={"spec": {"channel": "fast"}})  # no change
    w.add("create", "k2", body={"spec": {"channel": "regular"}}, labels={})
    w.add("spec-update", "k2", body={"spec": {"channel": "fast"}})
    truth = ground_truth(executed_all(w.plan), KLM, RUNTIMES)
    assert [(e.key.name, e.caused_by) for e in truth.expected] == [("k1", (0, 1))]
    (only,) = truth.expected
    assert only.manager == "lifecycle-manager" and only.runtime_id == "rt-a"
    assert only.gvk.kind == "Kyma" and only.gvk.version == "v1beta2"
    assert only.last_cause_at == w.plan[1].at + 0.01
    reasons = {d.mutation_id: d.reason.value for d in truth.deliveries}
    assert reasons == {0: "created", 1: "spec-changed", 3: "no-change"}
    assert ("rt-a", "kyma-system", "k2", "operator.kyma-project.io", "Kyma") in truth.objects


def test_status_rule_sees_only_status_changes() -> None:
    w = Writer()
    w.add("create", "k1", body={"spec": {"channel": "regular"}}, labels=WATCHED)
    w.add("spec-update", "k1", body={"spec": {"channel": "fast"}})
    w.add("status-update", "k1", body={"status": {"state": "Ready"}})
    w.add("status-update", "k1", body={"status": {"state": "Ready"}})  # no change
    w.add("status-update", "k1", body={"status": {"state": "Error"}})
    w.add("delete", "k1")
    truth = ground_truth(executed_all(w.plan), (KYMA_STATUS,), RUNTIMES)
    assert [(e.manager, e.caused_by) for e in truth.expected] == [("status-mgr", (2, 4))]


def test_label_flip_semantics() -> None:
    w = Writer()
    w.add("create", "c1", CONFIGMAPS, {"data": {"a": "1"}}, labels={})
    w.add("spec-update", "c1", CONFIGMAPS, {"data": {"a": "2"}})  # unlabelled: not routed
    w.add("label-flip", "c1", CONFIGMAPS, labels=WATCHED)  # new labels match → event
    w.add("spec-update", "c1", CONFIGMAPS, {"data": {"a": "3"}})
    w.add("label-flip", "c1", CONFIGMAPS, labels={})  # old labels match → event
    w.add("spec-update", "c1", CONFIGMAPS, {"data": {"a": "4"}})  # unlabelled again
    w.add("delete", "c1", CONFIGMAPS)  # old labels do not match
    truth = ground_truth(executed_all(w.plan), (WATCHED_CONFIGMAPS,), RUNTIMES)
    assert [e.caused_by for e in truth.expected] == [(2, 3, 4)]


def test_label_flip_on_a_kyma_changes_no_spec_so_no_event() -> None:
    w = Writer()
    w.add("create", "k1", body={"spec": {"channel": "regular"}}, labels=WATCHED)
    w.add("label-flip", "k1", labels={})
    w.add("label-flip", "k1", labels=WATCHED)
    truth = ground_truth(executed_all(w.plan), KLM, RUNTIMES)
    assert [e.caused_by for e in truth.expected] == [(0,)]
    assert [d.reason.value for d in truth.deliveries] == ["created", "no-change", "no-change"]


def test_failed_writes_cause_nothing_and_runtime_ids_separate_clusters() -> None:
    w = Writer()
    w.add("create", "c1", CONFIGMAPS, {"data": {}}, cluster="skr-a")
    w.add("create", "c1", CONFIGMAPS, {"data": {}}, cluster="skr-b")
    w.add("spec-update", "c1", CONFIGMAPS, {"data": {"x": "1"}}, cluster="skr-b")
    executed = executed_all(w.plan)
    executed[2] = ExecutedMutation(w.plan[2], 1, 2, False, "Conflict")
    truth = ground_truth(executed, (ALL_CONFIGMAPS,), RUNTIMES)
    assert [(e.runtime_id, e.cluster, e.caused_by) for e in truth.expected] == [
        ("rt-a", "skr-a", (0,)),
        ("rt-b", "skr-b", (1,)),
    ]


def _failed(m: Mutation, failure: WriteFailure) -> ExecutedMutation:
    return ExecutedMutation(
        m, m.at, m.at + 0.01, False, failure.value, m.labels_before, m.labels_before, failure
    )


def test_a_delete_of_a_never_created_object_expects_nothing() -> None:
    """The create was refused (the API server was down), the delete answered 404."""
    w = Writer()
    w.add("create", "k1", body={"spec": {"channel": "regular"}}, labels=WATCHED)
    w.add("delete", "k1")
    executed = [_failed(m, WriteFailure.REFUSED) for m in w.plan]
    assert ground_truth(executed, KLM, RUNTIMES).expected == ()


def test_a_create_answered_409_was_admitted_so_its_event_is_optional() -> None:
    w = Writer()
    w.add("create", "k1", body={"spec": {"channel": "regular"}}, labels=WATCHED)
    w.add("delete", "k1")  # refused: the object stays
    w.add("create", "k1", body={"spec": {"channel": "fast"}}, labels=WATCHED)
    executed = executed_all(w.plan)
    executed[1] = _failed(w.plan[1], WriteFailure.REFUSED)
    executed[2] = _failed(w.plan[2], WriteFailure.ADMITTED)
    (exp,) = ground_truth(executed, KLM, RUNTIMES).expected
    assert exp.caused_by == (0,) and [c.mutation_id for c in exp.optional_causes] == [2]
    assert exp.bounds == (1, 2)


def test_after_a_write_of_unknown_effect_the_object_expects_anything_bounded() -> None:
    """The label flip may have removed the watched label: the spec update after it may or
    may not reach the webhook, so it is not required (the flip itself changes no spec)."""
    w = Writer()
    w.add("create", "k1", body={"spec": {"channel": "regular"}}, labels=WATCHED)
    w.add("label-flip", "k1", labels={})
    w.add("spec-update", "k1", body={"spec": {"channel": "fast"}})
    w.add("status-update", "k1", body={"status": {"state": "Ready"}})  # not a spec rule's
    executed = executed_all(w.plan)
    executed[1] = _failed(w.plan[1], WriteFailure.UNKNOWN)
    (exp,) = ground_truth(executed, KLM, RUNTIMES).expected
    assert exp.caused_by == (0,)
    assert [c.mutation_id for c in exp.optional_causes] == [2]


def test_two_watchers_of_one_manager_count_twice() -> None:
    w = Writer()
    w.add("create", "c1", CONFIGMAPS, {"data": {}}, labels=WATCHED)
    rules = (ALL_CONFIGMAPS, Rule("cm-mgr", "", "v1", "configmaps", labels=WATCHED, name="second"))
    (exp,) = ground_truth(executed_all(w.plan), rules, RUNTIMES).expected
    assert exp.required == 2 and exp.bounds == (1, 2) and exp.caused_by == (0,)


def test_watcher_added_during_churn_makes_nearby_writes_optional() -> None:
    w = Writer()
    for i in range(5):
        w.add("create", f"c{i}", CONFIGMAPS, {"data": {}})
    rule = Rule("cm-mgr", "", "v1", "configmaps", since=0.2, until=0.35)
    # writes: [0,.01] [.1,.11] [.2,.21] [.3,.31] [.4,.41]; settle .05
    truth = ground_truth(executed_all(w.plan), (rule,), RUNTIMES, settle=0.05)
    got = {e.key.name: (e.required, e.optional) for e in truth.expected}
    assert got == {"c2": (0, 1), "c3": (1, 0)}
    c2 = next(e for e in truth.expected if e.key.name == "c2")
    assert c2.bounds == (0, 1) and c2.last_cause is None


def test_unknown_cluster_is_named() -> None:
    w = Writer()
    w.add("create", "c1", CONFIGMAPS, {"data": {}}, cluster="skr-z")
    try:
        ground_truth(executed_all(w.plan), (ALL_CONFIGMAPS,), RUNTIMES)
    except KeyError as exc:
        assert "skr-z" in str(exc)
    else:
        raise AssertionError("expected KeyError")


plans = st.builds(
    ChurnSpec,
    clusters=st.just(("skr-a", "skr-b")),
    kinds=st.lists(
        st.sampled_from(["kymas", "configmaps", "secrets"]), min_size=1, max_size=3, unique=True
    ).map(tuple),
    objects=st.integers(1, 4),
    rate=st.floats(2, 30),
    duration=st.floats(0.2, 2),
    seed=st.integers(0, 2**32),
    labels=st.sampled_from([{}, WATCHED]),
).map(make_plan)


@settings(max_examples=50, deadline=None)
@given(plans)
def test_unwatched_kinds_and_unlabelled_objects_never_expect_events(
    plan: list[Mutation],
) -> None:
    unwatched = Rule("nobody", "apps", "v1", "deployments")
    assert ground_truth(executed_all(plan), (unwatched,), RUNTIMES).expected == ()
    needs_label = Rule("m", "*", "*", "*", labels={"never-set": "x"})
    assert ground_truth(executed_all(plan), (needs_label,), RUNTIMES).expected == ()
    needs_status = Rule("m", "", "v1", "configmaps", "status")
    assert ground_truth(executed_all(plan), (needs_status,), RUNTIMES).expected == ()


@settings(max_examples=50, deadline=None)
@given(plans)
def test_every_routed_create_and_delete_expects_an_event(plan: list[Mutation]) -> None:
    everything = Rule("m", "*", "*", "*")
    truth = ground_truth(executed_all(plan), (everything,), RUNTIMES)
    caused = {i for e in truth.expected for i in e.caused_by}
    for m in plan:
        if m.operation in ("create", "delete") or (
            m.operation != "status-update" and not m.has_spec
        ):
            assert m.id in caused, m.describe()
        if m.operation == "status-update" or (m.operation == "label-flip" and m.has_spec):
            assert m.id not in caused, m.describe()
        if m.operation == "spec-update":
            assert m.id in caused, m.describe()  # the plan always changes what it updates
    assert all(e.required >= 1 and e.optional == 0 for e in truth.expected)
