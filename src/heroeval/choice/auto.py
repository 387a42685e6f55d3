"""The recommended estimate (``method="auto"``): which candidate to report for this round, and why.

:func:`recommend` gives every candidate an estimated mean squared error on the
current round from the model checks' mock rounds (:mod:`heroeval.checks`).
When the dependence test rejects independence (the likelihood methods'
independence model is then known to be wrong) it takes the smallest;
otherwise it keeps HERO joint unless its mock-round error, or its paired
difference from the Rogan–Gladen estimate on the same items, is significant
at 1 %, and then takes the smallest estimated MSE. The interval is bias-aware
when the checks distrust the chosen model or when the round's rate is far
from the gold's (:class:`AutoRule`), and carries the history's own
round-to-round transport error when the chosen method missed past rounds
(histories with several rounds holding gold).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.stats import norm

from heroeval.checks.model_checks import (
    BIAS_TEST_ALPHA,
    CANDIDATES,
    DEPENDENCE_ALPHA,
    ROBUST_REFERENCE,
    mock_key,
    past_round_errors,
    rate_matched_mock,
    run_checks,
    transport_excess,
)
from heroeval.choice.rounds import choose_by_rounds, rounds_recommendation
from heroeval.choice.settle import settle_sentence
from heroeval.errors import ConvergenceWarning, HeroEvalError
from heroeval.estimators.inversion import InversionTest
from heroeval.estimators.misclassification import rogan_gladen
from heroeval.estimators.records import Recommendation
from heroeval.estimators.registry import estimate_methods
from heroeval.estimators.results import EstimateResult
from heroeval.inference.bias_aware import BiasAwareTest, PredictiveTest, bias_aware_cv
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.checks_record import ModelChecks
from heroeval.stage_a.fit import fit_stage_a
from heroeval.stage_a.settings import EMSettings, em_settings_of

__all__ = ["DEFAULT_RULE", "AutoRule", "Recommendation", "bias_bound", "choose", "past_round_transport",
           "rate_shift_z", "recommend", "transport_test", "with_checks"]

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
    rule: AutoRule | None = None,
    computed: Mapping[str, EstimateResult] | None = None,
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

    The interval is the chosen method's own, unless :func:`choose` finds
    reason to distrust its model: the dependence test rejected, the
    default's mock bias was significant, or (HERO joint kept) the round's
    rate is far from the gold's by :func:`rate_shift_z` at
    ``rule.shift_level``. Then it is bias-aware with the bound
    :func:`bias_bound`, and the reason says which of the three fired. A
    round too far from the gold's rate for the re-weighted gold to judge
    (fewer than ``rule.min_effective_gold`` effective items) is
    ``"unreliable"``, with the span of every candidate's bias-aware
    interval (docs/research/robustness.md, section 7, measures the coverage
    that results).

    When the history holds several rounds with gold, the checks also
    estimated each past round with its gold left out of Stage A
    (``ModelChecks.rounds``). If the chosen method missed them by more than
    their noise and the bias its interval allows (:func:`transport_test`, at
    ``rule.transport_level``), rounds differ in ways the gold of the others
    does not see: the round is ``"unreliable"``, and the interval adds the
    excess (a random-effects prediction interval,
    :class:`~heroeval.inference.bias_aware.PredictiveTest`). The choice of
    the method does not change.

    ``computed`` holds estimates the caller has already made of ``current``
    with ``calibration`` under the same new-labeler rule (:func:`heroeval.estimate`
    with ``method="all", recommend=True``): those candidates at the
    calibration's own weight are taken from it rather than run again.
    """
    rule = DEFAULT_RULE if rule is None else rule
    rec = _recommend(current, calibration, exclude_new_labelers, candidates, rule, computed)
    own_w = float(calibration.settings.get("history_weight", 1.0))
    if (calibration.history is None and rec.method == "hero1" and rec.history_weight in (None, own_w)
            and "hero_joint" in candidates):
        rec = replace(rec, reason=rec.reason + STAND_IN)
    return rec


def with_checks(calibration: Calibration) -> Calibration:
    """The calibration with its model checks: its own, or computed now from its history (started from its fit).

    :class:`HeroEvalError` when it has neither (a calibration file saved without checks)."""
    if calibration.checks is not None:
        return calibration
    if calibration.history is None:
        raise HeroEvalError(
            "method='auto' needs the model checks: calibrate with checks=True (CLI: hero calibrate "
            "saves them) or pass the history"
        )
    checks = run_checks(calibration.history, em_settings=em_settings_of(calibration.settings), start=calibration)
    return replace(calibration, checks=checks)


STAND_IN = ("; hero1 stands in for hero_joint here: hero_joint refits Stage A with this round and needs the "
            "history itself, which a calibration file does not hold (given the history instead, hero_joint, "
            "judged by the same HERO-1 mock rounds, takes this place)")
"""Appended to the reason when the recommendation is HERO-1 because only a calibration was given: why the same
round with its history recommends ``hero_joint`` instead (issue #38)."""


