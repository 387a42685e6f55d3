"""Inference: derivatives against finite differences, closed-form variances, comparisons, bootstrap."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.errors import DataError, HeroEvalError
from heroeval.estimators.common import align, label_codes, log_likelihood_ratios
from heroeval.estimators.score_equation import psi, solve_score
from heroeval.inference import resample as bootstrap_module
from heroeval.simulate import paper_dgp
from heroeval.stage_a import scoring, two_coin
from heroeval.stage_a.fit import design_of
from tests.conftest import Sim, simulate

# ------------------------------------------------------------------ derivatives


def _theta_ll(d: two_coin.Design, theta: np.ndarray, J: int) -> float:
    a, b, p = theta[:J], theta[J : 2 * J], theta[2 * J :]
    return two_coin.e_step(d, a, b, p)[1]


def test_scores_sum_to_the_loglik_gradient(sim: Sim) -> None:
    """Fisher's identity: sum_r s_r(theta) = grad loglik(theta) at any theta (not only the MLE)."""
    h = sim.history
    d = design_of(h)
    J = h.n_labelers
    rng = np.random.default_rng(3)
    theta = np.concatenate([rng.uniform(0.6, 0.9, J), rng.uniform(0.6, 0.9, J), [0.35]])
    gamma, _ = two_coin.e_step(d, theta[:J], theta[J : 2 * J], theta[2 * J :])
    si = scoring.scores_and_information(d, theta[:J], theta[J : 2 * J], theta[2 * J :], gamma)
    grad = np.asarray(si.scores.sum(axis=0)).ravel()
    eps = 1e-6
    num = np.array([
        (_theta_ll(d, theta + eps * e, J) - _theta_ll(d, theta - eps * e, J)) / (2 * eps) for e in np.eye(theta.size)
    ])
    np.testing.assert_allclose(grad, num, rtol=1e-5, atol=1e-5)


def test_observed_information_is_minus_the_hessian(sim: Sim) -> None:
    """Louis' formula against a finite-difference Hessian of the observed log-likelihood."""
    cal = he.calibrate(sim.history, tol=1e-12)
    d = design_of(sim.history)
    fit = cal.history_fit
    assert fit is not None
    J = sim.history.n_labelers
    si = scoring.scores_and_information(d, fit.alpha, fit.beta, fit.prev, fit.gamma)
    theta = np.concatenate([fit.alpha, fit.beta, fit.prev])
    eps = 1e-4
    P = theta.size
    Hnum = np.empty((P, P))
    for i in range(P):
        for j in range(i, P):
            ei, ej = np.eye(P)[i] * eps, np.eye(P)[j] * eps
            f = (
                _theta_ll(d, theta + ei + ej, J) - _theta_ll(d, theta + ei - ej, J)
                - _theta_ll(d, theta - ei + ej, J) + _theta_ll(d, theta - ei - ej, J)
            ) / (4 * eps**2)
            Hnum[i, j] = Hnum[j, i] = -f
    np.testing.assert_allclose(si.info, Hnum, rtol=2e-4, atol=1e-2)
    # at the MLE the scores sum to zero
    assert np.abs(np.asarray(si.scores.sum(axis=0))).max() < 1e-4


def test_score_gradient_matches_finite_differences(calibration: he.Calibration, sim: Sim) -> None:
    al = align(sim.current, calibration, False)
    a, b = np.asarray(calibration.alpha), np.asarray(calibration.beta)
    mu = 0.37
    L = log_likelihood_ratios(al.data, al.to_calib, a, b)
    G = scoring.score_gradient(al.data.item_ptr, label_codes(al.data, al.to_calib), calibration.n_labelers, a, b, mu, L)
    eps = 1e-6
    J = calibration.n_labelers
    num = []
    for k in range(2 * J):
        da = np.zeros(J)
        db = np.zeros(J)
        (da if k < J else db)[k % J] = eps
        up = psi(mu, log_likelihood_ratios(al.data, al.to_calib, a + da, b + db)).mean()
        dn = psi(mu, log_likelihood_ratios(al.data, al.to_calib, a - da, b - db)).mean()
        num.append((up - dn) / (2 * eps))
    np.testing.assert_allclose(G, num, rtol=1e-6, atol=1e-8)


