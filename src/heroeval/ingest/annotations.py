"""Ingest: annotation logs, gold labels and item covariates.

Everything that enters heroeval passes through :func:`read_annotations`, which
validates once and int-codes the rows into compact arrays sorted by item (an
:class:`AnnotationSet`). Every row read is either used or counted, by reason,
in the :class:`IngestReport` attached to the result.

Row policies (all documented in ``docs/data.md``):

* annotation rows with a missing item, labeler or label are dropped and
  counted (``missing="error"`` raises instead);
* a label that is not binary (0/1, true/false) is an error naming the source,
  row and value;
* repeated (item, labeler) pairs are kept as separate labels by default
  (``duplicates="keep"``, as crowd-kit does) and counted; ``"first"`` keeps the
  first row of each pair and counts the rest as dropped; ``"error"`` raises;
* gold rows for items that have no silver label are dropped and counted;
  repeated gold rows with the same value are counted and merged, with
  conflicting values they are an error;
* covariate rows for items that have no silver label are dropped and counted;
  an annotated item without a covariate row, a missing covariate value or a
  non-numeric covariate column is an error.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval._core import jit
from heroeval.errors import DataError

__all__ = [
    "AnnotationSet",
    "IngestReport",
    "TableReport",
]

TableLike: TypeAlias = "str | os.PathLike[str] | pd.DataFrame | Any"
"""A path (CSV, Parquet, JSONL) or an in-memory pandas, polars or pyarrow table."""

ITEM_COLUMNS = ("item_id", "task", "item")
LABELER_COLUMNS = ("labeler_id", "worker", "labeler", "annotator_id", "annotator")
LABEL_COLUMNS = ("label",)
GOLD_COLUMNS = ("gold", "true_label", "label")
ROUND_COLUMNS = ("round",)

_NA_TOKENS = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
              "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")

_TRUE = frozenset({"1", "true", "t", "yes", "1.0"})
_FALSE = frozenset({"0", "false", "f", "no", "0.0"})


# ---------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TableReport:
    """What happened to the rows of one input table.

    ``rows_read == rows_used + sum(dropped.values())`` always holds.
    ``notes`` counts rows that were used but deserve a mention (for example
    repeated (item, labeler) pairs kept as separate labels).
    """

    table: str
    source: str
    rows_read: int
    rows_used: int
    dropped: Mapping[str, int] = field(default_factory=dict)
    notes: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dropped", MappingProxyType(dict(self.dropped)))
        object.__setattr__(self, "notes", MappingProxyType(dict(self.notes)))
        if self.rows_read != self.rows_used + sum(self.dropped.values()):
            raise AssertionError(  # pragma: no cover - internal invariant
                f"ingest bookkeeping broken for {self.table} ({self.source}): "
                f"{self.rows_read} read != {self.rows_used} used + {dict(self.dropped)}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "source": self.source,
            "rows_read": self.rows_read,
            "rows_used": self.rows_used,
            "dropped": dict(self.dropped),
            "notes": dict(self.notes),
        }


@dataclass(frozen=True)
class IngestReport:
    """Row accounting for every table that built an :class:`AnnotationSet`."""

    tables: tuple[TableReport, ...]

    @property
    def rows_read(self) -> int:
        return sum(t.rows_read for t in self.tables)

    @property
    def rows_dropped(self) -> int:
        return sum(sum(t.dropped.values()) for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        return {"tables": [t.to_dict() for t in self.tables]}

    def lines(self) -> list[str]:
        """Plain-text lines, one per table and one per drop reason or note."""
        out: list[str] = []
        for t in self.tables:
            out.append(
                f"{t.table} ({t.source}): {t.rows_read} rows read, {t.rows_used} used"
            )
            for reason, n in t.dropped.items():
                out.append(f"  dropped {n}: {reason}")
            for note, n in t.notes.items():
                out.append(f"  note {n}: {note}")
        return out


# ---------------------------------------------------------------------------
# The compact, validated data set
# ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class AnnotationSet:
    """Validated, int-coded annotations sorted by item.

    Attributes
    ----------
    item_ids : ndarray of str, shape (n_items,)
        Item identifiers, sorted; item ``i`` owns annotations
        ``item_ptr[i]:item_ptr[i + 1]``.
    labeler_ids : ndarray of str, shape (n_labelers,)
        Labeler identifiers, sorted.
    item_ptr : ndarray of int64, shape (n_items + 1,)
        CSR offsets of each item's annotations.
    labeler : ndarray of int32, shape (n_annotations,)
        Labeler code of each annotation.
    label : ndarray of int8, shape (n_annotations,)
        The silver label (0 or 1) of each annotation.
    gold : ndarray of int8, shape (n_items,)
        Gold label per item, -1 where there is none.
    item_round : ndarray of int32, shape (n_items,)
        Round (prevalence group) code per item.
    round_ids : tuple of str
        Round names; a single ``"all"`` round when no round column was given.
    covariates : ndarray of float64, shape (n_items, p), or None
    covariate_names : tuple of str
    report : IngestReport
    repeated_pairs : bool
        Whether some (item, labeler) pair carries several labels (kept by
        ``duplicates="keep"``); kernels skip de-duplication when it is False.
    gold_pi : ndarray of float64, shape (n_items,), or None
        Inclusion probability of each item in the sample sent for gold, when
        the gold items were drawn by a known design (:meth:`with_design`,
        ``heroeval.inference.select``); NaN for items outside the sample.
        ``None``: no design given (gold items, if any, are taken as a
        uniform random sample).
    """

    item_ids: npt.NDArray[np.object_]
    labeler_ids: npt.NDArray[np.object_]
    item_ptr: npt.NDArray[np.int64]
    labeler: npt.NDArray[np.int32]
    label: npt.NDArray[np.int8]
    gold: npt.NDArray[np.int8]
    item_round: npt.NDArray[np.int32]
    round_ids: tuple[str, ...]
    covariates: npt.NDArray[np.float64] | None
    covariate_names: tuple[str, ...]
    report: IngestReport
    name: str = "annotations"
    repeated_pairs: bool = True  # some (item, labeler) pair has several labels (False only when known)
    gold_pi: npt.NDArray[np.float64] | None = None  # inclusion probabilities of a gold-sampling design

    def __post_init__(self) -> None:
        for arr in (
            self.item_ids,
            self.labeler_ids,
            self.item_ptr,
            self.labeler,
            self.label,
            self.gold,
            self.item_round,
        ):
            arr.setflags(write=False)
        if self.covariates is not None:
            self.covariates.setflags(write=False)
        if self.gold_pi is not None:
            self.gold_pi.setflags(write=False)

    # -- sizes -------------------------------------------------------------
    @property
    def n_items(self) -> int:
        return int(self.item_ids.shape[0])

    @property
    def n_labelers(self) -> int:
        return int(self.labeler_ids.shape[0])

    @property
    def n_annotations(self) -> int:
        return int(self.label.shape[0])

    @property
    def n_rounds(self) -> int:
        return len(self.round_ids)

    @property
    def n_gold(self) -> int:
        return int(np.count_nonzero(self.gold >= 0))

    @property
    def has_gold(self) -> bool:
        return self.n_gold > 0

    @property
    def annotation_item(self) -> npt.NDArray[np.int64]:
        """Item code of each annotation (expanded from ``item_ptr``)."""
        return np.repeat(np.arange(self.n_items, dtype=np.int64), np.diff(self.item_ptr))

    def __repr__(self) -> str:
        cov = f", covariates={list(self.covariate_names)}" if self.covariates is not None else ""
        return (
            f"AnnotationSet(name={self.name!r}, items={self.n_items}, "
            f"labelers={self.n_labelers}, annotations={self.n_annotations}, "
            f"gold={self.n_gold}, rounds={self.n_rounds}{cov})"
        )

    # -- construction from arrays (no validation of files; used by simulations) --
    @classmethod
    def from_arrays(
        cls,
        item: npt.ArrayLike,
        labeler: npt.ArrayLike,
        label: npt.ArrayLike,
        *,
        gold: Mapping[Any, int] | tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
        item_round: Mapping[Any, Any] | tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
        covariates: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
        covariate_names: Sequence[str] | None = None,
        name: str = "arrays",
    ) -> AnnotationSet:
        """Build an :class:`AnnotationSet` from parallel arrays.

        Parameters
        ----------
        item, labeler, label : array_like, shape (n_annotations,)
            Item ids, labeler ids (any hashable values; they are turned into
            strings) and binary labels.
        gold : (items, values) pair or mapping, optional
            Gold labels for some items.
        item_round : (items, rounds) pair or mapping, optional
            Round of each item.
        covariates : (items, matrix) pair, optional
            Covariate matrix with one row per listed item.
        covariate_names : sequence of str, optional

        Examples
        --------
        >>> import heroeval as he
        >>> ds = he.AnnotationSet.from_arrays([1, 1, 2], ["a", "b", "a"], [1, 0, 0],
        ...                                   gold=([1], [1]))
        >>> ds.n_items, ds.n_labelers, ds.n_gold
        (2, 2, 1)
        """
        ann = pd.DataFrame(
            {
                "item_id": np.asarray(item),
                "labeler_id": np.asarray(labeler),
                "label": np.asarray(label),
            }
        )
        gold_df = None
        if gold is not None:
            gi, gv = _pair(gold)
            gold_df = pd.DataFrame({"item_id": _ids_to_str(pd.Series(gi)), "gold": gv})
        round_df = None
        if item_round is not None:
            ri, rv = _pair(item_round)
            round_df = pd.DataFrame({"item_id": _ids_to_str(pd.Series(ri)), "round": rv})
            ann["item_id"] = _ids_to_str(ann["item_id"])
            ann = ann.merge(round_df, on="item_id", how="left", validate="many_to_one")
        cov_df = None
        if covariates is not None:
            ci, cm = covariates
            cm_arr = np.asarray(cm, dtype=np.float64)
            if cm_arr.ndim == 1:
                cm_arr = cm_arr[:, None]
            names = (
                list(covariate_names)
                if covariate_names is not None
                else [f"x{k}" for k in range(cm_arr.shape[1])]
            )
            cov_df = pd.DataFrame(cm_arr, columns=names)
            cov_df.insert(0, "item_id", _ids_to_str(pd.Series(np.asarray(ci))).to_numpy())
        return _build(
            _Table("annotations", name, ann, "item_id", False),
            labeler_col="labeler_id",
            label_col="label",
            round_col="round" if round_df is not None else None,
            gold=None if gold_df is None else _Table("gold", name, gold_df, "item_id", False),
            gold_col="gold",
            covariates=None if cov_df is None else _Table("covariates", name, cov_df, "item_id", False),
            covariate_cols=None,
            duplicates="keep",
            missing="error",
            name=name,
        )

    def take_items(self, idx: npt.ArrayLike, name: str | None = None) -> AnnotationSet:
        """A new set made of the items ``idx`` (repeats allowed: a bootstrap resample).

        Repeated items become separate items (their ids repeat). Labeler codes
        and ids are kept as they are, so a calibration's labelers still match.
        """
        ix = np.asarray(idx, dtype=np.int64)
        if ix.size and (ix.min() < 0 or ix.max() >= self.n_items):
            raise IndexError(f"item index out of range [0, {self.n_items})")
        starts = self.item_ptr[ix]
        lens = self.item_ptr[ix + 1] - starts
        ptr = np.zeros(ix.size + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        ann = np.repeat(starts - ptr[:-1], lens) + np.arange(ptr[-1])
        return AnnotationSet(
            item_ids=self.item_ids[ix],
            labeler_ids=self.labeler_ids,
            item_ptr=ptr,
            labeler=self.labeler[ann],
            label=self.label[ann],
            gold=self.gold[ix],
            item_round=self.item_round[ix],
            round_ids=self.round_ids,
            covariates=None if self.covariates is None else self.covariates[ix],
            covariate_names=self.covariate_names,
            report=self.report,
            name=self.name if name is None else name,
            repeated_pairs=self.repeated_pairs,
            gold_pi=None if self.gold_pi is None else self.gold_pi[ix],
        )

    def with_gold(self, items: npt.ArrayLike, values: npt.ArrayLike) -> AnnotationSet:
        """A copy with gold labels set on ``items`` (item ids) to ``values`` (0/1); other items keep theirs."""
        ids = np.asarray([str(x) for x in np.asarray(items, dtype=object).ravel()], dtype=object)
        vals = np.asarray(values).ravel()
        if ids.size != vals.size:
            raise DataError(f"with_gold: {ids.size} items but {vals.size} gold values")
        if vals.size and not np.isin(vals, (0, 1)).all():
            raise DataError("with_gold: gold values must be 0 or 1")
        pos = _positions(self.item_ids, ids, "with_gold")
        gold = self.gold.copy()
        gold[pos] = vals.astype(np.int8)
        return replace(self, gold=gold)

    def with_design(self, items: npt.ArrayLike, pi: npt.ArrayLike) -> AnnotationSet:
        """A copy that records the gold sample's design: item ``items[k]`` was drawn with probability ``pi[k]``.

        ``pi`` are the inclusion probabilities a design such as
        :func:`heroeval.inference.select.select_items` wrote beside the items
        it chose (in (0, 1]). Every gold item of the set must be among
        ``items``; the estimators with current gold then weight each gold
        item by ``1 / pi`` (Hajek).
        """
        ids = np.asarray([str(x) for x in np.asarray(items, dtype=object).ravel()], dtype=object)
        p = np.asarray(pi, dtype=float).ravel()
        if ids.size != p.size:
            raise DataError(f"design: {ids.size} items but {p.size} inclusion probabilities")
        bad = ~((p > 0) & (p <= 1))
        if bad.any():
            raise DataError(f"design: inclusion probabilities must be in (0, 1], got {p[bad][:5].tolist()} "
                            f"for item(s) {ids[bad][:5].tolist()}")
        have = np.isin(ids, self.item_ids.astype(str))
        out = np.full(self.n_items, np.nan)
        pos = _positions(self.item_ids, ids[have], "design")
        out[pos] = p[have]
        missing = (self.gold >= 0) & ~np.isfinite(out)
        if missing.any():
            shown = ", ".join(repr(str(x)) for x in self.item_ids[missing][:5])
            raise DataError(f"{int(missing.sum())} gold item(s) of {self.name!r} are not in the design "
                            f"(no inclusion probability): {shown}. Gold items must be the ones the design "
                            "selected (or give no design: they are then taken as a uniform sample).")
        return replace(self, gold_pi=out)

    def select_labelers(self, keep: npt.NDArray[np.bool_]) -> tuple[AnnotationSet, int, int]:
        """Drop the annotations of labelers where ``keep`` is False.

        Returns the new set, the number of annotations removed and the number
        of items left without any label (removed too). Used to exclude
        labelers unknown to a calibration; the caller records the counts.
        """
        keep_ann = keep[self.labeler]
        if keep_ann.all():
            return self, 0, 0
        item_of = self.annotation_item
        counts = np.bincount(item_of[keep_ann], minlength=self.n_items)
        keep_item = counts > 0
        new_code = np.cumsum(keep).astype(np.int32) - 1
        ptr = np.zeros(int(keep_item.sum()) + 1, dtype=np.int64)
        np.cumsum(counts[keep_item], out=ptr[1:])
        labeler_ids = self.labeler_ids[keep]
        new = AnnotationSet(
            item_ids=self.item_ids[keep_item],
            labeler_ids=labeler_ids,
            item_ptr=ptr,
            labeler=new_code[self.labeler[keep_ann]],
            label=self.label[keep_ann].copy(),
            gold=self.gold[keep_item].copy(),
            item_round=self.item_round[keep_item].copy(),
            round_ids=self.round_ids,
            covariates=None if self.covariates is None else self.covariates[keep_item].copy(),
            covariate_names=self.covariate_names,
            report=self.report,
            name=self.name,
            repeated_pairs=self.repeated_pairs,
            gold_pi=None if self.gold_pi is None else self.gold_pi[keep_item].copy(),
        )
        return new, int((~keep_ann).sum()), int((~keep_item).sum())


def _pair(x: Any) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    if isinstance(x, Mapping):
        return np.asarray(list(x.keys())), np.asarray(list(x.values()))
    a, b = x
    return np.asarray(a), np.asarray(b)


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


@dataclass
class _Table:
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


def _load(obj: TableLike, role: str, string_cols: Sequence[str] = (),
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


def _stem(path: str) -> str:
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


def _resolve(df: pd.DataFrame, given: str | None, candidates: Sequence[str], what: str, where: str) -> str:
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


def _ids_to_str(s: pd.Series) -> pd.Series:
    """Identifiers as strings; missing stay missing; 3.0 from a float column becomes '3'.

    A column of text whose every id is an integer written as a float (``'3.0'``: what pandas writes for an
    integer id column that had a missing value) is read the same way: ``'3.0'`` becomes ``'3'``. A column
    that mixes such ids with others (``'3.0'`` and ``'x'``) is left as it is.
    """
    if pd.api.types.is_float_dtype(s.dtype):
        vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
        finite = vals[~np.isnan(vals)]
        if finite.size and np.all(np.isfinite(finite)) and np.all(np.abs(finite) < 2.0**53) and np.all(
            finite == np.round(finite)
        ):
            s = s.astype("Int64")
    out = s.astype("string")
    if not (pd.api.types.is_float_dtype(s.dtype) or pd.api.types.is_integer_dtype(s.dtype)) and len(out):
        stripped = out.str.strip()
        present = stripped.notna() & (stripped != "")
        if present.any():
            floaty = stripped[present].str.fullmatch(_FLOAT_INT_ID)
            if bool(floaty.all()):
                out = out.copy()
                out[present] = stripped[present].str.replace(_FLOAT_INT_TAIL, "", regex=True)
    return out


_FLOAT_INT_ID = r"[+-]?\d+\.0+"
_FLOAT_INT_TAIL = r"\.0+$"


def _id_codes(s: pd.Series) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.object_]]:
    """Integer codes into the sorted string forms of an id column; -1 for missing or blank.

    Factorises the raw values first and turns only the distinct values into
    strings, so a column of 1e7 integer ids costs one hash pass (a column of
    NumPy integers: a lookup table when its values span a short range).
    """
    if _is_plain_int(s.dtype) and len(s):
        return _int_id_codes(s.to_numpy())
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    ustr = _ids_to_str(pd.Series(uniques))
    blank = ustr.isna().to_numpy() | (ustr.str.strip() == "").fillna(True).to_numpy()
    ucodes, names = pd.factorize(ustr.where(~blank), sort=True, use_na_sentinel=True)
    remap = np.asarray(ucodes, dtype=np.int64)
    if remap.size == 0:  # every value missing
        return np.full(len(codes), -1, dtype=np.int64), np.asarray(names, dtype=object)
    out = np.where(codes >= 0, remap[np.maximum(codes, 0)], -1)
    return out.astype(np.int64), np.asarray(names, dtype=object)


_COMPILED_MIN_ROWS = 1_000_000
"""From this many rows on, :func:`_item_csr` and :func:`_int_id_codes` run compiled (numba), when numba is
installed; below it, compiling (or loading the compiled code) costs more than it saves."""


def _is_plain_int(dtype: Any) -> bool:
    """A NumPy integer dtype (not bool, not pandas' nullable Int64): a column that cannot hold a missing value."""
    return isinstance(dtype, np.dtype) and dtype.kind in "iu"


def _int_id_codes(vals: npt.NDArray[np.integer[Any]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.object_]]:
    """:func:`_id_codes` of a non-empty column of NumPy integers (never missing, never blank).

    Distinct integers have distinct decimal forms (``str(int)``, as ``astype("string")`` writes them), so
    the distinct values are ordered as their strings (:func:`_decimal_order`) and only they are turned into
    strings; the rows' codes are one lookup.
    """
    import pyarrow as pa  # a dependency of heroeval; imported here to keep `import heroeval` light

    lo, hi = int(vals.min()), int(vals.max())
    wide = np.uint64 if vals.dtype.kind == "u" else np.int64  # values (and their offsets from lo) in this type
    if hi - lo < max(2 * vals.size, 1 << 16):  # a short range: a lookup table instead of a hash
        compiled = vals.size >= _COMPILED_MIN_ROWS and jit.HAVE_NUMBA
        base = wide(lo)
        offset = None if compiled else np.subtract(vals, base, dtype=wide).astype(np.intp, copy=False)
        present = np.zeros(hi - lo + 1, dtype=bool)
        if compiled:
            jit.serial(_mark_kernel)(vals, base, present)
        else:
            present[offset] = True
        uniques = np.flatnonzero(present)  # value - lo, ascending
        values: npt.NDArray[Any] = uniques.astype(wide) + base
        order = _decimal_order(values)
        lookup = np.zeros(hi - lo + 1, dtype=np.int64)  # value - lo -> rank of its string
        lookup[uniques[order]] = np.arange(order.size, dtype=np.int64)
        if compiled:
            codes = np.empty(vals.size, dtype=np.int64)
            jit.serial(_lookup_kernel)(vals, base, lookup, codes)
        else:
            codes = lookup[offset]
    else:
        raw_codes, raw_uniques = pd.factorize(vals)
        ascending = np.argsort(raw_uniques)
        values = np.asarray(raw_uniques, dtype=wide)[ascending]
        order = _decimal_order(values)
        rank = np.empty(order.size, dtype=np.int64)
        rank[ascending[order]] = np.arange(order.size, dtype=np.int64)
        codes = rank[raw_codes]
    names = pa.array(values[order]).cast(pa.string()).to_numpy(zero_copy_only=False)
    return codes, np.asarray(names, dtype=object)


_POWERS_OF_TEN = 10 ** np.arange(19, dtype=np.int64)


def _decimal_order(values: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """The permutation that sorts distinct integers, given in ascending order, as their decimal strings.

    Strings compare digit by digit, a prefix first: the order of ``v * 10**(D - digits(v))`` (the digits of
    ``v`` padded with zeros to ``D``), ties (``1``, ``10``, ``100``) kept in ascending order by a stable sort.
    Negative numbers (a leading ``"-"``) come first, ordered by their absolute values the same way. Values
    of 10**18 or more in absolute value are sorted as strings.
    """
    if values.size and max(-int(values[0]), int(values[-1])) >= 10**18:
        import pyarrow as pa
        import pyarrow.compute as pc

        return np.asarray(pc.sort_indices(pa.array(values).cast(pa.string())).to_numpy(), dtype=np.intp)
    v = values.astype(np.int64)
    n_neg = int(np.searchsorted(v, 0))
    parts = []
    if n_neg:  # the magnitudes of the negatives in ascending order are v[n_neg - 1], v[n_neg - 2], ...
        parts.append(n_neg - 1 - _padded_order(-v[n_neg - 1::-1]))
    if n_neg < v.size:
        parts.append(n_neg + _padded_order(v[n_neg:]))
    return np.concatenate(parts).astype(np.intp) if parts else np.zeros(0, dtype=np.intp)


def _padded_order(mags: npt.NDArray[np.int64]) -> npt.NDArray[np.intp]:
    """:func:`_decimal_order` of ascending non-negative integers below 10**18."""
    digits = np.maximum(np.searchsorted(_POWERS_OF_TEN, mags, side="right"), 1)
    padded = mags * _POWERS_OF_TEN[int(digits.max()) - digits]
    return np.argsort(padded, kind="stable")  # ascending runs, one per digit count: timsort merges them


def _mark_kernel(vals: npt.NDArray[Any], base: Any, present: npt.NDArray[np.bool_]) -> None:
    """``present[v - base] = True`` for every value ``v`` (compiled by numba)."""
    for a in range(vals.shape[0]):
        present[vals[a] - base] = True


def _lookup_kernel(vals: npt.NDArray[Any], base: Any, lookup: npt.NDArray[np.int64],
                   codes: npt.NDArray[np.int64]) -> None:
    """``codes[a] = lookup[vals[a] - base]`` (compiled by numba)."""
    for a in range(vals.shape[0]):
        codes[a] = lookup[vals[a] - base]


def _compact(
    codes: npt.NDArray[np.int64], names: npt.NDArray[np.object_]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.object_]]:
    """Renumber codes 0..k-1 over the names actually used, keeping their sorted order."""
    used = np.zeros(len(names), dtype=bool)
    used[codes] = True
    if used.all():
        return codes.astype(np.int64, copy=False), np.asarray(names, dtype=object)
    new = np.cumsum(used) - 1
    return new[codes].astype(np.int64), np.asarray(names, dtype=object)[used]


def _apply_label_map(
    t: _Table, df: pd.DataFrame, col: str, label_map: Mapping[Any, int | None], what: str
) -> tuple[pd.DataFrame, npt.NDArray[np.bool_]]:
    """Recode ``col`` by ``label_map`` (keys compared as stripped strings); None marks rows to drop."""
    table = {str(k).strip(): v for k, v in label_map.items()}
    for k, v in table.items():
        if v not in (0, 1, None):
            raise DataError(f"label_map: {k!r} maps to {v!r}; values must be 0, 1 or None")
    raw = df[col]
    miss = raw.isna().to_numpy()
    keys = raw.astype("string").str.strip()
    known = keys.isin(list(table)).fillna(False).to_numpy(dtype=bool)
    # values already binary (0/1, true/false, ...) that the map does not name pass through unchanged
    low = keys.str.lower()
    binary = {**{k: 1 for k in _TRUE}, **{k: 0 for k in _FALSE}}
    passthrough = ~miss & ~known & low.isin(list(binary)).fillna(False).to_numpy(dtype=bool)
    unknown = ~miss & ~known & ~passthrough
    if unknown.any():
        r = int(np.flatnonzero(unknown)[0])
        raise DataError(
            f"{t.where(r)}: {what} {raw.iloc[r]!r} in column {col!r} is not in label_map "
            f"(keys {sorted(table)}; values already 0/1 or true/false pass through); "
            f"{int(unknown.sum())} such row(s) in all"
        )
    mapped = keys.map(table)
    if passthrough.any():
        mapped = mapped.astype(object)
        mapped[passthrough] = low[passthrough].map(binary).to_numpy(dtype=object)
    drop = (~miss & mapped.isna().to_numpy()).astype(bool)
    out = df.copy()
    out[col] = pd.to_numeric(mapped, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return out, drop


LabelParser = Callable[[pd.Series, "_Table", str, str], tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_]]]
"""``(column, table, column name, what) -> (int8 codes, missing mask)``; ``_build`` takes one (multi-class hook)."""


