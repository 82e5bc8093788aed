"""KLM's Kyma controller triggers and requeues without a cluster: creation, generation or
label change (not status/annotation-only), per-key error backoff, skip-reconciliation."""

from __future__ import annotations

from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st
from test_reconciler import kyma, outcomes

from harness.kcp.lifecycle_manager.kyma.cache import KymaCache, KymaInfo, change_trigger
from harness.kcp.lifecycle_manager.manager import (
    LifecycleManager,
    Outcome,
    RequeueIntervals,
    Trigger,
)

NEVER = RequeueIntervals(success=3600, busy=3600, error=3600, warning=3600, error_max=3600)
SKIP = "operator.kyma-project.io/skip-reconciliation"


def info(generation: int = 1, labels: dict[str, str] | None = None, **kw: Any) -> KymaInfo:
    return KymaInfo(
        "kcp-system", "k", "rt", labels=labels or {"a": "1"}, generation=generation, **kw
    )


def test_the_watch_predicate_is_klms() -> None:
    assert change_trigger(None, info()) is Trigger.KYMA_CREATED
    assert change_trigger(info(1), info(2)) is Trigger.KYMA_CHANGED  # spec
    assert change_trigger(info(labels={"a": "1"}), info(labels={"a": "2"})) is Trigger.KYMA_CHANGED
    assert change_trigger(info(), info(annotations={"x": "y"})) is None  # annotation only
    assert change_trigger(info(), info()) is None  # status only: same generation and labels


@given(st.lists(st.booleans(), min_size=1, max_size=12))
def test_error_backoff_doubles_from_5s_to_30s_and_resets_on_success(errors: list[bool]) -> None:
    intervals = RequeueIntervals()  # KLM's: error 5 s, at most 30 s
    failures = 0
    for failed in errors:
        failures = failures + 1 if failed else 0
        delay = intervals.after(Outcome.ERROR if failed else Outcome.SUCCESS, failures)
        if failed:
            assert delay == min(5.0 * 2 ** (failures - 1), 30.0)
        else:
            assert delay == 300.0
    assert intervals.after(Outcome.SKIPPED) is None and intervals.after(Outcome.GONE) is None


def with_generation(obj: dict[str, Any], generation: int, **labels: str) -> dict[str, Any]:
    meta = {**obj["metadata"], "generation": generation}
    meta["labels"] = {**meta["labels"], **labels}
    return {**obj, "metadata": meta}


async def test_created_and_changed_kymas_are_reconciled_after_the_first_list() -> None:
    klm = LifecycleManager(cast(Any, None), reconcile=outcomes(), intervals=NEVER)
    klm.cache.apply("ADDED", kyma("old", "rt-old"))
    klm.cache.apply("SYNCED", {})
    async with klm.reconciler:
        klm.cache.apply("ADDED", kyma("new", "rt-new"))
        created = await klm.wait_for_reconcile("kcp-system/new", timeout=2)
        status_only = with_generation(kyma("new", "rt-new"), 0)
        status_only["status"] = {"state": "Ready"}
        klm.cache.apply("MODIFIED", status_only)
        klm.cache.apply("MODIFIED", with_generation(kyma("new", "rt-new"), 0, team="x"))
        changed = await klm.wait_for_reconcile("kcp-system/new", Trigger.KYMA_CHANGED, timeout=2)
    assert created.triggers == {Trigger.KYMA_CREATED}
    assert changed.triggers == {Trigger.KYMA_CHANGED}
    assert [r.kyma for r in klm.reconciles()] == ["kcp-system/new", "kcp-system/new"]


async def test_skip_reconciliation_stops_reconciles_until_the_label_goes() -> None:
    klm = LifecycleManager(cast(Any, None), reconcile=outcomes(), intervals=NEVER)
    klm.cache.apply("SYNCED", {})
    async with klm.reconciler:
        skipped = with_generation(kyma("k", "rt"), 1, **{SKIP: "true"})
        klm.cache.apply("ADDED", skipped)
        first = await klm.wait_for_reconcile("kcp-system/k", timeout=2)
        klm.cache.apply("MODIFIED", with_generation(kyma("k", "rt"), 1))
        again = await klm.wait_for_reconcile("kcp-system/k", Trigger.KYMA_CHANGED, timeout=2)
    assert first.outcome is Outcome.SKIPPED
    assert again.outcome is Outcome.SUCCESS


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]), st.sampled_from(["rt-1", "rt-2", ""]), st.booleans()
        ),
        max_size=20,
    )
)
def test_the_runtime_id_index_agrees_with_a_scan(ops: list[tuple[str, str, bool]]) -> None:
    """Kymas added, relabelled and deleted in any order: the index finds what a scan would."""
    cache = KymaCache()
    for name, runtime_id, delete in ops:
        obj = kyma(name, runtime_id)
        cache.apply("DELETED" if delete else "MODIFIED", obj)
    for runtime_id in ("rt-1", "rt-2", ""):
        scanned = [k for k in cache.all() if k.runtime_id == runtime_id]
        assert cache.by_runtime_id(runtime_id) == scanned
        assert cache.by_runtime_id(runtime_id, "other") == []
