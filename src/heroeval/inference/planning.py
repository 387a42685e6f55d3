"""Planning a round: how many current items (and labels per item) HERO-1 needs.

HERO-1's variance at ``n`` current items is (``docs/assumptions.md``)

    Var(mu_hat) = 1 / (n I(mu)) + c(mu)' V c(mu),

* ``I(mu) = E[psi_i(mu)^2]`` is the Fisher information per item of the
  two-coin likelihood with the calibration's (alpha, beta) (at the true
  parameters, ``E[psi^2] = -E[d psi / d mu]``), the expectation taken over
  the item's gold label ``Y ~ Bernoulli(mu)``, the labelers that label it
  (``labels_per_item`` distinct labelers drawn from a pool, uniformly or with
  given shares, or every labeler of the pool) and their labels;
* ``c(mu) = E[d psi / d theta] / I(mu)`` is the gradient of the estimate in
  the calibration's parameters and ``V`` their covariance
  (``Calibration.parameter_covariance``): the history's part, which more
  current items cannot shrink.

The expectations are computed exactly by enumerating every labeler set and
label pattern when that is small (uniform draws, at most
``ENUMERATE_MAX`` patterns), else by Monte Carlo over ``n_mc`` simulated
items (seeded). A Wald half-width ``z sqrt(Var)`` then gives the items
needed for a target half-width, and for the difference of two rounds that
share the calibration, ``Var = (1/I_A + 1/I_B)/n + (c_A - c_B)' V (c_A - c_B)``
gives the items per round for a two-sided test with the requested power.
With covariates, ``score_r2`` (HERO-2's ``details["score_r2"]`` from an
earlier round) scales the current part by ``1 - score_r2``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypedDict, Unpack

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import norm

from heroeval.core.options import options_of
from heroeval.errors import HeroEvalError
from heroeval.estimators.score_equation import psi
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a import scoring
from heroeval.stage_a.calibration import Calibration

__all__ = [
    "DEPENDENCE_WARN", "PLAN_DEFAULTS", "DrawOptions", "Plan", "PlanOptions", "PlanRow", "bound_items", "hero1_variance", "plan",
    "simulate_round",
]

FloatArray = npt.NDArray[np.float64]

DEPENDENCE_WARN = 0.01
"""A plan warns that its model-based figures are optimistic when the checks' dependence test is below this."""

ENUMERATE_MAX = 1 << 17
"""Exact enumeration when (labeler sets) x (label patterns) is at most this."""


@dataclass(frozen=True)
class VarianceParts:
    """HERO-1's variance per item and its history part at one design point."""

    information: float  # I(mu) = E psi^2 per item
    history_variance: float  # c' V c (NaN without a parameter covariance)
    gradient: FloatArray  # c over the calibration's parameters
    exact: bool  # enumerated (True) or Monte Carlo (False)


def _pool(cal: Calibration, pool: Sequence[str] | Mapping[str, float] | None) -> tuple[npt.NDArray[np.int64], FloatArray | None]:
    index = cal.index_of()
    if pool is None:
        return np.arange(cal.n_labelers, dtype=np.int64), None
    names = list(pool.keys()) if isinstance(pool, Mapping) else [str(x) for x in pool]
    bad = [x for x in names if x not in index]
    if bad:
        raise HeroEvalError(f"pool names labelers the calibration does not know: {bad[:5]}")
    if len(set(names)) != len(names) or not names:
        raise HeroEvalError("pool must list distinct calibrated labelers (at least one)")
    idx = np.array([index[x] for x in names], dtype=np.int64)
    if not isinstance(pool, Mapping):
        return idx, None
    w = np.array([float(pool[x]) for x in names])
    if not (np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0):
        raise HeroEvalError(f"pool shares must be non-negative numbers, not all 0, got {list(w)}")
    return idx, w / w.sum()


