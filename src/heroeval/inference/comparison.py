"""Inference built on influence values: comparisons, the bootstrap, classifier metrics.

Every standard error here comes from the :class:`~heroeval.estimators.results.Influence`
attached to each estimate. Two estimates that share a calibration have
correlated history terms; a difference subtracts their history
representations before squaring rather than adding variances.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import norm
from scipy.stats import t as t_dist

from heroeval.errors import HeroEvalError
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.ppi import ALL_GOLD_METHODS, GOLD_METHODS, gold_estimates, split_methods
from heroeval.estimators.records import Recommendation
from heroeval.estimators.registry import estimate_methods
from heroeval.estimators.results import ConfidenceInterval, EstimateResult, check_level, jsonable, rate_interval
from heroeval.inference.difference_interval import DifferenceInterval
from heroeval.inference.pairing import Pairing, paired_variance_current, resolve_pairing
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.fit import fit_stage_a

__all__ = [
    "ClassifierMetrics",
    "Comparison",
    "ComparisonCollection",
    "DifferenceRecommendation",
    "MetricEstimate",
    "classifier_metrics",
    "compare",
    "difference",
]

FloatArray = npt.NDArray[np.float64]


def _jsonable_dict(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = jsonable(d)
    return out


def _interval_fields(estimate: float, se: float, ci: ConfidenceInterval) -> dict[str, Any]:
    """The JSON fields every estimate with an interval shares."""
    return {"estimate": estimate, "standard_error": se, "ci_low": ci.low, "ci_high": ci.high,
            "confidence_level": ci.confidence_level}


def _p(p: float) -> str:
    """A p-value for text: 4 decimals, or its order of magnitude below 1e-4 (never 0.0000)."""
    if p != p:
        return "nan"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def _wald(est: float, se: float, level: float, lo: float = -1.0, hi: float = 1.0) -> ConfidenceInterval:
    level = check_level(level)
    if not (math.isfinite(est) and math.isfinite(se)):
        return ConfidenceInterval(math.nan, math.nan, level, "wald")
    z = float(norm.ppf(0.5 + level / 2))
    return ConfidenceInterval(max(lo, est - z * se), min(hi, est + z * se), level, "wald")


# ---------------------------------------------------------------------------
# Comparing two rounds
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """The difference ``a - b`` of two rounds' rates by one method.

    ``variance_current`` adds the two rounds' current-item variances (the
    rounds' items are independent), or, when the rounds answer the same
    prompts (:attr:`pairing`), is the variance of the paired difference
    (:mod:`heroeval.inference.pairing`); ``variance_history`` is the variance of
    the *difference* of their history terms, which share one calibration.
    """

    method: str
    estimate: float
    variance_current: float
    variance_history: float
    a: EstimateResult
    b: EstimateResult
    df: float | None = None
    """Degrees of freedom of the t interval and test (the estimates with current gold: Welch–Satterthwaite
    over the two rounds' gold samples); ``None``: the normal approximation."""
    rule: DifferenceInterval | None = None
    """The recommended difference's interval when the model checks found a bias to allow for (or a round they
    cannot judge): its interval, p-value and verdict then come from it (:class:`DifferenceInterval`); ``None``:
    ``estimate +- q * SE``."""
    pairing: Pairing | None = None
    """How A's and B's items pair by prompt when ``variance_current`` is the paired one
    (:mod:`heroeval.inference.pairing`); ``None``: the rounds' items are independent."""

    def _quantile(self, q: float) -> float:
        return float(norm.ppf(q) if self.df is None else t_dist.ppf(q, self.df))

    @property
    def standard_error(self) -> float:
        v = self.variance_current + self.variance_history
        return math.sqrt(v) if v >= 0 else math.nan

    @property
    def p_value(self) -> float:
        """Two-sided p-value for no difference (normal approximation, or the :attr:`rule`'s)."""
        if self.rule is not None:
            return self.rule.p_value(0.0)
        se = self.standard_error
        if not (math.isfinite(se) and se > 0):
            return math.nan
        z = abs(self.estimate) / se
        return float(2 * (norm.sf(z) if self.df is None else t_dist.sf(z, self.df)))

    def confidence_interval(self, confidence_level: float = 0.95) -> ConfidenceInterval:
        """``estimate +- q * SE`` clipped to [-1, 1]: q normal (``"wald"``), or Student's t at ``df`` (``"t"``);
        with a :attr:`rule`, its interval (labelled with the rule's name)."""
        if self.rule is not None:
            level = check_level(confidence_level)
            lo, hi = self.rule.interval(level)
            return ConfidenceInterval(lo, hi, level, self.rule.label)
        if self.df is None:
            return _wald(self.estimate, self.standard_error, confidence_level)
        level = check_level(confidence_level)
        se = self.standard_error
        if not (math.isfinite(self.estimate) and math.isfinite(se)):
            return ConfidenceInterval(math.nan, math.nan, level, "t")
        h = self._quantile(0.5 + level / 2) * se
        return ConfidenceInterval(max(-1.0, self.estimate - h), min(1.0, self.estimate + h), level, "t")

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        return _jsonable_dict(
            {
                **_interval_fields(self.estimate, self.standard_error, self.confidence_interval(confidence_level)),
                "p_value": self.p_value,
                "ci_method": self.confidence_interval(confidence_level).method,
                "variance_current": self.variance_current,
                "variance_history": self.variance_history,
                **({} if self.pairing is None else {"pairing": self.pairing.to_dict()}),
                **({} if self.df is None else {
                    "df": self.df, "n_gold": {"a": self.a.details.get("n_gold"), "b": self.b.details.get("n_gold")}}),
            }
        )

    def _row(self, confidence_level: float) -> dict[str, Any]:
        ci = self.confidence_interval(confidence_level)
        return {"method": self.method, "a": self.a.estimate, "b": self.b.estimate, "difference": self.estimate,
                "standard_error": self.standard_error, "ci_low": ci.low, "ci_high": ci.high,
                "confidence_level": confidence_level, "p_value": self.p_value}

    def to_frame(self, confidence_level: float = 0.95) -> pd.DataFrame:
        """A one-row DataFrame (index: the method): A, B, A - B, SE, interval and p-value."""
        return pd.DataFrame([self._row(confidence_level)]).set_index("method")

    def _repr_html_(self) -> str:
        return str(self.to_frame().to_html(float_format=lambda x: f"{x:.4g}"))

    def __repr__(self) -> str:
        ci = self.confidence_interval()
        return (f"Comparison(method={self.method!r}, a={self.a.estimate:.4f}, b={self.b.estimate:.4f}, "
                f"difference={self.estimate:+.4f}, standard_error={self.standard_error:.4f}, "
                f"ci_95=[{ci.low:+.4f}, {ci.high:+.4f}], p_value={_p(self.p_value)})")


@dataclass(frozen=True)
class DifferenceRecommendation:
    """The recommended difference ``A - B`` (``compare(..., method="auto")``): which method, its comparison, and why.

    ``comparison`` is the chosen method's difference, its interval bias-aware (:class:`DifferenceInterval`) when
    the model checks found a bias of the difference to allow for; ``a`` and ``b`` are each round's own
    recommendation, the answer ``hero estimate`` gives that round; ``table`` lists every candidate difference with
    its paired mock-round error and predicted root mean squared error. ``status`` is ``"unreliable"`` when either
    round is (or ``"ok"``).
    """

    method: str
    history_weight: float | None
    comparison: Comparison
    reason: str
    table: list[dict[str, Any]]
    status: str
    a: Recommendation
    b: Recommendation

    @property
    def estimate(self) -> float:
        return self.comparison.estimate

    def confidence_interval(self, confidence_level: float = 0.95) -> ConfidenceInterval:
        return self.comparison.confidence_interval(confidence_level)

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        """Shaped like ``hero estimate``'s ``"recommended"``: method, estimate, interval, status, reason, candidates;
        and each round's own recommendation (``"a"``, ``"b"``: method, estimate, interval, status)."""
        c = self.comparison
        ci = c.confidence_interval(confidence_level)

        def rnd(r: Recommendation) -> dict[str, Any]:
            d = r.to_dict(confidence_level)
            return {k: d[k] for k in ("method", "history_weight", "estimate", "ci_low", "ci_high", "ci_method",
                                      "status")}

        return _jsonable_dict({
            "method": self.method, "history_weight": self.history_weight, "estimate": c.estimate,
            "standard_error": c.standard_error, "ci_low": ci.low, "ci_high": ci.high,
            "confidence_level": confidence_level, "ci_method": ci.method, "p_value": c.p_value,
            "status": self.status, "reason": self.reason, "candidates": self.table, "a": rnd(self.a),
            "b": rnd(self.b)})

    def to_frame(self, confidence_level: float = 0.95) -> pd.DataFrame:
        """A one-row DataFrame (index ``"recommended"``): method, A, B, A - B, SE, interval, p-value, status,
        reason."""
        row = {**self.comparison._row(confidence_level), "status": self.status, "reason": self.reason}
        row["ci_method"] = self.confidence_interval(confidence_level).method
        return pd.DataFrame([row]).rename(index={0: "recommended"})

    def line(self, confidence_level: float = 0.95) -> str:
        """One line: the recommended A - B, its interval and status."""
        ci = self.confidence_interval(confidence_level)
        w = "" if self.history_weight is None else f", history weight {self.history_weight:g}"
        head = "UNRELIABLE: recommended" if self.status == "unreliable" else "Recommended"
        return (f"{head} A - B ({self.method}{w}): {self.estimate:+.4f} [{ci.low:+.4f}, {ci.high:+.4f}] "
                f"({100 * confidence_level:g} %, {ci.method}), status {self.status}")

    def __repr__(self) -> str:
        reason = self.reason if len(self.reason) <= 160 else self.reason[:157] + "..."
        return f"DifferenceRecommendation({self.line()}; reason={reason!r})"

    def _repr_html_(self) -> str:
        return (f"<p><b>{html.escape(self.line())}</b></p><p>why: {html.escape(self.reason)}</p>"
                + str(pd.DataFrame(self.table).to_html(float_format=lambda x: f"{x:.4f}", max_rows=40)))


@dataclass(frozen=True)
class ComparisonCollection(Mapping[str, Comparison]):
    """Comparisons of the same two rounds by several methods (and the recommended one, when it was asked for)."""

    comparisons: Mapping[str, Comparison]
    a: EstimateCollection
    b: EstimateCollection
    skipped: Mapping[str, str] = field(default_factory=dict)
    recommended: DifferenceRecommendation | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "comparisons", MappingProxyType(dict(self.comparisons)))
        object.__setattr__(self, "skipped", MappingProxyType(dict(self.skipped)))

    def __getitem__(self, key: str) -> Comparison:
        return self.comparisons[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.comparisons)

    def __len__(self) -> int:
        return len(self.comparisons)

    def to_frame(self, confidence_level: float = 0.95) -> pd.DataFrame:
        """One row per method (index: the method): A, B, A - B, SE, interval and p-value; the recommended difference
        first (index ``"recommended"``, its ``chosen`` column the method) when there is one."""
        cols = ["method", "a", "b", "difference", "standard_error", "ci_low", "ci_high", "confidence_level", "p_value"]
        rows = [c._row(confidence_level) for c in self.comparisons.values()]
        if self.recommended is not None:
            rows.insert(0, {**self.recommended.comparison._row(confidence_level), "method": "recommended",
                            "chosen": self.recommended.method, "status": self.recommended.status})
            cols += ["chosen", "status"]
        return pd.DataFrame(rows, columns=cols).set_index("method")

    def summary(self, confidence_level: float = 0.95) -> str:
        """A plain-text table of the differences A - B, one row per method, and the methods not compared."""
        pct = f"{100 * confidence_level:g}% CI"
        rows = [("method", "A", "B", "A - B", "SE", pct, "p-value")]
        for c in self.comparisons.values():
            ci = c.confidence_interval(confidence_level)
            rows.append((c.a.title, f"{c.a.estimate:.4f}", f"{c.b.estimate:.4f}", f"{c.estimate:+.4f}",
                         f"{c.standard_error:.4f}", f"[{ci.low:+.4f}, {ci.high:+.4f}]", _p(c.p_value)))
        widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
        lines = ["  ".join(x.ljust(w) if k == 0 else x.rjust(w) for k, (x, w) in enumerate(zip(r, widths, strict=True)))
                 for r in rows]
        lines.insert(1, "-" * len(lines[0]))
        lines += [f"{m}: not compared ({why})" for m, why in self.skipped.items()]
        if self.recommended is not None:
            lines.insert(0, self.recommended.line(confidence_level))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return str(self.to_frame().to_html(float_format=lambda x: f"{x:.4g}"))

    def __repr__(self) -> str:
        return f"<ComparisonCollection: {len(self.comparisons)} method(s), A - B>\n{self.summary()}"

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        return {
            "recommended": None if self.recommended is None else self.recommended.to_dict(confidence_level),
            "difference": {m: c.to_dict(confidence_level) for m, c in self.comparisons.items()},
            "skipped": dict(self.skipped),
            "a": self.a.to_dict(confidence_level),
            "b": self.b.to_dict(confidence_level),
        }


