"""The public entry points that compose Stage A, the estimators, the model checks and the choice.

This is the one layer that sees all of them:

* :func:`calibrate` fits Stage A (:func:`heroeval.stage_a.fit.fit_stage_a`)
  and, when asked (``checks=True`` or ``history_weight="cv"``), runs the model
  checks on the history's gold first (:func:`heroeval.checks.run_checks`) and
  keeps them in ``Calibration.checks``;
* :func:`calibrate_dask` does the same for a history on a Dask cluster: Stage A
  and the checks' refits on the workers (:mod:`heroeval.stage_a.distributed`),
  the rest of the checks on the gold items brought to the client
  (:func:`heroeval.checks.model_checks.run_checks_on_gold`);
* :func:`estimate` runs the estimators (:func:`heroeval.estimators.estimate_methods`)
  and, for ``method="auto"`` or ``recommend=True``, the choice
  (:func:`heroeval.choice.auto`).

Below this layer, Stage A knows nothing of the checks, the estimators know
nothing of the choice, and the checks refit Stage A and run the estimators
through their own lower-level entry points.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, Unpack, cast, overload

import numpy as np
import numpy.typing as npt

from heroeval.checks.drift import check_drift
from heroeval.checks.fold_refits import FoldFitter, Params, fold_fits_shared
from heroeval.checks.model_checks import CheckSettings, run_checks, run_checks_on_gold
from heroeval.choice.auto import recommend as _recommend
from heroeval.choice.with_gold import recommend_with_gold
from heroeval.core.options import options_of
from heroeval.errors import HeroEvalError, HeroEvalWarning, MultipleRoundsWarning
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.common import (
    check_calibration,
    check_current,
    dispatch_rule,
    has_unknown,
    with_history,
)
from heroeval.estimators.ppi import ALL_GOLD_METHODS, GOLD_METHODS, gold_estimates, split_methods
from heroeval.estimators.records import DriftCheck, Recommendation
from heroeval.estimators.registry import estimate_methods
from heroeval.estimators.results import EstimateResult
from heroeval.ingest.annotations import AnnotationSet
from heroeval.ingest.compact import CompactHistory
from heroeval.ingest.options import COLUMN_DEFAULTS, ColumnOptions
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.distributed import fit_stage_a_dask, load_dask_history
from heroeval.stage_a.distributed_folds import DaskFoldFits
from heroeval.stage_a.fit import check_fit_settings, fit_stage_a
from heroeval.stage_a.settings import (
    EMSettings,
    FitSettings,
    check_em_settings,
    check_pseudo_count,
    check_weight,
)
from heroeval.workflows.options import (
    CALIBRATE_DASK_DEFAULTS,
    CALIBRATE_DEFAULTS,
    ESTIMATE_CALL_DEFAULTS,
    CalibrateDaskOptions,
    CalibrateOptions,
    EstimateCallOptions,
)
from heroeval.workflows.strata import Strata, StrataEstimate, StratumResult, strata_estimate

__all__ = [
    "DRIFT_METHODS", "SMALL_ROUND", "calibrate", "calibrate_dask", "estimate", "estimate_by", "warn_multiple_rounds",
    "warn_small_round",
]

DRIFT_METHODS = frozenset({"hero1", "hero2", "hero_joint", "auto"})
"""Methods that trust the calibration's sensitivities on the current round: :func:`estimate` checks drift with them."""


def warn_multiple_rounds(current: AnnotationSet) -> None:
    """Warn when a "current round" holds several rounds (its round column names more than one): they are pooled."""
    if current.n_rounds > 1:
        shown = ", ".join(repr(r) for r in current.round_ids[:8]) + (" ..." if current.n_rounds > 8 else "")
        warnings.warn(MultipleRoundsWarning(
            f"the current round {current.name!r} holds {current.n_rounds} rounds ({shown}); they are estimated as "
            "one round, so the rate is their pooled rate. Pass one round at a time (filter its rows by the round "
            "column), or compare two rounds with heroeval.compare."), stacklevel=3)


