"""Model checks on the history's gold items, and the recommended estimate.

HERO's Stage A fits the two-coin (Dawid–Skene) likelihood, which assumes
that labelers err independently given the gold label. Real crowds and LLM
judges do not: hard items fool many of them at once. The gold items of the
history are the only evidence about how wrong the model is, so every check
here is computed on them:

* **Cross-validation.** The gold items are split into ``folds`` folds
  (stratified by gold label). For each fold, Stage A is refitted on the
  history without those items, once per history weight ``w`` in
  :data:`WEIGHT_GRID`; the held-out items are then

  - *predicted*: the posterior ``P(Y = 1 | labels)`` of each held-out item
    gives the cross-validated log score and a calibration curve;
  - *estimated*: they form a mock current round whose true rate is known,
    and every candidate method estimates it. The mean error over folds
    estimates each method's bias on rounds like the history.

* **Conditional dependence.** For every pair of labelers that labelled the
  same gold items, the standardised residual products
  ``t = (z_j - a_j)(z_k - a_k) / sqrt(a_j (1 - a_j) a_k (1 - a_k))``, with
  ``a_j`` labeler j's leave-this-item-out rate of saying 1 among gold items
  of the item's class, have mean 0 under conditional independence. Per pair,
  ``z = sum t / sqrt(n)`` (one-sided: labelers that agree beyond what
  independence implies), with Benjamini–Hochberg adjustment; overall,
  ``Z = sum t / sqrt(number of pair-items)``: under independence each ``t``
  has mean 0 and variance 1 and the products of different pairs are
  uncorrelated (even on one item), so ``Z`` is approximately standard normal.

:func:`recommend` (``method="auto"``) gives every candidate an estimated mean
squared error on the current round from the mock rounds. When the dependence
test rejects independence (the model behind the likelihood methods is then
known to be wrong) it takes the smallest; otherwise it keeps HERO joint
unless its mock-round error, or its paired difference from the Rogan–Gladen
estimate on the same items, is significant at 1 %, and then takes the
smallest estimated MSE.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit
from scipy.stats import norm

from ._multiple import benjamini_hochberg
from .data import AnnotationSet
from .errors import ConvergenceWarning, HeroEvalError

if TYPE_CHECKING:
    from .calibration import Calibration
    from .results import EstimateResult

__all__ = [
    "WEIGHT_GRID",
    "DependenceTest",
    "ModelChecks",
    "Recommendation",
    "dependence_test",
    "recommend",
    "run_checks",
]

FloatArray = npt.NDArray[np.float64]

WEIGHT_GRID: tuple[float, ...] = (0.0, 0.1, 0.3, 1.0)
"""History weights tried by ``calibrate(history_weight="cv")`` and the checks."""

CANDIDATES: tuple[str, ...] = ("gold_proportion", "rogan_gladen", "hero1", "hero_joint")
"""Methods ``method="auto"`` chooses among (``hero1`` at w = 1 and at the w > 0 the log score chose).

HERO joint (the current round as one more gold-free round of Stage A) is the
default: it is HERO-1's model fitted to every label, and where that model
holds it was 3-5 % more accurate than HERO-1 (docs/robustness.md); it rests
on HERO-1's likelihood, so it is judged by HERO-1's mock round at the same
weight. HERO-1 at w = 0 (gold-only maximum likelihood, without smoothing) is
not a candidate: with little gold its labelers sit on the boundary and its
mock-round standard error is degenerate; the gold-proportion calibration is
the gold-only candidate.