def _draw_sets(gen: np.random.Generator, m: int, pool: npt.NDArray[np.int64], shares: FloatArray | None,
               k: int) -> npt.NDArray[np.int64]:
    """m x k labeler indices, distinct within a row (Gumbel top-k when weighted)."""
    keys = gen.random((m, pool.size))
    if shares is not None:
        with np.errstate(divide="ignore"):
            keys = -(np.log(shares)[None, :] - np.log(-np.log(keys)))
    return pool[np.argsort(keys, axis=1)[:, :k]]


def _parts_from_patterns(cal: Calibration, mu: float, sets: npt.NDArray[np.int64], z: npt.NDArray[np.int8],
                         w: FloatArray, exact: bool) -> VarianceParts:
    """Information and history gradient from label patterns (rows) with probability weights ``w``."""
    a = np.clip(np.asarray(cal.alpha), 1e-9, 1 - 1e-9)
    b = np.clip(np.asarray(cal.beta), 1e-9, 1 - 1e-9)
    aa, bb = a[sets], b[sets]
    llr = np.where(z == 1, np.log(aa) - np.log1p(-bb), np.log1p(-aa) - np.log(bb))
    L = llr.sum(axis=1)
    ps = psi(mu, L)
    info = float(np.sum(w * ps**2))
    k = scoring.kappa(mu, L)
    ua = np.where(z == 1, 1 / aa, -1 / (1 - aa))  # d lambda(1) / d alpha
    ub = np.where(z == 1, -1 / (1 - bb), 1 / bb)  # d lambda(0) / d beta
    J = cal.n_labelers
    Ga = np.bincount(sets.ravel(), weights=((w * k)[:, None] * ua).ravel(), minlength=J)
    Gb = -np.bincount(sets.ravel(), weights=((w * k)[:, None] * ub).ravel(), minlength=J)
    c = np.zeros(cal.n_parameters)
    if info > 0:
        c[: 2 * J] = np.concatenate([Ga, Gb]) / info
    V = cal.covariance
    vh = float(V.quad(c)) if V is not None else math.nan
    return VarianceParts(info, vh, c, exact)


def hero1_variance(
    calibration: Calibration,
    mu: float,
    *,
    labels_per_item: int | None = None,
    pool: Sequence[str] | Mapping[str, float] | None = None,
    n_mc: int = 200_000,
    rng: np.random.Generator | int | None = 0,
) -> VarianceParts:
    """Per-item information ``I(mu)`` and history variance ``c' V c`` of HERO-1 for a design.

    Parameters
    ----------
    calibration : Calibration
    mu : float
        The guessed gold rate of the round, in (0, 1).
    labels_per_item : int, optional
        Distinct labelers per item, drawn from ``pool``; None: every labeler of the pool.
    pool : sequence of labeler ids, or mapping id -> share, optional
        The labelers who will label (default: every calibrated labeler). With
        shares, each item's labelers are drawn without replacement with these
        relative weights.
    n_mc, rng
        Monte Carlo items and seed when exact enumeration is too large.

    Examples
    --------
    One labeler: HERO-1 is Rogan–Gladen, whose variance per item is
    ``p (1 - p) / (alpha + beta - 1)^2`` with ``p = mu alpha + (1 - mu)(1 - beta)``.

    >>> import heroeval as he
    >>> hist = he.AnnotationSet.from_arrays([1, 2, 3, 4, 5], ["a"] * 5, [1, 1, 0, 0, 0],
    ...                                     gold=([1, 2, 3, 4, 5], [1, 0, 0, 0, 0]))
    >>> cal = he.calibrate(hist)   # alpha = 1, beta = 3/4 (clipped at 1 - 1e-9)
    >>> v = hero1_variance(cal, 0.3)
    >>> p = 0.3 * 1 + 0.7 * 0.25
    >>> round(1 / v.information, 6) == round(p * (1 - p) / 0.75**2, 6), v.exact
    (True, True)
    """
    cal = calibration
    if not isinstance(cal, Calibration):
        raise HeroEvalError(f"calibration must be a Calibration, got {type(cal).__name__}")
    if not (isinstance(mu, (int, float)) and 0 < mu < 1):
        raise HeroEvalError(f"mu must be in (0, 1), got {mu!r}")
    idx, shares = _pool(cal, pool)
    k = idx.size if labels_per_item is None else labels_per_item
    if not (isinstance(k, (int, np.integer)) and 1 <= k <= idx.size):
        raise HeroEvalError(f"labels_per_item must be an integer in [1, {idx.size}] (the pool size), got {labels_per_item!r}")
    if not (isinstance(n_mc, int) and n_mc >= 1000):
        raise HeroEvalError(f"n_mc must be an integer >= 1000, got {n_mc!r}")
    k = int(k)
    a = np.asarray(cal.alpha)
    b = np.asarray(cal.beta)
    n_sets = math.comb(idx.size, k)
    if (shares is None or k == idx.size) and n_sets * 2**k <= ENUMERATE_MAX:
        sets, z = _all_patterns(idx, k)
        aa, bb = np.clip(a[sets], 1e-12, 1), np.clip(b[sets], 1e-12, 1)
        p1 = np.prod(np.where(z == 1, aa, 1 - aa), axis=1)
        p0 = np.prod(np.where(z == 1, 1 - bb, bb), axis=1)
        w = (mu * p1 + (1 - mu) * p0) / n_sets
        return _parts_from_patterns(cal, mu, sets, z, w, True)
    gen = np.random.default_rng(rng)
    sets = _draw_sets(gen, n_mc, idx, shares, k)
    y = gen.random(n_mc) < mu
    pz = np.where(y[:, None], a[sets], 1 - b[sets])
    z = (gen.random(sets.shape) < pz).astype(np.int8)
    return _parts_from_patterns(cal, mu, sets, z, np.full(n_mc, 1.0 / n_mc), False)


