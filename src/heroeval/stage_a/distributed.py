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

import math
import operator
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal, Unpack

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.core import jit
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


@dataclass(frozen=True)
class _Part:
    """One partition's items as a sparse design, plus its counts, its gold items and covariates."""

    design: two_coin.Design  # unweighted, pseudo_count 0: weights and the prior are applied per call / on the client
    n_rows: int
    dropped: dict[str, int]
    tp: IntArray
    fn: IntArray
    tn: IntArray
    fp: IntArray
    n_ann: IntArray
    n_items_lab: IntArray
    round_items: IntArray
    round_gold: IntArray
    round_gold_pos: FloatArray
    n_repeated: int
    gold_rows: IntArray  # the partition's gold items (rows of the design)
    gold_names: npt.NDArray[np.object_]  # their ids
    X: FloatArray | None  # (items, p) covariates, or None


def _build_part(df: pd.DataFrame, cols: tuple[str, str, str, str | None], labelers: list[str], rounds: list[str],
                gold: pd.Series, part_no: int, cov: pd.DataFrame | None) -> _Part:
    """One partition's rows as a :class:`_Part` (the rows dropped, and why, counted in ``dropped``)."""
    return _build_part_hashed(df, cols, labelers, rounds, gold, part_no, cov)[0]


def _build_part_hashed(df: pd.DataFrame, cols: tuple[str, str, str, str | None], labelers: list[str],
                       rounds: list[str], gold: pd.Series, part_no: int,
                       cov: pd.DataFrame | None) -> tuple[_Part, npt.NDArray[np.uint64]]:
    """:func:`_build_part` and the sorted 64-bit hashes of the partition's item ids (as text), for the check that
    no item has rows in two partitions: taken from the ids the build codes anyway, so the check reads nothing
    more."""
    i_c, l_c, y_c, r_c = cols
    t = LoadedTable("annotations", f"partition {part_no}", df.reset_index(drop=True), i_c, False)
    y, ym = parse_binary(t.df[y_c], t, y_c, "label")
    items, im = _ids(t.df[i_c])
    labs, lm = _ids(t.df[l_c])
    dropped: dict[str, int] = {}
    rm = np.zeros(len(t.df), dtype=bool)
    if r_c is not None:
        rv = ids_to_str(t.df[r_c])
        rm = (rv.isna() | (rv.str.strip() == "")).fillna(True).to_numpy(dtype=bool)
    for reason, mask in (("missing item id", im), ("missing labeler id", ~im & lm), ("missing label", ~im & ~lm & ym),
                         ("missing round", ~im & ~lm & ~ym & rm)):
        if mask.any():
            dropped[reason] = int(mask.sum())
    keep = ~(im | lm | ym | rm)
    items, labs, y = items[keep], labs[keep], y[keep]
    J, G = len(labelers), len(rounds)
    lab_code = _codes_of(labs, labelers)
    ic, names = _factorize_ids(items)
    n = len(names)
    if r_c is not None:
        rc_ann = pd.Index(rounds).get_indexer(pd.Index(ids_to_str(t.df[r_c])[keep].to_numpy(dtype=object)))
    else:
        rc_ann = np.zeros(ic.size, dtype=np.int64)
    order, ptr = _by_item(np.asarray(ic, dtype=np.int64), n)
    ic, lab_code, y, rc_ann = ic[order], lab_code[order], y[order], rc_ann[order]
    group = np.zeros(n, dtype=np.int64)
    if n:
        group = rc_ann[ptr[:-1]]
        if (np.maximum.reduceat(rc_ann, ptr[:-1]) != np.minimum.reduceat(rc_ann, ptr[:-1])).any():
            k = int(np.flatnonzero(np.maximum.reduceat(rc_ann, ptr[:-1]) != group)[0])
            raise DataError(f"partition {part_no}: item {names[k]!r} appears in more than one round")
    g = gold.reindex(pd.Index(names, dtype=object)).to_numpy(dtype=np.float64, na_value=np.nan)
    gold_arr = np.where(np.isnan(g), -1, g).astype(np.int8)
    X = None
    if cov is not None:
        got = cov.reindex(pd.Index(names, dtype=object))
        lacking = got.index[got.isna().any(axis=1).to_numpy()]
        if lacking.size:
            raise DataError(f"covariates: {lacking.size} annotated item(s) of partition {part_no} have no covariate "
                            f"row, e.g. {list(lacking[:5])}; HERO-2 needs covariates for every item")
        X = np.ascontiguousarray(got.to_numpy(dtype=np.float64))
    pair = np.sort(ic.astype(np.int64) * max(J, 1) + lab_code)  # one sort: repeated pairs and distinct ones
    first = np.ones(pair.size, dtype=bool)
    first[1:] = pair[1:] != pair[:-1]
    n_rep = int(pair.size - np.count_nonzero(first))
    # with numba the worker's passes run the compiled design; the sparse one serves the weighted counts and the
    # fallbacks, so its transpose is the CSC view of A (12 bytes per annotation less than a copy)
    d = two_coin.make_design(ptr, lab_code, y, J, gold_arr, group, G, repeated=n_rep > 0,
                             transpose_copy=None if not jit.HAVE_NUMBA else False)
    ga = np.repeat(gold_arr, np.diff(ptr))
    isg = gold_arr >= 0

    def cnt(mask: npt.NDArray[np.bool_]) -> IntArray:
        return np.bincount(lab_code[mask], minlength=J).astype(np.int64)

    uniq_pairs = pair if n_rep == 0 else pair[first]
    gold_rows = np.flatnonzero(isg)
    hashes = np.sort(pd.util.hash_array(np.asarray(names, dtype=object), categorize=False))  # names: distinct
    return _Part(
        design=d, n_rows=len(t.df), dropped=dropped,
        tp=cnt((ga == 1) & (y == 1)), fn=cnt((ga == 1) & (y == 0)), tn=cnt((ga == 0) & (y == 0)),
        fp=cnt((ga == 0) & (y == 1)), n_ann=np.bincount(lab_code, minlength=J).astype(np.int64),
        n_items_lab=np.bincount(uniq_pairs % max(J, 1), minlength=J).astype(np.int64),
        round_items=np.bincount(group, minlength=G).astype(np.int64),
        round_gold=np.bincount(group[isg], minlength=G).astype(np.int64),
        round_gold_pos=np.bincount(group[isg], weights=gold_arr[isg].astype(float), minlength=G).astype(np.float64),
        n_repeated=n_rep, gold_rows=gold_rows, gold_names=np.asarray(names, dtype=object)[gold_rows], X=X,
    ), hashes


