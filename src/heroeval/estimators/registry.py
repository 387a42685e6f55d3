"""The estimators by name, and the dispatch behind :func:`heroeval.estimate`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypedDict, Unpack

import numpy as np

from heroeval.core.options import options_of
from heroeval.errors import HeroEvalError
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.common import (
    DispatchRule,
    ShiftRule,
    TieRule,
    check_calibration,
    check_current,
    dispatch_rule,
    has_unknown,
    with_history,
)
from heroeval.estimators.control_variate import hero2
from heroeval.estimators.methods import dawid_skene, gold_proportion, hero1, hero_joint, majority_vote
from heroeval.estimators.misclassification import rogan_gladen
from heroeval.estimators.ppi import ALL_GOLD_METHODS
from heroeval.estimators.results import EstimateResult
from heroeval.estimators.table import METHODS
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.fit import fit_stage_a

__all__ = ["ESTIMATE_DEFAULTS", "ESTIMATORS", "EstimateKeywords", "EstimateOptions", "Estimator", "estimate_methods"]


class EstimateKeywords(TypedDict, total=False):
    """The estimators' keyword options as :func:`heroeval.estimate` takes them (and documents them):
    ``ridge`` and ``on_shift`` (HERO-2), ``tie`` and ``rng`` (majority vote), and the new-labeler rule
    (``new_labelers``, or the older ``exclude_new_labelers``)."""

    ridge: float
    tie: TieRule
    exclude_new_labelers: bool
    rng: np.random.Generator | int | None
    new_labelers: DispatchRule | None
    on_shift: ShiftRule


ESTIMATE_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "ridge": 0.0, "tie": "half", "exclude_new_labelers": False, "rng": None, "new_labelers": None,
    "on_shift": "warn",
})
""":class:`EstimateKeywords`' defaults."""


@dataclass(frozen=True)
class EstimateOptions:
    """The options of one call of the dispatch that an estimator may use."""

    rule: str  # the new-labeler rule: "error", "exclude", "estimate" or "auto" (heroeval.estimators.common.dispatch_rule)
    ridge: float = 0.0
    tie: TieRule = "half"
    rng: np.random.Generator | int | None = None
    on_shift: ShiftRule = "warn"

    @property
    def exclude(self) -> bool:
        """Whether a method other than HERO-1 leaves the new labelers' labels out."""
        return self.rule in ("exclude", "auto")

    @property
    def hero1_rule(self) -> str:
        """HERO-1's own rule: ``"auto"`` estimates the new labelers."""
        return "estimate" if self.rule == "auto" else self.rule


@dataclass(frozen=True)
class Estimator:
    """One method of :data:`ESTIMATORS`: how to run it, and what it needs.

    ``run(data, calibration, options)`` computes the estimate. ``new_labelers_estimate``: whether it runs
    under ``new_labelers="estimate"`` with labelers new to the calibration (HERO-1 estimates them; majority
    vote and Dawid–Skene use no calibration). ``missing(data, calibration)`` says why the method
    cannot run on these inputs (``None``: it can); with ``method="all"`` it is then skipped with that reason,
    asked for alone it runs and raises its own error.
    """

    name: str
    run: Callable[[AnnotationSet, Calibration, EstimateOptions], EstimateResult]
    new_labelers_estimate: bool = False
    missing: Callable[[AnnotationSet, Calibration], str | None] = lambda data, cal: None