def difference(a: EstimateResult, b: EstimateResult, pairing: Pairing | None = None) -> Comparison:
    """The difference ``a - b`` of two rounds' estimates by one method sharing one calibration (their history
    terms subtracted before squaring); :class:`HeroEvalError` without influence values. With a ``pairing`` of
    the rounds' items by prompt, the current-item variance is the paired one (:mod:`heroeval.inference.pairing`)
    for the silver-label methods; the estimates with current gold, whose gold samples are drawn in each round
    on its own, and an estimate that left items out (new labelers excluded) stay unpaired."""
    if a.influence is None or b.influence is None:
        raise HeroEvalError(f"{a.method}: no influence values, cannot compare")
    vc = a.influence.variance_current() + b.influence.variance_current()
    vp = (paired_variance_current(a.influence, b.influence, pairing)
          if pairing is not None and a.method not in ALL_GOLD_METHODS else math.nan)
    if math.isfinite(vp):
        vc = vp
    else:
        pairing = None
    ia, ib = a.influence, b.influence
    vh = ia.variance_history() + ib.variance_history() - 2 * ia.history_covariance(ib)
    if a.status.startswith("boundary") or b.status.startswith("boundary"):
        vc = math.nan
    df = None
    if a.method in ALL_GOLD_METHODS:  # t at Welch–Satterthwaite's df over the two gold samples
        va, vb = a.influence.variance_current(), b.influence.variance_current()
        da, db = _gold_df(a), _gold_df(b)
        den = (va**2 / da if da > 0 else math.inf) + (vb**2 / db if db > 0 else math.inf)
        df = (va + vb) ** 2 / den if den > 0 and math.isfinite(den) else 1.0
        df = max(df, 1.0)
    return Comparison(a.method, a.estimate - b.estimate, vc, max(vh, 0.0) if math.isfinite(vh) else vh, a, b, df,
                      pairing=pairing)


