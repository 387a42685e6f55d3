"""Compact ingest of footer-qualified Parquet files through pyarrow's reader (issue #43 item 5). An experiment.

What was tried
--------------
:func:`heroeval.read_compact` skips DuckDB's validating scan when the files'
Parquet footers show integer item and labeler ids, no missing value and
labels in [0, 1] (:func:`heroeval.ingest._parquet_int.plan`), and reads
those files by DuckDB's two streaming scans. This script reads the same
qualifying files with pyarrow's Parquet reader instead, row group by row
group (a thread decodes the next row group while the compiled kernels work
on this one), and two kernels of its own that take the ids as the files
hold them (no offsets computed by a query): the first read counts the rows
per item id and labeler id, the second places every row's code
``2 * labeler + label`` at its item's next slot, checking each row (ids in
the footers' ranges, labels 0 or 1: a footer that does not tell the truth is
an error naming the file and row). The builder is the product's
:class:`~heroeval.ingest.compact.CompactBuilder` and the result is assembled
by the product's own code, so it is the same
:class:`~heroeval.ingest.compact.CompactHistory` (each item's labels in file
order, where the DuckDB path streams them in no fixed order;
tests/experiments/test_parquet_int_pyarrow.py compares them).

Result (benchmarks/results/scale/ingest_1e9.md): pyarrow's batches are
reused from its memory pool, 2.0 GiB of fresh pages faulted at 1e9 against
DuckDB's 11 to 13 GiB, but its decoding was slower on the benchmark machine:
34 s counting and 36 s placing at 1e9, against DuckDB's 21 and 29 s in the
same run. Not adopted; the product was the branch ``ingest-1e9``'s
``ENGINE = "pyarrow"`` option until this script took it out of ``src/``.

Run (from the repository root)::

    PYTHONPATH=src .venv/bin/python -m experiments.parquet_int_pyarrow HISTORY.parquet --gold GOLD.parquet --compare

``benchmarks/ingest_1e9.py --readers pyarrow`` times it with the benchmark's phases and first-touch floor.
"""

from __future__ import annotations

import argparse
import logging
import queue
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval.core.jit import serial
from heroeval.errors import DataError
from heroeval.ingest import _duckdb
from heroeval.ingest._csr import range_labelers
from heroeval.ingest._parquet_int import ParquetPlan, plan
from heroeval.ingest.compact import CompactBuilder, CompactHistory
from heroeval.ingest.options import ColumnNames, Duplicates, RowRules
from heroeval.ingest.tables import file_stem

_log = logging.getLogger("heroeval")


def _count_ids(item, lab, low, l_low, counts, lab_counts):  # type: ignore[no-untyped-def]
    """``counts[id - low] += 1`` for each item id and ``lab_counts[id - l_low] += 1`` for each labeler id (the
    ids as the files hold them, no offsets computed beforehand); returns the batch position of the first id out
    of range, or -1."""
    n = counts.shape[0]
    m = lab_counts.shape[0]
    for a in range(item.shape[0]):
        u = item[a] - low
        v = lab[a] - l_low
        if u < 0 or u >= n or v < 0 or v >= m:
            return a
        counts[u] += 1
        lab_counts[v] += 1
    return -1


def _scatter_ids(item, lab, y, low, l_low, slot, lab_code, out):  # type: ignore[no-untyped-def]
    """The product's ``_scatter_slots`` (packed codes, no rounds) for ids as the files hold them: the item at
    offset ``item[a] - low`` takes ``2 * lab_code[lab[a] - l_low] + y[a]`` at its next free slot. Returns -1 when
    all rows were placed, else the batch position of the first that could not be (an id out of range, a labeler
    without a code, a label other than 0 and 1, or past the last slot)."""
    n_i = slot.shape[0]
    n_l = lab_code.shape[0]
    n_t = out.shape[0]
    for a in range(item.shape[0]):
        u = item[a] - low
        v = lab[a] - l_low
        if u < 0 or u >= n_i or v < 0 or v >= n_l:
            return a
        j = lab_code[v]
        p = slot[u]
        w = y[a]
        if j < 0 or p < 0 or p >= n_t or w < 0 or w > 1:
            return a
        out[p] = 2 * j + w
        slot[u] = p + 1
    return -1


