"""The HTML page: self-contained, every expectation shown, everything escaped."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from harness.report import ReportBuilder, RunReport, Status, TimelineKind
from harness.report.html import render_html
from harness.report.html_format import plain
from harness.report.plot import PNG_SIGNATURE
from harness.report.writer import read_log_tails


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)


def _parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    return parser


def test_every_expectation_with_expected_and_actual(sample_report: RunReport) -> None:
    page = render_html(sample_report)
    for scenario in sample_report.scenarios:
        for e in scenario.expectations:
            assert f'id="{e.id}"' in page
            assert e.description.replace('"', "&quot;") in page
    assert '<tr class="fail" id="kcp-outage/expect-nothing-lost/1-events">' in page
    assert "10 (missing: default/ConfigMap/cm-3, default/ConfigMap/cm-7)" in page
    assert "Failures (2)" in page  # one failed expectation, one errored scenario


def test_script_in_object_names_is_escaped(sample_report: RunReport) -> None:
    page = render_html(sample_report)
    assert "<script" not in page
    assert "default/ConfigMap/&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "script" not in _parse(page).tags


def test_self_contained_no_network(sample_report: RunReport) -> None:
    png = PNG_SIGNATURE + b"fake"
    page = render_html(sample_report, histograms={"spec-watch": png})
    parser = _parse(page)
    urls = [v or "" for k, v in parser.attrs if k in ("src", "href")]
    assert urls, "expected the histogram and the links"
    for url in urls:
        assert url.startswith(("#", "data:image/png;base64,", "file:///")), url
    assert "data:image/png;base64,iVBORw0KGgpmYWtl" in page
    assert "<link" not in page


def test_log_tails_only_for_scenarios_that_did_not_pass(sample_report: RunReport) -> None:
    tails = read_log_tails(sample_report, lines=5)
    assert set(tails) == {sample_report.scenarios[1].processes[0].log_path}
    page = render_html(sample_report, log_tails=tails)
    assert "gateway — last 5 lines" in page
    assert "line 299: upstream ok\nboom" in page  # ANSI colour stripped
    assert "listener — log not available" in page
    assert "-15 (SIGTERM)" in page


def test_timeline_is_capped_with_a_note() -> None:
    builder = ReportBuilder("r", clock=lambda: 100.0)
    s = builder.scenario("burst", "b.yaml")
    for i in range(30):
        s.event(TimelineKind.EVENT, "klm", f"obj-{i}", at=100.0 + i)
    s.finish(Status.PASSED)
    page = render_html(builder.build(), timeline_limit=10)
    assert "Showing the first 10 of 30 entries" in page
    assert "obj-9<" in page and "obj-10<" not in page
    assert len(re.findall(r'<td class="tl-event">', page)) == 10


def test_summary_counts(sample_report: RunReport) -> None:
    page = render_html(sample_report)
    assert "3 scenarios: 1 passed, 1 failed, 1 error" in page
    assert re.search(r"</span>1/2</td>", page)
    assert page.startswith("<!DOCTYPE html>")


def test_plain_strips_ansi_and_controls() -> None:
    assert plain("\x1b[1;31mred\x1b[0m\x07 ok\ttab") == "red ok\ttab"


def test_each_scenarios_cost_is_split_and_the_slowest_stand_out() -> None:
    from harness.report.html import slowest
    from harness.report.model import MachineInfo, ScenarioReport, StepReport

    def scenario(name: str, duration: float, steps: float) -> ScenarioReport:
        step = StepReport("s", Status.PASSED, steps)
        return ScenarioReport(name, f"{name}.yaml", Status.PASSED, 0.0, duration, steps=(step,))

    costs = [("a", 10, 4), ("b", 60, 50), ("c", 20, 5), ("d", 5, 1), ("e", 30, 3), ("f", 8, 2)]
    machine = MachineInfo(cores=2, python="3.11")
    report = RunReport("run", 0.0, 0.0, machine, tuple(scenario(*c) for c in costs))
    assert report.scenarios[1].environment_duration == 10
    assert slowest(report) == {"b", "e", "c"}
    page = render_html(report)
    assert page.count(">slowest</span>") == 3
    assert "2 min 13 s of scenario time, 51 % of it bringing environments" in page
    assert 'title="environment 10.0 s, steps 50.0 s"' in page
    few = RunReport("run", 0.0, 0.0, machine, report.scenarios[:3])
    assert slowest(few) == set()  # too few to single any out
