"""Checks of HERO's transport assumptions: labeler drift and covariate shift.

Labeler drift. HERO assumes each labeler's sensitivity ``alpha_j`` and
specificity ``beta_j`` are the same in the current round as in the history.
Whatever the dependence between labelers, labeler j's marginal positive rate
in the current round is then

    pi_j = mu alpha_j + (1 - mu) (1 - beta_j).

:func:`check_drift` compares the observed rate ``p_j`` (share of j's current
labels that are 1) with ``pi_j`` at the HERO-1 estimate ``mu_hat`` and the
calibration's ``(alpha, beta)``. The residual ``r_j = p_j - pi_j(mu_hat,
theta_hat)`` is linearised as

    r_j ~= (p_j - pi_j) - d_j (mu_hat - mu) - mu (alpha_hat_j - alpha_j)
           + (1 - mu) (beta_hat_j - beta_j),        d_j = alpha_j + beta_j - 1,

and every term is written in influence values: ``p_j`` has current influence
``(s_ij - p_j c_ij) n / m_j`` (``s_ij`` and ``c_ij`` are j's positive labels
and labels on item i, ``m_j`` its labels in all), ``mu_hat`` has HERO-1's
current influence (it is fitted from the same labels, so the two are
correlated and the covariance is taken item by item) and history gradient
``c_mu``; the calibration's ``parameter_covariance`` carries the history
term. So ``Cov(r) = Phi' Phi / n^2 + G V G'`` with ``Phi`` the n x J matrix of
current influences and ``G`` the J x P history gradients. Each labeler gets a
z test ``r_j / sd_j``; p-values are adjusted for the number of labelers (Holm
by default, or Benjamini–Hochberg); the overall test is ``r' Cov(r)^+ r``
against chi-squared with rank(Cov) degrees of freedom (the residuals are
linearly constrained because ``mu_hat`` is fitted to them: with one labeler
the residual is 0 by construction and nothing can be tested).

Size and power are measured by simulation in ``benchmarks/drift.py``
(``docs/assumptions.md``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.stats import chi2, norm

from heroeval._core.multiple import adjust as _adjust
from heroeval.errors import DataError, HeroEvalError, TransportabilityWarning
from heroeval.estimators._methods import hero1
from heroeval.estimators.newlabelers import hero1_anchored
from heroeval.estimators.results import EstimateResult
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration

__all__ = ["DriftCheck", "check_drift", "reestimate_without"]

FloatArray = npt.NDArray[np.float64]

_RANK_TOL = 1e-8
"""Eigenvalues of the standardised residual covariance below this are treated as exact zeros."""


@dataclass(frozen=True)
class DriftCheck:
    """Result of :func:`check_drift`: one test per labeler and an overall test.

    Attributes
    ----------
    labeler_ids : tuple of str
        Calibrated labelers of the current round, in the order of the arrays.
    n_annotations : ndarray of int
        Current-round labels of each.
    observed, expected : ndarray
        Observed positive rate ``p_j`` and the rate the calibration implies at
        the HERO-1 estimate, ``mu alpha_j + (1 - mu)(1 - beta_j)``.
    standard_error, z, p_value, p_adjusted : ndarray
        Standard error of ``observed - expected`` (current sampling, the
        estimate's own uncertainty and the calibration's), its z statistic,
        two-sided p-value, and the p-value adjusted for the number of labelers.
    flagged : tuple of str
        Labelers whose adjusted p-value is below ``significance``.
    overall_stat, overall_df, overall_p : float, int, float
        Chi-squared test that no labeler drifted.
    mu : float
        The HERO-1 estimate the expectations use.
    adjust : str
        ``"holm"`` or ``"bh"``.
    significance : float
    excluded : tuple of str
        Current labelers the calibration does not know (not tested).
    notes : tuple of str
    """

    labeler_ids: tuple[str, ...]
    n_annotations: npt.NDArray[np.int64]
    observed: FloatArray
    expected: FloatArray
    standard_error: FloatArray
    z: FloatArray
    p_value: FloatArray
    p_adjusted: FloatArray
    flagged: tuple[str, ...]
    overall_stat: float
    overall_df: int
    overall_p: float
    mu: float
    adjust: str
    significance: float
    excluded: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    covariance: FloatArray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)

    @property
    def drift_detected(self) -> bool:
        """Whether some labeler is flagged or the overall test rejects at ``significance``."""
        return bool(self.flagged) or (math.isfinite(self.overall_p) and self.overall_p < self.significance)

    def to_dict(self) -> dict[str, Any]:
        def f(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {
            "mu": f(self.mu),
            "adjust": self.adjust,
            "significance": self.significance,
            "overall": {"stat": f(self.overall_stat), "df": self.overall_df, "p_value": f(self.overall_p)},
            "flagged": list(self.flagged),
            "excluded": list(self.excluded),
            "labelers": [
                {
                    "id": lab,
                    "n_annotations": int(self.n_annotations[k]),
                    "observed": f(self.observed[k]),
                    "expected": f(self.expected[k]),
                    "standard_error": f(self.standard_error[k]),
                    "z": f(self.z[k]),
                    "p_value": f(self.p_value[k]),
                    "p_adjusted": f(self.p_adjusted[k]),
                    "flagged": lab in self.flagged,
                }
                for k, lab in enumerate(self.labeler_ids)
            ],
            "notes": list(self.notes),
        }

    def summary(self) -> str:
        """A plain-text table, one row per labeler, and the overall test."""
        rows = [("labeler", "labels", "observed", "expected", "z", "p", f"p ({self.adjust})", "")]
        for k, lab in enumerate(self.labeler_ids):
            rows.append((lab, str(int(self.n_annotations[k])), f"{self.observed[k]:.4f}", f"{self.expected[k]:.4f}",
                         f"{self.z[k]:.2f}", f"{self.p_value[k]:.3g}", f"{self.p_adjusted[k]:.3g}",
                         "DRIFT" if lab in self.flagged else ""))
        w = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        lines = ["  ".join(c.rjust(wi) if i else c.ljust(wi) for i, (c, wi) in enumerate(zip(r, w, strict=True)))
                 for r in rows]
        lines.append(f"overall: chi2 = {self.overall_stat:.3f} on {self.overall_df} df, p = {self.overall_p:.3g}")
        lines.extend(self.notes)
        return "\n".join(lines)


def _per_labeler_sums(data: AnnotationSet) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Items x labelers matrices of label counts and positive-label counts."""
    item = data.annotation_item
    lab = data.labeler.astype(np.int64)
    shape = (data.n_items, data.n_labelers)
    C = sp.csr_matrix((np.ones(item.size), (item, lab)), shape=shape)
    S = sp.csr_matrix((data.label.astype(np.float64), (item, lab)), shape=shape)
    return C, S


