"""``heroeval.compare``: the difference of two rounds, recommended (``method="auto"``) or by the methods asked for.

The recommended difference rests on each round's own recommendation, made exactly as :func:`heroeval.estimate`
makes it (``method="all", recommend=True``: the same candidates, new-labeler rule and model checks), so that a
round has one answer whichever command shows it; :func:`heroeval.choice.difference.recommend_difference` then
judges the candidate differences on the paired mock rounds. The model checks are computed once for both rounds
when the calibration has none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from heroeval.choice.auto import with_checks
from heroeval.choice.difference import recommend_difference
from heroeval.errors import HeroEvalError
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.common import check_calibration, dispatch_rule, has_unknown, with_history
from heroeval.estimators.records import Recommendation
from heroeval.inference.comparison import (
    Comparison,
    ComparisonCollection,
    DifferenceRecommendation,
)
from heroeval.inference.comparison import compare as compare_methods
from heroeval.inference.pairing import Pairing, resolve_pairing
from heroeval.inference.versions import VersionComparison, check_versions, versions_from
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration
from heroeval.workflows.api import calibrate, estimate

__all__ = ["compare", "compare_versions", "round_recommendation"]

EST_KEYS = ("ridge", "tie", "rng", "new_labelers", "exclude_new_labelers", "on_shift")
"""The options :func:`compare` passes on to each round's estimates."""


def compare(
    round_a: AnnotationSet,
    round_b: AnnotationSet,
    calibration: Calibration | None = None,
    *,
    method: str | Sequence[str] = "auto",
    history: AnnotationSet | None = None,
    pairs: Pairing | Mapping[Any, Any] | pd.Series | str | None = "auto",
    **kwargs: Any,
) -> DifferenceRecommendation | Comparison | ComparisonCollection:
    """Difference of two rounds' gold rates (``a - b``): the recommended one, or by the methods asked for.

    ``method="auto"`` (the default) returns the recommended difference, a
    :class:`~heroeval.inference.comparison.DifferenceRecommendation`: the candidate whose difference has the
    smallest predicted error on the model checks' paired mock rounds, its interval bias-aware when the checks
    find a bias to allow for, ``"unreliable"`` when either round is, and the reason
    (:mod:`heroeval.choice.difference`); with current gold in both rounds, the prediction-powered difference.
    It needs the calibration's model checks (``calibrate(..., checks=True)``) or the history. A method name
    returns that method's :class:`~heroeval.inference.comparison.Comparison`; a list or ``"all"`` a
    :class:`~heroeval.inference.comparison.ComparisonCollection`, which carries the recommended difference as
    ``recommended`` when the list holds ``"auto"`` or is ``"all"`` and the checks or the history are there (else
    ``skipped["auto"]`` says why). Extra keyword arguments are the estimators' options (``ridge``, ``tie``,
    ``rng``, ``new_labelers``, ``exclude_new_labelers``, ``on_shift``). ``pairs``: when the rounds answer the
    same prompts, the differences' current-item variances use the pairing (``"auto"``: items with the same id in
    both rounds; a mapping from item id to prompt id; ``None``: unpaired; :mod:`heroeval.inference.pairing`); see
    :func:`heroeval.inference.comparison.compare` for how each method's difference and its variance are made.

    Examples
    --------
    >>> import heroeval as he
    >>> from heroeval.simulate import paper_dgp
    >>> d1, d2 = paper_dgp(1), paper_dgp(2)
    >>> rec = he.compare(d1.current, d2.current.take_items(range(300)), history=d1.history)
    >>> rec.method, rec.status, rec.comparison.standard_error > 0
    ('hero_joint', 'ok', True)
    """
    unknown = set(kwargs) - set(EST_KEYS)
    if unknown:
        raise TypeError(f"compare() got unexpected keyword argument(s) {sorted(unknown)}; it takes {list(EST_KEYS)}")
    if calibration is None:
        if history is None:
            raise HeroEvalError("pass a calibration or a history to calibrate from")
        calibration = calibrate(history)
    cal = with_history(check_calibration(calibration), history)
    listed = not isinstance(method, str)
    wanted = [m for m in method if m != "auto"] if not isinstance(method, str) else method
    auto = method == "auto" or method == "all" or (listed and "auto" in method)
    pairing = resolve_pairing(round_a, round_b, pairs)
    if method == "auto":
        return _recommended(round_a, round_b, with_checks(cal), kwargs, pairing)
    out = compare_methods(round_a, round_b, cal, method=wanted, history=history, pairs=pairing, **kwargs)
    if not auto or not isinstance(out, ComparisonCollection):
        return out
    if cal.checks is None and cal.history is None:
        return replace(out, skipped={**out.skipped, "auto": "needs model checks (calibrate with checks=True) or the "
                                     "history"})
    try:
        rec = _recommended(round_a, round_b, with_checks(cal), kwargs, pairing)
    except HeroEvalError as exc:
        return replace(out, skipped={**out.skipped, "auto": str(exc)})
    return replace(out, recommended=rec)


