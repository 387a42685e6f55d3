"""Item-sorted arrays built from coded rows streamed in batches (compiled with numba; used by the DuckDB engine).

Two builders. :class:`CsrBuilder` takes item codes from a dictionary DuckDB
built (its per-item counts known up front). :class:`RangeCsrBuilder` takes
integer item ids directly: a first stream counts the rows per id over the
ids' range (an array indexed by ``id - lowest id``), the ids present become
the items (in numeric order), and a second stream scatters the rows through
that array, so no hash table of the items is built. Both fill the slots of
each item with a per-item counter (4 bytes an item) and check every slot is
filled once.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval._core.jit import serial

_THREADS = max(1, min(os.cpu_count() or 1, 8))


def _scatter(ic, lc, y, rc, ptr, fill, out_l, out_y, item_round, conflict):  # type: ignore[no-untyped-def]
    """Place one batch of coded rows at their items' next free slots (a counting sort, batch by batch).

    ``fill[k]`` is how many of item k's slots are taken; ``item_round`` takes each item's
    round, and ``conflict[0]`` the first item seen in two rounds (-1: none). Returns
    False if a row falls outside its item's slots (the counts were wrong).
    """
    for a in range(ic.shape[0]):
        k = ic[a]
        p = ptr[k] + fill[k]
        if p >= ptr[k + 1]:
            return False
        out_l[p] = lc[a]
        out_y[p] = y[a]
        fill[k] += 1
        r = rc[a]
        if item_round[k] < 0:
            item_round[k] = r
        elif item_round[k] != r and conflict[0] < 0:
            conflict[0] = k
    return True


def _scatter_mapped(ik, lk, y, rc, item_code, dense, has_rounds, lab_code, ptr, fill, out_l, out_y, item_round,  # type: ignore[no-untyped-def]
                    conflict, packed):
    """:func:`_scatter` for rows given as offsets into the item and labeler code tables.

    ``dense``: every offset is an item and its own code (``item_code`` is not read);
    without ``has_rounds`` the rows' rounds are not read. (Each random access costs:
    at 1e8 rows the round and the code table took half the time.) Returns -1 when
    all rows were placed, else the batch position of the first row that could not be
    (an offset outside a table, an id without a code, or too many rows). ``packed``:
    ``out_l`` takes the codes ``2 * labeler + label`` (``out_y`` is not written).
    """
    n_i = fill.shape[0] if dense else item_code.shape[0]
    n_l = lab_code.shape[0]
    for a in range(ik.shape[0]):
        u = ik[a]
        v = lk[a]
        if u < 0 or u >= n_i or v < 0 or v >= n_l:
            return a
        k = u if dense else item_code[u]
        j = lab_code[v]
        if k < 0 or j < 0:
            return a
        p = ptr[k] + fill[k]
        if p >= ptr[k + 1]:
            return a
        if packed:
            out_l[p] = 2 * j + y[a]
        else:
            out_l[p] = j
            out_y[p] = y[a]
        fill[k] += 1
        if has_rounds:
            r = rc[a]
            if item_round[k] < 0:
                item_round[k] = r
            elif item_round[k] != r and conflict[0] < 0:
                conflict[0] = k
    return -1


def _count_offsets(ik, lk, counts, lab_counts, with_labelers):  # type: ignore[no-untyped-def]
    """``counts[u] += 1`` for each item offset and, ``with_labelers``, ``lab_counts[v] += 1`` for each labeler
    offset; returns the batch position of the first offset out of range, or -1."""
    n = counts.shape[0]
    m = lab_counts.shape[0]
    for a in range(ik.shape[0]):
        u = ik[a]
        if u < 0 or u >= n:
            return a
        counts[u] += 1
        if with_labelers:
            v = lk[a]
            if v < 0 or v >= m:
                return a
            lab_counts[v] += 1
    return -1


def _number_present(counts, ptr):  # type: ignore[no-untyped-def]
    """Items = the offsets with a count, in order: their offsets into ``ptr`` (a cumulative sum of
    their counts) and ``counts`` overwritten in place by each offset's item code (-1: absent)."""
    k = 0
    for u in range(counts.shape[0]):
        c = counts[u]
        if c > 0:
            ptr[k + 1] = ptr[k] + c
            counts[u] = k
            k += 1
        else:
            counts[u] = -1
    return k


