"""Mock rounds of a K-class history's gold: every candidate's error on gold items hidden from Stage A.

The evidence behind the K-class recommended estimate
(:func:`heroeval.choice.multiclass_auto.recommend_multiclass`), as the binary
model checks' mock rounds are behind ``method="auto"``. The history's gold
items are dealt into folds (whole history rounds when at least two rounds
hold gold: a fold then differs from the rest in content, as a new round
does). For each fold, Stage A is refitted on the whole history with that
fold's gold hidden (its items stay, unlabelled by gold), and the fold's items
are estimated as a round by every candidate: majority vote, the gold-share
calibration and HERO-1 under each confusion structure. Given the current
round, current-only Dawid–Skene is a candidate too: it learns nothing from
the history, so its mock round is the fold's items fitted together with the
current round (without gold, each with its own class shares), and its errors
are the fold items' posteriors against their gold. Its confusion matrices are
then learned from the current round's labels as they are on the round itself,
which a fit to the fold's few dozen items alone would not measure.

What is kept per candidate is item-additive. A candidate's estimate on a
fold is, to first order, the mean of its pseudo-values ``estimate +
current_i`` over the fold's items (``current`` the estimate's current-round
influence values, :class:`~heroeval.multiclass.estimators.MultiClassEstimate`);
its **pseudo-error** on gold item i is ``d_i = estimate_f + current_i -
e_{y_i}``, with ``e_{y_i}`` the indicator of the item's gold class. The mean
of ``d`` over a fold is the candidate's error against the fold's gold class
shares (exactly, since the influence values sum to 0 on the fold); a weighted
mean re-weights the gold items by class to another round's class shares (the
rate-matched mock round); and the spread of ``d`` over items is the
candidate's noise relative to the realised class shares, which is the
estimand of a round. The history part of each fold estimate's variance is
kept beside (its mean over the folds).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from heroeval.errors import ConvergenceWarning, HeroEvalError, SparseGoldWarning
from heroeval.ingest.coding import item_order
from heroeval.multiclass import confusion_model
from heroeval.multiclass.calibration import MultiClassCalibration, calibrate_multiclass
from heroeval.multiclass.data import MultiClassData
from heroeval.multiclass.estimators import (
    MultiClassEstimate,
    gold_proportion_multiclass,
    hero1_multiclass,
    majority_vote_multiclass,
)

__all__ = ["MOCK_FOLDS", "CandidateEvidence", "MockRounds", "allowed_structures", "candidate_estimates",
           "current_covariance", "dawid_skene_posteriors", "history_covariance", "mock_rounds"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

MOCK_FOLDS = 5
"""Folds of the history's gold items (or of its rounds holding gold, when fewer)."""


def allowed_structures(hist: MultiClassData) -> tuple[str, ...]:
    """The confusion structures the classes allow: full and symmetric, and ordinal for ordinal classes."""
    return ("full", "symmetric", "ordinal") if hist.ordinal else ("full", "symmetric")


def history_covariance(est: MultiClassEstimate) -> FloatArray:
    """The K x K covariance of an estimate's history part (zero for a current-only method)."""
    K = len(est.classes)
    if est.history is not None:
        out: FloatArray = est.history.T @ est.history
        return out
    if est.history_grad is not None and est.gram is not None:
        out = est.history_grad.T @ est.gram @ est.history_grad
        return out
    return np.zeros((K, K))


def current_covariance(est: MultiClassEstimate) -> FloatArray:
    """The K x K covariance of an estimate's current-round part (``current' current / n^2``)."""
    if est.current is None:
        raise HeroEvalError(f"{est.method}: no current-round influence values")
    out: FloatArray = est.current.T @ est.current / est.current.shape[0] ** 2
    return out


