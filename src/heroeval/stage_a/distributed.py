"""Stage A on a Dask cluster, for histories that do not fit on one machine.

:func:`fit_stage_a_dask` fits the same model as :func:`heroeval.calibrate`
(gold-anchored two-coin EM with SQUAREM and, when SQUAREM is slow, Newton
steps; then the sandwich covariance) on a Dask DataFrame partitioned by
item, or on Parquet files read by Dask. Each partition is turned once into
compact arrays that stay in the workers' memory (:class:`DaskHistory`); each
EM step then maps the partitions to their sufficient statistics (per code,
the sum of the items' posteriors; per round, the sum of posteriors; the
log-likelihood: 2J + G + 1 numbers) and reduces only those on the client,
which runs the M-step and the extrapolation. A Newton step and the
covariance are one more map each (every partition's P x P observed
information, and for the covariance its score Gram matrix) and reduce.

Supported as in memory: ``history_weight`` (a number: gold-free items'
weight in the likelihood), ``pseudo_count`` (MAP-EM), covariates (HERO-2's
history means, their covariance and their cross terms with Stage A's
parameters), ``variance``. Results equal the in-memory fit to 1e-9
(tests/unit/test_distributed.py). The model checks and
``history_weight="cv"`` refit Stage A with gold items left out: they are
composed above this layer, by :func:`heroeval.calibrate_dask`
(:mod:`heroeval.workflows.api`), from :class:`heroeval.stage_a.distributed_folds.DaskFoldFits` (the refits,
on the cluster) and the in-memory checks on the gold items, which
:meth:`DaskHistory.gold_items` brings to the client.

Point it at a real cluster with ``distributed.Client("tcp://scheduler:8786")``
and pass that client; the workers need heroeval installed (NumPy engine; with
numba installed there too, nothing changes, the per-partition passes are
sparse mat-vecs). The calibration keeps no in-memory history, so
``hero_joint`` and the bootstrap are not available from it, exactly as for
a calibration loaded from JSON.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Unpack

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.core.options import options_of
from heroeval.errors import ConvergenceWarning, DataError, HeroEvalError
from heroeval.ingest.annotations import AnnotationSet, IngestReport, TableReport
from heroeval.ingest.coding import ids_to_str
from heroeval.ingest.labels import parse_binary
from heroeval.ingest.options import COLUMN_DEFAULTS, ColumnOptions
from heroeval.ingest.tables import (
    GOLD_COLUMNS,
    ITEM_COLUMNS,
    LoadedTable,
    annotation_columns,
    covariate_columns,
    load_table,
    resolve_column,
)
from heroeval.stage_a import kernels, scoring, two_coin
from heroeval.stage_a.calibration import Calibration, ConvergenceInfo
from heroeval.stage_a.covariance import ParameterCovariance
from heroeval.stage_a.distributed_parts import (
    Built,
    GoldLookup,
    Part,
    build_local,
    gold_subset,
    part_centered,
    part_counts,
    part_cov,
    part_info,
    part_stats,
    part_weights,
    summary,
    widen,
)
from heroeval.stage_a.fit import _prior_settings, _progress_callback, eb_prior_covariance, stage_a_prior
from heroeval.stage_a.gold import gold_labels_of, initial_from_counts, score_gold_items
from heroeval.stage_a.prior import PriorCounts, has_prior, prior_information
from heroeval.stage_a.settings import (
    EMSettings,
    FitSettings,
    check_weight,
    stopping_rule,
)

__all__ = ["DaskHistory", "fit_stage_a_dask", "load_dask_history"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class DaskHistory:
    """A history loaded on a Dask cluster: one compact design per partition, kept in the workers' memory.

    Made by :func:`load_dask_history`. Holds the labeler and round dictionaries
    and the client-side totals (gold counts, items per round, covariate sums).
    """

    def __init__(self, client: Any, parts: list[Any], labelers: list[str], rounds: list[str],
                 covariate_names: tuple[str, ...], summaries: list[dict[str, Any]], covariate_rows: int) -> None:
        self.client = client
        self.parts = parts
        self.labeler_ids = tuple(labelers)
        self.round_ids = tuple(rounds)
        self.covariate_names = covariate_names
        self.n_labelers, self.n_rounds = len(labelers), len(rounds)

        def tot(key: str) -> Any:
            return np.sum([s[key] for s in summaries], axis=0)

        self.gold_tp, self.gold_fn, self.gold_tn, self.gold_fp = (
            tot(k).astype(np.int64) for k in ("tp", "fn", "tn", "fp"))
        self.n_annotations = tot("n_ann").astype(np.int64)
        self.n_items_per_labeler = tot("n_items_lab").astype(np.int64)
        self.round_n_items = tot("round_items").astype(np.int64)
        self.round_n_gold = tot("round_gold").astype(np.int64)
        self.round_gold_pos = tot("round_gold_pos").astype(np.float64)
        self.code_counts = tot("code_counts").astype(np.float64)
        self.n_items = int(sum(s["n_items"] for s in summaries))
        self.n_rows = int(tot("n_rows"))
        self.dropped: dict[str, int] = {}
        for s in summaries:
            for k, v in s["dropped"].items():
                self.dropped[k] = self.dropped.get(k, 0) + v
        if covariate_names:
            self.covariate_rows_unmatched = covariate_rows - self.n_items
            self.x_mean: FloatArray | None = np.sum([s["x_sum"] for s in summaries if "x_sum" in s],
                                                    axis=0) / max(self.n_items, 1)
        else:
            self.covariate_rows_unmatched = 0
            self.x_mean = None
        self._gold: AnnotationSet | None = None
        self._gold_part = self._gold_pos = np.zeros(0, dtype=np.int64)

    @property
    def n_gold(self) -> int:
        return int(self.round_n_gold.sum())

    def initial_values(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Stage A's starting values from the gold counts (as :func:`heroeval.stage_a.gold.initial_values`)."""
        return initial_from_counts(self.gold_tp, self.gold_fn, self.gold_tn, self.gold_fp, self.round_n_gold,
                                   self.round_gold_pos)

    def gold_positions(self, drop: IntArray) -> list[IntArray]:
        """The gold items ``drop`` (positions among :meth:`gold_items`) as positions among each partition's own
        gold items (``Part.gold_rows``), one array per partition."""
        if drop.size == 0:
            return [np.zeros(0, dtype=np.int64) for _ in self.parts]
        self.gold_items()
        part, pos = self._gold_part[drop], self._gold_pos[drop]
        return [pos[part == k] for k in range(len(self.parts))]

    def gold_items(self) -> AnnotationSet:
        """The history's gold items and their labels, on the client (the model checks need only these).

        Items are ordered by id as :func:`heroeval.read_annotations` (pandas reader) orders them, and the
        labeler and round codes are the history's, so the checks computed on this set equal those computed
        on the gold items of the in-memory history. Memory on the client: the gold items' annotations
        (one int32 and one int8 each) and their ids.
        """
        if self._gold is not None:
            return self._gold
        c = self.client
        got = c.gather([c.submit(gold_subset, p, pure=False) for p in self.parts])
        names = np.concatenate([g[0] for g in got]) if got else np.zeros(0, dtype=object)
        lens = np.concatenate([g[1] for g in got]) if got else np.zeros(0, np.int64)
        lab = np.concatenate([g[2] for g in got]) if got else np.zeros(0, np.int64)
        lbl = np.concatenate([g[3] for g in got]) if got else np.zeros(0, np.int8)
        gold = np.concatenate([g[4] for g in got]) if got else np.zeros(0, np.int8)
        grp = np.concatenate([g[5] for g in got]) if got else np.zeros(0, np.int32)
        X = np.concatenate([g[6] for g in got]) if self.covariate_names and got else None
        order = np.argsort(pd.Index(names.astype(str)).to_numpy(dtype=object), kind="stable") if names.size else \
            np.zeros(0, np.int64)
        # each gold item's partition and its position among that partition's gold items, in this set's order
        per_part = [len(g[0]) for g in got]
        self._gold_part = np.repeat(np.arange(len(got), dtype=np.int64), per_part)[order]
        self._gold_pos = (np.arange(int(sum(per_part)), dtype=np.int64)
                          - np.repeat(np.cumsum([0, *per_part[:-1]]), per_part).astype(np.int64))[order]
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
        lo = lens[order]
        idx = np.repeat(starts[order] - (np.cumsum(lo) - lo), lo) + np.arange(int(lo.sum()), dtype=np.int64)
        ptr = np.zeros(order.size + 1, dtype=np.int64)
        np.cumsum(lens[order], out=ptr[1:])
        J = self.n_labelers
        repeated = bool(pd.Series(np.repeat(np.arange(order.size), lens[order]) * max(J, 1) + lab[idx])
                        .duplicated().any())
        self._gold = AnnotationSet(
            item_ids=names[order].astype(object), labeler_ids=np.asarray(self.labeler_ids, dtype=object),
            item_ptr=ptr, labeler=lab[idx].astype(np.int32), label=lbl[idx].astype(np.int8),
            gold=gold[order].astype(np.int8), item_round=grp[order].astype(np.int32), round_ids=self.round_ids,
            covariates=None if X is None else X[order], covariate_names=self.covariate_names if X is not None else (),
            report=IngestReport((TableReport("annotations", "dask history (gold items)", int(ptr[-1]),
                                             int(ptr[-1]), {}, {}),)),
            name="history (gold items)", repeated_pairs=repeated)
        return self._gold


