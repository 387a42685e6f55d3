"""Issue #38 (rough edges): the notebook reprs of a recommendation and a drift check are short and readable
(they dumped internal arrays and the whole candidate table)."""

from __future__ import annotations

import warnings

import heroeval as he
from heroeval.estimators.records import DriftCheck, Recommendation
from tests.conftest import Sim


def _records(sim: Sim, calibration: he.Calibration) -> tuple[Recommendation, DriftCheck]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = he.estimate(sim.current, calibration, method="all", recommend=True, history=sim.history)
    assert isinstance(res, he.EstimateCollection)
    assert isinstance(res.recommended, Recommendation) and isinstance(res.drift, DriftCheck)
    return res.recommended, res.drift


def test_recommendation_repr(sim: Sim, calibration: he.Calibration) -> None:
    rec, _ = _records(sim, calibration)
    text = repr(rec)
    assert text.startswith(f"Recommendation(method={rec.method!r}") and "array(" not in text and len(text) < 500
    assert f"{rec.result.estimate:.4f}" in text and f"status={rec.status!r}" in text
    page = rec._repr_html_()
    assert "why:" in page and "<table" in page
    frame = rec.candidates_frame()
    assert len(frame) == len(rec.table) and "method" in frame.columns


def test_drift_check_repr(sim: Sim, calibration: he.Calibration) -> None:
    _, chk = _records(sim, calibration)
    text = repr(chk)
    assert text.startswith(f"DriftCheck(labelers={len(chk.labeler_ids)}") and "array(" not in text
    assert len(text) < 300
    frame = chk.to_frame()
    assert list(frame.index) == list(chk.labeler_ids)
    assert frame["flagged"].sum() == len(chk.flagged)
    assert (frame["p_value"].to_numpy() == chk.p_value).all()
    assert "<table" in chk._repr_html_()
