"""Model checks on the history's gold items: cross-validated Stage A and mock current rounds.

HERO's Stage A fits the two-coin (Dawid–Skene) likelihood, which assumes
that labelers err independently given the gold label. Real crowds and LLM
judges do not: hard items fool many of them at once. The gold items of the
history are the only evidence about how wrong the model is, so every check
here is computed on them:

* **Cross-validation.** The gold items are split into ``folds`` folds
  (stratified by gold label; drawn from a seeded hash of each item's id, so
  every reader of the same history gets the same folds). For each fold, Stage A is refitted on the
  history without those items, once per history weight ``w`` in
  :data:`WEIGHT_GRID`; the held-out items are then

  - *predicted*: the posterior ``P(Y = 1 | labels)`` of each held-out item
    gives the cross-validated log score and a calibration curve;
  - *estimated*: they form a mock current round whose true rate is known,
    and every candidate method estimates it. The mean error over folds
    estimates each method's bias on rounds like the history.

* **Past rounds.** When the history has at least two rounds with enough
  gold, each round's gold is left out of Stage A in turn and the round's
  gold items are estimated from their silver labels by every candidate: the
  error a method makes on a round it has not seen the gold of, which the
  random folds cannot show when rounds differ in content or labeler
  behaviour (:func:`round_folds`, :func:`transport_excess`).

The dependence test (:mod:`heroeval.checks.dependence`) runs with them and
is kept in the same record. What the checks are used for, the recommended
estimate (``method="auto"``), is chosen above this layer, in
:mod:`heroeval.choice.auto`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit
from scipy.stats import chi2

from heroeval.checks.dependence import dependence_test
from heroeval.checks.fold_refits import (
    HistoryFolds,
    Params,
    fold_fits_scratch,
    fold_fits_shared,
)
from heroeval.errors import ConvergenceWarning, HeroEvalError
from heroeval.estimators.common import log_likelihood_ratios
from heroeval.estimators.methods import dawid_skene, majority_vote
from heroeval.estimators.registry import estimate_methods
from heroeval.estimators.score_equation import psi, solve_score
from heroeval.ingest.annotations import AnnotationSet
from heroeval.ingest.coding import item_order
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.checks_record import ModelChecks, class_weights
from heroeval.stage_a.fit import fit_stage_a
from heroeval.stage_a.folds import FoldFits
from heroeval.stage_a.gold import gold_counts
from heroeval.stage_a.settings import EMSettings, FitSettings, em_settings_of

if TYPE_CHECKING:
    from heroeval.estimators.results import EstimateResult

__all__ = ["CANDIDATES", "MOCK_METHODS", "WEIGHT_GRID", "CheckSettings", "class_weights", "mock_key",
           "paired_mock_difference", "past_round_errors", "rate_matched_mock", "round_folds", "run_checks", "transport_excess",
           "transport_spread"]

FloatArray = npt.NDArray[np.float64]

WEIGHT_GRID: tuple[float, ...] = (0.0, 0.1, 0.3, 1.0)
"""History weights tried by ``fit_stage_a(history_weight="cv")`` and the checks."""

CANDIDATES: tuple[str, ...] = ("gold_proportion", "rogan_gladen", "hero1", "hero_joint")
"""Methods ``method="auto"`` chooses among (``hero1`` at w = 1 and at the w > 0 the log score chose).

HERO joint (the current round as one more gold-free round of Stage A) is the
default: it is HERO-1's model fitted to every label, and where that model
holds it was 3-5 % more accurate than HERO-1 (docs/research/robustness.md); it rests
on HERO-1's likelihood, so it is judged by HERO-1's mock round at the same
weight. HERO-1 at w = 0 (gold-only maximum likelihood, without smoothing) is
not a candidate: with little gold its labelers sit on the boundary and its
mock-round standard error is degenerate; the gold-proportion calibration is
the gold-only candidate.

Current-round Dawid–Skene is not a candidate: with few labels per item its
standard error is too small (coverage 0.78 in the paper's sparse design,
docs/research/robustness.md), and the rule below trusts the candidates' standard
errors. Majority vote is not one either: it corrects nothing, so its bias
moves with the rate and the labeler mix, and its bias on the gold's mock
rounds does not carry over to a round with another rate (in the paper's
design it was picked with a mock bias of +0.03 and erred by +0.11).
"""

MOCK_METHODS: tuple[str, ...] = ("majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1")
"""Methods whose error on the mock rounds the checks report."""

CURRENT_ONLY: tuple[str, ...] = ("majority_vote", "dawid_skene")
"""Methods that read the current round's labels alone: on a past round they need no refit of Stage A."""