def test_history_gradient_is_the_implicit_derivative(calibration: he.Calibration, sim: Sim) -> None:
    """c = d mu_hat / d theta: re-solve HERO-1 and HERO-2 after moving one parameter."""
    r1 = he.hero1(sim.current, calibration)
    r2 = he.hero2(sim.current, calibration)
    assert r1.influence is not None and r2.influence is not None and r1.influence.history is not None
    J = calibration.n_labelers
    eps = 1e-6
    for k in (0, J + 1):
        def moved(sign: float, k: int = k) -> he.Calibration:
            a = np.array(calibration.alpha, dtype=float)
            b = np.array(calibration.beta, dtype=float)
            (a if k < J else b)[k % J] += sign * eps
            return dataclasses.replace(calibration, alpha=a, beta=b)

        num = (he.hero1(sim.current, moved(1)).estimate - he.hero1(sim.current, moved(-1)).estimate) / (2 * eps)
        assert r1.influence.history[k] == pytest.approx(num, rel=1e-4)
    # HERO-2 with respect to the history covariate mean (gamma held at its value)
    assert r2.influence is not None and r2.influence.history is not None
    m = np.asarray(calibration.covariate_mean)
    up = he.hero2(sim.current, dataclasses.replace(calibration, covariate_mean=m + eps)).estimate
    dn = he.hero2(sim.current, dataclasses.replace(calibration, covariate_mean=m - eps)).estimate
    assert r2.influence.history[-1] == pytest.approx((up - dn) / (2 * eps), rel=1e-4)


# ------------------------------------------------------------ closed-form variances


def test_one_labeler_variance_is_rogan_gladen_delta_method() -> None:
    P, Q, n = 2000, 3000, 400
    alpha, beta = 0.8, 0.9
    tp, tn = int(alpha * P), int(beta * Q)
    z = np.r_[np.ones(tp), np.zeros(P - tp), np.zeros(tn), np.ones(Q - tn)].astype(int)
    y = np.r_[np.ones(P), np.zeros(Q)].astype(int)
    hist = he.AnnotationSet.from_arrays(np.arange(P + Q), ["a"] * (P + Q), z, gold=(np.arange(P + Q), y))
    cal = he.calibrate(hist)
    k = 140
    cur = he.AnnotationSet.from_arrays(np.arange(n), ["a"] * n, np.r_[np.ones(k), np.zeros(n - k)].astype(int))
    r = he.hero1(cur, cal)
    p = k / n
    mu = (p + beta - 1) / (alpha + beta - 1)
    assert r.estimate == pytest.approx(mu, abs=1e-10)
    d = alpha + beta - 1
    v_cur = p * (1 - p) / (n * d**2)
    v_hist = mu**2 * alpha * (1 - alpha) / (P * d**2) + (1 - mu) ** 2 * beta * (1 - beta) / (Q * d**2)
    assert r.variance_current == pytest.approx(v_cur, rel=1e-8)
    assert r.variance_history == pytest.approx(v_hist, rel=1e-6)
    assert r.standard_error == pytest.approx(math.sqrt(v_cur + v_hist), rel=1e-6)
    # the gold-only calibration: Laplace-smoothed rates, binomial variances from the counts
    g = he.gold_proportion(cur, cal)
    a2, b2 = (tp + 1) / (P + 2), (tn + 1) / (Q + 2)
    d2 = a2 + b2 - 1
    mu2 = (p + b2 - 1) / d2
    vh2 = (mu2**2 * (tp * (1 - a2) ** 2 + (P - tp) * a2**2) / (P + 2) ** 2
           + (1 - mu2) ** 2 * (tn * (1 - b2) ** 2 + (Q - tn) * b2**2) / (Q + 2) ** 2) / d2**2
    assert g.variance_history == pytest.approx(vh2, rel=1e-6)


