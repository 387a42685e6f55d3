"""The recommended K-class estimate (heroeval.choice.multiclass_auto) and its mock rounds.

Checked three ways: exact identities of the mock rounds (a fold's mean pseudo-error is the fold estimate's error;
re-weighted gold shares are the target shares), a plain re-implementation of the bias, noise and MSE formulas, and
a simulation of coverage on rounds whose class shares differ from the history's.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from heroeval.choice.multiclass_auto import DEFAULT_ALPHA, MIN_GOLD, recommend_multiclass
from heroeval.errors import HeroEvalError
from heroeval.inference.bias_aware import bias_aware_cv
from heroeval.multiclass import (
    MultiClassData,
    calibrate_multiclass,
    dawid_skene_multiclass,
    hero1_multiclass,
    multiclass_from_arrays,
)
from heroeval.multiclass.mock_rounds import dawid_skene_posteriors, history_covariance, mock_rounds
from heroeval.multiclass.simulate import simulate_rounds


def _sim(seed: int, **kw):
    o = {"K": 4, "J": 8, "n_history": 600, "n_current": 200, "rho": 0.12, "ordinal": False, "structure": "full"}
    o.update(kw)
    return simulate_rounds(np.random.default_rng(seed), **o)


def test_fold_mean_pseudo_error_is_the_fold_estimates_error() -> None:
    """d's mean over a fold is HERO-1's estimate on the fold's items (Stage A refitted without their gold) minus the
    fold's gold class shares: computed again here from scratch."""
    sim = _sim(1)
    hist = sim.history
    mock = mock_rounds(hist, ["symmetric"], folds=3, seed=4)
    ds = hist.annotations
    K = hist.n_classes
    for f in range(3):
        held = mock.gold_items[mock.fold == f]
        g = ds.gold.copy()
        g[held] = -1
        cal = calibrate_multiclass(MultiClassData(replace(ds, gold=g), hist.classes, hist.values), structure="symmetric")
        cur = MultiClassData(replace(ds, gold=np.full(ds.n_items, -1, dtype=ds.gold.dtype)), hist.classes,
                             hist.values).take_items(held)
        est = hero1_multiclass(cur, cal).estimate
        shares = np.bincount(ds.gold[held], minlength=K) / held.size
        d = mock.candidates["hero1:symmetric"].errors[mock.fold == f]
        np.testing.assert_allclose(d.mean(axis=0), est - shares, atol=1e-10)
        np.testing.assert_allclose(mock.candidates["hero1:symmetric"].fold_errors[f], est - shares, atol=1e-10)
        # majority vote's pseudo-errors are item by item its vote minus the gold indicator
        mv = mock.candidates["majority_vote"].errors[mock.fold == f]
        assert np.allclose(mv.sum(axis=1), 0.0)


def _plain_ds(sets, K, iters=3000):
    """Plain Dawid–Skene EM over several annotation sets fitted together (labelers matched by name, one class share
    vector per set), from each item's label shares: the posteriors of every set's items."""
    names = sorted({str(x) for s in sets for x in s.annotations.labeler_ids})
    items = []  # (set index, [(labeler code, label), ...])
    for g, s in enumerate(sets):
        a = s.annotations
        for i in range(a.n_items):
            lo, hi = a.item_ptr[i], a.item_ptr[i + 1]
            items.append((g, [(names.index(str(a.labeler_ids[a.labeler[t]])), int(a.label[t])) for t in range(lo, hi)]))
    post = []
    for _, labs in items:
        v = np.zeros(K)
        for _, lab in labs:
            v[lab] += 1
        post.append(v / v.sum())
    for _ in range(iters):
        conf = np.full((len(names), K, K), 1e-300)
        prev = np.full((len(sets), K), 1e-300)
        for (g, labs), w in zip(items, post, strict=True):
            prev[g] += w
            for j, lab in labs:
                conf[j, :, lab] += w
        conf /= conf.sum(axis=2, keepdims=True)
        prev /= prev.sum(axis=1, keepdims=True)
        new = []
        for g, labs in items:
            lw = np.log(prev[g]).copy()
            for j, lab in labs:
                lw += np.log(conf[j, :, lab])
            e = np.exp(lw - lw.max())
            new.append(e / e.sum())
        if max(np.abs(a - b).max() for a, b in zip(new, post, strict=True)) < 1e-11:
            post = new
            break
        post = new
    n0 = sets[0].n_items
    return np.array(post[n0:])