def _recommend(current: AnnotationSet, calibration: Calibration, exclude_new_labelers: bool,
               candidates: Sequence[str], rule: AutoRule, computed: Mapping[str, EstimateResult] | None,
               ) -> Recommendation:
    cal = with_checks(calibration)
    checks = cal.checks
    assert checks is not None
    hist = cal.history
    own_w = float(cal.settings.get("history_weight", 1.0))
    # HERO-1 at w = 0 is gold-only maximum likelihood without smoothing: not a candidate unless it is the user's own
    weights = (sorted({own_w, 1.0} | ({checks.chosen_weight} if checks.chosen_weight > 0 else set()))
               if hist is not None else [own_w])
    cals = {own_w: cal}
    rows: list[dict[str, Any]] = []
    results: dict[tuple[str, float | None], EstimateResult] = {}
    if tuple(candidates) != CANDIDATES:
        rule = replace(rule, candidates=tuple(candidates))
    for m in (*rule.candidates, *[x for x in REPORTED if x not in rule.candidates]):
        ws: list[float | None] = list(weights) if m == "hero1" else [own_w] if m == "hero_joint" else [None]
        for w in ws:
            if m == "hero_joint" and (hist is None or w == 0.0):
                continue
            if w is not None and w not in cals:
                assert hist is not None
                s = cal.settings
                # the same refit for every round made with this calibration: one token, so that two rounds'
                # estimates at this weight share their history terms (a difference subtracts them)
                cals[w] = replace(fit_stage_a(hist, history_weight=w, em=EMSettings.from_dict(s)),
                                  token=f"{cal.token}@w={w!r}")
            c_use = cals[own_w if w is None else w]
            if computed is not None and m in computed and w in (None, own_w):
                r: EstimateResult | None = computed[m]  # the caller's estimate: the same fit, not run again
            else:
                r = _candidate(current, c_use, m, w, exclude_new_labelers, rows)
            if r is None:
                continue
            results[(m, w)] = r
            rows.append(_candidate_row(m, w, r, checks))
    robust_eb: EstimateResult | None = None
    if (ROBUST_REFERENCE, None) in results:
        try:
            robust_eb = rogan_gladen(current, cal, shrink="eb", exclude_new_labelers=exclude_new_labelers)
        except (HeroEvalError, ValueError, ArithmeticError):  # an unusable target: judged at the other rates
            robust_eb = None
    _rate_match(rows, checks, {"robust": results.get((ROBUST_REFERENCE, None)), "robust_eb": robust_eb})
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
    dependent = math.isfinite(dep.p_value) and dep.p_value < DEPENDENCE_ALPHA
    choice = choose(rows, dependent=dependent, first=first, n_current=current.n_items, rule=rule)
    rc = (choose_by_rounds(rows, rule.round_candidates, rule.rounds_min, first)
          if rule.rounds_min is not None else None)
    if rc is not None:  # the history's own rounds judge the candidates (heroeval.choice.rounds)
        return rounds_recommendation(rc, results, rows, dep_txt)
    if choice is None:
        return _unscored_recommendation(current, cal, first, own_w, results, rows, checks, exclude_new_labelers)
    best, rule_txt, bias_aware = choice
    m, w = best["method"], best["history_weight"]
    r = results[(m, w)]
    wtxt = f" (history weight {w:g})" if w is not None else ""
    where = _where_text(best, rule)
    reason = (f"{m}{wtxt}: {rule_txt}; its mock-round bias {best['mock_bias']:+.3g} ± {best['mock_bias_se']:.2g} "
              f"({where}) over {checks.folds} folds of {checks.n_gold} gold items; {dep_txt}")
    h1 = next((x for x in rows if x["method"] == "hero1" and x["history_weight"] == 1.0 and "bias_flagged" in x),
              None)
    if h1 is not None and h1 is not best and h1["bias_flagged"]:
        reason += (f"; the paper's HERO-1 is biased on the mock rounds ({h1['mock_bias']:+.3g} ± "
                   f"{h1['mock_bias_se']:.2g})")
    status = "ok"
    if bias_aware:
        bound = bias_bound(best, rule)
        r = _with_bias_bound(r, bound)
        se = best["standard_error"]
        plain = float(norm.ppf(0.975)) * se
        wide = se * bias_aware_cv(bound / se) if se > 0 else bound
        why_aware = {"model": "; because the checks find the labelers' model wrong here",
                     "bias": "; because that bias is significant at the weaker level",
                     "shift": "; because the rate moved that far",
                     "always": "; by the rule's setting (bias_aware='always')"}[best.get("aware_why", "model")]
        reason += why_aware + (
            f", the 95 % interval is bias-aware: it covers the rate whenever this estimate's bias is at most "
            f"{bound:.3g} (its mock-round bias plus {rule.bias_kappa:g} standard error"
            f"{'' if rule.bias_kappa == 1 else 's'} of it), which widens it "
            f"from ± {plain:.3g} to ± {wide:.3g}")
    pt: PredictiveTest | None = None
    tr = past_round_transport(best, bias_aware, rule)
    if tr is not None:
        k, _q, p, tau2, allowed = tr
        rms = math.sqrt(float(np.mean(np.square(best["past_error"]))))
        who = m if m != "hero_joint" else f"HERO-1 at weight {w:g} (by whose likelihood hero_joint is judged)"
        what = (f"; past rounds: with each of the history's {k} rounds with gold left out of Stage A in turn, "
                f"{who} missed its gold rate by {rms:.3g} (root mean square"
                + (f"; the interval allows a bias of {allowed:.3g}" if allowed else "") + ")")
        both = "that and " if allowed else ""
        pt = _predictive(best, tr, rule)
        if pt is not None:
            before = r.confidence_interval(0.95)
            r = replace(r, test=pt,
                        details={**r.details, "transport_sd": math.sqrt(tau2), "transport_p": p},
                        notes=(*r.notes, f"past-round transport error {math.sqrt(tau2):.3g} added in quadrature"))
            after = r.confidence_interval(0.95)
            status = "unreliable"
            reason += (what + f", more than {both}their noise explain{'' if allowed else 's'} (chi-squared "
                       f"p = {p:.2g}, level {rule.transport_level:g}); UNRELIABLE: rounds differ in ways the other "
                       "rounds' gold does not see, so this one may be missed too; the interval adds that "
                       f"transport error ({math.sqrt(tau2):.3g}) to the standard error in quadrature, with a t "
                       f"critical value for a variance estimated from {k} rounds, which widens it from "
                       f"{before.high - before.low:.3g} to {after.high - after.low:.3g}. "
                       + settle_sentence(current, cal, results[(m, w)]))
        elif rule.transport_level is None:
            reason += what + (f" (chi-squared p = {p:.2g}, excess {math.sqrt(tau2):.2g}): reported, not applied "
                              "(transport_level=None)")
        elif p < rule.transport_level:
            reason += what + (f"; some rounds beyond {both}their noise (chi-squared p = {p:.2g}) but no excess "
                              "on average (its mean square is below their noise's): nothing added")
        else:
            reason += what + f", within {both}their noise (chi-squared p = {p:.2g})"
    elif checks.rounds:
        reason += (f"; past rounds: not checked for {m} at this weight (the checks estimated past rounds at the "
                   f"weights {sorted({x['history_weight'] for x in checks.rounds if x['history_weight'] is not None})}"
                   ")")
    n_eff = best.get(f"n_eff_{rule.rate_target}", math.inf)
    if n_eff < rule.min_effective_gold:
        status = "unreliable"
        r = _hull(r, results, rows, rule, pt)
        reason += (f"; UNRELIABLE: this round's rate is so far from the gold's ({best['gold_rate']:.3g}) that "
                   f"the re-weighted gold counts as only {n_eff:.0f} items (fewer than "
                   f"{rule.min_effective_gold:g}), too few to judge any candidate at this rate; the interval "
                   "reported spans every candidate's bias-aware interval"
                   + (" and the past rounds' prediction interval" if pt is not None else "") + ". "
                   + settle_sentence(current, cal, results[(m, w)]))
    return Recommendation(m, w, r, reason, rows, status, dict(results))


