"""The verdict a team ships on: a superiority, non-inferiority or equivalence test of round B against round A.

A :class:`~heroeval.inference.comparison.Comparison` holds ``A - B`` with its standard error (current and
history parts). The verdict tests a statement about **B's rate relative to A's**, with a margin ``delta >= 0``:

======================  =========================================  =======================================
``alternative``         what the verdict can conclude               with ``margin = 0``
======================  =========================================  =======================================
``"less"``              ``rate_B < rate_A + delta``: B is not       B's rate is lower (superiority, when
                        above A by more than delta (non-inferiority  lower is better: a defect rate)
                        when lower is better)
``"greater"``           ``rate_B > rate_A - delta``: B is not       B's rate is higher (superiority, when
                        below A by more than delta (non-inferiority  higher is better: a win rate)
                        when higher is better)
``"two-sided"``         ``|rate_B - rate_A| < delta``: equivalence  the rates differ (the comparison's own
                        (two one-sided tests, TOST)                  two-sided test)
======================  =========================================  =======================================

Each one-sided test is ``z = (distance of A - B from the null boundary) / SE`` against the normal (or Student's t
at the comparison's degrees of freedom, for the estimates with current gold); TOST's p-value is the larger of its
two. The test is as honest as the comparison's standard error: it carries the shared history's uncertainty, and a
bias of the method only through the recommended difference (:func:`heroeval.compare` with ``method="auto"``),
whose :class:`~heroeval.inference.comparison.DifferenceInterval` the verdict then inverts, so a bias the model
checks allow for cannot make it decide. When the test does not decide, :attr:`Verdict.items_factor` says how
many times the current items per round would decide it at the same estimate with power 0.8, counting that the
history's part of the variance (and a bias bound, or a round-to-round variance) does not shrink with more
current items (``inf``: history-limited, or the estimate points the other way).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from scipy.stats import norm
from scipy.stats import t as t_dist

from heroeval.core.multiple import holm
from heroeval.errors import HeroEvalError
from heroeval.estimators.inversion import check_alternative
from heroeval.estimators.results import check_level, jsonable
from heroeval.inference.comparison import Comparison, DifferenceRecommendation
from heroeval.inference.difference_interval import DifferenceInterval
from heroeval.inference.gold_plan import expert_labels_to_decide
from heroeval.stage_a.calibration import Calibration

__all__ = ["Verdict", "interval_p_value", "verdict", "verdicts_holm"]

POWER = 0.8
"""The power at which :attr:`Verdict.items_factor` sizes the rounds that would decide an undecided verdict."""


@dataclass(frozen=True)
class Verdict:
    """A test of round B's rate against round A's (module docstring): what was asked, the p-value, the decision
    at ``1 - confidence_level``, and the sentence that says it."""

    method: str
    difference: float  # A - B
    standard_error: float
    margin: float
    alternative: str
    p_value: float
    confidence_level: float
    decided: bool
    items_factor: float
    text: str
    expert_labels: float = math.nan
    """Undecided, with the calibration given: the expert labels in each round (uniform samples, the
    prediction-powered difference) that would likely decide it (power 0.8 at the same estimate;
    :func:`heroeval.inference.gold_plan.expert_labels_to_decide`); ``inf`` when labelling every item would not;
    NaN when decided or not sized."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = jsonable({k: getattr(self, k) for k in self.__dataclass_fields__})
        return out

    def __str__(self) -> str:
        return self.text


def _sf(z: float, df: float | None) -> float:
    return float(norm.sf(z) if df is None else t_dist.sf(z, df))


def _q(p: float, df: float | None) -> float:
    return float(norm.ppf(p) if df is None else t_dist.ppf(p, df))