SMALL_ROUND = 10
"""Fewer current items than this: :func:`estimate` warns that every standard error rests on the spread of a
handful of items."""


def warn_small_round(current: AnnotationSet) -> None:
    """Warn when the current round is too small for its standard errors to mean much (issue #38: a one-item
    round gave no warning)."""
    n = current.n_items
    if n >= SMALL_ROUND:
        return
    what = ("one item: no standard error can be estimated from the spread of one item, and Dawid-Skene is not "
            "computed" if n == 1 else
            f"{n} items: every standard error rests on the spread of {n} items, so the Wald and logit intervals "
            "are rough")
    warnings.warn(HeroEvalWarning(
        f"the current round {current.name!r} has {what}; the score-test intervals and one-sided bounds "
        "(ci_method='score'; confidence_interval(alternative='less')) hold best at small counts. Label more items "
        "(hero plan says how many)."), stacklevel=3)


def _drift(current: AnnotationSet, cal: Calibration, hero1: EstimateResult | None = None) -> DriftCheck | str:
    """The drift check of ``current`` against ``cal`` (warns on drift), or why it could not run; ``hero1``: HERO-1
    of ``current`` with ``cal`` when already computed (the check does not fit it again)."""
    try:
        return check_drift(current, cal, hero1_estimate=hero1)
    except HeroEvalError as exc:  # e.g. no calibrated labeler in the round: nothing to test
        return str(exc)



def _reusable(results: Mapping[str, EstimateResult], *, tie: str, ridge: float,
              on_shift: str) -> dict[str, EstimateResult]:
    """The estimates ``estimate`` made that the recommendation's candidates would make again with the same
    inputs: every one but majority vote under another tie rule and HERO-2 with a ridge or another shift rule
    (the candidates run with the defaults)."""
    out = dict(results)
    if tie != "half":
        out.pop("majority_vote", None)
    if ridge != 0.0 or on_shift != "warn":
        out.pop("hero2", None)
    return out


