"""Item-sorted arrays built from coded rows streamed in batches (compiled with numba; used by the DuckDB engine).

:class:`CsrBuilder` takes item codes from a dictionary DuckDB built (its
per-item counts known up front) and fills each item's slots with a per-item
counter. Integer item ids need no dictionary: a :class:`SlotTable` over the
ids' range (an array indexed by ``id - lowest id``) counts the rows per id in
a first stream, the ids present become the items, each id's entry becomes its
item's next free slot, and a second stream scatters every row through that one
entry. :class:`RangeCsrBuilder` (items in id order, for an
:class:`~heroeval.ingest.annotations.AnnotationSet`) and
:class:`~heroeval.ingest.compact.CompactBuilder` (items by label count) use it.
Every builder checks each slot is filled once.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval.core.jit import serial
from heroeval.core.memory import filled

_THREADS = max(1, min(os.cpu_count() or 1, 8))

INT32_SLOTS = int(np.iinfo(np.int32).max)
"""From this many slots (labels) on, a :class:`SlotTable` holds 8-byte slots rather than 4."""


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


def _scatter_slots(ik, lk, y, rc, slot, has_rounds, lab_code, out_l, out_y, round_of, conflict, packed):  # type: ignore[no-untyped-def]
    """Place one batch of rows, given as item offsets and labeler offsets, at their items' next free slots.

    ``slot[u]`` is the next free slot of the item at offset ``u`` (-1: no item),
    advanced by each row; ``lab_code`` maps labeler offsets to codes. Only the
    two arrays the rows index by offset are touched at random, which is what
    makes it fast (at 1e8 shuffled rows about 5 ns a row; through item positions,
    offsets and fill counters, 38). A row beyond its item's slots is caught
    afterwards by :func:`_settle_slots`. Without ``has_rounds`` the rows' rounds
    are not read; with, ``round_of[u]`` takes the round and ``conflict[0]`` the
    first offset seen in two rounds. ``packed``: ``out_l`` takes the codes
    ``2 * labeler + label`` (``out_y`` is not written). Returns -1 when all rows
    were placed, else the batch position of the first row that could not be (an
    offset outside a table, an id without a code, or past the last slot).
    """
    n_i = slot.shape[0]
    n_l = lab_code.shape[0]
    n_t = out_l.shape[0]
    for a in range(ik.shape[0]):
        u = ik[a]
        v = lk[a]
        if u < 0 or u >= n_i or v < 0 or v >= n_l:
            return a
        j = lab_code[v]
        p = slot[u]
        if j < 0 or p < 0 or p >= n_t:
            return a
        if packed:
            out_l[p] = 2 * j + y[a]
        else:
            out_l[p] = j
            out_y[p] = y[a]
        slot[u] = p + 1
        if has_rounds:
            r = rc[a]
            if round_of[u] < 0:
                round_of[u] = r
            elif round_of[u] != r and conflict[0] < 0:
                conflict[0] = u
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


def _size_starts(cnt):  # type: ignore[no-untyped-def]
    """For a stable counting sort of the offsets with a count by that count: the first position of each count."""
    kmax = 0
    for u in range(cnt.shape[0]):
        kmax = max(kmax, cnt[u])
    start = np.zeros(kmax + 2, dtype=np.int64)
    for u in range(cnt.shape[0]):
        if cnt[u] > 0:
            start[cnt[u] + 1] += 1
    for k in range(1, kmax + 2):
        start[k] += start[k - 1]
    return start


def _layout_slots(cnt, slot, ptr, start, by_size):  # type: ignore[no-untyped-def]
    """Items = the offsets with a count (``cnt``), numbered by count with ties in offset order (``by_size``;
    ``start`` from :func:`_size_starts`, used up) or in offset order: ``ptr`` their offsets into the slots,
    ``slot[u]`` the first slot of offset u's item (-1: absent). Returns the number of items."""
    ptr[0] = 0
    if by_size:
        kmax = start.shape[0] - 2
        for k in range(kmax + 1):
            for r in range(start[k], start[k + 1]):
                ptr[r + 1] = ptr[r] + k
        for u in range(cnt.shape[0]):
            c = cnt[u]
            if c > 0:
                slot[u] = ptr[start[c]]
                start[c] += 1
            else:
                slot[u] = -1
        return start[kmax + 1] if kmax >= 0 else 0
    k = 0
    for u in range(cnt.shape[0]):
        c = cnt[u]
        if c > 0:
            slot[u] = ptr[k]
            ptr[k + 1] = ptr[k] + c
            k += 1
        else:
            slot[u] = -1
    return k


