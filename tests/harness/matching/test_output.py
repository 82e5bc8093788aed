"""Command output checks: substrings, regex, partial JSON, load-time validation, truncation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.matching.output import (
    OutputResult,
    OutputSpec,
    check_output,
    regex_problem,
    truncate,
)
from harness.matching.syntax import ExpressionError

KUBECTL_GET = json.dumps(
    {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"kind": "Secret", "metadata": {"name": "skr-webhook-tls", "namespace": "kyma-system"}},
            {"kind": "Secret", "metadata": {"name": "kcp-ca", "namespace": "kyma-system"}},
        ],
    },
    indent=2,
)


def test_an_empty_spec_accepts_anything() -> None:
    assert check_output(OutputSpec(), "whatever") == OutputResult(ok=True)


def test_substrings() -> None:
    spec = OutputSpec(contains=("deployment.apps/skr-webhook", "created"), not_contains=("Error",))
    assert check_output(spec, "deployment.apps/skr-webhook created\n").ok
    result = check_output(spec, "Error from server (NotFound): deployments not found")
    assert not result.ok
    assert result.problems == (
        "output does not contain 'deployment.apps/skr-webhook'",
        "output does not contain 'created'",
        "output contains 'Error'",
    )
    assert result.diff == ""


def test_regex_searches_with_multiline_anchors() -> None:
    spec = OutputSpec(regex=r"^skr-webhook-\w+\s+1/1\s+Running$")
    text = "NAME READY STATUS\nskr-webhook-abc12   1/1   Running\nother 0/1 Pending"
    assert check_output(spec, text).ok
    result = check_output(spec, "skr-webhook-abc12   0/1   Pending")
    assert result.problems == (f"output does not match regex {spec.regex!r}",)


def test_json_matches_partially() -> None:
    spec = OutputSpec(
        json={
            "kind": "List",
            "(length(items))": 2,
            "items": {"$contains": [{"metadata": {"name": "kcp-ca"}}]},
        }
    )
    assert check_output(spec, KUBECTL_GET).ok


def test_json_mismatch_gives_a_summary_and_a_diff() -> None:
    spec = OutputSpec(json={"items": [{}, {"metadata": {"name": "other-ca"}}]})
    result = check_output(spec, KUBECTL_GET)
    assert not result.ok
    assert result.problems == (
        "JSON does not match: items[1].metadata.name: expected other-ca, got kcp-ca",
    )
    assert result.diff == (
        "items[1].metadata.name: not equal\n  - expected: other-ca\n  + actual: kcp-ca"
    )


def test_top_level_lists_use_the_list_rules() -> None:
    assert check_output(OutputSpec(json=[1, {"a": 2}]), '[1, {"a": 2, "b": 3}]').ok
    assert check_output(OutputSpec(json={"$anyOrder": [2, 1]}), "[1, 2]").ok
    result = check_output(OutputSpec(json=[1]), "[1, 2]")
    assert result.problems == ("JSON does not match: <root>: length 2, expected 1",)


@pytest.mark.parametrize("value", [False, 0, "", [], {}])
def test_falsy_json_values_are_still_checked(value: Any) -> None:
    assert check_output(OutputSpec(json=value), json.dumps(value)).ok
    assert not check_output(OutputSpec(json=value), "null").ok


def test_json_null_means_no_json_check() -> None:
    assert check_output(OutputSpec(json=None), "not json at all").ok


def test_output_that_is_not_json() -> None:
    result = check_output(OutputSpec(json={}), '{"a": 1,\n oops}')
    assert result.problems == (
        "not JSON: Expecting property name enclosed in double quotes: line 2 column 2 (char 10)",
    )
    assert result.diff == ""
    assert check_output(OutputSpec(json={}), "").problems == (
        "not JSON: Expecting value: line 1 column 1 (char 0)",
    )


def test_absurdly_nested_output_is_not_json() -> None:
    result = check_output(OutputSpec(json=[]), "[" * 100_000 + "]" * 100_000)
    assert result.problems == ("not JSON: nested too deeply to parse",)


def test_every_problem_is_reported_at_once() -> None:
    spec = OutputSpec(contains=("ready",), regex="^done$", json={"a": 1})
    assert len(check_output(spec, "nope").problems) == 3


def test_invalid_regex_is_rejected_when_the_spec_is_built() -> None:
    assert regex_problem(r"^\d+ pods?$") is None
    problem = regex_problem("(unclosed")
    assert problem == "invalid regex '(unclosed': missing ), unterminated subpattern at position 0"
    with pytest.raises(ValueError, match="invalid regex"):
        OutputSpec(regex="[z-a]")


def test_invalid_json_tree_is_rejected_when_the_spec_is_built() -> None:
    with pytest.raises(ExpressionError, match=r"^json: items\.\(length\(a\): invalid JMESPath"):
        OutputSpec(json={"items": {"(length(a)": 1}})
    with pytest.raises(ExpressionError, match=r"\$contains must be the only key"):
        OutputSpec(json={"$contains": [], "b": 1})
    with pytest.raises(ExpressionError, match=r"x509\(\) takes 1 argument\(s\), got 2"):
        OutputSpec(json={"(x509(a, b))": {}})
    with pytest.raises(ExpressionError, match=r"\$oneOf needs a non-empty list"):
        OutputSpec(json={"items": {"$oneOf": []}})


def test_json_checks_have_the_harness_functions_and_alternatives() -> None:
    spec = OutputSpec(
        json={
            "(base64_decode(encoded))": "kyma",
            "(to_epoch(at))": 0,
            "kind": {"$oneOf": ["List", "SecretList"]},
        }
    )
    text = json.dumps({"encoded": "a3ltYQ==", "at": "1970-01-01T00:00:00Z", "kind": "List"})
    assert check_output(spec, text).ok
    broken = check_output(spec, json.dumps({"encoded": "!", "at": "x", "kind": "Pod"}))
    [problem] = broken.problems
    assert problem.startswith(
        "JSON does not match: (base64_decode(encoded)): expression failed: "
        "base64_decode(): not base64 (1 characters): "
    )
    assert problem.endswith("(+2 more)")
    assert "kind: matches none of 2 alternatives [List, SecretList]" in broken.diff


def test_truncate_keeps_short_text() -> None:
    assert truncate("short") == ("short", False)
    assert truncate("x" * 4000) == ("x" * 4000, False)
    assert truncate("", limit=0) == ("", False)


def test_truncate_keeps_head_and_tail() -> None:
    text = "H" * 3000 + "M" * 4000 + "T" * 3000
    cut, was_cut = truncate(text)
    assert was_cut
    assert cut == "H" * 2000 + "\n… 6000 characters cut …\n" + "T" * 2000
    assert truncate("abcdef", limit=3) == ("a\n… 3 characters cut …\nef", True)
    assert truncate("abc", limit=0) == ("\n… 3 characters cut …\n", True)
    with pytest.raises(ValueError, match="limit"):
        truncate("abc", limit=-1)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300), st.integers(0, 200))
def test_truncate_keeps_limit_characters_of_the_original(text: str, limit: int) -> None:
    cut, was_cut = truncate(text, limit)
    assert was_cut == (len(text) > limit)
    if not was_cut:
        assert cut == text
        return
    head, tail = limit // 2, limit - limit // 2
    marker = f"\n… {len(text) - limit} characters cut …\n"
    assert cut == text[:head] + marker + text[len(text) - tail :]
