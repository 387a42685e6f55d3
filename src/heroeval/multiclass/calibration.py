"""Stage A for K classes: gold-anchored EM over confusion matrices, and the calibration it produces."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import uuid
import warnings
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval.core.jsonfile import dumps_json, read_json
from heroeval.errors import CalibrationFileError, ConvergenceWarning, DataError, HeroEvalError, SparseGoldWarning
from heroeval.ingest.annotations import AnnotationSet
from heroeval.ingest.coding import item_order
from heroeval.multiclass import confusion_model
from heroeval.multiclass.data import MultiClassData, as_multiclass
from heroeval.stage_a.calibration import ConvergenceInfo
from heroeval.version import __version__

__all__ = ["MultiClassCalibration", "calibrate_multiclass", "load_multiclass_calibration"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FORMAT_NAME = "heroeval.multiclass_calibration"
FORMAT_VERSION = 1
INIT_PSEUDO = 1.0
"""Starting confusion rows: gold-subset counts plus this many pseudo-observations spread as the pooled gold row."""


@dataclass(frozen=True, eq=False)
class MultiClassCalibration:
    """Per-labeler confusion matrices learned from a history (K-class Stage A).

    Attributes
    ----------
    labeler_ids : tuple of str
    classes : tuple of str
    values : ndarray, shape (K,)
        Numeric class values (for the mean score).
    ordinal : bool
    structure : {"full", "symmetric", "ordinal"}
    confusion : ndarray, shape (J, K, K)
        ``confusion[j, c, l] = P(labeler j says l | true class c)``.
    theta : ndarray, shape (J,), or None
        The one parameter per labeler of the symmetric (accuracy) or ordinal
        (sharpness) structure.
    round_ids : tuple of str
    round_prevalence : ndarray, shape (G, K)
    round_n_items, round_n_gold : ndarray of int, shape (G,)
    n_annotations : ndarray of int, shape (J,)
    gold_counts : ndarray of int, shape (J, K, K)
        Each labeler's labels on gold items, by gold class (rows) and label.
    convergence : ConvergenceInfo
    parameter_covariance : ndarray or None
        Sandwich covariance of the parameters (labeler blocks, then round
        prevalences; see :mod:`heroeval.multiclass.confusion_model`), when there are
        at most 3000 free parameters; larger fits keep the history itself.
    bic : float
        ``-2 loglik + n_parameters log(history items)``.
    """

    labeler_ids: tuple[str, ...]
    classes: tuple[str, ...]
    values: FloatArray
    ordinal: bool
    structure: str
    confusion: FloatArray
    theta: FloatArray | None
    round_ids: tuple[str, ...]
    round_prevalence: FloatArray
    round_n_items: IntArray
    round_n_gold: IntArray
    n_annotations: IntArray
    gold_counts: IntArray
    convergence: ConvergenceInfo
    parameter_covariance: FloatArray | None = None
    bic: float = math.nan
    settings: dict[str, Any] = field(default_factory=dict)
    heroeval_version: str = __version__
    created: str = ""
    token: str = field(default_factory=lambda: uuid.uuid4().hex, repr=False)
    history: MultiClassData | None = field(default=None, repr=False)
    information: confusion_model.Information | None = field(default=None, repr=False)
    candidates: dict[str, float] = field(default_factory=dict)

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def n_labelers(self) -> int:
        return len(self.labeler_ids)

    @property
    def n_parameters(self) -> int:
        return self.n_labelers * confusion_model.n_local(self.structure, self.n_classes) + len(self.round_ids) * (self.n_classes - 1)

    def index_of(self) -> dict[str, int]:
        return {lab: k for k, lab in enumerate(self.labeler_ids)}

    def __repr__(self) -> str:
        return (f"MultiClassCalibration(classes={list(self.classes)}, structure={self.structure!r}, "
                f"labelers={self.n_labelers}, history_items={int(self.round_n_items.sum())}, "
                f"gold_items={int(self.round_n_gold.sum())}, converged={self.convergence.converged})")

    def derivatives(self) -> FloatArray:
        """d log confusion / d parameters, (J, K, K, q), in this calibration's parametrisation."""
        if self.information is not None:
            return self.information.D
        return confusion_model.derivs(self.structure, self.confusion, self.theta)

    # ------------------------------------------------------------- JSON I/O
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "heroeval_version": self.heroeval_version,
            "created": self.created,
            "classes": list(self.classes),
            "values": self.values.tolist(),
            "ordinal": self.ordinal,
            "structure": self.structure,
            "labelers": [
                {"id": lab, "confusion": self.confusion[j].tolist(),
                 "theta": None if self.theta is None else float(self.theta[j]),
                 "n_annotations": int(self.n_annotations[j]), "gold_counts": self.gold_counts[j].tolist()}
                for j, lab in enumerate(self.labeler_ids)
            ],
            "rounds": [
                {"id": r, "prevalence": self.round_prevalence[g].tolist(), "n_items": int(self.round_n_items[g]),
                 "n_gold": int(self.round_n_gold[g])}
                for g, r in enumerate(self.round_ids)
            ],
            "parameter_covariance": None if self.parameter_covariance is None else {
                "dim": int(self.parameter_covariance.shape[0]),
                "float64_le_base64": base64.b64encode(
                    np.ascontiguousarray(self.parameter_covariance, dtype="<f8").tobytes()).decode("ascii"),
            },
            "bic": self.bic if math.isfinite(self.bic) else None,
            "fit": self.convergence.to_dict(),
            "settings": dict(self.settings),
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the calibration as versioned JSON."""
        Path(path).write_text(dumps_json(self.to_dict(), indent=1) + "\n", encoding="utf-8")


def load_multiclass_calibration(path: str | os.PathLike[str]) -> MultiClassCalibration:
    """Load a calibration written by :meth:`MultiClassCalibration.save` (errors name the file and field)."""
    obj, p = read_json(path)

    def fail(where: str, msg: str) -> CalibrationFileError:
        return CalibrationFileError(f"{p}: {where}: {msg}")

    if not isinstance(obj, dict) or obj.get("format") != FORMAT_NAME:
        raise fail("format", f"expected {FORMAT_NAME!r} (a multi-class calibration from 'hero calibrate --classes')")
    if obj.get("format_version") != FORMAT_VERSION:
        raise fail("format_version", f"this heroeval reads version {FORMAT_VERSION}, file has {obj.get('format_version')!r}")
    try:
        classes = tuple(str(c) for c in obj["classes"])
        K = len(classes)
        structure = str(obj["structure"])
        if structure not in confusion_model.STRUCTURES:
            raise fail("structure", f"unknown structure {structure!r}")
        labs = obj["labelers"]
        conf = np.asarray([rec["confusion"] for rec in labs], dtype=np.float64)
        if conf.shape != (len(labs), K, K) or not np.isfinite(conf).all() or conf.min() < 0 or conf.max() > 1:
            raise fail("labelers[].confusion", f"expected {K}x{K} matrices of probabilities")
        theta = None if structure == "full" else np.asarray([rec["theta"] for rec in labs], dtype=np.float64)
        rounds = obj["rounds"]
        prev = np.asarray([r["prevalence"] for r in rounds], dtype=np.float64)
        if prev.shape != (len(rounds), K):
            raise fail("rounds[].prevalence", f"expected {K} numbers per round")
        conv = ConvergenceInfo(**obj["fit"])
        pc = obj.get("parameter_covariance")
        pcov = None
        if pc is not None:
            raw = base64.b64decode(pc["float64_le_base64"], validate=True)
            dim = int(pc["dim"])
            if len(raw) != 8 * dim * dim:
                raise fail("parameter_covariance", f"expected a {dim}x{dim} float64 matrix")
            pcov = np.frombuffer(raw, dtype="<f8").reshape(dim, dim).astype(np.float64)
        return MultiClassCalibration(
            labeler_ids=tuple(str(rec["id"]) for rec in labs), classes=classes,
            values=np.asarray(obj["values"], dtype=np.float64), ordinal=bool(obj["ordinal"]), structure=structure,
            confusion=conf, theta=theta, round_ids=tuple(str(r["id"]) for r in rounds), round_prevalence=prev,
            round_n_items=np.asarray([r["n_items"] for r in rounds], dtype=np.int64),
            round_n_gold=np.asarray([r["n_gold"] for r in rounds], dtype=np.int64),
            n_annotations=np.asarray([rec["n_annotations"] for rec in labs], dtype=np.int64),
            gold_counts=np.asarray([rec["gold_counts"] for rec in labs], dtype=np.int64).reshape(len(labs), K, K),
            convergence=conv, parameter_covariance=pcov,
            bic=math.nan if obj.get("bic") is None else float(obj["bic"]), settings=dict(obj.get("settings", {})),
            heroeval_version=str(obj.get("heroeval_version", "")), created=str(obj.get("created", "")),
            token=hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest(),
        )
    except CalibrationFileError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise fail("content", f"missing or bad field ({exc!r})") from exc


# ---------------------------------------------------------------------------


def design_of(ds: AnnotationSet, K: int, gold: bool = True) -> confusion_model.Design:
    g = ds.gold.astype(np.int64) if gold else np.full(ds.n_items, -1, dtype=np.int64)
    return confusion_model.make_design(ds.item_ptr, ds.labeler, ds.label, g, ds.item_round, K, ds.n_labelers, ds.n_rounds)


def gold_counts(ds: AnnotationSet, K: int) -> IntArray:
    """(J, K, K) counts of each labeler's labels on gold items by gold class and label."""
    gi = ds.gold[ds.annotation_item]
    m = gi >= 0
    idx = (ds.labeler[m].astype(np.int64) * K + gi[m]) * K + ds.label[m]
    out: IntArray = np.bincount(idx, minlength=ds.n_labelers * K * K).reshape(ds.n_labelers, K, K).astype(np.int64)
    return out


