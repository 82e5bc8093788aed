"""Hypothesis strategies for hostile HTTP requests, shared by the webhook and listener fuzzers.

Each strategy aims at one way a request can be wrong: the method, the path (traversal,
encoded slashes, NUL, very long, non-ASCII), the headers (Content-Length that lies,
content types, compression that is not), and the body (random bytes, invalid UTF-8,
truncated JSON, nesting far beyond the recursion limit, huge strings, documents of the
right shape with wrong types). Sizes are chosen so 10,000 requests fit in well under a
minute on two cores.
"""

from __future__ import annotations

import gzip
import json
import string
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from watcher.paths import MAX_NAME_LENGTH

# --------------------------------------------------------------------------- requests


@dataclass(frozen=True)
class FuzzRequest:
    """One request as sent; ``content_length`` -1 = true length, None = no header."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    content_length: int | None
    truncated: bool = False  # the body is shorter than the Content-Length sent


# A body this large may still be in flight when a server that refused it unread closes
# the connection; the client then sees a reset, not the answer.
UNREAD_RESET = 64 * 1024

# Names a path segment may try: traversal, encoded slashes, NUL, case, length, empty.
TRICKY_NAMES = (
    "",
    ".",
    "..",
    "../..",
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e",
    "%2E%2E%2F",
    "%2F",
    "a%2Fb",
    "a/b",
    "a\\b",
    "a%5Cb",
    "a%00b",
    "%00",
    "Lifecycle-Manager",
    "LIFECYCLE-MANAGER",
    "-leading",
    "trailing-",
    "a_b",
    "a.b",
    "a b",
    "a%20b",
    "lifecycle-manager%0A",
    "lifecycle-manager%0d%0a",
    "\u017f",  # long s: upper-cases to S
    "k\u0131ma",
    "\u202e",
    "x" * (MAX_NAME_LENGTH + 1),
    "x" * 4000,
    "%" * 3,
    "%zz",
    "lifecycle-manager;x",
    "lifecycle-manager?x=1",
    "lifecycle-manager#frag",
)

METHODS = st.one_of(
    st.sampled_from(["POST"] * 6 + ["GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
    st.text(alphabet=string.ascii_uppercase, min_size=1, max_size=12),
    st.sampled_from(["post", "P0ST", "CONNECT", "TRACE", "PRI", "GET\x00"]),
)

_URL_SAFE = string.ascii_letters + string.digits + "-._~%/!$&'()*+,;=:@?"


def path_strategy(good: str, prefix: str) -> st.SearchStrategy[str]:
    """Paths near ``good`` (a valid route) and ``prefix`` + tricky or random segments."""
    return st.one_of(
        st.just(good),
        st.just(good),
        st.sampled_from(TRICKY_NAMES).map(lambda name: prefix + name),
        st.text(alphabet=_URL_SAFE, max_size=80).map(lambda s: prefix + s),
        st.text(alphabet=_URL_SAFE, max_size=200).map(lambda s: "/" + s),
        st.sampled_from(
            [
                "/",
                "*",
                prefix.rstrip("/"),
                prefix,
                good + "/",
                good + "/extra",
                good + "?x=1",
                "/." + good,
                "/./" + good.lstrip("/"),
                "/x/.." + good,
                "/%2e%2e" + good,
                good.replace("/", "%2F"),
                "//" + good.lstrip("/"),
                good.upper(),
                "/metrics",
            ]
        ),
        st.integers(1000, 9000).map(lambda n: prefix + "a" * n),
        # raw non-ASCII in the request target (sent as UTF-8)
        st.text(min_size=1, max_size=20)
        .filter(lambda s: not any(c in s for c in " \r\n"))
        .map(lambda s: prefix + s),
    )


JsonValues = tuple[object, ...]

# Specs and statuses to compare: equal and unequal pairs, Go's number and nil-map rules.
SPECS: JsonValues = (
    {},
    {"channel": "fast"},
    {"channel": "regular"},
    {"n": 1},
    {"n": 1.0},
    {"n": True},
    {"modules": [{"name": "m"}]},
    {"modules": []},
    {"big": 2**70},
    {"x": None},
    None,
    [],
    "spec",
)


def needs_eof(request: FuzzRequest) -> bool:
    """Whether the server would wait for more body than is sent (short body, chunked)."""
    chunked = any(
        name.lower() == "transfer-encoding" and "chunked" in value.lower()
        for name, value in request.headers
    )
    return request.truncated or chunked


def json_values(max_leaves: int = 5) -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=max_leaves,
    )


# One value of every JSON type, for "right field, wrong type" (cheaper to draw than a
# random JSON value, which matters at 10,000 examples).
WRONG_TYPES: JsonValues = (None, True, 0, -1, 1.5, 2**64, "", "x", "\x00", [], [1], {}, {"a": 1})


def maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The right-typed value most of the time, a value of another JSON type otherwise."""
    return st.one_of(value, value, st.sampled_from(WRONG_TYPES))


