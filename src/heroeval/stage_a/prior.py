"""Stage A's prior on the labelers' sensitivities and specificities: pseudo-counts, fixed or empirical Bayes.

Stage A is MAP-EM when a prior is set: the objective is the log-likelihood plus

    a1 log alpha_j + a0 log(1 - alpha_j) + b1 log beta_j + b0 log(1 - beta_j)

for every labeler j (a ``Beta(1 + a1, 1 + a0)`` density on each sensitivity and
``Beta(1 + b1, 1 + b0)`` on each specificity), so the M-step is
``alpha_j = (sum gamma z + a1) / (sum gamma + a1 + a0)`` and likewise for beta.
The four pseudo-counts are :data:`PriorCounts`: a float ``c`` for the
symmetric ``a1 = a0 = b1 = b0 = c`` (``calibrate(pseudo_count=c)``), or an
array ``[a1, a0, b1, b0]``.

The empirical-Bayes prior (``calibrate(shrink="eb")``, issue #18 item 3)
shrinks each labeler towards the pool as far as its own gold is thin:
``Beta(k m, k (1 - m))`` fitted to the per-labeler gold counts by the
beta-binomial method of moments (:func:`beta_binomial_prior`), separately for
the sensitivities (true positives of the gold positives) and the
specificities, gives ``a1 = k_a m_a``, ``a0 = k_a (1 - m_a)``; on gold items
alone the fit is then the posterior mean ``(tp + k m) / (tp + fn + k)``, as
in ``rogan_gladen(shrink="eb")``. ``k`` is capped at ``N``, the gold
annotations of its class (:func:`eb_counts`). Without the cap, when the
moments show no spread between labelers (``k = inf``, common with a few gold
labels each), every labeler would be pinned to the pooled rate; with it a
labeler with ``n_j`` gold labels keeps the weight ``n_j / (n_j + N)`` on its
own, about ``1 / (J + 1)`` when the gold is spread evenly: near-complete
pooling, which is what the moments say. The cap is a choice, not an estimate.

The parameter covariance counts the uncertainty of the pooled rates ``m``
(:func:`heroeval.stage_a.calibration.eb_prior_covariance`: ``m``'s estimating
equation stacked with the likelihood's, so the sandwich carries the pool's
noise and the correlation it makes between labelers); ``k`` is treated as
known, which leaves out a term of first order in ``m - alpha_j`` (small
for labelers near the pool).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
PriorCounts = float | FloatArray  # a symmetric c, or [a1, a0, b1, b0]

EPS = 1e-9  # as heroeval.stage_a.two_coin.EPS: parameters are clipped to [EPS, 1 - EPS]


def counts4(c: PriorCounts) -> tuple[float, float, float, float]:
    """``(a1, a0, b1, b0)`` of a prior: a float ``c`` is ``(c, c, c, c)``."""
    if isinstance(c, np.ndarray):
        a1, a0, b1, b0 = (float(v) for v in c)
        return a1, a0, b1, b0
    f = float(c)
    return f, f, f, f


def has_prior(c: PriorCounts) -> bool:
    return any(v > 0 for v in counts4(c))


def same_prior(c1: PriorCounts, c2: PriorCounts) -> bool:
    return counts4(c1) == counts4(c2)


def log_prior(c: PriorCounts, alpha: FloatArray, beta: FloatArray) -> float:
    """The log prior (up to its constant) at ``(alpha, beta)``, clipped as the fit is."""
    if not has_prior(c):
        return 0.0
    a1, a0, b1, b0 = counts4(c)
    a = np.clip(alpha, EPS, 1 - EPS)
    b = np.clip(beta, EPS, 1 - EPS)
    return float(a1 * np.log(a).sum() + a0 * np.log1p(-a).sum() + b1 * np.log(b).sum() + b0 * np.log1p(-b).sum())


def curvature(c: PriorCounts, alpha: FloatArray, beta: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Minus the log prior's second derivatives in alpha and in beta (the prior's part of the information)."""
    a1, a0, b1, b0 = counts4(c)
    a = np.clip(alpha, EPS, 1 - EPS)
    b = np.clip(beta, EPS, 1 - EPS)
    return a1 / a**2 + a0 / (1 - a) ** 2, b1 / b**2 + b0 / (1 - b) ** 2


def prior_information(c: PriorCounts, alpha: FloatArray, beta: FloatArray, n_groups: int) -> FloatArray:
    """The log prior's curvature as a P x P diagonal (probability scale; nothing on the ``n_groups``
    prevalences)."""
    ca, cb = curvature(c, alpha, beta)
    return np.diag(np.concatenate([ca, cb, np.zeros(n_groups)]))


