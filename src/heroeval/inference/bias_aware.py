"""Bias-aware confidence intervals (Armstrong & Kolesár 2020) for an estimate whose bias is bounded, not zero.

An estimator ``theta_hat ~ N(theta + b, se^2)`` with an unknown bias
``|b| <= B`` is covered with probability at least ``1 - alpha`` by

    theta_hat +- se * cv_alpha(B / se),

where ``cv_alpha(t)`` is the ``1 - alpha`` quantile of ``|N(t, 1)|`` (the
folded normal, :data:`scipy.stats.foldnorm`). At ``B = 0`` it is the usual
``z_{1 - alpha/2}``; for large ``B / se`` it approaches ``B / se +
z_{1 - alpha}``, so the interval widens by the bias bound, not by twice it.
One-sided bounds add ``B`` to the usual one-sided bound. The promise is
conditional on the bound: coverage holds whenever the true bias is at most
``B``.

:func:`heroeval.choice.recommend` uses this when the model checks find the
chosen candidate's model wrong: ``B`` is then the candidate's rate-matched
mock-round bias plus a multiple of that bias's standard error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri
from scipy.stats import norm
from scipy.stats import t as student_t

from heroeval.errors import HeroEvalError
from heroeval.estimators._inversion import _Test, check_alternative

__all__ = ["BiasAwareTest", "PredictiveTest", "bias_aware_cv"]


def bias_aware_cv(t: float, confidence_level: float = 0.95) -> float:
    """The ``confidence_level`` quantile of ``|N(t, 1)|``: the critical value for a bias at most ``t`` SEs.

    >>> round(bias_aware_cv(0.0), 4)     # the usual two-sided 95 % value
    1.96
    >>> round(bias_aware_cv(3.0), 3)     # about 3 + z_0.95 = 4.645
    4.645
    """
    if not (math.isfinite(t) and t >= 0):
        raise HeroEvalError(f"bias bound over standard error must be a finite number >= 0, got {t!r}")
    if not 0 < confidence_level < 1:
        raise HeroEvalError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    z2 = float(ndtri(0.5 + confidence_level / 2))
    if t == 0:
        return z2
    # P(|N(t, 1)| <= c) = Phi(c - t) - Phi(-c - t) rises in c; the root lies in [t + z_level, t + z2]:
    # Phi(c - t) alone reaches the level at the left end, and at the right end the sum is at least the level
    def f(c: float) -> float:
        return float(ndtr(c - t) - ndtr(-c - t)) - confidence_level

    lo, hi = max(0.0, t + float(ndtri(confidence_level))), t + z2
    if f(lo) >= 0:  # far from 0 the left end is the root to rounding
        return lo
    if f(hi) <= 0:
        return hi
    return float(brentq(f, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps))


@dataclass
class BiasAwareTest(_Test):
    """The bias-aware interval of an estimate ``center`` with standard error ``se`` and bias bound ``bias_bound``.

    ``preferred``: ``EstimateResult.confidence_interval(method="auto")``
    resolves to this interval. Clipped to [0, 1].
    """

    center: float
    se: float
    bias_bound: float
    label: str = "bias-aware"
    preferred: bool = True

    def stat(self, mu0: float) -> float:  # pragma: no cover - the interval is closed-form
        return (self.center - mu0) / self.se if self.se > 0 else math.copysign(math.inf, self.center - mu0)

    def half_width(self, confidence_level: float) -> float:
        if self.se > 0:
            return self.se * bias_aware_cv(self.bias_bound / self.se, confidence_level)
        return self.bias_bound

    def interval(self, confidence_level: float, alternative: str = "two-sided") -> tuple[float, float]:
        check_alternative(alternative)
        if not (math.isfinite(self.center) and math.isfinite(self.se) and math.isfinite(self.bias_bound)):
            return math.nan, math.nan
        if alternative == "two-sided":
            h = self.half_width(confidence_level)
            return max(0.0, self.center - h), min(1.0, self.center + h)
        h = self.se * float(norm.ppf(confidence_level)) + self.bias_bound
        if alternative == "less":
            return 0.0, min(1.0, self.center + h)
        return max(0.0, self.center - h), 1.0


@dataclass
class PredictiveTest(_Test):
    """A bias-aware interval for a round that may differ from the history as past rounds did.

    The estimate's error is its sampling error (standard error ``se``), a
    bias of at most ``bias_bound``, and a round-to-round transport error with
    variance ``tau2`` estimated from ``k`` past rounds (the past-round check,
    :func:`heroeval.checks.model_checks.transport_excess`). The interval is the
    bias-aware one at the total standard error ``s = sqrt(se^2 + tau2)``
    (:class:`BiasAwareTest`), its critical value scaled by ``t_df / z`` (a
    random-effects prediction interval, Higgins, Thompson & Spiegelhalter
    2009), with the Welch–Satterthwaite degrees of freedom
    ``df = s^4 / (tau2^2 / k)`` of a variance whose ``tau2`` part is estimated
    from ``k`` squares and whose ``se^2`` part is taken as known. With few
    past rounds ``t_df`` is much wider than ``z`` (k = 3: 3.18 against 1.96
    when ``tau2`` dominates); with ``tau2 = 0`` it is :class:`BiasAwareTest`.
    """

    center: float
    se: float
    bias_bound: float
    tau2: float
    k: int
    label: str = "bias-aware, with past rounds' transport error"
    preferred: bool = True

    @property
    def total_se(self) -> float:
        return math.sqrt(self.se * self.se + max(self.tau2, 0.0))

    @property
    def df(self) -> float:
        return math.inf if self.tau2 <= 0 else self.total_se**4 * self.k / self.tau2**2

    def _quantile_ratio(self, q: float) -> float:
        return 1.0 if math.isinf(self.df) else float(student_t.ppf(q, self.df) / norm.ppf(q))

    def stat(self, mu0: float) -> float:  # pragma: no cover - the interval is closed-form
        s = self.total_se
        return (self.center - mu0) / s if s > 0 else math.copysign(math.inf, self.center - mu0)

    def interval(self, confidence_level: float, alternative: str = "two-sided") -> tuple[float, float]:
        check_alternative(alternative)
        if not (math.isfinite(self.center) and math.isfinite(self.se) and math.isfinite(self.bias_bound)
                and math.isfinite(self.tau2)):
            return math.nan, math.nan
        base = BiasAwareTest(self.center, self.total_se, self.bias_bound)
        if alternative == "two-sided":
            h = base.half_width(confidence_level) * self._quantile_ratio(0.5 + confidence_level / 2)
            return max(0.0, self.center - h), min(1.0, self.center + h)
        h = self.total_se * float(norm.ppf(confidence_level)) * self._quantile_ratio(confidence_level) \
            + self.bias_bound
        if alternative == "less":
            return 0.0, min(1.0, self.center + h)
        return max(0.0, self.center - h), 1.0
