"""Issue #18 item 3: ``rogan_gladen(shrink="eb")``, gold rates shrunk towards the pool by empirical Bayes.

A closed form on a hand-made case, a plain re-implementation written here
from the docstring (loops, both standard-error paths), and seeded
simulations (bias and coverage, stated tolerances).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import heroeval as he
from heroeval.errors import HeroEvalError
from heroeval.simulate import dependent_dgp, paper_dgp


def _prior(succ: list[float], n: list[float]) -> tuple[float, float]:
    """Beta-binomial method of moments (``beta_binomial_prior``'s docstring), loops; k = inf without heterogeneity."""
    idx = [j for j in range(len(n)) if n[j] > 0]
    tot = sum(n[j] for j in idx)
    m = sum(succ[j] for j in idx) / tot
    w = {j: n[j] / tot for j in idx}
    rbar = sum(w[j] * succ[j] / n[j] for j in idx)
    s2 = sum(w[j] * (succ[j] / n[j] - rbar) ** 2 for j in idx)
    g = {j: w[j] * (1 - w[j]) for j in idx}
    den = sum(g[j] * (1 - 1 / n[j]) for j in idx)
    tau2 = (s2 - m * (1 - m) * sum(g[j] / n[j] for j in idx)) / den if den > 0 else 0.0
    return (m, math.inf) if tau2 <= 0 else (m, m * (1 - m) / tau2 - 1)


def _hand_made() -> tuple[he.AnnotationSet, he.AnnotationSet]:
    """Three labelers, each on gold items of its own (one label per item); only "a" labels the current round."""
    items, labs, z, gold_items, gold = [], [], [], [], []
    # (labeler, gold, labels): sensitivity a 1/3, b 5/6, c 6/6; specificity a 3/4, b 5/5, c 2/5
    spec = [("a", 1, [1, 0, 0]), ("b", 1, [1, 1, 1, 1, 1, 0]), ("c", 1, [1] * 6),
            ("a", 0, [0, 0, 0, 1]), ("b", 0, [0] * 5), ("c", 0, [0, 0, 1, 1, 1])]
    i = 0
    for lab, g, zs in spec:
        for v in zs:
            items.append(i)
            labs.append(lab)
            z.append(v)
            gold_items.append(i)
            gold.append(g)
            i += 1
    hist = he.AnnotationSet.from_arrays(items, labs, z, gold=(gold_items, gold))
    cur = he.AnnotationSet.from_arrays(range(100, 120), ["a"] * 20, [1] * 7 + [0] * 13)
    return hist, cur


def test_hand_made_case_is_the_closed_form() -> None:
    hist, cur = _hand_made()
    cal = he.calibrate(hist, checks=False)
    cal_file = he.Calibration.from_dict(json.loads(cal.to_json()))
    ma, ka = _prior([1, 5, 6], [3, 6, 6])
    mb, kb = _prior([3, 5, 2], [4, 5, 5])
    assert ma == pytest.approx(12 / 15) and math.isfinite(ka) and math.isfinite(kb)
    A = (1 + ka * ma) / (3 + ka)  # labeler a's posterior means
    B = (3 + kb * mb) / (4 + kb)
    p, n = 7 / 20, 20
    Y = A + B - 1
    mu = (p + B - 1) / Y
    # a gold label of labeler l moves A by lam_a / n_a (l = a) plus (1 - lam_a) / N (any l), through m;
    # per plain proportion alpha_l: lam_a 1[l = a] + (1 - lam_a) n_l / N, with binomial variance alpha_l (1 - alpha_l) / n_l
    lam_a, lam_b = 3 / (3 + ka), 4 / (4 + kb)
    dA = [lam_a * (lab == 0) + (1 - lam_a) * nl / 15 for lab, nl in enumerate([3, 6, 6])]
    dB = [lam_b * (lab == 0) + (1 - lam_b) * nl / 14 for lab, nl in enumerate([4, 5, 5])]
    alphas, betas = [1 / 3, 5 / 6, 1.0], [3 / 4, 1.0, 2 / 5]
    var_h = sum((mu / Y * d) ** 2 * x * (1 - x) / nl for d, x, nl in zip(dA, alphas, [3, 6, 6], strict=True))
    var_h += sum(((1 - mu) / Y * d) ** 2 * x * (1 - x) / nl for d, x, nl in zip(dB, betas, [4, 5, 5], strict=True))
    var_c = p * (1 - p) / n / Y**2
    for c in (cal, cal_file):  # one label per gold item: the item-level and the gold-count forms agree
        r = he.rogan_gladen(cur, c, shrink="eb")
        assert r.estimate == pytest.approx(mu, abs=1e-12)
        assert r.variance_current == pytest.approx(var_c, rel=1e-10)
        assert r.variance_history == pytest.approx(var_h, rel=1e-10)
        assert r.details["eb_prior"]["sensitivity"]["strength"] == pytest.approx(ka, rel=1e-12)
    # the shrunk estimate moves away from the plain one (a's sensitivity 1/3 from 3 gold items, pulled up)
    assert he.rogan_gladen(cur, cal).estimate != pytest.approx(mu, abs=1e-3)
    assert A > 1 / 3


def test_derivative_by_finite_differences() -> None:
    """The history coefficients are d estimate / d (plain proportion) with k held fixed: perturb one gold label."""
    hist, cur = _hand_made()
    cal = he.calibrate(hist, checks=False)
    obj = json.loads(cal.to_json())
    obj.pop("gold_labels")  # the gold-count form (a file without the gold items' labels)
    r = he.rogan_gladen(cur, he.Calibration.from_dict(obj), shrink="eb")
    _, kb = _prior([3, 5, 2], [4, 5, 5])
    _, ka = _prior([1, 5, 6], [3, 6, 6])
    p = 7 / 20

    def est(tp_a: float, tp_b: float, tn_a: float) -> float:  # gold counts moved continuously, k fixed
        m_a = (tp_a + tp_b + 6) / 15
        m_b = (tn_a + 5 + 2) / 14
        A = (tp_a + ka * m_a) / (3 + ka)
        B = (tn_a + kb * m_b) / (4 + kb)
        return (p + B - 1) / (A + B - 1)

    h = 1e-6
    x0 = np.array([1.0, 5.0, 3.0])
    assert r.estimate == pytest.approx(est(*x0), abs=1e-12)
    assert r.influence is not None and r.influence.history is not None
    coef = r.influence.history  # gold-count form: coefficients on the plain alpha_l, then beta_l
    J = 3
    for k, (pos, n_l) in enumerate([(0, 3), (1, 6), (J + 0, 4)]):  # alpha_a (own + pool), alpha_b (pool), beta_a
        e = np.zeros(3)
        e[k] = h
        d = (est(*(x0 + e)) - est(*(x0 - e))) / (2 * h)
        assert coef[pos] == pytest.approx(d * n_l, rel=1e-6)  # d alpha_l = d tp_l / n_l


def test_single_labeler_shrinks_to_itself() -> None:
    """One labeler: no between-labeler variance, the pool is the labeler: eb is the plain estimator exactly."""
    hist = he.AnnotationSet.from_arrays(range(10), ["a"] * 10, [1, 1, 1, 1, 0, 0, 0, 0, 0, 1],
                                        gold=(range(10), [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]))
    cal = he.calibrate(hist, checks=False)
    cur = he.AnnotationSet.from_arrays(range(100, 120), ["a"] * 20, [1] * 7 + [0] * 13)
    r0, r1 = he.rogan_gladen(cur, cal), he.rogan_gladen(cur, cal, shrink="eb")
    # (to 1e-5: the pooled sensitivity 3/3 is clipped to 1 - 1e-6)
    assert r1.estimate == pytest.approx(r0.estimate, abs=1e-5)
    assert r1.variance_current == pytest.approx(r0.variance_current, rel=1e-4)
    assert r1.variance_history == pytest.approx(r0.variance_history, rel=1e-4)
    assert r1.details["eb_prior"]["sensitivity"]["strength"] is None
    with pytest.raises(HeroEvalError, match="shrink"):
        he.rogan_gladen(cur, cal, shrink="ml")  # type: ignore[arg-type]


def _rg_eb_plain(current: he.AnnotationSet, cal: he.Calibration) -> tuple[float, float, float]:
    """shrink="eb", diagonal weights, from the docstring with loops: (estimate, current variance, history variance)."""
    J = cal.n_labelers
    tp, fn, tn, fp = (np.asarray(x, dtype=float) for x in (cal.gold_tp, cal.gold_fn, cal.gold_tn, cal.gold_fp))
    npos, nneg = tp + fn, tn + fp
    ma, ka = _prior(list(tp), list(npos))
    mb, kb = _prior(list(tn), list(nneg))

    def post(s: float, n: float, m: float, k: float) -> float:
        return m if math.isinf(k) else (s + k * m) / (n + k)

    A = [post(tp[j], npos[j], ma, ka) for j in range(J)]
    B = [post(tn[j], nneg[j], mb, kb) for j in range(J)]
    lam_a = [0.0 if math.isinf(ka) else npos[j] / (npos[j] + ka) for j in range(J)]
    lam_b = [0.0 if math.isinf(kb) else nneg[j] / (nneg[j] + kb) for j in range(J)]
    idx = {lab: k for k, lab in enumerate(cal.labeler_ids)}
    n, s = np.zeros(J), np.zeros(J)
    by_item: dict[int, list[tuple[int, int]]] = {}
    for i, lab, z in zip(current.annotation_item, current.labeler, current.label, strict=True):
        j = idx[current.labeler_ids[lab]]
        n[j] += 1
        s[j] += z
        by_item.setdefault(int(i), []).append((j, int(z)))
    use = [j for j in range(J) if n[j] > 0 and A[j] + B[j] - 1 > 0.05 and npos[j] > 0 and nneg[j] > 0]
    Y = {j: A[j] + B[j] - 1 for j in use}
    mu_j = {j: (s[j] / n[j] + B[j] - 1) / Y[j] for j in use}

    def mvar(m0: float, j: int) -> float:
        pbar = min(max(m0 * A[j] + (1 - m0) * (1 - B[j]), 1e-3), 1 - 1e-3)
        va = A[j] * (1 - A[j]) / (npos[j] + ka + 1)  # posterior variances (0 at k = inf)
        vb = B[j] * (1 - B[j]) / (nneg[j] + kb + 1)
        return (pbar * (1 - pbar) / n[j] + m0**2 * va + (1 - m0) ** 2 * vb) / Y[j] ** 2

    w = {j: n[j] * Y[j] ** 2 for j in use}
    for _ in range(2):
        m0 = min(max(sum(w[j] * mu_j[j] for j in use) / sum(w.values()), 0.02), 0.98)
        w = {j: 1 / mvar(m0, j) for j in use}
    tot = sum(w.values())
    w = {j: w[j] / tot for j in use}
    est = sum(w[j] * mu_j[j] for j in use)
    var_c = 0.0
    for labs in by_item.values():
        v = sum(w[j] / Y[j] * (z - s[j] / n[j]) / n[j] for j, z in labs if j in w)
        var_c += v**2
    # history: coefficients on the shrunk rates, lifted onto the plain proportions (k fixed, m = pooled proportion)
    wa = {j: -w[j] * mu_j[j] / Y[j] for j in use}
    wb = {j: w[j] * (1 - mu_j[j]) / Y[j] for j in use}
    pull_a = sum(wa[j] * (1 - lam_a[j]) for j in use)
    pull_b = sum(wb[j] * (1 - lam_b[j]) for j in use)
    ca = [wa.get(j, 0.0) * lam_a[j] + pull_a * npos[j] / npos.sum() for j in range(J)]
    cb = [wb.get(j, 0.0) * lam_b[j] + pull_b * nneg[j] / nneg.sum() for j in range(J)]
    hist = cal.history
    assert hist is not None
    var_h = 0.0
    for g_item in np.flatnonzero(hist.gold >= 0):
        v = 0.0
        g = hist.gold[g_item]
        for k in np.flatnonzero(hist.annotation_item == g_item):
            j = idx[hist.labeler_ids[hist.labeler[k]]]
            z = hist.label[k]
            if g == 1:
                v += ca[j] * (z - tp[j] / npos[j]) / npos[j]
            else:
                v += cb[j] * ((1 - z) - tn[j] / nneg[j]) / nneg[j]
        var_h += v**2
    return est, var_c, var_h


def test_matches_a_plain_implementation() -> None:
    for seed in range(3):
        d = paper_dgp(seed, labels_per_item=3, rho=0.2)
        cal = he.calibrate(d.history, checks=False)
        r = he.rogan_gladen(d.current, cal, shrink="eb")
        est, var_c, var_h = _rg_eb_plain(d.current, cal)
        assert r.estimate == pytest.approx(est, abs=1e-12)
        assert r.variance_current == pytest.approx(var_c, rel=1e-9)
        assert r.variance_history == pytest.approx(var_h, rel=1e-9)


def _sim(dgp: object, seeds: range, **kw: object) -> tuple[float, float, float, float]:
    err, cover = [], 0
    for s in seeds:
        d = dgp(s, **kw)  # type: ignore[operator]
        cal = he.calibrate(d.history, checks=False)
        r = he.rogan_gladen(d.current, cal, shrink="eb")
        err.append(r.estimate - d.current_rate)
        lo, hi = r.confidence_interval()
        cover += lo <= d.current_rate <= hi
    e = np.asarray(err)
    return float(e.mean()), float(e.std() / math.sqrt(e.size)), float(np.sqrt(np.mean(e**2))), cover / e.size


def test_simulation_dependent_dgp() -> None:
    """dependent_dgp (labelers err together on hard items), 60 fixed seeds: nearly unbiased, covers."""
    bias, se, _, cover = _sim(dependent_dgp, range(60))
    assert abs(bias) < 3 * se + 0.01
    assert cover >= 0.88


def test_simulation_paper_dgp_sparse() -> None:
    """paper_dgp with 3 labels per item (little gold per labeler; the beta prior is the true one), 60 seeds."""
    bias, se, _, cover = _sim(paper_dgp, range(60), labels_per_item=3)
    assert abs(bias) < 3 * se + 0.01
    assert cover >= 0.88


@pytest.mark.slow
def test_simulation_paper_dgp_dense_and_dependent_more_seeds() -> None:
    """200 seeds each: |bias| within 3 SE + 0.01 and coverage >= 0.90."""
    for dgp, kw in ((paper_dgp, {}), (dependent_dgp, {"labels_per_item": 5})):
        bias, se, _, cover = _sim(dgp, range(200), **kw)
        assert abs(bias) < 3 * se + 0.01
        assert cover >= 0.90