def calibrate(
    history: AnnotationSet | CompactHistory,
    **options: Unpack[CalibrateOptions],
) -> Calibration:
    """Stage A: learn each labeler's sensitivity and specificity from a history.

    Gold-anchored EM (the paper's Stage A): gold items enter with their known
    label, the others through the two-coin mixture; each history round has
    its own prevalence and all rounds share the labeler parameters. Starting
    values come from the gold subset (see :func:`initial_values`).

    Parameters
    ----------
    history : AnnotationSet or CompactHistory
        Historical annotations with gold labels for some items. A
        :class:`~heroeval.ingest.compact.CompactHistory`
        (:func:`heroeval.ingest.read.read_compact`, for histories near the
        size of memory) is fitted by the compiled engine without a copy; it
        takes no model checks, and the calibration keeps no history.
    tol : float, default 1e-8
        Stop when one EM step changes no probability parameter by more than
        ``tol`` (``criterion="parameters"``), or when the relative change of
        the log-likelihood is below ``tol`` (``criterion="loglik"``).
    max_iter : int, default 10000
        Maximum number of EM map evaluations.
    criterion : {"parameters", "loglik"}
        The paper stops on the log-likelihood (tol 1e-6, 200 iterations);
        with few labels per item that can stop early enough to bias HERO-1,
        so the default stops on the parameters.
    accelerate : bool, default True
        SQUAREM extrapolation (Varadhan and Roland, 2008) with a monotone
        safeguard.
    pseudo_count : float, default 0
        ``c > 0`` adds ``c`` pseudo-observations of each kind to every
        labeler's M-step, ``alpha_j = (sum gamma z + c) / (sum gamma + 2c)``
        (MAP-EM under a Beta(1 + c, 1 + c) prior). The default 0 is the
        paper's maximum likelihood. Without it a labeler with few gold items
        can be fitted as perfect (sensitivity or specificity 1); parameters
        are kept in [1e-9, 1 - 1e-9], so a single contrary label by such a
        labeler then counts about 20.7 nats. ``Calibration.labelers_at_bound``
        lists them.
    shrink : {"none", "eb"}, default "none"
        ``"eb"`` shrinks each labeler's sensitivity and specificity towards
        the pool as far as its own gold is thin: an empirical-Bayes
        ``Beta(k m, k (1 - m))`` prior, fitted to the labelers' gold counts by
        the beta-binomial method of moments (as ``rogan_gladen(shrink="eb")``
        does), enters the M-step as pseudo-counts ``k m`` and ``k (1 - m)``
        (added to ``pseudo_count``'s); ``k`` is at most the number of gold
        annotations it was fitted on (:mod:`heroeval.stage_a.prior`). The
        fitted prior is in ``Calibration.settings["prior"]``. The model checks'
        refits fit it on each fold's kept gold. The parameter covariance
        carries the uncertainty of the pooled rates ``m`` (their estimating
        equation stacked with Stage A's); the strengths ``k`` are treated as
        known. Not the default: with it ``method="auto"`` was less accurate
        on the shared data sets (docs/research/robustness.md section 7).
    variance : {"sandwich", "model"}
        How the uncertainty of the fitted parameters is estimated:
        ``"sandwich"`` (default) sums the history items' influence values
        ``H^-1 s_r`` (robust to some misspecification); ``"model"`` uses the
        inverse observed information ``H^-1``.
    covariance : bool, default True
        Compute ``parameter_covariance`` (needed for standard errors). It
        costs a few passes over the annotations after the fit.
    history_weight : float in [0, 1] or "cv", default 1
        Weight ``w`` of the gold-free history items' log-likelihood. ``w = 1``
        is the paper's Stage A; ``w = 0`` calibrates on the gold items alone
        (the gold-free items are ignored); values between
        trade the history's volume against the two-coin model's misfit (the
        model assumes labelers err independently given the gold label, which
        real crowds and LLM judges violate). ``"cv"`` picks ``w`` from
        :data:`heroeval.checks.WEIGHT_GRID` by the cross-validated log score
        of held-out gold items (see :func:`heroeval.checks.run_checks`); the
        choice, the scores and the other model checks are kept in
        ``Calibration.checks``. Standard errors treat the chosen ``w`` as
        fixed (the weighted likelihood is an estimating equation for any
        fixed ``w``; docs/research/robustness.md has the argument and the coverage
        measured with ``w`` chosen this way).
    checks : bool, default False
        Run the model checks on the history's gold items
        (:func:`heroeval.checks.run_checks`: cross-validated log score and
        calibration curve, mock current rounds made of held-out gold items,
        the conditional-dependence test) and keep them in
        ``Calibration.checks``. ``method="auto"`` uses them. Always on with
        ``history_weight="cv"``.
    check_folds : int, default 5
        Folds of the gold items for the checks.
    check_rounds : bool, default True
        With the checks, also estimate each history round with its gold left
        out of Stage A when at least two rounds hold 8 or more gold items
        (the past-round check ``method="auto"`` uses, docs/auto.md step 7);
        False skips its refits.
    seed : int, default 0
        Seed of the fold assignment.
    compress : bool, default True
        Fit the EM on (label pattern, count) rows when gold-free items with
        identical patterns are at least twice fewer than items (small fixed
        panels, such as a few LLM judges) and the history has no covariates.
        The fit and its covariance are the same as on items (to rounding;
        tests/unit/test_compress.py), only faster.
    engine : {"auto", "numpy", "numba"}, default "auto"
        ``"numpy"``: sparse mat-vecs (:mod:`heroeval.stage_a.two_coin`). ``"numba"``: fused,
        multi-threaded compiled passes over one small integer per annotation
        (:mod:`heroeval.stage_a.kernels`; a regular dependency since 0.2),
        several times faster and about a fifth of the memory, with the same
        results (to 1e-10, tests/unit/test_kernels.py); it fits on items
        (``compress`` is not used). ``"auto"`` takes numba when it is installed
        and the history has at least :data:`NUMBA_MIN_ANNOTATIONS`
        annotations. For histories on a cluster see
        :func:`heroeval.calibrate_dask`.
    progress : bool or callable, default False
        Report each EM cycle: ``True`` logs map evaluations, log-likelihood
        and the largest parameter change to the ``heroeval`` logger (the
        ``hero`` CLI shows them on a terminal); a callable is called as
        ``progress(map_evaluations, loglik, max_change)``.

    Returns
    -------
    Calibration

    Examples
    --------
    >>> import heroeval as he
    >>> hist = he.AnnotationSet.from_arrays(
    ...     [1, 1, 2, 2, 3, 3], ["a", "b", "a", "b", "a", "b"], [1, 1, 0, 1, 0, 0],
    ...     gold=([1, 3], [1, 0]))
    >>> cal = he.calibrate(hist)
    >>> cal.labeler_ids
    ('a', 'b')
    """
    o = options_of("calibrate", options, CalibrateOptions, CALIBRATE_DEFAULTS)
    check_fit_settings(history, o["tol"], o["max_iter"], o["criterion"], o["pseudo_count"], o["variance"],
                       o["shrink"])
    em = EMSettings.from_dict(o)
    covariance, history_weight = o["covariance"], o["history_weight"]
    cv = history_weight == "cv"
    w = 1.0 if cv else check_weight(history_weight)

    def fit(weight: float, with_covariance: bool, keep_design: bool = False) -> Calibration:
        return fit_stage_a(history, em=em,
                           fitting=FitSettings(o["variance"], with_covariance, o["compress"], o["engine"]),
                           history_weight=weight, progress=o["progress"], keep_design=keep_design)

    if not (cv or o["checks"]):
        return fit(w, covariance)
    if isinstance(history, CompactHistory):
        raise HeroEvalError("the model checks (checks=True, history_weight='cv') refit Stage A on the history's "
                            "items, which a CompactHistory does not keep: read the history with read_annotations, "
                            "or calibrate without the checks")
    # the fit first: the checks' refits start from it and share its design and its information
    cal = fit(w, covariance and not cv, keep_design=True)
    model_checks = run_checks(history, folds=o["check_folds"], seed=o["seed"], start=cal,
                              past_rounds=o["check_rounds"], em_settings=em.to_dict())
    if cv:
        cal = fit(model_checks.chosen_weight, covariance)
    return replace(cal, checks=model_checks, history_design=None, history_information=None)


