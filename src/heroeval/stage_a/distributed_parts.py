"""A Dask history's partitions on the workers: each partition's rows coded once into a compact design
(:class:`Part`) that stays in the worker's memory, and the per-partition passes the EM, the Newton phase, the
covariance and the checks' refits map over them (:mod:`heroeval.stage_a.distributed` runs them from the client).

Building a partition costs about what reading it does: ids are coded once (an integer item column as its
integers; text through :func:`heroeval.ingest.coding.ids_to_str` on the distinct values only), the rows are put in
item order by a counting sort, and repeated (item, labeler) pairs and each labeler's items are counted in one
scan (compiled where numba is installed, else NumPy).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import scipy.sparse as sp

from heroeval.core import jit
from heroeval.errors import DataError
from heroeval.ingest.coding import ids_to_str
from heroeval.ingest.labels import parse_binary
from heroeval.ingest.tables import LoadedTable
from heroeval.stage_a import kernels, scoring, two_coin

__all__ = ["Built", "GoldLookup", "Part", "build_local", "build_part", "compact_of", "gold_subset", "part_centered",
           "part_counts", "part_cov", "part_info", "part_stats", "part_weights", "summary", "weighted", "widen"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Part:
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



@dataclass(frozen=True)
class GoldLookup:
    """The history's gold labels by item id, as text and, for the ids that are integers written plainly, by
    integer (a partition with an integer item column looks its items up without turning them into text)."""

    by_text: pd.Series
    by_int: pd.Series

    @classmethod
    def of(cls, gold: pd.Series) -> GoldLookup:
        """``gold`` (values indexed by item id as text, as :func:`ids_to_str` writes them)."""
        ids = pd.Index(gold.index, dtype=object)
        text = pd.Series(ids.to_numpy(dtype=object), dtype="string")
        plain = text.str.fullmatch(r"0|-?[1-9]\d{0,18}").fillna(False).to_numpy(dtype=bool)
        keys = np.asarray([int(x) for x in text[plain]], dtype=object)
        fits = np.asarray([-(2**63) <= k < 2**63 for k in keys], dtype=bool)
        by_int = pd.Series(gold.to_numpy()[plain][fits], index=pd.Index(keys[fits].astype(np.int64)))
        return cls(gold, by_int)


def build_part(df: pd.DataFrame, cols: tuple[str, str, str, str | None], labelers: list[str], rounds: list[str],
               gold: pd.Series | GoldLookup, part_no: int, cov: pd.DataFrame | None) -> Part:
    """One partition's rows as a :class:`Part` coded in the dictionaries ``labelers`` and ``rounds`` (the rows
    dropped, and why, counted in ``dropped``)."""
    b = build_local(df, cols, gold, part_no, cov)
    return widen(b.part, _positions(b.labelers, labelers, "labeler"), _positions(b.rounds, rounds, "round"),
                 len(labelers), len(rounds))


@dataclass(frozen=True)
class Built:
    """A partition coded in its own dictionaries (its kept rows' labelers and rounds, sorted as text), and what the
    client needs to merge them: the dictionaries, the sorted 64-bit hashes of the partition's distinct item ids,
    whether those hash integers (an integer item column) or text, the smallest and largest item id (partitions
    whose ranges do not overlap share no item, whatever their hashes), and for each id column whether
    :func:`ids_to_str` rewrote an id ('3.0' as '3'; None: no id), which must agree across partitions."""

    part: Part
    labelers: tuple[str, ...]
    rounds: tuple[str, ...]
    hashes: npt.NDArray[np.uint64]
    int_ids: bool
    rewritten: tuple[bool | None, bool | None, bool | None]
    id_range: tuple[Any, Any] | None  # the smallest and largest item id (integers, or text); None: no item


def build_local(df: pd.DataFrame, cols: tuple[str, str, str, str | None], gold: pd.Series | GoldLookup,
                part_no: int, cov: pd.DataFrame | None) -> Built:
    """One partition's rows as a :class:`Part` in its own dictionaries (:class:`Built`); :func:`widen` puts it
    in the history's. The item hashes serve the check that no item has rows in two partitions: taken from the
    ids the build codes anyway, so the check reads nothing more."""
    i_c, l_c, y_c, r_c = cols
    look = gold if isinstance(gold, GoldLookup) else GoldLookup.of(gold)
    t = LoadedTable("annotations", f"partition {part_no}", df.reset_index(drop=True), i_c, False)
    y, ym = parse_binary(t.df[y_c], t, y_c, "label")
    ic, uniq, i_rw = _coded(t.df[i_c])
    lc, lab_uniq, l_rw = _coded(t.df[l_c])
    im, lm = ic < 0, lc < 0
    dropped: dict[str, int] = {}
    rm = np.zeros(len(t.df), dtype=bool)
    rc = np.zeros(ic.size, dtype=np.int64)
    r_uniq: npt.NDArray[Any] = np.asarray(["all"], dtype=object)
    r_rw = None
    if r_c is not None:
        rc, r_uniq, r_rw = _coded(t.df[r_c])
        rm = rc < 0
    for reason, mask in (("missing item id", im), ("missing labeler id", ~im & lm), ("missing label", ~im & ~lm & ym),
                         ("missing round", ~im & ~lm & ~ym & rm)):
        if mask.any():
            dropped[reason] = int(mask.sum())
    keep = ~(im | lm | ym | rm)
    if not keep.all():
        ic, lc, y, rc = ic[keep], lc[keep], y[keep], rc[keep]
        ic, uniq = _recount(ic, uniq)
        lc, lab_uniq = _recount(lc, lab_uniq)
        if r_c is not None:
            rc, r_uniq = _recount(rc, r_uniq)
    lab_code, labelers = _sorted_codes(lc, lab_uniq)
    rc_ann, rounds = _sorted_codes(rc, r_uniq) if r_c is not None else (rc, ("all",))
    J, G = len(labelers), len(rounds)
    n = len(uniq)
    order, ptr = _by_item(ic, n)
    if order is not None:
        lab_code, y = lab_code[order], y[order]
        if r_c is not None:
            rc_ann = rc_ann[order]
    group = np.zeros(n, dtype=np.int64)
    if n and r_c is not None:
        group = rc_ann[ptr[:-1]]
        if (np.maximum.reduceat(rc_ann, ptr[:-1]) != np.minimum.reduceat(rc_ann, ptr[:-1])).any():
            k = int(np.flatnonzero(np.maximum.reduceat(rc_ann, ptr[:-1]) != group)[0])
            raise DataError(f"partition {part_no}: item {_as_text(uniq[k:k + 1])[0]!r} appears in more than one "
                            "round")
    ints = uniq.dtype == np.int64
    src = look.by_int if ints else look.by_text
    g = src.reindex(pd.Index(uniq, dtype=np.int64 if ints else object)).to_numpy(dtype=np.float64, na_value=np.nan)
    gold_arr = np.where(np.isnan(g), -1, g).astype(np.int8)
    X = None
    if cov is not None:
        got = cov.reindex(pd.Index(_as_text(uniq), dtype=object))
        lacking = got.index[got.isna().any(axis=1).to_numpy()]
        if lacking.size:
            raise DataError(f"covariates: {lacking.size} annotated item(s) of partition {part_no} have no covariate "
                            f"row, e.g. {list(lacking[:5])}; HERO-2 needs covariates for every item")
        X = np.ascontiguousarray(got.to_numpy(dtype=np.float64))
    n_rep, n_items_lab = _pair_counts(ptr, lab_code, J)
    # with numba the worker's passes run the compiled design; the sparse one serves the weighted counts and the
    # fallbacks, so its transpose is the CSC view of A (12 bytes per annotation less than a copy)
    d = two_coin.make_design(ptr, lab_code, y, J, gold_arr, group, G, repeated=n_rep > 0,
                             transpose_copy=None if not jit.HAVE_NUMBA else False)
    ga = np.repeat(gold_arr, np.diff(ptr))
    isg = gold_arr >= 0
    on_gold = ga >= 0
    # per labeler: gold 0 / 1 times label 0 / 1, one bincount
    conf = np.bincount(4 * lab_code[on_gold] + 2 * ga[on_gold].astype(np.int64) + y[on_gold],
                       minlength=4 * J).reshape(J, 4).astype(np.int64) if J else np.zeros((0, 4), np.int64)
    gold_rows = np.flatnonzero(isg)
    hashes = np.sort(pd.util.hash_array(uniq if ints else np.asarray(uniq, dtype=object), categorize=False))
    part = Part(
        design=d, n_rows=len(t.df), dropped=dropped,
        tp=conf[:, 3].copy(), fn=conf[:, 2].copy(), tn=conf[:, 0].copy(), fp=conf[:, 1].copy(),
        n_ann=np.bincount(lab_code, minlength=J).astype(np.int64), n_items_lab=n_items_lab,
        round_items=np.bincount(group, minlength=G).astype(np.int64),
        round_gold=np.bincount(group[isg], minlength=G).astype(np.int64),
        round_gold_pos=np.bincount(group[isg], weights=gold_arr[isg].astype(float), minlength=G).astype(np.float64),
        n_repeated=n_rep, gold_rows=gold_rows, gold_names=_as_text(uniq[gold_rows]), X=X,
    )
    id_range = None if n == 0 else ((int(uniq.min()), int(uniq.max())) if ints else (min(uniq), max(uniq)))
    return Built(part, labelers, rounds, hashes, bool(ints), (i_rw, l_rw, r_rw), id_range)


def widen(p: Part, lab_pos: IntArray, round_pos: IntArray, n_labelers: int, n_rounds: int) -> Part:
    """The partition coded in the history's dictionaries: its labeler ``k`` is the history's ``lab_pos[k]``, its
    round ``g`` the history's ``round_pos[g]`` (both increasing, so each item's codes stay sorted)."""
    d = p.design
    J, G = n_labelers, n_rounds
    if J == d.n_labelers and G == d.n_groups:
        return p  # the same dictionaries: positions increasing and as many means the identity
    idx = d.A.indices.astype(np.int64)
    code = (2 * lab_pos[idx >> 1] + (idx & 1)).astype(d.A.indices.dtype)
    A = sp.csr_matrix((d.A.data, code, d.A.indptr), shape=(d.n_items, 2 * J))
    cc = np.zeros(2 * J)
    cc[2 * lab_pos], cc[2 * lab_pos + 1] = d.code_counts[0::2], d.code_counts[1::2]
    group = round_pos[d.group].astype(np.int32)
    d2 = replace(d, n_labelers=J, n_groups=G, A=A, AT=A.T if d.AT.format == "csc" else A.T.tocsr(),
                 code_counts=cc, group=group, group_size=np.bincount(group, minlength=G).astype(np.float64))

    def per(v: npt.NDArray[Any], pos: IntArray, size: int) -> npt.NDArray[Any]:
        out = np.zeros(size, dtype=v.dtype)
        out[pos] = v
        return out

    return replace(p, design=d2, tp=per(p.tp, lab_pos, J), fn=per(p.fn, lab_pos, J), tn=per(p.tn, lab_pos, J),
                   fp=per(p.fp, lab_pos, J), n_ann=per(p.n_ann, lab_pos, J),
                   n_items_lab=per(p.n_items_lab, lab_pos, J), round_items=per(p.round_items, round_pos, G),
                   round_gold=per(p.round_gold, round_pos, G), round_gold_pos=per(p.round_gold_pos, round_pos, G))


def _positions(local: tuple[str, ...], whole: list[str], what: str) -> IntArray:
    """Where each of a partition's ids sits in the history's dictionary."""
    pos = pd.Index(whole).get_indexer(pd.Index(list(local), dtype=object)).astype(np.int64)
    if (pos < 0).any():
        raise DataError(f"{what} {local[int(np.flatnonzero(pos < 0)[0])]!r} is not in the history's {what}s")
    return pos


def _sorted_codes(codes: IntArray, uniq: npt.NDArray[Any]) -> tuple[IntArray, tuple[str, ...]]:
    """Codes into the distinct ids sorted as text (the order of the readers' dictionaries), and those ids."""
    text = _as_text(uniq)
    srt = np.argsort(text, kind="stable")
    rank = np.empty(srt.size, dtype=np.int64)
    rank[srt] = np.arange(srt.size)
    return rank[codes], tuple(str(x) for x in text[srt])


def _coded(s: pd.Series) -> tuple[IntArray, npt.NDArray[Any], bool | None]:
    """An id column's codes (-1: missing or blank), its distinct ids, and whether :func:`ids_to_str` rewrote
    one (None: no id). An integer column without missing values gives int64 ids (coded as they are: through a
    table in id order when they are dense, else in order of appearance), any other text as the readers write
    it, by :func:`ids_to_str` applied to the distinct values only (in order of appearance)."""
    if pd.api.types.is_integer_dtype(s.dtype) and not s.hasnans:
        v = s.to_numpy(dtype=np.int64)
        lo, hi = (int(v.min()), int(v.max())) if v.size else (0, -1)
        if hi - lo < 2 * v.size + 1024:  # dense ids (a range of items, labeler numbers): codes by a table, in id order
            present = np.bincount(v - lo, minlength=hi - lo + 1) > 0
            code = np.cumsum(present) - 1
            return code[v - lo].astype(np.int64, copy=False), lo + np.flatnonzero(present).astype(np.int64), False
        ic, uniq = pd.factorize(v)
        return ic.astype(np.int64, copy=False), np.asarray(uniq, dtype=np.int64), False
    raw, uniq_raw = pd.factorize(s, use_na_sentinel=True)
    plain = pd.Series(uniq_raw).astype("string")
    text = ids_to_str(pd.Series(uniq_raw))
    bad = (text.isna() | (text.str.strip() == "")).fillna(True).to_numpy(dtype=bool)
    rewritten = None if bad.all() else bool((text.fillna("") != plain.fillna("")).to_numpy(dtype=bool)[~bad].any())
    # two raw values can be one id as text ('3' and '3.0' in a text column): code the text
    tc, names = pd.factorize(text.to_numpy(dtype=object))
    tc = np.where(bad, -1, tc).astype(np.int64)
    ic = np.where(raw >= 0, tc[np.maximum(raw, 0)], -1).astype(np.int64)
    if bad.any():
        ic, names = _recount(ic, np.asarray(names, dtype=object))
    return ic, np.asarray(names, dtype=object), rewritten


def _recount(ic: IntArray, uniq: npt.NDArray[Any]) -> tuple[IntArray, npt.NDArray[Any]]:
    """Codes ``ic`` (no -1 among the rows kept) renumbered over the ids that still have rows, in order of
    appearance."""
    ok = ic >= 0
    new, used = pd.factorize(ic[ok])
    out = np.full(ic.size, -1, dtype=np.int64)
    out[ok] = new
    return out, uniq[np.asarray(used, dtype=np.int64)]


def _as_text(ids: npt.NDArray[Any]) -> npt.NDArray[np.object_]:
    """Distinct ids as the readers write them: integers through ``str``, text as it is."""
    if ids.dtype == np.int64:
        return np.asarray([str(x) for x in ids.tolist()], dtype=object)
    return np.asarray(ids, dtype=object)


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


def _by_item(ic: IntArray, n: int) -> tuple[IntArray | None, IntArray]:
    """The rows in item order (stable; None when they are in item order already, as in a file sorted by item
    with dense integer ids) and each item's offsets: compiled where numba is installed (a counting sort,
    several times faster than NumPy's stable sort of 64-bit codes), else NumPy."""
    if ic.size < 2 or bool(np.all(ic[1:] >= ic[:-1])):
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(ic, minlength=n), out=ptr[1:])
        return None, ptr
    if jit.HAVE_NUMBA:
        order, ptr = jit.serial(_counting_order)(ic, n)
        return order, ptr
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ic, minlength=n), out=ptr[1:])
    return np.argsort(ic, kind="stable"), ptr