Current-round Dawid–Skene is not a candidate: with few labels per item its
standard error is too small (coverage 0.78 in the paper's sparse design,
docs/robustness.md), and the rule below trusts the candidates' standard
errors. Majority vote is not one either: it corrects nothing, so its bias
moves with the rate and the labeler mix, and its bias on the gold's mock
rounds does not carry over to a round with another rate (in the paper's
design it was picked with a mock bias of +0.03 and erred by +0.11).
"""

MOCK_METHODS: tuple[str, ...] = ("majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1")
"""Methods whose error on the mock rounds the checks report."""

MIN_GOLD_PER_FOLD = 4

ROBUST_REFERENCE = "rogan_gladen"
"""The estimator every candidate is compared with, paired on the mock rounds (it assumes no independence)."""

BIAS_TEST_ALPHA = 0.01
"""The default (HERO joint) is kept unless its mock-round error, or its difference from the robust reference,
is significant at this level (when the dependence test has not rejected independence)."""

DEPENDENCE_ALPHA = 0.01


# ---------------------------------------------------------------------------
# Conditional dependence between labelers, on the gold items
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DependenceTest:
    """Excess agreement between labelers given the gold label (see the module docstring).

    Attributes
    ----------
    z, p_value : float
        Overall statistic and its one-sided p-value (small: labelers agree
        more than independence given gold implies).
    mean_correlation : float
        Mean over labeler pairs and gold items of the standardised residual
        product: an average conditional correlation of two labelers' errors.
    n_items, n_pairs : int
        Gold items with at least two labels, labeler pairs tested.
    pairs : list of dict
        The pairs with the smallest p-values (at most 20): labelers, items
        shared, correlation, z, p and BH-adjusted p.
    n_pairs_significant : int
        Pairs with BH-adjusted p below 0.05.
    """

    z: float
    p_value: float
    mean_correlation: float
    n_items: int
    n_pairs: int
    n_pairs_significant: int
    pairs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "z": _fin(self.z), "p_value": _fin(self.p_value), "mean_correlation": _fin(self.mean_correlation),
            "n_items": self.n_items, "n_pairs": self.n_pairs, "n_pairs_significant": self.n_pairs_significant,
            "pairs": self.pairs,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DependenceTest:
        return cls(_nan(d["z"]), _nan(d["p_value"]), _nan(d["mean_correlation"]), int(d["n_items"]),
                   int(d["n_pairs"]), int(d["n_pairs_significant"]), list(d.get("pairs", [])))


def _fin(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _nan(x: Any) -> float:
    return math.nan if x is None else float(x)


def dependence_test(history: AnnotationSet, max_pairs_shown: int = 20) -> DependenceTest:
    """Test conditional independence of labelers given gold on the history's gold items.

    Examples
    --------
    >>> import heroeval as he
    >>> from heroeval.simulate import paper_dgp
    >>> t = he.checks.dependence_test(paper_dgp(1, rho=0.5).history)   # independent labelers
    >>> t.p_value > 0.01
    True
    """
    gi = np.flatnonzero(history.gold >= 0)
    J = history.n_labelers
    item_of = history.annotation_item
    on_gold = history.gold[item_of] >= 0
    it = item_of[on_gold]
    lab = history.labeler[on_gold].astype(np.int64)
    z = history.label[on_gold].astype(np.float64)
    y = history.gold[it].astype(np.int64)
    # per labeler and class: labels and ones on gold items; per (item, labeler): own labels and ones
    n_cls = np.zeros((2, J))
    s_cls = np.zeros((2, J))
    np.add.at(n_cls, (y, lab), 1.0)
    np.add.at(s_cls, (y, lab), z)
    # collapse repeated (item, labeler) labels into one mean label per pair
    key = it * J + lab
    uk, inv = np.unique(key, return_inverse=True)
    cnt = np.bincount(inv).astype(np.float64)
    ones = np.bincount(inv, weights=z)
    p_item = uk // J
    p_lab = uk % J
    p_y = history.gold[p_item].astype(np.int64)
    zbar = ones / cnt
    n_loo = n_cls[p_y, p_lab] - cnt
    with np.errstate(invalid="ignore", divide="ignore"):
        a_loo = (s_cls[p_y, p_lab] - ones) / n_loo
    v = a_loo * (1 - a_loo)
    good = (n_loo > 0) & (v > 0)
    resid = np.where(good, (zbar - a_loo) / np.sqrt(np.where(good, v, 1.0)), np.nan)
    # items with >= 2 usable labelers: all pairs within each item
    p_item_g, p_lab_g, r_g = p_item[good], p_lab[good], resid[good]
    order = np.argsort(p_item_g, kind="stable")
    p_item_g, p_lab_g, r_g = p_item_g[order], p_lab_g[order], r_g[order]
    starts = np.flatnonzero(np.r_[True, p_item_g[1:] != p_item_g[:-1]])
    lens = np.diff(np.r_[starts, p_item_g.size])
    pair_a: list[npt.NDArray[np.int64]] = []
    pair_b: list[npt.NDArray[np.int64]] = []
    pair_t: list[FloatArray] = []
    pair_item: list[npt.NDArray[np.int64]] = []
    for k in np.unique(lens):
        if k < 2:
            continue
        st = starts[lens == k]
        ix = st[:, None] + np.arange(k)
        iu, ju = np.triu_indices(int(k), 1)
        la, lb = p_lab_g[ix][:, iu], p_lab_g[ix][:, ju]
        t = r_g[ix][:, iu] * r_g[ix][:, ju]
        pair_a.append(np.minimum(la, lb).ravel())
        pair_b.append(np.maximum(la, lb).ravel())
        pair_t.append(t.ravel())
        pair_item.append(np.repeat(p_item_g[st], iu.size))
    if not pair_t:
        return DependenceTest(math.nan, math.nan, math.nan, 0, 0, 0, [])
    A = np.concatenate(pair_a)
    B = np.concatenate(pair_b)
    T = np.concatenate(pair_t)
    n_items = int(np.unique(np.concatenate(pair_item)).size)
    Z = float(T.sum() / math.sqrt(T.size))  # each t has variance 1 and pairs are uncorrelated under H0
    p_all = float(norm.sf(Z)) if math.isfinite(Z) else math.nan
    # per pair
    pk = A * J + B
    upk, pinv = np.unique(pk, return_inverse=True)
    n_p = np.bincount(pinv).astype(np.float64)
    s_p = np.bincount(pinv, weights=T)
    zp = s_p / np.sqrt(n_p)
    pp = norm.sf(zp)
    m = pp.size
    order_p = np.argsort(pp)
    bh = benjamini_hochberg(pp)
    ids = history.labeler_ids
    shown = []
    for q in order_p[:max_pairs_shown]:
        shown.append({
            "labelers": [str(ids[upk[q] // J]), str(ids[upk[q] % J])], "n_items": int(n_p[q]),
            "correlation": float(s_p[q] / n_p[q]), "z": float(zp[q]), "p_value": float(pp[q]),
            "p_adjusted": float(bh[q]),
        })
    _ = gi
    return DependenceTest(Z, p_all, float(T.mean()), n_items, int(m), int((bh < 0.05).sum()), shown)


# ---------------------------------------------------------------------------
# Cross-validation on the gold items
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelChecks:
    """The checks :func:`run_checks` computes; kept in ``Calibration.checks`` and saved with it.

    Attributes
    ----------
    folds, n_gold : int
        Folds used and gold items checked.
    weight_grid : tuple of float
    log_score : dict
        ``{w: (mean, standard error)}``: mean cross-validated log probability
        of a held-out gold label at history weight ``w`` (higher is better;
        ``log 0.5 = -0.693`` is a coin flip).
    chosen_weight : float
        The weight with the best log score (ties: the larger weight).
    calibration_curve : list of dict
        At the chosen weight: for bins of the predicted ``P(Y=1)``, the mean
        prediction, the share of gold 1 and the count.
    mock : list of dict
        Per candidate (method, w): mean error over the mock rounds
        (``bias``), its standard error across folds, RMSE, the folds used.
    dependence : DependenceTest
    notes : list of str
    """

    folds: int
    n_gold: int
    weight_grid: tuple[float, ...]
    log_score: dict[float, tuple[float, float]]
    chosen_weight: float
    calibration_curve: list[dict[str, Any]]
    mock: list[dict[str, Any]]
    dependence: DependenceTest
    notes: list[str] = field(default_factory=list)

    def mock_row(self, method: str, weight: float | None = None) -> dict[str, Any] | None:
        for r in self.mock:
            if r["method"] == method and (r["history_weight"] is None or weight is None
                                          or abs(r["history_weight"] - weight) < 1e-12):
                return r
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "folds": self.folds, "n_gold": self.n_gold, "weight_grid": list(self.weight_grid),
            "log_score": [{"history_weight": w, "mean": _fin(m), "se": _fin(s)} for w, (m, s) in self.log_score.items()],
            "chosen_weight": self.chosen_weight, "calibration_curve": self.calibration_curve,
            "mock": [{k: (_fin(v) if isinstance(v, float) else v) for k, v in r.items()} for r in self.mock],
            "dependence": self.dependence.to_dict(), "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelChecks:
        try:
            return cls(
                folds=int(d["folds"]), n_gold=int(d["n_gold"]),
                weight_grid=tuple(float(x) for x in d["weight_grid"]),
                log_score={float(r["history_weight"]): (_nan(r["mean"]), _nan(r["se"])) for r in d["log_score"]},
                chosen_weight=float(d["chosen_weight"]), calibration_curve=list(d["calibration_curve"]),
                mock=[{k: (math.nan if v is None and k not in ("history_weight",) else v) for k, v in r.items()}
                      for r in d["mock"]],
                dependence=DependenceTest.from_dict(d["dependence"]), notes=list(d.get("notes", [])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise HeroEvalError(f"model checks: missing or bad field ({exc})") from exc


def _folds(history: AnnotationSet, folds: int, seed: int) -> list[npt.NDArray[np.int64]]:
    """Gold items split into folds, stratified by gold label."""
    rng = np.random.default_rng(seed)
    out: list[list[npt.NDArray[np.int64]]] = [[] for _ in range(folds)]
    offset = 0
    for y in (0, 1):
        idx = rng.permutation(np.flatnonzero(history.gold == y))
        for k in range(folds):
            out[(k + offset) % folds].append(idx[k::folds])
        offset += idx.size % folds
    return [np.sort(np.concatenate(f)) for f in out]


def run_checks(
    history: AnnotationSet,
    *,
    folds: int = 5,
    weight_grid: Sequence[float] = WEIGHT_GRID,
    seed: int = 0,
    em_settings: Mapping[str, Any] | None = None,
    candidates: Sequence[str] = MOCK_METHODS,
) -> ModelChecks:
    """Cross-validated model checks on the history's gold items (see the module docstring).

    Parameters
    ----------
    history : AnnotationSet
        The history, with gold on some items.
    folds : int, default 5
        Folds of the gold items (fewer when there are fewer than
        ``4 * folds`` gold items; at least 2 folds are needed).
    weight_grid : sequence of float
        History weights ``w`` to refit Stage A with.
    seed : int
        Seed of the fold assignment.
    em_settings : mapping, optional
        ``tol``, ``max_iter``, ``criterion``, ``accelerate``, ``pseudo_count``
        for the refits (defaults of :func:`heroeval.calibrate`).
    candidates : sequence of str
        Methods to run on the mock rounds (``hero_joint`` is judged by
        HERO-1's mock round).

    Examples
    --------
    >>> import heroeval as he
    >>> from heroeval.simulate import paper_dgp
    >>> chk = he.checks.run_checks(paper_dgp(0, rho=0.3).history)
    >>> chk.chosen_weight in chk.weight_grid
    True
    """
    from dataclasses import replace

    from .calibration import calibrate
    from .estimators import estimate

    if not isinstance(history, AnnotationSet):
        raise HeroEvalError(f"history must be an AnnotationSet, got {type(history).__name__}")
    if not (isinstance(folds, int) and folds >= 2):
        raise HeroEvalError(f"folds must be an integer >= 2, got {folds!r}")
    grid = tuple(sorted({float(w) for w in weight_grid}))
    if not grid or any(not 0 <= w <= 1 for w in grid):
        raise HeroEvalError(f"weight_grid must hold numbers in [0, 1], got {list(weight_grid)!r}")
    n_gold = history.n_gold
    notes: list[str] = []
    k_eff = min(folds, n_gold // MIN_GOLD_PER_FOLD)
    dep = dependence_test(history)
    if k_eff < 2:
        notes.append(f"only {n_gold} gold items: too few for cross-validation ({2 * MIN_GOLD_PER_FOLD} needed)")
        return ModelChecks(0, n_gold, grid, {}, 1.0, [], [], dep, notes)
    if k_eff < folds:
        notes.append(f"{n_gold} gold items: {k_eff} folds instead of {folds}")
    settings = dict(em_settings or {})
    fold_items = _folds(history, k_eff, seed)
    all_items = np.arange(history.n_items)
    gold_items = np.concatenate(fold_items)
    y_all = history.gold[gold_items].astype(np.float64)
    ybar = float(y_all.mean())
    yfold = np.concatenate([np.full(f.size, history.gold[f].mean()) for f in fold_items])
    logp: dict[float, list[FloatArray]] = {w: [] for w in grid}
    preds: dict[float, list[FloatArray]] = {w: [] for w in grid}
    llr: dict[float, list[FloatArray]] = {w: [] for w in grid}
    llr_gp: list[FloatArray] = []
    rg_est: list[float] = []
    rg_if: list[FloatArray] = []
    for test in fold_items:
        train = np.setdiff1d(all_items, test, assume_unique=True)
        h_k = history.take_items(train, name="history (fold)")
        m_k = history.take_items(test, name="mock round")
        y = history.gold[test].astype(np.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for j, w in enumerate(grid):
                cal = calibrate(h_k, history_weight=w, covariance=False, **settings)
                L = _mock_llr(m_k, cal.alpha, cal.beta)
                llr[w].append(L)
                post = expit(logit(np.clip(np.asarray(cal.round_prevalence)[m_k.item_round], 1e-9, 1 - 1e-9)) + L)
                preds[w].append(post)
                pc = np.clip(post, 1e-12, 1 - 1e-12)
                logp[w].append(y * np.log(pc) + (1 - y) * np.log1p(-pc))
                if j == 0:
                    tp, fn, tn, fp = cal.gold_tp, cal.gold_fn, cal.gold_tn, cal.gold_fp
                    llr_gp.append(_mock_llr(m_k, (tp + 1.0) / (tp + fn + 2.0), (tn + 1.0) / (tn + fp + 2.0)))
                    if "rogan_gladen" in candidates:
                        r = estimate(m_k, replace(cal, history=None), method="rogan_gladen")
                        assert not isinstance(r, Mapping)
                        if r.influence is not None and math.isfinite(r.estimate):
                            rg_est.append(r.estimate)
                            rg_if.append(r.influence.current)
                        else:
                            rg_est.append(math.nan)
                            rg_if.append(np.zeros(test.size))
    log_score = {}
    for w in grid:
        v = np.concatenate(logp[w])
        log_score[w] = (float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan)
    chosen = max(grid, key=lambda w: (round(log_score[w][0], 12), w))
    curve = _curve(np.concatenate(preds[chosen]), y_all)
    mock: list[dict[str, Any]] = []
    infls: list[FloatArray] = []

    def add(method: str, w: float | None, est: float, infl: FloatArray, yc: FloatArray, how: str) -> None:
        n = infl.size
        d = infl - (yc - yc.mean()) if how == "pooled" else infl - (y_all - yfold)
        mock.append({"method": method, "history_weight": w, "n_items": int(n), "estimate": est, "truth": ybar,
                     "bias": est - ybar, "bias_se": float(np.sqrt(d @ d) / n), "how": how})
        infls.append(infl)

    for w in grid:
        if "hero1" in candidates:
            est, infl = _score_fit(np.concatenate(llr[w]))
            add("hero1", w, est, infl, y_all, "pooled")
    if "gold_proportion" in candidates:
        est, infl = _score_fit(np.concatenate(llr_gp))
        add("gold_proportion", None, est, infl, y_all, "pooled")
    if "rogan_gladen" in candidates and rg_est and np.isfinite(rg_est).all():
        sizes = np.array([f.size for f in fold_items], dtype=float)
        est = float(np.dot(sizes, rg_est) / sizes.sum())
        # each fold's influence values average to that fold's linear term; pooled: one array
        add("rogan_gladen", None, est, np.concatenate(rg_if), y_all, "per fold")
    gold_set = history.take_items(gold_items, name="mock round (all gold items)")
    for mname in ("majority_vote", "dawid_skene"):
        if mname in candidates:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                cr = _current_only(gold_set, mname)
            if cr.influence is not None and math.isfinite(cr.estimate):
                add(mname, None, cr.estimate, cr.influence.current, y_all, "pooled")
    # paired with the dependence-robust reference: the same mock items, so common noise cancels
    ref = next((k for k, row in enumerate(mock) if row["method"] == ROBUST_REFERENCE), None)
    for k, row in enumerate(mock):
        if ref is None or k == ref:
            row["vs_robust"], row["vs_robust_se"] = math.nan, math.nan
            continue
        dd = infls[k] - infls[ref]
        row["vs_robust"] = row["estimate"] - mock[ref]["estimate"]
        row["vs_robust_se"] = float(np.sqrt(dd @ dd) / dd.size)
    return ModelChecks(k_eff, n_gold, grid, log_score, chosen, curve, mock, dep, notes)


def _current_only(items: AnnotationSet, method: str) -> EstimateResult:
    from .estimators import dawid_skene, majority_vote

    return majority_vote(items) if method == "majority_vote" else dawid_skene(items)


def _mock_llr(items: AnnotationSet, alpha: FloatArray, beta: FloatArray) -> FloatArray:
    """Per-item log-likelihood ratio of items taken from the calibration's own history."""
    from .estimators import _llr

    return _llr(items, np.arange(alpha.size, dtype=np.int64), np.asarray(alpha), np.asarray(beta))


def _score_fit(L: FloatArray) -> tuple[float, FloatArray]:
    """HERO's score equation on cross-fitted log-likelihood ratios: the estimate and its influence values."""
    from ._score import psi, solve_score

    mu, status = solve_score(L)
    if status == "unidentified":
        return math.nan, np.zeros(L.size)
    ps = psi(mu, L)
    info = float(np.mean(ps**2))
    infl: FloatArray = ps / info if info > 0 else np.zeros(L.size)
    return mu, infl


def _curve(pred: FloatArray, y: FloatArray, bins: int = 10) -> list[dict[str, Any]]:
    edges = np.linspace(0, 1, bins + 1)
    which = np.clip(np.digitize(pred, edges[1:-1]), 0, bins - 1)
    out = []
    for b in range(bins):
        m = which == b
        if m.any():
            out.append({"bin": [float(edges[b]), float(edges[b + 1])], "mean_predicted": float(pred[m].mean()),
                        "observed": float(y[m].mean()), "n": int(m.sum())})
    return out


# ---------------------------------------------------------------------------
# The recommended estimate
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Recommendation:
    """What ``method="auto"`` chose, the result, and why.

    ``table`` lists every candidate with its estimate, standard error on the
    current round, mock-round bias (and its standard error) and the
    predicted root mean squared error that decided.
    """

    method: str
    history_weight: float | None
    result: EstimateResult
    reason: str
    table: list[dict[str, Any]]

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        ci = self.result.confidence_interval(confidence_level)
        return {
            "method": self.method, "history_weight": self.history_weight,
            "estimate": _fin(self.result.estimate), "standard_error": _fin(self.result.standard_error or math.nan),
            "ci_low": _fin(ci.low), "ci_high": _fin(ci.high), "confidence_level": confidence_level,
            "reason": self.reason,
            "candidates": [{k: (_fin(v) if isinstance(v, float) else v) for k, v in r.items()} for r in self.table],
        }


def recommend(
    current: AnnotationSet,
    calibration: Calibration,
    *,
    exclude_new_labelers: bool = False,
    candidates: Sequence[str] = CANDIDATES,
) -> Recommendation:
    """The estimate to report for this round (``method="auto"``), and why.

    Uses ``calibration.checks`` (computed from ``calibration.history`` when
    absent). Every candidate (:data:`CANDIDATES`; ``hero1`` at w = 1 and at
    the weight w > 0 the log score chose, which needs the history to refit
    when it is not the calibration's own; ``hero_joint`` at the calibration's
    weight, judged by HERO-1's mock round at that weight) gets an **estimated
    mean squared error on this round** from the mock rounds of held-out gold
    items: ``max(b^2 - s_b^2, 0) + v``, with ``b`` its mock-round error,
    ``s_b`` that error's standard error (mock items and history part), and
    ``v = (s_b^2 - v_h) m / n + v_h`` its error variance relative to the
    round's realised rate scaled from the ``m`` mock items to the ``n``
    current items, ``v_h`` the history part of its variance on this round.

    * If the dependence test rejected independence (p below
      :data:`DEPENDENCE_ALPHA`), the model behind the likelihood methods is
      known to be wrong, and the candidate with the smallest estimated MSE
      is chosen.
    * Otherwise HERO joint (or, without the history, HERO-1 at the
      calibration's weight) is kept unless its mock-round error, or its paired
      difference there from the Rogan–Gladen estimate, is significant at
      :data:`BIAS_TEST_ALPHA`; if it is, the smallest estimated MSE wins.

    The interval of the chosen method is reported as it is: the choice uses
    the history's gold and the candidates' standard errors, not the current
    labels' agreement with any estimate (docs/robustness.md measures the
    coverage that results).
    """
    from dataclasses import replace

    from .calibration import calibrate
    from .estimators import estimate

    cal = calibration
    checks: ModelChecks | None = cal.checks
    hist = cal.history
    if checks is None:
        if hist is None:
            raise HeroEvalError(
                "method='auto' needs the model checks: calibrate with checks=True (CLI: hero calibrate "
                "saves them) or pass the history"
            )
        s = cal.settings
        checks = run_checks(hist, em_settings={k: s[k] for k in ("tol", "max_iter", "criterion", "accelerate",
                                                                  "pseudo_count") if k in s})
        cal = replace(cal, checks=checks)
    own_w = float(cal.settings.get("history_weight", 1.0))
    # HERO-1 at w = 0 is gold-only maximum likelihood without smoothing: not a candidate unless it is the user's own
    weights = (sorted({own_w, 1.0} | ({checks.chosen_weight} if checks.chosen_weight > 0 else set()))
               if hist is not None else [own_w])
    cals = {own_w: cal}
    rows: list[dict[str, Any]] = []
    results: dict[tuple[str, float | None], EstimateResult] = {}
    for m in candidates:
        ws: list[float | None] = list(weights) if m == "hero1" else [own_w] if m == "hero_joint" else [None]
        for w in ws:
            if m == "hero_joint" and (hist is None or w == 0.0):
                continue
            if w is not None and w not in cals:
                assert hist is not None
                s = cal.settings
                cals[w] = calibrate(hist, history_weight=w, **{k: s[k] for k in (
                    "tol", "max_iter", "criterion", "accelerate", "pseudo_count") if k in s})
            c_use = cals[own_w if w is None else w]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    r = estimate(current, c_use, method=m, exclude_new_labelers=exclude_new_labelers)
            except HeroEvalError as exc:
                rows.append({"method": m, "history_weight": w, "skipped": str(exc)})
                continue
            assert not isinstance(r, Mapping)
            # hero_joint rests on HERO-1's likelihood: it is judged by HERO-1's mock round at the same weight
            mrow = checks.mock_row("hero1" if m == "hero_joint" else m, w)
            se = r.standard_error
            b = float(mrow["bias"]) if mrow else math.nan
            vh = r.variance_history if math.isfinite(r.variance_history) else 0.0
            sb = math.sqrt(float(mrow["bias_se"]) ** 2 + vh) if mrow else math.nan
            if mrow is None or se is None or not math.isfinite(se) or not math.isfinite(r.estimate) \
                    or not math.isfinite(b) or not math.isfinite(sb):
                pred = math.nan
            else:
                # error variance relative to the realised rate: the mock items' part scaled to this round's size
                b2 = max(b * b - sb * sb, 0.0)
                v_mock = float(mrow["bias_se"]) ** 2 * float(mrow["n_items"]) / max(current.n_items, 1)
                pred = math.sqrt(b2 + v_mock + vh)
            results[(m, w)] = r
            vs = float(mrow.get("vs_robust", math.nan)) if mrow else math.nan
            vs_se = float(mrow.get("vs_robust_se", math.nan)) if mrow else math.nan
            rows.append({"method": m, "history_weight": w, "estimate": r.estimate,
                         "standard_error": se if se is not None else math.nan, "mock_bias": b, "mock_bias_se": sb,
                         "mock_vs_robust": vs, "mock_vs_robust_se": vs_se, "variance_history": vh,
                         "predicted_rmse": pred})
    scored = [r for r in rows if "predicted_rmse" in r and math.isfinite(r["predicted_rmse"])]
    dep = checks.dependence
    dep_txt = ("labelers agree beyond independence given gold (dependence test p = "
               f"{dep.p_value:.2g})" if math.isfinite(dep.p_value) and dep.p_value < 0.05
               else "no evidence of dependent errors on the gold (p = "
               f"{dep.p_value:.2g})" if math.isfinite(dep.p_value) else "dependence not testable on the gold")
    first = ("hero_joint", own_w) if ("hero_joint", own_w) in results else ("hero1", own_w)
    if not scored:
        r = results.get(first) or estimate(current, cal, method="hero1", exclude_new_labelers=exclude_new_labelers)
        assert not isinstance(r, Mapping)
        if first not in results:
            first = ("hero1", own_w)
        why = "; ".join(checks.notes) or "no candidate could be scored on mock rounds"
        return Recommendation(first[0], own_w, r, f"{first[0]} by default: {why}", rows)
    dependent = math.isfinite(dep.p_value) and dep.p_value < DEPENDENCE_ALPHA
    level = BIAS_TEST_ALPHA
    crit = float(norm.ppf(1 - level / 2))
    vh_ref = next((row["variance_history"] for row in scored if row["method"] == ROBUST_REFERENCE), 0.0)
    for row in scored:
        sb = row["mock_bias_se"]
        flag = bool(math.isfinite(sb) and abs(row["mock_bias"]) > crit * sb)
        vs, vs_se = row["mock_vs_robust"], row["mock_vs_robust_se"]
        if math.isfinite(vs) and math.isfinite(vs_se):
            row["mock_vs_robust_se"] = vs_se = math.sqrt(vs_se**2 + row["variance_history"] + vh_ref)
            flag = flag or abs(vs) > crit * vs_se
        row["bias_flagged"] = flag
    default = next((r for r in scored if (r["method"], r["history_weight"]) == first), None)
    # ties: the default first, then the order of CANDIDATES
    order = {k: i for i, k in enumerate(results)}
    by_mse = min(scored, key=lambda r: (r["predicted_rmse"], 0 if (r["method"], r["history_weight"]) == first
                                        else 1, order.get((r["method"], r["history_weight"]), 0)))
    if dependent:
        best = by_mse
        rule = (f"labelers err together, so the model behind the likelihood methods is wrong: the smallest "
                f"predicted RMSE on the mock rounds ({best['predicted_rmse']:.3g})")
    elif default is not None and not default["bias_flagged"]:
        best = default
        rule = f"{first[0]} shows no significant bias on the mock rounds (level {level:g})"
    else:
        best = by_mse
        rule = (f"{first[0]} is biased on the mock rounds (level {level:g}): the smallest predicted RMSE "
                f"({best['predicted_rmse']:.3g})")
    m, w = best["method"], best["history_weight"]
    wtxt = f" (history weight {w:g})" if w is not None else ""
    reason = (f"{m}{wtxt}: {rule}; its mock-round bias {best['mock_bias']:+.3g} ± {best['mock_bias_se']:.2g} "
              f"over {checks.folds} folds of {checks.n_gold} gold items; {dep_txt}")
    h1 = next((r for r in scored if r["method"] == "hero1" and r["history_weight"] == 1.0), None)
    if h1 is not None and h1 is not best and h1["bias_flagged"]:
        reason += (f"; the paper's HERO-1 is biased on the mock rounds ({h1['mock_bias']:+.3g} ± "
                   f"{h1['mock_bias_se']:.2g})")
    return Recommendation(m, w, results[(m, w)], reason, rows)
