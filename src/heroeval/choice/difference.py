"""The recommended difference of two rounds (``compare(..., method="auto")``): which candidate, and why.

A team ships on ``A - B``, not on either rate alone, and a method's bias on a difference is not its bias on a
round: a bias common to both rounds cancels, one that moves with the rate does not. Each candidate difference is
judged by its own error on the model checks' mock rounds, *paired*: the history's held-out gold items weighted
by class to round A's rate and to round B's (:func:`heroeval.checks.model_checks.paired_mock_difference`) give
the difference's mock error ``b(t_A) - b(t_B)`` and its standard error from the same items, so the noise the two
rates share cancels too. The rule is the single round's (:func:`heroeval.choice.auto.choose`) on those
differences:

* the dependence test rejects independence: the candidate with the smallest predicted error of the difference
  (``max(d^2 - s_d^2, 0) + v``, ``d`` the paired mock error, ``s_d`` its standard error with the difference's
  history variance, ``v`` the mock rounds' error variance scaled to each round's size plus that history
  variance), with a bias-aware interval;
* otherwise HERO joint (HERO-1 without the history) unless its paired mock error, or its paired difference from
  Rogan–Gladen's, is significant at 1 %; a weaker significance (``rule.aware_level``) or a rate shift of either
  round (``rule.shift_level``) keeps it with a bias-aware interval.

The bias bound of the difference is ``|d| + kappa s_d``
(:class:`~heroeval.inference.comparison.DifferenceInterval`). When the history has rounds with gold, the chosen
method's errors on them (the past-round check) say how much a round's own error varies: their spread beyond
noise (Cochran's Q at ``rule.transport_level``; DerSimonian–Laird's ``tau2``,
:func:`~heroeval.checks.model_checks.transport_spread`) adds ``2 tau2`` to the difference's variance, with
Student's t. The difference is ``"unreliable"`` when either round's own recommendation is; when that is because
a round's rate is too far from the gold's for the re-weighted gold to judge, the interval spans every
candidate's. With current gold in both rounds the prediction-powered difference is recommended, which the
rounds' own gold makes unbiased whatever the labelers do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from scipy.stats import norm

from heroeval.checks.model_checks import (
    BIAS_TEST_ALPHA,
    DEPENDENCE_ALPHA,
    ROBUST_REFERENCE,
    paired_mock_difference,
    transport_spread,
)
from heroeval.choice.auto import DEFAULT_RULE, REPORTED, AutoRule, rate_shift_z
from heroeval.choice.with_gold import gold_order
from heroeval.errors import HeroEvalError
from heroeval.estimators.ppi import choose_predictor, gold_estimates
from heroeval.estimators.records import Recommendation
from heroeval.estimators.results import EstimateResult
from heroeval.inference.comparison import Comparison, DifferenceRecommendation, difference
from heroeval.inference.difference_interval import DifferenceInterval
from heroeval.inference.pairing import Pairing
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration

__all__ = ["GOLD_ORDER", "recommend_difference"]

GOLD_ORDER: tuple[str, ...] = ("hero1_ppi", "gp_ppi", "mv_ppi", "gold_only")
"""With current gold in both rounds: the first of these both rounds can compute is the recommended difference, the
posterior the calibration's checks choose first (:func:`heroeval.choice.with_gold.gold_order`)."""

Key = tuple[str, float | None]