@dataclass(frozen=True)
class PlanRow:
    """One design point of a :class:`Plan`."""

    labels_per_item: int
    information: float
    history_variance: float
    n_items: float  # items needed (per round for a difference); inf when the history alone exceeds the target
    half_width: float  # Wald half-width at n_items (or at the given n)
    exact: bool
    median_bound: float | None = None  # goal "bound": the median one-sided upper bound at n_items

    def to_dict(self) -> dict[str, Any]:
        def f(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        out: dict[str, Any] = {"labels_per_item": self.labels_per_item, "information_per_item": f(self.information),
                               "history_variance": f(self.history_variance), "n_items": f(self.n_items),
                               "half_width": f(self.half_width), "exact": self.exact}
        if self.median_bound is not None:
            out["median_bound"] = f(self.median_bound)
        return out


@dataclass(frozen=True)
class Plan:
    """Items needed for a target, one row per labels-per-item value."""

    goal: str  # "half_width", "difference" or "given_n"
    mu: float
    target: float
    confidence_level: float
    power: float | None
    score_r2: float
    rows: tuple[PlanRow, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"goal": self.goal, "mu": self.mu, "target": self.target, "confidence_level": self.confidence_level,
                "power": self.power, "score_r2": self.score_r2, "rows": [r.to_dict() for r in self.rows],
                "notes": list(self.notes)}

    def to_frame(self) -> pd.DataFrame:
        """One row per labels-per-item value (index ``labels_per_item``): the per-item information, the history's
        variance, the items needed (inf when history-limited), the half-width and whether it was enumerated."""
        return pd.DataFrame([r.to_dict() for r in self.rows]).set_index("labels_per_item")

    def summary(self) -> str:
        if self.goal == "bound":
            head = (f"items for the {self.confidence_level:.0%} upper bound to fall below {self.target:g} "
                    f"with probability {self.power} (score-test inversion)")
            lines = [f"HERO-1 plan at a true rate of {self.mu:g}: {head}",
                     f"{'labels/item':>11}  {'history var':>12}  {'items':>10}  {'median bound':>12}"]
            for r in self.rows:
                n = "history-limited" if math.isinf(r.n_items) else f"{math.ceil(r.n_items)}"
                mb = r.median_bound if r.median_bound is not None else math.nan
                lines.append(f"{r.labels_per_item:>11}  {r.history_variance:>12.3g}  {n:>10}  {mb:>12.4g}")
            lines.extend(self.notes)
            return "\n".join(lines)
        if self.goal == "half_width":
            head = f"items for a {self.confidence_level:.0%} CI half-width of {self.target:g}"
        elif self.goal == "difference":
            head = (f"items per round to detect a difference of {self.target:g} with power {self.power} "
                    f"(two-sided, level {1 - self.confidence_level:g})")
        else:
            head = f"{self.confidence_level:.0%} CI half-width at {self.target:g} items"
        lines = [f"HERO-1 plan at mu = {self.mu:g}: {head}",
                 f"{'labels/item':>11}  {'info/item':>10}  {'history var':>12}  {'items':>10}  {'half-width':>10}"]
        for r in self.rows:
            n = "history-limited" if math.isinf(r.n_items) else f"{math.ceil(r.n_items)}"
            lines.append(f"{r.labels_per_item:>11}  {r.information:>10.4f}  {r.history_variance:>12.3g}  {n:>10}  "
                         f"{r.half_width:>10.4f}")
        lines.extend(self.notes)
        return "\n".join(lines)


class DrawOptions(TypedDict, total=False):
    """The planning functions' shared keyword options: the interval's ``confidence_level`` and how the
    simulated items are labelled (``pool``, ``n_mc``, ``rng``: see :func:`hero1_variance`)."""

    confidence_level: float
    pool: Sequence[str] | Mapping[str, float] | None
    n_mc: int
    rng: np.random.Generator | int | None


class PlanOptions(DrawOptions, total=False):
    """:func:`plan`'s keyword options (documented there); defaults in :data:`PLAN_DEFAULTS`."""

    power: float
    labels_per_item: int | Sequence[int] | None
    score_r2: float


PLAN_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "confidence_level": 0.95, "pool": None, "n_mc": 200_000, "rng": 0, "power": 0.8, "labels_per_item": None,
    "score_r2": 0.0,
})
""":class:`PlanOptions`' defaults."""