REPORTED: tuple[str, ...] = ("majority_vote", "dawid_skene")
"""Methods whose rows the recommendation's table always shows (judged on the mock rounds) but that are not
chosen unless an :class:`AutoRule` lists them among its candidates."""

RATE_TARGETS = ("robust", "robust_eb", "own", "gold")


@dataclass(frozen=True)
class AutoRule:
    """The constants of the recommended estimate's rule (docs/research/robustness.md, "Rate shift").

    Attributes
    ----------
    rate_target : {"robust", "own", "gold"}
        The rate at which every candidate's mock-round error is measured: the
        held-out gold items are weighted by class to it. ``"robust"``: the
        dependence-robust Rogan–Gladen estimate of this round's rate;
        ``"robust_eb"``: the same with the labelers' gold rates shrunk
        towards the pool (``rogan_gladen(shrink="eb")``); ``"own"``: the candidate's own estimate; ``"gold"``: no weighting
        (the gold's own rate, the rule before rate matching). Either
        estimate is shrunk towards the gold's rate as far as the evidence for
        a shift is weak (positive-part James–Stein: ``lambda = max(0, 1 -
        se^2 / d^2)``, ``d`` the estimate's distance from the gold's rate).
    bias_kappa : float
        When the checks find the chosen candidate's model wrong, its interval
        is bias-aware with bias bound ``|b| + bias_kappa * s_b`` (``b`` its
        mock-round bias, ``s_b`` that bias's standard error).
    candidates : tuple of str
        Methods chosen among (:data:`CANDIDATES`; ``"majority_vote"`` and
        ``"dawid_skene"`` may be added).
    min_effective_gold : float
        Below this effective number of re-weighted gold items the round's rate
        is too far from the gold's to judge the candidates: the recommendation
        says "unreliable".
    bias_aware : {"flagged", "always"}
        ``"flagged"``: the interval is bias-aware when the checks find the
        chosen model wrong (dependence, or a significant mock bias of the
        default); ``"always"``: whenever a mock-round bias could be measured.
    aware_level : float
        With ``bias_aware="flagged"``, the level of the test that makes a kept
        default's interval bias-aware: its mock-round bias, or its difference
        from the Rogan–Gladen estimate there, significant at this level. The
        choice itself keeps the default unless that evidence is significant
        at :data:`~heroeval.checks.model_checks.BIAS_TEST_ALPHA` (1 %): a
        weaker test to widen than to switch, since a pretest at 1 % has
        little power against a bias of a few standard errors, and a plain
        interval that misses such a bias under-covers (the rate-shift study,
        docs/research/robustness.md section 7).
    shift_level : float or None
        With ``bias_aware="flagged"``, the level of the test of a rate shift
        that also makes a kept default's interval bias-aware: the
        Rogan–Gladen estimate of this round's rate against the gold's rate,
        ``z = |t_RG - ybar| / sqrt(se_RG^2 + ybar (1 - ybar) / n_gold)``.
        Far from the gold's rate the mock rounds re-weight few effective
        gold items, so their bias at this rate is measured too noisily for
        its absence to be concluded; the interval then carries the measured
        bound instead. ``None``: no such test.
    transport_level : float or None
        The level of the past-round check (histories with at least two
        rounds holding gold; :func:`past_round_transport`). When the chosen
        method missed the history's own rounds, each estimated with its gold
        left out of Stage A, by more than their noise explains at this level,
        the excess mean squared error ``tau2`` is added to the standard error
        in quadrature: rounds differ in ways the gold of the other rounds
        does not see (another content, another labeler behaviour), and the
        next round may too. ``None``: the check is reported, never applied.
    rounds_min : int or None
        With at least this many past rounds judged by the past-round check,
        the out-of-round evidence decides (:mod:`heroeval.choice.rounds`): the
        candidate of ``round_candidates`` with the smallest estimated error on
        a new round, with a prediction interval over rounds; the mock rounds
        and ``transport_level`` then play no part. ``None``: never. Five, by
        leave-one-set-out on the grouped benchmark (in-sample geometric-mean
        RMSE ratio 1.32 against 1.34 with three: a small gain; with fewer
        rounds the excess variance over rounds is barely estimated).
    round_candidates : tuple of str
        The methods the out-of-round evidence chooses among: the four
        history-based candidates. Majority vote and current-only Dawid–Skene
        are judged on the past rounds and reported, not chosen. Majority
        vote's bias is a function of the round's rate (``t (Se_mv - 1) +
        (1 - t)(1 - Sp_mv)``), so its errors on past rounds at other rates do
        not measure it at this one: on the grouped benchmark's splits with it
        eligible, the recommended estimate's RMSE was 3.2 times the best fixed
        method's on mre_treat's relations (1.2 without) and 1.55 on
        geometric mean over the sets (1.32 without; every leave-one-set-out
        fold chose without it; ``benchmarks/grouped_loso.py``). Current-only
        Dawid–Skene is fitted on a past round to that round's gold items alone
        (a few dozen at rho = 0.1), where it can flip (an error of -0.32 on
        triviaqa's gpt-4t round, whose 400 items it fits well), so its past
        errors do not measure it at the current round's size.
    """

    rate_target: str = "robust"
    bias_kappa: float = 1.0
    candidates: tuple[str, ...] = CANDIDATES
    min_effective_gold: float = 20.0
    bias_aware: str = "flagged"
    aware_level: float = BIAS_TEST_ALPHA
    shift_level: float | None = 0.001
    transport_level: float | None = 0.05
    rounds_min: int | None = 5
    round_candidates: tuple[str, ...] = CANDIDATES

    def __post_init__(self) -> None:
        if self.rate_target not in RATE_TARGETS:
            raise HeroEvalError(f"rate_target must be one of {RATE_TARGETS}, got {self.rate_target!r}")
        if self.bias_aware not in ("flagged", "always"):
            raise HeroEvalError(f"bias_aware must be 'flagged' or 'always', got {self.bias_aware!r}")
        if not (math.isfinite(self.bias_kappa) and self.bias_kappa >= 0):
            raise HeroEvalError(f"bias_kappa must be a number >= 0, got {self.bias_kappa!r}")
        if not (0.0 < self.aware_level < 1.0):
            raise HeroEvalError(f"aware_level must be in (0, 1), got {self.aware_level!r}")
        if self.shift_level is not None and not (0.0 < self.shift_level < 1.0):
            raise HeroEvalError(f"shift_level must be None or in (0, 1), got {self.shift_level!r}")
        if self.rounds_min is not None and not (isinstance(self.rounds_min, int) and self.rounds_min >= 2):
            raise HeroEvalError(f"rounds_min must be None or an integer >= 2, got {self.rounds_min!r}")
        if self.transport_level is not None and not (0.0 < self.transport_level < 1.0):
            raise HeroEvalError(f"transport_level must be None or in (0, 1), got {self.transport_level!r}")