def _one_sided_gold(round_a: AnnotationSet, round_b: AnnotationSet, methods: Sequence[str]) -> str:
    """Why the estimates with current gold cannot compare a round with gold and one without."""
    has, lacks = (("A", round_a), ("B", round_b)) if round_a.has_gold else (("B", round_b), ("A", round_a))
    return (f"round {lacks[0]} ({lacks[1].name!r}) has no current gold but round {has[0]} ({has[1].name!r}) has: "
            f"{', '.join(methods)} need(s) gold in both rounds (a difference of a gold-rectified estimate and a "
            f"silver-only one would be valid only if the history transports to round {lacks[0]}). Give round "
            f"{lacks[0]} expert labels too (read_annotations(..., gold=...); hero compare --{lacks[0].lower()}-gold "
            f"FILE), or compare with a silver-only method such as hero1, which ignores round {has[0]}'s gold")


def compare(
    round_a: AnnotationSet,
    round_b: AnnotationSet,
    calibration: Calibration | None = None,
    *,
    method: str | Sequence[str] = "hero1",
    history: AnnotationSet | None = None,
    pairs: Pairing | Mapping[Any, Any] | pd.Series | str | None = "auto",
    **kwargs: Any,
) -> Comparison | ComparisonCollection:
    """Difference of two rounds' gold rates (``a - b``) with an interval and a p-value.

    Both rounds are estimated with the same calibration, so their errors
    share the history's: the difference's variance is
    ``Var_a,current + Var_b,current + Var(history term of a - history term of b)``.
    Labeler pools may differ between the rounds. Extra keyword arguments are
    the estimators' options (``ridge``, ``tie``, ``rng``, ``new_labelers``,
    ``exclude_new_labelers``, ``on_shift``), as
    :func:`~heroeval.estimators.registry.estimate_methods` takes them; the
    drift check is :func:`heroeval.check_drift`'s (``hero compare`` runs it).

    With current gold in both rounds (``read_annotations(..., gold=...)``)
    the estimates that use it (``hero1_ppi``, ``prior_ppi``, ``mv_ppi``,
    ``gold_only``; ``method="all"`` adds the first, third and fourth) are
    compared the same way: each round's current variance includes its gold
    sample's (the samples are independent), the history terms of HERO's
    posteriors are subtracted before squaring, and the interval and p-value
    use Student's t at the Welch–Satterthwaite degrees of freedom of the two
    rounds' current variances and gold counts. A round with gold against one
    without: asking for an estimate with gold raises :class:`HeroEvalError`
    naming the round without; ``method="all"`` lists them under ``skipped``
    with that reason (the silver-only methods, which ignore gold, are
    compared as usual).

    ``pairs``: when A and B answer the same prompts, the difference's
    current-item variance uses the pairing (the covariance of the paired
    influence values; :mod:`heroeval.inference.pairing`). ``"auto"`` (the
    default) pairs items with the same id in both rounds, a mapping from
    item id to prompt id pairs by prompt, ``None`` treats the rounds' items
    as independent. :attr:`Comparison.pairing` says which was used.

    Examples
    --------
    >>> import heroeval as he
    >>> from heroeval.simulate import paper_dgp
    >>> d1, d2 = paper_dgp(1), paper_dgp(2)
    >>> cal = he.calibrate(d1.history)
    >>> c = he.compare(d1.current, d2.current.take_items(range(300)), cal, method="hero1")
    >>> c.method, round(c.standard_error, 3) > 0
    ('hero1', True)
    """
    if calibration is None:
        if history is None:
            raise HeroEvalError("pass a calibration or a history to calibrate from")
        calibration = fit_stage_a(history)
    single = isinstance(method, str) and method != "all"
    wanted: str | list[str] = [str(method)] if single else (method if isinstance(method, str) else list(method))
    gold_wanted: list[str] = []
    one_sided: dict[str, str] = {}
    if isinstance(wanted, list):
        wanted, gold_wanted = split_methods(wanted)
        if gold_wanted and round_a.has_gold != round_b.has_gold:
            raise HeroEvalError(_one_sided_gold(round_a, round_b, gold_wanted))
    elif round_a.has_gold and round_b.has_gold:
        gold_wanted = list(GOLD_METHODS)
    elif round_a.has_gold or round_b.has_gold:  # "all": say why the estimates with gold are missing
        one_sided = dict.fromkeys(GOLD_METHODS, _one_sided_gold(round_a, round_b, GOLD_METHODS))
    ra = estimate_methods(round_a, calibration, method=wanted, history=history, **kwargs)
    rb = estimate_methods(round_b, calibration, method=wanted, history=history, **kwargs)
    assert isinstance(ra, EstimateCollection) and isinstance(rb, EstimateCollection)
    if gold_wanted:  # both rounds' gold: the rectified estimates, whose history terms share the calibration
        excl = bool(kwargs.get("exclude_new_labelers", False)) or kwargs.get("new_labelers") == "exclude"
        quiet = wanted == "all"
        ga, sa = gold_estimates(round_a, calibration, gold_wanted, exclude_new_labelers=excl, skip_errors=quiet)
        gb, sb = gold_estimates(round_b, calibration, gold_wanted, exclude_new_labelers=excl, skip_errors=quiet)
        ra = replace(ra, results={**ra.results, **ga}, skipped={**ra.skipped, **sa})
        rb = replace(rb, results={**rb.results, **gb}, skipped={**rb.skipped, **sb})
    pairing = resolve_pairing(round_a, round_b, pairs)
    comps: dict[str, Comparison] = {}
    cannot: dict[str, str] = {}
    for m in ra:
        if m not in rb:
            continue
        try:
            comps[m] = difference(ra[m], rb[m], pairing)
        except HeroEvalError as exc:  # e.g. no influence values: skipped with the reason, as estimate skips
            if single:
                raise
            cannot[m] = str(exc)
    if single:
        return comps[str(method)]
    skipped = {m: why for m, why in {**rb.skipped, **ra.skipped}.items()}
    skipped.update({m: "computed for only one of the rounds" for m in set(ra) ^ set(rb)})
    skipped.update(one_sided)
    skipped.update(cannot)
    return ComparisonCollection(comps, ra, rb, skipped)


