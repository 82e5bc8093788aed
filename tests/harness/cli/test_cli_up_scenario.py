"""``watcher-harness up --scenario FILE`` and the demo catalog of plain ``up``: which
environment the arguments ask for (no processes), and one real detach/down round trip."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main, up
from harness.cli.up import _child_args
from harness.cli.up_plan import (
    DEMO_MODULES,
    PlanError,
    demo_plan,
    modules_line,
    scenario_plan,
)
from harness.cli.up_state import state_file
from harness.clusters.selection import BackendChoice
from harness.runner.spec import environment_spec
from harness.scenario import load_scenario

EXPLORE = """\
name: explore
clusters: {skrs: [{name: skr-a}]}
modules:
  - {name: serverless, channels: {regular: 1.0.0, fast: 1.1.0}}
watchers:
  - {default: true}
  - {name: demo, manager: demo, resource: configmaps, labelsToWatch: {app: demo},
     service: {name: demo-events, namespace: kcp-system, port: 8084}}
listeners:
  - {component: demo, service: {name: demo-events, namespace: kcp-system, port: 8084}}
kymas:
  - {cluster: kcp, name: kyma-skr-a, labels: {kyma-project.io/runtime-id: runtime-a},
     annotations: {skr-domain: skr-a.kyma.example.com}}
  - {cluster: skr-a, name: default, spec: {channel: fast, modules: [{name: serverless}]}}
settings:
  klm: {concurrency: 2, manifestReadyAfter: 100ms}
steps:
  - name: never-run
    try:
      - expect: {within: 1s, events: [{manager: lifecycle-manager, count: {exactly: 7}}]}
"""

MATRIX = """\
name: fleet
matrix: {skrs: [1, 3], mode: [async, sync]}
clusters: {skrs: {count: "${{ matrix.skrs }}"}}
steps:
  - name: s
    try:
      - expect: {within: 1s, events: [{manager: lifecycle-manager, count: {atLeast: 0}}]}
