"""Estimators of the current round's gold rate: HERO and the paper's baselines."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from heroeval.errors import (
    ConvergenceWarning,
    CovariateShiftWarning,
    DataError,
    HeroEvalError,
    SharedCovariatesWarning,
    UnknownLabelerError,
)
from heroeval.estimators._inversion import BinomialScoreTest, MomentTest, ScoreTest
from heroeval.estimators._score import psi, solve_score
from heroeval.estimators.newlabelers import hero1_anchored
from heroeval.estimators.results import METHODS, EstimateCollection, EstimateResult, Influence
from heroeval.estimators.shift import covariate_overlap, shift_columns
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a import _em, _influence
from heroeval.stage_a.calibration import (
    Calibration,
    ConvergenceInfo,
    eb_prior_terms,
    fit_stage_a,
    settings_prior,
)
from heroeval.stage_a.prior import EBPrior, beta_binomial_prior
from heroeval.stage_a.settings import check_em_settings

__all__ = [
    "dawid_skene",
    "estimate_methods",
    "gold_proportion",
    "hero1",
    "hero2",
    "hero_joint",
    "majority_vote",
    "rogan_gladen",
    "with_history",
]

FloatArray = npt.NDArray[np.float64]
TieRule = Literal["half", "positive", "negative", "random"]
ShiftRule = Literal["warn", "fallback", "ignore"]


def _check_current(current: Any) -> AnnotationSet:
    if not isinstance(current, AnnotationSet):
        raise HeroEvalError(
            f"current must be an AnnotationSet (from read_annotations), got {type(current).__name__}"
        )
    if current.n_items == 0:
        raise DataError(f"current round {current.name!r} has no annotated items")
    return current


def _check_calibration(calibration: Any) -> Calibration:
    if not isinstance(calibration, Calibration):
        raise HeroEvalError(
            f"calibration must be a Calibration (from calibrate or load_calibration), "
            f"got {type(calibration).__name__}"
        )
    return calibration


# ---------------------------------------------------------------------------
# Aligning the current round to a calibration
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Aligned:
    data: AnnotationSet  # current round, unknown labelers removed if asked
    to_calib: npt.NDArray[np.int64]  # current labeler code -> calibration index
    notes: tuple[str, ...]
    details: dict[str, Any]


def _align(current: AnnotationSet, calibration: Calibration, exclude_new_labelers: bool) -> _Aligned:
    index = calibration.index_of()
    idx = np.array([index.get(str(lab), -1) for lab in current.labeler_ids], dtype=np.int64)
    unknown = idx < 0
    notes: list[str] = []
    details: dict[str, Any] = {}
    data = current
    if unknown.any():
        names = tuple(str(x) for x in current.labeler_ids[unknown])
        n_ann = int(np.isin(current.labeler, np.flatnonzero(unknown)).sum())
        foreign = _foreign_calibration(current, calibration, unknown, n_ann)
        if not exclude_new_labelers:
            shown = ", ".join(repr(x) for x in names[:10]) + (" ..." if len(names) > 10 else "")
            if foreign:
                raise UnknownLabelerError(foreign, names)
            raise UnknownLabelerError(
                f"{len(names)} labeler(s) of the current round {current.name!r} are not in the "
                f"calibration ({n_ann} annotations): {shown}. Their reliability is unknown; pass "
                "exclude_new_labelers=True to leave their labels out, or (HERO-1) "
                "new_labelers='estimate' to estimate it from the current round.",
                names,
            )
        data, n_removed, n_items_removed = current.select_labelers(~unknown)
        if data.n_items == 0:
            raise DataError(foreign or
                f"current round {current.name!r}: every annotation is by a labeler unknown to the calibration"
            )
        idx = idx[~unknown]
        details.update(
            excluded_labelers=list(names),
            excluded_annotations=n_removed,
            excluded_items=n_items_removed,
        )
        notes.append(
            f"excluded {len(names)} labeler(s) unknown to the calibration: {n_removed} annotations, "
            f"{n_items_removed} item(s) left without labels"
        )
    return _Aligned(data=data, to_calib=idx, notes=tuple(notes), details=details)


def _foreign_calibration(current: AnnotationSet, calibration: Calibration, unknown: npt.NDArray[np.bool_],
                         n_unknown_ann: int) -> str:
    """A message when the calibration seems to belong to other data (most of the round's labels are by strangers)."""
    if n_unknown_ann * 2 <= current.n_annotations:
        return ""
    known = int((~unknown).sum())
    ex = ", ".join(repr(str(x)) for x in current.labeler_ids[:3])
    cx = ", ".join(repr(x) for x in calibration.labeler_ids[:3])
    lead = "every annotation is by a labeler unknown to the calibration: " if known == 0 else ""
    return (f"{lead}the calibration probably belongs to other data: {known} of the {current.n_labelers} labelers of the "
            f"current round {current.name!r} are in it ({n_unknown_ann} of {current.n_annotations} annotations are by "
            f"labelers it does not know). The round's labelers look like {ex}, the calibration's like {cx}. Use the "
            "calibration of this data's history (and the same labeler column), rather than excluding or estimating "
            "the unknown labelers.")


def _codes(data: AnnotationSet, to_calib: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per-annotation code ``2 * labeler + label`` in the calibration's labeler index."""
    out: npt.NDArray[np.int64] = 2 * to_calib[data.labeler] + data.label.astype(np.int64)
    return out


def _llr(data: AnnotationSet, to_calib: npt.NDArray[np.int64], alpha: FloatArray, beta: FloatArray) -> FloatArray:
    """Per-item log-likelihood ratio L_i under fixed sensitivities/specificities."""
    la1, la0 = _em.code_logprobs(alpha, beta)
    diff = la1 - la0
    vals = diff[_codes(data, to_calib)]
    return np.add.reduceat(vals, data.item_ptr[:-1]) if vals.size else np.zeros(0)


def _stage_a_influence(
    cal: Calibration,
    data: AnnotationSet,
    to_calib: npt.NDArray[np.int64],
    alpha: FloatArray,
    beta: FloatArray,
    mu: float,
    L: FloatArray,
    psi_resid: FloatArray,
    gamma_x: FloatArray | None = None,
    space: str = "stage_a",
) -> Influence:
    """Influence of a score-equation estimate with history-fitted (alpha, beta).

    ``mu_hat - mu ~= (1/I) [mean(psi_resid) + G (theta_hat - theta) (+ gamma'(m_hat - m))]``
    with ``I = mean psi(mu_hat)^2`` and ``G`` the mean score gradient.
    """
    ps = psi(mu, L)
    info = float(np.mean(ps**2))
    G = _influence.score_gradient(data.item_ptr, _codes(data, to_calib), cal.n_labelers, alpha, beta, mu, L)
    current = (psi_resid - psi_resid.mean()) / info
    if space == "gold_counts":
        n_pos = cal.gold_tp + cal.gold_fn
        n_neg = cal.gold_tn + cal.gold_fp
        var_a = (cal.gold_tp * (1 - alpha) ** 2 + cal.gold_fn * alpha**2) / (n_pos + 2.0) ** 2
        var_b = (cal.gold_tn * (1 - beta) ** 2 + cal.gold_fp * beta**2) / (n_neg + 2.0) ** 2
        return Influence(current, "gold_counts", G / info, np.concatenate([var_a, var_b]), hash(cal.token))
    c = np.zeros(cal.n_parameters)
    c[: 2 * cal.n_labelers] = G / info
    if gamma_x is not None:
        c[2 * cal.n_labelers + len(cal.round_ids) :] = gamma_x / info
    return Influence(current, "stage_a", c, cal.covariance, None if cal.covariance is None else hash(cal.token))


def _score_test(
    cal: Calibration,
    data: AnnotationSet,
    to_calib: npt.NDArray[np.int64],
    alpha: FloatArray,
    beta: FloatArray,
    mu: float,
    L: FloatArray,
    infl: Influence,
    offset: float = 0.0,
    gamma_x: FloatArray | None = None,
    Xc: FloatArray | None = None,
) -> ScoreTest:
    """The score test of ``rate = mu0`` behind the method's test-inversion interval (heroeval.estimators._inversion)."""
    return ScoreTest(
        center=mu, L=L, counts=np.ones(L.size), item_ptr=data.item_ptr, labeler=to_calib[data.labeler],
        alpha=np.asarray(alpha, dtype=float), beta=np.asarray(beta, dtype=float), space=infl.space,
        V=infl.gram, n_parameters=cal.n_parameters, offset=offset, gamma_x=gamma_x, Xc=Xc,
        cov_start=2 * cal.n_labelers + len(cal.round_ids),
    )


def _result(method: str, est: float, data: AnnotationSet, **kw: Any) -> EstimateResult:
    return EstimateResult(
        method=method,
        estimate=float(est),
        n_items=data.n_items,
        n_annotations=data.n_annotations,
        n_labelers=int(np.unique(data.labeler).size),
        **kw,
    )


# ---------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------


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
    data = _check_current(current)
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
    return _result(
        "majority_vote",
        vote.mean(),
        data,
        details={"tie_rule": tie, "n_ties": int(ties.sum())},
        notes=("its interval is for the majority-label rate, not the gold rate",),
        influence=Influence(vote - vote.mean()),
        test=BinomialScoreTest(float(vote.mean()), data.n_items),
    )


def _fit_influence(d: _em.Design, fit: _em.EMFit, index: int,
                   extra: tuple[npt.NDArray[np.int64], FloatArray] | None = None) -> FloatArray:
    """Per-item influence ``[H^-1 s_r]_index`` of one parameter of an EM fit (sums to the sandwich); ``extra``,
    ``(rows, E)``, adds ``E``'s rows to those items' scores (Stage A's empirical-Bayes prior, :func:`_eb_extra`)."""
    si = _influence.scores_and_information(d, fit.alpha, fit.beta, fit.prev, fit.gamma, gram=False)
    Hinv = _influence.inverse_information(si)
    out: FloatArray = np.asarray(si.scores @ Hinv[:, index])
    if extra is not None:
        rows, E = extra
        out[rows] += E @ Hinv[:, index]
    return out


def _eb_extra(hist: AnnotationSet, settings: dict[str, Any], fit: _em.EMFit, n_groups: int
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
    data = _check_current(current)
    check_em_settings(tol, max_iter, criterion)
    d = _em.make_design(
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
    a0, b0, p0 = _em.m_step(d, soft)
    fit = _em.run_em(d, a0, b0, p0, tol=tol, max_iter=max_iter, criterion=criterion, accelerate=accelerate)
    conv = ConvergenceInfo.from_fit(fit, tol, max_iter, criterion, accelerate)
    if not fit.converged:
        warnings.warn(
            f"Dawid-Skene EM did not converge in {fit.n_iter} iterations", ConvergenceWarning, stacklevel=2
        )
    IF = _fit_influence(d, fit, 2 * data.n_labelers)
    return _result("dawid_skene", fit.prev[0], data, convergence=conv, influence=Influence(IF * data.n_items),
                   status=_em_status(fit.prev[0]))


# ---------------------------------------------------------------------------
# Calibrated estimators
# ---------------------------------------------------------------------------


def _score_estimate(
    method: str,
    current: AnnotationSet,
    calibration: Calibration,
    alpha: FloatArray,
    beta: FloatArray,
    exclude_new_labelers: bool,
    extra: dict[str, Any] | None = None,
) -> EstimateResult:
    al = _align(current, calibration, exclude_new_labelers)
    L = _llr(al.data, al.to_calib, alpha, beta)
    mu, status = solve_score(L)
    if status == "unidentified":
        return _result(method, mu, al.data, status=status, details={**al.details, **(extra or {})},
                       notes=(*al.notes, "no current label carries information about the rate"))
    space = "gold_counts" if method == "gold_proportion" else "stage_a"
    infl = _stage_a_influence(calibration, al.data, al.to_calib, alpha, beta, mu, L, psi(mu, L), space=space)
    notes = al.notes
    if space == "stage_a" and calibration.covariance is None:
        notes = (*notes, "the calibration has no parameter covariance: no standard error")
    test = _score_test(calibration, al.data, al.to_calib, alpha, beta, mu, L, infl)
    return _result(method, mu, al.data, status=status, details={**al.details, **(extra or {})}, notes=notes,
                   influence=infl, test=test)


def gold_proportion(
    current: AnnotationSet, calibration: Calibration, *, exclude_new_labelers: bool = False
) -> EstimateResult:
    """Historical sample-proportion calibration (the paper's baseline 3).

    Each labeler's sensitivity and specificity come from the history's gold
    items only, with Laplace smoothing: ``(tp + 1) / (tp + fn + 2)`` and
    ``(tn + 1) / (tn + fp + 2)``; then the HERO-1 score equation gives the rate.
    """
    data = _check_current(current)
    cal = _check_calibration(calibration)
    alpha = (cal.gold_tp + 1.0) / (cal.gold_tp + cal.gold_fn + 2.0)
    beta = (cal.gold_tn + 1.0) / (cal.gold_tn + cal.gold_fp + 2.0)
    return _score_estimate("gold_proportion", data, cal, alpha, beta, exclude_new_labelers)


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
    data = _check_current(current)
    cal = _check_calibration(calibration)
    rule = _new_labeler_rule(new_labelers, exclude_new_labelers)
    if rule == "estimate" and _has_unknown(data, cal):

        return hero1_anchored(data, cal)
    return _score_estimate("hero1", data, cal, cal.alpha, cal.beta, rule == "exclude")


NewLabelerRule = Literal["error", "exclude", "estimate"]


def _new_labeler_rule(new_labelers: str | None, exclude_new_labelers: bool) -> str:
    if new_labelers is None:
        return "exclude" if exclude_new_labelers else "error"
    if new_labelers not in ("error", "exclude", "estimate"):
        raise HeroEvalError(f"new_labelers must be 'error', 'exclude' or 'estimate', got {new_labelers!r}")
    if exclude_new_labelers and new_labelers != "exclude":
        raise HeroEvalError(f"exclude_new_labelers=True contradicts new_labelers={new_labelers!r}")
    return new_labelers


def _has_unknown(data: AnnotationSet, cal: Calibration) -> bool:
    index = cal.index_of()
    return any(str(x) not in index for x in data.labeler_ids)


def hero2(
    current: AnnotationSet,
    calibration: Calibration,
    *,
    ridge: float = 0.0,
    exclude_new_labelers: bool = False,
    on_shift: ShiftRule = "warn",
    shift_significance: float | None = None,
) -> EstimateResult:
    """HERO-2: HERO-1 with a score-level control variate.

    With ``psi_i`` evaluated at the HERO-1 estimate, ``gamma`` regresses the
    scores on the current covariates ``X`` (centred), and the estimate solves
    ``mean_i psi_i(mu) = gamma' (Xbar - m_X)`` where ``m_X`` is the history's
    covariate mean stored in the calibration. Covariates uncorrelated with
    the scores give ``gamma ~ 0`` and the HERO-1 estimate.

    Parameters
    ----------
    ridge : float, default 0
        Ridge penalty on the standardised scale: ``gamma = (S_XX + ridge *
        diag(S_XX))^-1 S_Xpsi``, useful with many columns (TF-IDF). Columns
        that are constant in the current round get ``gamma = 0``.
    on_shift : {"warn", "fallback", "ignore"}, default "warn"
        What to do when the covariates' means differ between the current
        round and the history (HERO-2's shared-distribution assumption fails).
        The shift is *detected* when the overall Wald test's p-value or the
        smallest Holm-adjusted per-column p-value is below
        ``shift_significance``. ``"warn"`` emits a
        :class:`~heroeval.errors.CovariateShiftWarning` and returns HERO-2;
        ``"fallback"`` warns and returns the HERO-1 estimate and interval
        instead (``details["fallback"] = "hero1"`` with the reason);
        ``"ignore"`` only records the tests in ``details``.
    shift_significance : float, optional
        Threshold of the rule (default ``SHIFT_ALPHA`` = 0.001).

    When the current covariate rows repeat the history's item for item (the
    same items, the same values), a
    :class:`~heroeval.errors.SharedCovariatesWarning` says the standard error,
    which treats the two means as independent, is not valid.
    """
    data = _check_current(current)
    cal = _check_calibration(calibration)
    if not (np.isfinite(ridge) and ridge >= 0):
        raise HeroEvalError(f"ridge must be a non-negative number, got {ridge!r}")
    if on_shift not in ("warn", "fallback", "ignore"):
        raise HeroEvalError(f"on_shift must be 'warn', 'fallback' or 'ignore', got {on_shift!r}")
    shift_level = SHIFT_ALPHA if shift_significance is None else shift_significance
    if not (isinstance(shift_level, (int, float)) and 0 < shift_level < 1):
        raise HeroEvalError(f"shift_significance must be in (0, 1), got {shift_significance!r}")
    if data.covariates is None:
        raise HeroEvalError(
            f"hero2 needs covariates for the current round {data.name!r} (read_annotations(..., covariates=...))"
        )
    if cal.covariate_mean is None:
        raise HeroEvalError(
            "hero2 needs the history's covariate mean: the calibration was fitted without covariates "
            "(pass covariates= when reading the history)"
        )
    if tuple(data.covariate_names) != tuple(cal.covariate_names):
        raise HeroEvalError(
            f"covariate columns differ: current round has {list(data.covariate_names)}, "
            f"the calibration's history has {list(cal.covariate_names)}"
        )
    al = _align(data, cal, exclude_new_labelers)
    L = _llr(al.data, al.to_calib, cal.alpha, cal.beta)
    mu1, st1 = solve_score(L)
    if st1 == "unidentified":
        return _result("hero2", mu1, al.data, status=st1, details=dict(al.details),
                       notes=(*al.notes, "no current label carries information about the rate"))
    X = al.data.covariates
    assert X is not None
    ps = psi(mu1, L)
    xbar = X.mean(axis=0)
    Xc = X - xbar
    n = X.shape[0]
    Sxx = Xc.T @ Xc / n
    Sxp = Xc.T @ ps / n
    var = np.diag(Sxx).copy()
    scale = np.maximum(np.mean(X**2, axis=0), np.finfo(float).tiny)
    live = var > 1e-12 * scale  # per column: a column constant up to rounding gets gamma = 0
    gamma = np.zeros(X.shape[1])
    if live.any():
        S = Sxx[np.ix_(live, live)] + ridge * np.diag(var[live])
        gamma[live] = np.linalg.lstsq(S, Sxp[live], rcond=None)[0]
    offset = float(gamma @ (xbar - cal.covariate_mean))
    mu2, status = solve_score(L, offset)
    r2 = float(np.corrcoef(Xc @ gamma, ps)[0, 1] ** 2) if live.any() and np.std(Xc @ gamma) > 0 and np.std(ps) > 0 else 0.0
    details = {
        **al.details,
        "gamma": dict(zip(cal.covariate_names, gamma.tolist(), strict=True)),
        "covariate_mean_current": xbar.tolist(),
        "covariate_mean_history": cal.covariate_mean.tolist(),
        "offset": offset,
        "hero1_estimate": mu1,
        "score_r2": r2,
        "ridge": ridge,
        "constant_columns": [c for c, ok in zip(cal.covariate_names, live, strict=True) if not ok],
    }
    details.update(_covariate_shift(X, cal, live))

    details.update(shift_columns(details["covariate_shift_z"], cal.covariate_names))
    details.update(covariate_overlap(al.data, cal))
    shifted = min(details["covariate_shift_p"], details["covariate_shift_min_p_holm"]) < shift_level
    details["covariate_shift_detected"] = bool(shifted)
    details["on_shift"] = on_shift
    if details["covariate_overlap_share"] >= 0.5:
        warnings.warn(
            f"hero2: {details['covariate_overlap_share']:.0%} of the current round's covariate rows repeat the "
            "history's item for item; HERO-2's standard error treats the two covariate means as independent "
            "samples and is not valid for shared rows",
            SharedCovariatesWarning,
            stacklevel=2,
        )
    if shifted and on_shift != "ignore":
        z = np.asarray(details["covariate_shift_z"], dtype=float)
        worst = [cal.covariate_names[k] for k in np.argsort(-np.abs(np.nan_to_num(z)))[:3]]
        warnings.warn(
            f"hero2: the current round's covariate means differ from the history's (p = "
            f"{details['covariate_shift_p']:.2g}; largest shifts in {worst}); HERO-2 assumes a shared covariate "
            "distribution and is biased otherwise: "
            + ("falling back to hero1 (on_shift='fallback')" if on_shift == "fallback" else "prefer hero1 here"),
            CovariateShiftWarning,
            stacklevel=2,
        )
    if shifted and on_shift == "fallback":
        infl1 = _stage_a_influence(cal, al.data, al.to_calib, cal.alpha, cal.beta, mu1, L, ps)
        reason = (f"covariate shift detected (overall p = {details['covariate_shift_p']:.3g}, smallest Holm-adjusted "
                  f"per-column p = {details['covariate_shift_min_p_holm']:.3g} < {shift_level:g})")
        details.update(fallback="hero1", fallback_reason=reason, hero2_estimate=mu2)
        return _result("hero2", mu1, al.data, status=st1, details=details, influence=infl1,
                       test=_score_test(cal, al.data, al.to_calib, cal.alpha, cal.beta, mu1, L, infl1),
                       notes=(*al.notes, f"HERO-1 estimate returned instead of HERO-2: {reason}"))
    ps2 = psi(mu2, L)
    infl = _stage_a_influence(cal, al.data, al.to_calib, cal.alpha, cal.beta, mu2, L, ps2 - Xc @ gamma, gamma_x=gamma)
    infl1 = _stage_a_influence(cal, al.data, al.to_calib, cal.alpha, cal.beta, mu1, L, ps)
    details.update(_effective_n(infl1, infl))
    notes = al.notes
    if cal.covariance is None:
        notes = (*notes, "the calibration has no parameter covariance: no standard error")
    test = _score_test(cal, al.data, al.to_calib, cal.alpha, cal.beta, mu2, L, infl, offset=offset,
                       gamma_x=gamma, Xc=Xc)
    return _result("hero2", mu2, al.data, status=status, details=details, notes=notes, influence=infl, test=test)


def rogan_gladen(
    current: AnnotationSet,
    calibration: Calibration,
    *,
    weights: Literal["pooled", "diagonal", "correlated"] = "diagonal",
    min_youden: float = 0.05,
    exclude_new_labelers: bool = False,
    shrink: Literal["none", "eb"] = "none",
) -> EstimateResult:
    """Dependence-robust moment estimator: per-labeler Rogan–Gladen, pooled.

    Each labeler j of the current round with ``n_j`` labels and positive share
    ``p_j`` gives ``mu_j = (p_j + beta_j - 1) / (alpha_j + beta_j - 1)``, with
    its sensitivity and specificity from the history's gold items alone
    (the plain proportions ``tp / (tp + fn)`` and ``tn / (tn + fp)``: Laplace
    smoothing would bias every ``mu_j`` towards 1/2). ``E[p_j] = mu alpha_j +
    (1 - mu)(1 - beta_j)`` holds whatever the dependence between labelers, so
    each ``mu_j`` is unbiased for the rate when the labeler's error rates
    transport from history; no likelihood over label patterns is assumed.
    The estimate is ``sum_j w_j mu_j`` with ``sum_j w_j = 1``:

    * ``weights="diagonal"`` (default): ``w_j`` proportional to the inverse of
      ``mu_j``'s model variance ``[pbar_j (1 - pbar_j) / n_j + mu^2 var(alpha_j)
      + (1 - mu)^2 var(beta_j)] / (alpha_j + beta_j - 1)^2`` at a pooled
      preliminary rate (``pbar_j`` the implied positive share), so labelers
      with few labels or little gold count little;
    * ``weights="correlated"``: the minimum-variance non-negative weights for
      the covariance of the ``mu_j`` built from the per-item influence values
      (current items and history gold items), whose correlations capture
      labelers that err together; correlations are shrunk half-way to zero;
    * ``weights="pooled"``: the ratio ``sum_j c_j (p_j + beta_j - 1) / sum_j
      c_j (alpha_j + beta_j - 1)`` (the weighted mean of the ``mu_j`` with
      weights ``c_j (alpha_j + beta_j - 1)``, so a labeler's noisy Youden index
      is not squared into its weight), ``c_j`` the optimal weight of labeler
      j's moment equation (its Youden index over its variance) computed from
      empirical-Bayes (beta-binomial, method of moments) shrunk rates, and
      labelers selected by their shrunk Youden index. The ratio keeps the
      plain proportions, so shrinkage moves only the weights. Tried for
      crowds with little gold per labeler; it did not beat the diagonal
      weights on the real sets (docs/research/robustness.md).

    ``shrink="eb"`` replaces every labeler's gold proportions, in the moment
    equations, the weights and the choice of labelers alike, by their
    empirical-Bayes posterior means ``(tp + k m) / (n_pos + k)`` (and
    likewise for the specificity), under a ``Beta(k m, k (1 - m))`` prior per
    class fitted to the pool of labelers by the beta-binomial method of
    moments (the prior ``weights="pooled"`` uses; ``m`` the pooled proportion).
    A labeler with few gold items is pulled towards the pool; with no
    evidence of heterogeneity between labelers every labeler gets ``m``. The
    ``mu_j`` are then no longer unbiased one by one (shrinkage trades bias
    for variance), but a labeler's wild proportion from three gold items no
    longer makes a wild ``mu_j``. In the standard error ``k`` is held fixed
    and ``m`` is not: a gold item moves labeler j's shrunk rate by
    ``1 / (n_pos_j + k)`` per label of j (instead of ``1 / n_pos_j``) plus
    ``k / (n_pos_j + k)`` times its move of ``m`` (``1 / N_pos`` per label of
    any labeler), so the interval stays first-order correct for the shrunk
    estimator's target given ``k``. The variances in the weights are the
    posterior variances ``a (1 - a) / (n_pos + k + 1)``.
    Measured on the real sets in docs/research/robustness.md.

    Labelers whose Youden index ``alpha_j + beta_j - 1`` is at most
    ``min_youden`` (uninformative or adversarial on the gold) are left out and
    named in ``details``. The standard error comes from per-item influence
    values: current items carry every label on them (so labelers that err
    together on an item are not treated as independent), and, when the
    calibration holds its history, the history's gold items likewise;
    from a calibration file the gold counts' binomial variances are used.
    The weights are treated as fixed (to first order they do not matter
    when every ``mu_j`` targets the same rate).

    Examples
    --------
    >>> import heroeval as he
    >>> hist = he.AnnotationSet.from_arrays(
    ...     [1, 2, 3, 4], ["a"] * 4, [1, 1, 0, 0], gold=([1, 2, 3, 4], [1, 0, 0, 0]))
    >>> cal = he.calibrate(hist)       # a on the gold: sensitivity 1/1, specificity 2/3
    >>> cur = he.AnnotationSet.from_arrays([5, 6, 7, 8, 9], ["a"] * 5, [1, 1, 1, 0, 0])
    >>> round(he.rogan_gladen(cur, cal).estimate, 6)   # (3/5 + 2/3 - 1) / (1 + 2/3 - 1)
    0.4
    """
    data = _check_current(current)
    cal = _check_calibration(calibration)
    if weights not in ("pooled", "diagonal", "correlated"):
        raise HeroEvalError(f"weights must be 'pooled', 'diagonal' or 'correlated', got {weights!r}")
    if shrink not in ("none", "eb"):
        raise HeroEvalError(f"shrink must be 'none' or 'eb', got {shrink!r}")
    if not (isinstance(min_youden, (int, float)) and 0 <= min_youden < 1):
        raise HeroEvalError(f"min_youden must be in [0, 1), got {min_youden!r}")
    al = _align(data, cal, exclude_new_labelers)
    cur = al.data
    J = cal.n_labelers
    npos = (cal.gold_tp + cal.gold_fn).astype(float)
    nneg = (cal.gold_tn + cal.gold_fp).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.where(npos > 0, cal.gold_tp / np.maximum(npos, 1.0), 0.5)
        b = np.where(nneg > 0, cal.gold_tn / np.maximum(nneg, 1.0), 0.5)
    # the rates in the moment equations: the plain proportions a, b, or their empirical-Bayes posterior means
    # lam a + (1 - lam) m with lam = n / (n + k); a gold label's influence is lifted onto the plain proportions
    # through the linear map _EbLift (k held fixed)
    lift_a = _EbLift.fit(cal.gold_tp.astype(float), npos, shrink == "eb")
    lift_b = _EbLift.fit(cal.gold_tn.astype(float), nneg, shrink == "eb")
    a_m = lift_a.rates(a)
    b_m = lift_b.rates(b)
    youden = a_m + b_m - 1
    lab = al.to_calib[cur.labeler]
    z = cur.label.astype(np.float64)
    n_j = np.bincount(lab, minlength=J).astype(np.float64)
    s_j = np.bincount(lab, weights=z, minlength=J)
    if weights == "pooled" and shrink == "eb":
        a_s, b_s, sel_youden = a_m, b_m, youden
    elif weights == "pooled":
        # empirical-Bayes (beta-binomial) shrinkage of each labeler's gold proportions towards the pool,
        # used only to choose which labelers count and how much: the estimating equation keeps the plain
        # (unbiased) proportions
        a_s = _eb_shrink(cal.gold_tp.astype(float), npos)
        b_s = _eb_shrink(cal.gold_tn.astype(float), nneg)
        sel_youden = a_s + b_s - 1
    else:
        a_s, b_s, sel_youden = a, b, youden
    use = (n_j > 0) & (sel_youden > min_youden) & (npos > 0) & (nneg > 0)
    present = n_j > 0
    dropped = [cal.labeler_ids[k] for k in np.flatnonzero(present & ~use)]
    details: dict[str, Any] = {**al.details, "weights": weights, "labelers_used": int(use.sum()),
                               "labelers_left_out": dropped, "min_youden": min_youden}
    if shrink == "eb":
        details["shrink"] = "eb"
        details["eb_prior"] = {"sensitivity": lift_a.summary(), "specificity": lift_b.summary()}
    if not use.any():
        return _result("rogan_gladen", math.nan, cur, status="unidentified", details=details,
                       notes=(*al.notes, "no current labeler has gold-based sensitivity + specificity above "
                              f"1 + {min_youden}: the rate is not identified"))
    u = np.flatnonzero(use)
    p = s_j[u] / n_j[u]
    Y = youden[u]
    with np.errstate(invalid="ignore", divide="ignore"):
        mu_j = np.where(np.abs(Y) > 1e-12, (p + b_m[u] - 1) / np.where(np.abs(Y) > 1e-12, Y, 1.0), np.nan)
    pos_in_u = np.full(J, -1, dtype=np.int64)
    pos_in_u[u] = np.arange(u.size)
    k_of = pos_in_u[lab]
    ok = k_of >= 0
    item_of = cur.annotation_item
    hist = cal.history
    # every variant is sum_j c_j (p_j + beta_j - 1) / sum_j c_j (alpha_j + beta_j - 1) for some c_j, i.e.
    # sum_j w_j mu_j with w_j proportional to c_j Youden_j; below: the coefficients of each labeler's
    # (z - p_j) / n_j on current items (wcur) and of alpha_j, beta_j (wa, wb) in the linear term
    if weights == "pooled":
        Ys = sel_youden[u]
        if shrink == "eb":  # posterior variances
            va_s = lift_a.posterior_var(a_m)[u]
            vb_s = lift_b.posterior_var(b_m)[u]
        else:
            va_s = a_s[u] * (1 - a_s[u]) / npos[u]
            vb_s = b_s[u] * (1 - b_s[u]) / nneg[u]

        def c_of(m0: float) -> FloatArray:
            # optimal weights of the moment equations E[p_j] = m a_j + (1 - m)(1 - b_j): slope / variance,
            # at the shrunk rates (so a labeler's weight hardly depends on its own gold noise)
            pbar = np.clip(m0 * a_s[u] + (1 - m0) * (1 - b_s[u]), 1e-3, 1 - 1e-3)
            out: FloatArray = Ys / (pbar * (1 - pbar) / n_j[u] + m0**2 * va_s + (1 - m0) ** 2 * vb_s)
            return out

        num = p + b_m[u] - 1
        c = n_j[u] * Ys
        m0 = float(np.clip(c @ num / (c @ Y), 0.02, 0.98)) if c @ Y > 0 else 0.5
        for _ in range(2):
            c = c_of(m0)
            m0 = float(np.clip(c @ num / (c @ Y), 0.02, 0.98)) if c @ Y > 0 else 0.5
        D = float(c @ Y)
        if not D > 0:
            return _result("rogan_gladen", math.nan, cur, status="unidentified", details=details,
                           notes=(*al.notes, "the pooled Youden index of the current labelers is not positive: "
                                  "the rate is not identified"))
        mu = float(c @ num) / D
        w = c * Y / D
        wcur = c / D
        wa = -mu * c / D
        wb = (1 - mu) * c / D
        var_a = va_s
        var_b = vb_s
    else:
        if shrink == "eb":  # posterior variances
            var_a = lift_a.posterior_var(a_m)[u]
            var_b = lift_b.posterior_var(b_m)[u]
        else:
            # binomial variances at Laplace-smoothed rates, so a labeler perfect on few gold items is not certain
            la = (cal.gold_tp[u] + 1.0) / (npos[u] + 2.0)
            lb = (cal.gold_tn[u] + 1.0) / (nneg[u] + 2.0)
            var_a = la * (1 - la) / npos[u]
            var_b = lb * (1 - lb) / nneg[u]

        def model_var(m0: float) -> FloatArray:
            pbar = np.clip(m0 * a_m[u] + (1 - m0) * (1 - b_m[u]), 1e-3, 1 - 1e-3)
            out: FloatArray = (pbar * (1 - pbar) / n_j[u] + m0**2 * var_a + (1 - m0) ** 2 * var_b) / Y**2
            return out

        w = n_j[u] * Y**2
        m0 = float(np.clip(w @ mu_j / w.sum(), 0.02, 0.98))
        for _ in range(2):  # the model variance depends on the rate only mildly: two refinements
            w = 1.0 / model_var(m0)
            m0 = float(np.clip(w @ mu_j / w.sum(), 0.02, 0.98))
        ca = -mu_j / Y  # d mu_j / d alpha_j
        cb = (1 - mu_j) / Y  # d mu_j / d beta_j
        if weights == "correlated" and u.size > 1:
            cv = (z[ok] - p[k_of[ok]]) / (n_j[u][k_of[ok]] * Y[k_of[ok]])
            M = np.zeros((cur.n_items, u.size))
            np.add.at(M, (item_of[ok], k_of[ok]), cv)
            S = M.T @ M
            if hist is not None:
                # each labeler's own gold only (the shrinkage's pull through the pooled m is left out of
                # these correlations, which only set the weights)
                Hm = _gold_item_influence(hist, u, a, b, npos, nneg, ca * lift_a.lam[u], cb * lift_b.lam[u],
                                          per_labeler=True)
                S = S + Hm.T @ Hm
            else:
                S = S + np.diag(ca**2 * var_a + cb**2 * var_b)
            w = _min_variance_weights(S, model_var(m0))
        w = w / w.sum()
        mu = float(w @ mu_j)
        wcur = w / Y
        wa = w * ca
        wb = w * cb
    cur_vals = (z[ok] - p[k_of[ok]]) / n_j[u][k_of[ok]]
    current_if = np.asarray(np.bincount(item_of[ok], weights=wcur[k_of[ok]] * cur_vals, minlength=cur.n_items),
                            dtype=np.float64) * float(cur.n_items)
    raw = mu
    status = "interior"
    if mu <= 0.0 or mu >= 1.0:
        status = "boundary_0" if mu <= 0.0 else "boundary_1"
        mu = min(max(mu, 0.0), 1.0)
    # the moment test behind the test-inversion interval: variances at the null rate
    n_u = n_j[u]
    indep = float(np.sum(wcur**2 * p * (1 - p) / n_u))
    obs = float(current_if @ current_if) / float(cur.n_items) ** 2
    deff = max(1.0, obs / indep) if indep > 0 else 1.0
    zero = np.zeros(u.size)

    def gold_if(ca_u: FloatArray, cb_u: FloatArray) -> FloatArray:
        # influence of each history item on sum_j ca_j a_m_j + cb_j b_m_j (labelers u)
        assert hist is not None
        if shrink == "none":
            return _gold_item_influence(hist, u, a, b, npos, nneg, ca_u, cb_u, per_labeler=False)[:, 0]
        return _gold_item_influence(hist, np.arange(J), a, b, npos, nneg, lift_a.lift(u, ca_u),
                                    lift_b.lift(u, cb_u), per_labeler=False)[:, 0]

    # the plain proportions' binomial variances (the gold-count form)
    va_plain = np.where(npos > 0, a * (1 - a) / np.maximum(npos, 1.0), 0.0)
    vb_plain = np.where(nneg > 0, b * (1 - b) / np.maximum(nneg, 1.0), 0.0)
    if hist is not None:
        hA = gold_if(wcur, zero)
        hB = gold_if(zero, wcur)
        hAA, hAB, hBB = float(hA @ hA), float(hA @ hB), float(hB @ hB)
    elif shrink == "none":
        hAA, hAB, hBB = float(np.sum(wcur**2 * va_plain[u])), 0.0, float(np.sum(wcur**2 * vb_plain[u]))
    else:
        hAA = float(np.sum(lift_a.lift(u, wcur) ** 2 * va_plain))
        hAB, hBB = 0.0, float(np.sum(lift_b.lift(u, wcur) ** 2 * vb_plain))
    test = MomentTest(center=mu, raw=raw, coef=np.asarray(wcur, dtype=float), a=a_m[u], b=b_m[u], n_j=n_u,
                      deff=deff, hAA=hAA, hAB=hAB, hBB=hBB)
    details["weight_by_labeler"] = {cal.labeler_ids[k]: float(x) for k, x in zip(u, w, strict=True)}
    details["labeler_estimates"] = {cal.labeler_ids[k]: float(x) for k, x in zip(u, mu_j, strict=True)}
    if hist is not None:
        infl = Influence(current_if, "items", gold_if(wa, wb), None, hash(cal.token))
    else:
        cc = np.zeros(2 * J)
        if shrink == "none":
            cc[u] = wa
            cc[J + u] = wb
        else:  # coefficients on the plain proportions, whose variances follow
            cc[:J] = lift_a.lift(u, wa)
            cc[J:] = lift_b.lift(u, wb)
        tp, fn, tn, fp = cal.gold_tp, cal.gold_fn, cal.gold_tn, cal.gold_fp
        va = (tp * (1 - a) ** 2 + fn * a**2) / np.maximum(npos, 1.0) ** 2
        vb = (tn * (1 - b) ** 2 + fp * b**2) / np.maximum(nneg, 1.0) ** 2
        infl = Influence(current_if, "gold_counts", cc, np.concatenate([va, vb]), hash(cal.token))
    return _result("rogan_gladen", mu, cur, status=status, details=details, notes=al.notes, influence=infl,
                   test=test)


@dataclass(frozen=True)
class _EbLift:
    """Empirical-Bayes rates ``lam a + (1 - lam) m`` (``lam = n / (n + k)``) as a linear map of the plain ``a``.

    ``m = sum_l n_l a_l / N`` is the pooled proportion and ``k`` is held fixed, so a coefficient vector
    ``c`` on the shrunk rates is the coefficient vector ``lift(c) = c lam + (sum_j c_j (1 - lam_j)) n / N``
    on the plain proportions. ``active=False``: the identity (``lam = 1``).
    """

    m: float
    k: float
    lam: FloatArray
    n: FloatArray
    active: bool

    @classmethod
    def fit(cls, success: FloatArray, n: FloatArray, active: bool) -> _EbLift:
        if not active:
            return cls(math.nan, math.nan, np.ones(n.shape), n, False)
        m, k = beta_binomial_prior(success, n)
        lam = np.zeros(n.shape) if math.isinf(k) else n / (n + k)
        return cls(m, k, lam, n, True)

    def rates(self, plain: FloatArray) -> FloatArray:
        if not self.active:
            return plain
        out: FloatArray = self.lam * plain + (1 - self.lam) * self.m
        return out

    def posterior_var(self, rate: FloatArray) -> FloatArray:
        out: FloatArray = rate * (1 - rate) / (self.n + self.k + 1)  # 0 at k = inf
        return out

    def lift(self, u: npt.NDArray[np.int64], c_u: FloatArray) -> FloatArray:
        c = np.zeros(self.n.shape)
        c[u] = c_u
        if not self.active:
            return c
        N = float(self.n[self.n > 0].sum())
        out: FloatArray = c * self.lam + float(c @ (1 - self.lam)) * np.where(self.n > 0, self.n, 0.0) / N
        return out

    def summary(self) -> dict[str, float | None]:
        return {"mean": self.m, "strength": None if math.isinf(self.k) else self.k}


def _eb_shrink(success: FloatArray, n: FloatArray) -> FloatArray:
    """Empirical-Bayes posterior means of per-labeler proportions ``success / n`` (beta-binomial, moments).

    The prior ``Beta(k m, k (1 - m))`` has ``m`` the pooled proportion and ``k`` from the method of
    moments: the between-labeler variance ``tau^2`` is the variance of the labelers' proportions (weighted
    by ``n``) less their mean binomial variance, and ``k = m (1 - m) / tau^2 - 1``. Labelers with ``n = 0``
    get ``m``. With ``tau^2 <= 0`` (no evidence of heterogeneity) every labeler gets ``m``.

    Examples
    --------
    >>> from heroeval.estimators._methods import _eb_shrink
    >>> import numpy as np
    >>> _eb_shrink(np.array([1.0, 3.0]), np.array([2.0, 6.0])).round(3).tolist()   # both at the pool: 1/2
    [0.5, 0.5]
    """
    m, k = beta_binomial_prior(success, n)
    if math.isinf(k):
        return np.full(n.shape, m)
    out: FloatArray = (success + k * m) / (n + k)
    return out


def _gold_item_influence(
    hist: AnnotationSet,
    u: npt.NDArray[np.int64],
    a: FloatArray,
    b: FloatArray,
    npos: FloatArray,
    nneg: FloatArray,
    ca: FloatArray,
    cb: FloatArray,
    per_labeler: bool,
) -> FloatArray:
    """Influence of each history item on ``ca_j alpha_j + cb_j beta_j`` (gold-only proportions) for labelers ``u``.

    Item g with gold 1 moves ``alpha_j`` by ``sum (z - alpha_j) / n_pos_j`` over j's labels on g;
    gold 0 moves ``beta_j`` likewise. Returns (history items x len(u)) when ``per_labeler``,
    else (history items x 1) summed over labelers.
    """
    J = a.size
    coef_a = np.zeros(J)
    coef_b = np.zeros(J)
    coef_a[u] = ca
    coef_b[u] = cb
    item_of = hist.annotation_item
    g = hist.gold[item_of]
    lab = hist.labeler.astype(np.int64)
    z = hist.label.astype(np.float64)
    val = np.where(g == 1, (z - a[lab]) / np.maximum(npos[lab], 1.0), ((1 - z) - b[lab]) / np.maximum(nneg[lab], 1.0))
    coef = np.where(g == 1, coef_a[lab], np.where(g == 0, coef_b[lab], 0.0))
    if per_labeler:
        pos_in_u = np.full(J, -1, dtype=np.int64)
        pos_in_u[u] = np.arange(u.size)
        k = pos_in_u[lab]
        ok = (k >= 0) & (g >= 0)
        out = np.zeros((hist.n_items, u.size))
        np.add.at(out, (item_of[ok], k[ok]), (coef * val)[ok])
        return out
    ok = g >= 0
    res = np.bincount(item_of[ok], weights=(coef * val)[ok], minlength=hist.n_items).astype(np.float64)
    return res[:, None]


def _min_variance_weights(S: FloatArray, model_var: FloatArray, shrink: float = 0.5) -> FloatArray:
    """Non-negative weights summing to 1 minimising ``w' C w``.

    ``C`` has the model variances on its diagonal and the influence-value
    correlations of ``S``, shrunk by ``shrink`` towards zero, off it.
    """
    from scipy.optimize import minimize

    d = np.sqrt(np.maximum(np.diag(S), 1e-300))
    R = S / np.outer(d, d)
    R = (1 - shrink) * R + shrink * np.eye(R.shape[0])
    sd = np.sqrt(model_var)
    C = R * np.outer(sd, sd)
    k = C.shape[0]
    w0 = (1 / model_var) / np.sum(1 / model_var)
    if k > 300:  # the quadratic programme gets slow; the diagonal weights are the fallback
        return w0
    scale = float(w0 @ C @ w0)
    res = minimize(
        lambda x: float(x @ C @ x) / scale, w0, jac=lambda x: 2 * (C @ x) / scale, method="SLSQP",
        bounds=[(0.0, 1.0)] * k, constraints=[{"type": "eq", "fun": lambda x: float(x.sum()) - 1.0}],
        options={"maxiter": 200, "ftol": 1e-12},
    )
    w = np.clip(res.x, 0.0, None) if res.success else w0
    out: FloatArray = w / w.sum()
    return out


SHIFT_ALPHA = 1e-3
"""HERO-2 warns (CovariateShiftWarning) when the covariate-shift test's p-value is below this."""


def _covariate_shift(X: FloatArray, cal: Calibration, live: npt.NDArray[np.bool_]) -> dict[str, Any]:
    """Wald test of equal covariate means: current mean vs the history's.

    ``d = Xbar - m_X`` has covariance ``S_cur / n + S_hist / N`` (independent
    samples); ``d' V^+ d`` is chi-squared with rank(V) degrees of freedom.
    Per-column z statistics are reported too.
    """
    from scipy.stats import chi2

    assert cal.covariate_mean is not None and cal.covariate_cov is not None
    n = X.shape[0]
    N = max(cal.n_covariate_items, 1)
    d = X.mean(axis=0) - cal.covariate_mean
    Sc = np.atleast_2d(np.cov(X, rowvar=False, ddof=1)) if n > 1 else np.zeros((X.shape[1],) * 2)
    V = Sc / n + np.asarray(cal.covariate_cov) / N
    idx = np.flatnonzero(live)
    z = np.full(d.size, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        z[idx] = d[idx] / np.sqrt(np.diag(V)[idx])
    if idx.size == 0:
        return {"covariate_shift_stat": 0.0, "covariate_shift_df": 0, "covariate_shift_p": 1.0,
                "covariate_shift_z": z.tolist()}
    Vl = V[np.ix_(idx, idx)]
    stat = float(d[idx] @ np.linalg.pinv(Vl, hermitian=True) @ d[idx])
    df = int(np.linalg.matrix_rank(Vl, hermitian=True))
    p = float(chi2.sf(stat, df)) if df > 0 else 1.0
    return {"covariate_shift_stat": stat, "covariate_shift_df": df, "covariate_shift_p": p,
            "covariate_shift_z": z.tolist()}


def _effective_n(hero1: Influence, hero2: Influence) -> dict[str, float]:
    """How many current items HERO-1 would need to match HERO-2's variance.

    HERO-1's variance is ``v_c / n + v_h`` (current part shrinks with n, the
    history part does not); solving ``v_c / n' + v_h = Var(HERO-2)`` gives the
    effective n. Infinite when HERO-2's variance is below HERO-1's history part.
    """
    n = hero1.n
    v1c, v1h, v2 = hero1.variance_current(), hero1.variance_history(), hero2.variance()
    ratio = v2 / (v1c + v1h) if (v1c + v1h) > 0 else math.nan
    if not all(map(math.isfinite, (v1c, v1h, v2))):
        return {"variance_ratio_vs_hero1": math.nan, "effective_n": math.nan, "items_saved": math.nan}
    eff = v1c * n / (v2 - v1h) if v2 > v1h else math.inf
    return {"variance_ratio_vs_hero1": ratio, "effective_n": eff, "items_saved": eff - n}


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
    data = _check_current(current)
    cal = _check_calibration(calibration)
    hist = cal.history
    if hist is None:
        raise HeroEvalError(
            "hero_joint needs the history, not only a calibration file: calibrate from the history "
            "in this process (CLI: --history/--gold instead of --calibration)"
        )
    al = _align(data, cal, exclude_new_labelers)
    cur = al.data
    L = _llr(cur, al.to_calib, cal.alpha, cal.beta)
    mu1, _ = solve_score(L)
    G = hist.n_rounds
    ptr = np.concatenate([hist.item_ptr, hist.item_ptr[-1] + cur.item_ptr[1:]])
    lab = np.concatenate([hist.labeler.astype(np.int64), al.to_calib[cur.labeler]])
    lbl = np.concatenate([hist.label, cur.label])
    gold = np.concatenate([hist.gold, np.full(cur.n_items, -1, dtype=np.int8)])
    grp = np.concatenate([hist.item_round, np.full(cur.n_items, G, dtype=np.int32)])
    s = cal.settings
    d = replace(_em.make_design(ptr, lab, lbl, cal.n_labelers, gold, grp, G + 1,
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
    criterion = str(s.get("criterion", "parameters"))
    accelerate = bool(s.get("accelerate", True))
    prev0 = np.concatenate([cal.round_prevalence, [min(max(mu1, 0.01), 0.99) if math.isfinite(mu1) else 0.5]])
    fit = _em.run_em(
        d, np.asarray(cal.alpha), np.asarray(cal.beta), prev0,
        tol=tol, max_iter=max_iter, criterion=criterion, accelerate=accelerate,
    )
    conv = ConvergenceInfo.from_fit(fit, tol, max_iter, criterion, accelerate)
    if not fit.converged:
        warnings.warn(f"joint EM did not converge in {fit.n_iter} iterations", ConvergenceWarning, stacklevel=2)
    details = {**al.details, "hero1_estimate": mu1}
    IF = _fit_influence(d, fit, 2 * cal.n_labelers + G, _eb_extra(hist, s, fit, G + 1))
    N = hist.n_items
    infl = Influence(IF[N:] * cur.n_items, "items", IF[:N], None, hash(cal.token))
    # its score test: HERO-1's at the jointly fitted sensitivities and specificities, with the history-only
    # parameter covariance (conservative: the joint fit also learns from the current labels)
    status = _em_status(fit.prev[G])
    est = float(fit.prev[G])
    est = 0.0 if status == "boundary_0" else 1.0 if status == "boundary_1" else est
    La = _llr(cur, al.to_calib, fit.alpha, fit.beta)
    test = ScoreTest(
        center=est, L=La, counts=np.ones(La.size), item_ptr=cur.item_ptr, labeler=al.to_calib[cur.labeler],
        alpha=np.asarray(fit.alpha, dtype=float), beta=np.asarray(fit.beta, dtype=float), space="stage_a",
        V=cal.covariance, n_parameters=cal.n_parameters,
    )
    return _result("hero_joint", fit.prev[G], cur, convergence=conv, details=details, notes=al.notes,
                   influence=infl, status=status, test=test)


def _em_status(p: float) -> str:
    """An EM prevalence at its numerical bound is a boundary estimate (0 or 1): no Wald-type SE."""
    if p < _influence.BOUND_TOL:
        return "boundary_0"
    if p > 1 - _influence.BOUND_TOL:
        return "boundary_1"
    return "interior"


# ---------------------------------------------------------------------------
# One entry point
# ---------------------------------------------------------------------------


def estimate_methods(
    current: AnnotationSet,
    calibration: Calibration | None = None,
    *,
    method: str | Sequence[str] = "hero1",
    history: AnnotationSet | None = None,
    ridge: float = 0.0,
    tie: TieRule = "half",
    exclude_new_labelers: bool = False,
    rng: np.random.Generator | int | None = None,
    new_labelers: NewLabelerRule | None = None,
    on_shift: ShiftRule = "warn",
) -> EstimateResult | EstimateCollection:
    """Run one estimator, several, or ``"all"`` on the current round: the dispatch behind :func:`heroeval.estimate`.

    The parameters are those of :func:`heroeval.estimate`, which documents
    them, without the recommended estimate (``method="auto"`` and
    ``recommend``): the choice among methods is made above the estimators,
    in :mod:`heroeval.choice`, and composed with this dispatch in
    :mod:`heroeval.workflows.api`.
    """
    data = _check_current(current)
    if calibration is None:
        if history is None:
            raise HeroEvalError("pass a calibration or a history to calibrate from")
        calibration = fit_stage_a(history)
    cal = with_history(_check_calibration(calibration), history)
    single = isinstance(method, str) and method != "all"
    if isinstance(method, str):
        wanted = list(METHODS) if method == "all" else [method]
    else:
        wanted = list(method)
    for m in wanted:
        if m == "auto":
            raise HeroEvalError("method 'auto' (the recommended estimate) is chosen by heroeval.estimate, "
                                "not by the estimators' dispatch")
        if m not in METHODS:
            raise HeroEvalError(f"unknown method {m!r}; choose from {list(METHODS)}, 'auto' or 'all'")
    results: dict[str, EstimateResult] = {}
    skipped: dict[str, str] = {}
    rule = _new_labeler_rule(new_labelers, exclude_new_labelers)
    anchored = rule == "estimate" and _has_unknown(data, cal)
    excl = rule == "exclude"
    for m in wanted:
        if anchored and m in ("gold_proportion", "rogan_gladen", "hero2", "hero_joint"):
            if single:
                raise HeroEvalError(f"new_labelers='estimate' is implemented for hero1 only, not {m}")
            skipped[m] = "new_labelers='estimate' is implemented for hero1 only"
            continue
        if m == "hero2" and not single and (data.covariates is None or cal.covariate_mean is None):
            skipped[m] = "needs covariates for the current round and the history"
            continue
        if m == "hero_joint" and not single and cal.history is None:
            skipped[m] = "needs the history itself, not only a calibration file"
            continue
        if m == "majority_vote":
            results[m] = majority_vote(data, tie=tie, rng=rng)
        elif m == "dawid_skene":
            results[m] = dawid_skene(data)
        elif m == "gold_proportion":
            results[m] = gold_proportion(data, cal, exclude_new_labelers=excl)
        elif m == "hero1":
            results[m] = hero1(data, cal, new_labelers=rule)  # type: ignore[arg-type]
        elif m == "hero2":
            results[m] = hero2(data, cal, ridge=ridge, exclude_new_labelers=excl, on_shift=on_shift)
        elif m == "rogan_gladen":
            results[m] = rogan_gladen(data, cal, exclude_new_labelers=excl)
        else:
            results[m] = hero_joint(data, cal, exclude_new_labelers=excl)
    if single:
        return results[wanted[0]]
    return EstimateCollection(results, ingest=data.report, skipped=skipped)


def with_history(cal: Calibration, history: AnnotationSet | None) -> Calibration:
    """The calibration with its history attached (needed by ``hero_joint`` and the checks), after checking they match."""
    if history is None or cal.history is not None:
        return cal
    if tuple(str(x) for x in history.labeler_ids) != cal.labeler_ids or history.round_ids != cal.round_ids:
        raise HeroEvalError(
            "the history does not match the calibration: its labelers or rounds differ "
            f"({history.n_labelers} labelers, rounds {list(history.round_ids)[:5]} against "
            f"{cal.n_labelers} labelers, rounds {list(cal.round_ids)[:5]}); calibrate from this history instead"
        )
    return replace(cal, history=history)
