"""Plain dense reference implementation of the HERO estimators.

Written independently of the package's internals (from ``HERO-MATH.md`` and
the public docstrings only), so the package can be checked against it.

Data layout: ``Z`` is a dense float matrix of shape (items, labelers) with
``np.nan`` where the labeler did not label the item; ``gold`` is a float
vector with ``np.nan`` for items without gold; ``rounds`` an int vector of
round codes 0..G-1. Everything is deliberately simple: explicit loops over
labelers, plain EM (no acceleration), bisection for the score equation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EM_TOL = 1e-12
EM_MAX_ITER = 100_000
ROOT_TOL = 1e-13
# EM keeps every probability parameter in [FLOOR, 1 - FLOOR]. Without a floor
# a parameter that reaches exactly 0 or 1 is absorbing (gamma becomes exactly 0
# or 1 on the items that contradict it, so EM can never leave the boundary,
# even when new data, as in hero_joint, makes an interior value better); and an
# item contradicting two "perfect" labelers has l1 = l0 = 0, so psi = 0/0.
# The value 1e-9 is not derived from the math: it is the floor the package
# was observed to use (1 - alpha = 1.0000000827e-9 = 1 - (1 - 1e-9) in float).
# When the history pushes a labeler to the boundary, HERO-1 depends on this
# constant (it is discontinuous at alpha = 1), so reference and package must
# share it for a 1e-6 comparison to mean anything. Interior fits never touch it.
FLOOR = 1e-9


# --------------------------------------------------------------------------- likelihood pieces
def _xlogy_masked(mask: np.ndarray, p: float) -> np.ndarray:
    """``log(p)`` where ``mask`` is true, 0 elsewhere (no 0 * -inf = nan)."""
    with np.errstate(divide="ignore"):
        lp = np.log(p)
    return np.where(mask, lp, 0.0)


def log_lik_parts(Z: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """lambda_i(1) and lambda_i(0) for every row of Z (log P(labels | Y=1), Y=0)."""
    n, J = Z.shape
    lam1 = np.zeros(n)
    lam0 = np.zeros(n)
    for j in range(J):
        one = Z[:, j] == 1
        zero = Z[:, j] == 0
        lam1 += _xlogy_masked(one, alpha[j]) + _xlogy_masked(zero, 1.0 - alpha[j])
        lam0 += _xlogy_masked(one, 1.0 - beta[j]) + _xlogy_masked(zero, beta[j])
    return lam1, lam0


def posterior(lam1: np.ndarray, lam0: np.ndarray, prev: np.ndarray) -> np.ndarray:
    """P(Y=1 | labels) for prior ``prev`` (one value per row), in log space."""
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(prev) + lam1
        b = np.log1p(-prev) + lam0
        m = np.maximum(a, b)
        return np.exp(a - m) / (np.exp(a - m) + np.exp(b - m))


# --------------------------------------------------------------------------- EM
def m_step(Z: np.ndarray, gamma: np.ndarray, rounds: np.ndarray, G: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    J = Z.shape[1]
    alpha = np.empty(J)
    beta = np.empty(J)
    for j in range(J):
        has = ~np.isnan(Z[:, j])
        z = Z[has, j]
        g = gamma[has]
        alpha[j] = np.sum(g * z) / np.sum(g)
        beta[j] = np.sum((1.0 - g) * (1.0 - z)) / np.sum(1.0 - g)
    prev = np.array([gamma[rounds == k].mean() for k in range(G)])
    return alpha, beta, prev


def e_step(
    Z: np.ndarray,
    gold: np.ndarray,
    rounds: np.ndarray,
    alpha: np.ndarray,
    beta: np.ndarray,
    prev: np.ndarray,
) -> np.ndarray:
    lam1, lam0 = log_lik_parts(Z, alpha, beta)
    gamma = posterior(lam1, lam0, prev[rounds])
    isg = ~np.isnan(gold)
    gamma[isg] = gold[isg]
    return gamma


@dataclass
class EMResult:
    alpha: np.ndarray
    beta: np.ndarray
    prev: np.ndarray
    n_iter: int
    converged: bool


def run_em(
    Z: np.ndarray,
    gold: np.ndarray,
    rounds: np.ndarray,
    alpha: np.ndarray,
    beta: np.ndarray,
    prev: np.ndarray,
    tol: float = EM_TOL,
    max_iter: int = EM_MAX_ITER,
    floor: float = FLOOR,
) -> EMResult:
    """Plain EM for the two-coin model, one prevalence per round, gold fixed.

    Every parameter is kept in ``[floor, 1 - floor]`` after each M-step
    (``floor=0`` for the unguarded EM).
    """
    G = len(prev)
    alpha, beta, prev = (np.asarray(x, dtype=float).copy() for x in (alpha, beta, prev))
    for it in range(1, max_iter + 1):
        gamma = e_step(Z, gold, rounds, alpha, beta, prev)
        a2, b2, p2 = (np.clip(x, floor, 1.0 - floor) for x in m_step(Z, gamma, rounds, G))
        change = max(np.max(np.abs(a2 - alpha)), np.max(np.abs(b2 - beta)), np.max(np.abs(p2 - prev)))
        alpha, beta, prev = a2, b2, p2
        if change < tol:
            return EMResult(alpha, beta, prev, it, True)
    return EMResult(alpha, beta, prev, max_iter, False)


def gold_confusion(Z: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-labeler (tp, fn, tn, fp) counted on the gold items."""
    J = Z.shape[1]
    tp, fn, tn, fp = (np.zeros(J, dtype=np.int64) for _ in range(4))
    for i in range(Z.shape[0]):
        if np.isnan(gold[i]):
            continue
        for j in range(J):
            z = Z[i, j]
            if np.isnan(z):
                continue
            if gold[i] == 1:
                tp[j] += z == 1
                fn[j] += z == 0
            else:
                tn[j] += z == 0
                fp[j] += z == 1
    return tp, fn, tn, fp