def _first_unfilled(ptr, fill):  # type: ignore[no-untyped-def]
    """The first item whose slots are not all filled, or -1."""
    for k in range(fill.shape[0]):
        if fill[k] != ptr[k + 1] - ptr[k]:
            return k
    return -1


def _repeats(ptr, lab, k0, k1, shift):  # type: ignore[no-untyped-def]
    """Rows of items ``k0:k1`` that repeat an earlier labeler (``lab >> shift``: 1 for codes ``2 * labeler +
    label``) of the same item: their number and the first one's position."""
    n_dup = 0
    first = -1
    for k in range(k0, k1):
        for p in range(ptr[k] + 1, ptr[k + 1]):
            for q in range(ptr[k], p):
                if lab[q] >> shift == lab[p] >> shift:
                    n_dup += 1
                    if first < 0:
                        first = p
                    break
    return n_dup, first


def count_batch(offsets: npt.NDArray[Any], counts: npt.NDArray[np.int32], labeler_offsets: npt.NDArray[Any] | None,
                labeler_counts: npt.NDArray[np.int64] | None) -> None:
    """Add a batch of item offsets to ``counts`` (and, given both, labeler offsets to ``labeler_counts``)."""
    with_labelers = labeler_offsets is not None and labeler_counts is not None
    lk = labeler_offsets if labeler_offsets is not None else offsets[:0]
    lc = labeler_counts if labeler_counts is not None else np.zeros(0, dtype=np.int64)
    bad = int(serial(_count_offsets)(offsets, lk, counts, lc, with_labelers))
    if bad >= 0:
        raise ValueError(f"item offset {int(offsets[bad])} (or its labeler's) outside the counted range")


