"""Cluster-robust standard errors when the current round's items come in groups (prompts, queries, topics).

Every current-round standard error of heroeval is ``sum_i phi_i^2 / n^2``, which treats the round's items as
independent draws. Items that share a prompt, a query, a topic or a conversation are not: a hard prompt makes
all its answers hard to judge, an LLM judge that misreads one topic misreads every item of it, and the
items' influence values move together. Then the independent-items variance is too small and the interval
under-covers, by the *design effect* ``1 + (m - 1) rho`` for groups of ``m`` items with intra-group
correlation ``rho``.

With item groups (:meth:`heroeval.AnnotationSet.with_groups`), the current-round variance is the
cluster-robust (CR1) sandwich with the group as the independent unit,

    V_CR = G / (G - 1) * sum_g (sum_{i in g} (phi_i - phi_bar))^2 / n^2,

times ``(t_{G-1} / z)^2`` at 95 % (:func:`few_groups_factor`): with ``G`` groups the estimate has about
``G - 1`` degrees of freedom, and a normal quantile over few groups under-covers; the factor gives the
``t_{G-1}`` interval's width at the 95 % level (the level every benchmark of this library measures; at 99 %
it under-corrects a little). The variance used is ``max(V_CR, V_iid)``: a cluster-robust variance below the
independent-items one (negative correlation within groups, or mostly the noise of a few groups) is not
trusted to narrow an interval. The *design effect* ``deff = max(V_CR, V_iid) / V_iid >= 1`` scales the
current-round variance of every interval heroeval builds: the Wald and logit intervals through
:meth:`heroeval.estimators.results.Influence.variance_current`, the score-test inversions through their
current-round variance at each null rate (:meth:`ScoreTest.parts`, :class:`MomentTest`'s ``deff``, the
Wilson interval's effective number of items), as Rao and Scott correct a chi-square test by the design effect.

The history's variance is the calibration's parameter covariance, cluster-robust by the history's own item
groups when it has them (:mod:`heroeval.stage_a.clustered`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from heroeval.core.clusters import MIN_GROUPS, few_groups_factor
from heroeval.estimators.inversion import BinomialScoreTest, InversionTest, MomentTest, ScoreTest

__all__ = ["ESTIMAND", "FEW_GROUPS", "MIN_GROUPS", "cluster_variance", "design_effect", "few_groups_factor",
           "with_design_effect"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int32] | npt.NDArray[np.int64]

FEW_GROUPS = 10
"""Below this many groups the result's notes warn: the interval is for the rate over the population of groups
the round's few groups stand for, and with groups of different rates it is wide (6 relations of ``mre_treat``:
design effect about 60, an interval of about 0.8); for the round's own items' rate, estimate without groups."""

ESTIMAND = "population of item groups"
"""What a grouped interval is for (the ``estimand`` of a grouped result's JSON): the rate over the population
of groups (prompts, queries, topics) the round's groups were drawn from, not the round's own items' rate, which
the independent-items interval already covers when the items' labels err independently (docs/inference.md,
"Grouped items")."""


def cluster_variance(phi: FloatArray, groups: IntArray) -> tuple[float, int]:
    """The CR1 cluster-robust variance of ``mean(phi)`` with ``groups`` as the clusters, and the number of
    groups present; NaN with fewer than :data:`MIN_GROUPS` groups. ``phi`` is centred at its mean first."""
    n = int(phi.shape[0])
    if n == 0:
        return math.nan, 0
    codes, inv = np.unique(np.asarray(groups), return_inverse=True)
    G = int(codes.size)
    if G < MIN_GROUPS:
        return math.nan, G
    sums = np.bincount(inv.ravel(), weights=phi - phi.mean(), minlength=G)
    return G / (G - 1) * float(sums @ sums) / n**2, G


def design_effect(phi: FloatArray, groups: IntArray | None) -> tuple[float, int]:
    """``max(V_CR * few_groups_factor(G), V_iid) / V_iid`` (at least 1) and ``G``; ``(1.0, 0)`` without groups.

    ``V_iid`` is ``sum phi^2 / n^2`` as every result computes it; the result is 1 when the round's items fall
    into fewer than :data:`MIN_GROUPS` groups or carry no spread.
    """
    if groups is None:
        return 1.0, 0
    v_cr, G = cluster_variance(phi, groups)
    n = int(phi.shape[0])
    v_iid = float(phi @ phi) / n**2 if n else math.nan
    if not (math.isfinite(v_cr) and v_iid > 0):
        return 1.0, G
    return max(v_cr * few_groups_factor(G) / v_iid, 1.0), G


def with_design_effect(test: InversionTest | None, deff: float) -> InversionTest | None:
    """The interval's test with its current-round variance scaled by ``deff`` (Rao–Scott), or the test itself
    when ``deff`` is 1 or the test has no current-round part heroeval can scale."""
    if test is None or deff == 1.0:
        return test
    if isinstance(test, ScoreTest):
        return replace(test, current_deff=test.current_deff * deff, _cache=test._cache)
    if isinstance(test, MomentTest):
        return replace(test, deff=test.deff * deff)
    if isinstance(test, BinomialScoreTest):
        return replace(test, deff=test.deff * deff)
    return test
