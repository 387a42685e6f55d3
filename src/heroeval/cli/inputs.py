"""Reading a command's input files: the history, a current round, and the current round with its calibration
(a calibration file, or Stage A on the history). Each table read is kept for the ingest tables
(:func:`heroeval.cli.console.register`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from heroeval.cli.console import busy, register
from heroeval.cli.options import Duplicates
from heroeval.errors import HeroEvalError

if TYPE_CHECKING:  # annotations only (strings at run time)
    from heroeval.ingest.annotations import AnnotationSet
    from heroeval.stage_a.calibration import Calibration


def read(path: Path, *, gold: Path | None = None, covariates: Path | None = None, name: str,
         item_col: str | None, labeler_col: str | None, label_col: str | None,
         round_col: str | None, duplicates: Duplicates,
         label_map: dict[str, int | None] | None = None, reader: str = "auto", memory_limit: str | None = None,
         progress: bool = False, gold_col: str | None = None, gold_item_col: str | None = None,
         encoding: str | None = None, title: str = "Ingest: history") -> AnnotationSet:
    from heroeval.ingest.read import read_annotations

    rc: Any = None if round_col is None else (False if round_col == "none" else round_col)
    ds = read_annotations(
        path, gold=gold, covariates=covariates, item_col=item_col, labeler_col=labeler_col,
        label_col=label_col, round_col=rc, duplicates=duplicates.value, name=name, label_map=label_map,
        engine=reader, memory_limit=memory_limit, progress=progress,  # type: ignore[arg-type]
        gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding,
    )
    return register(title, ds)


def read_current(path: Path, *, name: str, title: str, covariates: Path | None = None,
                 item_col: str | None, labeler_col: str | None, label_col: str | None, round_col: str | None,
                 duplicates: Duplicates, label_map: dict[str, int | None] | None,
                 encoding: str | None, gold: Path | None = None, design: Path | None = None,
                 gold_col: str | None = None, gold_item_col: str | None = None) -> AnnotationSet:
    """A current round. Its round column (--round-col, or 'round') is read only to tell several rounds apart.

    ``gold``: expert labels on some of its items (--current-gold), ``design``: how they were sampled (--design).
    """
    from heroeval.ingest.read import read_annotations

    rc: Any = None if round_col is None else (False if round_col == "none" else round_col)
    if isinstance(rc, str) and not has_column(path, rc):
        rc = False  # the history's round column is not in this file
    if design is not None and gold is None:
        raise HeroEvalError("--design goes with --current-gold (the expert labels of the selected items)")
    ds = read_annotations(path, covariates=covariates, item_col=item_col, labeler_col=labeler_col,
                          label_col=label_col, round_col=rc, duplicates=duplicates.value, label_map=label_map,
                          name=name, encoding=encoding, gold=gold, design=design,
                          gold_col=gold_col if gold is not None else None,
                          gold_item_col=gold_item_col if gold is not None else None)
    return register(title, ds)


def has_column(path: Path, col: str) -> bool:
    try:
        return col in columns_of(path)
    except Exception:  # unreadable here: the reader itself reports it
        return True


def columns_of(path: Path) -> list[str]:
    import pandas as pd

    suf = [x.lower() for x in path.suffixes]
    if ".parquet" in suf or ".pq" in suf:
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    if ".jsonl" in suf or ".ndjson" in suf or ".json" in suf:
        return list(pd.read_json(path, lines=True, nrows=1).columns)
    sep = "\t" if ".tsv" in suf else None
    return list(pd.read_csv(path, sep=sep, nrows=0, engine="python", encoding_errors="replace").columns)


def current_and_calibration(
    current: Path, covariates: Path | None, calibration: Path | None, history: Path | None, gold: Path | None,
    history_covariates: Path | None, label_map: dict[str, int | None] | None, history_weight: float | Literal["cv"],
    *, item_col: str | None, labeler_col: str | None, label_col: str | None, round_col: str | None,
    duplicates: Duplicates, gold_col: str | None = None, gold_item_col: str | None = None,
    encoding: str | None = None, checks: bool = True, current_gold: Path | None = None, design: Path | None = None,
    group_col: str | None = None,
) -> tuple[AnnotationSet, AnnotationSet | None, Calibration]:
    """Read the current round, and load the calibration file or calibrate the history (with model checks).

    ``group_col`` (``--group-col``) groups the history's items too when the history's labels file has that
    column (its calibration's covariance then cluster-robust by group); the caller groups the current round."""
    from heroeval.stage_a.calibration import load_calibration
    from heroeval.workflows.api import calibrate

    with busy("reading and calibrating"):
        cur = read_current(current, covariates=covariates, item_col=item_col, labeler_col=labeler_col,
                           label_col=label_col, round_col=round_col, duplicates=duplicates,
                           label_map=label_map, name="current", title="Ingest: current round", encoding=encoding,
                           gold=current_gold, design=design, gold_col=gold_col, gold_item_col=gold_item_col)
        if cur.has_gold:
            checks = False  # the round's own gold decides the recommended estimate: no mock rounds needed
        if calibration is not None:
            return cur, None, load_calibration(calibration)
        assert history is not None
        hist = read(history, gold=gold, covariates=history_covariates, name="history", item_col=item_col,
                    labeler_col=labeler_col, label_col=label_col, round_col=round_col, duplicates=duplicates,
                    label_map=label_map, gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding)
        if group_col is not None and has_column(history, group_col):
            hist = hist.with_groups(read_groups(history, group_col, item_col))
        return cur, hist, calibrate(hist, history_weight=history_weight, checks=checks)


def read_pairs(path: Path, col: str, item_col: str | None = None) -> Any:
    """``hero compare --pairs FILE --pair-col COL``: item id to prompt id, as a pandas Series (index: item id).

    The file is CSV/TSV (or Parquet): one row per item of either round, its item id column (``item_col``, else
    ``item_id``) and ``col``. :class:`HeroEvalError` names the file and what is wrong."""
    return read_item_column(path, col, item_col, option="--pairs", col_option="--pair-col", what="prompt")


def read_groups(path: Path, col: str, item_col: str | None = None) -> Any:
    """``--group-col COL``: each item's group (prompt, query, topic) from a labels file's column ``col``.

    One row per annotation: every row of an item must name the same group. Returns a pandas Series (index: item
    id) for :meth:`heroeval.AnnotationSet.with_groups`."""
    return read_item_column(path, col, item_col, option="--group-col", col_option="--group-col", what="group")


def read_item_column(path: Path, col: str, item_col: str | None, *, option: str, col_option: str,
                     what: str) -> Any:
    """The column ``col`` of ``path`` per item (index: item id; the item column ``item_col`` or a recognised
    name), one value per item; :class:`HeroEvalError` names the file, the row and what is wrong."""
    import pandas as pd

    from heroeval.ingest.tables import ITEM_COLUMNS, resolve_column

    suf = [x.lower() for x in path.suffixes]
    try:
        if ".parquet" in suf or ".pq" in suf:
            df = pd.read_parquet(path)
        elif ".jsonl" in suf or ".ndjson" in suf:
            df = pd.read_json(path, lines=True, dtype=False)
        else:
            df = pd.read_csv(path, sep="\t" if ".tsv" in suf else ",", dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise HeroEvalError(f"{option} {str(path)!r}: cannot read it ({exc})") from exc
    try:
        ic = resolve_column(df, item_col, ITEM_COLUMNS, "item", str(path))
    except HeroEvalError:
        ic = item_col or "item_id"
    for c in (ic, col):
        if c not in df.columns:
            raise HeroEvalError(f"{option} {str(path)!r}: no column {c!r} (columns: {list(df.columns)}); "
                                f"{col_option} names the {what} column")
    ids, vals = df[ic].astype(str), df[col].astype(str)
    empty = (vals.str.strip() == "") | df[col].isna()
    if empty.any():
        row = int(empty.to_numpy().nonzero()[0][0])
        raise HeroEvalError(f"{option} {str(path)!r}: row {row + 2} (item {ids.iloc[row]!r}) has an empty {col!r}")
    per_item = pd.Series(vals.to_numpy(), index=ids.to_numpy(), name=col).groupby(level=0)
    several = per_item.nunique()
    if (several > 1).any():
        item = several.index[several.to_numpy() > 1][0]
        raise HeroEvalError(f"{option} {str(path)!r}: item {item!r} has more than one {col!r}")
    return per_item.first()
