"""Ingest's options: the groups of settings that travel together from the readers down to the assembly.

:func:`heroeval.read_annotations`, :func:`heroeval.ingest.read.read_compact` and
:func:`heroeval.multiclass.read_multiclass` keep their keyword arguments; they gather them into these frozen
objects and pass those down:

* :class:`ColumnNames`: the column names as the caller gives them (None: found by their usual names), which the
  DuckDB engine resolves in its scan and, for the gold table, at the end;
* :class:`Columns`: the columns as found, which the assembly of an
  :class:`~heroeval.ingest.annotations.AnnotationSet` reads;
* :class:`RowRules`: the row policies (``duplicates``, ``missing``), the ``label_map`` recoding and the label
  parser, validated when made. Each rule lives in one declarative table (:data:`ROW_RULE_CONSTRAINTS`, in the
  manner of :data:`heroeval.stage_a.settings.EM_CONSTRAINTS`): a predicate and the phrase the error uses.

The readers take those keywords as ``**options`` typed by the ``TypedDict`` groups declared here once
(:class:`LogColumnOptions`, :class:`ColumnOptions`, :class:`RowOptions`; :mod:`heroeval.core.options`), with
their defaults beside them, so ``read_annotations(df, item_col="task")`` is unchanged and a misspelt keyword is
a type error and a :class:`TypeError` naming the closest name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal, TypedDict

from heroeval.errors import DataError
from heroeval.ingest.labels import LabelParser, parse_binary

__all__ = [
    "COLUMN_DEFAULTS",
    "DUPLICATES",
    "MISSING",
    "ROW_DEFAULTS",
    "ROW_RULE_CONSTRAINTS",
    "ColumnNames",
    "ColumnOptions",
    "Columns",
    "Duplicates",
    "LogColumnOptions",
    "Missing",
    "RowOptions",
    "RowRules",
]

Duplicates = Literal["keep", "first", "error"]
Missing = Literal["drop", "error"]
DUPLICATES = ("keep", "first", "error")
MISSING = ("drop", "error")


class LogColumnOptions(TypedDict, total=False):
    """The column-name keywords of an annotation log and its gold table (documented at
    :func:`heroeval.read_annotations`; None: found by the usual names, ``round_col=False`` ignores a round
    column)."""

    item_col: str | None
    labeler_col: str | None
    label_col: str | None
    round_col: str | Literal[False] | None
    gold_col: str | None
    gold_item_col: str | None


class ColumnOptions(LogColumnOptions, total=False):
    """:class:`LogColumnOptions` and the covariate table's column keywords."""

    covariate_item_col: str | None
    covariate_cols: Sequence[str] | None


COLUMN_DEFAULTS: Mapping[str, Any] = {
    "item_col": None, "labeler_col": None, "label_col": None, "round_col": None, "gold_col": None,
    "gold_item_col": None, "covariate_item_col": None, "covariate_cols": None,
}
"""Every column keyword's default: None (the column is found by its usual names)."""


class RowOptions(TypedDict, total=False):
    """The row-rule keywords of the readers (documented at :func:`heroeval.read_annotations`; the fields of
    :class:`RowRules` the caller gives)."""

    duplicates: Duplicates
    missing: Missing
    label_map: Mapping[Any, int | None] | None


ROW_DEFAULTS: Mapping[str, Any] = {"duplicates": "keep", "missing": "drop", "label_map": None}
"""The row rules' defaults (those of :class:`RowRules`)."""


@dataclass(frozen=True)
class ColumnNames:
    """The annotations' and gold table's column names as the caller gives them (see :func:`heroeval.read_annotations`).

    None: the column is found by its usual names; ``round=False`` ignores a round column. Not checked here: a name
    that is not a column is an error when the table is read, naming the table and its columns.
    """

    item: str | None = None
    labeler: str | None = None
    label: str | None = None
    round: str | Literal[False] | None = None
    gold: str | None = None
    gold_item: str | None = None

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> ColumnNames:
        """The names among column keywords (``item_col`` ... ``gold_item_col``; absent ones None)."""
        return cls(item=options.get("item_col"), labeler=options.get("labeler_col"),
                   label=options.get("label_col"), round=options.get("round_col"),
                   gold=options.get("gold_col"), gold_item=options.get("gold_item_col"))


@dataclass(frozen=True)
class Columns:
    """The columns the assembly of an annotation set reads, as found in the tables.

    ``labeler``, ``label`` and ``round`` (None: every item in one round ``"all"``) in the annotations table, whose
    item column is the loaded table's own (:attr:`~heroeval.ingest.tables.LoadedTable.item_col`); ``gold`` the gold
    table's label column; ``covariates`` the covariate columns asked for (None: every column but the item's; checked
    against the covariate table when it is read).
    """

    labeler: str
    label: str
    round: str | None = None
    gold: str = "gold"
    covariates: Sequence[str] | None = None


ROW_RULE_CONSTRAINTS: dict[str, tuple[Callable[[Any], bool], str] | None] = {
    "duplicates": (lambda v: v in DUPLICATES, "'keep', 'first' or 'error'"),
    "missing": (lambda v: v in MISSING, "'drop' or 'error'"),
    "label_map": None,  # checked where it is applied (values 0, 1 or None; a raw value it lacks names its row)
    "label_parser": None,  # the multi-class reader's hook (None: binary labels, parse_binary)
}
"""Each row rule's check: a predicate and what the error message says the value must be (None: unchecked here)."""


@dataclass(frozen=True)
class RowRules:
    """How rows are taken (documented at :func:`heroeval.read_annotations`), validated when made.

    ``duplicates`` is the policy for repeated (item, labeler) pairs, ``missing`` for rows with a missing item,
    labeler, label or round; ``label_map`` recodes raw labels (silver and gold) before they are parsed;
    ``label_parser`` parses a label column (None: :func:`~heroeval.ingest.labels.parse_binary`).
    """

    duplicates: Duplicates = "keep"
    missing: Missing = "drop"
    label_map: Mapping[Any, int | None] | None = None
    label_parser: LabelParser | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            rule = ROW_RULE_CONSTRAINTS[f.name]
            value = getattr(self, f.name)
            if rule is not None and not rule[0](value):
                raise DataError(f"{f.name} must be {rule[1]}, got {value!r}")

    @property
    def parse(self) -> LabelParser:
        """The label parser: ``label_parser``, or binary labels."""
        return parse_binary if self.label_parser is None else self.label_parser


assert tuple(ROW_RULE_CONSTRAINTS) == tuple(f.name for f in fields(RowRules)), "every row rule has one entry"