def _counting_order(ic, n):  # type: ignore[no-untyped-def]
    """A stable counting sort of the codes ``ic`` in ``[0, n)``: the order and the offsets of each code's run."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(ic.shape[0]):
        ptr[ic[i] + 1] += 1
    for k in range(n):
        ptr[k + 1] += ptr[k]
    pos = ptr[:-1].copy()
    order = np.empty(ic.shape[0], dtype=np.int64)
    for i in range(ic.shape[0]):
        order[pos[ic[i]]] = i
        pos[ic[i]] += 1
    return order, ptr


def _by_item(ic: IntArray, n: int) -> tuple[IntArray, IntArray]:
    """The rows in item order (stable) and each item's offsets: compiled where numba is installed (a counting
    sort, several times faster than NumPy's stable sort of 64-bit codes), else NumPy."""
    if jit.HAVE_NUMBA:
        order, ptr = jit.serial(_counting_order)(ic, n)
        return order, ptr
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ic, minlength=n), out=ptr[1:])
    return np.argsort(ic, kind="stable"), ptr


def _ids(s: pd.Series) -> tuple[Any, npt.NDArray[np.bool_]]:
    """A partition's id column for coding, and which rows lack an id: an integer column as its integers (coded
    as they are; only the distinct ones become text), any other through :func:`ids_to_str` as the readers do."""
    if pd.api.types.is_integer_dtype(s.dtype) and not s.hasnans:
        return s.to_numpy(dtype=np.int64), np.zeros(len(s), dtype=bool)
    out = ids_to_str(s)
    return out, (out.isna() | (out.str.strip() == "")).fillna(True).to_numpy(dtype=bool)


def _factorize_ids(items: Any) -> tuple[IntArray, npt.NDArray[np.object_]]:
    """Item codes in order of appearance and the item ids as text (integers: factorized as integers)."""
    if isinstance(items, np.ndarray):
        ic, uniq = pd.factorize(items)
        return ic, np.asarray([str(x) for x in uniq], dtype=object)
    ic, names = pd.factorize(items.to_numpy(dtype=object))
    return ic, np.asarray(names, dtype=object)


