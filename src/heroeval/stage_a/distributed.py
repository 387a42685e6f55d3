"""Stage A on a Dask cluster, for histories that do not fit on one machine.

:func:`calibrate_dask` fits the same model as :func:`heroeval.calibrate`
(gold-anchored two-coin EM with SQUAREM, then the sandwich covariance) on a
Dask DataFrame partitioned by item, or on Parquet files read by Dask. Each
partition is turned once into compact arrays that stay in the workers'
memory; each EM step then maps the partitions to their sufficient
statistics (per code, the sum of the items' posteriors; per round, the sum
of posteriors; the log-likelihood: 2J + G + 1 numbers) and reduces only
those on the client, which runs the M-step and the extrapolation. The
covariance is one more map (each partition's P x P observed information
and score Gram matrix) and reduce. Results equal the in-memory fit to
rounding (tests/unit/test_distributed.py).

Point it at a real cluster with ``distributed.Client("tcp://scheduler:8786")``
and pass that client; the workers need heroeval installed (NumPy engine; with
numba installed there too, nothing changes, the per-partition passes are
sparse mat-vecs).

Scope: no covariates (HERO-2's history means are an easy Dask aggregate
you can add to the calibration), ``history_weight = 1`` and
``pseudo_count = 0``; the calibration keeps no in-memory history, so
``hero_joint``, the bootstrap and the model checks (which need the items)
are not available from it, exactly as for a calibration loaded from JSON.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.errors import ConvergenceWarning, DataError, HeroEvalError
from heroeval.ingest.annotations import (
    GOLD_COLUMNS,
    ITEM_COLUMNS,
    _annotation_columns,
    _ids_to_str,
    _load,
    _parse_binary,
    _resolve,
    _Table,
)
from heroeval.stage_a import _em, _influence
from heroeval.stage_a.calibration import (
    Calibration,
    ConvergenceInfo,
    _check_em_settings,
    _progress_callback,
    initial_from_counts,
)
from heroeval.stage_a.covariance import ParameterCovariance

__all__ = ["calibrate_dask"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class _Part:
    """One partition's items as a sparse design, plus its counts."""

    design: _em.Design
    n_rows: int
    dropped: dict[str, int]
    tp: npt.NDArray[np.int64]
    fn: npt.NDArray[np.int64]
    tn: npt.NDArray[np.int64]
    fp: npt.NDArray[np.int64]
    n_ann: npt.NDArray[np.int64]
    n_items_lab: npt.NDArray[np.int64]
    round_items: npt.NDArray[np.int64]
    round_gold: npt.NDArray[np.int64]
    round_gold_pos: npt.NDArray[np.float64]
    n_repeated: int


