"""Stage A's empirical-Bayes prior (``calibrate(shrink="eb")``, issue #18 item 3).

Checked against closed forms (gold-only histories: the EB posterior mean), a
plain loop implementation of MAP-EM with asymmetric pseudo-counts, the
symmetric ``pseudo_count`` it generalises, a numerical gradient, refits from
scratch (the model checks' per-fold priors) and the calibration file.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import heroeval as he
from heroeval.checks import run_checks
from heroeval.checks.fold_refits import _fold_gradient, prior_change
from heroeval.errors import HeroEvalError
from heroeval.simulate import paper_dgp
from heroeval.stage_a import two_coin
from heroeval.stage_a.fit import design_of, settings_prior
from heroeval.stage_a.folds import FoldFits
from heroeval.stage_a.gold import gold_counts
from heroeval.stage_a.prior import beta_binomial_prior, counts4, eb_counts, log_prior
from heroeval.stage_a.settings import StoppingRule

from .test_cheap_checks import _same_checks
from .test_kernels import _history


def _mom(success: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    """The beta-binomial method of moments written out with loops (units with no trials left out)."""
    units = [(s, m) for s, m in zip(success, n, strict=True) if m > 0]
    N = sum(m for _, m in units)
    mu = sum(s for s, _ in units) / N
    w = [m / N for _, m in units]
    rbar = sum(wi * s / m for wi, (s, m) in zip(w, units, strict=True))
    s2 = sum(wi * (s / m - rbar) ** 2 for wi, (s, m) in zip(w, units, strict=True))
    g = [wi * (1 - wi) for wi in w]
    denom = sum(gi * (1 - 1 / m) for gi, (_, m) in zip(g, units, strict=True))
    tau2 = (s2 - mu * (1 - mu) * sum(gi / m for gi, (_, m) in zip(g, units, strict=True))) / denom
    return mu, (mu * (1 - mu) / tau2 - 1) if tau2 > 0 else math.inf


def _plain_map_em(items: list[list[tuple[int, int]]], gold: dict[int, int], J: int,
                  counts: tuple[float, float, float, float], iters: int = 20_000) -> tuple[list[float], list[float], float]:
    """MAP-EM of the gold-anchored two-coin model, one round, with pseudo-counts (a1, a0, b1, b0), by loops."""
    a1, a0, b1, b0 = counts
    a, b, p = [0.7] * J, [0.7] * J, 0.5
    for _ in range(iters):
        gam = []
        for i, labs in enumerate(items):
            if i in gold:
                gam.append(float(gold[i]))
                continue
            l1, l0 = math.log(p), math.log(1 - p)
            for j, z in labs:
                l1 += math.log(a[j] if z else 1 - a[j])
                l0 += math.log(1 - b[j] if z else b[j])
            gam.append(1 / (1 + math.exp(l0 - l1)))
        na, da, nb, db = [a1] * J, [a1 + a0] * J, [b1] * J, [b1 + b0] * J
        for i, labs in enumerate(items):
            for j, z in labs:
                na[j] += gam[i] * z
                da[j] += gam[i]
                nb[j] += (1 - gam[i]) * (1 - z)
                db[j] += 1 - gam[i]
        new_a = [na[j] / da[j] for j in range(J)]
        new_b = [nb[j] / db[j] for j in range(J)]
        new_p = sum(gam) / len(gam)
        done = max(max(abs(x - y) for x, y in zip(new_a + new_b, a + b, strict=True)), abs(new_p - p)) < 1e-13
        a, b, p = new_a, new_b, new_p
        if done:
            break
    return a, b, p


def _small(seed: int) -> he.AnnotationSet:
    rng = np.random.default_rng(seed)
    n, J = 150, 6
    y = rng.random(n) < 0.35
    sens = np.array([0.95, 0.9, 0.8, 0.75, 0.7, 0.6])
    spec = np.array([0.9, 0.85, 0.9, 0.7, 0.8, 0.65])
    item = np.repeat(np.arange(n), 4)
    lab = np.concatenate([rng.choice(J, 4, replace=False) for _ in range(n)])
    z = (rng.random(item.size) < np.where(y[item], sens[lab], 1 - spec[lab])).astype(int)
    g = np.arange(0, n, 5)
    return he.AnnotationSet.from_arrays(item, [f"j{k}" for k in lab], z, gold=(g, y[g].astype(int)))


def test_the_method_of_moments_is_the_loop_version_and_the_cap_is_the_gold() -> None:
    rng = np.random.default_rng(3)
    n = rng.integers(0, 30, 40).astype(float)
    s = np.floor(n * rng.uniform(0.3, 1.0, 40))
    m, k = beta_binomial_prior(s, n)
    m2, k2 = _mom(s, n)
    assert m == pytest.approx(m2, rel=1e-12) and k == pytest.approx(k2, rel=1e-9)
    # no heterogeneity: k = inf, capped at the gold trials behind it; no gold at all: no prior
    same = eb_counts(np.full(5, 8.0), np.full(5, 2.0), np.full(5, 9.0), np.full(5, 1.0))
    assert math.isinf(beta_binomial_prior(np.full(5, 8.0), np.full(5, 10.0))[1])
    assert same.capped_a and same.k_a == 50.0 and same.m_a == pytest.approx(0.8)
    assert same.k_b == 50.0 and same.m_b == pytest.approx(0.9)
    none = eb_counts(np.zeros(3), np.zeros(3), np.full(3, 4.0), np.full(3, 1.0))
    assert none.k_a == 0.0 and not none.capped_a
    np.testing.assert_allclose(none.counts(0.5)[:2], [0.5, 0.5])


def test_gold_only_history_gives_the_empirical_bayes_posterior_mean() -> None:
    """Every item has gold: the MAP is the closed form (tp + k m) / (tp + fn + k), per labeler."""
    rng = np.random.default_rng(5)
    n, J = 120, 8
    y = rng.random(n) < 0.4
    acc = rng.uniform(0.6, 0.95, J)
    item = np.repeat(np.arange(n), 3)
    lab = np.concatenate([rng.choice(J, 3, replace=False) for _ in range(n)])
    z = np.where(rng.random(item.size) < acc[lab], y[item], ~y[item]).astype(int)
    hist = he.AnnotationSet.from_arrays(item, [f"j{k}" for k in lab], z, gold=(np.arange(n), y.astype(int)))
    cal = he.calibrate(hist, shrink="eb", tol=1e-12)
    tp, fn, tn, fp = (x.astype(float) for x in gold_counts(hist))
    m_a, k_a = _mom(tp, tp + fn)
    m_b, k_b = _mom(tn, tn + fp)
    k_a, k_b = min(k_a, (tp + fn).sum()), min(k_b, (tn + fp).sum())
    np.testing.assert_allclose(cal.alpha, (tp + k_a * m_a) / (tp + fn + k_a), rtol=0, atol=1e-10)
    np.testing.assert_allclose(cal.beta, (tn + k_b * m_b) / (tn + fp + k_b), rtol=0, atol=1e-10)
    prior = cal.settings["prior"]
    assert prior["k_sensitivity"] == pytest.approx(k_a) and prior["m_specificity"] == pytest.approx(m_b)
    assert cal.settings["shrink"] == "eb"


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_map_em_with_the_fitted_prior_equals_a_plain_loop_implementation(engine: str) -> None:
    if engine == "numba":
        pytest.importorskip("numba")
    hist = _small(2)
    cal = he.calibrate(hist, shrink="eb", tol=1e-12, engine=engine)  # type: ignore[arg-type]
    counts = counts4(settings_prior(cal.settings))
    assert counts[0] != counts[2]  # asymmetric: the sensitivities' prior is not the specificities'
    items: list[list[tuple[int, int]]] = [[] for _ in range(hist.n_items)]
    for i in range(hist.n_items):
        for t in range(hist.item_ptr[i], hist.item_ptr[i + 1]):
            items[i].append((int(hist.labeler[t]), int(hist.label[t])))
    gold = {i: int(g) for i, g in enumerate(hist.gold) if g >= 0}
    a, b, p = _plain_map_em(items, gold, hist.n_labelers, counts)
    np.testing.assert_allclose(cal.alpha, a, atol=1e-8)
    np.testing.assert_allclose(cal.beta, b, atol=1e-8)
    assert float(cal.round_prevalence[0]) == pytest.approx(p, abs=1e-8)


def test_symmetric_counts_are_the_pseudo_count_and_the_gradient_is_the_objectives() -> None:
    hist = _small(4)
    as_float = he.calibrate(hist, pseudo_count=0.7, tol=1e-11)
    d = design_of(hist)
    from_array = two_coin.run_em(
        two_coin.replace(d, pseudo_count=np.full(4, 0.7)), tuple(np.asarray(x) for x in
                                                             (as_float.alpha * 0 + 0.7, as_float.beta * 0 + 0.7,
                                                              as_float.round_prevalence)),
        stop=StoppingRule(tol=1e-11, max_iter=5000))
    np.testing.assert_allclose(from_array.alpha, as_float.alpha, atol=1e-8)
    np.testing.assert_allclose(from_array.beta, as_float.beta, atol=1e-8)
    # the logit gradient with asymmetric counts against a central difference of the objective
    c = np.array([2.0, 0.5, 1.5, 3.0])
    dc = two_coin.replace(d, pseudo_count=c)
    rng = np.random.default_rng(0)
    a, b, p = rng.uniform(0.6, 0.9, hist.n_labelers), rng.uniform(0.6, 0.9, hist.n_labelers), np.array([0.4])
    s1, cnt, gsum, gsize, _, _ = two_coin.em_sums(dc, a, b, p)
    g = two_coin.logit_gradient(s1, cnt, gsum, gsize, c, a, b, p)
    x = two_coin._pack(a, b, p)
    h = 1e-6
    for k in (0, hist.n_labelers + 2, 2 * hist.n_labelers):
        up, dn = x.copy(), x.copy()
        up[k] += h
        dn[k] -= h
        f_up = two_coin.e_step(dc, *two_coin._unpack(up, hist.n_labelers))[1]
        f_dn = two_coin.e_step(dc, *two_coin._unpack(dn, hist.n_labelers))[1]
        assert g[k] == pytest.approx((f_up - f_dn) / (2 * h), rel=1e-5, abs=1e-6)
    assert log_prior(c, a, b) == pytest.approx(
        float(2.0 * np.log(a).sum() + 0.5 * np.log1p(-a).sum() + 1.5 * np.log(b).sum() + 3.0 * np.log1p(-b).sum()))


@pytest.mark.parametrize("variance", ["sandwich", "model"])
def test_the_covariance_carries_the_pooled_rates_uncertainty(variance: str) -> None:
    """Gold-only history: alpha_j = (T_j + k m) / (N_j + k) with m = sum T / sum N, so an item's influence is
    (t_rj - alpha_j n_rj + k (t_r - m n_r) / N) / (N_j + k) (k held fixed). The sandwich is the sum of their
    squares and cross products, across labelers too; the model variance is H^-1 plus the prior's part."""
    rng = np.random.default_rng(8)
    n, J = 200, 6
    y = rng.random(n) < 0.4
    acc = np.array([0.9, 0.85, 0.8, 0.8, 0.7, 0.65])
    item = np.repeat(np.arange(n), 3)
    lab = np.concatenate([rng.choice(J, 3, replace=False) for _ in range(n)])
    z = np.where(rng.random(item.size) < acc[lab], y[item], ~y[item]).astype(int)
    x = y + rng.normal(0, 1, n)  # a covariate (HERO-2's): its mean's cross-covariance carries the pool too
    hist = he.AnnotationSet.from_arrays(item, [f"j{k}" for k in lab], z, gold=(np.arange(n), y.astype(int)),
                                        covariates=(np.arange(n), x[:, None]))
    cal = he.calibrate(hist, shrink="eb", tol=1e-13, variance=variance)  # type: ignore[arg-type]
    pr = cal.settings["prior"]
    k, m, Ntot = pr["k_sensitivity"], pr["m_sensitivity"], pr["gold_trials_sensitivity"]
    tp, fn, _, _ = (x.astype(float) for x in gold_counts(hist))
    Nj = tp + fn
    a = np.asarray(cal.alpha)
    # per gold-positive item: its labels per labeler (n_rj) and ones per labeler (t_rj)
    IF = np.zeros((n, J))
    own = np.zeros((n, J))  # the item's own part, without the pool's
    for r in np.flatnonzero(hist.gold == 1):
        nr = np.zeros(J)
        tr = np.zeros(J)
        for t in range(hist.item_ptr[r], hist.item_ptr[r + 1]):
            nr[hist.labeler[t]] += 1
            tr[hist.labeler[t]] += hist.label[t]
        own[r] = (tr - a * nr) / (Nj + k)
        IF[r] = own[r] + k * (tr.sum() - m * nr.sum()) / Ntot / (Nj + k)
    V = cal.covariance.matrix()[:J, :J]  # type: ignore[union-attr]
    if variance == "sandwich":
        np.testing.assert_allclose(V, IF.T @ IF, rtol=1e-6, atol=1e-12)
    else:  # H^-1 + H^-1 Delta H^-1, H = (N_j + k) / (alpha (1 - alpha)): the model part on the diagonal
        expect = IF.T @ IF - own.T @ own + np.diag(a * (1 - a) / (Nj + k))
        np.testing.assert_allclose(V, expect, rtol=1e-6, atol=1e-12)
    # the pool makes the labelers' errors correlate: without its part the off-diagonal would be 0
    assert V[0, 1] > 0.1 * math.sqrt(V[0, 0] * V[1, 1])
    # the sensitivities' cross-covariance with the covariate's mean: sum_r IF_r (x_r - xbar) / n
    assert hist.covariates is not None
    xc = hist.covariates[:, 0] - hist.covariates[:, 0].mean()
    P = 2 * J + 1
    full = cal.covariance.matrix()  # type: ignore[union-attr]
    np.testing.assert_allclose(full[:J, P], IF.T @ xc / n, rtol=1e-6, atol=1e-12)
    assert np.abs(full[:J, P] - own.T @ xc / n).max() > 0.05 * np.abs(full[:J, P]).max()  # the pool's part counts


