"""Certificates as KLM's cert-manager setup issues them, for tests and local clusters.

A self-signed KCP CA (CN ``klm-watcher-selfsigned-ca``); one certificate per runtime with
CN = runtime id and the SKR domain plus the webhook Service names as DNS SANs, usable for
serving (the SKR webhook) and as the mTLS client certificate towards KCP; server
certificates for the gateway, listener and API servers. CA bundles rotate by prepending
the new CA and keeping the old one until it expires.

Every function that reads the time takes ``now``; nothing reads a clock behind the
caller's back except the default of ``now``. ``write_atomic`` is the only I/O.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from watcher.errors import CertificateError

CA_COMMON_NAME = "klm-watcher-selfsigned-ca"
WEBHOOK_SERVICE_SANS = ("skr-webhook.kyma-system.svc.cluster.local", "skr-webhook.kyma-system.svc")
RUNTIME_VALIDITY = dt.timedelta(days=60)
CA_VALIDITY = dt.timedelta(days=365)

KeyType = Literal["rsa", "ec"]
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _now(now: dt.datetime | None) -> dt.datetime:
    if now is None:
        return dt.datetime.now(dt.UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now


def _new_key(key_type: KeyType, rsa_bits: int) -> PrivateKey:
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
    return ec.generate_private_key(ec.SECP256R1())


def name_cn(name: x509.Name) -> str:
    """The (first) CN of a subject or issuer name; ``""`` when it has none."""
    names = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    value = names[0].value if names else ""
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True)
class Issued:
    """A certificate and its private key."""

    certificate: x509.Certificate
    key: PrivateKey

    @property
    def cert_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        """PKCS#8, unencrypted (what cert-manager writes to ``tls.key``)."""
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @property
    def common_name(self) -> str:
        return name_cn(self.certificate.subject)


@dataclass(frozen=True)
class CertificateAuthority(Issued):
    """A CA that can issue; ``cert_pem`` is what goes into CA bundles."""


def _validity(
    now: dt.datetime | None, not_before: dt.datetime | None, validity: dt.timedelta
) -> tuple[dt.datetime, dt.datetime]:
    start = not_before if not_before is not None else _now(now)
    if start.tzinfo is None:
        raise ValueError("not_before must be timezone-aware")
    if validity <= dt.timedelta(0):
        raise ValueError(f"validity must be positive, got {validity}")
    return start, start + validity


def create_ca(
    common_name: str = CA_COMMON_NAME,
    *,
    validity: dt.timedelta = CA_VALIDITY,
    not_before: dt.datetime | None = None,
    now: dt.datetime | None = None,
    key_type: KeyType = "rsa",
    rsa_bits: int = 2048,
) -> CertificateAuthority:
    """A self-signed root CA (``not_before`` defaults to ``now``)."""
    key = _new_key(key_type, rsa_bits)
    start, end = _validity(now, not_before, validity)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(cert, key)


