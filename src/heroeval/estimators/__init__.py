"""Estimators of the current round's rate: the paper's baselines, HERO-1/2, HERO joint, Rogan–Gladen, new labelers.

Each returns an :class:`~heroeval.estimators.results.EstimateResult` with
per-item influence values (current round and history). The estimators know
nothing of the checks or the choice among them; ``method="auto"`` is
composed above them by :func:`heroeval.estimate`.
"""

from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.control_variate import hero2
from heroeval.estimators.methods import dawid_skene, gold_proportion, hero1, hero_joint, majority_vote
from heroeval.estimators.misclassification import rogan_gladen
from heroeval.estimators.newlabelers import hero1_anchored
from heroeval.estimators.registry import estimate_methods
from heroeval.estimators.results import ConfidenceInterval, EstimateResult, Influence
from heroeval.estimators.shift import covariate_overlap, shift_columns
from heroeval.estimators.table import METHODS

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