def beta_binomial_prior(success: FloatArray, n: FloatArray) -> tuple[float, float]:
    """``(m, k)`` of ``Beta(k m, k (1 - m))`` by the beta-binomial method of moments; ``k = inf`` at no heterogeneity.

    ``success[j]`` of ``n[j]`` trials per unit (labeler); units with no trials
    are left out. ``m`` is the pooled proportion (clipped to [1e-6, 1 - 1e-6]);
    the between-unit variance ``tau^2`` solves
    ``E[sum w (r - m)^2] = sum w (1 - w) (tau^2 (1 - 1/n_j) + m (1 - m) / n_j)``
    with ``w = n / sum n``, and ``k = m (1 - m) / tau^2 - 1``.
    """
    has = n > 0
    if not has.any():
        return 0.5, math.inf
    m = float(success[has].sum() / n[has].sum())
    m = min(max(m, 1e-6), 1 - 1e-6)
    r = success[has] / n[has]
    wts = n[has] / n[has].sum()
    s2 = float(wts @ (r - float(wts @ r)) ** 2)
    nh = n[has]
    g = wts * (1 - wts)
    denom = float(g @ (1 - 1 / nh))
    tau2 = (s2 - m * (1 - m) * float(g @ (1 / nh))) / denom if denom > 0 else 0.0
    if not tau2 > 0:
        return m, math.inf
    k = max(m * (1 - m) / min(tau2, m * (1 - m) * (1 - 1e-9)) - 1, 1e-9)
    return m, k


@dataclass(frozen=True)
class EBPrior:
    """The fitted empirical-Bayes prior: pooled rates ``m``, strengths ``k`` (capped), and the gold behind them."""

    m_a: float
    k_a: float
    m_b: float
    k_b: float
    n_a: float  # gold annotations on gold positives (the sensitivities' trials)
    n_b: float  # on gold negatives
    capped_a: bool  # the method of moments gave k above n_a (inf: no heterogeneity seen)
    capped_b: bool

    def counts(self, pseudo_count: float = 0.0) -> FloatArray:
        """``[a1, a0, b1, b0]``, with the symmetric ``pseudo_count`` added to each."""
        c = float(pseudo_count)
        return np.array([self.k_a * self.m_a + c, self.k_a * (1 - self.m_a) + c,
                         self.k_b * self.m_b + c, self.k_b * (1 - self.m_b) + c])

    @classmethod
    def from_dict(cls, d: dict[str, float | bool]) -> EBPrior:
        """The prior from :meth:`as_dict`'s keys (``Calibration.settings["prior"]``)."""
        return cls(float(d["m_sensitivity"]), float(d["k_sensitivity"]), float(d["m_specificity"]),
                   float(d["k_specificity"]), float(d["gold_trials_sensitivity"]),
                   float(d["gold_trials_specificity"]), bool(d["capped_sensitivity"]),
                   bool(d["capped_specificity"]))

    def as_dict(self) -> dict[str, float | bool]:
        return {"m_sensitivity": self.m_a, "k_sensitivity": self.k_a, "m_specificity": self.m_b,
                "k_specificity": self.k_b, "gold_trials_sensitivity": self.n_a, "gold_trials_specificity": self.n_b,
                "capped_sensitivity": self.capped_a, "capped_specificity": self.capped_b}


def _capped(success: FloatArray, n: FloatArray) -> tuple[float, float, float, bool]:
    N = float(n[n > 0].sum())
    if N <= 0:
        return 0.5, 0.0, 0.0, False
    m, k = beta_binomial_prior(success, n)
    return m, min(k, N), N, bool(k > N)


def eb_counts(tp: npt.ArrayLike, fn: npt.ArrayLike, tn: npt.ArrayLike, fp: npt.ArrayLike) -> EBPrior:
    """The empirical-Bayes prior from per-labeler gold counts (true/false positives and negatives on gold items).

    Sensitivities from ``tp`` of ``tp + fn``, specificities from ``tn`` of
    ``tn + fp``; each ``k`` is capped at its class's gold annotations, and is
    0 (no prior) where there are none.
    """
    t1, f0, t0, f1 = (np.asarray(x, dtype=np.float64) for x in (tp, fn, tn, fp))
    m_a, k_a, n_a, cap_a = _capped(t1, t1 + f0)
    m_b, k_b, n_b, cap_b = _capped(t0, t0 + f1)
    return EBPrior(m_a, k_a, m_b, k_b, n_a, n_b, cap_a, cap_b)