def count_ids(builder: CompactBuilder, item: npt.NDArray[Any], lab: npt.NDArray[Any], l_low: int,
              labeler_counts: npt.NDArray[np.int64]) -> int:
    """Count a batch of rows into ``builder``'s slot table by item id and labeler id (``- l_low``) as the files
    hold them; returns the batch position of the first id out of range, or -1."""
    t = builder.table
    return int(serial(_count_ids)(item, lab, t.low, l_low, t.slot, labeler_counts))


def add_ids(builder: CompactBuilder, item: npt.NDArray[Any], lab: npt.NDArray[Any], y: npt.NDArray[Any],
            l_low: int, labeler_code: npt.NDArray[np.int32]) -> int:
    """Place a batch of rows given as the files hold them (no rounds) into ``builder``'s codes (after its
    ``layout``); returns the batch position of the first row that could not be placed, or -1."""
    t = builder.table
    return int(serial(_scatter_ids)(item, lab, y, t.low, l_low, t.slot, labeler_code, builder.code))


@dataclass(frozen=True, eq=False)
class _Batch:
    """One decoded batch: its columns as NumPy arrays (views of pyarrow's buffers) and where its rows are."""

    file: str
    first_row: int  # in its file, from 0
    cols: list[npt.NDArray[Any]]


def _batches(p: ParquetPlan, which: tuple[str, ...]) -> Iterator[_Batch]:
    """The files' rows, columns ``which``, row group by row group, decoded by a thread one row group ahead
    of the caller (pyarrow's reader and the compiled kernels release the GIL: two cores at work)."""
    import pyarrow.parquet as pq

    q: queue.Queue[_Batch | BaseException | None] = queue.Queue(maxsize=2)
    stop = threading.Event()

    def produce() -> None:
        try:
            for f in p.files:
                row = 0
                with pq.ParquetFile(f) as pf:  # (memory_map=True: the mapped file counts in the resident memory)
                    for g in range(pf.num_row_groups):  # a row group's columns decoded on every core
                        for b in pf.read_row_group(g, columns=list(which), use_threads=True).to_batches():
                            cols = [b.column(j).to_numpy(zero_copy_only=False) for j in range(b.num_columns)]
                            if stop.is_set():
                                return
                            q.put(_Batch(f, row, cols))
                            row += b.num_rows
            q.put(None)
        except BaseException as exc:  # handed to the caller, which raises it
            q.put(exc)

    t = threading.Thread(target=produce, name="heroeval-parquet", daemon=True)
    t.start()
    try:
        while (b := q.get()) is not None:
            if isinstance(b, BaseException):
                raise b
            yield b
    finally:
        stop.set()
        while t.is_alive():  # let the producer see the stop (a full queue would block it)
            try:
                q.get(timeout=0.05)
            except queue.Empty:
                pass
        t.join()


def _read_error(b: _Batch, pos: int, p: ParquetPlan, what: str) -> DataError:
    return DataError(f"{b.file}, row {b.first_row + pos + 1}: {what} (the footer's statistics give item ids in "
                     f"{list(p.item_range)}, labeler ids in {list(p.labeler_range)}, labels in [0, 1]); did the "
                     "file change while being read?")


def build(p: ParquetPlan) -> tuple[CompactBuilder, npt.NDArray[np.object_]]:
    """Two reads of the files: count the rows per item id and labeler, then place every row. Returns the filled
    builder (before :meth:`~heroeval.ingest.compact.CompactBuilder.finish`) and the labeler ids."""
    import pyarrow as pa

    i_lo, i_hi = p.item_range
    l_lo, l_hi = p.labeler_range
    builder = CompactBuilder(i_lo, i_hi, has_rounds=False)
    lab_counts = np.zeros(l_hi - l_lo + 1, dtype=np.int64)
    _log.info("pyarrow: %d rows; counting the rows of each item id in [%d, %d]", p.n_rows, i_lo, i_hi)
    try:
        n_seen = 0
        for b in _batches(p, (p.item_col, p.labeler_col)):
            bad = count_ids(builder, b.cols[0], b.cols[1], l_lo, lab_counts)
            if bad >= 0:
                raise _read_error(b, bad, p, "an item or labeler id outside the range")
            n_seen += b.cols[0].shape[0]
        if n_seen != p.n_rows:
            raise DataError(f"{p.files[0]}: {n_seen} rows read where the footers give {p.n_rows}; did the files "
                            "change while being read?")
        labeler_ids, lab_code = range_labelers(lab_counts, l_lo)
        _log.info("pyarrow: numbering the items")
        builder.layout(int(labeler_ids.shape[0]))
        _log.info("pyarrow: streaming %d rows into item order", p.n_rows)
        for b in _batches(p, (p.item_col, p.labeler_col, p.label_col)):
            y = b.cols[2].view(np.int8) if p.label_is_bool else b.cols[2]
            bad = add_ids(builder, b.cols[0], b.cols[1], y, l_lo, lab_code)
            if bad >= 0:
                raise _read_error(b, bad, p, "a row that has no slot or whose label is not 0 or 1")
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"could not read annotations {p.files[0]!r}: {exc}") from exc
    _log.info("pyarrow: rows in place; checking for repeated (item, labeler) pairs")
    return builder, labeler_ids


