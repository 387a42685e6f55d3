"""Anchored estimation of labelers new in the current round (newlabelers.py, hero1(new_labelers=...)).

Checks: no new labeler reproduces HERO-1; the history gradient equals finite
differences of the estimate in the calibration's parameters; the per-item
current influence equals the finite-difference effect of adding one copy of
the item; the error and exclude rules; the CLI option.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import heroeval as he
from heroeval.estimators.newlabelers import hero1_anchored
from heroeval.simulate import shift_dgp

A = np.array([0.85, 0.8, 0.9, 0.75, 0.8])
B = np.array([0.8, 0.85, 0.7, 0.9, 0.75])


@pytest.fixture(scope="module")
def data() -> tuple[he.AnnotationSet, he.Calibration]:
    d = shift_dgp(11, alpha=A, beta=B, history_pool=np.arange(4), labels_per_item=3, n=300, N=800)
    return d.current, he.calibrate(d.history)


def test_no_new_labeler_is_hero1(data: tuple[he.AnnotationSet, he.Calibration]) -> None:
    cur, cal = data
    keep = np.array([x != "L04" for x in cur.labeler_ids])
    old = cur.select_labelers(keep)[0]
    a = hero1_anchored(old, cal)
    h = he.hero1(old, cal)
    assert a.estimate == pytest.approx(h.estimate, abs=1e-7)
    assert a.standard_error == pytest.approx(h.standard_error, rel=1e-4)
    assert a.variance_history == pytest.approx(h.variance_history, rel=1e-4)


def test_history_gradient_by_finite_differences(data: tuple[he.AnnotationSet, he.Calibration]) -> None:
    cur, cal = data
    res = hero1_anchored(cur, cal)
    assert res.influence is not None and res.influence.history is not None
    c = res.influence.history
    J = cal.n_labelers
    h = 1e-5
    for k in (0, 2):
        for which, off in (("alpha", 0), ("beta", J)):
            arr = np.array(getattr(cal, which), dtype=float)
            up, dn = arr.copy(), arr.copy()
            up[k] += h
            dn[k] -= h
            mu_up = hero1_anchored(cur, replace(cal, **{which: up})).estimate
            mu_dn = hero1_anchored(cur, replace(cal, **{which: dn})).estimate
            fd = (mu_up - mu_dn) / (2 * h)
            assert c[off + k] == pytest.approx(fd, rel=1e-3, abs=1e-6), (which, k)


def test_current_influence_by_adding_an_item(data: tuple[he.AnnotationSet, he.Calibration]) -> None:
    """Adding one more copy of item i moves the estimate by about IF_i / n (sum scale: current[i] / n)."""
    cur, cal = data
    res = hero1_anchored(cur, cal)
    assert res.influence is not None
    phi = res.influence.current
    n = cur.n_items
    assert abs(phi.sum()) < 1e-6 * n
    for i in (0, 5, 17, 123):
        more = cur.take_items(np.r_[np.arange(n), i])
        fd = (hero1_anchored(more, cal).estimate - res.estimate) * (n + 1)
        assert fd == pytest.approx(phi[i], rel=0.05, abs=2e-3 * max(1.0, float(np.abs(phi).max()))), i


def test_rules_error_exclude_estimate(data: tuple[he.AnnotationSet, he.Calibration]) -> None:
    cur, cal = data
    with pytest.raises(he.UnknownLabelerError, match="L04"):
        he.hero1(cur, cal)
    ex = he.hero1(cur, cal, new_labelers="exclude")
    assert ex.estimate == he.hero1(cur, cal, exclude_new_labelers=True).estimate
    est = he.hero1(cur, cal, new_labelers="estimate")
    info = est.details["new_labelers"]["L04"]
    assert abs(info["sensitivity"] - A[4]) < 4 * info["sensitivity_se"]
    assert abs(info["specificity"] - B[4]) < 4 * info["specificity_se"]
    assert est.details["anchored_by"] == ["L00", "L01", "L02", "L03"]
    # the new labeler's labels carry information: a smaller current variance than excluding them
    assert est.variance_current < ex.variance_current
    with pytest.raises(he.HeroEvalError, match="contradicts"):
        he.hero1(cur, cal, exclude_new_labelers=True, new_labelers="estimate")
    with pytest.raises(he.HeroEvalError, match="new_labelers must be"):
        he.hero1(cur, cal, new_labelers="guess")  # type: ignore[arg-type]
    coll = he.estimate(cur, cal, method=["hero1", "gold_proportion"], new_labelers="estimate")
    assert isinstance(coll, he.EstimateCollection)
    assert "hero1" in coll and "gold_proportion" in coll.skipped
    with pytest.raises(he.HeroEvalError, match="hero1 only"):
        he.estimate(cur, cal, method="gold_proportion", new_labelers="estimate")


def test_nothing_to_anchor() -> None:
    hist = he.AnnotationSet.from_arrays([1, 2], ["a", "a"], [1, 0], gold=([1, 2], [1, 0]))
    cal = he.calibrate(hist)
    cur = he.AnnotationSet.from_arrays([5, 6], ["z", "z"], [1, 0])
    with pytest.raises(he.HeroEvalError, match="nothing anchors"):
        hero1_anchored(cur, cal)
    with pytest.raises(he.HeroEvalError, match="does not know"):
        hero1_anchored(cur, cal, treat_as_new=["q"])


def test_compare_works_with_an_anchored_round(data: tuple[he.AnnotationSet, he.Calibration]) -> None:
    cur, cal = data
    a = he.hero1(cur, cal, new_labelers="estimate")
    b = he.hero1(cur, cal, new_labelers="estimate")
    assert a.influence is not None and b.influence is not None
    assert a.influence.history_covariance(b.influence) == pytest.approx(a.variance_history)
