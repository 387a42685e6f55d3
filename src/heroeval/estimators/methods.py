"""Estimators of the current round's gold rate: majority vote, Dawid–Skene, gold-proportion, HERO-1 and
HERO joint (HERO-2 in :mod:`~heroeval.estimators.control_variate`, Rogan–Gladen in
:mod:`~heroeval.estimators.misclassification`; the dispatch by name in :mod:`~heroeval.estimators.registry`)."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt

from heroeval.errors import (
    ConvergenceWarning,
    HeroEvalError,
)
from heroeval.estimators.common import (
    FloatArray,
    NewLabelerRule,
    ScoreInputs,
    TieRule,
    align,
    check_calibration,
    check_current,
    em_status,
    gold_count_variances,
    has_unknown,
    log_likelihood_ratios,
    new_labeler_rule,
    result_of,
    score_test,
    stage_a_influence,
)
from heroeval.estimators.inversion import BinomialScoreTest, ScoreTest
from heroeval.estimators.newlabelers import hero1_anchored
from heroeval.estimators.results import EstimateResult, Influence
from heroeval.estimators.score_equation import psi, solve_score
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a import scoring, two_coin
from heroeval.stage_a.calibration import Calibration, ConvergenceInfo
from heroeval.stage_a.fit import eb_prior_terms, settings_prior
from heroeval.stage_a.prior import EBPrior
from heroeval.stage_a.settings import StoppingRule, check_em_settings

__all__ = ["dawid_skene", "gold_proportion", "gold_proportion_rates", "gold_proportion_variances", "hero1", "hero_joint",
           "majority_vote"]


def majority_vote(
    current: AnnotationSet, *, tie: TieRule = "half", rng: np.random.Generator | int | None = None
) -> EstimateResult:
    """Share of items whose silver majority says 1.

    Each item's vote is 1 if more than half of its labels are 1 and 0 if
    fewer than half are; a tie counts as ``tie``: ``"half"`` (0.5, the
    default: deterministic and symmetric), ``"positive"`` (1), ``"negative"``
    (0) or ``"random"`` (a fair coin drawn with ``rng``).

    This estimates the rate of the majority label, not the gold rate: it is
    biased whenever labelers' errors are asymmetric.

    Examples
    --------
    >>> import heroeval as he
    >>> cur = he.AnnotationSet.from_arrays([1, 1, 2, 2], ["a", "b", "a", "b"], [1, 1, 1, 0])
    >>> he.majority_vote(cur).estimate   # item 1 votes 1, item 2 ties (0.5)
    0.75
    """
    data = check_current(current)
    if tie not in ("half", "positive", "negative", "random"):
        raise HeroEvalError(f"tie must be 'half', 'positive', 'negative' or 'random', got {tie!r}")
    ones = np.add.reduceat(data.label.astype(np.int64), data.item_ptr[:-1])
    n = np.diff(data.item_ptr)
    vote = np.where(2 * ones > n, 1.0, 0.0)
    ties = 2 * ones == n
    if tie == "half":
        vote[ties] = 0.5
    elif tie == "positive":
        vote[ties] = 1.0
    elif tie == "random":
        gen = np.random.default_rng(rng)
        vote[ties] = gen.integers(0, 2, size=int(ties.sum()))
    return result_of(
        "majority_vote",
        vote.mean(),
        data,
        details={"tie_rule": tie, "n_ties": int(ties.sum())},
        notes=("its interval is for the majority-label rate, not the gold rate",),
        influence=Influence(vote - vote.mean()),
        test=BinomialScoreTest(float(vote.mean()), data.n_items),
    )


def _fit_influence(d: two_coin.Design, fit: two_coin.EMFit, index: int,
                   extra: tuple[npt.NDArray[np.int64], FloatArray] | None = None) -> FloatArray:
    """Per-item influence ``[H^-1 s_r]_index`` of one parameter of an EM fit (sums to the sandwich); ``extra``,
    ``(rows, E)``, adds ``E``'s rows to those items' scores (Stage A's empirical-Bayes prior, :func:`_eb_extra`)."""
    si = scoring.scores_and_information(d, fit.alpha, fit.beta, fit.prev, fit.gamma, gram=False)
    Hinv = scoring.inverse_information(si)
    out: FloatArray = np.asarray(si.scores @ Hinv[:, index])
    if extra is not None:
        rows, E = extra
        out[rows] += E @ Hinv[:, index]
    return out


def _eb_extra(hist: AnnotationSet, settings: dict[str, Any], fit: two_coin.EMFit, n_groups: int
              ) -> tuple[npt.NDArray[np.int64], FloatArray] | None:
    """With Stage A's empirical-Bayes prior (``shrink="eb"``), what its estimated pooled rates add to the gold
    items' scores in a joint fit (:func:`heroeval.stage_a.calibration.eb_prior_terms`); None without it."""
    pr = settings.get("prior")
    if settings.get("shrink", "none") != "eb" or not isinstance(pr, dict):
        return None
    rows = np.flatnonzero(hist.gold >= 0)
    U, C = eb_prior_terms(hist.take_items(rows), EBPrior.from_dict(pr), fit.alpha, fit.beta, n_groups)
    return rows, U @ C.T


def dawid_skene(
    current: AnnotationSet,
    *,
    tol: float = 1e-8,
    max_iter: int = 10_000,
    criterion: Literal["parameters", "loglik"] = "parameters",
    accelerate: bool = True,
) -> EstimateResult:
    """Dawid–Skene on the current round alone (no history, no gold).

    Unsupervised two-coin EM fitting the rate and every labeler's
    sensitivity and specificity jointly. It starts from the soft majority
    vote (each item's share of positive labels), which fixes the labelling
    of the two classes. EM settings as in :func:`calibrate`.

    Examples
    --------
    >>> import heroeval as he
    >>> cur = he.AnnotationSet.from_arrays([1, 1, 2, 2, 3, 3], ["a", "b"] * 3, [1, 1, 0, 0, 1, 1])
    >>> round(he.dawid_skene(cur).estimate, 3)
    0.667
    """
    data = check_current(current)
    check_em_settings(tol, max_iter, criterion)
    if data.n_items < 2:  # one item cannot tell its labelers' errors from the rate: no estimate, no standard error
        raise HeroEvalError(f"dawid_skene needs at least 2 items in the current round; {data.name!r} has "
                            f"{data.n_items}")
    d = two_coin.make_design(
        data.item_ptr,
        data.labeler,
        data.label,
        data.n_labelers,
        np.full(data.n_items, -1, dtype=np.int8),
        np.zeros(data.n_items, dtype=np.int32),
        1,
        repeated=data.repeated_pairs,
    )
    soft = np.add.reduceat(data.label.astype(np.float64), data.item_ptr[:-1]) / np.diff(data.item_ptr)
    a0, b0, p0 = two_coin.m_step(d, soft)
    fit = two_coin.run_em(d, (a0, b0, p0), stop=StoppingRule(tol, max_iter, criterion, accelerate))
    conv = ConvergenceInfo.from_fit(fit, tol, max_iter, criterion, accelerate)
    if not fit.converged:
        warnings.warn(
            f"Dawid-Skene EM did not converge in {fit.n_iter} iterations", ConvergenceWarning, stacklevel=2
        )
    IF = _fit_influence(d, fit, 2 * data.n_labelers)
    return result_of("dawid_skene", fit.prev[0], data, convergence=conv, influence=Influence(IF * data.n_items),
                   status=em_status(fit.prev[0]))


def _score_estimate(
    method: str,
    current: AnnotationSet,
    calibration: Calibration,
    alpha: FloatArray,
    beta: FloatArray,
    exclude_new_labelers: bool,
    extra: dict[str, Any] | None = None,
) -> EstimateResult:
    al = align(current, calibration, exclude_new_labelers)
    L = log_likelihood_ratios(al.data, al.to_calib, alpha, beta)
    mu, status = solve_score(L)
    if status == "unidentified":
        return result_of(method, mu, al.data, status=status, details={**al.details, **(extra or {})},
                       notes=(*al.notes, "no current label carries information about the rate"))
    space = "gold_counts" if method == "gold_proportion" else "stage_a"
    si = ScoreInputs(calibration, al.data, al.to_calib, alpha, beta, L)
    infl = stage_a_influence(si, mu, psi(mu, L), space=space)
    notes = al.notes
    if space == "stage_a" and calibration.covariance is None:
        notes = (*notes, "the calibration has no parameter covariance: no standard error")
    test = score_test(si, mu, infl)
    return result_of(method, mu, al.data, status=status, details={**al.details, **(extra or {})}, notes=notes,
                   influence=infl, test=test)


def gold_proportion(
    current: AnnotationSet, calibration: Calibration, *, exclude_new_labelers: bool = False
) -> EstimateResult:
    """Historical sample-proportion calibration (the paper's baseline 3).

    Each labeler's sensitivity and specificity come from the history's gold
    items only, with Laplace smoothing: ``(tp + 1) / (tp + fn + 2)`` and
    ``(tn + 1) / (tn + fp + 2)``; then the HERO-1 score equation gives the rate.
    """
    data = check_current(current)
    cal = check_calibration(calibration)
    alpha, beta = gold_proportion_rates(cal)
    return _score_estimate("gold_proportion", data, cal, alpha, beta, exclude_new_labelers)


def gold_proportion_rates(cal: Calibration) -> tuple[FloatArray, FloatArray]:
    """Each labeler's Laplace-smoothed sensitivity and specificity on the history's gold items alone."""
    alpha = (cal.gold_tp + 1.0) / (cal.gold_tp + cal.gold_fn + 2.0)
    beta = (cal.gold_tn + 1.0) / (cal.gold_tn + cal.gold_fp + 2.0)
    return alpha, beta


def gold_proportion_variances(cal: Calibration) -> FloatArray:
    """The variances of :func:`gold_proportion_rates` (binomial, of the smoothed proportions): alphas, then betas."""
    return gold_count_variances(cal, *gold_proportion_rates(cal))


def hero1(
    current: AnnotationSet,
    calibration: Calibration,
    *,
    exclude_new_labelers: bool = False,
    new_labelers: NewLabelerRule | None = None,
) -> EstimateResult:
    """HERO-1: the current round's rate with Stage A's labeler parameters fixed.

    Solves ``sum_i psi_i(mu) = 0`` where ``psi_i`` is item i's score for the
    two-coin likelihood ``mu e^{lambda_i(1)} + (1 - mu) e^{lambda_i(0)}``. The
    root is unique (the score decreases in mu); when there is no root in
    (0, 1) the estimate is 0 or 1 and ``status`` says which. With a single
    labeler this is the Rogan–Gladen estimator clipped to [0, 1].

    Examples
    --------
    >>> import heroeval as he
    >>> hist = he.AnnotationSet.from_arrays(
    ...     [1, 2, 3, 4], ["a"] * 4, [1, 1, 0, 0], gold=([1, 2, 3, 4], [1, 0, 0, 0]))
    >>> cal = he.calibrate(hist)       # a: sensitivity 1, specificity 2/3
    >>> cur = he.AnnotationSet.from_arrays([5, 6, 7], ["a"] * 3, [1, 1, 0])
    >>> round(he.hero1(cur, cal).estimate, 6)   # (2/3 + 2/3 - 1) / (1 + 2/3 - 1)
    0.5

    Labelers unknown to the calibration: ``new_labelers="error"`` (the
    default) raises :class:`~heroeval.errors.UnknownLabelerError`,
    ``"exclude"`` (same as ``exclude_new_labelers=True``) leaves their labels
    out, ``"estimate"`` estimates their sensitivity and specificity from the
    current round anchored by the calibrated labelers, with the added
    uncertainty in the interval (:func:`heroeval.estimators.newlabelers.hero1_anchored`).
    """
    data = check_current(current)
    cal = check_calibration(calibration)
    rule = new_labeler_rule(new_labelers, exclude_new_labelers)
    if rule == "estimate" and has_unknown(data, cal):

        return hero1_anchored(data, cal)
    return _score_estimate("hero1", data, cal, cal.alpha, cal.beta, rule == "exclude")


def hero_joint(
    current: AnnotationSet,
    calibration: Calibration,
    *,
    exclude_new_labelers: bool = False,
) -> EstimateResult:
    """Joint calibration: the current round as one more gold-free history round.

    Stage A is refitted on the history plus the current round, the current
    round having its own prevalence; the current labels then refine the
    labeler parameters too. Starts from the calibration (and HERO-1 for the
    current prevalence) and uses the calibration's EM settings. Needs the
    history itself, so ``calibration`` must come from :func:`calibrate` in
    this process (``calibration.history`` is not None).
    """
    data = check_current(current)
    cal = check_calibration(calibration)
    hist = cal.history
    if hist is None:
        raise HeroEvalError(
            "hero_joint needs the history, not only a calibration file: calibrate from the history "
            "in this process (CLI: --history/--gold instead of --calibration)"
        )
    al = align(data, cal, exclude_new_labelers)
    cur = al.data
    L = log_likelihood_ratios(cur, al.to_calib, cal.alpha, cal.beta)
    mu1, _ = solve_score(L)
    G = hist.n_rounds
    ptr = np.concatenate([hist.item_ptr, hist.item_ptr[-1] + cur.item_ptr[1:]])
    lab = np.concatenate([hist.labeler.astype(np.int64), al.to_calib[cur.labeler]])
    lbl = np.concatenate([hist.label, cur.label])
    gold = np.concatenate([hist.gold, np.full(cur.n_items, -1, dtype=np.int8)])
    grp = np.concatenate([hist.item_round, np.full(cur.n_items, G, dtype=np.int32)])
    s = cal.settings
    d = replace(two_coin.make_design(ptr, lab, lbl, cal.n_labelers, gold, grp, G + 1,
                                repeated=hist.repeated_pairs or cur.repeated_pairs),
                pseudo_count=settings_prior(s))
    hw = float(s.get("history_weight", 1.0))
    if hw <= 0.0:
        raise HeroEvalError(
            "hero_joint needs the gold-free items in the likelihood: the calibration has history_weight 0 "
            "(gold-only); use hero1 with it"
        )
    if hw != 1.0:  # gold-free items, the history's and the current round's, enter with the calibration's weight
        d = replace(d, weight=np.where(gold >= 0, 1.0, hw))
    tol = float(s.get("tol", 1e-8))
    max_iter = int(s.get("max_iter", 10_000))
    criterion = cast(Literal["parameters", "loglik"], str(s.get("criterion", "parameters")))
    accelerate = bool(s.get("accelerate", True))
    prev0 = np.concatenate([cal.round_prevalence, [min(max(mu1, 0.01), 0.99) if math.isfinite(mu1) else 0.5]])
    fit = two_coin.run_em(d, (np.asarray(cal.alpha), np.asarray(cal.beta), prev0),
                          stop=StoppingRule(tol, max_iter, criterion, accelerate))
    conv = ConvergenceInfo.from_fit(fit, tol, max_iter, criterion, accelerate)
    if not fit.converged:
        warnings.warn(f"joint EM did not converge in {fit.n_iter} iterations", ConvergenceWarning, stacklevel=2)
    details = {**al.details, "hero1_estimate": mu1}
    IF = _fit_influence(d, fit, 2 * cal.n_labelers + G, _eb_extra(hist, s, fit, G + 1))
    N = hist.n_items
    infl = Influence(IF[N:] * cur.n_items, "items", IF[:N], None, hash(cal.token))
    # its score test: HERO-1's at the jointly fitted sensitivities and specificities, with the history-only
    # parameter covariance (conservative: the joint fit also learns from the current labels)
    status = em_status(fit.prev[G])
    est = float(fit.prev[G])
    est = 0.0 if status == "boundary_0" else 1.0 if status == "boundary_1" else est
    La = log_likelihood_ratios(cur, al.to_calib, fit.alpha, fit.beta)
    test = ScoreTest(
        center=est, L=La, counts=np.ones(La.size), item_ptr=cur.item_ptr, labeler=al.to_calib[cur.labeler],
        alpha=np.asarray(fit.alpha, dtype=float), beta=np.asarray(fit.beta, dtype=float), space="stage_a",
        V=cal.covariance, n_parameters=cal.n_parameters,
    )
    return result_of("hero_joint", fit.prev[G], cur, convergence=conv, details=details, notes=al.notes,
                   influence=infl, status=status, test=test)
