"""The event log: one record per accepted event, filters by time and manager."""

from __future__ import annotations

from harness.environment.events import EventLog, FaultRecord, ObservedEvent
from watcher.listener import ListenerEvent
from watcher.model import GroupVersionKind, ObjectKey, WatchEvent


def listener_event(name: str, at: float, runtime_id: str = "runtime-a") -> ListenerEvent:
    return ListenerEvent(
        runtime_id=runtime_id,
        event=WatchEvent(
            ObjectKey("kyma-system", name),
            GroupVersionKind("operator.kyma-project.io", "v1beta2", "Kyma"),
        ),
        received_at=at,
    )


async def test_records_carry_manager_runtime_and_object() -> None:
    log = EventLog()
    log.recorder("lifecycle-manager")(listener_event("default", 10.0))
    await log.recorder("cm-manager").consume(listener_event("cm", 11.0, "runtime-b"))
    assert log.events == [
        ObservedEvent(
            "lifecycle-manager",
            "runtime-a",
            "kyma-system",
            "default",
            "operator.kyma-project.io",
            "v1beta2",
            "Kyma",
            10.0,
        ),
        ObservedEvent(
            "cm-manager",
            "runtime-b",
            "kyma-system",
            "cm",
            "operator.kyma-project.io",
            "v1beta2",
            "Kyma",
            11.0,
        ),
    ]
    assert [e.name for e in log.events_since(10.5)] == ["cm"]
    assert [e.name for e in log.events_since(0, "lifecycle-manager")] == ["default"]


def test_faults_between_selects_by_start_time() -> None:
    log = EventLog()
    log.timeline += [
        FaultRecord(1.0, "gateway", "stop", 1.5),
        FaultRecord(2.0, "gateway", "start", 2.5),
        FaultRecord(3.0, "kcp", "clear", 3.1),
    ]
    assert [r.action for r in log.faults_between(1.5, 3.0)] == ["start", "clear"]