def _parse_binary(s: pd.Series, t: _Table, col: str, what: str) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_]]:
    """Parse a binary column; returns values (int8) and a missing mask.

    Raises a DataError naming the first offending row and value.
    """
    missing = s.isna().to_numpy()
    n = len(s)
    out = np.zeros(n, dtype=np.int8)
    if pd.api.types.is_bool_dtype(s.dtype):
        out[~missing] = s[~missing].astype(bool).to_numpy()
        return out, missing
    if _is_plain_int(s.dtype):  # no missing values, no float copy
        ints = s.to_numpy()
        bad = (ints != 0) & (ints != 1)
        if bad.any():
            _bad_value(t, col, what, bad, s)
        return ints.astype(np.int8), missing
    if pd.api.types.is_numeric_dtype(s.dtype):
        vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~missing & (vals != 0) & (vals != 1)
        if bad.any():
            _bad_value(t, col, what, bad, s)
        out[~missing] = vals[~missing].astype(np.int8)
        return out, missing
    low = s.astype("string").str.strip().str.lower()
    missing = missing | (low == "").fillna(True).to_numpy()
    is_true = low.isin(_TRUE).fillna(False).to_numpy(dtype=bool)
    is_false = low.isin(_FALSE).fillna(False).to_numpy(dtype=bool)
    bad = ~missing & ~is_true & ~is_false
    if bad.any():
        _bad_value(t, col, what, bad, s)
    out[is_true] = 1
    return out, missing


