"""Check every estimator against the dense reference in ``dense.py``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pytest

import heroeval as he

from . import dense

# the generator shifts covariates with the prevalence between rounds: the shift warning is expected here
pytestmark = pytest.mark.filterwarnings("ignore::heroeval.errors.CovariateShiftWarning")

ATOL = 1e-6


# --------------------------------------------------------------------------- data
@dataclass
class Case:
    J: int
    lab_names: list[str]
    round_names: list[str]
    Zh: np.ndarray  # (N, J) dense history labels, nan = no label
    gold_h: np.ndarray  # (N,) nan = no gold
    rounds_h: np.ndarray  # (N,) int round codes
    Xh: np.ndarray  # (N, p)
    Zc: np.ndarray  # (n, J) dense current labels (history labeler columns)
    Xc: np.ndarray  # (n, p)
    hist: he.AnnotationSet
    cur: he.AnnotationSet
    y_cur: np.ndarray  # true current labels (not used by the comparisons)


def _to_long(Z: np.ndarray, ids: list[str], lab_names: list[str]) -> tuple[list[str], list[str], list[int]]:
    item, lab, z = [], [], []
    for i in range(Z.shape[0]):
        for j in range(Z.shape[1]):
            if not np.isnan(Z[i, j]):
                item.append(ids[i])
                lab.append(lab_names[j])
                z.append(int(Z[i, j]))
    return item, lab, z


def _labels(
    rng: np.random.Generator, y: np.ndarray, alpha: np.ndarray, beta: np.ndarray, pool: np.ndarray, kmax: int
) -> np.ndarray:
    n, J = y.shape[0], alpha.shape[0]
    Z = np.full((n, J), np.nan)
    for i in range(n):
        k = rng.integers(2, min(kmax, len(pool)) + 1)
        for j in rng.choice(pool, size=k, replace=False):
            p1 = alpha[j] if y[i] == 1 else 1.0 - beta[j]
            Z[i, j] = float(rng.random() < p1)
    return Z


def make_case(seed: int, *, current_subset: bool = False, pass_rounds: bool = True) -> Case:
    rng = np.random.default_rng(seed)
    J = int(rng.integers(3, 9))
    alpha = rng.uniform(0.55, 0.95, J)
    beta = rng.uniform(0.55, 0.95, J)
    G = int(rng.integers(1, 4)) if pass_rounds else 1
    N = int(rng.integers(150, 401))
    n = int(rng.integers(60, 151))
    p = int(rng.integers(1, 3))
    lab_names = [f"L{j:02d}" for j in range(J)]
    round_names = [f"R{g}" for g in range(G)]

    prevs = rng.uniform(0.15, 0.7, G)
    rounds_h = rng.integers(0, G, N)
    yh = (rng.random(N) < prevs[rounds_h]).astype(int)
    Zh = _labels(rng, yh, alpha, beta, np.arange(J), 5)
    gold_h = np.full(N, np.nan)
    n_gold = round(rng.uniform(0.10, 0.20) * N)
    gidx = rng.choice(N, size=n_gold, replace=False)
    gold_h[gidx] = yh[gidx]

    coef = np.array([1.2, -0.8])[:p]
    Xh = yh[:, None] * coef + rng.normal(size=(N, p))

    mu_c = rng.uniform(0.15, 0.7)
    yc = (rng.random(n) < mu_c).astype(int)
    pool = np.arange(J)
    if current_subset:
        # The current round uses only some of the history's labelers; at least
        # three, or Dawid-Skene on the current round alone is not identified
        # (two binary labelers: 3 free cell probabilities for 5 parameters).
        pool = np.sort(rng.choice(J, size=max(3, J - 1), replace=False))
    Zc = _labels(rng, yc, alpha, beta, pool, 5)
    Xc = yc[:, None] * coef + rng.normal(size=(n, p))

    hid = [f"h{i:04d}" for i in range(N)]
    cid = [f"c{i:04d}" for i in range(n)]
    it, lb, z = _to_long(Zh, hid, lab_names)
    kw = {}
    if pass_rounds:
        kw["item_round"] = (hid, [round_names[g] for g in rounds_h])
    hist = he.AnnotationSet.from_arrays(
        it,
        lb,
        z,
        gold=([hid[i] for i in gidx], [int(yh[i]) for i in gidx]),
        covariates=(hid, Xh),
        **kw,
    )
    it, lb, z = _to_long(Zc, cid, lab_names)
    cur = he.AnnotationSet.from_arrays(it, lb, z, covariates=(cid, Xc))
    if not pass_rounds:
        round_names = list(hist.round_ids)
    return Case(J, lab_names, round_names, Zh, gold_h, rounds_h, Xh, Zc, Xc, hist, cur, yc)


# (seed, options, history fit has a labeler on the parameter floor)
CASES = [
    (11, {}, False),
    (15, {}, False),
    (16, {"pass_rounds": False}, False),
    (101, {}, False),
    (103, {"current_subset": True}, False),
    (105, {"pass_rounds": False}, False),
    (108, {"current_subset": True}, False),  # 3 of 3 labelers; DS barely identified
    (12, {}, True),
    (13, {}, True),
    (14, {"current_subset": True}, True),
    (102, {"current_subset": True}, True),
    (106, {}, True),  # two boundary labelers; current items contradict both
    (130, {"pass_rounds": False}, True),
    (136, {}, True),  # joint fit must leave the boundary (absorbing without a floor)
    (146, {}, True),  # plain EM reaches the floor slowly; HERO-1 depends on it
]


@pytest.fixture(scope="module", params=CASES, ids=[f"seed{s}" for s, _, _ in CASES])
def fitted(request):
    seed, kw, boundary = request.param
    c = make_case(seed, **kw)
    G = len(c.round_names)
    ref_cal = dense.calibrate(c.Zh, c.gold_h, c.rounds_h, G)
    assert ref_cal.converged
    cal = he.calibrate(c.hist, tol=1e-11)
    return c, ref_cal, cal, boundary


def _by_name(cal: he.Calibration, values: np.ndarray, names: list[str]) -> np.ndarray:
    idx = cal.index_of if isinstance(cal.index_of, dict) else cal.index_of()
    return np.array([values[idx[nm]] for nm in names])


# --------------------------------------------------------------------------- random data
def test_calibration(fitted):
    c, ref, cal, _ = fitted
    assert list(cal.labeler_ids) == c.lab_names
    assert list(cal.round_ids) == c.round_names
    np.testing.assert_allclose(_by_name(cal, cal.alpha, c.lab_names), ref.alpha, rtol=0, atol=ATOL)
    np.testing.assert_allclose(_by_name(cal, cal.beta, c.lab_names), ref.beta, rtol=0, atol=ATOL)
    np.testing.assert_allclose(cal.round_prevalence, ref.prev, rtol=0, atol=ATOL)
    tp, fn, tn, fp = dense.gold_confusion(c.Zh, c.gold_h)
    for got, want in ((cal.gold_tp, tp), (cal.gold_fn, fn), (cal.gold_tn, tn), (cal.gold_fp, fp)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(cal.covariate_mean, c.Xh.mean(axis=0), rtol=0, atol=1e-12)


def test_boundary_coverage(fitted):
    """The cases marked as boundary really put a labeler on the floor (and only those)."""
    _c, ref, cal, boundary = fitted
    f = 2 * dense.FLOOR
    for a, b in ((ref.alpha, ref.beta), (cal.alpha, cal.beta)):
        ab = np.concatenate([a, b])
        assert bool(np.any((ab <= f) | (ab >= 1 - f))) == boundary


def test_majority_vote(fitted):
    c, _, _, _ = fitted
    assert he.majority_vote(c.cur).estimate == pytest.approx(dense.majority_vote(c.Zc), abs=ATOL)


def test_dawid_skene(fitted):
    c, _, _, _ = fitted
    ref = dense.dawid_skene(c.Zc)
    assert ref.converged
    assert he.dawid_skene(c.cur, tol=1e-11).estimate == pytest.approx(ref.prev[0], abs=ATOL)


def test_gold_proportion(fitted):
    c, _, cal, _ = fitted
    want, status = dense.gold_proportion(c.Zc, c.Zh, c.gold_h)
    res = he.gold_proportion(c.cur, cal)
    assert res.estimate == pytest.approx(want, abs=ATOL)
    assert res.status == status


def test_hero1(fitted):
    c, ref, cal, _ = fitted
    want, status = dense.hero1(c.Zc, ref.alpha, ref.beta)
    assert status == "ok"
    res = he.hero1(c.cur, cal)
    assert res.estimate == pytest.approx(want, abs=ATOL)
    assert res.status == status


def test_hero1_same_parameters(fitted):
    """HERO-1 alone, with the package's own alpha, beta (isolates Stage B)."""
    c, _, cal, _ = fitted
    a = _by_name(cal, cal.alpha, c.lab_names)
    b = _by_name(cal, cal.beta, c.lab_names)
    want, _ = dense.hero1(c.Zc, a, b)
    assert he.hero1(c.cur, cal).estimate == pytest.approx(want, abs=1e-9)


