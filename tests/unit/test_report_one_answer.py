"""Issue #38: the Python report headlines the recommended estimate (as ``hero report`` and ``hero estimate`` do),
with its status; a report built from a calibration file shows the saved dependence test, failed, as a failure
and a warning (it used to say "No warnings" and show every check green)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import heroeval as he
from heroeval.report import build_report, report_data
from heroeval.workflows.demo import example_paths


@pytest.fixture(scope="module")
def example() -> tuple[he.AnnotationSet, he.AnnotationSet, he.Calibration]:
    ex = example_paths()
    hist = he.read_annotations(ex["history"], gold=ex["gold"])
    cur = he.read_annotations(ex["current"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = he.calibrate(hist, checks=True)
    return hist, cur, cal


def test_python_report_headlines_the_recommended_estimate(
        example: tuple[he.AnnotationSet, he.AnnotationSet, he.Calibration]) -> None:
    hist, cur, cal = example
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = report_data(cur, cal, history=hist)
        auto = he.estimate(cur, cal, method="auto", history=hist)
    assert d["primary"] == "recommended"
    shown = d["rounds"]["current"]["estimates"]["recommended"]
    rec = d["rounds"]["current"]["recommendation"]
    assert shown["estimate"] == auto.estimate and rec["method"] == auto.details["auto"]["method"]
    assert shown["status"] == rec["status"] == auto.details["auto"]["status"]
    page = build_report(cur, cal, history=hist)
    assert page.index('data-method="recommended"') < page.index('data-method="hero1"')


def test_a_calibration_file_keeps_its_failed_dependence_test(
        example: tuple[he.AnnotationSet, he.AnnotationSet, he.Calibration], tmp_path: Path) -> None:
    _, cur, cal = example
    assert cal.checks is not None and cal.checks.dependence is not None
    p = cal.checks.dependence.p_value
    assert p < 1e-10  # the bundled judges err together
    cal.save(tmp_path / "cal.json")
    loaded = he.load_calibration(tmp_path / "cal.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = report_data(cur, loaded)
    rows = [r for r in d["rounds"]["current"]["diagnostics"] if r["name"].startswith("Labelers err independently")]
    assert len(rows) == 1 and rows[0]["ok"] is False and rows[0]["value"] == pytest.approx(p, rel=1e-9)
    assert any("Model checks saved with the calibration" in w for w in d["warnings"])
    page = build_report(cur, loaded)
    assert "No warnings" not in page and "agree beyond independence" in page


def test_no_saved_checks_no_row(example: tuple[he.AnnotationSet, he.AnnotationSet, he.Calibration]) -> None:
    hist, cur, _ = example
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = he.calibrate(hist)
        d = report_data(cur, plain)
    assert not any(r["name"].startswith("Labelers err independently") for r in d["rounds"]["current"]["diagnostics"])
    assert not any("Model checks saved" in w for w in d["warnings"])
