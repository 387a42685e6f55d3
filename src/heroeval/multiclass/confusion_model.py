"""K-class Dawid–Skene kernels: confusion structures, gold-anchored EM, scores and Louis information.

Pure NumPy/SciPy on int-coded arrays; no validation, no I/O.

Parameters
----------
Labeler j has a K x K confusion matrix ``pi[j, c, l] = P(label l | class c)``.
Three structures:

* ``"full"``: every row free, ``K (K - 1)`` parameters per labeler. For the
  information each row is parametrised by its entries other than a reference
  entry, the row's largest (``pi[c, ref] = 1 - sum of the others``). With
  K = 2 that is exactly the binary sensitivity/specificity parametrisation up
  to a sign (a linear map), so the influence values coincide.
* ``"symmetric"``: one accuracy ``a_j``; ``pi[c, c] = a_j`` and the errors
  spread evenly, ``pi[c, l] = (1 - a_j) / (K - 1)``.
* ``"ordinal"``: one sharpness ``t_j``; ``pi[c, l] ∝ exp(-t_j |l - c|)``
  (distance in class positions), t_j kept in [-5, 25].

Each history round g has a prevalence vector ``prev[g]`` on the simplex,
parametrised likewise by its entries other than the largest.

The observed-data score of an item (Fisher's identity) is
``s_r = sum_c w_rc u_rc`` with ``w_r`` the posterior over classes and ``u_rc``
the gradient of the complete-data log-likelihood at class c; the observed
information (Louis, 1982) is ``sum_r sum_c w_rc (-hess_rc) - sum_r
(sum_c w_rc u_rc u_rc' - s_r s_r')``. The first term is block diagonal (per
labeler, per round); the second is applied matrix-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from heroeval.core.squarem import Stop, squarem

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Structure = Literal["full", "symmetric", "ordinal"]
STRUCTURES = ("full", "symmetric", "ordinal")

EPS = 1e-9
"""Probabilities are kept in [EPS, 1 - EPS] (as the binary kernels do)."""
BOUND_TOL = 1e-6
"""Parameters this close to 0 or 1 (or an ordinal sharpness at its limits) get no influence."""
T_MIN, T_MAX = -5.0, 25.0
DENSE_MAX = 3000
"""Up to this many free parameters the information is formed and pseudo-inverted densely; beyond, CG."""


@dataclass(frozen=True, eq=False)
class Design:
    K: int
    J: int
    G: int
    N: int
    item_ptr: IntArray
    item_of: IntArray  # (n_ann,)
    lab: IntArray  # (n_ann,) labeler code
    lbl: IntArray  # (n_ann,) class code
    gold: IntArray  # (N,) class or -1
    group: IntArray  # (N,)
    lab_ind: sp.csr_matrix  # J x n_ann indicator
    code_ind: sp.csr_matrix  # J*K x n_ann indicator of (labeler, label)
    grp_ind: sp.csr_matrix  # G x N indicator

    @property
    def n_ann(self) -> int:
        return int(self.lab.shape[0])


def make_design(item_ptr: npt.ArrayLike, lab: npt.ArrayLike, lbl: npt.ArrayLike, gold: npt.ArrayLike,
                group: npt.ArrayLike, K: int, J: int, G: int) -> Design:
    ptr = np.asarray(item_ptr, dtype=np.int64)
    N = ptr.size - 1
    lab_a = np.asarray(lab, dtype=np.int64)
    lbl_a = np.asarray(lbl, dtype=np.int64)
    n = lab_a.size
    item_of = np.repeat(np.arange(N, dtype=np.int64), np.diff(ptr))
    cols = np.arange(n)
    one = np.ones(n)
    lab_ind = sp.csr_matrix((one, (lab_a, cols)), shape=(J, n))
    code_ind = sp.csr_matrix((one, (lab_a * K + lbl_a, cols)), shape=(J * K, n))
    grp = np.asarray(group, dtype=np.int64)
    grp_ind = sp.csr_matrix((np.ones(N), (grp, np.arange(N))), shape=(G, N))
    return Design(K, J, G, N, ptr, item_of, lab_a, lbl_a, np.asarray(gold, dtype=np.int64), grp, lab_ind, code_ind,
                  grp_ind)


def concat_designs(a: Design, b: Design, b_group_offset: int) -> Design:
    ptr = np.concatenate([a.item_ptr, a.item_ptr[-1] + b.item_ptr[1:]])
    return make_design(ptr, np.concatenate([a.lab, b.lab]), np.concatenate([a.lbl, b.lbl]),
                       np.concatenate([a.gold, b.gold]), np.concatenate([a.group, b.group + b_group_offset]),
                       a.K, a.J, a.G + b.G)


# ---------------------------------------------------------------------------
# Structures
# ---------------------------------------------------------------------------


def distance(K: int) -> FloatArray:
    i = np.arange(K, dtype=np.float64)
    out: FloatArray = np.abs(i[:, None] - i[None, :])
    return out


def conf_from_theta(structure: str, theta: FloatArray, K: int) -> FloatArray:
    """Confusion matrices (J, K, K) of a one-parameter structure."""
    J = theta.size
    if structure == "symmetric":
        a = np.clip(theta, EPS, 1 - EPS)
        pi = np.broadcast_to(((1 - a) / (K - 1))[:, None, None], (J, K, K)).copy()
        idx = np.arange(K)
        pi[:, idx, idx] = a[:, None]
        return pi
    if structure == "ordinal":
        d = distance(K)
        lo = -theta[:, None, None] * d[None]
        lo -= lo.max(axis=2, keepdims=True)
        e = np.exp(lo)
        out: FloatArray = np.clip(e / e.sum(axis=2, keepdims=True), EPS, 1 - EPS)
        return out
    raise ValueError(structure)


def m_step_labelers(structure: str, counts: FloatArray, theta: FloatArray | None, pseudo: float
                    ) -> tuple[FloatArray, FloatArray | None]:
    """Maximisers of the expected complete-data log-likelihood given soft counts (J, K, K)."""
    J, K, _ = counts.shape
    if structure == "full":
        n = counts + pseudo
        tot = n.sum(axis=2, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            pi = np.where(tot > 0, n / np.where(tot > 0, tot, 1.0), 1.0 / K)
        return np.clip(pi, EPS, 1 - EPS), None
    if structure == "symmetric":
        idx = np.arange(K)
        diag = counts[:, idx, idx].sum(axis=1)
        tot = counts.sum(axis=(1, 2))
        with np.errstate(invalid="ignore", divide="ignore"):
            a = np.where(tot + pseudo > 0, (diag + pseudo) / (tot + 2 * pseudo), 1.0 / K)
        a = np.clip(a, EPS, 1 - EPS)
        return conf_from_theta("symmetric", a, K), a
    # ordinal: Newton on each labeler's concave 1-D problem
    d = distance(K)
    t = np.zeros(J) if theta is None else theta.copy()
    row = counts.sum(axis=2)  # (J, K)
    sd = (counts * d[None]).sum(axis=(1, 2))
    for _ in range(50):
        pi = conf_from_theta("ordinal", t, K)
        m = (pi * d[None]).sum(axis=2)
        v = (pi * d[None] ** 2).sum(axis=2) - m**2
        grad = (row * m).sum(axis=1) - sd
        hess = (row * v).sum(axis=1)
        step = np.where(hess > 1e-12, grad / np.maximum(hess, 1e-12), 0.0)
        t = np.clip(t + np.clip(step, -5, 5), T_MIN, T_MAX)
        if np.max(np.abs(step)) < 1e-13:
            break
    return conf_from_theta("ordinal", t, K), t


def n_local(structure: str, K: int) -> int:
    return K * (K - 1) if structure == "full" else 1


def row_refs(pi: FloatArray) -> IntArray:
    """Reference entry of each row: its largest (first on ties)."""
    out: IntArray = np.argmax(pi, axis=-1).astype(np.int64)
    return out


def _nonref_cols(ref: IntArray, K: int) -> IntArray:
    """(…, K-1) the columns other than the reference, in increasing order."""
    base = np.arange(K - 1)
    out: IntArray = base + (base >= ref[..., None])
    return out


def derivs(structure: str, pi: FloatArray, theta: FloatArray | None) -> FloatArray:
    """D[j, c, l, :] = d log pi[j, c, l] / d (labeler j's parameters): (J, K, K, q)."""
    J, K, _ = pi.shape
    q = n_local(structure, K)
    D = np.zeros((J, K, K, q))
    if structure == "full":
        ref = row_refs(pi)  # (J, K)
        cols = _nonref_cols(ref, K)  # (J, K, K-1)
        for c in range(K):
            for m in range(K - 1):
                p = c * (K - 1) + m
                col = cols[:, c, m]
                D[np.arange(J), c, col, p] = 1.0 / pi[np.arange(J), c, col]
                D[np.arange(J), c, ref[:, c], p] = -1.0 / pi[np.arange(J), c, ref[:, c]]
        return D
    if structure == "symmetric":
        a = pi[:, 0, 0]
        D[:, :, :, 0] = (-1.0 / (1 - a))[:, None, None]
        idx = np.arange(K)
        D[:, idx, idx, 0] = (1.0 / a)[:, None]
        return D
    d = distance(K)
    m = (pi * d[None]).sum(axis=2)  # (J, K)
    D[:, :, :, 0] = -d[None] + m[:, :, None]
    return D


def complete_info(structure: str, pi: FloatArray, counts: FloatArray, pseudo: float) -> FloatArray:
    """sum_{c,l} n[j,c,l] (-d^2 log pi[j,c,l]) (+ prior curvature): (J, q, q)."""
    J, K, _ = pi.shape
    q = n_local(structure, K)
    M = np.zeros((J, q, q))
    if structure == "full":
        n = counts + pseudo
        ref = row_refs(pi)
        cols = _nonref_cols(ref, K)
        jj = np.arange(J)
        for c in range(K):
            sl = slice(c * (K - 1), (c + 1) * (K - 1))
            pr = pi[jj, c, ref[:, c]]
            nr = n[jj, c, ref[:, c]]
            M[:, sl, sl] += (nr / pr**2)[:, None, None]
            for m in range(K - 1):
                col = cols[:, c, m]
                M[:, c * (K - 1) + m, c * (K - 1) + m] += n[jj, c, col] / pi[jj, c, col] ** 2
        return M
    if structure == "symmetric":
        a = pi[:, 0, 0]
        idx = np.arange(K)
        diag = counts[:, idx, idx].sum(axis=1)
        off = counts.sum(axis=(1, 2)) - diag
        M[:, 0, 0] = (diag + pseudo) / a**2 + (off + pseudo) / (1 - a) ** 2
        return M
    d = distance(K)
    m = (pi * d[None]).sum(axis=2)
    v = (pi * d[None] ** 2).sum(axis=2) - m**2
    M[:, 0, 0] = (counts.sum(axis=2) * v).sum(axis=1)
    return M


def free_labeler_params(structure: str, pi: FloatArray, theta: FloatArray | None, counts: FloatArray,
                        pseudo: float) -> npt.NDArray[np.bool_]:
    """(J, q) mask of parameters not on the boundary (and informed by some label)."""
    J, K, _ = pi.shape
    if structure == "full":
        ref = row_refs(pi)
        cols = _nonref_cols(ref, K)
        vals = np.take_along_axis(pi, cols, axis=2)  # (J, K, K-1)
        f = np.minimum(vals, 1 - vals) > BOUND_TOL
        if pseudo == 0:
            f &= (counts.sum(axis=2) > 1e-12)[:, :, None]
        out: npt.NDArray[np.bool_] = f.reshape(J, K * (K - 1))
        return out
    tot = counts.sum(axis=(1, 2)) > 1e-12
    if structure == "symmetric":
        a = pi[:, 0, 0]
        fs: npt.NDArray[np.bool_] = ((np.minimum(a, 1 - a) > BOUND_TOL) & (tot | (pseudo > 0)))[:, None]
        return fs
    assert theta is not None
    fo: npt.NDArray[np.bool_] = ((theta > T_MIN + BOUND_TOL) & (theta < T_MAX - BOUND_TOL) & tot)[:, None]
    return fo


def prev_derivs(prev: FloatArray) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Dp[g, c, :] = d log prev[g, c] / d (round g's K-1 parameters), and their free mask."""
    G, K = prev.shape
    ref = row_refs(prev)
    cols = _nonref_cols(ref, K)
    Dp = np.zeros((G, K, K - 1))
    gg = np.arange(G)
    for m in range(K - 1):
        Dp[gg, cols[:, m], m] = 1.0 / prev[gg, cols[:, m]]
        Dp[gg, ref, m] = -1.0 / prev[gg, ref]
    vals = np.take_along_axis(prev, cols, axis=1)
    return Dp, np.minimum(vals, 1 - vals) > BOUND_TOL


def prev_info(prev: FloatArray, W: FloatArray) -> FloatArray:
    """sum_c W[g, c] (-d^2 log prev[g, c]): (G, K-1, K-1)."""
    G, K = prev.shape
    ref = row_refs(prev)
    cols = _nonref_cols(ref, K)
    gg = np.arange(G)
    M = np.zeros((G, K - 1, K - 1))
    M += (W[gg, ref] / prev[gg, ref] ** 2)[:, None, None]
    for m in range(K - 1):
        M[:, m, m] += W[gg, cols[:, m]] / prev[gg, cols[:, m]] ** 2
    return M


# ---------------------------------------------------------------------------
# E-step and EM
# ---------------------------------------------------------------------------


def item_loglik(d: Design, logpi: FloatArray) -> FloatArray:
    """lambda[r, c] = sum of log pi[j, c, l] over item r's labels: (N, K)."""
    A = logpi[d.lab, :, d.lbl]  # (n_ann, K)
    if A.shape[0] == 0:
        return np.zeros((d.N, d.K))
    out: FloatArray = np.add.reduceat(A, d.item_ptr[:-1], axis=0)
    return out


def e_step(d: Design, pi: FloatArray, prev: FloatArray) -> tuple[FloatArray, float]:
    """Posteriors (N, K) (gold items one-hot) and the observed-data log-likelihood."""
    lam = item_loglik(d, np.log(pi))
    eta = lam + np.log(prev)[d.group]
    mx = eta.max(axis=1, keepdims=True)
    z = np.exp(eta - mx)
    s = z.sum(axis=1, keepdims=True)
    w = z / s
    lse = (mx + np.log(s))[:, 0]
    g = d.gold >= 0
    ll_items = lse.copy()
    if g.any():
        gi = np.flatnonzero(g)
        ll_items[gi] = eta[gi, d.gold[gi]]
        w[gi] = 0.0
        w[gi, d.gold[gi]] = 1.0
    return w, float(ll_items.sum())


def soft_counts(d: Design, w: FloatArray) -> FloatArray:
    """n[j, c, l] = sum over labeler j's labels l of the item's posterior of class c: (J, K, K)."""
    S = np.asarray(d.code_ind @ w[d.item_of])  # (J*K_l, K_c)
    out: FloatArray = S.reshape(d.J, d.K, d.K).transpose(0, 2, 1)
    return out


def m_step_prev(d: Design, w: FloatArray) -> FloatArray:
    W = np.asarray(d.grp_ind @ w)
    size = np.maximum(W.sum(axis=1, keepdims=True), 1e-300)
    out: FloatArray = np.clip(W / size, EPS, 1 - EPS)
    return out


@dataclass(frozen=True)
class Fit:
    pi: FloatArray  # (J, K, K)
    theta: FloatArray | None  # (J,) for one-parameter structures
    prev: FloatArray  # (G, K)
    w: FloatArray  # (N, K)
    loglik: float  # observed-data log-likelihood (+ log prior with a pseudo-count)
    n_iter: int
    converged: bool
    max_change: float


def log_prior(structure: str, pi: FloatArray, pseudo: float) -> float:
    if pseudo <= 0:
        return 0.0
    if structure == "full":
        return pseudo * float(np.log(pi).sum())
    if structure == "symmetric":
        a = pi[:, 0, 0]
        return pseudo * float((np.log(a) + np.log1p(-a)).sum())
    return 0.0


def _to_state(structure: str, x: FloatArray, J: int, K: int, G: int) -> tuple[FloatArray, FloatArray | None, FloatArray]:
    """Map the unconstrained vector (log rows / logit accuracy / sharpness, log prevalences) to probabilities."""
    nl = J * K * K if structure == "full" else J
    xl, xp = x[:nl], x[nl:].reshape(G, K)
    theta: FloatArray | None = None
    if structure == "full":
        lp = xl.reshape(J, K, K)
        lp = lp - lp.max(axis=2, keepdims=True)
        e = np.exp(lp)
        pi = np.clip(e / e.sum(axis=2, keepdims=True), EPS, 1 - EPS)
    elif structure == "symmetric":
        theta = np.clip(1.0 / (1.0 + np.exp(-xl)), EPS, 1 - EPS)
        pi = conf_from_theta("symmetric", theta, K)
    else:
        theta = np.clip(xl, T_MIN, T_MAX)
        pi = conf_from_theta("ordinal", theta, K)
    xp = xp - xp.max(axis=1, keepdims=True)
    ep = np.exp(xp)
    prev = np.clip(ep / ep.sum(axis=1, keepdims=True), EPS, 1 - EPS)
    return pi, theta, prev


def _to_vec(structure: str, pi: FloatArray, theta: FloatArray | None, prev: FloatArray) -> FloatArray:
    if structure == "full":
        xl = np.log(pi).ravel()
    elif structure == "symmetric":
        assert theta is not None
        xl = np.log(theta) - np.log1p(-theta)
    else:
        assert theta is not None
        xl = theta.copy()
    return np.concatenate([xl, np.log(prev).ravel()])


def run_em(d: Design, structure: str, pi0: FloatArray, theta0: FloatArray | None, prev0: FloatArray, *,
           tol: float, max_iter: int, pseudo: float = 0.0, accelerate: bool = True) -> Fit:
    """EM, SQUAREM-accelerated by default (Varadhan and Roland, 2008) with a monotone safeguard.

    The extrapolation works on an unconstrained vector (log confusion rows,
    logit accuracy or sharpness, log prevalences; mapped back by softmax).
    Stops when one plain EM step moves no probability (confusion entry or
    prevalence) by more than ``tol``; ``n_iter`` counts EM map evaluations.
    """
    J, K, G = d.J, d.K, d.G

    def em_map(x: FloatArray, need_objective: bool) -> tuple[FloatArray, float]:
        """One EM step from ``x``, and the log posterior at ``x`` (always computed: the E step gives it)."""
        pi, theta, prev = _to_state(structure, x, J, K, G)
        w, ll = e_step(d, pi, prev)
        pi2, theta2 = m_step_labelers(structure, soft_counts(d, w), theta if theta is not None else theta0, pseudo)
        return _to_vec(structure, pi2, theta2, m_step_prev(d, w)), ll + log_prior(structure, pi, pseudo)

    def probs_of(x: FloatArray) -> FloatArray:
        pi, _, prev = _to_state(structure, x, J, K, G)
        return np.concatenate([pi.ravel(), prev.ravel()])

    res = squarem(em_map, _to_vec(structure, np.clip(pi0, EPS, 1 - EPS), theta0, np.clip(prev0, EPS, 1 - EPS)),
                  distance=lambda x1, x0: float(np.max(np.abs(probs_of(x1) - probs_of(x0)))),
                  stop=Stop(tol, max_iter), accelerate=accelerate)
    x, n_eval, converged, change = res.x, res.n_eval, res.converged, res.change
    pi, theta, prev = _to_state(structure, x, J, K, G)
    w, ll = e_step(d, pi, prev)
    return Fit(pi, theta, prev, w, ll + log_prior(structure, pi, pseudo), n_eval, converged, change)


def run_unsupervised(d: Design, structure: str = "full", *, tol: float = 1e-8, max_iter: int = 10_000) -> Fit:
    """Dawid–Skene EM without gold, from the soft plurality vote (each item's label shares), which fixes the
    labelling of the classes; one prevalence per group of ``d``."""
    soft = np.zeros((d.N, d.K))
    np.add.at(soft, (d.item_of, d.lbl), 1.0)
    soft /= np.maximum(soft.sum(axis=1, keepdims=True), 1.0)
    pi0, th0 = m_step_labelers(structure, soft_counts(d, soft), None, 0.0)
    return run_em(d, structure, pi0, th0, m_step_prev(d, soft), tol=tol, max_iter=max_iter)


# ---------------------------------------------------------------------------
# Scores, information and solves
# ---------------------------------------------------------------------------


class Information:
    """Per-item scores and the observed information of a fit, with ``H^+`` solves.

    Parameter order: labeler blocks ``j * q + k`` (q per labeler), then
    round blocks ``J q + g (K - 1) + m``.
    """

    def __init__(self, d: Design, structure: str, fit: Fit, pseudo: float = 0.0) -> None:
        K, J, G = d.K, d.J, d.G
        self.d, self.structure, self.fit = d, structure, fit
        q = self.q = n_local(structure, K)
        self.P = J * q + G * (K - 1)
        w = fit.w
        counts = soft_counts(d, w)
        self.D = derivs(structure, fit.pi, fit.theta)  # (J, K, K, q)
        self.Da = self.D[d.lab, :, d.lbl, :]  # (n_ann, K, q)
        self.M = complete_info(structure, fit.pi, counts, pseudo)
        self.Dp, fp = prev_derivs(fit.prev)
        W = np.asarray(d.grp_ind @ w)
        self.Mp = prev_info(fit.prev, W)
        fl = free_labeler_params(structure, fit.pi, fit.theta, counts, pseudo)
        self.free = np.concatenate([fl.ravel(), fp.ravel()])
        # per-item scores, sparse (N x P)
        vals_l = np.einsum("ac,acq->aq", w[d.item_of], self.Da)
        rows_l = np.repeat(d.item_of, q)
        cols_l = (d.lab[:, None] * q + np.arange(q)[None]).ravel()
        vals_p = np.einsum("nc,ncm->nm", w, self.Dp[d.group])
        rows_p = np.repeat(np.arange(d.N), K - 1)
        cols_p = (J * q + d.group[:, None] * (K - 1) + np.arange(K - 1)[None]).ravel()
        self.S = sp.csr_matrix(
            (np.concatenate([vals_l.ravel(), vals_p.ravel()]), (np.concatenate([rows_l, rows_p]),
                                                               np.concatenate([cols_l, cols_p]))),
            shape=(d.N, self.P))
        self.S.sum_duplicates()
        self._Hinv: FloatArray | None = None

    def matvec(self, V: FloatArray) -> FloatArray:
        """H @ V for V of shape (P, m)."""
        d, q, K = self.d, self.q, self.d.K
        m = V.shape[1]
        Jq = d.J * q
        Vl = V[:Jq].reshape(d.J, q, m)
        Vp = V[Jq:].reshape(d.G, K - 1, m)
        out_l = np.einsum("jqr,jrm->jqm", self.M, Vl)
        out_p = np.einsum("gqr,grm->gqm", self.Mp, Vp)
        w = self.fit.w
        t = np.einsum("acq,aqm->acm", self.Da, Vl[d.lab])
        T = np.add.reduceat(t, d.item_ptr[:-1], axis=0) if t.shape[0] else np.zeros((d.N, K, m))
        T = T + np.einsum("gcq,gqm->gcm", self.Dp, Vp)[d.group]
        Sv = np.einsum("nc,ncm->nm", w, T)
        Y = w[:, :, None] * (T - Sv[:, None, :])
        Z = np.einsum("acq,acm->aqm", self.Da, Y[d.item_of]).reshape(d.n_ann, q * m)
        miss_l = np.asarray(self.d.lab_ind @ Z).reshape(d.J, q, m)
        Zp = np.einsum("ncq,ncm->nqm", self.Dp[d.group], Y).reshape(d.N, (K - 1) * m)
        miss_p = np.asarray(self.d.grp_ind @ Zp).reshape(d.G, K - 1, m)
        out: FloatArray = np.concatenate([(out_l - miss_l).reshape(Jq, m), (out_p - miss_p).reshape(-1, m)])
        return out

    def dense_free(self) -> FloatArray:
        """H restricted to the free parameters, formed densely from sparse per-class score pieces.

        ``H = blockdiag(M) - sum_c U_c' diag(w_c) U_c + S' S`` where row r of
        ``U_c`` is ``u_rc`` (the complete-data score at class c).
        """
        d, q, K = self.d, self.q, self.d.K
        f = np.flatnonzero(self.free)
        newcol = np.full(self.P, -1, dtype=np.int64)
        newcol[f] = np.arange(f.size)
        Pf = f.size
        rows_l = np.repeat(d.item_of, q)
        cols_l = newcol[(d.lab[:, None] * q + np.arange(q)[None]).ravel()]
        rows_p = np.repeat(np.arange(d.N), K - 1)
        cols_p = newcol[(d.J * q + d.group[:, None] * (K - 1) + np.arange(K - 1)[None]).ravel()]
        rows = np.concatenate([rows_l, rows_p])
        cols = np.concatenate([cols_l, cols_p])
        keep = cols >= 0
        H = np.zeros((Pf, Pf))
        w = self.fit.w
        for c in range(K):
            vals = np.concatenate([self.Da[:, c, :].ravel(), self.Dp[d.group, c, :].ravel()])
            U = sp.csr_matrix((vals[keep], (rows[keep], cols[keep])), shape=(d.N, Pf))
            H -= (U.T @ sp.diags(w[:, c]) @ U).toarray()
        Sf = self.S[:, f]
        H += (Sf.T @ Sf).toarray()
        Mb = sp.block_diag([*self.M, *self.Mp], format="csr")
        H += Mb[f][:, f].toarray()
        out: FloatArray = 0.5 * (H + H.T)
        return out

    def hinv(self) -> FloatArray | None:
        """Dense H^+ on the free parameters (Pf x Pf) when there are at most DENSE_MAX of them, else None."""
        if self._Hinv is None and int(self.free.sum()) <= DENSE_MAX:
            hi = np.linalg.pinv(self.dense_free(), hermitian=True) if self.free.any() else np.zeros((0, 0))
            self._Hinv = np.asarray(hi, dtype=np.float64)
        return self._Hinv

    def solve(self, C: FloatArray) -> FloatArray:
        """X = H^+ C for C of shape (P, k) (rows of non-free parameters ignored, zero in X)."""
        f = self.free
        fi = np.flatnonzero(f)
        X = np.zeros((self.P, C.shape[1]))
        Hi = self.hinv()
        if Hi is not None:
            X[fi] = Hi @ C[fi]
            return X
        Mdiag = np.concatenate([np.einsum("jqq->jq", self.M).ravel(), np.einsum("gqq->gq", self.Mp).ravel()])
        diag = np.maximum(Mdiag, 1e-12)

        def mv(x: Any) -> Any:
            v = np.zeros((self.P, 1))
            v[fi, 0] = np.asarray(x).ravel()
            return self.matvec(v)[fi, 0]

        A = spla.LinearOperator((fi.size, fi.size), matvec=mv, dtype=np.float64)
        Pre = spla.LinearOperator((fi.size, fi.size), matvec=lambda x: np.asarray(x).ravel() / diag[fi],
                                  dtype=np.float64)
        for k in range(C.shape[1]):
            b = C[fi, k]
            if not np.any(b):
                continue
            x, _info = spla.cg(A, b, rtol=1e-10, atol=0.0, maxiter=5000, M=Pre)
            X[fi, k] = x
        return X

    def item_influence(self, C: FloatArray) -> FloatArray:
        """Per-item values s_r' H^+ C: (N, k); their Gram matrix is the sandwich covariance of C' theta-hat."""
        out: FloatArray = np.asarray(self.S @ self.solve(C))
        return out

    def covariance(self) -> FloatArray | None:
        """Sandwich covariance H^+ (sum_r s_r s_r') H^+ of all P parameters (None beyond DENSE_MAX)."""
        if self.P > DENSE_MAX:
            return None
        Hi = self.hinv()
        if Hi is None:
            return None
        fi = np.flatnonzero(self.free)
        SH = np.asarray(self.S[:, fi] @ Hi)
        V = np.zeros((self.P, self.P))
        V[np.ix_(fi, fi)] = SH.T @ SH
        out: FloatArray = 0.5 * (V + V.T)
        return out


def solve_simplex(lam: FloatArray, max_newton: int = 200) -> tuple[FloatArray, str]:
    """Maximise ``sum_i log sum_c p_c exp(lam[i, c])`` over the simplex.

    EM warm start, then Newton on the active face (components > 0) with the
    largest component as reference; a component that would turn negative is
    set to 0 and dropped; dropped components come back if the KKT condition
    (``mean_i f_ic / D_i <= 1``) fails. The problem is concave, so the
    maximiser found is global (unique when the item likelihood vectors span
    the simplex). Returns ``(p, status)`` with status ``"unidentified"`` (NaN)
    when no item's labels distinguish any classes.
    """
    n, K = lam.shape
    if n == 0 or not np.any(np.ptp(lam, axis=1) > 1e-12):
        return np.full(K, np.nan), "unidentified"
    f = np.exp(lam - lam.max(axis=1, keepdims=True))
    p = np.full(K, 1.0 / K)
    for _ in range(300):
        r = f * p
        r /= r.sum(axis=1, keepdims=True)
        p_new = r.mean(axis=0)
        if np.max(np.abs(p_new - p)) < 1e-10:
            p = p_new
            break
        p = p_new
    active = p > 1e-7
    p = np.where(active, p, 0.0)
    p /= p.sum()
    for _outer in range(K + 2):
        for _ in range(max_newton):
            A = np.flatnonzero(active)
            if A.size == 1:
                break
            e = A[np.argmax(p[A])]
            o = A[A != e]
            D = f @ p
            psi = (f[:, o] - f[:, [e]]) / D[:, None]
            g = psi.mean(axis=0)
            H = psi.T @ psi / n
            try:
                step = np.linalg.solve(H, g)
            except np.linalg.LinAlgError:
                step = np.linalg.lstsq(H, g, rcond=None)[0]
            full = np.zeros(K)
            full[o] = step
            full[e] = -step.sum()
            t = 1.0
            neg = full < 0
            if neg.any():
                ratio = p[neg] / -full[neg]
                t = min(1.0, float(ratio.min()))
            ll0 = float(np.log(D).sum())
            while t > 1e-12:
                p_try = np.maximum(p + t * full, 0.0)
                D_try = f @ p_try
                if np.all(D_try > 0) and float(np.log(D_try).sum()) >= ll0 - 1e-12 * abs(ll0):
                    break
                t /= 2
            p = np.maximum(p + t * full, 0.0)
            hit = active & (p <= 1e-15)
            if hit.any():
                active &= ~hit
                p[~active] = 0.0
            p /= p.sum()
            if np.max(np.abs(t * full)) < 1e-15 or (np.max(np.abs(g)) < 1e-15 and not hit.any()):
                break
        D = f @ p
        grad = (f / D[:, None]).mean(axis=0)
        viol = ~active & (grad > 1 + 1e-10)
        if not viol.any():
            break
        k = int(np.argmax(np.where(viol, grad, -np.inf)))
        active[k] = True
        p[k] = 1e-3
        p /= p.sum()
    return p, "ok"
