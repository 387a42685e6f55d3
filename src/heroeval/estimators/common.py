"""What every estimator of the current round shares: input checks, aligning the round's labelers to a
calibration, per-item log-likelihood ratios, the history's influence and the score test of a score-equation
estimate, and the result record."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from heroeval.errors import (
    DataError,
    HeroEvalError,
    UnknownLabelerError,
)
from heroeval.estimators.clusters import ESTIMAND, FEW_GROUPS, MIN_GROUPS, few_groups_factor, with_design_effect
from heroeval.estimators.inversion import ScoreTest
from heroeval.estimators.results import EstimateResult, Influence
from heroeval.estimators.score_equation import psi
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a import scoring, two_coin
from heroeval.stage_a.calibration import Calibration

__all__ = ["Aligned", "DispatchRule", "FloatArray", "NewLabelerRule", "ScoreInputs", "ShiftRule", "TieRule", "align", "check_calibration", "check_current", "dispatch_rule", "em_status", "gold_count_variances", "grouped_inference", "has_unknown", "label_codes", "log_likelihood_ratios", "new_labeler_rule", "result_of", "score_test", "stage_a_influence", "with_history"]


FloatArray = npt.NDArray[np.float64]


TieRule = Literal["half", "positive", "negative", "random"]


ShiftRule = Literal["warn", "fallback", "ignore"]


def check_current(current: Any) -> AnnotationSet:
    if not isinstance(current, AnnotationSet):
        raise HeroEvalError(
            f"current must be an AnnotationSet (from read_annotations), got {type(current).__name__}"
        )
    if current.n_items == 0:
        raise DataError(f"current round {current.name!r} has no annotated items")
    return current


def check_calibration(calibration: Any) -> Calibration:
    if not isinstance(calibration, Calibration):
        raise HeroEvalError(
            f"calibration must be a Calibration (from calibrate or load_calibration), "
            f"got {type(calibration).__name__}"
        )
    return calibration


@dataclass(frozen=True)
class Aligned:
    data: AnnotationSet  # current round, unknown labelers removed if asked
    to_calib: npt.NDArray[np.int64]  # current labeler code -> calibration index
    notes: tuple[str, ...]
    details: dict[str, Any]


def align(current: AnnotationSet, calibration: Calibration, exclude_new_labelers: bool) -> Aligned:
    index = calibration.index_of()
    idx = np.array([index.get(str(lab), -1) for lab in current.labeler_ids], dtype=np.int64)
    unknown = idx < 0
    notes: list[str] = []
    details: dict[str, Any] = {}
    data = current
    if unknown.any():
        names = tuple(str(x) for x in current.labeler_ids[unknown])
        n_ann = int(np.isin(current.labeler, np.flatnonzero(unknown)).sum())
        foreign = _foreign_calibration(current, calibration, unknown, n_ann)
        if not exclude_new_labelers:
            shown = ", ".join(repr(x) for x in names[:10]) + (" ..." if len(names) > 10 else "")
            if foreign:
                raise UnknownLabelerError(foreign, names)
            raise UnknownLabelerError(
                f"{len(names)} labeler(s) of the current round {current.name!r} are not in the "
                f"calibration ({n_ann} annotations): {shown}. Their reliability is unknown; pass "
                "exclude_new_labelers=True to leave their labels out, or (HERO-1) "
                "new_labelers='estimate' to estimate it from the current round.",
                names,
            )
        data, n_removed, n_items_removed = current.select_labelers(~unknown)
        if data.n_items == 0:
            raise DataError(foreign or
                f"current round {current.name!r}: every annotation is by a labeler unknown to the calibration"
            )
        idx = idx[~unknown]
        details.update(
            excluded_labelers=list(names),
            excluded_annotations=n_removed,
            excluded_items=n_items_removed,
        )
        notes.append(
            f"excluded {len(names)} labeler(s) unknown to the calibration: {n_removed} annotations, "
            f"{n_items_removed} item(s) left without labels"
        )
    return Aligned(data=data, to_calib=idx, notes=tuple(notes), details=details)


def _foreign_calibration(current: AnnotationSet, calibration: Calibration, unknown: npt.NDArray[np.bool_],
                         n_unknown_ann: int) -> str:
    """A message when the calibration seems to belong to other data (most of the round's labels are by strangers)."""
    if n_unknown_ann * 2 <= current.n_annotations:
        return ""
    known = int((~unknown).sum())
    ex = ", ".join(repr(str(x)) for x in current.labeler_ids[:3])
    cx = ", ".join(repr(x) for x in calibration.labeler_ids[:3])
    lead = "every annotation is by a labeler unknown to the calibration: " if known == 0 else ""
    return (f"{lead}the calibration probably belongs to other data: {known} of the {current.n_labelers} labelers of the "
            f"current round {current.name!r} are in it ({n_unknown_ann} of {current.n_annotations} annotations are by "
            f"labelers it does not know). The round's labelers look like {ex}, the calibration's like {cx}. Use the "
            "calibration of this data's history (and the same labeler column), rather than excluding or estimating "
            "the unknown labelers.")


def label_codes(data: AnnotationSet, to_calib: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per-annotation code ``2 * labeler + label`` in the calibration's labeler index."""
    out: npt.NDArray[np.int64] = 2 * to_calib[data.labeler] + data.label.astype(np.int64)
    return out


def log_likelihood_ratios(data: AnnotationSet, to_calib: npt.NDArray[np.int64], alpha: FloatArray, beta: FloatArray) -> FloatArray:
    """Per-item log-likelihood ratio L_i under fixed sensitivities/specificities."""
    la1, la0 = two_coin.code_logprobs(alpha, beta)
    diff = la1 - la0
    vals = diff[label_codes(data, to_calib)]
    return np.add.reduceat(vals, data.item_ptr[:-1]) if vals.size else np.zeros(0)


@dataclass(frozen=True)
class ScoreInputs:
    """What a score-equation estimate of the current round stands on, whatever its rate: the calibration ``cal``,
    the round aligned to it (``data`` and ``to_calib``, as :class:`Aligned` holds them), the sensitivities and
    specificities ``alpha`` and ``beta`` the estimate uses (the calibration's, or the gold items' own for the
    gold-proportion calibration) and the items' log-likelihood ratios ``L`` under them
    (:func:`log_likelihood_ratios`)."""

    cal: Calibration
    data: AnnotationSet
    to_calib: npt.NDArray[np.int64]
    alpha: FloatArray
    beta: FloatArray
    L: FloatArray


def stage_a_influence(
    si: ScoreInputs,
    mu: float,
    psi_resid: FloatArray,
    gamma_x: FloatArray | None = None,
    space: str = "stage_a",
) -> Influence:
    """Influence of a score-equation estimate ``mu`` with history-fitted (alpha, beta).

    ``mu_hat - mu ~= (1/I) [mean(psi_resid) + G (theta_hat - theta) (+ gamma'(m_hat - m))]``
    with ``I = mean psi(mu_hat)^2`` and ``G`` the mean score gradient.
    """
    cal, data, to_calib, alpha, beta, L = si.cal, si.data, si.to_calib, si.alpha, si.beta, si.L
    ps = psi(mu, L)
    info = float(np.mean(ps**2))
    G = scoring.score_gradient(data.item_ptr, label_codes(data, to_calib), cal.n_labelers, alpha, beta, mu, L)
    current = (psi_resid - psi_resid.mean()) / info
    if space == "gold_counts":
        return Influence(current, "gold_counts", G / info, gold_count_variances(cal, alpha, beta), hash(cal.token))
    c = np.zeros(cal.n_parameters)
    c[: 2 * cal.n_labelers] = G / info
    if gamma_x is not None:
        c[2 * cal.n_labelers + len(cal.round_ids) :] = gamma_x / info
    return Influence(current, "stage_a", c, cal.covariance, None if cal.covariance is None else hash(cal.token))


def score_test(
    si: ScoreInputs,
    mu: float,
    infl: Influence,
    offset: float = 0.0,
    gamma_x: FloatArray | None = None,
    Xc: FloatArray | None = None,
) -> ScoreTest:
    """The score test of ``rate = mu0`` behind the method's test-inversion interval (heroeval.estimators.inversion)."""
    cal, data, to_calib, alpha, beta, L = si.cal, si.data, si.to_calib, si.alpha, si.beta, si.L
    return ScoreTest(
        center=mu, L=L, counts=np.ones(L.size), item_ptr=data.item_ptr, labeler=to_calib[data.labeler],
        alpha=np.asarray(alpha, dtype=float), beta=np.asarray(beta, dtype=float), space=infl.space,
        V=infl.gram, n_parameters=cal.n_parameters, offset=offset, gamma_x=gamma_x, Xc=Xc,
        cov_start=2 * cal.n_labelers + len(cal.round_ids),
    )


def result_of(method: str, est: float, data: AnnotationSet, **kw: Any) -> EstimateResult:
    """The result record of ``method`` on ``data``; cluster-robust when ``data`` has item groups
    (:func:`grouped_inference`)."""
    kw = grouped_inference(data, kw)
    return EstimateResult(
        method=method,
        estimate=float(est),
        n_items=data.n_items,
        n_annotations=data.n_annotations,
        n_labelers=int(np.unique(data.labeler).size),
        **kw,
    )


def grouped_inference(data: AnnotationSet, kw: dict[str, Any]) -> dict[str, Any]:
    """A result's ``influence``, ``test`` and ``notes`` made cluster-robust by ``data``'s item groups.

    The influence values get the items' groups (their current-round variance becomes the cluster-robust
    one, :mod:`heroeval.estimators.clusters`) and the test its design effect; a note says by how much the
    standard error grew, or why it could not be made cluster-robust. Unchanged without groups.
    """
    infl = kw.get("influence")
    if data.item_group is None or infl is None:
        return kw
    if infl.current.shape[0] != data.n_items:
        raise HeroEvalError(f"{infl.current.shape[0]} influence values for {data.n_items} items of {data.name!r}: "
                            "cannot make the standard error cluster-robust")
    g = replace(infl, groups=data.item_group)
    notes = tuple(kw.get("notes", ()))
    if g.n_groups < MIN_GROUPS:
        note = (f"the round's {data.n_items} items are all in one group: the standard error cannot be made "
                "cluster-robust and treats the items as independent")
    else:
        note = (f"cluster-robust SE over {g.n_groups} item groups (current part x {math.sqrt(g.deff):.2f}): "
                f"the interval is for the rate over the {ESTIMAND}")
        if g.n_groups < FEW_GROUPS:
            note += (f"; with only {g.n_groups} groups it rests on few independent units and is wide when their "
                     "rates differ. For this round's own items' rate, estimate without groups")
    return {**kw, "influence": g, "test": with_design_effect(kw.get("test"), g.deff), "notes": (*notes, note)}


def gold_count_variances(cal: Calibration, alpha: FloatArray, beta: FloatArray) -> FloatArray:
    """The variances of rates estimated from the history's gold counts (smoothed proportions): alphas, then betas.

    When the history's gold items come in groups (the calibration's :class:`GoldLabels` keep each one's group),
    the full ``2J x 2J`` covariance, cluster-robust by group: each gold item's influence on ``alpha_j`` is
    ``(y_rj - alpha_j) / (n_pos_j + 2)`` (on ``beta_j``: ``(1 - y_rj - beta_j) / (n_neg_j + 2)``), whose squares
    add up to the variances above; summed over each group's items, their outer products times ``G / (G - 1)``
    and the few-groups factor (:mod:`heroeval.stage_a.clustered`, the history's other covariance).
    """
    n_pos = cal.gold_tp + cal.gold_fn
    n_neg = cal.gold_tn + cal.gold_fp
    gl = cal.gold_labels
    if gl is not None and gl.group is not None and np.unique(gl.group).size >= MIN_GROUPS:
        J = cal.n_labelers
        item = gl.annotation_item
        lab = gl.labeler
        y = gl.label.astype(np.float64)
        pos = gl.gold[item] == 1
        col = np.where(pos, lab, J + lab)
        val = np.where(pos, (y - alpha[lab]) / (n_pos[lab] + 2.0), (1 - y - beta[lab]) / (n_neg[lab] + 2.0))
        G = int(np.unique(gl.group).size)
        present, row = np.unique(gl.group[item], return_inverse=True)  # each label's group
        F = np.zeros((present.size, 2 * J))  # each group's total influence on the rates
        np.add.at(F, (row.ravel(), col), val)
        cov: FloatArray = few_groups_factor(G) * G / (G - 1) * (F.T @ F)
        return cov
    var_a = (cal.gold_tp * (1 - alpha) ** 2 + cal.gold_fn * alpha**2) / (n_pos + 2.0) ** 2
    var_b = (cal.gold_tn * (1 - beta) ** 2 + cal.gold_fp * beta**2) / (n_neg + 2.0) ** 2
    out: FloatArray = np.concatenate([var_a, var_b])
    return out


NewLabelerRule = Literal["error", "exclude", "estimate"]
DispatchRule = Literal["error", "exclude", "estimate", "auto"]


def new_labeler_rule(new_labelers: str | None, exclude_new_labelers: bool) -> str:
    if new_labelers is None:
        return "exclude" if exclude_new_labelers else "error"
    if new_labelers not in ("error", "exclude", "estimate"):
        raise HeroEvalError(f"new_labelers must be 'error', 'exclude' or 'estimate', got {new_labelers!r}")
    if exclude_new_labelers and new_labelers != "exclude":
        raise HeroEvalError(f"exclude_new_labelers=True contradicts new_labelers={new_labelers!r}")
    return new_labelers


def dispatch_rule(data: AnnotationSet, cal: Calibration, new_labelers: str | None, exclude_new_labelers: bool) -> str:
    """The new-labeler rule of the dispatch (:func:`heroeval.estimate`, ``compare``, ``bootstrap``).

    As given; by default (``None``, or ``"auto"``) ``"auto"`` when the round has labelers new to the
    calibration: HERO-1 estimates them from the round (anchored by the calibrated ones) and every other
    method leaves their labels out, each result's notes saying what it did; ``"error"`` (nothing to decide)
    when it has none. The estimators called one by one keep ``"error"`` as their default.
    """
    if new_labelers in (None, "auto"):
        if exclude_new_labelers:
            if new_labelers == "auto":
                raise HeroEvalError("exclude_new_labelers=True contradicts new_labelers='auto'")
            return "exclude"
        return "auto" if has_unknown(data, cal) else "error"
    return new_labeler_rule(new_labelers, exclude_new_labelers)


def has_unknown(data: AnnotationSet, cal: Calibration) -> bool:
    index = cal.index_of()
    return any(str(x) not in index for x in data.labeler_ids)


def em_status(p: float) -> str:
    """An EM prevalence at its numerical bound is a boundary estimate (0 or 1): no Wald-type SE."""
    if p < scoring.BOUND_TOL:
        return "boundary_0"
    if p > 1 - scoring.BOUND_TOL:
        return "boundary_1"
    return "ok"


def with_history(cal: Calibration, history: AnnotationSet | None) -> Calibration:
    """The calibration with its history attached (needed by ``hero_joint`` and the checks), after checking they match."""
    if history is None or cal.history is not None:
        return cal
    if tuple(str(x) for x in history.labeler_ids) != cal.labeler_ids or history.round_ids != cal.round_ids:
        raise HeroEvalError(
            "the history does not match the calibration: its labelers or rounds differ "
            f"({history.n_labelers} labelers, rounds {list(history.round_ids)[:5]} against "
            f"{cal.n_labelers} labelers, rounds {list(cal.round_ids)[:5]}); calibrate from this history instead"
        )
    return replace(cal, history=history)
