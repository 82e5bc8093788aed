"""The whole flow on one machine: KCP + SKRs, Envoy gateway, Watcher controller, KLM stand-in.

``async with watcher_environment(EnvironmentSpec(...)) as env:`` brings everything up
(:mod:`.compose`) and yields a :class:`WatcherEnvironment` (:mod:`.core`) that observes
(:mod:`.events`: every accepted event, every fault; metrics) and injects faults
(:mod:`.faults`, :mod:`.inject`, :mod:`.rotation`).
"""

from harness.environment.compose import watcher_environment
from harness.environment.core import WatcherEnvironment
from harness.environment.events import EventLog, FaultRecord, ObservedEvent
from harness.environment.rotation import CertificateRotation, RotationError
from harness.environment.spec import (
    KLM_COMPONENT,
    KLM_SERVICE,
    EnvironmentSpec,
    ListenerSpec,
    SkrSpec,
)
from harness.faults import Fault, FaultError
from watcher.domain import (
    KCP_NAMESPACE,
    MANAGED_BY_LABEL,
    RUNTIME_ID_LABEL,
    SKR_DOMAIN_ANNOTATION,
    SKR_NAMESPACE,
    WATCHED_BY_LABEL,
)

__all__ = [
    "KCP_NAMESPACE",
    "KLM_COMPONENT",
    "KLM_SERVICE",
    "MANAGED_BY_LABEL",
    "RUNTIME_ID_LABEL",
    "SKR_DOMAIN_ANNOTATION",
    "SKR_NAMESPACE",
    "WATCHED_BY_LABEL",
    "CertificateRotation",
    "EnvironmentSpec",
    "EventLog",
    "Fault",
    "FaultError",
    "FaultRecord",
    "ListenerSpec",
    "ObservedEvent",
    "RotationError",
    "SkrSpec",
    "WatcherEnvironment",
    "watcher_environment",
]
