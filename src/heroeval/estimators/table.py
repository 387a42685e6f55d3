"""One table model for a round's estimates; every view of it is a thin rendering.

:meth:`heroeval.estimators.collection.EstimateCollection.table` builds an :class:`EstimatesTable`: one
:class:`EstimateRow` per estimate (the recommended one first when there is one), the methods not computed and
why, and the reason for the recommendation. ``summary()``, ``to_frame()`` and ``_repr_html_`` of the results,
the terminal table of ``hero estimate`` (:mod:`heroeval.report.terminal`) and the HTML report
(:mod:`heroeval.report.html`) all render these rows, so a round reads the same estimate, interval, interval
method and status in each (as statsmodels' ``Summary`` renders one model as text and HTML).

The recommended row carries the recommendation's status (``"unreliable"`` when the model checks say the
labelers' model is wrong), not the status of the chosen method's root.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import pandas as pd

__all__ = ["FRAME_COLUMNS", "METHODS", "METHOD_TITLES", "EstimateRow", "EstimatesTable", "method_title"]

METHODS = ("majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1", "hero2", "hero_joint")
"""The methods of ``method="all"``, in its order. A round with gold labels of its own also has the current-gold
methods (``hero1_ppi``, ``prior_ppi``, ``mv_ppi``, ``gold_only``: :data:`heroeval.estimators.ppi.ALL_GOLD_METHODS`),
and every round the recommended estimate ``"auto"``."""
METHOD_TITLES = {
    "majority_vote": "Majority vote",
    "dawid_skene": "Dawid-Skene (current only)",
    "gold_proportion": "Gold-proportion calibration",
    "rogan_gladen": "Rogan-Gladen (per labeler, pooled)",
    "hero1": "HERO-1",
    "hero2": "HERO-2",
    "hero_joint": "HERO joint",
    "hero1_ppi": "HERO-1 + current gold (PPI++)",
    "gp_ppi": "gold-proportion posterior + current gold (PPI++)",
    "prior_ppi": "history posterior + current gold (PPI++)",
    "mv_ppi": "Majority vote + current gold (PPI++)",
    "gold_only": "Current gold only",
}
"""The display names of the methods (estimators without gold first, then those with the round's gold)."""

FRAME_COLUMNS = ("method", "title", "estimate", "standard_error", "ci_low", "ci_high", "ci_method",
                 "confidence_level", "n_items", "n_annotations", "n_labelers", "status", "notes")
"""The columns of ``to_frame()`` (``method`` is the index: ``"recommended"`` or the method's name)."""


def method_title(method: str) -> str:
    """A method's display name (its key when it has none)."""
    return METHOD_TITLES.get(method, method)


@dataclass(frozen=True)
class EstimateRow:
    """One estimate as every view shows it.

    ``key`` is ``"recommended"`` for the recommended row and the method's name otherwise; ``method`` is the
    method that made the estimate; ``title`` the label the views print.
    """

    key: str
    method: str
    title: str
    estimate: float
    standard_error: float
    ci_low: float
    ci_high: float
    ci_method: str
    ci_alternative: str
    ci_text: str
    confidence_level: float
    n_items: int
    n_annotations: int
    n_labelers: int
    status: str
    notes: tuple[str, ...] = ()
    history_weight: float | None = None

    @property
    def recommended(self) -> bool:
        return self.key == "recommended"

    @property
    def unreliable(self) -> bool:
        return self.status == "unreliable"

    def record(self) -> dict[str, Any]:
        """The row as a ``to_frame()`` record (:data:`FRAME_COLUMNS`)."""
        return {"method": self.key, "title": self.title, "estimate": self.estimate,
                "standard_error": self.standard_error, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "ci_method": self.ci_method, "confidence_level": self.confidence_level, "n_items": self.n_items,
                "n_annotations": self.n_annotations, "n_labelers": self.n_labelers, "status": self.status,
                "notes": "; ".join(self.notes)}


@dataclass(frozen=True)
class EstimatesTable:
    """The estimates of one round: rows (recommended first), the methods not computed, the recommendation's
    reason, at one confidence level and interval method."""

    rows: tuple[EstimateRow, ...]
    confidence_level: float
    ci_method: str
    alternative: str = "two-sided"
    skipped: Mapping[str, str] = field(default_factory=dict)
    reason: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", tuple(self.rows))
        object.__setattr__(self, "skipped", MappingProxyType(dict(self.skipped)))

    @property
    def recommended(self) -> EstimateRow | None:
        return self.rows[0] if self.rows and self.rows[0].recommended else None

    @property
    def methods(self) -> tuple[EstimateRow, ...]:
        """The rows of the methods (the recommended row left out)."""
        return tuple(r for r in self.rows if not r.recommended)

    def row(self, key: str) -> EstimateRow:
        for r in self.rows:
            if r.key == key:
                return r
        raise KeyError(key)

    def interval_header(self) -> str:
        """``95% CI (logit)``: the interval method named when every row's resolved alike, else as asked."""
        used = {r.ci_method for r in self.rows}
        shown = next(iter(used)) if len(used) == 1 else self.ci_method
        what = "CI" if self.alternative == "two-sided" else "bound"
        return f"{100 * self.confidence_level:g}% {what} ({shown})"

    def to_frame(self) -> pd.DataFrame:
        """One row per estimate (index ``method``: ``"recommended"`` or the method's name), :data:`FRAME_COLUMNS`."""
        return pd.DataFrame([r.record() for r in self.rows], columns=list(FRAME_COLUMNS)).set_index("method")

    def as_text(self) -> str:
        """The plain-text table: the recommendation and why, a row per method, what was not computed."""
        pct = f"{100 * self.confidence_level:g}% CI"
        lines_rows = [("method", "estimate", "SE", pct, "items", "labels", "labelers", "status")]
        for r in self.methods:
            lines_rows.append((r.title, _num(r.estimate), _num(r.standard_error), f"[{_num(r.ci_low)}, "
                               f"{_num(r.ci_high)}]", str(r.n_items), str(r.n_annotations), str(r.n_labelers),
                               r.status))
        widths = [max(len(row[k]) for row in lines_rows) for k in range(len(lines_rows[0]))]
        lines = ["  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths, strict=True)))
                 for row in lines_rows]
        lines.insert(1, "-" * len(lines[0]))
        rec = self.recommended
        if rec is not None:
            words = f" {rec.ci_text}" if rec.ci_alternative != "two-sided" else ""
            head = "UNRELIABLE: recommended" if rec.unreliable else "Recommended"
            lines[:0] = [f"{head}: {method_title(rec.method)} {_num(rec.estimate)} "
                         f"[{_num(rec.ci_low)}, {_num(rec.ci_high)}]{words} ({rec.ci_method}, status {rec.status})",
                         f"  why: {self.reason}", ""]
        for m, why in self.skipped.items():
            lines.append(f"{method_title(m)}: not computed ({why})")
        return "\n".join(lines)

    def as_html(self) -> str:
        """The DataFrame as an HTML table, then the reason and what was not computed (escaped)."""
        out = str(self.to_frame().to_html(float_format=lambda x: f"{x:.4f}"))
        if self.reason is not None:
            out += f"<p>why recommended: {html.escape(self.reason, quote=False)}</p>"
        if self.skipped:
            out += "<p>not computed: " + "; ".join(
                f"{html.escape(m, quote=False)} ({html.escape(w, quote=False)})" for m, w in self.skipped.items()) + "</p>"
        return out

    def __str__(self) -> str:
        return self.as_text()

    def _repr_html_(self) -> str:
        return self.as_html()


def _num(x: float) -> str:
    """Four decimals; ``nan`` for a missing number."""
    return f"{x:.4f}" if isinstance(x, (int, float)) and math.isfinite(x) else "nan"