def compare_versions(
    rounds: Sequence[AnnotationSet],
    calibration: Calibration | None = None,
    *,
    baseline: str | None = None,
    method: str = "auto",
    history: AnnotationSet | None = None,
    pairs: Pairing | Mapping[Any, Any] | pd.Series | str | None = "auto",
    confidence_level: float = 0.95,
    adjust: str = "sidak",
    margin: float | None = None,
    alternative: str = "less",
    **kwargs: Any,
) -> VersionComparison:
    """Every round against a baseline with family-wise error control (:mod:`heroeval.inference.versions`).

    ``rounds`` are named rounds (``read_annotations(..., name=...)``); ``baseline`` is one of their names (the
    first round when ``None``). Each other round ``X`` gets ``baseline - X`` exactly as :func:`compare` makes it
    (``method="auto"``: the recommended difference; or one method), on one calibration whose model checks are
    computed once; its interval at the simultaneous level (``adjust``: ``"sidak"``, ``"bonferroni"`` or
    ``"none"``) and its p-value Holm-adjusted. With ``margin`` each version gets a verdict
    (:func:`heroeval.inference.verdict.verdicts_holm`; ``alternative`` as in
    :func:`heroeval.inference.verdict.verdict`, B being the version). ``pairs`` and the keyword arguments are
    :func:`compare`'s.

    Examples
    --------
    >>> import heroeval as he
    >>> from heroeval.simulate import paper_dgp
    >>> w = [paper_dgp(s) for s in (1, 2, 3)]
    >>> rounds = [x.current.take_items(range(300), name=f"v{k}") for k, x in enumerate(w)]
    >>> vc = he.compare_versions(rounds, history=w[0].history, margin=0.02)
    >>> [r.version for r in vc.rows], vc.level_each > 0.97
    (['v1', 'v2'], True)
    """
    names = [r.name for r in rounds]
    check_versions(names)
    base = names[0] if baseline is None else baseline
    if base not in names:
        raise HeroEvalError(f"baseline {base!r} is not one of the rounds {names}")
    if not isinstance(method, str) or method == "all":
        raise HeroEvalError("compare_versions reports one difference per version: method must be 'auto' or one "
                            f"method's name, got {method!r}")
    if calibration is None:
        if history is None:
            raise HeroEvalError("pass a calibration or a history to calibrate from")
        calibration = calibrate(history)
    cal = with_history(check_calibration(calibration), history)
    if method == "auto" and (cal.checks is not None or cal.history is not None):
        cal = with_checks(cal)  # once for every version
    by = dict(zip(names, rounds, strict=True))
    out = {v: compare(by[base], by[v], cal, method=method, history=history, pairs=pairs, **kwargs)
           for v in names if v != base}
    return versions_from(base, out, confidence_level=confidence_level, adjust=adjust, margin=margin,
                         alternative=alternative, calibration=cal)


def round_recommendation(current: AnnotationSet, calibration: Calibration, **kwargs: Any) -> Recommendation:
    """One round's recommendation as :func:`heroeval.estimate` makes it (``method="all", recommend=True``), with
    the candidates' estimates (``Recommendation.results``); the drift check is left to the caller."""
    res = estimate(current, calibration, method="all", recommend=True, drift_check=False, **kwargs)
    assert isinstance(res, EstimateCollection)
    if res.recommended is None:
        raise HeroEvalError(f"round {current.name!r}: no recommended estimate ({res.skipped.get('auto', 'unknown')})")
    return res.recommended


def _recommended(round_a: AnnotationSet, round_b: AnnotationSet, cal: Calibration,
                 kwargs: dict[str, Any], pairing: Pairing | None = None) -> DifferenceRecommendation:
    """The recommended difference: each round's own recommendation, then the paired choice."""
    a, b = round_a, round_b
    if a.has_gold != b.has_gold:  # a one-sided gold sample cannot enter a difference: both rounds silver-only
        a, b = _silver(a), _silver(b)
    rec_a = round_recommendation(a, cal, **kwargs)
    rec_b = round_recommendation(b, cal, **kwargs)
    excl = any(dispatch_rule(r, cal, kwargs.get("new_labelers"), bool(kwargs.get("exclude_new_labelers", False)))
               in ("exclude", "auto") or has_unknown(r, cal) for r in (a, b))
    rec = recommend_difference(a, b, cal, rec_a, rec_b, exclude_new_labelers=excl, pairing=pairing)
    for who, r in (("A", rec_a), ("B", rec_b)):  # new labelers: the same rule and note as hero estimate's
        notes = [n for n in r.result.notes if n.startswith("new labelers left out")]
        if notes:
            rec = replace(rec, reason=rec.reason + f"; round {who}: {notes[0]}")
    if a is not round_a or b is not round_b:
        who = "A" if round_a.has_gold else "B"
        rec = replace(rec, reason=rec.reason + f"; round {who}'s expert labels are not used: a difference needs gold "
                      "in both rounds (give the other round expert labels too)")
    return rec


def _silver(ds: AnnotationSet) -> AnnotationSet:
    """The round without its gold labels (the silver-label methods ignore them anyway)."""
    if not ds.has_gold:
        return ds
    return replace(ds, gold=np.full_like(ds.gold, -1), gold_pi=None)
