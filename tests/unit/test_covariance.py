"""The structured parameter covariance (issue #20 item 5) equals the dense computation.

* The compiled covariance pass sums the information and the scores' Gram per
  pair of labelers (:func:`heroeval.stage_a.kernels._pair_pass`); it must give
  the matrices the NumPy engine forms from per-item score rows
  (:func:`heroeval.stage_a.scoring.scores_and_information`).
* :class:`heroeval.stage_a.covariance.ParameterCovariance` answers ``a' V b`` by
  conjugate gradients, by a Cholesky factor, or from the matrix; each must equal
  ``V`` formed densely (:func:`heroeval.stage_a.covariance.dense_covariance`,
  the computation of earlier versions) to 1e-10.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import heroeval as he
from heroeval.core import jit
from heroeval.stage_a import covariance as cv
from heroeval.stage_a import kernels, scoring, two_coin
from heroeval.stage_a.fit import design_of

pytestmark = pytest.mark.skipif(not jit.HAVE_NUMBA, reason="numba is not installed")


def _crowd(seed: int, J: int, n: int, *, repeated: bool = False, covariates: bool = False,
           current: bool = False) -> he.AnnotationSet:
    """n items in two rounds, 3-5 distinct labelers each out of J, gold on 10 %."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < np.where(np.arange(n) < n // 2, 0.3, 0.5)
    a = rng.uniform(0.65, 0.9, J)
    b = rng.uniform(0.65, 0.9, J)
    k = rng.integers(3, 6, n)
    item = np.repeat(np.arange(n), k)
    lab = np.argsort(rng.random((n, J)), axis=1)[:, :5]
    lab = np.concatenate([lab[i, : k[i]] for i in range(n)])
    if repeated:  # the first label's labeler labels the first 200 items again
        first = np.r_[0, np.cumsum(k)[:-1]][:200]
        item = np.concatenate([item, np.arange(200)])
        lab = np.concatenate([lab, lab[first]])
    z = (rng.random(item.size) < np.where(y[item], a[lab], 1 - b[lab])).astype(int)
    names = [f"w{j:03d}" for j in lab]
    if current:
        return he.AnnotationSet.from_arrays(item, names, z)
    g = rng.random(n) < 0.1
    cov = (np.arange(n), np.column_stack([y + rng.normal(0, 1, n), rng.normal(0, 1, n)])) if covariates else None
    return he.AnnotationSet.from_arrays(
        item, names, z, gold=(np.flatnonzero(g), y[g].astype(int)),
        item_round=(np.arange(n), np.where(np.arange(n) < n // 2, "r1", "r2")), covariates=cov)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize(("repeated", "covariates", "w"), [(False, False, 1.0), (True, True, 0.4)])
def test_pair_sums_equal_the_numpy_information_and_gram(repeated: bool, covariates: bool, w: float) -> None:
    # J = 150: the pair sums are unpacked in 64 x 64 tiles; more than two tiles a side
    hist = _crowd(1, 150, 3000, repeated=repeated, covariates=covariates)
    rng = np.random.default_rng(2)
    J, G = hist.n_labelers, hist.n_rounds
    alpha, beta, prev = rng.uniform(0.6, 0.9, J), rng.uniform(0.6, 0.9, J), np.array([0.3, 0.5])
    weight = None if w == 1.0 else np.where(hist.gold >= 0, 1.0, w)
    d = replace(design_of(hist), weight=weight, pseudo_count=1.0)
    gamma, _ = two_coin.e_step(d, alpha, beta, prev, need_ll=False)
    X = hist.covariates
    si = scoring.scores_and_information(d, alpha, beta, prev, gamma)
    cd = kernels.compact_design(hist.item_ptr, hist.labeler, hist.label, J, hist.gold, hist.item_round, G,
                                 weight=weight, pseudo_count=1.0)
    H, S, SX = cd.covariance_sums(alpha, beta, prev, gamma, X, True)
    assert _rel(H, si.info) < 1e-12
    assert _rel(S, si.gram) < 1e-12
    if X is not None:
        assert SX is not None
        assert _rel(SX, np.asarray(si.scores.T @ (X - X.mean(axis=0)))) < 1e-12
    H2, S2, _ = cd.covariance_sums(alpha, beta, prev, gamma, None, False)  # the information alone
    assert _rel(H2, si.info) < 1e-12 and np.isnan(S2).all()
    # one chunk or several: the same sums up to the order of additions
    H3, S3, _ = cd.rechunked(3).covariance_sums(alpha, beta, prev, gamma, None, True)
    assert _rel(H3, H) < 1e-13 and _rel(S3, S) < 1e-13


@pytest.mark.parametrize(("variance", "covariates"), [("sandwich", False), ("model", False), ("sandwich", True)])
def test_calibration_covariance_equals_the_dense_computation(variance: str, covariates: bool) -> None:
    # J = 300: 601 + parameters, so the covariance is not formed at calibrate time
    hist = _crowd(3, 300, 6000, covariates=covariates)
    cal = he.calibrate(hist, engine="numba", variance=variance)  # type: ignore[arg-type]
    pc = cal.covariance
    assert pc is not None and pc.method == "cg"
    fit = cal.history_fit
    assert fit is not None
    # the dense computation, on the NumPy engine's information and Gram (per-item score rows)
    si = scoring.scores_and_information(design_of(hist), fit.alpha, fit.beta, fit.prev, fit.gamma)
    X = hist.covariates
    Xc = None if X is None else X - X.mean(axis=0)
    SX = None if Xc is None else np.asarray(si.scores.T @ Xc)
    Vd = cv.dense_covariance(si.info, si.free, si.gram if variance == "sandwich" else None, SX, Xc)
    assert Vd.shape == (pc.dim, pc.dim)
    rng = np.random.default_rng(4)
    C = rng.normal(size=(pc.dim, 3))
    for j in range(3):  # one vector at a time: conjugate gradients
        assert abs(pc.quad(C[:, j]) - C[:, j] @ Vd @ C[:, j]) <= 1e-10 * abs(C[:, j] @ Vd @ C[:, j])
    assert pc.method == "cg"
    q = pc.quad(C[:, 0], C[:, 1])
    assert abs(q - C[:, 0] @ Vd @ C[:, 1]) <= 1e-10 * np.sqrt((C[:, 0] @ Vd @ C[:, 0]) * (C[:, 1] @ Vd @ C[:, 1]))
    # many vectors at once: the Cholesky factor
    C2 = rng.normal(size=(pc.dim, cv.CG_MAX_RHS + 1))
    Q = pc.quad(C2)
    assert pc.method == "cholesky"
    assert _rel(Q, C2.T @ Vd @ C2) < 1e-10
    idx = np.array([0, 5, 2 * cal.n_labelers, pc.dim - 1])
    assert _rel(pc.submatrix(idx), Vd[np.ix_(idx, idx)]) < 1e-10
    # the matrix, formed on request
    V = cal.parameter_covariance
    assert V is not None and pc.method == "matrix"
    assert _rel(V, Vd) < 1e-10
    assert not V.flags.writeable


def _spd(rng: np.random.Generator, P: int) -> tuple[np.ndarray, np.ndarray]:
    """A diagonal minus a sum of rank-one terms (the information's shape), and a Gram matrix."""
    U = rng.normal(size=(3 * P, P)) * (rng.random((3 * P, P)) < 0.1)
    D = np.diag(np.sum(U**2, axis=0) * 1.5 + 1.0)
    H = D - 0.5 * U.T @ U
    S = U.T @ U / 3 + np.eye(P)
    return H, S


def test_solves_by_conjugate_gradients_cholesky_and_pseudo_inverse() -> None:
    rng = np.random.default_rng(5)
    P = 40
    H, S = _spd(rng, P)
    assert np.linalg.eigvalsh(H).min() > 0
    free = np.ones(P, bool)
    free[[3, 17]] = False  # two parameters on the boundary: zero rows and columns
    Xc = rng.normal(size=(50, 2))
    Xc -= Xc.mean(axis=0)
    SX = rng.normal(size=(P, 2))
    cases: list[tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]] = [
        (S, None, None), (None, None, None), (S, SX, Xc)]
    for gram, sx, xc in cases:
        Vd = cv.dense_covariance(H, free, gram, sx, xc)
        pc = cv.ParameterCovariance.from_information(H.copy(), free, gram, sx, xc, factor_min=1)
        c = rng.normal(size=pc.dim)
        assert pc.method == "cg"
        assert abs(pc.quad(c) - c @ Vd @ c) <= 1e-10 * abs(c @ Vd @ c)
        assert pc.quad(np.eye(pc.dim)[:, 3]) == 0.0  # a boundary parameter
        pc._factor()
        assert pc.method == "cholesky"
        assert abs(pc.quad(c) - c @ Vd @ c) <= 1e-10 * abs(c @ Vd @ c)
        assert _rel(pc.matrix(), Vd) < 1e-10
        # below factor_min: formed at once, exactly as before
        small = cv.ParameterCovariance.from_information(H.copy(), free, gram, sx, xc)
        assert small.method == "matrix"
        np.testing.assert_array_equal(small.matrix(), Vd)
    # not positive definite: conjugate gradients meet negative curvature, the pseudo-inverse takes over
    Hi = H.copy()
    Hi[0, 0] = -Hi[0, 0]
    Vd = cv.dense_covariance(Hi, free, S)
    pc = cv.ParameterCovariance.from_information(Hi, free, S, factor_min=1)
    c = rng.normal(size=P)
    assert abs(pc.quad(c) - c @ Vd @ c) <= 1e-10 * abs(c @ Vd @ c)
    assert pc.method == "matrix"
    # a free parameter without information: straight to the pseudo-inverse
    Hz = H.copy()
    Hz[5, :] = Hz[:, 5] = 0.0
    pc = cv.ParameterCovariance.from_information(Hz, free, S, factor_min=1)
    assert pc.method == "matrix"
    assert _rel(pc.matrix(), cv.dense_covariance(Hz, free, S)) < 1e-12


def test_saved_covariance_gives_the_same_estimates(tmp_path: Path) -> None:
    hist = _crowd(6, 300, 6000)
    cur = _crowd(7, 300, 800, current=True)
    cal = he.calibrate(hist, engine="numba")
    assert cal.covariance is not None and cal.covariance.method == "cg"
    a = he.hero1(cur, cal)
    cal.save(tmp_path / "c.json")
    back = he.load_calibration(tmp_path / "c.json")
    assert back.covariance is not None and back.covariance.method == "matrix"
    b = he.hero1(cur, back)
    assert a.estimate == b.estimate
    assert abs(a.standard_error - b.standard_error) <= 1e-10 * a.standard_error
    assert a.influence is not None and b.influence is not None
    va, vb = a.influence.variance_history(), b.influence.variance_history()
    assert va > 0 and abs(va - vb) <= 1e-10 * va
    ca, cb = a.confidence_interval(), b.confidence_interval()
    assert abs(ca.low - cb.low) <= 1e-10 and abs(ca.high - cb.high) <= 1e-10
