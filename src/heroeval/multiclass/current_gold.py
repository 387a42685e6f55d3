"""A few expert labels in a K-class round: prediction-powered class shares and mean score.

The K-class form of :mod:`heroeval.estimators.ppi`. Some of the round's items
carry gold, drawn at random (uniformly, or by a known design with inclusion
probabilities ``pi_i``, as ``hero select`` writes them); every item has a
predicted class distribution ``F_i`` (a K-vector) from its silver labels. With
``Y_i`` the one-hot gold class and Hajek weights ``w_i = 1 / pi_i`` over the
gold sample ``S``,

    p_hat = lam * mean_U(F) + sum_S w_i (Y_i - lam F_i) / sum_S w_i,

which sums to 1 and, conditional on the silver labels (and the history that
shaped ``F``), is unbiased for the round's class shares whatever the rate
shift, the labelers' dependence or the predictor's errors: the predictor only
decides the width. ``lam`` is one number for the whole vector (so the shares
still sum to 1): the PPI++ tuning that minimises the trace of the covariance,
``sum_c cov_S(F_c, Y_c) / sum_c var_S(F_c)`` with the design's variance weights
``(1 - pi) / pi^2``, clipped to [0, 1] (``lam = 0`` is the gold-only shares).

**Variance.** The design-based variance of a Hajek mean of the residuals
``R_i = Y_i - lam F_i`` (:mod:`heroeval.estimators.gold_sample`): per gold item
the influence vector ``sqrt(k_h / (k_h - 1) * (1 - pi_i) / pi_i^2) (R_i -
R_bar_h)`` (centred within strata ``h`` under a stratified design), so that
``Var = sum phi phi' / n^2``, which for a uniform sample is ``(1 - k/n) S_R /
k`` (the finite-population correction: the target is the round's own items).
Every functional ``w' p`` (a share, the mean score, the share of grades >= 2)
takes ``w' phi``.

**The floor.** With a few dozen gold items the residuals of a class often
show no spread at all (no gold item of a rare class, or none where the
predictor errs on it), and the variance above is then 0 whatever the
predictor's error: the interval would be a point. As the binary path does
(:func:`heroeval.estimators.ppi.rectify`), each class's variance is floored
at the spread of :data:`~heroeval.estimators.ppi.PSEUDO` discordant gold
items at each end, ``unit * pseudo / (k + 2 pseudo)`` with ``unit = k
mean((1 - pi) / pi^2) / n^2`` (``(1 - k/n) / k`` for a uniform sample); the
excess sits in one influence entry off the gold per class, so it adds to the
diagonal of the covariance only, and a functional ``w' p`` gets ``sum_c w_c^2``
times the excess (conservative). ``details["floored"]`` names the classes
where it bound. Under a stratified design the floor acts on each stratum's
share of each class's variance (``unit_h * pseudo / (k + 2 pseudo)``, with
``unit_h`` the stratum's: the uniform design's pseudo-items shared over the
strata in proportion to their gold, :data:`STRATUM_FLOOR`;
``details["stratum_excess"]``), as the binary path's acts per stratum: a stratum where the judges agree (strata by the
plurality vote) often shows no error on its few gold items, and a floor on
the pooled variance let it add none however many items it stands for. The gold-only shares (``lam = 0``) get the same floor. The
estimate is a :class:`GoldMultiClassEstimate` (method ``"ppi:<predictor>"``),
a :class:`MultiClassEstimate` whose intervals are the design's (below).

**Predictors** (:data:`PREDICTORS`): ``"majority_vote"``, each item's
plurality vote (ties split; what ppi_py and GLIDE use); ``"dawid_skene"``, the
item's posterior under Dawid–Skene fitted to the round's silver labels; and
``"hero1"``, the posterior under the calibration's confusion matrices at HERO-1's
estimate of the round's shares (labelers the calibration does not know are
left out of it).

**Intervals.** Each class share is a binary prediction-powered rate (gold
indicator ``Y_c``, predictor ``F_c``), and gets the binary path's interval
(:class:`heroeval.estimators.design_interval.DesignInterval`): Student's t with ``k - 1``
degrees of freedom (under a stratified design Satterthwaite's over the
strata, :meth:`GoldMultiClassEstimate.df_of`), widened to contain the gold's own
Clopper–Pearson interval (Korn–Graubard, at Kish's effective size) when there
are fewer than :data:`~heroeval.estimators.ppi.SMALL_GOLD` gold items or the
class is absent from the gold or holds all of it; the gold-only shares get
Wilson's interval at the finite-population effective size ``k (n - 1) / (n -
k)``. A functional (the mean score) gets ``estimate +- t SE``, its t on
Satterthwaite's degrees of freedom for that functional.

Not done here, and said so where it matters: the binary path's history prior on
the residual spread, and the choice of predictor by cross-fitted residual
spread on the history's gold (the predictor is fixed: :data:`DEFAULT_PREDICTOR`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import chi2
from scipy.stats import t as t_dist

from heroeval.errors import ConvergenceWarning, DataError, HeroEvalError
from heroeval.estimators.design_interval import SMALL_GOLD, DesignInterval
from heroeval.estimators.gold_sample import GoldSample, centred, gold_sample, variance_groups
from heroeval.estimators.ppi import PSEUDO
from heroeval.multiclass import confusion_model
from heroeval.multiclass.calibration import MultiClassCalibration
from heroeval.multiclass.data import MultiClassData, as_multiclass
from heroeval.multiclass.estimators import MultiClassEstimate, plurality_votes
from heroeval.multiclass.labelled import ClassIntervals

__all__ = [
    "DEFAULT_PREDICTOR",
    "PLAN_TARGETS",
    "PREDICTORS",
    "GoldMultiClassEstimate",
    "MultiClassGoldPlan",
    "class_predictions",
    "gold_estimates",
    "gold_recommendation",
    "plan_expert_labels_multiclass",
    "ppi_multiclass",
    "recommended_with_gold",
]

FloatArray = npt.NDArray[np.float64]

PREDICTORS: tuple[str, ...] = ("majority_vote", "dawid_skene", "hero1")

STRATUM_FLOORS = ("own", "shared")
STRATUM_FLOOR = "shared"
"""How the variance floor is spread over a stratified design's strata: ``"own"``, each stratum floored at
``pseudo`` discordant items at each end of its own ``k_h`` (``unit_h * pseudo / (k_h + 2 pseudo)``); ``"shared"``, the
uniform design's ``pseudo`` items shared over the strata in proportion to their gold (``pseudo * k_h / k``, i.e.
``unit_h * pseudo / (k + 2 pseudo)``, whose sum is the pooled floor). ``"shared"`` was chosen by leave-one-set-out
over the six multi-class sets in 6 of 6 folds (strata by the plurality vote, k in {20, 50, 100}: the narrower of the
two whose per-class coverage averages >= 0.93, lowest cell >= 0.80, on the other sets; benchmarks/multiclass_gold.py,
docs/multiclass.md): coverage 0.966 / 0.946 / 0.950 against "own"'s 0.987 / 0.970 / 0.956, at 1.12 / 1.01 / 0.97
times the uniform design's mean-score width against 1.59 / 1.26 / 1.06."""
"""The per-item class predictions a K-class prediction-powered estimate can rectify."""


