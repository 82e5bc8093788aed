"""Keys and X.509 certificates as cert-manager's selfSigned and CA issuers make them (pure,
CPU-bound: an RSA-4096 key takes up to a second, so the controller runs :func:`issue` in
a thread).

The subject is encoded as Go's ``pkix.Name`` does (C, ST, L, O, OU, then CN, one RDN per
attribute type); the signature hash follows the signing key as cert-manager's
``SignatureAlgorithm`` picks it; ``ca.crt`` is the signing CA's certificate, or the
certificate itself when self-signed.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from harness.platform.cert_manager.spec import Certificate, PrivateKey

Key = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

KEY_USAGES: Final = {
    "signing": "digital_signature",
    "digital signature": "digital_signature",
    "key encipherment": "key_encipherment",
    "cert sign": "key_cert_sign",
    "crl sign": "crl_sign",
}
EXTENDED_KEY_USAGES: Final = {
    "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
    "client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
}
_FLAGS: Final = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
    "encipher_only",
    "decipher_only",
)
_SUBJECT: Final = (
    ("countries", NameOID.COUNTRY_NAME),
    ("provinces", NameOID.STATE_OR_PROVINCE_NAME),
    ("localities", NameOID.LOCALITY_NAME),
    ("organizations", NameOID.ORGANIZATION_NAME),
    ("organizational_units", NameOID.ORGANIZATIONAL_UNIT_NAME),
)


@dataclass(frozen=True)
class Signer:
    """A CA issuer's key pair."""

    certificate: x509.Certificate
    key: Key


@dataclass(frozen=True)
class Issued:
    certificate: x509.Certificate
    key: Key
    tls_crt: bytes
    tls_key: bytes
    ca_crt: bytes


def generate_key(spec: PrivateKey) -> Key:
    if spec.algorithm == "ECDSA":
        return ec.generate_private_key(ec.SECP384R1() if spec.bits == 384 else ec.SECP256R1())
    return rsa.generate_private_key(public_exponent=65537, key_size=spec.bits)


def key_fits(key: Key, spec: PrivateKey) -> bool:
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return spec.algorithm == "ECDSA" and key.curve.key_size == spec.bits
    return spec.algorithm == "RSA" and key.key_size == spec.bits


def encode_key(key: Key, encoding: str) -> bytes:
    """``tls.key``: PKCS1 (``RSA PRIVATE KEY`` / ``EC PRIVATE KEY``) or PKCS#8."""
    fmt = serialization.PrivateFormat.TraditionalOpenSSL
    if encoding == "PKCS8":
        fmt = serialization.PrivateFormat.PKCS8
    return key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption())


def _public(item: Key | x509.Certificate) -> bytes:
    return item.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def load_key_pair(tls_crt: bytes, tls_key: bytes) -> tuple[x509.Certificate, Key]:
    """The first certificate of ``tls_crt`` and its key; ``ValueError`` saying what is wrong."""
    certificate = x509.load_pem_x509_certificates(tls_crt)[0]
    try:
        key = serialization.load_pem_private_key(tls_key, password=None)
    except TypeError as exc:  # an encrypted key
        raise ValueError(str(exc)) from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise ValueError(f"unsupported private key type {type(key).__name__}")
    if _public(key) != _public(certificate):
        raise ValueError("the private key does not match the certificate")
    return certificate, key


def is_ca(certificate: x509.Certificate) -> bool:
    try:
        return certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def _hash(key: Key) -> hashes.SHA256 | hashes.SHA384 | hashes.SHA512:
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return hashes.SHA384() if key.curve.key_size >= 384 else hashes.SHA256()
    if key.key_size >= 4096:
        return hashes.SHA512()
    return hashes.SHA384() if key.key_size >= 3072 else hashes.SHA256()


def subject_name(cert: Certificate) -> x509.Name:
    """One RDN per attribute type, each value once (an RDN cannot hold one twice)."""
    rdns = [
        x509.RelativeDistinguishedName([x509.NameAttribute(oid, v) for v in dict.fromkeys(values)])
        for attr, oid in _SUBJECT
        if (values := getattr(cert.subject, attr))
    ]
    if cert.common_name:
        cn = x509.NameAttribute(NameOID.COMMON_NAME, cert.common_name)
        rdns.append(x509.RelativeDistinguishedName([cn]))
    return x509.Name(rdns)


