"""Item-sorted arrays built from coded rows streamed in batches (compiled with numba; used by the DuckDB engine)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval._core.jit import serial


def _scatter(ic, lc, y, rc, ptr, pos, out_l, out_y, item_round, conflict):  # type: ignore[no-untyped-def]
    """Place one batch of coded rows at their items' next free slots (a counting sort, batch by batch).

    ``pos[k]`` is item k's next free slot; ``item_round`` takes each item's round, and
    ``conflict[0]`` the first item seen in two rounds (-1: none). Returns False if a row
    falls outside its item's slots (the counts were wrong).
    """
    for a in range(ic.shape[0]):
        k = ic[a]
        p = pos[k]
        if p >= ptr[k + 1]:
            return False
        out_l[p] = lc[a]
        out_y[p] = y[a]
        pos[k] = p + 1
        r = rc[a]
        if item_round[k] < 0:
            item_round[k] = r
        elif item_round[k] != r and conflict[0] < 0:
            conflict[0] = k
    return True


def _repeats(ptr, lab):  # type: ignore[no-untyped-def]
    """Rows that repeat an earlier labeler of the same item: their number and the first one's position."""
    n_dup = 0
    first = -1
    for k in range(ptr.shape[0] - 1):
        for p in range(ptr[k] + 1, ptr[k + 1]):
            for q in range(ptr[k], p):
                if lab[q] == lab[p]:
                    n_dup += 1
                    if first < 0:
                        first = p
                    break
    return n_dup, first


class CsrBuilder:
    """Builds the item-sorted arrays from coded rows streamed in batches, with no copy of the stream.

    ``counts`` are the rows per item (known before the stream: DuckDB counts them with
    the item dictionary); each batch is scattered straight to its final place.
    """

    def __init__(self, counts: npt.NDArray[np.integer[Any]]) -> None:
        n_items = int(counts.shape[0])
        self.ptr = np.zeros(n_items + 1, dtype=np.int64)
        np.cumsum(counts, out=self.ptr[1:])
        n = int(self.ptr[-1])
        self.pos = self.ptr[:-1].copy()
        self.labeler = np.empty(n, dtype=np.int32)
        self.label = np.empty(n, dtype=np.int8)
        self.item_round = np.full(n_items, -1, dtype=np.int32)
        self.conflict = np.full(1, -1, dtype=np.int64)

    def add(self, ic: npt.NDArray[Any], lc: npt.NDArray[Any], y: npt.NDArray[Any], rc: npt.NDArray[Any]) -> None:
        if ic.size and (int(ic.min()) < 0 or int(ic.max()) >= self.pos.shape[0]):
            raise ValueError("item code out of range")
        if not serial(_scatter)(ic, lc, y, rc, self.ptr, self.pos, self.labeler, self.label, self.item_round,
                                   self.conflict):
            raise ValueError("more streamed rows for an item than counted")

    def finish(self) -> tuple[int, int]:
        """Check every slot was filled; return (repeated rows, position of the first)."""
        if not np.array_equal(self.pos, self.ptr[1:]):
            raise ValueError("the streamed rows do not match the per-item counts")
        n_dup, first = serial(_repeats)(self.ptr, self.labeler)
        return int(n_dup), int(first)
