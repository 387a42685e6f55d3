"""Stage A's fit: the gold-anchored EM on the history (in memory or compiled), the prior, the parameter
covariance, and the checks of the settings before any work is done."""

from __future__ import annotations

import logging
import warnings
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from heroeval.core import jit
from heroeval.errors import ConvergenceWarning, DataError, HeroEvalError, HeroEvalWarning
from heroeval.ingest.annotations import AnnotationSet
from heroeval.ingest.compact import CompactHistory
from heroeval.stage_a import compression, kernels, scoring, two_coin
from heroeval.stage_a.calibration import Calibration, ConvergenceInfo
from heroeval.stage_a.checks_record import ModelChecks
from heroeval.stage_a.clustered import clustered_covariance
from heroeval.stage_a.covariance import ParameterCovariance
from heroeval.stage_a.gold import gold_counts, gold_labels_of, initial_values, score_gold_items
from heroeval.stage_a.prior import EBPrior, PriorCounts, eb_counts
from heroeval.stage_a.settings import (
    EMSettings,
    FitSettings,
    check_em_settings,
    check_shrink,
    check_weight,
    stopping_rule,
)

__all__ = ["NUMBA_MIN_ANNOTATIONS", "check_fit_settings", "design_of", "eb_prior_covariance", "eb_prior_terms", "fit_stage_a", "information_of", "parameter_covariance", "settings_prior", "stage_a_prior", "weighted_design"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]




def parameter_covariance(
    d: two_coin.Design | kernels.CompactDesign, fit: two_coin.EMFit, X: FloatArray | None, variance: str = "sandwich",
    information: list[FloatArray] | None = None, prior_meat: FloatArray | None = None,
    prior_cross: FloatArray | None = None,
) -> ParameterCovariance:
    """Covariance of (alpha, beta, prevalences[, covariate means]) from the history items' influence.

    Kept factored (:class:`heroeval.stage_a.covariance.ParameterCovariance`): the dense
    matrix is formed only when asked for. ``information``, a list, receives the
    observed information ``H`` (probability scale, P x P) the covariance was formed from.
    ``prior_meat`` (:func:`eb_prior_covariance`) is added to the sandwich's meat; with the model
    variance the meat is ``H`` plus it, so the covariance is ``H^-1 + H^-1 prior_meat H^-1``;
    ``prior_cross`` (the same function's) is added to the scores' cross sums with the covariates.
    """
    gram = variance == "sandwich"
    if isinstance(d, two_coin.Design):
        si = scoring.scores_and_information(d, fit.alpha, fit.beta, fit.prev, fit.gamma, gram=gram)
        H, StS, free = si.info, si.gram, si.free
        SX = None if X is None else np.asarray(si.scores.T @ (X - X.mean(axis=0)))
        del si
    else:
        H, StS, SX = d.covariance_sums(fit.alpha, fit.beta, fit.prev, fit.gamma, X, gram)
        free = scoring.free_parameters(fit.alpha, fit.beta, fit.prev)
    if information is not None:
        information.append(H)
    Xc = None if X is None else X - X.mean(axis=0)
    meat = StS if gram else None
    if prior_meat is not None:
        meat = (StS if gram else H) + prior_meat
    if prior_cross is not None and SX is not None:
        SX = SX + prior_cross
    return ParameterCovariance.from_information(H, free, meat, SX, Xc)


