"""The model checks' refits of Stage A with gold items left out: from scratch, or all folds and weights in
lockstep over one shared design with warm starts (:func:`fold_fits_shared`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
from scipy.special import logit

from heroeval.errors import ConvergenceWarning
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a import two_coin
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.fit import fit_stage_a
from heroeval.stage_a.folds import FoldFits
from heroeval.stage_a.gold import gold_counts, gold_information, initial_from_counts, initial_values
from heroeval.stage_a.prior import PriorCounts, counts4, prior_information
from heroeval.stage_a.settings import STOPPING_RULE_KEYS, EMSettings, FitSettings

if TYPE_CHECKING:
    pass

__all__ = ["FOLD_START_TRUST", "FoldFitter", "HistoryFolds", "Params", "fold_fits_scratch", "fold_fits_shared", "prior_change"]

FloatArray = npt.NDArray[np.float64]


Params = tuple[FloatArray, FloatArray, FloatArray]


def fold_fits_scratch(history: AnnotationSet, fold_items: list[npt.NDArray[np.int64]], grid: tuple[float, ...],
                    settings: dict[str, Any]) -> list[dict[float, Params]]:
    """Each fold and weight fitted from scratch on a copy of the training items (``refit="scratch"``)."""
    all_items = np.arange(history.n_items)
    out: list[dict[float, Params]] = []
    for test in fold_items:
        h_k = history.take_items(np.setdiff1d(all_items, test, assume_unique=True), name="history (fold)")
        fits: dict[float, Params] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for w in grid:
                cal = fit_stage_a(h_k, em=EMSettings.from_dict(settings), fitting=FitSettings(covariance=False),
                                  history_weight=w)
                fits[w] = (np.asarray(cal.alpha), np.asarray(cal.beta), np.asarray(cal.round_prevalence))
        out.append(fits)
    return out


class FoldFitter(Protocol):
    """Stage A refits of one history with gold items left out (``drop``: positions among its gold items).

    :class:`heroeval.stage_a.folds.FoldFits` (in memory, through :class:`HistoryFolds`) and
    :class:`heroeval.stage_a.distributed_folds.DaskFoldFits` (on a Dask cluster) are two.
    """

    def fit(self, w: float, start: Params, *, drop: npt.NDArray[np.int64] | None = None,
            information: FloatArray | None = None, tol: float = ..., max_iter: int = ...,
            criterion: Literal["parameters", "loglik"] = ..., accelerate: bool = ...,
            newton_after: int = ...) -> two_coin.EMFit: ...

    def fit_many(self, w: float, starts: list[Params], drops: list[npt.NDArray[np.int64]],
                 informations: list[FloatArray], *, tol: float = ..., max_iter: int = ...,
                 criterion: Literal["parameters", "loglik"] = ..., accelerate: bool = ...) -> list[two_coin.EMFit]: ...

    def information(self, w: float, fit: two_coin.EMFit) -> FloatArray: ...

    def prior_of(self, drop: npt.NDArray[np.int64] | None) -> PriorCounts: ...


class HistoryFolds:
    """:class:`FoldFits` with ``drop`` given as positions among the history's gold items."""

    def __init__(self, ff: FoldFits, gold_idx: npt.NDArray[np.int64]) -> None:
        self.ff = ff
        self.gold_idx = gold_idx

    def fit(self, w: float, start: Params, *, drop: npt.NDArray[np.int64] | None = None,
            information: FloatArray | None = None, tol: float = 1e-8, max_iter: int = 10_000,
            criterion: Literal["parameters", "loglik"] = "parameters", accelerate: bool = True,
            newton_after: int = 0) -> two_coin.EMFit:
        return self.ff.fit(w, start, drop=None if drop is None else self.gold_idx[drop], information=information,
                           tol=tol, max_iter=max_iter, criterion=criterion, accelerate=accelerate,
                           newton_after=newton_after)

    def fit_many(self, w: float, starts: list[Params], drops: list[npt.NDArray[np.int64]],
                 informations: list[FloatArray], tol: float = 1e-8, max_iter: int = 10_000,
                 criterion: Literal["parameters", "loglik"] = "parameters", accelerate: bool = True) -> list[two_coin.EMFit]:
        return self.ff.fit_many(w, starts, [self.gold_idx[dr] for dr in drops], informations, tol=tol,
                                max_iter=max_iter, criterion=criterion, accelerate=accelerate)

    def information(self, w: float, fit: two_coin.EMFit) -> FloatArray:
        return self.ff.information(w, fit)

    def prior_of(self, drop: npt.NDArray[np.int64] | None) -> PriorCounts:
        return self.ff.prior_of(None if drop is None else self.gold_idx[drop])