DEFAULT_RULE = AutoRule()


def _candidate_row(m: str, w: float | None, r: EstimateResult, checks: ModelChecks) -> dict[str, Any]:
    """A candidate's row: its estimate and interval, and its mock-round error at the gold's rate."""
    # hero_joint rests on HERO-1's likelihood: it is judged by HERO-1's mock round at the same weight
    mrow = checks.mock_row("hero1" if m == "hero_joint" else m, w)
    se = r.standard_error
    vh = r.variance_history if math.isfinite(r.variance_history) else 0.0
    ci = r.confidence_interval(0.95)

    def g(k: str) -> float:
        return float(mrow.get(k, math.nan)) if mrow else math.nan

    gold_rate = float(np.mean(checks.items["y"])) if checks.items.get("y") else math.nan
    key = mock_key("hero1" if m == "hero_joint" else m, w if m in ("hero1", "hero_joint") else None)
    past_e, past_se, past_cv = past_round_errors(checks, key)
    return {"method": m, "history_weight": w, "estimate": r.estimate,
            "past_error": past_e.tolist(), "past_error_se": past_se.tolist(),
            "past_calib_var": [None if not math.isfinite(v) else float(v) for v in past_cv],
            "past_rounds": [str(x["round"]) for x in checks.rounds
                            if mock_key(x["method"], x["history_weight"]) == key],
            "past_n_items": [int(x["n_items"]) for x in checks.rounds
                             if mock_key(x["method"], x["history_weight"]) == key],
            "standard_error": se if se is not None else math.nan, "ci_low": ci.low, "ci_high": ci.high,
            "variance_history": vh, "gold_rate": gold_rate,
            "mock_key": key,
            "mock_items": g("n_items"), "bias_gold": g("bias"), "bias_se_gold": g("bias_se"),
            "vs_robust_gold": g("vs_robust"), "vs_robust_se_gold": g("vs_robust_se"),
            "rate_gold": gold_rate, "n_eff_gold": g("n_items")}


