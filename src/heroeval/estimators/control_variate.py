"""HERO-2: HERO-1's score equation with a control variate on covariates whose history mean is known."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval.errors import (
    CovariateShiftWarning,
    HeroEvalError,
    SharedCovariatesWarning,
)
from heroeval.estimators.common import (
    FloatArray,
    ScoreInputs,
    ShiftRule,
    align,
    check_calibration,
    check_current,
    log_likelihood_ratios,
    result_of,
    score_test,
    stage_a_influence,
)
from heroeval.estimators.results import EstimateResult, Influence
from heroeval.estimators.score_equation import psi, solve_score
from heroeval.estimators.shift import covariate_overlap, shift_columns
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration

__all__ = ["SHIFT_ALPHA", "hero2"]


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
    data = check_current(current)
    cal = check_calibration(calibration)
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
    al = align(data, cal, exclude_new_labelers)
    L = log_likelihood_ratios(al.data, al.to_calib, cal.alpha, cal.beta)
    mu1, st1 = solve_score(L)
    if st1 == "unidentified":
        return result_of("hero2", mu1, al.data, status=st1, details=dict(al.details),
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
    si = ScoreInputs(cal, al.data, al.to_calib, cal.alpha, cal.beta, L)
    if shifted and on_shift == "fallback":
        infl1 = stage_a_influence(si, mu1, ps)
        reason = (f"covariate shift detected (overall p = {details['covariate_shift_p']:.3g}, smallest Holm-adjusted "
                  f"per-column p = {details['covariate_shift_min_p_holm']:.3g} < {shift_level:g})")
        details.update(fallback="hero1", fallback_reason=reason, hero2_estimate=mu2)
        return result_of("hero2", mu1, al.data, status=st1, details=details, influence=infl1,
                       test=score_test(si, mu1, infl1),
                       notes=(*al.notes, f"HERO-1 estimate returned instead of HERO-2: {reason}"))
    ps2 = psi(mu2, L)
    infl = stage_a_influence(si, mu2, ps2 - Xc @ gamma, gamma_x=gamma)
    infl1 = stage_a_influence(si, mu1, ps)
    details.update(_effective_n(infl1, infl))
    notes = al.notes
    if cal.covariance is None:
        notes = (*notes, "the calibration has no parameter covariance: no standard error")
    test = score_test(si, mu2, infl, offset=offset, gamma_x=gamma, Xc=Xc)
    return result_of("hero2", mu2, al.data, status=status, details=details, notes=notes, influence=infl, test=test)


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