"""


def write(tmp_path: Path, text: str, name: str = "explore.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def catalog_names(objects: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    return [(o["kind"], o["metadata"]["name"]) for o in objects]


def test_scenario_environment_is_the_runners_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, EXPLORE)
    plan = scenario_plan(path)
    scenario = load_scenario(path)
    assert plan.scenario == scenario and plan.notes == ()
    assert plan.spec == environment_spec(scenario, BackendChoice(name="local"))
    assert [s.name for s in plan.spec.skrs] == ["skr-a"]
    assert catalog_names(plan.spec.catalog) == [
        ("ModuleTemplate", "serverless-1.0.0"),
        ("ModuleTemplate", "serverless-1.1.0"),
        ("ModuleReleaseMeta", "serverless"),
    ]
    assert [w["metadata"]["name"] for w in plan.spec.watchers] == ["klm-watcher", "demo"]
    assert [listener.component for listener in plan.spec.listeners] == ["demo"]
    assert (plan.spec.klm_workers, plan.spec.manifest_ready_after) == (2, 0.1)
    assert plan.spec.backend.name == "local"
    assert plan.modules == scenario.modules


def test_demo_environment_has_a_module_catalog() -> None:
    plan = demo_plan(3, 0)
    assert [s.name for s in plan.spec.skrs] == ["skr-a", "skr-b", "skr-c"]
    assert plan.spec.health is None and plan.scenario is None
    assert ("ModuleReleaseMeta", "serverless") in catalog_names(plan.spec.catalog)
    assert ("ModuleReleaseMeta", "keda") in catalog_names(plan.spec.catalog)
    assert demo_plan(1, 4).spec.health is not None
    line = modules_line(DEMO_MODULES)
    assert line.startswith("modules in the KCP catalog: serverless (fast 1.1.0, regular 1.0.0)")
    assert "keda" in line and "\n" not in line


def test_matrix_takes_the_first_instance_and_says_which(tmp_path: Path) -> None:
    path = write(tmp_path, MATRIX)
    first = scenario_plan(path)
    assert first.scenario is not None and first.scenario.name == "fleet-skrs-1-mode-async"
    (note,) = first.notes
    assert "bringing up the first, fleet-skrs-1-mode-async (skrs=1, mode=async)" in note
    assert note.endswith("choose with --matrix skrs=1|3 --matrix mode=async|sync")
    chosen = scenario_plan(path, ["skrs=3", "mode=sync"])
    assert chosen.scenario is not None and chosen.scenario.name == "fleet-skrs-3-mode-sync"
    assert [s.name for s in chosen.spec.skrs] == ["skr-1", "skr-2", "skr-3"]
    assert chosen.notes == ()
    partial = scenario_plan(path, ["skrs=3"])
    assert partial.scenario is not None and partial.scenario.name == "fleet-skrs-3-mode-async"
    assert partial.notes[0].endswith("choose with --matrix mode=async|sync")


@pytest.mark.parametrize(
    ("matrix", "problem"),
    [
        (["skrs=2"], "--matrix skrs=2: skrs is one of 1, 3"),
        (["size=1"], "--matrix size: the matrix has skrs, mode"),
        (["skrs"], "--matrix 'skrs': write key=value"),
        (["skrs=1", "skrs=3"], "--matrix skrs is given twice"),
    ],
)
def test_wrong_matrix_choices(tmp_path: Path, matrix: list[str], problem: str) -> None:
    with pytest.raises(PlanError, match="^" + problem.replace("|", r"\|")):
        scenario_plan(write(tmp_path, MATRIX), matrix)


def test_matrix_of_a_file_without_one(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="scenario 'explore' has no matrix"):
        scenario_plan(write(tmp_path, EXPLORE), ["skrs=1"])


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--scenario", "{file}", "--skrs", "3"], "--skrs: the scenario file declares"),
        (["--scenario", "{file}", "--health-interval", "1"], "--health-interval: the scenario"),
        (["--matrix", "skrs=1"], "--matrix selects an instance of a --scenario file"),
        (["--scenario", "{file}", "--matrix", "x=1"], "--matrix x: the matrix has skrs"),
    ],
)
def test_wrong_up_arguments_exit_2_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], problem: str
) -> None:
    file = str(write(tmp_path, MATRIX))
    assert main(["up", "--detach", *(a.replace("{file}", file) for a in argv)]) == 2
    assert f"watcher-harness up: {problem}" in capsys.readouterr().err


def test_invalid_scenario_gives_the_loaders_located_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, EXPLORE.replace("concurrency: 2", "concurency: 2"), "bad.yaml")
    assert main(["up", "--detach", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"{path}:16:9: unknown key 'concurency' in settings.klm; did you mean 'concurrency'?\n"
    )


def test_detached_child_gets_the_same_choice(tmp_path: Path) -> None:
    args = argparse.Namespace(
        scenario=Path("x.yaml"), matrix=["skrs=3"], skrs=None, health_interval=None
    )
    assert _child_args(args) == ["--scenario", str(Path("x.yaml").resolve()), "--matrix", "skrs=3"]
    plain = argparse.Namespace(scenario=None, matrix=[], skrs=None, health_interval=None)
    assert _child_args(plain) == ["--skrs", "2", "--health-interval", "10"]


def test_every_up_option_has_help() -> None:
    commands = argparse.ArgumentParser().add_subparsers()
    up.register(commands)
    for command in ("up", "down"):
        missing = [a.dest for a in commands.choices[command]._actions if not a.help]
        assert missing == [], f"{command}: options without help: {missing}"


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for whoever adopted it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def cli(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_up_scenario_detach_then_down(tmp_path: Path, own_harness_cache: Path) -> None:
    started = time.monotonic()
    path = write(tmp_path, EXPLORE)
    name = "e2e-scenario"
    done = cli("up", "--detach", "--scenario", str(path), "--name", name, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "scenario explore" in done.stdout and "no steps run" in done.stdout
    assert "modules in the KCP catalog: serverless (fast 1.1.0, regular 1.0.0)" in done.stdout
    state = json.loads(state_file(name).read_text())
    try:
        assert set(state["kubeconfigs"]) == {"kcp", "skr-a"}
        read = ("get", "--env", name, "--cluster")
        kyma = cli(*read, "skr-a", "kymas", "default", "-n", "kyma-system", "--query", "spec")
        assert kyma.returncode == 0, kyma.stderr
        assert json.loads(kyma.stdout) == {"channel": "fast", "modules": [{"name": "serverless"}]}
        catalog = cli(*read, "kcp", "modulereleasemetas", "-n", "kcp-system",
                      "--query", "items[].spec.channels")  # fmt: skip
        assert catalog.returncode == 0, catalog.stderr
        assert json.loads(catalog.stdout) == [
            [{"channel": "fast", "version": "1.1.0"}, {"channel": "regular", "version": "1.0.0"}]
        ]
        deadline = time.monotonic() + 30  # the module enabled in the SKR Kyma: a Manifest
        manifests: list[str] = []
        while time.monotonic() < deadline and not manifests:
            got = cli(*read, "kcp", "manifests", "-n", "kcp-system", "--query",
                      "items[?status.state=='Ready'].metadata.name")  # fmt: skip
            assert got.returncode == 0, got.stderr
            manifests = json.loads(got.stdout)
            time.sleep(0.3)
        assert manifests == ["kyma-skr-a-serverless"]
    finally:
        down = cli("down", name)
    assert down.returncode == 0, down.stderr
    assert not state_file(name).exists()
    assert not running(int(state["pid"]))
    assert not any(Path(p).exists() for p in state["kubeconfigs"].values())
    print(f"e2e up --scenario: {time.monotonic() - started:.1f} s")
