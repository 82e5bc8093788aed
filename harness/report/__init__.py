"""Run reports: a model filled during the run, rendered by pure writers.

Modules, in the order a run uses them:

* ``model`` — ``RunReport`` and its parts: frozen pydantic dataclasses, exact JSON form
* ``builder`` — ``ReportBuilder``: filled during the run, ``build()`` → ``RunReport``
* ``stats`` — percentiles and latency summaries
* ``plot`` — PNG charts: latency histogram, reusable bar and line charts
* ``junit`` / ``html`` — pure writers: report (+ log text, images) → text
  (``html`` draws each scenario with ``html_scenario``, values written by ``html_format``)
* ``writer`` — ``write_reports``: process log tails read, files on disk (index.html,
  report.json, JUnit)
"""

from harness.report.builder import ReportBuilder, ScenarioBuilder
from harness.report.model import (
    Attachment,
    AttemptReport,
    Branch,
    ExpectationResult,
    MachineInfo,
    ProcessInfo,
    ReportError,
    ReportFormatError,
    RunReport,
    ScenarioReport,
    Status,
    StepReport,
    TimelineEntry,
    TimelineKind,
    expectation_id,
)
from harness.report.writer import WrittenReports, write_reports

__all__ = [
    "Attachment",
    "AttemptReport",
    "Branch",
    "ExpectationResult",
    "MachineInfo",
    "ProcessInfo",
    "ReportBuilder",
    "ReportError",
    "ReportFormatError",
    "RunReport",
    "ScenarioBuilder",
    "ScenarioReport",
    "Status",
    "StepReport",
    "TimelineEntry",
    "TimelineKind",
    "WrittenReports",
    "expectation_id",
    "write_reports",
]
