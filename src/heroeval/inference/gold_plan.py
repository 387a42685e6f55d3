"""Planning expert labels in the current round: how many gold items for a half-width h, from the history alone.

The estimate with current gold (:mod:`heroeval.estimators.ppi`) has current
variance ``(1/n^2) sum_U (1 - pi_i) / pi_i * Var(y_i - lam f_i | labels)``:
what it costs is the spread of the residual ``y - lam f`` of the predictor
``f`` (the posterior at the round's rate ``mu``). That spread is **measured**
on the history's gold, weighted by class to the round's rate ``mu``
(:func:`heroeval.stage_a.checks_record.class_weights`):

* with the model checks (``hero calibrate`` saves them), on their held-out
  gold items with **cross-fitted** log-likelihood ratios (each item's
  labelers calibrated without it): the residual spread a new round's gold
  will show, labeler dependence included;
* without them, on the calibration's own gold scores (in-sample, so
  optimistic: those items helped fit the labelers), and the notes say so.

``lam`` is the weighted least-squares slope there (clipped to [0, 1]). The
uniform design's variance is the estimator's own rule at ``k`` gold items,
``(1/k - 1/n) max((k S^2 + m S_h^2) / (k + m), floor)`` with the history
prior ``S_h^2`` worth ``m`` items (:func:`heroeval.estimators.ppi.history_prior`)
and the t quantile at ``k - 1 + m`` degrees of freedom, so
``k`` solves ``t_{k-1+m} sqrt(Var(k)) = h`` (bisection), the half-width
taken in expectation over the estimator's small-sample rule (below
SMALL_GOLD items, or on a gold sample of one class, the interval contains
the gold's Clopper–Pearson interval: weighted by the hypergeometric chance of
each count at rate ``mu``); the active design
draws ``pi_i`` (:func:`heroeval.inference.select.inclusion_probabilities`)
over the same weighted items, ``Var = (1/n) E[(1/pi - 1) (r - r_bar)^2]``.
Beside them:

* the **model** row (the labelers independent given the gold): each item's
  labels simulated from the calibration's sensitivities and specificities,
  ``Var(y - f) = f (1 - f)``; optimistic when labelers err together (LLM
  judges), which the notes say when the checks reject independence;
* **gold only** (a useless predictor, the worst case): ``S^2 = mu (1 - mu)``.

The history's term (the predictor's dependence on the calibration) is second
order here and left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Unpack

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit
from scipy.stats import chi2, hypergeom, norm
from scipy.stats import t as t_dist

from heroeval.core.options import options_of
from heroeval.errors import HeroEvalError
from heroeval.estimators.design_interval import ONE_CLASS_HULL, SMALL_GOLD, clopper_pearson
from heroeval.estimators.ppi import (
    PRIOR_CONFLICT_LEVEL,
    PSEUDO,
    PSEUDO_WITH_PRIOR,
    history_prior,
    history_scores,
)
from heroeval.inference.planning import DEPENDENCE_WARN, DrawOptions, _draw_sets, _pool
from heroeval.inference.residuals import MeasuredResiduals, measured_residuals
from heroeval.inference.select import DEFAULT_MIX, inclusion_probabilities
from heroeval.stage_a.calibration import Calibration

__all__ = [
    "DEPENDENCE_WARN",
    "EXPERT_PLAN_DEFAULTS",
    "THIN_GOLD",
    "ExpertPlan",
    "ExpertPlanOptions",
    "MeasuredResiduals",
    "expert_labels",
    "expert_labels_to_decide",
    "measured_residuals",
]

THIN_GOLD = 30
"""Below this many gold items behind the measured spread the plan says the HERO-PPI rows are uncertain."""



FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ExpertPlan:
    """Expert labels needed in a round of ``round_items`` items for a half-width, by design."""

    mu: float
    half_width: float
    round_items: int
    confidence_level: float
    rows: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]
    _halves: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def half_width_at(self, k: int, design: str = "uniform (HERO-PPI)") -> float:
        """The half-width the plan predicts with ``k`` expert labels by ``design`` (a row's name)."""
        if design not in self._halves:
            raise HeroEvalError(f"no design {design!r} in this plan; it has {list(self._halves)}")
        if not 1 <= k <= self.round_items:
            raise HeroEvalError(f"k must be in [1, {self.round_items}], got {k!r}")
        return float(self._halves[design](float(k)))

    def to_dict(self) -> dict[str, Any]:
        return {"mu": self.mu, "half_width": self.half_width, "round_items": self.round_items,
                "confidence_level": self.confidence_level, "rows": list(self.rows), "notes": list(self.notes)}

    def summary(self) -> str:
        lines = [f"expert labels in a round of {self.round_items} items for a {self.confidence_level:.0%} CI "
                 f"half-width of {self.half_width:g} at a rate of {self.mu:g}",
                 f"{'design':>22}  {'residual var':>12}  {'expert labels':>13}  {'half-width at it':>16}"]
        for r in self.rows:
            k = f"{math.ceil(r['expert_labels'])}"
            lines.append(f"{r['design']:>22}  {r['residual_variance']:>12.3g}  {k:>13}  {r['half_width']:>16.4f}")
        lines.extend(self.notes)
        return "\n".join(lines)


def _simulate_posteriors(cal: Calibration, mu: float, labels_per_item: int | None,
                         pool: Sequence[str] | Mapping[str, float] | None, n_mc: int,
                         rng: np.random.Generator | int | None) -> FloatArray:
    idx, shares = _pool(cal, pool)
    k = idx.size if labels_per_item is None else int(labels_per_item)
    if not 1 <= k <= idx.size:
        raise HeroEvalError(f"labels_per_item must be in [1, {idx.size}] (the pool size), got {labels_per_item!r}")
    gen = np.random.default_rng(rng)
    sets = _draw_sets(gen, n_mc, idx, shares, k)
    a = np.clip(np.asarray(cal.alpha), 1e-9, 1 - 1e-9)
    b = np.clip(np.asarray(cal.beta), 1e-9, 1 - 1e-9)
    y = gen.random(n_mc) < mu
    z = gen.random(sets.shape) < np.where(y[:, None], a[sets], 1 - b[sets])
    L = np.where(z, np.log(a[sets]) - np.log1p(-b[sets]), np.log1p(-a[sets]) - np.log(b[sets])).sum(axis=1)
    out: FloatArray = expit(logit(mu) + L)
    return out


class ExpertPlanOptions(DrawOptions, total=False):
    """:func:`expert_labels`' keyword options; defaults in :data:`EXPERT_PLAN_DEFAULTS`."""

    labels_per_item: int | None
    mix: float


EXPERT_PLAN_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "confidence_level": 0.95, "labels_per_item": None, "pool": None, "mix": DEFAULT_MIX, "n_mc": 20_000, "rng": 0,
})
""":class:`ExpertPlanOptions`' defaults."""


