"""Immutable result objects."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import expit, logit
from scipy.stats import norm

from heroeval.errors import HeroEvalError
from heroeval.estimators.clusters import ESTIMAND, design_effect
from heroeval.estimators.inversion import InversionTest, check_alternative
from heroeval.estimators.table import METHOD_TITLES, EstimateRow, EstimatesTable
from heroeval.stage_a.calibration import ConvergenceInfo
from heroeval.stage_a.covariance import ParameterCovariance, quad

__all__ = ["ConfidenceInterval", "EstimateResult", "Influence"]

FloatArray = npt.NDArray[np.float64]

DEFAULT_CI_METHOD = "auto"
"""``"auto"``: the score-test inversion (``"score"``) near the boundary, the logit interval elsewhere."""

CI_METHODS = ("auto", "score", "logit", "wald")

SCORE_COUNT = 20.0
"""``method="auto"`` uses the score-test inversion when ``n * min(mu_hat, 1 - mu_hat)`` is below this."""


def check_level(confidence_level: float) -> float:
    if not (isinstance(confidence_level, (int, float)) and 0 < confidence_level < 1):
        raise HeroEvalError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    return float(confidence_level)


@dataclass(frozen=True)
class ConfidenceInterval:
    """A confidence interval: ``low``, ``high``, its level and how it was made."""

    low: float
    high: float
    confidence_level: float
    method: str
    alternative: str = "two-sided"

    def __iter__(self) -> Iterator[float]:
        return iter((self.low, self.high))

    def describe(self, digits: int = 1) -> str:
        """The interval in words: "at most 0.8 % (95 %)", "at least ...", or "0.41 % to 0.93 % (95 %)"."""
        return describe_interval(self, digits)


def _pct(x: float, digits: int) -> str:
    """Per cent with ``digits`` decimals, one more below 1 % (0.83 %, 12.4 %)."""
    return f"{100 * x:.{digits + (1 if 100 * x < 1 else 0)}f} %"


def describe_interval(ci: ConfidenceInterval, digits: int = 1) -> str:
    """A confidence interval as a sentence fragment; one-sided ones as a bound."""
    lvl = f"{100 * ci.confidence_level:g} %"
    if not (math.isfinite(ci.low) and math.isfinite(ci.high)):
        return f"no interval ({lvl})"
    if ci.alternative == "less":
        return f"at most {_pct(ci.high, digits)} ({lvl})"
    if ci.alternative == "greater":
        return f"at least {_pct(ci.low, digits)} ({lvl})"
    return f"{_pct(ci.low, digits)} to {_pct(ci.high, digits)} ({lvl})"


def rate_interval(
    est: float, se: float, confidence_level: float, method: str, alternative: str = "two-sided"
) -> ConfidenceInterval:
    """Wald interval ``est +- z se``, or the logit-transformed one (``se`` mapped by the delta method).

    The logit interval stays inside [0, 1]; at an estimate of exactly 0 or 1
    it degenerates to that point, so the Wald interval (clipped) is used there.
    ``alternative="less"`` gives ``[0, upper]``, ``"greater"`` ``[lower, 1]``,
    each with the one-sided quantile.
    """
    level = check_level(confidence_level)
    check_alternative(alternative)
    if method not in ("wald", "logit"):
        raise HeroEvalError(f"interval method must be 'wald' or 'logit', got {method!r}")
    if not (math.isfinite(est) and math.isfinite(se)):
        return ConfidenceInterval(math.nan, math.nan, level, method, alternative)
    z = float(norm.ppf(0.5 + level / 2)) if alternative == "two-sided" else float(norm.ppf(level))
    if method == "logit" and 0.0 < est < 1.0:
        lo = float(logit(est))
        s = se / (est * (1 - est))
        low, high = float(expit(lo - z * s)), float(expit(lo + z * s))
    else:
        low, high = max(0.0, est - z * se), min(1.0, est + z * se)
    if alternative == "less":
        low = 0.0
    elif alternative == "greater":
        high = 1.0
    return ConfidenceInterval(low, high, level, method, alternative)


@dataclass(frozen=True, eq=False)
class Influence:
    """The linear representation behind every standard error.

    ``estimate - truth ~= mean(current) + history term``, where ``current``
    holds one influence value per current item and the history term is
    represented in one of three spaces:

    * ``"stage_a"``: ``history`` is a gradient ``c`` over the calibration's
      parameters (sensitivities, specificities, round prevalences, covariate
      means) and the history term's variance is ``c' V c`` with ``V`` the
      calibration's parameter covariance (kept in ``gram``: the calibration's
      ``covariance``, or a dense matrix);
    * ``"gold_counts"``: ``c`` over the gold-only sensitivities and
      specificities, ``gram`` their (independent) variances;
    * ``"items"``: ``history`` holds one value per history item (the joint fit).

    Differences of estimates that share a calibration subtract their history
    representations before squaring (see :func:`heroeval.compare`).
    """

    current: FloatArray
    space: str | None = None
    history: FloatArray | None = None
    gram: FloatArray | ParameterCovariance | None = None
    calibration_id: int | None = None
    groups: npt.NDArray[np.int32] | None = None
    """The group of each current item (prompt, query, topic) when items are clustered: the current-round
    variance is then cluster-robust (:mod:`heroeval.estimators.clusters`)."""
    deff: float = field(default=1.0, init=False)
    """The design effect of the groups on the current-round variance (1 without groups)."""
    n_groups: int = field(default=0, init=False)
    """How many groups the current items fall into (0 without groups)."""

    def __post_init__(self) -> None:
        if self.groups is not None:
            if self.groups.shape != self.current.shape:
                raise HeroEvalError(f"groups has {self.groups.shape[0]} entries for {self.current.shape[0]} "
                                    "current influence values")
            deff, G = design_effect(self.current, self.groups)
            object.__setattr__(self, "deff", deff)
            object.__setattr__(self, "n_groups", G)

    @property
    def n(self) -> int:
        return int(self.current.shape[0])

    def variance_current(self) -> float:
        """``sum phi^2 / n^2``, times the design effect of grouped items (cluster-robust; at least the former)."""
        n = self.n
        return self.deff * float(self.current @ self.current) / n**2 if n else math.nan

    def history_covariance(self, other: Influence) -> float:
        """Covariance of the two history terms (0 when either has none)."""
        if self.space is None or other.space is None or self.history is None or other.history is None:
            return 0.0
        if self.space != other.space or self.calibration_id != other.calibration_id:
            raise HeroEvalError(
                "the two estimates do not share one calibration (or use different methods): "
                "their history terms cannot be combined"
            )
        if self.space == "items":
            if self.history.shape != other.history.shape:
                raise HeroEvalError("history influence arrays differ in length")
            return float(self.history @ other.history)
        if self.gram is None or other.gram is None:
            return math.nan  # the calibration carries no parameter covariance
        if self.space == "gold_counts":
            assert not isinstance(self.gram, ParameterCovariance)
            if self.gram.ndim == 2:  # cluster-robust by the history's item groups (gold_count_variances)
                return float(self.history @ self.gram @ other.history)
            return float(np.sum(self.history * other.history * self.gram))
        return float(quad(self.gram, self.history, other.history))

    def variance_history(self) -> float:
        return self.history_covariance(self)

    def variance(self) -> float:
        return self.variance_current() + self.variance_history()



def jsonable(x: Any) -> Any:
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if hasattr(x, "tolist"):
        return jsonable(x.tolist())
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
        One vocabulary in every view (the recommended estimate adds
        ``"unreliable"``): ``"ok"`` for an estimate inside (0, 1) (a root of
        the score equation, or a method without one); ``"boundary_0"`` or
        ``"boundary_1"`` when the score equation has no interior root and the
        estimate sits on the boundary (for EM methods: a prevalence within 1e-6
        of 0 or 1); ``"unidentified"`` (estimate NaN) when no current label
        carries information. (heroeval 0.1 wrote ``"interior"`` for ``"ok"``.)
    convergence : ConvergenceInfo or None
        For methods that run an EM (dawid_skene, hero_joint).
    details : mapping
        Method-specific values (HERO-2's ``gamma``, majority vote's tie count,
        labelers excluded, ...).
    standard_error : float
        The influence-function standard error (a property); NaN when the
        result carries no influence values or the estimate is on a boundary
        (0 or 1) or unidentified.
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
    notes: tuple[str, ...] = ()
    influence: Influence | None = field(default=None, repr=False, compare=False)
    test: InversionTest | None = field(default=None, repr=False, compare=False)
    _intervals: dict[tuple[float, str, str], ConfidenceInterval] = field(
        default_factory=dict, init=False, repr=False, compare=False)
    """Intervals already computed, by (level, method, alternative): a score-test inversion is done once per result
    however many views (table, JSON, to_frame, report) show it (issue #38). A result is immutable, so is this."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))

    @property
    def title(self) -> str:
        return METHOD_TITLES.get(self.method, self.method)

    @property
    def variance_current(self) -> float:
        """Variance from sampling the current round's items."""
        return math.nan if self.influence is None else self.influence.variance_current()

    @property
    def variance_history(self) -> float:
        """Variance from the history-estimated parameters (0 for current-only methods)."""
        return math.nan if self.influence is None else self.influence.variance_history()

    @property
    def standard_error(self) -> float:
        """Influence-function standard error; NaN on a boundary estimate (0 or 1)."""
        if self.influence is None or self.status.startswith("boundary") or self.status == "unidentified":
            return math.nan
        return math.sqrt(max(self.influence.variance(), 0.0))

    def interval_method(self, method: str = DEFAULT_CI_METHOD) -> str:
        """The interval method ``method="auto"`` resolves to for this result (``"score"`` or ``"logit"``)."""
        if method not in CI_METHODS:
            raise HeroEvalError(f"interval method must be one of {list(CI_METHODS)}, got {method!r}")
        if method != "auto":
            return method
        if self.test is None:
            return "logit"
        if getattr(self.test, "preferred", False):  # estimates from current gold: their own interval
            return "score"
        if self.status.startswith("boundary"):
            return "score"
        e = self.estimate
        if math.isfinite(e) and self.n_items * min(e, 1 - e) < SCORE_COUNT:
            return "score"
        return "logit"

    def confidence_interval(
        self, confidence_level: float = 0.95, method: str = DEFAULT_CI_METHOD, alternative: str = "two-sided"
    ) -> ConfidenceInterval:
        """Confidence interval for the rate.

        ``method="score"`` inverts the method's score test of ``rate = mu0``
        (HERO-1, HERO-2, HERO joint, gold-proportion; a moment test for
        Rogan–Gladen), with the history's uncertainty in the test's variance;
        it stays valid at and near 0 and 1 (docs/inference.md). At an
        estimate of exactly 0 (1) a two-sided request gives the one-sided
        upper (lower) bound at the same level: ``alternative`` then reads
        ``"less"`` (``"greater"``). ``"wald"`` is ``estimate +- z * SE``
        clipped to [0, 1]; ``"logit"`` builds it on the logit scale and maps
        back. ``"auto"`` (the default) is ``"score"`` at a boundary estimate
        or when ``n * min(estimate, 1 - estimate) < SCORE_COUNT``, ``"logit"``
        otherwise (and for methods without a score test).

        ``alternative="less"`` gives the one-sided upper bound ``[0, high]``
        ("the rate is at most high"), ``"greater"`` the lower bound
        ``[low, 1]``. For majority vote the interval is for the
        majority-label rate, not the gold rate.
        """
        level = check_level(confidence_level)
        check_alternative(alternative)
        key = (level, method, alternative)
        if key not in self._intervals:
            self._intervals[key] = self._interval(level, method, alternative)
        return self._intervals[key]

    def _interval(self, level: float, method: str, alternative: str) -> ConfidenceInterval:
        m = self.interval_method(method)
        if m == "score":
            if self.test is None:
                raise HeroEvalError(f"{self.method} has no score-test interval; use method='logit' or 'wald'")
            if self.status == "unidentified" or not math.isfinite(self.estimate):
                return ConfidenceInterval(math.nan, math.nan, level, m, alternative)
            alt = alternative
            if alt == "two-sided" and self.status == "boundary_0":
                alt = "less"
            elif alt == "two-sided" and self.status == "boundary_1":
                alt = "greater"
            low, high = self.test.interval(level, alt)
            return ConfidenceInterval(low, high, level, getattr(self.test, "label", m), alt)
        return rate_interval(self.estimate, self.standard_error, level, m, alternative)

    def bound(self, confidence_level: float = 0.95, side: str = "upper") -> float:
        """The one-sided bound at ``confidence_level``: "the rate is at most (``upper``) / at least this"."""
        if side not in ("upper", "lower"):
            raise HeroEvalError(f"side must be 'upper' or 'lower', got {side!r}")
        ci = self.confidence_interval(confidence_level, alternative="less" if side == "upper" else "greater")
        return ci.high if side == "upper" else ci.low

    def to_dict(self, confidence_level: float = 0.95, alternative: str = "two-sided") -> dict[str, Any]:
        ci = self.confidence_interval(confidence_level, alternative=alternative)
        up = self.confidence_interval(confidence_level, alternative="less")
        lo = self.confidence_interval(confidence_level, alternative="greater")
        return {
            "method": self.method,
            "estimate": self.estimate,
            "standard_error": jsonable(self.standard_error),
            "ci_low": jsonable(ci.low),
            "ci_high": jsonable(ci.high),
            "confidence_level": confidence_level,
            "ci_method": ci.method,
            "variance_current": jsonable(self.variance_current),
            "variance_history": jsonable(self.variance_history),
            **({} if self.influence is None or self.influence.groups is None else
               {"item_groups": self.influence.n_groups, "design_effect": self.influence.deff, "estimand": ESTIMAND}),
            "status": self.status,
            "n_items": self.n_items,
            "n_annotations": self.n_annotations,
            "n_labelers": self.n_labelers,
            "convergence": None if self.convergence is None else self.convergence.to_dict(),
            "details": jsonable(dict(self.details)),
            "notes": list(self.notes),
            "ci_alternative": ci.alternative,
            "upper_bound": jsonable(up.high),
            "lower_bound": jsonable(lo.low),
            "bound_method": up.method,
            "ci_text": ci.describe(),
        }

    def row(self, confidence_level: float = 0.95, ci_method: str = DEFAULT_CI_METHOD,
            alternative: str = "two-sided", *, key: str | None = None, title: str | None = None,
            status: str | None = None, notes: tuple[str, ...] | None = None,
            history_weight: float | None = None) -> EstimateRow:
        """This estimate as a row of the table model (:class:`~heroeval.estimators.table.EstimateRow`)."""
        ci = self.confidence_interval(confidence_level, ci_method, alternative)
        return EstimateRow(
            key=key or self.method, method=self.method, title=title or self.title, estimate=self.estimate,
            standard_error=self.standard_error, ci_low=ci.low, ci_high=ci.high, ci_method=ci.method,
            ci_alternative=ci.alternative, ci_text=ci.describe(), confidence_level=confidence_level,
            n_items=self.n_items, n_annotations=self.n_annotations, n_labelers=self.n_labelers,
            status=self.status if status is None else status, notes=self.notes if notes is None else notes,
            history_weight=history_weight)

    def table(self, confidence_level: float = 0.95, ci_method: str = DEFAULT_CI_METHOD,
              alternative: str = "two-sided") -> EstimatesTable:
        """The one-row table model every view of this estimate renders."""
        return EstimatesTable((self.row(confidence_level, ci_method, alternative),), confidence_level,
                              ci_method, alternative)

    def summary(self) -> str:
        """A one-method plain-text table."""
        return self.table().as_text()

    def __repr__(self) -> str:
        ci = self.confidence_interval()
        return (f"EstimateResult(method={self.method!r}, estimate={self.estimate:.4f}, "
                f"standard_error={self.standard_error:.4f}, ci_95=[{ci.low:.4f}, {ci.high:.4f}], "
                f"n_items={self.n_items}, n_labelers={self.n_labelers}, status={self.status!r}"
                + (f", notes={len(self.notes)}" if self.notes else "") + ")")

    def to_frame(self, confidence_level: float = 0.95, ci_method: str = DEFAULT_CI_METHOD) -> pd.DataFrame:
        """A one-row DataFrame (index: the method): estimate, SE, interval and its method, sizes, status, notes."""
        return self.table(confidence_level, ci_method).to_frame()

    def _repr_html_(self) -> str:
        return self.table().as_html()
