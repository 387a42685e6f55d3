"""Confidence intervals by test inversion: valid at and near the boundary (rates of 0 to a few per cent).

For a rate mu0 in [0, 1], a statistic ``T(mu0)`` that is approximately N(0, 1)
when the true rate is mu0 and decreasing in mu0; the interval at level 1 - a
is ``{mu0 : -z <= T(mu0) <= z}`` (z the 1 - a/2 quantile), the upper bound
(``alternative="less"``) ``sup {mu0 : T(mu0) >= -z_1}`` and the lower bound
(``"greater"``) ``inf {mu0 : T(mu0) <= z_1}`` (z_1 the 1 - a quantile).

* :class:`ScoreTest` (HERO-1, HERO-2, gold-proportion, HERO joint): ``T(mu0)
  = (sum_i psi_i(mu0) - n * offset) / sqrt(V_cur(mu0) + V_hist(mu0))``, a
  Rao score test. Both variances are *expected* values under the null: the
  current part ``sum_i E_mu0[psi_i(mu0)^2]`` (the expectation over the label
  patterns the item's labelers can give, as the binomial score test uses
  ``p0 (1 - p0)``), the history part ``g' V g`` with ``g = sum_i
  E_mu0[d psi_i / d theta]`` and ``V`` Stage A's parameter covariance. The
  observed ``sum psi_i^2`` would be useless at the boundary: a round with no
  positive label has ``psi_i ~ -1`` for every item, whatever mu0.
* :class:`MomentTest` (Rogan–Gladen): ``T(mu0) = (mu_hat - mu0) / sd(mu0)``
  with the unclipped moment estimate and the variance at the null rate:
  per-labeler binomial variances at ``p0_j = mu0 alpha_j + (1 - mu0)(1 - beta_j)``,
  inflated by the design effect the current labels show (labelers that err
  together on an item), plus the gold-count variance at mu0.

Expectations over label patterns enumerate the 2^k patterns of an item's k
labels (items with the same labelers share them); for k > ``ENUM_MAX_LABELS``
they are Monte-Carlo averages over a fixed-seed sample of patterns.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.optimize import brentq
from scipy.stats import norm

from heroeval.errors import HeroEvalError
from heroeval.estimators.score_equation import psi
from heroeval.stage_a.covariance import ParameterCovariance, quad

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ALTERNATIVES = ("two-sided", "less", "greater")
ENUM_MAX_LABELS = 12
"""Items with at most this many labels have their label patterns enumerated (2^k); more are sampled."""
MC_PATTERNS = 1024
"""Patterns sampled per class for an item with more than ENUM_MAX_LABELS labels."""
_EPS = 1e-9
_MU_MIN = 1e-12


def check_alternative(alternative: str) -> str:
    if alternative not in ALTERNATIVES:
        raise HeroEvalError(f"alternative must be 'two-sided', 'less' or 'greater', got {alternative!r}")
    return alternative


class InversionTest:
    """A test statistic for mu = mu0, decreasing in mu0; ``center`` is a point where it is 0 (or the boundary).

    The test is what a result's interval inverts: ``result.test(mu0)`` (:meth:`p_value`) is the p-value of
    "the rate is ``mu0``", the same test, so ``mu0`` lies in the ``1 - alpha`` interval exactly when the
    p-value is at least ``alpha``.
    """

    center: float

    def stat(self, mu0: float) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def interval(self, confidence_level: float, alternative: str = "two-sided") -> tuple[float, float]:
        return invert(self.stat, self.center, confidence_level, alternative)

    def p_value(self, mu0: float, alternative: str = "two-sided") -> float:
        """The p-value of the rate being ``mu0``: the smallest ``alpha`` whose ``1 - alpha`` interval (this
        test's, for ``alternative``) leaves ``mu0`` out, found by bisection on the level to 1e-10 (0 when it is
        below that, NaN when the test has no finite interval)."""
        check_alternative(alternative)
        if isinstance(mu0, bool) or not (isinstance(mu0, (int, float)) and 0 <= mu0 <= 1):
            raise HeroEvalError(f"mu0 must be a rate in [0, 1], got {mu0!r}")

        def inside(level: float) -> bool:
            lo, hi = self.interval(level, alternative)
            return bool(lo <= mu0 <= hi)

        lo_level, hi_level = 1e-10, 1 - 1e-10
        if not math.isfinite(self.interval(0.5, alternative)[0]):
            return math.nan
        if inside(lo_level):
            return 1.0
        if not inside(hi_level):
            return 0.0
        for _ in range(40):  # inside(level) grows with the level: the intervals nest
            mid = (lo_level + hi_level) / 2
            lo_level, hi_level = (lo_level, mid) if inside(mid) else (mid, hi_level)
        return 1.0 - hi_level

    def __call__(self, mu0: float, alternative: str = "two-sided") -> float:
        """``test(mu0)``: :meth:`p_value`."""
        return self.p_value(mu0, alternative)


@dataclass
class BinomialScoreTest(InversionTest):
    """Wilson's score test of a proportion ``p_hat`` over ``n`` items: ``(p_hat - mu0) / sqrt(mu0 (1 - mu0) / n)``.

    For majority vote, whose interval is for the majority-label rate: at 0 of
    n positive votes the upper bound is ``z^2 / (n + z^2)``, not the Wald
    interval's ``[0, 0]``.
    """

    p_hat: float
    n: int
    label: str = "wilson"
    deff: float = 1.0
    """Design effect of grouped items (:mod:`heroeval.estimators.clusters`): the test counts ``n / deff`` items."""

    @property
    def center(self) -> float:  # type: ignore[override]
        return self.p_hat

    def stat(self, mu0: float) -> float:
        m = min(max(mu0, _MU_MIN), 1 - _MU_MIN)
        return (self.p_hat - m) / math.sqrt(self.deff * m * (1 - m) / max(self.n, 1))


def invert(
    stat: Callable[[float], float], center: float, confidence_level: float, alternative: str
) -> tuple[float, float]:
    """Invert a decreasing statistic ``stat(mu0)`` over mu0 in [0, 1] around ``center``.

    At a boundary estimate the data can be more extreme than the boundary
    model predicts (a round with fewer positive labels than the labelers'
    false-positive rates imply even at mu = 0: ``T(0) < 0``). The set
    ``{T >= -z}`` could then be empty; the statistic is shifted by ``T(0)``
    (by ``T(1)`` at 1), which only makes the bound larger (conservative), and
    0 is always in the set.
    """
    check_alternative(alternative)
    if not math.isfinite(center):
        return math.nan, math.nan
    c = min(max(center, 0.0), 1.0)
    f = stat
    if c <= 0.0:
        t0 = stat(_MU_MIN)
        if math.isfinite(t0) and t0 < 0:
            def f(m: float) -> float:
                return stat(m) - t0
    elif c >= 1.0:
        t1 = stat(1 - _MU_MIN)
        if math.isfinite(t1) and t1 > 0:
            def f(m: float) -> float:
                return stat(m) - t1
    if alternative == "two-sided":
        z = float(norm.ppf(0.5 + confidence_level / 2))
        lo_z, hi_z = z, z
    else:
        z1 = float(norm.ppf(confidence_level))
        lo_z, hi_z = z1, z1
    low, high = 0.0, 1.0
    if alternative in ("two-sided", "greater"):
        low = _crossing(f, lo_z, 0.0, c, upper=False)
    if alternative in ("two-sided", "less"):
        high = _crossing(f, -hi_z, c, 1.0, upper=True)
    return low, high


def _crossing(f: Callable[[float], float], level: float, a: float, b: float, upper: bool) -> float:
    """The mu0 in [a, b] where the decreasing f crosses ``level``; the end of [a, b] if it does not."""

    def g(m: float) -> float:
        v = float(f(m))
        if math.isnan(v):
            return -math.inf if upper else math.inf
        return v - level

    if upper:  # f(a) >= level expected; find where f falls below level
        ga, gb = g(max(a, _MU_MIN)), g(min(b, 1 - _MU_MIN))
        if not ga > 0:
            return a
        if gb >= 0:
            return b
        lo, hi = max(a, _MU_MIN), min(b, 1 - _MU_MIN)
    else:  # f(b) <= level expected; find where f rises above level going down to a
        ga, gb = g(max(a, _MU_MIN)), g(min(b, 1 - _MU_MIN))
        if not gb < 0:
            return b
        if ga <= 0:
            return a
        lo, hi = max(a, _MU_MIN), min(b, 1 - _MU_MIN)
    if not (math.isfinite(ga) and math.isfinite(gb)):
        # brentq needs finite ends: bisect a few times in log space first
        for _ in range(200):
            m = math.sqrt(lo * hi) if lo > 0 else hi / 2
            gm = g(m)
            if (gm > 0) == (g(lo) > 0):
                lo = m
            else:
                hi = m
            if math.isfinite(g(lo)) and math.isfinite(g(hi)):
                break
    return float(brentq(g, lo, hi, xtol=1e-12, rtol=1e-10, maxiter=200))


# ---------------------------------------------------------------------------
# Label patterns of the current round's items
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PatternTable:
    """The label patterns an item's labelers can give, with their probabilities under Y=1 and Y=0.

    One row per (labeler set, pattern): its log-likelihood ratio ``L``,
    weights ``w1 = n_s P(pattern | Y=1)`` and ``w0 = n_s P(pattern | Y=0)``
    (``n_s`` the items with that labeler set), and the sparse rows ``Ua``
    (``sum (z - alpha_j) / (alpha_j (1 - alpha_j))`` over j's labels, in the
    alpha block of 2J columns) and ``Ub`` (``sum ((1 - z) - beta_j) /
    (beta_j (1 - beta_j))``, in the beta block).
    """

    L: FloatArray
    w1: FloatArray
    w0: FloatArray
    Ua: sp.csr_matrix
    Ub: sp.csr_matrix
    n_items: int

    def expected(self, mu0: float) -> tuple[float, FloatArray]:
        """``sum_i E_mu0[psi_i^2]`` and ``sum_i E_mu0[d psi_i / d(alpha, beta)]`` (length 2J)."""
        ps = psi(mu0, self.L)
        ps = np.where(np.isfinite(ps), ps, 0.0) if mu0 <= 0 else ps
        a = self.w1 * ps
        b = self.w0 * ps
        v = float(mu0 * (a @ ps) + (1 - mu0) * (b @ ps))
        # E[d psi / d theta] = -E[psi * d log P / d theta] (differentiate sum_z P(z) psi(z) = 0)
        g = -mu0 * (self.Ua.T @ a) - (1 - mu0) * (self.Ub.T @ b)
        return v, np.asarray(g, dtype=np.float64)


def pattern_table(
    item_ptr: IntArray, labeler: IntArray, alpha: FloatArray, beta: FloatArray, seed: int = 0
) -> PatternTable:
    """Group items by their labelers (a multiset, in the calibration's index) and list each group's patterns."""
    J = alpha.size
    a = np.clip(np.asarray(alpha, dtype=float), _EPS, 1 - _EPS)
    b = np.clip(np.asarray(beta, dtype=float), _EPS, 1 - _EPS)
    lens = np.diff(item_ptr)
    sets: list[tuple[IntArray, int]] = []
    for klen in np.unique(lens).tolist():
        if klen == 0:
            continue
        sel = np.flatnonzero(lens == klen)
        m = np.sort(labeler[item_ptr[sel][:, None] + np.arange(klen)], axis=1)
        uniq, counts_u = np.unique(m, axis=0, return_counts=True)
        sets.extend((u.astype(np.int64), int(c)) for u, c in zip(uniq, counts_u, strict=True))
    gen = np.random.default_rng(seed)
    Ls: list[FloatArray] = []
    w1s: list[FloatArray] = []
    w0s: list[FloatArray] = []
    ri: list[IntArray] = []
    ca: list[IntArray] = []
    va: list[FloatArray] = []
    vb: list[FloatArray] = []
    offset = 0
    for labs, cnt in sets:
        k = labs.size
        if k <= ENUM_MAX_LABELS:
            Z = ((np.arange(2**k)[:, None] >> np.arange(k)) & 1).astype(np.float64)
            l1 = Z @ np.log(a[labs]) + (1 - Z) @ np.log1p(-a[labs])
            l0 = Z @ np.log1p(-b[labs]) + (1 - Z) @ np.log(b[labs])
            w1 = cnt * np.exp(l1)
            w0 = cnt * np.exp(l0)
        else:  # sample patterns under each class; each sample stands for cnt / MC_PATTERNS items
            Z1 = (gen.random((MC_PATTERNS, k)) < a[labs]).astype(np.float64)
            Z0 = (gen.random((MC_PATTERNS, k)) < 1 - b[labs]).astype(np.float64)
            Z = np.vstack([Z1, Z0])
            l1 = Z @ np.log(a[labs]) + (1 - Z) @ np.log1p(-a[labs])
            l0 = Z @ np.log1p(-b[labs]) + (1 - Z) @ np.log(b[labs])
            w1 = np.concatenate([np.full(MC_PATTERNS, cnt / MC_PATTERNS), np.zeros(MC_PATTERNS)])
            w0 = np.concatenate([np.zeros(MC_PATTERNS), np.full(MC_PATTERNS, cnt / MC_PATTERNS)])
        R = Z.shape[0]
        Ls.append(l1 - l0)
        w1s.append(w1)
        w0s.append(w0)
        aa = a[labs][None, :]
        bb = b[labs][None, :]
        ri.append(np.repeat(np.arange(R) + offset, k))
        ca.append(np.tile(labs, R))
        va.append(((Z - aa) / (aa * (1 - aa))).ravel())
        vb.append((((1 - Z) - bb) / (bb * (1 - bb))).ravel())
        offset += R
    rows_i = np.concatenate(ri) if ri else np.zeros(0, dtype=np.int64)
    cols = np.concatenate(ca) if ca else np.zeros(0, dtype=np.int64)
    Ua = sp.csr_matrix((np.concatenate(va) if va else np.zeros(0), (rows_i, cols)), shape=(offset, 2 * J))
    Ub = sp.csr_matrix((np.concatenate(vb) if vb else np.zeros(0), (rows_i, cols + J)), shape=(offset, 2 * J))
    return PatternTable(
        np.concatenate(Ls) if Ls else np.zeros(0), np.concatenate(w1s) if w1s else np.zeros(0),
        np.concatenate(w0s) if w0s else np.zeros(0), Ua, Ub, int(lens.size),
    )


@dataclass(frozen=True, eq=False)
class ScoreTest(InversionTest):
    """Rao score test of mu = mu0 for the HERO score equation (see the module docstring).

    ``L`` (with ``counts``) are the observed items' log-likelihood ratios,
    ``table`` their labelers' patterns. The history term is ``c' V c`` with
    ``c`` the expected score gradient placed in a vector of ``n_parameters``
    (sensitivities and specificities first) when ``space="stage_a"``, or
    ``sum c^2 v`` over the 2J gold-count variances when ``"gold_counts"``;
    none when ``V`` is None and ``space`` is None. HERO-2 adds ``offset`` (the
    control variate's ``gamma' (Xbar - m_X)``), ``gamma_x`` (its gradient in
    the covariate means, placed after the prevalences) and the current
    covariates ``Xc`` (centred) for the control variate's variance reduction.
    """

    center: float
    L: FloatArray
    counts: FloatArray
    item_ptr: IntArray
    labeler: IntArray
    alpha: FloatArray
    beta: FloatArray
    space: str | None
    V: FloatArray | ParameterCovariance | None
    n_parameters: int
    offset: float = 0.0
    gamma_x: FloatArray | None = None
    Xc: FloatArray | None = None
    cov_start: int = 0
    current_deff: float = 1.0
    """Design effect of grouped items (:mod:`heroeval.estimators.clusters`) on the current-round variance."""
    _cache: dict[str, PatternTable] = field(default_factory=dict, repr=False)

    @property
    def n(self) -> float:
        return float(self.counts.sum())

    @property
    def table(self) -> PatternTable:
        """The current items' label patterns (built on first use)."""
        if "table" not in self._cache:
            self._cache["table"] = pattern_table(self.item_ptr, self.labeler, self.alpha, self.beta)
        return self._cache["table"]

    def parts(self, mu0: float) -> tuple[float, float, float]:
        """Score, its current-round variance and its history variance at mu0."""
        ps = psi(mu0, self.L)
        with np.errstate(invalid="ignore"):
            S = float(self.counts @ ps) - self.n * self.offset
        v_cur, g = self.table.expected(mu0)
        if self.gamma_x is not None and self.Xc is not None:
            gm = self.gamma_x
            # Var(psi - gamma'X) = E psi^2 - 2 gamma' Cov(X, psi) + gamma' S_XX gamma, floored at a tenth
            sxp = self.Xc.T @ (self.counts * np.where(np.isfinite(ps), ps, 0.0))
            red = float(-2 * gm @ sxp + gm @ (self.Xc.T @ (self.Xc * self.counts[:, None])) @ gm)
            v_cur = max(v_cur + red, 0.1 * v_cur)
        v_cur *= self.current_deff
        if self.space is None:
            v_hist = 0.0
        elif self.V is None:
            v_hist = math.nan
        elif self.space == "gold_counts":
            assert not isinstance(self.V, ParameterCovariance)
            v_hist = float(g @ self.V @ g) if self.V.ndim == 2 else float(np.sum(g**2 * self.V))
        else:
            c = np.zeros(self.n_parameters)
            c[: g.size] = g
            if self.gamma_x is not None:
                c[self.cov_start :] = self.n * self.gamma_x
            v_hist = float(quad(self.V, c))
        return S, v_cur, v_hist

    def stat(self, mu0: float) -> float:
        S, vc, vh = self.parts(mu0)
        var = vc + vh
        if not var > 0:
            return math.nan
        return S / math.sqrt(var)


@dataclass(frozen=True, eq=False)
class MomentTest(InversionTest):
    """``(mu_hat - mu0) / sd(mu0)`` for the pooled Rogan–Gladen estimator (see the module docstring).

    ``coef_j = w_j / Y_j`` multiplies labeler j's positive share; ``p0_j(mu0)``
    comes from ``a, b`` (gold rates); the current variance at mu0 is
    ``deff * sum_j coef_j^2 p0_j (1 - p0_j) / n_j``; the history variance is
    ``|| -mu0 hA + (1 - mu0) hB ||^2`` (per-gold-item influences) or the
    gold-count form ``sum_j coef_j^2 (mu0^2 var a_j + (1 - mu0)^2 var b_j)``.
    """

    center: float
    raw: float
    coef: FloatArray
    a: FloatArray
    b: FloatArray
    n_j: FloatArray
    deff: float
    hAA: float
    hAB: float
    hBB: float

    def stat(self, mu0: float) -> float:
        p0 = np.clip(mu0 * self.a + (1 - mu0) * (1 - self.b), 0.0, 1.0)
        vc = self.deff * float(np.sum(self.coef**2 * p0 * (1 - p0) / self.n_j))
        vh = mu0**2 * self.hAA - 2 * mu0 * (1 - mu0) * self.hAB + (1 - mu0) ** 2 * self.hBB
        var = vc + vh
        if not var > 0:
            return math.nan
        return (self.raw - mu0) / math.sqrt(var)