def eb_prior_covariance(gold_set: AnnotationSet, eb: EBPrior, alpha: FloatArray, beta: FloatArray,
                        prev: FloatArray, xc_gold: FloatArray | None = None) -> tuple[FloatArray, FloatArray | None]:
    """What the empirical-Bayes prior's estimated pooled rates add to the sandwich's meat (P x P) and, with
    ``xc_gold`` (the gold items' covariates less the history's mean), to the scores' cross sums with the
    covariates (``C U' xc_gold``, P x p; HERO-2's control variate reads them; else None).

    With ``shrink="eb"`` Stage A solves ``sum_r s_r(theta) + g(theta; m) = 0``,
    ``g`` the log prior's gradient, whose pooled rates ``m = (m_a, m_b)`` are
    themselves estimated from the gold: ``m_a = sum_r t_r / N_a`` over the
    gold positives' labels (``t_r`` the 1s among item r's ``n_r`` labels),
    ``m_b`` likewise over the gold negatives' 0s. Stacking the two estimating
    equations, item r's influence on ``theta`` is ``H^-1 (s_r + C u_r)``, with
    ``u_r = ((t_r - m_a n_r) / N_a, ...)`` its influence on ``m`` (non-zero on
    gold items only) and ``C = dg / dm``: ``k_a / (alpha_j (1 - alpha_j))`` on
    the sensitivities, ``k_b / (beta_j (1 - beta_j))`` on the specificities.
    The meat ``sum_r (s_r + C u_r)(s_r + C u_r)'`` is the plain one plus
    ``S_g' U C' + C U' S_g + C U'U C'`` (``S_g`` the gold items' score rows,
    which depend on their gold labels alone): so the interval carries the
    uncertainty of the pool every labeler is pulled towards, and the
    correlation it makes between labelers. The strengths ``k`` are treated
    as known: their influence enters through ``(m - alpha_j) / (alpha_j (1 -
    alpha_j))``, small for labelers near the pool but not of second order
    (a review measured up to 1.9 % more standard error with a capped ``k``'s
    influence included).
    """
    d = design_of(gold_set)
    S = scoring.scores_and_information(d, alpha, beta, prev, gold_set.gold.astype(np.float64),
                                          gram=False).scores  # gold items x P
    U, C = eb_prior_terms(gold_set, eb, alpha, beta, prev.size)
    SU = np.asarray(S.T @ U)
    meat: FloatArray = SU @ C.T + C @ SU.T + C @ (U.T @ U) @ C.T
    return meat, None if xc_gold is None else C @ (U.T @ xc_gold)


def eb_prior_terms(gold_set: AnnotationSet, eb: EBPrior, alpha: FloatArray, beta: FloatArray,
                   n_groups: int) -> tuple[FloatArray, FloatArray]:
    """``U`` (gold items x 2), each gold item's influence on the pooled rates ``(m_a, m_b)``, and ``C``
    (P x 2, P = 2J + ``n_groups``), the log prior's gradient's derivative in them (:func:`eb_prior_covariance`): item
    r's score gains ``C u_r``."""
    J = gold_set.n_labelers
    g = gold_set.gold
    n_r = np.diff(gold_set.item_ptr).astype(np.float64)
    ones = np.bincount(gold_set.annotation_item, weights=gold_set.label.astype(np.float64),
                       minlength=gold_set.n_items)
    U = np.zeros((gold_set.n_items, 2))
    pos, neg = g == 1, g == 0
    inside = 1e-6 < eb.m_a < 1 - 1e-6, 1e-6 < eb.m_b < 1 - 1e-6  # a pooled rate held at its clip does not move
    if eb.n_a > 0 and inside[0]:
        U[pos, 0] = (ones[pos] - eb.m_a * n_r[pos]) / eb.n_a
    if eb.n_b > 0 and inside[1]:
        U[neg, 1] = ((n_r[neg] - ones[neg]) - eb.m_b * n_r[neg]) / eb.n_b
    a = np.clip(alpha, two_coin.EPS, 1 - two_coin.EPS)
    b = np.clip(beta, two_coin.EPS, 1 - two_coin.EPS)
    C = np.zeros((2 * J + n_groups, 2))
    C[:J, 0] = eb.k_a / (a * (1 - a))
    C[J:2 * J, 1] = eb.k_b / (b * (1 - b))
    return U, C