# Each entry looks its function up when it runs (not when the table is built), so that a wrapped or patched
# estimator (tests count the calls) is the one that runs.
ESTIMATORS: Mapping[str, Estimator] = MappingProxyType({
    "majority_vote": Estimator("majority_vote", lambda d, c, o: majority_vote(d, tie=o.tie, rng=o.rng),
                               new_labelers_estimate=True),
    "dawid_skene": Estimator("dawid_skene", lambda d, c, o: dawid_skene(d), new_labelers_estimate=True,
                             missing=lambda d, c: "needs at least 2 items in the current round"
                             if d.n_items < 2 else None),
    "gold_proportion": Estimator("gold_proportion",
                                 lambda d, c, o: gold_proportion(d, c, exclude_new_labelers=o.exclude)),
    "rogan_gladen": Estimator("rogan_gladen", lambda d, c, o: rogan_gladen(d, c, exclude_new_labelers=o.exclude)),
    "hero1": Estimator("hero1", lambda d, c, o: hero1(d, c, new_labelers=o.hero1_rule),  # type: ignore[arg-type]
                       new_labelers_estimate=True),
    "hero2": Estimator("hero2", lambda d, c, o: hero2(d, c, ridge=o.ridge, exclude_new_labelers=o.exclude,
                                                      on_shift=o.on_shift),
                       missing=lambda d, c: "needs covariates for the current round and the history"
                       if d.covariates is None or c.covariate_mean is None else None),
    "hero_joint": Estimator("hero_joint", lambda d, c, o: hero_joint(d, c, exclude_new_labelers=o.exclude),
                            missing=lambda d, c: "needs the history itself, not only a calibration file"
                            if c.history is None else None),
})
"""The estimators by method name, in the order of ``method="all"`` (:data:`~heroeval.estimators.table.METHODS`)."""

assert tuple(ESTIMATORS) == METHODS, "the registry and METHODS list the same methods in the same order"


def estimate_methods(
    current: AnnotationSet,
    calibration: Calibration | None = None,
    *,
    method: str | Sequence[str] = "hero1",
    history: AnnotationSet | None = None,
    **options: Unpack[EstimateKeywords],
) -> EstimateResult | EstimateCollection:
    """Run one estimator, several, or ``"all"`` on the current round: the dispatch behind :func:`heroeval.estimate`.

    The parameters are those of :func:`heroeval.estimate`, which documents
    them, without the recommended estimate (``method="auto"`` and
    ``recommend``): the choice among methods is made above the estimators,
    in :mod:`heroeval.choice`, and composed with this dispatch in
    :mod:`heroeval.workflows.api`.
    """
    o = options_of("estimate_methods", options, EstimateKeywords, ESTIMATE_DEFAULTS)
    data = check_current(current)
    if calibration is None:
        if history is None:
            raise HeroEvalError("pass a calibration or a history to calibrate from")
        calibration = fit_stage_a(history)
    cal = with_history(check_calibration(calibration), history)
    single = isinstance(method, str) and method != "all"
    if isinstance(method, str):
        wanted = list(METHODS) if method == "all" else [method]
    else:
        wanted = list(method)
    for m in wanted:
        if m == "auto":
            raise HeroEvalError("method 'auto' (the recommended estimate) is chosen by heroeval.estimate, "
                                "not by the estimators' dispatch")
        if m not in METHODS:
            also = (f"; {m!r} is one of the methods for a round with gold of its own ({', '.join(ALL_GOLD_METHODS)}), "
                    "which heroeval.estimate runs" if m in ALL_GOLD_METHODS else
                    f", or with gold in the current round {', '.join(ALL_GOLD_METHODS)}")
            raise HeroEvalError(f"unknown method {m!r}; choose from {list(METHODS)}, 'auto' or 'all'{also}")
    results: dict[str, EstimateResult] = {}
    skipped: dict[str, str] = {}
    rule = dispatch_rule(data, cal, o["new_labelers"], o["exclude_new_labelers"])
    anchored = rule == "estimate" and has_unknown(data, cal)
    run_options = EstimateOptions(rule=rule, ridge=o["ridge"], tie=o["tie"], rng=o["rng"], on_shift=o["on_shift"])
    for m in wanted:
        est = ESTIMATORS[m]
        if anchored and not est.new_labelers_estimate:
            if single:
                raise HeroEvalError(f"new_labelers='estimate' is implemented for hero1 only, not {m}")
            skipped[m] = "new_labelers='estimate' is implemented for hero1 only"
            continue
        why = None if single else est.missing(data, cal)
        if why is not None:
            skipped[m] = why
            continue
        results[m] = est.run(data, cal, run_options)
    if single:
        return results[wanted[0]]
    return EstimateCollection(results, ingest=data.report, skipped=skipped)
