"""Stage A's parameter covariance when the history's items come in groups (prompts, queries, topics).

The history's sandwich ``V = H^-1 S H^-1`` (:mod:`heroeval.stage_a.covariance`) sums the items' scores'
outer products, ``S = sum_r s_r s_r'``: it treats the history's items as independent. When the items of a
group share what makes them hard to judge, their scores move together and ``S`` is too small. The
cluster-robust meat sums the scores within each group first,

    S_CR = f * G / (G - 1) * sum_g (sum_{r in g} z_r)(sum_{r in g} z_r)',

with ``z_r`` item ``r``'s full influence row (its score ``s_r``, plus ``C u_r`` when the empirical-Bayes prior's
pooled rates are estimated from the gold, :func:`heroeval.stage_a.fit.eb_prior_covariance`, and its centred
covariates for HERO-2) and ``f`` :func:`heroeval.core.clusters.few_groups_factor`. Every history standard error
is a quadratic form ``c' V c``, so what it uses is the CR1 variance of one linear combination, a sum of ``G``
squared group totals with about ``G - 1`` degrees of freedom, whatever the rank of ``S_CR``.

Unlike the current round's design effect, the history's cluster-robust variance is not floored at the
independent-items one: a floor on a matrix (the positive part of ``S_CR - S``) is biased upwards wherever
``S_CR`` is noisy (25 random groups of independent items raised the diagonal by a median 1.44 in a trial,
against 1.22 from the factors alone), and a floor on each quadratic form would not keep the covariances between
estimates (differences of rounds) consistent with their variances.

The scores are the NumPy engine's (:func:`heroeval.stage_a.scoring.scores_and_information`, per item, on the
uncompressed design), whichever engine fitted: the compiled engine sums the Gram matrix in its kernel and
keeps no per-item scores.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval.core.clusters import MIN_GROUPS, few_groups_factor, group_indicator
from heroeval.stage_a import scoring, two_coin
from heroeval.stage_a.covariance import ParameterCovariance

__all__ = ["clustered_covariance"]

FloatArray = npt.NDArray[np.float64]


def _meat(S: Any, U: FloatArray | None, C: FloatArray | None, X: FloatArray | None) -> FloatArray:
    """``Z' Z`` for the rows ``z_r = (s_r + C u_r, x_r)`` (``S`` sparse rows x P, ``U`` rows x 2, ``X`` rows x
    p), without forming ``Z``: a (P + p) square matrix."""
    P = S.shape[1]
    p = 0 if X is None else X.shape[1]
    out = np.zeros((P + p, P + p))
    out[:P, :P] = np.asarray((S.T @ S).toarray())
    if U is not None and C is not None:
        SU = np.asarray(S.T @ U)
        out[:P, :P] += SU @ C.T + C @ SU.T + C @ (U.T @ U) @ C.T
    if X is not None:
        SX = np.asarray(S.T @ X)
        if U is not None and C is not None:
            SX = SX + C @ (U.T @ X)
        out[:P, P:] = SX
        out[P:, :P] = SX.T
        out[P:, P:] = X.T @ X
    return out


def clustered_covariance(
    d: two_coin.Design, groups: npt.NDArray[np.int32], fit: two_coin.EMFit, X: FloatArray | None,
    eb_terms: tuple[FloatArray, FloatArray] | None = None,
) -> tuple[ParameterCovariance, FloatArray, int] | None:
    """The cluster-robust parameter covariance of a fit on design ``d`` (one row per history item, in order),
    its observed information ``H`` and the number of groups; None with fewer than ``MIN_GROUPS`` groups.

    ``groups``: each item's group code; ``X``: the items' covariates (HERO-2), or None; ``eb_terms``: ``(U, C)``
    with ``U`` (items x 2) each item's influence on the empirical-Bayes prior's pooled rates (zero rows off the
    gold) and ``C`` (P x 2) the prior gradient's derivative in them.
    """
    if groups.shape != (d.n_items,):
        raise ValueError(f"{groups.shape[0]} group codes for {d.n_items} items")
    A, G = group_indicator(groups)
    if G < MIN_GROUPS:
        return None
    gamma, _ = two_coin.e_step(d, fit.alpha, fit.beta, fit.prev, need_ll=False)
    si = scoring.scores_and_information(d, fit.alpha, fit.beta, fit.prev, gamma, gram=False)
    S: Any = si.scores
    N, P = S.shape
    Xc = None if X is None else X - X.mean(axis=0)
    U, C = (None, None) if eb_terms is None else eb_terms
    K = few_groups_factor(G) * G / (G - 1) * _meat(A @ S, None if U is None else A @ U, C,
                                                    None if Xc is None else A @ Xc)
    gram, sx, xtx = K[:P, :P], K[:P, P:], K[P:, P:]
    pcov = ParameterCovariance.from_information(si.info, si.free, gram, None if Xc is None else sx,
                                                xtx=None if Xc is None else xtx, n_x_items=0 if Xc is None else N)
    return pcov, si.info, G
