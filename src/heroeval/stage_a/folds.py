"""Stage A refitted with some gold items left out (the model checks' folds): the refits' priors and their
shared design."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from heroeval.core.drive import drive_many
from heroeval.errors import HeroEvalError
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a import compression, kernels, two_coin
from heroeval.stage_a.fit import _choose_engine, design_of, information_of, stage_a_prior
from heroeval.stage_a.gold import gold_counts
from heroeval.stage_a.newton_factor import worth_reusing
from heroeval.stage_a.prior import PriorCounts, same_prior
from heroeval.stage_a.settings import Shrink, StoppingRule, check_shrink

__all__ = ["FoldFits", "FoldPriors"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class FoldPriors:
    """Stage A's pseudo-counts for refits that leave gold items out (the model checks' folds), kept per fold.

    With ``shrink="eb"`` a refit's prior is fitted to its kept gold alone (the whole history's gold counts
    ``counts`` less those of the left-out items, which ``dropped`` gives), so a held-out item does not inform
    its own refit; with ``"none"`` it is ``pseudo_count`` for every fold.
    """

    def __init__(self, counts: tuple[IntArray, IntArray, IntArray, IntArray], pseudo_count: float, shrink: str,
                 dropped: Callable[[IntArray], tuple[IntArray, IntArray, IntArray, IntArray]]) -> None:
        self.counts = counts
        self.c = float(pseudo_count)
        self.shrink = check_shrink(shrink)
        self.dropped = dropped
        self._cache: dict[bytes, PriorCounts] = {}

    def __call__(self, drop: IntArray | None) -> PriorCounts:
        if self.shrink == "none":
            return self.c
        drop = np.zeros(0, dtype=np.int64) if drop is None else np.asarray(drop, dtype=np.int64)
        key = drop.tobytes()
        prior = self._cache.get(key)
        if prior is None:
            counts = self.counts
            if drop.size:
                out = self.dropped(drop)
                counts = (counts[0] - out[0], counts[1] - out[1], counts[2] - out[2], counts[3] - out[3])
            prior = self._cache[key] = stage_a_prior(counts, self.c, self.shrink)[0]
        return prior


def gold_only_fit(kept: AnnotationSet, prior: PriorCounts, start: tuple[FloatArray, FloatArray, FloatArray],
                  tol: float, max_iter: int) -> two_coin.EMFit:
    """Stage A at history weight 0 on the gold items ``kept`` alone (plain EM steps; the posteriors are the
    gold, so one step is the maximum and one more confirms it): the sums of the whole history's design at weight
    0, whose other items weigh nothing, without passing over them."""
    d0 = replace(design_of(kept), pseudo_count=prior)
    return two_coin.run_em(d0, start, stop=StoppingRule(tol, max_iter, accelerate=False), posteriors=False)


class FoldFits:
    """Stage A refitted on one history with some gold items left out, at several history weights.

    The model checks (:func:`heroeval.checks.run_checks`) refit Stage A once per fold
    of the gold items and per weight. Leaving items out is giving them weight 0,
    so every refit shares one design built here once (the compiled engine's
    sorted codes, or the NumPy engine's compressed rows); only the per-item
    weights and the M-step's weighted counts change, and those are sums over
    the few left-out items. The model checks start each refit near its maximum
    and give it an observed information formed from the whole history's fit
    (:func:`heroeval.checks.fold_refits.fold_fits_shared`), so each takes a
    few Newton passes (:func:`heroeval.stage_a.two_coin.run_em`); :meth:`fit_many`
    runs several in lockstep. The stopping rule is Stage A's: one EM step moves
    no parameter by more than ``tol``. ``design``, the compiled design Stage A was fitted on
    (``Calibration.history_design``), is used instead of building another when
    it is this history's at weight 1 with the same pseudo-counts.
    """

    def __init__(self, history: AnnotationSet, *, pseudo_count: float = 0.0, shrink: Shrink = "none",
                 engine: Literal["auto", "numpy", "numba"] = "auto",
                 design: kernels.CompactDesign | None = None) -> None:
        self.history = history
        self.prior_of = FoldPriors(gold_counts(history), pseudo_count, shrink,
                                   lambda drop: gold_counts(history.take_items(drop)))
        """The pseudo-counts of the refit without the gold items ``drop`` (:class:`FoldPriors`)."""
        isg = history.gold >= 0
        self._isg = isg
        self.pseudo_count = self.prior_of(None)  # the whole history's
        self.numba = _choose_engine(engine, history.n_annotations)
        self._compact: kernels.CompactDesign | None = None
        self._design: two_coin.Design | None = None
        self._row_of_item: IntArray | None = None
        J, G = history.n_labelers, history.n_rounds
        self.reuse = worth_reusing(2 * J + G, history.n_annotations)
        """Whether the refits' Newton steps reuse their factors (:func:`heroeval.stage_a.two_coin.newton_steps`)."""
        if self.numba:
            # the design Stage A was fitted on, when it is this history's at weight 1 with the same pseudo-counts
            if (design is not None and design.weight is None and same_prior(design.pseudo_count, self.pseudo_count)
                    and design.n_items == history.n_items and design.n_labelers == J):
                cd = design
            else:
                cd = kernels.compact_design(history.item_ptr, history.labeler, history.label, J, history.gold,
                                             history.item_round, G, pseudo_count=self.pseudo_count)
            self._compact = cd
            gold_set = history.take_items(np.flatnonzero(isg))
            c_gold = two_coin.bincount(2 * gold_set.labeler.astype(np.int64) + gold_set.label, 2 * J)
            self._counts = (cd.code_counts - c_gold, c_gold)  # gold-free and gold annotations per code
            g_all = two_coin.bincount(history.item_round, G)
            g_gold = np.bincount(history.item_round[isg], minlength=G).astype(np.float64)
            self._gsizes = (g_all - g_gold, g_gold)
            # each item's position in the design's order (items sorted by label count), and weights per w
            self._where: IntArray | None = None
            if cd.order is not None:
                self._where = np.empty(history.n_items, dtype=np.int64)
                self._where[cd.order] = np.arange(history.n_items)
            self._weights: dict[float, FloatArray] = {}
            self._dropped: dict[bytes, tuple[IntArray, FloatArray, FloatArray]] = {}
        else:
            d = replace(design_of(history), pseudo_count=self.pseudo_count)
            dc = compression.compress(d)
            if dc is None:
                self._design = replace(d, weight=np.ones(history.n_items))
                self._row_of_item = np.arange(history.n_items)
            else:
                self._design = dc
                self._row_of_item = dc.row_of_item

    def design(self, w: float, drop: IntArray | None = None) -> two_coin.Design | kernels.CompactDesign:
        """The design of the history without the items ``drop`` (gold items), gold-free items weighted by ``w``."""
        drop = np.zeros(0, dtype=np.int64) if drop is None else np.asarray(drop, dtype=np.int64)
        prior = self.prior_of(drop)
        if self._compact is not None:
            cd = self._compact
            base = self._weights.get(w)
            if base is None:  # the weights at w in the design's item order, kept for every fold
                base = np.where(self._isg, 1.0, w)
                base = base[cd.order] if cd.order is not None else base
                self._weights[w] = base
            at, c_drop, g_drop = self._left_out(drop)
            wt = base.copy()
            wt[at] = 0.0
            counts, gsize = self._fold_counts(w, c_drop, g_drop)
            return replace(cd, weight=np.ascontiguousarray(wt), code_counts=counts, group_size=gsize,
                           pseudo_count=prior)
        d, rows = self._design, self._row_of_item
        assert d is not None and rows is not None
        cnt = np.ones(d.n_items) if d.count is None else d.count
        rw = np.where(d.gold >= 0, 1.0, w) * cnt
        rw[rows[drop]] = 0.0  # gold items keep rows of their own
        return replace(d, weight=rw, pseudo_count=prior)

    def _left_out(self, drop: IntArray) -> tuple[IntArray, FloatArray, FloatArray]:
        """The left-out items' positions in the compiled design and their annotations per code and items per round
        (the same at every weight, so kept)."""
        key = drop.tobytes()
        dropped = self._dropped.get(key)
        if dropped is None:
            h = self.history
            out = h.take_items(drop)
            dropped = (drop if self._where is None else self._where[drop],
                       two_coin.bincount(2 * out.labeler.astype(np.int64) + out.label, 2 * h.n_labelers),
                       np.bincount(out.item_round, minlength=h.n_rounds).astype(np.float64))
            self._dropped[key] = dropped
        return dropped

    def _fold_counts(self, w: float, c_drop: FloatArray, g_drop: FloatArray) -> tuple[FloatArray, FloatArray]:
        """A refit's weighted annotations per code and items per round: gold-free ones times ``w``, the kept gold."""
        return w * self._counts[0] + (self._counts[1] - c_drop), w * self._gsizes[0] + (self._gsizes[1] - g_drop)

    def _fold_sums(self, w: float, drops: list[IntArray], points: list[FloatArray]) -> list[two_coin.Sums]:
        """:func:`heroeval.stage_a.two_coin.em_sums` of the refits without each of ``drops`` at weight ``w``, each at its
        point (logits), in one pass over the annotations (:func:`heroeval.stage_a.kernels._em_chunk_folds`; one
        refit alone, its own design's pass)."""
        cd = self._compact
        assert cd is not None
        J = cd.n_labelers
        if len(points) == 1:
            return [two_coin.em_sums(self.design(w, drops[0]), *two_coin._unpack(points[0], J))]
        if len(drops) > np.iinfo(np.int16).max:
            raise HeroEvalError(f"at most {np.iinfo(np.int16).max} refits run in lockstep, got {len(drops)}")
        fold = np.full(cd.n_items, -1, dtype=np.int16)
        left = [self._left_out(np.asarray(dr, dtype=np.int64)) for dr in drops]
        for m, (at, _, _) in enumerate(left):
            if (fold[at] != -1).any():
                raise HeroEvalError("the refits run in lockstep must leave out disjoint sets of items")
            fold[at] = m
        tables = [cd._tables(*two_coin._unpack(x, J)) for x in points]
        ed, elo, d, lo = (np.ascontiguousarray(np.stack([t[i] for t in tables], axis=1)) for i in range(4))
        parts = kernels.run_threads("_em_chunk_folds", cd.bounds, cd.ptr, cd.code, cd.gold, cd.group, fold,
                                     float(w), ed, elo, d, lo, 2 * J, cd.n_groups)
        s1 = np.sum([q[0] for q in parts], axis=0)
        gs = np.sum([q[1] for q in parts], axis=0)
        ll = np.sum([q[2] for q in parts], axis=0)
        out: list[two_coin.Sums] = []
        for m, x in enumerate(points):
            counts, gsize = self._fold_counts(w, left[m][1], left[m][2])
            a, b, p = two_coin._unpack(x, J)
            _, la0 = two_coin.code_logprobs(a, b)
            log1m = np.log1p(-np.clip(p, two_coin.EPS, 1 - two_coin.EPS))
            obj = float(counts @ la0 + gsize @ log1m) + float(ll[m]) + kernels._prior(self.prior_of(drops[m]), a, b)
            out.append((s1[m], counts, gs[m], gsize, True, obj))
        return out

    def fit_many(self, w: float, starts: list[tuple[FloatArray, FloatArray, FloatArray]], drops: list[IntArray],
                 informations: list[FloatArray], *, tol: float = 1e-8, max_iter: int = 10_000,
                 criterion: Literal["parameters", "loglik"] = "parameters",
                 accelerate: bool = True) -> list[two_coin.EMFit]:
        """:meth:`fit` of several refits at one weight ``w > 0``, each without its ``drops`` (disjoint), with Newton
        steps from its start on its ``informations`` (a guess; the exact information after
        :data:`heroeval.stage_a.two_coin.GUESS_STEPS`), run in lockstep: on the compiled engine every round of their
        passes is one pass over the annotations. Each refit gets the sums its own design gives, bit for bit, and
        the objective to rounding (summed in another order), so it takes the steps it takes alone except where a
        step's gain is within rounding; the fits agree to the EM tolerance. A lockstep pass for five refits costs
        about three single passes (benchmarks/results/scale/LOG.md, "What the model checks cost")."""
        if (self._compact is None or w == 0.0 or len(starts) < 2 or criterion != "parameters"
                or not accelerate):
            return [self.fit(w, s, drop=dr, information=H, tol=tol, max_iter=max_iter, criterion=criterion,
                             accelerate=accelerate) for s, dr, H in zip(starts, drops, informations, strict=True)]
        J = self._compact.n_labelers
        gens = [two_coin.newton_steps(J, self.prior_of(dr), two_coin._pack(*s), two_coin.guessed(H, self._exact(w, dr)), tol=tol,
                                      budget=max_iter, fixed=None, progress=None, reuse=self.reuse)
                for s, dr, H in zip(starts, drops, informations, strict=True)]
        done = drive_many(gens, lambda which, xs: self._fold_sums(w, [drops[i] for i in which], xs))
        return [two_coin.newton_fit(r, J) for r in done]

    def _exact(self, w: float, drop: IntArray) -> two_coin.Information:
        """The observed information of the refit without ``drop`` at weight ``w`` (its design built when asked)."""
        return lambda a, b, p: information_of(self.design(w, drop))(a, b, p)

    def fit(self, w: float, start: tuple[FloatArray, FloatArray, FloatArray], *, drop: IntArray | None = None,
            information: FloatArray | None = None, tol: float = 1e-8, max_iter: int = 10_000,
            criterion: Literal["parameters", "loglik"] = "parameters", accelerate: bool = True,
            newton_after: int = 0) -> two_coin.EMFit:
        """Stage A without ``drop`` at weight ``w`` from ``start``.

        With ``information`` (an observed information, probability scale, at a
        nearby fit), Newton steps with that matrix from the first evaluation
        (the exact one after :data:`heroeval.stage_a.two_coin.GUESS_STEPS` steps,
        :func:`heroeval.stage_a.two_coin.guessed`); without it, Newton steps with the
        information at each point.
        """
        if w == 0.0 and criterion == "parameters":
            # gold items only: the posteriors are the gold, so one EM step is the maximum (and one more confirms
            # it); on a design of the kept gold items alone, which has the same sums without passing over the rest
            keep = np.setdiff1d(np.flatnonzero(self._isg), np.zeros(0, np.int64) if drop is None else drop)
            return gold_only_fit(self.history.take_items(keep), self.prior_of(drop), start, tol, max_iter)
        d = self.design(w, drop)
        info = information_of(d) if information is None else two_coin.guessed(information, information_of(d))
        return two_coin.run_em(d, start, stop=StoppingRule(tol, max_iter, criterion, accelerate), information=info,
                               newton_after=newton_after, posteriors=False, reuse=self.reuse)

    def information(self, w: float, fit: two_coin.EMFit) -> FloatArray:
        """The observed information of the whole history at weight ``w`` at ``fit`` (probability scale)."""
        return information_of(self.design(w))(fit.alpha, fit.beta, fit.prev)
