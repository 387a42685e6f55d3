"""Immutable result objects."""

from __future__ import annotations

import json
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
from heroeval.estimators._inversion import _Test, check_alternative
from heroeval.ingest.annotations import IngestReport
from heroeval.stage_a.calibration import ConvergenceInfo
from heroeval.stage_a.covariance import ParameterCovariance, quad

__all__ = [
    "METHODS",
    "METHOD_TITLES",
    "ConfidenceInterval",
    "EstimateCollection",
    "EstimateResult",
    "Influence",
]

FloatArray = npt.NDArray[np.float64]

DEFAULT_CI_METHOD = "auto"
"""``"auto"``: the score-test inversion (``"score"``) near the boundary, the logit interval elsewhere."""

CI_METHODS = ("auto", "score", "logit", "wald")

SCORE_COUNT = 20.0
"""``method="auto"`` uses the score-test inversion when ``n * min(mu_hat, 1 - mu_hat)`` is below this."""


def _check_level(confidence_level: float) -> float:
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
    level = _check_level(confidence_level)
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

    @property
    def n(self) -> int:
        return int(self.current.shape[0])

    def variance_current(self) -> float:
        n = self.n
        return float(self.current @ self.current) / n**2 if n else math.nan

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
            return float(np.sum(self.history * other.history * self.gram))
        return float(quad(self.gram, self.history, other.history))

    def variance_history(self) -> float:
        return self.history_covariance(self)

    def variance(self) -> float:
        return self.variance_current() + self.variance_history()

METHODS = ("majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1", "hero2", "hero_joint")
METHOD_TITLES = {
    "majority_vote": "Majority vote",
    "dawid_skene": "Dawid-Skene (current only)",
    "gold_proportion": "Gold-proportion calibration",
    "rogan_gladen": "Rogan-Gladen (per labeler, pooled)",
    "hero1": "HERO-1",
    "hero2": "HERO-2",
    "hero_joint": "HERO joint",
    "hero1_ppi": "HERO-1 + current gold (PPI++)",
    "prior_ppi": "history posterior + current gold (PPI++)",
    "mv_ppi": "Majority vote + current gold (PPI++)",
    "gold_only": "Current gold only",
}


def _html_escape(x: Any) -> str:
    return str(x).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
        estimate sits on the boundary (for EM methods: a prevalence within 1e-6
        of 0 or 1); ``"unidentified"`` (estimate NaN) when no current label
        carries information; ``"ok"`` for methods without a root.
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
    test: _Test | None = field(default=None, repr=False, compare=False)

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
        level = _check_level(confidence_level)
        check_alternative(alternative)
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
            "standard_error": _jsonable(self.standard_error),
            "ci_low": _jsonable(ci.low),
            "ci_high": _jsonable(ci.high),
            "confidence_level": confidence_level,
            "ci_method": ci.method,
            "variance_current": _jsonable(self.variance_current),
            "variance_history": _jsonable(self.variance_history),
            "status": self.status,
            "n_items": self.n_items,
            "n_annotations": self.n_annotations,
            "n_labelers": self.n_labelers,
            "convergence": None if self.convergence is None else self.convergence.to_dict(),
            "details": _jsonable(dict(self.details)),
            "notes": list(self.notes),
            "ci_alternative": ci.alternative,
            "upper_bound": _jsonable(up.high),
            "lower_bound": _jsonable(lo.low),
            "bound_method": up.method,
            "ci_text": ci.describe(),
        }

    def summary(self) -> str:
        """A one-method plain-text table."""
        return EstimateCollection({self.method: self}).summary()

    def __repr__(self) -> str:
        ci = self.confidence_interval()
        return (f"EstimateResult(method={self.method!r}, estimate={self.estimate:.4f}, "
                f"standard_error={self.standard_error:.4f}, ci_95=[{ci.low:.4f}, {ci.high:.4f}], "
                f"n_items={self.n_items}, n_labelers={self.n_labelers}, status={self.status!r}"
                + (f", notes={len(self.notes)}" if self.notes else "") + ")")

    def to_frame(self, confidence_level: float = 0.95, ci_method: str = DEFAULT_CI_METHOD) -> pd.DataFrame:
        """A one-row DataFrame (index: the method): estimate, SE, interval, sizes, status and notes."""
        return pd.DataFrame([_row(self, confidence_level, ci_method)]).set_index("method")

    def _repr_html_(self) -> str:
        return str(self.to_frame().to_html(float_format=lambda x: f"{x:.4f}"))


