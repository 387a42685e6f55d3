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

That is ``method="joint"``. The default, ``method="auto"``
(:func:`trend_from_recommendations`), gives each round the answer ``hero
store estimate`` gives it: the round's recommended estimate (method chosen by
the model checks, bias-aware interval, ``"unreliable"`` status, the reason),
its marginal interval the recommended interval at level L and its
simultaneous interval the recommended interval at the adjusted level
(``L^{1/m}`` for Šidák, ``1 - (1 - L)/m`` for Bonferroni; ``"maxz"`` needs a
joint covariance and falls back to Šidák). Each difference is
:func:`heroeval.compare`'s recommended difference on a calibration of the
history without either round, its simultaneous interval at the same
adjusted level over the m - 1 differences, its p-value adjusted by Holm's
step-down method (:func:`holm`; ``adjust="none"`` leaves them unadjusted).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import expit, logit
from scipy.stats import norm

from heroeval.core.multiple import ADJUSTMENTS, adjusted_level, holm
from heroeval.errors import HeroEvalError
from heroeval.stage_a.calibration import Calibration
from heroeval.store._rounds import RoundInfo, html_table

if TYPE_CHECKING:
    from heroeval.estimators.records import Recommendation
    from heroeval.inference.comparison import DifferenceRecommendation

__all__ = ["ADJUSTMENTS", "METHODS", "DriftRow", "Trend", "TrendDifference", "TrendRound", "TrendSource",
           "adjusted_level", "critical_value", "holm", "trend_from_fit", "trend_from_recommendations", "trend_pairs"]

METHODS = ("auto", "joint")
"""``Store.trend``'s methods: each round's recommended estimate, or every round from one joint Stage A fit."""
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
    level = adjusted_level(m, confidence_level, adjust)  # checks both; "maxz" gives Šidák's level
    if adjust != "maxz" or max(int(m), 1) == 1 or cov is None or not np.all(np.isfinite(cov)):
        return float(norm.ppf(0.5 + level / 2))
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
    method: str = "stage_a_joint"  # the recommended method (method="auto"), or the joint fit's
    status: str = "ok"  # "ok", "unreliable" (as hero store estimate says) or "unavailable" (no estimate)
    reason: str = ""  # why that method (the recommendation's reason)
    ci_method: str = "logit"  # how the interval is made


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
    method: str = "stage_a_joint"  # the recommended difference's method (method="auto"), or the joint fit's
    status: str = "ok"  # "unreliable" when either round's recommendation is; "unavailable" without a difference


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
               "ci_high", "marginal_low", "marginal_high", "gold_mean", "method", "status", "ci_method", "reason")