def _shrunk_rate(est: float, se: float, gold_rate: float) -> tuple[float, float]:
    """``est`` shrunk towards ``gold_rate``: ``gold_rate + lambda (est - gold_rate)``, ``lambda = max(0, 1 - se^2/d^2)``."""
    if not (math.isfinite(est) and math.isfinite(se) and math.isfinite(gold_rate)):
        return gold_rate, 0.0
    d = min(max(est, 0.0), 1.0) - gold_rate
    lam = max(0.0, 1.0 - se * se / (d * d)) if d != 0 else 0.0
    return gold_rate + lam * d, lam


def _rate_match(rows: list[dict[str, Any]], checks: ModelChecks, robust: Mapping[str, EstimateResult | None]) -> None:
    """Add every row's mock error at each target rate of :data:`RATE_TARGETS` (the gold's when not computable)."""
    for row in rows:
        if "estimate" not in row:
            continue
        for mode in RATE_TARGETS[:-1]:
            for k in ("bias", "bias_se", "vs_robust", "vs_robust_se", "rate", "n_eff"):
                row[f"{k}_{mode}"] = row[f"{k}_gold"]
            row[f"lambda_{mode}"] = 0.0
    if not checks.items.get("y"):
        return
    gold_rate = float(np.mean(checks.items["y"]))
    targets: dict[str, tuple[float, float]] = {}
    for mode, r in robust.items():
        if r is not None:
            targets[mode] = _shrunk_rate(r.estimate, r.standard_error, gold_rate)
    cache: dict[float, dict[str, dict[str, float]]] = {}
    for row in rows:
        if "estimate" not in row:
            continue
        targets["own"] = _shrunk_rate(row["estimate"], row["standard_error"], gold_rate)
        for mode, (rate, lam) in targets.items():
            if lam == 0.0:
                continue
            if rate not in cache:
                cache[rate] = rate_matched_mock(checks, rate)
            mm = cache[rate].get(row["mock_key"])
            if mm is None:
                continue
            row[f"bias_{mode}"], row[f"bias_se_{mode}"] = mm["bias"], mm["bias_se"]
            row[f"vs_robust_{mode}"], row[f"vs_robust_se_{mode}"] = mm["vs_robust"], mm["vs_robust_se"]
            row[f"rate_{mode}"], row[f"n_eff_{mode}"], row[f"lambda_{mode}"] = rate, mm["n_eff"], lam


def _where_text(row: Mapping[str, Any], rule: AutoRule) -> str:
    mode = rule.rate_target
    lam = row.get(f"lambda_{mode}", 0.0)
    if mode == "gold" or not lam:
        return f"at the gold's own rate {row['gold_rate']:.3g}"
    whose = {"robust": "Rogan–Gladen's estimate", "robust_eb": "Rogan–Gladen's estimate with shrunk gold rates",
             "own": "its own estimate"}[mode]
    return (f"with the gold weighted by class to this round's rate, {row[f'rate_{mode}']:.3g} ({whose}, shrunk "
            f"{1 - lam:.0%} towards the gold's {row['gold_rate']:.3g})")


