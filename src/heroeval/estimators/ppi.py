"""A few expert labels in the current round: prediction-powered estimates (PPI++) with HERO's posteriors.

When some current items carry gold, drawn at random (uniformly, or by a
known design with inclusion probabilities ``pi_i``), a predictor ``f_i`` of
each item's gold label, computed from its silver labels, is *rectified* by
the gold (Angelopoulos et al. 2023; power tuning, PPI++: Angelopoulos, Duchi
and Zrnic 2023):

    theta_hat = lam * mean_U(f) + sum_S w_i (y_i - lam f_i) / sum_S w_i,    w_i = 1 / pi_i

``U`` the round's n items, ``S`` the k gold items (a Hajek mean; with a
uniform sample ``w`` is constant and the second term is the gold items' mean
of ``y - lam f``). Conditional on the silver labels, the gold sample is
random, so theta_hat is unbiased for the round's gold rate (up to the O(1/k)
of a tuned ``lam``) whatever the rate shift, pool shift or labeler
dependence: the history only shapes ``f``, and a better ``f`` only narrows
the interval. The predictor is the item's posterior P(Y = 1 | labels) under
the calibration's two-coin model at HERO-1's estimate of the round's rate
(``predictor="hero1"``), at the history's rate (``"prior"``), or the
majority vote (``"majority_vote"``, what ppi_py and GLIDE use).

**Target and variance.** The target is the rate of the round's items (the
finite population the gold was drawn from). With residuals
``r_i = y_i - lam f_i`` and their Hajek mean ``r_bar``,

    Var_current = (1/n^2) * k/(k-1) * sum_S (1 - pi_i) (r_i - r_bar)^2 / pi_i^2

which for a uniform sample is ``(1 - k/n) s_r^2 / k``; under a stratified
design the residuals are centred within the strata instead
(:mod:`heroeval.estimators.gold_sample`), and the t below has ``k - H``
degrees of freedom for H strata. ``lam`` minimises it:
the weighted least-squares slope of y on f over S with weights
``(1 - pi_i) / pi_i^2``, clipped to [0, 1] (``lam = 0`` is the gold-only
mean, ``lam = 1`` plain PPI). For the posterior predictors the slope is
moderated by the same predictor's moments on the history's gold items, worth
:data:`TUNING_PRIOR_ITEMS` of them (:func:`tuned_lambda`, :func:`tuning_prior`), so
that a round whose sampled gold is all one class (slope 0 on its own) still
uses the judges; ``details["lambda_round"]`` keeps the round's own slope.

**History term.** ``f`` depends on the calibration's parameters ``theta``
(and, for ``"hero1"``, on HERO-1's estimate, itself a function of theta
with gradient ``c_hero1``), so

    d theta_hat / d theta = lam * (mean_U df/dtheta - Hajek_S df/dtheta),
    df_i/dtheta = f_i (1 - f_i) (dL_i/dtheta + c_hero1 / (mu (1 - mu)))

and its variance is ``c' V c`` with ``V`` the calibration's
``parameter_covariance``. It is small (the two means estimate the same
thing), but it is included.

**Small-sample safeguards of the variance.** With a few dozen gold items the
residuals' spread is itself noisy, and often near zero because the sample
holds no item where the predictor errs. Two safeguards (:func:`rectify`),
applied to each stratum's spread under a stratified design (a stratum that
the design samples thinly, such as the band where the posterior is near 0,
often shows no error on its few gold items, and would otherwise add no
variance however many items it stands for):

* a *history prior* (a moderated variance, as in Smyth's limma): the spread
  is shrunk towards the same predictor's residual spread on the history's
  gold items (:func:`history_prior`), worth :data:`PRIOR_ITEMS` gold items
  (at most the history's gold count): ``(k s^2 + m s_h^2) / (k + m)``. A
  calibration without the history's gold scores (a file written before
  they were kept) has no prior; ``details`` say whether it was used;
* a floor at the spread of :data:`PSEUDO` discordant gold items at each end
  of the residual's range.

The constants were chosen by leave-one-set-out over the shared data sets
(``benchmarks/current_gold_loso.py``; docs/current_gold.md).

**Interval and the small-sample rule.** ``theta_hat +- t_{k-1} * SE``,
clipped to [0, 1]. With fewer than :data:`SMALL_GOLD` gold items, or gold
items all of one class (where the residuals' spread says little), the
interval is widened to contain the Clopper–Pearson interval of the gold
alone (Korn–Graubard: at Kish's effective size under a design). The
gold-only estimate (``lam = 0``) gets Wilson's interval at the effective
size ``k (n - 1) / (n - k)`` (the finite-population correction).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit
from scipy.stats import chi2

from heroeval.errors import DataError, HeroEvalError
from heroeval.estimators.common import align, check_calibration, check_current, log_likelihood_ratios
from heroeval.estimators.design_interval import ONE_CLASS_HULL, SMALL_GOLD, DesignInterval
from heroeval.estimators.gold_sample import GoldSample, centred, gold_sample, variance_groups
from heroeval.estimators.methods import gold_proportion, gold_proportion_rates, gold_proportion_variances, hero1
from heroeval.estimators.results import EstimateResult, Influence
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration

__all__ = [
    "ALL_GOLD_METHODS",
    "GOLD_METHODS",
    "ONE_CLASS_HULL",
    "PREDICTORS",
    "SMALL_GOLD",
    "PredictorChoice",
    "choose_predictor",
    "gold_estimates",
    "gold_only",
    "history_prior",
    "history_scores",
    "item_posterior",
    "ppi",
    "rectify",
    "split_methods",
    "tuned_lambda",
    "tuning_prior",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Predictor = Literal["hero1", "prior", "majority_vote", "gold_proportion"]

PREDICTORS = ("hero1", "prior", "majority_vote", "gold_proportion")
GOLD_METHODS = ("hero1_ppi", "gp_ppi", "mv_ppi", "gold_only")
"""The estimates that use current gold, in the order ``method="all"`` adds them when the round has gold."""
METHOD_OF = {"hero1": "hero1_ppi", "prior": "prior_ppi", "majority_vote": "mv_ppi", "gold_proportion": "gp_ppi"}
_MU_CLIP = 1e-6
PSEUDO = 0.25
"""Pseudo-discordant gold items at each end of the residual's range in the variance floor, without a history
prior (Agresti–Coull's ``z^2/2 = 1.92`` at first, 1.5 chosen by the first leave-one-set-out study with k >= 20,
0.25 by the second, k in {10, 20, 50, 100}, 12 of 12 held-out sets)."""
PSEUDO_WITH_PRIOR = 0.25
"""The floor's pseudo-items when the history prior is used: small, as the prior keeps the spread from zero, but
positive, so that a predictor without error on the history's gold and on the round's still gets a variance."""
PRIOR_ITEMS = 10.0
"""What the history prior on the residual spread is worth, in gold items (at most the history's gold count); 20
before the second leave-one-set-out study chose 10 (12 of 12 held-out sets)."""
TUNING_PRIOR_ITEMS = 20.0
"""What the history's moments are worth in the tuning slope's prior (:func:`tuning_prior`), in gold items (at most
the history's gold count; the variance prior's worth before the second study, not tuned apart)."""
HISTORY_BANDS = 4
"""Bands of the predictor in which an unequal-probability design's history prior is measured (:func:`history_prior`;
the stratified design's default strata, heroeval.inference.select.DEFAULT_STRATA, not tuned)."""
PRIOR_CONFLICT_LEVEL = 0.05
"""The prior is dropped when the round's residual spread exceeds the history's at this one-sided level."""
STRATUM_FLOORS = ("own", "shared")
STRATUM_FLOOR = "own"
"""The floor of each stratum's spread under a stratified design (:func:`rectify`): ``"own"``, ``pseudo`` items at each
end of the stratum's own ``k_h`` gold items (``pseudo / (k_h + 2 pseudo)`` per unit); ``"shared"``, the pooled
design's ``pseudo`` items shared among the strata in proportion to their gold (``pseudo / (k + 2 pseudo)`` per
unit, so that the strata's floors add up to the pooled one). One stratum: the same rule either way."""
STRATUM_PRIORS = ("own", "shared")
STRATUM_PRIOR = "own"
"""The history prior's worth in each stratum under a stratified design: ``"own"``, ``m`` items in every stratum;
``"shared"``, ``m k_h / k`` (the prior's ``m`` items shared in proportion to the strata's gold). One stratum: the
same rule either way."""


# ---------------------------------------------------------------------------
# Predictors
# ---------------------------------------------------------------------------


def item_posterior(L: FloatArray, mu: float) -> FloatArray:
    """P(Y = 1 | labels) under the two-coin model at prior rate ``mu``: sigmoid(logit mu + L)."""
    m = min(max(float(mu), _MU_CLIP), 1 - _MU_CLIP)
    out: FloatArray = expit(logit(m) + L)
    return out


def _majority(data: AnnotationSet) -> FloatArray:
    ones = np.add.reduceat(data.label.astype(np.int64), data.item_ptr[:-1])
    n = np.diff(data.item_ptr)
    out: FloatArray = np.where(2 * ones > n, 1.0, np.where(2 * ones == n, 0.5, 0.0))
    return out


def _dL_sums(data: AnnotationSet, to_calib: IntArray, alpha: FloatArray, beta: FloatArray, item_w: FloatArray,
             n_labelers: int) -> FloatArray:
    """``sum_i item_w[i] * dL_i/d(alpha, beta)`` over the calibration's 2J labeler parameters."""
    a = np.clip(np.asarray(alpha, dtype=float), 1e-9, 1 - 1e-9)[to_calib[data.labeler]]
    b = np.clip(np.asarray(beta, dtype=float), 1e-9, 1 - 1e-9)[to_calib[data.labeler]]
    z = data.label.astype(float)
    ga = z / a - (1 - z) / (1 - a)
    gb = z / (1 - b) - (1 - z) / b
    wa = item_w[data.annotation_item]
    lab = to_calib[data.labeler]
    return np.concatenate([np.bincount(lab, weights=wa * ga, minlength=n_labelers),
                           np.bincount(lab, weights=wa * gb, minlength=n_labelers)])


# ---------------------------------------------------------------------------
# Rectification
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Rectified:
    """theta_hat = lam * mean_U(f) + Hajek_S(y - lam f), with its current-round variance."""

    estimate: float
    lam: float
    mean_f: float
    rectifier: float
    variance: float
    phi: FloatArray  # per-item current influence (zero off the gold), variance = phi.phi / n^2
    residual: FloatArray  # y - lam f on the gold items
    variance_raw: float = math.nan  # the design-based variance before the history prior and the floor
    floor_unit: float = math.nan  # k * mean((1 - pi) / pi^2) / n^2: the floor is floor_unit * pseudo / (k + 2 pseudo)
    prior_variance: float = math.nan  # the history prior's residual spread (nan: no prior)
    prior_items: float = 0.0  # what the prior is worth, in gold items (0: not used)
    prior_conflict: bool = False  # the round's spread contradicted the prior (in some stratum), which was dropped there
    groups: int = 1  # the strata the residuals were centred in (1 without a stratified design)
    satterthwaite_df: float = math.nan  # the t's degrees of freedom over the strata (nan: k - 1 + the prior's worth)

    @property
    def df(self) -> float:
        """Degrees of freedom of the t interval: ``k - 1`` plus the prior's worth when it was used (moderated t);
        under a stratified design, Satterthwaite's over the strata's moderated spreads (each ``k_h - 1`` plus the
        prior's worth where it was used there)."""
        if math.isfinite(self.satterthwaite_df):
            return self.satterthwaite_df
        return float(max(self.residual.size - 1, 1)) + self.prior_items

def tuned_lambda(f: FloatArray, gs: GoldSample, prior: tuple[float, float, float] | None = None) -> float:
    """PPI++ power tuning: the weighted LS slope of y on f over the gold, weights (1 - pi)/pi^2, clipped to [0, 1].

    ``prior=(c_h, v_h, m)`` moderates the slope with the same predictor's
    covariance with the gold ``c_h`` and variance ``v_h`` on the history's gold
    items, worth ``m`` gold items (:func:`tuning_prior`):
    ``(k c + m c_h) / (k v + m v_h)`` with ``c, v`` the round's own weighted
    moments. Without it a round whose sampled gold is all one class has
    ``c = 0`` and the tuning drops to 0: the judges are ignored and the estimate
    is the gold's mean (0 when every sampled label is 0). Any fixed weight keeps
    the estimate unbiased; a weight borrowed from the history only changes its
    variance, which the round's residuals then measure.
    """
    fs = f[gs.index]
    v = (1 - gs.pi) / gs.pi**2
    c_h, v_h, m = (0.0, 0.0, 0.0) if prior is None else prior
    k = float(gs.k)
    if gs.k < 2 or v.sum() <= 0:
        k, c, var = 0.0, 0.0, 0.0
    else:  # moments within the design's strata (the whole sample without)
        g = variance_groups(gs)
        fc, yc = centred(fs, v, g), centred(gs.y, v, g)
        var = float(np.sum(v * fc**2) / v.sum())
        c = float(np.sum(v * fc * yc) / v.sum())
    den = k * var + m * v_h
    if den <= 1e-12 * max(k + m, 1e-300):
        return 0.0
    return float(min(max((k * c + m * c_h) / den, 0.0), 1.0))


def rectify(f: FloatArray, gs: GoldSample, lam: float | None = None, pseudo: float = PSEUDO,
            prior: tuple[float, float] | None = None) -> Rectified:
    """The prediction-powered estimate of the round's rate from predictor ``f`` (one per item) and the gold sample.

    ``lam=None`` tunes it (PPI++); ``lam=0`` is the gold items' (Hajek) mean,
    ``lam=1`` plain PPI. The variance is the design-based one (module
    docstring), with two small-sample safeguards:

    * ``prior=(s2_h, m)``: the residual spread ``s^2`` of the gold is shrunk
      towards a prior spread ``s2_h`` worth ``m`` gold items (``s2_h`` one
      per gold item under an unequal-probability design, weighted by the
      items' variance factors: :func:`history_prior` with ``at``),
      ``(k s^2 + m s2_h) / (k + m)``, and the interval's t gets ``k - 1 + m``
      degrees of freedom (Smyth's moderated variance and t, limma 2004).
      :func:`history_prior` gives the predictor's spread on the history's
      gold items. The prior is dropped when the gold contradicts it: when
      ``(k - 1) s^2 / s2_h`` exceeds the chi-squared quantile at
      :data:`PRIOR_CONFLICT_LEVEL` (the predictor errs more on this round
      than on the history); the floor is then ``pseudo=PSEUDO``'s;
    * a floor at the spread of ``pseudo`` discordant gold items at each end
      of the residual's range, ``pseudo / (k + 2 pseudo)`` per item at the
      sample's mean variance factor: with few gold items the sample often
      holds no item where the predictor errs, and its spread is then near
      zero whatever the predictor's error rate (Agresti and Coull's
      pseudo-successes play the same part for a proportion).

    Under a stratified design both act on each stratum's spread ``s_h^2``
    (Smyth's prior is per variance estimated; the prior of a stratum is the
    weighted mean of its items' ``s2_h``, the conflict test has ``k_h - 1``
    degrees of freedom, the floor counts ``k_h`` items), and the t's degrees
    of freedom are Satterthwaite's over the strata. Pooled over the strata,
    the safeguards left a thinly sampled stratum whose gold items showed no
    error with no variance: the stratified interval covered 0.887 at k = 100
    (cells down to 0.73) on the shared sets, 0.960 (lowest 0.90) per stratum
    (docs/current_gold.md, section 7). One stratum (no design, or a design
    without strata) is the unchanged single-sample rule.

    ``pseudo=0`` and ``prior=None`` give the plain design-based variance.
    """
    f = np.asarray(f, dtype=float)
    if f.shape != (gs.n,):
        raise HeroEvalError(f"predictor has shape {f.shape}, expected ({gs.n},)")
    if not (math.isfinite(pseudo) and pseudo >= 0):
        raise HeroEvalError(f"pseudo must be a number >= 0, got {pseudo!r}")
    c = (1 - gs.pi) / gs.pi**2  # each gold item's variance factor (1 - pi) / pi^2
    s2_h, m = math.nan, 0.0
    if prior is not None:
        s2_items = np.asarray(prior[0], dtype=float)
        m = float(prior[1])
        if s2_items.ndim == 1 and s2_items.shape == (gs.k,) and c.sum() > 0:
            # per gold item (an unequal-probability design): the spread this design would show with the history's
            s2_h = float(np.sum(c * s2_items) / c.sum())
        elif s2_items.ndim == 0:
            s2_h = float(s2_items)
        if not (math.isfinite(s2_h) and s2_h >= 0 and math.isfinite(m) and m >= 0) or np.any(s2_items < 0):
            raise HeroEvalError("prior must be (residual variance >= 0, or one per gold item, items >= 0), got "
                                f"{prior!r}")
    lm = tuned_lambda(f, gs) if lam is None else float(lam)
    w = gs.weights
    r = gs.y - lm * f[gs.index]
    rbar = float(np.sum(w * r) / np.sum(w))
    mean_f = float(np.mean(f))
    k, n = gs.k, gs.n
    phi = np.zeros(n)
    if k < 2:
        return Rectified(lm * mean_f + rbar, lm, mean_f, rbar, math.nan, phi, r, prior_variance=s2_h)
    g = variance_groups(gs)  # residuals centred within strata: the stratified variance sum_h (1 - f_h) N_h^2 s_h^2 / k_h
    n_groups = int(g.max()) + 1
    kg = np.bincount(g, minlength=n_groups).astype(float)
    kh = kg[g]
    phi[gs.index] = np.sqrt(np.where(kh > 1, kh / np.maximum(kh - 1, 1), 1.0) * c) * centred(r, w, g)
    raw_g = np.bincount(g, weights=phi[gs.index] ** 2, minlength=n_groups) / n**2
    var_raw = float(raw_g.sum())
    unit_g = np.bincount(g, weights=c, minlength=n_groups) / n**2  # per unit of residual spread (uniform: (1-k/n)/k)
    unit = float(unit_g.sum())
    # the safeguards act on each stratum's spread: a stratum whose few gold items show no error has a spread near
    # zero whatever the predictor's error rate there, and would add no variance (the per-stratum Wald problem)
    if prior is not None and s2_items.ndim == 1 and s2_items.shape == (gs.k,):
        s0_g = np.bincount(g, weights=c * s2_items, minlength=n_groups) / np.where(unit_g > 0, unit_g * n**2, 1.0)
    else:
        s0_g = np.full(n_groups, s2_h)
    if STRATUM_FLOOR not in STRATUM_FLOORS or STRATUM_PRIOR not in STRATUM_PRIORS:
        raise HeroEvalError(f"STRATUM_FLOOR must be one of {list(STRATUM_FLOORS)} and STRATUM_PRIOR one of "
                            f"{list(STRATUM_PRIORS)}, got {STRATUM_FLOOR!r}, {STRATUM_PRIOR!r}")
    floor_k = kg if STRATUM_FLOOR == "own" else np.full(n_groups, float(k))  # the floor's items (one stratum: k)
    m_h = np.full(n_groups, m) if STRATUM_PRIOR == "own" else m * kg / k  # the prior's worth in each stratum
    df_g = np.maximum(kg - 1, 1.0)
    m_g = np.zeros(n_groups)
    pseudo_g = np.full(n_groups, float(pseudo))
    target_g, conflict = raw_g.copy(), False
    for h in range(n_groups):
        if unit_g[h] <= 0:
            continue
        s2 = raw_g[h] / unit_g[h]
        if prior is not None and m > 0:
            q = float(chi2.ppf(1 - PRIOR_CONFLICT_LEVEL, df_g[h]))
            clash = (s2 > 0) if s0_g[h] <= 0 else df_g[h] * s2 / s0_g[h] > q
            if clash:
                conflict, pseudo_g[h] = True, PSEUDO
            else:
                m_g[h] = m_h[h]
                target_g[h] = unit_g[h] * (kg[h] * s2 + m_h[h] * s0_g[h]) / (kg[h] + m_h[h])
        elif prior is not None:
            pseudo_g[h] = PSEUDO
        target_g[h] = max(target_g[h], unit_g[h] * pseudo_g[h] / (floor_k[h] + 2 * pseudo_g[h]))
    target = float(target_g.sum())
    m_used = m if np.any(m_g > 0) else 0.0
    dfs = df_g + m_g
    sat = float(target**2 / np.sum(target_g**2 / dfs)) if target > 0 else float(dfs.sum())
    if target < var_raw:  # the prior narrows: the gold items' influence values shrink in proportion
        phi[gs.index] *= math.sqrt(target / var_raw)
    elif target > var_raw:  # the excess sits in one entry off the gold
        free = np.setdiff1d(np.arange(n), gs.index)[:1]
        if free.size:
            phi[free] = n * math.sqrt(target - var_raw)
        else:
            target = var_raw
    return Rectified(lm * mean_f + rbar, lm, mean_f, rbar, target, phi, r, var_raw, unit, s2_h, m_used, conflict,
                     n_groups, sat if n_groups > 1 else math.nan)


Scores = tuple[FloatArray, FloatArray, int]
"""The history's gold labels, a predictor's log-likelihood ratios on those items, and the history's gold count."""


def history_scores(calibration: Calibration, predictor: str = "hero1") -> Scores | None:
    """What the priors of a posterior predictor are computed on: the history's gold items and their ratios.

    ``"hero1"`` / ``"prior"``: the calibration's gold scores (the EM's
    sensitivities, in-sample). ``"gold_proportion"``: the model checks'
    held-out gold items with the gold-proportion rates of the other folds
    (cross-fitted: in-sample, each item's own labels would be in its
    labelers' counts); ``None`` without the checks.
    """
    if predictor == "gold_proportion":
        ch = calibration.checks
        if ch is None or "gold_proportion:llr" not in ch.items:
            return None
        y = np.asarray(ch.items["y"], dtype=float)
        return y, np.asarray(ch.items["gold_proportion:llr"], dtype=float), int(y.size)
    gsc = calibration.gold_scores
    return None if gsc is None else (gsc.y, gsc.llr, gsc.n_gold)


def tuning_prior(calibration: Calibration, mu: float, items: float | None = None,
                 scores: Scores | None = None) -> tuple[float, float, float] | None:
    """The posterior predictor's covariance with the gold and its variance on the history's gold items, and their
    worth in gold items: the prior of :func:`tuned_lambda`.

    The predictor is ``sigmoid(logit mu + L)`` at the round's rate ``mu``
    over the calibration's kept gold items (:func:`history_prior` uses the
    same items); the worth is ``min(items, n_gold)`` (default
    :data:`TUNING_PRIOR_ITEMS`). ``None`` without the record. ``scores``: other items
    and ratios (:func:`history_scores`), as for the gold-proportion predictor.
    """
    sc = history_scores(calibration) if scores is None else scores
    if sc is None or sc[0].size < 2:
        return None
    y, llr, n_gold = sc
    f = item_posterior(llr, mu)
    fc = f - f.mean()
    c = float(np.mean(fc * (y - y.mean())))
    v = float(np.mean(fc**2))
    return c, v, min(TUNING_PRIOR_ITEMS if items is None else float(items), float(n_gold))


@dataclass(frozen=True)
class PredictorChoice:
    """Which posterior the estimates with current gold rectify, chosen on the history's held-out gold, and why."""

    predictor: str  # "hero1" or "gold_proportion"
    spreads: dict[str, float]  # each candidate's cross-fitted residual spread at its best lambda
    n_gold: int
    reason: str

    @property
    def method(self) -> str:
        return METHOD_OF[self.predictor]


def choose_predictor(calibration: Calibration) -> PredictorChoice:
    """The posterior predictor with the smaller cross-fitted residual spread on the history's held-out gold.

    A prediction-powered estimate's current variance is ``(1/k - 1/n)`` times
    the residual spread ``Var(y - lam f)`` (at the best ``lam``), so the
    predictor to rectify is the one whose spread is smaller on gold items it
    did not see. The model checks keep, per held-out gold item, its label and
    its log-likelihood ratio under HERO's sensitivities (``hero1@w:llr``, the
    calibration's weight) and under the gold-proportion rates
    (``gold_proportion:llr``), each fitted on the other folds; each
    predictor is the posterior at the held-out gold's rate. The choice
    depends on the calibration alone, so every round estimated with it uses
    the same predictor (``hero compare`` and the store's trend give the same
    answer as ``hero estimate``). Without the checks: HERO-1's posterior.
    """
    ch = calibration.checks
    own_w = float(calibration.settings.get("history_weight", 1.0))
    keys = {"gold_proportion": "gold_proportion:llr"}
    for w in (own_w, 1.0):
        if ch is not None and f"hero1@{w:g}:llr" in ch.items:
            keys["hero1"] = f"hero1@{w:g}:llr"
            break
    if ch is None or "y" not in ch.items or len(keys) < 2 or keys["gold_proportion"] not in ch.items:
        return PredictorChoice("hero1", {}, 0, "HERO-1's posterior (no model checks to compare predictors on: "
                                               "hero calibrate saves them)")
    y = np.asarray(ch.items["y"], dtype=float)
    ybar = float(y.mean())
    if y.size < 3 or not 0 < ybar < 1:
        return PredictorChoice("hero1", {}, int(y.size), "HERO-1's posterior (too few or one-class held-out gold)")
    spreads: dict[str, float] = {}
    for name in ("hero1", "gold_proportion"):
        f = item_posterior(np.asarray(ch.items[keys[name]], dtype=float), ybar)
        fc = f - f.mean()
        sxx = float(fc @ fc)
        lam = min(max(float(fc @ (y - ybar)) / sxx, 0.0), 1.0) if sxx > 1e-12 else 0.0
        spreads[name] = float(np.var(y - lam * f, ddof=1))
    best = "gold_proportion" if spreads["gold_proportion"] < spreads["hero1"] else "hero1"
    what = {"hero1": "HERO-1's posterior", "gold_proportion": "the gold-proportion rates' posterior"}[best]
    reason = (f"{what}: the smaller residual spread on the model checks' {y.size} held-out gold items "
              f"(HERO-1's posterior {spreads['hero1']:.4f}, gold-proportion's {spreads['gold_proportion']:.4f}, "
              "cross-fitted)")
    return PredictorChoice(best, spreads, int(y.size), reason)


def history_prior(calibration: Calibration, lam: float, mu: float, items: float | None = None,
                  scores: Scores | None = None, at: FloatArray | None = None,
                  bands_of: FloatArray | None = None) -> tuple[Any, float] | None:
    """The posterior predictor's residual spread on the history's gold items, and its worth in gold items.

    The calibration keeps its history's gold items' labels and
    log-likelihood ratios ``L`` (:class:`heroeval.stage_a.gold.GoldScores`,
    at most 2,000 of them). The residual is ``y - lam * sigmoid(logit mu + L)``
    (the predictor at rate ``mu``), its spread the sample variance over those
    items. It is worth ``min(items, n_gold)`` gold items (``items`` default
    :data:`PRIOR_ITEMS`): a prior never counts for more items than the
    history has gold. ``None`` when the calibration has no such record (a
    calibration file written before it was kept). ``scores`` as for :func:`tuning_prior`.

    ``at`` (the gold items' predictor values, for a design whose items have
    unequal inclusion probabilities): the spread is given per item instead,
    the history's residual spread within the item's band of the predictor
    (about the band's mean, as the stratified variance centres within strata) (:data:`HISTORY_BANDS` equal-count bands of
    ``bands_of``, the round's values, as ``hero select --by posterior`` cuts
    them; default the history's; a band with fewer than two history items
    takes the overall spread). Such a design samples the bands unequally (Neyman's
    samples the uncertain items more), so one spread for all its items would
    weigh the history's errors at the wrong items (measured on the bundled
    panel: a stratified sample's variance doubled by a scalar prior).
    """
    sc = history_scores(calibration) if scores is None else scores
    if sc is None or sc[0].size < 2:
        return None
    y, llr, n_gold = sc
    fh = item_posterior(llr, mu)
    r = y - lam * fh
    s2 = float(np.var(r, ddof=1))
    worth = min(PRIOR_ITEMS if items is None else float(items), float(n_gold))
    if at is None:
        return s2, worth
    edges = np.quantile(fh if bands_of is None else np.asarray(bands_of, float), np.linspace(0, 1, HISTORY_BANDS + 1)[1:-1])
    hb, ab = np.searchsorted(edges, fh, side="right"), np.searchsorted(edges, np.asarray(at, float), side="right")
    cnt = np.bincount(hb, minlength=HISTORY_BANDS)
    mean = np.bincount(hb, weights=r, minlength=HISTORY_BANDS) / np.maximum(cnt, 1)
    sq = np.bincount(hb, weights=(r - mean[hb]) ** 2, minlength=HISTORY_BANDS)
    band = np.where(cnt >= 2, sq / np.maximum(cnt - 1, 1), s2)
    return band[ab], worth


# ---------------------------------------------------------------------------
# Estimators
# ---------------------------------------------------------------------------


def _need_gold(data: AnnotationSet) -> GoldSample:
    gs = gold_sample(data)
    if gs is None:
        raise DataError(f"the current round {data.name!r} has no gold items: estimates with current gold need "
                        "some (read_annotations(current, gold=...); CLI --current-gold)")
    return gs


def _result(method: str, est: float, data: AnnotationSet, gs: GoldSample, rect: Rectified, infl: Influence,
            kind: str, details: dict[str, Any], notes: tuple[str, ...]) -> EstimateResult:
    clipped = min(max(est, 0.0), 1.0)
    if clipped != est:
        notes = (*notes, f"the rectified estimate {est:.4f} was clipped to [0, 1]")
    test = DesignInterval(clipped, math.sqrt(max(infl.variance(), 0.0)) if math.isfinite(infl.variance())
                          else math.nan, gs, kind, df=rect.df if kind == "t" else None,
                          prior_used=rect.prior_items > 0)
    g = variance_groups(gs)
    cen = centred(rect.residual, gs.weights, g) if rect.residual.size == gs.k else np.zeros(0)
    m2 = float(np.sum(gs.weights * cen**2) / np.sum(gs.weights)) if cen.size > 1 else 0.0
    # the residuals' excess kurtosis (design-weighted, centred within strata): large when the predictor's errors are
    # few and large, where the t interval's variance estimate is least stable (recorded, not yet used)
    kurt = float(np.sum(gs.weights * cen**4) / np.sum(gs.weights)) / m2**2 - 3.0 if m2 > 1e-300 else math.nan
    if gs.n_strata > 1 and kind == "t":
        flat = [h for h in range(int(g.max()) + 1) if np.count_nonzero(g == h) >= 2 and np.all(np.abs(cen[g == h]) < 1e-6)]
        if flat:
            source = ("the history's residual spread in their band and the floor" if rect.prior_items > 0
                      else "the floor alone")
            notes = (*notes, f"{len(flat)} of {int(g.max()) + 1} strata show no residual spread on their gold items: "
                             f"their variance is taken from {source}, which no sample of theirs has checked")
    if test.fallback and kind == "t":
        why = (f"only {gs.k} gold items" if gs.k < SMALL_GOLD else "the gold items are all of one class"
               if test.one_class else "no variance estimate")
        notes = (*notes, f"{why}: the interval is widened to contain the gold's own Clopper–Pearson interval")
    return EstimateResult(
        method=method, estimate=clipped, n_items=data.n_items, n_annotations=data.n_annotations,
        n_labelers=int(np.unique(data.labeler).size), status="ok",
        details={"n_gold": gs.k, "design": gs.design, "lambda": rect.lam, "mean_predictor": rect.mean_f,
                 "rectifier": rect.rectifier, "gold_mean": test.gold_mean, "gold_effective_n": test.n_eff,
                 "small_sample_rule": bool(test.fallback), "interval": test.label,
                 "variance_current_raw": rect.variance_raw, "variance_floor_unit": rect.floor_unit,
                 "variance_current": rect.variance, "df": test.df, "residual_excess_kurtosis": kurt,
                 "variance_history": infl.variance_history(), **details},
        notes=(gs.describe(), *notes), influence=infl, test=test,
    )


def ppi(
    current: AnnotationSet,
    calibration: Calibration | None = None,
    *,
    predictor: Predictor = "hero1",
    lam: float | None = None,
    exclude_new_labelers: bool = False,
    prior: float | None = None,
) -> EstimateResult:
    """The round's rate from its gold items rectifying a predictor of each item's gold label (PPI++).

    Parameters
    ----------
    current : AnnotationSet
        The current round with gold on some items (a uniform random sample,
        or drawn by a design recorded with :meth:`AnnotationSet.with_design`).
    calibration : Calibration
        Needed for the posterior predictors (``"hero1"``, ``"prior"``).
    predictor : {"hero1", "prior", "majority_vote"}
        ``"hero1"``: P(Y = 1 | labels) under the calibration's two-coin model
        at HERO-1's estimate of the round's rate (method ``"hero1_ppi"``);
        ``"prior"``: at the history's rate (or ``prior``; ``"prior_ppi"``);
        ``"majority_vote"``: the item's majority label (``"mv_ppi"``, PPI++
        as ppi_py runs it).
    lam : float, optional
        Fixed rectification weight; default tuned (PPI++).

    The module docstring gives the estimator, its variance (current and
    history parts) and the small-sample rule.

    Examples
    --------
    >>> import heroeval as he
    >>> hist = he.AnnotationSet.from_arrays(
    ...     [1, 2, 3, 4], ["a"] * 4, [1, 1, 0, 0], gold=([1, 2, 3, 4], [1, 0, 0, 0]))
    >>> cal = he.calibrate(hist)
    >>> cur = he.AnnotationSet.from_arrays([5, 6, 7, 8], ["a"] * 4, [1, 1, 0, 0], gold=([5, 7], [1, 0]))
    >>> round(ppi(cur, cal, lam=0.0).estimate, 6)   # lam = 0: the gold items' mean
    0.5
    """
    data = check_current(current)
    if predictor not in PREDICTORS:
        raise HeroEvalError(f"predictor must be one of {list(PREDICTORS)}, got {predictor!r}")
    if lam is not None and not (isinstance(lam, (int, float)) and math.isfinite(lam)):
        raise HeroEvalError(f"lam must be a number or None, got {lam!r}")
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = {"predictor": predictor}
    if predictor == "majority_vote":
        gs = _need_gold(data)
        f = _majority(data)
        rect = rectify(f, gs, lam)
        infl = Influence(rect.phi)
        return _result("mv_ppi", rect.estimate, data, gs, rect, infl, "t", details, notes)
    if calibration is None:
        raise HeroEvalError(f"predictor {predictor!r} needs a calibration")
    cal = check_calibration(calibration)
    al = align(data, cal, exclude_new_labelers)
    d = al.data
    gs = _need_gold(d)
    notes = al.notes
    J = cal.n_labelers
    a_use, b_use = cal.alpha, cal.beta
    space, scores = "stage_a", history_scores(cal, predictor)
    if predictor == "gold_proportion":
        a_use, b_use = gold_proportion_rates(cal)
        space = "gold_counts"
    L = log_likelihood_ratios(d, al.to_calib, a_use, b_use)
    c_mu = np.zeros(2 * J if space == "gold_counts" else cal.n_parameters)
    if predictor == "gold_proportion":
        gp = gold_proportion(d, cal, exclude_new_labelers=exclude_new_labelers)
        mu = gp.estimate
        if not math.isfinite(mu):
            raise HeroEvalError("the gold-proportion estimate is unidentified on this round: no posterior predictor")
        if gp.influence is not None and gp.influence.history is not None:
            c_mu = np.asarray(gp.influence.history, dtype=float)
        details["prior_rate"] = mu
    elif predictor == "hero1":
        h1 = hero1(d, cal, exclude_new_labelers=exclude_new_labelers)
        mu = h1.estimate
        if not math.isfinite(mu):
            raise HeroEvalError("HERO-1 is unidentified on this round: no posterior predictor (use "
                                "predictor='majority_vote' or the gold alone)")
        if h1.influence is not None and h1.influence.history is not None and h1.influence.space == "stage_a":
            c_mu = np.asarray(h1.influence.history, dtype=float)
        details["prior_rate"] = mu
    else:
        if prior is not None:
            mu = float(prior)
        else:
            nn = np.asarray(cal.round_n_items, dtype=float)
            mu = float(np.sum(nn * cal.round_prevalence) / nn.sum())
            c_mu[2 * J: 2 * J + len(cal.round_ids)] = nn / nn.sum()
        details["prior_rate"] = mu
    m = min(max(mu, _MU_CLIP), 1 - _MU_CLIP)
    f = item_posterior(L, m)
    tp = None if scores is None else tuning_prior(cal, m, scores=scores)
    if lam is None:
        details.update(lambda_round=tuned_lambda(f, gs), lambda_prior_items=0.0 if tp is None else tp[2])
    rect = rectify(f, gs, tuned_lambda(f, gs, tp) if lam is None else lam)
    unequal = bool(np.ptp(gs.pi) > 1e-12 * float(gs.pi.max()))  # an unequal-probability design: a prior per item
    hp = None if scores is None else history_prior(cal, rect.lam, m, scores=scores,
                                                   at=f[gs.index] if unequal else None, bands_of=f)
    if hp is not None and rect.lam > 0:
        rect = rectify(f, gs, rect.lam, pseudo=PSEUDO_WITH_PRIOR, prior=hp)
        details.update(history_prior_variance=rect.prior_variance, history_prior_items=rect.prior_items,
                       history_prior_conflict=rect.prior_conflict)
        if rect.prior_conflict:
            notes = (*notes, "the predictor errs more on this round's gold than on the history's (the residual "
                             "spread's chi-squared test): the history prior on the variance was dropped")
    # history term: lam * (mean_U df/dtheta - Hajek_S df/dtheta)
    s = f * (1 - f)
    wu = np.full(d.n_items, 1.0 / d.n_items)
    ws = np.zeros(d.n_items)
    ws[gs.index] = gs.weights / gs.weights.sum()
    dw = wu - ws
    grad = np.zeros(c_mu.size)
    grad[: 2 * J] = _dL_sums(d, al.to_calib, a_use, b_use, dw * s, J)
    grad += float(np.sum(dw * s)) / (m * (1 - m)) * c_mu
    c = rect.lam * grad
    if space == "gold_counts":  # the gold-proportion rates' binomial variances (as that estimate's own history term)
        infl = Influence(rect.phi, "gold_counts", c, gold_proportion_variances(cal), hash(cal.token))
    else:
        V = cal.covariance
        if V is None:
            notes = (*notes, "the calibration has no parameter covariance: the history term is left out")
        infl = Influence(rect.phi, "stage_a", c, V, None if V is None else hash(cal.token))
    details.update(al.details)
    return _result(METHOD_OF[predictor], rect.estimate, d, gs, rect, infl, "t", details, notes)


def gold_only(current: AnnotationSet) -> EstimateResult:
    """The classical estimate from the round's gold items alone: their (Hajek) mean, Wilson's interval.

    Wilson's interval at the effective size ``k (n - 1) / (n - k)`` (Kish's
    size under a design): the finite-population correction for the rate of
    the round's n items.
    """
    data = check_current(current)
    gs = _need_gold(data)
    rect = rectify(np.zeros(data.n_items), gs, 0.0)
    return _result("gold_only", rect.estimate, data, gs, rect, Influence(rect.phi), "wilson", {"predictor": None}, ())


def split_methods(wanted: list[str]) -> tuple[list[str], list[str]]:
    """(silver-only methods, methods that use current gold) of a method list."""
    gold = [m for m in wanted if m in ALL_GOLD_METHODS]
    return [m for m in wanted if m not in ALL_GOLD_METHODS], gold


ALL_GOLD_METHODS = ("hero1_ppi", "gp_ppi", "prior_ppi", "mv_ppi", "gold_only")


def gold_estimates(
    current: AnnotationSet, calibration: Calibration | None, methods: list[str] | tuple[str, ...] = GOLD_METHODS, *,
    exclude_new_labelers: bool = False, skip_errors: bool = False,
) -> tuple[dict[str, EstimateResult], dict[str, str]]:
    """The estimates that use current gold, by method name (``hero1_ppi``, ``prior_ppi``, ``mv_ppi``, ``gold_only``).

    With ``skip_errors`` a method that cannot run is listed with the reason instead of raising.
    """
    out: dict[str, EstimateResult] = {}
    skipped: dict[str, str] = {}
    by_method = {v: k for k, v in METHOD_OF.items()}
    for m in methods:
        if m not in ALL_GOLD_METHODS:
            raise HeroEvalError(f"unknown method with current gold {m!r}; choose from {list(ALL_GOLD_METHODS)}")
        try:
            if m == "gold_only":
                out[m] = gold_only(current)
            else:
                out[m] = ppi(current, calibration, predictor=by_method[m],  # type: ignore[arg-type]
                             exclude_new_labelers=exclude_new_labelers)
        except HeroEvalError as exc:
            if not skip_errors:
                raise
            skipped[m] = str(exc)
    return out, skipped
