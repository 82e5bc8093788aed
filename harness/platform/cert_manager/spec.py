"""``cert-manager.io/v1`` Certificates and Issuers, read as KLM writes them (pure).

Defaults are cert-manager's. No validating webhook runs on the KCP, so what cert-manager's
would refuse comes back as an :class:`Invalid` value, which the controller reports on the
Certificate's Ready condition. A Certificate for a ClusterIssuer or an external issuer
comes back as :class:`Foreign`: this cert-manager serves namespaced Issuers only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from typing import Annotated, Any, Final, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from harness.durations import parse_duration

GROUP: Final = "cert-manager.io"
ISSUER: Final = "Issuer"
DEFAULT_DURATION: Final = dt.timedelta(days=90)

Duration = Annotated[dt.timedelta, BeforeValidator(parse_duration)]
Usage = Literal[
    "signing",
    "digital signature",
    "key encipherment",
    "cert sign",
    "crl sign",
    "server auth",
    "client auth",
]
Country = Annotated[str, StringConstraints(min_length=2, max_length=2)]
"""X.509 carries a country only as a two-letter code."""


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True, alias_generator=to_camel, populate_by_name=True, extra="ignore"
    )


class PrivateKey(_Model):
    algorithm: Literal["RSA", "ECDSA"] = "RSA"
    size: int = 0
    encoding: Literal["PKCS1", "PKCS8"] = "PKCS1"
    rotation_policy: Literal["Always", "Never"] = "Always"

    @property
    def bits(self) -> int:
        """RSA bits or the ECDSA curve, cert-manager's default (2048 / 256) when unset."""
        return self.size or (256 if self.algorithm == "ECDSA" else 2048)

    @model_validator(mode="after")
    def _check_size(self) -> Self:
        if self.algorithm == "RSA" and not 2048 <= self.bits <= 8192:
            raise ValueError(f"size {self.bits}: must be between 2048 & 8192 for rsa keyAlgorithm")
        if self.algorithm == "ECDSA" and self.bits not in (256, 384):
            raise ValueError(f"size {self.bits}: the harness's cert-manager serves ECDSA 256, 384")
        return self


class Subject(_Model):
    """The subject fields KLM sets (the others are not served)."""

    organizations: tuple[str, ...] = ()
    organizational_units: tuple[str, ...] = ()
    localities: tuple[str, ...] = ()
    provinces: tuple[str, ...] = ()
    countries: tuple[Country, ...] = ()


class IssuerRef(_Model):
    name: str = Field(min_length=1)
    kind: str = ""
    group: str = ""
    """As written: the Secret's issuer annotations repeat them, empty ones included."""


class SecretTemplate(_Model):
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class Certificate(_Model):
    namespace: str
    name: str
    generation: int = 0
    secret_name: str = Field(min_length=1)
    issuer_ref: IssuerRef
    common_name: str = Field("", max_length=64)
    subject: Subject = Subject()
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[IPv4Address | IPv6Address, ...] = ()
    uris: tuple[str, ...] = ()
    duration: Duration = DEFAULT_DURATION
    renew_before: Duration | None = None
    is_ca: bool = Field(False, alias="isCA")
    usages: tuple[Usage, ...] = ("digital signature", "key encipherment")
    private_key: PrivateKey = PrivateKey()
    secret_template: SecretTemplate = SecretTemplate()
    ignored: tuple[str, ...] = ()
    """Spec fields set that this cert-manager does not serve (logged once, else ignored)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @model_validator(mode="after")
    def _as_the_webhook(self) -> Self:
        if not (self.common_name or self.dns_names or self.ip_addresses or self.uris):
            raise ValueError("at least one of commonName, dnsNames, ipAddresses or uris")
        if self.duration <= dt.timedelta(0):
            raise ValueError("duration must be positive")
        if self.renew_before is not None and not (
            dt.timedelta(0) < self.renew_before < self.duration
        ):
            raise ValueError("renewBefore must be positive and less than duration")
        return self


class CA(_Model):
    secret_name: str = Field(min_length=1)


class Issuer(_Model):
    namespace: str
    name: str
    generation: int = 0
    self_signed: dict[str, Any] | None = None
    ca: CA | None = None


@dataclass(frozen=True)
class Invalid:
    """What cert-manager's validating webhook would refuse, and why."""

    message: str


@dataclass(frozen=True)
class Foreign:
    """A Certificate whose issuer this cert-manager does not serve: left alone."""

    issuer: str


_CERTIFICATE_FIELDS: Final = frozenset(f.alias or n for n, f in Certificate.model_fields.items())
M = TypeVar("M", bound=_Model)


def parse_certificate(obj: Mapping[str, Any]) -> Certificate | Invalid | Foreign:
    spec = _present(obj.get("spec"))
    ref = spec.get("issuerRef")
    if isinstance(ref, Mapping):
        kind, group = ref.get("kind") or ISSUER, ref.get("group") or GROUP
        if (kind, group) != (ISSUER, GROUP):
            return Foreign(f"{kind}.{group}/{ref.get('name')}")
    ignored = tuple(sorted(spec.keys() - _CERTIFICATE_FIELDS))
    return _validated(Certificate, obj, {**spec, "ignored": ignored})


def parse_issuer(obj: Mapping[str, Any]) -> Issuer | Invalid:
    return _validated(Issuer, obj, _present(obj.get("spec")))


def _present(spec: object) -> dict[str, Any]:
    """The spec without null, empty-string and empty-list fields: cert-manager treats them
    as unset (``usages: []`` gets the default usages)."""
    if not isinstance(spec, Mapping):
        return {}
    return {k: v for k, v in spec.items() if v is not None and v != "" and v != []}


def _validated(model: type[M], obj: Mapping[str, Any], spec: dict[str, Any]) -> M | Invalid:
    meta = obj.get("metadata") or {}
    identity = {k: meta.get(k) for k in ("namespace", "name")}
    try:
        return model.model_validate({**spec, **identity, "generation": meta.get("generation", 0)})
    except ValidationError as exc:
        return Invalid("; ".join(_said(e["loc"], e["msg"]) for e in exc.errors()))


def _said(loc: tuple[int | str, ...], message: str) -> str:
    message = message.removeprefix("Value error, ")
    return f"spec.{'.'.join(map(str, loc))}: {message}" if loc else f"spec: {message}"


def dig(obj: object, *path: str) -> str:
    """A field of a schemaless object as a string ("" where it is missing)."""
    for step in path:
        obj = obj.get(step) if isinstance(obj, Mapping) else None
    return str(obj) if obj is not None else ""


def generation(obj: Mapping[str, Any]) -> int:
    return int(dig(obj, "metadata", "generation") or 0)


def certificate_refs(obj: Mapping[str, Any]) -> tuple[str, str]:
    """A Certificate's Secret and Issuer as ``namespace/name``, whatever its spec holds."""
    at = dig(obj, "metadata", "namespace") + "/"
    return at + dig(obj, "spec", "secretName"), at + dig(obj, "spec", "issuerRef", "name")


def ca_secret_key(obj: Mapping[str, Any]) -> str:
    """A CA Issuer's Secret as ``namespace/name``."""
    return dig(obj, "metadata", "namespace") + "/" + dig(obj, "spec", "ca", "secretName")