def recommend_difference(
    round_a: AnnotationSet,
    round_b: AnnotationSet,
    calibration: Calibration,
    rec_a: Recommendation,
    rec_b: Recommendation,
    *,
    exclude_new_labelers: bool = False,
    rule: AutoRule | None = None,
    pairing: Pairing | None = None,
) -> DifferenceRecommendation:
    """The difference ``A - B`` to report, and why (module docstring).

    ``rec_a`` and ``rec_b`` are each round's own recommendation (:func:`heroeval.choice.recommend`, or
    :func:`heroeval.choice.with_gold.recommend_with_gold` for a round with gold), the answers ``hero estimate``
    gives the rounds: their candidates' estimates are subtracted here, so every candidate difference uses the
    same fits as the rounds' own answers. ``calibration`` must carry the model checks those recommendations used.
    ``pairing``: the rounds' items paired by prompt (:mod:`heroeval.inference.pairing`), used in every candidate
    difference's current-item variance.
    """
    rule = DEFAULT_RULE if rule is None else rule
    if round_a.has_gold and round_b.has_gold:
        return _with_gold(round_a, round_b, calibration, rec_a, rec_b, exclude_new_labelers)
    checks = calibration.checks
    if checks is None:
        raise HeroEvalError("the recommended difference needs the model checks: calibrate with checks=True "
                            "(CLI: hero calibrate saves them) or pass the history")
    own_w = float(calibration.settings.get("history_weight", 1.0))
    mode = rule.rate_target
    rows_a = {(r["method"], r["history_weight"]): r for r in rec_a.table if "estimate" in r}
    rows_b = {(r["method"], r["history_weight"]): r for r in rec_b.table if "estimate" in r}
    comps: dict[Key, Comparison] = {}
    rows: list[dict[str, Any]] = []
    cache: dict[tuple[float, float], dict[str, dict[str, float]]] = {}
    shown = (*rule.candidates, *[m for m in REPORTED if m not in rule.candidates])
    for key, ra in rec_a.results.items():
        rb = rec_b.results.get(key)
        if rb is None or key[0] not in shown:
            continue
        try:
            c = difference(ra, rb, pairing)
        except HeroEvalError as exc:
            rows.append({"method": key[0], "history_weight": key[1], "skipped": str(exc)})
            continue
        comps[key] = c
        rows.append(_row(key, c, rows_a.get(key), rows_b.get(key), mode, cache, checks, round_a.n_items,
                         round_b.n_items))
    _vs_robust(rows, comps)
    dep = checks.dependence
    dependent = math.isfinite(dep.p_value) and dep.p_value < DEPENDENCE_ALPHA
    first: Key = ("hero_joint", own_w) if ("hero_joint", own_w) in comps else ("hero1", own_w)
    status = "unreliable" if "unreliable" in (rec_a.status, rec_b.status) else "ok"
    scored = [r for r in rows if r["method"] in rule.candidates and math.isfinite(r.get("predicted_rmse", math.nan))]
    if not scored:
        return _unscored(first, comps, rows, rec_a, rec_b)
    best, why, aware = _choose(scored, first, dependent, rec_a, rec_b, rule)
    key = (best["method"], best["history_weight"])
    c = comps[key]
    wtxt = f" (history weight {key[1]:g})" if key[1] is not None else ""
    dep_txt = (f"labelers agree beyond independence given gold (dependence test p = {dep.p_value:.2g})"
               if dependent else f"dependence test p = {dep.p_value:.2g}" if math.isfinite(dep.p_value)
               else "dependence not testable on the gold")
    reason = (f"{key[0]}{wtxt}: {why}; the paired mock-round error of its difference is {best['mock_bias']:+.3g} "
              f"± {best['mock_bias_se']:.2g} (the {checks.n_gold} held-out gold items weighted to A's rate "
              f"{best['rate_a']:.3g} and to B's {best['rate_b']:.3g}); {dep_txt}")
    se = c.standard_error
    if c.pairing is not None:
        reason += "; " + c.pairing.describe()
    bound = abs(best["mock_bias"]) + rule.bias_kappa * best["mock_bias_se"] if aware else 0.0
    tau2, dof = 0.0, math.inf
    spread = _spread(best, rule)
    if spread is not None:
        k, q, p, t2 = spread
        if rule.transport_level is not None and p < rule.transport_level and t2 > 0:
            tau2, dof = 2.0 * t2, float(k - 1)
            reason += (f"; past rounds: its error varied from round to round beyond their noise (Cochran's Q = "
                       f"{q:.3g} over {k} rounds, p = {p:.2g}), so the difference adds twice that variance "
                       f"({math.sqrt(tau2):.3g} in standard deviation) with Student's t on {k - 1} degrees of freedom")
        else:
            reason += (f"; past rounds: its error did not vary from round to round beyond their noise (Cochran's "
                       f"Q = {q:.3g} over {k} rounds, p = {p:.2g}); an error they share cancels in A - B")
    parts = [(c.estimate, se, bound, tau2, dof)]
    label = "bias-aware" if aware else "wald"
    if tau2 > 0:
        label = "bias-aware, with past rounds' spread" if aware else "t, with past rounds' spread"
    far = [x for x, rr in (("A", rec_a), ("B", rec_b)) if _too_far(rr, rule)]
    if status == "unreliable":
        which = " and ".join(x for x, rr in (("A", rec_a), ("B", rec_b)) if rr.status == "unreliable")
        reason += (f"; UNRELIABLE: round {which} is unreliable on its own (hero estimate says why), so neither is "
                   "this difference")
        if far:
            parts += [(r["estimate"], r["standard_error"],
                       abs(r["mock_bias"]) + rule.bias_kappa * r["mock_bias_se"], tau2, dof)
                      for r in scored if r is not best]
            label = "span of the candidates' bias-aware intervals"
            reason += (f"; round {' and '.join(far)}'s rate is too far from the gold's for the re-weighted gold to "
                       "judge the candidates, so the interval spans every candidate's bias-aware interval")
    if aware or tau2 > 0 or len(parts) > 1:
        c = replace(c, rule=DifferenceInterval(tuple(parts), label))
        if aware:
            plain = float(norm.ppf(0.975)) * se
            lo, hi = DifferenceInterval(((c.estimate, se, bound, 0.0, math.inf),)).interval(0.95)
            reason += (f"; the 95 % interval is bias-aware: it covers A - B whenever the difference's bias is at "
                       f"most {bound:.3g} (its paired mock-round error plus {rule.bias_kappa:g} standard error"
                       f"{'' if rule.bias_kappa == 1 else 's'} of it), which widens it from ± {plain:.3g} to "
                       f"± {(hi - lo) / 2:.3g}")
    if not math.isfinite(se):
        status = "unreliable" if status == "unreliable" else "boundary"
        reason += ("; no interval: a round's estimate is at 0 or 1, where the difference has no standard error; "
                   "each round's own one-sided bound (hero estimate) is the honest statement")
    return DifferenceRecommendation(key[0], key[1], c, reason, rows, status, rec_a, rec_b)


