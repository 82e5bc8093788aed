"""The harness's JMESPath functions for base64 and time, through ``search``, and the
function table: compiled expressions and the load-time check of names and argument counts
(the certificate functions: ``test_x509_functions.py``)."""

from __future__ import annotations

import time

import jmespath
import pytest
from functions_kit import LEAF, NOW_EPOCH, b64
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.matching import functions
from harness.matching.functions import (
    CUSTOM_FUNCTIONS,
    FUNCTION_TABLE,
    FunctionError,
    HarnessFunctions,
    compile_expression,
    search,
)
from harness.matching.objects import match_object
from harness.matching.syntax import ExpressionError, check_expressions

# --- base64 ----------------------------------------------------------------------------------


def test_base64() -> None:
    assert search("base64_encode(@)", "kyma ✓") == "a3ltYSDinJM="
    assert search("base64_decode(@)", "a3ltYSDinJM=") == "kyma ✓"
    assert search("base64_decode(@)", " a3ltYSDi\nnJM ") == "kyma ✓"  # spaces, no padding
    assert search("base64_decode(@)", b64(b"\xff\xfeok")) == "\ufffd\ufffdok"
    assert search("base64_decode(@)", "") == ""
    with pytest.raises(FunctionError, match=r"^base64_decode\(\): not base64 \(4 characters\)"):
        search("base64_decode(@)", "a$b%")


@settings(max_examples=60, deadline=None)
@given(st.text())
def test_base64_round_trips(text: str) -> None:
    encoded = search("base64_encode(@)", text)
    assert encoded == b64(text.encode())
    assert search("base64_decode(base64_encode(@))", text) == text


# --- time ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timestamp", "epoch"),
    [
        ("2026-11-27T20:00:00Z", NOW_EPOCH),
        ("2026-11-27t20:00:00z", NOW_EPOCH),
        ("2026-11-27T21:00:00+01:00", NOW_EPOCH),
        ("2026-11-27T20:00:00", NOW_EPOCH),  # no offset: UTC
        ("2026-11-27T20:00:00.250000Z", NOW_EPOCH + 0.25),
        ("1970-01-01T00:00:00Z", 0),
    ],
)
def test_to_epoch(timestamp: str, epoch: float) -> None:
    assert search("to_epoch(@)", timestamp) == epoch


def test_whole_seconds_are_integers() -> None:
    assert isinstance(search("to_epoch(@)", "2026-11-27T20:00:00Z"), int)


def test_a_bad_timestamp_is_an_error_saying_why() -> None:
    with pytest.raises(FunctionError, match=r"^to_epoch\(\): not an RFC 3339 timestamp: 'soon'$"):
        search("to_epoch(@)", "soon")
    with pytest.raises(FunctionError, match="seconds_until"):
        search("seconds_until(@)", "x" * 500)
    with pytest.raises(ValueError, match="invalid type"):
        search("to_epoch(@)", 5)


def test_now_and_the_distances_read_the_clock(frozen: float) -> None:
    assert search("now()", None) == frozen
    assert search("seconds_until(@)", "2026-11-28T20:00:00Z") == 86400
    assert search("seconds_since(@)", "2026-11-28T20:00:00Z") == -86400
    assert search("seconds_since(@)", "2026-11-27T19:59:00Z") == 60
    assert search("to_epoch(@) > now()", "2026-11-27T20:00:01Z") is True


def test_an_instance_can_have_its_own_clock(frozen: float) -> None:
    options = jmespath.Options(custom_functions=HarnessFunctions(clock=lambda: 100.0))
    assert jmespath.search("now()", None, options=options) == 100.0
    assert search("now()", None) == frozen


def test_the_real_clock_by_default() -> None:
    before = time.time()
    assert before <= search("now()", None) <= time.time()


# --- the table and compiled expressions ------------------------------------------------------


def test_the_function_table_adds_the_documented_functions() -> None:
    assert set(CUSTOM_FUNCTIONS) == {
        "x509",
        "x509_bundle",
        "base64_decode",
        "base64_encode",
        "now",
        "to_epoch",
        "seconds_until",
        "seconds_since",
    }
    assert {"length", "starts_with", "merge"} <= set(FUNCTION_TABLE)
    assert all(name in (functions.__doc__ or "") for name in CUSTOM_FUNCTIONS)


def test_compiled_expressions_have_the_functions(frozen: float) -> None:
    compiled = compile_expression("[x509(@).subject.CN, seconds_since(x509(@).notBefore)]")
    assert compiled.expression.startswith("[x509(@)")
    assert compiled.search(LEAF.cert_pem.decode()) == ["runtime-skr-a", 0]
    with pytest.raises(jmespath.exceptions.UnknownFunctionError):
        jmespath.search("now()", None)  # plain jmespath does not know them


@pytest.mark.parametrize(
    ("key", "complaint"),
    [
        ("(x509(a, b))", "x509() takes 1 argument(s), got 2"),
        ("(x509_bundle())", "x509_bundle() takes 1 argument(s), got 0"),
        ("(now(a))", "now() takes 0 argument(s), got 1"),
        ("(a[?seconds_until(b, c) > `0`])", "seconds_until() takes 1 argument(s), got 2"),
        ("(x5090(a))", "unknown function x5090()"),
        ("(base64(a))", "unknown function base64()"),
    ],
)
def test_calls_are_checked_at_load_time(key: str, complaint: str) -> None:
    [(path, problem)] = check_expressions({"data": {key: 1}})
    assert path == ("data", key)
    assert problem == f"invalid JMESPath {key[1:-1]!r}: {complaint}"
    with pytest.raises(ExpressionError, match="invalid JMESPath"):
        match_object({"absent": {key: 1}}, {})


def test_valid_calls_have_no_problems() -> None:
    expected = {
        "data": {
            '(x509("tls.crt"))': {"subject": {"CN": "x"}},
            '(x509_bundle("ca.crt")[].subject.CN)': {"$contains": ["kcp-ca-1"]},
            '(seconds_until(x509("tls.crt").notAfter) > `1728000`)': True,
            "(to_epoch(a) < now())": True,
            "(base64_decode(base64_encode(b)))": "",
            "(seconds_since(c))": 0,
        }
    }
    assert check_expressions(expected) == []