def _bad_value(t: _Table, col: str, what: str, bad: npt.NDArray[np.bool_], s: pd.Series) -> None:
    rows = np.flatnonzero(bad)
    r = int(rows[0])
    value = s.iloc[r]
    value = value.item() if hasattr(value, "item") else value
    raise DataError(
        f"{t.where(r)}: {what} {value!r} in column {col!r} is not binary "
        f"(expected 0/1 or true/false); {rows.size} such row(s) in all. "
        "Recode other values with label_map= (e.g. {'A': 1, 'B': 0, 'tie': None}), or read multi-class labels "
        "with heroeval.multiclass (classes=)."
    )


def _annotation_table(
    annotations: TableLike, item_col: str | None, labeler_col: str | None, label_col: str | None,
    round_col: str | Literal[False] | None, duplicates: str, missing: str, encoding: str | None = None,
) -> tuple[_Table, str, str, str | None]:
    """Check the policies, load the annotations table and resolve its item, labeler, label and round columns."""
    if duplicates not in ("keep", "first", "error"):
        raise DataError(f"duplicates must be 'keep', 'first' or 'error', got {duplicates!r}")
    if missing not in ("drop", "error"):
        raise DataError(f"missing must be 'drop' or 'error', got {missing!r}")
    id_cols = [c for c in (item_col, labeler_col, *ITEM_COLUMNS, *LABELER_COLUMNS) if c]
    df, src, hdr = _load(annotations, "annotations", string_cols=[*id_cols, "label", label_col or ""],
                         encoding=encoding)
    ann = _Table("annotations", src, df, "", hdr)
    ann.item_col, lab_c, lbl_c, rnd_c = _annotation_columns(df, item_col, labeler_col, label_col, round_col, src)
    return ann, lab_c, lbl_c, rnd_c


