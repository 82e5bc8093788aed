"""Scenario files as pytest items: ``pytest -n auto -m e2e scenarios/``.

``scenarios/conftest.py`` imports the hooks below. Each file gives one item per scenario
instance, marked ``e2e`` and one marker per tag (``-`` → ``_``; registered, so
``--strict-markers`` passes) and given the scenario's timeout plus time for the
environment. A failed scenario shows its failed steps and expectations, not a traceback;
one that checked nothing is a pytest skip with the reason. Report parts written by each
item (also under xdist) are merged by the controlling process at the end. The options
(``--scenario-selector``, ``--scenario-retries``, ``--cluster-backend``, ``--cluster-pool``)
mean what ``watcher-harness run``'s do (docs/scenarios.md); each item plans its scenario
once (:func:`harness.runner.plan.plan_scenario`) and skips it with the reason when the
backend cannot run it or lacks its tools here.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.clusters import pool as cluster_pool
from harness.clusters.selection import BACKEND_FLAGS, BackendOverride, override_from
from harness.report import ReportBuilder, RunReport, ScenarioReport, Status, write_reports
from harness.report.writer import write_text_atomic
from harness.runner.exclusive import measures_latency
from harness.runner.plan import missing_tools, plan_scenario
from harness.runner.run import new_run_id, run_with_retries
from harness.runner.scenario import RunOptions
from harness.runner.summary import failure_lines
from harness.scenario import InvalidScenario, Scenario, load_scenario_instances
from harness.scenario.select import SYNTAX, InvalidSelector, Selector, parse_selector, selected

ENVIRONMENT_MARGIN = 120.0
"""Seconds on top of a scenario's timeout for starting and stopping its environment."""
PARTS = "parts"
OPTION = "--scenario-report-dir"
SELECTOR_OPTION = "--scenario-selector"
RETRIES_OPTION = "--scenario-retries"
POOL_OPTION = "--cluster-pool"
_POOL = pytest.StashKey[cluster_pool.ClusterPool]()
E2E_MARKER = "e2e: needs real clusters (kube-apiserver, etcd) and Envoy"
RESERVED_MARKERS = frozenset(
    {
        "e2e",
        "exclusive",
        "filterwarnings",
        "parametrize",
        "skip",
        "skipif",
        "timeout",
        "usefixtures",
        "xfail",
    }
)
"""Markers with a meaning of their own: a tag named like one gets ``tag_<name>``."""
FLAKY_PROPERTY = "flaky"
"""The item's user property (also in pytest's JUnit XML) of a scenario that passed on a retry."""


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
        SELECTOR_OPTION,
        action="append",
        default=[],
        metavar="EXPR",
        help=f"run only the scenarios matching EXPR: {SYNTAX} (shell-style patterns); "
        "repeat to require several",
    )
    parser.addoption(
        RETRIES_OPTION,
        type=int,
        default=0,
        metavar="N",
        help="run a failed scenario again, from fresh clusters, up to N more times; passing "
        "on a retry passes and is reported flaky (default: 0)",
    )
    parser.addoption(
        POOL_OPTION,
        action="store_true",
        help="the scenarios of each process share their local API servers, reset in between "
        "(harness/clusters/pool.py)",
    )
    for flag in BACKEND_FLAGS:
        parser.addoption(
            flag.pytest_flag,
            default=None,
            metavar=flag.metavar,
            choices=flag.choices,
            help=flag.help,
        )


def backend_override(config: pytest.Config) -> BackendOverride:
    return override_from(lambda flag: config.getoption(flag.pytest_flag, default=None))


def tag_marker(tag: str) -> str:
    """The pytest marker of a scenario tag: ``cert-rotation`` → ``cert_rotation``."""
    name = tag.replace("-", "_")
    return f"tag_{name}" if name in RESERVED_MARKERS else name


def _register_marker(config: pytest.Config, name: str, line: str) -> None:
    registered = config.stash.setdefault(_MARKERS, set())
    if name not in registered:
        registered.add(name)
        config.addinivalue_line("markers", f"{name}: {line}")


def _report_dir(config: pytest.Config) -> Path | None:
    value = config.getoption(OPTION, default=None)
    return Path(value) if value else None


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session: pytest.Session) -> None:
    directory = _report_dir(session.config)
    if directory is not None and _is_controller(session.config):
        shutil.rmtree(directory / PARTS, ignore_errors=True)