def _build_part(df: pd.DataFrame, cols: tuple[str, str, str, str | None], labelers: list[str], rounds: list[str],
                gold: pd.Series, part_no: int) -> _Part:
    i_c, l_c, y_c, r_c = cols
    t = _Table("annotations", f"partition {part_no}", df.reset_index(drop=True), i_c, False)
    y, ym = _parse_binary(t.df[y_c], t, y_c, "label")
    items = _ids_to_str(t.df[i_c])
    labs = _ids_to_str(t.df[l_c])
    im = (items.isna() | (items.str.strip() == "")).fillna(True).to_numpy(dtype=bool)
    lm = (labs.isna() | (labs.str.strip() == "")).fillna(True).to_numpy(dtype=bool)
    dropped: dict[str, int] = {}
    rm = np.zeros(len(t.df), dtype=bool)
    if r_c is not None:
        rv = _ids_to_str(t.df[r_c])
        rm = (rv.isna() | (rv.str.strip() == "")).fillna(True).to_numpy(dtype=bool)
    for reason, mask in (("missing item id", im), ("missing labeler id", ~im & lm), ("missing label", ~im & ~lm & ym),
                         ("missing round", ~im & ~lm & ~ym & rm)):
        if mask.any():
            dropped[reason] = int(mask.sum())
    keep = ~(im | lm | ym | rm)
    items, labs, y = items[keep], labs[keep], y[keep]
    J, G = len(labelers), len(rounds)
    lab_code = pd.Index(labelers).get_indexer(pd.Index(labs.to_numpy(dtype=object)))
    ic, names = pd.factorize(items.to_numpy(dtype=object))
    n = len(names)
    if r_c is not None:
        rc_ann = pd.Index(rounds).get_indexer(pd.Index(_ids_to_str(t.df[r_c])[keep].to_numpy(dtype=object)))
    else:
        rc_ann = np.zeros(ic.size, dtype=np.int64)
    order = np.argsort(ic, kind="stable")
    ic, lab_code, y, rc_ann = ic[order], lab_code[order], y[order], rc_ann[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ic, minlength=n), out=ptr[1:])
    group = np.zeros(n, dtype=np.int64)
    if n:
        group = rc_ann[ptr[:-1]]
        if (np.maximum.reduceat(rc_ann, ptr[:-1]) != np.minimum.reduceat(rc_ann, ptr[:-1])).any():
            k = int(np.flatnonzero(np.maximum.reduceat(rc_ann, ptr[:-1]) != group)[0])
            raise DataError(f"partition {part_no}: item {names[k]!r} appears in more than one round")
    g = gold.reindex(pd.Index(names, dtype=object)).to_numpy(dtype=np.float64, na_value=np.nan)
    gold_arr = np.where(np.isnan(g), -1, g).astype(np.int8)
    pair = ic.astype(np.int64) * max(J, 1) + lab_code
    n_rep = int(pd.Series(pair).duplicated().sum())
    d = _em.make_design(ptr, lab_code, y, J, gold_arr, group, G, repeated=n_rep > 0)
    ga = np.repeat(gold_arr, np.diff(ptr))
    isg = gold_arr >= 0

    def cnt(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        return np.bincount(lab_code[mask], minlength=J).astype(np.int64)

    uniq_pairs = np.unique(pair)
    return _Part(
        design=d, n_rows=len(t.df), dropped=dropped,
        tp=cnt((ga == 1) & (y == 1)), fn=cnt((ga == 1) & (y == 0)), tn=cnt((ga == 0) & (y == 0)),
        fp=cnt((ga == 0) & (y == 1)), n_ann=np.bincount(lab_code, minlength=J).astype(np.int64),
        n_items_lab=np.bincount(uniq_pairs % max(J, 1), minlength=J).astype(np.int64),
        round_items=np.bincount(group, minlength=G).astype(np.int64),
        round_gold=np.bincount(group[isg], minlength=G).astype(np.int64),
        round_gold_pos=np.bincount(group[isg], weights=gold_arr[isg].astype(float), minlength=G).astype(np.float64),
        n_repeated=n_rep,
    )


def _item_hashes(df: pd.DataFrame, i_c: str) -> npt.NDArray[np.uint64]:
    """Sorted distinct 64-bit hashes of a partition's item ids (for the partitioned_by_item check)."""
    ids = _ids_to_str(df[i_c]).dropna()
    return np.unique(pd.util.hash_array(ids.to_numpy(dtype=object)))


def _summary(p: _Part) -> dict[str, Any]:
    """Everything the client needs from a partition besides the EM sums (small)."""
    return {k: getattr(p, k) for k in ("n_rows", "dropped", "tp", "fn", "tn", "fp", "n_ann", "n_items_lab",
                                       "round_items", "round_gold", "round_gold_pos", "n_repeated")} | {
        "code_counts": p.design.code_counts, "n_items": p.design.n_items}


def _part_stats(p: _Part, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool) -> tuple[
        FloatArray, FloatArray, float]:
    d = p.design
    gamma, ll = _em.e_step(d, alpha, beta, prev, need_ll)
    s1 = np.asarray(d.AT @ gamma, dtype=np.float64)
    gsum = np.bincount(d.group, weights=gamma, minlength=d.n_groups).astype(np.float64)
    return s1, gsum, ll


def _part_cov(p: _Part, alpha: FloatArray, beta: FloatArray, prev: FloatArray, gram: bool) -> tuple[
        FloatArray, FloatArray]:
    d = p.design
    gamma, _ = _em.e_step(d, alpha, beta, prev)
    si = _influence.scores_and_information(d, alpha, beta, prev, gamma, gram=gram)
    return si.info, si.gram


class _DaskDesign:
    """The EM map over persisted partitions: map to sufficient statistics, reduce on the client."""

    def __init__(self, client: Any, parts: list[Any], n_labelers: int, n_groups: int, code_counts: FloatArray,
                 group_size: FloatArray) -> None:
        self.client = client
        self.parts = parts
        self.n_labelers = n_labelers
        self.n_groups = n_groups
        self.code_counts = code_counts
        self.group_size = group_size

    def _sums(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool) -> tuple[
            FloatArray, FloatArray, float]:
        futs = [self.client.submit(_part_stats, p, alpha, beta, prev, need_ll, pure=False) for p in self.parts]
        res = self.client.gather(futs)
        s1 = np.sum([r[0] for r in res], axis=0)
        gsum = np.sum([r[1] for r in res], axis=0)
        ll = float(math.fsum(r[2] for r in res)) if need_ll else float("nan")
        return s1, gsum, ll

    def em_map(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool) -> tuple[
            FloatArray, FloatArray, FloatArray, float]:
        s1, gsum, ll = self._sums(alpha, beta, prev, need_ll)
        a2, b2, p2 = _em.m_from_sums(s1, self.code_counts, gsum, self.group_size, 0.0, weighted=False)
        return a2, b2, p2, ll

    def posterior(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> tuple[FloatArray, float]:
        """The posteriors stay on the workers: an empty array, and the log-likelihood."""
        _, _, ll = self._sums(alpha, beta, prev, True)
        return np.empty(0), ll


def calibrate_dask(
    history: Any,
    *,
    gold: Any,
    client: Any = None,
    item_col: str | None = None,
    labeler_col: str | None = None,
    label_col: str | None = None,
    round_col: str | None = None,
    gold_col: str | None = None,
    gold_item_col: str | None = None,
    partitioned_by_item: bool = False,
    tol: float = 1e-8,
    max_iter: int = 10_000,
    criterion: str = "parameters",
    accelerate: bool = True,
    variance: str = "sandwich",
    progress: bool | _em.Progress = False,
) -> Calibration:
    """Stage A on a Dask cluster (see the module docstring).

    Parameters
    ----------
    history : dask.dataframe.DataFrame or str
        The annotation log, or a Parquet path or glob that Dask reads. Columns
        as for :func:`heroeval.read_annotations` (``item_id, labeler_id,
        label`` and optionally ``round``).
    gold : path, pandas table or Series
        Gold labels of some history items (small: read on the client and
        sent to the workers).
    client : distributed.Client, optional
        Default: the current client (``distributed.default_client()``).
    partitioned_by_item : bool, default False
        Whether every item's rows already sit in one partition (Parquet
        written in item order, say). Otherwise the log is shuffled on the
        item column first.
    tol, max_iter, criterion, accelerate, variance, progress
        As in :func:`heroeval.calibrate`.

    Returns
    -------
    Calibration
        With ``history=None`` (the items stay on the cluster).
    """
    import dask.dataframe as dd
    import distributed

    _check_em_settings(tol, max_iter, criterion)
    if variance not in ("sandwich", "model"):
        raise HeroEvalError(f"variance must be 'sandwich' or 'model', got {variance!r}")
    client = client if client is not None else distributed.default_client()  # type: ignore[no-untyped-call]
    ddf = dd.read_parquet(history) if isinstance(history, str) else history
    if not isinstance(ddf, dd.DataFrame):
        raise HeroEvalError(f"history must be a dask DataFrame or a Parquet path, got {type(history).__name__}")
    where = "dask history"
    cols = pd.DataFrame(columns=list(ddf.columns))
    i_c, l_c, y_c, r_c = _annotation_columns(cols, item_col, labeler_col, label_col, round_col, where)
    gdf, gsrc, _ = _load(gold, "gold", string_cols=[c for c in (gold_item_col, item_col, *ITEM_COLUMNS) if c])
    gi_c = _resolve(gdf, gold_item_col, ITEM_COLUMNS, "gold item", gsrc)
    gv_c = _resolve(gdf, gold_col, GOLD_COLUMNS, "gold", gsrc)
    gt = _Table("gold", gsrc, gdf, gi_c, False)
    gv, gmiss = _parse_binary(gdf[gv_c], gt, gv_c, "gold label")
    gids = _ids_to_str(gdf[gi_c])
    ok = ~gmiss & gids.notna().to_numpy()
    gold_s = pd.Series(gv[ok].astype(np.float64), index=pd.Index(gids[ok].to_numpy(dtype=object)))
    gold_s = gold_s[~gold_s.index.duplicated()]
    # the labeler and round dictionaries (small), sorted as read_annotations sorts them
    labs = ddf[l_c].dropna().unique().compute()
    labelers = sorted({x for x in _ids_to_str(pd.Series(labs)).dropna() if x.strip()})
    rounds = ["all"]
    if r_c is not None:
        rv = ddf[r_c].dropna().unique().compute()
        rounds = sorted({x for x in _ids_to_str(pd.Series(rv)).dropna() if x.strip()})
    if not partitioned_by_item:
        ddf = ddf.shuffle(on=i_c)
    else:  # check the promise: an item split over partitions would count as several items
        hashes = client.gather([client.submit(_item_hashes, p, i_c, pure=False)
                                for p in client.compute(ddf.to_delayed())])  # type: ignore[no-untyped-call]
        allh = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
        split = int(allh.size - np.unique(allh).size)
        if split:
            raise DataError(
                f"partitioned_by_item=True, but {split} item(s) have rows in more than one partition of the dask "
                "history; pass partitioned_by_item=False to shuffle on the item column")
    gold_f = client.scatter(gold_s, broadcast=True)
    delayed_parts = ddf.to_delayed()
    parts = [client.submit(_build_part, dp, (i_c, l_c, y_c, r_c), labelers, rounds, gold_f, k, pure=False)
             for k, dp in enumerate(client.compute(delayed_parts))]
    summaries = client.gather([client.submit(_summary, p) for p in parts])
    J, G = len(labelers), len(rounds)

    def tot(key: str) -> Any:
        return np.sum([s[key] for s in summaries], axis=0)

    tp, fn, tn, fp = (tot(k).astype(np.int64) for k in ("tp", "fn", "tn", "fp"))
    if tp.sum() + fn.sum() + tn.sum() + fp.sum() == 0:
        raise DataError("dask history has no gold labels on its items: Stage A needs gold anchors")
    a0, b0, p0 = initial_from_counts(tp, fn, tn, fp, tot("round_gold"), tot("round_gold_pos"))
    d = _DaskDesign(client, parts, J, G, tot("code_counts").astype(np.float64),
                    tot("round_items").astype(np.float64))
    fit = _em.run_em(d, a0, b0, p0, tol=tol, max_iter=max_iter, criterion=criterion, accelerate=accelerate,
                     progress=_progress_callback(progress))
    if not fit.converged:
        warnings.warn(f"Stage A EM (dask) did not converge in {fit.n_iter} map evaluations; raise max_iter",
                      ConvergenceWarning, stacklevel=2)
    gram = variance == "sandwich"
    res = client.gather([client.submit(_part_cov, p, fit.alpha, fit.beta, fit.prev, gram, pure=False)
                         for p in parts])
    H = np.sum([r[0] for r in res], axis=0)
    pcov = ParameterCovariance.from_information(H, _influence.free_parameters(fit.alpha, fit.beta, fit.prev),
                                                np.sum([r[1] for r in res], axis=0) if gram else None)
    dropped: dict[str, int] = {}
    for s in summaries:
        for k, v in s["dropped"].items():
            dropped[k] = dropped.get(k, 0) + v
    return Calibration(
        labeler_ids=tuple(labelers), alpha=fit.alpha, beta=fit.beta, n_annotations=tot("n_ann").astype(np.int64),
        n_items=tot("n_items_lab").astype(np.int64), gold_tp=tp, gold_fn=fn, gold_tn=tn, gold_fp=fp,
        round_ids=tuple(rounds), round_prevalence=fit.prev, round_n_items=tot("round_items").astype(np.int64),
        round_n_gold=tot("round_gold").astype(np.int64), covariate_names=(), covariate_mean=None,
        covariate_cov=None, n_covariate_items=0,
        convergence=ConvergenceInfo.from_fit(fit, tol, max_iter, criterion, accelerate),
        covariance=pcov,
        settings={"tol": tol, "max_iter": max_iter, "criterion": criterion, "accelerate": accelerate,
                  "pseudo_count": 0.0, "variance": variance, "history_weight": 1.0, "engine": "dask",
                  "partitions": len(parts), "rows_read": int(tot("n_rows")), "rows_dropped": dropped,
                  "init": "gold subset, one pseudo-observation at the pooled gold rate"},
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )
