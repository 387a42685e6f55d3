"""The trend across rounds: rates with simultaneous intervals, differences, labelers round by round.

One Stage A fit holds every round of the trend as its own prevalence
(gold items enter with their label; a round without gold enters as HERO
joint's current round does). Round g's rate is its fitted prevalence
``mu_g``; the fit's parameter covariance ``V`` (the sandwich over the
history items' influence values, :attr:`Calibration.parameter_covariance`)
gives every rate's variance and every covariance between rates. A
difference ``mu_a - mu_b`` therefore has variance ``(e_a - e_b)' V (e_a -
e_b)``: the two rounds' influence values are subtracted item by item before
squaring, exactly as :func:`heroeval.compare` does for two rounds sharing
one calibration.

Multiplicity. The m rates (and the m - 1 differences) are covered
simultaneously: with ``adjust="sidak"`` (the default) each interval uses
the critical value ``z_{(1 + L^{1/m})/2}`` for the level L. For
jointly normal estimates Šidák's inequality gives simultaneous coverage of
at least L whatever their correlation; ``"maxz"`` takes the exact
L-quantile of ``max_k |Z_k|`` under the estimated correlation (Monte Carlo,
seeded: narrower when the estimates are correlated); ``"bonferroni"`` uses
``z_{1 - (1 - L)/(2m)}``; ``"none"`` gives marginal intervals. The
simulation in tests/simulation/test_store_trend_coverage.py measures it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import expit, logit
from scipy.stats import norm

from heroeval.errors import HeroEvalError
from heroeval.stage_a.calibration import Calibration
from heroeval.store._rounds import RoundInfo, html_table

__all__ = ["ADJUSTMENTS", "DriftRow", "Trend", "TrendDifference", "TrendRound", "TrendSource", "critical_value",
           "trend_from_fit"]

ADJUSTMENTS = ("sidak", "bonferroni", "maxz", "none")
FloatArray = npt.NDArray[np.float64]
_MAXZ_DRAWS = 200_000


def _maxz_draws(corr: FloatArray, seed: int = 20261201) -> FloatArray:
    w, v = np.linalg.eigh(corr)
    root = v * np.sqrt(np.clip(w, 0, None))
    z = np.random.default_rng(seed).standard_normal((_MAXZ_DRAWS, corr.shape[0])) @ root.T
    out: FloatArray = np.abs(z).max(axis=1)
    return out


def _corr(cov: FloatArray) -> FloatArray:
    sd = np.sqrt(np.clip(np.diag(cov), 0, None))
    ok = sd > 0
    c = np.eye(cov.shape[0])
    c[np.ix_(ok, ok)] = cov[np.ix_(ok, ok)] / np.outer(sd[ok], sd[ok])
    return c


def critical_value(m: int, confidence_level: float, adjust: str, cov: FloatArray | None = None) -> float:
    """The normal critical value that covers ``m`` estimates together at ``confidence_level``.

    >>> round(critical_value(1, 0.95, "sidak"), 3), round(critical_value(9, 0.95, "sidak"), 3)
    (1.96, 2.766)
    >>> round(critical_value(9, 0.95, "bonferroni"), 3)
    2.773
    """
    if not 0 < confidence_level < 1:
        raise HeroEvalError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    if adjust not in ADJUSTMENTS:
        raise HeroEvalError(f"adjust must be one of {', '.join(ADJUSTMENTS)}, got {adjust!r}")
    m = max(int(m), 1)
    if adjust == "none" or m == 1:
        return float(norm.ppf(0.5 + confidence_level / 2))
    if adjust == "bonferroni":
        return float(norm.ppf(1 - (1 - confidence_level) / (2 * m)))
    if adjust == "sidak" or cov is None or not np.all(np.isfinite(cov)):
        return float(norm.ppf(0.5 + confidence_level ** (1.0 / m) / 2))
    return float(np.quantile(_maxz_draws(_corr(cov)), confidence_level))


def _adjust_p(p: FloatArray, z: FloatArray, adjust: str, cov: FloatArray | None) -> FloatArray:
    m = p.size
    if adjust == "none" or m <= 1:
        return p
    if adjust == "bonferroni":
        return np.minimum(1.0, p * m)
    if adjust == "sidak" or cov is None or not np.all(np.isfinite(cov)):
        return 1 - (1 - p) ** m
    draws = _maxz_draws(_corr(cov))
    return np.asarray([float(np.mean(draws >= abs(x))) if math.isfinite(x) else math.nan for x in z])


@dataclass(frozen=True)
class TrendRound:
    """One round of the trend: its rate in the shared fit, with simultaneous and marginal intervals."""

    name: str
    model: str | None
    date: str | None
    n_items: int
    n_gold: int
    in_history: bool
    estimate: float
    standard_error: float
    ci_low: float
    ci_high: float
    marginal_low: float
    marginal_high: float
    gold_mean: float = math.nan  # mean gold label over the round's gold items (a noisy check, not the estimate)


@dataclass(frozen=True)
class TrendDifference:
    """``name - reference`` with its simultaneous interval and adjusted p-value."""

    name: str
    reference: str
    estimate: float
    standard_error: float
    ci_low: float
    ci_high: float
    p_value: float
    p_adjusted: float


@dataclass(frozen=True)
class DriftRow:
    """One labeler in one round: its positive rate against the history's, and its rates on the round's gold."""

    round: str
    labeler: str
    n_labels: int
    observed: float
    expected: float
    z: float
    p_adjusted: float
    flagged: bool
    gold_sensitivity: float
    gold_specificity: float
    n_gold_labels: int
    round_drift_p: float


_ROUND_COLS = ("round", "model", "date", "n_items", "n_gold", "in_history", "estimate", "standard_error", "ci_low",
               "ci_high", "marginal_low", "marginal_high", "gold_mean")
_DIFF_COLS = ("round", "reference", "difference", "standard_error", "ci_low", "ci_high", "p_value", "p_adjusted")
_DRIFT_COLS = ("round", "labeler", "n_labels", "observed", "expected", "z", "p_adjusted", "flagged",
               "gold_sensitivity", "gold_specificity", "n_gold_labels", "round_drift_p")


@dataclass(frozen=True)
class Trend:
    """Rates of a sequence of rounds from one shared fit, their differences, and the labelers round by round."""

    rounds: tuple[TrendRound, ...]
    differences: tuple[TrendDifference, ...]
    drift: tuple[DriftRow, ...]
    confidence_level: float
    adjust: str
    critical_rates: float
    critical_differences: float
    baseline: str | None
    calibration_key: str
    calibration_status: str
    covariance: FloatArray = field(repr=False)
    notes: tuple[str, ...] = ()
    store: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.rounds)

    def to_frame(self, truth: Mapping[str, float] | None = None) -> pd.DataFrame:
        """One row per round; with ``truth`` (round name to true rate) a ``truth`` and an ``error`` column."""
        df = pd.DataFrame([[r.name, r.model, r.date, r.n_items, r.n_gold, r.in_history, r.estimate,
                            r.standard_error, r.ci_low, r.ci_high, r.marginal_low, r.marginal_high, r.gold_mean]
                           for r in self.rounds], columns=list(_ROUND_COLS))
        if truth is not None:
            df["truth"] = [float(truth.get(n, math.nan)) for n in df["round"]]
            df["error"] = df["estimate"] - df["truth"]
            df["covered"] = (df["ci_low"] <= df["truth"]) & (df["truth"] <= df["ci_high"])
        return df

    def differences_frame(self) -> pd.DataFrame:
        return pd.DataFrame([[d.name, d.reference, d.estimate, d.standard_error, d.ci_low, d.ci_high, d.p_value,
                              d.p_adjusted] for d in self.differences], columns=list(_DIFF_COLS))

    def drift_frame(self) -> pd.DataFrame:
        return pd.DataFrame([[r.round, r.labeler, r.n_labels, r.observed, r.expected, r.z, r.p_adjusted,
                              r.flagged, r.gold_sensitivity, r.gold_specificity, r.n_gold_labels, r.round_drift_p]
                             for r in self.drift], columns=list(_DRIFT_COLS))

    def method_line(self) -> str:
        m = len(self.rounds)
        how = {"sidak": "Šidák", "bonferroni": "Bonferroni", "maxz": "max-|z| under the estimated correlation",
               "none": "none (marginal intervals)"}[self.adjust]
        return (f"{self.confidence_level:.0%} intervals simultaneous over {m} rates (critical value "
                f"{self.critical_rates:.3f}) and {max(m - 1, 0)} differences ({self.critical_differences:.3f}); "
                f"multiplicity: {how}")

    def to_dict(self, truth: Mapping[str, float] | None = None) -> dict[str, Any]:
        def clean(df: pd.DataFrame) -> list[dict[str, Any]]:
            recs = df.astype(object).where(pd.notna(df), None).to_dict(orient="records")
            return [{str(k): (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
                    for r in recs]

        return {"store": self.store, "confidence_level": self.confidence_level, "adjust": self.adjust,
                "critical_value_rates": self.critical_rates, "critical_value_differences": self.critical_differences,
                "baseline": self.baseline or "previous", "method": "stage_a_joint",
                "calibration": {"key": self.calibration_key, "status": self.calibration_status},
                "rounds": clean(self.to_frame(truth)), "differences": clean(self.differences_frame()),
                "drift": clean(self.drift_frame()), "notes": list(self.notes)}

    def _repr_html_(self) -> str:
        df = self.to_frame()
        dd = self.differences_frame()
        return (html_table([str(c) for c in df.columns], df.to_numpy().tolist(), self.method_line())
                + html_table([str(c) for c in dd.columns], dd.to_numpy().tolist(), "differences"))


@dataclass(frozen=True)
class TrendSource:
    """Where a trend's fit comes from, as its :class:`Trend` records it: the ``store`` (its path), and the key and
    status (``"cached"`` or ``"fitted"``) of the store's calibration that is the fit."""

    store: str = ""
    calibration_key: str = ""
    calibration_status: str = ""


def trend_from_fit(
    cal: Calibration,
    rounds: Sequence[RoundInfo],
    *,
    baseline: str | None = None,
    confidence_level: float = 0.95,
    adjust: str = "sidak",
    source: TrendSource = TrendSource(),
    drift: Sequence[DriftRow] = (),
    notes: Sequence[str] = (),
    gold_means: Mapping[str, float] | None = None,
) -> Trend:
    """The trend of ``rounds`` from a Stage A fit in which each of them is a round (see the module docstring),
    from ``source``."""
    if adjust not in ADJUSTMENTS:
        raise HeroEvalError(f"adjust must be one of {', '.join(ADJUSTMENTS)}, got {adjust!r}")
    names = [r.name for r in rounds]
    pos = {r: g for g, r in enumerate(cal.round_ids)}
    missing = [n for n in names if n not in pos]
    if missing:
        raise HeroEvalError(f"the fit has no round {missing[0]!r}")
    if baseline is not None and baseline not in names:
        raise HeroEvalError(f"the baseline {baseline!r} is not one of the trend's rounds")
    J = cal.n_labelers
    idx = np.asarray([2 * J + pos[n] for n in names])
    est = cal.round_prevalence[[pos[n] for n in names]].astype(np.float64)
    m = len(names)
    if cal.covariance is None:
        cov = np.full((m, m), math.nan)
    else:
        cov = cal.covariance.submatrix(idx)
    on_bound = np.minimum(est, 1 - est) < 1e-6
    cov[on_bound, :] = math.nan
    cov[:, on_bound] = math.nan
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    se[~np.isfinite(np.diag(cov))] = math.nan
    z_marg = float(norm.ppf(0.5 + confidence_level / 2))
    c_rate = critical_value(m, confidence_level, adjust, cov)

    def logit_ci(e: float, s: float, c: float) -> tuple[float, float]:
        if not (math.isfinite(s) and s > 0 and 0 < e < 1):
            return math.nan, math.nan
        lo, w = float(logit(e)), c * s / (e * (1 - e))
        return float(expit(lo - w)), float(expit(lo + w))

    trs = []
    for k, r in enumerate(rounds):
        lo, hi = logit_ci(est[k], se[k], c_rate)
        mlo, mhi = logit_ci(est[k], se[k], z_marg)
        trs.append(TrendRound(r.name, r.model, r.date, r.n_items, r.n_gold, r.in_history, float(est[k]),
                              float(se[k]), lo, hi, mlo, mhi,
                              float((gold_means or {}).get(r.name, math.nan))))
    pairs = ([(k, k - 1) for k in range(1, m)] if baseline is None
             else [(k, names.index(baseline)) for k in range(m) if names[k] != baseline])
    C = np.zeros((len(pairs), m))
    for row, (a, b) in enumerate(pairs):
        C[row, a], C[row, b] = 1.0, -1.0
    d_est = C @ est
    d_cov = C @ cov @ C.T if pairs else np.zeros((0, 0))
    d_se = np.sqrt(np.clip(np.diag(d_cov), 0, None)) if pairs else np.zeros(0)
    if pairs:
        d_se[~np.isfinite(np.diag(d_cov))] = math.nan
    c_diff = critical_value(len(pairs), confidence_level, adjust, d_cov if pairs else None)
    with np.errstate(invalid="ignore", divide="ignore"):
        dz = np.where(d_se > 0, d_est / d_se, math.nan)
    p = 2 * norm.sf(np.abs(dz))
    p_adj = _adjust_p(p, dz, adjust, d_cov if pairs else None)
    diffs = tuple(TrendDifference(names[a], names[b], float(d_est[i]), float(d_se[i]),
                                  max(-1.0, float(d_est[i] - c_diff * d_se[i])),
                                  min(1.0, float(d_est[i] + c_diff * d_se[i])), float(p[i]), float(p_adj[i]))
                  for i, (a, b) in enumerate(pairs))
    return Trend(tuple(trs), diffs, tuple(drift), float(confidence_level), adjust, c_rate, c_diff, baseline,
                 source.calibration_key, source.calibration_status, cov, tuple(notes), source.store)