def choose(
    rows: Sequence[dict[str, Any]], *, dependent: bool, first: tuple[str, float | None], n_current: int,
    rule: AutoRule = DEFAULT_RULE,
) -> tuple[dict[str, Any], str, bool] | None:
    """The rule of :func:`recommend` on a table of candidates; ``None`` when no candidate can be scored.

    A pure function of the rows (estimate, standard error, mock-round bias
    and its standard errors, history variance), so that the rule's constants
    can be judged again on stored tables (``benchmarks/auto_loso.py``).
    Adds ``mock_bias_se``, ``predicted_rmse`` and ``bias_flagged`` to every
    scored row. Returns the chosen row, the rule's words, and whether the
    interval must be bias-aware (the checks found the chosen model wrong).
    """
    scored = []
    mode = rule.rate_target
    for row in rows:
        if "estimate" not in row:
            continue
        row["mock_bias"], row["mock_vs_robust"] = row[f"bias_{mode}"], row[f"vs_robust_{mode}"]
        b, bse, vh = row["mock_bias"], row[f"bias_se_{mode}"], row["variance_history"]
        sb = math.sqrt(bse**2 + vh) if math.isfinite(bse) else math.nan
        row["mock_bias_se"] = sb
        se, est = row["standard_error"], row["estimate"]
        if not (math.isfinite(se) and math.isfinite(est) and math.isfinite(b) and math.isfinite(sb)):
            row["predicted_rmse"] = math.nan
            continue
        # error variance relative to the realised rate: the mock items' part scaled to this round's size
        b2 = max(b * b - sb * sb, 0.0)
        v_mock = bse**2 * row[f"n_eff_{mode}"] / max(n_current, 1)
        row["predicted_rmse"] = math.sqrt(b2 + v_mock + vh)
        if row["method"] in rule.candidates:
            scored.append(row)
    if not scored:
        return None
    level = BIAS_TEST_ALPHA
    crit = float(norm.ppf(1 - level / 2))
    vh_ref = next((row["variance_history"] for row in scored if row["method"] == ROBUST_REFERENCE), 0.0)
    for row in scored:
        vs, vs_se = row["mock_vs_robust"], row[f"vs_robust_se_{mode}"]
        if math.isfinite(vs) and math.isfinite(vs_se):
            row["mock_vs_robust_se"] = math.sqrt(vs_se**2 + row["variance_history"] + vh_ref)
        row["bias_z"] = _bias_z(row)
        row["bias_flagged"] = row["bias_z"] > crit
    default = next((r for r in scored if (r["method"], r["history_weight"]) == first), None)
    # ties: the default first, then the order of the rows
    order = {id(r): i for i, r in enumerate(scored)}
    by_mse = min(scored, key=lambda r: (r["predicted_rmse"], 0 if (r["method"], r["history_weight"]) == first
                                        else 1, order[id(r)]))
    for row in scored:
        row.pop("aware_why", None)
    if dependent:
        by_mse["aware_why"] = "model"
        return by_mse, (f"labelers err together, so the likelihood methods' independence model is wrong here; "
                        f"among the candidates, {by_mse['method']} had the smallest predicted error on the mock "
                        f"rounds (RMSE {by_mse['predicted_rmse']:.3g})"), True
    if default is not None and not default["bias_flagged"]:
        if rule.bias_aware == "always":
            default["aware_why"] = "always"
            return default, f"{first[0]} shows no significant bias on the mock rounds (level {level:g})", True
        if default["bias_z"] > float(norm.ppf(1 - rule.aware_level / 2)):
            default["aware_why"] = "bias"
            return (default, f"{first[0]} shows no bias on the mock rounds significant at {level:g}, enough to "
                    f"switch, but one significant at {rule.aware_level:g} (z = {default['bias_z']:.2f}), enough to "
                    "widen", True)
        shift = rate_shift_z(rows)
        if (rule.shift_level is not None and shift is not None
                and shift[0] > float(norm.ppf(1 - rule.shift_level / 2))):
            z, t, t_se, ybar = shift
            default["aware_why"] = "shift"
            return (default, f"{first[0]} shows no significant bias on the mock rounds (level {level:g}), but this "
                    f"round's rate (Rogan–Gladen {t:.3g} ± {t_se:.2g}) is far from the gold's {ybar:.3g} (rate-shift "
                    f"test z = {z:.2f}, level {rule.shift_level:g}): the mock rounds at this rate re-weight too few "
                    "gold items to rule a bias out", True)
        return default, f"{first[0]} shows no significant bias on the mock rounds (level {level:g})", False
    by_mse["aware_why"] = "model"
    return by_mse, (f"{first[0]} is biased on the mock rounds (level {level:g}); among the candidates, "
                    f"{by_mse['method']} had the smallest predicted error there (RMSE "
                    f"{by_mse['predicted_rmse']:.3g})"), True