def initial_values(ds: AnnotationSet, K: int, structure: str) -> tuple[FloatArray, FloatArray | None, FloatArray]:
    """Starting values from the gold subset.

    Each labeler's confusion row c starts at ``(n_gold[c, :] + pooled[c, :]) /
    (n_gold[c, :].sum() + 1)``: its gold counts plus ``INIT_PSEUDO = 1``
    pseudo-observation spread as the pooled gold row of all labelers (rows
    without any gold: 0.7 on the diagonal, the rest spread evenly). With K = 2
    this is the binary calibration's start exactly. One-parameter structures
    start at their M-step on those counts. Each round's prevalence starts at
    its gold class shares (the pooled shares for rounds without gold; uniform
    without any gold), kept in [0.01, 0.99] and renormalised.
    """
    n = gold_counts(ds, K).astype(np.float64)
    tot = n.sum(axis=0)
    rows = tot.sum(axis=1, keepdims=True)
    default = np.full((K, K), 0.3 / (K - 1))
    np.fill_diagonal(default, 0.7)
    pooled = np.where(rows > 0, tot / np.where(rows > 0, rows, 1.0), default)
    pi0 = np.clip((n + INIT_PSEUDO * pooled[None]) / (n.sum(axis=2, keepdims=True) + INIT_PSEUDO), confusion_model.EPS,
                  1 - confusion_model.EPS)
    theta0: FloatArray | None = None
    if structure != "full":
        pi0, theta0 = confusion_model.m_step_labelers(structure, n + INIT_PSEUDO * pooled[None], None, 0.0)
    isg = ds.gold >= 0
    G = ds.n_rounds
    cnt = np.zeros((G, K))
    np.add.at(cnt, (ds.item_round[isg], ds.gold[isg]), 1.0)
    pooled_p = cnt.sum(axis=0) / max(cnt.sum(), 1.0) if isg.any() else np.full(K, 1.0 / K)
    prev = np.where(cnt.sum(axis=1, keepdims=True) > 0, cnt / np.maximum(cnt.sum(axis=1, keepdims=True), 1), pooled_p)
    prev = np.clip(prev, 0.01, 0.99)
    prev /= prev.sum(axis=1, keepdims=True)
    return pi0, theta0, prev