def candidate_estimates(current: MultiClassData, fits: Mapping[str, MultiClassCalibration], *,
                        exclude_new_labelers: bool = True) -> dict[str, MultiClassEstimate]:
    """Every candidate's estimate on ``current``: ``majority_vote``, ``gold_proportion`` (from the first fit's
    gold counts, which every structure shares) and ``hero1:<structure>`` for each fit, by name. A candidate the
    inputs cannot support (no labeler of the round known to the history) is left out."""
    out: dict[str, MultiClassEstimate] = {"majority_vote": majority_vote_multiclass(current)}
    first = next(iter(fits.values()))
    try:
        out["gold_proportion"] = gold_proportion_multiclass(current, first, exclude_new_labelers=exclude_new_labelers)
        for s, cal in fits.items():
            out[f"hero1:{s}"] = hero1_multiclass(current, cal, exclude_new_labelers=exclude_new_labelers)
    except HeroEvalError:
        pass
    return {k: v for k, v in out.items() if v.current is not None}


@dataclass(frozen=True)
class CandidateEvidence:
    """One candidate's mock-round evidence.

    Attributes
    ----------
    errors : ndarray, shape (N, K)
        Pseudo-errors ``d_i`` of the gold items (in :attr:`MockRounds.gold_items` order).
    history_cov : ndarray, shape (K, K)
        The history part of the fold estimates' covariance, averaged over the folds.
    fold_errors : ndarray, shape (F, K)
        Each fold's estimate minus its gold class shares.
    """

    errors: FloatArray
    history_cov: FloatArray
    fold_errors: FloatArray


@dataclass(frozen=True)
class MockRounds:
    """The mock rounds of a history's gold (:func:`mock_rounds`).

    Attributes
    ----------
    gold_items : ndarray of int
        History item indices of the gold items, fold by fold.
    gold_class : ndarray of int
        Their gold class codes.
    fold : ndarray of int
        The fold of each.
    unit : {"items", "rounds"}
        What the folds leave out: random gold items, or whole history rounds.
    candidates : dict of str to CandidateEvidence
    skipped : dict of str to str
        Candidates that could not be scored, and why.
    """

    gold_items: IntArray
    gold_class: IntArray
    fold: IntArray
    unit: str
    candidates: dict[str, CandidateEvidence]
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def n_gold(self) -> int:
        return int(self.gold_items.size)

    @property
    def n_folds(self) -> int:
        return int(self.fold.max()) + 1 if self.fold.size else 0


def _folds(hist: MultiClassData, folds: int, seed: int) -> tuple[IntArray, IntArray, str]:
    ds = hist.annotations
    gold_items = np.flatnonzero(ds.gold >= 0).astype(np.int64)
    # rounds and items dealt in the order of a seeded hash of their ids: the same folds for every reader
    rounds = np.unique(ds.item_round[gold_items])
    if rounds.size >= 2:
        k = min(folds, int(rounds.size))
        of_round = np.empty(int(ds.item_round.max()) + 1, dtype=np.int64)
        of_round[rounds[item_order(np.asarray(ds.round_ids, dtype=object)[rounds], seed)]] = np.arange(rounds.size) % k
        fold = of_round[ds.item_round[gold_items]]
        unit = "rounds"
    else:
        k = min(folds, int(gold_items.size))
        fold = np.empty(gold_items.size, dtype=np.int64)
        fold[item_order(ds.item_ids[gold_items], seed)] = np.arange(gold_items.size) % k
        unit = "items"
    order = np.argsort(fold, kind="stable")
    return gold_items[order], fold[order], unit


def dawid_skene_posteriors(current: MultiClassData, other: MultiClassData, *, tol: float = 1e-8,
                           max_iter: int = 10_000) -> FloatArray:
    """Posteriors of ``other``'s items under Dawid–Skene (full confusion) fitted without gold to ``current`` and
    ``other`` together, labelers matched by name, each set with its own class shares: shape (other's items, K)."""
    a, b = current.annotations, other.annotations
    names = np.unique(np.concatenate([a.labeler_ids.astype(str), b.labeler_ids.astype(str)]))
    code_a = np.searchsorted(names, a.labeler_ids.astype(str))[a.labeler]
    code_b = np.searchsorted(names, b.labeler_ids.astype(str))[b.labeler]
    ptr = np.concatenate([a.item_ptr, a.item_ptr[-1] + b.item_ptr[1:]])
    group = np.repeat([0, 1], [a.n_items, b.n_items])
    d = confusion_model.make_design(ptr, np.concatenate([code_a, code_b]),
                                    np.concatenate([a.label, b.label]).astype(np.int64),
                                    np.full(a.n_items + b.n_items, -1), group, current.n_classes, names.size, 2)
    fit = confusion_model.run_unsupervised(d, "full", tol=tol, max_iter=max_iter)
    out: FloatArray = fit.w[a.n_items:]
    return out