def repeated_labels(ptr: npt.NDArray[np.int64], lab: npt.NDArray[Any], shift: int) -> tuple[int, int]:
    """Labels that repeat an earlier labeler (``lab >> shift``) of their item: their number and the first one's
    position (-1: none), the items split over threads (the kernel releases the GIL)."""
    n_items = int(ptr.shape[0] - 1)
    cuts = [n_items * t // _THREADS for t in range(_THREADS + 1)]
    f = serial(_repeats)
    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        parts = list(pool.map(lambda t: f(ptr, lab, cuts[t], cuts[t + 1], shift), range(_THREADS)))
    return sum(int(p[0]) for p in parts), next((int(p[1]) for p in parts if p[1] >= 0), -1)


def all_filled(ptr: npt.NDArray[np.int64], fill: npt.NDArray[np.int32]) -> bool:
    """Whether every item's slots (``ptr``) were filled (``fill``)."""
    return int(serial(_first_unfilled)(ptr, fill)) < 0


class CsrBuilder:
    """Builds the item-sorted arrays from coded rows streamed in batches, with no copy of the stream.

    ``counts`` are the rows per item (known before the stream: DuckDB counts them with
    the item dictionary); each batch is scattered straight to its final place.
    """

    def __init__(self, counts: npt.NDArray[np.integer[Any]] | None = None) -> None:
        if counts is not None:
            ptr = np.zeros(int(counts.shape[0]) + 1, dtype=np.int64)
            np.cumsum(counts, out=ptr[1:])
            self._allocate(ptr)

    def _allocate(self, ptr: npt.NDArray[np.int64], fill: npt.NDArray[np.int32] | None = None,
                  round_start: int = -1) -> None:
        """The output arrays for items with offsets ``ptr``; ``fill``: an int32 array to reuse as the counters
        (zeroed here); ``round_start``: every item's round before the rows are seen (-1: unknown)."""
        n_items = int(ptr.shape[0] - 1)
        n = int(ptr[-1])
        self.ptr = ptr
        if fill is None:
            self.fill = np.zeros(n_items, dtype=np.int32)
        else:
            self.fill = fill
            self.fill[:] = 0
        self.labeler = np.empty(n, dtype=np.int32)
        self.label = np.empty(n, dtype=np.int8)
        self.item_round = np.full(n_items, round_start, dtype=np.int32)
        self.conflict = np.full(1, -1, dtype=np.int64)

    def add(self, ic: npt.NDArray[Any], lc: npt.NDArray[Any], y: npt.NDArray[Any], rc: npt.NDArray[Any]) -> None:
        if ic.size and (int(ic.min()) < 0 or int(ic.max()) >= self.fill.shape[0]):
            raise ValueError("item code out of range")
        if not serial(_scatter)(ic, lc, y, rc, self.ptr, self.fill, self.labeler, self.label, self.item_round,
                                   self.conflict):
            raise ValueError("more streamed rows for an item than counted")

    def finish(self) -> tuple[int, int]:
        """Check every slot was filled; return (repeated rows, position of the first)."""
        if not all_filled(self.ptr, self.fill):
            raise ValueError("the streamed rows do not match the per-item counts")
        del self.fill
        return repeated_labels(self.ptr, self.labeler, 0)


class RangeCsrBuilder(CsrBuilder):
    """:class:`CsrBuilder` for integer item ids in ``[low, high]``, without an item dictionary.

    Call :meth:`count` on every batch of ids (as offsets ``id - low``), then
    :meth:`layout` (which returns the ids present, in numeric order: the
    items), then :meth:`add_mapped` on every batch of rows, then
    :meth:`finish`. Memory: 4 bytes per id in the range, besides the arrays
    built, and none once every id in the range is an item. Without
    ``has_rounds`` every item is in round 0 and the rows' rounds are not read.
    """

    def __init__(self, low: int, high: int, has_rounds: bool = True) -> None:
        super().__init__()
        self.low = int(low)
        self.has_rounds = bool(has_rounds)
        self.codes = np.zeros(int(high) - int(low) + 1, dtype=np.int32)  # counts, then each offset's item code
        self.dense = False

    def count(self, offsets: npt.NDArray[Any], labeler_offsets: npt.NDArray[Any] | None = None,
              labeler_counts: npt.NDArray[np.int64] | None = None) -> None:
        """Count a batch of rows by item offset (and, given both, by labeler offset into ``labeler_counts``)."""
        count_batch(offsets, self.codes, labeler_offsets, labeler_counts)

    def layout(self) -> npt.NDArray[np.int64]:
        """Number the ids present; returns them (the items, in numeric order)."""
        present = np.flatnonzero(self.codes)
        ptr = np.zeros(present.shape[0] + 1, dtype=np.int64)
        n_items = int(serial(_number_present)(self.codes, ptr))
        assert n_items == present.shape[0]
        self.dense = n_items == self.codes.shape[0]
        round_start = -1 if self.has_rounds else 0
        if self.dense:  # offset = code: the table is not needed; its memory becomes the fill counters
            self._allocate(ptr, fill=self.codes, round_start=round_start)
            self.codes = np.zeros(0, dtype=np.int32)
        else:
            self._allocate(ptr, round_start=round_start)
        present += self.low
        return present

    def add_mapped(self, offsets: npt.NDArray[Any], labeler_offsets: npt.NDArray[Any], y: npt.NDArray[Any],
                   rc: npt.NDArray[Any], labeler_code: npt.NDArray[np.int32]) -> None:
        """Scatter rows given as item offsets and offsets into ``labeler_code`` (the labelers' codes)."""
        bad = int(serial(_scatter_mapped)(offsets, labeler_offsets, y, rc, self.codes, self.dense, self.has_rounds,
                                          labeler_code, self.ptr, self.fill, self.labeler, self.label,
                                          self.item_round, self.conflict, False))
        if bad >= 0:
            raise ValueError(f"row with item offset {int(offsets[bad])} and labeler offset "
                             f"{int(labeler_offsets[bad])} has no slot (the rows changed between the two scans?)")

    def finish(self) -> tuple[int, int]:
        del self.codes
        return super().finish()
