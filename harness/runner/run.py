"""Running several scenarios one after the other into one run report, and writing it."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.report import ReportBuilder, RunReport, ScenarioReport, WrittenReports, write_reports
from harness.runner.scenario import RunOptions, run_scenario
from harness.scenario import Scenario


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


@dataclass(frozen=True)
class RunResult:
    report: RunReport
    written: WrittenReports


async def run_all(
    scenarios: Sequence[Scenario],
    *,
    run_id: str | None = None,
    report_dir: Path | None = None,
    junit: Path | None = None,
    keep_going: bool = True,
    options: RunOptions | None = None,
    on_start: Callable[[Scenario], None] | None = None,
    on_done: Callable[[ScenarioReport], None] | None = None,
) -> RunResult:
    """Run ``scenarios`` in order; stop after the first that fails unless ``keep_going``.
    Process logs go to ``report_dir/logs/<scenario>`` unless ``options`` says otherwise."""
    builder = ReportBuilder(run_id or new_run_id())
    if options is None:
        options = RunOptions(log_dir=report_dir / "logs" if report_dir else None)
    for scenario in scenarios:
        if on_start is not None:
            on_start(scenario)
        result = await run_scenario(
            scenario, builder.scenario(scenario.name, scenario.source or ""), options
        )
        if on_done is not None:
            on_done(result)
        if not result.ok and not keep_going:
            break
    report = builder.build()
    written = write_reports(report, report_dir=report_dir, junit=junit)
    return RunResult(report, written)
