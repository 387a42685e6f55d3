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

This module holds the container (:class:`AnnotationSet`, :class:`IngestReport`,
:class:`TableReport`) and its assembly from loaded tables, where these row
policies are applied (:func:`build_annotation_set`); reading the tables and
finding their columns is :mod:`heroeval.ingest.tables`, label parsing
:mod:`heroeval.ingest.labels` and the integer coding of ids and rows
:mod:`heroeval.ingest.coding`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.errors import DataError
from heroeval.ingest.coding import _compact, _id_codes, _item_csr, _item_index, _positions, ids_to_str
from heroeval.ingest.labels import LabelParser, _apply_label_map
from heroeval.ingest.options import Columns, RowRules
from heroeval.ingest.tables import LoadedTable, _check_cells, covariate_columns

__all__ = [
    "AnnotationSet",
    "IngestReport",
    "TableReport",
]


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
    gold_stratum : ndarray of object (str), shape (n_items,), or None
        The stratum of each item in a stratified design (``""`` outside the
        sample), ``None`` when the design has no strata: the estimators'
        variance is then the stratified one (residuals centred within strata).
    item_group : ndarray of int32, shape (n_items,), or None
        The cluster of each item (prompt, query, topic, conversation:
        :meth:`with_groups`), ``None`` when items are independent. With groups
        every current-round standard error is cluster-robust by group
        (:meth:`heroeval.estimators.results.Influence.variance_current`).
    group_ids : tuple of str
        The groups' names (empty without groups).
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
    gold_stratum: npt.NDArray[np.object_] | None = None  # strata of a stratified design ("" off the sample)
    item_group: npt.NDArray[np.int32] | None = None  # cluster of each item (with_groups); None: independent items
    group_ids: tuple[str, ...] = ()

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
        if self.gold_stratum is not None:
            self.gold_stratum.setflags(write=False)
        if self.item_group is not None:
            if self.item_group.shape != (self.n_items,):
                raise DataError(f"{self.name!r}: item_group has shape {self.item_group.shape}, expected "
                                f"({self.n_items},)")
            self.item_group.setflags(write=False)

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
        grp = f", item groups={len(self.group_ids)}" if self.item_group is not None else ""
        return (
            f"AnnotationSet(name={self.name!r}, items={self.n_items}, "
            f"labelers={self.n_labelers}, annotations={self.n_annotations}, "
            f"gold={self.n_gold}, rounds={self.n_rounds}{grp}{cov})"
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
        gold_df = None if gold is None else item_frame(gold, "gold")
        round_df = None
        if item_round is not None:
            ann, round_df = with_item_rounds(ann, item_round)
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
            cov_df.insert(0, "item_id", ids_to_str(pd.Series(np.asarray(ci))).to_numpy())
        return build_annotation_set(
            LoadedTable("annotations", name, ann, "item_id", False),
            columns=Columns(labeler="labeler_id", label="label", round="round" if round_df is not None else None),
            rules=RowRules(duplicates="keep", missing="error"),
            gold=None if gold_df is None else LoadedTable("gold", name, gold_df, "item_id", False),
            covariates=None if cov_df is None else LoadedTable("covariates", name, cov_df, "item_id", False),
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
            gold_stratum=None if self.gold_stratum is None else self.gold_stratum[ix],
            item_group=None if self.item_group is None else self.item_group[ix],
            group_ids=self.group_ids,
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

    def with_design(self, items: npt.ArrayLike, pi: npt.ArrayLike,
                    strata: npt.ArrayLike | None = None) -> AnnotationSet:
        """A copy that records the gold sample's design: item ``items[k]`` was drawn with probability ``pi[k]``.

        ``pi`` are the inclusion probabilities a design such as
        :func:`heroeval.inference.select.select_items` wrote beside the items
        it chose (in (0, 1]). Every gold item of the set must be among
        ``items``; the estimators with current gold then weight each gold
        item by ``1 / pi`` (Hajek). ``strata`` (one label per item, for a
        stratified design: a simple random sample of ``k_h`` of the ``N_h``
        items of each stratum, ``pi = k_h / N_h``) makes the variance the
        stratified one.
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
        if strata is None:
            return replace(self, gold_pi=out, gold_stratum=None)
        st = np.asarray([str(x) for x in np.asarray(strata, dtype=object).ravel()], dtype=object)
        if st.size != ids.size:
            raise DataError(f"design: {ids.size} items but {st.size} strata")
        if (st[have] == "").any():
            raise DataError(f"design: {int((st[have] == '').sum())} item(s) have an empty stratum")
        sv = np.full(self.n_items, "", dtype=object)
        sv[pos] = st[have]
        return replace(self, gold_pi=out, gold_stratum=sv)

    def with_groups(self, groups: Mapping[Any, Any] | pd.Series | tuple[npt.ArrayLike, npt.ArrayLike] | None,
                    ) -> AnnotationSet:
        """A copy whose items are clustered by ``groups`` (prompt, query, topic, conversation); ``None`` removes them.

        ``groups`` maps item id to group: a mapping, a pandas Series indexed by item id, or an ``(items,
        groups)`` pair. Every item of the set needs a group (an item missing from ``groups`` is an error that
        names it; ids not in the set are ignored). Items of one group are treated as dependent and groups as
        independent: every current-round standard error becomes cluster-robust by group (docs/inference.md,
        "Grouped items").
        """
        if groups is None:
            return replace(self, item_group=None, group_ids=())
        if isinstance(groups, pd.Series):
            ids_in, vals_in = groups.index.to_numpy(), groups.to_numpy()
        else:
            ids_in, vals_in = as_pair(groups)
        if ids_in.shape[0] != vals_in.shape[0]:
            raise DataError(f"groups: {ids_in.shape[0]} item ids but {vals_in.shape[0]} groups")
        table = pd.DataFrame({"item_id": ids_to_str(pd.Series(ids_in)).to_numpy(dtype=object),
                              "group": pd.Series(vals_in).to_numpy(dtype=object)})
        if table["group"].isna().any():
            bad = table.loc[table["group"].isna(), "item_id"].head(5).tolist()
            raise DataError(f"groups: {int(table['group'].isna().sum())} item(s) have no group, e.g. {bad}")
        table["group"] = table["group"].astype(str)
        dup = table.drop_duplicates().duplicated("item_id", keep=False)
        if dup.any():
            bad = table.loc[dup, "item_id"].drop_duplicates().head(5).tolist()
            raise DataError(f"groups: item(s) {bad} are given two different groups; an item belongs to one group")
        per_item = table.drop_duplicates("item_id").set_index("item_id")["group"]
        got = per_item.reindex(pd.Index(self.item_ids.astype(str)))
        missing = got.isna().to_numpy()
        if missing.any():
            shown = ", ".join(repr(str(x)) for x in self.item_ids[missing][:5])
            raise DataError(f"groups: {int(missing.sum())} of {self.n_items} item(s) of {self.name!r} have no "
                            f"group: {shown}")
        codes, names = pd.factorize(got, sort=True)
        return replace(self, item_group=codes.astype(np.int32), group_ids=tuple(str(x) for x in names))

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
            gold_stratum=None if self.gold_stratum is None else self.gold_stratum[keep_item].copy(),
            item_group=None if self.item_group is None else self.item_group[keep_item].copy(),
            group_ids=self.group_ids,
        )
        return new, int((~keep_ann).sum()), int((~keep_item).sum())


def as_pair(x: Any) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    if isinstance(x, Mapping):
        return np.asarray(list(x.keys())), np.asarray(list(x.values()))
    a, b = x
    return np.asarray(a), np.asarray(b)


def item_frame(pairs: Any, column: str) -> pd.DataFrame:
    """A per-item table ``item_id`` (as text) and ``column`` from a mapping or an (ids, values) pair."""
    ids, values = as_pair(pairs)
    return pd.DataFrame({"item_id": ids_to_str(pd.Series(ids)), column: values})


def with_item_rounds(ann: pd.DataFrame, item_round: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The annotations ``ann`` (``item_id`` made text) with a ``round`` column from ``item_round`` (a mapping
    or an (ids, rounds) pair; one round per item), and that per-item table."""
    rounds = item_frame(item_round, "round")
    ann = ann.assign(item_id=ids_to_str(ann["item_id"]))
    return ann.merge(rounds, on="item_id", how="left", validate="many_to_one"), rounds


def repeated_pair_error(where: str, item: Any, labeler: Any, n_dup: int) -> DataError:
    """The error of ``duplicates="error"`` (shared by the readers)."""
    return DataError(f"{where}: repeated (item, labeler) pair ({item!r}, {labeler!r}); {n_dup} repeated row(s) in "
                     "all (duplicates='error'; use 'keep' or 'first')")


def build_annotation_set(
    ann: LoadedTable,
    *,
    columns: Columns,
    rules: RowRules,
    gold: LoadedTable | None,
    covariates: LoadedTable | None,
    name: str,
) -> AnnotationSet:
    """The :class:`AnnotationSet` of loaded tables: the annotations' ``columns`` read, the row ``rules`` applied.

    Any failure is a :class:`~heroeval.errors.DataError` naming the table.
    """
    _check_cells(ann, [ann.item_col, columns.labeler, columns.label, *([columns.round] if columns.round else [])])
    if gold is not None:
        _check_cells(gold, [gold.item_col, columns.gold])
    if covariates is not None:
        _check_cells(covariates, [covariates.item_col])
    try:
        return _build_checked(ann, columns=columns, rules=rules, gold=gold, covariates=covariates, name=name)
    except DataError:
        raise
    except (TypeError, ValueError, OverflowError, UnicodeError) as exc:  # last resort: never a raw traceback
        raise DataError(f"{ann.source}: could not ingest the {ann.table} table ({type(exc).__name__}: {exc})") from exc


def _build_checked(
    ann: LoadedTable,
    *,
    columns: Columns,
    rules: RowRules,
    gold: LoadedTable | None,
    covariates: LoadedTable | None,
    name: str,
) -> AnnotationSet:
    labeler_col, label_col, round_col = columns.labeler, columns.label, columns.round
    duplicates, missing, label_map = rules.duplicates, rules.missing, rules.label_map
    parse = rules.parse
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
        gold_arr, g_report = _attach_gold(gold, columns.gold, item_ids_arr, label_map, parse, ids_sorted=True)
        reports.append(g_report)

    # covariates
    cov_arr: npt.NDArray[np.float64] | None = None
    cov_names: tuple[str, ...] = ()
    if covariates is not None:
        cdf = covariates.df
        cols = covariate_columns(cdf, covariates.item_col, columns.covariates, covariates.source)
        c_items = ids_to_str(cdf[covariates.item_col])
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


def _attach_gold(
    gold: LoadedTable, gold_col: str, item_ids_arr: npt.NDArray[Any], label_map: Mapping[Any, int | None] | None,
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
    g_items = ids_to_str(gdf[gold.item_col])
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
