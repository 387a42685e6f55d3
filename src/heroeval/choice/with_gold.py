"""The recommended estimate of a round with a few gold items of its own: HERO-1's posteriors rectified by them
(PPI++), with every other candidate's distance from it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from scipy.stats import norm

from heroeval.checks.model_checks import CANDIDATES
from heroeval.choice.auto import _candidate
from heroeval.errors import HeroEvalError
from heroeval.estimators.common import align, has_unknown
from heroeval.estimators.gold_sample import gold_sample
from heroeval.estimators.ppi import PredictorChoice, choose_predictor, gold_estimates
from heroeval.estimators.records import Recommendation
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration

__all__ = ["gold_order", "recommend_with_gold"]


def gold_order(choice: PredictorChoice) -> tuple[str, ...]:
    """The estimates with current gold in the order the recommendation tries them: the chosen posterior's, the
    other posterior's, the majority vote's, the gold alone."""
    first = choice.method
    return (first, *(m for m in ("hero1_ppi", "gp_ppi") if m != first), "mv_ppi", "gold_only")


def recommend_with_gold(
    current: AnnotationSet,
    calibration: Calibration,
    *,
    exclude_new_labelers: bool = False,
    candidates: Sequence[str] = CANDIDATES,
) -> Recommendation:
    """The recommended estimate when the current round has gold items: HERO-1's posteriors rectified by them.

    The gold items (a uniform random sample, or drawn by a recorded design)
    make ``hero1_ppi`` unbiased for this round's rate whatever the rate
    shift, pool shift or labeler dependence, so it is chosen outright; the
    mock rounds of the history are not needed. The same gold measures every
    silver-only candidate's error on this very round: ``table`` lists each
    candidate's estimate, its difference from the rectified estimate
    (``current_bias``) and that difference's standard error (the rectified
    estimate's, which dominates). When HERO-1 has no posterior (unidentified
    round) the majority-vote predictor is rectified instead, and failing
    that the gold alone is reported, and the result's notes say so.

    Labelers new to the calibration are handled as without gold: with
    ``exclude_new_labelers`` their labels are left out of every candidate
    (:func:`heroeval.estimate`'s default adds the note that says so);
    without it, :class:`~heroeval.errors.UnknownLabelerError` names them.
    The predictor is never switched because of them.
    """
    gs = gold_sample(current)
    if gs is None:
        raise HeroEvalError("recommend_with_gold needs gold items in the current round")
    if not exclude_new_labelers and has_unknown(current, calibration):
        align(current, calibration, False)  # raises UnknownLabelerError naming them, as without gold
    chosen = None
    why_not: list[str] = []
    choice = choose_predictor(calibration)
    order = gold_order(choice)
    for m in order:
        res, skipped = gold_estimates(current, calibration, [m], exclude_new_labelers=exclude_new_labelers,
                                      skip_errors=True)
        if m in res:
            chosen = (m, res[m])
            break
        why_not.append(f"{m}: {skipped[m]}")
    assert chosen is not None  # gold_only always runs on a round with gold
    m, r = chosen
    ref, ref_se = r.estimate, r.standard_error
    rows: list[dict[str, Any]] = [{"method": m, "history_weight": None, "estimate": r.estimate,
                                   "standard_error": ref_se, "current_bias": 0.0, "current_bias_se": 0.0}]
    biased: list[str] = []
    shown: list[str] = []
    for c in candidates:
        if c == "hero_joint" and calibration.history is None:
            continue
        x = _candidate(current, calibration, c, None, exclude_new_labelers, rows)
        if x is None:
            continue
        b = x.estimate - ref
        rows.append({"method": c, "history_weight": None, "estimate": x.estimate,
                     "standard_error": x.standard_error, "current_bias": b, "current_bias_se": ref_se})
        if math.isfinite(b):
            shown.append(f"{c} {b:+.3f}")
            if math.isfinite(ref_se) and ref_se > 0 and abs(b) > float(norm.ppf(0.975)) * ref_se:
                biased.append(c)
    lam = r.details.get("lambda", math.nan)
    what = {"hero1_ppi": f"HERO-1's per-item posteriors rectified by them (PPI++, lambda = {lam:.2f})",
            "gp_ppi": f"the gold-proportion rates' per-item posteriors rectified by them (PPI++, lambda = {lam:.2f})",
            "mv_ppi": f"the majority vote rectified by them (PPI++, lambda = {lam:.2f}; HERO-1 has no posterior here)",
            "gold_only": "their mean (no predictor could be computed)"}[m]
    reason = (f"{m}: {gs.describe()}; {what}, unbiased for this round's rate whatever the shift or the labelers' "
              f"dependence; the predictor: {choice.reason}")
    if shown:
        reason += (f"; each candidate's error measured on this round's gold (estimate minus {m}, SE "
                   f"{ref_se:.2g}): " + ", ".join(shown))
    if biased:
        reason += f"; significantly off at 5 %: {', '.join(biased)}"
    if why_not:
        reason += "; " + "; ".join(why_not)
        # not a silent switch: the result's notes say which predictor was given up, and why
        r = replace(r, notes=(*r.notes, f"{m} is reported because " + "; ".join(why_not)))
    return Recommendation(m, None, r, reason, rows, "ok", {(m, None): r})