def _check(tol: float, max_iter: int, pseudo_count: float) -> None:
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol > 0):
        raise HeroEvalError(f"tol must be a positive number, got {tol!r}")
    if not (isinstance(max_iter, int) and max_iter >= 1):
        raise HeroEvalError(f"max_iter must be a positive integer, got {max_iter!r}")
    if not (isinstance(pseudo_count, (int, float)) and math.isfinite(pseudo_count) and pseudo_count >= 0):
        raise HeroEvalError(f"pseudo_count must be a non-negative number, got {pseudo_count!r}")


def calibrate_multiclass(
    history: MultiClassData | AnnotationSet,
    *,
    structure: str = "full",
    tol: float = 1e-8,
    max_iter: int = 10_000,
    pseudo_count: float = 0.0,
    covariance: bool = True,
) -> MultiClassCalibration:
    """K-class Stage A: gold-anchored EM for per-labeler confusion matrices.

    Gold items enter with their known class; the others through the K-class
    mixture; each history round has its own prevalence vector and all rounds
    share the confusion matrices. Starts from the gold subset (see
    :func:`initial_values`). EM, SQUAREM-accelerated with a monotone safeguard
    (:func:`heroeval.multiclass.confusion_model.run_em`), stopping when one plain
    EM step moves no probability by more than ``tol``. Under ``"full"``, a class
    no gold item of the history has gets a :class:`~heroeval.errors.SparseGoldWarning`:
    every labeler's row for it is then learned from unlabelled items alone.

    Parameters
    ----------
    history : MultiClassData or AnnotationSet
        An AnnotationSet is taken as two classes ``("0", "1")``.
    structure : {"full", "symmetric", "ordinal", "auto", "bic"}
        ``"full"``: a free K x K confusion matrix per labeler (K (K-1)
        parameters). ``"symmetric"``: one accuracy per labeler, errors spread
        evenly. ``"ordinal"`` (ordinal data): ``P(l | c) ∝ exp(-t_j |l - c|)``.
        ``"auto"``: fit each allowed structure and keep the one whose
        **mock rounds** err least (:func:`held_out_scores`: the gold items
        dealt into :data:`AUTO_FOLDS` folds, each fold's gold hidden from
        Stage A in turn and its items estimated as a round by HERO-1, scored
        by the L1 distance of the class shares from the fold's gold shares);
        ``candidates`` holds each structure's mean L1 error, the settings'
        ``structure_choice`` the errors, the held-out gold log scores and the
        BICs. With fewer than :data:`AUTO_MIN_GOLD` gold items it falls back
        to BIC and says so. ``"bic"``: the smallest BIC, ``-2 loglik +
        (number of parameters) log(history items)`` (``candidates`` then
        holds the BICs), the rule before: in-sample, it keeps ``symmetric``
        on ``face``, where ``full`` errs 0.33 against 0.56 (docs/multiclass.md).
    pseudo_count : float, default 0
        MAP-EM: ``c`` pseudo-counts in every confusion cell (full) or
        Beta(1 + c, 1 + c) on the accuracy (symmetric); not used by ordinal.
    covariance : bool
        Compute ``parameter_covariance`` (only when at most 3000 free
        parameters; larger fits keep the history's scores for inference).

    Examples
    --------
    >>> from heroeval.multiclass import multiclass_from_arrays, calibrate_multiclass
    >>> h = multiclass_from_arrays([1, 1, 2, 2, 3, 3], ["a", "b"] * 3, [0, 0, 1, 2, 2, 2],
    ...                            classes=[0, 1, 2], gold=([1, 3], [0, 2]))
    >>> cal = calibrate_multiclass(h, structure="symmetric")
    >>> cal.confusion.shape
    (2, 3, 3)
    """
    hist = as_multiclass(history, "history")
    _check(tol, max_iter, pseudo_count)
    allowed = ["full", "symmetric"] + (["ordinal"] if hist.ordinal else [])
    if structure in ("auto", "bic"):
        with warnings.catch_warnings():  # the chosen structure's fit below warns, not each candidate's
            warnings.simplefilter("ignore", SparseGoldWarning)
            fits = {s: calibrate_multiclass(hist, structure=s, tol=tol, max_iter=max_iter, pseudo_count=pseudo_count,
                                            covariance=False) for s in allowed}
        bics = {s: c.bic for s, c in fits.items()}
        n_gold = int((hist.annotations.gold >= 0).sum())
        choice: dict[str, Any] = {"bic": bics}
        if structure == "auto" and n_gold >= AUTO_MIN_GOLD:
            scores = {s: held_out_scores(hist, s, start=fits[s], tol=tol, max_iter=max_iter,
                                         pseudo_count=pseudo_count) for s in allowed}
            l1 = {s: v[0] for s, v in scores.items()}
            best = min(l1, key=lambda s: l1[s])
            choice.update(rule=f"mock rounds' L1 error of HERO-1's class shares ({AUTO_FOLDS} folds of {n_gold} "
                               "gold items)", mock_l1=l1, log_score={s: v[1] for s, v in scores.items()})
            cands = l1
        else:
            best = min(bics, key=lambda s: bics[s])
            choice["rule"] = ("BIC" if structure == "bic" else
                              f"BIC (only {n_gold} gold items: held-out scores need {AUTO_MIN_GOLD})")
            cands = bics
        out = calibrate_multiclass(hist, structure=best, tol=tol, max_iter=max_iter, pseudo_count=pseudo_count,
                                   covariance=covariance)
        out.settings["structure_choice"] = choice
        object.__setattr__(out, "candidates", cands)
        return out
    if structure not in confusion_model.STRUCTURES:
        raise HeroEvalError(f"structure must be one of {list(confusion_model.STRUCTURES)}, 'auto' or 'bic', got "
                            f"{structure!r}")
    if structure == "ordinal" and not hist.ordinal:
        raise HeroEvalError("structure='ordinal' needs ordinal classes (read_multiclass(..., ordinal=True), CLI --ordinal)")
    ds = hist.annotations
    if not ds.has_gold:
        raise DataError(f"history {ds.name!r} has no gold labels: Stage A needs gold anchors")
    K = hist.n_classes
    n_gold_class = np.bincount(ds.gold[ds.gold >= 0].astype(np.int64), minlength=K)
    if structure == "full" and (n_gold_class == 0).any():
        missing = [hist.classes[k] for k in np.flatnonzero(n_gold_class == 0)]
        warnings.warn(f"history {ds.name!r}: no gold item of class(es) {', '.join(map(repr, missing))}; under the "
                      "full structure every labeler's confusion row for them is learned from unlabelled items alone "
                      "(it can trade places with another class's). Gold on those classes, or structure='symmetric'"
                      f"{' or ordinal' if hist.ordinal else ''}, anchors them", SparseGoldWarning, stacklevel=2)
    d = design_of(ds, K)
    pi0, th0, p0 = initial_values(ds, K, structure)
    fit = confusion_model.run_em(d, structure, pi0, th0, p0, tol=tol, max_iter=max_iter, pseudo=float(pseudo_count))
    conv = ConvergenceInfo(fit.converged, fit.n_iter, fit.loglik, fit.max_change, tol, max_iter, "parameters", True)
    if not fit.converged:
        warnings.warn(f"multi-class Stage A EM did not converge in {fit.n_iter} iterations (last change "
                      f"{fit.max_change:.2e} > tol {tol:.0e}); raise max_iter", ConvergenceWarning, stacklevel=2)
    info = confusion_model.Information(d, structure, fit, float(pseudo_count))
    n_par = ds.n_labelers * confusion_model.n_local(structure, K) + ds.n_rounds * (K - 1)
    bic = -2 * fit.loglik + n_par * math.log(max(ds.n_items, 2))
    pcov = info.covariance() if covariance else None
    isg = ds.gold >= 0
    return MultiClassCalibration(
        labeler_ids=tuple(str(x) for x in ds.labeler_ids), classes=hist.classes, values=hist.values,
        ordinal=hist.ordinal, structure=structure, confusion=fit.pi, theta=fit.theta, round_ids=ds.round_ids,
        round_prevalence=fit.prev,
        round_n_items=np.bincount(ds.item_round, minlength=ds.n_rounds).astype(np.int64),
        round_n_gold=np.bincount(ds.item_round[isg], minlength=ds.n_rounds).astype(np.int64),
        n_annotations=np.bincount(ds.labeler, minlength=ds.n_labelers).astype(np.int64),
        gold_counts=gold_counts(ds, K), convergence=conv, parameter_covariance=pcov, bic=bic,
        settings={"tol": tol, "max_iter": max_iter, "pseudo_count": float(pseudo_count), "structure": structure,
                  "init": f"gold subset + {INIT_PSEUDO:g} pseudo-observation at the pooled gold confusion row"},
        created=datetime.now(UTC).isoformat(timespec="seconds"), history=hist, information=info,
    )


