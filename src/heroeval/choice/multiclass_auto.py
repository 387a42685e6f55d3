"""The recommended K-class estimate: the candidate whose mock rounds predict the smallest error, with bias-aware
intervals per class share and for the mean score.

:func:`recommend_multiclass` is the K-class ``method="auto"``. Its evidence
is :func:`heroeval.multiclass.mock_rounds.mock_rounds`: every candidate
(majority vote, the gold-share calibration, HERO-1 under each confusion
structure, current-only Dawid–Skene) estimated on gold items hidden from
Stage A, kept as item-additive pseudo-errors ``d_i``. For a linear functional ``w' p`` of the class shares
(one share, the mean score) and gold items re-weighted by class to this
round's shares (weights ``omega``):

* the candidate's **mock bias** is ``b = sum omega_i w' d_i / sum omega``,
  with variance ``s_b^2 = sum omega_i^2 (w' d_i - b)^2 / (sum omega)^2 +
  w' H w`` (``H`` the history part of the mock estimates' covariance);
* its **noise** on this round is ``se^2 = max(w' V w, sum omega_i (w' d_i -
  b)^2 / sum omega / n + w' H_n w)``: its own variance ``V`` or, when larger,
  the spread of its errors on the gold items scaled to the round's ``n``
  items plus its history part ``H_n`` on this round (majority vote, which has
  no model variance of the gold shares, takes the second);
* its **estimated MSE** is ``max(b^2 - s_b^2, 0) + se^2``.

The recommended estimate is majority vote unless the joint test of its mock
bias over the class shares (``b' S^+ b``, chi-square with K - 1 degrees of
freedom) rejects at :data:`DEFAULT_ALPHA`; then the candidate with the
smallest estimated MSE summed over the class shares. (The smallest estimated
MSE alone erred 1.14 times the best fixed method on random splits of the
shared sets, more than majority vote's 1.09: with few gold items the
estimated MSEs are noisy, and the noise picks model-based candidates that
lose; docs/multiclass.md.) Its interval for ``w' p`` is bias-aware
(:func:`heroeval.inference.bias_aware.bias_aware_cv`) with the bias bound
``|b| + kappa s_b``: no K-class likelihood model is trusted to be unbiased,
since on real panels HERO-1's plain intervals cover the class shares in a
quarter of cells (issue #42). The weights are chosen in two passes: first
unweighted, then by class to the first choice's estimate of this round's
shares, shrunk towards the gold's shares as far as the shift is within noise
(positive-part James–Stein). A round is ``"unreliable"`` when the history
has fewer than :data:`MIN_GOLD` gold items or the re-weighted gold fewer than
:data:`MIN_EFFECTIVE_GOLD` effective items; its interval then spans every
candidate's bias-aware interval.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import chi2

from heroeval.errors import ConvergenceWarning, HeroEvalError, SparseGoldWarning
from heroeval.inference.bias_aware import bias_aware_cv
from heroeval.multiclass.calibration import MultiClassCalibration, calibrate_multiclass
from heroeval.multiclass.data import MultiClassData, as_multiclass
from heroeval.multiclass.estimators import MultiClassEstimate, dawid_skene_multiclass
from heroeval.multiclass.labelled import ClassIntervals
from heroeval.multiclass.mock_rounds import (
    MOCK_FOLDS,
    CandidateEvidence,
    MockRounds,
    allowed_structures,
    candidate_estimates,
    history_covariance,
    mock_rounds,
)

__all__ = ["BIAS_KAPPA", "DEFAULT", "DEFAULT_ALPHA", "MIN_EFFECTIVE_GOLD", "MIN_GOLD", "MultiClassRecommendation", "recommend_multiclass",
           "structure_fits"]

FloatArray = npt.NDArray[np.float64]

BIAS_KAPPA = 1.0
"""The bias bound is the mock bias plus this many of its standard errors (the binary rule's ``bias_kappa``)."""

DEFAULT = "majority_vote"
"""The candidate kept unless its mock rounds show it biased: it assumes no model, and its error on gold items is
measured item by item."""

DEFAULT_ALPHA = 0.05
"""The level of the joint mock-bias test that moves the choice off :data:`DEFAULT` (chosen among 0.01, 0.05, 0.2
and no default, in-sample and leave-one-set-out: docs/multiclass.md)."""

MIN_GOLD = 25
"""Below this many gold items in the history the round is ``"unreliable"`` (the structure rule's threshold)."""

MIN_EFFECTIVE_GOLD = 20.0
"""Below this effective number of re-weighted gold items the round is ``"unreliable"`` (the binary rule's)."""


@dataclass(frozen=True)
class _Scored:
    """One candidate on this round: its estimate, its evidence and the rate weights."""

    estimate: MultiClassEstimate
    evidence: CandidateEvidence
    weights: FloatArray
    n: int
    model_variance: bool
    gold_class: npt.NDArray[np.int64]

    def parts(self, w: FloatArray) -> tuple[float, float, float, float]:
        """``(w' p, se, b, s_b)`` of the functional ``w' p``."""
        e = self.evidence
        dw = e.errors @ w
        om = self.weights
        tot = float(om.sum())
        b = float(om @ dw) / tot
        s_b2 = float((om**2) @ (dw - b) ** 2) / tot**2 + float(w @ e.history_cov @ w)
        emp = float(om @ (dw - b) ** 2) / tot / self.n + float(w @ history_covariance(self.estimate) @ w)
        own = float(w @ self.estimate.covariance() @ w) if self.model_variance else 0.0
        se2 = max(own if math.isfinite(own) else 0.0, emp)
        return float(w @ self.estimate.estimate), math.sqrt(max(se2, 0.0)), b, math.sqrt(max(s_b2, 0.0))

    def bias_test(self) -> tuple[float, int, float]:
        """The joint test of no mock bias over the class shares: ``T = b' S^+ b`` (``S`` the bias's covariance,
        from the weighted pseudo-errors and the history part; rank K - 1 as the shares sum to 1), its degrees of
        freedom and its chi-square p-value."""
        e = self.evidence
        om = self.weights
        tot = float(om.sum())
        b = (om @ e.errors) / tot
        c = e.errors - b
        S = (c * (om**2)[:, None]).T @ c / tot**2 + e.history_cov
        df = max(e.errors.shape[1] - 1, 1)
        T = float(b @ np.linalg.pinv(S, rcond=1e-10, hermitian=True) @ b)
        return T, df, float(chi2.sf(T, df))

    def mse(self, w: FloatArray) -> float:
        _, se, b, s_b = self.parts(w)
        return max(b * b - s_b * s_b, 0.0) + se * se

    def total_mse(self) -> float:
        K = self.evidence.errors.shape[1]
        return float(sum(self.mse(np.eye(K)[k]) for k in range(K)))

    def interval(self, w: FloatArray, level: float, kappa: float) -> tuple[float, float, float, float]:
        """``(estimate, se, bias bound, half-width)`` of the bias-aware interval of ``w' p``."""
        est, se, b, s_b = self.parts(w)
        bound = abs(b) + kappa * s_b
        half = se * bias_aware_cv(bound / se, level) if se > 0 else bound
        return est, se, bound, half


@dataclass(frozen=True)
class MultiClassRecommendation:
    """The recommended class shares of a round, with bias-aware intervals (:func:`recommend_multiclass`).

    Attributes
    ----------
    method : str
        The chosen candidate (``"majority_vote"``, ``"gold_proportion"``, ``"hero1:<structure>"``,
        ``"dawid_skene"``).
    estimate : MultiClassEstimate
        Its estimate (its own intervals are the plain ones; use this object's).
    status : {"ok", "unreliable"}
    reason : str
    candidates : pandas.DataFrame
        One row per candidate: its estimated RMSE summed over classes (``predicted_rmse``), its mock-round L1
        error, and its estimated class shares.
    target_shares : ndarray
        The class shares the gold items were re-weighted to.
    n_gold, n_effective_gold : float
    unit : {"items", "rounds"}
        What the mock rounds left out.
    """

    method: str
    estimate: MultiClassEstimate
    status: str
    reason: str
    candidates: pd.DataFrame
    target_shares: FloatArray
    n_gold: int
    n_effective_gold: float
    unit: str
    kappa: float = BIAS_KAPPA
    notes: tuple[str, ...] = ()
    _scored: dict[str, _Scored] = field(default_factory=dict, repr=False)

    @property
    def classes(self) -> tuple[str, ...]:
        return self.estimate.classes

    @property
    def values(self) -> FloatArray:
        return self.estimate.values

    def functional(self, weights: Sequence[float] | FloatArray, confidence_level: float = 0.95, *,
                   clip: tuple[float, float] | None = None, span: bool | None = None) -> dict[str, float]:
        """Estimate, standard error, bias bound and bias-aware interval of ``sum_c weights[c] p_c``.

        An ``"unreliable"`` round's interval spans every candidate's bias-aware interval (``span``: True or
        False to override, for measuring what the span buys). ``clip``: bounds the interval is clipped to (class
        shares: (0, 1)).
        """
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (len(self.classes),):
            raise HeroEvalError(f"functional weights need {len(self.classes)} numbers (one per class), got {w.shape}")
        if not 0 < confidence_level < 1:
            raise HeroEvalError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
        est, se, bound, half = self._scored[self.method].interval(w, confidence_level, self.kappa)
        lo, hi = est - half, est + half
        if (self.status == "unreliable") if span is None else span:
            for s in self._scored.values():
                e2, _, _, h2 = s.interval(w, confidence_level, self.kappa)
                lo, hi = min(lo, e2 - h2), max(hi, e2 + h2)
        if clip is not None:
            lo, hi = max(clip[0], lo), min(clip[1], hi)
        return {"estimate": est, "standard_error": se, "bias_bound": bound, "ci_low": lo, "ci_high": hi}

    def intervals(self, confidence_level: float = 0.95, *, span: bool | None = None) -> ClassIntervals:
        """The bias-aware interval of each class share, in class order (and by class name), clipped to [0, 1]."""
        out = []
        for k in range(len(self.classes)):
            r = self.functional(np.eye(len(self.classes))[k], confidence_level, clip=(0.0, 1.0), span=span)
            out.append((r["ci_low"], r["ci_high"]))
        return ClassIntervals(self.classes, out)

    def mean_score(self, confidence_level: float = 0.95) -> dict[str, float]:
        """The mean class value ``sum_c values[c] p_c`` with its bias-aware interval."""
        v = self.values
        return self.functional(v, confidence_level, clip=(float(v.min()), float(v.max())))

    def to_frame(self, confidence_level: float = 0.95) -> pd.DataFrame:
        """One row per class share and one for the mean score: estimate, SE, bias bound, interval, status."""
        K = len(self.classes)
        rows = []
        for k, c in enumerate(self.classes):
            r = self.functional(np.eye(K)[k], confidence_level, clip=(0.0, 1.0))
            rows.append({"quantity": f"share {c}", **r})
        rows.append({"quantity": "mean score", **self.mean_score(confidence_level)})
        df = pd.DataFrame(rows)
        df["method"] = self.method
        df["status"] = self.status
        return df

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        K = len(self.classes)
        return {
            "method": "auto",
            "chosen": self.method,
            "status": self.status,
            "reason": self.reason,
            "confidence_level": confidence_level,
            "classes": {c: self.functional(np.eye(K)[k], confidence_level, clip=(0.0, 1.0))
                        for k, c in enumerate(self.classes)},
            "mean_score": self.mean_score(confidence_level),
            "target_shares": dict(zip(self.classes, map(float, self.target_shares), strict=True)),
            "n_gold": self.n_gold,
            "n_effective_gold": self.n_effective_gold,
            "mock_unit": self.unit,
            "candidates": self.candidates.to_dict(orient="records"),
            "notes": list(self.notes),
        }

    def _repr_html_(self) -> str:
        return (f"<p><b>{self.method}</b> ({self.status}): {self.reason}</p>"
                + self.to_frame().to_html(index=False, float_format=lambda x: f"{x:.4f}"))


def _score(ests: dict[str, MultiClassEstimate], mock: MockRounds, weights: FloatArray, n: int) -> dict[str, _Scored]:
    return {k: _Scored(e, mock.candidates[k], weights, n, k != "majority_vote", mock.gold_class)
            for k, e in ests.items() if k in mock.candidates}


def _choose(scored: dict[str, _Scored], alpha: float) -> tuple[str, bool]:
    """Majority vote unless its joint mock-bias test rejects at ``alpha``; else the smallest estimated MSE. The
    second value says whether the default was kept."""
    if DEFAULT in scored and scored[DEFAULT].bias_test()[2] >= alpha:
        return DEFAULT, True
    return min(scored, key=lambda k: scored[k].total_mse()), False


def _rate_weights(mock: MockRounds, first: _Scored, K: int) -> tuple[FloatArray, FloatArray]:
    """Weights of the gold items by class to ``first``'s bias-corrected estimate of this round's shares (its
    estimate minus its unweighted mock bias), shrunk towards the gold's shares by positive-part James–Stein; and the
    target shares.

    The correction matters: a candidate biased towards a class (majority vote where the labelers over-use it) would
    otherwise weight the gold towards that class, where its errors are fewest, and understate its own bias there
    (face, random splits: the mean score's mock bias -0.38 at the uncorrected target against -0.63 at the gold's
    shares, the round's error -0.67)."""
    y = mock.gold_class
    gs = np.bincount(y, minlength=K) / y.size
    present = gs > 0
    e = first.evidence.errors
    b = e.mean(axis=0)
    c = e - b
    S_b = c.T @ c / e.shape[0] ** 2 + first.evidence.history_cov
    q0 = np.where(present, np.maximum(first.estimate.estimate - b, 0.0), 0.0)
    q0 = q0 / q0.sum() if q0.sum() > 0 else gs
    d = q0 - gs
    V = first.estimate.covariance()
    noise = (float(np.nansum(np.diag(V)[present])) + float(np.diag(S_b)[present].sum())
             + float((gs * (1 - gs)).sum() / y.size))
    dist2 = float(d @ d)
    lam = max(0.0, 1.0 - noise / dist2) if dist2 > 0 else 0.0
    q = gs + lam * d
    ratio = np.where(present, q / np.where(present, gs, 1.0), 0.0)
    return ratio[y], q


def structure_fits(history: MultiClassData, structures: Sequence[str] | None = None
                   ) -> dict[str, MultiClassCalibration]:
    """Stage A on the whole ``history`` under each confusion structure (default every one the classes allow), as
    :func:`recommend_multiclass` fits them when not given: compute them once to recommend several rounds on one
    history (EM warnings silenced; an unconverged fit is noted in the recommendation)."""
    hist = as_multiclass(history, "history")
    structs = tuple(structures) if structures is not None else allowed_structures(hist)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", SparseGoldWarning)
        return {s: calibrate_multiclass(hist, structure=s, covariance=False) for s in structs}


def recommend_multiclass(
    current: MultiClassData,
    history: MultiClassData,
    *,
    structures: Sequence[str] | None = None,
    fits: dict[str, MultiClassCalibration] | None = None,
    folds: int = MOCK_FOLDS,
    seed: int = 0,
    kappa: float = BIAS_KAPPA,
    default_alpha: float = DEFAULT_ALPHA,
) -> MultiClassRecommendation:
    """The recommended class shares of ``current`` (the K-class ``method="auto"``), chosen and sized by the
    mock rounds of ``history``'s gold (see the module's docstring).

    ``default_alpha``: the level of the mock-bias test that moves the choice off majority vote (0 never
    moves it; 1 always takes the smallest estimated MSE).
    ``structures``: HERO-1's confusion structures among the candidates (default every one the classes allow);
    ``fits``: their calibrations on the whole history when already computed (one per structure). Labelers of
    the round the history does not know are left out of the history-based candidates (majority vote counts
    them), and a note says so.
    """
    cur = as_multiclass(current, "current")
    hist = as_multiclass(history, "history")
    if cur.classes != hist.classes:
        raise HeroEvalError(f"the current round's classes {list(cur.classes)} are not the history's "
                            f"{list(hist.classes)}")
    if not (math.isfinite(kappa) and kappa >= 0):
        raise HeroEvalError(f"kappa must be a number >= 0, got {kappa!r}")
    structs = tuple(structures) if structures is not None else allowed_structures(hist)
    if fits is None:
        fits = structure_fits(hist, structs)
    unconverged = [s for s in structs if not fits[s].convergence.converged]
    ests = candidate_estimates(cur, {s: fits[s] for s in structs})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ests["dawid_skene"] = dawid_skene_multiclass(cur)
    mock = mock_rounds(hist, structs, folds=folds, seed=seed, current=cur)
    K = hist.n_classes
    n = cur.n_items
    if not mock.candidates:
        raise HeroEvalError(f"no candidate could be scored on the mock rounds: {mock.skipped}")
    if not 0 <= default_alpha <= 1:
        raise HeroEvalError(f"default_alpha must be in [0, 1], got {default_alpha!r}")
    first = _score(ests, mock, np.ones(mock.n_gold), n)
    weights, target = _rate_weights(mock, first[_choose(first, default_alpha)[0]], K)
    scored = _score(ests, mock, weights, n)
    mses = {k: s.total_mse() for k, s in scored.items()}
    chosen, kept = _choose(scored, default_alpha)
    n_eff = float(weights.sum() ** 2 / (weights**2).sum()) if (weights**2).sum() > 0 else 0.0
    rows = []
    for k, s in scored.items():
        fe = s.evidence.fold_errors
        rows.append({"method": k, "predicted_rmse": math.sqrt(mses[k]),
                     "mock_l1": float(np.abs(fe).sum(axis=1).mean()), "bias_p": s.bias_test()[2],
                     **{f"share {c}": float(s.estimate.estimate[j]) for j, c in enumerate(hist.classes)}})
    table = pd.DataFrame(rows).sort_values("predicted_rmse").reset_index(drop=True)
    mv_p = scored[DEFAULT].bias_test()[2] if DEFAULT in scored else math.nan
    why = (f"{DEFAULT}: its mock bias is not significant (p = {mv_p:.2g} >= {default_alpha:g})" if kept else
           (f"{DEFAULT}'s mock bias is significant (p = {mv_p:.2g}): " if DEFAULT in scored else "")
           + "the smallest estimated error")
    why += (f" on {mock.n_folds} mock rounds of {mock.n_gold} gold items"
           f"{' (whole history rounds left out)' if mock.unit == 'rounds' else ''}, re-weighted to this round's "
           f"class shares ({n_eff:.0f} effective items): predicted RMSE {math.sqrt(mses[chosen]):.3f} summed over "
           f"classes; interval bias-aware with the mock bias plus {kappa:g} standard error")
    status = "ok"
    if mock.n_gold < MIN_GOLD or n_eff < MIN_EFFECTIVE_GOLD:
        status = "unreliable"
        why += (f"; unreliable: {mock.n_gold} gold items" if mock.n_gold < MIN_GOLD
                else f"; unreliable: {n_eff:.0f} effective gold items at this round's shares")
        why += f" (fewer than {MIN_GOLD if mock.n_gold < MIN_GOLD else MIN_EFFECTIVE_GOLD:g}): the interval spans " \
               "every candidate's"
    notes = tuple(dict.fromkeys(x for e in ests.values() for x in e.notes
                                if "unknown to the calibration" in x))
    if unconverged:
        notes = (*notes, f"Stage A did not converge for structure(s) {', '.join(unconverged)} (its HERO-1 is "
                         "scored as it stands)")
    return MultiClassRecommendation(chosen, ests[chosen], status, why, table, target, mock.n_gold, n_eff, mock.unit,
                                    kappa, notes, scored)
