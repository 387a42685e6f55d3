"""Issue #5: history weight, Rogan-Gladen, model checks, the dependence test and method="auto".

Each statistic is checked against a closed form or a plain re-implementation
written here from the docstrings, and the tests' simulations use fixed seeds.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit
from scipy.stats import norm

import heroeval as he
from heroeval.checks import dependence, model_checks
from heroeval.choice import auto as choice
from heroeval.errors import HeroEvalError
from heroeval.simulate import dependent_dgp, paper_dgp

# ---------------------------------------------------------------------------
# Stage A with a history weight
# ---------------------------------------------------------------------------


def test_weight_one_is_the_paper_stage_a() -> None:
    d = paper_dgp(3, labels_per_item=3)
    a, b = he.calibrate(d.history), he.calibrate(d.history, history_weight=1.0)
    assert np.array_equal(a.alpha, b.alpha) and np.array_equal(a.beta, b.beta)
    assert b.settings["history_weight"] == 1.0


def test_weight_zero_is_the_gold_only_mle() -> None:
    d = paper_dgp(4, rho=0.3)
    cal = he.calibrate(d.history, history_weight=0.0, covariance=False)
    tp, fn, tn, fp = cal.gold_tp, cal.gold_fn, cal.gold_tn, cal.gold_fp
    np.testing.assert_allclose(cal.alpha, np.clip(tp / (tp + fn), 1e-9, 1 - 1e-9), atol=1e-7)
    np.testing.assert_allclose(cal.beta, np.clip(tn / (tn + fp), 1e-9, 1 - 1e-9), atol=1e-7)


def _weighted_loglik(theta: np.ndarray, ds: he.AnnotationSet, w: float) -> float:
    """Plain per-item weighted two-coin log-likelihood, one round (for the reference fit)."""
    J = ds.n_labelers
    a, b, mu = expit(theta[:J]), expit(theta[J : 2 * J]), expit(theta[2 * J])
    total = 0.0
    for r in range(ds.n_items):
        s, e = ds.item_ptr[r], ds.item_ptr[r + 1]
        lab, z = ds.labeler[s:e], ds.label[s:e]
        l1 = np.sum(np.where(z == 1, np.log(a[lab]), np.log1p(-a[lab])))
        l0 = np.sum(np.where(z == 0, np.log(b[lab]), np.log1p(-b[lab])))
        g = ds.gold[r]
        if g == 1:
            total += np.log(mu) + l1
        elif g == 0:
            total += np.log1p(-mu) + l0
        else:
            total += w * np.logaddexp(np.log(mu) + l1, np.log1p(-mu) + l0)
    return float(total)


def test_weighted_stage_a_maximises_the_weighted_likelihood() -> None:
    d = paper_dgp(5, N=120, n=10, J=4, rho=0.3)
    w = 0.3
    cal = he.calibrate(d.history, history_weight=w, covariance=False)
    theta0 = np.concatenate([np.log(cal.alpha / (1 - cal.alpha)), np.log(cal.beta / (1 - cal.beta)),
                             np.log(cal.round_prevalence / (1 - cal.round_prevalence))])
    ref = minimize(lambda t: -_weighted_loglik(t, d.history, w), theta0 + 0.3, method="BFGS",
                   options={"gtol": 1e-9, "maxiter": 2000})
    J = d.history.n_labelers
    np.testing.assert_allclose(cal.alpha, expit(ref.x[:J]), atol=2e-5)
    np.testing.assert_allclose(cal.beta, expit(ref.x[J : 2 * J]), atol=2e-5)


@pytest.mark.parametrize("bad", [-0.1, 1.5, "half", True, math.nan])
def test_bad_history_weight_is_named(bad: object) -> None:
    d = paper_dgp(0, N=100, n=10)
    with pytest.raises(HeroEvalError, match="history_weight"):
        he.calibrate(d.history, history_weight=bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Rogan-Gladen
# ---------------------------------------------------------------------------


def _rg_plain(current: he.AnnotationSet, cal: he.Calibration, min_youden: float = 0.05) -> tuple[float, float]:
    """Re-implementation from the docstring: per-labeler Rogan-Gladen, diagonal weights, IF standard error
    (current part plus the gold-count part, calibration without history)."""
    idx = {lab: k for k, lab in enumerate(cal.labeler_ids)}
    labs: dict[int, list[tuple[int, int]]] = {}
    for r in range(current.n_items):
        for t in range(current.item_ptr[r], current.item_ptr[r + 1]):
            j = idx[str(current.labeler_ids[current.labeler[t]])]
            labs.setdefault(j, []).append((r, int(current.label[t])))
    rows = []
    for j, obs in sorted(labs.items()):
        npos, nneg = cal.gold_tp[j] + cal.gold_fn[j], cal.gold_tn[j] + cal.gold_fp[j]
        if npos == 0 or nneg == 0:
            continue
        a, b = cal.gold_tp[j] / npos, cal.gold_tn[j] / nneg
        if a + b - 1 <= min_youden:
            continue
        p = sum(z for _, z in obs) / len(obs)
        rows.append((j, obs, a, b, npos, nneg, p, (p + b - 1) / (a + b - 1)))

    def mvar(m0: float, row: tuple) -> float:  # type: ignore[type-arg]
        j, obs, a, b, npos, nneg, _p, _mu = row
        pb = min(max(m0 * a + (1 - m0) * (1 - b), 1e-3), 1 - 1e-3)
        la = (cal.gold_tp[j] + 1) / (npos + 2)
        lb = (cal.gold_tn[j] + 1) / (nneg + 2)
        return (pb * (1 - pb) / len(obs) + m0**2 * la * (1 - la) / npos + (1 - m0) ** 2 * lb * (1 - lb) / nneg) / (
            a + b - 1) ** 2

    w0 = [len(r[1]) * (r[2] + r[3] - 1) ** 2 for r in rows]
    m0 = min(max(sum(w * r[7] for w, r in zip(w0, rows, strict=False)) / sum(w0), 0.02), 0.98)
    for _ in range(2):
        ws = [1 / mvar(m0, r) for r in rows]
        m0 = min(max(sum(w * r[7] for w, r in zip(ws, rows, strict=False)) / sum(ws), 0.02), 0.98)
    tot = sum(ws)
    ws = [w / tot for w in ws]
    est = sum(w * r[7] for w, r in zip(ws, rows, strict=False))
    n = current.n_items
    item_if = np.zeros(n)
    var_hist = 0.0
    for w, (j, obs, a, b, npos, nneg, p, mu) in zip(ws, rows, strict=False):
        Y = a + b - 1
        for r, z in obs:
            item_if[r] += w * (z - p) / (len(obs) * Y)
        tp, fn, tn, fp = cal.gold_tp[j], cal.gold_fn[j], cal.gold_tn[j], cal.gold_fp[j]
        va = (tp * (1 - a) ** 2 + fn * a**2) / npos**2
        vb = (tn * (1 - b) ** 2 + fp * b**2) / nneg**2
        var_hist += (w * mu / Y) ** 2 * va + (w * (1 - mu) / Y) ** 2 * vb
    return est, math.sqrt(float(item_if @ item_if) + var_hist)


def test_rogan_gladen_matches_a_plain_implementation() -> None:
    for seed in range(4):
        d = paper_dgp(seed, labels_per_item=3, rho=0.2)
        cal = he.calibrate(d.history)
        obj = json.loads(cal.to_json())
        obj.pop("gold_labels")  # a file without the gold items' labels (as before 0.2): gold-count variances
        cal_file = he.Calibration.from_dict(obj)
        r = he.rogan_gladen(d.current, cal_file)
        est, se = _rg_plain(d.current, cal_file)
        assert r.estimate == pytest.approx(est, abs=1e-12)
        assert r.standard_error == pytest.approx(se, rel=1e-9)
        # with the history in memory only the history part changes (item-level influence on the gold)
        r_mem = he.rogan_gladen(d.current, cal)
        assert r_mem.estimate == pytest.approx(est, abs=1e-12)
        assert r_mem.variance_current == pytest.approx(r.variance_current, rel=1e-12)


def test_rogan_gladen_single_labeler_is_the_closed_form() -> None:
    hist = he.AnnotationSet.from_arrays(range(10), ["a"] * 10, [1, 1, 1, 1, 0, 0, 0, 0, 0, 1],
                                        gold=(range(10), [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]))
    cal = he.calibrate(hist)  # a: sensitivity 3/3, specificity 5/7
    cur = he.AnnotationSet.from_arrays(range(100, 120), ["a"] * 20, [1] * 11 + [0] * 9)
    r = he.rogan_gladen(cur, cal)
    a, b, p = 1.0, 5 / 7, 11 / 20
    assert r.estimate == pytest.approx((p + b - 1) / (a + b - 1), abs=1e-12)
    # current variance p(1-p)/n / Youden^2
    assert r.variance_current == pytest.approx(p * (1 - p) / 20 / (a + b - 1) ** 2, rel=1e-12)


def test_rogan_gladen_leaves_out_uninformative_labelers() -> None:
    hist = he.AnnotationSet.from_arrays(
        [1, 1, 2, 2, 3, 3, 4, 4], ["good", "coin"] * 4, [1, 1, 1, 0, 0, 1, 0, 0], gold=([1, 2, 3, 4], [1, 1, 0, 0]))
    cal = he.calibrate(hist)  # coin: sensitivity 1/2, specificity 1/2
    cur = he.AnnotationSet.from_arrays([5, 5, 6, 6], ["good", "coin"] * 2, [1, 0, 0, 1])
    r = he.rogan_gladen(cur, cal)
    assert r.details["labelers_left_out"] == ["coin"] and r.details["labelers_used"] == 1
    with pytest.raises(HeroEvalError, match="weights"):
        he.rogan_gladen(cur, cal, weights="optimal")  # type: ignore[arg-type]


def test_rogan_gladen_is_unbiased_under_dependence_where_hero1_is_not() -> None:
    """dependent_dgp (hard items fool labelers together): 60 replications, fixed seeds."""
    e_rg, e_h1, cover = [], [], 0
    for s in range(60):
        d = dependent_dgp(s)
        cal = he.calibrate(d.history)
        r = he.rogan_gladen(d.current, cal)
        e_rg.append(r.estimate - d.current_rate)
        e_h1.append(he.hero1(d.current, cal).estimate - d.current_rate)
        lo, hi = r.confidence_interval()
        cover += lo <= d.current_rate <= hi
    se_mean = np.std(e_rg) / math.sqrt(60)
    assert abs(np.mean(e_rg)) < 3 * se_mean + 0.005
    assert np.mean(e_h1) > 0.05  # the two-coin likelihood is wrong here: plain HERO-1 is biased upwards
    assert cover / 60 >= 0.88


def _eb_plain(succ: list[float], n: list[float]) -> list[float]:
    """Beta-binomial method-of-moments shrinkage, written from the docstring with loops."""
    idx = [k for k in range(len(n)) if n[k] > 0]
    tot = sum(n[k] for k in idx)
    m = sum(succ[k] for k in idx) / tot
    w = {k: n[k] / tot for k in idx}
    rbar = sum(w[k] * succ[k] / n[k] for k in idx)
    s2 = sum(w[k] * (succ[k] / n[k] - rbar) ** 2 for k in idx)
    g = {k: w[k] * (1 - w[k]) for k in idx}
    tau2 = (s2 - m * (1 - m) * sum(g[k] / n[k] for k in idx)) / sum(g[k] * (1 - 1 / n[k]) for k in idx)
    if tau2 <= 0:
        return [m] * len(n)
    kk = m * (1 - m) / tau2 - 1
    return [(succ[k] + kk * m) / (n[k] + kk) for k in range(len(n))]


def _rg_pooled_plain(current: he.AnnotationSet, cal: he.Calibration) -> tuple[float, int]:
    """weights="pooled" from its docstring: sum_j c_j (p_j + b_j - 1) / sum_j c_j (a_j + b_j - 1)."""
    J = cal.n_labelers
    tp, fn, tn, fp = (np.asarray(x, dtype=float) for x in (cal.gold_tp, cal.gold_fn, cal.gold_tn, cal.gold_fp))
    a_s = _eb_plain(list(tp), list(tp + fn))
    b_s = _eb_plain(list(tn), list(tn + fp))
    lab_idx = {lab: k for k, lab in enumerate(cal.labeler_ids)}
    n = np.zeros(J)
    s = np.zeros(J)
    for lab, z in zip(current.labeler_ids[current.labeler], current.label, strict=True):
        n[lab_idx[lab]] += 1
        s[lab_idx[lab]] += z
    use = [j for j in range(J)
           if n[j] > 0 and a_s[j] + b_s[j] - 1 > 0.05 and tp[j] + fn[j] > 0 and tn[j] + fp[j] > 0]
    a = {j: tp[j] / (tp[j] + fn[j]) for j in use}
    b = {j: tn[j] / (tn[j] + fp[j]) for j in use}

    def c(m0: float, j: int) -> float:
        pbar = min(max(m0 * a_s[j] + (1 - m0) * (1 - b_s[j]), 1e-3), 1 - 1e-3)
        v = (pbar * (1 - pbar) / n[j] + m0**2 * a_s[j] * (1 - a_s[j]) / (tp[j] + fn[j])
             + (1 - m0) ** 2 * b_s[j] * (1 - b_s[j]) / (tn[j] + fp[j]))
        return (a_s[j] + b_s[j] - 1) / v

    def ratio(cs: dict[int, float]) -> float:
        return sum(cs[j] * (s[j] / n[j] + b[j] - 1) for j in use) / sum(cs[j] * (a[j] + b[j] - 1) for j in use)

    cs = {j: n[j] * (a_s[j] + b_s[j] - 1) for j in use}
    for _ in range(2):
        m0 = min(max(ratio(cs), 0.02), 0.98)
        cs = {j: c(m0, j) for j in use}
    return ratio(cs), len(use)


def test_rogan_gladen_pooled_matches_a_plain_implementation() -> None:
    """weights="pooled": plain proportions in the ratio, shrunk (empirical-Bayes) rates in the weights."""
    for seed in range(3):
        d = paper_dgp(seed, labels_per_item=3, rho=0.2)
        cal = he.calibrate(d.history)
        r = he.rogan_gladen(d.current, cal, weights="pooled")
        est, used = _rg_pooled_plain(d.current, cal)
        assert r.estimate == pytest.approx(est, abs=1e-12)
        assert r.details["labelers_used"] == used


def test_rogan_gladen_pooled_single_labeler_is_the_closed_form() -> None:
    hist = he.AnnotationSet.from_arrays(range(10), ["a"] * 10, [1, 1, 1, 1, 0, 0, 0, 0, 0, 1],
                                        gold=(range(10), [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]))
    cal = he.calibrate(hist)
    cur = he.AnnotationSet.from_arrays(range(100, 120), ["a"] * 20, [1] * 11 + [0] * 9)
    r = he.rogan_gladen(cur, cal, weights="pooled")
    a, b, p = 1.0, 5 / 7, 11 / 20
    assert r.estimate == pytest.approx((p + b - 1) / (a + b - 1), abs=1e-12)
    assert r.variance_current == pytest.approx(p * (1 - p) / 20 / (a + b - 1) ** 2, rel=1e-12)
    # shrinkage of a lone labeler: no between-labeler variance to estimate, so the pool itself
    assert he.estimators.misclassification._eb_shrink(np.array([3.0]), np.array([3.0]))[0] == pytest.approx(1.0, abs=1e-5)


def test_rogan_gladen_pooled_is_unbiased_under_dependence() -> None:
    """dependent_dgp, 60 fixed seeds: unbiased, and its influence-value interval covers."""
    e, cover = [], 0
    for s in range(60):
        d = dependent_dgp(s)
        cal = he.calibrate(d.history)
        r = he.rogan_gladen(d.current, cal, weights="pooled")
        e.append(r.estimate - d.current_rate)
        lo, hi = r.confidence_interval()
        cover += lo <= d.current_rate <= hi
    assert abs(np.mean(e)) < 3 * np.std(e) / math.sqrt(60) + 0.005
    assert cover / 60 >= 0.88


# ---------------------------------------------------------------------------
# The dependence test
# ---------------------------------------------------------------------------


def test_dependence_pair_statistic_by_hand() -> None:
    # 6 gold-1 items, two labelers; leave-one-out rates and standardised residual products by hand
    z1 = [1, 1, 1, 0, 1, 0]
    z2 = [1, 1, 0, 0, 1, 1]
    items = [i for i in range(6) for _ in (0, 1)]
    labs = ["a", "b"] * 6
    lab = [v for pair in zip(z1, z2, strict=False) for v in pair]
    ds = he.AnnotationSet.from_arrays(items, labs, lab, gold=(range(6), [1] * 6))
    t = dependence.dependence_test(ds)
    ts = []
    for r in range(6):
        a1 = (sum(z1) - z1[r]) / 5
        a2 = (sum(z2) - z2[r]) / 5
        ts.append((z1[r] - a1) * (z2[r] - a2) / math.sqrt(a1 * (1 - a1) * a2 * (1 - a2)))
    assert t.n_pairs == 1 and t.n_items == 6
    assert t.z == pytest.approx(sum(ts) / math.sqrt(6), rel=1e-12)
    assert t.p_value == pytest.approx(norm.sf(sum(ts) / math.sqrt(6)), rel=1e-12)
    assert t.pairs[0]["correlation"] == pytest.approx(np.mean(ts), rel=1e-12)


def test_dependence_test_size_and_power() -> None:
    """False alarms near 5 % with independent labelers; fires on shared errors (fixed seeds)."""
    null = [dependence.dependence_test(paper_dgp(s).history).p_value for s in range(200)]
    size = float(np.mean(np.array(null) < 0.05))
    assert 0.02 <= size <= 0.09, size
    alt = [dependence.dependence_test(dependent_dgp(s).history).p_value for s in range(30)]
    assert np.mean(np.array(alt) < 0.05) >= 0.9


# ---------------------------------------------------------------------------
# Cross-validated checks and the recommendation
# ---------------------------------------------------------------------------


def test_checks_mock_round_is_the_cross_fitted_hero1() -> None:
    d = paper_dgp(7, labels_per_item=3, rho=0.2)
    chk = model_checks.run_checks(d.history, folds=4, weight_grid=(1.0,), seed=3)
    folds = model_checks._folds(d.history, 4, 3)
    # stratified: every fold's share of gold 1 within one item of the overall share
    gold_all = np.flatnonzero(d.history.gold >= 0)
    assert sorted(np.concatenate(folds).tolist()) == gold_all.tolist()
    L_all = []
    for f in folds:
        train = np.setdiff1d(np.arange(d.history.n_items), f)
        cal = he.calibrate(d.history.take_items(train), covariance=False)
        mock = d.history.take_items(f)
        # the cross-fitted log-likelihood ratios: the mock items' labels under the fold's calibration
        L = []
        for r in range(mock.n_items):
            s, e = mock.item_ptr[r], mock.item_ptr[r + 1]
            lab, z = mock.labeler[s:e], mock.label[s:e]
            a, b = cal.alpha[lab], cal.beta[lab]
            L.append(float(np.sum(np.where(z == 1, np.log(a) - np.log1p(-b), np.log1p(-a) - np.log(b)))))
        L_all.extend(L)
    from scipy.optimize import brentq

    L_arr = np.array(L_all)
    mu = brentq(lambda m: np.mean(np.expm1(L_arr) / (m * np.exp(L_arr) + 1 - m)), 1e-9, 1 - 1e-9, xtol=1e-14)
    row = chk.mock_row("hero1", 1.0)
    assert row is not None
    # the checks' refits start from the whole history's fit (issue #20): the same maximum as these fits from the
    # gold start, to the EM tolerance (1e-8 on the parameters), not to rounding
    assert row["estimate"] == pytest.approx(mu, abs=1e-7)
    assert row["truth"] == pytest.approx(float(d.history.gold[gold_all].mean()))
    scratch = model_checks.run_checks(d.history, folds=4, weight_grid=(1.0,), seed=3, refit="scratch")
    scratch_row = scratch.mock_row("hero1", 1.0)
    assert scratch_row is not None and scratch_row["estimate"] == pytest.approx(mu, abs=1e-10)


def test_checks_round_trip_and_auto_from_a_file(tmp_path: object) -> None:
    from pathlib import Path

    d = paper_dgp(8, labels_per_item=3)
    cal = he.calibrate(d.history, checks=True)
    p = Path(str(tmp_path)) / "cal.json"
    cal.save(p)
    loaded = he.load_calibration(p)
    assert loaded.checks is not None
    assert loaded.checks.to_dict() == json.loads(json.dumps(cal.checks.to_dict()))
    r = he.estimate(d.current, loaded, method="auto")
    assert not isinstance(r, he.EstimateCollection)
    assert r.details["auto"]["reason"]
    assert r.details["auto"]["history_weight"] in (None, 1.0)  # no history: only the file's own weight


def test_auto_needs_checks_or_history() -> None:
    d = paper_dgp(9, N=200, n=50)
    cal = he.Calibration.from_dict(json.loads(he.calibrate(d.history).to_json()))
    with pytest.raises(HeroEvalError, match="model checks"):
        he.estimate(d.current, cal, method="auto")
    res = he.estimate(d.current, cal, method=["hero1", "auto"])
    assert isinstance(res, he.EstimateCollection) and res.recommended is None and "auto" in res.skipped


def test_history_weight_cv_keeps_its_checks() -> None:
    d = paper_dgp(10, labels_per_item=3, rho=0.2)
    cal = he.calibrate(d.history, history_weight="cv")
    assert cal.checks is not None
    assert cal.settings["history_weight"] == cal.checks.chosen_weight
    best = max(cal.checks.log_score.values(), key=lambda v: v[0])[0]
    assert cal.checks.log_score[cal.checks.chosen_weight][0] == best


def test_auto_predicted_rmse_by_hand_and_joint_default() -> None:
    """Each candidate's predicted RMSE from its mock row, by hand; independent labelers: HERO joint is kept."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = paper_dgp(4)
        cal = he.calibrate(d.history, checks=True)
        rec = choice.recommend(d.current, cal)
    assert cal.checks is not None and cal.checks.dependence.p_value >= model_checks.DEPENDENCE_ALPHA
    assert (rec.method, rec.history_weight) == ("hero_joint", 1.0)
    methods = {r["method"] for r in rec.table}
    assert {"gold_proportion", "rogan_gladen", "hero1", "hero_joint"} <= methods
    assert all(r["history_weight"] != 0.0 for r in rec.table)  # gold-only maximum likelihood is not a candidate
    for row in rec.table:
        mrow = cal.checks.mock_row("hero1" if row["method"] == "hero_joint" else row["method"], row["history_weight"])
        assert mrow is not None
        vh = row["variance_history"]
        b, s_b2 = mrow["bias"], mrow["bias_se"] ** 2 + vh
        want = math.sqrt(max(b * b - s_b2, 0.0) + mrow["bias_se"] ** 2 * mrow["n_items"] / d.current.n_items + vh)
        assert row["predicted_rmse"] == pytest.approx(want, rel=1e-12)