def _settle_slots(cnt, slot, ptr, start, by_size, has_rounds, round_of, item_round):  # type: ignore[no-untyped-def]
    """After the scatter: check each item's slots were filled exactly (``slot[u]`` is then its last slot + 1),
    turn ``slot[u]`` into the item's position (-1: absent) and, ``has_rounds``, copy ``round_of[u]`` to
    ``item_round`` at that position (``start`` as for :func:`_layout_slots`, used up). Returns the first offset
    whose item was not filled exactly, or -1."""
    k = 0
    for u in range(cnt.shape[0]):
        c = cnt[u]
        if c > 0:
            if by_size:
                k = start[c]
                start[c] += 1
            if slot[u] != ptr[k + 1]:
                return u
            slot[u] = k
            if has_rounds:
                item_round[k] = round_of[u]
            if not by_size:
                k += 1
        elif slot[u] != -1:
            return u
    return -1


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


def range_labelers(lab_counts: npt.NDArray[np.int64], low: int) -> tuple[npt.NDArray[np.object_],
                                                                         npt.NDArray[np.int32]]:
    """The integer labeler ids counted in ``lab_counts`` (offsets from ``low``) as names in string order, and the
    table from offsets to their codes (-1: no rows), as the dictionary path numbers them."""
    vals = np.flatnonzero(lab_counts) + low  # the labelers present
    names = vals.astype(str)
    order = np.argsort(names, kind="stable")
    lab_code = np.full(lab_counts.shape[0], -1, dtype=np.int32)
    lab_code[vals[order] - low] = np.arange(vals.size, dtype=np.int32)
    return names[order].astype(object), lab_code


def all_filled(ptr: npt.NDArray[np.int64], fill: npt.NDArray[np.integer[Any]]) -> bool:
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
            self.fill = filled(n_items, np.int32, 0)
        else:
            self.fill = fill
            self.fill[:] = 0
        # written first by every core (see heroeval.core.memory), then rewritten by the serial scatter
        self.labeler = filled(n, np.int32, 0)
        self.label = filled(n, np.int8, 0)
        self.item_round = filled(n_items, np.int32, round_start)
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


