"""Multiple-testing adjustments (Holm, Benjamini–Hochberg) of p-value vectors."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def _finite_sorted(p: npt.ArrayLike) -> tuple[FloatArray, FloatArray, npt.NDArray[np.intp]]:
    """The p-values as floats, an all-NaN output of their shape, and the positions of the finite ones, ascending."""
    pv = np.asarray(p, dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(pv))
    return pv, np.full(pv.shape, np.nan), ok[np.argsort(pv[ok], kind="stable")]


def holm(p: npt.ArrayLike) -> FloatArray:
    """Holm's step-down adjusted p-values (controls the family-wise error rate).

    NaN entries stay NaN and do not count towards the family size.

    >>> holm([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.06, 0.06]
    """
    pv, out, order = _finite_sorted(p)
    m = order.size
    if m == 0:
        return out
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * pv[order]))
    out[order] = adj
    return out


def benjamini_hochberg(p: npt.ArrayLike) -> FloatArray:
    """Benjamini–Hochberg adjusted p-values (controls the false discovery rate).

    >>> benjamini_hochberg([0.01, 0.04, 0.03]).round(3).tolist()
    [0.03, 0.04, 0.04]
    """
    pv, out, order = _finite_sorted(p)
    m = order.size
    if m == 0:
        return out
    raw = pv[order] * m / (np.arange(m) + 1.0)
    adj = np.minimum(1.0, np.minimum.accumulate(raw[::-1])[::-1])
    out[order] = adj
    return out


def adjust(p: npt.ArrayLike, method: str) -> FloatArray:
    """Adjusted p-values by ``method``: ``"holm"``, ``"bh"`` or ``"none"``."""
    if method == "holm":
        return holm(p)
    if method == "bh":
        return benjamini_hochberg(p)
    if method == "none":
        return np.asarray(p, dtype=np.float64).copy()
    raise ValueError(f"unknown adjustment {method!r}")
