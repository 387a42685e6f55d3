"""Several model versions against one baseline: simultaneous intervals and Holm-adjusted verdicts.

``hero compare A B C ...`` (:func:`heroeval.compare_versions`) compares every other round with the baseline
``A``, each difference ``A - X`` exactly as ``hero compare A X`` makes it (the recommended difference by
default), and controls the family-wise error over the ``m`` comparisons:

* **Simultaneous intervals.** Each difference's interval is computed at the level ``adjusted_level(m, 1 - a)``
  (Šidák's ``(1 - a)^(1/m)`` by default, or Bonferroni's ``1 - a/m``): all ``m`` cover together with
  probability at least ``1 - a`` when each covers at its own level. Šidák's inequality makes that hold for
  two-sided normal intervals under any correlation, here positive, from the shared baseline and history.
  The bias-aware interval of a recommended difference is inverted at the same level.
* **Verdicts.** Each difference's p-value (the two-sided "no difference" test, or with ``margin`` the verdict's
  one-sided test) is adjusted by Holm's step-down method; a version is declared different (or not worse) only
  when its adjusted p-value is below ``a`` (:func:`heroeval.inference.verdict.verdicts_holm`).

The unadjusted interval is reported beside the simultaneous one, and equals the two-round ``hero compare``'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from heroeval.core.multiple import ADJUSTMENTS, adjusted_level, holm
from heroeval.errors import HeroEvalError
from heroeval.estimators.results import check_level, jsonable
from heroeval.inference.comparison import Comparison, ComparisonCollection, DifferenceRecommendation
from heroeval.inference.verdict import Verdict, verdicts_holm
from heroeval.stage_a.calibration import Calibration

__all__ = ["VersionComparison", "VersionRow", "check_versions", "versions_from"]


@dataclass(frozen=True)
class VersionRow:
    """One version against the baseline: ``baseline - version`` by the recommended (or asked) method."""

    version: str
    method: str
    estimate: float
    standard_error: float
    ci_low: float  # at the simultaneous level
    ci_high: float
    ci_low_each: float  # at the nominal level (the two-round hero compare's interval)
    ci_high_each: float
    ci_method: str
    p_value: float
    p_holm: float
    status: str
    reason: str
    verdict: Verdict | None

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "verdict"}
        out["verdict"] = None if self.verdict is None else self.verdict.to_dict()
        d: dict[str, Any] = jsonable(out)
        return d


@dataclass(frozen=True)
class VersionComparison:
    """Every version against ``baseline`` with family-wise error control (module docstring).

    ``comparisons`` holds each version's full comparison (every method asked, and the recommended difference), as
    the two-round ``compare`` returns it; ``rows`` the reported difference per version.
    """

    baseline: str
    rows: tuple[VersionRow, ...]
    comparisons: Mapping[str, ComparisonCollection | Comparison | DifferenceRecommendation]
    confidence_level: float
    adjust: str
    level_each: float
    margin: float | None
    alternative: str

    def __getitem__(self, version: str) -> VersionRow:
        for r in self.rows:
            if r.version == version:
                return r
        raise KeyError(version)

    def to_frame(self) -> pd.DataFrame:
        """One row per version (index ``version``): the reported difference ``baseline - version``, its
        simultaneous and unadjusted intervals, raw and Holm-adjusted p-values, status, and the verdict's
        decision when a margin was given."""
        recs = []
        for r in self.rows:
            d = {k: v for k, v in r.to_dict().items() if k != "verdict"}
            if r.verdict is not None:
                d["verdict_p_holm"] = r.verdict.p_value
                d["decided"] = r.verdict.decided
            recs.append(d)
        return pd.DataFrame(recs).set_index("version")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable({
            "baseline": self.baseline, "confidence_level": self.confidence_level, "adjust": self.adjust,
            "level_each": self.level_each, "margin": self.margin, "alternative": self.alternative,
            "versions": [r.to_dict() for r in self.rows]})
        return out

    def lines(self) -> list[str]:
        """The plain-text summary: one line per version, then the verdicts."""
        m = len(self.rows)
        head = (f"{m} version(s) against the baseline {self.baseline!r}: {self.baseline} - version, intervals "
                f"simultaneous at {self.confidence_level:g} ({self.adjust}: each at {self.level_each:.4f}); "
                "p-values Holm-adjusted")
        out = [head]
        for r in self.rows:
            out.append(f"  {r.version}: {r.method} {r.estimate:+.4f} [{r.ci_low:+.4f}, {r.ci_high:+.4f}] "
                       f"(unadjusted [{r.ci_low_each:+.4f}, {r.ci_high_each:+.4f}]), p = {r.p_value:.2g}, "
                       f"Holm p = {r.p_holm:.2g}, {r.status}")
        for r in self.rows:
            if r.verdict is not None:
                out.append(f"  verdict {r.version}: {r.verdict.text}")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        html: str = self.to_frame().to_html(float_format=lambda x: f"{x:.4f}")
        return html


Compared = ComparisonCollection | Comparison | DifferenceRecommendation


def _reported(c: Compared, version: str) -> tuple[Comparison | DifferenceRecommendation, str, str, str]:
    """The difference reported for one version: the recommended one, or the only method asked."""
    if isinstance(c, DifferenceRecommendation):
        return c, c.method, c.status, c.reason
    if isinstance(c, Comparison):
        return c, c.method, "ok", f"{c.method} (the method asked)"
    if c.recommended is not None:
        r = c.recommended
        return r, r.method, r.status, r.reason
    if len(c.comparisons) == 1:
        (name, only), = c.comparisons.items()
        return only, name, "ok", f"{name} (the method asked)"
    why = c.skipped.get("auto", "method='auto' was not asked")
    raise HeroEvalError(f"version {version!r}: no recommended difference to report ({why}); ask for one method")


def versions_from(baseline: str, comparisons: Mapping[str, Compared], *,
                  confidence_level: float = 0.95, adjust: str = "sidak", margin: float | None = None,
                  alternative: str = "less", calibration: Calibration | None = None) -> VersionComparison:
    """The family of ``baseline - version`` differences, from each version's two-round comparison
    (``calibration``: the one they were estimated with, which sizes the expert labels an undecided verdict
    needs)."""
    level = check_level(confidence_level)
    if adjust not in ADJUSTMENTS or adjust == "maxz":
        raise HeroEvalError(f"adjust must be one of sidak, bonferroni, none, got {adjust!r}")
    if not comparisons:
        raise HeroEvalError("compare_versions needs at least one version besides the baseline")
    names = list(comparisons)
    chosen = [_reported(comparisons[v], v) for v in names]
    each = adjusted_level(len(names), level, adjust)
    p = [c.comparison.p_value if isinstance(c, DifferenceRecommendation) else c.p_value for c, *_ in chosen]
    p_adj = holm(p) if adjust != "none" else p
    verdicts: list[Verdict | None] = [None] * len(names)
    if margin is not None:
        verdicts = list(verdicts_holm([c for c, *_ in chosen], margin, alternative, level,
                                      names=[(baseline, v) for v in names], adjust=adjust != "none",
                                      calibration=calibration))
    rows = []
    for k, (v, (c, method, status, reason)) in enumerate(zip(names, chosen, strict=True)):
        comp = c.comparison if isinstance(c, DifferenceRecommendation) else c
        sim, nom = comp.confidence_interval(each), comp.confidence_interval(level)
        rows.append(VersionRow(v, method, comp.estimate, comp.standard_error, sim.low, sim.high, nom.low, nom.high,
                               sim.method, float(p[k]), float(p_adj[k]) if math.isfinite(p_adj[k]) else math.nan,
                               status, reason, verdicts[k]))
    return VersionComparison(baseline, tuple(rows), dict(comparisons), level, adjust, each, margin, alternative)


def check_versions(names: Sequence[str]) -> None:
    """Round names for a versions comparison: at least two, distinct."""
    if len(names) < 2:
        raise HeroEvalError(f"compare_versions needs a baseline and at least one version, got {len(names)} round(s)")
    dup = sorted({n for n in names if list(names).count(n) > 1})
    if dup:
        raise HeroEvalError(f"compare_versions: round names must be distinct, {dup} appear more than once (name "
                            "each round: read_annotations(..., name=...))")
