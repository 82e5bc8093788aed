"""Reading any KLM's log: records, observations, reconciles with their triggers."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from harness.kcp.klm_log import (
    EventQueued,
    ReconcileFailed,
    ReconcileHistory,
    ReconcileStarted,
    observe,
    parse_record,
)

KEY = "kcp-system/kyma-sample"


def line(msg: str, **context: object) -> str:
    date = "2026-11-28T00:15:03.3219189Z"
    return json.dumps({"level": "INFO", "date": date, "msg": msg, "context": context})


def kyma_context(rid: str = "r1", name: str = "kyma-sample") -> dict[str, object]:
    return {
        "controller": "kyma",
        "controllerGroup": "operator.kyma-project.io",
        "namespace": "kcp-system",
        "name": name,
        "reconcileID": rid,
    }


def test_upstream_reconcile_line_is_a_start_with_nanosecond_time() -> None:
    upstream = (
        '{"level":"LEVEL(-2)","date":"2026-11-28T00:15:03.3219189Z","caller":"kyma/controller.go:139",'
        '"msg":"Kyma reconciliation started","context":{"controller":"kyma","controllerGroup":'
        '"operator.kyma-project.io","controllerKind":"Kyma","Kyma":{"name":"kyma-sample",'
        '"namespace":"kcp-system"},"namespace":"kcp-system","name":"kyma-sample",'
        '"reconcileID":"217e61b4"}}'
    )
    record = parse_record(upstream)
    assert record is not None
    assert record.level == "LEVEL(-2)"
    assert abs(record.at - 1795824903.3219189) < 1e-6
    assert observe(record) == ReconcileStarted(record.at, KEY, "217e61b4")


def test_event_line_queues_the_named_kyma() -> None:
    record = parse_record(line("event received from SKR, adding kcp-system/kyma-sample to queue"))
    assert record is not None
    assert observe(record) == EventQueued(record.at, KEY)


def test_reconciler_error_names_the_reconcile() -> None:
    record = parse_record(line("Reconciler error", **kyma_context("r9"), error="boom"))
    assert record is not None
    assert observe(record) == ReconcileFailed(record.at, KEY, "r9", "boom")


def test_other_controllers_and_lines_are_not_kyma_observations() -> None:
    other = {**kyma_context(), "controller": "manifest"}
    for text in (
        line("Kyma reconciliation started", **other),
        line("starting server", name="health probe"),
        "panic: runtime error",
        "{}",
        json.dumps({"msg": "no date"}),
        json.dumps({"msg": "bad date", "date": "yesterday"}),
    ):
        record = parse_record(text)
        assert record is None or observe(record) is None


def test_offsets_and_ts_are_read() -> None:
    record = parse_record(json.dumps({"ts": "2026-11-28T01:00:00.5+01:00", "msg": "x"}))
    assert record is not None
    assert record.at == 1795824000.5


def test_an_event_before_a_start_makes_it_a_watch_event_reconcile() -> None:
    history = ReconcileHistory()
    history.add(ReconcileStarted(1.0, KEY, "a"))
    history.add(EventQueued(2.0, KEY))
    history.add(EventQueued(2.5, KEY))  # merged into the same reconcile
    history.add(ReconcileStarted(3.0, KEY, "b"))
    history.add(ReconcileStarted(8.0, KEY, "c"))
    first, second, third = history.reconciles
    assert first.triggers == frozenset()
    assert second.triggers == {"watch-event"}
    assert second.queued_at == 2.0
    assert second.latency == 1.0
    assert third.triggers == frozenset()
    assert history.of(KEY, "watch-event") == [second]
    assert history.of(since=5.0) == [third]


def test_events_queue_only_their_own_kyma() -> None:
    history = ReconcileHistory()
    history.add(EventQueued(1.0, "kcp-system/other"))
    history.add(ReconcileStarted(2.0, KEY, "a"))
    assert history.reconciles[0].triggers == frozenset()


def test_a_declared_trigger_is_kept_beside_the_inferred_one() -> None:
    history = ReconcileHistory()
    history.add(EventQueued(1.0, KEY))
    history.add(ReconcileStarted(2.0, KEY, "a", trigger="kyma-changed"))
    assert history.reconciles[0].triggers == {"kyma-changed", "watch-event"}


def test_a_failure_marks_its_reconcile_only() -> None:
    history = ReconcileHistory()
    history.add(ReconcileStarted(1.0, KEY, "a"))
    history.add(ReconcileStarted(2.0, KEY, "b"))
    history.add(ReconcileFailed(2.5, KEY, "a", "no access"))
    history.add(ReconcileFailed(2.6, KEY, "unknown", "ignored"))
    assert [(r.reconcile_id, r.failed, r.error) for r in history.reconciles] == [
        ("a", True, "no access"),
        ("b", False, ""),
    ]


@given(
    st.lists(
        st.tuples(st.sampled_from(["event", "start"]), st.sampled_from(["k/a", "k/b"])),
        max_size=40,
    )
)
def test_every_event_is_counted_in_at_most_one_reconcile(steps: list[tuple[str, str]]) -> None:
    history = ReconcileHistory()
    for t, (kind, key) in enumerate(steps):
        if kind == "event":
            history.add(EventQueued(float(t), key))
        else:
            history.add(ReconcileStarted(float(t), key, f"r{t}"))
    for key in ("k/a", "k/b"):
        kinds = [kind for kind, k in steps if k == key]
        # a start is a watch-event reconcile exactly when an event came since the last start
        expected, pending = [], False
        for kind in kinds:
            if kind == "event":
                pending = True
            else:
                expected.append(pending)
                pending = False
        assert [("watch-event" in r.triggers) for r in history.of(key)] == expected
