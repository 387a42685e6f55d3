"""Estimators: closed forms, hand-made cases, policies and every error message."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import heroeval as he
from heroeval.errors import DataError, HeroEvalError, UnknownLabelerError
from heroeval.estimators.score_equation import psi, solve_score
from tests.conftest import Sim, simulate


def _one_labeler(alpha: float, beta: float, p_hat: float, n: int = 200) -> tuple[he.Calibration, he.AnnotationSet]:
    """A calibration with exactly (alpha, beta) for labeler 'a' and a current round with positive share p_hat."""
    # all-gold history with rational alpha, beta: alpha = tp/(tp+fn), beta = tn/(tn+fp)
    P, Q = 1000, 1000
    tp, tn = round(alpha * P), round(beta * Q)
    z = np.r_[np.ones(tp), np.zeros(P - tp), np.zeros(tn), np.ones(Q - tn)].astype(int)
    y = np.r_[np.ones(P), np.zeros(Q)].astype(int)
    items = np.arange(P + Q)
    hist = he.AnnotationSet.from_arrays(items, ["a"] * (P + Q), z, gold=(items, y))
    cal = he.calibrate(hist)
    k = round(p_hat * n)
    cur = he.AnnotationSet.from_arrays(np.arange(n), ["a"] * n, np.r_[np.ones(k), np.zeros(n - k)].astype(int))
    return cal, cur


@pytest.mark.parametrize(
    ("alpha", "beta", "p_hat"),
    [(0.9, 0.8, 0.35), (0.7, 0.95, 0.2), (0.6, 0.6, 0.5), (0.9, 0.8, 0.1), (0.9, 0.8, 0.95)],
)
def test_one_labeler_is_rogan_gladen(alpha: float, beta: float, p_hat: float) -> None:
    cal, cur = _one_labeler(alpha, beta, p_hat)
    assert cal.alpha[0] == pytest.approx(alpha, abs=1e-12) and cal.beta[0] == pytest.approx(beta, abs=1e-12)
    rg = (p_hat + beta - 1) / (alpha + beta - 1)
    res = he.hero1(cur, cal)
    assert res.estimate == pytest.approx(min(max(rg, 0.0), 1.0), abs=1e-10)
    expected = "ok" if 0 < rg < 1 else ("boundary_0" if rg <= 0 else "boundary_1")
    assert res.status == expected


def test_perfect_labelers_give_the_exact_rate() -> None:
    rng = np.random.default_rng(0)
    y_h = rng.integers(0, 2, 300)
    items = np.repeat(np.arange(300), 3)
    hist = he.AnnotationSet.from_arrays(items, np.tile(["a", "b", "c"], 300), np.repeat(y_h, 3),
                                        gold=(np.arange(300), y_h))
    cal = he.calibrate(hist)
    y_c = rng.integers(0, 2, 123)
    cur = he.AnnotationSet.from_arrays(np.repeat(np.arange(123), 2), np.tile(["a", "c"], 123), np.repeat(y_c, 2))
    for m in ("hero1", "gold_proportion", "majority_vote", "dawid_skene", "hero_joint"):
        r = he.estimate(cur, cal, method=m)
        assert isinstance(r, he.EstimateResult)
        tol = 0.02 if m == "gold_proportion" else 1e-6  # Laplace smoothing keeps its labelers imperfect
        assert r.estimate == pytest.approx(y_c.mean(), abs=tol), m


def test_all_labels_equal_hits_the_boundary(calibration: he.Calibration, sim: Sim) -> None:
    labs = sim.current.labeler_ids[sim.current.labeler]
    items = sim.current.item_ids[sim.current.annotation_item]
    ones = he.AnnotationSet.from_arrays(items, labs, np.ones(labs.size, dtype=int))
    zeros = he.AnnotationSet.from_arrays(items, labs, np.zeros(labs.size, dtype=int))
    r1, r0 = he.hero1(ones, calibration), he.hero1(zeros, calibration)
    assert (r1.estimate, r1.status) == (1.0, "boundary_1")
    assert (r0.estimate, r0.status) == (0.0, "boundary_0")
    assert he.majority_vote(ones).estimate == 1.0


def test_score_function_closed_forms() -> None:
    L = np.array([-800.0, -3.0, 0.0, 2.5, 800.0])
    mu = 0.3
    with np.errstate(over="ignore"):
        e = np.exp(np.clip(L, -700, 700))
    ref = (e - 1) / (mu * e + 1 - mu)
    ref[-1] = 1 / mu
    ref[0] = -1 / (1 - mu)
    np.testing.assert_allclose(psi(mu, L), ref, rtol=1e-12)
    # d psi / d mu = -psi^2
    h = 1e-6
    np.testing.assert_allclose((psi(mu + h, L) - psi(mu - h, L)) / (2 * h), -psi(mu, L) ** 2, rtol=1e-6)
    mu, status = solve_score(np.array([0.0, 0.0]))  # uninformative: score 0 everywhere
    assert status == "unidentified" and np.isnan(mu)


def test_majority_vote_tie_rules() -> None:
    cur = he.AnnotationSet.from_arrays([1, 1, 2, 2, 3], ["a", "b", "a", "b", "a"], [1, 0, 1, 1, 0])
    assert he.majority_vote(cur).estimate == pytest.approx((0.5 + 1 + 0) / 3)
    assert he.majority_vote(cur, tie="positive").estimate == pytest.approx(2 / 3)
    assert he.majority_vote(cur, tie="negative").estimate == pytest.approx(1 / 3)
    r = he.majority_vote(cur, tie="random", rng=1)
    assert r.estimate in (pytest.approx(1 / 3), pytest.approx(2 / 3))
    assert r.details["n_ties"] == 1
    with pytest.raises(HeroEvalError, match=r"tie must be 'half', 'positive', 'negative' or 'random', got 'coin'"):
        he.majority_vote(cur, tie="coin")  # type: ignore[arg-type]


def test_dawid_skene_recovers_a_clear_signal() -> None:
    s = simulate(11, n=2000, J=5, labels_per_item=(5, 5))
    r = he.dawid_skene(s.current)
    assert r.convergence is not None and r.convergence.converged
    assert r.estimate == pytest.approx(s.true_rate, abs=0.04)


def test_unknown_labelers_error_or_excluded_and_counted(calibration: he.Calibration, sim: Sim) -> None:
    cur = sim.current
    items = np.r_[cur.item_ids[cur.annotation_item], ["c99999", "c00000"]]
    labs = np.r_[cur.labeler_ids[cur.labeler], ["new1", "new2"]]
    z = np.r_[cur.label, [1, 0]]
    ds = he.AnnotationSet.from_arrays(items, labs, z, name="r42")
    with pytest.raises(UnknownLabelerError, match=r"2 labeler\(s\) of the current round 'r42' are not in the calibration \(2 annotations\): 'new1', 'new2'") as ei:
        he.hero1(ds, calibration)
    assert ei.value.labelers == ("new1", "new2")
    r = he.hero1(ds, calibration, exclude_new_labelers=True)
    assert r.details["excluded_labelers"] == ["new1", "new2"]
    assert r.details["excluded_annotations"] == 2 and r.details["excluded_items"] == 1
    assert r.n_items == cur.n_items and "excluded 2 labeler(s)" in r.notes[0]
    assert r.estimate == he.hero1(cur, calibration).estimate
    only_new = he.AnnotationSet.from_arrays(["x"], ["new1"], [1])
    with pytest.raises(DataError, match="every annotation is by a labeler unknown"):
        he.hero1(only_new, calibration, exclude_new_labelers=True)


def test_hero2_gamma_is_the_score_regression(calibration: he.Calibration, sim: Sim) -> None:
    r1 = he.hero1(sim.current, calibration)
    r2 = he.hero2(sim.current, calibration)
    X = np.asarray(sim.current.covariates)[:, 0]
    from heroeval.estimators.common import align, log_likelihood_ratios

    al = align(sim.current, calibration, False)
    ps = psi(r1.estimate, log_likelihood_ratios(al.data, al.to_calib, calibration.alpha, calibration.beta))
    slope = np.polyfit(X, ps, 1)[0]
    assert r2.details["gamma"]["x"] == pytest.approx(slope, rel=1e-9)
    off = slope * (X.mean() - float(np.asarray(calibration.covariate_mean)[0]))
    assert r2.details["offset"] == pytest.approx(off, rel=1e-9)
    assert np.mean(psi(r2.estimate, log_likelihood_ratios(al.data, al.to_calib, calibration.alpha, calibration.beta))) == pytest.approx(off, abs=1e-10)
    # a strong covariate: the score R^2 is substantial
    assert r2.details["score_r2"] > 0.1


def test_hero2_equals_hero1_when_covariate_means_agree(calibration: he.Calibration, sim: Sim) -> None:
    X = np.asarray(sim.current.covariates)
    cal = dataclasses.replace(calibration, covariate_mean=X.mean(axis=0))
    assert he.hero2(sim.current, cal).estimate == pytest.approx(he.hero1(sim.current, cal).estimate, abs=1e-12)


def test_hero2_ridge_shrinks_gamma(calibration: he.Calibration, sim: Sim) -> None:
    g0 = he.hero2(sim.current, calibration).details["gamma"]["x"]
    g1 = he.hero2(sim.current, calibration, ridge=1.0).details["gamma"]["x"]
    assert g1 == pytest.approx(g0 / 2, rel=1e-9)  # one column: (s + s)^-1 c = gamma / 2
    with pytest.raises(HeroEvalError, match="ridge must be a non-negative number, got -1"):
        he.hero2(sim.current, calibration, ridge=-1)


def test_hero2_constant_column_gets_zero_gamma(calibration: he.Calibration, sim: Sim) -> None:
    cur = sim.current
    items = cur.item_ids[cur.annotation_item]
    ds = he.AnnotationSet.from_arrays(items, cur.labeler_ids[cur.labeler], cur.label,
                                      covariates=(cur.item_ids, np.ones(cur.n_items)), covariate_names=["x"])
    r = he.hero2(ds, calibration)
    assert r.details["gamma"]["x"] == 0.0 and r.details["constant_columns"] == ["x"]
    assert r.estimate == pytest.approx(he.hero1(ds, calibration).estimate, abs=1e-12)


def test_hero2_errors(calibration: he.Calibration, sim: Sim) -> None:
    cur = sim.current
    items = cur.item_ids[cur.annotation_item]
    bare = he.AnnotationSet.from_arrays(items, cur.labeler_ids[cur.labeler], cur.label, name="bare")
    with pytest.raises(HeroEvalError, match=r"hero2 needs covariates for the current round 'bare'"):
        he.hero2(bare, calibration)
    other = he.AnnotationSet.from_arrays(items, cur.labeler_ids[cur.labeler], cur.label,
                                         covariates=(cur.item_ids, np.zeros(cur.n_items)), covariate_names=["len"])
    with pytest.raises(HeroEvalError, match=r"covariate columns differ: current round has \['len'\], the calibration's history has \['x'\]"):
        he.hero2(other, calibration)
    nocov = dataclasses.replace(calibration, covariate_mean=None, covariate_cov=None, covariate_names=())
    with pytest.raises(HeroEvalError, match="calibration was fitted without covariates"):
        he.hero2(cur, nocov)


def test_hero_joint_needs_the_history(calibration: he.Calibration, sim: Sim) -> None:
    r = he.hero_joint(sim.current, calibration)
    assert r.convergence is not None and r.convergence.converged
    assert abs(r.estimate - r.details["hero1_estimate"]) < 0.1
    loaded = he.Calibration.from_dict(calibration.to_dict())
    with pytest.raises(HeroEvalError, match="hero_joint needs the history, not only a calibration file"):
        he.hero_joint(sim.current, loaded)
    both = he.estimate(sim.current, loaded, history=sim.history, method="hero_joint")
    assert isinstance(both, he.EstimateResult) and both.estimate == pytest.approx(r.estimate, abs=1e-9)


def test_estimate_all_and_skips(calibration: he.Calibration, sim: Sim) -> None:
    res = he.estimate(sim.current, calibration, method="all")
    assert isinstance(res, he.EstimateCollection)
    assert list(res) == list(he.METHODS)
    loaded = he.Calibration.from_dict(calibration.to_dict())
    res2 = he.estimate(sim.current, loaded, method="all")
    assert isinstance(res2, he.EstimateCollection)
    assert "hero_joint" not in res2 and "needs the history" in res2.skipped["hero_joint"]
    with pytest.raises(KeyError, match="hero_joint was not computed: needs the history"):
        res2["hero_joint"]
    d = json.loads(res2.to_json())
    assert set(d["estimates"]) == set(he.METHODS) - {"hero_joint"}
    assert all(isinstance(v["estimate"], float) for v in d["estimates"].values())
    assert "HERO-1" in res.summary() and "not computed" in res2.summary()
    sub = he.estimate(sim.current, calibration, method=["hero1", "majority_vote"])
    assert list(sub) == ["hero1", "majority_vote"]


def test_estimate_errors(calibration: he.Calibration, sim: Sim) -> None:
    with pytest.raises(HeroEvalError, match=r"unknown method 'hero3'; choose from"):
        he.estimate(sim.current, calibration, method="hero3")
    with pytest.raises(HeroEvalError, match="pass a calibration or a history"):
        he.estimate(sim.current)
    with pytest.raises(HeroEvalError, match=r"current must be an AnnotationSet .* got list"):
        he.hero1([1, 2], calibration)  # type: ignore[arg-type]
    with pytest.raises(HeroEvalError, match=r"calibration must be a Calibration .* got dict"):
        he.hero1(sim.current, {})  # type: ignore[arg-type]


def test_result_objects(calibration: he.Calibration, sim: Sim) -> None:
    r = he.hero1(sim.current, calibration)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.estimate = 0.5  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.details["x"] = 1  # type: ignore[index]
    assert json.loads(json.dumps(r.to_dict()))["method"] == "hero1"
    assert "HERO-1" in r.summary()
    ci = r.confidence_interval()
    assert ci.low < r.estimate < ci.high and ci.confidence_level == 0.95
    with pytest.raises(HeroEvalError, match=r"confidence_level must be in \(0, 1\), got 95"):
        r.confidence_interval(95)
    with pytest.raises(HeroEvalError, match=r"interval method must be one of .*got 'exact'"):
        r.confidence_interval(method="exact")


def test_hero2_covariate_shift_check(calibration: he.Calibration, sim: Sim) -> None:
    r = he.hero2(sim.current, calibration)
    assert 0.0 <= r.details["covariate_shift_p"] <= 1.0 and r.details["covariate_shift_df"] == 1
    # shift the current covariate by 1 SD: the test must fire and warn, naming the column
    cur = sim.current
    shifted = he.AnnotationSet.from_arrays(cur.item_ids[cur.annotation_item], cur.labeler_ids[cur.labeler], cur.label,
                                           covariates=(cur.item_ids, np.asarray(cur.covariates)[:, 0] + 1.0),
                                           covariate_names=["x"])
    with pytest.warns(he.CovariateShiftWarning, match=r"largest shifts in \['x'\]"):
        r2 = he.hero2(shifted, calibration)
    assert r2.details["covariate_shift_p"] < 1e-6
    z = r2.details["covariate_shift_z"][0]
    xs = np.asarray(shifted.covariates)[:, 0]
    m = float(np.asarray(calibration.covariate_mean)[0])
    v = xs.var(ddof=1) / xs.size + float(np.asarray(calibration.covariate_cov)[0, 0]) / calibration.n_covariate_items
    assert z == pytest.approx((xs.mean() - m) / np.sqrt(v), rel=1e-10)
