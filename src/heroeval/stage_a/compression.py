"""Compressing a two-coin design: gold-free items with identical label patterns (and round) become one weighted
row each, so the EM runs on distinct patterns (the fit and its sandwich covariance are unchanged)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from heroeval.stage_a import two_coin
from heroeval.stage_a.two_coin import Design

__all__ = ["compress"]


def compress(d: Design, min_ratio: float = 2.0) -> Design | None:
    """Merge gold-free items with identical label patterns (and round) into one weighted row each.

    Such items have the same posterior, so EM on (pattern, count) rows gives
    the same fit as on items; ``weight`` becomes the original weight times
    the count, ``count`` keeps the multiplicity (the sandwich covariance
    needs it: a pattern's items are separate observations) and
    ``row_of_item`` maps items back. Gold items keep their own rows. Returns
    None when there are fewer than ``min_ratio`` items per row (no gain).
    Rows are matched by two 64-bit hashes and then checked label by label,
    so a hash collision cannot merge different items.
    """
    A = d.A.copy()
    A.sort_indices()
    n = d.n_items
    free = d.gold < 0
    if n == 0 or free.sum() < 2:
        return None
    lens = np.diff(A.indptr)
    rng = np.random.default_rng(20261129)
    r1 = rng.integers(1, 2**63, size=A.shape[1], dtype=np.uint64)
    r2 = rng.integers(1, 2**63, size=A.shape[1], dtype=np.uint64)
    cnt = A.data.astype(np.uint64)
    with np.errstate(over="ignore"):
        h1 = np.add.reduceat(r1[A.indices] * (cnt + np.uint64(1)), A.indptr[:-1]) if A.nnz else np.zeros(n, np.uint64)
        h2 = np.add.reduceat(r2[A.indices] * (cnt * np.uint64(7) + np.uint64(3)), A.indptr[:-1]) if A.nnz else np.zeros(
            n, np.uint64)
    h1 = np.where(lens > 0, h1, np.uint64(0))
    h2 = np.where(lens > 0, h2, np.uint64(0))
    w = np.ones(n) if d.weight is None else d.weight
    fi = np.flatnonzero(free)
    keys = np.rec.fromarrays([h1[fi], h2[fi], lens[fi], d.group[fi], w[fi]])
    _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    n_rows = first.size + int((~free).sum())
    if n / n_rows < min_ratio:
        return None
    rep = fi[first][inv]  # each gold-free item's representative item
    # exact check: every item's row equals its representative's, entry by entry
    same_len = lens[fi] == lens[rep]
    if not same_len.all():
        return None
    pos_i = np.repeat(A.indptr[fi], lens[fi]) + (np.arange(lens[fi].sum()) - np.repeat(np.cumsum(lens[fi]) - lens[fi],
                                                                                        lens[fi]))
    pos_r = np.repeat(A.indptr[rep], lens[fi]) + (pos_i - np.repeat(A.indptr[fi], lens[fi]))
    if not (np.array_equal(A.indices[pos_i], A.indices[pos_r]) and np.array_equal(A.data[pos_i], A.data[pos_r])):
        return None
    gold_items = np.flatnonzero(~free)
    rows = np.concatenate([gold_items, fi[first]])
    counts = np.concatenate([np.ones(gold_items.size), np.bincount(inv, minlength=first.size).astype(np.float64)])
    row_of_item = np.empty(n, dtype=np.int64)
    row_of_item[gold_items] = np.arange(gold_items.size)
    row_of_item[fi] = gold_items.size + inv
    Ac = sp.csr_matrix(A[rows])
    gold = d.gold[rows]
    group = d.group[rows]
    ATc = Ac.T if rows.size > two_coin.CSC_ITEMS else Ac.T.tocsr()
    return Design(
        n_items=int(rows.size), n_labelers=d.n_labelers, n_groups=d.n_groups, A=Ac, AT=ATc,
        code_counts=np.asarray(ATc @ counts, dtype=np.float64), gold=gold,
        gold_pos=np.flatnonzero(gold == 1), gold_neg=np.flatnonzero(gold == 0), group=group,
        group_size=np.bincount(group, weights=counts, minlength=d.n_groups).astype(np.float64),
        weight=w[rows] * counts, pseudo_count=d.pseudo_count, count=counts, row_of_item=row_of_item,
    )