def verdict(comparison: Comparison | DifferenceRecommendation, margin: float = 0.0, alternative: str = "less",
            confidence_level: float = 0.95, calibration: Calibration | None = None) -> Verdict:
    """The verdict on ``comparison`` (``A - B``): B's rate against A's with ``margin`` (module docstring).

    With the ``calibration`` the rounds were estimated with, an undecided verdict also says how many expert
    labels in each round would likely decide it (:attr:`Verdict.expert_labels`).

    Examples
    --------
    >>> import heroeval as he
    >>> from heroeval.simulate import shift_dgp
    >>> import numpy as np
    >>> a = shift_dgp(1, alpha=np.full(6, 0.8), beta=np.full(6, 0.8), current_rate=0.30, N=3000, n=600)
    >>> b = shift_dgp(2, alpha=np.full(6, 0.8), beta=np.full(6, 0.8), current_rate=0.20, N=3000, n=600)
    >>> cal = he.calibrate(a.history)
    >>> v = verdict(he.compare(a.current, b.current, cal, method="hero1"), margin=0.0, alternative="less")
    >>> v.decided, v.text.startswith("B's rate is lower than A's")
    (True, True)
    """
    if isinstance(comparison, DifferenceRecommendation):  # the recommended difference: its comparison and rule
        comparison = comparison.comparison
    if not isinstance(comparison, Comparison):
        raise HeroEvalError("verdict needs a Comparison (one method's A - B) or the recommended difference, got "
                            f"{type(comparison).__name__}")
    if isinstance(margin, bool) or not (isinstance(margin, (int, float)) and math.isfinite(margin) and
                                        0 <= margin < 1):
        raise HeroEvalError(f"margin must be a number in [0, 1), got {margin!r}")
    check_alternative(alternative)
    level = check_level(confidence_level)
    d, se, df = comparison.estimate, comparison.standard_error, comparison.df
    m = float(margin)
    # distance of A - B from each null boundary, positive in the direction the alternative can conclude
    dist_less = d + m  # H1: rate_B - rate_A < m  <=>  A - B > -m
    dist_greater = m - d  # H1: rate_B - rate_A > -m  <=>  A - B < m
    rule = comparison.rule
    if rule is not None:  # the recommended difference's bias-aware rule: the test its interval inverts
        p = interval_p_value(rule, m, alternative)
    elif not (math.isfinite(d) and math.isfinite(se) and se > 0):
        p = math.nan
    elif alternative == "less":
        p = _sf(dist_less / se, df)
    elif alternative == "greater":
        p = _sf(dist_greater / se, df)
    elif m == 0:
        p = comparison.p_value
    else:  # TOST: both one-sided tests must reject
        p = max(_sf(dist_less / se, df), _sf(dist_greater / se, df))
    return _decide(comparison, m, alternative, p, level, _dist(d, m, alternative), calibration=calibration)


def interval_p_value(rule: DifferenceInterval, margin: float, alternative: str) -> float:
    """The verdict's p-value by inverting a difference's interval ``rule`` (A - B): ``"less"`` tests ``A - B >
    -margin`` with its lower bounds, ``"greater"`` ``A - B < margin`` with its upper bounds, ``"two-sided"`` no
    difference (margin 0) or both one-sided tests (TOST)."""
    if alternative == "less":
        return rule.p_value(-margin, "greater")
    if alternative == "greater":
        return rule.p_value(margin, "less")
    if margin == 0:
        return rule.p_value(0.0)
    return max(rule.p_value(-margin, "greater"), rule.p_value(margin, "less"))


def _dist(d: float, m: float, alternative: str) -> float:
    """The distance of ``A - B`` from the null boundary, positive in the direction the test can conclude."""
    dist_less, dist_greater = d + m, m - d
    return (dist_less if alternative == "less" else dist_greater if alternative == "greater"
            else (min(dist_less, dist_greater) if m > 0 else abs(d)))


def _decide(comparison: Comparison, m: float, alternative: str, p: float, level: float, dist: float,
            family: int = 1, names: tuple[str, str] = ("A", "B"), calibration: Calibration | None = None) -> Verdict:
    """The verdict at p-value ``p`` (Holm-adjusted over ``family`` comparisons when ``family > 1``)."""
    alpha = 1 - level
    decided = bool(p == p and p < alpha)
    two_sided = alternative == "two-sided" and m == 0
    # undecided: sized at the Bonferroni level alpha / family, which Holm's first step uses (conservative)
    factor = math.nan if decided else _items_factor(comparison, dist, alpha / family, two_sided)
    experts = math.nan
    if not decided and calibration is not None:
        a, b = comparison.a, comparison.b
        experts = expert_labels_to_decide(calibration, mu_a=a.estimate, mu_b=b.estimate, n_a=a.n_items,
                                          n_b=b.n_items, distance=dist, alpha=alpha / family, two_sided=two_sided,
                                          power=POWER)
    return Verdict(comparison.method, comparison.estimate, comparison.standard_error, m, alternative, p, level,
                   decided, factor, _text(alternative, m, p, decided, factor, alpha, family, names, experts),
                   experts)