def calibrate_dask(
    history: Any,
    *,
    gold: Any,
    client: Any = None,
    covariates: Any = None,
    partitioned_by_item: bool | Literal["auto"] = False,
    **options: Unpack[CalibrateDaskOptions],
) -> Calibration:
    """:func:`calibrate` on a Dask cluster: Stage A and, when asked, the model checks, for a history in Dask.

    The history stays on the workers (:func:`heroeval.stage_a.distributed.load_dask_history`: one compact
    design per partition); every EM step, Newton step and the covariance are a map over the partitions and
    a reduce of small sums on the client (:func:`heroeval.stage_a.distributed.fit_stage_a_dask`). With
    ``checks=True`` or ``history_weight="cv"``, the model checks' refits (one per fold of the gold items and
    history weight) run on the cluster the same way, the left-out gold items weighted 0
    (:class:`heroeval.stage_a.distributed_folds.DaskFoldFits`), and the rest of the checks (held-out predictions,
    mock rounds, the dependence test), which read the gold items only, run on the client on the gold items
    brought there (:meth:`~heroeval.stage_a.distributed.DaskHistory.gold_items`): the same checks as
    :func:`calibrate` computes in memory, to the EM tolerance. The gold items' annotations must fit in the
    client's memory (they usually are a few per cent of the history).

    Parameters
    ----------
    history : dask.dataframe.DataFrame or str
        The annotation log, or a Parquet path or glob that Dask reads; columns as for
        :func:`heroeval.read_annotations`.
    gold : path, pandas table or Series
        Gold labels of some history items (read on the client and broadcast).
    client : distributed.Client, optional
        Default: the current client.
    covariates : path or pandas table, optional
        One row per history item with its numeric covariates (HERO-2), read on the client and broadcast to
        the workers.
    item_col, labeler_col, label_col, round_col, gold_col, gold_item_col, covariate_item_col, covariate_cols
        Column names, as for :func:`heroeval.read_annotations`.
    partitioned_by_item : bool or "auto", default False
        Whether every item's rows sit in one partition already: True promises it (checked on the item ids the
        load codes anyway; a DataError when an item has rows in two partitions); False shuffles the log on the
        item column; ``"auto"`` checks and shuffles only when the check fails (what ``hero calibrate
        --scheduler`` uses: a Parquet log written by item needs no shuffle).
    tol, max_iter, criterion, accelerate, pseudo_count, shrink, variance, covariance, history_weight, checks, check_folds,
    check_rounds, seed, progress
        As in :func:`calibrate`.

    Returns
    -------
    Calibration
        With ``history=None`` (the items stay on the cluster): ``hero_joint`` and the bootstrap need the
        history in memory.
    """
    o = options_of("calibrate_dask", options, CalibrateDaskOptions, CALIBRATE_DASK_DEFAULTS)
    check_em_settings(o["tol"], o["max_iter"], o["criterion"])
    c = check_pseudo_count(o["pseudo_count"])
    em = EMSettings.from_dict({**o, "pseudo_count": c})
    variance, covariance, history_weight, check_folds = o["variance"], o["covariance"], o["history_weight"], \
        o["check_folds"]
    if variance not in ("sandwich", "model"):
        raise HeroEvalError(f"variance must be 'sandwich' or 'model', got {variance!r}")
    cv = history_weight == "cv"
    w = 1.0 if cv else check_weight(history_weight)
    if not (isinstance(check_folds, int) and check_folds >= 2):
        raise HeroEvalError(f"check_folds must be an integer >= 2, got {check_folds!r}")
    columns = cast(ColumnOptions, {k: o[k] for k in COLUMN_DEFAULTS})
    dh = load_dask_history(history, gold=gold, client=client, covariates=covariates,
                           partitioned_by_item=partitioned_by_item, **columns)

    def fit(weight: float, with_covariance: bool) -> Calibration:
        return fit_stage_a_dask(dh, em=em, fitting=FitSettings(variance, with_covariance), history_weight=weight,
                                progress=o["progress"])

    if not (cv or o["checks"]):
        return fit(w, covariance)
    cal = fit(w, covariance and not cv)
    settings = em.to_dict()
    ff: FoldFitter = DaskFoldFits(dh, pseudo_count=c, shrink=em.shrink)

    def fold_fits(fold_items: list[npt.NDArray[np.int64]], grid: tuple[float, ...], gold_set: AnnotationSet,
                  warm: bool) -> list[dict[float, Params]]:
        return fold_fits_shared(ff, gold_set, fold_items, grid, settings, cal, warm)

    model_checks = run_checks_on_gold(dh.gold_items(), n_labels=dh.n_annotations, fold_fits=fold_fits,
                                      template=lambda: cal,
                                      settings=CheckSettings(folds=check_folds, seed=o["seed"],
                                                             past_rounds=o["check_rounds"]))
    if cv:
        cal = fit(model_checks.chosen_weight, covariance)
    return replace(cal, checks=model_checks)