def test_dawid_skene_posteriors_match_a_plain_em_and_the_current_only_fit() -> None:
    """The Dawid–Skene mock round: the joint fit of the current round and a fold, against a plain EM written here;
    and with the fold a copy of the round itself, the copy's posteriors average to current-only Dawid–Skene's
    estimate (doubling the data leaves the maximum where it was)."""
    sim = _sim(3, J=5, n_history=60, n_current=40)
    cur = sim.current
    other = sim.history.take_items(np.arange(25))
    other = MultiClassData(replace(other.annotations, gold=np.full(25, -1, dtype=other.annotations.gold.dtype)),
                           other.classes, other.values)
    got = dawid_skene_posteriors(cur, other, tol=1e-12)
    np.testing.assert_allclose(got, _plain_ds([cur, other], 4), atol=1e-6)
    twice = dawid_skene_posteriors(cur, cur, tol=1e-12)
    np.testing.assert_allclose(twice.mean(axis=0), dawid_skene_multiclass(cur, tol=1e-12).estimate, atol=1e-6)


def test_dawid_skene_is_scored_on_the_mock_rounds_with_the_current_round() -> None:
    sim = _sim(5)
    mock = mock_rounds(sim.history, ["symmetric"], folds=3, current=sim.current)
    assert "dawid_skene" in mock.candidates
    ev = mock.candidates["dawid_skene"]
    assert np.allclose(ev.errors.sum(axis=1), 0.0) and np.all(ev.history_cov == 0)
    assert "dawid_skene" not in mock_rounds(sim.history, ["symmetric"], folds=3).candidates
    rec = recommend_multiclass(sim.current, sim.history, structures=["symmetric"])
    assert "dawid_skene" in set(rec.candidates["method"])


def test_folds_leave_whole_rounds_out_when_rounds_hold_gold() -> None:
    items = [f"i{k}" for k in range(12) for _ in range(2)]
    labs = ["a", "b"] * 12
    lab = [k % 3 for k in range(12) for _ in range(2)]
    ids = [f"i{k}" for k in range(12)]
    d = multiclass_from_arrays(items, labs, lab, classes=[0, 1, 2], gold=(ids, [k % 3 for k in range(12)]),
                               item_round=(ids, [f"r{k // 4}" for k in range(12)]))
    mock = mock_rounds(d, ["symmetric"], folds=5)
    assert mock.unit == "rounds" and mock.n_folds == 3
    r = d.annotations.item_round[mock.gold_items]
    for f in range(3):
        assert np.unique(r[mock.fold == f]).size == 1


def _plain(errors, weights, hcov, own_cov, cur_hcov, n, w, model=True):
    """The bias, noise and MSE of a functional, by plain loops."""
    tot = sum(weights)
    dw = [sum(errors[i][k] * w[k] for k in range(len(w))) for i in range(len(errors))]
    b = sum(weights[i] * dw[i] for i in range(len(dw))) / tot
    s_b2 = sum(weights[i] ** 2 * (dw[i] - b) ** 2 for i in range(len(dw))) / tot**2 + w @ hcov @ w
    emp = sum(weights[i] * (dw[i] - b) ** 2 for i in range(len(dw))) / tot / n + w @ cur_hcov @ w
    se2 = max(w @ own_cov @ w, emp) if model else emp
    return b, math.sqrt(s_b2), math.sqrt(se2), max(b * b - s_b2, 0.0) + se2


