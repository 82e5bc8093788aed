"""``X-Forwarded-Client-Cert`` (XFCC): parse what the KCP gateway sets, and produce it.

Behind the gateway the listener never sees the TLS handshake; the gateway (Istio/Envoy with
``forwardClientCertDetails: SANITIZE_SET``) replaces any client-sent XFCC with one element
describing the verified client certificate. Envoy quotes ``Cert`` and ``Subject`` and
the subject contains commas, so the header must be split quote-aware, not on ``;``.

Pure: no I/O, no aiohttp or asyncio, so the parser can be property-tested on its own.

Quoting rules, following Envoy's documentation and its actual output: a value may be
double-quoted; inside quotes ``\\"`` stands for ``"``; any other backslash pair is kept
verbatim, because Envoy embeds RFC 4514 subjects (``CN=a\\,b``) without re-escaping them.
"""

from __future__ import annotations

import functools
import hashlib
import re
import urllib.parse

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from watcher.listener.certs import CACHE_SIZE, subject_alt_names
from watcher.listener.errors import XfccError

XFCC_HEADER = "X-Forwarded-Client-Cert"

Element = list[tuple[str, str]]

_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_QUOTE_OR_BACKSLASH = re.compile(r'["\\]')
_PEM_BEGIN = "-----BEGIN CERTIFICATE-----"
# Characters that force a value into quotes so the header stays splittable.
_NEEDS_QUOTES = frozenset(',;="\\ \t')


def parse_xfcc(header: str) -> list[Element]:
    """Split an XFCC value into elements, each a list of ``(key, value)`` pairs.

    Keys keep their spelling (XFCC keys are case-insensitive; callers compare with
    ``casefold``), values are unquoted. Empty elements and empty pairs are dropped.
    Raises ``XfccError`` for a pair without ``=``, an empty key, an unterminated quoted
    value, or text after a closing quote.
    """
    elements: list[Element] = []
    pairs: Element = []
    i, n = 0, len(header)
    while i < n:
        ch = header[i]
        if ch in " \t;":
            i += 1
            continue
        if ch == ",":
            if pairs:
                elements.append(pairs)
            pairs = []
            i += 1
            continue
        eq = _find_any(header, i, "=;,")
        if eq == n or header[eq] != "=":
            raise XfccError(f"XFCC pair {header[i:eq].strip()!r} at offset {i} has no '='")
        key = header[i:eq].strip()
        if not key:
            raise XfccError(f"XFCC pair at offset {i} has an empty key")
        i = _skip_blanks(header, eq + 1)
        if i < n and header[i] == '"':
            value, i = _read_quoted(header, i)
            i = _skip_blanks(header, i)
            if i < n and header[i] not in ";,":
                raise XfccError(
                    f"XFCC value of {key!r} has unexpected text after its closing quote "
                    f"at offset {i}"
                )
        else:
            end = _find_any(header, i, ";,")
            value = header[i:end].strip()
            i = end
        pairs.append((key, value))
    if pairs:
        elements.append(pairs)
    return elements


def _find_any(text: str, start: int, chars: str) -> int:
    """Index of the first of ``chars`` at or after ``start`` (``len(text)`` if none).

    The listener parses one header per event; scanning with ``re`` (C) instead of a
    Python loop over a ~2 KB URL-encoded certificate is most of the listener's speed.
    """
    match = _any_of(chars).search(text, start)
    return match.start() if match else len(text)


@functools.cache
def _any_of(chars: str) -> re.Pattern[str]:
    return re.compile("[" + re.escape(chars) + "]")