def _annotation_columns(
    df: pd.DataFrame, item_col: str | None, labeler_col: str | None, label_col: str | None,
    round_col: str | Literal[False] | None, where: str,
) -> tuple[str, str, str, str | None]:
    """The item, labeler, label and round columns of an annotations table (given or recognised)."""
    i_c = _resolve(df, item_col, ITEM_COLUMNS, "item", where)
    l_c = _resolve(df, labeler_col, LABELER_COLUMNS, "labeler", where)
    y_c = _resolve(df, label_col, LABEL_COLUMNS, "label", where)
    if round_col is False:
        r_c = None
    elif round_col is None:
        r_c = "round" if "round" in df.columns else None
    else:
        r_c = _resolve(df, round_col, (), "round", where)
    return i_c, l_c, y_c, r_c


_CELL_TYPES = (str, int, float, bool, np.generic, type(None), type(pd.NA), type(pd.NaT))


def _side_tables(
    gold: TableLike | None, covariates: TableLike | None, item_col: str | None, gold_item_col: str | None,
    gold_col: str | None, covariate_item_col: str | None, encoding: str | None = None,
) -> tuple[_Table | None, str | None, _Table | None]:
    """Load the gold and covariate tables and resolve their item (and gold) columns: (gold table, gold column, covariates)."""
    gold_t = None
    if gold is not None:
        gcols = [c for c in (gold_item_col, item_col, *ITEM_COLUMNS) if c]
        gdf, gsrc, ghdr = _load(gold, "gold", string_cols=gcols, encoding=encoding)
        g_item = gold_item_col if gold_item_col is not None else (item_col if item_col in gdf.columns else None)
        gold_t = _Table("gold", gsrc, gdf, _resolve(gdf, g_item, ITEM_COLUMNS, "gold item", gsrc), ghdr)
        gold_col = _resolve(gdf, gold_col, GOLD_COLUMNS, "gold", gsrc)
    cov_t = None
    if covariates is not None:
        ccols = [c for c in (covariate_item_col, item_col, *ITEM_COLUMNS) if c]
        cdf, csrc, chdr = _load(covariates, "covariates", string_cols=ccols, encoding=encoding)
        c_item = covariate_item_col if covariate_item_col is not None else (item_col if item_col in cdf.columns else None)
        cov_t = _Table("covariates", csrc, cdf, _resolve(cdf, c_item, ITEM_COLUMNS, "covariate item", csrc), chdr)
    return gold_t, gold_col, cov_t