def plan(
    calibration: Calibration,
    *,
    mu: float,
    half_width: float | None = None,
    difference: float | None = None,
    n_items: int | None = None,
    bound: float | None = None,
    **options: Unpack[PlanOptions],
) -> Plan:
    """How many current items HERO-1 needs, for one or several labels-per-item values.

    Give exactly one goal: ``half_width`` (items for a Wald interval of that
    half-width at ``confidence_level``), ``difference`` (items per round to
    detect ``mu_B - mu_A = difference`` with ``power`` by a two-sided test at
    level ``1 - confidence_level``, both rounds sharing the calibration), or
    ``n_items`` (the half-width those items give), or ``bound`` (items for
    the one-sided upper bound at ``confidence_level`` to fall below ``bound``
    with probability ``power`` when the true rate is ``mu``, which may be 0:
    :func:`bound_items`).

    Parameters
    ----------
    calibration : Calibration
    mu : float
        Guessed rate (of round A for a difference).
    power : float, default 0.8
        The power of the test (``difference``) or of the bound (``bound``).
    confidence_level : float, default 0.95
    labels_per_item : int or sequence of int, optional
        Labelers per item (one row each); default: every labeler of the pool.
    pool, n_mc, rng
        See :func:`hero1_variance` (defaults: every labeler, 200 000 simulated items, seed 0).
    score_r2 : float, default 0
        With covariates (HERO-2): share of the score variance they explain
        (HERO-2's ``details["score_r2"]`` on an earlier round); scales the
        current part of the variance by ``1 - score_r2``.

    Examples
    --------
    >>> import numpy as np, heroeval as he
    >>> from heroeval.simulate import shift_dgp
    >>> cal = he.calibrate(shift_dgp(0, alpha=np.full(5, 0.8), beta=np.full(5, 0.8), N=2000).history)
    >>> p = plan(cal, mu=0.3, half_width=0.05, labels_per_item=[1, 3])
    >>> p.rows[0].n_items > p.rows[1].n_items
    True
    """
    o = options_of("plan", options, PlanOptions, PLAN_DEFAULTS)
    power, confidence_level, labels_per_item = o["power"], o["confidence_level"], o["labels_per_item"]
    pool, score_r2, n_mc, rng = o["pool"], o["score_r2"], o["n_mc"], o["rng"]
    goals = [g for g, v in (("half_width", half_width), ("difference", difference), ("given_n", n_items),
                            ("bound", bound)) if v is not None]
    if len(goals) != 1:
        raise HeroEvalError("give exactly one of half_width, difference, n_items or bound")
    goal = goals[0]
    if goal == "bound":
        assert bound is not None
        return _plan_bound(calibration, mu, float(bound), power, confidence_level, labels_per_item, pool, n_mc, rng)
    if not 0 < confidence_level < 1:
        raise HeroEvalError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    if not (isinstance(score_r2, (int, float)) and 0 <= score_r2 < 1):
        raise HeroEvalError(f"score_r2 must be in [0, 1), got {score_r2!r}")
    if half_width is not None and not (isinstance(half_width, (int, float)) and 0 < half_width < 0.5):
        raise HeroEvalError(f"half_width must be in (0, 0.5), got {half_width!r}")
    if n_items is not None and not (isinstance(n_items, (int, np.integer)) and n_items >= 1):
        raise HeroEvalError(f"n_items must be a positive integer, got {n_items!r}")
    if difference is not None:
        if not (isinstance(difference, (int, float)) and difference != 0 and 0 < mu + difference < 1):
            raise HeroEvalError(f"difference must be non-zero with mu + difference in (0, 1), got {difference!r}")
        if not 0 < power < 1:
            raise HeroEvalError(f"power must be in (0, 1), got {power!r}")
    ks: list[int | None]
    if labels_per_item is None or isinstance(labels_per_item, (int, np.integer)):
        ks = [None if labels_per_item is None else int(labels_per_item)]
    else:
        ks = [int(x) for x in labels_per_item]
        if not ks:
            raise HeroEvalError("labels_per_item is an empty list")
    z = float(norm.ppf(0.5 + confidence_level / 2))
    shrink = 1.0 - float(score_r2)
    rows: list[PlanRow] = []
    notes: list[str] = []
    if calibration.covariance is None:
        notes.append("the calibration has no parameter covariance: the history's variance is left out")
    for k in ks:
        va = hero1_variance(calibration, mu, labels_per_item=k, pool=pool, n_mc=n_mc, rng=rng)
        kk = k if k is not None else (len(pool) if pool is not None else calibration.n_labelers)
        vh = 0.0 if math.isnan(va.history_variance) else va.history_variance
        cur = shrink / va.information
        if goal == "half_width":
            assert half_width is not None
            room = (half_width / z) ** 2 - vh
            n = cur / room if room > 0 else math.inf
            hw = half_width if room > 0 else z * math.sqrt(vh)
            rows.append(PlanRow(kk, va.information, vh, n, hw, va.exact))
        elif goal == "given_n":
            assert n_items is not None
            rows.append(PlanRow(kk, va.information, vh, float(n_items), z * math.sqrt(cur / n_items + vh), va.exact))
        else:
            assert difference is not None
            vb = hero1_variance(calibration, mu + difference, labels_per_item=k, pool=pool, n_mc=n_mc, rng=rng)
            dc = va.gradient - vb.gradient
            V = calibration.covariance
            vhd = float(V.quad(dc)) if V is not None else 0.0
            cur2 = shrink * (1 / va.information + 1 / vb.information)
            need = (abs(difference) / (z + float(norm.ppf(power)))) ** 2
            room = need - vhd
            n = cur2 / room if room > 0 else math.inf
            rows.append(PlanRow(kk, va.information, vhd, n, z * math.sqrt(cur2 / n + vhd) if room > 0 else math.inf,
                                va.exact))
    if any(math.isinf(r.n_items) for r in rows):
        notes.append("history-limited: the calibration's own uncertainty exceeds the target; no number of current "
                     "items reaches it (more gold or history items would)")
    if score_r2 > 0:
        notes.append(f"current part scaled by 1 - score_r2 = {shrink:g} (HERO-2 with covariates; not checked by simulation)")
    dep = calibration.checks.dependence if calibration.checks is not None else None
    if dep is not None and math.isfinite(dep.p_value) and dep.p_value < DEPENDENCE_WARN:
        notes.append(f"warning: the model checks reject independence given the gold (p = {dep.p_value:.2g}, mean "
                     f"conditional correlation {dep.mean_correlation:.3f}): these figures assume independent labelers "
                     "and are optimistic (the information and the history's variance both); the recommended estimate "
                     "is then bias-aware and wider, as hero estimate reports it. Plan expert labels instead: hero plan "
                     "--expert-labels measures the spread on the history's held-out gold")
    target = float(half_width if goal == "half_width" else difference if goal == "difference" else n_items)  # type: ignore[arg-type]
    return Plan(goal, float(mu), target, float(confidence_level), power if goal == "difference" else None,
                float(score_r2), tuple(rows), tuple(notes))