def test_bias_noise_and_interval_match_a_plain_implementation() -> None:
    sim = _sim(2)
    rec = recommend_multiclass(sim.current, sim.history, structures=["full", "symmetric"], folds=4)
    K = 4
    for name, s in rec._scored.items():
        for w in [*np.eye(K), np.arange(K, dtype=float)]:
            b, s_b, se, mse = _plain(s.evidence.errors.tolist(), s.weights.tolist(), s.evidence.history_cov,
                                     s.estimate.covariance(), history_covariance(s.estimate), s.n, w,
                                     model=name != "majority_vote")
            est, se2, b2, s_b2 = s.parts(w)
            assert (b2, s_b2, se2) == pytest.approx((b, s_b, se), rel=1e-9, abs=1e-14)
            assert est == pytest.approx(float(w @ s.estimate.estimate))
            assert s.mse(w) == pytest.approx(mse, rel=1e-9)
    w = np.eye(K)[1]
    r = rec.functional(w, span=False)
    _, se, b, s_b = rec._scored[rec.method].parts(w)
    half = se * bias_aware_cv((abs(b) + s_b) / se, 0.95)
    assert r["ci_low"] == pytest.approx(r["estimate"] - half) and r["ci_high"] == pytest.approx(r["estimate"] + half)
    mv_p = rec._scored["majority_vote"].bias_test()[2]
    smallest = min(rec._scored, key=lambda k: rec._scored[k].total_mse())
    assert rec.method == ("majority_vote" if mv_p >= DEFAULT_ALPHA else smallest)
    always = recommend_multiclass(sim.current, sim.history, structures=["full", "symmetric"], folds=4, default_alpha=1.0)
    assert always.method == min(always._scored, key=lambda k: always._scored[k].total_mse())
    never = recommend_multiclass(sim.current, sim.history, structures=["full", "symmetric"], folds=4, default_alpha=0.0)
    assert never.method == "majority_vote" and "not significant" in never.reason


def test_bias_test_by_hand() -> None:
    """The joint mock-bias statistic against a plain computation on a tiny 3-class evidence table."""
    from scipy.stats import chi2

    from heroeval.choice.multiclass_auto import _Scored
    from heroeval.multiclass.mock_rounds import CandidateEvidence

    d = np.array([[0.5, -0.5, 0.0], [0.0, 0.5, -0.5], [0.2, 0.1, -0.3], [-0.1, 0.3, -0.2]])
    est = recommend_multiclass(_sim(7).current, _sim(7).history, structures=["symmetric"]).estimate
    s = _Scored(est, CandidateEvidence(d, np.zeros((3, 3)), d[:2]), np.ones(4), 100, True, np.array([0, 1, 2, 0]))
    b = d.mean(axis=0)
    S = np.cov(d.T, bias=True) / 4  # sum (d - b)(d - b)' / n^2
    T = float(b @ np.linalg.pinv(S) @ b)
    got = s.bias_test()
    assert got[0] == pytest.approx(T, rel=1e-9) and got[1] == 2 and got[2] == pytest.approx(chi2.sf(T, 2))


def test_rate_weights_move_the_gold_shares_to_the_target() -> None:
    sim = _sim(3)
    rec = recommend_multiclass(sim.current, sim.history, structures=["symmetric"])
    s = rec._scored[rec.method]
    y = np.flatnonzero(sim.history.annotations.gold >= 0)
    mock = mock_rounds(sim.history, ["symmetric"])
    assert np.array_equal(np.sort(mock.gold_items), y)
    shares = np.bincount(mock.gold_class, weights=s.weights, minlength=4) / s.weights.sum()
    np.testing.assert_allclose(shares, rec.target_shares, atol=1e-12)
    assert rec.target_shares.sum() == pytest.approx(1.0)


def test_unreliable_with_few_gold_spans_every_candidate() -> None:
    sim = _sim(5, rho=0.03)
    n_gold = int((sim.history.annotations.gold >= 0).sum())
    assert n_gold < MIN_GOLD
    rec = recommend_multiclass(sim.current, sim.history, structures=["symmetric"])
    assert rec.status == "unreliable" and "unreliable" in rec.reason
    for k, (lo, hi) in enumerate(rec.intervals()):
        for s in rec._scored.values():
            e, _, _, h = s.interval(np.eye(4)[k], 0.95, rec.kappa)
            assert lo <= max(0.0, e - h) + 1e-12 and hi >= min(1.0, e + h) - 1e-12
    f = rec.to_frame()
    assert list(f["quantity"]) == ["share 1", "share 2", "share 3", "share 4", "mean score"]
    assert set(f["status"]) == {"unreliable"}
    assert rec.to_dict()["chosen"] == rec.method


