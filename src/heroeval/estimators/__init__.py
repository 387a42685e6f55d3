"""Estimators of the current round's rate: the paper's baselines, HERO-1/2, HERO joint, Rogan–Gladen, new labelers.

Each returns an :class:`~heroeval.estimators.results.EstimateResult` with
per-item influence values (current round and history). The estimators know
nothing of the checks or the choice among them; ``method="auto"`` is
composed above them by :func:`heroeval.estimate`.
"""

from heroeval.estimators._methods import (
    dawid_skene,
    estimate_methods,
    gold_proportion,
    hero1,
    hero2,
    hero_joint,
    majority_vote,
    rogan_gladen,
)
from heroeval.estimators.newlabelers import hero1_anchored
from heroeval.estimators.results import METHODS, ConfidenceInterval, EstimateCollection, EstimateResult, Influence
from heroeval.estimators.shift import covariate_overlap, shift_columns

__all__ = [
    "METHODS",
    "ConfidenceInterval",
    "EstimateCollection",
    "EstimateResult",
    "Influence",
    "covariate_overlap",
    "dawid_skene",
    "estimate_methods",
    "gold_proportion",
    "hero1",
    "hero1_anchored",
    "hero2",
    "hero_joint",
    "majority_vote",
    "rogan_gladen",
    "shift_columns",
]
