"""Immutable result objects."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .calibration import ConvergenceInfo
from .data import IngestReport
from .errors import HeroEvalError

__all__ = ["METHODS", "METHOD_TITLES", "EstimateCollection", "EstimateResult"]

METHODS = ("majority_vote", "dawid_skene", "gold_proportion", "hero1", "hero2", "hero_joint")
METHOD_TITLES = {
    "majority_vote": "Majority vote",
    "dawid_skene": "Dawid-Skene (current only)",
    "gold_proportion": "Gold-proportion calibration",
    "hero1": "HERO-1",
    "hero2": "HERO-2",
    "hero_joint": "HERO joint",
}


def _jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "tolist"):
        return _jsonable(x.tolist())
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


@dataclass(frozen=True)
class EstimateResult:
    """The estimate of the current round's gold rate by one method.

    Attributes
    ----------
    method : str
        One of ``majority_vote, dawid_skene, gold_proportion, hero1, hero2,
        hero_joint``.
    estimate : float
        The estimated rate.
    n_items, n_annotations, n_labelers : int
        Current-round data the estimate used.
    status : str
        ``"interior"`` for a root inside (0, 1); ``"boundary_0"`` or
        ``"boundary_1"`` when the score equation has no interior root and the
        estimate sits on the boundary; ``"ok"`` for methods without a root.
    convergence : ConvergenceInfo or None
        For methods that run an EM (dawid_skene, hero_joint).
    details : mapping
        Method-specific values (HERO-2's ``gamma``, majority vote's tie count,
        labelers excluded, ...).
    standard_error : float or None
        Filled by the inference layer; None until then.
    notes : tuple of str
        Plain-language remarks (for example, labelers excluded).
    """

    method: str
    estimate: float
    n_items: int
    n_annotations: int
    n_labelers: int
    status: str = "ok"
    convergence: ConvergenceInfo | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    standard_error: float | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    @property
    def title(self) -> str:
        return METHOD_TITLES.get(self.method, self.method)

    def confidence_interval(self, confidence_level: float = 0.95) -> tuple[float, float]:
        """Not available yet: standard errors come with the inference layer."""
        raise HeroEvalError(
            f"no standard error for {self.method} yet: confidence intervals arrive with the "
            "inference layer (issue 3); use the bootstrap of your own meanwhile"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "estimate": self.estimate,
            "standard_error": self.standard_error,
            "status": self.status,
            "n_items": self.n_items,
            "n_annotations": self.n_annotations,
            "n_labelers": self.n_labelers,
            "convergence": None if self.convergence is None else self.convergence.to_dict(),
            "details": _jsonable(dict(self.details)),
            "notes": list(self.notes),
        }

    def summary(self) -> str:
        """A one-method plain-text table."""
        return EstimateCollection({self.method: self}).summary()


@dataclass(frozen=True)
class EstimateCollection(Mapping[str, EstimateResult]):
    """Several methods' estimates of the same current round, by method name."""

    results: Mapping[str, EstimateResult]
    ingest: IngestReport | None = None
    skipped: Mapping[str, str] = field(default_factory=dict)

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimates": {m: r.to_dict() for m, r in self.results.items()},
            "skipped": dict(self.skipped),
            "ingest": None if self.ingest is None else self.ingest.to_dict(),
        }

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def summary(self) -> str:
        rows = [("method", "estimate", "items", "labels", "labelers", "status")]
        for r in self.results.values():
            rows.append(
                (r.title, f"{r.estimate:.4f}", str(r.n_items), str(r.n_annotations), str(r.n_labelers), r.status)
            )
        widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths, strict=True)))
                 for row in rows]
        lines.insert(1, "-" * len(lines[0]))
        for m, why in self.skipped.items():
            lines.append(f"{METHOD_TITLES.get(m, m)}: not computed ({why})")
        return "\n".join(lines)