def fold_fits_shared(ff: FoldFitter, gold_set: AnnotationSet, fold_items: list[npt.NDArray[np.int64]],
                     grid: tuple[float, ...], settings: Mapping[str, Any], start: Calibration | None,
                     warm: bool) -> list[dict[float, Params]]:
    """Each fold and weight refitted by ``ff`` on one shared design (``refit="warm"`` or ``"cold"``).

    ``fold_items`` are positions in ``gold_set``, the history's gold items.
    Warm: the whole history is fitted once, at the grid's highest weight (the
    calibration ``start``'s own fit and observed information when it is at
    that weight). Each fold's refit there starts one Newton step away from it
    (:func:`_fold_start`), and its refit at each lower weight one step away
    from its own solution at the weight above (:func:`_weight_start`); both
    steps read the gold items only, and the information their Newton steps
    use is the whole fit's, with the gold items' diagonal part updated and
    the rest rescaled by the weight. Every refit stops by Stage A's rule, so
    the starts change only the path. Cold: every refit starts from its
    training items' gold-based values (:func:`initial_values`).
    """
    em = {k: settings[k] for k in STOPPING_RULE_KEYS if k in settings}
    out: list[dict[float, Params]] = [{} for _ in fold_items]
    if not warm:
        tp, fn, tn, fp = gold_counts(gold_set)
        G = gold_set.n_rounds
        for k, test in enumerate(fold_items):
            tk, fk, nk, pk = gold_counts(gold_set.take_items(test))
            keep = np.ones(gold_set.n_items, dtype=bool)
            keep[test] = False
            ng = np.bincount(gold_set.item_round[keep], minlength=G)
            sg = np.bincount(gold_set.item_round[keep], weights=gold_set.gold[keep].astype(float), minlength=G)
            init = initial_from_counts(tp - tk, fn - fk, tn - nk, fp - pk, ng, sg)
            for w in grid:
                f = ff.fit(w, init, drop=test, newton_after=two_coin.NEWTON_AFTER, **em)
                out[k][w] = (f.alpha, f.beta, f.prev)
        return out
    # the whole history at the grid's top weight: the calibration's own fit and information where it is at that weight
    w_top = max(grid)
    if start is not None and float(start.settings.get("history_weight", 1.0)) == w_top \
            and start.history_fit is not None:
        full = start.history_fit
        H = start.history_information
    else:
        init = initial_values(gold_set) if start is None else (
            np.asarray(start.alpha), np.asarray(start.beta), np.asarray(start.round_prevalence))
        full = _fit_from(ff, w_top, init, em)
        H = None
    if H is None and w_top > 0.0:
        H = ff.information(w_top, full)
    here = (full.alpha, full.beta, full.prev)
    every = np.arange(gold_set.n_items)
    kept = [gold_set.take_items(np.setdiff1d(every, test)) for test in fold_items]
    # each fold's information at the top weight: the whole history's less the left-out gold items' own (diagonal)
    # (and the whole history's prior curvature swapped for the fold's own prior's, with shrink="eb")
    infos: list[FloatArray | None] = [
        None if H is None else H - gold_information(gold_set.take_items(test), *here)
        + prior_information(ff.prior_of(test), here[0], here[1], here[2].size)
        - prior_information(ff.prior_of(None), here[0], here[1], here[2].size)
        for test in fold_items]
    whole = ff.prior_of(None)
    points = [here if Hk is None else _fold_start(gold_set.take_items(test), here, Hk,
                                                  prior_change(whole, ff.prior_of(test)))
              for test, Hk in zip(fold_items, infos, strict=True)]
    prev_w: float | None = None
    for w in sorted(grid, reverse=True):
        if prev_w is not None and w > 0.0:
            for k, Hk in enumerate(infos):
                if Hk is not None:
                    points[k], infos[k] = _weight_start(kept[k], points[k], Hk, prev_w, w,
                                                        ff.prior_of(fold_items[k]))
        fits = _refits(ff, w, points, [None if w == 0.0 else Hk for Hk in infos], em, list(fold_items))
        for k, f in enumerate(fits):
            out[k][w] = points[k] = (f.alpha, f.beta, f.prev)
        prev_w = w
    return out


