"""The seeded churn plan: reproducible, valid against the object model, bounded."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.churn.model import KINDS, apply_merge_patch
from harness.churn.plan import ChurnMix, ChurnSpec, check_plan, make_plan

WATCHED = {"operator.kyma-project.io/watched-by": "kyma"}

mixes = st.builds(
    ChurnMix,
    create=st.floats(0, 5),
    spec_update=st.floats(0, 5),
    status_update=st.floats(0, 5),
    label_flip=st.floats(0, 5),
    delete=st.floats(0, 5),
)
specs = st.builds(
    ChurnSpec,
    clusters=st.lists(
        st.sampled_from(["skr-a", "skr-b", "skr-c"]), min_size=1, max_size=3, unique=True
    ).map(tuple),
    kinds=st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=3, unique=True).map(tuple),
    mix=mixes,
    objects=st.integers(1, 6),
    rate=st.floats(0.5, 40),
    duration=st.floats(0.1, 3),
    seed=st.integers(0, 2**32),
    labels=st.sampled_from([{}, WATCHED]),
)


@settings(max_examples=60, deadline=None)
@given(specs)
def test_same_seed_gives_the_same_plan_and_it_is_valid(spec: ChurnSpec) -> None:
    plan = make_plan(spec)
    assert make_plan(spec) == plan
    assert check_plan(plan) == []
    assert len(plan) <= spec.per_cluster * len(spec.clusters)
    assert {m.cluster for m in plan} <= set(spec.clusters)
    assert {m.kind.resource for m in plan} <= set(spec.kinds)


@settings(max_examples=30, deadline=None)
@given(specs, st.integers(0, 2**32))
def test_another_seed_changes_the_plan_but_not_its_validity(spec: ChurnSpec, seed: int) -> None:
    other = ChurnSpec(**{**spec.__dict__, "seed": seed})
    assert check_plan(make_plan(other)) == []


def test_count_is_rate_times_duration_per_cluster_and_capped() -> None:
    spec = ChurnSpec(clusters=("a", "b"), rate=10, duration=2, objects=3)
    plan = make_plan(spec)
    assert len(plan) == 40
    assert max(m.at for m in plan) < 2.0
    capped = ChurnSpec(clusters=("a", "b"), rate=1000, duration=100, max_mutations=50)
    assert len(make_plan(capped)) == 50


def test_configmaps_get_data_updates_and_no_status_updates() -> None:
    spec = ChurnSpec(clusters=("a",), kinds=("configmaps",), objects=2, rate=50, duration=2)
    plan = make_plan(spec)
    ops = {m.operation for m in plan}
    assert "status-update" not in ops
    updates = [m for m in plan if m.operation == "spec-update"]
    assert updates and all(set(m.body or {}) == {"data"} for m in updates)
    assert not any(m.has_spec for m in plan)


def test_kymas_get_channel_and_state_changes() -> None:
    spec = ChurnSpec(clusters=("a",), kinds=("kymas",), objects=2, rate=50, duration=2)
    plan = make_plan(spec)
    specs = [m for m in plan if m.operation == "spec-update"]
    statuses = [m for m in plan if m.operation == "status-update"]
    assert specs and all(set((m.body or {})["spec"]) == {"channel"} for m in specs)
    assert statuses and all(m.subresource == "status" for m in statuses)
    assert all(m.has_spec for m in plan)
    creates = [m for m in plan if m.operation == "create"]
    assert all(
        (m.body or {})["kind"] == "Kyma" and "channel" in (m.body or {})["spec"] for m in creates
    )


def test_label_flips_toggle_the_watched_labels() -> None:
    spec = ChurnSpec(
        clusters=("a",),
        objects=1,
        rate=10,
        duration=1,
        labels=WATCHED,
        mix=ChurnMix(create=1, spec_update=0, status_update=0, label_flip=1, delete=0),
    )
    plan = make_plan(spec)
    assert [m.operation for m in plan] == ["create"] + ["label-flip"] * 9
    watched = [m.labels_after.get("operator.kyma-project.io/watched-by") for m in plan]
    assert watched == ["kyma", None] * 5


def test_create_only_mix_fills_the_pool_then_leaves_slots_empty() -> None:
    mix = ChurnMix(create=1, spec_update=0, status_update=0, label_flip=0, delete=0)
    plan = make_plan(ChurnSpec(clusters=("a",), objects=3, rate=10, duration=1, mix=mix))
    assert [m.operation for m in plan] == ["create"] * 3


def test_update_only_mix_bootstraps_with_creates() -> None:
    mix = ChurnMix(create=0, spec_update=1, status_update=0, label_flip=0, delete=0)
    plan = make_plan(ChurnSpec(clusters=("a",), objects=1, rate=10, duration=1, mix=mix))
    assert [m.operation for m in plan] == ["create"] + ["spec-update"] * 9


def test_namespace_override_and_payload_is_a_copy() -> None:
    spec = ChurnSpec(clusters=("a",), kinds=("secrets",), namespaces={"secrets": "ns1"})
    plan = make_plan(spec)
    assert {m.namespace for m in plan} == {"ns1"}
    first = plan[0]
    payload = first.payload()
    assert payload is not None
    payload["metadata"]["name"] = "changed"
    assert (first.body or {})["metadata"]["name"] != "changed"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"clusters": ()}, "clusters"),
        ({"clusters": ("a",), "kinds": ("pods",)}, "kinds"),
        ({"clusters": ("a",), "rate": 0}, "rate"),
        ({"clusters": ("a",), "objects": 0}, "objects"),
    ],
)
def test_invalid_specs_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ChurnSpec(**kwargs)  # type: ignore[arg-type]


def test_merge_patch_follows_rfc_7386() -> None:
    target = {"a": {"b": 1, "c": 2}, "d": [1]}
    assert apply_merge_patch(target, {"a": {"b": None, "e": 3}, "d": [2]}) == {
        "a": {"c": 2, "e": 3},
        "d": [2],
    }
    assert target == {"a": {"b": 1, "c": 2}, "d": [1]}


def test_check_plan_reports_violations() -> None:
    plan = make_plan(ChurnSpec(clusters=("a",), objects=1, rate=5, duration=1))
    assert plan[0].operation == "create"
    problems = check_plan(plan[1:])
    assert any("does not exist" in p for p in problems)
