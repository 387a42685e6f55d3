"""The recommended estimate (``method="auto"``): which candidate to report for this round, and why.

:func:`recommend` gives every candidate an estimated mean squared error on the
current round from the model checks' mock rounds (:mod:`heroeval.checks`).
When the dependence test rejects independence (the likelihood methods'
independence model is then known to be wrong) it takes the smallest;
otherwise it keeps HERO joint unless its mock-round error, or its paired
difference from the Rogan–Gladen estimate on the same items, is significant
at 1 %, and then takes the smallest estimated MSE.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from scipy.stats import norm

from heroeval.checks.model_checks import (
    BIAS_TEST_ALPHA,
    CANDIDATES,
    DEPENDENCE_ALPHA,
    ROBUST_REFERENCE,
    run_checks,
)
from heroeval.errors import ConvergenceWarning, HeroEvalError
from heroeval.estimators._methods import estimate_methods
from heroeval.estimators.ppi import gold_estimates, gold_sample
from heroeval.estimators.results import EstimateResult
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration, fit_stage_a
from heroeval.stage_a.checks_record import ModelChecks, _fin

__all__ = ["Recommendation", "recommend", "recommend_with_gold"]

@dataclass(frozen=True)
class Recommendation:
    """What ``method="auto"`` chose, the result, and why.

    ``table`` lists every candidate with its estimate, standard error on the
    current round, mock-round bias (and its standard error) and the
    predicted root mean squared error that decided.
    """

    method: str
    history_weight: float | None
    result: EstimateResult
    reason: str
    table: list[dict[str, Any]]

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        ci = self.result.confidence_interval(confidence_level)
        return {
            "method": self.method, "history_weight": self.history_weight,
            "estimate": _fin(self.result.estimate), "standard_error": _fin(self.result.standard_error or math.nan),
            "ci_low": _fin(ci.low), "ci_high": _fin(ci.high), "confidence_level": confidence_level,
            "reason": self.reason,
            "candidates": [{k: (_fin(v) if isinstance(v, float) else v) for k, v in r.items()} for r in self.table],
            "ci_method": ci.method, "ci_alternative": ci.alternative, "ci_text": ci.describe(),
            "upper_bound": _fin(self.result.bound(confidence_level, "upper")),
        }


def _candidate(current: AnnotationSet, calibration: Calibration, method: str, weight: float | None,
               exclude_new_labelers: bool, rows: list[dict[str, Any]]) -> EstimateResult | None:
    """One candidate's estimate (EM warnings silenced), or None with a "skipped" row saying why it could not run."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            r = estimate_methods(current, calibration, method=method, exclude_new_labelers=exclude_new_labelers)
    except HeroEvalError as exc:
        rows.append({"method": method, "history_weight": weight, "skipped": str(exc)})
        return None
    assert isinstance(r, EstimateResult)
    return r