def _pair_scan(ptr, lab, n_labelers):  # type: ignore[no-untyped-def]
    """Rows that repeat an (item, labeler) pair of their item's run, and each labeler's distinct items."""
    last = np.full(n_labelers, -1, dtype=np.int64)
    items = np.zeros(n_labelers, dtype=np.int64)
    rep = 0
    for i in range(ptr.shape[0] - 1):
        for k in range(ptr[i], ptr[i + 1]):
            j = lab[k]
            if last[j] == i:
                rep += 1
            else:
                last[j] = i
                items[j] += 1
    return rep, items


def _pair_counts(ptr: IntArray, lab: IntArray, n_labelers: int) -> tuple[int, IntArray]:
    """How many rows repeat an (item, labeler) pair, and each labeler's number of distinct items (rows in item
    order, offsets ``ptr``): one compiled scan where numba is installed, else a sort of the pairs."""
    if jit.HAVE_NUMBA:
        rep, items = jit.serial(_pair_scan)(ptr, lab, max(n_labelers, 1))
        return int(rep), np.asarray(items[:n_labelers], dtype=np.int64)
    J = max(n_labelers, 1)
    pair = np.sort(np.repeat(np.arange(ptr.size - 1, dtype=np.int64), np.diff(ptr)) * J + lab)
    first = np.ones(pair.size, dtype=bool)
    first[1:] = pair[1:] != pair[:-1]
    return int(pair.size - np.count_nonzero(first)), np.bincount(pair[first] % J, minlength=n_labelers).astype(np.int64)