def test_majority_vote_variance_is_binomial() -> None:
    cur = he.AnnotationSet.from_arrays(np.repeat(np.arange(50), 1), ["a"] * 50, np.r_[np.ones(20), np.zeros(30)].astype(int))
    r = he.majority_vote(cur)
    assert r.standard_error == pytest.approx(math.sqrt(0.4 * 0.6 / 50))
    assert r.variance_history == 0.0 and "majority-label rate" in r.notes[0]


def test_intervals() -> None:
    from heroeval.estimators.results import rate_interval

    w = rate_interval(0.3, 0.05, 0.95, "wald")
    assert (w.low, w.high) == pytest.approx((0.3 - 1.959964 * 0.05, 0.3 + 1.959964 * 0.05), rel=1e-6)
    lg = rate_interval(0.02, 0.015, 0.9, "logit")
    assert 0 < lg.low < 0.02 < lg.high and lg.confidence_level == 0.9
    assert rate_interval(0.0, 0.01, 0.95, "logit").low == 0.0  # degenerate at the bound: clipped Wald
    assert math.isnan(rate_interval(0.5, math.nan, 0.95, "wald").low)


def test_boundary_estimate_has_no_standard_error(calibration: he.Calibration, sim: Sim) -> None:
    cur = sim.current
    ones = he.AnnotationSet.from_arrays(cur.item_ids[cur.annotation_item], cur.labeler_ids[cur.labeler],
                                        np.ones(cur.n_annotations, dtype=int))
    r = he.hero1(ones, calibration)
    assert r.status == "boundary_1" and math.isnan(r.standard_error)


def test_no_covariance_no_standard_error(sim: Sim) -> None:
    cal = he.calibrate(sim.history, covariance=False)
    r = he.hero1(sim.current, cal)
    assert math.isnan(r.standard_error) and "no parameter covariance" in r.notes[-1]


def test_parameter_covariance_round_trips_and_is_validated(tmp_path: object, calibration: he.Calibration) -> None:
    back = he.Calibration.from_dict(calibration.to_dict())
    np.testing.assert_array_equal(back.parameter_covariance, calibration.parameter_covariance)
    obj = calibration.to_dict()
    obj["parameter_covariance"]["float64_le_base64"] = obj["parameter_covariance"]["float64_le_base64"][:-8]
    with pytest.raises(he.CalibrationFileError, match="parameter_covariance"):
        he.Calibration.from_dict(obj)


def test_model_and_sandwich_variances_are_close_under_the_model() -> None:
    s = simulate(8, N=3000, gold_rate=0.2, J=5)
    a = he.hero1(s.current, he.calibrate(s.history)).variance_history
    b = he.hero1(s.current, he.calibrate(s.history, variance="model")).variance_history
    assert a == pytest.approx(b, rel=0.25)
    with pytest.raises(HeroEvalError, match="variance must be 'sandwich' or 'model', got 'hc3'"):
        he.calibrate(s.history, variance="hc3")  # type: ignore[arg-type]


# -------------------------------------------------------------------- compare


def test_compare_a_round_with_itself(calibration: he.Calibration, sim: Sim) -> None:
    c = he.compare(sim.current, sim.current, calibration, method="hero2", pairs=None)  # unpaired: two independent rounds that happen to agree
    assert isinstance(c, he.Comparison)
    assert c.estimate == 0.0 and c.variance_history == pytest.approx(0.0, abs=1e-15)
    assert c.variance_current == pytest.approx(2 * c.a.variance_current)
    assert c.p_value == 1.0