def _row(key: Key, c: Comparison, ra: Mapping[str, Any] | None, rb: Mapping[str, Any] | None, mode: str,
         cache: dict[tuple[float, float], dict[str, dict[str, float]]], checks: Any, n_a: int, n_b: int,
         ) -> dict[str, Any]:
    """A candidate difference's row: estimate, SE, interval, paired mock error at the two rounds' rates and the
    predicted RMSE of the difference (NaN when the mock rounds cannot judge it)."""
    ci = c.confidence_interval(0.95)
    vh = c.variance_history if math.isfinite(c.variance_history) else 0.0
    row: dict[str, Any] = {"method": key[0], "history_weight": key[1], "estimate": c.estimate,
                           "standard_error": c.standard_error, "ci_low": ci.low, "ci_high": ci.high,
                           "variance_history": vh, "a": c.a.estimate, "b": c.b.estimate,
                           "predicted_rmse": math.nan}
    if ra is None or rb is None or not math.isfinite(c.standard_error):
        return row
    rate_a, rate_b = float(ra.get(f"rate_{mode}", math.nan)), float(rb.get(f"rate_{mode}", math.nan))
    if not (math.isfinite(rate_a) and math.isfinite(rate_b)):
        return row
    if (rate_a, rate_b) not in cache:
        cache[(rate_a, rate_b)] = paired_mock_difference(checks, rate_a, rate_b)
    pm = cache[(rate_a, rate_b)].get(str(ra["mock_key"]))
    if pm is None or not math.isfinite(pm["bias"]):
        return row
    sd = math.sqrt(pm["bias_se"] ** 2 + vh)
    bse_a, bse_b = float(ra[f"bias_se_{mode}"]), float(rb[f"bias_se_{mode}"])
    v = (bse_a**2 * float(ra[f"n_eff_{mode}"]) / max(n_a, 1) + bse_b**2 * float(rb[f"n_eff_{mode}"]) / max(n_b, 1)
         + vh)
    row.update({"rate_a": rate_a, "rate_b": rate_b, "mock_bias": pm["bias"], "mock_bias_se": sd,
                "mock_vs_robust": pm["vs_robust"], "vs_robust_se_items": pm["vs_robust_se"],
                "n_eff_a": pm["n_eff_a"], "n_eff_b": pm["n_eff_b"],
                "predicted_rmse": math.sqrt(max(pm["bias"] ** 2 - sd * sd, 0.0) + v) if math.isfinite(v) else math.nan,
                "past_error": ra.get("past_error") or [], "past_error_se": ra.get("past_error_se") or [],
                "past_calib_var": ra.get("past_calib_var") or []})
    return row