def summary(p: Part) -> dict[str, Any]:
    """Everything the client needs from a partition besides the EM sums (small)."""
    out = {k: getattr(p, k) for k in ("n_rows", "dropped", "tp", "fn", "tn", "fp", "n_ann", "n_items_lab",
                                      "round_items", "round_gold", "round_gold_pos", "n_repeated")} | {
        "code_counts": p.design.code_counts, "n_items": p.design.n_items}
    if p.X is not None:
        out["x_sum"] = p.X.sum(axis=0)
    return out


def gold_subset(p: Part) -> tuple[npt.NDArray[np.object_], IntArray, IntArray, npt.NDArray[np.int8],
                                    npt.NDArray[np.int8], npt.NDArray[np.int32], FloatArray | None]:
    """The partition's gold items: ids, label counts, labeler codes, labels, gold, rounds and covariates."""
    d = p.design
    r = p.gold_rows
    A = d.A[r]  # items x codes counts, rows in the partition's order
    lens = np.asarray(A.sum(axis=1)).ravel().astype(np.int64)
    codes = np.repeat(A.indices.astype(np.int64), A.data.astype(np.int64))
    return (p.gold_names, lens, codes // 2, (codes % 2).astype(np.int8), d.gold[r], d.group[r],
            None if p.X is None else p.X[r])