def check_drift(
    current: AnnotationSet,
    calibration: Calibration,
    *,
    significance: float = 0.05,
    adjust: Literal["holm", "bh"] = "holm",
    warn: bool = True,
    sequential: bool = True,
) -> DriftCheck:
    """Test whether each labeler's current behaviour matches its calibration.

    See the module docstring for the statistic. Labelers unknown to the
    calibration are left out (listed in ``excluded``); the HERO-1 estimate is
    computed without them.

    Parameters
    ----------
    current : AnnotationSet
    calibration : Calibration
    significance : float, default 0.05
        Level of the per-labeler tests (after adjustment) and of the overall test.
    adjust : {"holm", "bh"}
        Holm (family-wise error) or Benjamini–Hochberg (false discovery rate).
    warn : bool, default True
        Emit a :class:`~heroeval.errors.TransportabilityWarning` naming the
        flagged labelers when drift is detected.
    sequential : bool, default True
        With Holm: a step-down procedure that refits after each flag. The most
        significant labeler is flagged if its p-value is below
        ``significance / m`` (m testable labelers); it is then dropped, HERO-1
        and the tests are refitted on the others, and the next most
        significant is compared with ``significance / (m - 1)``, and so on. A
        strongly drifted labeler biases the rate every other labeler is
        compared with; refitting keeps it from dragging innocent labelers
        along. Under no drift the first step is Holm's, so the family-wise
        error is still at most ``significance``. ``False``: single-step
        adjusted p-values from one fit with every labeler.

    Examples
    --------
    >>> import numpy as np, heroeval as he
    >>> from heroeval.simulate import shift_dgp
    >>> beta_now = np.array([0.85, 0.85, 0.85, 0.85, 0.45])   # L04's specificity collapses
    >>> d = shift_dgp(3, alpha=np.full(5, 0.85), beta=np.full(5, 0.85), current_beta=beta_now, N=1500, n=600)
    >>> chk = check_drift(d.current, he.calibrate(d.history), warn=False)
    >>> chk.flagged
    ('L04',)
    """
    if not (isinstance(significance, (int, float)) and 0 < significance < 1):
        raise HeroEvalError(f"significance must be in (0, 1), got {significance!r}")
    if adjust not in ("holm", "bh"):
        raise HeroEvalError(f"adjust must be 'holm' or 'bh', got {adjust!r}")
    if not isinstance(current, AnnotationSet):
        raise HeroEvalError(f"current must be an AnnotationSet, got {type(current).__name__}")
    if not isinstance(calibration, Calibration):
        raise HeroEvalError(f"calibration must be a Calibration, got {type(calibration).__name__}")
    cal = calibration
    index = cal.index_of()
    known = np.array([str(x) in index for x in current.labeler_ids], dtype=bool)
    excluded = tuple(str(x) for x in current.labeler_ids[~known])
    data = current
    if not known.all():
        data, _, _ = current.select_labelers(known)
        if data.n_items == 0:
            raise DataError(f"current round {current.name!r}: no labeler is known to the calibration")
    notes: list[str] = []
    if excluded:
        notes.append(f"{len(excluded)} labeler(s) unknown to the calibration not tested: {list(excluded[:5])}")
    first = _drift_stats(data, cal)
    notes.extend(first.notes)
    ids, mu = first.ids, first.mu
    J = len(ids)
    observed, expected, se, z, p = (x.copy() for x in (first.observed, first.expected, first.se, first.z, first.p))
    m = first.m
    if sequential and adjust == "holm" and math.isfinite(mu):
        # Holm step-down with re-estimation: flag the most significant labeler at level significance/(m - s),
        # drop it, refit HERO-1 and the tests on the rest, repeat. A drifted labeler then no longer biases the
        # rate the others are compared with.
        n_test = int(np.isfinite(first.p).sum())
        flagged_l: list[str] = []
        p_adj = np.full(J, np.nan)
        cur_stats, cur_data, running = first, data, 0.0
        while True:
            pv = cur_stats.p
            if not np.isfinite(pv).any():
                break
            k = int(np.nanargmin(pv))
            lab = cur_stats.ids[k]
            step = len(flagged_l)
            running = max(running, min(1.0, (n_test - step) * float(pv[k])))
            j = ids.index(lab)
            p_adj[j] = running
            observed[j], expected[j], se[j], z[j], p[j] = (cur_stats.observed[k], cur_stats.expected[k],
                                                           cur_stats.se[k], cur_stats.z[k], pv[k])
            if running >= significance:
                # not flagged: the remaining labelers keep this step's statistics
                for kk, other in enumerate(cur_stats.ids):
                    jj = ids.index(other)
                    observed[jj], expected[jj], se[jj], z[jj], p[jj] = (
                        cur_stats.observed[kk], cur_stats.expected[kk], cur_stats.se[kk], cur_stats.z[kk],
                        cur_stats.p[kk])
                    if kk != k and math.isfinite(cur_stats.p[kk]):
                        p_adj[jj] = max(running, min(1.0, (n_test - step) * float(cur_stats.p[kk])))
                break
            flagged_l.append(lab)
            keep = np.array([str(x) != lab for x in cur_data.labeler_ids], dtype=bool)
            nxt, _, _ = cur_data.select_labelers(keep)
            if nxt.n_items == 0 or nxt.n_labelers < 2:
                break
            cur_data = nxt
            cur_stats = _drift_stats(cur_data, cal)
            if not math.isfinite(cur_stats.mu):
                break
        flagged = tuple(flagged_l)
        if flagged:
            notes.append(f"sequential Holm: after dropping {list(flagged)} the rate is {cur_stats.mu:.4f} "
                         f"(with all labelers {mu:.4f})")
    else:
        p_adj = _adjust(p, adjust)
        flagged = tuple(ids[k] for k in np.flatnonzero(np.nan_to_num(p_adj, nan=1.0) < significance))
    stat, df, p_all, cov = first.stat, first.df, first.p_all, first.cov
    out = DriftCheck(ids, m, observed, expected, se, z, p, p_adj, flagged, stat, df, p_all, mu,
                     adjust, float(significance), excluded, tuple(notes), cov)
    if warn and out.drift_detected:
        who = (f"labeler(s) {list(flagged)} behave differently from their calibration" if flagged
               else "no single labeler is identified, but the labelers jointly disagree with the calibration")
        warnings.warn(
            f"labeler drift in {current.name!r}: {who} (overall p = {p_all:.2g}); HERO assumes sensitivities and "
            "specificities transport from the history. Re-estimate without them: "
            "heroeval.checks.drift.reestimate_without(current, calibration, check.flagged)",
            TransportabilityWarning,
            stacklevel=2,
        )
    return out