def test_a_fold_starts_from_the_gradient_of_its_own_objective() -> None:
    """_fold_gradient at the whole fit (the left-out gold items' terms and the prior's change) against the fold
    refit's own gradient there, from a pass over its design with its own prior."""
    hist = _small(9)
    cal = he.calibrate(hist, shrink="eb", tol=1e-13, engine="numpy")
    ff = FoldFits(hist, shrink="eb", engine="numpy")
    gold_items = np.flatnonzero(hist.gold >= 0)
    drop = gold_items[::4]
    here = (np.asarray(cal.alpha), np.asarray(cal.beta), np.asarray(cal.round_prevalence))
    d = ff.design(1.0, drop)
    s1, cnt, gsum, gsize, _, _ = two_coin.em_sums(d, *here)
    direct = two_coin.logit_gradient(s1, cnt, gsum, gsize, ff.prior_of(drop), *here)
    got = _fold_gradient(hist.take_items(drop), here, prior_change(ff.prior_of(None), ff.prior_of(drop)))
    np.testing.assert_allclose(got, direct, atol=1e-6)
    assert np.abs(direct).max() > 0.1  # not trivially zero


def test_each_fold_refit_fits_the_prior_on_its_kept_gold() -> None:
    hist = _small(6)
    ff = FoldFits(hist, shrink="eb", engine="numpy")
    gold_items = np.flatnonzero(hist.gold >= 0)
    drop = gold_items[:7]
    keep = np.setdiff1d(np.arange(hist.n_items), drop)
    expect = eb_counts(*gold_counts(hist.take_items(keep))).counts()
    np.testing.assert_allclose(ff.prior_of(drop), expect, rtol=1e-12)
    np.testing.assert_allclose(ff.prior_of(None), eb_counts(*gold_counts(hist)).counts(), rtol=1e-12)
    np.testing.assert_allclose(counts4(ff.design(0.5, drop).pseudo_count), expect, rtol=1e-12)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_warm_checks_with_the_prior_equal_the_checks_from_scratch(engine: str) -> None:
    """The warm path (fold starts with the prior's change, lockstep, chained weights) against refitting every
    fold and weight from scratch with ``fit_stage_a(em=EMSettings(shrink="eb"))`` on the fold's items."""
    if engine == "numba":
        pytest.importorskip("numba")
        hist = _history(11)
    else:
        hist = paper_dgp(1, rho=0.3).history
    cal = he.calibrate(hist, checks=True, shrink="eb", engine=engine)  # type: ignore[arg-type]
    assert cal.checks is not None
    scratch = run_checks(hist, refit="scratch", em_settings={"shrink": "eb"})
    _same_checks(cal.checks, scratch, 1e-6)