def _vs_robust(rows: list[dict[str, Any]], comps: Mapping[Key, Comparison]) -> None:
    """Each row's test against Rogan–Gladen's difference on the same mock items: ``bias_z``, the larger of
    ``|d| / s_d`` and ``|d - d_RG| / s``."""
    ref = next((r for r in rows if r["method"] == ROBUST_REFERENCE and "mock_bias" in r), None)
    for r in rows:
        if "mock_bias" not in r:
            continue
        zs = [abs(r["mock_bias"]) / r["mock_bias_se"] if r["mock_bias_se"] > 0 else
              (math.inf if r["mock_bias"] != 0 else 0.0)]
        vs, vs_se = r.get("mock_vs_robust", math.nan), r.get("vs_robust_se_items", math.nan)
        if ref is not None and r is not ref and math.isfinite(vs) and math.isfinite(vs_se):
            s = math.sqrt(vs_se**2 + r["variance_history"] + ref["variance_history"])
            zs.append(abs(vs) / s if s > 0 else (math.inf if vs != 0 else 0.0))
        r["bias_z"] = max(zs)


def _choose(scored: list[dict[str, Any]], first: Key, dependent: bool, rec_a: Recommendation,
            rec_b: Recommendation, rule: AutoRule) -> tuple[dict[str, Any], str, bool]:
    """The chosen row, the rule's words, and whether its interval is bias-aware (module docstring)."""
    crit = float(norm.ppf(1 - BIAS_TEST_ALPHA / 2))
    by_mse = min(scored, key=lambda r: (r["predicted_rmse"], 0 if (r["method"], r["history_weight"]) == first else 1))
    default = next((r for r in scored if (r["method"], r["history_weight"]) == first), None)
    if dependent:
        return by_mse, (f"labelers err together, so the likelihood methods' independence model is wrong here; among "
                        f"the candidates, {by_mse['method']} had the smallest predicted error of the difference on "
                        f"the paired mock rounds (RMSE {by_mse['predicted_rmse']:.3g})"), True
    if default is None or default.get("bias_z", 0.0) > crit:
        return by_mse, (f"{first[0]}'s difference is biased on the paired mock rounds (level {BIAS_TEST_ALPHA:g}); "
                        f"among the candidates, {by_mse['method']} had the smallest predicted error of the difference "
                        f"(RMSE {by_mse['predicted_rmse']:.3g})"), True
    if rule.bias_aware == "always":
        return default, f"{first[0]}'s difference shows no significant bias on the paired mock rounds", True
    if default["bias_z"] > float(norm.ppf(1 - rule.aware_level / 2)):
        return default, (f"{first[0]}'s difference shows no bias on the paired mock rounds significant at "
                         f"{BIAS_TEST_ALPHA:g}, enough to switch, but one significant at {rule.aware_level:g} "
                         f"(z = {default['bias_z']:.2f}), enough to widen"), True
    if rule.shift_level is not None:
        zc = float(norm.ppf(1 - rule.shift_level / 2))
        moved = [x for x, rr in (("A", rec_a), ("B", rec_b)) if (z := rate_shift_z(rr.table)) is not None and z[0] > zc]
        if moved:
            return default, (f"{first[0]}'s difference shows no significant bias on the paired mock rounds, but "
                             f"round {' and '.join(moved)}'s rate is far from the gold's (rate-shift test at level "
                             f"{rule.shift_level:g}): the re-weighted gold is too thin there to rule a bias out"), True
    return default, (f"{first[0]}'s difference shows no significant bias on the paired mock rounds (level "
                     f"{BIAS_TEST_ALPHA:g})"), False


