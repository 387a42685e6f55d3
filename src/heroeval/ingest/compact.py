"""A history held the way the compiled engine reads it, built straight from files (for histories near memory's size).

:class:`CompactHistory` keeps one code ``2 * labeler + label`` per label (2
bytes with fewer than 32,768 labelers), items in order of their number of
labels (ties in item-id order), per item the offsets (8 bytes), the gold
label (1) and the round (4), and the gold items decoded as a small
:class:`~heroeval.ingest.annotations.AnnotationSet`. That is what Stage A's
compiled design holds, so :func:`heroeval.calibrate` fits it without a
copy: at 1e9 labels on 2.5e8 items about 5.3 GB, where an
``AnnotationSet`` (10.3 GB) and the design built from it (6.3 GB) hold
the same labels twice. It has no item ids beyond the gold items' and no
per-item arrays in id order, so what needs the history's items (the model
checks' refits, HERO joint, posteriors per item id) is not available from
it; read the history with :func:`heroeval.read_annotations` for those.

:func:`heroeval.ingest.read.read_compact` builds one from Parquet with
integer item ids through DuckDB (the range path of
:mod:`heroeval.ingest._duckdb`); the kernels here place the streamed rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval._core.jit import serial
from heroeval.ingest._csr import _scatter_mapped, all_filled, count_batch, repeated_labels
from heroeval.ingest.annotations import AnnotationSet, IngestReport

__all__ = ["CompactHistory"]


@dataclass(frozen=True, eq=False)
class CompactHistory:
    """A history as compiled-engine arrays (see the module docstring); read with ``read_compact``.

    Attributes
    ----------
    labeler_ids : ndarray of str, shape (n_labelers,)
    round_ids : tuple of str
    ptr : ndarray of int64, shape (n_items + 1,)
        Item offsets into ``code``; items in order of their number of labels.
    code : ndarray of uint16 or uint32, shape (n_annotations,)
        ``2 * labeler + label`` for each label.
    gold : ndarray of int8, shape (n_items,)
        Gold label (-1: none), in the items' order here.
    group : ndarray of int32, shape (n_items,)
        Round code of each item.
    gold_set : AnnotationSet
        The gold items, decoded, in item-id order (ids are the items' ids).
    repeated_pairs : bool
        Whether some (item, labeler) pair carries several labels.
    report : IngestReport
        Rows read, used and dropped by reason.
    name : str
    """

    labeler_ids: npt.NDArray[np.object_]
    round_ids: tuple[str, ...]
    ptr: npt.NDArray[np.int64]
    code: npt.NDArray[np.integer[Any]]
    gold: npt.NDArray[np.int8]
    group: npt.NDArray[np.int32]
    gold_set: AnnotationSet
    repeated_pairs: bool
    report: IngestReport
    name: str

    @property
    def n_items(self) -> int:
        return int(self.ptr.shape[0] - 1)

    @property
    def n_labelers(self) -> int:
        return int(self.labeler_ids.shape[0])

    @property
    def n_rounds(self) -> int:
        return len(self.round_ids)

    @property
    def n_annotations(self) -> int:
        return int(self.code.shape[0])

    @property
    def n_gold(self) -> int:
        return self.gold_set.n_items

    def __repr__(self) -> str:
        return (f"CompactHistory(name={self.name!r}, items={self.n_items}, labelers={self.n_labelers}, "
                f"annotations={self.n_annotations}, gold={self.n_gold}, rounds={self.n_rounds})")


def code_dtype(n_labelers: int) -> type[np.integer[Any]]:
    """The smallest unsigned type holding every code ``2 * labeler + label`` (that of the compiled engine)."""
    return np.uint16 if 2 * n_labelers <= np.iinfo(np.uint16).max else np.uint32


def _positions_by_size(counts, ptr):  # type: ignore[no-untyped-def]
    """Items (offsets with a count) in order of their count, ties in offset order (a stable counting sort):
    ``counts`` overwritten in place by each offset's position (-1: absent), ``ptr`` their offsets in that
    order. Returns the number of items."""
    kmax = 0
    for u in range(counts.shape[0]):
        kmax = max(kmax, counts[u])
    start = np.zeros(kmax + 2, dtype=np.int64)
    for u in range(counts.shape[0]):
        if counts[u] > 0:
            start[counts[u] + 1] += 1
    for k in range(1, kmax + 2):
        start[k] += start[k - 1]
    ptr[0] = 0
    for k in range(kmax + 1):
        for r in range(start[k], start[k + 1]):
            ptr[r + 1] = ptr[r] + k
    n = start[kmax + 1]
    for u in range(counts.shape[0]):
        c = counts[u]
        if c > 0:
            counts[u] = start[c]
            start[c] += 1
        else:
            counts[u] = -1
    return n


_NO_LABELS = np.zeros(0, dtype=np.int8)


class CompactBuilder:
    """Builds a :class:`CompactHistory`'s arrays from two streamed scans of integer item ids in ``[low, high]``.

    :meth:`count` every batch of item offsets (``id - low``); :meth:`layout`
    (positions by label count); :meth:`add` every batch of rows; :meth:`finish`.
    Memory: 4 bytes per id in the range (the counts, then each offset's
    position) and 4 per item (fill counters) while it runs, besides the arrays.
    """

    def __init__(self, low: int, high: int, has_rounds: bool) -> None:
        self.low = int(low)
        self.has_rounds = bool(has_rounds)
        self.pos_of = np.zeros(int(high) - int(low) + 1, dtype=np.int32)

    def count(self, offsets: npt.NDArray[Any], labeler_offsets: npt.NDArray[Any] | None = None,
              labeler_counts: npt.NDArray[np.int64] | None = None) -> None:
        """Count a batch of rows by item offset (and, given both, by labeler offset into ``labeler_counts``)."""
        count_batch(offsets, self.pos_of, labeler_offsets, labeler_counts)

    def layout(self, n_labelers: int) -> None:
        """Number the items by label count and allocate the arrays (codes for ``n_labelers`` labelers)."""
        n_items = int(np.count_nonzero(self.pos_of))
        self.ptr = np.empty(n_items + 1, dtype=np.int64)
        got = int(serial(_positions_by_size)(self.pos_of, self.ptr))
        assert got == n_items
        self.fill = np.zeros(n_items, dtype=np.int32)
        self.code = np.empty(int(self.ptr[-1]), dtype=code_dtype(n_labelers))
        self.group = np.full(n_items, -1 if self.has_rounds else 0, dtype=np.int32)
        self.conflict = np.full(1, -1, dtype=np.int64)

    def add(self, offsets: npt.NDArray[Any], labeler_offsets: npt.NDArray[Any], y: npt.NDArray[Any],
            rc: npt.NDArray[Any], labeler_code: npt.NDArray[np.int32]) -> None:
        bad = int(serial(_scatter_mapped)(offsets, labeler_offsets, y, rc, self.pos_of, False, self.has_rounds,
                                          labeler_code, self.ptr, self.fill, self.code, _NO_LABELS, self.group,
                                          self.conflict, True))
        if bad >= 0:
            raise ValueError(f"row with item offset {int(offsets[bad])} and labeler offset "
                             f"{int(labeler_offsets[bad])} has no slot (the rows changed between the two scans?)")

    def positions(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Each id's item position here (-1: not an item)."""
        off = ids - self.low
        ok = (off >= 0) & (off < self.pos_of.shape[0])
        out = np.full(ids.shape[0], -1, dtype=np.int64)
        out[ok] = self.pos_of[off[ok]]
        return out

    def finish(self) -> tuple[int, int, int]:
        """Check every slot was filled; free the work arrays. Returns (repeated labels, position of the first,
        first item in two rounds or -1)."""
        if not all_filled(self.ptr, self.fill):
            raise ValueError("the streamed rows do not match the per-item counts")
        del self.fill
        n_dup, first = repeated_labels(self.ptr, self.code, 1)
        return n_dup, first, int(self.conflict[0])

    def gold_set(self, ids: npt.NDArray[np.int64], gold: npt.NDArray[np.int8], labeler_ids: npt.NDArray[np.object_],
                 round_ids: tuple[str, ...], report: IngestReport, name: str, repeated: bool) -> AnnotationSet:
        """The gold items (ids in increasing order, their gold labels) decoded as an AnnotationSet."""
        pos = self.positions(ids)
        starts, lens = self.ptr[pos], self.ptr[pos + 1] - self.ptr[pos]
        iptr = np.zeros(ids.shape[0] + 1, dtype=np.int64)
        np.cumsum(lens, out=iptr[1:])
        idx = np.repeat(starts - iptr[:-1], lens) + np.arange(int(iptr[-1]), dtype=np.int64)
        c = self.code[idx].astype(np.int64)
        return AnnotationSet(item_ids=ids.astype(np.int64), labeler_ids=labeler_ids, item_ptr=iptr,
                             labeler=(c // 2).astype(np.int32), label=(c % 2).astype(np.int8),
                             gold=gold.astype(np.int8), item_round=self.group[pos].astype(np.int32),
                             round_ids=round_ids, covariates=None, covariate_names=(), report=report,
                             name=f"{name} (gold items)", repeated_pairs=repeated)