def recommend(
    current: AnnotationSet,
    calibration: Calibration,
    *,
    exclude_new_labelers: bool = False,
    candidates: Sequence[str] = CANDIDATES,
) -> Recommendation:
    """The estimate to report for this round (``method="auto"``), and why.

    Uses ``calibration.checks`` (computed from ``calibration.history`` when
    absent). Every candidate (:data:`CANDIDATES`; ``hero1`` at w = 1 and at
    the weight w > 0 the log score chose, which needs the history to refit
    when it is not the calibration's own; ``hero_joint`` at the calibration's
    weight, judged by HERO-1's mock round at that weight) gets an **estimated
    mean squared error on this round** from the mock rounds of held-out gold
    items: ``max(b^2 - s_b^2, 0) + v``, with ``b`` its mock-round error,
    ``s_b`` that error's standard error (mock items and history part), and
    ``v = (s_b^2 - v_h) m / n + v_h`` its error variance relative to the
    round's realised rate scaled from the ``m`` mock items to the ``n``
    current items, ``v_h`` the history part of its variance on this round.

    * If the dependence test rejected independence (p below
      :data:`DEPENDENCE_ALPHA`), the model behind the likelihood methods is
      known to be wrong, and the candidate with the smallest estimated MSE
      is chosen.
    * Otherwise HERO joint (or, without the history, HERO-1 at the
      calibration's weight) is kept unless its mock-round error, or its paired
      difference there from the Rogan–Gladen estimate, is significant at
      :data:`BIAS_TEST_ALPHA`; if it is, the smallest estimated MSE wins.

    The interval of the chosen method is reported as it is: the choice uses
    the history's gold and the candidates' standard errors, not the current
    labels' agreement with any estimate (docs/research/robustness.md measures the
    coverage that results).
    """
    cal = calibration
    checks: ModelChecks | None = cal.checks
    hist = cal.history
    if checks is None:
        if hist is None:
            raise HeroEvalError(
                "method='auto' needs the model checks: calibrate with checks=True (CLI: hero calibrate "
                "saves them) or pass the history"
            )
        s = cal.settings
        checks = run_checks(hist, em_settings={k: s[k] for k in ("tol", "max_iter", "criterion", "accelerate",
                                                                  "pseudo_count") if k in s})
        cal = replace(cal, checks=checks)
    own_w = float(cal.settings.get("history_weight", 1.0))
    # HERO-1 at w = 0 is gold-only maximum likelihood without smoothing: not a candidate unless it is the user's own
    weights = (sorted({own_w, 1.0} | ({checks.chosen_weight} if checks.chosen_weight > 0 else set()))
               if hist is not None else [own_w])
    cals = {own_w: cal}
    rows: list[dict[str, Any]] = []
    results: dict[tuple[str, float | None], EstimateResult] = {}
    for m in candidates:
        ws: list[float | None] = list(weights) if m == "hero1" else [own_w] if m == "hero_joint" else [None]
        for w in ws:
            if m == "hero_joint" and (hist is None or w == 0.0):
                continue
            if w is not None and w not in cals:
                assert hist is not None
                s = cal.settings
                cals[w] = fit_stage_a(hist, history_weight=w, **{k: s[k] for k in (
                    "tol", "max_iter", "criterion", "accelerate", "pseudo_count") if k in s})
            c_use = cals[own_w if w is None else w]
            r = _candidate(current, c_use, m, w, exclude_new_labelers, rows)
            if r is None:
                continue
            # hero_joint rests on HERO-1's likelihood: it is judged by HERO-1's mock round at the same weight
            mrow = checks.mock_row("hero1" if m == "hero_joint" else m, w)
            se = r.standard_error
            b = float(mrow["bias"]) if mrow else math.nan
            vh = r.variance_history if math.isfinite(r.variance_history) else 0.0
            sb = math.sqrt(float(mrow["bias_se"]) ** 2 + vh) if mrow else math.nan
            if mrow is None or se is None or not math.isfinite(se) or not math.isfinite(r.estimate) \
                    or not math.isfinite(b) or not math.isfinite(sb):
                pred = math.nan
            else:
                # error variance relative to the realised rate: the mock items' part scaled to this round's size
                b2 = max(b * b - sb * sb, 0.0)
                v_mock = float(mrow["bias_se"]) ** 2 * float(mrow["n_items"]) / max(current.n_items, 1)
                pred = math.sqrt(b2 + v_mock + vh)
            results[(m, w)] = r
            vs = float(mrow.get("vs_robust", math.nan)) if mrow else math.nan
            vs_se = float(mrow.get("vs_robust_se", math.nan)) if mrow else math.nan
            rows.append({"method": m, "history_weight": w, "estimate": r.estimate,
                         "standard_error": se if se is not None else math.nan, "mock_bias": b, "mock_bias_se": sb,
                         "mock_vs_robust": vs, "mock_vs_robust_se": vs_se, "variance_history": vh,
                         "predicted_rmse": pred})
    scored = [r for r in rows if "predicted_rmse" in r and math.isfinite(r["predicted_rmse"])]
    dep = checks.dependence
    dep_txt = ("labelers agree beyond independence given gold (dependence test p = "
               f"{dep.p_value:.2g})" if math.isfinite(dep.p_value) and dep.p_value < 0.05
               else "no evidence of dependent errors on the gold (p = "
               f"{dep.p_value:.2g})" if math.isfinite(dep.p_value) else "dependence not testable on the gold")
    first = ("hero_joint", own_w) if ("hero_joint", own_w) in results else ("hero1", own_w)
    at_bound = [k for k, r in results.items() if r.status.startswith("boundary")]
    if results and first in results and results[first].status.startswith("boundary"):
        dependent0 = math.isfinite(dep.p_value) and dep.p_value < DEPENDENCE_ALPHA
        robust = next((k for k in results if k[0] == ROBUST_REFERENCE), None)
        pick = robust if dependent0 and robust is not None else first
        return _boundary_recommendation(pick, results, at_bound, checks, rows, dep_txt, dependent0)
    if not scored:
        r0 = results.get(first) or estimate_methods(current, cal, method="hero1", exclude_new_labelers=exclude_new_labelers)
        assert isinstance(r0, EstimateResult)
        if first not in results:
            first = ("hero1", own_w)
        why = "; ".join(checks.notes) or "no candidate could be scored on mock rounds"
        return Recommendation(first[0], own_w, r0, f"{first[0]} by default: {why}", rows)
    dependent = math.isfinite(dep.p_value) and dep.p_value < DEPENDENCE_ALPHA
    level = BIAS_TEST_ALPHA
    crit = float(norm.ppf(1 - level / 2))
    vh_ref = next((row["variance_history"] for row in scored if row["method"] == ROBUST_REFERENCE), 0.0)
    for row in scored:
        sb = row["mock_bias_se"]
        flag = bool(math.isfinite(sb) and abs(row["mock_bias"]) > crit * sb)
        vs, vs_se = row["mock_vs_robust"], row["mock_vs_robust_se"]
        if math.isfinite(vs) and math.isfinite(vs_se):
            row["mock_vs_robust_se"] = vs_se = math.sqrt(vs_se**2 + row["variance_history"] + vh_ref)
            flag = flag or abs(vs) > crit * vs_se
        row["bias_flagged"] = flag
    default = next((r for r in scored if (r["method"], r["history_weight"]) == first), None)
    # ties: the default first, then the order of CANDIDATES
    order = {k: i for i, k in enumerate(results)}
    by_mse = min(scored, key=lambda r: (r["predicted_rmse"], 0 if (r["method"], r["history_weight"]) == first
                                        else 1, order.get((r["method"], r["history_weight"]), 0)))
    if dependent:
        best = by_mse
        rule = (f"labelers err together, so the likelihood methods' independence model is wrong here; among the "
                f"candidates, {best['method']} had the smallest predicted error on the mock rounds "
                f"(RMSE {best['predicted_rmse']:.3g})")
    elif default is not None and not default["bias_flagged"]:
        best = default
        rule = f"{first[0]} shows no significant bias on the mock rounds (level {level:g})"
    else:
        best = by_mse
        rule = (f"{first[0]} is biased on the mock rounds (level {level:g}); among the candidates, {best['method']} "
                f"had the smallest predicted error there (RMSE {best['predicted_rmse']:.3g})")
    m, w = best["method"], best["history_weight"]
    wtxt = f" (history weight {w:g})" if w is not None else ""
    reason = (f"{m}{wtxt}: {rule}; its mock-round bias {best['mock_bias']:+.3g} ± {best['mock_bias_se']:.2g} "
              f"over {checks.folds} folds of {checks.n_gold} gold items; {dep_txt}")
    h1 = next((r for r in scored if r["method"] == "hero1" and r["history_weight"] == 1.0), None)
    if h1 is not None and h1 is not best and h1["bias_flagged"]:
        reason += (f"; the paper's HERO-1 is biased on the mock rounds ({h1['mock_bias']:+.3g} ± "
                   f"{h1['mock_bias_se']:.2g})")
    return Recommendation(m, w, results[(m, w)], reason, rows)