@overload
def estimate(
    current: AnnotationSet,
    calibration: Calibration | None = None,
    *,
    method: str | Sequence[str] = "hero1",
    history: AnnotationSet | None = None,
    recommend: bool = False,
    by: None = None,
    **options: Unpack[EstimateCallOptions],
) -> EstimateResult | EstimateCollection: ...


@overload
def estimate(
    current: AnnotationSet,
    calibration: Calibration | None = None,
    *,
    method: str | Sequence[str] = "hero1",
    history: AnnotationSet | None = None,
    recommend: bool = False,
    by: Strata,
    **options: Unpack[EstimateCallOptions],
) -> StrataEstimate: ...


def estimate(
    current: AnnotationSet,
    calibration: Calibration | None = None,
    *,
    method: str | Sequence[str] = "hero1",
    history: AnnotationSet | None = None,
    recommend: bool = False,
    by: Strata | None = None,
    **options: Unpack[EstimateCallOptions],
) -> EstimateResult | EstimateCollection | StrataEstimate:
    """Estimate the current round's gold rate by one method, several, or ``"all"``.

    Parameters
    ----------
    current : AnnotationSet
        The current round (no gold needed). Gold on some of its items (a
        uniform random sample, or drawn by a design such as ``hero
        select``'s, recorded with :meth:`AnnotationSet.with_design`) is
        ignored by the silver-label methods and used by the methods with
        current gold (:mod:`heroeval.estimators.ppi`): ``hero1_ppi`` (HERO-1's
        posteriors rectified by the gold, PPI++), ``prior_ppi``, ``mv_ppi``
        (majority vote rectified) and ``gold_only``. ``method="all"`` adds
        ``hero1_ppi``, ``mv_ppi`` and ``gold_only`` when the round has gold,
        and the recommended estimate is then ``hero1_ppi``
        (:func:`heroeval.choice.with_gold.recommend_with_gold`). Without current
        gold nothing changes.
    calibration : Calibration, optional
        From :func:`calibrate` or :func:`load_calibration`. If omitted,
        ``history`` is calibrated with default settings.
    method : str or sequence of str
        A method name, a list of names, or ``"all"``: every method the inputs
        allow (``hero2`` needs covariates on both sides, ``hero_joint`` needs
        the history itself). A single name returns an :class:`EstimateResult`,
        otherwise an :class:`EstimateCollection` that lists skipped methods
        and why. ``"auto"`` returns the result of the method
        :func:`heroeval.choice.recommend` picks from the model checks on the
        history's gold (its ``details["auto"]`` says why); it needs
        ``calibration.checks`` or the history.
    recommend : bool, default False
        With several methods: also run the ``"auto"`` choice and attach it
        as ``EstimateCollection.recommended`` (skipped, with the reason,
        when neither model checks nor the history are available). The
        ``hero`` CLI always asks for it with ``--method all``. It stays off
        by default because, with a calibration made without model checks
        and a history, the choice first runs the checks (a 5-fold refit of
        Stage A) on every call.
    new_labelers : {"auto", "error", "exclude", "estimate"}, optional
        Labelers unknown to the calibration (see :func:`hero1`). By default
        (``None`` or ``"auto"``), when the round has such labelers, HERO-1
        estimates them from the round (anchored by the calibrated ones) and
        every other method, and the recommended estimate, leave their labels
        out; each result's notes say what was done. ``"error"`` stops with
        :class:`~heroeval.errors.UnknownLabelerError`; ``"exclude"`` leaves them
        out everywhere; ``"estimate"`` applies to HERO-1 only: with several
        methods the other calibrated methods are skipped (listed with the
        reason) when new labelers are present.
    on_shift : {"warn", "fallback", "ignore"}
        HERO-2's rule on covariate shift (see :func:`hero2`).
    drift_check : bool, default True
        When a method that trusts the calibration on this round is computed
        (``hero1``, ``hero2``, ``hero_joint`` or ``auto``), test each
        labeler's current positive rate against its calibration
        (:func:`heroeval.check_drift`), which warns with a
        :class:`~heroeval.TransportabilityWarning` on drift; a collection
        keeps the check in ``EstimateCollection.drift``.
    by : str, mapping or pandas Series, optional
        Rates per stratum (harm category, topic, query): each stratum of the
        round estimated alone, with intervals simultaneous over the strata at
        95 % (Bonferroni); returns a
        :class:`~heroeval.workflows.strata.StrataEstimate`. A mapping (or a
        Series indexed by item id) gives each item's stratum; a column name
        means the round's own round column, read with
        ``read_annotations(path, round_col=by)``. See :func:`estimate_by`
        (which also takes the level and the adjustment).

    A "current round" whose round column names several rounds is estimated
    as one (pooled) round, with a :class:`~heroeval.errors.MultipleRoundsWarning`.

    Examples
    --------
    >>> import heroeval as he
    >>> hist = he.AnnotationSet.from_arrays(
    ...     [1, 1, 2, 2, 3, 3], ["a", "b"] * 3, [1, 1, 0, 1, 0, 0], gold=([1, 3], [1, 0]))
    >>> cur = he.AnnotationSet.from_arrays([7, 7, 8, 8], ["a", "b"] * 2, [1, 1, 0, 0])
    >>> res = he.estimate(cur, history=hist, method="all")
    >>> sorted(res)
    ['dawid_skene', 'gold_proportion', 'hero1', 'hero_joint', 'majority_vote', 'rogan_gladen']
    """
    if by is not None:
        return estimate_by(current, calibration, by=by, method=method, history=history, recommend=recommend,
                           **options)
    o = options_of("estimate", options, EstimateCallOptions, ESTIMATE_CALL_DEFAULTS)
    ridge, tie, rng, on_shift, drift_check = o["ridge"], o["tie"], o["rng"], o["on_shift"], o["drift_check"]
    data = check_current(current)
    warn_multiple_rounds(data)
    warn_small_round(data)
    if calibration is None:
        if history is None:
            raise HeroEvalError("pass a calibration or a history to calibrate from")
        calibration = calibrate(history)
    cal = with_history(check_calibration(calibration), history)
    has_gold = data.has_gold
    rule = dispatch_rule(data, cal, o["new_labelers"], o["exclude_new_labelers"])
    excl = rule in ("exclude", "auto")  # every method but HERO-1 leaves the new labelers out
    if isinstance(method, str) and method in ALL_GOLD_METHODS:
        got, _ = gold_estimates(data, cal, [method], exclude_new_labelers=excl)
        if drift_check and method in ("hero1_ppi", "prior_ppi"):
            _drift(data, cal)
        return got[method]
    # the choice's candidates use calibrated labelers only (HERO-1's row estimates the new ones)
    anchored = rule == "auto" or (rule == "estimate" and has_unknown(data, cal))
    if method == "auto":
        excl_rec = rule == "exclude" or anchored
        rec = (recommend_with_gold(data, cal, exclude_new_labelers=excl_rec) if has_gold
               else _recommend(data, cal, exclude_new_labelers=excl_rec))
        if anchored:
            rec = _anchored(rec, data)
        auto = {"method": rec.method, "history_weight": rec.history_weight, "reason": rec.reason,
                "status": rec.status, "candidates": rec.table}
        if drift_check:
            _drift(data, cal)
        return replace(rec.result, details={**rec.result.details, "auto": auto})
    wanted: str | list[str]
    if isinstance(method, str):
        wanted = method
    else:
        wanted = list(method)
        if "auto" in wanted:  # in a list, "auto" asks for the recommended estimate beside the others
            wanted = [m for m in wanted if m != "auto"]
            recommend = True
    gold_wanted: list[str] = []
    if isinstance(wanted, list):
        wanted, gold_wanted = split_methods(wanted)
    elif wanted == "all" and has_gold:
        gold_wanted = list(GOLD_METHODS)
    res = estimate_methods(data, cal, method=wanted, ridge=ridge, tie=tie, rng=rng, new_labelers=rule,  # type: ignore[arg-type]
                           on_shift=on_shift)
    if gold_wanted:
        assert isinstance(res, EstimateCollection)
        got, why = gold_estimates(data, cal, gold_wanted, exclude_new_labelers=excl,
                                  skip_errors=wanted == "all")
        res = replace(res, results={**res.results, **got}, skipped={**res.skipped, **why})
    computed = {res.method} if isinstance(res, EstimateResult) else set(res)
    own = res.results if isinstance(res, EstimateCollection) else {res.method: res}
    drift = _drift(data, cal, own.get("hero1")) if drift_check and computed & DRIFT_METHODS else None
    if isinstance(res, EstimateResult):
        return res
    res = replace(res, drift=drift)
    if not recommend:
        return res
    if has_gold:  # the round's own gold decides: no model checks needed
        recommended = recommend_with_gold(data, cal, exclude_new_labelers=rule == "exclude" or anchored)
    elif cal.checks is None and cal.history is None:
        return replace(res, skipped={**res.skipped,
                                     "auto": "needs model checks (calibrate with checks=True) or the history"})
    else:
        recommended = _recommend(data, cal, exclude_new_labelers=rule == "exclude" or anchored,
                                 computed=None if anchored else _reusable(own, tie=tie, ridge=ridge,
                                                                          on_shift=on_shift))
    return replace(res, recommended=_anchored(recommended, data) if anchored else recommended)