def read_compact_pyarrow(annotations: Any, *, gold: Any = None, name: str | None = None,
                         duplicates: Duplicates = "keep", columns: ColumnNames | None = None) -> CompactHistory:
    """:func:`heroeval.read_compact` for files that the footer plan takes, read by :func:`build` (pyarrow) rather
    than DuckDB's streams; the history is assembled (repeats, report, gold) by the product's own code.

    Raises DataError when the files do not qualify (the product would read them through its validating scan).
    """
    cols = columns if columns is not None else ColumnNames()
    files, fmt = _duckdb.expand_sources(annotations)
    p = plan(files, fmt, cols, _duckdb._range_pays)
    if p is None:
        raise DataError(f"{files[0]}: the footers do not qualify (see the log); read it with heroeval.read_compact")
    source = files[0] if len(files) == 1 else f"{len(files)} files like {files[0]}"
    rules = RowRules(duplicates=duplicates)  # ("keep" or "error", as read_compact allows)
    spec = _duckdb._ReadSpec(source, None, rules, cols, gold, name if name is not None else file_stem(files[0]))
    builder, labs = build(p)
    return _duckdb._compact_history(builder, p.n_rows, {}, labs, ["all"], spec)


def same_history(a: CompactHistory, b: CompactHistory) -> bool:
    """Whether two histories hold the same arrays, the codes compared once sorted within each item (the DuckDB
    path streams an item's rows in no fixed order)."""
    def canonical(ptr: npt.NDArray[np.int64], code: npt.NDArray[Any]) -> npt.NDArray[Any]:
        item = np.repeat(np.arange(ptr.shape[0] - 1), np.diff(ptr))
        return code[np.lexsort((code, item))]

    return (all(np.array_equal(getattr(a, f), getattr(b, f)) and getattr(a, f).dtype == getattr(b, f).dtype
                for f in ("ptr", "gold", "group"))
            and a.code.dtype == b.code.dtype and np.array_equal(canonical(a.ptr, a.code), canonical(b.ptr, b.code))
            and list(a.labeler_ids) == list(b.labeler_ids) and a.round_ids == b.round_ids
            and a.repeated_pairs == b.repeated_pairs
            and np.array_equal(a.gold_set.item_ids, b.gold_set.item_ids))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("history", nargs="+", help="Parquet file(s) or a glob")
    ap.add_argument("--gold", default=None, help="gold table (a file heroeval reads)")
    ap.add_argument("--compare", action="store_true",
                    help="also read with heroeval.read_compact (DuckDB's streams) and compare the results")
    a = ap.parse_args(argv)
    src = a.history[0] if len(a.history) == 1 else a.history
    t0 = time.perf_counter()
    try:
        h = read_compact_pyarrow(src, gold=a.gold)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"pyarrow: {h!r} in {time.perf_counter() - t0:.2f}s")
    if a.compare:
        import heroeval as he

        t0 = time.perf_counter()
        d = he.read_compact(src, gold=a.gold)
        same = same_history(h, d)
        print(f"duckdb:  {d!r} in {time.perf_counter() - t0:.2f}s; same history: {same}")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(relativeCreated)9.0f ms  %(message)s")  # the phases
    sys.exit(main())