def _skip_blanks(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t":
        i += 1
    return i


def _read_quoted(text: str, start: int) -> tuple[str, int]:
    """Read the quoted value opening at ``start``; return it and the index after it."""
    out: list[str] = []
    i = start + 1
    while True:
        match = _QUOTE_OR_BACKSLASH.search(text, i)
        if match is None:
            break
        j = match.start()
        out.append(text[i:j])
        if text[j] == '"':
            return "".join(out), j + 1
        if j + 1 >= len(text):  # a lone backslash at the very end
            out.append("\\")
            i = j + 1
            continue
        nxt = text[j + 1]
        out.append('"' if nxt == '"' else "\\" + nxt)
        i = j + 2
    raise XfccError(f"XFCC has an unterminated quoted value starting at offset {start}")


def query_unescape(value: str) -> str:
    """Undo URL encoding like Go's ``url.QueryUnescape``.

    ``+`` becomes a space and every ``%`` must start two hex digits; Python's
    ``unquote_plus`` silently keeps bad escapes, which would let garbage through, so
    they are refused first and the decoding itself is left to ``urllib`` (C-speed).
    """
    bad = _BAD_ESCAPE.search(value)
    if bad is not None:
        i = bad.start()
        raise XfccError(f"invalid URL escape {value[i : i + 3]!r} at offset {i}")
    raw = urllib.parse.unquote_to_bytes(value.replace("+", " ").encode("utf-8", "surrogateescape"))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise XfccError(f"URL-decoded value is not UTF-8: {exc.reason}") from None


def first_cert_value(header: str) -> str:
    """The raw (still URL-encoded) ``Cert`` value of the header's first element."""
    elements = parse_xfcc(header)
    if not elements:
        raise XfccError("XFCC header is empty")
    for key, value in elements[0]:
        if key.casefold() == "cert":
            if not value:
                raise XfccError("XFCC Cert value is empty")
            return value
    keys = ", ".join(key for key, _ in elements[0]) or "none"
    raise XfccError(f"XFCC first element has no Cert= (keys present: {keys})")


def certificate_from_pem(pem: str) -> x509.Certificate:
    """Load the first certificate of a PEM text, with ``XfccError`` naming the problem."""
    if _PEM_BEGIN not in pem:
        raise XfccError(f"XFCC Cert is not PEM: no {_PEM_BEGIN!r} line")
    try:
        return x509.load_pem_x509_certificate(pem.encode("ascii"))
    except UnicodeEncodeError:
        raise XfccError("XFCC Cert PEM contains non-ASCII characters") from None
    except ValueError as exc:
        raise XfccError(f"XFCC Cert is not a valid X.509 certificate: {exc}") from None


def certificate_from_xfcc(header: str | None, *, max_bytes: int = 32768) -> x509.Certificate:
    """The client certificate the gateway put in the header (first element's ``Cert``).

    Every failure raises ``XfccError``: missing header, header longer than ``max_bytes``,
    no ``Cert=``, bad URL encoding, not PEM, not a certificate.
    """
    if header is None:
        raise XfccError(f"{XFCC_HEADER} header is missing")
    size = len(header.encode("utf-8", "surrogateescape"))
    if size > max_bytes:
        raise XfccError(f"{XFCC_HEADER} header has {size} bytes, limit is {max_bytes}")
    return _certificate_of(header)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _certificate_of(header: str) -> x509.Certificate:
    """Parse once per distinct header: a runtime's gateway-set XFCC is the same text for
    every event of its connection's certificate, and parsing it (quote-aware split, URL
    decoding, PEM) was the largest share of the listener's own CPU per event. The same
    text always yields the same certificate, so the cache cannot change an answer; a
    header that fails raises and is not cached. Bounded: a few MiB at most."""
    pem = query_unescape(first_cert_value(header)).strip().strip('"')
    return certificate_from_pem(pem)


def _pair(key: str, value: str, *, quote: bool = False) -> str:
    if quote or any(c in _NEEDS_QUOTES for c in value):
        return f'{key}="{value.replace(chr(34), chr(92) + chr(34))}"'
    return f"{key}={value}"


def format_xfcc(cert: x509.Certificate, *, by: str | None = None) -> str:
    """The XFCC value Envoy sets with ``SANITIZE_SET`` and subject/cert/uri/dns details.

    Shape: ``[By=..;]Hash=<sha256 hex>;Cert="<URL-encoded PEM>";Subject="<RFC 4514>";
    URI=<uri SAN>;DNS=<dns SAN>`` with one ``URI=``/``DNS=`` pair per SAN, ``URI=``
    kept even when empty, and no ``DNS=`` without DNS SANs, as Envoy does. The subject is
    embedded unchanged (its quotes are already RFC 4514 escaped); SAN values that would
    break the header are quoted, where Envoy would emit an unparsable header.
    """
    der = cert.public_bytes(serialization.Encoding.DER)
    pem = cert.public_bytes(serialization.Encoding.PEM).decode("ascii")
    sans = subject_alt_names(cert)
    parts: list[str] = []
    if by is not None:
        parts.append(_pair("By", by))
    parts.append(f"Hash={hashlib.sha256(der).hexdigest()}")
    parts.append(f'Cert="{urllib.parse.quote(pem, safe="")}"')
    parts.append(f'Subject="{cert.subject.rfc4514_string()}"')
    parts.extend(_pair("URI", uri) for uri in sans.uris or ("",))
    parts.extend(_pair("DNS", dns) for dns in sans.dns)
    return ";".join(parts)