def _row(r: EstimateResult, confidence_level: float, ci_method: str, label: str | None = None) -> dict[str, Any]:
    ci = r.confidence_interval(confidence_level, ci_method)
    return {"method": label or r.method, "title": r.title, "estimate": r.estimate,
            "standard_error": r.standard_error, "ci_low": ci.low, "ci_high": ci.high,
            "confidence_level": confidence_level, "n_items": r.n_items, "n_annotations": r.n_annotations,
            "n_labelers": r.n_labelers, "status": r.status, "notes": "; ".join(r.notes)}


@dataclass(frozen=True)
class EstimateCollection(Mapping[str, EstimateResult]):
    """Several methods' estimates of the same current round, by method name."""

    results: Mapping[str, EstimateResult]
    ingest: IngestReport | None = None
    skipped: Mapping[str, str] = field(default_factory=dict)
    recommended: Any = None  # heroeval.choice.Recommendation when method="auto" was asked for
    drift: Any = field(default=None, repr=False, compare=False)  # heroeval.DriftCheck, or why it could not run

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

        Columns: title, estimate, standard_error, ci_low, ci_high, confidence_level, n_items, n_annotations,
        n_labelers, status, notes. Methods not computed are left out (``skipped`` says why).
        """
        rows = []
        if self.recommended is not None:
            rec = self.recommended
            row = _row(rec.result, confidence_level, ci_method, label="recommended")
            w = "" if rec.history_weight is None else f", w={rec.history_weight:g}"
            row["title"] = f"recommended ({rec.result.title}{w})"
            rows.append(row)
        rows += [_row(r, confidence_level, ci_method) for r in self.results.values()]
        cols = ["method", "title", "estimate", "standard_error", "ci_low", "ci_high", "confidence_level", "n_items",
                "n_annotations", "n_labelers", "status", "notes"]
        return pd.DataFrame(rows, columns=cols).set_index("method")

    def _repr_html_(self) -> str:
        html = str(self.to_frame().to_html(float_format=lambda x: f"{x:.4f}"))
        if self.recommended is not None:
            html += f"<p>why recommended: {_html_escape(self.recommended.reason)}</p>"
        if self.skipped:
            html += "<p>not computed: " + "; ".join(
                f"{_html_escape(m)} ({_html_escape(w)})" for m, w in self.skipped.items()) + "</p>"
        return html

    def __repr__(self) -> str:
        return f"<EstimateCollection: {len(self.results)} method(s)>\n{self.summary()}"

    def summary(self, confidence_level: float = 0.95) -> str:
        pct = f"{100 * confidence_level:g}% CI"
        rows = [("method", "estimate", "SE", pct, "items", "labels", "labelers", "status")]
        for r in self.results.values():
            ci = r.confidence_interval(confidence_level)
            rows.append(
                (r.title, f"{r.estimate:.4f}", f"{r.standard_error:.4f}", f"[{ci.low:.4f}, {ci.high:.4f}]",
                 str(r.n_items), str(r.n_annotations), str(r.n_labelers), r.status)
            )
        widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) if k == 0 else c.rjust(w) for k, (c, w) in enumerate(zip(row, widths, strict=True)))
                 for row in rows]
        lines.insert(1, "-" * len(lines[0]))
        if self.recommended is not None:
            rec = self.recommended
            ci = rec.result.confidence_interval(confidence_level)
            words = f" {ci.describe()}" if ci.alternative != "two-sided" else ""
            lines[:0] = [f"Recommended: {METHOD_TITLES.get(rec.method, rec.method)} {rec.result.estimate:.4f} "
                         f"[{ci.low:.4f}, {ci.high:.4f}]{words}", f"  why: {rec.reason}", ""]
        for m, why in self.skipped.items():
            lines.append(f"{METHOD_TITLES.get(m, m)}: not computed ({why})")
        return "\n".join(lines)