@dataclass(frozen=True, eq=False)
class GoldMultiClassEstimate(MultiClassEstimate):
    """A K-class estimate from the round's own gold (module docstring): the binary path's design intervals per
    class share, Student's t for a functional."""

    gold: GoldSample | None = None

    @property
    def df(self) -> float:
        """The t's degrees of freedom of the mean score (:meth:`df_of` at the class values): ``k - 1`` for one
        stratum."""
        return self.df_of(self.values)

    def stratum_variances(self, weights: Any) -> FloatArray:
        """Each variance stratum's share of ``Var(w' p)`` (current term; the floor's excess included): the
        ``v_h`` of :meth:`df_of`. Empty without gold."""
        gs, phi = self.gold, self.current
        if gs is None or phi is None:
            return np.zeros(0)
        w = np.asarray(weights, dtype=float)
        g = variance_groups(gs)
        n_g = int(g.max()) + 1 if g.size else 0
        v: FloatArray = np.bincount(g, weights=(phi[gs.index] @ w) ** 2, minlength=n_g) / self.n_items**2
        excess = np.asarray(self.details.get("stratum_excess", np.zeros((n_g, w.size))), dtype=float)
        if excess.shape == (n_g, w.size):
            v = v + excess @ w**2
        return v

    def df_of(self, weights: Any) -> float:
        """Degrees of freedom of the t for ``w' p``: Satterthwaite's over the design's strata,
        ``(sum_h v_h)^2 / sum_h v_h^2 / (k_h - 1)`` with ``v_h`` each stratum's share of the variance
        (:meth:`stratum_variances`); one stratum: ``k - 1``. Inf without gold."""
        gs = self.gold
        if gs is None:
            return math.inf
        g = variance_groups(gs)
        dfs = np.maximum(np.bincount(g).astype(float) - 1, 1.0)
        v = self.stratum_variances(weights)
        if dfs.size == 1 or v.sum() <= 0:
            return float(dfs.sum())
        return float(v.sum() ** 2 / np.sum(v**2 / dfs))

    def intervals(self, confidence_level: float = 0.95, method: str = "design") -> ClassIntervals:
        """Per-class intervals: ``"design"`` (the default; module docstring), or ``"logit"`` / ``"wald"``."""
        gs = self.gold
        if method != "design" or gs is None:
            return super().intervals(confidence_level, "logit" if method == "design" else method)
        se = self.standard_errors()
        kind = "wilson" if self.method == "gold_only" else "t"
        out = []
        eye = np.eye(len(self.classes))
        for c in range(len(self.classes)):
            gc = replace(gs, y=(gs.y == c).astype(np.float64))
            out.append(DesignInterval(float(self.estimate[c]), float(se[c]), gc, kind, df=self.df_of(eye[c]))
                       .interval(confidence_level))
        return ClassIntervals(self.classes, out)

    def functional(self, weights: Any, confidence_level: float = 0.95) -> dict[str, float]:
        """Estimate, SE and ``estimate +- t_df SE`` of ``sum_c weights[c] p_c``."""
        out = super().functional(weights, confidence_level)
        q = float(t_dist.ppf(0.5 + confidence_level / 2, self.df_of(weights)))
        if math.isfinite(out["standard_error"]):
            out["ci_low"] = out["estimate"] - q * out["standard_error"]
            out["ci_high"] = out["estimate"] + q * out["standard_error"]
        return out