def _anchored(recommended: Recommendation, data: AnnotationSet) -> Recommendation:
    """The recommendation with the note that labelers new to the calibration were left out of it.

    The same note with and without current gold, for ``method="auto"`` and for the collection's
    ``recommended``: the candidates use calibrated labelers only (HERO-1's own row estimates the new ones).
    """
    r = recommended.result
    note = (f"new labelers left out of the recommended estimate ({r.n_items} of {data.n_items} items, "
            f"{r.n_labelers} of {data.n_labelers} labelers): only HERO-1 estimates labelers new to the "
            "calibration, and its row does")
    return replace(recommended, result=replace(r, notes=(*r.notes, note)), reason=f"{recommended.reason}; {note}")


def estimate_by(
    current: AnnotationSet,
    calibration: Calibration | None = None,
    *,
    by: Strata,
    method: str | Sequence[str] = "hero1",
    history: AnnotationSet | None = None,
    recommend: bool = False,
    confidence_level: float = 0.95,
    adjust: str = "bonferroni",
    **options: Unpack[EstimateCallOptions],
) -> StrataEstimate:
    """Rates per stratum of the current round, with family-wise (simultaneous) intervals over the strata.

    Each stratum of ``current`` is estimated as a round alone, by :func:`estimate` on its items with this
    calibration, history, ``method``, ``recommend`` and ``options``: its estimate, status and recommended
    method are the ones :func:`estimate` (and ``hero estimate``) give on that stratum. The calibration is
    made once (from ``history`` when omitted), and the model checks the recommendation needs are run once
    when the calibration has none (:func:`heroeval.workflows.strata.strata_estimate`).

    Parameters
    ----------
    by : str, mapping or pandas Series
        Each item's stratum: a mapping item id -> stratum, a Series indexed by item id, or the name of the
        column read as the round's round column (``read_annotations(path, round_col=by)``; the name only
        labels the output). :mod:`heroeval.workflows.strata` says how each form is checked.
    confidence_level : float, default 0.95
        The family-wise level: the strata's intervals cover all their rates at once at this level.
    adjust : {"bonferroni", "sidak", "none"}, default "bonferroni"
        How each stratum's level is set from it (``1 - (1 - L) / K``, ``L ** (1 / K)``, or ``L``: marginal);
        the module docstring says why Bonferroni is the default.
    method, history, recommend, options
        As in :func:`estimate`.

    Returns
    -------
    StrataEstimate
        Strata with fewer than 2 items, or whose estimate failed, are in ``skipped`` with the reason.
    """
    if calibration is None:
        if history is None:
            raise HeroEvalError("pass a calibration or a history to calibrate from")
        calibration = calibrate(history)
    cal = with_history(check_calibration(calibration), history)
    wants = recommend or method == "auto" or (not isinstance(method, str) and "auto" in method)

    def one(sub: AnnotationSet, c: Calibration) -> StratumResult:
        return estimate(sub, c, method=method, history=history, recommend=recommend, **options)

    return strata_estimate(current, by, cal, one, recommends=wants, confidence_level=confidence_level,
                           adjust=adjust)
