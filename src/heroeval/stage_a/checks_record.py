"""The record of the model checks a calibration carries and saves.

The checks themselves are computed by :func:`heroeval.checks.run_checks` from
the history's gold items; Stage A only keeps and serialises their record, so
that a saved calibration carries the evidence ``method="auto"`` needs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from heroeval.errors import HeroEvalError

__all__ = ["DependenceTest", "ModelChecks", "class_weights"]

@dataclass(frozen=True)
class DependenceTest:
    """Excess agreement between labelers given the gold label (see the module docstring).

    Attributes
    ----------
    z, p_value : float
        Overall statistic and its one-sided p-value (small: labelers agree
        more than independence given gold implies).
    mean_correlation : float
        Mean over labeler pairs and gold items of the standardised residual
        product: an average conditional correlation of two labelers' errors.
    n_items, n_pairs : int
        Gold items with at least two labels, labeler pairs tested.
    pairs : list of dict
        The pairs with the smallest p-values (at most 20): labelers, items
        shared, correlation, z, p and BH-adjusted p.
    n_pairs_significant : int
        Pairs with BH-adjusted p below 0.05.
    """

    z: float
    p_value: float
    mean_correlation: float
    n_items: int
    n_pairs: int
    n_pairs_significant: int
    pairs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "z": finite_or_none(self.z), "p_value": finite_or_none(self.p_value), "mean_correlation": finite_or_none(self.mean_correlation),
            "n_items": self.n_items, "n_pairs": self.n_pairs, "n_pairs_significant": self.n_pairs_significant,
            "pairs": self.pairs,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DependenceTest:
        return cls(_nan(d["z"]), _nan(d["p_value"]), _nan(d["mean_correlation"]), int(d["n_items"]),
                   int(d["n_pairs"]), int(d["n_pairs_significant"]), list(d.get("pairs", [])))


_ROUND_NUMBERS = ("truth", "estimate", "error", "error_se")
"""The past-round rows' numbers that a file's null turns back into NaN (``calib_var`` and ``history_weight`` keep
None: not computed, no weight)."""


def finite_or_none(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _nan(x: Any) -> float:
    return math.nan if x is None else float(x)


@dataclass(frozen=True)
class ModelChecks:
    """The checks :func:`run_checks` computes; kept in ``Calibration.checks`` and saved with it.

    Attributes
    ----------
    folds, n_gold : int
        Folds used and gold items checked.
    weight_grid : tuple of float
    log_score : dict
        ``{w: (mean, standard error)}``: mean cross-validated log probability
        of a held-out gold label at history weight ``w`` (higher is better;
        ``log 0.5 = -0.693`` is a coin flip).
    chosen_weight : float
        The weight with the best log score (ties: the larger weight).
    calibration_curve : list of dict
        At the chosen weight: for bins of the predicted ``P(Y=1)``, the mean
        prediction, the share of gold 1 and the count.
    mock : list of dict
        Per candidate (method, w): mean error over the mock rounds
        (``bias``), its standard error across folds, RMSE, the folds used.
    dependence : DependenceTest
    notes : list of str
    items : dict of str to list of float
        Per held-out gold item, in the mock rounds' pooled order: the gold
        label (``"y"``), its fold's gold rate (``"y_fold"``), and per mock
        row either the cross-fitted log-likelihood ratios (``"hero1@1:llr"``)
        or the influence values (``"rogan_gladen:influence"``). They let
        ``method="auto"`` re-weight the mock rounds to the current round's
        rate (:func:`heroeval.checks.rate_matched_mock`).
    rounds : list of dict
        The past-round check (histories with several rounds holding gold):
        per history round and candidate (method, w), the round's gold items
        estimated from their silver labels with the round's gold left out of
        Stage A: ``round``, ``n_items``, ``truth`` (the round's gold rate),
        ``estimate``, ``error`` and ``error_se``. Empty when the history
        has fewer than two such rounds.
    """

    folds: int
    n_gold: int
    weight_grid: tuple[float, ...]
    log_score: dict[float, tuple[float, float]]
    chosen_weight: float
    calibration_curve: list[dict[str, Any]]
    mock: list[dict[str, Any]]
    dependence: DependenceTest
    notes: list[str] = field(default_factory=list)
    items: dict[str, list[float]] = field(default_factory=dict)
    rounds: list[dict[str, Any]] = field(default_factory=list)

    def mock_row(self, method: str, weight: float | None = None) -> dict[str, Any] | None:
        for r in self.mock:
            if r["method"] == method and (r["history_weight"] is None or weight is None
                                          or abs(r["history_weight"] - weight) < 1e-12):
                return r
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "folds": self.folds, "n_gold": self.n_gold, "weight_grid": list(self.weight_grid),
            "log_score": [{"history_weight": w, "mean": finite_or_none(m), "se": finite_or_none(s)} for w, (m, s) in self.log_score.items()],
            "chosen_weight": self.chosen_weight, "calibration_curve": self.calibration_curve,
            "mock": [{k: (finite_or_none(v) if isinstance(v, float) else v) for k, v in r.items()} for r in self.mock],
            "dependence": self.dependence.to_dict(), "notes": list(self.notes),
            # exact (shortest round-trip repr): the predictor's choice and the priors of the estimates with current
            # gold read these, so a calibration read back must give the same estimate as the fit itself
            "items": {k: np.asarray(v, dtype=np.float64).tolist() for k, v in self.items.items()},
            "rounds": [{k: (finite_or_none(v) if isinstance(v, float) else v) for k, v in r.items()} for r in self.rounds],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelChecks:
        try:
            return cls(
                folds=int(d["folds"]), n_gold=int(d["n_gold"]),
                weight_grid=tuple(float(x) for x in d["weight_grid"]),
                log_score={float(r["history_weight"]): (_nan(r["mean"]), _nan(r["se"])) for r in d["log_score"]},
                chosen_weight=float(d["chosen_weight"]), calibration_curve=list(d["calibration_curve"]),
                mock=[{k: (math.nan if v is None and k not in ("history_weight",) else v) for k, v in r.items()}
                      for r in d["mock"]],
                dependence=DependenceTest.from_dict(d["dependence"]), notes=list(d.get("notes", [])),
                items={str(k): [float(x) for x in v] for k, v in d.get("items", {}).items()},
                rounds=[{k: (math.nan if v is None and k in _ROUND_NUMBERS else v) for k, v in r.items()}
                        for r in d.get("rounds", [])],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise HeroEvalError(f"model checks: missing or bad field ({exc})") from exc


def class_weights(y: np.ndarray, rate: float) -> np.ndarray:
    """Weights that give gold items of rate ``mean(y)`` the rate ``rate``: ``rate / ybar`` on a positive,
    ``(1 - rate) / (1 - ybar)`` on a negative (1 everywhere when the gold has one class only)."""
    ybar = float(y.mean())
    if not 0.0 < ybar < 1.0:
        return np.ones_like(y)
    out: np.ndarray = np.where(y == 1, rate / ybar, (1.0 - rate) / (1.0 - ybar))
    return out
