"""The HERO score equation in mu, given per-item log-likelihood ratios."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.optimize import brentq

FloatArray = npt.NDArray[np.float64]


def psi(mu: float, L: FloatArray) -> FloatArray:
    """Score contributions psi_i(mu) = (e^L - 1) / (mu e^L + 1 - mu), stably.

    For L > 0 the form (1 - e^-L) / (mu + (1 - mu) e^-L) is used, for L <= 0
    the form (e^L - 1) / (mu e^L + 1 - mu); neither overflows for mu in (0, 1].
    At mu = 0 and L > 0 the value is e^L - 1, which may be +inf (a valid sign).
    """
    out = np.empty_like(L)
    pos = L > 0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        em = np.exp(-L[pos])
        out[pos] = -np.expm1(-L[pos]) / (mu + (1.0 - mu) * em)
        ep = np.exp(L[~pos])
        out[~pos] = np.expm1(L[~pos]) / (mu * ep + 1.0 - mu)
    return out


def solve_score(L: FloatArray, offset: float = 0.0, weights: FloatArray | None = None) -> tuple[float, str]:
    """Root in [0, 1] of mean(psi(mu, L)) - offset, which is strictly decreasing.

    With ``weights`` (non-negative, one per item) the mean is the weighted
    mean ``sum(w psi) / sum(w)``: the mock rounds of the model checks weight
    their gold items by class to another rate.

    Returns the root and a status: ``"unidentified"`` (estimate NaN) when no
    item's labels carry information (every L_i = 0), ``"ok"``, ``"boundary_0"`` when the
    mean score is already <= offset at mu = 0 (estimate 0), ``"boundary_1"``
    when it is >= offset at mu = 1 (estimate 1).
    """
    if L.size == 0:
        raise ValueError("no items")
    if weights is not None:  # an item of weight 0 adds nothing (and 0 * inf, at a boundary, would be NaN)
        keep = np.asarray(weights) > 0
        if not keep.any():
            return float("nan"), "unidentified"
        L, weights = L[keep], np.asarray(weights)[keep]
    if not np.any(np.abs(L) > 1e-12):
        # every item's labels are equally likely under Y=1 and Y=0: the data say nothing about mu
        return float("nan"), "unidentified"

    def f(mu: float) -> float:
        return float(np.average(psi(mu, L), weights=weights)) - offset

    f0 = f(0.0)
    if not f0 > 0:  # includes nan-free <= 0
        return 0.0, "boundary_0"
    f1 = f(1.0)
    if not f1 < 0:
        return 1.0, "boundary_1"
    root = brentq(f, 0.0, 1.0, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    return float(root), "ok"