def test_compare_subtracts_history_terms(calibration: he.Calibration) -> None:
    s2 = simulate(2, cur_prev=0.5)
    c = he.compare(s2.current, simulate(1).current, calibration, method="hero1")
    assert isinstance(c, he.Comparison)
    ia, ib = c.a.influence, c.b.influence
    assert ia is not None and ib is not None
    naive = ia.variance_history() + ib.variance_history()
    assert c.variance_history < naive  # positively correlated history terms partly cancel
    assert c.estimate == pytest.approx(c.a.estimate - c.b.estimate)
    ci = c.confidence_interval(0.9)
    assert ci.low < c.estimate < ci.high
    d = c.to_dict()
    assert set(d) >= {"estimate", "standard_error", "ci_low", "ci_high", "p_value"}


def test_compare_all_methods_including_joint(calibration: he.Calibration, sim: Sim) -> None:
    cc = he.compare(sim.current, simulate(4).current, calibration, method="all")
    assert isinstance(cc, he.ComparisonCollection)
    assert set(cc) == set(he.METHODS)
    for m, c in cc.items():
        assert math.isfinite(c.standard_error), m
    assert cc["majority_vote"].variance_history == 0.0
    out = cc.to_dict()
    assert set(out["difference"]) == set(he.METHODS)


def test_compare_needs_one_calibration(calibration: he.Calibration, sim: Sim) -> None:
    other = he.calibrate(simulate(9).history)
    a = he.hero1(sim.current, calibration)
    b = he.hero1(sim.current, other)
    assert a.influence is not None and b.influence is not None
    with pytest.raises(HeroEvalError, match="do not share one calibration"):
        a.influence.history_covariance(b.influence)


# ------------------------------------------------------------------ bootstrap


def test_bootstrap_is_seeded_and_agrees_roughly(calibration: he.Calibration, sim: Sim) -> None:
    b1 = he.bootstrap(sim.current, calibration, method=["hero1", "majority_vote"], n_resamples=60, rng=5)
    b2 = he.bootstrap(sim.current, calibration, method=["hero1", "majority_vote"], n_resamples=60, rng=5)
    np.testing.assert_array_equal(b1["hero1"].replicates, b2["hero1"].replicates)
    se_if = he.hero1(sim.current, calibration).standard_error
    assert b1["hero1"].standard_error == pytest.approx(se_if, rel=0.35)
    p = b1["hero1"].confidence_interval(0.9)
    q = b1["hero1"].confidence_interval(0.9, method="basic")
    assert p.low < p.high and q.low < q.high
    assert b1["hero1"].to_dict()["n_resamples"] == 60
    with pytest.raises(HeroEvalError, match="must be 'percentile' or 'basic'"):
        b1["hero1"].confidence_interval(method="bca")


def test_bootstrap_errors(calibration: he.Calibration, sim: Sim) -> None:
    loaded = he.Calibration.from_dict(calibration.to_dict())
    with pytest.raises(HeroEvalError, match="needs the history"):
        he.bootstrap(sim.current, loaded)
    with pytest.raises(HeroEvalError, match="n_resamples must be an integer >= 2, got 1"):
        he.bootstrap(sim.current, calibration, n_resamples=1)


def test_take_items_resamples_clusters(sim: Sim) -> None:
    t = sim.current.take_items([0, 0, 3])
    assert t.n_items == 3 and list(t.item_ids) == [sim.current.item_ids[0]] * 2 + [sim.current.item_ids[3]]
    a, b = sim.current.item_ptr[0], sim.current.item_ptr[1]
    assert t.label[: b - a].tolist() == sim.current.label[a:b].tolist()
    with pytest.raises(IndexError):
        sim.current.take_items([sim.current.n_items])


# -------------------------------------------------------- classifier metrics