def _hero1_posteriors(cur: MultiClassData, cal: MultiClassCalibration) -> FloatArray:
    """Posteriors of every item of the round (unknown labelers' labels left out, items kept: an item with none has
    the prior), unlike HERO-1's alignment, which drops items left without labels."""
    ds = cur.annotations
    index = cal.index_of()
    code = np.array([index.get(str(x), -1) for x in ds.labeler_ids], dtype=np.int64)[ds.labeler]
    keep = code >= 0
    if not keep.any():
        raise DataError(f"current round {cur.name!r}: no labeler is known to the calibration; the hero1 predictor "
                        "needs some")
    counts = np.bincount(ds.annotation_item[keep], minlength=ds.n_items)
    ptr = np.concatenate([[0], np.cumsum(counts)])
    d = confusion_model.make_design(ptr, code[keep], ds.label[keep].astype(np.int64), np.full(ds.n_items, -1),
                                    np.zeros(ds.n_items), cur.n_classes, cal.n_labelers, 1)
    lam = confusion_model.item_loglik(d, np.log(cal.confusion))
    p, _ = confusion_model.solve_simplex(lam)
    p = np.where(np.isfinite(p), p, 1.0 / cur.n_classes)
    eta = lam + np.log(np.maximum(p, 1e-300))
    z = np.exp(eta - eta.max(axis=1, keepdims=True))
    out: FloatArray = z / z.sum(axis=1, keepdims=True)
    return out


