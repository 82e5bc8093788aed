"""WatchEvent encoding is byte-compatible with Go; decoding accepts any key case."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from watcher.errors import InvalidWatchEvent
from watcher.model import (
    GroupVersionKind,
    ObjectKey,
    WatchEvent,
    admission_response,
    decode_event,
    encode_event,
    go_json_dumps,
)


def test_go_escapes_html_characters() -> None:
    assert go_json_dumps({"a": "<&>\u2028"}) == b'{"a":"\\u003c\\u0026\\u003e\\u2028"}'
    assert go_json_dumps({"a": "ü"}) == '{"a":"ü"}'.encode()


def test_decode_accepts_any_key_case() -> None:
    body = (
        b'{"WATCHED":{"namespace":"ns","NAME":"n"},'
        b'"watchedgvk":{"Group":"g","VERSION":"v","kind":"K"}}'
    )
    assert decode_event(body) == WatchEvent(ObjectKey("ns", "n"), GroupVersionKind("g", "v", "K"))


def test_exact_key_wins_over_folded_key() -> None:
    body = b'{"watched":{"name":"lower","Name":"exact"},"watchedGvk":{}}'
    assert decode_event(body).watched.name == "exact"


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b"[]",
        b'{"watched":1}',
        b'{"watched":{"Name":1}}',
        b"\xff\xfe",
        b'{"watchedGvk":"x"}',
        b"[" * 100_000,
    ],
)
def test_decode_rejects_garbage_with_a_reason(body: bytes) -> None:
    with pytest.raises(InvalidWatchEvent):
        decode_event(body)


text = st.text(max_size=20)
events = st.builds(
    WatchEvent,
    st.builds(ObjectKey, text, text),
    st.builds(GroupVersionKind, text, text, text),
    st.none() | st.builds(ObjectKey, text, text),
)


@given(events)
def test_encode_decode_round_trip(event: WatchEvent) -> None:
    assert decode_event(encode_event(event)) == event


@given(events)
def test_encoding_is_valid_json_in_go_field_order(event: WatchEvent) -> None:
    """No owner: upstream 2.1+ on every contract; an owner (legacy opt-in) goes first."""
    fields = ["watched", "watchedGvk"]
    assert list(json.loads(encode_event(event))) == (
        fields if event.owner is None else ["owner", *fields]
    )


def test_admission_response_shape() -> None:
    assert admission_response("u", "kcp request succeeded") == {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "response": {
            "uid": "u",
            "allowed": True,
            "status": {"metadata": {}, "status": "Success", "message": "kcp request succeeded"},
        },
    }
