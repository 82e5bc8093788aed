"""Choosing the cluster backend from outside the scenario files: pytest's
``--cluster-backend`` and ``watcher-harness run --backend`` (against the fake session)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.clusters.kind import INSTALL_KIND

HERE = Path(__file__).parent
CONFTEST = f"""
import functools
import sys

sys.path.insert(0, {str(HERE)!r})
from runner_fake import FakeSession, opener

import harness.runner.pytest_plugin as plugin
from harness.runner.pytest_plugin import (
    pytest_addoption, pytest_collect_file, pytest_configure, pytest_sessionfinish,
    pytest_sessionstart,
)

plugin.RunOptions = functools.partial(plugin.RunOptions, open_session=opener(FakeSession()))
"""
PLAIN = """name: plain
clusters: {skrs: [{name: skr-a}]}
steps:
  - name: a
    try:
      - wait: 10ms
      - expect: {within: 10ms, events: [{manager: lifecycle-manager, count: {exactly: 0}}]}
"""
STOPS_API_SERVER = """name: stops-api-server
clusters: {skrs: [{name: skr-a}]}
steps: [{name: a, try: [{fault: {target: apiserver/skr-a, action: stop}}]}]
"""


def pytest_run(directory: Path, *args: str, path: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WATCHER_HARNESS_")}
    env["PATH"] = path or env.get("PATH", "")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "e2e", "-rs", *args],
        cwd=directory, capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip


def test_scenarios_stopping_api_servers_are_skipped_off_the_local_backend(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "plain.yaml").write_text(PLAIN)
    (tmp_path / "stops.yaml").write_text(STOPS_API_SERVER)
    kubeconfig = str(tmp_path / "kubeconfig")
    result = pytest_run(
        tmp_path, "--cluster-backend", "kubeconfig", "--cluster-kubeconfig", kubeconfig
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "1 passed, 1 skipped" in out
    assert "the kubeconfig backend does not own the clusters' API server processes" in out
    assert "(fault targets: apiserver/skr-a)" in out


def test_kind_without_the_kind_cli_skips_with_what_to_install(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "plain.yaml").write_text(PLAIN)
    empty = tmp_path / "bin"
    empty.mkdir()
    result = pytest_run(tmp_path, "--cluster-backend", "kind", path=str(empty))
    assert "1 skipped" in result.stdout, result.stdout + result.stderr
    assert "needs the `kind` CLI on PATH" in result.stdout


def test_run_with_kind_missing_exits_3_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.runner.run as run_module

    async def must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("started a run without kind")

    monkeypatch.setattr(run_module, "run_all", must_not_run)
    monkeypatch.setenv("PATH", str(tmp_path))  # no kind, no docker
    (tmp_path / "plain.yaml").write_text(PLAIN)
    code = main(["run", str(tmp_path / "plain.yaml"), "--backend", "kind"])
    _, err = capsys.readouterr()
    assert code == 3
    assert err == f"watcher-harness run: {INSTALL_KIND}\n"


def test_run_reports_a_bad_backend_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHER_HARNESS_BACKEND", "minikube")
    (tmp_path / "plain.yaml").write_text(PLAIN)
    code = main(["run", str(tmp_path / "plain.yaml")])
    _, err = capsys.readouterr()
    assert code == 3
    assert "WATCHER_HARNESS_BACKEND: unknown cluster backend 'minikube'" in err


async def test_run_scenario_reports_a_backend_refusal_as_skipped_with_the_reason() -> None:
    from harness.clusters.selection import BackendOverride
    from harness.report import ReportBuilder, Status
    from harness.runner.plan import plan_scenario
    from harness.runner.scenario import RunOptions, run_scenario
    from harness.scenario import loads_scenario

    def must_not_open(spec: object) -> object:
        raise AssertionError("an environment was opened")

    scenario = loads_scenario(STOPS_API_SERVER)
    plan = plan_scenario(scenario, BackendOverride(name="kubeconfig", kubeconfig="/k"))
    options = RunOptions(open_session=must_not_open)  # type: ignore[arg-type]
    report = await run_scenario(plan, ReportBuilder("r").scenario(scenario.name, ""), options)
    assert report.status is Status.SKIPPED and report.ok
    assert report.error is not None
    assert "the kubeconfig backend does not own the clusters' API server processes" in report.error
