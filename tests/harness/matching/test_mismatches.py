"""How a mismatch is reported: its path, the diff of the relevant subtrees, the one-line
summary (``harness.matching.mismatches``)."""

from __future__ import annotations

import pytest
from matching_kit import WEBHOOK_CONFIG

from harness.matching.mismatches import (
    ObjectMatch,
    diff,
    select_mismatch_summary,
)
from harness.matching.objects import match_object
from harness.matching.syntax import (
    ROOT,
    Path,
    format_path,
)

# --- paths, diff and summary ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ((), ROOT),
        (("webhooks", 1, "rules", 0, "resources"), "webhooks[1].rules[0].resources"),
        (
            ("metadata", "labels", "app.kubernetes.io/name"),
            'metadata.labels["app.kubernetes.io/name"]',
        ),
        (("a-b", "c d", ""), '["a-b"]["c d"][""]'),
        ((0, "(length(x))"), "[0].(length(x))"),
        (("(length(x))",), "(length(x))"),
        (("_x9",), "_x9"),
        (("ünï",), '["ünï"]'),
    ],
)
def test_format_path(path: Path, text: str) -> None:
    assert format_path(path) == text


def test_diff_shows_the_relevant_subtrees_only() -> None:
    expected = {
        "metadata": {"labels": {"tier": "sidecar"}},
        "webhooks": [{}, {"rules": [{"resources": ["configmaps", "pods"]}]}],
    }
    match = match_object(expected, WEBHOOK_CONFIG)
    assert diff(match) == "\n".join(
        [
            "metadata.labels.tier: not equal",
            "  - expected: sidecar",
            "  + actual: watcher",
            "webhooks[1].rules[0].resources: length 1, expected 2",
            "  - expected: [configmaps, pods]",
            "  + actual: [secrets]",
        ]
    )


def test_diff_indents_block_yaml_under_the_markers() -> None:
    ready = {"type": "Ready", "status": "True", "message": "the watcher webhook is serving"}
    match = match_object({"status": {"x": 1}}, {"status": [ready, {"type": "Installed"}]})
    assert diff(match) == "\n".join(
        [
            "status: expected map, got list",
            "  - expected: {x: 1}",
            "  + actual:",
            "      - type: Ready",
            "        status: 'True'",
            "        message: the watcher webhook is serving",
            "      - type: Installed",
        ]
    )


def test_diff_marks_missing_keys_and_truncates_big_subtrees() -> None:
    big = {f"key{i}": i for i in range(100)}
    match = match_object({"a": 1, "b": [1]}, {"b": big})
    text = diff(match)
    assert "a: missing key\n  - expected: 1\n  + actual: (missing)" in text
    assert text.endswith("      … (truncated)")
    assert len(text.splitlines()) < 50
    long_text = diff(match_object({"s": "x"}, {"s": "y" * 10_000}))
    assert len(long_text) < 4200
    assert "… (truncated)" in long_text


def test_diff_of_a_match_is_empty() -> None:
    assert diff(match_object({}, {})) == ""
    assert select_mismatch_summary(ObjectMatch(ok=True)) == ""


def test_summary_is_one_line_with_a_count() -> None:
    expected = {
        "webhooks": [{}, {"rules": [{"resources": ["configmaps"]}]}],
        "kind": "Secret",
        "absent": {"x": 1},
    }
    match = match_object(expected, WEBHOOK_CONFIG)
    assert select_mismatch_summary(match) == (
        "webhooks[1].rules[0].resources[0]: expected configmaps, got secrets (+2 more)"
    )
    missing = match_object({"absent": {"x": [1, 2]}}, {})
    assert select_mismatch_summary(missing) == "absent: missing key, expected {x: [1, 2]}"
    length = match_object({"a": [1]}, {"a": [1, 2]})
    assert select_mismatch_summary(length) == "a: length 2, expected 1"


def test_summary_shortens_long_values() -> None:
    summary = select_mismatch_summary(match_object({"a": "x" * 500}, {"a": "y"}))
    assert len(summary) < 150
    assert "…" in summary
