"""Ingest: reading input tables and finding their columns.

Loads a path (CSV, TSV, Parquet, JSONL, optionally compressed; the delimiter and a JSON array are sniffed) or
an in-memory pandas, polars or pyarrow table into pandas without altering values (:func:`load_table`),
resolves the item, labeler, label, round, gold and covariate columns by name (:func:`resolve_column`,
:func:`annotation_table`, :func:`side_tables`, :func:`covariate_columns`) and checks that cells hold
scalars. The loaded tables are int-coded (:mod:`heroeval.ingest.coding`) and assembled into an
:class:`~heroeval.ingest.annotations.AnnotationSet` by :func:`heroeval.ingest.annotations.build_annotation_set`.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.errors import DataError

TableLike: TypeAlias = "str | os.PathLike[str] | pd.DataFrame | Any"
"""A path (CSV, Parquet, JSONL) or an in-memory pandas, polars or pyarrow table."""

ITEM_COLUMNS = ("item_id", "task", "item")
LABELER_COLUMNS = ("labeler_id", "worker", "labeler", "annotator_id", "annotator")
LABEL_COLUMNS = ("label",)
GOLD_COLUMNS = ("gold", "true_label", "label")
ROUND_COLUMNS = ("round",)

_NA_TOKENS = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
              "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")


@dataclass
class LoadedTable:
    table: str  # role: annotations | gold | covariates
    source: str  # file path or "<pandas.DataFrame>"
    df: pd.DataFrame
    item_col: str
    from_file_with_header: bool  # row r is on line r + 2 of a CSV file

    def where(self, row: int) -> str:
        """Human position of 0-based data row ``row``."""
        if self.from_file_with_header:
            return f"{self.source}, row {row + 1} (line {row + 2})"
        return f"{self.source}, row {row + 1}"

    def first_bad(self, bad: npt.NDArray[np.bool_], values: pd.Series) -> tuple[str, Any, int]:
        """Where the first row flagged in ``bad`` is, its value in ``values`` (a Python scalar), and how many
        rows are flagged: what a reader's error about a bad cell names."""
        rows = np.flatnonzero(bad)
        r = int(rows[0])
        value = values.iloc[r]
        return self.where(r), value.item() if hasattr(value, "item") else value, int(rows.size)


def load_table(obj: TableLike, role: str, string_cols: Sequence[str] = (),
          encoding: str | None = None) -> tuple[pd.DataFrame, str, bool]:
    """Load a path or an in-memory table into pandas without altering values.

    Text files are read in ``encoding`` (default UTF-8); a ``.csv`` or ``.txt`` file separated by tabs,
    semicolons or pipes instead of commas is recognised from its header line.
    """
    enc = encoding or "utf-8"
    if isinstance(obj, (str, os.PathLike)):
        path = Path(obj)
        if not path.exists():
            raise DataError(f"{role} file {str(path)!r} does not exist")
        suffixes = [s.lower() for s in path.suffixes]
        compression = suffixes[-1] if suffixes and suffixes[-1] in {".gz", ".bz2", ".zst", ".xz"} else None
        ext = suffixes[-2] if compression and len(suffixes) >= 2 else (suffixes[-1] if suffixes else "")
        try:
            if ext in {".csv", ".tsv", ".txt"}:
                sep = "\t" if ext == ".tsv" else _sniff_delimiter(path, enc)
                header = pd.read_csv(path, sep=sep, nrows=0, encoding=enc)
                dtype = {c: "string" for c in header.columns if c in string_cols}
                # ids are strings: only an empty field is missing ("NA", "null", "None" are real ids);
                # other columns keep pandas' usual missing-value tokens
                na = {c: ([""] if c in string_cols else list(_NA_TOKENS)) for c in header.columns}
                df = pd.read_csv(path, sep=sep, dtype=dtype, keep_default_na=False, na_values=na, encoding=enc)
                return df, str(path), True
            if ext in {".parquet", ".pq"}:
                return pd.read_parquet(path), str(path), False
            if ext in {".jsonl", ".ndjson", ".json"}:
                if _starts_with(path, "[", enc):  # a JSON array of records, not one record per line
                    df = pd.read_json(path, orient="records", dtype=False, encoding=enc)
                else:
                    df = pd.read_json(path, lines=True, dtype=False, encoding=enc)
                return df, str(path), False
        except DataError:
            raise
        except UnicodeDecodeError as exc:
            raise DataError(_decode_message(path, role, enc, exc)) from exc
        except LookupError as exc:
            raise DataError(f"{role} file {str(path)!r}: unknown encoding {enc!r} ({exc})") from exc
        except Exception as exc:  # parser errors: name the file
            raise DataError(f"could not read {role} file {str(path)!r}: {str(exc)[:500]}") from exc
        raise DataError(
            f"{role} file {str(path)!r}: unknown format {ext!r}; "
            "use .csv, .tsv, .parquet or .jsonl (optionally .gz)"
        )
    if isinstance(obj, pd.DataFrame):
        return obj.reset_index(drop=True), f"<pandas.DataFrame {role}>", False
    mod = type(obj).__module__
    if mod.startswith("polars"):
        return obj.to_pandas(), f"<polars.DataFrame {role}>", False
    if mod.startswith("pyarrow"):
        return obj.to_pandas(), f"<pyarrow.Table {role}>", False
    if isinstance(obj, pd.Series):
        # crowd-kit style gold: a Series indexed by task
        df = obj.rename("gold").rename_axis("item_id").reset_index()
        return df, f"<pandas.Series {role}>", False
    raise DataError(
        f"{role}: expected a file path or a pandas/polars/pyarrow table, got {type(obj).__name__}"
    )


