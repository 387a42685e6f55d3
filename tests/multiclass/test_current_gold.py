"""Prediction-powered K-class shares from a few expert labels on the round (heroeval.multiclass.current_gold).

Checked three ways: closed forms (lam = 0 is the gold's class shares with the finite-population variance
``(1 - k/n) s^2 / k``; a stratified design gives Cochran's stratified mean and variance), a plain re-implementation
of the tuned estimate and its covariance, and a simulation of coverage against the round's realised shares.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import beta, norm, t

from heroeval.errors import DataError, HeroEvalError
from heroeval.estimators.ppi import PSEUDO
from heroeval.multiclass import MultiClassData, calibrate_multiclass, multiclass_from_arrays
from heroeval.multiclass.current_gold import (
    PREDICTORS,
    class_predictions,
    plan_expert_labels_multiclass,
    ppi_multiclass,
)
from heroeval.multiclass.simulate import simulate_rounds


def _round_with_gold(seed: int, k: int, *, n: int = 300, K: int = 4) -> tuple[MultiClassData, np.ndarray, np.ndarray]:
    """A round of n items with every item's true class, and gold revealed on k of them drawn uniformly."""
    sim = simulate_rounds(np.random.default_rng(seed), K=K, J=8, n_history=n, n_current=10, rho=1.0,
                          structure="full", ordinal=False)
    full = sim.history  # every item has gold: the round's truth
    ds = full.annotations
    y = ds.gold.astype(np.int64)
    rng = np.random.default_rng(seed + 1)
    keep = np.zeros(ds.n_items, dtype=bool)
    keep[rng.choice(ds.n_items, size=k, replace=False)] = True
    g = np.where(keep, ds.gold, -1).astype(ds.gold.dtype)
    return MultiClassData(replace(ds, gold=g), full.classes, full.values), y, keep


def test_lambda_zero_is_the_gold_shares_with_the_finite_population_variance() -> None:
    cur, y, keep = _round_with_gold(3, 40)
    K, n, k = cur.n_classes, cur.n_items, 40
    est = ppi_multiclass(cur, lam=0.0, pseudo=0.0)
    Y = np.eye(K)[y[keep]]
    np.testing.assert_allclose(est.estimate, Y.mean(axis=0), atol=1e-12)
    assert est.method == "gold_only"
    V = (1 - k / n) * np.cov(Y, rowvar=False, ddof=1) / k
    np.testing.assert_allclose(est.covariance(), V, atol=1e-12)
    vals = cur.values
    ms = est.mean_score()
    assert ms["estimate"] == pytest.approx(float(vals @ Y.mean(axis=0)))
    assert ms["standard_error"] == pytest.approx(math.sqrt((1 - k / n) * np.var(Y @ vals, ddof=1) / k))


def test_tuned_estimate_and_covariance_match_a_plain_implementation() -> None:
    cur, y, keep = _round_with_gold(5, 60)
    K, n = cur.n_classes, cur.n_items
    for predictor in ("majority_vote", "dawid_skene"):
        est = ppi_multiclass(cur, predictor, pseudo=0.0)
        F = class_predictions(cur, predictor)
        assert np.allclose(F.sum(axis=1), 1.0)
        FS, Y = F[keep], np.eye(K)[y[keep]]
        Fc, Yc = FS - FS.mean(axis=0), Y - Y.mean(axis=0)
        lam = min(max(float(np.sum(Fc * Yc) / np.sum(Fc**2)), 0.0), 1.0)
        assert est.details["lambda"] == pytest.approx(lam, abs=1e-12)
        p = Y.mean(axis=0) + lam * (F.mean(axis=0) - FS.mean(axis=0))
        np.testing.assert_allclose(est.estimate, p, atol=1e-12)
        assert est.estimate.sum() == pytest.approx(1.0)
        k = int(keep.sum())
        V = (1 - k / n) * np.cov(Y - lam * FS, rowvar=False, ddof=1) / k
        np.testing.assert_allclose(est.covariance(), V, atol=1e-12)