def build(cert: Certificate, key: Key, signer: Signer | None, now: dt.datetime) -> x509.Certificate:
    """The certificate, signed by ``signer``'s key or (selfSigned) by its own."""
    subject = subject_name(cert)
    flags = {KEY_USAGES[u] for u in cert.usages if u in KEY_USAGES}
    if cert.is_ca:
        flags.add("key_cert_sign")
    ekus = [EXTENDED_KEY_USAGES[u] for u in cert.usages if u in EXTENDED_KEY_USAGES]
    start = now.replace(microsecond=0)  # whole seconds: the lifetime is the duration's
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(signer.certificate.subject if signer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after((start + cert.duration).replace(microsecond=0))
        .add_extension(x509.BasicConstraints(ca=cert.is_ca, path_length=None), critical=True)
    )
    if flags:
        usage = x509.KeyUsage(**{f: f in flags for f in _FLAGS})
        builder = builder.add_extension(usage, critical=True)
    if ekus:
        builder = builder.add_extension(x509.ExtendedKeyUsage(ekus), critical=False)
    if cert.is_ca:
        ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
        builder = builder.add_extension(ski, critical=False)
    if signer is not None:  # Go takes the authority key id from the parent's SKI, if any
        try:
            parent = signer.certificate.extensions.get_extension_for_class(
                x509.SubjectKeyIdentifier
            )
            aki = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(parent.value)
            builder = builder.add_extension(aki, critical=False)
        except x509.ExtensionNotFound:
            pass
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in cert.dns_names]
    sans += [x509.IPAddress(a) for a in cert.ip_addresses]
    sans += [x509.UniformResourceIdentifier(u) for u in cert.uris]
    if sans:  # critical when the subject is empty (RFC 5280 4.2.1.6), as Go marks it
        san = x509.SubjectAlternativeName(sans)
        builder = builder.add_extension(san, critical=len(subject) == 0)
    signing_key = signer.key if signer else key
    return builder.sign(signing_key, _hash(signing_key))


def issue(
    cert: Certificate, signer: Signer | None, now: dt.datetime, key: Key | None = None
) -> Issued:
    """A new key (or ``key``, kept for rotationPolicy Never) and its certificate."""
    key = key or generate_key(cert.private_key)
    certificate = build(cert, key, signer, now)
    ca = signer.certificate if signer else certificate
    return Issued(
        certificate,
        key,
        certificate.public_bytes(serialization.Encoding.PEM),
        encode_key(key, cert.private_key.encoding),
        ca.public_bytes(serialization.Encoding.PEM),
    )


def wanted(cert: Certificate) -> dict[str, Any]:
    """What a certificate issued for ``cert`` must show, by the spec field that asks for it
    (the comparison cert-manager makes against its last CertificateRequest)."""
    return {
        "spec.commonName": cert.common_name,
        "spec.subject": _attributes(subject_name(cert)),
        "spec.dnsNames": sorted(cert.dns_names),
        "spec.ipAddresses": sorted(str(a) for a in cert.ip_addresses),
        "spec.uris": sorted(cert.uris),
        "spec.isCA": cert.is_ca,
        "spec.duration": cert.duration.total_seconds() // 1,
    }


def _attributes(name: x509.Name) -> list[tuple[str, str]]:
    """A name as a sorted list: DER sorts the values of a multi-valued RDN (a SET)."""
    return sorted((a.oid.dotted_string, str(a.value)) for a in name)


def shown(certificate: x509.Certificate) -> dict[str, Any]:
    """What ``certificate`` shows, keyed as :func:`wanted`."""
    cn = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    try:
        sans = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        sans = x509.SubjectAlternativeName([])
    lifetime = certificate.not_valid_after_utc - certificate.not_valid_before_utc
    return {
        "spec.commonName": str(cn[0].value) if cn else "",
        "spec.subject": _attributes(certificate.subject),
        "spec.dnsNames": sorted(sans.get_values_for_type(x509.DNSName)),
        "spec.ipAddresses": sorted(str(a) for a in sans.get_values_for_type(x509.IPAddress)),
        "spec.uris": sorted(sans.get_values_for_type(x509.UniformResourceIdentifier)),
        "spec.isCA": is_ca(certificate),
        "spec.duration": lifetime.total_seconds() // 1,
    }