def _check_cells(t: _Table, cols: Sequence[str]) -> None:
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


def repeated_pair_error(where: str, item: Any, labeler: Any, n_dup: int) -> DataError:
    """The error of ``duplicates="error"`` (shared by the readers)."""
    return DataError(f"{where}: repeated (item, labeler) pair ({item!r}, {labeler!r}); {n_dup} repeated row(s) in "
                     "all (duplicates='error'; use 'keep' or 'first')")


def _build(
    ann: _Table,
    *,
    labeler_col: str,
    label_col: str,
    round_col: str | None,
    gold: _Table | None,
    gold_col: str,
    covariates: _Table | None,
    covariate_cols: Sequence[str] | None,
    duplicates: str,
    missing: str,
    name: str,
    label_map: Mapping[Any, int | None] | None = None,
    label_parser: LabelParser | None = None,
) -> AnnotationSet:
    _check_cells(ann, [ann.item_col, labeler_col, label_col, *([round_col] if round_col else [])])
    if gold is not None:
        _check_cells(gold, [gold.item_col, gold_col])
    if covariates is not None:
        _check_cells(covariates, [covariates.item_col])
    try:
        return _build_checked(ann, labeler_col=labeler_col, label_col=label_col, round_col=round_col, gold=gold,
                              gold_col=gold_col, covariates=covariates, covariate_cols=covariate_cols,
                              duplicates=duplicates, missing=missing, name=name, label_map=label_map,
                              label_parser=label_parser)
    except DataError:
        raise
    except (TypeError, ValueError, OverflowError, UnicodeError) as exc:  # last resort: never a raw traceback
        raise DataError(f"{ann.source}: could not ingest the {ann.table} table ({type(exc).__name__}: {exc})") from exc


