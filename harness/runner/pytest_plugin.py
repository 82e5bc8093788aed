"""Scenario files as pytest items: ``pytest -n auto -m e2e scenarios/``.

``scenarios/conftest.py`` imports the hooks below. Each ``*.yaml`` / ``*.yml`` file is one
item named after its scenario, marked ``e2e`` and given the scenario's timeout plus time
for the environment; an invalid file is a collection error showing its located lines; a
failed scenario shows its failed steps and expectations (expected vs actual), not a
traceback. With ``--scenario-report-dir DIR`` every item writes its part of the report
(process logs under ``DIR/logs``) and the controlling process (also under xdist) merges
the parts into ``DIR/index.html`` and ``DIR/report.json`` at the end.

``--cluster-backend local|kubeconfig|kind`` (with ``--cluster-kubeconfig FILE[:FILE]`` and
``--cluster-contexts kcp=CTX,skr-a=CTX``) runs every file on that backend, over
``WATCHER_HARNESS_*`` and the files' own ``backend``. A scenario the backend cannot run
(it stops API servers; kind without Docker) is skipped with the reason.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.clusters.selection import BackendOverride, BackendSelectionError, choose_backend
from harness.report import ReportBuilder, RunReport, ScenarioReport, write_reports
from harness.report.writer import write_text_atomic
from harness.runner.errors import BackendUnsupported
from harness.runner.run import new_run_id
from harness.runner.scenario import RunOptions, run_scenario
from harness.runner.spec import scenario_backend
from harness.runner.summary import failure_lines
from harness.scenario import InvalidScenario, Scenario, load_scenario

ENVIRONMENT_MARGIN = 120.0
"""Seconds on top of a scenario's timeout for starting and stopping its environment."""
PARTS = "parts"
OPTION = "--scenario-report-dir"


class ScenarioFailed(Exception):
    """A scenario did not pass; carries its report for ``repr_failure``."""

    def __init__(self, report: ScenarioReport) -> None:
        self.report = report
        super().__init__(f"scenario {report.name} {report.status.value}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        default=None,
        metavar="DIR",
        help="write the scenarios' HTML/JSON report (and process logs) into DIR",
    )
    parser.addoption(
        "--cluster-backend",
        default=None,
        choices=("local", "kubeconfig", "kind"),
        help="run every scenario on this cluster backend (default: WATCHER_HARNESS_BACKEND, "
        "else the file's backend)",
    )
    parser.addoption(
        "--cluster-kubeconfig",
        default=None,
        metavar="FILE[:FILE]",
        help="kubeconfig files for the kubeconfig backend (default: WATCHER_HARNESS_KUBECONFIG)",
    )
    parser.addoption(
        "--cluster-contexts",
        default=None,
        metavar="kcp=CTX,skr-a=CTX",
        help="context per cluster for the kubeconfig backend (default: named like the cluster)",
    )
    parser.addoption(
        "--cluster-host-address",
        default=None,
        metavar="ADDRESS",
        help="address the API servers (and in-cluster webhooks) use to reach this host "
        "(default: WATCHER_HARNESS_HOST_ADDRESS, kind: its network's gateway, else 127.0.0.1)",
    )
    parser.addoption(
        "--cluster-webhook",
        default=None,
        choices=("host", "in-cluster"),
        help="where the SKR webhook runs (default: WATCHER_HARNESS_WEBHOOK_MODE, else host)",
    )


def backend_override(config: pytest.Config) -> BackendOverride:
    return BackendOverride(
        name=config.getoption("--cluster-backend", default=None),
        kubeconfig=config.getoption("--cluster-kubeconfig", default=None),
        contexts=config.getoption("--cluster-contexts", default=None),
        host_address=config.getoption("--cluster-host-address", default=None),
        webhook_mode=config.getoption("--cluster-webhook", default=None),
    )


def _skip_reason(scenario: Scenario, override: BackendOverride) -> str | None:
    """Why this scenario cannot run on the chosen backend here (None: it can)."""
    try:
        choice = scenario_backend(
            scenario, choose_backend(scenario.backend.value, override=override)
        )
    except BackendUnsupported as exc:
        return str(exc)
    except BackendSelectionError:
        return None  # run_scenario reports it as an error
    if choice.name == "kind":
        from harness.clusters.kind import KindUnavailable, SubprocessRunner, preflight

        try:
            asyncio.run(preflight(SubprocessRunner()))
        except KindUnavailable as exc:
            return str(exc)
    return None


def _report_dir(config: pytest.Config) -> Path | None:
    value = config.getoption(OPTION, default=None)
    return Path(value) if value else None


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    directory = _report_dir(session.config)
    if directory is not None and _is_controller(session.config):
        shutil.rmtree(directory / PARTS, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Merge the items' report parts into one report (controller only)."""
    directory = _report_dir(session.config)
    if directory is None or not _is_controller(session.config):
        return
    parts = sorted((directory / PARTS).glob("*.json"))
    if not parts:
        return
    reports = [RunReport.from_json(p.read_text(encoding="utf-8")) for p in parts]
    merged = RunReport(
        run_id=reports[0].run_id,
        started_at=min(r.started_at for r in reports),
        finished_at=max(r.finished_at for r in reports),
        machine=reports[0].machine,
        scenarios=tuple(s for r in reports for s in r.scenarios),
    )
    written = write_reports(merged, report_dir=directory)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and written.html is not None:
        reporter.write_line(f"scenario report: {written.html}")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix in (".yaml", ".yml"):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        try:
            scenario = load_scenario(self.path)
        except InvalidScenario as exc:
            raise self.CollectError("\n".join(e.line() for e in exc.errors)) from None
        item = ScenarioItem.from_parent(self, name=scenario.name, scenario=scenario)
        item.add_marker(pytest.mark.e2e)
        item.add_marker(pytest.mark.timeout(scenario.timeout + ENVIRONMENT_MARGIN))
        yield item


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario

    def runtest(self) -> None:
        directory = _report_dir(self.config)
        override = backend_override(self.config)
        reason = _skip_reason(self.scenario, override)
        if reason is not None:
            pytest.skip(reason)
        run_id = self.config.stash.get(_RUN_ID, None) or new_run_id()
        builder = ReportBuilder(run_id)
        options = RunOptions(log_dir=directory / "logs" if directory else None, backend=override)
        report = asyncio.run(
            run_scenario(
                self.scenario, builder.scenario(self.scenario.name, str(self.path)), options
            )
        )
        if directory is not None:
            write_text_atomic(
                directory / PARTS / f"{self.scenario.name}.json", builder.build().to_json()
            )
        if not report.ok:
            raise ScenarioFailed(report)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        if isinstance(excinfo.value, ScenarioFailed):
            report = excinfo.value.report
            return "\n".join(
                [f"scenario {report.name} {report.status.value}:", *failure_lines(report)]
            )
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.scenario.name}"


_RUN_ID = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    config.stash[_RUN_ID] = (
        str(workerinput.get("testrunuid", ""))[:12] if workerinput else new_run_id()
    )