def test_clear_errors() -> None:
    sim = _sim(6)
    other = multiclass_from_arrays(["x", "x"], ["a", "b"], [0, 1], classes=[0, 1])
    with pytest.raises(HeroEvalError, match="classes"):
        recommend_multiclass(other, sim.history)
    with pytest.raises(HeroEvalError, match="kappa"):
        recommend_multiclass(sim.current, sim.history, kappa=-1.0)
    one_gold = multiclass_from_arrays(["x", "x", "y", "y"], ["a", "b"] * 2, [0, 1, 1, 1], classes=[0, 1],
                                      gold=(["x"], [0]))
    with pytest.raises(HeroEvalError, match="at least 2 gold items"):
        mock_rounds(one_gold)


def test_coverage_under_a_rate_shift_simulation() -> None:
    """Full confusion matrices, class shares rising in the history and falling in the round (the simulator's
    default shift), 30 rounds x 4 classes: the recommended intervals cover at least 0.90 of the cells (binomial
    sd about 0.02 at a true 0.95), and its L1 error is within 1.3 of the best fixed candidate's on average."""
    cover, l1, best = [], [], []
    for seed in range(30):
        sim = _sim(100 + seed)
        rec = recommend_multiclass(sim.current, sim.history, structures=["full", "symmetric"], folds=5, seed=seed)
        truth = sim.realised_current
        cover += [lo <= t <= hi for (lo, hi), t in zip(rec.intervals(), truth, strict=True)]
        l1.append(np.abs(rec.estimate.estimate - truth).sum())
        best.append(np.array([np.abs(s.estimate.estimate - truth).sum() for s in rec._scored.values()]))
    assert np.mean(cover) >= 0.90
    assert np.mean(l1) <= 1.3 * np.min(np.mean(best, axis=0))


def test_rate_weights_target_the_bias_corrected_shares_not_a_biased_candidates() -> None:
    """Labelers who call half of class 2 '0': majority vote over-counts class 0. The mock rounds' target shares are
    the first choice's estimate minus its mock bias, near the round's true shares, not majority vote's; with the
    uncorrected target the gold would be weighted towards class 0, where majority vote errs least."""
    rng = np.random.default_rng(3)
    conf = np.array([[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.5, 0.05, 0.45]])

    def draw(n: int, prefix: str, gold_share: float) -> tuple[MultiClassData, np.ndarray]:
        y = rng.choice(3, size=n)
        lab = np.array([[rng.choice(3, p=conf[t]) for _ in range(5)] for t in y])
        items = np.repeat([f"{prefix}{i}" for i in range(n)], 5)
        g = np.flatnonzero(rng.random(n) < gold_share)
        gold = ([f"{prefix}{i}" for i in g], [int(y[i]) for i in g]) if g.size else None
        return multiclass_from_arrays(items, np.tile([f"L{j}" for j in range(5)], n), lab.ravel(),
                                      classes=[0, 1, 2], gold=gold, name=prefix), y

    hist, _ = draw(500, "h", 0.2)
    cur, y = draw(300, "c", 0.0)
    truth = np.bincount(y, minlength=3) / y.size
    rec = recommend_multiclass(cur, hist, structures=["symmetric"], default_alpha=0.0)  # majority vote kept
    assert rec.method == "majority_vote"
    mv = rec.estimate.estimate
    assert mv[0] - truth[0] > 0.15  # majority vote is biased towards class 0
    assert np.abs(rec.target_shares - truth).max() < 0.06, (rec.target_shares, truth)
    ci = rec.intervals()  # its bias-aware intervals, sized by the mock bias at the corrected target, cover
    assert all(lo <= t <= hi for (lo, hi), t in zip(ci, truth, strict=True)), (ci, truth)