def test_hero2(fitted):
    c, ref, cal, _ = fitted
    want, status, gamma = dense.hero2(c.Zc, c.Xc, ref.alpha, ref.beta, c.Xh.mean(axis=0))
    res = he.hero2(c.cur, cal)
    assert res.estimate == pytest.approx(want, abs=ATOL)
    assert res.status == status
    if "gamma" in res.details:
        g = res.details["gamma"]
        got = np.array([g[f"x{k}"] for k in range(len(gamma))]) if isinstance(g, Mapping) else np.ravel(g)
        np.testing.assert_allclose(got, gamma, rtol=0, atol=1e-5)


def test_hero_joint(fitted):
    c, ref, cal, _ = fitted
    G = len(c.round_names)
    joint = dense.hero_joint(c.Zh, c.gold_h, c.rounds_h, G, c.Zc, ref)
    assert joint.converged
    assert he.hero_joint(c.cur, cal).estimate == pytest.approx(joint.prev[G], abs=ATOL)


# --------------------------------------------------------------------------- closed forms
def _one_labeler(hist_labels, hist_gold, cur_labels):
    N = len(hist_labels)
    hid = [f"h{i:03d}" for i in range(N)]
    hist = he.AnnotationSet.from_arrays(hid, ["a"] * N, hist_labels, gold=(hid, hist_gold))
    cid = [f"c{i:03d}" for i in range(len(cur_labels))]
    cur = he.AnnotationSet.from_arrays(cid, ["a"] * len(cur_labels), cur_labels)
    return hist, cur