class _DaskDesign:
    """The EM map over persisted partitions: map to sufficient statistics, reduce on the client.

    ``weights`` (one future per partition, or None for weight 1 everywhere) weight each item's
    likelihood as :class:`heroeval.stage_a.two_coin.Design` does; ``pseudo_count`` is the MAP prior,
    added on the client (the partitions' designs carry none).
    """

    def __init__(self, dh: DaskHistory, weights: list[Any] | None, pseudo_count: PriorCounts) -> None:
        self.dh = dh
        self.client = dh.client
        self.parts = dh.parts
        self.weights = weights
        self.pseudo_count = pseudo_count
        self.n_labelers = dh.n_labelers
        self.n_groups = dh.n_rounds
        if weights is None:
            self.cnt, self.gsize, self.weighted = dh.code_counts, dh.round_n_items.astype(np.float64), False
        else:
            res = self.client.gather([self.client.submit(part_counts, p, wt, pure=False)
                                      for p, wt in zip(self.parts, weights, strict=True)])
            self.cnt = np.sum([r[0] for r in res], axis=0)
            self.gsize = np.sum([r[1] for r in res], axis=0)
            self.weighted = True

    def _wts(self) -> list[Any]:
        return [None] * len(self.parts) if self.weights is None else self.weights

    def _sums(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool) -> tuple[
            FloatArray, FloatArray, float]:
        c = self.client
        futs = [c.submit(part_stats, p, wt, alpha, beta, prev, need_ll, pure=False)
                for p, wt in zip(self.parts, self._wts(), strict=True)]
        res = c.gather(futs)
        s1 = np.sum([r[0] for r in res], axis=0)
        gsum = np.sum([r[1] for r in res], axis=0)
        ll = float(math.fsum(r[2] for r in res)) + kernels._prior(self.pseudo_count, alpha, beta) if need_ll \
            else float("nan")
        return s1, gsum, ll

    def em_map(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool) -> tuple[
            FloatArray, FloatArray, FloatArray, float]:
        s1, gsum, ll = self._sums(alpha, beta, prev, need_ll)
        a2, b2, p2 = two_coin.m_from_sums(s1, self.cnt, gsum, self.gsize, self.pseudo_count, weighted=self.weighted)
        return a2, b2, p2, ll

    def em_sums(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> tuple[
            FloatArray, FloatArray, FloatArray, FloatArray, bool, float]:
        s1, gsum, ll = self._sums(alpha, beta, prev, True)
        return s1, self.cnt, gsum, self.gsize, self.weighted, ll

    def posterior(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> tuple[FloatArray, float]:
        """The posteriors stay on the workers: an empty array, and the log-likelihood."""
        _, _, ll = self._sums(alpha, beta, prev, True)
        return np.empty(0), ll

    def information(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> FloatArray:
        """The observed information (probability scale), for the EM's Newton phase: one map of P x P matrices."""
        c = self.client
        res = c.gather([c.submit(part_info, p, wt, alpha, beta, prev, pure=False)
                        for p, wt in zip(self.parts, self._wts(), strict=True)])
        H: FloatArray = np.sum(res, axis=0)
        if has_prior(self.pseudo_count):
            H = H + prior_information(self.pseudo_count, alpha, beta, self.n_groups)
        return H

    def covariance(self, fit: two_coin.EMFit, variance: str, prior_meat: FloatArray | None = None,
                   prior_cross: FloatArray | None = None) -> ParameterCovariance:
        """The parameter covariance of :func:`heroeval.stage_a.fit.parameter_covariance`, map-reduced
        (``prior_meat`` and ``prior_cross`` as there)."""
        c = self.client
        gram = variance == "sandwich"
        xm = self.dh.x_mean
        res = c.gather([c.submit(part_cov, p, wt, fit.alpha, fit.beta, fit.prev, gram, xm, pure=False)
                        for p, wt in zip(self.parts, self._wts(), strict=True)])
        H = np.sum([r[0] for r in res], axis=0)
        if has_prior(self.pseudo_count):
            H = H + prior_information(self.pseudo_count, fit.alpha, fit.beta, self.n_groups)
        free = scoring.free_parameters(fit.alpha, fit.beta, fit.prev)
        S = np.sum([r[1] for r in res], axis=0) if gram else None
        if prior_meat is not None:
            S = (S if S is not None else H) + prior_meat
        if xm is None:
            return ParameterCovariance.from_information(H, free, S)
        sx = np.sum([r[2] for r in res], axis=0)
        if prior_cross is not None:
            sx = sx + prior_cross
        return ParameterCovariance.from_information(H, free, S, sx,
                                                    xtx=np.sum([r[3] for r in res], axis=0),
                                                    n_x_items=self.dh.n_items)


def _design(dh: DaskHistory, w: float, drop: IntArray | None, pseudo_count: PriorCounts) -> _DaskDesign:
    """The history's design with gold-free items weighted by ``w`` and the gold items ``drop`` (positions among
    :meth:`DaskHistory.gold_items`) left out."""
    drop = np.zeros(0, dtype=np.int64) if drop is None else np.asarray(drop, dtype=np.int64)
    if w == 1.0 and drop.size == 0:
        return _DaskDesign(dh, None, pseudo_count)
    c = dh.client
    by_part = dh.gold_positions(drop)
    weights = [c.submit(part_weights, p, w, rows, pure=False) for p, rows in zip(dh.parts, by_part, strict=True)]
    return _DaskDesign(dh, weights, pseudo_count)


def load_dask_history(
    history: Any,
    *,
    gold: Any,
    client: Any = None,
    covariates: Any = None,
    partitioned_by_item: bool | Literal["auto"] = False,
    **columns: Unpack[ColumnOptions],
) -> DaskHistory:
    """Read a history into the workers' memory, one compact design per partition (see :func:`heroeval.calibrate_dask`;
    ``columns``: the column names, as :func:`heroeval.read_annotations` takes them)."""
    import dask.dataframe as dd
    import distributed

    client = client if client is not None else distributed.default_client()  # type: ignore[no-untyped-call]
    ddf = dd.read_parquet(history) if isinstance(history, str) else history
    if not isinstance(ddf, dd.DataFrame):
        raise HeroEvalError(f"history must be a dask DataFrame or a Parquet path, got {type(history).__name__}")
    if partitioned_by_item not in (True, False, "auto"):
        raise HeroEvalError(f"partitioned_by_item must be True, False or 'auto', got {partitioned_by_item!r}")
    where = "dask history"
    o = options_of("load_dask_history", columns, ColumnOptions, COLUMN_DEFAULTS)
    item_col, gold_item_col, gold_col = o["item_col"], o["gold_item_col"], o["gold_col"]
    labeler_col, label_col, round_col = o["labeler_col"], o["label_col"], o["round_col"]
    covariate_item_col, covariate_cols = o["covariate_item_col"], o["covariate_cols"]
    cols = pd.DataFrame(columns=list(ddf.columns))
    i_c, l_c, y_c, r_c = annotation_columns(cols, item_col, labeler_col, label_col, round_col, where)
    gdf, gsrc, _ = load_table(gold, "gold", string_cols=[c for c in (gold_item_col, item_col, *ITEM_COLUMNS) if c])
    gi_c = resolve_column(gdf, gold_item_col, ITEM_COLUMNS, "gold item", gsrc)
    gv_c = resolve_column(gdf, gold_col, GOLD_COLUMNS, "gold", gsrc)
    gt = LoadedTable("gold", gsrc, gdf, gi_c, False)
    gv, gmiss = parse_binary(gdf[gv_c], gt, gv_c, "gold label")
    gids = ids_to_str(gdf[gi_c])
    ok = ~gmiss & gids.notna().to_numpy()
    gold_s = pd.Series(gv[ok].astype(np.float64), index=pd.Index(gids[ok].to_numpy(dtype=object)))
    gold_s = gold_s[~gold_s.index.duplicated()]
    cov_tab, cov_names, cov_rows = _covariate_table(covariates, covariate_item_col, covariate_cols, item_col)
    # hash=False: a key of its own per load, so that a load right after another one with the same gold (an error
    # and a retry, say) cannot lose its copy when the first one's is released
    gold_f = client.scatter(GoldLookup.of(gold_s), broadcast=True, hash=False)
    cov_f = None if cov_tab is None else client.scatter(cov_tab, broadcast=True, hash=False)
    col_names = (i_c, l_c, y_c, r_c)

    def build(frame: Any) -> tuple[list[Any], list[tuple[Any, ...]], int]:
        """The partitions built in their own dictionaries, what the client merges from each, and how many items
        have rows in more than one partition (-1: cannot tell)."""
        built = [client.submit(build_local, dp, col_names, gold_f, k, cov_f, pure=False)
                 for k, dp in enumerate(client.compute(frame.to_delayed()))]
        heads = client.gather([client.submit(_head, b, pure=False) for b in built])
        if shuffled:
            return built, heads, 0
        if len({h[2] for h in heads}) > 1:  # integer ids in some partitions, text in others: not comparable
            return built, heads, -1
        ranges = sorted(h[4] for h in heads if h[4] is not None)
        if all(b[0] > a[1] for a, b in itertools.pairwise(ranges)):
            return built, heads, 0  # partitions hold item ranges that do not overlap (a file sorted by item)
        # each partition's hashes are sorted and distinct: a stable sort merges the runs, and equal neighbours are
        # items with rows in two partitions
        hashes = client.gather([client.submit(_item_hashes, b, pure=False) for b in built])
        allh = np.sort(np.concatenate(hashes), kind="stable") if hashes else np.zeros(0, np.uint64)
        return built, heads, int(np.count_nonzero(allh[1:] == allh[:-1]))

    shuffled = partitioned_by_item is False
    built, heads, split = build(ddf.shuffle(on=i_c) if shuffled else ddf)
    if split:  # the promise (or the guess) that every item's rows sit in one partition does not hold
        if partitioned_by_item is True and split > 0:
            raise DataError(
                f"partitioned_by_item=True, but {split} item(s) have rows in more than one partition of the dask "
                "history; pass partitioned_by_item=False to shuffle on the item column")
        shuffled = True
        built, heads, _ = build(ddf.shuffle(on=i_c))
    for col, k in ((i_c, 0), (l_c, 1), (r_c, 2)):
        said = {h[3][k] for h in heads} - {None}
        if len(said) > 1:
            raise DataError(
                f"dask history: column {col!r} holds integers written as floats ('3.0') in some partitions and "
                "other ids in others, which the in-memory reader reads differently; write the ids one way")
    # the history's dictionaries, sorted as read_annotations sorts them: the labelers and rounds of the rows used
    labelers = sorted(set().union(*(h[0] for h in heads)))
    rounds = sorted(set().union(*(h[1] for h in heads))) if r_c is not None else ["all"]
    lab_ix, round_ix = pd.Index(labelers), pd.Index(rounds)
    parts = [client.submit(_widened, b, lab_ix.get_indexer(pd.Index(list(h[0]), dtype=object)).astype(np.int64),
                           round_ix.get_indexer(pd.Index(list(h[1]), dtype=object)).astype(np.int64), len(labelers), len(rounds),
                           pure=False)
             for b, h in zip(built, heads, strict=True)]
    summaries = client.gather([client.submit(summary, p) for p in parts])
    dh = DaskHistory(client, parts, labelers, rounds, cov_names, summaries, cov_rows)
    if dh.n_gold == 0:
        raise DataError("dask history has no gold labels on its items: Stage A needs gold anchors")
    return dh


def _head(b: Built) -> tuple[Any, ...]:
    """What the client merges from a built partition (small): its dictionaries, whether its item ids are
    integers, which id columns :func:`ids_to_str` rewrote, and its range of item ids."""
    return b.labelers, b.rounds, b.int_ids, b.rewritten, b.id_range


def _item_hashes(b: Built) -> npt.NDArray[np.uint64]:
    """A built partition's sorted item hashes (8 bytes per item), for the check when item ranges overlap."""
    return b.hashes


def _widened(b: Built, lab_pos: IntArray, round_pos: IntArray, n_labelers: int, n_rounds: int) -> Part:
    return widen(b.part, lab_pos, round_pos, n_labelers, n_rounds)


def _covariate_table(covariates: Any, covariate_item_col: str | None, covariate_cols: Sequence[str] | None,
                     item_col: str | None) -> tuple[pd.DataFrame | None, tuple[str, ...], int]:
    """The covariate table (one row per item, indexed by item id as a string), validated as the pandas reader does.

    It is read on the client and broadcast to the workers: one row per history item must fit in each
    worker's memory (p float64 values and the id).
    """
    if covariates is None:
        if covariate_cols is not None:
            raise HeroEvalError("covariate_cols needs covariates= (the table of item covariates)")
        return None, (), 0
    ccols = [c for c in (covariate_item_col, item_col, *ITEM_COLUMNS) if c]
    cdf, csrc, chdr = load_table(covariates, "covariates", string_cols=ccols)
    c_item = covariate_item_col if covariate_item_col is not None else (item_col if item_col in cdf.columns else None)
    ct = LoadedTable("covariates", csrc, cdf, resolve_column(cdf, c_item, ITEM_COLUMNS, "covariate item", csrc), chdr)
    cols = covariate_columns(cdf, ct.item_col, covariate_cols, csrc)
    ids = ids_to_str(cdf[ct.item_col])
    keep = np.flatnonzero(ids.notna().to_numpy())
    idx = pd.Index(ids.to_numpy(dtype=object)[keep])
    if idx.duplicated().any():
        k = int(np.flatnonzero(idx.duplicated())[0])
        raise DataError(f"{ct.where(int(keep[k]))}: second covariate row for item {idx[k]!r}")
    mat = cdf[cols].to_numpy(dtype=np.float64, na_value=np.nan)[keep]
    bad = ~np.isfinite(mat)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise DataError(f"{ct.where(int(keep[r]))}: covariate {cols[c]!r} is missing or not finite ({mat[r, c]!r}); "
                        "impute or drop the column first")
    return pd.DataFrame(mat, index=idx, columns=[str(c) for c in cols]), tuple(str(c) for c in cols), int(keep.size)


def fit_stage_a_dask(
    dh: DaskHistory,
    *,
    em: EMSettings | None = None,
    fitting: FitSettings | None = None,
    history_weight: float = 1.0,
    progress: bool | two_coin.Progress = False,
) -> Calibration:
    """Stage A on a loaded :class:`DaskHistory` at a fixed history weight (as
    :func:`heroeval.stage_a.fit.fit_stage_a` in memory; the same parameters: ``fitting``'s ``compress`` and
    ``engine`` do not apply, the workers run the NumPy engine on their partitions).

    The calibration's ``history`` is None (the items stay on the cluster); its
    ``history_fit`` holds the fit without posteriors (``gamma`` empty), which the
    model checks' refits start from; its ``gold_scores`` are computed from the
    gold items brought to the client (:meth:`DaskHistory.gold_items`), as
    :func:`heroeval.stage_a.fit.fit_stage_a` computes them from the history.
    """
    em = EMSettings() if em is None else em
    fs = FitSettings() if fitting is None else fitting
    tol, max_iter, criterion, accelerate = em.tol, em.max_iter, em.criterion, em.accelerate
    c, shrink, variance, covariance = float(em.pseudo_count), em.shrink, fs.variance, fs.covariance
    w = check_weight(history_weight)
    prior, eb = stage_a_prior((dh.gold_tp, dh.gold_fn, dh.gold_tn, dh.gold_fp), c, shrink)
    d = _design(dh, w, None, prior)
    a0, b0, p0 = dh.initial_values()
    fit = two_coin.run_em(d, (a0, b0, p0), stop=em.stopping, progress=_progress_callback(progress),
                          information=d.information)
    if not fit.converged:
        warnings.warn(
            f"Stage A EM (dask) did not converge in {fit.n_iter} iterations (last parameter change "
            f"{fit.max_change:.2e} > tol {tol:.0e}); raise max_iter", ConvergenceWarning, stacklevel=2)
    pcov = None
    if covariance:
        meat = cross = None
        if eb is not None:
            gs = dh.gold_items()
            xc = None if dh.x_mean is None or gs.covariates is None else gs.covariates - dh.x_mean
            meat, cross = eb_prior_covariance(gs, eb, fit.alpha, fit.beta, fit.prev, xc)
        pcov = d.covariance(fit, variance, meat, cross)
    cov_mean = cov_cov = None
    if dh.covariate_names:
        assert dh.x_mean is not None
        cl = dh.client
        C = np.sum(cl.gather([cl.submit(part_centered, p, dh.x_mean, pure=False) for p in dh.parts]), axis=0)
        cov_mean = dh.x_mean
        cov_cov = C / (dh.n_items - 1) if dh.n_items > 1 else np.zeros_like(C)
    settings: dict[str, Any] = {
        **stopping_rule(tol, max_iter, criterion, accelerate),
        **_prior_settings(c, shrink, eb), "variance": variance, "history_weight": w, "engine": "dask", "partitions": len(dh.parts),
        "rows_read": dh.n_rows, "rows_dropped": dict(dh.dropped),
        "init": "gold subset, one pseudo-observation at the pooled gold rate"}
    if dh.covariate_names:
        settings["covariate_rows_unmatched"] = dh.covariate_rows_unmatched
    return Calibration(
        labeler_ids=dh.labeler_ids, alpha=fit.alpha, beta=fit.beta, n_annotations=dh.n_annotations.copy(),
        n_items=dh.n_items_per_labeler.copy(), gold_tp=dh.gold_tp.copy(), gold_fn=dh.gold_fn.copy(),
        gold_tn=dh.gold_tn.copy(), gold_fp=dh.gold_fp.copy(), round_ids=dh.round_ids, round_prevalence=fit.prev,
        round_n_items=dh.round_n_items.copy(), round_n_gold=dh.round_n_gold.copy(),
        covariate_names=dh.covariate_names, covariate_mean=cov_mean, covariate_cov=cov_cov,
        n_covariate_items=dh.n_items if dh.covariate_names else 0,
        convergence=ConvergenceInfo.from_fit(fit, tol, max_iter, criterion, accelerate),
        covariance=pcov, settings=settings, created=datetime.now(UTC).isoformat(timespec="seconds"),
        history_fit=fit,
        gold_scores=score_gold_items(gi := dh.gold_items(), fit.alpha, fit.beta),
        gold_labels=gold_labels_of(gi),
    )