def part_weights(p: Part, w: float, drop: IntArray) -> FloatArray:
    """Per-item weights of the likelihood: ``w`` for gold-free items, 1 for gold items, 0 for the gold items
    ``drop`` (positions among the partition's gold items, ``p.gold_rows``)."""
    wt = np.full(p.design.n_items, float(w))
    wt[p.gold_rows] = 1.0
    if drop.size:
        wt[p.gold_rows[drop]] = 0.0
    return wt


def weighted(p: Part, wt: FloatArray | None) -> two_coin.Design:
    return p.design if wt is None else replace(p.design, weight=wt)


def part_counts(p: Part, wt: FloatArray) -> tuple[FloatArray, FloatArray]:
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


def compact_of(p: Part, wt: FloatArray | None) -> kernels.CompactDesign | None:
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


def part_stats(p: Part, wt: FloatArray | None, alpha: FloatArray, beta: FloatArray, prev: FloatArray,
                need_ll: bool) -> tuple[FloatArray, FloatArray, float]:
    """One partition's E-step sums: per-code posterior sums, per-round sums and the log-likelihood; by the
    compiled kernel where numba is installed on the worker (the in-memory engine's pass), else NumPy."""
    cd = compact_of(p, wt)
    if cd is not None:
        return cd.e_sums(alpha, beta, prev, need_ll)
    d = weighted(p, wt)
    gamma, ll = two_coin.e_step(d, alpha, beta, prev, need_ll)
    gw = gamma if wt is None else gamma * wt
    s1 = np.asarray(d.AT @ gw, dtype=np.float64)
    gsum = np.bincount(d.group, weights=gw, minlength=d.n_groups).astype(np.float64)
    return s1, gsum, ll