_DIFF_COLS = ("round", "reference", "difference", "standard_error", "ci_low", "ci_high", "p_value", "p_adjusted",
              "method", "status")
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
    method: str = "stage_a_joint"  # "auto" (each round's recommended estimate) or "stage_a_joint" (one fit)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.rounds)

    def to_frame(self, truth: Mapping[str, float] | None = None) -> pd.DataFrame:
        """One row per round; with ``truth`` (round name to true rate) a ``truth`` and an ``error`` column."""
        df = pd.DataFrame([[r.name, r.model, r.date, r.n_items, r.n_gold, r.in_history, r.estimate,
                            r.standard_error, r.ci_low, r.ci_high, r.marginal_low, r.marginal_high, r.gold_mean,
                            r.method, r.status, r.ci_method, r.reason]
                           for r in self.rounds], columns=list(_ROUND_COLS))
        if truth is not None:
            df["truth"] = [float(truth.get(n, math.nan)) for n in df["round"]]
            df["error"] = df["estimate"] - df["truth"]
            df["covered"] = (df["ci_low"] <= df["truth"]) & (df["truth"] <= df["ci_high"])
        return df

    def differences_frame(self) -> pd.DataFrame:
        return pd.DataFrame([[d.name, d.reference, d.estimate, d.standard_error, d.ci_low, d.ci_high, d.p_value,
                              d.p_adjusted, d.method, d.status] for d in self.differences], columns=list(_DIFF_COLS))

    def drift_frame(self) -> pd.DataFrame:
        return pd.DataFrame([[r.round, r.labeler, r.n_labels, r.observed, r.expected, r.z, r.p_adjusted,
                              r.flagged, r.gold_sensitivity, r.gold_specificity, r.n_gold_labels, r.round_drift_p]
                             for r in self.drift], columns=list(_DRIFT_COLS))

    def method_line(self) -> str:
        m = len(self.rounds)
        how = {"sidak": "Šidák", "bonferroni": "Bonferroni", "maxz": "max-|z| under the estimated correlation",
               "none": "none (marginal intervals)"}[self.adjust]
        if self.method == "auto":
            return (f"each round's recommended estimate (as hero store estimate); {self.confidence_level:.0%} "
                    f"intervals simultaneous over {m} rates (each at level "
                    f"{adjusted_level(m, self.confidence_level, self.adjust):.4f}) and {max(m - 1, 0)} recommended "
                    f"differences ({adjusted_level(m - 1, self.confidence_level, self.adjust):.4f}; p-values by "
                    f"{'none' if self.adjust == 'none' else 'Holm'}); multiplicity: "
                    f"{'Šidák (max-|z| needs a joint fit)' if self.adjust == 'maxz' else how}")
        return (f"one joint Stage A fit; {self.confidence_level:.0%} intervals simultaneous over {m} rates (critical "
                f"value {self.critical_rates:.3f}) and {max(m - 1, 0)} differences "
                f"({self.critical_differences:.3f}); multiplicity: {how}")

    def to_dict(self, truth: Mapping[str, float] | None = None) -> dict[str, Any]:
        def clean(df: pd.DataFrame) -> list[dict[str, Any]]:
            recs = df.astype(object).where(pd.notna(df), None).to_dict(orient="records")
            return [{str(k): (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()}
                    for r in recs]

        return {"store": self.store, "confidence_level": self.confidence_level, "adjust": self.adjust,
                "critical_value_rates": self.critical_rates, "critical_value_differences": self.critical_differences,
                "baseline": self.baseline or "previous", "method": self.method,
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


def trend_pairs(names: Sequence[str], baseline: str | None) -> list[tuple[str, str]]:
    """The trend's differences as ``(name, reference)``: each round minus the previous one, or minus ``baseline``."""
    if baseline is not None and baseline not in names:
        raise HeroEvalError(f"the baseline {baseline!r} is not one of the trend's rounds")
    if baseline is None:
        return [(names[k], names[k - 1]) for k in range(1, len(names))]
    return [(n, baseline) for n in names if n != baseline]


def _se(x: float | None) -> float:
    return math.nan if x is None else float(x)


def trend_from_recommendations(
    rounds: Sequence[RoundInfo],
    recommendations: Mapping[str, Recommendation | str],
    differences: Mapping[tuple[str, str], DifferenceRecommendation | str],
    *,
    baseline: str | None = None,
    confidence_level: float = 0.95,
    adjust: str = "sidak",
    source: TrendSource = TrendSource(),
    drift: Sequence[DriftRow] = (),
    notes: Sequence[str] = (),
    gold_means: Mapping[str, float] | None = None,
) -> Trend:
    """The trend of ``rounds`` from each round's recommended estimate and each pair's recommended difference
    (``method="auto"``, see the module docstring). ``recommendations`` maps a round's name to its
    :class:`~heroeval.estimators.records.Recommendation` (or to why it has none), ``differences`` a pair
    ``(name, reference)`` of :func:`trend_pairs` to the recommended difference ``name - reference`` (or why none)."""
    if adjust not in ADJUSTMENTS:
        raise HeroEvalError(f"adjust must be one of {', '.join(ADJUSTMENTS)}, got {adjust!r}")
    names = [r.name for r in rounds]
    pairs = trend_pairs(names, baseline)
    m = len(names)
    notes = list(notes)
    if adjust == "maxz":
        notes.append("adjust='maxz' needs the joint covariance of the rates, which the rounds' recommended "
                     "estimates do not have: Šidák's adjustment is used instead (method='joint' has max-|z|)")
    eff = "sidak" if adjust == "maxz" else adjust
    lv_rate = adjusted_level(m, confidence_level, eff)
    lv_diff = adjusted_level(len(pairs), confidence_level, eff)
    nan = math.nan
    trs = []
    for r in rounds:
        rec = recommendations[r.name]
        gm = float((gold_means or {}).get(r.name, nan))
        if isinstance(rec, str):
            notes.append(f"round {r.name!r}: no recommended estimate ({rec})")
            trs.append(TrendRound(r.name, r.model, r.date, r.n_items, r.n_gold, r.in_history, nan, nan, nan, nan,
                                  nan, nan, gm, "none", "unavailable", rec, ""))
            continue
        res = rec.result
        ci, marg = res.confidence_interval(lv_rate), res.confidence_interval(confidence_level)
        trs.append(TrendRound(r.name, r.model, r.date, r.n_items, r.n_gold, r.in_history, float(res.estimate),
                              _se(res.standard_error), float(ci.low), float(ci.high), float(marg.low),
                              float(marg.high), gm, rec.method, rec.status, rec.reason, marg.method))
    p = np.full(len(pairs), nan)
    rows: list[tuple[float, float, float, float, str, str]] = []
    for i, pair in enumerate(pairs):
        d = differences[pair]
        if isinstance(d, str):
            notes.append(f"difference {pair[0]!r} - {pair[1]!r}: none ({d})")
            rows.append((nan, nan, nan, nan, "none", "unavailable"))
            continue
        dci = d.confidence_interval(lv_diff)
        p[i] = float(d.comparison.p_value)
        rows.append((float(d.estimate), _se(d.comparison.standard_error), float(dci.low), float(dci.high), d.method,
                     d.status))
    p_adj = p if eff == "none" else holm(p)
    diffs = tuple(TrendDifference(a, b, e, s, lo, hi, float(p[i]), float(p_adj[i]), meth, st)
                  for i, ((a, b), (e, s, lo, hi, meth, st)) in enumerate(zip(pairs, rows, strict=True)))
    se = np.asarray([t.standard_error for t in trs], dtype=np.float64)
    cov = np.full((m, m), nan)  # no joint covariance: each rate's own variance only
    np.fill_diagonal(cov, se ** 2)
    return Trend(tuple(trs), diffs, tuple(drift), float(confidence_level), adjust,
                 critical_value(m, confidence_level, eff), critical_value(len(pairs), confidence_level, eff),
                 baseline, source.calibration_key, source.calibration_status, cov, tuple(notes), source.store,
                 method="auto")