def verdicts_holm(comparisons: Sequence[Comparison | DifferenceRecommendation], margin: float = 0.0,
                  alternative: str = "less", confidence_level: float = 0.95,
                  names: Sequence[tuple[str, str]] | None = None, adjust: bool = True,
                  calibration: Calibration | None = None) -> list[Verdict]:
    """The verdicts on several comparisons (each ``A - B``) with family-wise error control.

    ``calibration``: as :func:`verdict` takes it (the expert labels that would decide an undecided verdict).

    Each comparison's p-value is :func:`verdict`'s; the p-values are adjusted by Holm's step-down method
    (:func:`heroeval.core.multiple.holm`), and a verdict decides when its adjusted p-value is below
    ``1 - confidence_level``: the chance that *any* of the verdicts concludes a false claim is at most that,
    whatever the comparisons' dependence (they may share a baseline round and the history). ``names`` are the
    rounds of each comparison as ``(A, B)``, for the sentences; ``adjust=False`` leaves the p-values as they are.

    >>> import heroeval as he
    >>> from heroeval.simulate import shift_dgp
    >>> import numpy as np
    >>> w = [shift_dgp(s, alpha=np.full(6, 0.8), beta=np.full(6, 0.8), current_rate=r, N=3000, n=600)
    ...      for s, r in ((1, 0.30), (2, 0.20), (3, 0.30))]
    >>> cal = he.calibrate(w[0].history)
    >>> cs = [he.compare(w[0].current, x.current, cal, method="hero1") for x in w[1:]]
    >>> [v.decided for v in verdicts_holm(cs, alternative="less")]
    [True, False]
    """
    raw = [verdict(c, margin, alternative, confidence_level) for c in comparisons]
    if names is not None and len(names) != len(raw):
        raise HeroEvalError(f"names: {len(names)} pairs for {len(raw)} comparisons")
    p_adj = holm([v.p_value for v in raw]) if adjust else [v.p_value for v in raw]
    family = len(raw) if adjust else 1
    out: list[Verdict] = []
    for k, (c, v) in enumerate(zip(comparisons, raw, strict=True)):
        comp = c.comparison if isinstance(c, DifferenceRecommendation) else c
        nm = ("A", "B") if names is None else (str(names[k][0]), str(names[k][1]))
        out.append(_decide(comp, v.margin, alternative, float(p_adj[k]), v.confidence_level,
                           _dist(comp.estimate, v.margin, alternative), family, nm, calibration))
    return out


def _items_factor(c: Comparison, dist: float, alpha: float, two_sided: bool) -> float:
    """How many times the current items per round give power ``POWER`` at the same estimate, or inf."""
    fixed = c.variance_history
    if c.rule is not None:  # a bias bound and a round-to-round variance do not shrink with more items
        _c, _se, bound, tau2, _df = c.rule.parts[0]
        dist -= bound
        fixed += max(tau2, 0.0)
    if not (math.isfinite(dist) and dist > 0):
        return math.inf
    z = _q(1 - alpha / 2 if two_sided else 1 - alpha, c.df) + _q(POWER, c.df)
    target = (dist / z) ** 2  # the variance that would decide it
    room = target - fixed
    if not (room > 0 and c.variance_current > 0):
        return math.inf
    return max(c.variance_current / room, 0.0)


def _claim(alternative: str, m: float, names: tuple[str, str] = ("A", "B")) -> str:
    a, b = names
    if alternative == "less":
        return f"{b}'s rate is lower than {a}'s" if m == 0 else f"{b}'s rate is not above {a}'s by more than {m:g}"
    if alternative == "greater":
        return f"{b}'s rate is higher than {a}'s" if m == 0 else f"{b}'s rate is not below {a}'s by more than {m:g}"
    return f"{b}'s rate differs from {a}'s" if m == 0 else f"{b}'s rate is within {m:g} of {a}'s"


def _text(alternative: str, m: float, p: float, decided: bool, factor: float, alpha: float, family: int = 1,
          names: tuple[str, str] = ("A", "B"), experts: float = math.nan) -> str:
    claim = _claim(alternative, m, names)
    ptxt = ("p not available" if p != p else f"p = {p:.2g}" if family == 1 else
            f"Holm-adjusted p = {p:.2g} over {family} comparisons")
    test = ("two-sided" if alternative == "two-sided" and m == 0 else "two one-sided tests" if alternative ==
            "two-sided" else "one-sided")
    if decided:
        return f"{claim} ({ptxt}, {test} at level {alpha:g})"
    more = ("; more current items alone would not decide it (the history's uncertainty, or an estimate that "
            "points the other way)" if math.isinf(factor) else
            f"; about {factor:.1f}x the current items per round would decide it with power {POWER:g} if the "
            "difference stays at its estimate (hero plan --difference sizes it)" if factor == factor else "")
    if experts == experts:
        more += (f"; about {math.ceil(experts)} expert labels in each round (a uniform sample, hero select) would "
                 "likely decide it (hero plan --expert-labels)" if math.isfinite(experts) else
                 "; expert labels on every item of the smaller round would not decide it at this estimate")
    return f"not enough evidence that {claim} ({ptxt}, {test} at level {alpha:g}){more}"