def test_classifier_metrics(calibration: he.Calibration, sim: Sim) -> None:
    rng = np.random.default_rng(0)
    flags = {i: int(rng.random() < 0.4) for i in sim.current.item_ids}
    m = he.classifier_metrics(sim.current, calibration, flags)
    pi = m.flag_rate.estimate
    assert m.prevalence.estimate == pytest.approx(pi * m.precision.estimate + (1 - pi) * m.miss_rate.estimate)
    assert m.recall.estimate == pytest.approx(pi * m.precision.estimate / m.prevalence.estimate)
    assert m.precision.estimate == pytest.approx(m.flagged.estimate)
    for x in (m.precision, m.recall, m.prevalence, m.flag_rate):
        assert math.isfinite(x.standard_error) and x.standard_error > 0
    # recall's delta-method SE against a numerical derivative of the same formula
    assert set(m.to_dict()) >= {"precision", "recall", "prevalence"}
    with pytest.raises(HeroEvalError, match="no classifier flag"):
        he.classifier_metrics(sim.current, calibration, {})
    with pytest.raises(HeroEvalError, match="flags all or none"):
        he.classifier_metrics(sim.current, calibration, dict.fromkeys(sim.current.item_ids, 1))
    with pytest.raises(HeroEvalError, match="must be 0 or 1, got 2"):
        he.classifier_metrics(sim.current, calibration, dict.fromkeys(sim.current.item_ids, 2))
    with pytest.raises(HeroEvalError, match="not a covariate column"):
        he.classifier_metrics(sim.current, calibration, "flag")


# ----------------------------------------------------------- side-by-side win rate


def test_label_map_for_preferences() -> None:
    df = pd.DataFrame({"item_id": [1, 1, 2, 2, 3], "labeler_id": list("ababa"), "label": ["A", "B", "tie", "A", "B"]})
    g = pd.DataFrame({"item_id": [1, 2, 3], "gold": ["A", "tie", "B"]})
    ds = he.read_annotations(df, gold=g, label_map={"A": 1, "B": 0, "tie": None})
    assert ds.label.tolist() == [1, 0, 1, 0] and ds.gold.tolist() == [1, -1, 0]
    assert ds.report.tables[0].dropped == {"label mapped to None by label_map (e.g. a tie)": 1}
    assert ds.report.tables[1].dropped == {"gold mapped to None by label_map (e.g. a tie)": 1}
    strict = he.read_annotations(df, label_map={"A": 1, "B": 0, "tie": 0})
    assert strict.n_annotations == 5
    with pytest.raises(DataError, match=r"row 3: label 'tie' in column 'label' is not in label_map"):
        he.read_annotations(df, label_map={"A": 1, "B": 0})
    with pytest.raises(DataError, match="values must be 0, 1 or None"):
        he.read_annotations(df, label_map={"A": 2})


# ------------------------------------------------------------ solve_score sanity


def test_solve_score_offset_moves_the_root() -> None:
    L = np.random.default_rng(0).normal(size=200)
    m0, _ = solve_score(L)
    m1, _ = solve_score(L, 0.05)
    assert m1 < m0  # a positive offset lowers the root of a decreasing score


def test_paper_dgp_shapes_and_errors() -> None:
    d = paper_dgp(1, labels_per_item=3, N=100, n=50)
    assert d.current.n_annotations == 150 and 0 < d.mu0 < 1
    with pytest.raises(HeroEvalError, match="rho must be in"):
        paper_dgp(1, rho=0)
    with pytest.raises(HeroEvalError, match="labels_per_item must be in"):
        paper_dgp(1, labels_per_item=11)
    with pytest.raises(HeroEvalError, match="needs labels_per_item"):
        paper_dgp(1, current_labeler_weights=np.ones(10))


def test_bootstrap_refits_at_the_calibrations_history_weight(monkeypatch: pytest.MonkeyPatch) -> None:
    """A calibration at history weight w is bootstrapped at w (it was refitted at w = 1 before)."""
    d = paper_dgp(3, rho=0.3)
    cal = he.calibrate(d.history, history_weight=0.1)
    seen: list[float] = []
    real = bootstrap_module.fit_stage_a

    def spy(*args: Any, **kwargs: Any) -> he.Calibration:
        seen.append(kwargs["history_weight"])
        return real(*args, **kwargs)

    monkeypatch.setattr(bootstrap_module, "fit_stage_a", spy)
    he.bootstrap(d.current, cal, method=["hero1"], n_resamples=3, rng=0)
    assert seen == [0.1, 0.1, 0.1]