def _first_conflict(prior_at: Any, n: int) -> str:
    """The smallest k at which the prior is dropped, as text ("never" when it is kept up to n)."""
    for k in range(2, n + 1):
        if prior_at(float(k)) == 0:
            return str(k)
    return "never"


def _prior_text(m: float, s2h: float, s2: float, first: str) -> str:
    if m <= 0:
        return ""
    if first == "never":
        return f" (the history prior worth {m:g} items and t at k - 1 + {m:g} df)"
    if first == "2":
        return (f" (without the history prior: the measured spread {s2:.4g} is so far above the prior's {s2h:.4g} that "
                "the estimator's conflict test drops it)")
    return (f" (the history prior worth {m:g} items and t at k - 1 + {m:g} df below k = {first}; from there the "
            f"measured spread {s2:.4g} is so far above the prior's {s2h:.4g} that the estimator's conflict test drops "
            "it)")


def expert_labels(
    calibration: Calibration,
    *,
    mu: float,
    half_width: float,
    round_items: int,
    **options: Unpack[ExpertPlanOptions],
) -> ExpertPlan:
    """How many expert labels in a round of ``round_items`` items give a half-width of ``half_width`` (module docstring).

    The keyword options (:class:`ExpertPlanOptions`): ``confidence_level`` (0.95); ``labels_per_item`` and
    ``pool`` as :func:`heroeval.inference.planning.hero1_variance` takes them (default: every labeler); ``mix``,
    the active design's uniform share (:func:`heroeval.inference.select.inclusion_probabilities`); ``n_mc``
    (20 000) simulated items drawn with seed ``rng`` (0).
    """
    o = options_of("expert_labels", options, ExpertPlanOptions, EXPERT_PLAN_DEFAULTS)
    confidence_level, labels_per_item, pool = o["confidence_level"], o["labels_per_item"], o["pool"]
    mix, n_mc, rng = o["mix"], o["n_mc"], o["rng"]
    if not isinstance(calibration, Calibration):
        raise HeroEvalError(f"calibration must be a Calibration, got {type(calibration).__name__}")
    if not 0 < mu < 1:
        raise HeroEvalError(f"mu must be in (0, 1), got {mu!r}")
    if not 0 < half_width < 0.5:
        raise HeroEvalError(f"half_width must be in (0, 0.5), got {half_width!r}")
    if not (isinstance(round_items, (int, np.integer)) and round_items >= 2):
        raise HeroEvalError(f"round_items must be an integer >= 2, got {round_items!r}")
    if not 0 < confidence_level < 1:
        raise HeroEvalError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    n = int(round_items)
    q = 0.5 + confidence_level / 2
    z = float(norm.ppf(q))
    f = _simulate_posteriors(calibration, mu, labels_per_item, pool, n_mc, rng)
    s = f * (1 - f)

    def solve(half: Any) -> float:
        """The smallest k (continuous, in [1, n]) whose half-width ``half(k)`` reaches the target; inf if none."""
        if half(float(n)) > half_width:
            return math.inf
        lo, hi = 1.0, float(n)
        if half(lo) <= half_width:
            return lo
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if half(mid) <= half_width else (mid, hi)
        return hi

    def active_var(k: float, pf: FloatArray, r2: FloatArray) -> float:
        # the items stand for the round: shares p_i scaled to a round of n items
        pi = np.minimum(inclusion_probabilities(pf, k * pf.size / n, "active", mix), 1.0)
        v = float(np.mean((1 / pi - 1) * r2)) / n
        floor = float(np.mean((1 - pi) / pi)) / n * PSEUDO / (k + 2 * PSEUDO)  # the estimator's floor, in expectation
        return max(v, floor)

    def z_half(var: Any) -> Any:
        return lambda k: z * math.sqrt(var(k))

    def expected_with_hull(k: float, th: float, one_class: bool) -> float:
        """The half-width expected at k gold items of a uniform sample when the estimator's small-sample rule
        widens the interval to the gold's Clopper–Pearson interval (below SMALL_GOLD items, or on a sample of one
        class): the hull's half-width weighted by the hypergeometric chance of each count of ones at rate mu."""
        ki = max(round(k), 1)
        x = np.arange(ki + 1) if ki < SMALL_GOLD else np.array([0, ki]) if one_class else np.array([], int)
        if x.size == 0:
            return th
        px = hypergeom.pmf(x, n, round(n * mu), ki)
        cp = np.array([np.subtract(*clopper_pearson(float(v), float(ki), confidence_level)[::-1]) / 2 for v in x])
        return float(th + np.sum(px * np.maximum(cp - th, 0.0)))

    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    meas = measured_residuals(calibration, mu)
    if meas is not None:
        prior = history_prior(calibration, meas.lam, mu, scores=history_scores(calibration, meas.predictor))
        s2h, m = (math.nan, 0.0) if prior is None else prior

        def prior_at(k: float) -> float:
            """The prior's worth at k gold items: m, or 0 where the estimator's conflict test would drop it at the
            measured spread (a round spread that far above the prior's, heroeval.estimators.ppi.rectify)."""
            if m <= 0:
                return 0.0
            df = max(k - 1, 1.0)
            if s2h <= 0:
                return 0.0 if meas.variance > 0 else m
            return 0.0 if df * meas.variance / s2h > float(chi2.ppf(1 - PRIOR_CONFLICT_LEVEL, df)) else m

        def uniform_measured(k: float) -> float:
            mk = prior_at(k)
            spread = (k * meas.variance + mk * s2h) / (k + mk) if mk > 0 else meas.variance
            floor = (PSEUDO_WITH_PRIOR / (k + 2 * PSEUDO_WITH_PRIOR) if mk > 0 else PSEUDO / (k + 2 * PSEUDO))
            return (1 / k - 1 / n) * max(spread, floor)

        def t_half(k: float) -> float:
            th = float(t_dist.ppf(q, max(k - 1, 1) + prior_at(k))) * math.sqrt(uniform_measured(k))
            return expected_with_hull(k, th, one_class=ONE_CLASS_HULL == "always" or prior_at(k) <= 0)

        gen = np.random.default_rng(rng)
        pop = gen.choice(meas.y.size, n_mc, p=meas.weight)
        rc = meas.residual - float(meas.weight @ meas.residual)
        rows.append({"design": "uniform (HERO-PPI)", "residual_variance": meas.variance, "evidence": meas.evidence,
                     "half": t_half})
        rows.append({"design": "active (HERO-PPI)", "residual_variance": meas.variance, "evidence": meas.evidence,
                     "half": z_half(lambda k: active_var(k, meas.f[pop], rc[pop] ** 2))})
        how = (f"cross-fitted on the model checks' {meas.n_gold} held-out gold items" if meas.evidence == "cross-fitted"
               else f"on the calibration's {meas.n_gold} gold items in-sample (no model checks saved: optimistic, "
                    "as those items helped fit the labelers; hero calibrate saves the checks)")
        what = "the gold-proportion posterior" if meas.predictor == "gold_proportion" else "HERO-1's posterior"
        notes.append(f"the HERO-PPI rows use the residual spread of {what} (the predictor the estimate rectifies) "
                     f"measured {how}, weighted to a rate of "
                     f"{mu:g} (lambda {meas.lam:.2f}), with the estimator's own variance rule"
                     + _prior_text(m, s2h, meas.variance, _first_conflict(prior_at, n)))
        if meas.n_gold < THIN_GOLD:
            notes.append(f"only {meas.n_gold} gold items measure the residual spread: the HERO-PPI rows are uncertain "
                         "(the gold-only row bounds them)")
    es = float(np.mean(s))
    rows.append({"design": "uniform, model" if meas is not None else "uniform (HERO-PPI)", "residual_variance": es,
                 "evidence": "model",
                 "half": z_half(lambda k: (1 / k - 1 / n) * max(es, PSEUDO / (k + 2 * PSEUDO)))})
    if meas is None:
        rows.append({"design": "active (HERO-PPI)", "residual_variance": es, "evidence": "model",
                     "half": z_half(lambda k: active_var(k, f, s))})
    rows.append({"design": "gold only", "residual_variance": mu * (1 - mu), "evidence": "gold only",
                 "half": z_half(lambda k: (1 / k - 1 / n) * max(mu * (1 - mu), PSEUDO / (k + 2 * PSEUDO)))})
    halves: dict[str, Any] = {}
    for r in rows:
        half = r.pop("half")
        halves[r["design"]] = half
        k = solve(half)
        r["expert_labels"] = k
        r["half_width"] = half(float(min(math.ceil(k), n))) if math.isfinite(k) else math.nan
    notes.append("model row: under the calibration's model (labelers independent given the gold) the posteriors "
                 "are calibrated; where labelers err together (LLM judges) the residual variance is larger and that "
                 "row optimistic; the gold-only row is the bound for a useless predictor")
    dep = calibration.checks.dependence if calibration.checks is not None else None
    if dep is not None and math.isfinite(dep.p_value) and dep.p_value < DEPENDENCE_WARN:
        notes.append(f"warning: the model checks reject independence given the gold (p = {dep.p_value:.2g}, mean "
                     f"conditional correlation {dep.mean_correlation:.3f}): the model row understates what expert "
                     "labels are needed; plan on the measured rows")
    notes_t = tuple(notes)
    return ExpertPlan(float(mu), float(half_width), n, float(confidence_level), tuple(rows), notes_t, halves)