def starting_values(
    Z: np.ndarray, gold: np.ndarray, rounds: np.ndarray, G: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The documented starting values of ``heroeval.stage_a.gold.initial_values``."""
    tp, fn, tn, fp = gold_confusion(Z, gold)
    a_pool = tp.sum() / (tp.sum() + fn.sum()) if tp.sum() + fn.sum() > 0 else 0.7
    b_pool = tn.sum() / (tn.sum() + fp.sum()) if tn.sum() + fp.sum() > 0 else 0.7
    alpha = (tp + a_pool) / (tp + fn + 1.0)
    beta = (tn + b_pool) / (tn + fp + 1.0)
    isg = ~np.isnan(gold)
    pooled = gold[isg].mean() if isg.any() else 0.5
    prev = np.empty(G)
    for k in range(G):
        sel = isg & (rounds == k)
        prev[k] = gold[sel].mean() if sel.any() else pooled
    return alpha, beta, np.clip(prev, 0.01, 0.99)


def calibrate(Z: np.ndarray, gold: np.ndarray, rounds: np.ndarray, G: int) -> EMResult:
    """Stage A: gold-anchored EM from the documented starting values."""
    a0, b0, p0 = starting_values(Z, gold, rounds, G)
    return run_em(Z, gold, rounds, a0, b0, p0)


# --------------------------------------------------------------------------- score equation
def llr(Z: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    lam1, lam0 = log_lik_parts(Z, alpha, beta)
    with np.errstate(invalid="ignore"):
        return lam1 - lam0


def psi(L: np.ndarray, mu: float) -> np.ndarray:
    """Per-item score (l1 - l0) / (mu l1 + (1 - mu) l0), written with L = log(l1/l0)."""
    out = np.empty_like(L)
    pos = L > 0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        e = np.exp(-L[pos])
        out[pos] = (1.0 - e) / (mu + (1.0 - mu) * e)
        e = np.exp(L[~pos])
        out[~pos] = (e - 1.0) / (mu * e + 1.0 - mu)
    return out


def solve_score(L: np.ndarray, shift: float = 0.0) -> tuple[float, str]:
    """Root of mean_i psi_i(mu) = shift on [0, 1] by bisection (the mean is decreasing)."""

    def f(mu: float) -> float:
        return float(np.mean(psi(L, mu))) - shift

    if f(0.0) <= 0:
        return 0.0, "boundary_0"
    if f(1.0) >= 0:
        return 1.0, "boundary_1"
    lo, hi = 0.0, 1.0
    while hi - lo > ROOT_TOL:
        mid = 0.5 * (lo + hi)
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi), "ok"


def hero1(Zc: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> tuple[float, str]:
    return solve_score(llr(Zc, alpha, beta))


def gold_proportion(Zc: np.ndarray, Zh: np.ndarray, gold_h: np.ndarray) -> tuple[float, str]:
    tp, fn, tn, fp = gold_confusion(Zh, gold_h)
    alpha = (tp + 1.0) / (tp + fn + 2.0)
    beta = (tn + 1.0) / (tn + fp + 2.0)
    return hero1(Zc, alpha, beta)


def hero2(
    Zc: np.ndarray, Xc: np.ndarray, alpha: np.ndarray, beta: np.ndarray, m_X: np.ndarray
) -> tuple[float, str, np.ndarray]:
    L = llr(Zc, alpha, beta)
    mu1, _ = solve_score(L)
    p = psi(L, mu1)
    n = Xc.shape[0]
    xbar = Xc.mean(axis=0)
    D = Xc - xbar
    Sxx = D.T @ D / n
    Sxp = D.T @ p / n
    gamma = np.linalg.solve(Sxx, Sxp)
    shift = float(gamma @ (xbar - m_X))
    mu2, status = solve_score(L, shift)
    return mu2, status, gamma


# --------------------------------------------------------------------------- baselines
def majority_vote(Zc: np.ndarray) -> float:
    votes = []
    for i in range(Zc.shape[0]):
        z = Zc[i][~np.isnan(Zc[i])]
        ones, zeros = np.sum(z == 1), np.sum(z == 0)
        votes.append(1.0 if ones > zeros else 0.0 if ones < zeros else 0.5)
    return float(np.mean(votes))


def dawid_skene(Zc: np.ndarray) -> EMResult:
    """Unsupervised two-coin EM on one round, from the soft majority vote."""
    Z = Zc[:, ~np.all(np.isnan(Zc), axis=0)]  # labelers present in this round
    n = Z.shape[0]
    rounds = np.zeros(n, dtype=int)
    share = np.nanmean(Z, axis=1)
    a0, b0, p0 = m_step(Z, share, rounds, 1)
    return run_em(Z, np.full(n, np.nan), rounds, a0, b0, p0)


def hero_joint(
    Zh: np.ndarray,
    gold_h: np.ndarray,
    rounds_h: np.ndarray,
    G: int,
    Zc: np.ndarray,
    cal: EMResult,
) -> EMResult:
    """Stage A on history + the current round (its own prevalence, no gold).

    Started from the reference calibration and the reference HERO-1 estimate.
    The current round's prevalence is ``result.prev[G]``.
    """
    Z = np.vstack([Zh, Zc])
    gold = np.concatenate([gold_h, np.full(Zc.shape[0], np.nan)])
    rounds = np.concatenate([rounds_h, np.full(Zc.shape[0], G)])
    mu1, _ = hero1(Zc, cal.alpha, cal.beta)
    p0 = np.append(cal.prev, np.clip(mu1, 0.01, 0.99))
    return run_em(Z, gold, rounds, cal.alpha, cal.beta, p0)
