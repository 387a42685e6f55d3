"""The interval of an estimate from current gold: Student's t at the design's degrees of freedom, and the
small-sample rule (the gold's own Clopper–Pearson interval, Korn–Graubard under a design; Wilson's for the gold
alone). Used by the binary estimates of :mod:`heroeval.estimators.ppi` and the K-class ones."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import norm
from scipy.stats import t as t_dist

from heroeval.estimators.gold_sample import GoldSample
from heroeval.estimators.inversion import InversionTest, check_alternative

__all__ = ["ONE_CLASS_HULL", "SMALL_GOLD", "DesignInterval", "clopper_pearson", "wilson"]

SMALL_GOLD = 10
"""Below this many gold items the interval is widened to contain the gold's own Clopper–Pearson interval."""
ONE_CLASS_HULL = "no-prior"
"""Where a gold sample of one class (all 0 or all 1) widens the interval to the gold's Clopper–Pearson interval:
``"always"``, or ``"no-prior"`` (only where the history prior on the variance is not used: with it, the judges'
residual spread on the history's gold sizes the interval, so that such a round still uses the judges). Chosen by
leave-one-set-out, 12 of 12 held-out sets (benchmarks/current_gold_loso.py, docs/current_gold.md; "always" before)."""

# ---------------------------------------------------------------------------
# Intervals: t at the design's degrees of freedom, and the small-sample rule
# ---------------------------------------------------------------------------


def _kish(gs: GoldSample) -> tuple[float, float]:
    """Hajek mean of the gold and Kish's effective sample size (k for a uniform sample)."""
    w = gs.weights
    p = float(np.sum(w * gs.y) / np.sum(w))
    n_eff = float(np.sum(w) ** 2 / np.sum(w**2))
    return p, n_eff


def clopper_pearson(x: float, n: float, level: float, alternative: str = "two-sided") -> tuple[float, float]:
    """Clopper–Pearson interval for x successes of n (non-integer x, n allowed: Korn–Graubard)."""
    a = 1 - level if alternative != "two-sided" else (1 - level) / 2
    lo = 0.0 if x <= 0 else float(beta_dist.ppf(a, x, n - x + 1))
    hi = 1.0 if x >= n else float(beta_dist.ppf(1 - a, x + 1, n - x))
    if alternative == "less":
        lo = 0.0
    elif alternative == "greater":
        hi = 1.0
    return lo, hi


def wilson(p: float, n: float, level: float, alternative: str = "two-sided") -> tuple[float, float]:
    """Wilson's score interval for a proportion ``p`` of ``n`` (``n`` may be an effective size; inf gives a point)."""
    if not math.isfinite(n):
        return p, p
    z = float(norm.ppf(0.5 + level / 2)) if alternative == "two-sided" else float(norm.ppf(level))
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0)) / den
    lo, hi = max(0.0, c - h), min(1.0, c + h)
    if alternative == "less":
        lo = 0.0
    elif alternative == "greater":
        hi = 1.0
    return lo, hi


class DesignInterval(InversionTest):
    """The interval of an estimate from current gold: t with the estimate's degrees of freedom (``df``; default
    k - 1: k - 1 + m with a history prior worth m items, Satterthwaite's over the strata under a stratified design,
    :attr:`heroeval.estimators.ppi.Rectified.df`), widened by the small-sample rule.

    ``kind="t"``: ``estimate +- t_df SE`` (clipped to [0, 1]), widened to
    contain the gold's Clopper–Pearson (Korn–Graubard) interval when
    ``k < SMALL_GOLD`` or the gold items are all of one class.
    ``kind="wilson"``: Wilson's interval of the gold mean at the effective
    size ``n_eff * (n - 1) / (n - k)`` (the gold-only estimate).
    """

    preferred = True  # method="auto" resolves to this interval

    def __init__(self, estimate: float, se: float, gs: GoldSample, kind: str = "t",
                 small_gold: int = SMALL_GOLD, df: float | None = None, prior_used: bool = False) -> None:
        self.center = estimate
        self.df = float(max(gs.k - 1, 1)) if df is None else float(df)
        self.se = se
        self.gs = gs
        self.kind = kind
        self.small_gold = small_gold
        p, n_eff = _kish(gs)
        self.gold_mean = p
        self.n_eff = n_eff
        self.one_class = bool(np.all(gs.y == gs.y[0]))
        one_class_hull = self.one_class and not (prior_used and ONE_CLASS_HULL == "no-prior")
        self.fallback = kind == "t" and (gs.k < small_gold or one_class_hull or not math.isfinite(se))
        self.label = ("wilson" if kind == "wilson" else "t+clopper-pearson" if self.fallback else "t")

    def stat(self, mu0: float) -> float:  # pragma: no cover - the interval is closed-form
        return (self.center - mu0) / self.se if self.se > 0 else math.copysign(math.inf, self.center - mu0)

    def interval(self, confidence_level: float, alternative: str = "two-sided") -> tuple[float, float]:
        check_alternative(alternative)
        gs = self.gs
        if self.kind == "wilson":
            fpc = (gs.n - 1) / (gs.n - gs.k) if gs.k < gs.n else math.inf
            return wilson(self.gold_mean, self.n_eff * fpc, confidence_level, alternative)
        lo, hi = math.nan, math.nan
        if math.isfinite(self.se) and gs.k >= 2:
            q = 0.5 + confidence_level / 2 if alternative == "two-sided" else confidence_level
            h = float(t_dist.ppf(q, self.df)) * self.se
            lo, hi = max(0.0, self.center - h), min(1.0, self.center + h)
            if alternative == "less":
                lo = 0.0
            elif alternative == "greater":
                hi = 1.0
        if self.fallback:
            cl, ch = clopper_pearson(self.gold_mean * self.n_eff, self.n_eff, confidence_level, alternative)
            lo = cl if not math.isfinite(lo) else min(lo, cl)
            hi = ch if not math.isfinite(hi) else max(hi, ch)
        return lo, hi


