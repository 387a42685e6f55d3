"""Planning expert labels in the current round: how many gold items for a half-width h, from the history alone.

The estimate with current gold (:mod:`heroeval.estimators.ppi`) has current
variance ``(1/n^2) sum_U (1 - pi_i) / pi_i * Var(y_i - lam f_i | labels)``.
Under the calibration's two-coin model the posterior ``f_i`` at the round's
rate is calibrated, so the tuned ``lam`` is 1 and
``Var(y_i - f_i | labels) = f_i (1 - f_i)``. Its distribution over items is
simulated from the calibration (Monte Carlo: each item's gold label drawn at
rate ``mu``, its labelers from the pool as :func:`heroeval.inference.planning.hero1_variance`
draws them, their labels from their sensitivities and specificities). Then

* uniform design (``pi = k / n``): ``Var = (1/k - 1/n) S^2`` with
  ``S^2 = max(E[f (1 - f)], floor)``, the floor being the estimator's own
  (``PSEUDO / (k + 2 PSEUDO)``), so ``k = S^2 / ((h / z)^2 + S^2 / n)``;
* active design: ``pi_i`` from :func:`heroeval.inference.select.inclusion_probabilities`
  on the simulated posteriors, ``Var = (1/n) E[(1/pi - 1) f (1 - f)]``,
  solved for k by bisection;
* gold only (a useless predictor, the worst case): ``S^2 = mu (1 - mu)``.

The history's term (the predictor's dependence on the calibration) is
second order here and left out; so is the t quantile's excess over z (a few
per cent at k = 30). **The model figure is optimistic when labelers err
together** (LLM judges): the posteriors are then over-confident and the
residual variance larger; the gold-only row bounds it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Unpack

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit
from scipy.stats import norm

from heroeval.core.options import options_of
from heroeval.errors import HeroEvalError
from heroeval.estimators.ppi import PSEUDO
from heroeval.inference.planning import DrawOptions, _draw_sets, _pool
from heroeval.inference.select import DEFAULT_MIX, inclusion_probabilities
from heroeval.stage_a.calibration import Calibration

__all__ = ["EXPERT_PLAN_DEFAULTS", "ExpertPlan", "ExpertPlanOptions", "expert_labels"]

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

    def to_dict(self) -> dict[str, Any]:
        return {"mu": self.mu, "half_width": self.half_width, "round_items": self.round_items,
                "confidence_level": self.confidence_level, "rows": list(self.rows), "notes": list(self.notes)}

    def summary(self) -> str:
        lines = [f"expert labels in a round of {self.round_items} items for a {self.confidence_level:.0%} CI "
                 f"half-width of {self.half_width:g} at a rate of {self.mu:g}",
                 f"{'design':>22}  {'residual var':>12}  {'expert labels':>13}  {'half-width at it':>16}"]
        for r in self.rows:
            k = f"{math.ceil(r['expert_labels'])}"
            lines.append(f"{r['design']:>22}  {r['residual_variance']:>12.4f}  {k:>13}  {r['half_width']:>16.4f}")
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
    z = float(norm.ppf(0.5 + confidence_level / 2))
    target = (half_width / z) ** 2
    f = _simulate_posteriors(calibration, mu, labels_per_item, pool, n_mc, rng)
    s = f * (1 - f)

    def uniform_var(k: float, s2: float) -> float:
        return (1 / k - 1 / n) * max(s2, PSEUDO / (k + 2 * PSEUDO))

    def active_var(k: float) -> float:
        # the simulated items stand for the round: shares p_i scaled to a round of n items
        pi = np.minimum(inclusion_probabilities(f, k * f.size / n, "active", mix), 1.0)
        v = float(np.mean((1 / pi - 1) * s)) / n
        floor = float(np.mean((1 - pi) / pi)) / n * PSEUDO / (k + 2 * PSEUDO)  # the estimator's floor, in expectation
        return max(v, floor)

    def solve(var: Any) -> float:
        if var(float(n)) > target:
            return math.inf
        lo, hi = 1.0, float(n)
        if var(lo) <= target:
            return lo
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if var(mid) <= target else (mid, hi)
        return hi

    rows = []
    es = float(np.mean(s))
    for name, var, s2 in (("uniform (HERO-PPI)", lambda k: uniform_var(k, es), es),
                          ("active (HERO-PPI)", active_var, es),
                          ("gold only", lambda k: uniform_var(k, mu * (1 - mu)), mu * (1 - mu))):
        k = solve(var)
        hw = z * math.sqrt(var(min(math.ceil(k), n))) if math.isfinite(k) else math.nan
        rows.append({"design": name, "residual_variance": s2, "expert_labels": k, "half_width": hw})
    notes = ("model-based: under the calibration's model (labelers independent given the gold) the posteriors are "
             "calibrated; where labelers err together (LLM judges) the residual variance is larger and the HERO rows "
             "optimistic; the gold-only row is the bound for a useless predictor",)
    return ExpertPlan(float(mu), float(half_width), n, float(confidence_level), tuple(rows), notes)
