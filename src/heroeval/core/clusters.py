"""Sums by group and the few-groups factor: the pieces every cluster-robust variance of heroeval shares.

The current round's design effect (:mod:`heroeval.estimators.clusters`) and the history's cluster-robust
parameter covariance (:mod:`heroeval.stage_a.clustered`) both sum influence values or scores over groups of
items and scale by ``G / (G - 1)`` and by :func:`few_groups_factor`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.stats import norm, t

__all__ = ["MIN_GROUPS", "few_groups_factor", "group_indicator"]

MIN_GROUPS = 2
"""Below this many groups there is no between-group spread to estimate: no cluster-robust variance."""


def few_groups_factor(n_groups: int, confidence_level: float = 0.95) -> float:
    """``(t_{G-1} / z)^2`` at ``confidence_level`` (two-sided): the variance factor that gives a normal interval
    over ``G`` groups the width of Student's ``t`` with ``G - 1`` degrees of freedom (1 for infinitely many).

    >>> round(few_groups_factor(10), 4), round(few_groups_factor(1_000_000), 4)
    (1.3321, 1.0)
    """
    if n_groups < MIN_GROUPS:
        return math.nan
    q = 0.5 + confidence_level / 2
    return float((t.ppf(q, n_groups - 1) / norm.ppf(q)) ** 2)


def group_indicator(groups: npt.ArrayLike) -> tuple[sp.csr_matrix, int]:
    """The ``G x n`` 0/1 matrix ``A`` with ``A[g, i] = 1`` when item ``i`` is in group ``g`` (groups in sorted
    order of their codes), and ``G``: ``A @ X`` sums the rows of ``X`` by group."""
    codes, inv = np.unique(np.asarray(groups), return_inverse=True)
    n = int(inv.size)
    A: Any = sp.csr_matrix((np.ones(n), (inv.ravel(), np.arange(n))), shape=(int(codes.size), n))
    return A, int(codes.size)
