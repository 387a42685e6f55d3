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
where it bound. The gold-only shares (``lam = 0``) get the same floor. The
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
(:class:`heroeval.estimators.ppi.DesignInterval`): Student's t with ``k - H``
degrees of freedom (``H`` strata), widened to contain the gold's own
Clopper–Pearson interval (Korn–Graubard, at Kish's effective size) when there
are fewer than :data:`~heroeval.estimators.ppi.SMALL_GOLD` gold items or the
class is absent from the gold or holds all of it; the gold-only shares get
Wilson's interval at the finite-population effective size ``k (n - 1) / (n -
k)``. A functional (the mean score) gets ``estimate +- t SE``.

Not done here, and said so where it matters: the binary path's history prior on
the residual spread, the choice of predictor by cross-fitted
residual spread on the history's gold, and ``hero select`` / ``hero plan`` for K
classes.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import t as t_dist

from heroeval.errors import ConvergenceWarning, DataError, HeroEvalError
from heroeval.estimators.gold_sample import GoldSample, centred, gold_sample, variance_groups
from heroeval.estimators.ppi import PSEUDO, SMALL_GOLD, DesignInterval
from heroeval.multiclass import confusion_model
from heroeval.multiclass.calibration import MultiClassCalibration
from heroeval.multiclass.data import MultiClassData, as_multiclass
from heroeval.multiclass.estimators import MultiClassEstimate

__all__ = ["DEFAULT_PREDICTOR", "PREDICTORS", "GoldMultiClassEstimate", "class_predictions", "gold_estimates",
           "gold_recommendation", "ppi_multiclass", "recommended_with_gold"]

FloatArray = npt.NDArray[np.float64]

PREDICTORS: tuple[str, ...] = ("majority_vote", "dawid_skene", "hero1")
"""The per-item class predictions a K-class prediction-powered estimate can rectify."""


@dataclass(frozen=True, eq=False)
class GoldMultiClassEstimate(MultiClassEstimate):
    """A K-class estimate from the round's own gold (module docstring): the binary path's design intervals per
    class share, Student's t for a functional."""

    gold: GoldSample | None = None

    @property
    def df(self) -> float:
        gs = self.gold
        return math.inf if gs is None else float(max(gs.k - gs.n_strata, 1))

    def intervals(self, confidence_level: float = 0.95, method: str = "design") -> list[tuple[float, float]]:
        """Per-class intervals: ``"design"`` (the default; module docstring), or ``"logit"`` / ``"wald"``."""
        gs = self.gold
        if method != "design" or gs is None:
            return super().intervals(confidence_level, "logit" if method == "design" else method)
        se = self.standard_errors()
        kind = "wilson" if self.method == "gold_only" else "t"
        out = []
        for c in range(len(self.classes)):
            gc = replace(gs, y=(gs.y == c).astype(np.float64))
            out.append(DesignInterval(float(self.estimate[c]), float(se[c]), gc, kind, df=self.df)
                       .interval(confidence_level))
        return out

    def functional(self, weights: Any, confidence_level: float = 0.95) -> dict[str, float]:
        """Estimate, SE and ``estimate +- t_df SE`` of ``sum_c weights[c] p_c``."""
        out = super().functional(weights, confidence_level)
        q = float(t_dist.ppf(0.5 + confidence_level / 2, self.df))
        if math.isfinite(out["standard_error"]):
            out["ci_low"] = out["estimate"] - q * out["standard_error"]
            out["ci_high"] = out["estimate"] + q * out["standard_error"]
        return out


def _votes(cur: MultiClassData) -> FloatArray:
    ds = cur.annotations
    cnt = np.zeros((ds.n_items, cur.n_classes))
    np.add.at(cnt, (ds.annotation_item, ds.label.astype(np.int64)), 1.0)
    top = cnt == cnt.max(axis=1, keepdims=True)
    out: FloatArray = top / top.sum(axis=1, keepdims=True)
    return out


def _hero1_posteriors(cur: MultiClassData, cal: MultiClassCalibration) -> FloatArray:
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
        return _votes(cur)
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
    floor = gs.k * float(np.mean((1 - gs.pi) / gs.pi**2)) / n**2 * pseudo / (gs.k + 2 * pseudo)
    excess = np.maximum(floor - np.sum(phi**2, axis=0) / n**2, 0.0)
    free = np.setdiff1d(np.arange(n), gs.index)[:K]
    floored = [cur.classes[c] for c in range(K) if excess[c] > 0 and c < free.size]
    for c in range(min(K, free.size)):  # the excess in one entry off the gold per class: the diagonal only
        phi[free[c], c] += n * np.sqrt(excess[c])
    name = "gold_only" if lm == 0 and lam == 0 else f"ppi:{predictor}"
    return GoldMultiClassEstimate(name, cur.classes, cur.values, p, n, ds.n_annotations,
                                  int(np.unique(ds.labeler).size), phi, gold=gs, details={"lambda": lm, "predictor": predictor, "gold": gs.describe(),
                                            "n_gold": gs.k, "floored": floored},
                              notes=(gs.describe(),) + ((f"the variance of class(es) {', '.join(floored)} is "
                                                         f"floored at {pseudo:g} discordant gold items at each end "
                                                         "(their gold residuals show no spread)",) if floored else ()))


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