def part_info(p: Part, wt: FloatArray | None, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> FloatArray:
    cd = compact_of(p, wt)
    if cd is not None:
        return cd.information(alpha, beta, prev)
    d = weighted(p, wt)
    gamma, _ = two_coin.e_step(d, alpha, beta, prev, need_ll=False)
    return scoring.information(d, alpha, beta, prev, gamma)


def part_cov(p: Part, wt: FloatArray | None, alpha: FloatArray, beta: FloatArray, prev: FloatArray, gram: bool,
              x_mean: FloatArray | None) -> tuple[FloatArray, FloatArray, FloatArray | None, FloatArray | None]:
    """Observed information, score Gram matrix and, with covariates, the scores' and the covariates' cross sums."""
    cd = compact_of(p, wt) if p.X is None or x_mean is None else None  # the kernel centres X at its own mean
    if cd is not None:
        gamma, _ = cd.posterior(alpha, beta, prev, need_ll=False)
        H, StS, _ = cd.covariance_sums(alpha, beta, prev, gamma, None, gram)
        return H, StS, None, None
    d = weighted(p, wt)
    gamma, _ = two_coin.e_step(d, alpha, beta, prev)
    si = scoring.scores_and_information(d, alpha, beta, prev, gamma, gram=gram)
    if p.X is None or x_mean is None:
        return si.info, si.gram, None, None
    Xc = p.X - x_mean
    return si.info, si.gram, np.asarray(si.scores.T @ Xc), Xc.T @ Xc


def part_centered(p: Part, x_mean: FloatArray) -> FloatArray:
    """The partition's covariates' cross products about the history's mean ``x_mean``."""
    assert p.X is not None
    Xc = p.X - x_mean
    out: FloatArray = Xc.T @ Xc
    return out