def _all_patterns(idx: npt.NDArray[np.int64], k: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int8]]:
    """Every set of ``k`` labelers of the pool ``idx`` with every label pattern on it: (sets, labels), one row each."""
    combos = np.array(list(itertools.combinations(idx.tolist(), k)), dtype=np.int64)
    pats = np.array(list(itertools.product([0, 1], repeat=k)), dtype=np.int8)
    return np.repeat(combos, len(pats), axis=0), np.tile(pats, (len(combos), 1))


def _class_patterns(
    cal: Calibration, k: int | None, pool: Sequence[str] | Mapping[str, float] | None, n_mc: int,
    rng: np.random.Generator | int | None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int8], FloatArray, FloatArray, bool]:
    """Label patterns of one item with their probabilities given Y = 1 (``w1``) and Y = 0 (``w0``)."""
    idx, shares = _pool(cal, pool)
    kk = idx.size if k is None else int(k)
    if not 1 <= kk <= idx.size:
        raise HeroEvalError(f"labels_per_item must be an integer in [1, {idx.size}] (the pool size), got {k!r}")
    a = np.clip(np.asarray(cal.alpha), 1e-12, 1)
    b = np.clip(np.asarray(cal.beta), 1e-12, 1)
    n_sets = math.comb(idx.size, kk)
    if (shares is None or kk == idx.size) and n_sets * 2**kk <= ENUMERATE_MAX:
        sets, z = _all_patterns(idx, kk)
        w1 = np.prod(np.where(z == 1, a[sets], 1 - a[sets]), axis=1) / n_sets
        w0 = np.prod(np.where(z == 1, 1 - b[sets], b[sets]), axis=1) / n_sets
        return sets, z, w1, w0, True
    gen = np.random.default_rng(rng)
    m = n_mc // 2
    sets = _draw_sets(gen, 2 * m, idx, shares, kk)
    y = np.r_[np.ones(m, dtype=bool), np.zeros(m, dtype=bool)]
    z = (gen.random(sets.shape) < np.where(y[:, None], a[sets], 1 - b[sets])).astype(np.int8)
    return sets, z, np.where(y, 1.0 / m, 0.0), np.where(y, 0.0, 1.0 / m), False


