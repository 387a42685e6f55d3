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
from heroeval.estimators.inversion import InversionTest, check_alternative

__all__ = ["BiasAwareTest", "PredictiveTest", "bias_aware_cv"]


def bias_aware_cv(t: float, confidence_level: float = 0.95, df: float = math.inf) -> float:
    """The ``confidence_level`` quantile of ``|N(t, 1)|``: the critical value for a bias at most ``t`` SEs.

    With ``df`` finite, of ``|T + t|`` for ``T ~ t_df`` instead (Student's t for the normal:
    :class:`PredictiveTest`).

    >>> round(bias_aware_cv(0.0), 4)     # the usual two-sided 95 % value
    1.96
    >>> round(bias_aware_cv(3.0), 3)     # about 3 + z_0.95 = 4.645
    4.645
    >>> round(bias_aware_cv(0.0, df=3.0), 4)     # t_3's two-sided 95 % value
    3.1824
    """
    if not (math.isfinite(t) and t >= 0):
        raise HeroEvalError(f"bias bound over standard error must be a finite number >= 0, got {t!r}")
    if not 0 < confidence_level < 1:
        raise HeroEvalError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    if not df > 0:
        raise HeroEvalError(f"degrees of freedom must be > 0, got {df!r}")
    if math.isinf(df):
        cdf, ppf = ndtr, ndtri
    else:
        def cdf(x: float) -> float:
            return float(student_t.cdf(x, df))

        def ppf(q: float) -> float:
            return float(student_t.ppf(q, df))
    z2 = float(ppf(0.5 + confidence_level / 2))
    if t == 0:
        return z2
    # P(|N(t, 1)| <= c) = Phi(c - t) - Phi(-c - t) rises in c; the root lies in [t + z_level, t + z2]:
    # Phi(c - t) alone reaches the level at the left end, and at the right end the sum is at least the level
    # (the same for any symmetric law in place of the normal)
    def f(c: float) -> float:
        return float(cdf(c - t) - cdf(-c - t)) - confidence_level

    lo, hi = max(0.0, t + float(ppf(confidence_level))), t + z2
    if f(lo) >= 0:  # far from 0 the left end is the root to rounding
        return lo
    if f(hi) <= 0:
        return hi
    return float(brentq(f, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps))


@dataclass
class BiasAwareTest(InversionTest):
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
class PredictiveTest(InversionTest):
    """A bias-aware interval for a round that may differ from the history as past rounds did.

    The estimate's error is its sampling error (standard error ``se``), a
    bias of at most ``bias_bound``, and a round-to-round transport error with
    variance ``tau2`` estimated from ``k`` past rounds (the past-round check,
    :func:`heroeval.checks.model_checks.transport_excess`). With the total
    standard error ``s = sqrt(se^2 + tau2)``, the interval is the bias-aware
    one (:class:`BiasAwareTest`) with Student's t in place of the normal:
    ``estimate ± s * cv_t(bias_bound / s)``, ``cv_t`` the ``level`` quantile
    of ``|T + bias_bound / s|`` for ``T ~ t_df`` (:func:`bias_aware_cv`);
    one-sided, ``s t_df(level) + bias_bound``. ``df = s^4 k / tau2^2`` is the
    Welch–Satterthwaite value for a variance whose ``tau2`` part is taken to
    rest on ``k`` squares and whose ``se^2`` part is taken as known (it
    leaves out the noise of the rounds' own standard errors in ``tau2``'s
    estimate). It is a random-effects prediction interval in the spirit of
    Higgins, Thompson & Spiegelhalter (2009), who estimate the common error
    and use ``k - 2`` degrees of freedom; here the common error is bounded
    by ``bias_bound`` instead. With few past rounds ``t_df`` is much wider
    than ``z`` (k = 3: 3.18 against 1.96 when ``tau2`` dominates); with
    ``tau2 = 0`` it is :class:`BiasAwareTest`.
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

    def stat(self, mu0: float) -> float:  # pragma: no cover - the interval is closed-form
        s = self.total_se
        return (self.center - mu0) / s if s > 0 else math.copysign(math.inf, self.center - mu0)

    def interval(self, confidence_level: float, alternative: str = "two-sided") -> tuple[float, float]:
        check_alternative(alternative)
        if not (math.isfinite(self.center) and math.isfinite(self.se) and math.isfinite(self.bias_bound)
                and math.isfinite(self.tau2)):
            return math.nan, math.nan
        s = self.total_se
        if s <= 0:
            return BiasAwareTest(self.center, 0.0, self.bias_bound).interval(confidence_level, alternative)
        if alternative == "two-sided":
            h = s * bias_aware_cv(self.bias_bound / s, confidence_level, self.df)
            return max(0.0, self.center - h), min(1.0, self.center + h)
        q = float(norm.ppf(confidence_level)) if math.isinf(self.df) else float(student_t.ppf(confidence_level,
                                                                                                  self.df))
        h = s * q + self.bias_bound
        if alternative == "less":
            return 0.0, min(1.0, self.center + h)
        return max(0.0, self.center - h), 1.0
