"""The compiled Stage A engine (numba, issue #7 item 4) equals the NumPy engine, and a plain loop."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import heroeval as he
from heroeval.core import jit
from heroeval.errors import HeroEvalError
from heroeval.ingest._csr import CsrBuilder
from heroeval.report.terminal import _engine_text
from heroeval.simulate import paper_dgp
from heroeval.stage_a import fit as calmod
from heroeval.stage_a import kernels, two_coin
from heroeval.stage_a.fit import weighted_design
from heroeval.stage_a.gold import initial_values

pytestmark = pytest.mark.skipif(not jit.HAVE_NUMBA, reason="numba is not installed")


def _history(seed: int, repeated: bool = False, covariates: bool = False) -> he.AnnotationSet:
    """Two rounds, 3-6 labels per item, gold on 8 %, optionally repeated pairs and covariates."""
    rng = np.random.default_rng(seed)
    n, J = 4000, 12
    y = rng.random(n) < np.where(np.arange(n) < n // 2, 0.3, 0.6)
    a = rng.uniform(0.6, 0.95, J)
    b = rng.uniform(0.55, 0.95, J)
    k = rng.integers(3, 7, n)
    item = np.repeat(np.arange(n), k)
    lab = np.concatenate([rng.choice(J, size=kk, replace=False) for kk in k])
    if repeated:  # labeler of the first label labels again on 300 items
        first = np.r_[0, np.cumsum(k)[:-1]][:300]
        item = np.concatenate([item, np.arange(300)])
        lab = np.concatenate([lab, lab[first]])
    z = (rng.random(item.size) < np.where(y[item], a[lab], 1 - b[lab])).astype(int)
    g = rng.random(n) < 0.08
    cov = None
    if covariates:
        cov = (np.arange(n), np.column_stack([y + rng.normal(0, 1, n), rng.normal(0, 1, n)]))
    return he.AnnotationSet.from_arrays(
        item, [f"w{j:02d}" for j in lab], z, gold=(np.flatnonzero(g), y[g].astype(int)),
        item_round=(np.arange(n), np.where(np.arange(n) < n // 2, "old", "new")), covariates=cov)


def _close(a: he.Calibration, b: he.Calibration, tol: float) -> None:
    np.testing.assert_allclose(a.alpha, b.alpha, rtol=0, atol=tol)
    np.testing.assert_allclose(a.beta, b.beta, rtol=0, atol=tol)
    np.testing.assert_allclose(a.round_prevalence, b.round_prevalence, rtol=0, atol=tol)
    assert a.parameter_covariance is not None and b.parameter_covariance is not None
    scale = np.max(np.abs(a.parameter_covariance))
    np.testing.assert_allclose(a.parameter_covariance, b.parameter_covariance, rtol=0, atol=tol * scale)
    assert a.history_fit is not None and b.history_fit is not None
    np.testing.assert_allclose(a.history_fit.gamma, b.history_fit.gamma, rtol=0, atol=tol)
    assert abs(a.history_fit.loglik - b.history_fit.loglik) <= tol * abs(a.history_fit.loglik)


@pytest.mark.parametrize(
    ("repeated", "covariates", "kw"),
    [
        (False, False, {}),
        (True, False, {}),
        (False, True, {}),
        (False, False, {"history_weight": 0.3}),
        (False, False, {"pseudo_count": 2.0}),
        (False, False, {"variance": "model"}),
        (True, False, {"accelerate": False, "criterion": "loglik", "tol": 1e-13}),
    ],
)
def test_numba_engine_equals_numpy_engine(repeated: bool, covariates: bool, kw: dict[str, object]) -> None:
    hist = _history(3, repeated, covariates)
    settings: dict[str, object] = {"tol": 1e-12, **kw}
    a = he.calibrate(hist, engine="numpy", compress=False, **settings)  # type: ignore[arg-type]
    b = he.calibrate(hist, engine="numba", **settings)  # type: ignore[arg-type]
    _close(a, b, 1e-10)
    assert a.convergence.n_iter == b.convergence.n_iter
    # the compiled fit reads the labels per labeler off its code counts: the same counts as the labels give
    np.testing.assert_array_equal(b.n_annotations, np.bincount(hist.labeler, minlength=hist.n_labelers))
    np.testing.assert_array_equal(a.n_annotations, b.n_annotations)
    np.testing.assert_array_equal(a.n_items, b.n_items)


def _plain_em_map(hist: he.AnnotationSet, alpha: np.ndarray, beta: np.ndarray, prev: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, float]:
    """One EM step and the log-likelihood, item by item in plain Python (an independent implementation)."""
    J, G = hist.n_labelers, hist.n_rounds
    s1 = np.zeros(J)
    n1 = np.zeros(J)
    s0 = np.zeros(J)
    n0 = np.zeros(J)
    gsum = np.zeros(G)
    gcnt = np.zeros(G)
    ll = 0.0
    for r in range(hist.n_items):
        labs = hist.labeler[hist.item_ptr[r]:hist.item_ptr[r + 1]]
        zs = hist.label[hist.item_ptr[r]:hist.item_ptr[r + 1]]
        p1 = math.prod(alpha[j] if z else 1 - alpha[j] for j, z in zip(labs, zs, strict=True))
        p0 = math.prod(1 - beta[j] if z else beta[j] for j, z in zip(labs, zs, strict=True))
        mu = prev[hist.item_round[r]]
        if hist.gold[r] == 1:
            gam, lik = 1.0, mu * p1
        elif hist.gold[r] == 0:
            gam, lik = 0.0, (1 - mu) * p0
        else:
            lik = mu * p1 + (1 - mu) * p0
            gam = mu * p1 / lik
        ll += math.log(lik)
        for j, z in zip(labs, zs, strict=True):
            s1[j] += gam * z
            n1[j] += gam
            s0[j] += (1 - gam) * (1 - z)
            n0[j] += 1 - gam
        gsum[hist.item_round[r]] += gam
        gcnt[hist.item_round[r]] += 1
    return s1 / n1, s0 / n0, gsum / gcnt, ll


def test_one_compiled_em_step_equals_a_plain_loop() -> None:
    hist = _history(5).take_items(np.arange(0, 4000, 7))  # both rounds
    a0, b0, p0 = initial_values(hist)
    cd = kernels.compact_design(hist.item_ptr, hist.labeler, hist.label, hist.n_labelers, hist.gold,
                                 hist.item_round, hist.n_rounds)
    a1, b1, p1, ll = cd.em_map(a0, b0, p0, True)
    ea, eb, ep, ell = _plain_em_map(hist, a0, b0, p0)
    np.testing.assert_allclose(a1, ea, rtol=1e-12)
    np.testing.assert_allclose(b1, eb, rtol=1e-12)
    np.testing.assert_allclose(p1, ep, rtol=1e-12)
    assert ll == pytest.approx(ell, rel=1e-12)
    gamma, ll2 = cd.posterior(a0, b0, p0)
    assert ll2 == pytest.approx(ell, rel=1e-12)
    assert np.all(gamma[hist.gold == 1] == 1.0) and np.all(gamma[hist.gold == 0] == 0.0)


def test_tiny_hand_case() -> None:
    """Two items, labelers a (0.8, 0.9) and b (0.7, 0.6), prevalence 0.5; closed-form posteriors."""
    hist = he.AnnotationSet.from_arrays([1, 1, 2, 2], ["a", "b", "a", "b"], [1, 0, 0, 0])
    cd = kernels.compact_design(hist.item_ptr, hist.labeler, hist.label, 2, hist.gold, hist.item_round, 1)
    alpha, beta, prev = np.array([0.8, 0.7]), np.array([0.9, 0.6]), np.array([0.5])
    gamma, ll = cd.posterior(alpha, beta, prev)
    p1 = 0.5 * 0.8 * 0.3
    q1 = 0.5 * 0.1 * 0.6
    p2 = 0.5 * 0.2 * 0.3
    q2 = 0.5 * 0.9 * 0.6
    np.testing.assert_allclose(gamma, [p1 / (p1 + q1), p2 / (p2 + q2)], rtol=1e-14)
    assert ll == pytest.approx(math.log(p1 + q1) + math.log(p2 + q2), rel=1e-14)


def test_progress_is_reported_every_cycle() -> None:
    hist = _history(7)
    seen: list[tuple[int, float, float]] = []
    cal = he.calibrate(hist, engine="numba", progress=lambda n, ll, ch: seen.append((n, ll, ch)))
    assert seen and seen[-1][0] <= cal.convergence.n_iter
    assert seen[-1][2] <= 1e-8 < seen[0][2]
    assert all(b[0] > a[0] for a, b in itertools.pairwise(seen))


def test_engine_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    hist = _history(1)
    with pytest.raises(HeroEvalError, match="engine must be"):
        he.calibrate(hist, engine="gpu")  # type: ignore[arg-type]
    with pytest.raises(HeroEvalError, match="progress must be"):
        he.calibrate(hist, progress="yes")  # type: ignore[arg-type]
    monkeypatch.setattr(jit, "HAVE_NUMBA", False)
    with pytest.raises(HeroEvalError, match="needs numba"):
        he.calibrate(hist, engine="numba")
    # auto falls back to NumPy without numba
    assert he.calibrate(hist, engine="auto").convergence.converged


def test_sums_are_the_same_on_one_thread_and_many() -> None:
    """Chunking only changes the order of additions."""
    hist = _history(2)
    a0, b0, p0 = initial_values(hist)
    cd = kernels.compact_design(hist.item_ptr, hist.labeler, hist.label, hist.n_labelers, hist.gold,
                                 hist.item_round, hist.n_rounds)
    one = cd.rechunked(1)
    for x, y in zip(cd.em_map(a0, b0, p0, True), one.em_map(a0, b0, p0, True), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-13)


def test_paper_dgp_large_enough_for_auto() -> None:
    d = paper_dgp(4, N=3000, J=10)
    a = he.calibrate(d.history, engine="numpy", compress=False, tol=1e-12)
    b = he.calibrate(d.history, engine="numba", tol=1e-12)
    _close(a, b, 1e-10)
    assert two_coin.EPS < 1e-8


def test_csr_builder_equals_a_stable_sort() -> None:
    """Rows streamed in batches land where a stable sort by item puts them; repeats and round conflicts are found."""
    rng = np.random.default_rng(11)
    n_items, n = 500, 4000
    ic = rng.integers(0, n_items, n).astype(np.int32)
    lc = rng.integers(0, 30, n).astype(np.int32)
    y = rng.integers(0, 2, n).astype(np.int8)
    rc = (ic % 3).astype(np.int32)  # one round per item
    counts = np.bincount(ic, minlength=n_items)
    b = CsrBuilder(counts)
    for s in np.array_split(np.arange(n), 7):
        b.add(ic[s], lc[s], y[s], rc[s])
    n_dup, first = b.finish()
    order = np.argsort(ic, kind="stable")
    np.testing.assert_array_equal(b.labeler, lc[order])
    np.testing.assert_array_equal(b.label, y[order])
    np.testing.assert_array_equal(b.item_round[counts > 0], (np.arange(n_items) % 3)[counts > 0])
    assert b.conflict[0] == -1
    plain = sum(len(v) - len(set(v)) for v in (lc[order][b.ptr[k]:b.ptr[k + 1]].tolist() for k in range(n_items)))
    assert n_dup == plain and (n_dup == 0 or first >= 0)
    # a row more than counted is refused, a row fewer is found at the end, a second round is reported
    b2 = CsrBuilder(np.array([1, 1]))
    with pytest.raises(ValueError, match="more streamed rows"):
        b2.add(np.array([0, 0], np.int32), np.array([0, 1], np.int32), np.zeros(2, np.int8), np.zeros(2, np.int32))
    b3 = CsrBuilder(np.array([2, 1]))
    b3.add(np.array([0, 1], np.int32), np.array([0, 1], np.int32), np.zeros(2, np.int8), np.zeros(2, np.int32))
    with pytest.raises(ValueError, match="do not match"):
        b3.finish()
    b4 = CsrBuilder(np.array([2]))
    b4.add(np.array([0, 0], np.int32), np.array([0, 1], np.int32), np.zeros(2, np.int8), np.array([0, 1], np.int32))
    assert b4.conflict[0] == 0


@pytest.mark.parametrize("weighted", [False, True])
def test_items_whose_odds_leave_the_product_range_use_logs(weighted: bool) -> None:
    """Items with 60 labels from near-perfect labelers: odds of 1e+-500 overflow a product, the log path takes over.

    Mixed with ordinary 3-5 label items (the product path) and gold items; one EM map,
    the posteriors and the log-likelihood equal the NumPy engine's, in input item order.
    """
    rng = np.random.default_rng(11)
    J = 70
    sizes = np.r_[rng.integers(3, 6, 300), np.full(20, 60)]
    rng.shuffle(sizes)
    item = np.repeat(np.arange(sizes.size), sizes)
    lab = np.concatenate([rng.choice(J, size=k, replace=False) for k in sizes])
    y = rng.random(sizes.size) < 0.4
    z = (y[item] ^ (rng.random(item.size) < 0.05)).astype(int)
    g = rng.random(sizes.size) < 0.1
    hist = he.AnnotationSet.from_arrays(item, lab, z, gold=(np.flatnonzero(g), y[g].astype(int)))
    alpha = np.full(J, 1 - 1e-9)
    beta = np.full(J, 1 - 1e-9)
    alpha[:10] = 0.7
    prev = np.array([0.4])
    w = np.where(hist.gold >= 0, 1.0, 0.6) if weighted else None
    dn = weighted_design(hist, 0.6 if weighted else 1.0)
    cd = kernels.compact_design(hist.item_ptr, hist.labeler, hist.label, J, hist.gold, hist.item_round, 1,
                                 weight=w)
    assert cd.order is not None  # the items were re-ordered by size: a stable sort by size (counting sort)
    np.testing.assert_array_equal(cd.order, np.argsort(np.diff(hist.item_ptr), kind="stable"))
    np.testing.assert_array_equal(np.diff(cd.ptr), np.diff(hist.item_ptr)[cd.order])  # offsets in that order
    for x, e in zip(cd.em_map(alpha, beta, prev, True), two_coin.em_map(dn, alpha, beta, prev, True), strict=True):
        np.testing.assert_allclose(x, e, rtol=1e-10, atol=1e-12)
    g1, ll1 = cd.posterior(alpha, beta, prev)
    g2, ll2 = two_coin.posterior(dn, alpha, beta, prev)
    np.testing.assert_allclose(g1, g2, rtol=0, atol=1e-12)
    assert ll1 == pytest.approx(ll2, rel=1e-12)
    unsorted = kernels.compact_design(hist.item_ptr, hist.labeler, hist.label, J, hist.gold, hist.item_round, 1,
                                       weight=w, sort_items=False)
    assert unsorted.order is None
    np.testing.assert_allclose(unsorted.posterior(alpha, beta, prev)[0], g1, rtol=0, atol=1e-14)


def test_chunks_hold_about_equal_costs() -> None:
    """A chunk costs its annotations plus a fixed cost per item; each boundary is within one item of its target."""
    ptr = np.r_[0, np.cumsum(np.r_[np.full(1000, 3), np.full(100, 30)])].astype(np.int64)
    for n in (1, 2, 3, 4, 7):
        b = kernels.chunk_bounds(ptr, n)
        assert b[0] == 0 and b[-1] == 1100 and np.all(np.diff(b) >= 0) and b.size == n + 1
        cost = np.diff(ptr[b] + kernels._ITEM_COST * b)
        assert cost.max() - cost.min() <= 2 * (30 + kernels._ITEM_COST)  # each end within one item
    assert np.array_equal(kernels.chunk_bounds(np.zeros(1, np.int64), 3), [0, 0, 0, 0])


def test_an_item_with_more_than_65535_labels_is_sorted_by_its_true_size() -> None:
    """An item with more than 65535 labels (beyond a 2-byte size) is sorted by its true size; sorted and unsorted designs agree."""
    rng = np.random.default_rng(3)
    sizes = np.array([3, 70_000, 4, 2, 5])
    ptr = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    lab = rng.integers(0, 10, ptr[-1]).astype(np.int32)
    y = rng.integers(0, 2, ptr[-1]).astype(np.int8)
    gold = np.array([-1, -1, 1, -1, -1], np.int8)
    grp = np.zeros(5, np.int32)
    cd = kernels.compact_design(ptr, lab, y, 10, gold, grp, 1)
    assert cd.order is not None and list(cd.order) == [3, 0, 2, 4, 1]
    plain = kernels.compact_design(ptr, lab, y, 10, gold, grp, 1, sort_items=False)
    a, b, p = np.full(10, 0.7), np.full(10, 0.8), np.array([0.4])
    for x, e in zip(cd.em_map(a, b, p, True), plain.em_map(a, b, p, True), strict=True):
        np.testing.assert_allclose(x, e, rtol=1e-12)
    np.testing.assert_allclose(cd.posterior(a, b, p)[0], plain.posterior(a, b, p)[0], rtol=0, atol=1e-15)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_the_thread_pool_works_in_a_forked_child() -> None:
    """A child forked after the pool started gets its own pool (the parent's threads do not exist there)."""
    import multiprocessing as mp

    hist = _history(4)
    a0, b0, p0 = initial_values(hist)
    cd = kernels.compact_design(hist.item_ptr, hist.labeler, hist.label, hist.n_labelers, hist.gold,
                                 hist.item_round, hist.n_rounds).rechunked(2)
    want = cd.em_map(a0, b0, p0, False)[0]  # starts the pool in this process
    with mp.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_em_alpha, (cd, a0, b0, p0)).get(timeout=120)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def _em_alpha(cd: kernels.CompactDesign, a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    return cd.em_map(a, b, p, False)[0]


def test_auto_engine_says_once_when_numba_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """numba is a dependency; where it cannot be imported, engine='auto' falls back to NumPy and warns once."""
    monkeypatch.setattr(jit, "HAVE_NUMBA", False)
    monkeypatch.setattr(calmod, "_said_no_numba", False)
    with pytest.warns(he.HeroEvalWarning, match="numba is not installed"):
        assert calmod._choose_engine("auto", 2_000_000) is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert calmod._choose_engine("auto", 2_000_000) is False  # said once only
        assert calmod._choose_engine("auto", 10) is False  # small histories never wanted it


def test_calibration_says_which_engine_ran() -> None:
    hist = _history(1)
    cal = he.calibrate(hist, engine="numpy", covariance=False)
    assert cal.settings["engine"] == "numpy"
    assert "NumPy engine" in _engine_text(cal) and "below the 1,000,000" in _engine_text(cal)
    assert "numba is installed" in _engine_text(cal)  # numba is a regular dependency: the reason is the size
    assert he.calibrate(hist, engine="numba", covariance=False).settings["engine"] == "numba"


@pytest.mark.parametrize("kind", ["classes", "left out", "many"])
def test_weighted_log_likelihood_equals_a_plain_sum(kind: str) -> None:
    """The weighted pass keeps a running product per distinct weight (up to _N_WEIGHT_PRODUCTS, a log per item
    beyond): its log-likelihood and sums equal a plain per-item sum of w * log P(labels), left-out items
    (weight 0) adding nothing."""
    hist = _history(5)
    J, G = hist.n_labelers, hist.n_rounds
    rng = np.random.default_rng(2)
    isg = hist.gold >= 0
    if kind == "classes":
        w = np.where(isg, 1.0, 0.3)
    elif kind == "left out":
        w = np.where(isg, 1.0, 0.1)
        w[np.flatnonzero(isg)[::3]] = 0.0
    else:
        w = rng.choice([0.2, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0], size=hist.n_items)
    cd = kernels.compact_design(hist.item_ptr, hist.labeler, hist.label, J, hist.gold, hist.item_round, G, weight=w)
    alpha, beta = rng.uniform(0.6, 0.9, J), rng.uniform(0.6, 0.9, J)
    prev = rng.uniform(0.2, 0.7, G)
    s1, _, gsum, _, weighted, ll = cd.em_sums(alpha, beta, prev)
    assert weighted
    # plain: per item, log of P(labels, gold) (gold items) or P(labels) (the others), and its posterior
    s1_p = np.zeros(2 * J)
    gsum_p = np.zeros(G)
    ll_p = 0.0
    for i in range(hist.n_items):
        sl = slice(hist.item_ptr[i], hist.item_ptr[i + 1])
        lab, z = hist.labeler[sl], hist.label[sl]
        g = hist.item_round[i]
        l1 = math.log(prev[g]) + float(np.sum(np.where(z == 1, np.log(alpha[lab]), np.log1p(-alpha[lab]))))
        l0 = math.log1p(-prev[g]) + float(np.sum(np.where(z == 0, np.log(beta[lab]), np.log1p(-beta[lab]))))
        if hist.gold[i] >= 0:
            li, gam = (l1, 1.0) if hist.gold[i] == 1 else (l0, 0.0)
        else:
            li = float(np.logaddexp(l1, l0))
            gam = math.exp(l1 - li)
        ll_p += w[i] * li
        np.add.at(s1_p, 2 * lab + z, w[i] * gam)
        gsum_p[g] += w[i] * gam
    assert ll == pytest.approx(ll_p, rel=1e-11)
    np.testing.assert_allclose(s1, s1_p, rtol=1e-10)
    np.testing.assert_allclose(gsum, gsum_p, rtol=1e-10)