def nested(depth: int, leaf: str = "0") -> bytes:
    """``[[[...0...]]]`` ``depth`` levels deep."""
    return b"[" * depth + leaf.encode() + b"]" * depth


def nested_object(depth: int) -> dict[str, Any]:
    value: Any = 0
    for _ in range(depth):
        value = {"a": value}
    return value  # type: ignore[no-any-return]


def generic_bodies(valid: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Bodies that are wrong in ways independent of the document type."""
    return st.one_of(
        st.just(b""),
        st.binary(max_size=512),
        st.sampled_from(
            [
                b"\xff\xfe\xfd",
                b'{"apiVersion": "\xc3\x28"}',
                b'{"a": "\xed\xa0\x80"}',  # a UTF-8-encoded surrogate
                b'"\\ud800"',
                b"\x00" * 64,
                b"null",
                b"[]",
                b"{}",
                b"1e999999",
                b"-" * 100,
                b'{"a":' * 50,
                b"NaN",
                b"\xef\xbb\xbf{}",  # BOM
                gzip.compress(b"{}"),
            ]
        ),
        st.tuples(valid, st.floats(0, 1, exclude_max=True)).map(
            lambda bf: bf[0][: int(len(bf[0]) * bf[1])]
        ),
        st.sampled_from([10, 500, 1000, 5000, 100_000]).map(nested),
        st.sampled_from([1000, 100_000]).map(lambda d: b"{" * d),
        st.sampled_from([1000, 100_000]).map(lambda d: b'{"a":' * d + b"0" + b"}" * d),
        st.sampled_from([10_000, 200_000, 1_000_000]).map(lambda n: b'{"s": "' + b"x" * n + b'"}'),
    )


def headers_strategy(extra: st.SearchStrategy[tuple[str, str]]) -> st.SearchStrategy[Any]:
    content_types = st.sampled_from(
        [
            "application/json",
            "application/json; charset=utf-8",
            "application/json; charset=latin-1",
            "text/plain",
            "multipart/form-data; boundary=x",
            "application/x-www-form-urlencoded",
            "",
            "\u00e9",
        ]
    )
    one = st.one_of(
        content_types.map(lambda v: ("Content-Type", v)),
        st.sampled_from(["gzip", "deflate", "br", "zstd", "identity", "bogus"]).map(
            lambda v: ("Content-Encoding", v)
        ),
        st.sampled_from(["chunked", "gzip, chunked", "identity", "bogus"]).map(
            lambda v: ("Transfer-Encoding", v)
        ),
        st.sampled_from(["100-continue", "bogus"]).map(lambda v: ("Expect", v)),
        st.tuples(
            st.text(alphabet=string.ascii_letters + "-", min_size=1, max_size=20),
            st.text(alphabet=string.printable.strip() + " ", max_size=100),
        ),
        extra,
    )
    return st.lists(one, max_size=4).map(tuple)


def content_lengths() -> st.SearchStrategy[tuple[str, Any]]:
    """How the Content-Length relates to the body: honest, absent, short, long, or junk."""
    return st.one_of(
        *[st.just(("true", 0))] * 12,
        st.just(("none", 0)),
        st.tuples(st.just("shorter"), st.integers(1, 100)),
        st.tuples(st.just("longer"), st.integers(1, 100)),
        st.tuples(st.just("huge"), st.sampled_from([2**31, 2**63, 10**30])),
        st.tuples(st.just("junk"), st.sampled_from(["-1", "abc", "1 2", "0x10", "+5"])),
    )


def assemble(
    method: str,
    target: str,
    headers: tuple[tuple[str, str], ...],
    body: bytes,
    length: tuple[str, Any],
) -> FuzzRequest:
    kind, amount = length
    if kind == "true":
        return FuzzRequest(method, target, headers, body, -1)
    if kind == "none":
        return FuzzRequest(method, target, headers, body, None)
    if kind == "shorter":
        return FuzzRequest(method, target, headers, body, max(len(body) - amount, 0))
    if kind == "longer":
        return FuzzRequest(method, target, headers, body, len(body) + amount, truncated=True)
    if kind == "huge":
        return FuzzRequest(method, target, headers, body, amount, truncated=True)
    junk = (*headers, ("Content-Length", str(amount)))
    return FuzzRequest(method, target, junk, body, None)


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()
