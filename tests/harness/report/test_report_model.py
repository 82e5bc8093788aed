"""The report model: builder behaviour and an exact JSON round trip."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from report_kit import timeline_entries

from harness.report import (
    Branch,
    ExpectationResult,
    MachineInfo,
    ProcessInfo,
    ReportBuilder,
    ReportFormatError,
    RunReport,
    ScenarioReport,
    Status,
    StepReport,
)
from harness.report.stats import LatencySummary, percentile

text = st.text(max_size=20)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
durations = st.floats(min_value=0, max_value=1e6, allow_nan=False)
opt_int = st.none() | st.integers(min_value=-(2**31), max_value=2**31)

steps = st.builds(
    StepReport,
    name=text,
    status=st.sampled_from(Status),
    duration=durations,
    branch=st.sampled_from(Branch),
    error=st.none() | text,
)
expectations = st.builds(
    ExpectationResult,
    id=text,
    kind=text,
    description=text,
    expected=text,
    actual=text,
    passed=st.booleans(),
    duration=durations,
)
processes = st.builds(
    ProcessInfo,
    name=text,
    pid=opt_int,
    argv=st.lists(text, max_size=3).map(tuple),
    exit_code=opt_int,
    log_path=st.text(st.characters(exclude_characters="\x00"), min_size=1, max_size=20).map(Path),
)
scenarios = st.builds(
    ScenarioReport,
    name=text,
    file=text,
    status=st.sampled_from(Status),
    started_at=finite,
    duration=durations,
    error=st.none() | text,
    steps=st.lists(steps, max_size=3).map(tuple),
    expectations=st.lists(expectations, max_size=3).map(tuple),
    timeline=st.lists(timeline_entries, max_size=3).map(tuple),
    latencies_ms=st.lists(finite, max_size=5).map(tuple),
    processes=st.lists(processes, max_size=2).map(tuple),
    metrics=st.dictionaries(text, finite, max_size=3),
)
reports = st.builds(
    RunReport,
    run_id=text,
    started_at=finite,
    finished_at=finite,
    machine=st.builds(
        MachineInfo,
        cores=st.integers(1, 512),
        python=text,
        versions=st.dictionaries(text, text, max_size=3),
    ),
    scenarios=st.lists(scenarios, max_size=3).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(reports)
def test_json_round_trip_is_exact(report: RunReport) -> None:
    assert RunReport.from_json(report.to_json()) == report
    assert RunReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report


def test_ints_where_floats_belong_are_accepted() -> None:
    d = RunReport("r", 1.0, 2.0, MachineInfo(cores=2, python="3.11")).to_dict()
    d["started_at"] = 1
    assert RunReport.from_dict(d).started_at == 1.0


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("run_id"), "run_id: Field required"),
        (lambda d: d.update(started_at="soon"), "started_at: Input should be a valid number"),
        (lambda d: d["scenarios"][0].update(status="green"), "scenarios.0.status: Input should"),
        (lambda d: d.update(schema=99), "schema 99 is not supported"),
    ],
)
def test_bad_json_names_the_field(mutate: object, message: str) -> None:
    builder = ReportBuilder("r", machine=MachineInfo(cores=1, python="3.11"))
    builder.scenario("s", "s.yaml").finish()
    d = builder.build().to_dict()
    assert callable(mutate)
    mutate(d)
    with pytest.raises(ReportFormatError, match=message.replace("(", r"\(")):
        RunReport.from_dict(d)


def test_a_report_written_by_the_hand_written_serialiser_reads_and_writes_back_the_same() -> None:
    """report_v1.json: ``to_json(indent=None)`` of the model before it used pydantic, with
    a flaky scenario (an attempt with a failed step, expectation, attachment, process and
    timeline), a skipped one and one that errored."""
    text = (Path(__file__).parent / "report_v1.json").read_text(encoding="utf-8").rstrip("\n")
    report = RunReport.from_json(text)
    assert report.to_json(indent=None) == text
    flaky = report.scenarios[0]
    assert [s.status for s in report.scenarios] == [Status.FLAKY, Status.SKIPPED, Status.ERROR]
    (attempt,) = flaky.attempts
    assert attempt.failed_expectations[0].attachments[0].truncated
    assert attempt.processes[0].log_path == Path("logs/spec-watch/gateway.log")
    assert flaky.steps[1].branch is Branch.FINALLY and flaky.latencies_ms == (12.5, 48.0, 3.0)


def test_not_json_is_a_report_format_error() -> None:
    with pytest.raises(ReportFormatError, match="not valid JSON"):
        RunReport.from_json("{")
    with pytest.raises(ValueError):  # JSON has no NaN
        RunReport("r", math.nan, 0.0, MachineInfo(cores=1, python="3")).to_json()


def test_lists_given_to_frozen_models_become_tuples() -> None:
    s = ScenarioReport("s", "f", Status.PASSED, 0.0, 1.0, steps=[], latencies_ms=[1.0])  # type: ignore[arg-type]
    assert s.latencies_ms == (1.0,)
    assert hash(ProcessInfo("p", None, ["a"], None, "log"))  # type: ignore[arg-type]


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([3.0], 99) == 3.0
    assert LatencySummary.of([]) is None
    summary = LatencySummary.of([5.0, 1.0, 3.0])
    assert summary is not None and (summary.p50, summary.max) == (3.0, 5.0)
    with pytest.raises(ValueError):
        percentile([], 50)
