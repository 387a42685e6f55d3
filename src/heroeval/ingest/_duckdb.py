"""Ingest of large annotation logs through DuckDB (the embedded engine).

DuckDB scans CSV or Parquet files (one file, a glob of many, or a list),
validates and counts the rows in SQL, builds the item, labeler and round
dictionaries, and returns the annotations as compact arrays sorted by item
and labeler; it spills to disk when the data do not fit in memory. The
result is the same :class:`~heroeval.ingest.annotations.AnnotationSet` and the same
ingest report (rows read, used, and dropped by reason) as the pandas reader,
with two differences that are documented in docs/data.md: an integer item
column in Parquet keeps its integer ids (ordered as numbers), and the rows
of a CSV file are named by their position in the file (found by a second,
single-file scan) only when there is an error to report.
"""

from __future__ import annotations

import glob
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.core import jit
from heroeval.core.memory import filled
from heroeval.errors import DataError
from heroeval.ingest import _parquet_int
from heroeval.ingest._csr import CsrBuilder, RangeCsrBuilder, range_labelers
from heroeval.ingest.annotations import (
    AnnotationSet,
    IngestReport,
    TableReport,
    _attach_gold,
    repeated_pair_error,
)
from heroeval.ingest.coding import whole_numbers
from heroeval.ingest.compact import CompactBuilder, CompactHistory
from heroeval.ingest.labels import parse_binary
from heroeval.ingest.options import ColumnNames, RowRules
from heroeval.ingest.tables import (
    GOLD_COLUMNS,
    ITEM_COLUMNS,
    LoadedTable,
    TableLike,
    annotation_columns,
    file_stem,
    load_table,
    resolve_column,
)

_log = logging.getLogger("heroeval")

_TRUE_SQL = "('1', 'true', 't', 'yes', '1.0')"
_FALSE_SQL = "('0', 'false', 'f', 'no', '0.0')"
_INT_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "HUGEINT")
_NUM_TYPES = (*_INT_TYPES, "FLOAT", "DOUBLE", "REAL")