AUTO_FOLDS = 2
"""Folds of the gold items for ``structure="auto"``: two mock rounds of half the gold each (five smaller ones were
noisier: see docs/multiclass.md, "Choosing the structure")."""

AUTO_MIN_GOLD = 25
"""Below this many gold items ``structure="auto"`` chooses by BIC (five folds of fewer than five items each say
little)."""


def held_out_scores(hist: MultiClassData, structure: str, *, start: MultiClassCalibration | None = None,
                    folds: int = AUTO_FOLDS, tol: float = 1e-8, max_iter: int = 10_000,
                    pseudo_count: float = 0.0, rng: int = 0) -> tuple[float, float]:
    """Mock rounds of the history's gold: HERO-1's mean L1 error of the class shares, and the mean log score.

    The gold items are dealt at random (seed ``rng``; by their ids, :func:`heroeval.ingest.coding.item_order`)
    into ``folds`` folds. For each, Stage A is refitted with
    ``structure`` on the whole history with that fold's gold hidden (its items stay, unlabelled by gold), from
    ``start``'s parameters when given (the structure's fit on all the gold: the same maximum, fewer steps). The
    fold's items are then a mock round: HERO-1's class shares on them (:func:`confusion_model.solve_simplex`
    on their labels' likelihoods, the round's own prevalence free) against the fold's gold shares, summed over
    classes (L1), averaged over the folds; and each held-out item's ``log P(its gold class | its labels)``
    under the refit and its round's prevalence, averaged over the gold items. Lower L1 and higher log score
    are better. The L1 is what ``structure="auto"`` chooses by: it scores the estimand itself, where the log
    score scores single items and punishes a confident structure that still gets the shares right.
    """
    ds = hist.annotations
    K, J, G = hist.n_classes, ds.n_labelers, ds.n_rounds
    gold_items = np.flatnonzero(ds.gold >= 0)
    if gold_items.size < folds:
        raise HeroEvalError(f"held_out_scores needs at least {folds} gold items, got {gold_items.size}")
    perm = gold_items[item_order(ds.item_ids[gold_items], rng)]  # by the items' ids: the same for every reader
    log_total, l1 = 0.0, []
    for f in range(folds):
        held = np.sort(perm[f::folds])
        g = ds.gold.astype(np.int64)
        g[held] = -1
        d = confusion_model.make_design(ds.item_ptr, ds.labeler, ds.label, g, ds.item_round, K, J, G)
        if start is not None:
            pi0, th0, p0 = start.confusion, start.theta, start.round_prevalence
        else:
            pi0, th0, p0 = initial_values(replace(ds, gold=g.astype(np.int8)), K, structure)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fit = confusion_model.run_em(d, structure, pi0, th0, p0, tol=tol, max_iter=max_iter,
                                         pseudo=float(pseudo_count))
        w, _ = confusion_model.e_step(d, fit.pi, fit.prev)
        truth = ds.gold[held].astype(np.int64)
        log_total += float(np.log(np.clip(w[held, truth], 1e-300, None)).sum())
        lam = confusion_model.item_loglik(d, np.log(fit.pi))[held]
        shares, _ = confusion_model.solve_simplex(lam)
        l1.append(float(np.abs(shares - np.bincount(truth, minlength=K) / held.size).sum()))
    return float(np.mean(l1)), log_total / gold_items.size