def is_ip(value: str) -> bool:
    """Whether ``value`` is an IP address (an IP SAN) rather than a DNS name."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _ip(value: str | IpAddress) -> IpAddress:
    return ipaddress.ip_address(value) if isinstance(value, str) else value


def issue(
    ca: CertificateAuthority,
    common_name: str,
    *,
    organizations: Iterable[str] = (),
    dns_names: Iterable[str] = (),
    ip_addresses: Iterable[str | IpAddress] = (),
    uris: Iterable[str] = (),
    server_auth: bool = True,
    client_auth: bool = True,
    validity: dt.timedelta = RUNTIME_VALIDITY,
    not_before: dt.datetime | None = None,
    now: dt.datetime | None = None,
    key_type: KeyType = "rsa",
    rsa_bits: int = 2048,
) -> Issued:
    """A leaf certificate signed by ``ca`` (any CA: pass a foreign one to get an untrusted cert).

    Validity is ``[not_before, not_before + validity]``; ``not_before`` defaults to ``now``,
    so expired and not-yet-valid certificates are one argument away. ``organizations``
    become O= attributes (Kubernetes reads them as groups, e.g. ``system:masters``).
    ``uris`` become URI SANs (workload identities such as ``spiffe://...``). An empty
    ``common_name`` leaves the CN out (X.509 has no empty CN; refusal tests need one).
    """
    if not server_auth and not client_auth:
        raise ValueError("a certificate needs serverAuth, clientAuth or both")
    key = _new_key(key_type, rsa_bits)
    start, end = _validity(now, not_before, validity)
    dns = list(dict.fromkeys(dns_names))
    ips = list(dict.fromkeys(_ip(a) for a in ip_addresses))
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server_auth else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client_auth else []
    )
    ca_ski = ca.certificate.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
                + ([x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name else [])
            )
        )
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=key_type == "rsa",
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(a) for a in ips]
    sans += [x509.UniformResourceIdentifier(u) for u in dict.fromkeys(uris)]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)


def issue_runtime_certificate(
    ca: CertificateAuthority,
    runtime_id: str,
    skr_domain: str,
    *,
    extra_dns_names: Iterable[str] = (),
    extra_ip_addresses: Iterable[str | IpAddress] = (),
    validity: dt.timedelta = RUNTIME_VALIDITY,
    not_before: dt.datetime | None = None,
    now: dt.datetime | None = None,
    key_type: KeyType = "rsa",
    rsa_bits: int = 2048,
) -> Issued:
    """The per-Kyma certificate ``<kyma>-webhook-tls``: CN = runtime id, DNS SANs = the SKR
    domain and the webhook Service names (plus extras, e.g. ``localhost``/``127.0.0.1`` for
    local serving); serverAuth + clientAuth, 60 days by default."""
    if not runtime_id:
        raise ValueError("runtime_id must not be empty (it becomes the Subject CN)")
    if not skr_domain:
        raise ValueError("skr_domain must not be empty (the Kyma's skr-domain annotation)")
    return issue(
        ca,
        runtime_id,
        dns_names=[skr_domain, *WEBHOOK_SERVICE_SANS, *extra_dns_names],
        ip_addresses=extra_ip_addresses,
        validity=validity,
        not_before=not_before,
        now=now,
        key_type=key_type,
        rsa_bits=rsa_bits,
    )


def issue_server_certificate(
    ca: CertificateAuthority,
    common_name: str,
    *,
    dns_names: Iterable[str] = ("localhost",),
    ip_addresses: Iterable[str | IpAddress] = ("127.0.0.1",),
    uris: Iterable[str] = (),
    client_auth: bool = False,
    validity: dt.timedelta = RUNTIME_VALIDITY,
    not_before: dt.datetime | None = None,
    now: dt.datetime | None = None,
    key_type: KeyType = "rsa",
    rsa_bits: int = 2048,
) -> Issued:
    """A serving certificate (gateway, listener, API server); ``client_auth`` adds clientAuth."""
    return issue(
        ca,
        common_name,
        dns_names=dns_names,
        ip_addresses=ip_addresses,
        uris=uris,
        server_auth=True,
        client_auth=client_auth,
        validity=validity,
        not_before=not_before,
        now=now,
        key_type=key_type,
        rsa_bits=rsa_bits,
    )


# --------------------------------------------------------------------------------------
# Bundles


def load_certificates(pem: bytes, what: str = "PEM bundle") -> list[x509.Certificate]:
    """Every certificate in ``pem``; ``CertificateError`` if there is none or one is broken."""
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise CertificateError(f"{what} holds no readable PEM certificate: {exc}") from None
    return certs


def pem_bundle(certs: Iterable[x509.Certificate]) -> bytes:
    """Certificates as one PEM bundle, in the order given."""
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def drop_expired(bundle_pem: bytes, *, now: dt.datetime | None = None) -> bytes:
    """The bundle without certificates that expired before ``now`` (order kept)."""
    moment = _now(now)
    if not bundle_pem.strip():
        return b""
    kept = [c for c in load_certificates(bundle_pem) if c.not_valid_after_utc >= moment]
    return pem_bundle(kept)


def rotate_ca_bundle(
    bundle_pem: bytes, new_ca_pem: bytes, *, now: dt.datetime | None = None
) -> bytes:
    """Prepend the new CA; keep old CAs until they expire; drop duplicates.

    Certificates issued by an old CA stay trusted until that CA expires, which gives
    cert-manager's zero-downtime rotation.
    """
    new = load_certificates(new_ca_pem, "new CA")
    old = load_certificates(drop_expired(bundle_pem, now=now)) if bundle_pem.strip() else []
    seen: set[bytes] = set()
    out: list[x509.Certificate] = []
    for cert in [*new, *old]:
        fingerprint = cert.fingerprint(hashes.SHA256())
        if fingerprint not in seen:
            seen.add(fingerprint)
            out.append(cert)
    return pem_bundle(out)


def load_issued(cert_pem: bytes, key_pem: bytes, what: str = "certificate") -> Issued:
    """A certificate and its key back from PEM (the first certificate of ``cert_pem``);
    ``CertificateError`` when either does not parse or they do not belong together."""
    certificate = load_certificates(cert_pem, what)[0]
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"{what}: the key does not parse: {exc}") from None
    if not isinstance(key, (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey)):
        raise CertificateError(f"{what}: unsupported key type {type(key).__name__}")
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(serialization.Encoding.DER, public) != (
        certificate.public_key().public_bytes(serialization.Encoding.DER, public)
    ):
        raise CertificateError(f"{what}: the key does not belong to the certificate")
    return Issued(certificate, key)


def secret_data(issued: Issued, ca_bundle_pem: bytes) -> dict[str, bytes]:
    """The ``kubernetes.io/tls`` Secret layout cert-manager writes, as PEM bytes."""
    return {"tls.crt": issued.cert_pem, "tls.key": issued.key_pem, "ca.crt": ca_bundle_pem}


# --------------------------------------------------------------------------------------
# Files


def write_atomic(path: str | Path, data: bytes, *, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` so readers see the old or the new file, never a partial one.

    A temp file in the same directory is fsynced, then renamed over ``path`` (file
    watchers such as Envoy's react to the rename).
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_secret_files(
    directory: str | Path, data: Mapping[str, bytes], *, mode: int = 0o600
) -> dict[str, Path]:
    """Write ``tls.crt``, ``tls.key``, ``ca.crt`` (or whatever ``data`` holds) atomically each.

    The key is written before the certificate so a reader that reloads on the certificate's
    change finds the matching key already in place.
    """
    order = sorted(data, key=lambda k: (k != "tls.key", k != "tls.crt", k))
    paths: dict[str, Path] = {}
    for name in order:
        paths[name] = Path(directory) / name
        write_atomic(paths[name], data[name], mode=mode)
    return paths
