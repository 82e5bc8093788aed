"""What cert-manager decides about a Certificate, its Secret and its Issuer (pure: dicts in,
dicts out, an explicit ``now``): why to issue, when to renew, the Secret to apply and the
status to write. Reasons and messages are cert-manager's where KLM or someone reading
``kubectl describe`` sees them.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final, NamedTuple

from cryptography import x509

from harness.platform.cert_manager.signing import (
    Issued,
    Key,
    Signer,
    is_ca,
    key_fits,
    load_key_pair,
    shown,
    wanted,
)
from harness.platform.cert_manager.spec import GROUP, ISSUER, Certificate, Invalid, Issuer

Obj = Mapping[str, Any]

FIELD_MANAGER: Final = "cert-manager-certificates-issuing"
"""The field manager cert-manager's issuing controller applies Secrets with."""
READY: Final = "Ready"
ISSUING: Final = "Issuing"
READY_MESSAGE: Final = "Certificate is up to date and has not expired"
FAO_LABEL: Final = "controller.cert-manager.io/fao"
CERTIFICATE_NAME: Final = "cert-manager.io/certificate-name"
ISSUER_NAME: Final = "cert-manager.io/issuer-name"
ISSUER_KIND: Final = "cert-manager.io/issuer-kind"
ISSUER_GROUP: Final = "cert-manager.io/issuer-group"
COMMON_NAME: Final = "cert-manager.io/common-name"
ALT_NAMES: Final = "cert-manager.io/alt-names"
IP_SANS: Final = "cert-manager.io/ip-sans"
URI_SANS: Final = "cert-manager.io/uri-sans"


class Why(NamedTuple):
    reason: str
    message: str


@dataclass(frozen=True)
class Stored:
    """A Secret as cert-manager's checks read it; ``problem`` says why it serves no key pair
    (``Why.message`` completes "Secret ...")."""

    problem: Why | None = None
    type: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    certificate: x509.Certificate | None = None
    key: Key | None = None


def read_secret(secret: Obj | None) -> Stored:
    if secret is None:
        return Stored(Why("DoesNotExist", "does not exist"))
    meta = secret.get("metadata") or {}
    stored = Stored(type=str(secret.get("type") or ""), annotations=meta.get("annotations") or {})
    data = secret.get("data") or {}
    if not data.get("tls.crt") or not data.get("tls.key"):
        return replace(stored, problem=Why("MissingData", "does not contain a key pair"))
    try:
        certificate, key = load_key_pair(
            base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"])
        )
    except ValueError as exc:  # binascii.Error too
        return replace(
            stored, problem=Why("InvalidKeyPair", f"contains an invalid key pair: {exc}")
        )
    return replace(stored, certificate=certificate, key=key)


def _secret_problem(cert: Certificate, stored: Stored) -> Why | None:
    """The checks cert-manager's trigger and readiness policy chains share."""
    if stored.problem is not None:
        reason, message = stored.problem
        return Why(reason, f"Issuing certificate as Secret {message}")
    ann, name = stored.annotations, cert.issuer_ref.name
    kind, group = ann.get(ISSUER_KIND) or ISSUER, ann.get(ISSUER_GROUP) or GROUP
    if (previous := f"{kind}.{group}/{ann.get(ISSUER_NAME, name)}") != f"{ISSUER}.{GROUP}/{name}":
        said = f'Issuing certificate as Secret was previously issued by "{previous}"'
        return Why("IncorrectIssuer", said)
    assert stored.key is not None and stored.certificate is not None
    fields = [] if key_fits(stored.key, cert.private_key) else ["spec.privateKey"]
    shows = shown(stored.certificate)
    fields += [k for k, v in wanted(cert).items() if shows[k] != v]
    if fields:
        said = "Issuing certificate as Existing issued Secret is not up to date for spec"
        return Why("SecretMismatch", f"{said}: [{' '.join(fields)}]")
    return None