def _build_checked(
    ann: _Table,
    *,
    labeler_col: str,
    label_col: str,
    round_col: str | None,
    gold: _Table | None,
    gold_col: str,
    covariates: _Table | None,
    covariate_cols: Sequence[str] | None,
    duplicates: str,
    missing: str,
    name: str,
    label_map: Mapping[Any, int | None] | None = None,
    label_parser: LabelParser | None = None,
) -> AnnotationSet:
    parse = _parse_binary if label_parser is None else label_parser
    df = ann.df
    n_read = len(df)
    mapped_out = np.zeros(n_read, dtype=bool)
    if label_map is not None:
        df, mapped_out = _apply_label_map(ann, df, label_col, label_map, "label")
    item_code, item_names = _id_codes(df[ann.item_col])
    lab_code, lab_names = _id_codes(df[labeler_col])
    labels, label_missing = parse(df[label_col], ann, label_col, "label")
    miss_item = item_code < 0
    miss_lab = lab_code < 0
    dropped: dict[str, int] = {}
    notes: dict[str, int] = {}
    label_missing = label_missing & ~mapped_out
    bad = miss_item | miss_lab | label_missing | mapped_out
    if (bad & ~mapped_out).any() or mapped_out.any():
        if missing == "error" and (bad & ~mapped_out).any():
            r = int(np.flatnonzero(bad & ~mapped_out)[0])
            what = "item" if miss_item[r] else ("labeler" if miss_lab[r] else "label")
            raise DataError(f"{ann.where(r)}: missing {what} (missing='error')")
        for reason, mask in (
            ("missing item id", miss_item),
            ("missing labeler id", ~miss_item & miss_lab),
            ("missing label", ~miss_item & ~miss_lab & label_missing),
            ("label mapped to None by label_map (e.g. a tie)", ~miss_item & ~miss_lab & mapped_out),
        ):
            if mask.any():
                dropped[reason] = int(mask.sum())
    keep = ~bad
    round_code = round_names = None
    if round_col is not None:
        round_code, round_names = _id_codes(df[round_col])
        miss_r = (round_code < 0) & keep
        if miss_r.any():
            if missing == "error":
                raise DataError(f"{ann.where(int(np.flatnonzero(miss_r)[0]))}: missing round")
            dropped["missing round"] = int(miss_r.sum())
            keep &= ~miss_r

    # the rows used: row_idx (None while that is every row, in order: no copies of the columns)
    row_idx: npt.NDArray[np.intp] | None = None
    ic, lc, lv = item_code, lab_code, labels
    if not keep.all():
        row_idx = np.flatnonzero(keep)
        ic, lc, lv = item_code[row_idx], lab_code[row_idx], labels[row_idx]

    # compact the codes to the ids actually used (names stay sorted)
    item_codes, item_ids_arr = _compact(ic, item_names)
    lab_codes, labeler_ids = _compact(lc, lab_names)
    n_items = len(item_ids_arr)
    ptr, labeler_sorted, label_sorted, dup = _item_csr(item_codes, lab_codes, lv, n_items, len(labeler_ids))

    # repeated (item, labeler) pairs (dropping repeats leaves every item and labeler: the codes stay compact)
    if dup.any():
        n_dup = int(dup.sum())
        if duplicates == "error":
            k = int(np.flatnonzero(dup)[0])
            raise repeated_pair_error(ann.where(k if row_idx is None else int(row_idx[k])),
                                      item_ids_arr[item_codes[k]], labeler_ids[lab_codes[k]], n_dup)
        if duplicates == "first":
            dropped["repeated (item, labeler) pair, later rows dropped"] = n_dup
            sel = ~dup
            row_idx = np.flatnonzero(sel) if row_idx is None else row_idx[sel]
            item_codes, lab_codes, lv = item_codes[sel], lab_codes[sel], lv[sel]
            ptr, labeler_sorted, label_sorted, _ = _item_csr(item_codes, lab_codes, lv, n_items, len(labeler_ids))
        else:
            notes["repeated (item, labeler) pair kept as separate labels"] = n_dup

    # rounds: one per item
    if round_code is not None and round_names is not None:
        rcodes, rnames = _compact(round_code if row_idx is None else round_code[row_idx], round_names)
        first = np.full(n_items, -1, dtype=np.int64)
        first[item_codes[::-1]] = rcodes[::-1]
        conflict = rcodes != first[item_codes]
        if conflict.any():
            k = int(np.flatnonzero(conflict)[0])
            r = k if row_idx is None else int(row_idx[k])
            raise DataError(
                f"{ann.where(r)}: item {item_ids_arr[item_codes[k]]!r} is in round {rnames[rcodes[k]]!r} here but in round "
                f"{rnames[first[item_codes[k]]]!r} on an earlier row; an item must belong to one "
                f"round (column {round_col!r}); pass round_col=False to ignore the column"
            )
        item_round = first.astype(np.int32)
        round_ids = tuple(str(x) for x in rnames)
    else:
        item_round = np.zeros(n_items, dtype=np.int32)
        round_ids = ("all",)

    reports = [
        TableReport("annotations", ann.source, n_read, len(item_codes), dropped, notes)
    ]

    # gold
    gold_arr = np.full(n_items, -1, dtype=np.int8)
    if gold is not None:
        gold_arr, g_report = _attach_gold(gold, gold_col, item_ids_arr, label_map, parse, ids_sorted=True)
        reports.append(g_report)

    # covariates
    cov_arr: npt.NDArray[np.float64] | None = None
    cov_names: tuple[str, ...] = ()
    if covariates is not None:
        cdf = covariates.df
        cols = covariate_columns(cdf, covariates.item_col, covariate_cols, covariates.source)
        c_items = _ids_to_str(cdf[covariates.item_col])
        c_dropped: dict[str, int] = {}
        cmiss = c_items.isna().to_numpy()
        if cmiss.any():
            c_dropped["missing item id"] = int(cmiss.sum())
        ckeep = np.flatnonzero(~cmiss)
        code = pd.Index(item_ids_arr).get_indexer(pd.Index(c_items.to_numpy(dtype=object)[ckeep]))
        unknown = code < 0
        if unknown.any():
            c_dropped["covariates for an item with no silver label"] = int(unknown.sum())
        ckeep, code = ckeep[~unknown], code[~unknown]
        if pd.Series(code).duplicated().any():
            k = int(np.flatnonzero(pd.Series(code).duplicated().to_numpy())[0])
            raise DataError(f"{covariates.where(int(ckeep[k]))}: second covariate row for item {item_ids_arr[code[k]]!r}")
        mat = cdf[cols].to_numpy(dtype=np.float64, na_value=np.nan)[ckeep]
        nan = ~np.isfinite(mat)
        if nan.any():
            r, c = np.argwhere(nan)[0]
            raise DataError(
                f"{covariates.where(int(ckeep[r]))}: covariate {cols[c]!r} is missing or not finite "
                f"({mat[r, c]!r}); impute or drop the column first"
            )
        have = np.zeros(n_items, dtype=bool)
        have[code] = True
        if not have.all():
            lacking = item_ids_arr[~have]
            raise DataError(
                f"{covariates.source}: {lacking.size} annotated item(s) have no covariate row, "
                f"e.g. {list(lacking[:5])}; HERO-2 needs covariates for every item"
            )
        cov_arr = np.empty((n_items, len(cols)), dtype=np.float64)
        cov_arr[code] = mat
        cov_names = tuple(str(c) for c in cols)
        reports.append(TableReport("covariates", covariates.source, len(cdf), len(ckeep), c_dropped, {}))

    return AnnotationSet(
        item_ids=item_ids_arr,
        labeler_ids=np.asarray(labeler_ids, dtype=object),
        item_ptr=ptr,
        labeler=labeler_sorted,
        label=label_sorted,
        gold=gold_arr,
        item_round=item_round,
        round_ids=round_ids,
        covariates=cov_arr,
        covariate_names=cov_names,
        report=IngestReport(tuple(reports)),
        name=name,
        repeated_pairs=bool(dup.any()) and duplicates == "keep",
    )


