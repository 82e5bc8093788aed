"""The ``fault`` operation's YAML forms: stop/start/kill/restart a part, Envoy's fault
filter on the KCP routes, a certificate rotation or a broken certificate; each builds the
typed :data:`~harness.faults.Fault` the environment carries out (``.fault``), so a bad
target is a located error when the file loads."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Discriminator, Field, Tag, model_validator

from harness import faults
from harness.faults import BreakLeaves, DropOldCa, Fault, PartFault, RotateCa, RotateLeaves
from harness.scenario.clusters import CertificateKind
from harness.scenario.values import DnsLabel, Duration, Model

FAULT_TARGET_PATTERN = r"^(gateway|(listener|webhook|apiserver)/[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"


class ProcessFault(Model):
    """Stop, start, kill (SIGKILL) or restart a process: ``gateway``,
    ``listener/<component>``, ``webhook/<skr>`` or ``apiserver/<cluster>``."""

    action: Literal["stop", "start", "kill", "restart"]
    target: str = Field(pattern=FAULT_TARGET_PATTERN)

    @model_validator(mode="after")
    def _fits_target(self) -> ProcessFault:
        self.fault  # noqa: B018 - raises FaultError (a ValueError) for e.g. "kill listener/x"
        return self

    @property
    def fault(self) -> PartFault:
        """The typed fault the environment carries out."""
        return PartFault.parse(self.target, self.action)


class KcpFaultSpec(Model):
    """Envoy's fault-injection filter on every KCP route: ``delay`` each request,
    abort ``abortPercent`` % of them with ``abortStatus``."""

    delay: Duration | None = None
    abort_percent: float = Field(default=0.0, ge=0, le=100)
    abort_status: int = Field(default=503, ge=200, le=599)


class KcpFault(Model):
    """``kcp: {...}`` sets the KCP fault; ``kcp: null`` clears it."""

    kcp: KcpFaultSpec | None

    @property
    def fault(self) -> faults.KcpFault:
        if self.kcp is None:
            return faults.KcpFault(None)
        spec = self.kcp
        return faults.KcpFault(
            faults.kcp_injection(
                delay=spec.delay or 0.0,
                abort_percent=spec.abort_percent,
                abort_status=spec.abort_status,
            )
        )


class RotateFault(Model):
    """Rotate the SKRs' leaf certificates (``clusters`` empty = every SKR) or the KCP CA
    (new CA prepended to the trusted bundles, every leaf re-issued), or drop the old CA
    from every bundle after a CA rotation (``drop-old-ca``)."""

    rotate: Literal["leaf", "ca", "drop-old-ca"]
    clusters: tuple[DnsLabel, ...] = ()

    @model_validator(mode="after")
    def _clusters_only_for_leaf(self) -> RotateFault:
        if self.clusters and self.rotate != "leaf":
            raise ValueError(f"rotate: {self.rotate} covers every SKR; clusters is for leaf only")
        return self

    @property
    def fault(self) -> Fault:
        """The typed fault the environment carries out."""
        if self.rotate == "leaf":
            return RotateLeaves(tuple(self.clusters))
        return RotateCa() if self.rotate == "ca" else DropOldCa()


class BreakFault(Model):
    """Issue the chosen SKRs' runtime certificates broken on purpose (``certificate``:
    ``expired``, ``not-yet-valid``, ``foreign-ca``, ``wrong-san``, ``empty-cn``), or
    ``keep`` the current ones (KLM stops renewing them, as when it cannot reach the SKR:
    a CA rotation then leaves them behind); either lasts until a ``rotate: leaf`` of those
    SKRs puts a correct certificate back."""

    certificate: CertificateKind | Literal["keep"]
    clusters: tuple[DnsLabel, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _broken(self) -> BreakFault:
        if self.certificate == CertificateKind.NONE:
            raise ValueError("certificate: none breaks nothing; use rotate: leaf to repair")
        return self

    @property
    def fault(self) -> BreakLeaves:
        return BreakLeaves(tuple(self.clusters), str(self.certificate))


def _fault_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        for key, tag in (("kcp", "kcp"), ("rotate", "rotate"), ("certificate", "break")):
            if key in value:
                return tag
        if "action" in value or "target" in value:
            return "process"
        return None
    tags = {cls: tag.tag for cls, tag in map(get_args, get_args(get_args(AnyFault)[0]))}
    return tags.get(type(value))


AnyFault = Annotated[
    Annotated[ProcessFault, Tag("process")]
    | Annotated[KcpFault, Tag("kcp")]
    | Annotated[RotateFault, Tag("rotate")]
    | Annotated[BreakFault, Tag("break")],
    Discriminator(_fault_tag),
]