def session_pool(config: pytest.Config) -> cluster_pool.ClusterPool | None:
    """This process's cluster pool under ``--cluster-pool`` (started on first use); e2e
    tests that bring up environments use it too (the root ``conftest.py``)."""
    if not config.getoption(POOL_OPTION, default=False):
        return None
    if _POOL not in config.stash:
        from harness.clusters.binaries import ensure_binaries

        config.stash[_POOL] = cluster_pool.ClusterPool(ensure_binaries())
    return config.stash[_POOL]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop this process's cluster pool; merge the items' report parts into one report
    (controller only)."""
    pool = session.config.stash.get(_POOL, None)
    if pool is not None:
        del session.config.stash[_POOL]
        pool.close()
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
            instances = load_scenario_instances(self.path)
        except InvalidScenario as exc:
            raise self.CollectError("\n".join(e.line() for e in exc.errors)) from None
        attempts = 1 + _retries(self.config)
        for scenario in instances:
            item = ScenarioItem.from_parent(self, name=scenario.name, scenario=scenario)
            item.add_marker(pytest.mark.e2e)
            for tag in scenario.tags:
                name = tag_marker(tag)
                _register_marker(self.config, name, f"scenarios tagged {tag}")
                item.add_marker(getattr(pytest.mark, name))
            seconds = (scenario.timeout + ENVIRONMENT_MARGIN) * attempts
            item.add_marker(pytest.mark.timeout(seconds))
            yield item


class ScenarioItem(pytest.Item):
    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        if measures_latency(scenario):
            self.add_marker("exclusive")

    def runtest(self) -> None:
        directory = _report_dir(self.config)
        plan = plan_scenario(self.scenario, backend_override(self.config))
        skip = plan.skip_reason or asyncio.run(missing_tools([plan]))[0]
        if skip is not None:
            pytest.skip(skip)
        run_id = self.config.stash.get(_RUN_ID, None) or new_run_id()
        builder = ReportBuilder(run_id)
        options = RunOptions(log_dir=directory / "logs" if directory else None)
        token = cluster_pool.CURRENT.set(session_pool(self.config))
        try:
            report = asyncio.run(
                run_with_retries(plan, builder, options, retries=_retries(self.config))
            )
        finally:
            cluster_pool.CURRENT.reset(token)
        if directory is not None:
            write_text_atomic(
                directory / PARTS / f"{self.scenario.name}.json", builder.build().to_json()
            )
        if report.attempts:
            self.user_properties.append(("attempts", report.retry + 1))
            self.add_report_section("call", "scenario", "\n".join(failure_lines(report)))
        if report.status is Status.FLAKY:
            self.user_properties.append((FLAKY_PROPERTY, f"passed on retry {report.retry}"))
        if report.status is Status.SKIPPED:
            pytest.skip(report.error or "skipped")  # e.g. it checked nothing
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
_SELECTORS = pytest.StashKey[tuple[Selector, ...]]()
_RETRIES = pytest.StashKey[int]()
_MARKERS = pytest.StashKey[set[str]]()
HOOKS = "watcher-harness-scenarios"
"""Name of the plugin object with the hooks ``scenarios/conftest.py`` need not import."""


def _retries(config: pytest.Config) -> int:
    return config.stash.get(_RETRIES, 0)


def _flaky(report: pytest.TestReport | pytest.CollectReport) -> str | None:
    """``passed on retry k`` for the passed call of a flaky scenario, else None."""
    if not isinstance(report, pytest.TestReport) or report.when != "call" or not report.passed:
        return None
    value = dict(report.user_properties).get(FLAKY_PROPERTY)
    return None if value is None else str(value)


class ScenarioHooks:
    """Selection, and what the terminal shows of flaky scenarios; registered by
    :func:`pytest_configure`, so a conftest importing the module's hooks gets these too."""

    def __init__(self) -> None:
        self.flaky: list[str] = []

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        selectors = config.stash.get(_SELECTORS, ())
        if not selectors:
            return
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            wanted = not isinstance(item, ScenarioItem) or selected(item.scenario, selectors)
            (keep if wanted else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        flaky = _flaky(report)
        if flaky is not None:
            name = report.nodeid.rpartition("::")[2]
            self.flaky.append(f"FLAKY {name} {flaky}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(
        self, report: pytest.TestReport | pytest.CollectReport, config: pytest.Config
    ) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        flaky = _flaky(report)
        if flaky is not None:
            return "passed", "f", (f"PASSED (flaky: {flaky})", {"purple": True})
        return None

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.flaky:
            terminalreporter.section("flaky scenarios", purple=True)
            for line in self.flaky:
                terminalreporter.write_line(line, purple=True)


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    config.stash[_RUN_ID] = (
        str(workerinput.get("testrunuid", ""))[:12] if workerinput else new_run_id()
    )
    if not any(line.split(":")[0].strip() == "e2e" for line in config.getini("markers")):
        config.addinivalue_line("markers", E2E_MARKER)
    try:
        config.stash[_SELECTORS] = tuple(
            parse_selector(text) for text in config.getoption(SELECTOR_OPTION, default=None) or ()
        )
    except InvalidSelector as exc:
        raise pytest.UsageError(f"{SELECTOR_OPTION}: {exc}") from None
    retries = config.getoption(RETRIES_OPTION, default=None) or 0
    if retries < 0:
        raise pytest.UsageError(
            f"{RETRIES_OPTION}: {retries} is not a number of retries (0, 1, ...)"
        )
    config.stash[_RETRIES] = retries
    if not config.pluginmanager.has_plugin(HOOKS):
        config.pluginmanager.register(ScenarioHooks(), HOOKS)