MIN_GOLD_PER_FOLD = 4

ROBUST_REFERENCE = "rogan_gladen"
"""The estimator every candidate is compared with, paired on the mock rounds (it assumes no independence)."""

BIAS_TEST_ALPHA = 0.01
"""The default (HERO joint) is kept unless its mock-round error, or its difference from the robust reference,
is significant at this level (when the dependence test has not rejected independence)."""

DEPENDENCE_ALPHA = 0.01

WARM_MIN_LABELS = 200
"""``refit="auto"`` starts the checks' refits from the whole history's fit when every labeler has this many labels.

With fewer, the two-coin likelihood can have several local maxima (labelers with few labels), and a fold refit
started from the whole history's fit ended on another one than the refit from the gold-based start in a
simulated sparse crowd (tests/unit/test_cheap_checks.py); with many, both end on the same to the EM tolerance.
"""


# ---------------------------------------------------------------------------
# Cross-validation on the gold items
# ---------------------------------------------------------------------------


def _folds(history: AnnotationSet, folds: int, seed: int) -> list[npt.NDArray[np.int64]]:
    """Gold items split into folds, stratified by gold label: each label's items in the order of a seeded hash of
    their id as text (:func:`heroeval.ingest.coding.item_order`), dealt to the folds in turn. The folds are a function of the items' ids,
    not of the order a reader gives the items in (the DuckDB reader orders integer ids as numbers, the pandas
    reader and a Dask history as text), so every reader gets the same checks."""
    order = item_order(history.item_ids, seed)
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    out: list[list[npt.NDArray[np.int64]]] = [[] for _ in range(folds)]
    offset = 0
    for y in (0, 1):
        idx = np.flatnonzero(history.gold == y)
        idx = idx[np.argsort(rank[idx], kind="stable")]
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
    start: Calibration | None = None,
    refit: Literal["auto", "warm", "cold", "scratch"] = "auto",
    past_rounds: bool = True,
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
        ``tol``, ``max_iter``, ``criterion``, ``accelerate``, ``pseudo_count``,
        ``shrink`` for the refits (default: ``start``'s own settings when it
        is given, else those of :func:`heroeval.calibrate`).
    candidates : sequence of str
        Methods to run on the mock rounds (``hero_joint`` is judged by
        HERO-1's mock round).
    start : Calibration, optional
        Stage A already fitted on the whole history with the same settings
        (:func:`heroeval.calibrate` passes its own fit): the refits start from
        it. Without it, it is fitted here.
    refit : {"auto", "warm", "cold", "scratch"}
        How the refits run. All but ``"scratch"`` share one design of the
        history (left-out items get weight 0,
        :class:`heroeval.stage_a.folds.FoldFits`). ``"warm"``: each
        refit starts from the whole history's fit at its weight and takes
        Newton steps with that fit's observed information (a few passes).
        ``"cold"``: each starts from its training items' gold-based values and
        runs Stage A's EM (the fits of ``"scratch"`` to rounding).
        ``"scratch"``: :func:`fit_stage_a` on a copy of the training items
        (the checks before 0.3). ``"auto"`` (default): ``"warm"`` when every
        labeler has at least :data:`WARM_MIN_LABELS` labels, else ``"cold"``:
        with few labels per labeler the likelihood can have several local
        maxima, and a refit from another start can end on another one
        (tests/unit/test_cheap_checks.py).
    past_rounds : bool, default True
        Also estimate each history round with its gold left out of Stage A
        (histories with at least :data:`MIN_ROUNDS` rounds holding
        :data:`MIN_ROUND_GOLD` gold items; ``ModelChecks.rounds``), at the
        weights ``method="auto"`` can use (1, the chosen one, the
        calibration's own). It costs up to :data:`MAX_ROUND_FOLDS` more
        refits at each.

    Examples
    --------
    >>> import heroeval as he
    >>> from heroeval.simulate import paper_dgp
    >>> chk = he.checks.run_checks(paper_dgp(0, rho=0.3).history)
    >>> chk.chosen_weight in chk.weight_grid
    True
    """
    if not isinstance(history, AnnotationSet):
        raise HeroEvalError(f"history must be an AnnotationSet, got {type(history).__name__}")
    if refit not in ("auto", "warm", "cold", "scratch"):
        raise HeroEvalError(f"refit must be 'auto', 'warm', 'cold' or 'scratch', got {refit!r}")
    if em_settings is None and start is not None:  # the refits' settings are the calibration's own
        em_settings = em_settings_of(start.settings)
    settings = dict(em_settings or {})
    gold_idx = np.flatnonzero(history.gold >= 0)
    n_labels = np.bincount(history.labeler, minlength=history.n_labelers)

    shared: list[FoldFits] = []  # one design of the history for every set of folds (the random and the rounds')

    def fold_fits(fold_items: list[npt.NDArray[np.int64]], grid: tuple[float, ...], gold_set: AnnotationSet,
                  warm: bool) -> list[dict[float, Params]]:
        in_history = [gold_idx[f] for f in fold_items]  # positions among the gold items -> history items
        if refit == "scratch":
            return fold_fits_scratch(history, in_history, grid, settings)
        if not shared:
            shared.append(FoldFits(history, pseudo_count=float(settings.get("pseudo_count", 0.0)),
                                   shrink=settings.get("shrink", "none"), engine=settings.get("engine", "auto"),
                                   design=None if start is None else start.history_design))
        return fold_fits_shared(HistoryFolds(shared[0], gold_idx), gold_set, fold_items, grid, settings, start,
                                warm)

    def template() -> Calibration:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return fit_stage_a(history, em=EMSettings.from_dict(settings), fitting=FitSettings(covariance=False))

    return run_checks_on_gold(
        history.take_items(gold_idx, name="history (gold items)"), n_labels=n_labels, fold_fits=fold_fits,
        template=template if start is None else (lambda: start),
        settings=CheckSettings(folds, weight_grid, seed, candidates, "cold" if refit == "scratch" else refit,
                               past_rounds))


FoldFitsFunction = Callable[[list[npt.NDArray[np.int64]], tuple[float, ...], AnnotationSet, bool],
                            list[dict[float, tuple[FloatArray, FloatArray, FloatArray]]]]
"""``fold_fits(fold_items, grid, gold_set, warm)``: Stage A refitted without each fold of gold items (positions in
``gold_set``), at each weight of ``grid``: per fold, ``{w: (alpha, beta, prevalences)}``."""


@dataclass(frozen=True)
class CheckSettings:
    """How the model checks run (documented at :func:`run_checks`), validated when made: the ``folds`` of the gold
    items, the history weights ``weight_grid`` of the refits, the ``seed`` of the folds, the ``candidates`` run on
    the mock rounds, how the refits start (``refit``: ``"auto"``, ``"warm"`` or ``"cold"``; :func:`run_checks`'
    ``"scratch"`` refits are made by its ``fold_fits`` and run as ``"cold"`` here) and whether the ``past_rounds``
    are estimated too."""

    folds: int = 5
    weight_grid: Sequence[float] = WEIGHT_GRID
    seed: int = 0
    candidates: Sequence[str] = MOCK_METHODS
    refit: Literal["auto", "warm", "cold"] = "auto"
    past_rounds: bool = True

    def __post_init__(self) -> None:
        if not (isinstance(self.folds, int) and self.folds >= 2):
            raise HeroEvalError(f"folds must be an integer >= 2, got {self.folds!r}")
        grid = self.grid
        if not grid or any(not 0 <= w <= 1 for w in grid):
            raise HeroEvalError(f"weight_grid must hold numbers in [0, 1], got {list(self.weight_grid)!r}")

    @property
    def grid(self) -> tuple[float, ...]:
        """The distinct history weights of ``weight_grid``, in increasing order."""
        return tuple(sorted({float(w) for w in self.weight_grid}))


def run_checks_on_gold(
    gold_set: AnnotationSet,
    *,
    n_labels: npt.NDArray[np.integer[Any]],
    fold_fits: FoldFitsFunction,
    template: Callable[[], Calibration],
    settings: CheckSettings = CheckSettings(),
) -> ModelChecks:
    """The model checks from the history's gold items alone and a function that refits Stage A.

    Everything in the checks but the refits reads the gold items only: the folds,
    the held-out items' predictions and mock rounds, the gold counts and the
    dependence test. :func:`run_checks` calls this with the gold items of an
    in-memory history; :func:`heroeval.calibrate_dask` with the gold items
    brought from a Dask cluster and refits on the cluster, which gives the same
    checks. ``gold_set`` holds the gold items in the history's item order, with
    the history's labeler and round codes; ``n_labels`` the history's labels per
    labeler (for ``refit="auto"``); ``template()`` a Stage A fit of the whole
    history (Rogan-Gladen's mock rounds read its labelers); ``settings`` how the checks run.
    """
    folds, seed, candidates, refit = settings.folds, settings.seed, settings.candidates, settings.refit
    history = gold_set
    fitted: list[Calibration] = []

    def whole_fit() -> Calibration:  # ``template()`` made once (Rogan–Gladen's rows, the past rounds' weights)
        if not fitted:
            fitted.append(template())
        return fitted[0]

    grid = settings.grid
    n_gold = history.n_gold
    notes: list[str] = []
    k_eff = min(folds, n_gold // MIN_GOLD_PER_FOLD)
    dep = dependence_test(history)
    if k_eff < 2:
        notes.append(f"only {n_gold} gold items: too few for cross-validation ({2 * MIN_GOLD_PER_FOLD} needed)")
        return ModelChecks(0, n_gold, grid, {}, 1.0, [], [], dep, notes)
    if k_eff < folds:
        notes.append(f"{n_gold} gold items: {k_eff} folds instead of {folds}")
    fold_items = _folds(history, k_eff, seed)
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
    if refit == "auto":
        refit = "warm" if n_labels.size and int(np.min(n_labels)) >= WARM_MIN_LABELS else "cold"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fits = fold_fits(fold_items, grid, gold_set, refit == "warm")
    tp_all, fn_all, tn_all, fp_all = gold_counts(history)
    template_cal: Calibration | None = None
    for k, test in enumerate(fold_items):
        m_k = history.take_items(test, name="mock round")
        y = history.gold[test].astype(np.float64)
        for w in grid:
            alpha, beta, prev = fits[k][w]
            L = _mock_llr(m_k, alpha, beta)
            llr[w].append(L)
            post = expit(logit(np.clip(np.asarray(prev)[m_k.item_round], 1e-9, 1 - 1e-9)) + L)
            preds[w].append(post)
            pc = np.clip(post, 1e-12, 1 - 1e-12)
            logp[w].append(y * np.log(pc) + (1 - y) * np.log1p(-pc))
        # the training folds' gold counts: the history's minus the held-out items'
        tk, fk, nk, pk = gold_counts(m_k)
        tp, fn, tn, fp = tp_all - tk, fn_all - fk, tn_all - nk, fp_all - pk
        llr_gp.append(_mock_llr(m_k, (tp + 1.0) / (tp + fn + 2.0), (tn + 1.0) / (tn + fp + 2.0)))
        if "rogan_gladen" in candidates:
            if template_cal is None:  # Rogan-Gladen reads the labelers and their gold counts only
                template_cal = whole_fit()
            cal_k = replace(template_cal, gold_tp=tp, gold_fn=fn, gold_tn=tn, gold_fp=fp, history=None, checks=None,
                            gold_labels=None)  # the fold's gold counts; the whole history's labels do not apply
            r = estimate_methods(m_k, cal_k, method="rogan_gladen")
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
    # per gold item (pooled order): what rate_matched_mock needs to re-weight the mock rounds to another rate
    per_item: dict[str, list[float]] = {"y": y_all.tolist(), "y_fold": yfold.tolist()}

    def add(method: str, w: float | None, est: float, infl: FloatArray, yc: FloatArray, how: str,
            L: FloatArray | None = None) -> None:
        n = infl.size
        d = infl - (yc - yc.mean()) if how == "pooled" else infl - (y_all - yfold)
        mock.append({"method": method, "history_weight": w, "n_items": int(n), "estimate": est, "truth": ybar,
                     "bias": est - ybar, "bias_se": float(np.sqrt(d @ d) / n), "how": how})
        infls.append(infl)
        key = mock_key(method, w)
        if L is not None:  # a score method: the weighted root is solved exactly from the cross-fitted ratios
            per_item[f"{key}:llr"] = np.clip(L, -100.0, 100.0).tolist()  # +-100 acts as +-inf in psi; JSON-safe
        else:
            per_item[f"{key}:influence"] = infl.tolist()

    for w in grid:
        if "hero1" in candidates:
            L = np.concatenate(llr[w])
            est, infl = _score_fit(L)
            add("hero1", w, est, infl, y_all, "pooled", L)
    if "gold_proportion" in candidates:
        L = np.concatenate(llr_gp)
        est, infl = _score_fit(L)
        add("gold_proportion", None, est, infl, y_all, "pooled", L)
    if "rogan_gladen" in candidates and rg_est and np.isfinite(rg_est).all():
        sizes = np.array([f.size for f in fold_items], dtype=float)
        est = float(np.dot(sizes, rg_est) / sizes.sum())
        # each fold's influence values average to that fold's linear term; pooled: one array
        add("rogan_gladen", None, est, np.concatenate(rg_if), y_all, "per fold")
    all_gold = history.take_items(gold_items, name="mock round (all gold items)")
    for mname in CURRENT_ONLY:
        if mname in candidates:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                cr = _current_only(all_gold, mname)
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
    rounds: list[dict[str, Any]] = []
    r_folds, r_qual = round_folds(history) if settings.past_rounds else ([], [])
    if r_folds:
        # the weights method="auto" can pick HERO-1 (and judge HERO joint) at: 1, the log score's choice, and the
        # calibration's own
        own = float(whole_fit().settings.get("history_weight", 1.0))
        weights = tuple(sorted({1.0, own} | ({chosen} if chosen > 0 else set())))
        rounds = _past_rounds(history, r_folds, r_qual, fold_fits, whole_fit, weights, candidates, refit == "warm",
                              notes)
    return ModelChecks(k_eff, n_gold, grid, log_score, chosen, curve, mock, dep, notes, per_item, rounds)


# ---------------------------------------------------------------------------
# Past rounds: leave one round's gold out, estimate that round from its silver labels
# ---------------------------------------------------------------------------

MIN_ROUND_GOLD = 8
"""A history round takes part in the past-round check when it has at least this many gold items."""

MIN_ROUNDS = 2
"""The past-round check runs when at least this many history rounds have :data:`MIN_ROUND_GOLD` gold items."""

MAX_ROUND_FOLDS = 5
"""At most this many refits per weight (as many as the checks' folds by default): with more qualifying rounds,
rounds are dealt to this many folds in turn, each fold's rounds left out together and each round still
estimated on its own."""


def round_folds(gold_set: AnnotationSet) -> tuple[list[npt.NDArray[np.int64]], list[int]]:
    """The past-round check's folds: positions in ``gold_set`` of the gold items of whole rounds, and the rounds.

    Rounds with fewer than :data:`MIN_ROUND_GOLD` gold items are left out; with fewer than :data:`MIN_ROUNDS`
    such rounds there is no check (empty lists). With more than :data:`MAX_ROUND_FOLDS`, the rounds (in their
    order) are dealt to that many folds in turn.
    """
    gold = np.flatnonzero(gold_set.gold >= 0)
    counts = np.bincount(gold_set.item_round[gold], minlength=gold_set.n_rounds)
    qual = [int(g) for g in np.flatnonzero(counts >= MIN_ROUND_GOLD)]
    if len(qual) < MIN_ROUNDS:
        return [], []
    n_f = min(len(qual), MAX_ROUND_FOLDS)
    folds = [np.sort(gold[np.isin(gold_set.item_round[gold], qual[k::n_f])]) for k in range(n_f)]
    return folds, qual


def past_round_errors(checks: ModelChecks, key: str) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The past-round check's errors, their standard errors and their calibration variances (NaN where not
    computed) for one mock row (``mock_key``), round by round."""
    rows = [r for r in checks.rounds if mock_key(r["method"], r["history_weight"]) == key]
    cv = [r.get("calib_var") for r in rows]
    return (np.array([r["error"] for r in rows], dtype=np.float64),
            np.array([r["error_se"] for r in rows], dtype=np.float64),
            np.array([math.nan if v is None else v for v in cv], dtype=np.float64))


def transport_excess(errors: npt.ArrayLike, error_se: npt.ArrayLike, allowed: float = 0.0,
                     extra_var: float | npt.ArrayLike = 0.0) -> tuple[int, float, float, float]:
    """How far a method missed past rounds beyond their noise and the error already allowed: ``(K, Q, p, tau2)``.

    With ``e_k`` the error on past round k, ``s_k^2 = error_se_k^2 + extra_var`` its variance when the method
    transports (``extra_var``: the calibration's part, one number or one per round), and ``B`` the error the
    interval already allows for (``allowed``: 0 for a plain interval, the bias bound of a bias-aware one), the
    excess is ``d_k = max(0, |e_k| - B)``. ``Q = sum_k d_k^2 / s_k^2`` is at most chi-squared with K degrees of
    freedom when every round's error is a bias within ``B`` plus noise; ``p`` is that law's upper tail, and
    ``tau2 = max(0, mean_k(d_k^2 - s_k^2))`` the method-of-moments estimate of the extra mean squared error a
    new round's estimate carries (the DerSimonian–Laird idea, with the rounds' common error bounded by ``B``
    rather than estimated). ``(0, nan, nan, 0)`` without rounds.
    """
    e = np.asarray(errors, dtype=np.float64)
    s2 = np.asarray(error_se, dtype=np.float64) ** 2 + np.maximum(np.asarray(extra_var, dtype=np.float64), 0.0)
    ok = np.isfinite(e) & np.isfinite(s2)
    e, s2 = e[ok], s2[ok]
    if e.size == 0:
        return 0, math.nan, math.nan, 0.0
    d2 = np.maximum(np.abs(e) - max(float(allowed), 0.0), 0.0) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        q = float(np.sum(np.where(s2 > 0, d2 / s2, np.where(d2 > 0, np.inf, 0.0))))
    return int(e.size), q, float(chi2.sf(q, e.size)), max(0.0, float(np.mean(d2 - s2)))


def transport_spread(errors: npt.ArrayLike, error_se: npt.ArrayLike,
                     extra_var: float | npt.ArrayLike = 0.0) -> tuple[int, float, float, float]:
    """How much a method's error varied from past round to past round beyond their noise: ``(K, Q, p, tau2)``.

    What a *difference* of two rounds carries: an error common to every round cancels in ``A - B``, the part that
    varies from round to round does not. With ``e_k`` and ``s_k^2 = error_se_k^2 + extra_var`` as in
    :func:`transport_excess`, weights ``w_k = 1 / s_k^2`` and their weighted mean ``e_w``, Cochran's ``Q = sum_k
    w_k (e_k - e_w)^2`` is chi-squared with ``K - 1`` degrees of freedom when the rounds share one error, and
    DerSimonian & Laird's ``tau2 = max(0, (Q - (K - 1)) / (sum w - sum w^2 / sum w))`` estimates the variance of a
    round's own error about it; two new rounds' errors then differ with variance ``2 tau2``. ``(K, nan, nan, 0)``
    with fewer than two rounds.
    """
    e = np.asarray(errors, dtype=np.float64)
    s2 = np.asarray(error_se, dtype=np.float64) ** 2 + np.maximum(np.asarray(extra_var, dtype=np.float64), 0.0)
    ok = np.isfinite(e) & np.isfinite(s2) & (s2 > 0)
    e, s2 = e[ok], s2[ok]
    k = int(e.size)
    if k < 2:
        return k, math.nan, math.nan, 0.0
    w = 1.0 / s2
    ew = float(w @ e / w.sum())
    q = float(w @ (e - ew) ** 2)
    den = float(w.sum() - (w @ w) / w.sum())
    tau2 = max(0.0, (q - (k - 1)) / den) if den > 0 else 0.0
    return k, q, float(chi2.sf(q, k - 1)), tau2


def _past_rounds(
    gold_set: AnnotationSet, folds: list[npt.NDArray[np.int64]], qual: list[int], fold_fits: FoldFitsFunction,
    template: Callable[[], Calibration], grid: tuple[float, ...], candidates: Sequence[str], warm: bool,
    notes: list[str],
) -> list[dict[str, Any]]:
    """Every candidate's error on each past round, its gold left out of Stage A (:class:`ModelChecks` ``rounds``).

    For each fold of whole rounds (``folds`` and the rounds ``qual`` from :func:`round_folds`), Stage A is refitted without their gold items (the
    rounds' other items stay); each round's gold items then form a mock round with the round's own gold
    rate, and each candidate estimates it from their silver labels alone: HERO-1 at each weight of ``grid``
    by the score equation on the refit's log-likelihood ratios, the gold-proportion calibration and
    Rogan–Gladen from the other rounds' gold counts, majority vote and current-only Dawid–Skene from the
    round's silver labels alone (they use no history). The error's standard error ``error_se`` is the mock's
    (the estimate's influence values paired with the gold labels); ``calib_var`` is the variance the
    estimate takes from the other rounds' gold counts (gold-proportion and Rogan–Gladen; None for HERO-1,
    whose refits carry no covariance).
    """
    if not folds or not grid:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fits = fold_fits(folds, grid, gold_set, warm)
    tp_all, fn_all, tn_all, fp_all = gold_counts(gold_set)
    rg_cal: Calibration | None = None
    rows: list[dict[str, Any]] = []
    for k, test in enumerate(folds):
        m_k = gold_set.take_items(test, name="past round")
        tk, fk, nk, pk = gold_counts(m_k)
        tp, fn, tn, fp = tp_all - tk, fn_all - fk, tn_all - nk, fp_all - pk
        llrs: dict[tuple[str, float | None], FloatArray] = {
            ("hero1", w): _mock_llr(m_k, fits[k][w][0], fits[k][w][1]) for w in grid if "hero1" in candidates}
        counted = [m for m in ("gold_proportion", "rogan_gladen") if m in candidates]
        if counted and rg_cal is None:
            rg_cal = template()
        for g in qual:
            at = np.flatnonzero(m_k.item_round == g)
            if at.size == 0:
                continue
            y = m_k.gold[at].astype(np.float64)
            out: list[tuple[str, float | None, float, FloatArray, float | None]] = []
            for (meth, w), L in llrs.items():
                est, infl = _score_fit(L[at])
                out.append((meth, w, est, infl, None))
            if rg_cal is not None:  # the methods that read the other rounds' gold counts only
                cal_k = replace(rg_cal, gold_tp=tp, gold_fn=fn, gold_tn=tn, gold_fp=fp, history=None, checks=None,
                                gold_labels=None)  # the other rounds' gold counts (not the whole history's labels)
                for meth in counted:
                    try:
                        r = estimate_methods(m_k.take_items(at), cal_k, method=meth)
                    except HeroEvalError:
                        continue
                    if not isinstance(r, Mapping) and r.influence is not None:
                        vh = r.variance_history
                        out.append((meth, None, r.estimate, r.influence.current, vh if math.isfinite(vh) else None))
            for meth in CURRENT_ONLY:  # read this round's silver labels only: no Stage A, nothing to leave out
                if meth in candidates:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", ConvergenceWarning)
                        cr = _current_only(m_k.take_items(at), meth)
                    if cr.influence is not None:
                        out.append((meth, None, cr.estimate, cr.influence.current, None))
            for meth, w, est, infl, cv in out:
                if not math.isfinite(est):
                    continue
                d = infl - (y - y.mean())
                rows.append({"round": gold_set.round_ids[g], "method": meth, "history_weight": w,
                             "n_items": int(at.size), "truth": float(y.mean()), "estimate": float(est),
                             "error": float(est - y.mean()), "error_se": float(np.sqrt(d @ d) / at.size),
                             "calib_var": cv})
    if rows:
        notes.append(f"past rounds: {len(qual)} history rounds with at least {MIN_ROUND_GOLD} gold items, each "
                     f"estimated with its gold left out of Stage A ({len(folds)} refits per weight)")
    return rows


def mock_key(method: str, weight: float | None) -> str:
    """The key of a mock row's per-item arrays in ``ModelChecks.items`` (``"hero1@0.1"``, ``"rogan_gladen"``)."""
    return method if weight is None else f"{method}@{weight:g}"


def rate_matched_mock(checks: ModelChecks, rate: float) -> dict[str, dict[str, float]]:
    """Every mock row's error when the held-out gold items are weighted by class to ``rate``.

    Under a pure rate shift (the labelers' error rates given the gold label
    unchanged) the gold items weighted by :func:`class_weights` have the
    label distribution of a round at ``rate``, so a candidate's weighted
    mock error estimates its bias *at that rate*, not at the gold's.
    Score methods (HERO-1, gold-proportion) solve the weighted score
    equation on their cross-fitted log-likelihood ratios exactly; the others
    (Rogan–Gladen, majority vote, Dawid–Skene) move by the weighted mean of
    their per-item influence values (exact for majority vote, first order
    for the rest). The error is against the weighted gold rate, and its
    standard error comes from the weighted per-item error terms, with the
    weights held fixed. Returns ``{key: {"bias", "bias_se", "n_eff"}}``
    (:func:`mock_key`), ``n_eff`` the weights' effective sample size
    ``(sum c)^2 / sum c^2``; empty when the checks carry no per-item arrays
    (a calibration file written before they were kept).
    """
    return _weighted_mock(checks, rate)[0]


def _weighted_mock(checks: ModelChecks, rate: float) -> tuple[dict[str, dict[str, float]], dict[str, FloatArray]]:
    """:func:`rate_matched_mock`'s rows and, per row, the per-item error terms whose sum of squares is its
    ``bias_se`` squared (the weights held fixed)."""
    it = checks.items
    if not it or not checks.mock:
        return {}, {}
    y = np.asarray(it["y"], dtype=np.float64)
    yfold = np.asarray(it["y_fold"], dtype=np.float64)
    c = class_weights(y, min(max(float(rate), 0.0), 1.0))
    sc = float(c.sum())
    n_eff = sc * sc / float(c @ c)
    yc = float(c @ y) / sc
    out: dict[str, dict[str, float]] = {}
    terms: dict[str, FloatArray] = {}
    for row in checks.mock:
        key = mock_key(row["method"], row["history_weight"])
        if f"{key}:llr" in it:
            L = np.asarray(it[f"{key}:llr"], dtype=np.float64)
            mu, infl = _score_fit(L, c)
            if not math.isfinite(mu):
                continue
            d = infl - (y - yc)
        elif f"{key}:influence" in it:
            infl = np.asarray(it[f"{key}:influence"], dtype=np.float64)
            # estimate ~ truth + mean(infl): the weighted round moves it by the weighted mean's difference
            mu = float(row["estimate"]) + float(c @ infl) / sc - float(infl.mean())
            # per fold the estimate's linear term is relative to the fold's own rate
            d = infl - (y - yc) if row.get("how") == "pooled" else infl - (y - yfold)
        else:
            continue
        terms[key] = c * d / sc
        out[key] = {"bias": mu - yc, "bias_se": float(np.sqrt(terms[key] @ terms[key])), "n_eff": n_eff}
    ref = out.get(mock_key(ROBUST_REFERENCE, None))
    for key, o in out.items():
        if ref is None or o is ref:
            o["vs_robust"], o["vs_robust_se"] = math.nan, math.nan
            continue
        dd = terms[key] - terms[mock_key(ROBUST_REFERENCE, None)]
        o["vs_robust"] = o["bias"] - ref["bias"]  # the same weighted truth cancels
        o["vs_robust_se"] = float(np.sqrt(dd @ dd))
    return out, terms


def paired_mock_difference(checks: ModelChecks, rate_a: float, rate_b: float) -> dict[str, dict[str, float]]:
    """Every mock row's error on a difference of two rounds: ``b(rate_a) - b(rate_b)`` on the same held-out items.

    The held-out gold items weighted by class to each round's rate (:func:`rate_matched_mock`) give a candidate's
    error at that rate; both errors come from the same items, so the error of the *difference* ``A - B`` is their
    difference and its standard error comes from the difference of the per-item error terms (items weighted to
    both rates at once): noise the two rates share cancels, and at equal rates the difference's error is exactly
    0 with standard error 0. Returns ``{key: {"bias", "bias_se", "vs_robust", "vs_robust_se", "n_eff_a",
    "n_eff_b"}}`` (:func:`mock_key`; ``vs_robust``: the same for the candidate's difference from Rogan–Gladen's),
    empty without per-item arrays.
    """
    oa, ta = _weighted_mock(checks, rate_a)
    ob, tb = _weighted_mock(checks, rate_b)
    ref = mock_key(ROBUST_REFERENCE, None)
    out: dict[str, dict[str, float]] = {}
    for key in oa:
        if key not in ob:
            continue
        dd = ta[key] - tb[key]
        row = {"bias": oa[key]["bias"] - ob[key]["bias"], "bias_se": float(np.sqrt(dd @ dd)),
               "n_eff_a": oa[key]["n_eff"], "n_eff_b": ob[key]["n_eff"], "vs_robust": math.nan,
               "vs_robust_se": math.nan}
        if key != ref and ref in ta and ref in tb:
            dr = dd - (ta[ref] - tb[ref])
            row["vs_robust"] = row["bias"] - (oa[ref]["bias"] - ob[ref]["bias"])
            row["vs_robust_se"] = float(np.sqrt(dr @ dr))
        out[key] = row
    return out


def _current_only(items: AnnotationSet, method: str) -> EstimateResult:

    return majority_vote(items) if method == "majority_vote" else dawid_skene(items)


def _mock_llr(items: AnnotationSet, alpha: FloatArray, beta: FloatArray) -> FloatArray:
    """Per-item log-likelihood ratio of items taken from the calibration's own history."""

    return log_likelihood_ratios(items, np.arange(alpha.size, dtype=np.int64), np.asarray(alpha), np.asarray(beta))


def _score_fit(L: FloatArray, weights: FloatArray | None = None) -> tuple[float, FloatArray]:
    """HERO's score equation on cross-fitted log-likelihood ratios (weighted: ``sum w psi = 0``): the estimate
    (NaN when unidentified) and its per-item influence values ``psi / I``, ``I`` the (weighted) mean of psi^2."""

    mu, status = solve_score(L, weights=weights)
    if status == "unidentified":
        return math.nan, np.zeros(L.size)
    ps = psi(mu, L)
    info = float(np.average(ps**2, weights=weights))
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