def test_auto_chooses_by_predicted_rmse_when_labelers_err_together() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = dependent_dgp(5)
        cal = he.calibrate(d.history, checks=True)
        rec = choice.recommend(d.current, cal)
    assert cal.checks is not None and cal.checks.dependence.p_value < model_checks.DEPENDENCE_ALPHA
    best = min(r["predicted_rmse"] for r in rec.table if "predicted_rmse" in r and math.isfinite(r["predicted_rmse"]))
    chosen = next(r for r in rec.table if (r["method"], r["history_weight"]) == (rec.method, rec.history_weight))
    assert chosen["predicted_rmse"] == best
    assert "labelers err together" in rec.reason


def test_auto_moves_away_from_a_biased_hero1() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = dependent_dgp(2)
        cal = he.calibrate(d.history, checks=True)
        res = he.estimate(d.current, cal, method="all", recommend=True)
    assert isinstance(res, he.EstimateCollection) and res.recommended is not None
    h1 = next(r for r in res.recommended.table if r["method"] == "hero1" and r["history_weight"] == 1.0)
    assert h1["bias_flagged"]
    assert res.recommended.method != "hero1" or res.recommended.history_weight != 1.0
    assert abs(res.recommended.result.estimate - d.current_rate) < abs(res["hero1"].estimate - d.current_rate)
    js = res.to_dict()
    assert next(iter(js)) == "recommended"
    assert {"method", "estimate", "ci_low", "ci_high", "reason"} <= set(js["recommended"])
