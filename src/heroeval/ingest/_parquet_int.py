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
DuckDB's two streaming scans alone
(``heroeval.ingest._duckdb._compact_from_footers``); the result is the same
:class:`~heroeval.ingest.compact.CompactHistory` (tests compare the paths).
Files that do not qualify go through the validating scan as before, so a bad
row is named by the same message. The scans still check every row against
what the footers said (the ids within their ranges, the labels 0 or 1): a row
that contradicts them (the files changed, or their statistics are wrong)
stops the footer path, and the files are read again through the validating
scan, which names the row or counts it as the rules say. (Reading the qualifying files with pyarrow's
Parquet reader instead was measured and not adopted:
``experiments/parquet_int_pyarrow.py``, benchmarks/results/scale/ingest_1e9.md.)
"""
from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

import numpy as np
import pandas as pd

from heroeval.core import jit
from heroeval.errors import DataError
from heroeval.ingest.options import ColumnNames
from heroeval.ingest.tables import annotation_columns

_log = logging.getLogger("heroeval")

ENABLED = True
"""Whether :func:`plan` may take files off the DuckDB path (tests and benchmarks switch it off to compare)."""

_INT64_MAX = int(np.iinfo(np.int64).max)


@dataclass(frozen=True)
class ParquetPlan:
    """Files whose footers leave nothing to validate: the columns read, the row and id counts the footers give."""

    files: tuple[str, ...]
    item_col: str
    labeler_col: str
    label_col: str
    n_rows: int
    item_range: tuple[int, int]
    labeler_range: tuple[int, int]
    label_is_bool: bool


def plan(files: Sequence[str], fmt: str, columns: ColumnNames, range_pays: Any) -> ParquetPlan | None:
    """The plan for reading ``files`` without the validating scan, or None (the full DuckDB path) with the reason
    logged.

    ``range_pays(low, high, n_rows)``: whether ids in ``[low, high]`` go through a table over their range (the
    DuckDB path's rule, so the footer path takes only files the range path would).
    """
    if not ENABLED or not jit.HAVE_NUMBA or fmt != "parquet":
        return None
    try:
        got = _plan(files, columns, range_pays)
    except (OSError, ValueError, TypeError, DataError) as exc:  # DuckDB reads them and names what is wrong
        _log.debug("read_compact: footer path not taken (%s)", exc)
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
