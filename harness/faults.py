"""Faults: the closed set of things a scenario (or a test) can do to a running environment.

Pure. Each fault is one frozen variant of :data:`Fault`; the scenario model builds them
when a file is loaded (so a bad target is a located error) and the environment's executor
(:func:`harness.environment.inject.inject`) carries each variant out with one ``match``
arm, through the few ports a fault can reach (parts with a process, the gateway's fault
filter, the certificate rotation). Variants:

* :class:`PartFault` — stop / start / kill / restart the gateway, a webhook
  (``webhook/<skr>``), a listener (``listener/<component>``, no ``kill``: it has no
  process of its own) or an API server (``apiserver/<cluster>``); each keeps its ports;
* :class:`KcpFault` — Envoy's fault filter on every KCP route (delay and/or abort), or
  none;
* :class:`RotateLeaves`, :class:`RotateCa`, :class:`DropOldCa`, :class:`BreakLeaves` —
  the KCP's certificates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from harness.errors import HarnessError
from watcher.render.envoy import FaultInjection


class FaultError(HarnessError, ValueError):
    """A fault that does not fit its target or the environment it is injected into."""


class Part(StrEnum):
    """The parts with a lifecycle a fault can stop and start."""

    GATEWAY = "gateway"
    WEBHOOK = "webhook"
    LISTENER = "listener"
    APISERVER = "apiserver"


class Lifecycle(StrEnum):
    STOP = "stop"
    START = "start"
    KILL = "kill"
    RESTART = "restart"


CAN: Mapping[Part, frozenset[Lifecycle]] = {
    Part.GATEWAY: frozenset(Lifecycle),
    Part.WEBHOOK: frozenset(Lifecycle),
    Part.LISTENER: frozenset(Lifecycle) - {Lifecycle.KILL},  # in-process: nothing to kill
    Part.APISERVER: frozenset(Lifecycle),
}
"""What each part can be made to do."""


@dataclass(frozen=True)
class PartFault:
    """``action`` on the part ``part``/``name`` (``name`` is empty for the gateway)."""

    part: Part
    name: str
    action: Lifecycle

    @classmethod
    def parse(cls, target: str, action: str) -> PartFault:
        """``("webhook/skr-a", "kill")`` → ``PartFault(WEBHOOK, "skr-a", KILL)``; a
        :class:`FaultError` saying what is allowed otherwise."""
        kind, slash, name = target.partition("/")
        try:
            part = Part(kind)
        except ValueError:
            raise FaultError(
                f"unknown fault target {target!r}; use one of: gateway, webhook/<skr>, "
                "listener/<component>, apiserver/<cluster>"
            ) from None
        if (part is Part.GATEWAY) == bool(slash):
            shape = "gateway" if part is Part.GATEWAY else f"{kind}/<name>"
            raise FaultError(f"fault target {target!r} must be {shape}")
        allowed = CAN[part]
        if action not in allowed:
            names = ", ".join(a for a in Lifecycle if a in allowed)
            raise FaultError(f"unknown action {action!r} for {target!r}; use one of: {names}")
        return cls(part, name, Lifecycle(action))

    @property
    def target(self) -> str:
        return f"{self.part}/{self.name}" if self.name else str(self.part)

    @property
    def stops_or_restarts(self) -> bool:
        return self.action is not Lifecycle.START


@dataclass(frozen=True)
class KcpFault:
    """Envoy's fault filter on every KCP route; ``injection=None`` clears it."""

    injection: FaultInjection | None

    target = "kcp"

    @property
    def action(self) -> str:
        return "clear" if self.injection is None else "inject"


@dataclass(frozen=True)
class RotateLeaves:
    """New runtime certificates for ``skrs`` (empty: every SKR)."""

    skrs: tuple[str, ...] = ()

    target = "certificates"
    action = "rotate-leaf"


@dataclass(frozen=True)
class RotateCa:
    """A new KCP CA, prepended to every trusted bundle; every leaf follows."""

    target = "certificates"
    action = "rotate-ca"


@dataclass(frozen=True)
class DropOldCa:
    """After :class:`RotateCa`: only the newest CA stays trusted."""

    target = "certificates"
    action = "drop-old-ca"


@dataclass(frozen=True)
class BreakLeaves:
    """``skrs`` get a deliberately broken certificate (``certificate`` names a
    :class:`~harness.skr.certs.CertificateOverride`), or ``keep`` theirs unrenewed; until
    the next :class:`RotateLeaves` of those SKRs."""

    skrs: tuple[str, ...]
    certificate: str

    target = "certificates"
    action = "break-leaf"


Fault = PartFault | KcpFault | RotateLeaves | RotateCa | DropOldCa | BreakLeaves


def kcp_injection(
    *,
    delay: float = 0.0,
    delay_percent: float = 100.0,
    abort_percent: float = 0.0,
    abort_status: int = 503,
) -> FaultInjection:
    """Envoy's fault injection on every KCP route: delay (seconds) and/or abort."""
    return FaultInjection(
        abort_percent=abort_percent,
        abort_status=abort_status,
        delay_percent=delay_percent if delay > 0 else 0.0,
        delay_ms=round(delay * 1000),
    )


def describe_injection(injection: FaultInjection | None) -> str:
    """The timeline's words for a KCP fault."""
    if injection is None:
        return "no fault"
    delay = injection.delay_ms / 1000 if injection.delay_percent else 0
    return f"delay {delay:g} s, abort {injection.abort_percent:g}% with {injection.abort_status}"