class SlotTable:
    """Rows of integer item ids in ``[low, high]`` placed in two streamed scans through a table over the range.

    :meth:`count` every batch of item offsets (``id - low``); :meth:`layout`
    numbers the offsets with rows (by label count, ties in id order, or in id
    order) and turns each offset's count into its item's first slot;
    :meth:`scatter` every batch of rows; :meth:`settle` checks every slot was
    filled once and turns the table into item positions (:meth:`positions`).
    Memory: 4 bytes per id in the range (8 from 2**31 slots on), 1 more while it
    runs (4 when an item has over 255 rows), and, with rounds, 4 more.
    """

    def __init__(self, low: int, high: int, by_size: bool, has_rounds: bool) -> None:
        self.low = int(low)
        self.by_size = bool(by_size)
        self.has_rounds = bool(has_rounds)
        self.slot: npt.NDArray[np.integer[Any]] = filled(int(high) - int(low) + 1, np.int32, 0)  # counts first
        self.conflict = np.full(1, -1, dtype=np.int64)

    def count(self, offsets: npt.NDArray[Any], labeler_offsets: npt.NDArray[Any] | None = None,
              labeler_counts: npt.NDArray[np.int64] | None = None) -> None:
        """Count a batch of rows by item offset (and, given both, by labeler offset into ``labeler_counts``)."""
        count_batch(offsets, self.slot, labeler_offsets, labeler_counts)  # type: ignore[arg-type]

    def layout(self) -> npt.NDArray[np.int64]:
        """Number the items and give each offset its item's first slot; returns the items' offsets into the slots."""
        counts = self.slot
        n_slots = int(counts.sum(dtype=np.int64))
        most = int(counts.max()) if counts.shape[0] else 0
        self.cnt = counts.astype(np.uint8) if most <= np.iinfo(np.uint8).max else counts.copy()
        n_items = int(np.count_nonzero(self.cnt))
        ptr = filled(n_items + 1, np.int64, 0)
        if n_slots >= INT32_SLOTS:  # slots past int32: an 8-byte table
            del counts
            self.slot = filled(self.cnt.shape[0], np.int64, 0)
        got = int(serial(_layout_slots)(self.cnt, self.slot, ptr, self._starts(), self.by_size))
        assert got == n_items and int(ptr[-1]) == n_slots
        self.round_of = filled(self.cnt.shape[0], np.int32, -1) if self.has_rounds else np.zeros(0, dtype=np.int32)
        return ptr

    def _starts(self) -> npt.NDArray[np.int64]:
        """The first position of each label count (by size), or nothing (in id order)."""
        return serial(_size_starts)(self.cnt) if self.by_size else np.zeros(0, dtype=np.int64)

    def scatter(self, offsets: npt.NDArray[Any], labeler_offsets: npt.NDArray[Any], y: npt.NDArray[Any],
                rc: npt.NDArray[Any], labeler_code: npt.NDArray[np.int32], out_l: npt.NDArray[Any],
                out_y: npt.NDArray[Any], packed: bool) -> None:
        """Place a batch of rows (see :func:`_scatter_slots`)."""
        bad = int(serial(_scatter_slots)(offsets, labeler_offsets, y, rc, self.slot, self.has_rounds, labeler_code,
                                         out_l, out_y, self.round_of, self.conflict, packed))
        if bad >= 0:
            raise ValueError(f"row with item offset {int(offsets[bad])} and labeler offset "
                             f"{int(labeler_offsets[bad])} has no slot (the rows changed between the two scans?)")

    def settle(self, ptr: npt.NDArray[np.int64], item_round: npt.NDArray[np.int32]) -> int:
        """Check every item's slots were filled once; the table becomes item positions and ``item_round`` (with
        rounds) the items' rounds. Returns the position of the first item seen in two rounds, or -1."""
        bad = int(serial(_settle_slots)(self.cnt, self.slot, ptr, self._starts(), self.by_size, self.has_rounds,
                                        self.round_of, item_round))
        if bad >= 0:
            raise ValueError("the streamed rows do not match the per-item counts")
        del self.cnt, self.round_of
        u = int(self.conflict[0])
        return int(self.slot[u]) if u >= 0 else -1

    def positions(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Each id's item position (-1: not an item); after :meth:`settle`."""
        off = ids - self.low
        ok = (off >= 0) & (off < self.slot.shape[0])
        out = np.full(ids.shape[0], -1, dtype=np.int64)
        out[ok] = self.slot[off[ok]]
        return out


class RangeCsrBuilder:
    """Item-sorted arrays (items in id order) from integer item ids in ``[low, high]``, without an item dictionary.

    Call :meth:`count` on every batch of ids (as offsets ``id - low``), then
    :meth:`layout` (returns the items' ids), :meth:`add_mapped` on every batch
    of rows, then :meth:`finish`. Memory: see :class:`SlotTable`, besides the
    arrays built. Without ``has_rounds`` every item is in round 0 and the rows'
    rounds are not read.
    """

    def __init__(self, low: int, high: int, has_rounds: bool = True) -> None:
        self.table = SlotTable(low, high, by_size=False, has_rounds=has_rounds)
        self.conflict = np.full(1, -1, dtype=np.int64)

    def count(self, offsets: npt.NDArray[Any], labeler_offsets: npt.NDArray[Any] | None = None,
              labeler_counts: npt.NDArray[np.int64] | None = None) -> None:
        """Count a batch of rows by item offset (and, given both, by labeler offset into ``labeler_counts``)."""
        self.table.count(offsets, labeler_offsets, labeler_counts)

    def layout(self) -> npt.NDArray[np.int64]:
        """Number the ids present; returns them (the items, in numeric order)."""
        present = np.flatnonzero(self.table.slot).astype(np.int64) + self.table.low
        self.ptr = self.table.layout()
        n = int(self.ptr[-1])
        # written first by every core (see heroeval.core.memory), then rewritten by the serial scatter
        self.labeler = filled(n, np.int32, 0)
        self.label = filled(n, np.int8, 0)
        n_items = int(present.shape[0])
        self.item_round = filled(n_items, np.int32, -1) if self.table.has_rounds else np.zeros(n_items, np.int32)
        return present

    def add_mapped(self, offsets: npt.NDArray[Any], labeler_offsets: npt.NDArray[Any], y: npt.NDArray[Any],
                   rc: npt.NDArray[Any], labeler_code: npt.NDArray[np.int32]) -> None:
        """Scatter rows given as item offsets and offsets into ``labeler_code`` (the labelers' codes)."""
        self.table.scatter(offsets, labeler_offsets, y, rc, labeler_code, self.labeler, self.label, False)

    def finish(self) -> tuple[int, int]:
        """Check every slot was filled; return (repeated rows, position of the first)."""
        self.conflict[0] = self.table.settle(self.ptr, self.item_round)
        del self.table
        return repeated_labels(self.ptr, self.labeler, 0)
