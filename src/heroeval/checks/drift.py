"""Checks of HERO's transport assumptions: labeler drift and covariate shift.

Labeler drift. HERO assumes each labeler's sensitivity ``alpha_j`` and
specificity ``beta_j`` are the same in the current round as in the history.
Whatever the dependence between labelers, labeler j's marginal positive rate
in the current round is then

    pi_j = mu alpha_j + (1 - mu) (1 - beta_j),

and, when j's items are a random draw from the round, the number ``S_j`` of
positive labels among its ``m_j`` current labels is Binomial(m_j, pi_j).
:func:`check_drift` compares ``S_j`` with that law at the HERO-1 estimate
``mu_hat`` and the calibration's ``(alpha, beta)``:

* **Boundary guard.** A parameter fitted within 1e-6 of 0 or 1 (a labeler
  with few history labels, all agreeing with the posterior) is replaced, for
  the test only, by its Jeffreys posterior mean ``(h p + 1/2) / (h + 1)``,
  ``h`` the labeler's effective history labels of that class (gold labels of
  the class plus its other labels times the history's prevalence). Every
  parameter's variance is at least the Jeffreys posterior variance
  ``t (1 - t) / (h + 2)`` (the sandwich covariance gives boundary parameters
  no variance at all, and is unreliable from a handful of labels).
* **Variance of the residual** ``r_j = p_j - pi_j`` (``p_j = S_j / m_j``):
  current sampling, the correlation with ``mu_hat`` (fitted from the same
  labels; taken item by item from the influence values), and the history
  term ``G V G'`` from the calibration's ``parameter_covariance`` plus the
  floors above. The current sampling variance of ``p_j`` is the larger of the
  null value ``pi_j (1 - pi_j) / m_j`` and the empirical one: the empirical
  variance alone is 0 for a labeler whose few labels agree, which made a
  single label look like a z of 30.
* **Per-labeler test.** When both expected counts ``m_j pi_j`` and
  ``m_j (1 - pi_j)`` are at least 10, a z test ``r_j / sd_j``. Otherwise an
  exact test: ``S_j`` against a beta-binomial with mean ``pi_j`` whose extra
  variance is the non-binomial part of ``sd_j^2`` (the calibration's and
  ``mu_hat``'s uncertainty; binomial when there is none), two-sided p-value
  ``min(1, 2 min(P(S <= s), P(S >= s)))``.
* **Multiplicity.** A labeler with a few labels cannot reach a small p-value
  at all (one label: p >= 2 min(pi, 1 - pi)). Tarone's (1990) rule counts
  only the labelers that can: the family size ``K`` is the smallest k with at
  most k labelers whose smallest attainable p-value is <= significance / k.
  Holm (default, sequential with refits, see :func:`check_drift`) or
  Benjamini–Hochberg then run with ``K`` in place of the number of labelers;
  labelers that cannot reach the threshold are never flagged. The
  family-wise (or false-discovery) error stays at most ``significance``.
* **Overall test** (``overall_p``): Bonferroni combination of two tests, each
  at half the level: the chi-squared ``r' Cov(r)^+ r`` over the z-tested
  labelers (rank(Cov) degrees of freedom: the residuals are linearly
  constrained because ``mu_hat`` is fitted to them; with one labeler the
  residual is 0 by construction and nothing can be tested), and Tarone's
  Bonferroni test of the smallest per-labeler p-value (family size at half
  the level). ``overall_p = min(1, 2 min(p_chi2, K p_min))``.

Labelers unknown to the calibration (new workers of a crowd round) are left
out (``excluded``, with a note), unless ``new_labelers="error"``.

Size and power: simulation in ``benchmarks/drift.py``, real crowd data (random
splits, no drift by construction, and injected drift) in
``benchmarks/drift_false_alarm.py`` (``docs/assumptions.md``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.stats import betabinom, binom, chi2, norm

from heroeval.core.multiple import tarone_adjust, tarone_family_size
from heroeval.errors import DataError, HeroEvalError, TransportabilityWarning, UnknownLabelerError
from heroeval.estimators.methods import hero1
from heroeval.estimators.newlabelers import hero1_anchored
from heroeval.estimators.records import DriftCheck
from heroeval.estimators.results import EstimateResult
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration

__all__ = ["DriftCheck", "check_drift", "reestimate_without"]

FloatArray = npt.NDArray[np.float64]

_RANK_TOL = 1e-8
"""Eigenvalues of the standardised residual covariance below this are treated as exact zeros."""

_BOUND = 1e-6
"""A sensitivity or specificity this close to 0 or 1 is boundary-fitted (as ``Calibration.labelers_at_bound``)."""

NORMAL_MIN_COUNT = 10.0
"""The z test is used when both expected counts ``m pi`` and ``m (1 - pi)`` reach this; else the exact test."""


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
    new_labelers: Literal["exclude", "error"] = "exclude",
    hero1_estimate: EstimateResult | None = None,
) -> DriftCheck:
    """Test whether each labeler's current behaviour matches its calibration.

    See the module docstring for the statistic. Labelers unknown to the
    calibration are left out (listed in ``excluded``, with a note); the HERO-1
    estimate is computed without them.

    Parameters
    ----------
    current : AnnotationSet
    calibration : Calibration
    significance : float, default 0.05
        Level of the per-labeler (adjusted) tests and of the overall test.
    adjust : {"holm", "bh"}
        Holm (family-wise error) or Benjamini–Hochberg (false discovery
        rate), both with Tarone's family size (module docstring).
    warn : bool, default True
        Emit a :class:`~heroeval.errors.TransportabilityWarning` naming the
        flagged labelers when drift is detected.
    sequential : bool, default True
        With Holm: a step-down procedure that refits after each flag. The most
        significant labeler is flagged if its p-value is below
        ``significance / K`` (K: Tarone's family size of the labelers still
        in); it is then dropped, HERO-1 and the tests are refitted on the
        others, and the next most significant is compared with
        ``significance / K'`` (K' recomputed on the rest), and so on. A
        strongly drifted labeler biases the rate every other labeler is
        compared with; refitting keeps it from dragging innocent labelers
        along. Under no drift the first step is Tarone–Bonferroni's, so the
        family-wise error is still at most ``significance``. ``False``:
        single-step adjusted p-values from one fit with every labeler.
    new_labelers : {"exclude", "error"}, default "exclude"
        Labelers of ``current`` unknown to the calibration (new crowd
        workers): ``"exclude"`` leaves them out of the test and of the HERO-1
        estimate it uses, and lists them in ``excluded``; ``"error"`` raises
        :class:`~heroeval.errors.UnknownLabelerError`.
    hero1_estimate : EstimateResult, optional
        ``hero1(current, calibration)`` when the caller has computed it
        already (:func:`heroeval.estimate` has): used as the first step's
        rate when every labeler of ``current`` is known, instead of a refit.

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
    if new_labelers not in ("exclude", "error"):
        raise HeroEvalError(f"new_labelers must be 'exclude' or 'error', got {new_labelers!r}")
    if not isinstance(current, AnnotationSet):
        raise HeroEvalError(f"current must be an AnnotationSet, got {type(current).__name__}")
    if not isinstance(calibration, Calibration):
        raise HeroEvalError(f"calibration must be a Calibration, got {type(calibration).__name__}")
    cal = calibration
    alpha = float(significance)
    index = cal.index_of()
    known = np.array([str(x) in index for x in current.labeler_ids], dtype=bool)
    has_labels = np.bincount(current.labeler, minlength=current.n_labelers) > 0
    excluded = tuple(str(x) for x in current.labeler_ids[~known & has_labels])
    data = current
    notes: list[str] = []
    if not known.all():
        n_new = int(np.isin(current.labeler, np.flatnonzero(~known)).sum())
        if new_labelers == "error" and excluded:
            shown = ", ".join(repr(x) for x in excluded[:10]) + (" ..." if len(excluded) > 10 else "")
            raise UnknownLabelerError(
                f"{len(excluded)} labeler(s) of the current round {current.name!r} are not in the calibration "
                f"({n_new} annotations): {shown}. Pass new_labelers='exclude' to test the others.", excluded)
        data, _, n_items_lost = current.select_labelers(known)
        if data.n_items == 0:
            raise DataError(f"current round {current.name!r}: no labeler is known to the calibration")
        if excluded:
            shown = ", ".join(excluded[:5]) + (" ..." if len(excluded) > 5 else "")
            notes.append(f"{len(excluded)} labeler(s) unknown to the calibration not tested and left out of the "
                         f"rate ({n_new} annotations, {n_items_lost} item(s) left without labels): {shown}")
    # the caller's HERO-1 of this round with this calibration, when every labeler is known (then it is the same fit)
    first = _drift_stats(data, cal, alpha, hero1_estimate if data is current else None)
    notes.extend(first.notes)
    ids, mu = first.ids, first.mu
    J = len(ids)
    observed, expected, se, z, p = (x.copy() for x in (first.observed, first.expected, first.se, first.z, first.p))
    m = first.m
    if sequential and adjust == "holm" and math.isfinite(mu):
        # Holm step-down with re-estimation: flag the most significant labeler at level significance/K (K: Tarone's
        # family size of the labelers still in), drop it, refit HERO-1 and the tests on the rest, repeat. A drifted
        # labeler then no longer biases the rate the others are compared with.
        flagged_l: list[str] = []
        p_adj = np.full(J, np.nan)
        cur_stats, cur_data, running = first, data, 0.0
        while True:
            pv = cur_stats.p
            if not np.isfinite(pv).any():
                break
            K = tarone_family_size(cur_stats.p_min[np.isfinite(pv)], alpha)
            k = int(np.nanargmin(pv))
            lab = cur_stats.ids[k]
            running = max(running, min(1.0, K * float(pv[k])))
            j = ids.index(lab)
            p_adj[j] = running
            observed[j], expected[j], se[j], z[j], p[j] = (cur_stats.observed[k], cur_stats.expected[k],
                                                           cur_stats.se[k], cur_stats.z[k], pv[k])
            if running >= alpha:
                # not flagged: the remaining labelers keep this step's statistics
                rest = tarone_adjust(cur_stats.p, cur_stats.p_min, "holm", alpha)
                for kk, other in enumerate(cur_stats.ids):
                    jj = ids.index(other)
                    observed[jj], expected[jj], se[jj], z[jj], p[jj] = (
                        cur_stats.observed[kk], cur_stats.expected[kk], cur_stats.se[kk], cur_stats.z[kk],
                        cur_stats.p[kk])
                    if kk != k and math.isfinite(cur_stats.p[kk]):
                        p_adj[jj] = max(running, float(rest[kk]))
                break
            flagged_l.append(lab)
            keep = np.array([str(x) != lab for x in cur_data.labeler_ids], dtype=bool)
            nxt, _, _ = cur_data.select_labelers(keep)
            if nxt.n_items == 0 or nxt.n_labelers < 2:
                break
            cur_data = nxt
            cur_stats = _drift_stats(cur_data, cal, alpha)
            if not math.isfinite(cur_stats.mu):
                break
        flagged = tuple(flagged_l)
        if flagged:
            notes.append(f"sequential Holm: after dropping {list(flagged)} the rate is {cur_stats.mu:.4f} "
                         f"(with all labelers {mu:.4f})")
    else:
        p_adj = tarone_adjust(p, first.p_min, adjust, alpha)
        flagged = tuple(ids[k] for k in np.flatnonzero(np.nan_to_num(p_adj, nan=1.0) < alpha))
    out = DriftCheck(ids, m, observed, expected, se, z, p, p_adj, flagged, first.stat, first.df, first.p_all, mu,
                     adjust, alpha, excluded, tuple(notes), first.cov, first.test, first.p_min,
                     tarone_family_size(first.p_min[np.isfinite(first.p)], alpha), first.p_chi2, first.p_minp,
                     first.boundary)
    if warn and out.drift_detected:
        who = (f"labeler(s) {list(flagged)} behave differently from their calibration" if flagged
               else "no single labeler is identified, but the labelers jointly disagree with the calibration")
        # the call with what the user has: the flagged labelers by name (CLI: rewritten to hero drift's option)
        drop = repr(list(flagged)) if flagged else "<the DriftCheck heroeval.check_drift returns>"
        warnings.warn(
            f"labeler drift in {current.name!r}: {who} (overall p = {out.overall_p:.2g}); HERO assumes "
            "sensitivities and specificities transport from the history. Re-estimate without them: "
            f"heroeval.checks.drift.reestimate_without(<this round>, <its calibration>, {drop})",
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
    p_min: FloatArray
    test: tuple[str, ...]
    stat: float
    df: int
    p_chi2: float
    p_minp: float
    p_all: float
    mu: float
    cov: FloatArray
    boundary: tuple[str, ...]
    notes: list[str]


def history_label_counts(cal: Calibration, labelers: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Effective history labels of each labeler on positive and on negative items.

    Gold-labelled annotations count by their gold class; the others are split
    by the history's prevalence (items-weighted mean over its rounds).
    """
    idx = np.asarray(labelers, dtype=np.int64)
    w = np.asarray(cal.round_n_items, dtype=np.float64)
    prev = np.asarray(cal.round_prevalence, dtype=np.float64)
    mubar = float(np.sum(w * prev) / w.sum()) if w.sum() > 0 else float(np.mean(prev)) if prev.size else 0.5
    g1 = (np.asarray(cal.gold_tp) + np.asarray(cal.gold_fn))[idx].astype(np.float64)
    g0 = (np.asarray(cal.gold_tn) + np.asarray(cal.gold_fp))[idx].astype(np.float64)
    rest = np.maximum(np.asarray(cal.n_annotations, dtype=np.float64)[idx] - g1 - g0, 0.0)
    return g1 + rest * mubar, g0 + rest * (1 - mubar)


def _jeffreys(p_hat: FloatArray, h: FloatArray) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """Guarded proportion (boundary fits -> Jeffreys posterior mean), its variance floor, and the boundary mask."""
    at = np.minimum(p_hat, 1 - p_hat) < _BOUND
    t = np.where(at, (h * p_hat + 0.5) / (h + 1.0), p_hat)
    return t, t * (1 - t) / (h + 2.0), at


def exact_test(s: int, m: int, pi: float, extra_var: float = 0.0) -> tuple[float, float]:
    """Two-sided p-value of ``s`` positives in ``m`` labels, and the smallest attainable one.

    Null law: binomial(m, pi) when ``extra_var`` (variance of ``s / m`` beyond
    the binomial's) is 0, else the beta-binomial with mean ``pi`` and that
    extra variance. p = min(1, 2 min(P(S <= s), P(S >= s))).

    >>> [round(x, 4) for x in exact_test(0, 5, 0.5)]
    [0.0625, 0.0625]
    """
    if m < 1:
        return math.nan, math.nan
    pi = min(max(pi, 1e-300), 1 - 1e-16)
    ks = np.arange(m + 1)
    if m >= 2 and extra_var > 0:
        v = min(extra_var * m / (m - 1), 0.999 * pi * (1 - pi))  # Var(pi_j) of the mixing beta
        ab = pi * (1 - pi) / v - 1
        pmf = betabinom.pmf(ks, m, pi * ab, (1 - pi) * ab)
    else:
        pmf = binom.pmf(ks, m, pi)
    pmf = pmf / pmf.sum()
    lo, hi = float(pmf[: s + 1].sum()), float(pmf[s:].sum())
    p = min(1.0, 2 * min(lo, hi))
    p_min = min(1.0, 2 * min(float(pmf[0]), float(pmf[m])))
    return p, p_min


def _drift_stats(data: AnnotationSet, cal: Calibration, significance: float,
                 res: EstimateResult | None = None) -> _Stats:
    """Residuals, their covariance, per-labeler tests and the overall test for the labelers of ``data``
    (``res``: HERO-1 of ``data`` with ``cal``, when already computed)."""
    notes: list[str] = []
    index = cal.index_of()
    if res is None:
        res = hero1(data, cal)
    mu = res.estimate
    C, S = _per_labeler_sums(data)
    m = np.asarray(C.sum(axis=0)).ravel()
    present = np.flatnonzero(m > 0)  # a labeler id may be listed without annotations (e.g. after take_items)
    C, S, m = C[:, present], S[:, present], m[present]
    ids = tuple(str(data.labeler_ids[k]) for k in present)
    J = len(ids)
    to_cal = np.array([index[x] for x in ids], dtype=np.int64)
    h1, h0 = history_label_counts(cal, to_cal)
    a, va, a_bnd = _jeffreys(np.asarray(cal.alpha, dtype=np.float64)[to_cal], h1)
    b, vb, b_bnd = _jeffreys(np.asarray(cal.beta, dtype=np.float64)[to_cal], h0)
    boundary = tuple(ids[k] for k in np.flatnonzero(a_bnd | b_bnd))
    if boundary:
        notes.append(f"{len(boundary)} labeler(s) calibrated at a sensitivity or specificity of 0 or 1, tested with "
                     f"the Jeffreys posterior mean from their history labels instead: {', '.join(boundary[:5])}"
                     + (" ..." if len(boundary) > 5 else ""))
    pos = np.asarray(S.sum(axis=0)).ravel()
    p_obs = pos / m
    nan = np.full(J, np.nan)
    if not math.isfinite(mu):
        notes.append("no current label carries information about the rate: nothing to test")
        return _Stats(ids, m.astype(np.int64), p_obs, nan, nan, nan, nan.copy(), nan.copy(), ("",) * J, math.nan, 0,
                      math.nan, math.nan, math.nan, mu, np.zeros((J, J)), boundary, notes)
    expected = mu * a + (1 - mu) * (1 - b)
    r = p_obs - expected
    infl = res.influence
    assert infl is not None
    interior = res.status == "ok"
    if not interior:
        notes.append(f"HERO-1 estimate on the boundary ({res.status}): its uncertainty is not propagated")

    def influence(pi: FloatArray, d: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Current influence of r_j at rates pi: (s_ij - pi_j c_ij) n / m_j minus mu_hat's; and p_j's own part."""
        own = (S - C.multiply(pi[None, :])).toarray() * (n / m)[None, :]
        return (own - np.outer(infl.current, d) if interior else own), own

    n = data.n_items
    a0 = np.asarray(cal.alpha, dtype=np.float64)[to_cal]
    b0 = np.asarray(cal.beta, dtype=np.float64)[to_cal]
    Phi, own = influence(mu * a0 + (1 - mu) * (1 - b0), a0 + b0 - 1)
    # at the calibration's own parameters, a residual that mu_hat's influence cancels (one labeler: HERO-1 is
    # Rogan-Gladen and fits its rate exactly) cannot be tested
    live = np.sum(Phi**2, axis=0) > _RANK_TOL * np.sum(own**2, axis=0)
    if boundary:
        Phi, own = influence(expected, a + b - 1)
    emp_self = np.sum(own**2, axis=0) / n**2
    dj = a + b - 1
    cov = Phi.T @ Phi / n**2
    pc = np.clip(expected, 0.5 / m, 1 - 0.5 / m)
    scale = pc * (1 - pc) / m  # the binomial variance of p_j, to standardise the chi-squared's covariance
    # p_j's own sampling variance: at least its value under no drift (the empirical one is 0 for a labeler whose
    # few labels agree)
    cov[np.diag_indices(J)] += np.maximum(expected * (1 - expected) / m - emp_self, 0.0)
    V = cal.parameter_covariance
    Vaa = np.zeros(J)
    Vbb = np.zeros(J)
    if V is not None:
        G = np.zeros((J, cal.n_parameters))
        if interior and infl.history is not None:
            G -= np.outer(dj, infl.history)
        G[np.arange(J), to_cal] -= mu
        G[np.arange(J), cal.n_labelers + to_cal] += 1 - mu
        cov = cov + G @ V @ G.T
        Vaa = np.diag(V)[to_cal]
        Vbb = np.diag(V)[cal.n_labelers + to_cal]
    else:
        notes.append("the calibration has no parameter covariance: only the Jeffreys floors of the labelers' "
                     "parameters are counted (the test may be anti-conservative)")
    # floors: every parameter's variance at least its Jeffreys posterior variance from the history labels
    cov[np.diag_indices(J)] += mu**2 * np.maximum(va - Vaa, 0.0) + (1 - mu) ** 2 * np.maximum(vb - Vbb, 0.0)
    cov = 0.5 * (cov + cov.T)
    var = np.diag(cov).copy()
    se = np.where(live, np.sqrt(np.maximum(var, 0)), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(live, r / se, np.nan)
    normal = live & (np.minimum(m * expected, m * (1 - expected)) >= NORMAL_MIN_COUNT)
    p = np.full(J, np.nan)
    p_min = np.full(J, np.nan)
    p[normal] = 2 * norm.sf(np.abs(z[normal]))
    p_min[normal] = 0.0
    for k in np.flatnonzero(live & ~normal):
        extra = max(float(var[k]) - float(expected[k] * (1 - expected[k]) / m[k]), 0.0)
        p[k], p_min[k] = exact_test(round(float(pos[k])), int(m[k]), float(expected[k]), extra)
    test = tuple("z" if normal[k] else "exact" if live[k] else "" for k in range(J))
    if not live.all():
        notes.append(
            f"{int((~live).sum())} labeler(s) cannot be tested (their residual has no variance: a single labeler "
            "fits the estimate exactly)"
        )
    # overall: chi-squared over the z-tested labelers, standardised by their binomial scale
    stat, df, p_chi2 = 0.0, 0, math.nan
    idx = np.flatnonzero(normal)
    if idx.size:
        D = 1 / np.sqrt(scale[idx])
        Cs = cov[np.ix_(idx, idx)] * np.outer(D, D)
        w, U = np.linalg.eigh(Cs)
        keep = w > _RANK_TOL * max(1.0, float(w.max()))
        df = int(keep.sum())
        if df:
            proj = U[:, keep].T @ (r[idx] * D)
            stat = float(np.sum(proj**2 / w[keep]))
            p_chi2 = float(chi2.sf(stat, df))
    # and Tarone-Bonferroni on the smallest per-labeler p-value, each at half the level
    p_minp = math.nan
    ok = np.isfinite(p)
    if ok.any():
        p_minp = min(1.0, tarone_family_size(p_min[ok], significance / 2) * float(np.min(p[ok])))
    parts = [x for x in (p_chi2, p_minp) if math.isfinite(x)]
    p_all = min(1.0, len(parts) * min(parts)) if parts else math.nan
    return _Stats(ids, m.astype(np.int64), p_obs, expected, se, z, p, p_min, test, stat, df, p_chi2, p_minp, p_all,
                  mu, cov, boundary, notes)


def reestimate_without(
    current: AnnotationSet,
    calibration: Calibration,
    labelers: Iterable[str] | DriftCheck,
    *,
    how: Literal["drop", "estimate"] = "drop",
    new_labelers: Literal["exclude", "error"] = "exclude",
) -> EstimateResult:
    """HERO-1 without trusting the calibration of some labelers (e.g. those flagged for drift).

    ``how="drop"`` leaves their labels out; ``how="estimate"`` keeps them and
    re-estimates their sensitivity and specificity from the current round,
    anchored by the other labelers (:func:`heroeval.estimators.newlabelers.hero1_anchored`,
    which also estimates any labeler unknown to the calibration). With
    ``how="drop"``, labelers unknown to the calibration are left out too
    (``new_labelers="exclude"``, the default, as :func:`check_drift` does) or
    are an error (``"error"``).

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
    if new_labelers not in ("exclude", "error"):
        raise HeroEvalError(f"new_labelers must be 'exclude' or 'error', got {new_labelers!r}")
    if how == "estimate":
        return hero1_anchored(current, calibration, treat_as_new=names)
    present = {str(x) for x in current.labeler_ids}
    keep = np.array([str(x) not in set(names) for x in current.labeler_ids], dtype=bool)
    data, n_ann, n_items = current.select_labelers(keep)
    if data.n_items == 0:
        raise DataError(f"current round {current.name!r}: no labels left after dropping {names}")
    res = hero1(data, calibration, new_labelers=new_labelers)
    dropped = [x for x in names if x in present]
    details = {**res.details, "dropped_labelers": dropped, "dropped_annotations": n_ann, "dropped_items": n_items}
    note = f"dropped {len(dropped)} labeler(s) {dropped}: {n_ann} annotations, {n_items} item(s) left without labels"
    return replace(res, details=details, notes=(*res.notes, note))


# ---------------------------------------------------------------------------
# Covariate shift (HERO-2's shared-distribution assumption)
# ---------------------------------------------------------------------------