def renewal_time(cert: Certificate, certificate: x509.Certificate) -> dt.datetime:
    """``notAfter - renewBefore``, else two thirds into the lifetime, to the second."""
    not_after = certificate.not_valid_after_utc
    lifetime = not_after - certificate.not_valid_before_utc
    before = cert.renew_before
    return (not_after - (before if before and before < lifetime else lifetime / 3)).replace(
        microsecond=0
    )


def reissue_reason(cert: Certificate, stored: Stored, status: Obj, now: dt.datetime) -> Why | None:
    """Why to issue now: someone set Issuing=True (KLM's manual renewal, ``cmctl renew``),
    the Secret does not serve the spec, or its renewal time has come; None: nothing to do."""
    issuing = condition(status, ISSUING)
    if issuing is not None and issuing.get("status") == "True":
        return Why(str(issuing.get("reason") or ISSUING), str(issuing.get("message") or ""))
    problem = _secret_problem(cert, stored)
    if problem is not None or stored.certificate is None:
        return problem
    renewal = renewal_time(cert, stored.certificate)
    if now < renewal:
        return None
    return Why(
        "Renewing", f"Renewing certificate as renewal was scheduled at {renewal:%F %T} +0000 UTC"
    )


def readiness(cert: Certificate, stored: Stored, now: dt.datetime) -> Why | None:
    """Why the Certificate is not Ready (cert-manager's readiness chain), or None."""
    problem = _secret_problem(cert, stored)
    if problem is None and stored.certificate is not None:
        not_after = stored.certificate.not_valid_after_utc
        if now > not_after:
            return Why("Expired", f"Certificate expired on {not_after:%a, %d %b %Y %T} UTC")
    return problem


def stored_of(cert: Certificate, issued: Issued) -> Stored:
    """The Secret as :func:`secret_body` writes it, without reading it back."""
    return Stored(annotations=_annotations(cert), certificate=issued.certificate, key=issued.key)


def _annotations(cert: Certificate) -> dict[str, str]:
    ref = cert.issuer_ref
    return {
        **cert.secret_template.annotations,
        CERTIFICATE_NAME: cert.name,
        ISSUER_NAME: ref.name,
        ISSUER_KIND: ref.kind,
        ISSUER_GROUP: ref.group,
        COMMON_NAME: cert.common_name,
        ALT_NAMES: ",".join(cert.dns_names),
        IP_SANS: ",".join(str(a) for a in cert.ip_addresses),
        URI_SANS: ",".join(cert.uris),
    }


def secret_body(cert: Certificate, issued: Issued, existing_type: str = "") -> dict[str, Any]:
    """The Secret to server-side apply as cert-manager's field manager, so labels and
    annotations others set stay; an existing Secret keeps its (immutable) type."""
    data = {"tls.crt": issued.tls_crt, "tls.key": issued.tls_key, "ca.crt": issued.ca_crt}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": cert.secret_name,
            "namespace": cert.namespace,
            "labels": {**cert.secret_template.labels, FAO_LABEL: "true"},
            "annotations": _annotations(cert),
        },
        "type": existing_type or "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode("ascii") for k, v in data.items()},
    }


def rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(status: Obj, kind: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def with_condition(
    status: Obj, kind: str, ok: bool, why: Why, generation: int, now: dt.datetime
) -> dict[str, Any]:
    """``status`` with condition ``kind`` set; its lastTransitionTime kept unless it flips."""
    value = "True" if ok else "False"
    old = condition(status, kind)
    since = old.get("lastTransitionTime") if old and old.get("status") == value else None
    new = {
        "type": kind,
        "status": value,
        "reason": why.reason,
        "message": why.message,
        "lastTransitionTime": since or rfc3339(now),
        "observedGeneration": generation,
    }
    conditions = [dict(c) for c in status.get("conditions") or []]
    if old is None:
        return {**status, "conditions": [*conditions, new]}
    return {**status, "conditions": [new if c.get("type") == kind else c for c in conditions]}


def certificate_status(
    status: Obj,
    cert: Certificate,
    stored: Stored,
    now: dt.datetime,
    *,
    issued: bool = False,
    waiting: str = "",
) -> dict[str, Any]:
    """The status cert-manager's controllers leave: Ready from the Secret (with what the
    issuance waits for, when not Ready), its validity and renewal time; after an issuance
    the next revision and no Issuing condition."""
    out = dict(status)
    if issued:
        out["revision"] = int(status.get("revision") or 0) + 1
        out["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != ISSUING]
    why = readiness(cert, stored, now)
    if why is not None and waiting:
        why = Why(why.reason, f"{why.message}; {waiting}")
    out = with_condition(
        out, READY, why is None, why or Why(READY, READY_MESSAGE), cert.generation, now
    )
    for k in ("notBefore", "notAfter", "renewalTime"):
        out.pop(k, None)
    if stored.certificate is not None:
        out["notBefore"] = rfc3339(stored.certificate.not_valid_before_utc)
        out["notAfter"] = rfc3339(stored.certificate.not_valid_after_utc)
        out["renewalTime"] = rfc3339(renewal_time(cert, stored.certificate))
    return out


def status_patch(old: Obj, new: Obj) -> dict[str, Any]:
    """A JSON merge patch turning status ``old`` into ``new`` (removed keys become null)."""
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    return patch | {k: None for k in old if k not in new}


def is_issued(obj: Obj, revision: int) -> bool:
    """At ``revision`` or later and Ready for the Certificate's current generation."""
    status = obj.get("status") or {}
    ready = condition(status, READY) or {}
    generation = int((obj.get("metadata") or {}).get("generation") or 0)
    return (
        int(status.get("revision") or 0) >= revision
        and ready.get("status") == "True"
        and int(ready.get("observedGeneration") or 0) >= generation
    )


def describe(obj: Obj | None) -> str:
    """What a Certificate's status says (for a timeout's message)."""
    if obj is None:
        return "it does not exist"
    status = obj.get("status") or {}
    said = [f"revision {status.get('revision', 'unset')}"]
    for kind in (READY, ISSUING):
        if (c := condition(status, kind)) is not None:
            said.append(f"{kind}={c.get('status')} ({c.get('reason')}: {c.get('message')})")
    return "its status says: " + ", ".join(said)


@dataclass(frozen=True)
class IssuerState:
    """An Issuer's Ready condition, and the CA that signs for it (None: selfSigned)."""

    ready: bool
    why: Why
    signer: Signer | None = None


def issuer_state(name: str, issuer: Issuer | Invalid | None, ca_secret: Obj | None) -> IssuerState:
    if issuer is None:
        return IssuerState(False, Why("NotFound", f'Issuer "{name}" not found'))
    if isinstance(issuer, Invalid):
        return IssuerState(False, Why("InvalidSpec", issuer.message))
    if issuer.self_signed is not None:
        return IssuerState(True, Why("IsReady", ""))
    if issuer.ca is None:
        said = "the harness's cert-manager serves selfSigned and ca issuers only"
        return IssuerState(False, Why("NotSupported", said))
    prefix = f'Error getting keypair for CA issuer: secret "{issuer.ca.secret_name}"'
    stored = read_secret(ca_secret)
    if stored.problem is not None:
        return IssuerState(False, Why("ErrGetKeyPair", f"{prefix} {stored.problem.message}"))
    assert stored.certificate is not None and stored.key is not None
    if not is_ca(stored.certificate):
        return IssuerState(False, Why("ErrInvalidKeyPair", f"{prefix}: certificate is not a CA"))
    signer = Signer(stored.certificate, stored.key)
    return IssuerState(True, Why("KeyPairVerified", "Signing CA verified"), signer)
