"""The JMESPath functions scenarios get on top of the standard ones. Pure.

``x509``, ``x509_bundle``, ``base64_decode``/``base64_encode``, ``now``, ``to_epoch`` and
``seconds_until``/``seconds_since`` (docs/scenarios.md, *Alternatives and functions*) let a
scenario read certificates and times, which JMESPath alone cannot. Input a function cannot
use raises ``FunctionError`` (a ``JMESPathError``, so a ``ValueError``) saying what is
wrong, never echoing the input (it may be a key); the matcher turns it into a mismatch.
The clock is the module's ``clock`` (tests replace it) unless a ``HarnessFunctions`` is
given its own.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import jmespath
from cryptography import x509 as _x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import NameOID
from jmespath.exceptions import JMESPathError
from jmespath.functions import Functions, signature
from jmespath.parser import ParsedResult

Clock = Callable[[], float]

clock: Clock = time.time
"""What ``now()`` and ``seconds_until``/``seconds_since`` read, unless the
``HarnessFunctions`` has its own; tests replace it (``monkeypatch.setattr``)."""

_PEM_MARK: Final = b"-----BEGIN"
_PEM_CERTIFICATE: Final = re.compile(
    rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL
)
_PEM_LABEL: Final = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----")
_SHOWN_CHARS: Final = 60
_ATTRIBUTE_NAMES: Final = {
    NameOID.EMAIL_ADDRESS: "emailAddress",
    NameOID.SERIAL_NUMBER: "serialNumber",
}


class FunctionError(JMESPathError):
    """A custom function got input it cannot use (not a certificate, not base64, ...)."""


class HarnessFunctions(Functions):
    """The standard JMESPath functions plus the custom ones of the module docstring.

    ``clock`` (Unix seconds) defaults to reading the module's ``clock`` at each call.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock = clock

    def _now(self) -> float:
        return self._clock() if self._clock is not None else clock()

    @signature({"types": ["string"]})
    def _func_x509(self, text: str) -> dict[str, Any]:
        return _describe(_certificates(text, "x509")[0], "x509")

    @signature({"types": ["string"]})
    def _func_x509_bundle(self, text: str) -> list[dict[str, Any]]:
        return [_describe(cert, "x509_bundle") for cert in _certificates(text, "x509_bundle")]

    @signature({"types": ["string"]})
    def _func_base64_decode(self, text: str) -> str:
        return _b64decode(text, "base64_decode").decode("utf-8", errors="replace")

    @signature({"types": ["string"]})
    def _func_base64_encode(self, text: str) -> str:
        return base64.b64encode(text.encode("utf-8")).decode("ascii")

    @signature()
    def _func_now(self) -> float:
        return self._now()

    @signature({"types": ["string"]})
    def _func_to_epoch(self, timestamp: str) -> float:
        return _epoch(timestamp, "to_epoch")

    @signature({"types": ["string"]})
    def _func_seconds_until(self, timestamp: str) -> float:
        return _epoch(timestamp, "seconds_until") - self._now()

    @signature({"types": ["string"]})
    def _func_seconds_since(self, timestamp: str) -> float:
        return self._now() - _epoch(timestamp, "seconds_since")


FUNCTION_TABLE: Final[Mapping[str, Any]] = HarnessFunctions.FUNCTION_TABLE
"""Every function an expression may call: name -> {"function", "signature"}."""

CUSTOM_FUNCTIONS: Final = frozenset(FUNCTION_TABLE) - frozenset(Functions.FUNCTION_TABLE)

OPTIONS: Final = jmespath.Options(custom_functions=HarnessFunctions())


def search(expression: str, data: Any) -> Any:
    """``jmespath.search`` with the custom functions."""
    return jmespath.search(expression, data, options=OPTIONS)


@dataclass(frozen=True)
class CompiledExpression:
    """A parsed expression whose ``search`` always has the custom functions."""

    parsed: ParsedResult

    @property
    def expression(self) -> str:
        return self.parsed.expression

    def search(self, data: Any) -> Any:
        return self.parsed.search(data, options=OPTIONS)


def compile_expression(expression: str) -> CompiledExpression:
    """Parse ``expression`` (``JMESPathError`` on bad syntax); calls are checked when run,
    or statically with ``FUNCTION_TABLE``."""
    return CompiledExpression(jmespath.compile(expression))


# --- certificates ----------------------------------------------------------------------------