def past_round_transport(row: Mapping[str, Any], bias_aware: bool, rule: AutoRule = DEFAULT_RULE,
                         ) -> tuple[int, float, float, float, float] | None:
    """The past-round check of the chosen row: ``(K, Q, p, tau2, allowed)`` (:func:`transport_excess`), or None.

    ``allowed`` is the error the interval already allows for: the row's bias bound (:func:`bias_bound`) when
    the interval is bias-aware, else 0; only past errors beyond it count. The calibration's part of each past
    round's variance counts as noise: the checks' ``calib_var`` where they computed it (from the other rounds'
    gold counts), else the row's own ``variance_history``. None when the history had no rounds to check. (Computed
    also when ``rule.transport_level`` is None, which reports the check without applying it.)
    """
    if not row.get("past_error"):
        return None
    allowed = bias_bound(row, rule) if bias_aware else 0.0
    if not math.isfinite(allowed):
        allowed = 0.0
    # each round's calibration variance where the checks computed it (from the other rounds' gold counts),
    # else this round's own (the calibration's part of the chosen estimate's variance)
    vh = float(row.get("variance_history", 0.0))
    cvs = row.get("past_calib_var") or [None] * len(row["past_error"])
    extra = [vh if v is None or not math.isfinite(v) else float(v) for v in cvs]
    k, q, p, tau2 = transport_excess(row["past_error"], row["past_error_se"], allowed, extra)
    if k == 0:
        return None
    return k, q, p, tau2, allowed


def transport_test(row: Mapping[str, Any], bias_aware: bool, rule: AutoRule = DEFAULT_RULE) -> PredictiveTest | None:
    """The chosen row's interval when the past-round check fires (``p < rule.transport_level`` and an excess
    ``tau2 > 0``): :class:`PredictiveTest` with the row's bias bound when the interval is bias-aware (else 0);
    None otherwise (the interval is then the bias-aware or the plain one)."""
    tr = past_round_transport(row, bias_aware, rule)
    return None if tr is None else _predictive(row, tr, rule)


def _predictive(row: Mapping[str, Any], tr: tuple[int, float, float, float, float], rule: AutoRule,
                ) -> PredictiveTest | None:
    """:func:`transport_test` from the row's :func:`past_round_transport` result ``tr``."""
    if rule.transport_level is None:
        return None
    k, _q, p, tau2, allowed = tr
    if not (tau2 > 0 and p < rule.transport_level):
        return None
    return PredictiveTest(float(row["estimate"]), float(row["standard_error"]), allowed, tau2, k)


def rate_shift_z(rows: Sequence[Mapping[str, Any]]) -> tuple[float, float, float, float] | None:
    """The test of a rate shift between the history's gold and this round: ``(z, t_RG, se_RG, ybar)``.

    ``z = |t_RG - ybar| / sqrt(se_RG^2 + ybar (1 - ybar) / n_gold)``, with
    ``t_RG`` the Rogan–Gladen estimate of this round's rate (clipped to
    [0, 1]; it does not lean on the independence model), ``se_RG`` its
    standard error, and ``ybar`` the rate of the ``n_gold`` held-out gold
    items, whose own sampling variance the denominator includes. ``None``
    when the Rogan–Gladen row or the gold is missing.
    """
    rg = next((r for r in rows if r.get("method") == ROBUST_REFERENCE and "estimate" in r), None)
    if rg is None:
        return None
    t, se = float(rg["estimate"]), float(rg["standard_error"])
    ybar, n = float(rg.get("gold_rate", math.nan)), float(rg.get("mock_items", math.nan))
    if not all(math.isfinite(x) for x in (t, se, ybar, n)) or n <= 0:
        return None
    t = min(max(t, 0.0), 1.0)
    sd = math.sqrt(se * se + ybar * (1.0 - ybar) / n)
    z = abs(t - ybar) / sd if sd > 0 else (math.inf if t != ybar else 0.0)
    return z, t, se, ybar


def _bias_z(row: Mapping[str, Any]) -> float:
    """The larger of ``|b| / s_b`` and ``|d| / s_d`` (``d`` the paired mock difference from Rogan–Gladen); 0 when
    neither is computable. The evidence that a candidate's model is wrong at this round's rate."""
    zs = [0.0]
    for k, ks in (("mock_bias", "mock_bias_se"), ("mock_vs_robust", "mock_vs_robust_se")):
        v, s = row.get(k, math.nan), row.get(ks, math.nan)
        if math.isfinite(v) and math.isfinite(s):
            zs.append(abs(v) / s if s > 0 else (math.inf if v != 0 else 0.0))
    return max(zs)


def bias_bound(row: Mapping[str, Any], rule: AutoRule = DEFAULT_RULE) -> float:
    """The bias bound of a candidate's bias-aware interval: ``|b| + kappa * s_b``."""
    return abs(float(row["mock_bias"])) + rule.bias_kappa * float(row["mock_bias_se"])