def _spread(row: Mapping[str, Any], rule: AutoRule) -> tuple[int, float, float, float] | None:
    """The past-round spread test of the chosen row (:func:`transport_spread`), or None without past rounds."""
    errs = row.get("past_error") or []
    if len(errs) < 2:
        return None
    vh = float(row.get("variance_history", 0.0))
    cvs = row.get("past_calib_var") or [None] * len(errs)
    extra = [vh if v is None or not math.isfinite(v) else float(v) for v in cvs]
    k, q, p, tau2 = transport_spread(errs, row["past_error_se"], extra)
    return None if k < 2 or not math.isfinite(q) else (k, q, p, tau2)


def _too_far(rec: Recommendation, rule: AutoRule) -> bool:
    """The round's rate is too far from the gold's for the re-weighted gold to judge its chosen candidate."""
    row = next((r for r in rec.table if (r.get("method"), r.get("history_weight")) == (rec.method, rec.history_weight)
                and "estimate" in r), None)
    if row is None:
        return rec.status == "unreliable"
    return float(row.get(f"n_eff_{rule.rate_target}", math.inf)) < rule.min_effective_gold


def _unscored(first: Key, comps: Mapping[Key, Comparison], rows: list[dict[str, Any]], rec_a: Recommendation,
              rec_b: Recommendation) -> DifferenceRecommendation:
    """No candidate difference could be judged on the mock rounds: the default, unreliable, spanning every
    candidate difference's own interval."""
    if not comps:
        raise HeroEvalError("no candidate difference could be computed for these rounds: "
                            + "; ".join(f"{r['method']}: {r['skipped']}" for r in rows if "skipped" in r))
    key = first if first in comps else next(iter(comps))
    c = comps[key]
    parts = [(x.estimate, x.standard_error, 0.0, 0.0, math.inf) for x in comps.values()
             if math.isfinite(x.estimate) and math.isfinite(x.standard_error)]
    if parts:
        c = replace(c, rule=DifferenceInterval(tuple(parts), "span of the candidates' intervals"))
    reason = (f"{key[0]} by default: the mock rounds could not judge any candidate difference; UNRELIABLE: without "
              "enough gold the checks cannot tell whether the labelers' model holds, so the interval spans every "
              "candidate difference's interval")
    return DifferenceRecommendation(key[0], key[1], c, reason, rows, "unreliable", rec_a, rec_b)


def _with_gold(round_a: AnnotationSet, round_b: AnnotationSet, calibration: Calibration, rec_a: Recommendation,
               rec_b: Recommendation, exclude_new_labelers: bool) -> DifferenceRecommendation:
    """Both rounds have current gold: the first prediction-powered difference both give, in the order of
    :func:`heroeval.choice.with_gold.gold_order` (the calibration's predictor first, as each round's own estimate)."""
    why: list[str] = []
    for m in gold_order(choose_predictor(calibration)):
        got: list[EstimateResult] = []
        for r in (round_a, round_b):
            res, skipped = gold_estimates(r, calibration, [m], exclude_new_labelers=exclude_new_labelers,
                                          skip_errors=True)
            if m in res:
                got.append(res[m])
            else:
                why.append(f"{m}: {skipped.get(m, 'not computed')}")
        if len(got) == 2:
            c = difference(got[0], got[1])
            reason = (f"{m}: both rounds have expert labels on a random sample of their items, so the difference of "
                      "the rounds' gold-rectified estimates is unbiased whatever the labelers do (each round's own "
                      f"gold sample; Student's t at {c.df:.3g} Welch–Satterthwaite degrees of freedom)"
                      + ("; " + "; ".join(why) if why else ""))
            row = {"method": m, "history_weight": None, "estimate": c.estimate, "standard_error": c.standard_error}
            return DifferenceRecommendation(m, None, c, reason, [row], "ok", rec_a, rec_b)
    raise HeroEvalError("no estimate with current gold could be computed for both rounds: " + "; ".join(why))
