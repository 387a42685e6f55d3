"""How many expert labels of this round would settle an "unreliable" recommendation (issue #39, item 3).

An unreliable round is one whose error the history cannot judge: its rate is far from the gold's, or past rounds
were missed beyond their noise. Gold labels of the round itself settle it, since the estimate with current gold
(:mod:`heroeval.estimators.ppi`) is unbiased by its design whatever the labelers' model. The figure given is the
number of uniformly drawn expert labels whose interval is as narrow as the chosen method's own interval (the one
the labelers' model would claim), from :func:`heroeval.inference.gold_plan.expert_labels` at the round's estimate:
for the gold alone (``S^2 = mu (1 - mu)``, closed form, the bound that holds whatever the labelers do) and with the
round's labels as the predictor (HERO-PPI, model-based: optimistic when labelers err together, which is often why
the round was unreliable).
"""

from __future__ import annotations

import math

import numpy as np

from heroeval.errors import HeroEvalError
from heroeval.estimators.results import EstimateResult
from heroeval.inference.gold_plan import expert_labels
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration

__all__ = ["settle_sentence"]

N_MC = 5_000
"""Simulated items behind the HERO-PPI figure (its Monte-Carlo error is a few per cent of the count)."""


def _labels_needed(k: float, n: int) -> str:
    return f"all {n}" if not math.isfinite(k) or k >= n else f"about {math.ceil(k)}"


def settle_sentence(current: AnnotationSet, cal: Calibration, chosen: EstimateResult) -> str:
    """The sentence an unreliable reason ends with: how many of this round's items to label for the half-width of
    ``chosen``'s own 95 % interval (module docstring)."""
    n = current.n_items
    estimate = chosen.estimate
    ci = chosen.confidence_interval(0.95)
    half_width = (ci.high - ci.low) / 2
    generic = "Label some of this round's items (hero select) to pin it down"
    if n < 2 or not math.isfinite(half_width) or not (0 < half_width < 0.5) or not math.isfinite(estimate):
        return generic
    mu = min(max(estimate, 0.02), 0.98)
    index = cal.index_of()
    counts = np.bincount(current.labeler, minlength=current.n_labelers)
    pool = {str(lab): float(c) for lab, c in zip(current.labeler_ids, counts, strict=True)
            if c > 0 and str(lab) in index}
    per_item = round(float(np.diff(current.item_ptr).mean())) if current.item_ptr.size > 1 else 0
    try:
        plan = expert_labels(cal, mu=mu, half_width=half_width, round_items=n, n_mc=N_MC,
                             pool=pool or None, labels_per_item=min(max(per_item, 1), len(pool) or cal.n_labelers))
    except HeroEvalError:
        return generic
    rows = {r["design"]: r for r in plan.rows}
    gold, ppi = rows["gold only"]["expert_labels"], rows["uniform (HERO-PPI)"]["expert_labels"]
    return (f"Labelling {_labels_needed(gold, n)} of this round's {n} items at random would settle it with the gold "
            f"alone at ± {half_width:.3g} (the chosen method's own half-width); with the labelers' labels as the "
            f"predictor (hero select, HERO-PPI) {_labels_needed(ppi, n)} if their model held")