FOLD_START_TRUST = 1.0
"""The largest change of a logit the fold refits' starting step (:func:`_fold_start`) may make."""


def _gold_gradient(ds: AnnotationSet, at: Params, c: PriorCounts = 0.0) -> FloatArray:
    """The logit-scale gradient at ``at`` of the log-likelihood terms of the gold items of ``ds`` alone (plus the
    pseudo-count ``c``'s prior): their posteriors are their gold labels, so it takes no pass over the other items."""
    J, G = ds.n_labelers, ds.n_rounds
    tp, fn, tn, fp = gold_counts(ds)
    s1 = np.empty(2 * J)
    s1[1::2], s1[0::2] = tp, fn  # posterior P(Y = 1) summed per (labeler, label) code: the gold's
    cnt = np.empty(2 * J)
    cnt[1::2], cnt[0::2] = tp + fp, fn + tn
    isg = ds.gold >= 0
    gsum = np.bincount(ds.item_round[isg & (ds.gold == 1)], minlength=G).astype(np.float64)
    gsize = np.bincount(ds.item_round[isg], minlength=G).astype(np.float64)
    return two_coin.logit_gradient(s1, cnt, gsum, gsize, c, *at)


def _trusted(at: Params, grad: FloatArray, H: FloatArray) -> Params:
    """The Newton step from ``at`` with gradient ``grad`` and information ``H``, unless it moves a logit by more
    than :data:`FOLD_START_TRUST` (then ``at``): a starting point that no pass has checked."""
    new = two_coin.newton_point(*at, grad, H)
    with np.errstate(divide="ignore"):
        moved = np.abs(logit(np.concatenate(new)) - logit(np.concatenate(at)))
    return new if float(np.nan_to_num(moved, nan=np.inf).max(initial=0.0)) <= FOLD_START_TRUST else at


def prior_change(before: PriorCounts, after: PriorCounts) -> FloatArray:
    """``after``'s pseudo-counts less ``before``'s, as ``[a1, a0, b1, b0]`` (the prior's gradient is linear in
    them)."""
    return np.subtract(counts4(after), counts4(before))


def _fold_start(out: AnnotationSet, here: Params, H: FloatArray, dc: PriorCounts = 0.0) -> Params:
    """Where a fold's refit starts: the Newton step from the whole history's fit ``here`` that the refit would
    take first, without the pass that gives it.

    At ``here`` the whole history's gradient is zero (to the EM tolerance), so
    the refit's objective, the whole one less the left-out gold items' terms
    ``out``, has the negative of those terms' gradient: a sum over the
    left-out gold items alone, whose posteriors are their gold. ``H`` is the
    refit's information there (the whole history's less the left-out items'
    own, which is diagonal). The refit then runs Stage A's Newton phase and
    stopping rule from there. The step is not safeguarded by the objective
    (that would take the pass it saves): where it moves a logit by more than
    :data:`FOLD_START_TRUST`, the refit starts from ``here``. Without that
    limit, at low ``w`` on the example history, steps of 2 to 29 along a
    labeler near the boundary made one refit take 354 passes instead of 95.
    With an empirical-Bayes prior fitted per fold (``shrink="eb"``), ``dc``
    is the fold's pseudo-counts less the whole history's, whose gradient
    (linear in them) the refit's objective adds.
    """
    return _trusted(here, _fold_gradient(out, here, dc), H)


