"""Labeler drift check and HERO-2's covariate-shift rule (drift.py, hero2(on_shift=...))."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest

import heroeval as he
from heroeval.checks.drift import check_drift, reestimate_without
from heroeval.core.multiple import benjamini_hochberg, holm
from heroeval.errors import SharedCovariatesWarning, TransportabilityWarning
from heroeval.estimators.shift import covariate_overlap
from heroeval.simulate import shift_dgp

from ..conftest import Sim

A = np.array([0.85, 0.8, 0.9, 0.75, 0.8, 0.85])
B = np.array([0.8, 0.85, 0.7, 0.9, 0.75, 0.8])


def _rep(seed: int, shift: float) -> tuple[he.AnnotationSet, he.Calibration]:
    cb = B.copy()
    cb[0] -= shift
    d = shift_dgp(seed, alpha=A, beta=B, current_beta=cb, labels_per_item=3, n=400, N=1000)
    return d.current, he.calibrate(d.history)


def test_holm_and_bh_by_hand() -> None:
    p = [0.01, 0.04, 0.03, np.nan]
    # Holm: sorted 0.01*3, max(0.03*2, .03), max(0.04*1, .06)
    assert np.allclose(holm(p)[:3], [0.03, 0.06, 0.06]) and np.isnan(holm(p)[3])
    # BH: 0.01*3/1, min(0.03*3/2, 0.04*3/3)
    assert np.allclose(benjamini_hochberg(p)[:3], [0.03, 0.04, 0.04])


def test_residuals_match_a_plain_computation(sim: Sim, calibration: he.Calibration) -> None:
    chk = check_drift(sim.current, calibration, warn=False)
    mu = he.hero1(sim.current, calibration).estimate
    assert chk.mu == pytest.approx(mu)
    cur = sim.current
    for k, lab in enumerate(chk.labeler_ids):
        code = list(cur.labeler_ids).index(lab)
        j = calibration.labeler_ids.index(lab)
        z = cur.label[cur.labeler == code]
        assert chk.observed[k] == pytest.approx(z.mean())
        exp = mu * calibration.alpha[j] + (1 - mu) * (1 - calibration.beta[j])
        assert chk.expected[k] == pytest.approx(exp)
        assert chk.n_annotations[k] == z.size
    assert chk.overall_df == len(chk.labeler_ids) - 1 or chk.overall_df == len(chk.labeler_ids)


def test_single_labeler_cannot_be_tested() -> None:
    hist = he.AnnotationSet.from_arrays([1, 2, 3, 4], ["a"] * 4, [1, 1, 0, 0], gold=([1, 2, 3, 4], [1, 0, 0, 0]))
    cal = he.calibrate(hist)
    cur = he.AnnotationSet.from_arrays([5, 6, 7], ["a"] * 3, [1, 1, 0])
    chk = check_drift(cur, cal, warn=False)
    assert chk.flagged == () and np.isnan(chk.z[0]) and chk.overall_df == 0
    assert "cannot be tested" in " ".join(chk.notes)


def test_size_and_power_by_simulation() -> None:
    """Fixed seeds. No drift: 150 replications, family-wise false-alarm rate at level 0.05 must be <= 0.10
    (MC SE 0.018) and every labeler's z must have SD in [0.85, 1.15]. A specificity drop of 0.3 in one of six
    labelers: flagged in >= 80 % of 40 replications (measured 97.5 % in benchmarks/drift.py)."""
    alarms, zs = 0, []
    for s in range(150):
        chk = check_drift(*_rep(s, 0.0), warn=False)
        alarms += bool(chk.flagged)
        zs.append(chk.z)
    sd = np.nanstd(np.asarray(zs), axis=0)
    assert alarms / 150 <= 0.10
    assert np.all((sd > 0.85) & (sd < 1.15)), sd
    hits = sum("L00" in check_drift(*_rep(1000 + s, 0.3), warn=False).flagged for s in range(40))
    assert hits / 40 >= 0.8


def test_warning_names_the_labeler_and_reestimate() -> None:
    cur, cal = _rep(7, 0.4)
    with pytest.warns(TransportabilityWarning, match="L00"):
        chk = check_drift(cur, cal)
    assert chk.flagged == ("L00",) and chk.drift_detected
    dropped = reestimate_without(cur, cal, chk)
    keep = np.array([x != "L00" for x in cur.labeler_ids])
    ref = he.hero1(cur.select_labelers(keep)[0], cal)
    assert dropped.estimate == pytest.approx(ref.estimate) and dropped.details["dropped_labelers"] == ["L00"]
    est = reestimate_without(cur, cal, chk, how="estimate")
    assert est.details["new_labelers"]["L00"]["recalibrated"] is True
    # the re-estimated specificity of L00 sees the drop (true current value 0.4)
    assert abs(est.details["new_labelers"]["L00"]["specificity"] - 0.4) < 0.15


def test_bad_settings() -> None:
    cur, cal = _rep(0, 0.0)
    with pytest.raises(he.HeroEvalError, match="significance"):
        check_drift(cur, cal, significance=1.5)
    with pytest.raises(he.HeroEvalError, match="adjust"):
        check_drift(cur, cal, adjust="bonferroni")  # type: ignore[arg-type]
    with pytest.raises(he.HeroEvalError, match="how"):
        reestimate_without(cur, cal, ["L00"], how="both")  # type: ignore[arg-type]


def test_bh_single_step_and_json() -> None:
    cur, cal = _rep(3, 0.4)
    chk = check_drift(cur, cal, adjust="bh", warn=False)
    assert "L00" in chk.flagged
    d = chk.to_dict()
    assert d["flagged"] == list(chk.flagged) and len(d["labelers"]) == 6
    assert "overall" in chk.summary()


# ---------------------------------------------------------------- covariate shift (HERO-2)


def _shifted(sim: Sim, delta: float) -> he.AnnotationSet:
    cur = sim.current
    assert cur.covariates is not None
    return he.AnnotationSet.from_arrays(
        cur.item_ids[cur.annotation_item], cur.labeler_ids[cur.labeler], cur.label,
        covariates=(cur.item_ids, cur.covariates + delta), covariate_names=["x"], name="shifted")


def test_on_shift_rules(sim: Sim, calibration: he.Calibration) -> None:
    cur = _shifted(sim, 1.0)
    with pytest.warns(he.CovariateShiftWarning, match="falling back"):
        fb = he.hero2(cur, calibration, on_shift="fallback")
    h1 = he.hero1(cur, calibration)
    assert fb.estimate == h1.estimate and fb.standard_error == pytest.approx(h1.standard_error)
    assert fb.details["fallback"] == "hero1" and "covariate shift" in fb.details["fallback_reason"]
    assert fb.details["hero2_estimate"] != fb.estimate
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ig = he.hero2(cur, calibration, on_shift="ignore")
    assert ig.details["covariate_shift_detected"] and ig.estimate == fb.details["hero2_estimate"]
    with pytest.warns(he.CovariateShiftWarning, match="prefer hero1"):
        he.hero2(cur, calibration)
    # no shift: all three rules give HERO-2
    ok = he.hero2(sim.current, calibration, on_shift="fallback")
    assert "fallback" not in ok.details and not ok.details["covariate_shift_detected"]
    with pytest.raises(he.HeroEvalError, match="on_shift"):
        he.hero2(cur, calibration, on_shift="drop")  # type: ignore[arg-type]
    # estimate() passes the rule on
    r = he.estimate(cur, calibration, method="hero2", on_shift="ignore")
    assert isinstance(r, he.EstimateResult) and r.estimate == ig.estimate


def test_per_column_holm(sim: Sim, calibration: he.Calibration) -> None:
    r = he.hero2(sim.current, calibration)
    z = r.details["covariate_shift_z"][0]
    from scipy.stats import norm

    assert r.details["covariate_shift_p_columns"]["x"] == pytest.approx(2 * norm.sf(abs(z)))
    # one column: Holm changes nothing and the Wald test equals z^2
    assert r.details["covariate_shift_min_p_holm"] == pytest.approx(r.details["covariate_shift_p"])


def test_identical_rows_warn(sim: Sim, calibration: he.Calibration) -> None:
    with pytest.warns(SharedCovariatesWarning, match="item for item"):
        r = he.hero2(sim.history, calibration, on_shift="ignore")
    assert r.details["covariate_overlap_share"] == 1.0 and r.details["covariate_overlap_basis"] == "item ids"
    # from a calibration file (no history rows): identical summaries flag it too
    cal2 = he.Calibration.from_dict(calibration.to_dict())
    assert covariate_overlap(sim.history, cal2)["covariate_overlap_share"] == 1.0
    assert covariate_overlap(sim.current, cal2)["covariate_overlap_share"] == 0.0
    assert covariate_overlap(sim.current, replace(calibration))["covariate_overlap_share"] == 0.0


def test_labeler_listed_without_annotations() -> None:
    cur, cal = _rep(2, 0.0)
    first = np.flatnonzero(cur.labeler != 0)
    items = np.unique(cur.annotation_item[first])
    only = [i for i in items if 0 not in cur.labeler[cur.item_ptr[i]:cur.item_ptr[i + 1]]]
    sub = cur.take_items(np.asarray(only))  # L00 still in labeler_ids, with no annotation
    assert "L00" in list(sub.labeler_ids) and not np.any(sub.labeler == 0)
    chk = check_drift(sub, cal, warn=False)
    assert "L00" not in chk.labeler_ids and np.all(np.isfinite(chk.observed))