def _score_moments(cal: Calibration, x: float, y: float, sets: npt.NDArray[np.int64], z: npt.NDArray[np.int8],
                   w1: FloatArray, w0: FloatArray) -> tuple[float, float, FloatArray]:
    """Per item: mean and second moment of psi(x) when the rate is y, and the mean gradient of psi(x) in theta."""
    a = np.clip(np.asarray(cal.alpha), 1e-9, 1 - 1e-9)
    b = np.clip(np.asarray(cal.beta), 1e-9, 1 - 1e-9)
    aa, bb = a[sets], b[sets]
    L = np.where(z == 1, np.log(aa) - np.log1p(-bb), np.log1p(-aa) - np.log(bb)).sum(axis=1)
    w = y * w1 + (1 - y) * w0
    ps = psi(x, L)
    k = scoring.kappa(x, L)
    ua = np.where(z == 1, 1 / aa, -1 / (1 - aa))
    ub = np.where(z == 1, -1 / (1 - bb), 1 / bb)
    J = cal.n_labelers
    Ga = np.bincount(sets.ravel(), weights=((w * k)[:, None] * ua).ravel(), minlength=J)
    Gb = -np.bincount(sets.ravel(), weights=((w * k)[:, None] * ub).ravel(), minlength=J)
    g = np.zeros(cal.n_parameters)
    g[: 2 * J] = np.concatenate([Ga, Gb])
    return float(w @ ps), float(w @ ps**2), g


