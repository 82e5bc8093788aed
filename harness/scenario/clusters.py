"""``clusters``: the KCP (always there, named ``kcp``) and the named SKRs."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, model_validator

from harness.scenario.values import DnsLabel, Model

KCP = "kcp"


class Backend(StrEnum):
    """Where the clusters come from."""

    LOCAL = "local"  # etcd + kube-apiserver processes on loopback (the default)
    KUBECONFIG = "kubeconfig"  # existing clusters named by kubeconfig contexts
    KIND = "kind"  # kind clusters


class CertificateKind(StrEnum):
    NONE = "none"
    WRONG_SAN = "wrong-san"
    EXPIRED = "expired"
    NOT_YET_VALID = "not-yet-valid"
    FOREIGN_CA = "foreign-ca"
    EMPTY_CN = "empty-cn"


class Certificate(Model):
    """How the SKR's runtime certificate departs from the correct one (default: it does not)."""

    override: CertificateKind = CertificateKind.NONE
    skr_domain: str | None = Field(
        default=None, description="wrong-san only: the domain the certificate is issued for"
    )

    @model_validator(mode="after")
    def _domain_only_for_wrong_san(self) -> Certificate:
        if self.skr_domain is not None and self.override is not CertificateKind.WRONG_SAN:
            raise ValueError("skrDomain is only used with override: wrong-san")
        return self


class Skr(Model):
    """One SKR cluster. ``runtimeId`` defaults to ``runtime-<name>``, ``skrDomain`` to
    ``<name>.kyma.example.com``. ``kyma: false`` provisions the SKR (its kubeconfig
    Secret ``kcp-system/kyma-<name>`` in the KCP) without creating its Kyma: a step creates
    ``kcp-system/kyma-<name>`` and the Lifecycle Manager takes it from there."""

    name: DnsLabel
    runtime_id: DnsLabel
    skr_domain: str
    certificate: Certificate = Field(default_factory=Certificate)
    delivery_mode: Literal["async", "sync"] = "async"
    kyma: bool = True

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            data = dict(data)
            name = data["name"]
            if "runtimeId" not in data and "runtime_id" not in data:
                data["runtimeId"] = f"runtime-{name}"
            if "skrDomain" not in data and "skr_domain" not in data:
                data["skrDomain"] = f"{name}.kyma.example.com"
        return data

    @property
    def kyma_name(self) -> str:
        """Its Kyma in the KCP: ``kcp-system/kyma-<name>``."""
        return f"kyma-{self.name}"


def counted_skr_names(count: int, prefix: str = "skr") -> list[str]:
    """``skrs: {count: 3}`` → ``skr-1``, ``skr-2``, ``skr-3``."""
    return [f"{prefix}-{i}" for i in range(1, count + 1)]


class Clusters(Model):
    """The KCP is implicit (cluster name ``kcp``); ``skrs`` lists at least one SKR, or
    says how many: ``skrs: {count: 3}`` is ``skr-1``, ``skr-2``, ``skr-3`` (``prefix``
    changes ``skr``), e.g. ``count: ${{ matrix.skrs }}``."""

    skrs: tuple[Skr, ...] = Field(min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _counted(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("skrs"), dict):
            spec = data["skrs"]
            count, prefix = spec.get("count"), spec.get("prefix", "skr")
            unknown = set(spec) - {"count", "prefix"}
            if unknown:
                raise ValueError(f"skrs as a mapping takes count and prefix, not {sorted(unknown)}")
            if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 50:
                raise ValueError("skrs.count must be a whole number from 1 to 50")
            data = {**data, "skrs": [{"name": n} for n in counted_skr_names(count, prefix)]}
        return data

    @property
    def names(self) -> tuple[str, ...]:
        return (KCP, *(s.name for s in self.skrs))

    def skr(self, name: str) -> Skr | None:
        return next((s for s in self.skrs if s.name == name), None)