@dataclass
class _Stats:
    ids: tuple[str, ...]
    m: npt.NDArray[np.int64]
    observed: FloatArray
    expected: FloatArray
    se: FloatArray
    z: FloatArray
    p: FloatArray
    stat: float
    df: int
    p_all: float
    mu: float
    cov: FloatArray
    notes: list[str]


def _drift_stats(data: AnnotationSet, cal: Calibration) -> _Stats:
    """Residuals, their covariance, per-labeler z tests and the overall test for the labelers of ``data``."""

    notes: list[str] = []
    index = cal.index_of()
    res: EstimateResult = hero1(data, cal)
    mu = res.estimate
    C, S = _per_labeler_sums(data)
    m = np.asarray(C.sum(axis=0)).ravel()
    present = np.flatnonzero(m > 0)  # a labeler id may be listed without annotations (e.g. after take_items)
    C, S, m = C[:, present], S[:, present], m[present]
    ids = tuple(str(data.labeler_ids[k]) for k in present)
    J = len(ids)
    to_cal = np.array([index[x] for x in ids], dtype=np.int64)
    a = np.asarray(cal.alpha)[to_cal]
    b = np.asarray(cal.beta)[to_cal]
    pos = np.asarray(S.sum(axis=0)).ravel()
    p_obs = pos / m
    nan = np.full(J, np.nan)
    if not math.isfinite(mu):
        notes.append("no current label carries information about the rate: nothing to test")
        return _Stats(ids, m.astype(np.int64), p_obs, nan, nan, nan, nan.copy(), math.nan, 0, math.nan, mu,
                      np.zeros((J, J)), notes)
    expected = mu * a + (1 - mu) * (1 - b)
    r = p_obs - expected
    n = data.n_items
    # current influence of p_j (mean-over-items scale): (s_ij - p_j c_ij) n / m_j
    Phi = (S - C.multiply(p_obs[None, :])).toarray() * (n / m)[None, :]
    dj = a + b - 1
    infl = res.influence
    assert infl is not None
    interior = res.status == "interior"
    if interior:
        Phi = Phi - np.outer(infl.current, dj)
    else:
        notes.append(f"HERO-1 estimate on the boundary ({res.status}): its uncertainty is not propagated")
    cov = Phi.T @ Phi / n**2
    V = cal.parameter_covariance
    if V is not None:
        G = np.zeros((J, cal.n_parameters))
        if interior and infl.history is not None:
            G -= np.outer(dj, infl.history)
        G[np.arange(J), to_cal] -= mu
        G[np.arange(J), cal.n_labelers + to_cal] += 1 - mu
        cov = cov + G @ V @ G.T
    else:
        notes.append("the calibration has no parameter covariance: its uncertainty is ignored (the test is "
                     "anti-conservative)")
    cov = 0.5 * (cov + cov.T)
    # scale: the sampling variance of p_j alone, to tell a real zero from rounding
    pc = np.clip(p_obs, 0.5 / m, 1 - 0.5 / m)
    scale = pc * (1 - pc) / m
    var = np.diag(cov).copy()
    live = var > _RANK_TOL * scale
    se = np.where(live, np.sqrt(np.maximum(var, 0)), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(live, r / se, np.nan)
    p = np.where(live, 2 * norm.sf(np.abs(z)), np.nan)
    if not live.all():
        notes.append(
            f"{int((~live).sum())} labeler(s) cannot be tested (their residual has no variance: a single labeler "
            "fits the estimate exactly, or every label of theirs agrees)"
        )
    # overall chi-squared on the standardised residuals
    stat, df, p_all = 0.0, 0, math.nan
    idx = np.flatnonzero(live)
    if idx.size:
        D = 1 / np.sqrt(scale[idx])
        Cs = cov[np.ix_(idx, idx)] * np.outer(D, D)
        w, U = np.linalg.eigh(Cs)
        keep = w > _RANK_TOL * max(1.0, float(w.max()))
        df = int(keep.sum())
        if df:
            proj = U[:, keep].T @ (r[idx] * D)
            stat = float(np.sum(proj**2 / w[keep]))
            p_all = float(chi2.sf(stat, df))
    return _Stats(ids, m.astype(np.int64), p_obs, expected, se, z, p, stat, df, p_all, mu, cov, notes)


def reestimate_without(
    current: AnnotationSet,
    calibration: Calibration,
    labelers: Iterable[str] | DriftCheck,
    *,
    how: Literal["drop", "estimate"] = "drop",
) -> EstimateResult:
    """HERO-1 without trusting the calibration of some labelers (e.g. those flagged for drift).

    ``how="drop"`` leaves their labels out; ``how="estimate"`` keeps them and
    re-estimates their sensitivity and specificity from the current round,
    anchored by the other labelers (:func:`heroeval.estimators.newlabelers.hero1_anchored`).

    Examples
    --------
    >>> import numpy as np, heroeval as he
    >>> from heroeval.simulate import shift_dgp
    >>> d = shift_dgp(0, alpha=np.full(4, 0.85), beta=np.full(4, 0.85))
    >>> res = reestimate_without(d.current, he.calibrate(d.history), ["L03"])
    >>> res.details["dropped_labelers"]
    ['L03']
    """

    names = list(labelers.flagged) if isinstance(labelers, DriftCheck) else [str(x) for x in labelers]
    if how not in ("drop", "estimate"):
        raise HeroEvalError(f"how must be 'drop' or 'estimate', got {how!r}")
    if how == "estimate":
        return hero1_anchored(current, calibration, treat_as_new=names)
    present = {str(x) for x in current.labeler_ids}
    keep = np.array([str(x) not in set(names) for x in current.labeler_ids], dtype=bool)
    data, n_ann, n_items = current.select_labelers(keep)
    if data.n_items == 0:
        raise DataError(f"current round {current.name!r}: no labels left after dropping {names}")
    res = hero1(data, calibration)
    dropped = [x for x in names if x in present]
    details = {**res.details, "dropped_labelers": dropped, "dropped_annotations": n_ann, "dropped_items": n_items}
    note = f"dropped {len(dropped)} labeler(s) {dropped}: {n_ann} annotations, {n_items} item(s) left without labels"
    from dataclasses import replace

    return replace(res, details=details, notes=(*res.notes, note))


# ---------------------------------------------------------------------------
# Covariate shift (HERO-2's shared-distribution assumption)
# ---------------------------------------------------------------------------