def mock_rounds(hist: MultiClassData, structures: Sequence[str] | None = None, *, folds: int = MOCK_FOLDS,
                seed: int = 0, tol: float = 1e-8, max_iter: int = 10_000, pseudo_count: float = 0.0,
                current: MultiClassData | None = None) -> MockRounds:
    """Every candidate's pseudo-errors on the history's gold items, each fold's gold hidden from Stage A in turn.

    ``structures``: the confusion structures whose HERO-1 is a candidate (default :func:`allowed_structures`).
    ``current``: the round to be estimated; given, current-only Dawid–Skene (``"dawid_skene"``) is scored by
    :func:`dawid_skene_posteriors` of each fold with it.
    Needs at least two gold items (a ``HeroEvalError`` otherwise). Refits start from the gold subset, as
    :func:`~heroeval.multiclass.calibration.calibrate_multiclass`; EM warnings in a refit are silenced (the
    refit still scores).
    """
    ds = hist.annotations
    K = hist.n_classes
    if int((ds.gold >= 0).sum()) < 2:
        raise HeroEvalError(f"mock rounds need at least 2 gold items in the history, got {int((ds.gold >= 0).sum())}")
    structs = tuple(structures) if structures is not None else allowed_structures(hist)
    gold_items, fold, unit = _folds(hist, folds, seed)
    y = ds.gold[gold_items].astype(np.int64)
    onehot = np.eye(K)[y]
    F = int(fold.max()) + 1
    errors: dict[str, FloatArray] = {}
    hcov: dict[str, FloatArray] = {}
    ferr: dict[str, FloatArray] = {}
    skipped: dict[str, str] = {}
    for f in range(F):
        sel = fold == f
        held = gold_items[sel]
        g = ds.gold.copy()
        g[held] = -1
        hidden = MultiClassData(replace(ds, gold=g), hist.classes, hist.values, hist.ordinal)
        no_gold = np.full(ds.n_items, -1, dtype=ds.gold.dtype)
        cur_all = MultiClassData(replace(ds, gold=no_gold), hist.classes, hist.values, hist.ordinal)
        cur = cur_all.take_items(held, name=f"mock round {f + 1}")  # in the order of `held`
        fits: dict[str, MultiClassCalibration] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            warnings.simplefilter("ignore", SparseGoldWarning)
            for s in structs:
                try:
                    fits[s] = calibrate_multiclass(hidden, structure=s, tol=tol, max_iter=max_iter,
                                                   pseudo_count=pseudo_count, covariance=False)
                except HeroEvalError as exc:
                    skipped[f"hero1:{s}"] = str(exc)
        if not fits:
            raise HeroEvalError(f"no structure could be refitted on mock round {f + 1}: {skipped}")
        found: dict[str, tuple[FloatArray, FloatArray]] = {}
        for name, est in candidate_estimates(cur, fits).items():
            assert est.current is not None
            found[name] = (est.estimate[None, :] + est.current - onehot[sel], history_covariance(est))
        if current is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                found["dawid_skene"] = (dawid_skene_posteriors(current, cur, tol=tol, max_iter=max_iter)
                                        - onehot[sel], np.zeros((K, K)))
        for name, (d, h) in found.items():
            errors.setdefault(name, np.full((gold_items.size, K), np.nan))[sel] = d
            hcov[name] = hcov.get(name, np.zeros((K, K))) + h / F
            ferr.setdefault(name, np.full((F, K), np.nan))[f] = d.mean(axis=0)
    cands = {}
    for name, e in errors.items():
        if np.isnan(e).any():
            skipped.setdefault(name, "not scored on every mock round")
            continue
        cands[name] = CandidateEvidence(e, hcov[name], ferr[name])
    return MockRounds(gold_items, y, fold, unit, cands, skipped)