def _boundary_recommendation(
    first: tuple[str, float | None], results: Mapping[tuple[str, float | None], EstimateResult],
    at_bound: list[tuple[str, float | None]], checks: ModelChecks, rows: list[dict[str, Any]], dep_txt: str,
    dependent: bool = False,
) -> Recommendation:
    """The default candidate sits at 0 (or 1): no standard error, no mock-round MSE; report its one-sided bound.

    The bound is the default's own (score-test inversion with the history's uncertainty); taking the
    smallest bound among the candidates would be a choice by the data and would under-cover.
    """
    r = results[first]
    zero = r.status == "boundary_0"
    side = "upper" if zero else "lower"
    b = r.bound(0.95, side)
    btxt = f"{'at most' if zero else 'at least'} {100 * b:.3g} % (95 %)"
    n_all = len(results)
    n_b = len(at_bound)
    others = (f"every candidate estimates {0 if zero else 1}" if n_b == n_all
              else f"{n_b} of {n_all} candidates estimate {0 if zero else 1}")
    wtxt = "" if first[1] is None else f" (history weight {first[1]:g})"
    why_m = (" (labelers err together on the gold, so the likelihood methods' bounds rest on a wrong model: "
             "the dependence-robust moment estimator's bound is reported)" if dependent else "")
    reason = (f"{first[0]}{wtxt}{why_m}: {others}; the current labels show "
              + ("no more positives than the labelers' false-positive rates explain" if zero
                 else "no more negatives than the labelers' false-negative rates explain")
              + f", so the rate is reported as a one-sided bound: {btxt}, by inverting {first[0]}'s test "
              "with the calibration's uncertainty included. To tighten it, label more current items "
              "(hero plan --bound); mock-round bias "
              f"checks need an interior estimate ({checks.folds} folds of {checks.n_gold} gold items); {dep_txt}")
    return Recommendation(first[0], first[1], r, reason, rows)


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
    that the gold alone is reported.
    """
    gs = gold_sample(current)
    if gs is None:
        raise HeroEvalError("recommend_with_gold needs gold items in the current round")
    chosen = None
    why_not: list[str] = []
    for m in ("hero1_ppi", "mv_ppi", "gold_only"):
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
            "mv_ppi": f"the majority vote rectified by them (PPI++, lambda = {lam:.2f}; HERO-1 has no posterior here)",
            "gold_only": "their mean (no predictor could be computed)"}[m]
    reason = (f"{m}: {gs.describe()}; {what}, unbiased for this round's rate whatever the shift or the labelers' "
              "dependence")
    if shown:
        reason += (f"; each candidate's error measured on this round's gold (estimate minus {m}, SE "
                   f"{ref_se:.2g}): " + ", ".join(shown))
    if biased:
        reason += f"; significantly off at 5 %: {', '.join(biased)}"
    if why_not:
        reason += "; " + "; ".join(why_not)
    return Recommendation(m, None, r, reason, rows)