# ---------------------------------------------------------------------------
# A binary classifier's precision and recall against the latent gold label
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricEstimate:
    """A derived quantity with a delta-method standard error.

    ``df``: Student's t at these degrees of freedom instead of the normal
    quantile (quantities built from current gold samples); ``result``: the
    quantity is one stratum's rate, and its interval is that estimate's own
    (t, widened by the small-sample rule where it applies).
    """

    name: str
    estimate: float
    standard_error: float
    df: float | None = None
    result: EstimateResult | None = None

    def confidence_interval(self, confidence_level: float = 0.95, method: str = "wald") -> ConfidenceInterval:
        if self.result is not None:
            return self.result.confidence_interval(confidence_level)
        if self.df is None:
            return rate_interval(self.estimate, self.standard_error, confidence_level, method)
        level = check_level(confidence_level)
        if not (math.isfinite(self.estimate) and math.isfinite(self.standard_error)):
            return ConfidenceInterval(math.nan, math.nan, level, "t")
        h = float(t_dist.ppf(0.5 + level / 2, self.df)) * self.standard_error
        return ConfidenceInterval(max(0.0, self.estimate - h), min(1.0, self.estimate + h), level, "t")

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        ci = self.confidence_interval(confidence_level)
        out = _jsonable_dict(_interval_fields(self.estimate, self.standard_error, ci))
        if self.df is not None:
            out["df"] = jsonable(self.df)
        return out