def bound_items(
    calibration: Calibration,
    mu: float,
    bound: float,
    *,
    power: float = 0.8,
    confidence_level: float = 0.95,
    labels_per_item: int | None = None,
    pool: Sequence[str] | Mapping[str, float] | None = None,
    n_mc: int = 200_000,
    rng: np.random.Generator | int | None = 0,
) -> tuple[float, float, float, bool]:
    """Items for HERO-1's one-sided upper bound to fall below ``bound`` with probability ``power`` at rate ``mu``.

    The bound is below ``x = bound`` exactly when the score test of mu0 = x
    rejects: ``T(x) = S(x) / sqrt(V_x) < -z`` (z the one-sided quantile of
    ``confidence_level``), ``S(x) = sum_i psi_i(x)``, ``V_x = n E_x[psi^2] +
    n^2 g_x' V g_x`` its null variance (as in the interval). When the rate
    is ``mu``, ``S(x)`` has mean ``n m`` with ``m = E_mu[psi(x)] < 0`` and
    variance ``n Var_mu[psi(x)] + n^2 g_mu' V g_mu``; the normal
    approximation gives the smallest n with
    ``-m >= z sqrt(E_x[psi^2] / n + g_x' V g_x) + z_power sqrt(Var_mu[psi(x)] / n + g_mu' V g_mu)``.
    Returns (items, history variance of the mean score at x, median bound at those items, exact);
    items is inf when the history alone keeps the bound above ``bound``.
    """
    cal = calibration
    if not (0 <= mu < bound < 1):
        raise HeroEvalError(f"need 0 <= mu < bound < 1, got mu={mu!r}, bound={bound!r}")
    if not 0 < power < 1:
        raise HeroEvalError(f"power must be in (0, 1), got {power!r}")
    sets, z, w1, w0, exact = _class_patterns(cal, labels_per_item, pool, n_mc, rng)
    V = cal.covariance

    def hq(g: FloatArray) -> float:
        return 0.0 if V is None else float(V.quad(g))

    z1 = float(norm.ppf(confidence_level))
    zp = float(norm.ppf(power))

    def need(n: float, x: float, zq: float) -> float:
        _, a0, gx = _score_moments(cal, x, x, sets, z, w1, w0)
        m, s2, gy = _score_moments(cal, x, mu, sets, z, w1, w0)
        h0, h1 = hq(gx), hq(gy)
        return -m - z1 * math.sqrt(a0 / n + h0) - zq * math.sqrt(max(s2 - m * m, 0.0) / n + h1)

    _, _, gx = _score_moments(cal, bound, bound, sets, z, w1, w0)
    hx = hq(gx)
    if need(1e15, bound, zp) <= 0:
        return math.inf, hx, math.nan, exact
    lo, hi = 1.0, 2.0
    while need(hi, bound, zp) <= 0:
        hi *= 2
    lo = hi / 2
    while hi - lo > max(1.0, 1e-4 * lo):
        mid = (lo + hi) / 2
        if need(mid, bound, zp) > 0:
            hi = mid
        else:
            lo = mid
    n = math.ceil(hi)
    # median bound at n: the x where the mean score sits at -z sd (zq = 0)
    def f(x: float) -> float:
        return need(n, x, 0.0)

    a_, b_ = mu + 1e-12, bound
    if f(a_) > 0:
        med = a_
    else:
        for _ in range(60):
            c_ = (a_ + b_) / 2
            if f(c_) > 0:
                b_ = c_
            else:
                a_ = c_
        med = b_
    return float(n), hx, med, exact