def test_the_prior_survives_the_calibration_file_and_hero_joint_uses_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    d = paper_dgp(3)
    cal = he.calibrate(d.history, shrink="eb")
    path = tmp_path / "cal.json"
    cal.save(path)
    back = he.load_calibration(path)
    np.testing.assert_allclose(settings_prior(back.settings), settings_prior(cal.settings))
    assert json.loads(path.read_text())["settings"]["shrink"] == "eb"
    joint = he.estimate(d.current, back, history=d.history, method="hero_joint")
    assert isinstance(joint, he.EstimateResult)
    assert joint.estimate == pytest.approx(he.hero_joint(d.current, cal).estimate, abs=1e-9)
    plain = he.hero_joint(d.current, he.calibrate(d.history))
    assert 1e-4 < abs(joint.estimate - plain.estimate) < 0.05  # the prior moves it (by about 0.003 here)


def test_a_bad_shrink_is_named() -> None:
    hist = _small(1)
    with pytest.raises(HeroEvalError, match="shrink must be 'none' or 'eb'"):
        he.calibrate(hist, shrink="bayes")  # type: ignore[arg-type]


def test_hero_joint_influence_of_a_gold_item_carries_the_pool() -> None:
    """hero_joint's history influence of a gold item against the derivative, by central differences, of the joint
    fit's current-round prevalence in that item's weight, the prior's pooled rates recomputed with the weight
    (its strengths k held fixed): the infinitesimal jackknife, refitting the EM each time."""
    d = paper_dgp(2, labels_per_item=3)
    hist, cur = d.history, d.current
    cal = he.calibrate(hist, shrink="eb", tol=1e-13)
    res = he.hero_joint(cur, cal)
    assert res.influence is not None and res.influence.history is not None
    pr = cal.settings["prior"]
    G = hist.n_rounds
    ptr = np.concatenate([hist.item_ptr, hist.item_ptr[-1] + cur.item_ptr[1:]])
    lab = np.concatenate([hist.labeler.astype(np.int64), cur.labeler.astype(np.int64)])
    assert tuple(cur.labeler_ids) == tuple(cal.labeler_ids)
    lbl = np.concatenate([hist.label, cur.label])
    gold = np.concatenate([hist.gold, np.full(cur.n_items, -1, dtype=np.int8)])
    grp = np.concatenate([hist.item_round, np.full(cur.n_items, G, dtype=np.int32)])
    base = two_coin.make_design(ptr, lab, lbl, cal.n_labelers, gold, grp, G + 1)
    tp, fn, tn, fp = (x.astype(float) for x in gold_counts(hist))

    def prevalence(r: int, eps: float) -> float:
        w = np.ones(base.n_items)
        w[r] += eps
        item = hist.take_items(np.array([r]))
        t1, f0, t0, f1 = (x.astype(float) for x in gold_counts(item))
        m_a = (tp.sum() + eps * t1.sum()) / (tp.sum() + fn.sum() + eps * (t1.sum() + f0.sum()))
        m_b = (tn.sum() + eps * t0.sum()) / (tn.sum() + fp.sum() + eps * (t0.sum() + f1.sum()))
        ka, kb = pr["k_sensitivity"], pr["k_specificity"]
        counts = np.array([ka * m_a, ka * (1 - m_a), kb * m_b, kb * (1 - m_b)])
        dd = two_coin.replace(base, weight=w, pseudo_count=counts)
        f = two_coin.run_em(dd, (np.asarray(cal.alpha), np.asarray(cal.beta), np.r_[cal.round_prevalence, res.estimate]),
                            stop=StoppingRule(1e-14, 100_000))
        return float(f.prev[G])

    h = 1e-4
    for r in np.flatnonzero(hist.gold >= 0)[:3]:
        numeric = (prevalence(int(r), h) - prevalence(int(r), -h)) / (2 * h)
        assert res.influence.history[r] == pytest.approx(numeric, rel=2e-3, abs=1e-7)