@pytest.mark.parametrize("p_cur", [0.1, 0.25, 0.4, 0.55, 0.8, 0.95])
def test_rogan_gladen_single_labeler(p_cur):
    rng = np.random.default_rng(7)
    y = (rng.random(200) < 0.4).astype(int)
    z = np.where(y == 1, rng.random(200) < 0.8, rng.random(200) < 0.25).astype(int)  # alpha .8, beta .75
    n = 40
    cur_labels = [1] * round(p_cur * n) + [0] * (n - round(p_cur * n))
    hist, cur = _one_labeler(z.tolist(), y.tolist(), cur_labels)
    cal = he.calibrate(hist, tol=1e-11)
    a, b = float(cal.alpha[0]), float(cal.beta[0])
    # gold for every item: the calibration is the gold confusion rates
    assert a == pytest.approx(np.mean(z[y == 1]), abs=1e-12)
    assert b == pytest.approx(np.mean(1 - z[y == 0]), abs=1e-12)
    p = np.mean(cur_labels)
    rg = min(max((p + b - 1) / (a + b - 1), 0.0), 1.0)
    res = he.hero1(cur, cal)
    assert res.estimate == pytest.approx(rg, abs=1e-9)
    expect = "boundary_0" if rg == 0 else "boundary_1" if rg == 1 else "ok"
    assert res.status == expect
    # gold_proportion: Rogan–Gladen with Laplace-smoothed rates
    tp, fn = np.sum(z[y == 1]), np.sum(1 - z[y == 1])
    tn, fp = np.sum(1 - z[y == 0]), np.sum(z[y == 0])
    a2, b2 = (tp + 1) / (tp + fn + 2), (tn + 1) / (tn + fp + 2)
    rg2 = min(max((p + b2 - 1) / (a2 + b2 - 1), 0.0), 1.0)
    assert he.gold_proportion(cur, cal).estimate == pytest.approx(rg2, abs=1e-9)


def test_perfect_labelers_give_exact_rate():
    rng = np.random.default_rng(3)
    J, N, n = 4, 120, 50
    names = [f"L{j:02d}" for j in range(J)]
    yh = (rng.random(N) < 0.4).astype(int)
    yc = (rng.random(n) < 0.3).astype(int)

    def long(y, prefix):
        it, lb, z = [], [], []
        for i, yi in enumerate(y):
            for j in rng.choice(J, size=2, replace=False):
                it.append(f"{prefix}{i:03d}")
                lb.append(names[j])
                z.append(int(yi))
        return it, lb, z

    hid = [f"h{i:03d}" for i in range(N)]
    hist = he.AnnotationSet.from_arrays(*long(yh, "h"), gold=(hid, yh.tolist()))
    cur = he.AnnotationSet.from_arrays(*long(yc, "c"))
    cal = he.calibrate(hist, tol=1e-11)
    np.testing.assert_allclose(cal.alpha, 1.0, atol=1e-12)
    np.testing.assert_allclose(cal.beta, 1.0, atol=1e-12)
    truth = yc.mean()
    for fn in (he.hero1, he.hero_joint):
        assert fn(cur, cal).estimate == pytest.approx(truth, abs=ATOL), fn.__name__
    assert he.majority_vote(cur).estimate == pytest.approx(truth, abs=ATOL)
    assert he.dawid_skene(cur, tol=1e-11).estimate == pytest.approx(truth, abs=ATOL)


def test_all_positive_labels_give_boundary_1():
    rng = np.random.default_rng(5)
    N = 100
    y = (rng.random(N) < 0.5).astype(int)
    it, lb, z = [], [], []
    for i in range(N):
        for nm in ("a", "b"):
            it.append(f"h{i:03d}")
            lb.append(nm)
            z.append(int(rng.random() < (0.85 if y[i] else 0.2)))
    hid = [f"h{i:03d}" for i in range(N)]
    hist = he.AnnotationSet.from_arrays(it, lb, z, gold=(hid, y.tolist()))
    cal = he.calibrate(hist, tol=1e-11)
    assert np.all(cal.alpha > 1 - cal.beta)
    cur = he.AnnotationSet.from_arrays([f"c{i}" for i in range(20) for _ in (0, 1)], ["a", "b"] * 20, [1] * 40)
    res = he.hero1(cur, cal)
    assert res.estimate == 1.0
    assert res.status == "boundary_1"
