"""Several methods' estimates of one round, with the recommendation and the drift check that go with them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pandas as pd

from heroeval.estimators.records import DriftCheck, Recommendation
from heroeval.estimators.results import DEFAULT_CI_METHOD, EstimateResult
from heroeval.estimators.table import EstimatesTable
from heroeval.ingest.annotations import IngestReport

__all__ = ["EstimateCollection"]


@dataclass(frozen=True)
class EstimateCollection(Mapping[str, EstimateResult]):
    """Several methods' estimates of the same current round, by method name.

    ``recommended`` is what ``method="auto"`` chose (``estimate(..., recommend=True)``); ``drift`` the labeler
    drift check, or why it could not run. :meth:`table` is the one table model that ``summary()``,
    ``to_frame()``, ``_repr_html_``, the terminal and the HTML report render.
    """

    results: Mapping[str, EstimateResult]
    ingest: IngestReport | None = None
    skipped: Mapping[str, str] = field(default_factory=dict)
    recommended: Recommendation | None = None
    drift: DriftCheck | str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "results", MappingProxyType(dict(self.results)))
        object.__setattr__(self, "skipped", MappingProxyType(dict(self.skipped)))

    def __getitem__(self, key: str) -> EstimateResult:
        try:
            return self.results[key]
        except KeyError:
            reason = self.skipped.get(key)
            if reason:
                raise KeyError(f"{key} was not computed: {reason}") from None
            raise

    def __iter__(self) -> Iterator[str]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def table(self, confidence_level: float = 0.95, ci_method: str = DEFAULT_CI_METHOD,
              alternative: str = "two-sided") -> EstimatesTable:
        """The table model: the recommended estimate first (its status the recommendation's), then each method."""
        rows = []
        reason = None
        if self.recommended is not None:
            rec = self.recommended
            r = rec.result
            w = "" if rec.history_weight is None else f", w={rec.history_weight:g}"
            rows.append(r.row(confidence_level, ci_method, alternative, key="recommended",
                              title=f"recommended ({r.title}{w})", status=rec.status,
                              history_weight=rec.history_weight))
            reason = rec.reason
        rows += [r.row(confidence_level, ci_method, alternative) for r in self.results.values()]
        return EstimatesTable(tuple(rows), confidence_level, ci_method, alternative, self.skipped, reason)

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        return {
            "recommended": None if self.recommended is None else self.recommended.to_dict(confidence_level),
            "estimates": {m: r.to_dict(confidence_level) for m, r in self.results.items()},
            "skipped": dict(self.skipped),
            "ingest": None if self.ingest is None else self.ingest.to_dict(),
        }

    def to_json(self, indent: int | None = 1, confidence_level: float = 0.95) -> str:
        return json.dumps(self.to_dict(confidence_level), indent=indent)

    def to_frame(self, confidence_level: float = 0.95, ci_method: str = DEFAULT_CI_METHOD) -> pd.DataFrame:
        """One row per method (index: the method name), the recommended estimate first as ``"recommended"``.

        Columns: title, estimate, standard_error, ci_low, ci_high, ci_method, confidence_level, n_items,
        n_annotations, n_labelers, status, notes (the recommended row's status is the recommendation's, for
        example ``"unreliable"``). Methods not computed are left out (``skipped`` says why).
        """
        return self.table(confidence_level, ci_method).to_frame()

    def _repr_html_(self) -> str:
        return self.table().as_html()

    def __repr__(self) -> str:
        return f"<EstimateCollection: {len(self.results)} method(s)>\n{self.summary()}"

    def summary(self, confidence_level: float = 0.95) -> str:
        """The plain-text table (:meth:`EstimatesTable.as_text`)."""
        return self.table(confidence_level).as_text()
