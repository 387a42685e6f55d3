"""Multiple-testing adjustments: Holm and Benjamini–Hochberg p-values, and simultaneous interval levels."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from heroeval.errors import HeroEvalError

FloatArray = npt.NDArray[np.float64]

ADJUSTMENTS = ("sidak", "bonferroni", "maxz", "none")
"""Simultaneous-interval adjustments: Šidák's and Bonferroni's levels, the max-|z| quantile of the estimates'
correlation (where a caller has it; else Šidák's), or none."""


def adjusted_level(m: int, confidence_level: float, adjust: str) -> float:
    """The level of each of ``m`` intervals that together cover at ``confidence_level`` (``"maxz"``: Šidák's).

    Šidák's level holds for two-sided normal intervals under any correlation (Šidák's inequality); Bonferroni's
    for any intervals at all.

    >>> round(adjusted_level(5, 0.95, "sidak"), 5), round(adjusted_level(5, 0.95, "bonferroni"), 5)
    (0.98979, 0.99)
    """
    if not 0 < confidence_level < 1:
        raise HeroEvalError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    if adjust not in ADJUSTMENTS:
        raise HeroEvalError(f"adjust must be one of {', '.join(ADJUSTMENTS)}, got {adjust!r}")
    m = max(int(m), 1)
    if adjust == "none" or m == 1:
        return float(confidence_level)
    if adjust == "bonferroni":
        return float(1 - (1 - confidence_level) / m)
    return float(confidence_level ** (1.0 / m))


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
