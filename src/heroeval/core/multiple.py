"""Multiple-testing adjustments: Holm and Benjamini–Hochberg p-values (also with Tarone's family size for tests
that cannot all reach a small p-value), and simultaneous interval levels."""

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


def tarone_family_size(min_p: npt.ArrayLike, level: float) -> int:
    """Tarone's (1990) family size: the smallest k with at most k tests whose attainable p-value is <= level / k.

    Tests with NaN are not counted. Bonferroni at ``level / k`` over all the
    tests then has family-wise error at most ``level``: a test that cannot
    reach ``level / k`` never rejects, the others are at most k.

    >>> tarone_family_size([0.0, 0.0, 0.5, 0.9, 0.9], 0.05)
    2
    """
    mp = np.asarray(min_p, dtype=np.float64)
    mp = mp[np.isfinite(mp)]
    for k in range(1, mp.size + 1):
        if int((mp <= level / k).sum()) <= k:
            return k
    return max(int(mp.size), 1)


def tarone_adjust(p: npt.ArrayLike, min_p: npt.ArrayLike, method: str, level: float) -> FloatArray:
    """Holm or Benjamini–Hochberg adjusted p-values with Tarone's family size at ``level``.

    Holm: ``max_{k <= i} min(1, max(K - k + 1, 1) p_(k))`` over the sorted
    p-values, and at least ``min(1, K p)`` for a test that cannot reach
    ``level / K``. BH (Gilbert 2005): BH with ``K`` tests over the labelers that can
    reach ``level / K``; the others get ``min(1, K p)`` (never below ``level``).
    NaN stays NaN.

    >>> tarone_adjust([0.01, 0.04, 0.03, 0.6], [0.0, 0.0, 0.0, 0.5], "holm", 0.05).round(3).tolist()
    [0.03, 0.06, 0.06, 1.0]
    """
    pv = np.asarray(p, dtype=np.float64)
    mp = np.asarray(min_p, dtype=np.float64)
    out = np.full(pv.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(pv))
    if ok.size == 0:
        return out
    K = tarone_family_size(mp[ok], level)
    if method == "holm":
        order = ok[np.argsort(pv[ok], kind="stable")]
        mult = np.maximum(K - np.arange(order.size), 1)
        out[order] = np.minimum(1.0, np.maximum.accumulate(mult * pv[order]))
        rest = ok[mp[ok] > level / K]  # cannot reach level / K: never below K p (>= level)
        out[rest] = np.maximum(out[rest], np.minimum(1.0, K * pv[rest]))
        return out
    if method != "bh":
        raise ValueError(f"unknown adjustment {method!r}")
    elig = ok[mp[ok] <= level / K]
    rest = np.setdiff1d(ok, elig)
    out[rest] = np.minimum(1.0, K * pv[rest])
    if elig.size:
        order = elig[np.argsort(pv[elig], kind="stable")]
        raw = pv[order] * K / (np.arange(order.size) + 1.0)
        out[order] = np.minimum(1.0, np.minimum.accumulate(raw[::-1])[::-1])
    return out
