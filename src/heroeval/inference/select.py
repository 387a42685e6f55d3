"""Which current items to send to the experts: a sampling design with known inclusion probabilities.

The estimates from current gold (:mod:`heroeval.estimators.ppi`) need the
gold items drawn at random, with known probabilities ``pi_i``; they weight
each by ``1 / pi_i``. Two designs:

* ``"uniform"``: a simple random sample of exactly k items (``pi_i = k / n``).
* ``"active"`` (active statistical inference, Zrnic and Candès 2024): items
  whose gold label the silver labels leave uncertain are more likely to be
  drawn. With ``f_i`` the item's posterior P(Y = 1 | labels) under the
  calibration at HERO-1's estimate, the share of item i is

      p_i = (1 - mix) * u_i / sum_j u_j + mix / n,     u_i = sqrt(f_i (1 - f_i)),

  ``pi_i = k p_i`` capped at 1 (the excess redistributed over the others), so
  the expected size is k. The residual ``y - f`` has variance ``f (1 - f)``
  when f is calibrated, and sampling in proportion to its standard deviation
  minimises the Hajek estimator's variance (Neyman allocation); the uniform
  share ``mix`` (default 0.5) bounds every weight by ``n / (mix k)``, which
  protects the estimate when the posteriors are over-confident (labelers
  that err together). The k items are drawn by randomised systematic
  sampling (a random order, then every unit step of the cumulated pi): exactly
  k items, each with probability pi_i.
* ``"poisson"``: the same pi_i, each item drawn independently (a random size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.errors import HeroEvalError
from heroeval.estimators.common import align, check_calibration, check_current, log_likelihood_ratios
from heroeval.estimators.methods import hero1
from heroeval.estimators.ppi import item_posterior
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration

__all__ = ["DESIGNS", "Selection", "inclusion_probabilities", "select_items"]

FloatArray = npt.NDArray[np.float64]
Design = Literal["uniform", "active", "poisson"]
DESIGNS = ("uniform", "active", "poisson")
DEFAULT_MIX = 0.5
"""Share of the uniform design in the active one."""


def inclusion_probabilities(f: FloatArray, k: float, design: Design = "active", mix: float = DEFAULT_MIX) -> FloatArray:
    """Inclusion probabilities summing to k: uniform, or proportional to sqrt(f (1 - f)) mixed with uniform, capped at 1."""
    f = np.asarray(f, dtype=float)
    n = f.size
    if not (0 < k <= n):
        raise HeroEvalError(f"the budget k must be in (0, {n}] (the round's items), got {k!r}")
    if design not in DESIGNS:
        raise HeroEvalError(f"design must be one of {list(DESIGNS)}, got {design!r}")
    if not 0 <= mix <= 1:
        raise HeroEvalError(f"mix must be in [0, 1], got {mix!r}")
    if design == "uniform":
        return np.full(n, k / n)
    u = np.sqrt(np.clip(f * (1 - f), 0.0, None))
    p: FloatArray = mix / n + ((1 - mix) * u / u.sum() if u.sum() > 0 else np.full(n, (1 - mix) / n))
    pi: FloatArray = k * p
    capped = np.zeros(n, dtype=bool)
    for _ in range(n):
        over = (pi >= 1) & ~capped
        if not over.any():
            break
        capped |= over
        rest = k - capped.sum()
        free = ~capped
        pi[capped] = 1.0
        s = p[free].sum()
        pi[free] = rest * p[free] / s if s > 0 else rest / max(free.sum(), 1)
    out: FloatArray = np.clip(pi, 0.0, 1.0)
    return out


def _systematic(pi: FloatArray, gen: np.random.Generator) -> npt.NDArray[np.intp]:
    """Randomised systematic sampling: exactly round(sum pi) items, item i with probability pi_i."""
    order = gen.permutation(pi.size)
    cum = np.concatenate([[0.0], np.cumsum(pi[order])])
    k = round(cum[-1])
    points = gen.random() + np.arange(k)
    pos = np.searchsorted(cum, points, side="right") - 1
    return np.sort(order[np.clip(pos, 0, pi.size - 1)])


@dataclass(frozen=True)
class Selection:
    """The items to send to the experts, with their inclusion probabilities.

    ``frame``: one row per item of the round (``item_id``, ``pi``,
    ``predictor`` = the posterior used, ``selected``); ``chosen``: the
    selected rows, to write out and pass back with the gold
    (``--design`` / ``read_annotations(design=...)``).
    """

    frame: pd.DataFrame
    design: str
    k: int
    mix: float
    notes: tuple[str, ...] = ()

    @property
    def chosen(self) -> pd.DataFrame:
        out = self.frame[self.frame["selected"]].drop(columns="selected").reset_index(drop=True)
        out["design"] = self.design
        return out

    def summary(self) -> str:
        c = self.chosen
        lines = [f"{len(c)} of {len(self.frame)} items selected for expert labels ({self.design} design"
                 + (f", uniform share {self.mix:g}" if self.design != "uniform" else "") + ")",
                 f"inclusion probabilities of the selected items: {c['pi'].min():.3g} to {c['pi'].max():.3g}",
                 *self.notes]
        return "\n".join(lines)


def select_items(
    current: AnnotationSet,
    calibration: Calibration | None,
    k: int,
    *,
    design: Design = "uniform",
    mix: float = DEFAULT_MIX,
    rng: np.random.Generator | int | None = None,
    exclude_new_labelers: bool = False,
) -> Selection:
    """Choose k items of the current round for expert (gold) labels; see the module docstring for the designs.

    Examples
    --------
    >>> import heroeval as he
    >>> from heroeval.simulate import paper_dgp
    >>> d = paper_dgp(0)
    >>> sel = select_items(d.current, he.calibrate(d.history), 30, rng=1)
    >>> len(sel.chosen), bool((sel.chosen["pi"] > 0).all())
    (30, True)
    """
    data = check_current(current)
    if not (isinstance(k, (int, np.integer)) and 1 <= k <= data.n_items):
        raise HeroEvalError(f"k must be an integer from 1 to the round's {data.n_items} items, got {k!r}")
    gen = np.random.default_rng(rng)
    notes: list[str] = []
    if design == "uniform":
        f = np.full(data.n_items, math.nan)
        ids = data.item_ids
    else:
        if calibration is None:
            raise HeroEvalError(f"the {design} design needs a calibration (the items' posteriors)")
        cal = check_calibration(calibration)
        al = align(data, cal, exclude_new_labelers)
        d = al.data
        notes.extend(al.notes)
        mu = hero1(d, cal, exclude_new_labelers=exclude_new_labelers).estimate
        if not math.isfinite(mu):
            raise HeroEvalError("HERO-1 is unidentified on this round: no posteriors to select by; use design='uniform'")
        f = item_posterior(log_likelihood_ratios(d, al.to_calib, cal.alpha, cal.beta), mu)
        ids = d.item_ids
        if d.n_items < data.n_items:
            notes.append(f"{data.n_items - d.n_items} item(s) without a calibrated labeler cannot be selected")
        if k > d.n_items:
            raise HeroEvalError(f"k = {k} exceeds the {d.n_items} items with calibrated labelers")
    pi = inclusion_probabilities(f, float(k), design, mix)
    if design == "uniform":
        sel = np.sort(gen.choice(pi.size, k, replace=False))
    elif design == "active":
        sel = _systematic(pi, gen)
    else:
        sel = np.flatnonzero(gen.random(pi.size) < pi)
        notes.append(f"Poisson sampling: {sel.size} items drawn (expected {k})")
    mask = np.zeros(pi.size, dtype=bool)
    mask[sel] = True
    frame = pd.DataFrame({"item_id": ids.astype(str), "pi": pi, "predictor": f, "selected": mask})
    return Selection(frame, design, int(mask.sum()), float(mix), tuple(notes))
