"""Covariate shift between the current round and the history.

HERO-2's control variate needs the current round's covariates to share the
history's distribution; :func:`shift_columns` tests each column's mean
against the history's, and :func:`covariate_overlap` says how much of the
current round repeats history items (then the covariate means are not
independent of the history's).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from scipy.stats import norm

from heroeval.core.multiple import adjust as _adjust
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration

__all__ = ["covariate_overlap", "shift_columns"]


def shift_columns(z: Iterable[float], names: Iterable[str]) -> dict[str, Any]:
    """Per-column two-sided p-values of the covariate-mean z statistics, Holm-adjusted.

    ``z`` are HERO-2's per-column statistics ``(Xbar_k - m_k) / sd_k`` (NaN
    for columns constant in the current round). Returns
    ``covariate_shift_p_columns`` and ``covariate_shift_p_holm`` (by column
    name) and ``covariate_shift_min_p_holm`` (1 when no column is testable).

    >>> out = shift_columns([0.5, 4.0], ["a", "b"])
    >>> round(out["covariate_shift_min_p_holm"], 5)
    0.00013
    """
    zz = np.asarray(list(z), dtype=np.float64)
    nm = [str(x) for x in names]
    p = np.where(np.isfinite(zz), 2 * norm.sf(np.abs(zz)), np.nan)
    ph = _adjust(p, "holm")
    finite = ph[np.isfinite(ph)]
    return {
        "covariate_shift_p_columns": {k: (float(v) if math.isfinite(v) else None) for k, v in zip(nm, p, strict=True)},
        "covariate_shift_p_holm": {k: (float(v) if math.isfinite(v) else None) for k, v in zip(nm, ph, strict=True)},
        "covariate_shift_min_p_holm": float(finite.min()) if finite.size else 1.0,
    }


def covariate_overlap(current: AnnotationSet, calibration: Calibration) -> dict[str, Any]:
    """Share of the current round's covariate rows that repeat the history's item for item.

    With the history at hand (a calibration fitted in this process), an item
    counts when its id is a history item with exactly the same covariate
    values. From a calibration file only the summaries are known: the share
    is 1 when the current round has as many items as the history had and
    the same covariate mean and covariance (to 1e-12), else 0.
    """
    X = current.covariates
    if X is None or calibration.covariate_mean is None or X.shape[0] == 0:
        return {"covariate_overlap_share": 0.0, "covariate_overlap_basis": "none"}
    hist = calibration.history
    if hist is not None and hist.covariates is not None and hist.covariates.shape[1] == X.shape[1]:
        pos = {str(k): i for i, k in enumerate(hist.item_ids)}
        cur_ids = [str(k) for k in current.item_ids]
        hit = np.array([pos.get(k, -1) for k in cur_ids], dtype=np.int64)
        same = hit >= 0
        if same.any():
            eq = np.all(hist.covariates[hit[same]] == X[same], axis=1)
            same[np.flatnonzero(same)[~eq]] = False
        return {"covariate_overlap_share": float(same.mean()), "covariate_overlap_basis": "item ids"}
    n = X.shape[0]
    if n != calibration.n_covariate_items or calibration.covariate_cov is None:
        return {"covariate_overlap_share": 0.0, "covariate_overlap_basis": "summary"}
    cov = np.atleast_2d(np.cov(X, rowvar=False, ddof=1)) if n > 1 else np.zeros((X.shape[1],) * 2)
    same_sum = bool(np.allclose(X.mean(axis=0), calibration.covariate_mean, rtol=1e-12, atol=1e-300)
                    and np.allclose(cov, calibration.covariate_cov, rtol=1e-12, atol=1e-300))
    return {"covariate_overlap_share": 1.0 if same_sum else 0.0, "covariate_overlap_basis": "summary"}
