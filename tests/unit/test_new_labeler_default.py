"""Issue #38 item 3: the default of he.estimate, compare and the CLI for labelers new to the calibration.

HERO-1 estimates them from the round (anchored by the calibrated labelers), every other method leaves their labels
out, each result saying what it did; ``new_labelers="error"`` keeps the old stop. A round without new labelers is
estimated exactly as before, and the estimators called one by one keep ``"error"`` as their default."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import heroeval as he
from heroeval.errors import UnknownLabelerError
from tests.conftest import Sim


def _with_newcomer(sim: Sim) -> he.AnnotationSet:
    cur = sim.current
    rng = np.random.default_rng(3)
    items = cur.item_ids[rng.choice(cur.n_items, 60, replace=False)]
    return he.AnnotationSet.from_arrays(
        np.r_[cur.item_ids[cur.annotation_item], items], np.r_[cur.labeler_ids[cur.labeler], ["NEW"] * items.size],
        np.r_[cur.label, rng.integers(0, 2, items.size)], name="with newcomer")


def test_default_estimates_or_excludes_and_says_so(sim: Sim, calibration: he.Calibration) -> None:
    cur = _with_newcomer(sim)
    with pytest.raises(UnknownLabelerError, match="NEW"):
        he.estimate(cur, calibration, method="all", new_labelers="error", drift_check=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = he.estimate(cur, calibration, method="all", drift_check=False)
    assert isinstance(res, he.EstimateCollection)
    assert list(res["hero1"].details["new_labelers"]) == ["NEW"]
    for m in ("gold_proportion", "rogan_gladen"):
        assert res[m].details["excluded_labelers"] == ["NEW"]
        assert any("unknown to the calibration" in n for n in res[m].notes)
        assert res[m].estimate == he.estimate(cur, calibration, method=m, new_labelers="exclude").estimate
    assert res["majority_vote"].n_labelers == cur.n_labelers  # no calibration: every labeler
    single = he.estimate(cur, calibration, method="hero1", drift_check=False)
    assert single.estimate == he.hero1(cur, calibration, new_labelers="estimate").estimate


def test_recommended_estimate_and_compare_run(sim: Sim, calibration: he.Calibration) -> None:
    cur = _with_newcomer(sim)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = he.estimate(cur, calibration, method="all", recommend=True, history=sim.history, drift_check=False)
        assert isinstance(res, he.EstimateCollection) and res.recommended is not None
        assert "only HERO-1 estimates labelers new to the calibration" in res.recommended.reason
        cc = he.compare(cur, sim.current, calibration, method=["hero1", "rogan_gladen"])
    assert cc is not None


def test_no_new_labelers_nothing_changes(sim: Sim, calibration: he.Calibration) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = he.estimate(sim.current, calibration, method="all", drift_check=False)
        b = he.estimate(sim.current, calibration, method="all", new_labelers="error", drift_check=False)
    assert isinstance(a, he.EstimateCollection) and isinstance(b, he.EstimateCollection)
    for m in b:
        assert a[m].estimate == b[m].estimate and a[m].standard_error == b[m].standard_error
        assert a[m].notes == b[m].notes and dict(a[m].details) == dict(b[m].details)


def test_estimators_one_by_one_keep_the_error(sim: Sim, calibration: he.Calibration) -> None:
    cur = _with_newcomer(sim)
    with pytest.raises(UnknownLabelerError):
        he.hero1(cur, calibration)
    with pytest.raises(UnknownLabelerError):
        he.rogan_gladen(cur, calibration)
    with pytest.raises(he.HeroEvalError, match="contradicts new_labelers='auto'"):
        he.estimate(cur, calibration, new_labelers="auto", exclude_new_labelers=True)
