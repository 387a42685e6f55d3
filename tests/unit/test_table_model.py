"""One table model (issue #37 item 2): ``EstimateCollection.table()`` is what ``summary()``, ``to_frame()``,
``_repr_html_``, the terminal table and the HTML report's data render, so a round reads the same estimate,
interval, interval method and status in each; the recommended row carries the recommendation's status."""

from __future__ import annotations

import dataclasses
import io
import math
import warnings

import pytest
from rich.console import Console

import heroeval as he
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.records import Recommendation
from heroeval.estimators.table import FRAME_COLUMNS, EstimatesTable
from heroeval.report.page_data import report_data
from heroeval.report.terminal import estimates_table
from tests.conftest import Sim


@pytest.fixture(scope="module")
def unreliable(sim: Sim, calibration: he.Calibration) -> EstimateCollection:
    """The collection of ``estimate(recommend=True)`` with its recommendation marked unreliable (as the model
    checks mark it when the labelers' model is wrong)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = he.estimate(sim.current, calibration, method="all", recommend=True, history=sim.history)
    assert isinstance(res, EstimateCollection) and res.recommended is not None
    rec = dataclasses.replace(res.recommended, status="unreliable")
    return dataclasses.replace(res, recommended=rec)


def test_rows_are_the_results(unreliable: EstimateCollection) -> None:
    tab = unreliable.table()
    assert isinstance(tab, EstimatesTable)
    rec = unreliable.recommended
    assert isinstance(rec, Recommendation)
    assert tab.rows[0].key == "recommended" and tab.recommended is tab.rows[0]
    assert [r.key for r in tab.methods] == list(unreliable.results)
    for row in tab.rows:
        r = rec.result if row.recommended else unreliable.results[row.key]
        ci = r.confidence_interval(0.95)
        assert (row.estimate, row.ci_low, row.ci_high, row.ci_method) == (r.estimate, ci.low, ci.high, ci.method)
        assert row.status == ("unreliable" if row.recommended else r.status)
    assert tab.reason == rec.reason


def test_every_view_says_unreliable(unreliable: EstimateCollection) -> None:
    tab = unreliable.table()
    rec_row = tab.recommended
    assert rec_row is not None
    frame = unreliable.to_frame()
    assert list(frame.columns) == list(FRAME_COLUMNS[1:])
    assert frame.loc["recommended", "status"] == "unreliable"
    assert frame.loc["recommended", "ci_method"] == rec_row.ci_method
    for key, row in frame.iterrows():
        r = tab.row(str(key))
        assert row["estimate"] == r.estimate and row["ci_low"] == r.ci_low and row["ci_high"] == r.ci_high
    text = unreliable.summary()
    assert text.startswith(f"UNRELIABLE: recommended: {rec_row.title.split('(')[1].split(',')[0].rstrip(')')}")
    assert f"status {rec_row.status}" in text and f"[{rec_row.ci_low:.4f}, {rec_row.ci_high:.4f}]" in text
    html = unreliable._repr_html_()
    assert "unreliable" in html and "why recommended" in html
    buf = io.StringIO()
    Console(file=buf, width=250, color_system=None).print(estimates_table(unreliable))
    out = buf.getvalue()
    assert "UNRELIABLE: recommended" in out and f"{rec_row.estimate:.4f}" in out
    assert tab.interval_header() in out


def test_report_data_is_the_table(unreliable: EstimateCollection, sim: Sim, calibration: he.Calibration) -> None:
    d = report_data(sim.current, calibration, unreliable)
    shown = d["rounds"]["current"]["estimates"]
    for row in unreliable.table().rows:
        got = shown[row.key]
        assert got["status"] == row.status and got["label"] == row.title
        for f in ("estimate", "ci_low", "ci_high"):
            want = getattr(row, f)
            assert (got[f] is None and not math.isfinite(want)) or got[f] == want, (row.key, f)
    assert shown["recommended"]["status"] == "unreliable"


def test_interval_header_names_a_mixed_method_as_asked() -> None:
    """``95% CI (logit)`` only when every row's interval is a logit interval; else the method asked for."""
    row = he.EstimateResult("hero1", 0.3, 100, 300, 3).row()  # no influence: a logit interval of NaNs
    tab = EstimatesTable((row, dataclasses.replace(row, key="x", ci_method="score")), 0.95, "auto")
    assert tab.interval_header() == "95% CI (auto)"
    assert EstimatesTable((row,), 0.9, "auto").interval_header() == "90% CI (logit)"