def _item_csr(
    item: npt.NDArray[np.int64], labeler: npt.NDArray[np.int64], label: npt.NDArray[np.int8], n_items: int,
    n_labelers: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.int8], npt.NDArray[np.bool_]]:
    """The rows sorted by item: CSR offsets, labeler codes and labels (a stable sort: each item's rows stay in file
    order), and, in row order, which rows repeat the (item, labeler) pair of an earlier row."""
    if item.size >= _COMPILED_MIN_ROWS and jit.HAVE_NUMBA:
        ptr = np.zeros(n_items + 1, dtype=np.int64)
        labeler_sorted = np.empty(item.size, dtype=np.int32)
        label_sorted = np.empty(item.size, dtype=np.int8)
        dup = np.zeros(item.size, dtype=np.bool_)
        jit.serial(_item_csr_kernel)(item, labeler, label, ptr, labeler_sorted, label_sorted, dup, n_labelers)
        return ptr, labeler_sorted, label_sorted, dup
    order = np.argsort(item, kind="stable")
    ptr = np.zeros(n_items + 1, dtype=np.int64)
    np.cumsum(np.bincount(item, minlength=n_items), out=ptr[1:])
    dup = pd.Series(item * max(n_labelers, 1) + labeler).duplicated(keep="first").to_numpy()
    return ptr, labeler[order].astype(np.int32), label[order].astype(np.int8), dup


def _item_csr_kernel(
    item: npt.NDArray[np.int64], labeler: npt.NDArray[np.int64], label: npt.NDArray[np.int8],
    ptr: npt.NDArray[np.int64], labeler_sorted: npt.NDArray[np.int32], label_sorted: npt.NDArray[np.int8],
    dup: npt.NDArray[np.bool_], n_labelers: int,
) -> None:
    """:func:`_item_csr` as a counting sort, compiled by numba (fills ``ptr``, the sorted arrays and ``dup``).

    Item codes must be in ``0 .. len(ptr) - 2`` and labeler codes in ``0 .. n_labelers - 1`` (numba does not
    check bounds).
    """
    n = item.shape[0]
    n_items = ptr.shape[0] - 1
    for a in range(n):
        ptr[item[a] + 1] += 1
    for k in range(n_items):
        ptr[k + 1] += ptr[k]
    nxt = ptr[:-1].copy()  # each item's next free slot
    for a in range(n):
        p = nxt[item[a]]
        labeler_sorted[p] = labeler[a]
        label_sorted[p] = label[a]
        nxt[item[a]] = p + 1
    # repeats, found in item order (the slots of an item hold its rows in file order) ...
    repeat = np.zeros(n, dtype=np.bool_)
    last_item = np.full(n_labelers, -1, dtype=np.int64)  # the last item in which each labeler was seen
    n_repeats = 0
    for k in range(n_items):
        for p in range(ptr[k], ptr[k + 1]):
            if last_item[labeler_sorted[p]] == k:
                repeat[p] = True
                n_repeats += 1
            else:
                last_item[labeler_sorted[p]] = k
    # ... and marked in row order by walking the rows to their slots again
    if n_repeats:
        nxt[:] = ptr[:-1]
        for a in range(n):
            p = nxt[item[a]]
            dup[a] = repeat[p]
            nxt[item[a]] = p + 1


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


