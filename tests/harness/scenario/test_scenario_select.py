"""Selecting scenarios (``tag=``, ``tag!=``, ``name=``, ``name!=``) and collecting them
from files and directories in one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.scenario import loads_scenario
from harness.scenario.collection import collect_scenarios
from harness.scenario.select import (
    InvalidSelector,
    Selector,
    describe,
    parse_selector,
    parse_selectors,
    selected,
)


def scenario(name: str, *tags: str) -> str:
    return (
        f"name: {name}\ntags: [{', '.join(tags)}]\nclusters: {{skrs: [{{name: skr-a}}]}}\n"
        "steps: [{name: a, try: [{wait: 10ms}]}]\n"
    )


ROTATION = loads_scenario(scenario("cert-rotation", "cert-rotation", "slow"))
SPEC = loads_scenario(scenario("spec-watch", "smoke", "spec"))
PLAIN = loads_scenario(scenario("plain"))


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("tag=cert-rotation", Selector("tag", "cert-rotation")),
        ("tag!=slow", Selector("tag", "slow", negated=True)),
        ("name=spec-*", Selector("name", "spec-*")),
        (" name != *-watch ", Selector("name", "*-watch", negated=True)),
        ("tag=[!s]*", Selector("tag", "[!s]*")),
    ],
)
def test_valid_selectors(text: str, parsed: Selector) -> None:
    assert parse_selector(text) == parsed
    assert parse_selector(str(parsed)) == parsed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("slow", "selector 'slow' has no '=' or '!=' (write tag=PATTERN, tag!=PATTERN"),
        ("=slow", "has nothing before '='"),
        ("tags=slow", "unknown key 'tags'; did you mean 'tag'?"),
        ("colour=red", "unknown key 'colour' (write tag=PATTERN"),
        ("tag=", "has nothing after '=': give a tag or a pattern"),
        ("tag==slow", "write a single '='"),
        ("tag=Cert_Rotation", "tags are DNS labels (a-z, 0-9, '-'), so 'Cert_Rotation' matches "
         "none; did you mean 'tag=cert-rotation'?"),
    ],
)  # fmt: skip
def test_invalid_selectors_say_what_to_write(text: str, message: str) -> None:
    with pytest.raises(InvalidSelector) as exc:
        parse_selector(text)
    assert isinstance(exc.value, ValueError)
    assert message in str(exc.value)


def test_matching_is_anded_over_tags_and_names() -> None:
    def names(*texts: str) -> list[str]:
        chosen = parse_selectors(texts)
        return [s.name for s in (ROTATION, SPEC, PLAIN) if selected(s, chosen)]

    assert names() == ["cert-rotation", "spec-watch", "plain"]
    assert names("tag=cert-rotation") == ["cert-rotation"]
    assert names("tag!=slow") == ["spec-watch", "plain"]  # no tags: nothing to exclude
    assert names("tag=s*") == ["cert-rotation", "spec-watch"]
    assert names("name=spec-*") == ["spec-watch"]
    assert names("name!=spec-*", "tag!=slow") == ["plain"]
    assert names("tag=smoke", "tag=slow") == []
    assert describe(parse_selectors(["tag=a", "name!=b"])) == "tag=a and name!=b"


def test_collect_reports_every_problem_located_and_keeps_the_valid(tmp_path: Path) -> None:
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "a.yaml").write_text(scenario("a", "smoke"))
    (tmp_path / "good" / "b.yml").write_text(scenario("b"))
    (tmp_path / "good" / "again.yaml").write_text(scenario("a"))
    (tmp_path / "bad.yaml").write_text(
        "name: bad\nclusters: {skrs: [{name: skr-a}]}\nsteps: [{name: a, tyr: []}]\n"
    )
    (tmp_path / "empty").mkdir()
    collected = collect_scenarios([tmp_path / "good", tmp_path / "bad.yaml", tmp_path / "empty"])
    assert [(f.name, s.name) for f, s in collected.scenarios] == [
        ("a.yaml", "a"),
        ("again.yaml", "a"),
        ("b.yml", "b"),
    ]
    assert not collected.ok
    assert collected.problems == (
        f"{tmp_path / 'empty'}: no scenario files (*.yaml, *.yml) in this directory",
        f"{tmp_path / 'bad.yaml'}:3:9: missing key 'try' in step 'a'",
        f"{tmp_path / 'bad.yaml'}:3:19: unknown key 'tyr' in step 'a'; did you mean 'try'?",
        f"{tmp_path / 'good' / 'again.yaml'}: scenario name 'a' is already used by "
        f"{tmp_path / 'good' / 'a.yaml'}; scenario names must be unique",
    )


def test_collect_uses_one_scenario_per_matrix_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.scenario.collection as collection

    (tmp_path / "m.yaml").write_text(scenario("m"))

    def two_instances(path: str | Path) -> list[object]:
        base = loads_scenario(Path(path).read_text(), source=str(path))
        return [base.model_copy(update={"name": f"m-{i}"}) for i in (1, 2)]

    monkeypatch.setattr(collection, "load_scenario_instances", two_instances)
    collected = collect_scenarios([tmp_path])
    assert collected.ok
    assert [s.name for _, s in collected.scenarios] == ["m-1", "m-2"]
