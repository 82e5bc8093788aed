"""Running several scenarios' plans one after the other into one run report, and writing it.

``retries``: a scenario that failed or errored (not one that was skipped) is run again,
from fresh clusters, up to ``retries`` more times; one that then passes is *flaky*
(:attr:`~harness.report.Status.FLAKY`, which keeps the exit code 0), and every report
keeps the earlier attempts (:class:`~harness.report.AttemptReport`). Attempt *n* > 1
writes its process logs under ``<log dir>/attempt-<n>/<scenario>`` so the logs of the
failed attempts stay as they were.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness.report import (
    ReportBuilder,
    RunReport,
    ScenarioReport,
    Status,
    WrittenReports,
    write_reports,
)
from harness.runner.plan import ScenarioPlan
from harness.runner.scenario import RunOptions, run_scenario
from harness.scenario import Scenario

RETRIED = (Status.FAILED, Status.ERROR)
"""Outcomes run again when retries are left (a skipped scenario is not)."""

OnRetry = Callable[[ScenarioReport, int], None]
"""Called with a failed attempt's report and the number of the attempt about to start."""


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


@dataclass(frozen=True)
class RunResult:
    report: RunReport
    written: WrittenReports


def attempt_options(options: RunOptions, number: int) -> RunOptions:
    """``options`` for attempt ``number`` (1-based): later attempts log elsewhere."""
    if number == 1 or options.log_dir is None:
        return options
    return replace(options, log_dir=options.log_dir / f"attempt-{number}")


async def run_with_retries(
    plan: ScenarioPlan,
    builder: ReportBuilder,
    options: RunOptions,
    *,
    retries: int = 0,
    on_retry: OnRetry | None = None,
) -> ScenarioReport:
    """Run ``plan`` into ``builder``, again (the same plan) after a failure or error while
    ``retries`` last; the last attempt's report, with the earlier ones in ``attempts``."""
    if retries < 0:
        raise ValueError(f"retries must be 0 or more, not {retries}")
    attempt = builder.scenario(plan.scenario.name, plan.scenario.source or "")
    number = 1
    while True:
        result = await run_scenario(plan, attempt, attempt_options(options, number))
        if result.status not in RETRIED or number > retries:
            return result
        number += 1
        if on_retry is not None:
            on_retry(result, number)
        attempt = builder.retry(attempt)


async def run_all(
    plans: Sequence[ScenarioPlan],
    *,
    run_id: str | None = None,
    report_dir: Path | None = None,
    junit: Path | None = None,
    keep_going: bool = True,
    options: RunOptions | None = None,
    retries: int = 0,
    on_start: Callable[[Scenario], None] | None = None,
    on_done: Callable[[ScenarioReport], None] | None = None,
    on_retry: OnRetry | None = None,
) -> RunResult:
    """Run ``plans`` in order; stop after the first that fails (after its retries)
    unless ``keep_going``. Process logs go to ``report_dir/logs/<scenario>`` unless
    ``options`` says otherwise."""
    builder = ReportBuilder(run_id or new_run_id())
    if options is None:
        options = RunOptions(log_dir=report_dir / "logs" if report_dir else None)
    for plan in plans:
        if on_start is not None:
            on_start(plan.scenario)
        result = await run_with_retries(plan, builder, options, retries=retries, on_retry=on_retry)
        if on_done is not None:
            on_done(result)
        if not result.ok and not keep_going:
            break
    report = builder.build()
    written = write_reports(report, report_dir=report_dir, junit=junit)
    return RunResult(report, written)
