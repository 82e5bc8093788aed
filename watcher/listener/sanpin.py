"""SAN pinning: an event counts only if its certificate carries the Kyma's SKR domain.

The gateway proves the certificate was issued by the KCP CA; pinning adds that the
certificate belongs to the runtime it claims: the KCP Kyma for the event must carry the
annotation ``skr-domain`` and that value must be one of the certificate's DNS, URI or IP
SANs. Upstream dropped failing events silently with HTTP 200; here each failure has its
own category (a Prometheus label) and a reason the SKR sees in the 403.

The lookup is deliberately tiny so a KCP client can implement it in a few lines::

    async def lookup(runtime_id: str, owner: ObjectKey | None) -> Mapping[str, str] | None

It returns the annotations of the Kyma the event belongs to, or ``None`` when there is no
such Kyma. ``owner`` is the event's owner when it carries one (the legacy owner contract
of upstream's webhook before 2.1) and ``None`` otherwise, as upstream sends today (then
the Kyma is the one labelled ``kyma-project.io/runtime-id=<runtime_id>``). Lookup errors
propagate, so an unreachable API server yields 500 and a retry, never a silent pass.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Mapping

from watcher.domain import SKR_DOMAIN_ANNOTATION
from watcher.listener.certs import SubjectAltNames, subject_alt_names
from watcher.listener.errors import ClientCertificateError, VerificationFailed
from watcher.listener.verify import VerifyHook, VerifyRequest
from watcher.model import ObjectKey

MAX_SANS = 100

CATEGORY_TOO_MANY_SANS = "too-many-sans"
CATEGORY_UNKNOWN_KYMA = "unknown-kyma"
CATEGORY_MISSING_DOMAIN = "missing-skr-domain"
CATEGORY_SAN_MISMATCH = "san-mismatch"
CATEGORY_INVALID_CERTIFICATE = "invalid-certificate"

KymaLookup = Callable[[str, ObjectKey | None], Awaitable[Mapping[str, str] | None]]


def domain_matches(domain: str, sans: SubjectAltNames) -> bool:
    """Whether ``domain`` equals a SAN: DNS names case-insensitively (DNS is), URIs
    exactly, IP addresses by value (``::1`` equals ``0:0::1``)."""
    folded = domain.rstrip(".").casefold()
    if any(folded == dns.rstrip(".").casefold() for dns in sans.dns):
        return True
    if domain in sans.uris:
        return True
    try:
        address = ipaddress.ip_address(domain)
    except ValueError:
        return False
    for ip in sans.ips:
        try:
            if ipaddress.ip_address(ip) == address:
                return True
        except ValueError:  # a network from a malformed SAN; cannot equal an address
            continue
    return False


def san_pinning(
    lookup: KymaLookup,
    *,
    annotation: str = SKR_DOMAIN_ANNOTATION,
    max_sans: int = MAX_SANS,
) -> VerifyHook:
    """A verify hook that pins the certificate's SANs to the Kyma's SKR domain."""

    async def pin_san(request: VerifyRequest) -> None:
        try:
            sans = subject_alt_names(request.certificate)
        except ClientCertificateError as exc:
            raise VerificationFailed(str(exc), category=CATEGORY_INVALID_CERTIFICATE) from None
        if len(sans) > max_sans:
            raise VerificationFailed(
                f"client certificate has {len(sans)} SANs, at most {max_sans} are allowed",
                category=CATEGORY_TOO_MANY_SANS,
            )
        owner = request.event.owner
        annotations = await lookup(request.runtime_id, owner)
        kyma = f"owner {owner}" if owner is not None else f"runtime id {request.runtime_id!r}"
        if annotations is None:
            raise VerificationFailed(
                f"no Kyma found in KCP for {kyma}", category=CATEGORY_UNKNOWN_KYMA
            )
        domain = annotations.get(annotation, "")
        if not domain:
            raise VerificationFailed(
                f"the KCP Kyma for {kyma} has no {annotation!r} annotation",
                category=CATEGORY_MISSING_DOMAIN,
            )
        if not domain_matches(domain, sans):
            raise VerificationFailed(
                f"client certificate SANs do not include the Kyma's {annotation} "
                f"{domain!r} (certificate has {len(sans)} DNS/URI/IP SANs)",
                category=CATEGORY_SAN_MISMATCH,
            )

    return pin_san