def _attach_gold(
    gold: _Table, gold_col: str, item_ids_arr: npt.NDArray[Any], label_map: Mapping[Any, int | None] | None,
    parse: LabelParser, *, ids_sorted: bool = False,
) -> tuple[npt.NDArray[np.int8], TableReport]:
    """Gold labels per item (-1 = none) and the gold table's row report.

    ``item_ids_arr`` are the annotated items' ids: strings, or integers when
    the scale ingest kept an integer item column (gold ids are then read as
    integers; one that is not is an item with no silver label).
    ``ids_sorted``: the ids are in sorted order, strings as strings, integers as numbers (looked up by bisection).
    """
    n_items = len(item_ids_arr)
    gold_arr = np.full(n_items, -1, dtype=np.int8)
    gdf = gold.df
    g_mapped = np.zeros(len(gdf), dtype=bool)
    if label_map is not None:
        gdf, g_mapped = _apply_label_map(gold, gdf, gold_col, label_map, "gold label")
    g_items = _ids_to_str(gdf[gold.item_col])
    g_vals, g_miss = parse(gdf[gold_col], gold, gold_col, "gold label")
    g_miss = g_miss & ~g_mapped
    g_dropped: dict[str, int] = {}
    if g_mapped.any():
        g_dropped["gold mapped to None by label_map (e.g. a tie)"] = int(g_mapped.sum())
    g_notes: dict[str, int] = {}
    gm_item = g_items.isna().to_numpy() & ~g_mapped
    if gm_item.any():
        g_dropped["missing item id"] = int(gm_item.sum())
    gm = g_miss & ~gm_item
    if gm.any():
        g_dropped["missing gold label"] = int(gm.sum())
    gkeep = np.flatnonzero(~gm_item & ~gm & ~g_mapped)
    gi = g_items.to_numpy(dtype=object)[gkeep]
    gv = g_vals[gkeep]
    code = _item_index(item_ids_arr, gi, ids_sorted=ids_sorted)
    unknown = code < 0
    if unknown.any():
        g_dropped["gold for an item with no silver label"] = int(unknown.sum())
    gkeep, gi, gv, code = gkeep[~unknown], gi[~unknown], gv[~unknown], code[~unknown]
    # repeated gold rows
    gdup = pd.Series(code).duplicated(keep="first").to_numpy()
    if gdup.any():
        firstval = np.full(n_items, -1, dtype=np.int8)
        firstval[code[::-1]] = gv[::-1]
        conflict = gv != firstval[code]
        if conflict.any():
            k = int(np.flatnonzero(conflict)[0])
            raise DataError(
                f"{gold.where(int(gkeep[k]))}: gold for item {gi[k]!r} is {int(gv[k])} here "
                f"but {int(firstval[code[k]])} on an earlier row"
            )
        g_dropped["repeated gold row (same value)"] = int(gdup.sum())
        gkeep, gv, code = gkeep[~gdup], gv[~gdup], code[~gdup]
    gold_arr[code] = gv
    return gold_arr, TableReport("gold", gold.source, len(gdf), len(gkeep), g_dropped, g_notes)


def _item_index(item_ids_arr: npt.NDArray[Any], ids: npt.NDArray[Any], *,
                ids_sorted: bool = False) -> npt.NDArray[np.intp]:
    """Positions of ``ids`` (strings) among the items, -1 where absent.

    ``ids_sorted``: ``item_ids_arr`` are in sorted order (strings as strings, integers as numbers), so a bisection
    per id finds them without a hash table of every item (the gold table is usually much smaller than the items).
    Integer ids are checked for order when not told.
    """
    if ids_sorted and item_ids_arr.dtype == object:
        ids = np.asarray(ids, dtype=object)
        pos = np.searchsorted(item_ids_arr, ids)
        hit = pos < item_ids_arr.size
        hit[hit] = item_ids_arr[pos[hit]] == ids[hit]
        return np.where(hit, pos, -1).astype(np.intp)
    if item_ids_arr.dtype.kind in "iu":
        num = pd.to_numeric(pd.Series(ids, dtype=object), errors="coerce")
        ok = num.notna().to_numpy() & (num.fillna(0) == num.fillna(0).round()).to_numpy()
        out = np.full(len(ids), -1, dtype=np.intp)
        if ok.any():
            want = num[ok].to_numpy(dtype=np.int64)
            if item_ids_arr.size and (ids_sorted or bool(np.all(item_ids_arr[1:] > item_ids_arr[:-1]))):
                # the DuckDB reader's integer items are in numeric order: a binary search, no hash table of them
                at = np.minimum(np.searchsorted(item_ids_arr, want), item_ids_arr.size - 1)
                out[ok] = np.where(item_ids_arr[at] == want, at, -1)
            else:
                out[ok] = pd.Index(item_ids_arr).get_indexer(pd.Index(want))
        return out
    return np.asarray(pd.Index(item_ids_arr).get_indexer(pd.Index(ids)), dtype=np.intp)


def _positions(item_ids: npt.NDArray[Any], ids: npt.NDArray[Any], what: str) -> npt.NDArray[np.intp]:
    """Positions of ``ids`` among ``item_ids`` (as strings); unknown ids are an error naming them."""
    index = {str(x): i for i, x in enumerate(item_ids)}
    pos = np.array([index.get(str(x), -1) for x in ids], dtype=np.intp)
    if (pos < 0).any():
        shown = ", ".join(repr(str(x)) for x in ids[pos < 0][:5])
        raise DataError(f"{what}: {int((pos < 0).sum())} item(s) are not in the annotation set: {shown}")
    return pos
