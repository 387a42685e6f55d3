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
:mod:`heroeval.ingest._duckdb`; files whose footers leave nothing to
validate skip its validating scan, :mod:`heroeval.ingest._parquet_int`);
the kernels here place the streamed rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval.core.memory import filled
from heroeval.ingest._csr import SlotTable, repeated_labels
from heroeval.ingest.annotations import AnnotationSet, IngestReport

__all__ = ["CompactHistory"]

_log = logging.getLogger("heroeval")


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


_NO_LABELS = np.zeros(0, dtype=np.int8)


class CompactBuilder:
    """Builds a :class:`CompactHistory`'s arrays from two streamed scans of integer item ids in ``[low, high]``.

    :meth:`count` every batch of item offsets (``id - low``); :meth:`layout`
    (positions by label count); :meth:`add` every batch of rows; :meth:`finish`.
    Memory: that of a :class:`~heroeval.ingest._csr.SlotTable`, besides the arrays.
    """

    def __init__(self, low: int, high: int, has_rounds: bool) -> None:
        self.table = SlotTable(low, high, by_size=True, has_rounds=has_rounds)

    def count(self, offsets: npt.NDArray[Any], labeler_offsets: npt.NDArray[Any] | None = None,
              labeler_counts: npt.NDArray[np.int64] | None = None) -> None:
        """Count a batch of rows by item offset (and, given both, by labeler offset into ``labeler_counts``)."""
        self.table.count(offsets, labeler_offsets, labeler_counts)

    def layout(self, n_labelers: int) -> None:
        """Number the items by label count and allocate the arrays (codes for ``n_labelers`` labelers)."""
        self.ptr = self.table.layout()
        n_items = int(self.ptr.shape[0] - 1)
        _log.info("compact: %d items numbered; allocating the codes", n_items)
        # written first by every core (see heroeval.core.memory), then rewritten by the serial scatter
        self.code = filled(int(self.ptr[-1]), code_dtype(n_labelers), 0)
        # without rounds every item is in round 0: zero pages, never written
        self.group = filled(n_items, np.int32, -1) if self.table.has_rounds else np.zeros(n_items, dtype=np.int32)

    def add(self, offsets: npt.NDArray[Any], labeler_offsets: npt.NDArray[Any], y: npt.NDArray[Any],
            rc: npt.NDArray[Any], labeler_code: npt.NDArray[np.int32]) -> None:
        self.table.scatter(offsets, labeler_offsets, y, rc, labeler_code, self.code, _NO_LABELS, True)

    def positions(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Each id's item position here (-1: not an item); after :meth:`finish`."""
        return self.table.positions(ids)

    def finish(self) -> tuple[int, int, int]:
        """Check every slot was filled. Returns (repeated labels, position of the first, first item in two rounds
        or -1)."""
        conflict = self.table.settle(self.ptr, self.group)
        _log.info("compact: every slot filled once; looking for repeated (item, labeler) pairs")
        n_dup, first = repeated_labels(self.ptr, self.code, 1)
        return n_dup, first, conflict

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
