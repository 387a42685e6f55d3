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
import scipy.linalg
import scipy.sparse as sp

from heroeval.stage_a import two_coin
from heroeval.stage_a.prior import curvature, has_prior

FloatArray = npt.NDArray[np.float64]

_DENSE_MAX = 4_000_000
"""Up to this many items x parameters, Gram matrices are formed densely with BLAS."""

BOUND_TOL = 1e-6
"""Parameters this close to 0 or 1 sit on the boundary: they get no influence."""


def _code_weights(alpha: FloatArray, beta: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Per-code (z - a)/(a(1-a)), ((1-z) - b)/(b(1-b)) and the complete-data informations."""
    a = np.clip(alpha, two_coin.EPS, 1 - two_coin.EPS)
    b = np.clip(beta, two_coin.EPS, 1 - two_coin.EPS)
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
    scores: sp.csr_matrix  # items x P (duplicate column entries within a row add up)
    info: FloatArray  # P x P observed information
    free: npt.NDArray[np.bool_]  # parameters not on the boundary
    gram: FloatArray  # P x P sum_r s_r s_r' (NaN when not asked for)


def _pair_grams(
    ptr: npt.NDArray[np.int64],
    col: npt.NDArray[np.int64],
    xs: list[tuple[FloatArray, FloatArray]],
    P: int,
    chunk: int = 4_000_000,
) -> list[FloatArray]:
    """For each (x, w): sum_r w_r (sum_{a in r} x_a e_{col_a})(same)' as a dense P x P matrix.

    Rows r are CSR segments ``ptr[r]:ptr[r+1]`` of few entries each. Items are
    grouped by segment length k; each group's k x k outer products are
    accumulated with one bincount per matrix over a shared pair index, in
    chunks of about ``chunk`` pairs.
    """
    outs = [np.zeros(P * P) for _ in xs]
    lens = np.diff(ptr)
    for k in np.unique(lens):
        if k == 0:
            continue
        rows = np.flatnonzero(lens == k)
        step = max(1, chunk // int(k * k))
        for s in range(0, rows.size, step):
            r = rows[s : s + step]
            ix = ptr[r][:, None] + np.arange(k)
            c = col[ix]
            flat = (c[:, :, None] * P + c[:, None, :]).ravel()
            for out, (x, w) in zip(outs, xs, strict=True):
                xv = x[ix]
                prod = (xv[:, :, None] * xv[:, None, :]) * w[r][:, None, None]
                out += np.bincount(flat, weights=prod.ravel(), minlength=P * P)
    return [o.reshape(P, P) for o in outs]


@dataclass(frozen=True)
class _ExtendedRows:
    """The items' complete-data score differences as CSR pieces: one "extended" row per item holding its
    (item, code) entries for alpha, the same for beta, and one for its group's mu."""

    ptr: npt.NDArray[np.int64]  # row pointers (N + 1)
    col: npt.NDArray[np.int64]  # parameter column of each entry
    u: FloatArray  # complete-data score difference d_r (Y=1 minus Y=0)
    item_of: npt.NDArray[np.int64]  # item of each (item, code) entry of A
    a_at: npt.NDArray[np.int64]  # positions of the alpha entries
    b_at: npt.NDArray[np.int64]  # positions of the beta entries
    m_at: npt.NDArray[np.int64]  # position of each item's mu entry
    ext_len: npt.NDArray[np.int64]  # entries per item (2 k + 1)


def _extended_rows(d: two_coin.Design, ua: FloatArray, ub: FloatArray, pg: FloatArray) -> _ExtendedRows:
    J, N, A = d.n_labelers, d.n_items, d.A
    k = np.diff(A.indptr)
    code = A.indices.astype(np.int64)
    cnt = A.data
    ext_len = 2 * k + 1
    ptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(ext_len, out=ptr[1:])
    item_of = np.repeat(np.arange(N), k)
    a_at = ptr[item_of] + (np.arange(code.size) - A.indptr[item_of])
    b_at = a_at + k[item_of]
    m_at = ptr[1:] - 1
    col = np.empty(ptr[-1], dtype=np.int64)
    u = np.empty(ptr[-1])
    col[a_at] = code // 2
    col[b_at] = J + code // 2
    col[m_at] = 2 * J + d.group
    u[a_at] = cnt * ua[code]
    u[b_at] = -cnt * ub[code]
    u[m_at] = 1 / (pg * (1 - pg))
    return _ExtendedRows(ptr, col, u, item_of, a_at, b_at, m_at, ext_len)


def scores_and_information(
    d: two_coin.Design, alpha: FloatArray, beta: FloatArray, prev: FloatArray, gamma: FloatArray, gram: bool = True
) -> ScoreInfo:
    """Per-item observed-data scores, their Gram matrix and the total observed information at a fit."""
    J, G, N = d.n_labelers, d.n_groups, d.n_items
    P = 2 * J + G
    ua, ub, ia, ib = _code_weights(alpha, beta)
    p = np.clip(prev, two_coin.EPS, 1 - two_coin.EPS)
    pg = p[d.group]
    g = gamma
    w = np.ones(N) if d.weight is None else d.weight
    # a compressed row stands for `count` identical items: likelihood sums take w (counts included), the
    # Gram of per-item scores takes count * (w / count)^2, and a row's score is one item's
    per_item = w if d.count is None else w / d.count
    # one "extended" row per item: its (item, code) entries for alpha, the same for beta, one for mu
    r = _extended_rows(d, ua, ub, pg)
    ptr, col, u, item_of, a_at, b_at, m_at, ext_len = r.ptr, r.col, r.u, r.item_of, r.a_at, r.b_at, r.m_at, r.ext_len
    s_scale = np.empty(ptr[-1])  # posterior weight turning d_r's pieces into the score s_r
    s_scale[a_at] = g[item_of]
    s_scale[b_at] = -(1 - g[item_of])
    s_scale[m_at] = 0.0
    sv = u * s_scale
    sv[m_at] = (g - pg) / (pg * (1 - pg))
    item_ext = np.repeat(np.arange(N), ext_len)
    if N * P <= _DENSE_MAX:
        # small problems: dense items x P matrices and BLAS
        flat = item_ext * P + col
        Ud = np.bincount(flat, weights=u, minlength=N * P).reshape(N, P)
        missing = Ud.T @ (Ud * (g * (1 - g) * w)[:, None])
        if gram:
            Sd = np.bincount(flat, weights=sv, minlength=N * P).reshape(N, P)
            StS = Sd.T @ (Sd * (w * per_item)[:, None])
    elif gram:
        StS, missing = _pair_grams(ptr, col, [(sv, w * per_item), (u, g * (1 - g) * w)], P)
    else:
        (missing,) = _pair_grams(ptr, col, [(u, g * (1 - g) * w)], P)
    if not gram:
        StS = np.full((P, P), np.nan)
    # conditional expected complete-data information (diagonal)
    H = np.diag(_complete_diagonal(d, alpha, beta, g, w, ia, ib, pg)) - missing
    # per-item scores as a sparse matrix (for influence values of single parameters)
    S = sp.csr_matrix((sv * per_item[item_ext], col, ptr), shape=(N, P))
    return ScoreInfo(S, H, free_parameters(alpha, beta, prev), StS)


def _complete_diagonal(d: two_coin.Design, alpha: FloatArray, beta: FloatArray, g: FloatArray, w: FloatArray,
                       ia: FloatArray, ib: FloatArray, pg: FloatArray) -> FloatArray:
    """The conditional expected complete-data information (diagonal, as its diagonal), with the pseudo-count
    prior's curvature."""
    gw = g * w
    onew = (1 - g) * w
    ga = np.asarray(d.AT @ gw)
    gb = np.asarray(d.AT @ onew)
    Da = (ga * ia)[0::2] + (ga * ia)[1::2]
    Db = (gb * ib)[0::2] + (gb * ib)[1::2]
    Dm = np.bincount(d.group, weights=gw / pg**2 + onew / (1 - pg) ** 2, minlength=d.n_groups)
    if has_prior(d.pseudo_count):  # the log Beta prior's curvature
        ca, cb = curvature(d.pseudo_count, alpha, beta)
        Da = Da + ca
        Db = Db + cb
    out: FloatArray = np.concatenate([Da, Db, Dm])
    return out


def information(d: two_coin.Design, alpha: FloatArray, beta: FloatArray, prev: FloatArray, gamma: FloatArray) -> FloatArray:
    """The observed information H of :func:`scores_and_information` alone, through sparse products.

    ``missing = U' diag(g (1 - g) w) U`` with ``U`` the items x P sparse matrix of the
    complete-data score differences ``d_r``: one sparse product, whose cost is the sum
    over items of their (2k + 1)^2 pairs, however many labelers there are. The EM's
    Newton polish (:func:`heroeval.stage_a.two_coin.run_em`) calls it once per step; the
    covariance keeps :func:`scores_and_information` (the same matrix to rounding).
    """
    J, G, N = d.n_labelers, d.n_groups, d.n_items
    P = 2 * J + G
    ua, ub, ia, ib = _code_weights(alpha, beta)
    p = np.clip(prev, two_coin.EPS, 1 - two_coin.EPS)
    pg = p[d.group]
    w = np.ones(N) if d.weight is None else d.weight
    r = _extended_rows(d, ua, ub, pg)
    U = sp.csr_matrix((r.u, r.col, r.ptr), shape=(N, P))
    g = gamma
    Uw = sp.csr_matrix((r.u * np.repeat(g * (1 - g) * w, r.ext_len), r.col, r.ptr), shape=(N, P))
    H: FloatArray = np.asarray((U.T @ Uw).toarray())
    np.negative(H, out=H)  # the diagonal minus the missing information, without a dense diagonal matrix
    H[np.diag_indices(P)] += _complete_diagonal(d, alpha, beta, g, w, ia, ib, pg)
    return H


def free_parameters(alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> npt.NDArray[np.bool_]:
    """Parameters not within BOUND_TOL of 0 or 1."""
    theta = np.concatenate([alpha, beta, prev])
    out: npt.NDArray[np.bool_] = np.minimum(theta, 1 - theta) > BOUND_TOL
    return out


_CHOLESKY_MIN = 500
"""From this many free parameters on, H is inverted through its Cholesky factor when it is positive definite."""


def inverse_of(H: FloatArray, free: npt.NDArray[np.bool_]) -> FloatArray:
    """H^-1 on the free parameters, zero rows/columns for boundary parameters.

    The pseudo-inverse (eigen-decomposition) is used for small matrices and
    whenever H is not positive definite; large positive definite ones go
    through a Cholesky factorisation, about ten times faster at 4,000
    parameters, and equal to the pseudo-inverse there to rounding.
    """
    P = H.shape[0]
    f = free
    Hinv = np.zeros((P, P))
    if f.any():
        Hff = H[np.ix_(f, f)]
        inv = None
        if int(f.sum()) >= _CHOLESKY_MIN:
            try:
                c = scipy.linalg.cho_factor(Hff, check_finite=False)
                inv = scipy.linalg.cho_solve(c, np.eye(Hff.shape[0]), check_finite=False)
            except np.linalg.LinAlgError:
                inv = None
        Hinv[np.ix_(f, f)] = np.linalg.pinv(Hff, hermitian=True) if inv is None else inv
    return Hinv


def inverse_information(si: ScoreInfo) -> FloatArray:
    """H^-1 on the free parameters, zero rows/columns for boundary parameters."""
    return inverse_of(si.info, si.free)


def sandwich_gram(si: ScoreInfo, Hinv: FloatArray) -> FloatArray:
    """sum_r IF(r) IF(r)' with IF(r) = H^-1 s_r: the sandwich covariance of theta-hat."""
    out: FloatArray = Hinv @ si.gram @ Hinv
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