def _with_bias_bound(r: EstimateResult, bound: float) -> EstimateResult:
    se = r.standard_error
    test = BiasAwareTest(r.estimate, se if se is not None else math.nan, bound)
    return replace(r, test=test, details={**r.details, "bias_bound": bound},
                   notes=(*r.notes, f"bias-aware interval: bias bound {bound:.3g}"))


def _hull(r: EstimateResult, results: Mapping[tuple[str, float | None], EstimateResult],
          rows: Sequence[Mapping[str, Any]], rule: AutoRule, also: InversionTest | None = None) -> EstimateResult:
    """The chosen estimate with an interval spanning every scored candidate's bias-aware interval (and
    ``also``'s, the past rounds' prediction interval when it was applied)."""
    parts = hull_parts(rows, rule)
    if not parts:
        return r
    test = _HullTest(r.estimate, parts, also=also)
    return replace(r, test=test, notes=(*r.notes, "unreliable: interval spans every candidate's"))


def hull_parts(rows: Sequence[Mapping[str, Any]], rule: AutoRule = DEFAULT_RULE) -> list[tuple[float, float, float]]:
    """(estimate, standard error, bias bound) of every scored candidate: an unreliable round's interval spans their
    bias-aware intervals."""
    return [(rw["estimate"], rw["standard_error"], bias_bound(rw, rule)) for rw in rows
            if rw["method"] in rule.candidates and math.isfinite(rw.get("predicted_rmse", math.nan))]


def hull_interval(rows: Sequence[Mapping[str, Any]], rule: AutoRule = DEFAULT_RULE,
                  confidence_level: float = 0.95, also: InversionTest | None = None) -> tuple[float, float]:
    """The interval an unreliable round reports: the span of :func:`hull_parts`' bias-aware intervals (and of
    ``also``'s)."""
    return _HullTest(math.nan, hull_parts(rows, rule), also=also).interval(confidence_level)


@dataclass
class _HullTest(InversionTest):
    """The union of several bias-aware intervals (an unreliable round): the widest honest statement."""

    center: float
    parts: list[tuple[float, float, float]]
    label: str = "hull of bias-aware intervals"
    preferred: bool = True
    also: InversionTest | None = None

    def stat(self, mu0: float) -> float:  # pragma: no cover - the interval is closed-form
        return 0.0

    def interval(self, confidence_level: float, alternative: str = "two-sided") -> tuple[float, float]:
        ints = [BiasAwareTest(e, s, b).interval(confidence_level, alternative) for e, s, b in self.parts]
        if self.also is not None:
            ints.append(self.also.interval(confidence_level, alternative))
        return min(i[0] for i in ints), max(i[1] for i in ints)


def _unscored_recommendation(
    current: AnnotationSet, cal: Calibration, first: tuple[str, float | None], own_w: float,
    results: Mapping[tuple[str, float | None], EstimateResult], rows: list[dict[str, Any]], checks: ModelChecks,
    exclude_new_labelers: bool,
) -> Recommendation:
    """Too little gold to score any candidate: the default, flagged unreliable, with the candidates' hull."""
    r0 = results.get(first) or estimate_methods(current, cal, method="hero1", exclude_new_labelers=exclude_new_labelers)
    assert isinstance(r0, EstimateResult)
    if first not in results:
        first = ("hero1", own_w)
    why = "; ".join(checks.notes) or "no candidate could be scored on mock rounds"
    r = r0
    if any(k[0] in CANDIDATES and math.isfinite(x.confidence_interval(0.95).low) for k, x in results.items()):
        r = replace(r0, test=_SpanTest(r0.estimate, dict(results)),
                    notes=(*r0.notes, "unreliable: interval spans every candidate's"))
    reason = (f"{first[0]} by default: {why}; UNRELIABLE: without enough gold the checks cannot tell whether "
              "the labelers' model holds, so the interval reported spans every candidate's interval "
              "rather than trusting one model. " + settle_sentence(current, cal, r0))
    return Recommendation(first[0], own_w, r, reason, rows, "unreliable", dict(results))


@dataclass
class _SpanTest(InversionTest):
    """The union of the candidates' own intervals (too little gold to check any of them)."""

    center: float
    results: dict[tuple[str, float | None], EstimateResult]
    label: str = "span of the candidates' intervals"
    preferred: bool = True

    def stat(self, mu0: float) -> float:  # pragma: no cover - the interval is closed-form
        return 0.0

    def interval(self, confidence_level: float, alternative: str = "two-sided") -> tuple[float, float]:
        ints = []
        for k, x in self.results.items():
            if k[0] in CANDIDATES and math.isfinite(x.estimate):
                ci = x.confidence_interval(confidence_level, alternative=alternative)
                if math.isfinite(ci.low) and math.isfinite(ci.high):
                    ints.append((ci.low, ci.high))
        return min(i[0] for i in ints), max(i[1] for i in ints)



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
    return Recommendation(first[0], first[1], r, reason, rows, "ok", dict(results))