@dataclass(frozen=True)
class ClassifierMetrics:
    """Precision and recall of a binary classifier C against the (unobserved) gold label Y.

    ``precision = P(Y=1 | C=1)`` and ``P(Y=1 | C=0)`` are each estimated by
    the chosen method on the items the classifier flags and does not flag;
    ``flag_rate = P(C=1)`` from the counts;
    ``recall = flag_rate * precision / prevalence`` with
    ``prevalence = flag_rate * precision + (1 - flag_rate) * P(Y=1 | C=0)``.
    Standard errors by the delta method; the two strata's history terms are
    correlated through the shared calibration and that covariance is used.
    """

    method: str
    precision: MetricEstimate
    miss_rate: MetricEstimate  # P(Y=1 | C=0)
    flag_rate: MetricEstimate
    prevalence: MetricEstimate
    recall: MetricEstimate
    flagged: EstimateResult
    unflagged: EstimateResult

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        return {
            "method": self.method,
            **{
                k: getattr(self, k).to_dict(confidence_level)
                for k in ("precision", "recall", "prevalence", "flag_rate", "miss_rate")
            },
        }


def classifier_metrics(
    current: AnnotationSet,
    calibration: Calibration,
    flags: str | Mapping[Any, Any] | Any,
    *,
    method: str = "hero1",
    **kwargs: Any,
) -> ClassifierMetrics:
    """Precision and recall of a classifier's flags against the latent gold label.

    Parameters
    ----------
    flags : str, mapping or pandas Series
        The classifier's 0/1 decision per current item: the name of a
        covariate column of ``current``, or a mapping / Series from item id
        to 0/1. Every current item needs a flag.
    method : str
        The estimator used in each stratum (default ``"hero1"``). With gold
        on some current items (a uniform random sample, or drawn by a
        recorded design), ``"hero1_ppi"``, ``"prior_ppi"``, ``"mv_ppi"`` or
        ``"gold_only"`` estimate each stratum's rate from the stratum's own
        gold items (within a stratum, a uniform sample of the round is a
        uniform sample of the stratum); each stratum needs at least 2 gold
        items. Precision's interval is then the stratum estimate's own
        (t at k - 1 df, with the small-sample rule), recall's and
        prevalence's are t intervals at the Welch–Satterthwaite df of the
        two strata's gold samples.
    """
    ids = [str(x) for x in current.item_ids]
    if isinstance(flags, str):
        if flags not in current.covariate_names:
            raise HeroEvalError(
                f"flags {flags!r} is not a covariate column of the current round "
                f"(columns: {list(current.covariate_names)})"
            )
        assert current.covariates is not None
        c = current.covariates[:, current.covariate_names.index(flags)]
    else:
        lookup = {str(k): v for k, v in dict(flags).items()}
        missing = [i for i in ids if i not in lookup]
        if missing:
            raise HeroEvalError(f"{len(missing)} current item(s) have no classifier flag, e.g. {missing[:5]}")
        c = np.array([lookup[i] for i in ids], dtype=float)
    if not np.isin(c, (0.0, 1.0)).all():
        bad = float(c[~np.isin(c, (0.0, 1.0))][0])
        raise HeroEvalError(f"classifier flags must be 0 or 1, got {bad:g}")
    on = np.flatnonzero(c == 1)
    off = np.flatnonzero(c == 0)
    if on.size == 0 or off.size == 0:
        raise HeroEvalError("the classifier flags all or none of the current items: precision and recall need both")
    flagged = current.take_items(on, name=f"{current.name}[flagged]")
    unflagged = current.take_items(off, name=f"{current.name}[unflagged]")
    with_gold = method in ALL_GOLD_METHODS
    if with_gold and not current.has_gold:
        raise HeroEvalError(f"method {method!r} uses current gold, but the current round {current.name!r} has no "
                            "gold items (read_annotations(current, gold=...); CLI --current-gold)")
    strata: list[EstimateResult | EstimateCollection] = [
        _stratum_with_gold(x, calibration, method, which, **kwargs) if with_gold
        else estimate_methods(x, calibration, method=method, **kwargs)
        for x, which in ((flagged, "flagged"), (unflagged, "unflagged"))]
    r1, r0 = strata
    assert isinstance(r1, EstimateResult) and isinstance(r0, EstimateResult)
    assert r1.influence is not None and r0.influence is not None
    n = c.size
    pi = on.size / n
    m1, m0 = r1.estimate, r0.estimate
    v1, v0 = r1.standard_error ** 2, r0.standard_error ** 2
    c10 = r1.influence.history_covariance(r0.influence)
    vpi = pi * (1 - pi) / n
    prev = pi * m1 + (1 - pi) * m0
    g_prev = np.array([pi, 1 - pi, m1 - m0])
    cov = np.array([[v1, c10, 0.0], [c10, v0, 0.0], [0.0, 0.0, vpi]])
    se_prev = math.sqrt(float(g_prev @ cov @ g_prev))
    if prev > 0:
        rec = pi * m1 / prev
        g_rec = np.array([pi * (1 - pi) * m0, -pi * (1 - pi) * m1, m1 * m0]) / prev**2
        se_rec = math.sqrt(float(g_rec @ cov @ g_rec))
    else:
        rec, se_rec = math.nan, math.nan
        g_rec = np.full(3, math.nan)
    df_prev = df_rec = None
    if with_gold:  # t at Welch–Satterthwaite's df over the two strata's gold samples
        df_prev, df_rec = (_welch_df(g[:2], (r1, r0)) for g in (g_prev, g_rec))
    return ClassifierMetrics(
        method=method,
        precision=MetricEstimate("precision", m1, r1.standard_error, result=r1 if with_gold else None),
        miss_rate=MetricEstimate("P(Y=1 | C=0)", m0, r0.standard_error, result=r0 if with_gold else None),
        flag_rate=MetricEstimate("P(C=1)", pi, math.sqrt(vpi)),
        prevalence=MetricEstimate("prevalence", prev, se_prev, df_prev),
        recall=MetricEstimate("recall", rec, se_rec, df_rec),
        flagged=r1,
        unflagged=r0,
    )