def _codes_of(labs: Any, labelers: list[str]) -> IntArray:
    """Each row's labeler code in ``labelers`` (ids as text); integer ids through their distinct values."""
    if isinstance(labs, np.ndarray):
        ic, uniq = pd.factorize(labs)
        codes = pd.Index(labelers).get_indexer(pd.Index([str(x) for x in uniq], dtype=object))
        return np.asarray(codes[ic], dtype=np.int64)
    return np.asarray(pd.Index(labelers).get_indexer(pd.Index(labs.to_numpy(dtype=object))), dtype=np.int64)


def _recode(p: _Part, labs: IntArray, rounds: IntArray) -> _Part:
    """The partition with only the labelers ``labs`` and rounds ``rounds`` (codes into the first dictionaries).

    The pandas reader keeps the labelers and rounds of the rows it uses; the dictionaries read from the
    raw columns can hold one that only rows dropped later (a missing label, say) carry.
    """
    d = p.design
    cols = np.sort(np.concatenate([2 * labs, 2 * labs + 1]))
    A = d.A[:, cols].tocsr()
    new_group = np.full(d.n_groups, -1, dtype=np.int64)
    new_group[rounds] = np.arange(rounds.size)
    group = new_group[d.group].astype(np.int32)
    G = int(rounds.size)
    d2 = replace(d, n_labelers=int(labs.size), n_groups=G, A=A, AT=A.T if d.AT.format == "csc" else A.T.tocsr(),
                 code_counts=d.code_counts[cols], group=group,
                 group_size=np.bincount(group, minlength=G).astype(np.float64))
    return replace(p, design=d2, tp=p.tp[labs], fn=p.fn[labs], tn=p.tn[labs], fp=p.fp[labs], n_ann=p.n_ann[labs],
                   n_items_lab=p.n_items_lab[labs], round_items=p.round_items[rounds],
                   round_gold=p.round_gold[rounds], round_gold_pos=p.round_gold_pos[rounds])


def _summary(p: _Part) -> dict[str, Any]:
    """Everything the client needs from a partition besides the EM sums (small)."""
    out = {k: getattr(p, k) for k in ("n_rows", "dropped", "tp", "fn", "tn", "fp", "n_ann", "n_items_lab",
                                      "round_items", "round_gold", "round_gold_pos", "n_repeated")} | {
        "code_counts": p.design.code_counts, "n_items": p.design.n_items}
    if p.X is not None:
        out["x_sum"] = p.X.sum(axis=0)
    return out


def _gold_subset(p: _Part) -> tuple[npt.NDArray[np.object_], IntArray, IntArray, npt.NDArray[np.int8],
                                    npt.NDArray[np.int8], npt.NDArray[np.int32], FloatArray | None]:
    """The partition's gold items: ids, label counts, labeler codes, labels, gold, rounds and covariates."""
    d = p.design
    r = p.gold_rows
    A = d.A[r]  # items x codes counts, rows in the partition's order
    lens = np.asarray(A.sum(axis=1)).ravel().astype(np.int64)
    codes = np.repeat(A.indices.astype(np.int64), A.data.astype(np.int64))
    return (p.gold_names, lens, codes // 2, (codes % 2).astype(np.int8), d.gold[r], d.group[r],
            None if p.X is None else p.X[r])


def _part_weights(p: _Part, w: float, drop: IntArray) -> FloatArray:
    """Per-item weights of the likelihood: ``w`` for gold-free items, 1 for gold items, 0 for the gold items
    ``drop`` (positions among the partition's gold items, ``p.gold_rows``)."""
    wt = np.full(p.design.n_items, float(w))
    wt[p.gold_rows] = 1.0
    if drop.size:
        wt[p.gold_rows[drop]] = 0.0
    return wt


def _weighted(p: _Part, wt: FloatArray | None) -> two_coin.Design:
    return p.design if wt is None else replace(p.design, weight=wt)