def expert_labels_to_decide(
    calibration: Calibration, *, mu_a: float, mu_b: float, n_a: int, n_b: int, distance: float, alpha: float,
    two_sided: bool = False, power: float = 0.8,
) -> float:
    """Expert labels in each of two rounds (``k`` in each, uniform samples) whose prediction-powered difference
    would decide a verdict with ``power`` if ``A - B`` stays ``distance`` from the null boundary; ``inf`` when
    labelling every item of the smaller round would not, NaN when ``distance`` is not positive.

    Each round's variance at ``k`` is the uniform HERO-PPI row of :func:`expert_labels` at the round's rate
    (its half-width over the normal quantile): the residual spread measured on the history's gold, with the
    estimator's own small-sample rules. The test decides with power ``power`` when
    ``(z_{1-alpha} + z_power) * sqrt(V_A(k) + V_B(k)) <= distance`` (``z_{1-alpha/2}`` two-sided); the
    history's part of the difference is second order here and left out, as the plan leaves it out.

    >>> import heroeval as he
    >>> from heroeval.simulate import paper_dgp
    >>> d = paper_dgp(0)
    >>> k = expert_labels_to_decide(he.calibrate(d.history), mu_a=0.3, mu_b=0.2, n_a=400, n_b=400, distance=0.1,
    ...                             alpha=0.05)
    >>> 1 <= k <= 400
    True
    """
    if not (math.isfinite(distance) and distance > 0):
        return math.nan
    n = min(int(n_a), int(n_b))
    if n < 2:
        return math.inf
    z = float(norm.ppf(1 - alpha / 2 if two_sided else 1 - alpha) + norm.ppf(power))
    target = (distance / z) ** 2
    zq = float(norm.ppf(0.975))
    plans = [expert_labels(calibration, mu=min(max(mu, 0.01), 0.99), half_width=0.1, round_items=int(size))
             for mu, size in ((mu_a, n_a), (mu_b, n_b))]  # the plan's own seed (0): reproducible

    def var(k: int) -> float:
        return sum((p.half_width_at(min(k, p.round_items)) / zq) ** 2 for p in plans)

    if var(n) > target:
        return math.inf
    lo, hi = 1, n
    if var(lo) <= target:
        return float(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if var(mid) <= target else (mid, hi)
    return float(hi)
