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
* ``"stratified"``: the items are split into strata (``by=``: an item group
  such as the query, prompt or topic, one label per item; or
  ``"posterior"``, :data:`DEFAULT_STRATA` equal-count bins of the posterior
  ``f_i`` of the predictor the estimate will rectify), and a simple random
  sample of ``k_h`` of the ``N_h`` items of each stratum is drawn
  (``pi_i = k_h / N_h``; the estimators then use the stratified variance,
  :mod:`heroeval.estimators.gold_sample`). The allocation mixes the
  proportional one with Neyman's in the same share ``mix``:

      k_h ~ k * ((mix) N_h / n + (1 - mix) N_h S_h / sum_g N_g S_g),

  ``S_h^2`` the residual spread expected in stratum h: the spread of
  ``y - lam f`` **measured on the history's gold** in the same band of ``f``
  (cross-fitted from the model checks when the calibration has them,
  :func:`heroeval.inference.residuals.measured_residuals`, weighted to the
  round's rate), averaged over the stratum's items; a band holding fewer than
  two history gold items takes the history's overall spread. Every stratum
  gets at least 2 items (or all of its items, if fewer), so its spread can be
  estimated. Without a calibration the allocation is proportional.
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
from heroeval.estimators.methods import gold_proportion, gold_proportion_rates, hero1
from heroeval.estimators.ppi import choose_predictor, item_posterior
from heroeval.inference.residuals import measured_residuals
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration

__all__ = ["DEFAULT_STRATA", "DESIGNS", "Selection", "allocate", "inclusion_probabilities", "select_items"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Design = Literal["uniform", "active", "poisson", "stratified"]
DESIGNS = ("uniform", "active", "poisson", "stratified")
DEFAULT_MIX = 0.5
"""Share of the uniform design in the active one (and of the proportional allocation in the stratified one)."""
DEFAULT_STRATA = 4
"""Equal-count bins of the posterior in ``by="posterior"`` (not tuned: Cochran's gains level off by 5 or 6 strata,
and 4 strata of 2 items each fit the smallest budget the estimates take without the small-sample rule, 10)."""
MIN_PER_STRATUM = 2
STRATIFIED_SHARE = 0.5
"""Below this share of the round labelled, ``hero select --by posterior`` notes that the uniform design is
narrower: with the variance's safeguards per stratum (honest: coverage 0.96-0.99 on the shared sets at k = 10 to
100), the posterior strata's interval was 1.35-1.39 times the uniform design's at k = 10 and 20, 1.06-1.12 at
k = 50 and 0.96-1.00 at k = 100 (about half the round there; issue #41's rerun, docs/current_gold.md section 7;
fixed from that table between k = 50 and 100, not tuned)."""


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
    if design in ("uniform", "stratified"):
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


def allocate(sizes: npt.ArrayLike, spreads: npt.ArrayLike, k: int, mix: float = DEFAULT_MIX) -> IntArray:
    """Integer sample sizes ``k_h`` per stratum summing to ``k``: ``mix`` proportional, ``1 - mix`` Neyman.

    The target ``k * (mix N_h / n + (1 - mix) N_h S_h / sum N S)`` is met as
    closely as ``min(2, N_h) <= k_h <= N_h`` allows (water-filling, then the
    largest remainders). :class:`HeroEvalError` when ``k`` cannot give every
    stratum its two items.
    """
    N = np.asarray(sizes, dtype=np.int64)
    S = np.asarray(spreads, dtype=float)
    if N.ndim != 1 or N.size == 0 or (N < 1).any() or S.shape != N.shape:
        raise HeroEvalError("allocate: one size >= 1 and one spread per stratum expected")
    if not 0 <= mix <= 1:
        raise HeroEvalError(f"mix must be in [0, 1], got {mix!r}")
    lo = np.minimum(N, MIN_PER_STRATUM)
    if k < lo.sum():
        raise HeroEvalError(f"k = {k} is too small for {N.size} strata: each needs {MIN_PER_STRATUM} items (or all of "
                            f"a smaller one's), {int(lo.sum())} in all; give a larger k or fewer strata")
    if k > N.sum():
        raise HeroEvalError(f"k = {k} exceeds the {int(N.sum())} items of the strata")
    S = np.where(np.isfinite(S) & (S > 0), S, 0.0)
    ns = N * S
    share = mix * N / N.sum() + (1 - mix) * (ns / ns.sum() if ns.sum() > 0 else N / N.sum())
    lo_t, hi_t = 0.0, float(k) / max(float(share[share > 0].min()), 1e-300) + 1.0
    for _ in range(200):  # the scale t with sum clip(t * share, lo, N) = k
        t = 0.5 * (lo_t + hi_t)
        if np.clip(t * share, lo, N).sum() < k:
            lo_t = t
        else:
            hi_t = t
    x = np.clip(hi_t * share, lo, N)
    out: IntArray = np.minimum(np.maximum(np.floor(x).astype(np.int64), lo), N)
    for h in np.argsort(-(x - np.floor(x)), kind="stable"):  # the largest remainders first
        if out.sum() >= k:
            break
        if out[h] < N[h]:
            out[h] += 1
    while out.sum() < k:  # rounding left room: fill strata with items to spare
        h = int(np.argmax(N - out))
        out[h] += 1
    while out.sum() > k:
        h = int(np.argmax(np.where(out > lo, out - x, -np.inf)))
        out[h] -= 1
    return out


def _strata_labels(by: object, ids: npt.NDArray[np.object_], f: FloatArray, n_strata: int) -> npt.NDArray[np.object_]:
    """One stratum label per item: equal-count bins of ``f`` (``by="posterior"``), or the labels ``by`` gives."""
    if isinstance(by, str):
        if by != "posterior":
            raise HeroEvalError(f"by must be 'posterior' or the items' groups (a mapping or Series from item id to "
                                f"group, or one label per item), got {by!r}")
        if not (isinstance(n_strata, (int, np.integer)) and 1 <= n_strata <= ids.size):
            raise HeroEvalError(f"n_strata must be an integer from 1 to the {ids.size} items, got {n_strata!r}")
        rank = np.empty(ids.size, dtype=np.int64)
        rank[np.argsort(f, kind="stable")] = np.arange(ids.size)
        band = rank * n_strata // ids.size
        return np.asarray([f"posterior band {b + 1} of {n_strata}" for b in band], dtype=object)
    if isinstance(by, (pd.Series, dict)) or hasattr(by, "keys"):
        m = pd.Series(by) if not isinstance(by, pd.Series) else by
        m.index = m.index.astype(str)
        if m.index.duplicated().any():
            raise HeroEvalError("by: an item appears twice in the groups")
        lab = m.reindex(pd.Index(ids.astype(str)))
        missing = lab.isna().to_numpy()
        if missing.any():
            shown = ", ".join(repr(str(x)) for x in ids[missing][:5])
            raise HeroEvalError(f"by: {int(missing.sum())} item(s) of the round have no group: {shown}")
        return lab.astype(str).to_numpy(dtype=object)
    arr = np.asarray(by, dtype=object).ravel()
    if arr.size != ids.size:
        raise HeroEvalError(f"by: {arr.size} labels given for the round's {ids.size} items")
    if pd.isna(pd.Series(arr)).any():
        raise HeroEvalError("by: some items have no group (missing labels)")
    return np.asarray([str(x) for x in arr], dtype=object)


def _band_spread(cal: Calibration, mu: float, f: FloatArray, bands: int) -> tuple[FloatArray, str]:
    """Each item's expected residual spread: the history's, measured in its band of the posterior (module docstring)."""
    mr = measured_residuals(cal, mu)
    if mr is None:
        out: FloatArray = np.clip(f * (1 - f), 0.0, None)
        return out, "no history gold scores: the allocation uses the model's own spread f (1 - f)"
    edges = np.quantile(f, np.linspace(0, 1, bands + 1)[1:-1]) if f.size > 1 else np.array([])
    hb, cb = np.searchsorted(edges, mr.f, side="right"), np.searchsorted(edges, f, side="right")
    r = mr.residual
    s2 = np.full(edges.size + 1, mr.variance)
    for b in range(edges.size + 1):
        on = hb == b
        w = mr.weight[on]
        if on.sum() >= 2 and w.sum() > 0:
            m = float(w @ r[on] / w.sum())
            s2[b] = float(w @ (r[on] - m) ** 2 / w.sum()) * on.sum() / (on.sum() - 1)
    return s2[cb], (f"the strata's spreads measured on the history's {mr.n_gold} gold items ({mr.evidence}), in "
                    f"{edges.size + 1} bands of the posterior")


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

    @property
    def strata(self) -> pd.DataFrame | None:
        """A stratified design's strata: size ``N``, items drawn ``k``, ``pi``, expected spread (None otherwise)."""
        if "stratum" not in self.frame.columns:
            return None
        g = self.frame.groupby("stratum", sort=True)
        return pd.DataFrame({"N": g.size(), "k": g["selected"].sum(), "pi": g["pi"].first(),
                             "spread": g["spread"].mean()}).reset_index()

    def summary(self) -> str:
        c = self.chosen
        how = (f", uniform share {self.mix:g}" if self.design in ("active", "poisson") else
               f", {len(self.strata)} strata, {self.mix:g} proportional + {1 - self.mix:g} Neyman"
               if self.strata is not None else "")
        lines = [f"{len(c)} of {len(self.frame)} items selected for expert labels ({self.design} design{how})",
                 f"inclusion probabilities of the selected items: {c['pi'].min():.3g} to {c['pi'].max():.3g}",
                 *self.notes]
        if self.strata is not None:
            st = self.strata
            lines += [f"  {name}: {int(kk)} of {int(nn)} items (pi {p:.3g})"
                      for name, kk, nn, p in zip(st["stratum"], st["k"], st["N"], st["pi"], strict=True)]
        return "\n".join(lines)


def _posterior(data: AnnotationSet, cal: Calibration, exclude_new_labelers: bool,
               chosen: bool) -> tuple[AnnotationSet, FloatArray, float, tuple[str, ...]]:
    """The round's items (those with calibrated labelers), their posteriors and the rate they are taken at.

    ``chosen``: the posterior of the predictor the estimate will rectify
    (:func:`heroeval.estimators.ppi.choose_predictor`); else HERO-1's.
    """
    al = align(data, cal, exclude_new_labelers)
    d = al.data
    gp = chosen and choose_predictor(cal).predictor == "gold_proportion"
    mu = (gold_proportion(d, cal, exclude_new_labelers=exclude_new_labelers) if gp
          else hero1(d, cal, exclude_new_labelers=exclude_new_labelers)).estimate
    if not math.isfinite(mu):
        raise HeroEvalError("the round's rate is unidentified: no posteriors to select by; use design='uniform'")
    a, b = gold_proportion_rates(cal) if gp else (cal.alpha, cal.beta)
    notes = list(al.notes)
    if d.n_items < data.n_items:
        notes.append(f"{data.n_items - d.n_items} item(s) without a calibrated labeler cannot be selected")
    return d, item_posterior(log_likelihood_ratios(d, al.to_calib, a, b), mu), float(mu), tuple(notes)


def select_items(
    current: AnnotationSet,
    calibration: Calibration | None,
    k: int,
    *,
    design: Design = "uniform",
    mix: float = DEFAULT_MIX,
    rng: np.random.Generator | int | None = None,
    exclude_new_labelers: bool = False,
    by: object = None,
    n_strata: int = DEFAULT_STRATA,
) -> Selection:
    """Choose k items of the current round for expert (gold) labels; see the module docstring for the designs.

    ``by`` (the stratified design; giving it implies ``design="stratified"``):
    ``"posterior"`` (the default there: ``n_strata`` bands of the posterior),
    or the items' groups: a mapping or Series from item id to group, or one
    label per item of ``current``.

    Examples
    --------
    >>> import heroeval as he
    >>> from heroeval.simulate import paper_dgp
    >>> d = paper_dgp(0)
    >>> sel = select_items(d.current, he.calibrate(d.history), 30, rng=1)
    >>> len(sel.chosen), bool((sel.chosen["pi"] > 0).all())
    (30, True)
    >>> st = select_items(d.current, he.calibrate(d.history), 30, by="posterior", rng=1)
    >>> st.strata["k"].tolist() == [int(x) for x in st.strata["k"]] and int(st.strata["k"].sum())
    30
    """
    data = check_current(current)
    if not (isinstance(k, (int, np.integer)) and 1 <= k <= data.n_items):
        raise HeroEvalError(f"k must be an integer from 1 to the round's {data.n_items} items, got {k!r}")
    if design not in DESIGNS:
        raise HeroEvalError(f"design must be one of {list(DESIGNS)}, got {design!r}")
    if by is not None and design not in ("uniform", "stratified"):
        raise HeroEvalError(f"by= gives the strata of the stratified design, not of the {design} one")
    if by is not None:
        design = "stratified"
    gen = np.random.default_rng(rng)
    notes: list[str] = []
    if design == "stratified":
        return _stratified(data, calibration, k, "posterior" if by is None else by, n_strata, mix, gen,
                           exclude_new_labelers)
    if design == "uniform":
        f = np.full(data.n_items, math.nan)
        ids = data.item_ids
    else:
        if calibration is None:
            raise HeroEvalError(f"the {design} design needs a calibration (the items' posteriors)")
        d, f, _, nt = _posterior(data, check_calibration(calibration), exclude_new_labelers, chosen=False)
        ids = d.item_ids
        notes.extend(nt)
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


def _stratified(data: AnnotationSet, calibration: Calibration | None, k: int, by: object, n_strata: int, mix: float,
                gen: np.random.Generator, exclude_new_labelers: bool) -> Selection:
    """The stratified design (module docstring): strata, allocation, a simple random sample in each."""
    if not 0 <= mix <= 1:
        raise HeroEvalError(f"mix must be in [0, 1], got {mix!r}")
    notes: list[str] = []
    if calibration is None:
        if isinstance(by, str):
            raise HeroEvalError("strata by the posterior need a calibration (the items' posteriors); or give the "
                                "items' groups")
        d, f = data, np.full(data.n_items, math.nan)
        spread = np.ones(d.n_items)
        notes.append("no calibration: proportional allocation")
    else:
        d, f, mu, nt = _posterior(data, check_calibration(calibration), exclude_new_labelers, chosen=True)
        notes.extend(nt)
        spread, why = _band_spread(calibration, mu, f, n_strata if isinstance(by, str) else DEFAULT_STRATA)
        notes.append(why)
    if isinstance(by, str) or calibration is None or d.n_items == data.n_items:
        labels = _strata_labels(by, d.item_ids, f, n_strata)
    else:  # groups given for the round's items, some of which have no calibrated labeler
        full = _strata_labels(by, data.item_ids, np.full(data.n_items, math.nan), n_strata)
        labels = full[pd.Index(data.item_ids.astype(str)).get_indexer(d.item_ids.astype(str))]
    names, code = np.unique(labels.astype(str), return_inverse=True)
    N = np.bincount(code, minlength=names.size)
    S = np.sqrt(np.bincount(code, weights=spread, minlength=names.size) / N)
    kh = allocate(N, S, k, mix if calibration is not None else 1.0)
    mask = np.zeros(d.n_items, dtype=bool)
    for h in range(names.size):
        members = np.flatnonzero(code == h)
        mask[gen.choice(members, int(kh[h]), replace=False)] = True
    pi = (kh / N)[code].astype(float)
    if isinstance(by, str) and k < STRATIFIED_SHARE * d.n_items:
        notes.append(f"warning: k = {k} is below {STRATIFIED_SHARE:.0%} of the round's {d.n_items} items, where "
                     "strata by the posterior were measured to give a wider interval than the uniform design "
                     "(docs/current_gold.md, section 7: 1.35-1.39 times at k = 10 and 20, 1.06-1.12 at k = 50): "
                     "the bands the posterior calls near-certain get few gold items, whose variance then rests on "
                     "the floor and the history; prefer --design uniform")
    frame = pd.DataFrame({"item_id": d.item_ids.astype(str), "pi": pi, "predictor": f, "selected": mask,
                          "stratum": names[code], "spread": spread})
    return Selection(frame, "stratified", int(mask.sum()), float(mix if calibration is not None else 1.0),
                     tuple(notes))
