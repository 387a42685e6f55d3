"""Ingest's entry point: :func:`read_annotations` reads a table with pandas or DuckDB.

The pandas engine validates and int-codes in memory
(:mod:`heroeval.ingest.tables` reads the tables, :mod:`heroeval.ingest.annotations`
assembles the set); the DuckDB engine
(:mod:`heroeval.ingest._duckdb`) reads files larger than memory with the
same validation, policies and ingest report.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Unpack

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.core.options import options_of
from heroeval.errors import DataError
from heroeval.ingest._duckdb import read_with_duckdb
from heroeval.ingest.annotations import AnnotationSet, build_annotation_set
from heroeval.ingest.compact import CompactHistory
from heroeval.ingest.options import (
    COLUMN_DEFAULTS,
    ROW_DEFAULTS,
    ColumnNames,
    ColumnOptions,
    Columns,
    LogColumnOptions,
    Missing,
    RowOptions,
    RowRules,
)
from heroeval.ingest.tables import (
    ITEM_COLUMNS,
    TableLike,
    annotation_table,
    file_stem,
    load_table,
    resolve_column,
    side_tables,
)

__all__ = [
    "DESIGN_COLUMN",
    "DUCKDB_MIN_BYTES",
    "STRATUM_COLUMN",
    "CompactOptions",
    "ReadOptions",
    "read_annotations",
    "read_compact",
    "read_design",
    "read_item_groups",
]


class ReadOptions(ColumnOptions, RowOptions, total=False):
    """:func:`read_annotations`' keyword options (its ``**options``): the column names, the row rules, and how the
    files are read (``engine``, DuckDB's ``memory_limit`` and ``progress``, the text ``encoding``)."""

    engine: Literal["auto", "pandas", "duckdb"]
    memory_limit: str | None
    progress: bool
    encoding: str | None


READ_DEFAULTS: Mapping[str, Any] = {**COLUMN_DEFAULTS, **ROW_DEFAULTS, "engine": "auto", "memory_limit": None,
                                    "progress": False, "encoding": None}


class CompactOptions(LogColumnOptions, total=False):
    """:func:`read_compact`'s column and row-rule keywords (its ``**options``): no covariates, no ``label_map``,
    and ``duplicates`` ``"keep"`` or ``"error"``."""

    duplicates: Literal["keep", "error"]
    missing: Missing


COMPACT_DEFAULTS: Mapping[str, Any] = {**{k: COLUMN_DEFAULTS[k] for k in LogColumnOptions.__annotations__},
                                       "duplicates": "keep", "missing": "drop"}


def read_annotations(
    annotations: TableLike,
    *,
    gold: TableLike | None = None,
    covariates: TableLike | None = None,
    name: str | None = None,
    design: TableLike | None = None,
    **options: Unpack[ReadOptions],
) -> AnnotationSet:
    """Read, validate and int-code an annotation log.

    Parameters
    ----------
    annotations : path or table
        Long format, one row per silver label. A CSV/TSV, Parquet or JSONL
        file, or a pandas, polars or pyarrow table. Default columns
        ``item_id, labeler_id, label``; crowd-kit's ``task, worker, label``
        are recognised.
    gold : path or table, optional
        Gold labels: ``item_id, gold`` (``true_label`` or ``label`` are
        recognised too), or a pandas Series indexed by item as crowd-kit takes.
    covariates : path or table, optional
        One row per item: the item column and numeric covariate columns.
    item_col, labeler_col, label_col : str, optional
        Column names in ``annotations`` when they differ from the defaults.
    round_col : str or False, optional
        Column that groups items into rounds, each with its own prevalence.
        By default a column named ``round`` is used if present; ``False``
        ignores it. An item whose rows name different rounds is an error.
    gold_col, gold_item_col : str, optional
        Column names in ``gold``; the item column defaults to ``item_col``
        when the gold table has it.
    covariate_item_col, covariate_cols : optional
        Item column and the covariate columns to use (default: every column
        other than the item column).
    duplicates : {"keep", "first", "error"}
        Policy for repeated (item, labeler) pairs; see the module docstring.
    missing : {"drop", "error"}
        Policy for annotation rows with a missing item, labeler or label.
    label_map : mapping, optional
        Recode raw labels (silver and gold alike) before validation, e.g. a
        side-by-side preference ``{"A": 1, "B": 0, "tie": None}``: the rate is
        then A's win rate. A value mapped to None is dropped and counted
        (that is the tie rule: ties dropped means the win rate among
        decisive judgments; map ties to 0 for "A strictly preferred" or to 1
        for "A at least as good"). A raw value missing from the map is an
        error naming the row.
    name : str, optional
        A name shown in reports (default: the file name).
    engine : {"auto", "pandas", "duckdb"}, default "auto"
        ``"duckdb"`` reads CSV/TSV or Parquet files through DuckDB: a path, a
        glob (``"logs/*.parquet"``), a directory or a list of paths, larger
        than memory if need be (DuckDB spills to disk), and builds the compact
        arrays without a pandas copy of the rows. Same validation, policies
        and ingest report; covariates and ``label_map`` need the pandas
        engine; an integer item column in Parquet keeps integer ids. ``"auto"``
        takes DuckDB for globs, directories, lists and files of at least
        :data:`DUCKDB_MIN_BYTES`, pandas otherwise.
    memory_limit : str, optional
        DuckDB's memory limit (e.g. ``"2GB"``); beyond it DuckDB spills to
        the temporary directory.
    progress : bool, default False
        DuckDB's progress bar and log messages for long ingests.
    encoding : str, optional
        Text encoding of CSV/TSV/JSON files (default UTF-8), e.g. ``"cp1252"``
        for a file saved by Excel on Windows. Pandas engine only.
    design : path or table, optional
        How the gold items were sampled, for a current round with a few gold
        labels: ``item_id, pi`` with each item's inclusion probability, as
        ``hero select`` writes it (:func:`heroeval.inference.select.select_items`).
        Without it, a ``pi`` column in the gold table is used; with neither,
        the gold items are taken as a uniform random sample. Pandas engine only.

    Returns
    -------
    AnnotationSet

    Examples
    --------
    >>> import pandas as pd, heroeval as he
    >>> df = pd.DataFrame({"task": [1, 1, 2], "worker": ["a", "b", "a"], "label": [1, 0, 1]})
    >>> ds = he.read_annotations(df)
    >>> ds.n_items, ds.n_annotations
    (2, 3)
    """
    o = options_of("read_annotations", options, ReadOptions, READ_DEFAULTS)
    item_col, gold_item_col, gold_col = o["item_col"], o["gold_item_col"], o["gold_col"]
    label_map, encoding = o["label_map"], o["encoding"]
    use_duckdb = _use_duckdb(o["engine"], annotations, covariates,
                             label_map if encoding is None and design is None else True)
    rules = RowRules(duplicates=o["duplicates"], missing=o["missing"], label_map=label_map)
    if use_duckdb:
        out = read_with_duckdb(annotations, gold=gold, columns=ColumnNames.of(o), rules=rules, name=name,
                               memory_limit=o["memory_limit"], progress=o["progress"])
        assert isinstance(out, AnnotationSet)
        return out
    ann, lab_c, lbl_c, rnd_c = annotation_table(annotations, item_col, o["labeler_col"], o["label_col"],
                                                o["round_col"], encoding)
    gold_t, gold_col, cov_t = side_tables(gold, covariates, item_col, gold_item_col, gold_col,
                                           o["covariate_item_col"], encoding)
    if name is None:
        name = file_stem(ann.source) if not ann.source.startswith("<") else "annotations"
    columns = Columns(labeler=lab_c, label=lbl_c, round=rnd_c, gold=gold_col or "gold",
                      covariates=o["covariate_cols"])
    ds = build_annotation_set(ann, columns=columns, rules=rules, gold=gold_t, covariates=cov_t, name=name)
    if design is not None:
        ids, pi, strata = read_design(design, item_col=gold_item_col or item_col, encoding=encoding)
        return ds.with_design(ids, pi, strata)
    if gold_t is not None and DESIGN_COLUMN in gold_t.df.columns:
        g = gold_t.df[gold_t.df[DESIGN_COLUMN].astype(str).str.strip() != ""]
        ids, pi, strata = _design_columns(g, gold_t.item_col, gold_t.source)
        return ds.with_design(ids, pi, strata)
    return ds


def read_compact(
    annotations: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    gold: TableLike | None = None,
    name: str | None = None,
    memory_limit: str | None = None,
    progress: bool = False,
    **options: Unpack[CompactOptions],
) -> CompactHistory:
    """Read a history too large to hold twice straight into the compiled engine's arrays (a :class:`CompactHistory`).

    For Parquet files with an integer item column (ids spanning a range no
    longer than the number of rows) and numba. The same validation, policies
    and ingest report as :func:`read_annotations` with ``engine="duckdb"``
    (whose parameters these are), but the labels are kept only as Stage A's
    compiled design reads them: 2 bytes a label and 17 an item, against 5 and
    21 for an :class:`AnnotationSet` plus 2 and 17 for the design built from
    it. :func:`heroeval.calibrate` fits it (without the model checks, which
    refit the history's items); the calibration has no ``history``. See
    :mod:`heroeval.ingest.compact`.

    Raises
    ------
    DataError
        When the files do not qualify (string or sparse item ids, CSV), naming why.
    """
    o = options_of("read_compact", options, CompactOptions, COMPACT_DEFAULTS)
    if o["duplicates"] not in ("keep", "error"):
        raise DataError(f"read_compact: duplicates must be 'keep' or 'error', got {o['duplicates']!r}")
    out = read_with_duckdb(annotations, gold=gold, columns=ColumnNames.of(o),
                           rules=RowRules(duplicates=o["duplicates"], missing=o["missing"]),
                           name=name, memory_limit=memory_limit, progress=progress, compact=True)
    assert isinstance(out, CompactHistory)
    return out


DESIGN_COLUMN = "pi"
STRATUM_COLUMN = "stratum"
"""The optional column of a design file naming each item's stratum (``hero select --by``)."""
"""Column of inclusion probabilities in a selection file (``hero select``) or a gold table."""


DesignColumns = tuple[npt.NDArray[np.object_], npt.NDArray[np.float64], npt.NDArray[np.object_] | None]
"""Item ids, inclusion probabilities and strata (``None`` without a ``stratum`` column) of a design."""


def read_design(source: TableLike, *, item_col: str | None = None, encoding: str | None = None) -> DesignColumns:
    """Item ids, inclusion probabilities (column ``pi``) and strata (column ``stratum``, optional) of a gold-sampling
    design, e.g. ``hero select``'s file."""
    cols = [c for c in (item_col, *ITEM_COLUMNS, STRATUM_COLUMN) if c]
    df, src, _ = load_table(source, "design", string_cols=cols, encoding=encoding)
    col = item_col if item_col is not None and item_col in df.columns else resolve_column(df, None, ITEM_COLUMNS,
                                                                                 "design item", src)
    return _design_columns(df, col, src)


def _design_columns(df: pd.DataFrame, item_col: str, src: str) -> DesignColumns:
    if DESIGN_COLUMN not in df.columns:
        raise DataError(f"{src!r}: no column {DESIGN_COLUMN!r} (inclusion probabilities); columns are "
                        f"{list(df.columns)[:12]}")
    pi = pd.to_numeric(df[DESIGN_COLUMN], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(pi)
    if bad.any():
        raise DataError(f"{src!r}: column {DESIGN_COLUMN!r} has {int(bad.sum())} value(s) that are not numbers "
                        f"(first at row {int(np.flatnonzero(bad)[0]) + 2})")
    ids = df[item_col].astype(str).to_numpy(dtype=object)
    if pd.Series(ids).duplicated().any():
        raise DataError(f"{src!r}: an item appears twice in the design")
    if STRATUM_COLUMN not in df.columns:
        return ids, pi, None
    st = df[STRATUM_COLUMN].astype("string").fillna("").str.strip().to_numpy(dtype=object)
    empty = st == ""
    if empty.any():
        raise DataError(f"{src!r}: column {STRATUM_COLUMN!r} is empty in {int(empty.sum())} row(s) (first at row "
                        f"{int(np.flatnonzero(empty)[0]) + 2}); a stratified design names every item's stratum")
    return ids, pi, st


def read_item_groups(source: TableLike, column: str, *, item_col: str | None = None,
                     encoding: str | None = None) -> pd.Series:
    """Each item's group from an item-level column of a table (e.g. the annotations file's ``topic``).

    For a stratified design (``hero select --by COLUMN``). The column must be
    present, filled, and the same on every row of an item: a
    :class:`DataError` names the file, the column and the first item that
    breaks this. Returns a Series from item id (str) to group (str).
    """
    cols = [c for c in (item_col, *ITEM_COLUMNS, column) if c]
    df, src, _ = load_table(source, "groups", string_cols=cols, encoding=encoding)
    icol = item_col if item_col is not None and item_col in df.columns else resolve_column(df, None, ITEM_COLUMNS,
                                                                                  "item", src)
    if column not in df.columns:
        raise DataError(f"{src!r}: no column {column!r} for the strata; columns are {list(df.columns)[:12]}")
    g = df[column].astype("string").str.strip()
    empty = g.isna() | (g == "")
    if empty.any():
        raise DataError(f"{src!r}: column {column!r} is empty in {int(empty.sum())} row(s) (first at row "
                        f"{int(np.flatnonzero(empty.to_numpy())[0]) + 2}); every item needs its group")
    t = pd.DataFrame({"item": df[icol].astype(str).to_numpy(), "group": g.to_numpy()})
    n = t.groupby("item", sort=False)["group"].nunique()
    if (n > 1).any():
        bad = str(n.index[np.flatnonzero(n.to_numpy() > 1)[0]])
        vals = sorted(t.loc[t["item"] == bad, "group"].unique().tolist())[:3]
        raise DataError(f"{src!r}: column {column!r} is not an item-level column: item {bad!r} has the values "
                        f"{vals}; the strata need one group per item")
    out = t.drop_duplicates("item").set_index("item")["group"].astype(str)
    out.name = column
    return out


DUCKDB_MIN_BYTES = 256 * 2**20
"""``engine="auto"`` reads a single file of at least this size through DuckDB."""


def _use_duckdb(engine: str, annotations: Any, covariates: Any, label_map: Any) -> bool:
    if engine not in ("auto", "pandas", "duckdb"):
        raise DataError(f"engine must be 'auto', 'pandas' or 'duckdb', got {engine!r}")
    if engine == "pandas":
        return False
    is_paths = isinstance(annotations, (str, os.PathLike)) or (
        isinstance(annotations, (list, tuple)) and all(isinstance(a, (str, os.PathLike)) for a in annotations))
    if engine == "duckdb":
        if not is_paths:
            raise DataError("engine='duckdb' reads files: pass a path, a glob, a directory or a list of paths")
        if covariates is not None or label_map is not None:
            raise DataError("engine='duckdb' does not take covariates or label_map (nor encoding) yet; use engine='pandas'")
        return True
    if not is_paths or covariates is not None or label_map is not None:
        return False
    if isinstance(annotations, (list, tuple)):
        return True
    p = str(annotations)
    if os.path.isdir(p) or any(ch in p for ch in "*?["):
        return not os.path.exists(p) or os.path.isdir(p)
    try:
        return os.path.getsize(p) >= DUCKDB_MIN_BYTES
    except OSError:
        return False


