"""The interval of a difference of two rounds whose error is more than sampling noise (the recommended difference).

:class:`DifferenceInterval` is what :class:`heroeval.inference.comparison.Comparison` inverts when the model
checks found a bias of the difference to allow for (:mod:`heroeval.choice.difference`): the bias-aware interval of
Armstrong & Kolesár (2020), :func:`heroeval.inference.bias_aware.bias_aware_cv`, on ``[-1, 1]`` instead of
``[0, 1]``, with a round-to-round variance and a union of parts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import norm
from scipy.stats import t as t_dist

from heroeval.errors import HeroEvalError
from heroeval.estimators.results import check_level
from heroeval.inference.bias_aware import bias_aware_cv

__all__ = ["DifferenceInterval"]


@dataclass(frozen=True)
class DifferenceInterval:
    """The interval of a difference ``A - B`` whose error is more than sampling noise: a union of parts.

    Each part is ``(center, se, bias_bound, tau2, df)``: an estimate of ``A - B`` with standard error ``se``, a
    bias of at most ``bias_bound`` (the model checks' paired mock-round bias of the difference plus its noise)
    and, when past rounds were missed by more than their noise, a round-to-round variance ``tau2`` of the
    difference whose estimate rests on ``df`` degrees of freedom. With ``s = sqrt(se^2 + tau2)`` a part's
    two-sided interval is ``center +- s * cv(bias_bound / s)`` (:func:`~heroeval.inference.bias_aware.bias_aware_cv`,
    Student's t at ``df`` in place of the normal when ``tau2 > 0``), its one-sided bounds ``s * q + bias_bound``
    from the center; it covers whenever the difference's bias is at most ``bias_bound`` (Armstrong & Kolesár
    2020). Several parts (a round the checks cannot judge: every candidate's difference) give the span of their
    intervals. Clipped to ``[-bound, bound]`` (a rate's difference: 1; a K-class mean score's: the range of the
    class values).
    """

    parts: tuple[tuple[float, float, float, float, float], ...]
    label: str = "bias-aware"
    bound: float = 1.0

    def __post_init__(self) -> None:
        if not self.parts:
            raise HeroEvalError("a difference interval needs at least one part")
        if not (math.isfinite(self.bound) and self.bound > 0):
            raise HeroEvalError(f"a difference interval's bound must be a number > 0, got {self.bound!r}")

    def _one(self, part: tuple[float, float, float, float, float], level: float, alternative: str
             ) -> tuple[float, float]:
        c, se, b, tau2, df = part
        r = self.bound
        if not all(math.isfinite(x) for x in (c, se, b, tau2)) or se < 0 or b < 0:
            return math.nan, math.nan
        s = math.sqrt(se * se + max(tau2, 0.0))
        dof = df if tau2 > 0 and df > 0 else math.inf
        if alternative == "two-sided":
            h = s * bias_aware_cv(b / s, level, dof) if s > 0 else b
            return max(-r, c - h), min(r, c + h)
        q = float(norm.ppf(level) if math.isinf(dof) else t_dist.ppf(level, dof))
        h = s * q + b
        return (-r, min(r, c + h)) if alternative == "less" else (max(-r, c - h), r)

    def interval(self, confidence_level: float = 0.95, alternative: str = "two-sided") -> tuple[float, float]:
        """The span of the parts' intervals at ``confidence_level`` (``"less"``: an upper bound only)."""
        level = check_level(confidence_level)
        ints = [self._one(p, level, alternative) for p in self.parts]
        if any(not (math.isfinite(lo) and math.isfinite(hi)) for lo, hi in ints):
            return math.nan, math.nan
        return min(i[0] for i in ints), max(i[1] for i in ints)

    def p_value(self, d0: float = 0.0, alternative: str = "two-sided") -> float:
        """The smallest ``alpha`` whose ``1 - alpha`` interval (for ``alternative``) leaves ``d0`` out: the
        p-value of "A - B is ``d0``" by the same rule (bisection on the level to 1e-10; NaN without an interval)."""

        def inside(level: float) -> bool:
            lo, hi = self.interval(level, alternative)
            return bool(lo <= d0 <= hi)

        if not math.isfinite(self.interval(0.5, alternative)[0]):
            return math.nan
        lo_level, hi_level = 1e-10, 1 - 1e-10
        if inside(lo_level):
            return 1.0
        if not inside(hi_level):
            return 0.0
        for _ in range(40):  # the intervals nest: inside(level) grows with the level
            mid = (lo_level + hi_level) / 2
            lo_level, hi_level = (lo_level, mid) if inside(mid) else (mid, hi_level)
        return 1.0 - hi_level