def _certificates(text: str, function: str) -> list[_x509.Certificate]:
    """The certificates of PEM, base64 of PEM or base64 of DER; at least one."""
    what = f"{function}(): not a certificate ({len(text)} characters)"
    raw = text.strip().encode("utf-8", errors="replace")
    if not raw:
        raise FunctionError(f"{function}(): not a certificate (empty string)")
    if _PEM_MARK not in raw:
        try:
            raw = base64.b64decode(b"".join(raw.split()), validate=True)
        except binascii.Error:
            raise FunctionError(f"{what}: neither PEM nor base64") from None
    if _PEM_MARK in raw:
        return _pem_certificates(raw, what)
    try:
        return [_x509.load_der_x509_certificate(raw)]
    except ValueError as error:
        raise FunctionError(f"{what}: base64 of neither PEM nor DER: {error}") from None


def _pem_certificates(raw: bytes, what: str) -> list[_x509.Certificate]:
    """The CERTIFICATE blocks of PEM, whatever else it holds (a key, parameters)."""
    blocks = _PEM_CERTIFICATE.findall(raw)
    if not blocks:
        labels = sorted({label.decode("ascii") for label in _PEM_LABEL.findall(raw)})
        found = f"only {', '.join(labels)}" if labels else "no complete block"
        raise FunctionError(f"{what}: PEM without a CERTIFICATE block ({found})")
    try:
        return _x509.load_pem_x509_certificates(b"\n".join(blocks))
    except ValueError as error:
        detail = str(error).split(". See https://", 1)[0]
        raise FunctionError(f"{what}: unreadable PEM certificate: {detail}") from None


def _describe(cert: _x509.Certificate, function: str) -> dict[str, Any]:
    try:
        return {
            "subject": _name(cert.subject),
            "issuer": _name(cert.issuer),
            **_alternative_names(cert),
            "serial": format(cert.serial_number, "x"),
            "notBefore": _timestamp(cert.not_valid_before_utc),
            "notAfter": _timestamp(cert.not_valid_after_utc),
            "isCA": _is_ca(cert),
            "sha256": cert.fingerprint(hashes.SHA256()).hex(),
        }
    except (ValueError, TypeError, _x509.DuplicateExtension) as error:
        # cryptography parses names and extensions lazily: a malformed one fails here.
        raise FunctionError(f"{function}(): unreadable certificate: {error}") from None


def _name(name: _x509.Name) -> dict[str, Any]:
    described: dict[str, Any] = {}
    for attribute in name:
        key = _ATTRIBUTE_NAMES.get(attribute.oid) or attribute.rfc4514_attribute_name
        value = attribute.value
        text = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value
        if key not in described:
            described[key] = text
        elif isinstance(described[key], list):
            described[key].append(text)
        else:
            described[key] = [described[key], text]
    described["text"] = name.rfc4514_string()
    return described


def _alternative_names(cert: _x509.Certificate) -> dict[str, list[str]]:
    try:
        sans = cert.extensions.get_extension_for_class(_x509.SubjectAlternativeName).value
    except _x509.ExtensionNotFound:
        return {"dnsNames": [], "ipAddresses": [], "uris": []}
    return {
        "dnsNames": sans.get_values_for_type(_x509.DNSName),
        "ipAddresses": [str(ip) for ip in sans.get_values_for_type(_x509.IPAddress)],
        "uris": sans.get_values_for_type(_x509.UniformResourceIdentifier),
    }


def _timestamp(moment: dt.datetime) -> str:
    """RFC 3339 in UTC with a four-digit year (``strftime`` drops the zeros of year 1)."""
    return moment.replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


def _is_ca(cert: _x509.Certificate) -> bool:
    try:
        return cert.extensions.get_extension_for_class(_x509.BasicConstraints).value.ca
    except _x509.ExtensionNotFound:
        return False


# --- base64 and time -------------------------------------------------------------------------


def _b64decode(text: str, function: str) -> bytes:
    compact = "".join(text.split())
    try:
        return base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError) as error:
        raise FunctionError(f"{function}(): not base64 ({len(text)} characters): {error}") from None


def _epoch(timestamp: str, function: str) -> float:
    try:
        moment = dt.datetime.fromisoformat(timestamp.strip().upper())
    except ValueError:
        shown = timestamp if len(timestamp) <= _SHOWN_CHARS else timestamp[:_SHOWN_CHARS] + "…"
        raise FunctionError(f"{function}(): not an RFC 3339 timestamp: {shown!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    seconds = moment.timestamp()
    return int(seconds) if seconds.is_integer() else seconds