def test_a_stratified_design_gives_cochrans_stratified_mean_and_variance() -> None:
    cur, y, _ = _round_with_gold(8, 1)
    ds = cur.annotations
    n, K = ds.n_items, cur.n_classes
    stratum = np.where(np.arange(n) < n // 3, "a", "b")
    rng = np.random.default_rng(0)
    take = {"a": 12, "b": 30}
    keep = np.zeros(n, dtype=bool)
    pi = np.zeros(n)
    for h, kh in take.items():
        idx = np.flatnonzero(stratum == h)
        keep[rng.choice(idx, size=kh, replace=False)] = True
        pi[idx] = kh / idx.size
    g = np.where(keep, y, -1).astype(ds.gold.dtype)
    d = MultiClassData(replace(ds, gold=g, gold_pi=pi, gold_stratum=stratum.astype(object)), cur.classes, cur.values)
    est = ppi_multiclass(d, lam=0.0, pseudo=0.0)
    mean = np.zeros(K)
    V = np.zeros((K, K))
    for h, kh in take.items():
        Nh = int((stratum == h).sum())
        Yh = np.eye(K)[y[keep & (stratum == h)]]
        mean += Nh / n * Yh.mean(axis=0)
        V += (1 - kh / Nh) * Nh**2 * np.cov(Yh, rowvar=False, ddof=1) / kh / n**2
    np.testing.assert_allclose(est.estimate, mean, atol=1e-12)
    np.testing.assert_allclose(est.covariance(), V, atol=1e-12)


def test_a_class_without_gold_spread_gets_the_floor_not_a_point_interval() -> None:
    # ten items, gold on five, all of class "a": the gold-only variance of every class is 0
    items = np.repeat(np.arange(10), 3)
    labels = np.array(["a", "a", "b"] * 10)
    d = multiclass_from_arrays(items, np.tile(["x", "y", "z"], 10), labels, classes=["a", "b", "c"],
                               gold=(list(range(5)), ["a"] * 5))
    est = ppi_multiclass(d, lam=0.0)
    k, n = 5, 10
    floor = (1 - k / n) / k * PSEUDO / (k + 2 * PSEUDO)
    np.testing.assert_allclose(np.diag(est.covariance()), floor, rtol=1e-12)
    assert est.details["floored"] == ["a", "b", "c"]
    assert any("floored" in s for s in est.notes)
    lo, hi = est.intervals()[1]
    assert lo == 0.0 and hi > 0.0
    raw = ppi_multiclass(d, lam=0.0, pseudo=0.0)
    assert np.all(raw.covariance() == 0.0) and raw.details["floored"] == []


def test_hero1_predictor_uses_the_calibration_and_errors_are_clear() -> None:
    sim = simulate_rounds(np.random.default_rng(11), K=3, J=6, n_history=400, n_current=10, rho=0.3)
    cal = calibrate_multiclass(sim.history, structure="symmetric")
    cur, _, _ = _round_with_gold(11, 30, K=3)
    F = class_predictions(cur, "hero1", calibration=cal)
    assert F.shape == (cur.n_items, 3) and np.allclose(F.sum(axis=1), 1.0)
    est = ppi_multiclass(cur, "hero1", calibration=cal)
    assert est.method == "ppi:hero1" and est.details["n_gold"] == 30
    with pytest.raises(HeroEvalError, match="needs a calibration"):
        class_predictions(cur, "hero1")
    with pytest.raises(HeroEvalError, match="predictor must be one of"):
        ppi_multiclass(cur, "vote")
    with pytest.raises(HeroEvalError, match="lam must be in"):
        ppi_multiclass(cur, lam=1.5)
    with pytest.raises(HeroEvalError, match="pseudo must be"):
        ppi_multiclass(cur, pseudo=-1.0)
    none = MultiClassData(replace(cur.annotations, gold=np.full(cur.n_items, -1, dtype=cur.annotations.gold.dtype)),
                          cur.classes, cur.values)
    with pytest.raises(DataError, match="needs at least 2"):
        ppi_multiclass(none)
    assert set(PREDICTORS) == {"majority_vote", "dawid_skene", "hero1"}


def test_coverage_of_the_shares_and_mean_score_on_simulated_rounds() -> None:
    """200 rounds (K = 4, n = 300, 30 uniform gold items): per-class and mean-score 95 % intervals cover the realised
    shares in 0.92-0.98 of rounds (a true 95 % rate lands outside with probability about 0.03), and majority-vote
    PPI's mean-score interval is narrower than the gold alone's on average."""
    hits, ms_hits, w_ppi, w_gold = np.zeros(4), 0, [], []
    for seed in range(200):
        cur, y, _ = _round_with_gold(1000 + seed, 30)
        truth = np.bincount(y, minlength=4) / y.size
        est = ppi_multiclass(cur, "majority_vote")
        ci = est.intervals()
        hits += [ci[c][0] <= truth[c] <= ci[c][1] for c in range(4)]
        ms = est.mean_score()
        ms_hits += ms["ci_low"] <= float(cur.values @ truth) <= ms["ci_high"]
        w_ppi.append(ms["ci_high"] - ms["ci_low"])
        g = ppi_multiclass(cur, lam=0.0).mean_score()
        w_gold.append(g["ci_high"] - g["ci_low"])
    assert np.all((hits / 200 >= 0.92) & (hits / 200 <= 0.985)), hits / 200
    assert 0.92 <= ms_hits / 200 <= 0.985
    assert np.mean(w_ppi) < 0.8 * np.mean(w_gold)


def test_intervals_are_the_binary_paths_per_class_wilson_t_and_clopper_pearson() -> None:
    """gold-only: Wilson's interval at k (n - 1) / (n - k) per class; PPI: t with k - 1 df, widened to the gold's
    Clopper–Pearson interval for a class absent from the gold; the mean score: estimate +- t SE."""
    cur, y, keep = _round_with_gold(21, 12, K=5)  # class "2" has no gold item among the 12
    k, n = 12, cur.n_items
    g = ppi_multiclass(cur, lam=0.0)
    z = norm.ppf(0.975)
    m = k * (n - 1) / (n - k)
    for c, (lo, hi) in enumerate(g.intervals()):
        p = float(np.mean(y[keep] == c))
        centre = (p + z * z / (2 * m)) / (1 + z * z / m)
        half = z * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / (1 + z * z / m)
        assert (lo, hi) == pytest.approx((max(0.0, centre - half), min(1.0, centre + half)), abs=1e-12)
    e = ppi_multiclass(cur, "majority_vote")
    se = e.standard_errors()
    q = t.ppf(0.975, k - 1)
    seen = np.bincount(y[keep], minlength=5)
    assert seen[1] == 0 and e.intervals()[1][1] >= float(beta.ppf(0.975, 1, k)) - 1e-12
    for c, (lo, hi) in enumerate(e.intervals()):
        lo_t, hi_t = max(0.0, e.estimate[c] - q * se[c]), min(1.0, e.estimate[c] + q * se[c])
        if 0 < seen[c] < k:
            assert (lo, hi) == pytest.approx((lo_t, hi_t), abs=1e-12)
        else:  # absent from the gold (or all of it): the gold's own Clopper–Pearson interval is inside
            cp_hi = 1.0 if seen[c] == k else float(beta.ppf(0.975, seen[c] + 1, k - seen[c]))
            assert lo <= lo_t + 1e-12 and hi >= max(hi_t, cp_hi) - 1e-12
    ms = e.mean_score()
    assert (ms["ci_low"], ms["ci_high"]) == pytest.approx(
        (ms["estimate"] - q * ms["standard_error"], ms["estimate"] + q * ms["standard_error"]), abs=1e-12)
    d = e.to_dict()
    assert [d["classes"][c]["ci_low"] for c in cur.classes] == pytest.approx([lo for lo, _ in e.intervals()])


def test_to_frame_and_html_show_the_numbers_of_to_dict() -> None:
    """Notebook parity: one row per class and the mean score, the same estimate and interval as to_dict."""
    cur, _, _ = _round_with_gold(31, 40)
    e = ppi_multiclass(cur, "dawid_skene")
    df, d = e.to_frame(), e.to_dict()
    assert list(df["quantity"]) == [f"share {c}" for c in cur.classes] + ["mean score"]
    for c in cur.classes:
        row = df[df["quantity"] == f"share {c}"].iloc[0]
        assert (row["estimate"], row["ci_low"], row["ci_high"]) == (
            d["classes"][c]["estimate"], d["classes"][c]["ci_low"], d["classes"][c]["ci_high"])
    assert df.iloc[-1]["ci_high"] == d["mean_score"]["ci_high"] and set(df["method"]) == {"ppi:dawid_skene"}
    assert "ppi:dawid_skene" in e._repr_html_() and "<table" in e._repr_html_()


def test_plan_spreads_and_labels_match_a_plain_computation() -> None:
    """The plan's residual spread is w' cov(Y - lam F) w on the history's gold (lam the plain moment slope), the
    labels it names are the fewest whose t half-width meets the target, and the gold-only figure uses cov(Y)."""
    sim = simulate_rounds(np.random.default_rng(2), K=4, J=8, n_history=500, n_current=10, rho=0.2)
    hist = sim.history
    n = 300
    p = plan_expert_labels_multiclass(hist, half_width=0.12, round_items=n)
    ds = hist.annotations
    idx = np.flatnonzero(ds.gold >= 0)
    F = class_predictions(hist.take_items(idx), "majority_vote")
    Y = np.eye(4)[ds.gold[idx]]
    Fc, Yc = F - F.mean(axis=0), Y - Y.mean(axis=0)
    lam = min(max(float(np.sum(Fc * Yc) / np.sum(Fc**2)), 0.0), 1.0)
    w = hist.values
    assert p.lam == pytest.approx(lam, abs=1e-12)
    assert p.spread_ppi == pytest.approx(float(w @ np.cov(Y - lam * F, rowvar=False) @ w), rel=1e-12)
    assert p.spread_gold_only == pytest.approx(float(w @ np.cov(Y, rowvar=False) @ w), rel=1e-12)

    def hw(k: int, s2: float) -> float:
        return float(t.ppf(0.975, k - 1) * math.sqrt((1 - k / n) * s2 / k))

    for k, s2 in ((p.k_ppi, p.spread_ppi), (p.k_gold_only, p.spread_gold_only)):
        assert k is not None and hw(k, s2) <= 0.12 < hw(k - 1, s2)
        assert p.half_width_at(k, "ppi" if s2 == p.spread_ppi else "gold_only") == pytest.approx(hw(k, s2))
    assert p.k_ppi < p.k_gold_only and p.k_range[0] <= p.k_ppi <= p.k_range[1]
    shares = plan_expert_labels_multiclass(hist, half_width=0.05, round_items=n, target="shares")
    assert shares.target_class is not None and shares.spread_ppi <= 0.25
    assert plan_expert_labels_multiclass(hist, half_width=1e-4, round_items=n).k_ppi == n  # label every item
    with pytest.raises(HeroEvalError, match="target must be"):
        plan_expert_labels_multiclass(hist, half_width=0.1, round_items=n, target="median")


def test_plan_predicts_the_half_width_obtained_on_simulated_rounds() -> None:
    """Rounds from the history's labelers (60 rounds, 40 uniform gold labels of 300 items): the half-width the plan
    predicts for the mean score is within 15 % of the mean one obtained, with PPI and with the gold alone."""
    sim = simulate_rounds(np.random.default_rng(40), K=4, J=8, n_history=600, n_current=10, rho=0.2,
                          structure="full", ordinal=False)
    plan = plan_expert_labels_multiclass(sim.history, half_width=0.1, round_items=300)
    got_ppi, got_gold = [], []
    for seed in range(60):
        cur, _, _ = _round_with_gold(5000 + seed, 40)
        ms = ppi_multiclass(cur, "majority_vote").mean_score()
        got_ppi.append((ms["ci_high"] - ms["ci_low"]) / 2)
        g = ppi_multiclass(cur, lam=0.0).mean_score()
        got_gold.append((g["ci_high"] - g["ci_low"]) / 2)
    assert plan.half_width_at(40, "ppi") / np.mean(got_ppi) == pytest.approx(1.0, abs=0.15)
    assert plan.half_width_at(40, "gold_only") / np.mean(got_gold) == pytest.approx(1.0, abs=0.15)