def class_predictions(current: MultiClassData, predictor: str = "majority_vote", *,
                      calibration: MultiClassCalibration | None = None) -> FloatArray:
    """Each item's predicted class distribution from its silver labels (n_items, K), by ``predictor``
    (:data:`PREDICTORS`; ``"hero1"`` needs ``calibration``). Gold on the round is not used."""
    cur = as_multiclass(current, "current")
    if predictor == "majority_vote":
        return plurality_votes(cur)
    if predictor == "dawid_skene":
        ds = cur.annotations
        d = confusion_model.make_design(ds.item_ptr, ds.labeler, ds.label, np.full(ds.n_items, -1),
                                        np.zeros(ds.n_items), cur.n_classes, ds.n_labelers, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            out: FloatArray = confusion_model.run_unsupervised(d, "full").w
        return out
    if predictor == "hero1":
        if calibration is None:
            raise HeroEvalError("the hero1 predictor needs a calibration (calibrate_multiclass on the history)")
        if calibration.classes != cur.classes:
            raise HeroEvalError(f"the current round's classes {list(cur.classes)} differ from the calibration's "
                                f"{list(calibration.classes)}")
        return _hero1_posteriors(cur, calibration)
    raise HeroEvalError(f"predictor must be one of {list(PREDICTORS)}, got {predictor!r}")


def tuned_lambda(F: FloatArray, Y: FloatArray, gs: GoldSample) -> float:
    """One PPI++ weight for the whole vector: the trace-minimising slope ``sum_c cov(F_c, Y_c) / sum_c var(F_c)``
    over the gold (design weights ``(1 - pi) / pi^2``, moments within strata), clipped to [0, 1]."""
    v = (1 - gs.pi) / gs.pi**2
    if gs.k < 2 or v.sum() <= 0:
        return 0.0
    g = variance_groups(gs)
    Fc = np.column_stack([centred(F[:, c], v, g) for c in range(F.shape[1])])
    Yc = np.column_stack([centred(Y[:, c], v, g) for c in range(Y.shape[1])])
    var = float(np.sum(v[:, None] * Fc**2))
    if var <= 1e-12 * float(v.sum()):
        return 0.0
    return float(min(max(float(np.sum(v[:, None] * Fc * Yc)) / var, 0.0), 1.0))


def ppi_multiclass(current: MultiClassData, predictor: str = "majority_vote", *,
                   calibration: MultiClassCalibration | None = None, lam: float | None = None,
                   pseudo: float = PSEUDO) -> GoldMultiClassEstimate:
    """The prediction-powered class shares of a round whose gold is on some of its items (module docstring).

    ``lam=None`` tunes the weight (PPI++); ``0`` gives the gold-only shares with the same design-based,
    finite-population variance; ``1`` plain PPI. ``pseudo`` sets the variance floor (``0``: none). Needs at
    least 2 gold items.
    """
    cur = as_multiclass(current, "current")
    ds = cur.annotations
    gs = gold_sample(ds)
    if gs is None or gs.k < 2:
        raise DataError(f"current round {cur.name!r} has {0 if gs is None else gs.k} gold item(s); a prediction-"
                        "powered estimate needs at least 2 (label some of the round's items: hero select)")
    if lam is not None and not 0 <= lam <= 1:
        raise HeroEvalError(f"lam must be in [0, 1], got {lam!r}")
    if not (np.isfinite(pseudo) and pseudo >= 0):
        raise HeroEvalError(f"pseudo must be a number >= 0, got {pseudo!r}")
    K, n = cur.n_classes, ds.n_items
    F = class_predictions(cur, predictor, calibration=calibration) if lam != 0 else np.zeros((n, K))
    Y = np.eye(K)[gs.y.astype(np.int64)]
    FS = F[gs.index]
    lm = tuned_lambda(FS, Y, gs) if lam is None else float(lam)
    w = gs.weights
    R = Y - lm * FS
    p = lm * F.mean(axis=0) + (w @ R) / w.sum()
    g = variance_groups(gs)
    kh = np.bincount(g)[g].astype(float)
    scale = np.sqrt(np.where(kh > 1, kh / np.maximum(kh - 1, 1), 1.0) * (1 - gs.pi) / gs.pi**2)
    phi = np.zeros((n, K))
    phi[gs.index] = scale[:, None] * np.column_stack([centred(R[:, c], w, g) for c in range(K)])
    # the floor per stratum: a stratum whose few gold items show no error (where the judges agree) would otherwise
    # add no variance however many items it stands for
    n_g = int(g.max()) + 1
    kg = np.bincount(g, minlength=n_g).astype(float)
    unit_g = np.bincount(g, weights=(1 - gs.pi) / gs.pi**2, minlength=n_g) / n**2
    raw_g = np.column_stack([np.bincount(g, weights=phi[gs.index, c] ** 2, minlength=n_g) for c in range(K)]) / n**2
    if STRATUM_FLOOR not in STRATUM_FLOORS:
        raise HeroEvalError(f"STRATUM_FLOOR must be one of {list(STRATUM_FLOORS)}, got {STRATUM_FLOOR!r}")
    per_item = pseudo / (kg + 2 * pseudo) if STRATUM_FLOOR == "own" else np.full(n_g, pseudo / (gs.k + 2 * pseudo))
    stratum_excess = np.maximum((unit_g * per_item)[:, None] - raw_g, 0.0)
    excess = stratum_excess.sum(axis=0)
    free = np.setdiff1d(np.arange(n), gs.index)[:K]
    floored = [cur.classes[c] for c in range(K) if excess[c] > 0 and c < free.size]
    for c in range(min(K, free.size)):  # the excess in one entry off the gold per class: the diagonal only
        phi[free[c], c] += n * np.sqrt(excess[c])
    if free.size < K:  # every item is gold (a census of some classes' entries): no room for the excess
        stratum_excess[:, free.size:] = 0.0
    name = "gold_only" if lm == 0 and lam == 0 else f"ppi:{predictor}"
    where = " in some stratum" if n_g > 1 else ""
    notes = (gs.describe(),) + ((f"the variance of class(es) {', '.join(floored)} is floored at {pseudo:g} discordant "
                                 f"gold items at each end{where} (their gold residuals show no spread there)",)
                                if floored else ())
    if predictor == "hero1" and lam != 0 and calibration is not None:
        index = calibration.index_of()
        unknown = np.array([str(x) not in index for x in ds.labeler_ids])
        if unknown.any():  # the predictor's posteriors leave their labels out; the gold keeps the estimate unbiased
            notes += (f"the hero1 predictor leaves out {int(unknown.sum())} labeler(s) unknown to the calibration "
                      f"({int(unknown[ds.labeler].sum())} annotations); the gold rectifies whatever predictor",)
    details = {"lambda": lm, "predictor": predictor, "gold": gs.describe(), "n_gold": gs.k, "floored": floored,
               "strata": n_g, "stratum_excess": stratum_excess.tolist()}
    return GoldMultiClassEstimate(name, cur.classes, cur.values, p, n, ds.n_annotations,
                                  int(np.unique(ds.labeler).size), phi, gold=gs, details=details, notes=notes)


DEFAULT_PREDICTOR = "majority_vote"
"""The predictor of the recommended estimate with current gold, chosen by leave-one-set-out over the six multi-class
shared sets (benchmarks/multiclass_gold.py, k in {20, 50}; the narrowest mean-score interval among predictors whose
per-class coverage averages >= 0.93 on the other sets): majority vote in 6 of 6 folds (docs/multiclass.md). Fixed,
not chosen on the round's own gold, where the choice would bias the interval."""


def gold_estimates(current: MultiClassData, calibration: MultiClassCalibration | None = None
                   ) -> dict[str, GoldMultiClassEstimate]:
    """Every estimate from the round's gold: ``gold_only`` and ``ppi:<predictor>`` for each predictor
    (``hero1`` only with a calibration whose labelers the round shares)."""
    out = {"gold_only": ppi_multiclass(current, lam=0.0)}
    for p in PREDICTORS:
        if p == "hero1" and calibration is None:
            continue
        try:
            out[f"ppi:{p}"] = ppi_multiclass(current, p, calibration=calibration)
        except DataError:
            if p != "hero1":
                raise
    return out


def recommended_with_gold(ests: dict[str, GoldMultiClassEstimate]) -> tuple[str, str]:
    """The recommended estimate among :func:`gold_estimates`' and why: ``ppi:`` :data:`DEFAULT_PREDICTOR`."""
    m = f"ppi:{DEFAULT_PREDICTOR}"
    e = ests[m]
    k = int(e.details["n_gold"])
    reason = (f"{k} expert labels on the round: prediction-powered class shares with the "
              f"{DEFAULT_PREDICTOR.replace('_', ' ')} predictor (lambda {float(e.details['lambda']):.2f}), unbiased for "
              "the round's shares whatever the judges' errors or the shift from the history")
    if k < SMALL_GOLD:
        reason += (f"; fewer than {SMALL_GOLD} gold items: each class's interval contains the gold's own "
                   "Clopper–Pearson interval")
    return m, reason


def gold_recommendation(ests: dict[str, GoldMultiClassEstimate], confidence_level: float = 0.95) -> dict[str, Any]:
    """The ``recommended`` block of ``hero estimate --classes --current-gold --json`` and of the report's page: the
    chosen estimate's :meth:`~MultiClassEstimate.to_dict` with ``chosen``, ``reason`` and ``n_gold``."""
    chosen, reason = recommended_with_gold(ests)
    e = ests[chosen]
    return {"method": "auto", "chosen": chosen, "reason": reason, "n_gold": int(e.details["n_gold"]),
            **{k: v for k, v in e.to_dict(confidence_level).items() if k != "method"}}


PLAN_TARGETS = ("mean_score", "shares")
"""What ``plan_expert_labels_multiclass`` sizes: the mean score's interval, or the widest class share's."""


@dataclass(frozen=True)
class MultiClassGoldPlan:
    """How many expert labels of a K-class round give an interval half-width (:func:`plan_expert_labels_multiclass`).

    ``k_ppi`` / ``k_gold_only``: the fewest labels for ``half_width`` with the recommended prediction-powered
    estimate and with the gold alone (``round_items`` when only labelling every item reaches it: the target is
    the round's own items); ``spread_*``: the per-item variance of the target's residual (``w' S w``; the widest
    class's for ``"shares"``) measured on the history's gold items, before the estimator's floor; ``spread_range``:
    its 80 % chi-square range on those items, and ``k_range`` the labels it implies.
    """

    half_width: float
    round_items: int
    confidence_level: float
    target: str
    k_ppi: int | None
    k_gold_only: int | None
    lam: float
    n_history_gold: int
    spread_ppi: float
    spread_gold_only: float
    spread_range: tuple[float, float]
    k_range: tuple[int | None, int | None]
    target_class: str | None = None
    class_spread_ppi: tuple[float, ...] = ()
    class_spread_gold_only: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()

    def spread_at(self, k: npt.ArrayLike, which: str = "ppi", spread: float | None = None) -> FloatArray:
        """The per-item spread the estimator uses with ``k`` labels: the measured one with the per-class floor of
        :func:`ppi_multiclass` (``PSEUDO`` discordant items at each end) where a class's spread is below it."""
        kk = np.atleast_1d(np.asarray(k, dtype=float))
        s2 = (self.spread_ppi if which == "ppi" else self.spread_gold_only) if spread is None else spread
        d = np.asarray(self.class_spread_ppi if which == "ppi" else self.class_spread_gold_only)
        if d.size == 0:
            return np.full(kk.shape, s2)
        if spread is not None:  # a range of the measured spread: the class spreads scaled with it
            d = d * (spread / max(self.spread_ppi if which == "ppi" else self.spread_gold_only, 1e-300))
        floor = PSEUDO / (kk + 2 * PSEUDO)
        if self.target == "shares":
            out: FloatArray = np.maximum(np.max(d), floor)
            return out
        w2 = np.asarray(self.weights) ** 2
        floored: FloatArray = s2 + np.maximum(floor[:, None] - d[None, :], 0.0) @ w2
        return floored

    def half_width_at(self, k: int, which: str = "ppi", spread: float | None = None) -> float:
        """The predicted half-width with ``k`` uniform expert labels (``which``: ``"ppi"`` or ``"gold_only"``)."""
        ks = np.array([k], dtype=np.int64)
        return float(_half_width(ks, self.round_items, self.spread_at(ks, which, spread), self.confidence_level)[0])

    def fewest(self, which: str = "ppi", spread: float | None = None) -> int | None:
        """The fewest uniform labels whose predicted half-width meets :attr:`half_width`."""
        ks = np.arange(2, self.round_items + 1, dtype=np.int64)
        hw = _half_width(ks, self.round_items, self.spread_at(ks, which, spread), self.confidence_level)
        ok = np.flatnonzero(hw <= self.half_width)
        return int(ks[ok[0]]) if ok.size else None

    def to_dict(self) -> dict[str, Any]:
        return {"half_width": self.half_width, "round_items": self.round_items,
                "confidence_level": self.confidence_level, "target": self.target, "target_class": self.target_class,
                "k_ppi": self.k_ppi, "k_gold_only": self.k_gold_only, "lambda": self.lam,
                "n_history_gold": self.n_history_gold, "spread_ppi": self.spread_ppi,
                "spread_gold_only": self.spread_gold_only, "spread_range": list(self.spread_range),
                "k_range": list(self.k_range), "predictor": DEFAULT_PREDICTOR}

    def summary(self) -> str:
        what = "the mean score" if self.target == "mean_score" else f"the widest class share ({self.target_class})"
        def k_txt(k: int | None) -> str:
            return f"{k}" if k is not None else f"not reached within the round's {self.round_items} items"
        lo, hi = self.k_range
        return (f"expert labels for a {100 * self.confidence_level:g}% half-width of {self.half_width:g} on {what}, "
                f"uniform design, round of {self.round_items} items: {k_txt(self.k_ppi)} with the prediction-powered "
                f"estimate (ppi:{DEFAULT_PREDICTOR}, lambda {self.lam:.2f}); {k_txt(self.k_gold_only)} with the gold "
                f"alone. From the residual spread of the {DEFAULT_PREDICTOR.replace('_', ' ')} predictor on the "
                f"history's {self.n_history_gold} gold items ({self.spread_ppi:.4g} per item against "
                f"{self.spread_gold_only:.4g} for the gold alone; the estimator's floor where it binds); its 80 % "
                f"range on those items gives {k_txt(lo)} to {k_txt(hi)} labels. A round whose judges err more than "
                "on the history's items needs more.")


def _half_width(k: npt.NDArray[np.int64], n: int, s2: FloatArray, level: float) -> FloatArray:
    kf = k.astype(float)
    out: FloatArray = t_dist.ppf(0.5 + level / 2, np.maximum(kf - 1, 1)) * np.sqrt(np.maximum(1 - kf / n, 0.0)
                                                                                  * s2 / kf)
    return out


def plan_expert_labels_multiclass(history: MultiClassData, *, half_width: float, round_items: int,
                                  confidence_level: float = 0.95, target: str = "mean_score") -> MultiClassGoldPlan:
    """The expert labels a K-class round needs for an interval half-width, from the history's gold.

    On the history's gold items the recommended predictor (:data:`DEFAULT_PREDICTOR`, from each item's own silver
    labels) and the gold give the residuals ``R = Y - lam F`` at the PPI++ weight ``lam`` the same formula tunes,
    and their per-item covariance ``S``; a uniform sample of k of the round's n items then has half-width
    ``t_{k-1} sqrt((1 - k/n) w' S w / k)`` for the functional ``w`` (the class values for ``"mean_score"``; each
    class share for ``"shares"``, the widest one taken), with the estimator's per-class floor where a class's
    spread is below it. The gold alone: ``S`` of ``Y``. The spread is the history items'; the plan says so, and
    gives the range its sampling noise allows.
    """
    hist = as_multiclass(history, "history")
    if target not in PLAN_TARGETS:
        raise HeroEvalError(f"target must be one of {list(PLAN_TARGETS)}, got {target!r}")
    if not (0 < half_width < math.inf):
        raise HeroEvalError(f"half_width must be a positive number, got {half_width!r}")
    if round_items < 2:
        raise HeroEvalError(f"round_items must be at least 2, got {round_items!r}")
    if not 0 < confidence_level < 1:
        raise HeroEvalError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    ds = hist.annotations
    idx = np.flatnonzero(ds.gold >= 0)
    if idx.size < 3:
        raise DataError(f"history {hist.name!r} has {idx.size} gold item(s); the plan measures the predictor's "
                        "residual spread on them and needs at least 3")
    K = hist.n_classes
    F = class_predictions(hist.take_items(idx), DEFAULT_PREDICTOR)
    Y = np.eye(K)[ds.gold[idx].astype(np.int64)]
    gs = GoldSample(np.arange(idx.size, dtype=np.int64), ds.gold[idx].astype(float),
                    np.full(idx.size, 0.5), "uniform", 2 * idx.size)  # equal weights: the slope's plain moments
    lam = tuned_lambda(F, Y, gs)
    S_R = np.cov(Y - lam * F, rowvar=False, ddof=1)
    S_Y = np.cov(Y, rowvar=False, ddof=1)
    w = hist.values
    if target == "mean_score":
        s_ppi, s_gold, cls = float(w @ S_R @ w), float(w @ S_Y @ w), None
    else:
        c = int(np.argmax(np.diag(S_R)))
        s_ppi, s_gold, cls = float(S_R[c, c]), float(np.max(np.diag(S_Y))), hist.classes[c]
    m = idx.size - 1
    rng = (s_ppi * m / float(chi2.ppf(0.9, m)), s_ppi * m / float(chi2.ppf(0.1, m)))
    base = MultiClassGoldPlan(float(half_width), int(round_items), float(confidence_level), target, None, None, lam,
                              int(idx.size), s_ppi, s_gold, rng, (None, None), cls,
                              tuple(map(float, np.diag(S_R))), tuple(map(float, np.diag(S_Y))), tuple(map(float, w)))
    return replace(base, k_ppi=base.fewest("ppi"), k_gold_only=base.fewest("gold_only"),
                   k_range=(base.fewest("ppi", rng[0]), base.fewest("ppi", rng[1])))