def _plan_bound(cal: Calibration, mu: float, bound: float, power: float, level: float,
                labels_per_item: int | Sequence[int] | None, pool: Sequence[str] | Mapping[str, float] | None,
                n_mc: int, rng: np.random.Generator | int | None) -> Plan:
    if not 0 < level < 1:
        raise HeroEvalError(f"confidence_level must be in (0, 1), got {level!r}")
    ks: list[int | None] = ([None if labels_per_item is None else int(labels_per_item)]
                            if labels_per_item is None or isinstance(labels_per_item, (int, np.integer))
                            else [int(x) for x in labels_per_item])
    rows = []
    for k in ks:
        n, hv, med, exact = bound_items(cal, mu, bound, power=power, confidence_level=level, labels_per_item=k,
                                        pool=pool, n_mc=n_mc, rng=rng)
        kk = k if k is not None else (len(pool) if pool is not None else cal.n_labelers)
        rows.append(PlanRow(kk, math.nan, hv, n, math.nan, exact, med))
    notes = ["normal approximation to the score test; check small designs with hero simulate or "
             "benchmarks/rare_rates.py"]
    if cal.covariance is None:
        notes.append("the calibration has no parameter covariance: the history's variance is left out")
    if any(math.isinf(r.n_items) for r in rows):
        notes.append("history-limited: the calibration's uncertainty alone keeps the bound above the target")
    return Plan("bound", float(mu), float(bound), float(level), float(power), 0.0, tuple(rows), tuple(notes))


def simulate_round(
    calibration: Calibration,
    mu: float,
    n: int,
    *,
    labels_per_item: int | None = None,
    pool: Sequence[str] | Mapping[str, float] | None = None,
    rng: np.random.Generator | int | None = None,
    alpha: FloatArray | None = None,
    beta: FloatArray | None = None,
    name: str = "simulated",
) -> tuple[AnnotationSet, float]:
    """A current round drawn from the two-coin model with the calibration's labelers.

    Labels come from ``alpha``/``beta`` (default: the calibration's own
    estimates). Returns the round and its realised gold rate; used to check
    :func:`plan` by simulation.
    """
    gen = np.random.default_rng(rng)
    idx, shares = _pool(calibration, pool)
    k = idx.size if labels_per_item is None else int(labels_per_item)
    a = np.asarray(calibration.alpha if alpha is None else alpha, dtype=float)
    b = np.asarray(calibration.beta if beta is None else beta, dtype=float)
    sets = _draw_sets(gen, n, idx, shares, k)
    y = gen.random(n) < mu
    pz = np.where(y[:, None], a[sets], 1 - b[sets])
    z = (gen.random(sets.shape) < pz).astype(np.int8)
    ids = np.char.add("s", np.arange(n).astype(str))
    names = np.asarray(calibration.labeler_ids, dtype=object)
    ds = AnnotationSet.from_arrays(np.repeat(ids, k), names[sets.ravel()], z.ravel(), name=name)
    return ds, float(y.mean())