def expand_sources(source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> tuple[list[str], str]:
    """The files named by a path, a glob or a list of them, and their format ('parquet' or 'csv')."""
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    files: list[str] = []
    for s in items:
        p = str(s)
        if os.path.isdir(p):
            found = sorted(glob.glob(os.path.join(p, "*.parquet")) + glob.glob(os.path.join(p, "*.csv*")))
        elif any(ch in p for ch in "*?["):
            found = sorted(glob.glob(p, recursive=True))
        else:
            if not os.path.exists(p):
                raise DataError(f"annotations file {p!r} does not exist")
            found = [p]
        if not found:
            raise DataError(f"annotations: {p!r} matches no file")
        files.extend(found)
    fmts = {_format(f) for f in files}
    if len(fmts) != 1 or None in fmts:
        raise DataError(
            f"annotations: the DuckDB engine reads Parquet or CSV/TSV files of one kind; got {sorted(files)[:5]}"
        )
    return files, str(fmts.pop())


def _format(path: str) -> str | None:
    suf = [s.lower() for s in Path(path).suffixes]
    if suf and suf[-1] in (".gz", ".zst"):
        suf = suf[:-1]
    if not suf:
        return None
    return {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv", ".txt": "csv"}.get(suf[-1])


def _plain(x: Any) -> Any:
    """An id as a message shows it: ``5``, not ``np.int64(5)``."""
    return x.item() if isinstance(x, np.generic) else x


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


@dataclass(frozen=True)
class _ReadSpec:
    """What the assembly of a DuckDB read needs besides its arrays: where the rows came from and what was asked."""

    source: str  # the annotations, as messages name them
    round_col: str | None  # the round column found (None: every item in round "all")
    rules: RowRules
    columns: ColumnNames  # as given: the gold table's columns are found with them at the end
    gold: TableLike | None
    name: str  # the result's name (default: the first file's stem)


@dataclass(frozen=True, eq=False)
class _ItemRows:
    """Annotations sorted by item: each item's offsets (``ptr``), the labeler codes, the labels, each item's round."""

    ptr: npt.NDArray[np.int64]
    labeler: npt.NDArray[Any]
    label: npt.NDArray[np.int8]
    item_round: npt.NDArray[Any]


def read_with_duckdb(
    annotations: Any,
    *,
    gold: TableLike | None,
    columns: ColumnNames,
    rules: RowRules,
    name: str | None,
    memory_limit: str | None = None,
    temp_directory: str | None = None,
    progress: bool = False,
    compact: bool = False,
) -> AnnotationSet | CompactHistory:
    """See :func:`heroeval.read_annotations` (``engine="duckdb"``); ``compact``: :func:`heroeval.ingest.read.read_compact`."""
    import duckdb

    duplicates, missing = rules.duplicates, rules.missing
    files, fmt = expand_sources(annotations)
    source = files[0] if len(files) == 1 else f"{len(files)} files like {files[0]}"
    footers = _parquet_int.plan(files, fmt, columns, _range_pays) if compact else None
    tmp = temp_directory or tempfile.gettempdir()

    def connect() -> duckdb.DuckDBPyConnection:
        c = duckdb.connect()
        c.execute(f"SET temp_directory = {_lit(tmp)}")
        if memory_limit is not None:
            c.execute(f"SET memory_limit = {_lit(memory_limit)}")
        c.execute(f"SET enable_progress_bar = {'true' if progress else 'false'}")
        return c

    con = connect()
    flist = "[" + ", ".join(_lit(f) for f in files) + "]"
    if footers is not None:  # the footers leave nothing to validate: no validating scan
        spec = _ReadSpec(source, None, rules, columns, gold, name if name is not None else file_stem(files[0]))
        try:
            cbuilder, labs = _compact_from_footers(con, footers, flist, source, memory_limit, tmp)
            return _compact_history(cbuilder, footers.n_rows, {}, labs, ["all"], spec)
        except _FootersWrong as exc:  # the validating scan below names the row (or counts it, as the rules say)
            _log.warning("read_compact: %s; reading %s again with the validating scan", exc, source)
            con = connect()
    sep = "\\t" if fmt == "tsv" else ","
    if fmt == "parquet":
        scan = f"read_parquet({flist}, filename = true, file_row_number = true, union_by_name = true)"
    else:
        scan = (f"read_csv({flist}, header = true, all_varchar = true, filename = true, union_by_name = true, "
                f"delim = '{sep}', quote = '\"')")
    try:
        desc = con.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()
    except duckdb.Error as exc:
        raise DataError(f"could not read annotations {source!r}: {exc}") from exc
    types = {str(r[0]): str(r[1]).upper() for r in desc}
    cols = pd.DataFrame(columns=[c for c in types if c not in ("filename", "file_row_number")])
    i_c, l_c, y_c, r_c = annotation_columns(cols, columns.item, columns.labeler, columns.label, columns.round, source)
    spec = _ReadSpec(source, r_c, rules, columns, gold, name if name is not None else file_stem(files[0]))

    def id_expr(c: str, keep_int: bool) -> tuple[str, str]:
        t = types[c]
        if t in _INT_TYPES:  # an integer is never blank
            return f"CAST({_q(c)} AS {'BIGINT' if keep_int else 'VARCHAR'})", f"({_q(c)} IS NULL)"
        v = f"CAST({_q(c)} AS VARCHAR)"
        return v, f"({v} IS NULL OR trim({v}) = '')"

    i_e, i_m = id_expr(i_c, True)
    l_e, l_m = id_expr(l_c, False)
    yt = types[y_c]
    if yt == "BOOLEAN":
        y_val, y_m, y_bad = f"CAST({_q(y_c)} AS TINYINT)", f"({_q(y_c)} IS NULL)", "false"
    elif yt in _NUM_TYPES or yt.startswith("DECIMAL"):
        y_val = f"CAST({_q(y_c)} AS TINYINT)"
        y_m = f"({_q(y_c)} IS NULL OR isnan(CAST({_q(y_c)} AS DOUBLE)))"
        y_bad = f"(NOT {y_m} AND CAST({_q(y_c)} AS DOUBLE) NOT IN (0, 1))"
    else:
        low = f"lower(trim(CAST({_q(y_c)} AS VARCHAR)))"
        y_m = f"({_q(y_c)} IS NULL OR {low} = '')"
        y_val = f"CAST(({low} IN {_TRUE_SQL}) AS TINYINT)"
        y_bad = f"(NOT {y_m} AND {low} NOT IN {_TRUE_SQL} AND {low} NOT IN {_FALSE_SQL})"
    if r_c is not None:
        r_e, r_m = id_expr(r_c, False)
    else:
        r_e, r_m = "'all'", "false"
    pos = "filename, file_row_number" if fmt == "parquet" else "filename"
    int_items, int_labs = types[i_c] in _INT_TYPES, types[l_c] in _INT_TYPES
    l_raw = f"CAST({_q(l_c)} AS BIGINT)" if int_labs else "NULL"
    con.execute(
        f"CREATE TEMP VIEW hv_flags AS SELECT {i_e} AS i, {l_e} AS l, {l_raw} AS lraw, {r_e} AS r, {y_val} AS y, "
        f"{i_m} AS im, {l_m} AS lm, {y_m} AS ym, {y_bad} AS yb, {r_m} AS rm, {_q(y_c)} AS yraw, {pos} FROM {scan}"
    )
    _log.info("DuckDB: counting and validating the rows of %s", source)
    try:
        n, bad, m_item, m_lab, m_label, m_round, i_lo, i_hi, l_lo, l_hi = con.execute(
            "SELECT count(*), count_if(yb), count_if(im), count_if(NOT im AND lm), count_if(NOT im AND NOT lm AND ym), "
            "count_if(NOT im AND NOT lm AND NOT ym AND rm), "
            + ("min(i), max(i), " if int_items else "NULL, NULL, ")
            + ("min(lraw), max(lraw) " if int_labs else "NULL, NULL ") + "FROM hv_flags"
        ).fetchone() or (0, 0, 0, 0, 0, 0, None, None, None, None)
    except duckdb.Error as exc:
        raise DataError(f"could not read annotations {source!r}: {exc}") from exc

    def where(cond: str) -> tuple[str, Any]:
        """Position and raw label of the first row satisfying ``cond``."""
        if fmt == "parquet":
            f, r, y = con.execute(
                f"SELECT filename, file_row_number, yraw FROM hv_flags WHERE {cond} "
                "ORDER BY filename, file_row_number LIMIT 1").fetchone() or ("?", 0, None)
            return f"{f}, row {int(r) + 1}", y
        f, y = con.execute(f"SELECT filename, yraw FROM hv_flags WHERE {cond} ORDER BY filename LIMIT 1").fetchone() or (
            "?", None)
        one = con.execute(
            f"SELECT rn FROM (SELECT row_number() OVER () AS rn, * FROM (SELECT {i_m} AS im, {l_m} AS lm, {y_m} AS ym, "
            f"{y_bad} AS yb, {r_m} AS rm FROM read_csv({_lit(str(f))}, header = true, all_varchar = true, "
            f"delim = '{sep}', quote = '\"'))) WHERE {cond} LIMIT 1").fetchone()
        r = int(one[0]) if one else 0
        return f"{f}, row {r} (line {r + 1})", y

    if bad:
        at, y = where("yb")
        raise DataError(
            f"{at}: label {y!r} in column {y_c!r} is not binary (expected 0/1 or true/false); {bad} such row(s) in "
            "all. Multi-class labels are not supported yet."
        )
    dropped: dict[str, int] = {}
    if missing == "error" and (m_item or m_lab or m_label or m_round):
        at, _ = where("im OR lm OR ym OR rm")
        raise DataError(f"{at}: missing item, labeler, label or round (missing='error')")
    for reason, k in (("missing item id", m_item), ("missing labeler id", m_lab), ("missing label", m_label),
                      ("missing round", m_round)):
        if k:
            dropped[reason] = int(k)
    con.execute("SET preserve_insertion_order = false")  # every result below is ordered explicitly
    con.execute("CREATE TEMP VIEW hv_clean AS SELECT * FROM hv_flags WHERE NOT (im OR lm OR ym OR rm)")
    n_used = int(n) - sum(dropped.values())
    if duplicates != "first" and jit.HAVE_NUMBA and i_lo is not None and _range_pays(int(i_lo), int(i_hi), n_used):
        # integer item ids over a range no longer than the rows: no item dictionary (RangeCsrBuilder)
        clean = "hv_clean" if dropped else "hv_flags"  # without a WHERE, DuckDB reads only the columns streamed
        try:
            lab_range = (int(l_lo), int(l_hi)) if l_lo is not None and _range_pays(int(l_lo), int(l_hi), 0) else None
            builder, ids, labs, rounds = _stream_int_items(con, clean, int(i_lo), int(i_hi), lab_range,
                                                           r_c is not None, n_used, compact)
        except duckdb.OutOfMemoryException as exc:
            raise DataError(f"annotations {source!r}: DuckDB ran out of memory ({exc}); raise memory_limit "
                            f"(now {memory_limit or 'DuckDB default'}) or free disk space in {tmp}") from exc
        except ValueError as exc:  # pragma: no cover - the files changed between DuckDB's passes
            raise DataError(f"{source}: {exc}; did the files change while being read?") from exc
        finally:
            con.close()
        if isinstance(builder, CompactBuilder):
            return _compact_history(builder, int(n), dropped, labs, rounds, spec)
        assert ids is not None and isinstance(builder, RangeCsrBuilder)
        return _from_csr(builder, int(n), dropped, ids, labs, rounds, spec)
    if compact:
        con.close()
        raise DataError(f"annotations {source!r}: compact reading needs integer item ids (a Parquet integer column) "
                        "whose range is no longer than the number of rows, numba, and duplicates other than 'first'; "
                        "read with read_annotations instead")
    _log.info("DuckDB: %d rows read; building the item and labeler dictionaries", n)
    con.execute("CREATE TEMP TABLE hv_items AS SELECT i, CAST(count(*) AS BIGINT) AS n, "
                "CAST(row_number() OVER (ORDER BY i) - 1 AS INTEGER) AS ic FROM hv_clean GROUP BY i")
    con.execute("CREATE TEMP TABLE hv_labs AS SELECT l, CAST(row_number() OVER (ORDER BY l) - 1 AS INTEGER) AS lc "
                "FROM (SELECT DISTINCT l FROM hv_clean)")
    con.execute("CREATE TEMP TABLE hv_rounds AS SELECT r, CAST(row_number() OVER (ORDER BY r) - 1 AS INTEGER) AS rc "
                "FROM (SELECT DISTINCT r FROM hv_clean)")
    sql = ("SELECT it.ic, lb.lc, c.y, rd.rc FROM hv_clean c JOIN hv_items it ON c.i = it.i "
           "JOIN hv_labs lb ON c.l = lb.l JOIN hv_rounds rd ON c.r = rd.r")
    fast = duplicates != "first" and jit.HAVE_NUMBA
    try:
        if fast:
            # each item's row count is known (hv_items.n): scatter the streamed rows straight to their places
            _log.info("DuckDB: streaming %d coded rows into item order", n_used)
            counts = np.asarray(con.execute("SELECT n FROM hv_items ORDER BY ic").fetchnumpy()["n"], dtype=np.int64)
            csr = CsrBuilder(counts)
            del counts
            for batch in con.sql(sql).to_arrow_reader(1 << 20):
                csr.add(*(batch.column(j).to_numpy() for j in range(4)))
        else:
            # duplicates="first" needs the file order within each item: DuckDB sorts (spilling if need be)
            order = "it.ic, lb.lc" + (", c.filename, c.file_row_number" if fmt == "parquet" else "")
            if duplicates == "first" and fmt != "parquet":
                raise DataError("duplicates='first' with engine='duckdb' needs Parquet (file row numbers); use "
                                "engine='pandas' for CSV, or duplicates='keep'")
            _log.info("DuckDB: sorting the annotations by item")
            res = con.execute(f"{sql} ORDER BY {order}").fetchnumpy()
            ic = np.asarray(res.pop("ic"), dtype=np.int32)
            lc = np.asarray(res.pop("lc"), dtype=np.int32)
            y = np.asarray(res.pop("y"), dtype=np.int8)
            rc = np.asarray(res.pop("rc"), dtype=np.int32)
            del res
    except duckdb.OutOfMemoryException as exc:
        raise DataError(f"annotations {source!r}: DuckDB ran out of memory ({exc}); raise memory_limit "
                        f"(now {memory_limit or 'DuckDB default'}) or free disk space in {tmp}") from exc
    item_ids: npt.NDArray[Any] = np.asarray(
        con.execute("SELECT i FROM hv_items ORDER BY ic").fetchnumpy()["i"])
    if item_ids.dtype.kind not in "iu":
        item_ids = item_ids.astype(object)
    labeler_ids = np.asarray(con.execute("SELECT l FROM hv_labs ORDER BY lc").fetchnumpy()["l"]).astype(object)
    round_names = [str(x) for x in con.execute("SELECT r FROM hv_rounds ORDER BY rc").fetchnumpy()["r"]]
    con.close()
    n_items = int(item_ids.shape[0])
    notes: dict[str, int] = {}
    if fast:
        return _from_csr(csr, int(n), dropped, item_ids, labeler_ids, round_names, spec)
    dup = np.zeros(ic.shape[0], dtype=bool)
    if ic.size > 1:
        dup[1:] = (ic[1:] == ic[:-1]) & (lc[1:] == lc[:-1])
    n_dup = int(dup.sum())
    if n_dup:
        if duplicates == "error":
            k = int(np.flatnonzero(dup)[0])
            raise repeated_pair_error(source, _plain(item_ids[ic[k]]), labeler_ids[lc[k]], n_dup)
        if duplicates == "first":
            dropped["repeated (item, labeler) pair, later rows dropped"] = n_dup
            keep = ~dup
            ic, lc, y, rc = ic[keep], lc[keep], y[keep], rc[keep]
        else:
            notes["repeated (item, labeler) pair kept as separate labels"] = n_dup
    counts = np.bincount(ic, minlength=n_items)
    ptr = np.zeros(n_items + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    starts = ptr[:-1]
    item_round = np.minimum.reduceat(rc, starts) if n_items else np.zeros(0, dtype=np.int32)
    if n_items and r_c is not None:
        conflict_mask = np.maximum.reduceat(rc, starts) != item_round
        if conflict_mask.any():
            k = int(np.flatnonzero(conflict_mask)[0])
            raise DataError(
                f"{source}: item {_plain(item_ids[k])!r} appears in more than one round (column {r_c!r}); an item "
                "must belong to one round; pass round_col=False to ignore the column")
    reports = [TableReport("annotations", source, int(n), int(ic.shape[0]), dropped, notes)]
    return _finish(reports, item_ids, labeler_ids, round_names, _ItemRows(ptr, lc, y, item_round), spec,
                   bool(n_dup) and duplicates == "keep")


RANGE_MIN_IDS = 1 << 20
"""Integer item ids spanning a range up to this long, or up to the number of rows, are read without an item
dictionary (:class:`~heroeval.ingest._csr.RangeCsrBuilder`: 4 bytes per id in the range)."""

_BATCH = 1 << 20


def _range_pays(low: int, high: int, n_rows: int) -> bool:
    """Whether integer ids in ``[low, high]`` go through a code table over their range rather than a dictionary."""
    return high - low < max(n_rows, RANGE_MIN_IDS)


def _prefetched(con: Any, sql: str) -> Iterator[list[npt.NDArray[Any]]]:
    """The columns of ``sql``'s result in batches, the next batch fetched by DuckDB in a thread while the caller
    works on this one (the compiled kernels release the GIL, so the two overlap on two cores)."""
    reader = con.sql(sql).to_arrow_reader(_BATCH)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="heroeval-ingest") as pool:
        def fetch() -> list[npt.NDArray[Any]] | None:
            try:
                b = reader.read_next_batch()
            except StopIteration:
                return None
            return [b.column(j).to_numpy() for j in range(b.num_columns)]

        nxt = pool.submit(fetch)
        while (cols := nxt.result()) is not None:
            nxt = pool.submit(fetch)
            yield cols


def _stream_int_items(con: Any, clean: str, i_lo: int, i_hi: int, lab_range: tuple[int, int] | None,
                      has_rounds: bool, n_used: int, compact: bool = False, check_labels: bool = False
                      ) -> tuple[RangeCsrBuilder | CompactBuilder, npt.NDArray[np.int64] | None, npt.NDArray[Any],
                                 list[str]]:
    """Two streamed scans of integer item ids: count the rows per id, then scatter the rows to their items.

    Into a :class:`RangeCsrBuilder` (items in id order; returns their ids) or,
    ``compact``, a :class:`~heroeval.ingest.compact.CompactBuilder` (items by
    label count, codes; no ids returned). Labelers: integer ids in
    ``lab_range`` (the lowest and highest, when that range is at most
    :data:`RANGE_MIN_IDS` long) are counted by the first scan and go through a
    code table indexed by ``id - lowest``; others through DuckDB's dictionary
    of the distinct ids (a join with a small table). Codes follow the ids'
    string order, as with the dictionary path.
    """
    builder: RangeCsrBuilder | CompactBuilder = (CompactBuilder(i_lo, i_hi, has_rounds) if compact
                                                 else RangeCsrBuilder(i_lo, i_hi, has_rounds))
    _log.info("DuckDB: %d rows; counting the rows of each item id in [%d, %d]", n_used, i_lo, i_hi)
    off = "INTEGER" if i_hi - i_lo < 2**31 - 1 else "BIGINT"  # offsets in 4 bytes where they fit: less to stream
    if lab_range is not None:
        l_lo = lab_range[0]
        lab_counts = np.zeros(lab_range[1] - l_lo + 1, dtype=np.int64)
        l_off = f"CAST(lraw - {l_lo} AS INTEGER)"
        for ik, lk in _prefetched(con, f"SELECT CAST(i - {i_lo} AS {off}) AS ik, {l_off} AS lk FROM {clean}"):
            builder.count(ik, lk, lab_counts)
    else:
        for (ik,) in _prefetched(con, f"SELECT CAST(i - {i_lo} AS {off}) AS ik FROM {clean}"):
            builder.count(ik)
    joins = ""
    lab_code: npt.NDArray[np.int32]
    if lab_range is not None:
        labeler_ids, lab_code = range_labelers(lab_counts, l_lo)
        l_sel = f"CAST(c.lraw - {l_lo} AS INTEGER)"
    else:
        con.execute(f"CREATE TEMP TABLE hv_labs AS SELECT l, CAST(row_number() OVER (ORDER BY l) - 1 AS INTEGER) "
                    f"AS lc FROM (SELECT DISTINCT l FROM {clean})")
        labeler_ids = np.asarray(con.execute("SELECT l FROM hv_labs ORDER BY lc").fetchnumpy()["l"]).astype(object)
        lab_code = np.arange(labeler_ids.shape[0], dtype=np.int32)
        joins += " JOIN hv_labs lb ON c.l = lb.l"
        l_sel = "lb.lc"
    _log.info("DuckDB: numbering the items")
    item_ids: npt.NDArray[np.int64] | None = None
    if isinstance(builder, CompactBuilder):
        builder.layout(int(labeler_ids.shape[0]))
    else:
        item_ids = builder.layout()
    if has_rounds:
        con.execute(f"CREATE TEMP TABLE hv_rounds AS SELECT r, CAST(row_number() OVER (ORDER BY r) - 1 AS INTEGER) "
                    f"AS rc FROM (SELECT DISTINCT r FROM {clean})")
        round_names = [str(x) for x in con.execute("SELECT r FROM hv_rounds ORDER BY rc").fetchnumpy()["r"]]
        joins += " JOIN hv_rounds rd ON c.r = rd.r"
        r_sel = "rd.rc"
    else:
        round_names, r_sel = ["all"], ""  # every item in round 0: no column to stream
    _log.info("DuckDB: streaming %d rows into item order", n_used)
    sql = f"SELECT CAST(c.i - {i_lo} AS {off}) AS ik, {l_sel} AS lk, c.y{', ' + r_sel if r_sel else ''} FROM {clean} c{joins}"
    no_rounds = np.zeros(0, dtype=np.int32)
    place = builder.add if isinstance(builder, CompactBuilder) else builder.add_mapped
    for cols in _prefetched(con, sql):
        y = cols[2]
        if check_labels and y.size and (int(y.max()) > 1 or int(y.min()) < 0):  # ``check_labels``: the footer path
            raise _FootersWrong(_LABEL_OUTSIDE)
        place(cols[0], cols[1], y, cols[3] if has_rounds else no_rounds, lab_code)
    _log.info("DuckDB: rows in place; checking for repeated (item, labeler) pairs")
    return builder, item_ids, labeler_ids, round_names


_LABEL_OUTSIDE = "a label outside 0 and 1, where the Parquet footers' statistics showed none"


class _FootersWrong(Exception):
    """A row contradicts the footers the footer path relied on (:func:`_compact_from_footers`)."""


def _compact_from_footers(con: Any, p: _parquet_int.ParquetPlan, flist: str, source: str, memory_limit: str | None,
                          tmp: str) -> tuple[CompactBuilder, npt.NDArray[Any]]:
    """The compact history's builder, filled by :func:`_stream_int_items`' two scans of files whose footers
    (:func:`heroeval.ingest._parquet_int.plan`) show no missing value, labels in [0, 1] and the ids' ranges."""
    import duckdb

    con.execute("SET preserve_insertion_order = false")
    con.execute(f"CREATE TEMP VIEW hv_plain AS SELECT CAST({_q(p.item_col)} AS BIGINT) AS i, "
                f"CAST({_q(p.labeler_col)} AS BIGINT) AS lraw, CAST({_q(p.label_col)} AS TINYINT) AS y "
                f"FROM read_parquet({flist}, union_by_name = true)")
    try:  # the footers' statistics said every label is 0 or 1: each streamed batch is checked (a row that says
        # otherwise stops the footer path)
        builder, _, labs, _ = _stream_int_items(con, "hv_plain", *p.item_range, p.labeler_range, False, p.n_rows,
                                                True, check_labels=True)
    except duckdb.OutOfMemoryException as exc:
        raise DataError(f"annotations {source!r}: DuckDB ran out of memory ({exc}); raise memory_limit "
                        f"(now {memory_limit or 'DuckDB default'}) or free disk space in {tmp}") from exc
    except duckdb.Error as exc:
        raise DataError(f"could not read annotations {source!r}: {exc}") from exc
    except _FootersWrong as exc:
        raise _FootersWrong(f"{source}: {exc}") from exc
    except ValueError as exc:  # an id outside the footers' ranges: the files changed, or their statistics are wrong
        raise _FootersWrong(f"{source}: {exc}") from exc
    finally:
        con.close()
    assert isinstance(builder, CompactBuilder)
    return builder, labs


def _gold_table(spec: _ReadSpec) -> LoadedTable:
    """The gold table (``spec.gold``, not None), loaded with its item column found by the names given."""
    item_col, gold_item_col = spec.columns.item, spec.columns.gold_item
    gcols = [c for c in (gold_item_col, item_col, *ITEM_COLUMNS) if c]
    gdf, gsrc, ghdr = load_table(spec.gold, "gold", string_cols=gcols)
    g_item = gold_item_col if gold_item_col is not None else (item_col if item_col in gdf.columns else None)
    return LoadedTable("gold", gsrc, gdf, resolve_column(gdf, g_item, ITEM_COLUMNS, "gold item", gsrc), ghdr)


def _gold_column(gold_t: LoadedTable, spec: _ReadSpec) -> str:
    """The gold table's label column, given or found."""
    return resolve_column(gold_t.df, spec.columns.gold, GOLD_COLUMNS, "gold", gold_t.source)


def _compact_history(cb: CompactBuilder, n: int, dropped: dict[str, int], labeler_ids: npt.NDArray[Any],
                     round_names: list[str], spec: _ReadSpec) -> CompactHistory:
    """The :class:`CompactHistory` from a filled builder: rounds and repeats checked, the gold attached."""
    source, r_c, name = spec.source, spec.round_col, spec.name
    try:
        n_dup, _, conflict = cb.finish()
    except ValueError as exc:  # pragma: no cover - the files changed between the passes
        raise DataError(f"{source}: {exc}; did the files change while being read?") from exc
    if conflict >= 0 and r_c is not None:
        raise DataError(f"{source}: an item appears in more than one round (column {r_c!r}); an item must belong "
                        "to one round; pass round_col=False to ignore the column")
    notes: dict[str, int] = {}
    if n_dup:
        if spec.rules.duplicates == "error":
            raise DataError(f"{source}: {n_dup} repeated (item, labeler) pair(s) (duplicates='error'); read with "
                            "read_annotations to have the first one named")
        notes["repeated (item, labeler) pair kept as separate labels"] = int(n_dup)
    reports = [TableReport("annotations", source, n, int(cb.code.shape[0]), dropped, notes)]
    _log.info("compact: the gold table")
    gold_arr = filled(cb.ptr.shape[0] - 1, np.int8, -1)
    g_ids = np.zeros(0, dtype=np.int64)
    g_vals = np.zeros(0, dtype=np.int8)
    if spec.gold is not None:
        gold_t = _gold_table(spec)
        g_col = gold_t.df[gold_t.item_col]
        if g_col.dtype.kind == "i":  # NumPy integers: their values, exactly, without the text
            cand = np.unique(g_col.to_numpy(dtype=np.int64))
        else:
            values, whole = whole_numbers(g_col.to_numpy(dtype=object))
            cand = np.unique(values[whole])
        cand = cand[cb.positions(cand) >= 0]  # the gold table's ids that are items here, in increasing order
        g_on_cand, g_rep = _attach_gold(gold_t, _gold_column(gold_t, spec), cand, None, parse_binary, ids_sorted=True)
        reports.append(g_rep)
        has = g_on_cand >= 0
        g_ids, g_vals = cand[has], g_on_cand[has]
        gold_arr[cb.positions(g_ids)] = g_vals
    report = IngestReport(tuple(reports))
    rounds = tuple(round_names) if r_c is not None else ("all",)
    gold_set = cb.gold_set(g_ids, g_vals, labeler_ids, rounds, report, name, bool(n_dup))
    del cb.table
    return CompactHistory(labeler_ids=labeler_ids, round_ids=rounds, ptr=cb.ptr, code=cb.code, gold=gold_arr,
                          group=cb.group, gold_set=gold_set, repeated_pairs=bool(n_dup), report=report, name=name)


def _from_csr(csr: CsrBuilder | RangeCsrBuilder, n: int, dropped: dict[str, int], item_ids: npt.NDArray[Any],
              labeler_ids: npt.NDArray[Any], round_names: list[str], spec: _ReadSpec) -> AnnotationSet:
    """The AnnotationSet from a filled :class:`CsrBuilder`: round conflicts and repeated pairs checked."""
    source, r_c = spec.source, spec.round_col
    try:
        n_dup, first_dup = csr.finish()
    except ValueError as exc:  # pragma: no cover - the files changed between DuckDB's passes
        raise DataError(f"{source}: {exc}; did the files change while being read?") from exc
    rows, conflict = _ItemRows(csr.ptr, csr.labeler, csr.label, csr.item_round), int(csr.conflict[0])
    del csr
    if conflict >= 0 and r_c is not None:
        raise DataError(
            f"{source}: item {_plain(item_ids[conflict])!r} appears in more than one round (column {r_c!r}); an item "
            "must belong to one round; pass round_col=False to ignore the column")
    notes: dict[str, int] = {}
    if n_dup:
        if spec.rules.duplicates == "error":
            k = int(np.searchsorted(rows.ptr, first_dup, side="right") - 1)
            raise repeated_pair_error(source, _plain(item_ids[k]), labeler_ids[rows.labeler[first_dup]], int(n_dup))
        notes["repeated (item, labeler) pair kept as separate labels"] = int(n_dup)
    reports = [TableReport("annotations", source, n, int(rows.labeler.shape[0]), dropped, notes)]
    _log.info("DuckDB: the gold table")
    return _finish(reports, item_ids, labeler_ids, round_names, rows, spec, bool(n_dup))


def _finish(reports: list[TableReport], item_ids: npt.NDArray[Any], labeler_ids: npt.NDArray[Any],
            round_names: list[str], rows: _ItemRows, spec: _ReadSpec, repeated: bool) -> AnnotationSet:
    """Attach the gold table and assemble the AnnotationSet."""
    n_items = int(item_ids.shape[0])
    gold_arr = np.full(n_items, -1, dtype=np.int8)
    if spec.gold is not None:
        gold_t = _gold_table(spec)
        gold_arr, g_rep = _attach_gold(gold_t, _gold_column(gold_t, spec), item_ids, None, parse_binary,
                                       ids_sorted=item_ids.dtype.kind in "iu")  # numeric order
        reports.append(g_rep)
    return AnnotationSet(
        item_ids=item_ids,
        labeler_ids=labeler_ids,
        item_ptr=rows.ptr,
        labeler=np.ascontiguousarray(rows.labeler, dtype=np.int32),
        label=rows.label,
        gold=gold_arr,
        item_round=np.ascontiguousarray(rows.item_round, dtype=np.int32),
        round_ids=tuple(round_names) if spec.round_col is not None else ("all",),
        covariates=None,
        covariate_names=(),
        report=IngestReport(tuple(reports)),
        name=spec.name,
        repeated_pairs=repeated,
    )