def _part_counts(p: _Part, wt: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The weighted annotations per code and items per round (fixed for a weighting)."""
    d = p.design
    return (np.asarray(d.AT @ wt, dtype=np.float64),
            np.bincount(d.group, weights=wt, minlength=d.n_groups).astype(np.float64))


_COMPACT: dict[tuple[int, int], tuple[Any, Any, kernels.CompactDesign]] = {}
"""Each worker's compiled designs, by (partition, weighting) object ids; the objects are kept beside them so
that an id is not reused while its entry lives. A worker holds its persisted partitions and weights for the
whole fit, so an entry is built once and read at every EM map."""

_COMPACT_MAX = 256
"""Entries a worker keeps (partitions times weightings: the checks' refits bring a few dozen weightings)."""


def _compact_of(p: _Part, wt: FloatArray | None) -> kernels.CompactDesign | None:
    """The partition's design for the compiled kernel (one chunk: a worker runs one task per thread), or None
    without numba or with repeated (item, labeler) pairs (the NumPy design counts them)."""
    if not jit.HAVE_NUMBA:
        return None
    key = (id(p), id(wt))
    hit = _COMPACT.get(key)
    if hit is not None and hit[0] is p and hit[1] is wt:
        return hit[2]
    A = p.design.A
    if A.nnz and float(A.data.max()) != 1.0:
        return None
    ptr = np.asarray(A.indptr, dtype=np.int64)
    code = np.asarray(A.indices, dtype=np.int32)
    bounds = np.array([0, p.design.n_items], dtype=np.int64)
    cd = kernels.design_of_codes(ptr, code, p.design.gold, p.design.group.astype(np.int32), p.design.n_labelers,
                                 p.design.n_groups, weight=wt, bounds=bounds)
    if len(_COMPACT) >= _COMPACT_MAX:
        _COMPACT.clear()
    _COMPACT[key] = (p, wt, cd)
    return cd


def _part_stats(p: _Part, wt: FloatArray | None, alpha: FloatArray, beta: FloatArray, prev: FloatArray,
                need_ll: bool) -> tuple[FloatArray, FloatArray, float]:
    """One partition's E-step sums: per-code posterior sums, per-round sums and the log-likelihood; by the
    compiled kernel where numba is installed on the worker (the in-memory engine's pass), else NumPy."""
    cd = _compact_of(p, wt)
    if cd is not None:
        return cd.e_sums(alpha, beta, prev, need_ll)
    d = _weighted(p, wt)
    gamma, ll = two_coin.e_step(d, alpha, beta, prev, need_ll)
    gw = gamma if wt is None else gamma * wt
    s1 = np.asarray(d.AT @ gw, dtype=np.float64)
    gsum = np.bincount(d.group, weights=gw, minlength=d.n_groups).astype(np.float64)
    return s1, gsum, ll


def _part_info(p: _Part, wt: FloatArray | None, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> FloatArray:
    cd = _compact_of(p, wt)
    if cd is not None:
        return cd.information(alpha, beta, prev)
    d = _weighted(p, wt)
    gamma, _ = two_coin.e_step(d, alpha, beta, prev, need_ll=False)
    return scoring.information(d, alpha, beta, prev, gamma)


def _part_cov(p: _Part, wt: FloatArray | None, alpha: FloatArray, beta: FloatArray, prev: FloatArray, gram: bool,
              x_mean: FloatArray | None) -> tuple[FloatArray, FloatArray, FloatArray | None, FloatArray | None]:
    """Observed information, score Gram matrix and, with covariates, the scores' and the covariates' cross sums."""
    cd = _compact_of(p, wt) if p.X is None or x_mean is None else None  # the kernel centres X at its own mean
    if cd is not None:
        gamma, _ = cd.posterior(alpha, beta, prev, need_ll=False)
        H, StS, _ = cd.covariance_sums(alpha, beta, prev, gamma, None, gram)
        return H, StS, None, None
    d = _weighted(p, wt)
    gamma, _ = two_coin.e_step(d, alpha, beta, prev)
    si = scoring.scores_and_information(d, alpha, beta, prev, gamma, gram=gram)
    if p.X is None or x_mean is None:
        return si.info, si.gram, None, None
    Xc = p.X - x_mean
    return si.info, si.gram, np.asarray(si.scores.T @ Xc), Xc.T @ Xc


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
        gold items (``_Part.gold_rows``), one array per partition."""
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
        got = c.gather([c.submit(_gold_subset, p, pure=False) for p in self.parts])
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
            res = self.client.gather([self.client.submit(_part_counts, p, wt, pure=False)
                                      for p, wt in zip(self.parts, weights, strict=True)])
            self.cnt = np.sum([r[0] for r in res], axis=0)
            self.gsize = np.sum([r[1] for r in res], axis=0)
            self.weighted = True

    def _wts(self) -> list[Any]:
        return [None] * len(self.parts) if self.weights is None else self.weights

    def _sums(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool) -> tuple[
            FloatArray, FloatArray, float]:
        c = self.client
        futs = [c.submit(_part_stats, p, wt, alpha, beta, prev, need_ll, pure=False)
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
        res = c.gather([c.submit(_part_info, p, wt, alpha, beta, prev, pure=False)
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
        res = c.gather([c.submit(_part_cov, p, wt, fit.alpha, fit.beta, fit.prev, gram, xm, pure=False)
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
    weights = [c.submit(_part_weights, p, w, rows, pure=False) for p, rows in zip(dh.parts, by_part, strict=True)]
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
    # the labeler and round dictionaries (small), sorted as read_annotations sorts them
    labs = ddf[l_c].dropna().unique().compute()
    labelers = sorted({x for x in ids_to_str(pd.Series(labs)).dropna() if x.strip()})
    rounds = ["all"]
    if r_c is not None:
        rv = ddf[r_c].dropna().unique().compute()
        rounds = sorted({x for x in ids_to_str(pd.Series(rv)).dropna() if x.strip()})
    gold_f = client.scatter(gold_s, broadcast=True)
    cov_f = None if cov_tab is None else client.scatter(cov_tab, broadcast=True)

    def build(frame: Any) -> tuple[list[Any], int]:
        """The partitions' designs on the workers, and how many items have rows in more than one partition."""
        built = [client.submit(_build_part_hashed, dp, (i_c, l_c, y_c, r_c), labelers, rounds, gold_f, k, cov_f,
                               pure=False)
                 for k, dp in enumerate(client.compute(frame.to_delayed()))]
        out = [client.submit(operator.getitem, b, 0, pure=False) for b in built]
        if shuffled:
            return out, 0
        hashes = client.gather([client.submit(operator.getitem, b, 1, pure=False) for b in built])
        # each partition's hashes are sorted and distinct: a stable sort merges the runs, and equal neighbours are
        # items with rows in two partitions
        allh = np.sort(np.concatenate(hashes), kind="stable") if hashes else np.zeros(0, np.uint64)
        return out, int(np.count_nonzero(allh[1:] == allh[:-1]))

    shuffled = partitioned_by_item is False
    parts, split = build(ddf.shuffle(on=i_c) if shuffled else ddf)
    if split:  # the promise (or the guess) that every item's rows sit in one partition does not hold
        if partitioned_by_item is True:
            raise DataError(
                f"partitioned_by_item=True, but {split} item(s) have rows in more than one partition of the dask "
                "history; pass partitioned_by_item=False to shuffle on the item column")
        shuffled = True
        parts, _ = build(ddf.shuffle(on=i_c))
    summaries = client.gather([client.submit(_summary, p) for p in parts])
    used_labs = np.flatnonzero(np.sum([s["n_ann"] for s in summaries], axis=0) > 0)
    used_rounds = np.flatnonzero(np.sum([s["round_items"] for s in summaries], axis=0) > 0)
    if used_labs.size < len(labelers) or used_rounds.size < len(rounds):
        parts = [client.submit(_recode, p, used_labs, used_rounds, pure=False) for p in parts]
        labelers = [labelers[k] for k in used_labs]
        rounds = [rounds[g] for g in used_rounds]
        summaries = client.gather([client.submit(_summary, p) for p in parts])
    dh = DaskHistory(client, parts, labelers, rounds, cov_names, summaries, cov_rows)
    if dh.n_gold == 0:
        raise DataError("dask history has no gold labels on its items: Stage A needs gold anchors")
    return dh


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
        C = np.sum(cl.gather([cl.submit(_part_centered, p, dh.x_mean, pure=False) for p in dh.parts]), axis=0)
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


def _part_centered(p: _Part, x_mean: FloatArray) -> FloatArray:
    assert p.X is not None
    Xc = p.X - x_mean
    out: FloatArray = Xc.T @ Xc
    return out
