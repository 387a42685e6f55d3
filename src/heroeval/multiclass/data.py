"""Multi-class and ordinal annotation sets: reading, class order, class values."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Unpack

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.core.options import options_of
from heroeval.errors import DataError, HeroEvalError
from heroeval.ingest.annotations import AnnotationSet, build_annotation_set, item_frame, with_item_rounds
from heroeval.ingest.coding import ids_to_str
from heroeval.ingest.options import COLUMN_DEFAULTS, ColumnOptions, Columns, Duplicates, Missing, RowRules
from heroeval.ingest.read import DESIGN_COLUMN, read_design
from heroeval.ingest.tables import LoadedTable, TableLike, annotation_table, file_stem, side_tables

__all__ = ["MultiClassData", "MultiClassReadOptions", "multiclass_from_arrays", "read_multiclass"]

FloatArray = npt.NDArray[np.float64]

MAX_CLASSES = 100


@dataclass(frozen=True, eq=False)
class MultiClassData:
    """An annotation set whose labels (and gold) are class codes ``0..K-1``.

    Attributes
    ----------
    annotations : AnnotationSet
        The int-coded set; ``label`` and ``gold`` hold class codes (gold -1
        where there is none).
    classes : tuple of str
        Class names in their order: code ``k`` is ``classes[k]``.
    values : ndarray, shape (K,)
        The numeric value of each class (the mean score is ``sum_c values[c]
        p_c``): the class names themselves when they are all numbers, else
        ``0..K-1``.
    ordinal : bool
        Whether the class order is meaningful (Likert grades); the
        ``"ordinal"`` confusion structure needs it.
    """

    annotations: AnnotationSet
    classes: tuple[str, ...]
    values: FloatArray
    ordinal: bool = False

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def name(self) -> str:
        return self.annotations.name

    @property
    def n_items(self) -> int:
        return self.annotations.n_items

    def __repr__(self) -> str:
        a = self.annotations
        return (f"MultiClassData(name={a.name!r}, classes={list(self.classes)}, ordinal={self.ordinal}, "
                f"items={a.n_items}, labelers={a.n_labelers}, annotations={a.n_annotations}, gold={a.n_gold})")

    def take_items(self, idx: npt.ArrayLike, name: str | None = None) -> MultiClassData:
        return MultiClassData(self.annotations.take_items(idx, name), self.classes, self.values, self.ordinal)


def _keys(s: pd.Series) -> pd.Series:
    """Stripped string form of label values ('3.0' from a float column becomes '3')."""
    out: pd.Series = ids_to_str(s).str.strip()
    return out


def _as_number(x: str) -> float | None:
    try:
        v = float(x)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _class_order(found: Sequence[str]) -> tuple[str, ...]:
    """Sorted numerically when every class is a number, else as strings."""
    nums = [_as_number(x) for x in found]
    if all(v is not None for v in nums):
        return tuple(x for _, x in sorted(zip(nums, found, strict=True), key=lambda t: t[0]))  # type: ignore[arg-type,return-value]
    return tuple(sorted(found))


def _check_classes(classes: Sequence[Any], where: str = "classes") -> tuple[str, ...]:
    cl = tuple(str(c).strip() for c in classes)
    if len(cl) < 2:
        raise HeroEvalError(f"{where}: need at least 2 classes, got {list(cl)}")
    if len(cl) > MAX_CLASSES:
        raise HeroEvalError(f"{where}: at most {MAX_CLASSES} classes, got {len(cl)}")
    if any(c == "" for c in cl):
        raise HeroEvalError(f"{where}: empty class name in {list(cl)}")
    dup = sorted({c for c in cl if cl.count(c) > 1})
    if dup:
        raise HeroEvalError(f"{where}: repeated class names {dup}")
    return cl


def _class_values(classes: tuple[str, ...]) -> FloatArray:
    nums = [_as_number(c) for c in classes]
    if all(v is not None for v in nums):
        return np.asarray(nums, dtype=np.float64)
    return np.arange(len(classes), dtype=np.float64)


def _parser(classes: tuple[str, ...]) -> Any:
    table = {c: k for k, c in enumerate(classes)}
    # numeric spellings of numeric classes ("4" matches "4.0")
    num_table = {v: k for k, c in enumerate(classes) if (v := _as_number(c)) is not None}

    def parse(s: pd.Series, t: LoadedTable, col: str, what: str) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_]]:
        keys = _keys(s)
        missing = (keys.isna() | (keys == "")).fillna(True).to_numpy(dtype=bool)
        codes = keys.map(table)
        if num_table:
            unmatched = codes.isna() & ~pd.Series(missing, index=codes.index)
            if unmatched.any():
                def lookup(x: Any, /) -> Any:
                    v = _as_number(str(x))
                    return None if v is None else num_table.get(v)

                codes[unmatched] = keys[unmatched].map(lookup)
        bad = ~missing & codes.isna().to_numpy(dtype=bool)
        if bad.any():
            where, value, count = t.first_bad(bad, s)
            raise DataError(
                f"{where}: {what} {value!r} in column {col!r} is not one of the classes {list(classes)}; "
                f"{count} such row(s) in all (give every class in --classes / classes=)"
            )
        out = np.zeros(len(s), dtype=np.int8)
        ok = ~missing
        out[ok] = codes.to_numpy()[ok].astype(np.int8)
        return out, missing

    return parse


def _found_classes(series: Sequence[pd.Series]) -> list[str]:
    found: set[str] = set()
    for s in series:
        k = _keys(s)
        found.update(x for x in k.dropna().unique().tolist() if x != "")
    # numeric duplicates ("4" and "4.0") collapse to one class
    seen: dict[float, str] = {}
    out: list[str] = []
    for x in sorted(found):
        v = _as_number(x)
        if v is None:
            out.append(x)
        elif v not in seen:
            seen[v] = x
            out.append(x)
    return out


def _resolve_classes(
    classes: Sequence[Any] | str | None, ordinal: bool, series: Sequence[pd.Series], where: str
) -> tuple[str, ...]:
    if isinstance(classes, str):
        classes = [c for c in classes.split(",")]
    if classes is not None:
        return _check_classes(classes)
    found = _found_classes(series)
    if ordinal and not all(_as_number(x) is not None for x in found):
        raise HeroEvalError(
            f"{where}: ordinal labels {found[:10]} are not all numbers: give their order with classes= (CLI --classes)"
        )
    return _check_classes(_class_order(found), where=f"{where}: classes found in the data")


class MultiClassReadOptions(ColumnOptions, total=False):
    """:func:`read_multiclass`' column and row-rule keywords (its ``**options``), as :func:`heroeval.read_annotations`
    takes them but without ``label_map``."""

    duplicates: Duplicates
    missing: Missing


MULTICLASS_READ_DEFAULTS: Mapping[str, Any] = {**COLUMN_DEFAULTS, "duplicates": "keep", "missing": "drop"}


def read_multiclass(
    annotations: TableLike,
    *,
    gold: TableLike | None = None,
    covariates: TableLike | None = None,
    classes: Sequence[Any] | str | None = None,
    ordinal: bool = False,
    name: str | None = None,
    design: TableLike | None = None,
    **options: Unpack[MultiClassReadOptions],
) -> MultiClassData:
    """Read a K-class (or ordinal) annotation log; like :func:`heroeval.read_annotations`.

    Parameters
    ----------
    classes : sequence or comma-separated str, optional
        The class names in order (``"1,2,3,4,5"`` or ``["G", "P", "R", "X"]``).
        Labels are matched as stripped strings (and numerically for numeric
        classes, so ``4.0`` is class ``"4"``). Default: every value seen in
        the labels and gold, sorted numerically if all are numbers, else as
        strings. A label outside ``classes`` is an error naming its file and
        row.
    ordinal : bool, default False
        The classes are ordered grades (needed for ``structure="ordinal"``).
        Without ``classes`` the values must be numbers.
    design : path or table, optional
        How the gold items of a current round were drawn (``hero select``'s
        file: item_id, pi, and stratum for a stratified design), as
        :func:`heroeval.read_annotations` reads it; a ``pi`` column in the
        gold table serves too.
    Other parameters
        As in :func:`heroeval.read_annotations` (no ``label_map``: give the
        classes instead).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"item_id": [1, 1, 2], "labeler_id": ["a", "b", "a"], "label": ["good", "bad", "ok"]})
    >>> d = read_multiclass(df, classes="bad,ok,good", ordinal=True)
    >>> d.classes, d.annotations.label.tolist()
    (('bad', 'ok', 'good'), [2, 0, 1])
    """
    o = options_of("read_multiclass", options, MultiClassReadOptions, MULTICLASS_READ_DEFAULTS)
    rules = RowRules(duplicates=o["duplicates"], missing=o["missing"])
    item_col = o["item_col"]
    ann, lab_c, lbl_c, rnd_c = annotation_table(annotations, item_col, o["labeler_col"], o["label_col"],
                                                o["round_col"])
    df, src = ann.df, ann.source
    series = [df[lbl_c]]
    gold_t, gold_col, cov_t = side_tables(gold, covariates, item_col, o["gold_item_col"], o["gold_col"],
                                           o["covariate_item_col"])
    if gold_t is not None:
        series.append(gold_t.df[gold_col])
    cl = _resolve_classes(classes, ordinal, series, src)
    if name is None:
        name = file_stem(src) if not src.startswith("<") else "annotations"
    columns = Columns(labeler=lab_c, label=lbl_c, round=rnd_c, gold=gold_col or "gold",
                      covariates=o["covariate_cols"])
    aset = build_annotation_set(ann, columns=columns, rules=replace(rules, label_parser=_parser(cl)), gold=gold_t,
                                covariates=cov_t, name=name)
    if design is not None:
        aset = aset.with_design(*read_design(design, item_col=o["gold_item_col"] or item_col))
    elif gold_t is not None and DESIGN_COLUMN in gold_t.df.columns:
        g = gold_t.df[gold_t.df[DESIGN_COLUMN].astype(str).str.strip() != ""]
        aset = aset.with_design(*read_design(g, item_col=gold_t.item_col))
    return MultiClassData(aset, cl, _class_values(cl), bool(ordinal))


def multiclass_from_arrays(
    item: npt.ArrayLike,
    labeler: npt.ArrayLike,
    label: npt.ArrayLike,
    *,
    classes: Sequence[Any] | str | None = None,
    ordinal: bool = False,
    gold: Mapping[Any, Any] | tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
    item_round: Mapping[Any, Any] | tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
    name: str = "arrays",
) -> MultiClassData:
    """Build a :class:`MultiClassData` from parallel arrays (simulations, tests).

    Examples
    --------
    >>> d = multiclass_from_arrays([1, 1, 2], ["a", "b", "a"], [0, 2, 1], classes=[0, 1, 2], gold=([1], [2]))
    >>> d.n_classes, d.annotations.gold.tolist()
    (3, [2, -1])
    """
    ann = pd.DataFrame({"item_id": np.asarray(item), "labeler_id": np.asarray(labeler), "label": np.asarray(label)})
    series = [ann["label"]]
    gold_t = None
    if gold is not None:
        gdf = item_frame(gold, "gold")
        gold_t = LoadedTable("gold", name, gdf, "item_id", False)
        series.append(gdf["gold"])
    rnd = None
    if item_round is not None:
        ann, _ = with_item_rounds(ann, item_round)
        rnd = "round"
    cl = _resolve_classes(classes, ordinal, series, name)
    aset = build_annotation_set(LoadedTable("annotations", name, ann, "item_id", False),
                                columns=Columns(labeler="labeler_id", label="label", round=rnd),
                                rules=RowRules(duplicates="keep", missing="error", label_parser=_parser(cl)),
                                gold=gold_t, covariates=None, name=name)
    return MultiClassData(aset, cl, _class_values(cl), bool(ordinal))


def as_multiclass(ds: AnnotationSet | MultiClassData, what: str = "data") -> MultiClassData:
    """A binary :class:`AnnotationSet` is a 2-class set with classes ``("0", "1")``."""
    if isinstance(ds, MultiClassData):
        return ds
    if isinstance(ds, AnnotationSet):
        return MultiClassData(ds, ("0", "1"), np.array([0.0, 1.0]), False)
    raise HeroEvalError(f"{what} must be a MultiClassData (read_multiclass) or an AnnotationSet, got {type(ds).__name__}")

