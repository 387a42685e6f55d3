"""Influence-function kernels: per-item scores, observed information, gradients.

Parameters of a two-coin fit are ordered ``theta = (alpha_1..J, beta_1..J,
mu_1..G)``. For an item r with posterior gamma_r, the observed-data score
(Fisher's identity) is the complete-data score with Y replaced by gamma_r:

    d/d alpha_j = gamma_r   sum_{labels of j on r} (z - alpha_j) / (alpha_j (1 - alpha_j))
    d/d beta_j  = (1 - g_r) sum_{labels of j on r} ((1 - z) - beta_j) / (beta_j (1 - beta_j))
    d/d mu_g    = (gamma_r - mu_g) / (mu_g (1 - mu_g))        (r in round g)

The observed information (Louis, 1982) is the conditional expected
complete-data information minus the conditional variance of the
complete-data score. The complete-data score is linear in Y, so the second
term is ``sum_r gamma_r (1 - gamma_r) d_r d_r'`` with ``d_r`` the score at
Y=1 minus the score at Y=0; the first is diagonal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from . import _em

FloatArray = npt.NDArray[np.float64]

BOUND_TOL = 1e-6
"""Parameters this close to 0 or 1 sit on the boundary: they get no influence."""


def _code_weights(alpha: FloatArray, beta: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Per-code (z - a)/(a(1-a)), ((1-z) - b)/(b(1-b)) and the complete-data informations."""
    a = np.clip(alpha, _em.EPS, 1 - _em.EPS)
    b = np.clip(beta, _em.EPS, 1 - _em.EPS)
    J = a.size
    z = np.tile([0.0, 1.0], J)
    aa = np.repeat(a, 2)
    bb = np.repeat(b, 2)
    ua = (z - aa) / (aa * (1 - aa))
    ub = ((1 - z) - bb) / (bb * (1 - bb))
    ia = z / aa**2 + (1 - z) / (1 - aa) ** 2
    ib = (1 - z) / bb**2 + z / (1 - bb) ** 2
    return ua, ub, ia, ib


def _code_to_labeler(J: int) -> sp.csr_matrix:
    rows = np.arange(2 * J)
    return sp.csr_matrix((np.ones(2 * J), (rows, rows // 2)), shape=(2 * J, J))


@dataclass(frozen=True)
class ScoreInfo:
    scores: sp.csr_matrix  # items x P
    info: FloatArray  # P x P observed information
    free: npt.NDArray[np.bool_]  # parameters not on the boundary


def scores_and_information(
    d: _em.Design, alpha: FloatArray, beta: FloatArray, prev: FloatArray, gamma: FloatArray
) -> ScoreInfo:
    """Per-item observed-data scores and the total observed information at a fit."""
    J, G, N = d.n_labelers, d.n_groups, d.n_items
    ua, ub, ia, ib = _code_weights(alpha, beta)
    M = _code_to_labeler(J)
    Aua = (d.A @ sp.diags(ua) @ M).tocsr()  # items x J: sum (z - a)/(a(1-a))
    Aub = (d.A @ sp.diags(ub) @ M).tocsr()
    p = np.clip(prev, _em.EPS, 1 - _em.EPS)
    pg = p[d.group]
    E = sp.csr_matrix((np.ones(N), (np.arange(N), d.group)), shape=(N, G))
    w = d.weight
    g = gamma
    S = sp.hstack(
        [
            sp.diags(g) @ Aua,
            sp.diags(1 - g) @ Aub,
            sp.diags((g - pg) / (pg * (1 - pg))) @ E,
        ],
        format="csr",
    )
    # conditional expected complete-data information (diagonal)
    gw = g if w is None else g * w
    onew = (1 - g) if w is None else (1 - g) * w
    ga = np.asarray(d.AT @ gw)  # per code sum of gamma
    gb = np.asarray(d.AT @ onew)
    Da = M.T @ (ga * ia)
    Db = M.T @ (gb * ib)
    Dm = np.bincount(d.group, weights=gw / pg**2 + onew / (1 - pg) ** 2, minlength=G)
    c = d.pseudo_count
    if c > 0:  # log Beta(1 + c, 1 + c) prior curvature
        a = np.clip(alpha, _em.EPS, 1 - _em.EPS)
        b = np.clip(beta, _em.EPS, 1 - _em.EPS)
        Da = Da + c * (1 / a**2 + 1 / (1 - a) ** 2)
        Db = Db + c * (1 / b**2 + 1 / (1 - b) ** 2)
    Dr = sp.hstack([Aua, -Aub, sp.diags(1 / (pg * (1 - pg))) @ E], format="csr")
    vw = g * (1 - g) if w is None else g * (1 - g) * w
    missing = np.asarray((Dr.T @ sp.diags(vw) @ Dr).todense())
    H = np.diag(np.concatenate([Da, Db, Dm])) - missing
    if w is not None:
        S = sp.diags(w) @ S
    theta = np.concatenate([alpha, beta, prev])
    free = np.minimum(theta, 1 - theta) > BOUND_TOL
    return ScoreInfo(S.tocsr(), H, free)


def inverse_information(si: ScoreInfo) -> FloatArray:
    """H^-1 on the free parameters, zero rows/columns for boundary parameters."""
    P = si.info.shape[0]
    f = si.free
    Hinv = np.zeros((P, P))
    if f.any():
        Hff = si.info[np.ix_(f, f)]
        Hinv[np.ix_(f, f)] = np.linalg.pinv(Hff, hermitian=True)
    return Hinv


def sandwich_gram(si: ScoreInfo, Hinv: FloatArray) -> FloatArray:
    """sum_r IF(r) IF(r)' with IF(r) = H^-1 s_r: the sandwich covariance of theta-hat."""
    StS = np.asarray((si.scores.T @ si.scores).todense())
    out: FloatArray = Hinv @ StS @ Hinv
    return out


def kappa(mu: float, L: FloatArray) -> FloatArray:
    """d psi_i / d lambda_i(1) = e^L / (mu e^L + 1 - mu)^2, without overflow."""
    out = np.empty_like(L)
    pos = L > 0
    em = np.exp(-L[pos])
    out[pos] = em / (mu + (1 - mu) * em) ** 2
    ep = np.exp(L[~pos])
    out[~pos] = ep / (mu * ep + 1 - mu) ** 2
    return out


def score_gradient(
    item_ptr: npt.NDArray[np.int64],
    codes: npt.NDArray[np.int64],
    n_labelers: int,
    alpha: FloatArray,
    beta: FloatArray,
    mu: float,
    L: FloatArray,
) -> FloatArray:
    """Mean over items of d psi_i / d(alpha, beta): a vector of length 2J.

    ``codes`` are ``2 * labeler + label`` in the calibration's labeler index.
    """
    n = item_ptr.size - 1
    ua, ub, _, _ = _code_weights(alpha, beta)
    k = kappa(mu, L)
    kk = np.repeat(k, np.diff(item_ptr))
    ga = np.bincount(codes, weights=kk * ua[codes], minlength=2 * n_labelers)
    gb = np.bincount(codes, weights=kk * ub[codes], minlength=2 * n_labelers)
    Ga = ga[0::2] + ga[1::2]
    Gb = -(gb[0::2] + gb[1::2])
    out: FloatArray = np.concatenate([Ga, Gb]) / n
    return out
