"""The model checks' refits of Stage A on a Dask history: gold items left out, several history weights, and the
refits at one weight run in lockstep (one map over the partitions for every round of their passes).

:class:`DaskFoldFits` is the distributed counterpart of :class:`heroeval.stage_a.folds.FoldFits`: a refit
without some gold items gives them weight 0 on the workers (:func:`heroeval.stage_a.distributed_parts.part_weights`),
and :meth:`DaskFoldFits.fit_many` runs the Newton phases of several refits together, as the in-memory
:meth:`~heroeval.stage_a.folds.FoldFits.fit_many` does: each round of their passes is one task per partition
(:func:`_part_fold_sums`: the compiled lockstep kernel ``_em_chunk_folds`` where numba is on the worker, else
one NumPy pass per refit), so the checks pay one round trip to the workers where they paid one per refit.
Each refit gets the sums its own design gives, to rounding, and stops by Stage A's rule.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt

from heroeval.core.drive import drive_many
from heroeval.errors import HeroEvalError
from heroeval.stage_a import kernels, two_coin
from heroeval.stage_a.distributed import DaskHistory, _DaskDesign, _design
from heroeval.stage_a.distributed_parts import Part, compact_of, part_counts, part_stats, part_weights
from heroeval.stage_a.folds import FoldPriors, gold_only_fit
from heroeval.stage_a.gold import gold_counts
from heroeval.stage_a.newton_factor import worth_reusing
from heroeval.stage_a.settings import Shrink, StoppingRule, check_pseudo_count

__all__ = ["DaskFoldFits"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FoldSums = tuple[FloatArray, FloatArray, FloatArray]
"""(M, 2J) per-code and (M, G) per-round posterior sums and M log-likelihood parts, one row per refit (the
log-likelihood without its fixed part: annotations per code and items per round times the log-probabilities at
label 0 and of a negative item, which the client adds from the refit's weighted counts)."""


def _part_fold_sums(p: Part, w: float, drops: list[IntArray], alpha: FloatArray, beta: FloatArray,
                    prev: FloatArray) -> FoldSums:
    """One partition's E-step sums for M refits at weight ``w``, refit ``m`` without its gold items ``drops[m]``
    (positions among the partition's gold items) at ``(alpha[m], beta[m], prev[m])`` (rows): one compiled pass
    for all (:func:`heroeval.stage_a.kernels._em_chunk_folds`), or, without numba or with repeated (item,
    labeler) pairs, a NumPy pass per refit."""
    M = len(drops)
    cd = compact_of(p, None)
    if cd is not None and M <= np.iinfo(np.int16).max:
        fold = np.full(cd.n_items, -1, dtype=np.int16)
        for m, dr in enumerate(drops):
            rows = p.gold_rows[dr]
            if (fold[rows] != -1).any():
                raise HeroEvalError("the refits run in lockstep must leave out disjoint sets of items")
            fold[rows] = m
        tables = [cd._tables(alpha[m], beta[m], prev[m]) for m in range(M)]
        ed, elo, d, lo = (np.ascontiguousarray(np.stack([t[i] for t in tables], axis=1)) for i in range(4))
        s1, gs, ll = kernels.run_threads("_em_chunk_folds", cd.bounds, cd.ptr, cd.code, cd.gold, cd.group, fold,
                                         float(w), ed, elo, d, lo, 2 * cd.n_labelers, cd.n_groups)[0]
        return s1, gs, ll
    out = []
    for m, dr in enumerate(drops):
        wt = part_weights(p, w, dr)
        s1, gs, ll = part_stats(p, wt, alpha[m], beta[m], prev[m], True)
        cnt, gsize = part_counts(p, wt)
        la0 = two_coin.code_logprobs(alpha[m], beta[m])[1]
        log1m = np.log1p(-np.clip(prev[m], two_coin.EPS, 1 - two_coin.EPS))
        out.append((s1, gs, ll - float(cnt @ la0 + gsize @ log1m)))  # the fixed part is added on the client
    return (np.stack([o[0] for o in out]), np.stack([o[1] for o in out]), np.array([o[2] for o in out]))


class DaskFoldFits:
    """Stage A refitted on a :class:`DaskHistory` with some gold items left out, at several history weights.

    The distributed counterpart of :class:`heroeval.stage_a.folds.FoldFits`, with the same
    methods and the same fits: left-out items get weight 0 on the workers (one weight vector per
    partition and refit, kept on the worker for the refit's passes); :meth:`fit_many` runs several refits'
    Newton phases in lockstep. ``drop`` holds positions in :meth:`DaskHistory.gold_items` (the gold items in
    id order).
    """

    def __init__(self, dh: DaskHistory, *, pseudo_count: float = 0.0, shrink: Shrink = "none") -> None:
        self.dh = dh
        self.prior_of = FoldPriors((dh.gold_tp, dh.gold_fn, dh.gold_tn, dh.gold_fp),
                                   check_pseudo_count(pseudo_count), shrink,
                                   lambda drop: gold_counts(dh.gold_items().take_items(drop)))
        """The pseudo-counts of the refit without the gold items ``drop`` (positions among
        :meth:`DaskHistory.gold_items`; :class:`heroeval.stage_a.folds.FoldPriors`)."""
        self.reuse = worth_reusing(2 * dh.n_labelers + dh.n_rounds, int(dh.n_annotations.sum()))
        self._counts: tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None = None
        self._dropped: dict[bytes, tuple[list[IntArray], FloatArray, FloatArray]] = {}

    def design(self, w: float, drop: IntArray | None = None) -> _DaskDesign:
        return _design(self.dh, float(w), drop, self.prior_of(drop))

    def fit(self, w: float, start: tuple[FloatArray, FloatArray, FloatArray], *, drop: IntArray | None = None,
            information: FloatArray | None = None, tol: float = 1e-8, max_iter: int = 10_000,
            criterion: Literal["parameters", "loglik"] = "parameters", accelerate: bool = True,
            newton_after: int = 0) -> two_coin.EMFit:
        """As :meth:`heroeval.stage_a.folds.FoldFits.fit`."""
        if w == 0.0 and criterion == "parameters":
            # gold items only, as FoldFits.fit does it: the posteriors are the gold, and the gold items are on the
            # client (DaskHistory.gold_items), so no map over the partitions (five folds of the 1e8 history's
            # checks: 6.5 s of passes over partitions whose every other item weighs 0)
            gs = self.dh.gold_items()
            keep = np.setdiff1d(np.arange(gs.n_items), np.zeros(0, np.int64) if drop is None else drop)
            return gold_only_fit(gs.take_items(keep), self.prior_of(drop), start, tol, max_iter)
        d = self.design(w, drop)
        info = d.information if information is None else two_coin.guessed(information, d.information)
        return two_coin.run_em(d, start, stop=StoppingRule(tol, max_iter, criterion, accelerate), information=info,
                               newton_after=newton_after, posteriors=False, reuse=self.reuse)

    def fit_many(self, w: float, starts: list[tuple[FloatArray, FloatArray, FloatArray]], drops: list[IntArray],
                 informations: list[FloatArray], *, tol: float = 1e-8, max_iter: int = 10_000,
                 criterion: Literal["parameters", "loglik"] = "parameters",
                 accelerate: bool = True) -> list[two_coin.EMFit]:
        """As :meth:`heroeval.stage_a.folds.FoldFits.fit_many`: the refits without each of ``drops`` (disjoint) at
        ``w > 0``, with Newton steps from their starts on their ``informations``, in lockstep; every round of
        their passes is one map over the partitions (:func:`_part_fold_sums`)."""
        if w == 0.0 or len(starts) < 2 or criterion != "parameters" or not accelerate:
            return [self.fit(w, s, drop=dr, information=H, tol=tol, max_iter=max_iter, criterion=criterion,
                             accelerate=accelerate) for s, dr, H in zip(starts, drops, informations, strict=True)]
        J = self.dh.n_labelers
        drops = [np.asarray(dr, dtype=np.int64) for dr in drops]

        def exact(dr: IntArray) -> two_coin.Information:
            return lambda a, b, p: self.design(w, dr).information(a, b, p)

        gens = [two_coin.newton_steps(J, self.prior_of(dr), two_coin._pack(*s), two_coin.guessed(H, exact(dr)),
                                      tol=tol, budget=max_iter, fixed=None, progress=None, reuse=self.reuse)
                for s, dr, H in zip(starts, drops, informations, strict=True)]
        done = drive_many(gens, lambda which, xs: self._fold_sums(w, [drops[i] for i in which], xs))
        return [two_coin.newton_fit(r, J) for r in done]

    def _fold_sums(self, w: float, drops: list[IntArray], points: list[FloatArray]) -> list[two_coin.Sums]:
        """:func:`heroeval.stage_a.two_coin.em_sums` of the refits without each of ``drops`` at ``w``, each at its
        point (logits): one task per partition for all of them."""
        dh, c = self.dh, self.dh.client
        J = dh.n_labelers
        params = [two_coin._unpack(x, J) for x in points]
        alpha, beta, prev = (np.stack([q[i] for q in params]) for i in range(3))
        by_part = [self._left_out(dr)[0] for dr in drops]  # per refit, per partition
        res = c.gather([c.submit(_part_fold_sums, p, float(w), [bp[k] for bp in by_part], alpha, beta, prev,
                                 pure=False) for k, p in enumerate(dh.parts)])
        s1 = np.sum([r[0] for r in res], axis=0)
        gs = np.sum([r[1] for r in res], axis=0)
        out: list[two_coin.Sums] = []
        for m, (dr, (a, b, p)) in enumerate(zip(drops, params, strict=True)):
            counts, gsize = self._refit_counts(w, dr)
            la0 = two_coin.code_logprobs(a, b)[1]
            log1m = np.log1p(-np.clip(p, two_coin.EPS, 1 - two_coin.EPS))
            ll = math.fsum(float(r[2][m]) for r in res)
            obj = float(counts @ la0 + gsize @ log1m) + ll + kernels._prior(self.prior_of(dr), a, b)
            out.append((s1[m], counts, gs[m], gsize, True, obj))
        return out

    def _refit_counts(self, w: float, drop: IntArray) -> tuple[FloatArray, FloatArray]:
        """A refit's weighted annotations per code and items per round: gold-free ones times ``w``, the gold items
        kept (from the gold items on the client: no pass)."""
        dh = self.dh
        if self._counts is None:
            gs = dh.gold_items()
            c_gold = two_coin.bincount(2 * gs.labeler.astype(np.int64) + gs.label, 2 * dh.n_labelers)
            g_gold = np.bincount(gs.item_round, minlength=dh.n_rounds).astype(np.float64)
            self._counts = (dh.code_counts - c_gold, c_gold, dh.round_n_items - g_gold, g_gold)
        free, gold, gfree, ggold = self._counts
        _, c_drop, g_drop = self._left_out(drop)
        return w * free + (gold - c_drop), w * gfree + (ggold - g_drop)

    def _left_out(self, drop: IntArray) -> tuple[list[IntArray], FloatArray, FloatArray]:
        """The gold items ``drop`` as positions per partition, and their annotations per code and items per round
        (the same at every pass and weight of the refit, so kept, as the in-memory ``FoldFits`` keeps them)."""
        key = drop.tobytes()
        hit = self._dropped.get(key)
        if hit is None:
            dh = self.dh
            out = dh.gold_items().take_items(drop)
            hit = self._dropped[key] = (
                dh.gold_positions(drop), two_coin.bincount(2 * out.labeler.astype(np.int64) + out.label,
                                                           2 * dh.n_labelers),
                np.bincount(out.item_round, minlength=dh.n_rounds).astype(np.float64))
        return hit

    def information(self, w: float, fit: two_coin.EMFit) -> FloatArray:
        """The observed information of the whole history at weight ``w`` at ``fit`` (probability scale)."""
        return self.design(w).information(fit.alpha, fit.beta, fit.prev)
