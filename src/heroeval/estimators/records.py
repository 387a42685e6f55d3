"""The records of a round's checks and choice: what the drift test found and what ``method="auto"`` chose.

They are computed above this layer (:func:`heroeval.checks.drift.check_drift`, :func:`heroeval.choice.recommend`)
and kept here, beside the estimates they describe, so that :class:`~heroeval.estimators.collection.EstimateCollection`
holds them typed (as :mod:`heroeval.stage_a.checks_record` keeps the model checks beside the calibration).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.estimators.results import EstimateResult
from heroeval.stage_a.checks_record import finite_or_none

__all__ = ["DriftCheck", "Recommendation"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class DriftCheck:
    """Result of :func:`check_drift`: one test per labeler and an overall test.

    Attributes
    ----------
    labeler_ids : tuple of str
        Calibrated labelers of the current round, in the order of the arrays.
    n_annotations : ndarray of int
        Current-round labels of each.
    observed, expected : ndarray
        Observed positive rate ``p_j`` and the rate the calibration implies at
        the HERO-1 estimate, ``mu alpha_j + (1 - mu)(1 - beta_j)`` (with a
        boundary-fitted parameter replaced by its Jeffreys posterior mean).
    standard_error, z, p_value, p_adjusted : ndarray
        Standard error of ``observed - expected`` under no drift (current
        sampling, the estimate's own uncertainty and the calibration's), its z
        statistic, two-sided p-value (exact where ``test`` is ``"exact"``),
        and the p-value adjusted for the labelers that can reach significance
        (Tarone's family size ``family_size``).
    flagged : tuple of str
        Labelers whose adjusted p-value is below ``significance``.
    overall_stat, overall_df, overall_p : float, int, float
        Chi-squared statistic and degrees of freedom over the z-tested
        labelers, and the overall test's p-value (the chi-squared test and
        Tarone's smallest-p test combined by Bonferroni; module docstring).
    mu : float
        The HERO-1 estimate the expectations use.
    adjust : str
        ``"holm"`` or ``"bh"``.
    significance : float
    excluded : tuple of str
        Current labelers the calibration does not know (not tested).
    notes : tuple of str
    covariance : ndarray
        Covariance of the residuals under no drift.
    test : tuple of str
        Per labeler: ``"z"``, ``"exact"`` or ``""`` (cannot be tested).
    min_attainable_p : ndarray
        Smallest two-sided p-value each labeler's test can give (0 for z tests).
    family_size : int
        Tarone's number of labelers counted by the adjustment (at ``significance``).
    chi2_p, min_p_test : float
        The two parts of the overall test: the chi-squared p-value and
        Tarone–Bonferroni's ``K p_min`` (family size at ``significance / 2``).
    boundary : tuple of str
        Labelers with a boundary-fitted sensitivity or specificity (guarded).
    """

    labeler_ids: tuple[str, ...]
    n_annotations: npt.NDArray[np.int64]
    observed: FloatArray
    expected: FloatArray
    standard_error: FloatArray
    z: FloatArray
    p_value: FloatArray
    p_adjusted: FloatArray
    flagged: tuple[str, ...]
    overall_stat: float
    overall_df: int
    overall_p: float
    mu: float
    adjust: str
    significance: float
    excluded: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    covariance: FloatArray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    test: tuple[str, ...] = ()
    min_attainable_p: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)
    family_size: int = 0
    chi2_p: float = math.nan
    min_p_test: float = math.nan
    boundary: tuple[str, ...] = ()

    @property
    def drift_detected(self) -> bool:
        """Whether some labeler is flagged or the overall test rejects at ``significance``."""
        return bool(self.flagged) or (math.isfinite(self.overall_p) and self.overall_p < self.significance)

    def to_dict(self) -> dict[str, Any]:
        def f(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {
            "mu": f(self.mu),
            "adjust": self.adjust,
            "significance": self.significance,
            "overall": {"stat": f(self.overall_stat), "df": self.overall_df, "p_value": f(self.overall_p),
                        "chi2_p": f(self.chi2_p), "min_p_test": f(self.min_p_test),
                        "family_size": self.family_size},
            "flagged": list(self.flagged),
            "excluded": list(self.excluded),
            "boundary": list(self.boundary),
            "labelers": [
                {
                    "id": lab,
                    "n_annotations": int(self.n_annotations[k]),
                    "observed": f(self.observed[k]),
                    "expected": f(self.expected[k]),
                    "standard_error": f(self.standard_error[k]),
                    "z": f(self.z[k]),
                    "test": self.test[k] if k < len(self.test) else "",
                    "p_value": f(self.p_value[k]),
                    "p_adjusted": f(self.p_adjusted[k]),
                    "flagged": lab in self.flagged,
                }
                for k, lab in enumerate(self.labeler_ids)
            ],
            "notes": list(self.notes),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per tested labeler (index: the labeler): labels, observed and expected positive rate, z, test,
        p-value, adjusted p-value, flagged."""
        return pd.DataFrame({
            "n_annotations": np.asarray(self.n_annotations), "observed": np.asarray(self.observed),
            "expected": np.asarray(self.expected), "z": np.asarray(self.z),
            "test": list(self.test) if len(self.test) == len(self.labeler_ids) else [""] * len(self.labeler_ids),
            "p_value": np.asarray(self.p_value), "p_adjusted": np.asarray(self.p_adjusted),
            "flagged": [lab in self.flagged for lab in self.labeler_ids],
        }, index=pd.Index(list(self.labeler_ids), name="labeler"))

    def __repr__(self) -> str:
        shown = ", ".join(repr(x) for x in self.flagged[:5]) + (", ..." if len(self.flagged) > 5 else "")
        return (f"DriftCheck(labelers={len(self.labeler_ids)}, flagged=[{shown}], overall_p={self.overall_p:.3g}, "
                f"drift_detected={self.drift_detected}, adjust={self.adjust!r})")

    def _repr_html_(self) -> str:
        return (f"<p>labeler drift: overall p = {self.overall_p:.3g}; flagged: "
                f"{html.escape(', '.join(self.flagged) or 'none')}</p>"
                + str(self.to_frame().to_html(float_format=lambda x: f"{x:.4g}", max_rows=60)))

    def summary(self) -> str:
        """A plain-text table, one row per labeler, and the overall test."""
        rows = [("labeler", "labels", "observed", "expected", "z", "test", "p", f"p ({self.adjust})", "")]
        for k, lab in enumerate(self.labeler_ids):
            rows.append((lab, str(int(self.n_annotations[k])), f"{self.observed[k]:.4f}", f"{self.expected[k]:.4f}",
                         f"{self.z[k]:.2f}", self.test[k] if k < len(self.test) else "", f"{self.p_value[k]:.3g}",
                         f"{self.p_adjusted[k]:.3g}", "DRIFT" if lab in self.flagged else ""))
        w = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        lines = ["  ".join(c.rjust(wi) if i else c.ljust(wi) for i, (c, wi) in enumerate(zip(r, w, strict=True)))
                 for r in rows]
        lines.append(f"overall: p = {self.overall_p:.3g} (chi2 = {self.overall_stat:.3f} on {self.overall_df} df "
                     f"over the z-tested labelers, p = {self.chi2_p:.3g}; smallest per-labeler p times Tarone's "
                     f"family size = {self.min_p_test:.3g}; Bonferroni of the two)")
        lines.extend(self.notes)
        return "\n".join(lines)


@dataclass(frozen=True)
class Recommendation:
    """What ``method="auto"`` chose, the result, and why.

    ``table`` lists every candidate with its estimate, standard error on the
    current round, mock-round bias (and its standard error) and the
    predicted root mean squared error that decided.
    """

    method: str
    history_weight: float | None
    result: EstimateResult
    reason: str
    table: list[dict[str, Any]]
    status: str = "ok"
    results: dict[tuple[str, float | None], EstimateResult] = field(default_factory=dict, repr=False, compare=False)
    """Every candidate's estimate by ``(method, history weight)``, as the choice weighed it (their own intervals):
    what the recommended difference of two rounds (:func:`heroeval.compare`) subtracts. Not in :meth:`to_dict`."""

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        ci = self.result.confidence_interval(confidence_level)
        return {
            "method": self.method, "history_weight": self.history_weight,
            "estimate": finite_or_none(self.result.estimate), "standard_error": finite_or_none(self.result.standard_error or math.nan),
            "ci_low": finite_or_none(ci.low), "ci_high": finite_or_none(ci.high), "confidence_level": confidence_level,
            "reason": self.reason, "status": self.status,
            "candidates": [{k: (finite_or_none(v) if isinstance(v, float) else v) for k, v in r.items()} for r in self.table],
            "ci_method": ci.method, "ci_alternative": ci.alternative, "ci_text": ci.describe(),
            "upper_bound": finite_or_none(self.result.bound(confidence_level, "upper")),
        }

    def candidates_frame(self) -> pd.DataFrame:
        """The candidates the choice weighed, one row each (the ``table``), as a DataFrame."""
        return pd.DataFrame(self.table)

    def __repr__(self) -> str:
        ci = self.result.confidence_interval()
        w = "" if self.history_weight is None else f", history_weight={self.history_weight:g}"
        reason = self.reason if len(self.reason) <= 160 else self.reason[:157] + "..."
        return (f"Recommendation(method={self.method!r}{w}, estimate={self.result.estimate:.4f}, "
                f"ci_95=[{ci.low:.4f}, {ci.high:.4f}] ({ci.method}), status={self.status!r}, "
                f"candidates={len(self.table)}, reason={reason!r})")

    def _repr_html_(self) -> str:
        ci = self.result.confidence_interval()
        head = "UNRELIABLE: recommended" if self.status == "unreliable" else "Recommended"
        return (f"<p><b>{html.escape(head)}: {html.escape(self.result.title)}</b> {self.result.estimate:.4f} "
                f"[{ci.low:.4f}, {ci.high:.4f}] ({html.escape(ci.method)}, status {html.escape(self.status)})</p>"
                f"<p>why: {html.escape(self.reason)}</p>"
                + str(self.candidates_frame().to_html(float_format=lambda x: f"{x:.4f}", max_rows=40)))