def _open_text_head(path: Path, n: int = 65536) -> bytes:
    """The first ``n`` bytes of a (possibly compressed) file."""
    suf = path.suffix.lower()
    openers: dict[str, Callable[..., Any]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
    opener = openers.get(suf)
    if opener is not None:
        with opener(path, "rb") as fh:
            return bytes(fh.read(n))
    if suf == ".zst":
        return b""
    with open(path, "rb") as fh:
        return fh.read(n)


def _sniff_delimiter(path: Path, encoding: str) -> str:
    """``","`` unless the header line has no comma but tabs, semicolons or pipes."""
    head = _open_text_head(path).decode(encoding, errors="replace")
    first = head.splitlines()[0] if head else ""
    if "," in first:
        return ","
    counts = {sep: first.count(sep) for sep in ("\t", ";", "|")}
    best = max(counts, key=lambda k: counts[k])
    return best if counts[best] > 0 else ","


def _starts_with(path: Path, char: str, encoding: str) -> bool:
    head = _open_text_head(path, 4096).decode(encoding, errors="replace").lstrip("\ufeff \t\r\n")
    return head.startswith(char)


def _decode_message(path: Path, role: str, encoding: str, exc: UnicodeDecodeError) -> str:
    """Where a text file stops being ``encoding``: the line and the bytes, and how to read it."""
    line: int | None = None
    bad = b""
    try:
        raw = _open_text_head(path, 1 << 30)
        try:
            raw.decode(encoding)
        except UnicodeDecodeError as e2:
            line = raw.count(b"\n", 0, e2.start) + 1
            bad = raw[e2.start:e2.start + 4]
    except OSError:  # pragma: no cover - the file was readable a moment ago
        pass
    where = f", line {line} (bytes {bad!r})" if line is not None else ""
    return (f"{role} file {str(path)!r}{where}: not valid {encoding} ({exc.reason}). The file was probably saved in "
            "another encoding, e.g. Windows' cp1252 or latin-1: pass encoding='cp1252' (or re-save it as UTF-8)")


def file_stem(path: str) -> str:
    """File name without its data and compression suffixes."""
    p = Path(path)
    name = p.name
    for suf in (".gz", ".bz2", ".zst", ".xz"):
        name = name.removesuffix(suf)
    for suf in (".csv", ".tsv", ".txt", ".parquet", ".pq", ".jsonl", ".ndjson", ".json"):
        name = name.removesuffix(suf)
    return name


_COL_PARAM = {"item": "item_col", "labeler": "labeler_col", "label": "label_col", "round": "round_col",
              "gold": "gold_col", "gold item": "gold_item_col", "covariate item": "covariate_item_col"}


def columns_text(columns: Any, limit: int = 12) -> str:
    """A table's column names for a message: the first ``limit`` and how many there are in all."""
    names = [str(c) for c in columns]
    if len(names) <= limit:
        return f"columns are {names}"
    return f"{len(names)} columns, the first {limit} {names[:limit]}"


def _delimiter_hint(df: pd.DataFrame) -> str:
    """A hint when a text table was read with the wrong delimiter (one column whose name holds another)."""
    if len(df.columns) != 1:
        return ""
    name = str(df.columns[0])
    for sep, what in (("\t", "tab"), (";", "semicolon"), ("|", "pipe")):
        if sep in name:
            return (f"; the only column's name holds a {what} ({sep!r}): the file is probably {what}-separated "
                    "(name it .tsv for tabs, or save it comma-separated)")
    return ""


def resolve_column(df: pd.DataFrame, given: str | None, candidates: Sequence[str], what: str, where: str) -> str:
    param = _COL_PARAM.get(what, f"{what.replace(' ', '_')}_col")
    if given is not None:
        if given not in df.columns:
            raise DataError(
                f"{where}: no column {given!r} for the {what}; {columns_text(df.columns)}{_delimiter_hint(df)}"
            )
        return given
    for c in candidates:
        if c in df.columns:
            return c
    raise DataError(
        f"{where}: cannot find the {what} column (looked for {list(candidates)}); "
        f"{columns_text(df.columns)}{_delimiter_hint(df)}; name it with {param}="
    )


def annotation_table(
    annotations: TableLike, item_col: str | None, labeler_col: str | None, label_col: str | None,
    round_col: str | Literal[False] | None, encoding: str | None = None,
) -> tuple[LoadedTable, str, str, str | None]:
    """Load the annotations table and resolve its item, labeler, label and round columns.

    The row policies are checked before, by the caller's :class:`~heroeval.ingest.options.RowRules`.
    """
    id_cols = [c for c in (item_col, labeler_col, *ITEM_COLUMNS, *LABELER_COLUMNS) if c]
    df, src, hdr = load_table(annotations, "annotations", string_cols=[*id_cols, "label", label_col or ""],
                         encoding=encoding)
    ann = LoadedTable("annotations", src, df, "", hdr)
    ann.item_col, lab_c, lbl_c, rnd_c = annotation_columns(df, item_col, labeler_col, label_col, round_col, src)
    return ann, lab_c, lbl_c, rnd_c


def annotation_columns(
    df: pd.DataFrame, item_col: str | None, labeler_col: str | None, label_col: str | None,
    round_col: str | Literal[False] | None, where: str,
) -> tuple[str, str, str, str | None]:
    """The item, labeler, label and round columns of an annotations table (given or recognised)."""
    i_c = resolve_column(df, item_col, ITEM_COLUMNS, "item", where)
    l_c = resolve_column(df, labeler_col, LABELER_COLUMNS, "labeler", where)
    y_c = resolve_column(df, label_col, LABEL_COLUMNS, "label", where)
    if round_col is False:
        r_c = None
    elif round_col is None:
        r_c = "round" if "round" in df.columns else None
    else:
        r_c = resolve_column(df, round_col, (), "round", where)
    return i_c, l_c, y_c, r_c


_CELL_TYPES = (str, int, float, bool, np.generic, type(None), type(pd.NA), type(pd.NaT))


def side_tables(
    gold: TableLike | None, covariates: TableLike | None, item_col: str | None, gold_item_col: str | None,
    gold_col: str | None, covariate_item_col: str | None, encoding: str | None = None,
) -> tuple[LoadedTable | None, str | None, LoadedTable | None]:
    """Load the gold and covariate tables and resolve their item (and gold) columns: (gold table, gold column, covariates)."""
    gold_t = None if gold is None else _item_table(gold, "gold", gold_item_col, item_col, encoding)
    if gold_t is not None:
        gold_col = resolve_column(gold_t.df, gold_col, GOLD_COLUMNS, "gold", gold_t.source)
    cov_t = None if covariates is None else _item_table(covariates, "covariates", covariate_item_col, item_col, encoding)
    return gold_t, gold_col, cov_t


def _item_table(obj: TableLike, role: str, own_item_col: str | None, item_col: str | None,
                encoding: str | None) -> LoadedTable:
    """A per-item side table (gold, covariates) loaded, its item column resolved: its own ``own_item_col``, else
    the annotations' ``item_col`` when it has one, else a recognised name."""
    cols = [c for c in (own_item_col, item_col, *ITEM_COLUMNS) if c]
    df, src, hdr = load_table(obj, role, string_cols=cols, encoding=encoding)
    item = own_item_col if own_item_col is not None else (item_col if item_col in df.columns else None)
    what = "gold item" if role == "gold" else "covariate item"
    return LoadedTable(role, src, df, resolve_column(df, item, ITEM_COLUMNS, what, src), hdr)


def _check_cells(t: LoadedTable, cols: Sequence[str]) -> None:
    """Object columns may hold only scalars (str, numbers, bools, missing): else a DataError naming the row."""
    for c in cols:
        if c not in t.df.columns:
            continue
        col = t.df[c]
        if isinstance(col, pd.DataFrame):
            raise DataError(f"{t.source}: column name {c!r} appears more than once in the {t.table} table")
        if col.dtype != object:
            continue
        bad = np.flatnonzero([not isinstance(v, _CELL_TYPES) for v in col.to_numpy()])
        if bad.size:
            r = int(bad[0])
            raise DataError(
                f"{t.where(r)}: column {c!r} holds a {type(col.iloc[r]).__name__} value ({col.iloc[r]!r:.40}); "
                f"only strings, numbers, booleans or missing values are accepted ({bad.size} such cell(s))"
            )


def covariate_columns(df: pd.DataFrame, item_col: str, covariate_cols: Sequence[str] | None,
                      source: str) -> list[str]:
    """The covariate columns of a covariate table (``covariate_cols``, or every column but the item's), checked:
    each present and numeric (or boolean), at least one; a clear error naming the table and the column."""
    cols = list(covariate_cols) if covariate_cols is not None else [c for c in df.columns if c != item_col]
    for c in cols:
        if c not in df.columns:
            raise DataError(f"{source}: no covariate column {c!r}; columns are {list(df.columns)}")
    if not cols:
        raise DataError(f"{source}: no covariate columns besides {item_col!r}")
    for c in cols:
        if not (pd.api.types.is_numeric_dtype(df[c].dtype) or pd.api.types.is_bool_dtype(df[c].dtype)):
            raise DataError(f"{source}: covariate column {c!r} is not numeric (dtype {df[c].dtype}, first value "
                            f"{df[c].iloc[0]!r}); encode it first")
    return cols
