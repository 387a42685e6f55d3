"""What the store's operations return: an add's result, a calibration from the store, a stored round's estimate;
and the small helpers on a round's content that the store applies before writing it or after reading it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.results import EstimateResult
from heroeval.ingest.annotations import AnnotationSet
from heroeval.ingest.read import ReadOptions
from heroeval.ingest.tables import TableLike
from heroeval.stage_a.calibration import Calibration
from heroeval.store._rounds import RoundInfo

__all__ = ["AddResult", "RoundReadOptions", "StoreCalibration", "StoreEstimate", "gold_rates", "one_round"]


class RoundReadOptions(ReadOptions, total=False):
    """:meth:`Store.add`'s reader options: a round's ``covariates``, ``group_col`` (a column of the annotations
    file that groups the round's items) and :func:`heroeval.read_annotations`' own."""

    covariates: TableLike | None
    group_col: str | None


@dataclass(frozen=True)
class AddResult:
    """What an add did: the rounds added and the content already in the store (not added again)."""

    added: tuple[RoundInfo, ...]
    duplicates: tuple[tuple[str, RoundInfo], ...] = ()  # (name asked for, the stored round with the same content)

    def lines(self) -> list[str]:
        out = [f"added round {r.name!r}: {r.n_items} items, {r.n_annotations} labels, {r.n_gold} gold"
               f"{' (history)' if r.in_history else ''}" for r in self.added]
        out += [f"round {asked!r} not added: the same content is stored as round {r.name!r} "
                f"(content hash {r.content_hash[:12]}); nothing changed" for asked, r in self.duplicates]
        return out


@dataclass(frozen=True)
class StoreCalibration:
    """A Stage A fit from the store: the calibration, the rounds it used, and whether it was cached or fitted now."""

    calibration: Calibration
    key: str
    rounds: tuple[str, ...]
    settings: Mapping[str, Any]
    status: Literal["cached", "fitted"]
    seconds: float

    def line(self) -> str:
        how = "reused the cached fit" if self.status == "cached" else f"fitted now ({self.seconds:.1f} s; cached)"
        return (f"calibration {self.key[:12]} on {len(self.rounds)} rounds "
                f"({self.calibration.n_history_items} items, {self.calibration.n_gold_items} gold): {how}")


@dataclass(frozen=True)
class StoreEstimate:
    """A round estimated against the store's history."""

    round: str
    data: AnnotationSet
    estimates: EstimateCollection | EstimateResult
    calibration: StoreCalibration
    history_loaded: bool
    notes: tuple[str, ...] = ()


def one_round(ds: AnnotationSet) -> AnnotationSet:
    """The set with a single round (the store's round is the unit; a file's round column named it)."""
    if ds.n_rounds == 1 and ds.round_ids == ("all",):
        return ds
    return AnnotationSet(ds.item_ids, ds.labeler_ids, ds.item_ptr, ds.labeler, ds.label, ds.gold,
                         np.zeros(ds.n_items, dtype=np.int32), ("all",), ds.covariates, ds.covariate_names, ds.report,
                         ds.name, ds.repeated_pairs, item_group=ds.item_group, group_ids=ds.group_ids)


def gold_rates(ds: AnnotationSet) -> dict[str, tuple[float, float, int]]:
    """Each labeler's sensitivity and specificity on the round's gold items, and its number of gold labels."""
    g = ds.gold[ds.annotation_item]
    on = g >= 0
    out: dict[str, tuple[float, float, int]] = {}
    for j, lab in enumerate(ds.labeler_ids):
        m = on & (ds.labeler == j)
        pos, neg = m & (g == 1), m & (g == 0)
        npos, nneg = int(pos.sum()), int(neg.sum())
        sens = float(ds.label[pos].mean()) if npos else math.nan
        spec = float(1 - ds.label[neg].mean()) if nneg else math.nan
        out[str(lab)] = (sens, spec, npos + nneg)
    return out
