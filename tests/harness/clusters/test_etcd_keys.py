"""What resetting a pooled API server deletes, and when it refuses (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from harness.clusters.etcd_keys import reset_plan

PREFIX = "/pool-1/"
BASELINE = {
    "/pool-1/namespaces/default": 5,
    "/pool-1/leases/kube-system/apiserver-x": 7,
    "/pool-1/apiextensions.k8s.io/customresourcedefinitions/kymas.operator.kyma-project.io": 9,
}


def test_what_a_scenario_created_is_deleted_and_bookkeeping_may_change() -> None:
    now = {
        **BASELINE,
        "/pool-1/leases/kube-system/apiserver-x": 90,  # the API server renews its lease
        "/pool-1/namespaces/kcp-system": 40,
        "/pool-1/operator.kyma-project.io/kymas/kcp-system/kyma-a": 41,
    }
    plan = reset_plan(PREFIX, BASELINE, now)
    assert plan.refused is None
    assert plan.delete == (
        "/pool-1/namespaces/kcp-system",
        "/pool-1/operator.kyma-project.io/kymas/kcp-system/kyma-a",
    )


def test_a_changed_or_deleted_system_namespace_refuses_the_reset() -> None:
    changed = {**BASELINE, "/pool-1/namespaces/default": 6}
    assert reset_plan(PREFIX, BASELINE, changed).refused == "/pool-1/namespaces/default was changed"
    gone = {k: v for k, v in BASELINE.items() if "namespaces" not in k}
    assert reset_plan(PREFIX, BASELINE, gone).refused == "/pool-1/namespaces/default was deleted"


keys = st.dictionaries(
    st.sampled_from(["namespaces/", "configmaps/ns/", "leases/kube-system/"]).flatmap(
        lambda kind: st.text("abc", min_size=1, max_size=3).map(lambda n: PREFIX + kind + n)
    ),
    st.integers(1, 100),
)


@given(keys, keys)
def test_after_a_reset_only_baseline_keys_are_left(
    baseline: dict[str, int], now: dict[str, int]
) -> None:
    plan = reset_plan(PREFIX, baseline, now)
    if plan.refused is None:
        left = set(now) - set(plan.delete)
        assert left <= set(baseline)
        assert set(plan.delete).isdisjoint(baseline)