def information_of(d: two_coin.Design | kernels.CompactDesign) -> two_coin.Information:
    """The observed information of a design as ``f(alpha, beta, prev)``, for the EM's Newton phase."""
    if isinstance(d, kernels.CompactDesign):
        return d.information

    def info(alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> FloatArray:
        gamma, _ = two_coin.e_step(d, alpha, beta, prev, need_ll=False)
        return scoring.information(d, alpha, beta, prev, gamma)

    return info


def _distinct_items_per_labeler(ds: AnnotationSet) -> IntArray:
    """Number of distinct items each labeler labelled (repeated pairs count once)."""
    if not ds.repeated_pairs:
        return two_coin.bincount(ds.labeler, ds.n_labelers).astype(np.int64)
    m = sp.csr_matrix(
        (np.ones(ds.n_annotations), ds.labeler.copy(), ds.item_ptr.copy()), shape=(ds.n_items, ds.n_labelers)
    )
    m.sum_duplicates()
    return np.bincount(m.indices, minlength=ds.n_labelers).astype(np.int64)


def design_of(ds: AnnotationSet) -> two_coin.Design:
    return two_coin.make_design(
        ds.item_ptr, ds.labeler, ds.label, ds.n_labelers, ds.gold, ds.item_round, ds.n_rounds,
        repeated=ds.repeated_pairs,
    )


def check_fit_settings(history: Any, tol: float, max_iter: int, criterion: str, pseudo_count: float,
                       variance: str, shrink: str = "none") -> None:
    """Validate Stage A's inputs given one by one (a clear error naming the parameter) before any work is done:
    the history's type, the EM settings, the variance, then that the history has gold."""
    gold_view = _history_type(history)
    check_em_settings(tol, max_iter, criterion, pseudo_count, shrink)
    if variance not in ("sandwich", "model"):
        raise HeroEvalError(f"variance must be 'sandwich' or 'model', got {variance!r}")
    if not gold_view.has_gold:
        raise DataError(_no_gold_message(gold_view))


def check_history(history: Any) -> None:
    """The history is one Stage A can fit: an AnnotationSet or a CompactHistory, with gold items."""
    gold_view = _history_type(history)
    if not gold_view.has_gold:
        raise DataError(_no_gold_message(gold_view))


def _history_type(history: Any) -> AnnotationSet:
    """The history as an AnnotationSet (a CompactHistory's gold set: its report and gold are the history's)."""
    if isinstance(history, CompactHistory):
        history = history.gold_set
    if not isinstance(history, AnnotationSet):
        raise HeroEvalError(
            f"history must be an AnnotationSet (from read_annotations) or a CompactHistory (from read_compact), got "
            f"{type(history).__name__}"
        )
    return history


def stage_a_prior(counts: tuple[IntArray, IntArray, IntArray, IntArray], pseudo_count: float,
                  shrink: str) -> tuple[PriorCounts, EBPrior | None]:
    """Stage A's pseudo-counts from per-labeler gold counts ``(tp, fn, tn, fp)``: the symmetric ``pseudo_count``
    alone (``shrink="none"``), or the empirical-Bayes prior fitted to the counts plus it (``"eb"``,
    :func:`heroeval.stage_a.prior.eb_counts`), and that prior."""
    if check_shrink(shrink) == "none":
        return float(pseudo_count), None
    eb = eb_counts(*counts)
    return eb.counts(pseudo_count), eb


def _prior_settings(pseudo_count: float, shrink: str, eb: EBPrior | None) -> dict[str, Any]:
    out: dict[str, Any] = {"pseudo_count": float(pseudo_count), "shrink": shrink}
    if eb is not None:
        out["prior"] = {**eb.as_dict(), "counts": [float(v) for v in eb.counts(pseudo_count)]}
    return out


def settings_prior(settings: dict[str, Any]) -> PriorCounts:
    """The pseudo-counts a calibration was fitted with, from its settings (``pseudo_count``, and with
    ``shrink="eb"`` the fitted prior's ``counts``), for a refit that must use the same prior."""
    prior = settings.get("prior")
    if settings.get("shrink", "none") == "eb" and isinstance(prior, dict) and "counts" in prior:
        return np.asarray(prior["counts"], dtype=np.float64)
    return float(settings.get("pseudo_count", 0.0))


def _no_gold_message(history: AnnotationSet) -> str:
    """Why the history has no gold: no gold table given, or a gold table none of whose rows matched an item."""
    g = next((t for t in history.report.tables if t.table == "gold"), None)
    if g is None:
        return (f"history {history.name!r} has no gold labels: Stage A needs gold anchors. "
                "Pass gold= to read_annotations, or use dawid_skene for a gold-free estimate.")
    unmatched = int(g.dropped.get("gold for an item with no silver label", 0))
    other = {k: v for k, v in g.dropped.items() if k != "gold for an item with no silver label"}
    why = f"{g.rows_read} gold rows read, {g.rows_read - unmatched - sum(other.values())} match a history item"
    if other:
        why += " (" + "; ".join(f"{v} dropped: {k}" for k, v in other.items()) + ")"
    return (f"history {history.name!r} has no gold labels: {why}. Check that the gold table's item column holds the "
            f"history's item ids (history ids look like {list(map(str, history.item_ids[:3]))}); "
            "name the gold table's columns with gold_item_col= and gold_col= if they differ.")


def fit_stage_a(
    history: AnnotationSet | CompactHistory,
    *,
    em: EMSettings | None = None,
    fitting: FitSettings | None = None,
    history_weight: float = 1.0,
    model_checks: ModelChecks | None = None,
    progress: bool | two_coin.Progress = False,
    keep_design: bool = False,
) -> Calibration:
    """Stage A at a fixed history weight: the fit behind :func:`heroeval.calibrate`.

    The parameters are those of :func:`heroeval.calibrate` (which documents
    them), grouped: ``em`` the EM settings, ``fitting`` the variance, covariance, compression and engine (defaults
    when None); ``history_weight`` is a number and the model checks,
    when given, are a record already computed (``model_checks``), kept in
    ``Calibration.checks``. Running the checks and choosing the weight by
    cross-validation is the composition layer's work
    (:mod:`heroeval.workflows.api`); this function knows nothing of them.
    ``keep_design=True`` keeps, for refits of the same history
    (:class:`FoldFits`), the compiled engine's design and the observed
    information at the fit (``Calibration.history_design``,
    ``history_information``; None with the NumPy engine or without the
    covariance); :func:`heroeval.calibrate` drops them before it returns.
    """
    em = EMSettings() if em is None else em
    fs = FitSettings() if fitting is None else fitting
    check_history(history)
    tol, max_iter, criterion, accelerate = em.tol, em.max_iter, em.criterion, em.accelerate
    pseudo_count, shrink = em.pseudo_count, em.shrink
    variance, covariance, compress, engine = fs.variance, fs.covariance, fs.compress, fs.engine
    w = check_weight(history_weight)
    if isinstance(history, CompactHistory):
        if engine == "numpy":
            raise HeroEvalError("a CompactHistory is fitted by the compiled engine; engine='numpy' needs "
                                "read_annotations")
        jit.require_numba("fitting a CompactHistory")
        return _fit_compact(history, em, fs, w=w, progress=progress)
    use_numba = _choose_engine(engine, history.n_annotations)
    grouped = history.item_group is not None and covariance
    if grouped and variance != "sandwich":
        raise HeroEvalError(f"the history's items are grouped ({len(history.group_ids)} groups): their "
                            f"cluster-robust covariance is a sandwich; variance={variance!r} ignores the groups "
                            "(use variance='sandwich', or the history without groups)")
    a0, b0, p0 = initial_values(history)
    tp, fn, tn, fp = gold_counts(history)
    prior, eb = stage_a_prior((tp, fn, tn, fp), pseudo_count, shrink)
    dc: two_coin.Design | None = None
    d_fit: two_coin.Design | kernels.CompactDesign
    if use_numba:
        d_fit = kernels.compact_design(
            history.item_ptr, history.labeler, history.label, history.n_labelers, history.gold, history.item_round,
            history.n_rounds, weight=None if w == 1.0 else np.where(history.gold >= 0, 1.0, w),
            pseudo_count=prior)
    else:
        d = weighted_design(history, w, prior)
        dc = compression.compress(d) if compress and history.covariates is None and not grouped else None
        d_fit = d if dc is None else dc
    fit, conv = _run_em(d_fit, (a0, b0, p0), em, progress)
    J = history.n_labelers
    if isinstance(d_fit, kernels.CompactDesign) and d_fit.weight is None:  # its code counts hold them already
        n_ann = np.rint(d_fit.code_counts[0::2] + d_fit.code_counts[1::2]).astype(np.int64)
    else:
        n_ann = two_coin.bincount(history.labeler, J).astype(np.int64)
    n_items = _distinct_items_per_labeler(history) if history.repeated_pairs else n_ann.copy()
    isg = history.gold >= 0
    G = history.n_rounds
    cov_mean = cov_cov = None
    if history.covariates is not None:
        X = history.covariates
        cov_mean = X.mean(axis=0)
        cov_cov = np.atleast_2d(np.cov(X, rowvar=False, ddof=1)) if X.shape[0] > 1 else np.zeros((X.shape[1],) * 2)
    info: list[FloatArray] = []
    pcov = None
    grouped_cov = _grouped_covariance(history, d_fit, w, prior, fit, eb) if grouped else None
    if grouped_cov is not None:
        pcov, H_grouped, n_history_groups = grouped_cov
        info.append(H_grouped)
    elif covariance:
        meat = cross = None
        if eb is not None:
            gi = np.flatnonzero(history.gold >= 0)
            xh = history.covariates
            meat, cross = eb_prior_covariance(history.take_items(gi), eb, fit.alpha, fit.beta, fit.prev,
                                              None if xh is None else xh[gi] - xh.mean(axis=0))
        pcov = parameter_covariance(d_fit, fit, history.covariates, variance, info, meat, cross)
    kept = d_fit if keep_design and isinstance(d_fit, kernels.CompactDesign) else None
    if dc is not None:
        assert dc.row_of_item is not None
        fit = replace(fit, gamma=fit.gamma[dc.row_of_item])  # posteriors per item again
    return Calibration(
        labeler_ids=tuple(str(x) for x in history.labeler_ids),
        alpha=fit.alpha,
        beta=fit.beta,
        n_annotations=n_ann,
        n_items=n_items,
        gold_tp=tp,
        gold_fn=fn,
        gold_tn=tn,
        gold_fp=fp,
        round_ids=history.round_ids,
        round_prevalence=fit.prev,
        round_n_items=two_coin.bincount(history.item_round, G).astype(np.int64),
        round_n_gold=np.bincount(history.item_round[isg], minlength=G).astype(np.int64),
        covariate_names=history.covariate_names,
        covariate_mean=cov_mean,
        covariate_cov=cov_cov,
        n_covariate_items=0 if history.covariates is None else history.n_items,
        convergence=conv,
        covariance=pcov,
        settings={**stopping_rule(tol, max_iter, criterion, accelerate),
                  **_prior_settings(pseudo_count, shrink, eb), "variance": variance, "history_weight": w,
                  "init": "gold subset, one pseudo-observation at the pooled gold rate",
                  "engine": "numba" if use_numba else "numpy",
                  **({} if grouped_cov is None else {"history_item_groups": n_history_groups})},
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        history=history,
        history_fit=fit,
        history_design=kept,
        history_information=info[0] if kept is not None and info else None,
        checks=model_checks,
        gold_scores=score_gold_items(history, fit.alpha, fit.beta),
        gold_labels=gold_labels_of(history),
    )


def _grouped_covariance(history: AnnotationSet, d_fit: two_coin.Design | kernels.CompactDesign, w: float,
                        prior: PriorCounts, fit: two_coin.EMFit, eb: EBPrior | None
                        ) -> tuple[ParameterCovariance, FloatArray, int] | None:
    """The cluster-robust covariance by the history's item groups (:mod:`heroeval.stage_a.clustered`) on the
    NumPy engine's uncompressed design (the compiled engine keeps no per-item scores), or None with fewer than
    two groups (the independent-items covariance is then used)."""
    assert history.item_group is not None
    d = d_fit if isinstance(d_fit, two_coin.Design) and d_fit.count is None else weighted_design(history, w, prior)
    eb_terms = None
    if eb is not None:
        gi = np.flatnonzero(history.gold >= 0)
        U_gold, C = eb_prior_terms(history.take_items(gi), eb, fit.alpha, fit.beta, fit.prev.size)
        U = np.zeros((history.n_items, 2))
        U[gi] = U_gold
        eb_terms = (U, C)
    return clustered_covariance(d, history.item_group, fit, history.covariates, eb_terms)


def _run_em(d: two_coin.Design | kernels.CompactDesign, start: tuple[FloatArray, FloatArray, FloatArray],
            em: EMSettings, progress: bool | two_coin.Progress) -> tuple[two_coin.EMFit, ConvergenceInfo]:
    """Stage A's EM on a design, and how it ended (a ConvergenceWarning when it did not converge)."""
    fit = two_coin.run_em(d, start, stop=em.stopping, progress=_progress_callback(progress),
                          information=information_of(d))
    if not fit.converged:
        warnings.warn(
            f"Stage A EM did not converge in {fit.n_iter} iterations (last parameter change "
            f"{fit.max_change:.2e} > tol {em.tol:.0e}); raise max_iter",
            ConvergenceWarning,
            stacklevel=3,
        )
    return fit, ConvergenceInfo.from_fit(fit, em.tol, em.max_iter, em.criterion, em.accelerate)


def _fit_compact(history: CompactHistory, em: EMSettings, fs: FitSettings, *, w: float,
                 progress: bool | two_coin.Progress) -> Calibration:
    """:func:`fit_stage_a` on a :class:`CompactHistory`: the design is its arrays (no copy); the gold-based pieces
    (starting values, gold counts, gold scores) read its decoded gold items; the calibration keeps no history."""
    tol, max_iter, criterion, accelerate = em.tol, em.max_iter, em.criterion, em.accelerate
    pseudo_count, shrink, variance, covariance = em.pseudo_count, em.shrink, fs.variance, fs.covariance
    gs = history.gold_set
    a0, b0, p0 = initial_values(gs)
    tp, fn, tn, fp = gold_counts(gs)
    prior, eb = stage_a_prior((tp, fn, tn, fp), pseudo_count, shrink)
    d = kernels.design_of_codes(
        history.ptr, history.code, history.gold, history.group, history.n_labelers, history.n_rounds,
        weight=None if w == 1.0 else np.where(history.gold >= 0, 1.0, w), pseudo_count=prior)
    fit, conv = _run_em(d, (a0, b0, p0), em, progress)
    J, G = history.n_labelers, history.n_rounds
    # labels per code: the design counted them already unless it weights the items
    n_ann = (d.code_counts if d.weight is None else two_coin.bincount(history.code, 2 * J)).astype(np.int64)
    n_ann = n_ann[0::2] + n_ann[1::2]
    n_items = (kernels.distinct_items_per_labeler(history.ptr, history.code, J) if history.repeated_pairs
               else n_ann.copy())
    isg = history.gold >= 0
    meat = None if eb is None or not covariance else eb_prior_covariance(gs, eb, fit.alpha, fit.beta, fit.prev)[0]
    pcov = parameter_covariance(d, fit, None, variance, prior_meat=meat) if covariance else None
    return Calibration(
        labeler_ids=tuple(str(x) for x in history.labeler_ids), alpha=fit.alpha, beta=fit.beta,
        n_annotations=n_ann, n_items=n_items, gold_tp=tp, gold_fn=fn, gold_tn=tn, gold_fp=fp,
        round_ids=history.round_ids, round_prevalence=fit.prev,
        round_n_items=two_coin.bincount(history.group, G).astype(np.int64),
        round_n_gold=np.bincount(history.group[isg], minlength=G).astype(np.int64),
        covariate_names=(), covariate_mean=None, covariate_cov=None, n_covariate_items=0,
        convergence=conv, covariance=pcov,
        settings={**stopping_rule(tol, max_iter, criterion, accelerate),
                  **_prior_settings(pseudo_count, shrink, eb), "variance": variance, "history_weight": w,
                  "init": "gold subset, one pseudo-observation at the pooled gold rate",
                  "engine": "numba", "history_storage": "compact"},
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        history=None,
        history_fit=None,
        checks=None,
        gold_scores=score_gold_items(gs, fit.alpha, fit.beta),
        gold_labels=gold_labels_of(gs),
    )


NUMBA_MIN_ANNOTATIONS = 1_000_000
"""``engine="auto"`` compiles (numba) from this many history annotations on."""

_log = logging.getLogger("heroeval")


_said_no_numba = False


def _choose_engine(engine: str, n_annotations: int) -> bool:
    """True for the compiled engine.

    ``"auto"`` takes it from :data:`NUMBA_MIN_ANNOTATIONS` annotations on (below
    that its one-off compilation costs more than it saves). numba is a regular
    dependency; where it cannot be imported (a platform without its wheels),
    ``"auto"`` falls back to the NumPy engine and says so once per process.
    """
    global _said_no_numba
    if engine not in ("auto", "numpy", "numba"):
        raise HeroEvalError(f"engine must be 'auto', 'numpy' or 'numba', got {engine!r}")
    if engine == "numba":
        if not jit.HAVE_NUMBA:
            raise HeroEvalError("engine='numba' needs numba, which is not installed: pip install numba")
        return True
    wanted = engine == "auto" and n_annotations >= NUMBA_MIN_ANNOTATIONS
    if wanted and not jit.HAVE_NUMBA and not _said_no_numba:
        _said_no_numba = True
        warnings.warn(
            f"numba is not installed: Stage A runs on the NumPy engine, about five times slower on "
            f"{n_annotations:,} annotations than the compiled one (pip install numba)",
            HeroEvalWarning,
            stacklevel=3,
        )
    return wanted and jit.HAVE_NUMBA


def _progress_callback(progress: bool | two_coin.Progress) -> two_coin.Progress | None:
    if progress is False or progress is None:
        return None
    if callable(progress):
        return progress
    if progress is True:
        def log(n: int, ll: float, change: float) -> None:
            _log.info("Stage A EM: %d map evaluations, log-likelihood %.6f, max parameter change %.2e", n, ll, change)

        return log
    raise HeroEvalError(f"progress must be True, False or a callable, got {progress!r}")


def weighted_design(history: AnnotationSet, w: float, pseudo_count: PriorCounts = 0.0) -> two_coin.Design:
    """Stage A's design with gold-free items weighted by ``w`` (gold items keep weight 1)."""
    d = design_of(history)
    weight = None if w == 1.0 else np.where(history.gold >= 0, 1.0, w)
    return replace(d, pseudo_count=pseudo_count, weight=weight)