def _fold_gradient(out: AnnotationSet, here: Params, dc: PriorCounts = 0.0) -> FloatArray:
    """The logit-scale gradient at the whole history's fit ``here`` of the refit without the gold items ``out``
    whose pseudo-counts differ from the whole history's by ``dc``: minus those items' terms' gradient, plus the
    prior change's (no pass over the other items; :func:`_fold_start`)."""
    J, G = out.n_labelers, out.n_rounds
    prior = two_coin.logit_gradient(np.zeros(2 * J), np.zeros(2 * J), np.zeros(G), np.zeros(G), dc, *here)
    return prior - _gold_gradient(out, here)


def _weight_start(kept: AnnotationSet, at: Params, H: FloatArray, w_from: float, w: float,
                  c: PriorCounts = 0.0) -> tuple[Params, FloatArray]:
    """A fold's refit at the lower weight ``w`` from its solution ``at`` at ``w_from``, without a pass: the start
    and the information its Newton steps use.

    The refit's objective at ``w_from`` is its kept gold items' terms and
    the pseudo-count ``c``'s prior plus ``w_from`` times the gold-free
    items'; its gradient is zero at ``at``, so the gold-free part's gradient
    there is ``-g / w_from``, ``g`` the kept gold items' and the prior's
    (:func:`_gold_gradient`), and at ``w`` the gradient is
    ``(1 - w / w_from) g``. The information ``H`` at ``w_from`` is rescaled
    the same way: the kept gold items' and the prior's part (diagonal, at
    ``at``) stays, the rest is multiplied by ``w / w_from``. A guess, not the information at the
    new point (whose pass costs more than the Newton steps it would save):
    the refit's stopping rule decides convergence.
    """
    Hg = gold_information(kept, *at) + prior_information(c, at[0], at[1], at[2].size)  # the prior: not weighted
    Hw = Hg + (w / w_from) * (H - Hg)
    return _trusted(at, (1.0 - w / w_from) * _gold_gradient(kept, at, c), Hw), Hw


def _fit_from(ff: FoldFitter, w: float, start: Params, em: Mapping[str, Any]) -> two_coin.EMFit:
    """The whole history at weight ``w`` from ``start``: SQUAREM, then Newton steps with the information at each
    point (Stage A's own path)."""
    return ff.fit(w, start, newton_after=two_coin.NEWTON_AFTER, **em)


def _refits(ff: FoldFitter, w: float, starts: list[Params], infos: Sequence[FloatArray | None],
            em: Mapping[str, Any], drops: list[npt.NDArray[np.int64]]) -> list[two_coin.EMFit]:
    """The fold refits at weight ``w``, each without its ``drops`` from its start, with Newton steps on its
    information (Stage A's Newton phase and stopping rule; without an information, at ``w = 0``, as
    :meth:`FoldFitter.fit` fits). The Newton phases of all the folds run in lockstep, one pass over the
    annotations for each round of their passes (:meth:`heroeval.stage_a.folds.FoldFits.fit_many`; on Dask one map
    over the partitions, :meth:`heroeval.stage_a.distributed_folds.DaskFoldFits.fit_many`)."""
    if w > 0.0 and all(H is not None for H in infos):
        return ff.fit_many(w, starts, drops, [H for H in infos if H is not None], **em)
    return [ff.fit(w, s, drop=dr, information=H, **em) for s, dr, H in zip(starts, drops, infos, strict=True)]
