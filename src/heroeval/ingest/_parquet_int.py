"""Compact ingest of Parquet files whose footers leave nothing to validate (no validating scan).

:func:`heroeval.ingest.read.read_compact` reads files through DuckDB in
three scans: one that validates and counts the rows (missing values, labels
that are not binary, the ids' ranges), one that counts the rows per item id,
and one that streams the rows to their places. When the files' own footers
already answer the first scan's questions, it is not needed: :func:`plan`
reads the footers and, when every file holds the same integer item and
labeler columns and an integer or boolean label column, no round column,
and row group statistics showing no missing value and labels in [0, 1],
returns the ids' ranges and the row count. Those files are then read by
DuckDB's two streaming scans (``ENGINE = "duckdb"``, the default; see
``heroeval.ingest._duckdb._compact_from_footers``) or by :func:`build`,
pyarrow's Parquet reader row group by row group with the compiled kernels
computing the offsets and codes themselves (``ENGINE = "pyarrow"``: fewer
fresh pages, but on the benchmark machine its decoding was slower than
DuckDB's; benchmarks/results/scale/ingest_1e9.md). The result is the same
:class:`~heroeval.ingest.compact.CompactHistory` (tests compare the paths;
the SQL path streams an item's rows in no fixed order, pyarrow in file
order). Files that do not qualify go through the validating scan as before,
so a bad row is named by the same message. The kernels still check every row
(ids in the footers' ranges, labels 0 or 1): a footer that does not tell the
truth is an error naming the file and row, not a wrong history.
"""
from __future__ import annotations

import logging
import math
import queue
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.core import jit
from heroeval.errors import DataError
from heroeval.ingest._csr import range_labelers
from heroeval.ingest.compact import CompactBuilder
from heroeval.ingest.options import ColumnNames
from heroeval.ingest.tables import annotation_columns

_log = logging.getLogger("heroeval")

ENABLED = True
"""Whether :func:`plan` may take files off the DuckDB path (tests and benchmarks switch it off to compare)."""

ENGINE = "duckdb"
"""What reads files that :func:`plan` took: ``"duckdb"`` (its two streaming scans, without the validating one) or
``"pyarrow"`` (:func:`build`)."""

_INT64_MAX = int(np.iinfo(np.int64).max)


@dataclass(frozen=True)
class ParquetPlan:
    """Files qualifying for :func:`build`: the columns read, the row and id counts the footers give."""

    files: tuple[str, ...]
    item_col: str
    labeler_col: str
    label_col: str
    n_rows: int
    item_range: tuple[int, int]
    labeler_range: tuple[int, int]
    label_is_bool: bool


def plan(files: Sequence[str], fmt: str, columns: ColumnNames, range_pays: Any) -> ParquetPlan | None:
    """The plan for reading ``files`` with pyarrow, or None (read them through DuckDB) with the reason logged.

    ``range_pays(low, high, n_rows)``: whether ids in ``[low, high]`` go through a table over their range (the
    DuckDB path's rule, so both paths take the same files).
    """
    if not ENABLED or not jit.HAVE_NUMBA or fmt != "parquet":
        return None
    try:
        got = _plan(files, columns, range_pays)
    except (OSError, ValueError, TypeError, DataError) as exc:  # DuckDB reads them and names what is wrong
        _log.debug("read_compact: pyarrow path not taken (%s)", exc)
        return None
    if isinstance(got, str):
        _log.info("read_compact: reading through DuckDB (%s)", got)
        return None
    return got


def _plan(files: Sequence[str], columns: ColumnNames, range_pays: Any) -> ParquetPlan | str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if any("=" in part for f in files for part in PurePath(f).parts[:-1]):
        return "a hive-partitioned path (DuckDB adds its columns)"
    metas = [pq.read_metadata(f) for f in files]
    schemas = [m.schema.to_arrow_schema() for m in metas]
    names: dict[str, None] = {}
    for s in schemas:
        names.update(dict.fromkeys(s.names))
    cols = pd.DataFrame(columns=list(names))
    i_c, l_c, y_c, r_c = annotation_columns(cols, columns.item, columns.labeler, columns.label, columns.round,
                                            files[0])
    if r_c is not None:
        return f"a round column {r_c!r}"
    types = []
    for f, s in zip(files, schemas, strict=True):
        if len(s.names) != len(set(s.names)) or any(pa.types.is_nested(t) for t in s.types):
            return f"{f}: repeated or nested columns"
        if any(c not in s.names for c in (i_c, l_c, y_c)):
            return f"{f}: not every file has the columns {i_c!r}, {l_c!r}, {y_c!r}"
        types.append(tuple(s.field(c).type for c in (i_c, l_c, y_c)))
    ti, tl, ty = types[0]
    if any(t != types[0] for t in types):
        return "the files' column types differ"
    if not (pa.types.is_integer(ti) and pa.types.is_integer(tl)):
        return "item or labeler ids that are not integers"
    if not (pa.types.is_integer(ty) or pa.types.is_boolean(ty)):
        return "labels that are not integers or booleans"
    n_rows = 0
    lo = [math.inf, math.inf, math.inf]
    hi = [-math.inf, -math.inf, -math.inf]
    for f, m, s in zip(files, metas, schemas, strict=True):
        idx = [s.get_field_index(c) for c in (i_c, l_c, y_c)]
        for g in range(m.num_row_groups):
            rg = m.row_group(g)
            if rg.num_rows == 0:
                continue
            n_rows += rg.num_rows
            for k, j in enumerate(idx):
                st = rg.column(j).statistics
                if st is None or not st.has_min_max or not st.has_null_count:
                    return f"{f}: row group {g} has no statistics for column {(i_c, l_c, y_c)[k]!r}"
                if st.null_count != 0:
                    return f"{f}: missing values (rows to drop and count)"
                lo[k], hi[k] = min(lo[k], int(st.min)), max(hi[k], int(st.max))
    if n_rows == 0:
        return "no rows"
    if lo[2] < 0 or hi[2] > 1:
        return "labels other than 0 and 1 (DuckDB names the first)"
    i_lo, i_hi, l_lo, l_hi = int(lo[0]), int(hi[0]), int(lo[1]), int(hi[1])
    if i_hi > _INT64_MAX or l_hi > _INT64_MAX:
        return "ids past int64"
    if not range_pays(i_lo, i_hi, n_rows):
        return "item ids spread over a range longer than the rows"
    if not range_pays(l_lo, l_hi, 0):
        return "labeler ids spread over a long range"
    return ParquetPlan(tuple(files), i_c, l_c, y_c, n_rows, (i_lo, i_hi), (l_lo, l_hi), pa.types.is_boolean(ty))


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
            bad = builder.count_ids(b.cols[0], b.cols[1], l_lo, lab_counts)
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
            bad = builder.add_ids(b.cols[0], b.cols[1], y, l_lo, lab_code)
            if bad >= 0:
                raise _read_error(b, bad, p, "a row that has no slot or whose label is not 0 or 1")
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"could not read annotations {p.files[0]!r}: {exc}") from exc
    _log.info("pyarrow: rows in place; checking for repeated (item, labeler) pairs")
    return builder, labeler_ids
