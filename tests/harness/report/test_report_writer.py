"""write_reports puts the HTML, JSON and JUnit files where asked."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from harness.report import RunReport, write_reports
from harness.report.plot import PNG_SIGNATURE


def test_report_dir_junit_and_json(sample_report: RunReport, tmp_path: Path) -> None:
    out = tmp_path / "out" / "run-1"
    written = write_reports(
        sample_report,
        report_dir=out,
        junit=tmp_path / "junit" / "report.xml",
        json_path=tmp_path / "copy.json",
    )
    assert written.html == out / "index.html"
    assert written.junit == tmp_path / "junit" / "report.xml"
    assert written.json == tmp_path / "copy.json"
    assert sorted(p.name for p in out.iterdir()) == ["index.html", "report.json"]

    page = (out / "index.html").read_text()
    assert "data:image/png;base64," in page  # the spec-watch histogram, embedded
    assert "line 299: upstream ok" in page  # log tail of the failing scenario
    assert RunReport.from_json((out / "report.json").read_text()) == sample_report
    assert (tmp_path / "copy.json").read_text() == (out / "report.json").read_text()
    root = ET.parse(tmp_path / "junit" / "report.xml").getroot()
    assert root.get("tests") == "5"
    assert (out / "index.html").stat().st_mode & 0o044  # readable by others, unlike mkstemp
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_nothing_asked_nothing_written(sample_report: RunReport, tmp_path: Path) -> None:
    written = write_reports(sample_report)
    assert (written.html, written.json, written.junit) == (None, None, None)


def test_histogram_bytes_are_png(sample_report: RunReport) -> None:
    from harness.report.writer import histograms

    images = histograms(sample_report)
    assert set(images) == {"spec-watch"}
    assert images["spec-watch"].startswith(PNG_SIGNATURE)