def _stratum_with_gold(stratum: AnnotationSet, calibration: Calibration, method: str, which: str,
                       **kwargs: Any) -> EstimateResult:
    """One stratum's rate by an estimate with current gold (its gold items are a random sample of the stratum)."""
    extra = set(kwargs) - {"exclude_new_labelers"}
    if extra:
        raise HeroEvalError(f"{method} takes no option(s) {sorted(extra)} (only exclude_new_labelers)")
    k = int(np.count_nonzero(stratum.gold >= 0))
    if k < 2:
        raise HeroEvalError(
            f"the {which} items hold {k} of the round's gold items: precision and recall with current gold "
            f"({method}) estimate the rate among flagged and among unflagged items separately, each from its own "
            "gold items, and need at least 2 in each (label more items, or choose them with hero select "
            "within each group)")
    res, _ = gold_estimates(stratum, calibration, [method], exclude_new_labelers=bool(kwargs.get(
        "exclude_new_labelers", False)))
    return res[method]


def _gold_df(r: EstimateResult) -> float:
    """An estimate's own t degrees of freedom: ``k - 1``, plus a history prior's worth (0: none)."""
    k = int(r.details.get("n_gold", 0))
    return float(r.details.get("df", k - 1)) if k > 1 else 0.0


def _welch_df(g: npt.NDArray[np.float64], parts: tuple[EstimateResult, EstimateResult]) -> float:
    """Welch–Satterthwaite df of ``sum_s g_s * rate_s`` over independent strata with current gold."""
    terms, den = 0.0, 0.0
    for gs, r in zip(g, parts, strict=True):
        assert r.influence is not None
        v = float(gs) ** 2 * r.influence.variance_current()
        d = _gold_df(r)
        terms += v
        den += v**2 / d if d > 0 else math.inf
    if not (math.isfinite(terms) and math.isfinite(den)) or den <= 0:
        return 1.0
    return max(terms**2 / den, 1.0)
