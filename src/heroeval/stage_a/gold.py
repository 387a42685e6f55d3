"""Stage A's gold items: their counts per labeler, the starting values and information they give, and the
calibration's scores of them."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval.errors import HeroEvalError
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a import two_coin

__all__ = ["GOLD_LABELS_KEEP", "GOLD_SCORES_KEEP", "GoldLabels", "GoldScores", "annotations_of", "gold_counts", "gold_information", "gold_labels_of", "initial_from_counts", "initial_values", "score_gold_items"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def annotations_of(item_ptr: npt.ArrayLike, items: IntArray) -> tuple[IntArray, IntArray]:
    """The positions of ``items``' annotations in an item-sorted annotation set, and the CSR pointer of those items
    (``ptr[k]:ptr[k + 1]`` are item ``items[k]``'s, in the returned positions)."""
    p = np.asarray(item_ptr, dtype=np.int64)
    starts, lens = p[items], p[items + 1] - p[items]
    ptr = np.zeros(items.size + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    idx: IntArray = np.repeat(starts - ptr[:-1], lens) + np.arange(int(ptr[-1]), dtype=np.int64)
    return idx, ptr


GOLD_SCORES_KEEP = 2000
"""At most this many history gold items are scored and kept (a fixed-seed sample beyond it)."""


@dataclass(frozen=True)
class GoldScores:
    """The history's gold items as the calibration scores them: what a predictor's errors looked like there.

    ``y`` the gold labels, ``llr`` each item's log-likelihood ratio
    ``L = log P(labels | Y = 1) - log P(labels | Y = 0)`` under the
    calibration's sensitivities and specificities (in-sample: the items
    helped fit them), for all ``n_gold`` gold items or, beyond
    :data:`GOLD_SCORES_KEEP`, a fixed-seed random sample of them.
    The estimates with current gold shrink their residual spread towards
    the one these items give (:func:`heroeval.estimators.ppi.history_prior`).
    """

    y: npt.NDArray[np.float64]
    llr: npt.NDArray[np.float64]
    n_gold: int

    def to_dict(self) -> dict[str, Any]:
        return {"n_gold": self.n_gold, "y": [int(v) for v in self.y],
                # exact (shortest round-trip repr): the tuning of the estimates with current gold depends on
                # these, so a calibration read back from its file must give the same estimate as the fit itself
                "llr": [float(v) for v in np.clip(self.llr, -700.0, 700.0)]}

    @classmethod
    def from_dict(cls, d: Any) -> GoldScores:
        try:
            y = np.asarray(d["y"], dtype=np.float64)
            llr = np.asarray(d["llr"], dtype=np.float64)
            n = int(d["n_gold"])
        except (KeyError, TypeError, ValueError) as exc:
            raise HeroEvalError(f"missing or bad field ({exc})") from exc
        if y.shape != llr.shape or y.ndim != 1 or n < y.size or not np.all((y == 0) | (y == 1)):
            raise HeroEvalError("y and llr must be lists of one length (y of 0/1), n_gold at least that length")
        return cls(y, llr, n)


def score_gold_items(history: AnnotationSet, alpha: npt.NDArray[np.float64], beta: npt.NDArray[np.float64],
                keep: int = GOLD_SCORES_KEEP) -> GoldScores | None:
    """Score the history's gold items (a fixed-seed sample of ``keep`` beyond that many); ``None`` without gold.

    Touches only the sampled items' annotations, so it costs nothing next to
    the fit even for histories of billions of annotations.
    """
    g = np.flatnonzero(history.gold >= 0)
    n_gold = int(g.size)
    if n_gold == 0:
        return None
    if n_gold > keep:
        g = np.sort(np.random.default_rng(0).choice(g, keep, replace=False))
    idx, ptr = annotations_of(history.item_ptr, g)
    offs, lens = ptr[:-1], np.diff(ptr)
    la1, la0 = two_coin.code_logprobs(np.asarray(alpha, dtype=np.float64), np.asarray(beta, dtype=np.float64))
    vals = (la1 - la0)[2 * history.labeler[idx].astype(np.int64) + history.label[idx].astype(np.int64)]
    llr = np.zeros(g.size)
    has = lens > 0
    if vals.size:
        llr[has] = np.add.reduceat(vals, offs[has])
    return GoldScores(history.gold[g].astype(np.float64), np.clip(llr, -700.0, 700.0), n_gold)  # as saved


def gold_information(ds: AnnotationSet, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> FloatArray:
    """The observed information of the gold items of ``ds`` alone at ``(alpha, beta, prev)`` (probability scale,
    P x P): a gold item's likelihood has each labeler's label given the gold and the gold given its round's
    prevalence, so the matrix is diagonal."""
    tp, fn, tn, fp = gold_counts(ds)
    isg = ds.gold >= 0
    n1 = np.bincount(ds.item_round[isg & (ds.gold == 1)], minlength=ds.n_rounds).astype(np.float64)
    n0 = np.bincount(ds.item_round[isg & (ds.gold == 0)], minlength=ds.n_rounds).astype(np.float64)
    a = np.clip(alpha, two_coin.EPS, 1 - two_coin.EPS)
    b = np.clip(beta, two_coin.EPS, 1 - two_coin.EPS)
    p = np.clip(prev, two_coin.EPS, 1 - two_coin.EPS)
    return np.diag(np.concatenate([tp / a**2 + fn / (1 - a) ** 2, tn / b**2 + fp / (1 - b) ** 2,
                                   n1 / p**2 + n0 / (1 - p) ** 2]))


def gold_counts(ds: AnnotationSet) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """Per-labeler (tp, fn, tn, fp) over the annotations of gold items."""
    J = ds.n_labelers
    gi = np.flatnonzero(ds.gold >= 0)
    if gi.size == 0:
        zero = np.zeros(J, dtype=np.int64)
        return zero, zero.copy(), zero.copy(), zero.copy()
    # only the gold items' annotations
    idx, ptr = annotations_of(ds.item_ptr, gi)
    g = np.repeat(ds.gold[gi], np.diff(ptr))
    z = ds.label[idx]
    lab = ds.labeler[idx]

    def cnt(mask: npt.NDArray[np.bool_]) -> IntArray:
        return np.bincount(lab[mask], minlength=J).astype(np.int64)

    return (
        cnt((g == 1) & (z == 1)),
        cnt((g == 1) & (z == 0)),
        cnt((g == 0) & (z == 0)),
        cnt((g == 0) & (z == 1)),
    )


def initial_values(
    ds: AnnotationSet,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Starting values from the gold subset.

    Each labeler's sensitivity starts at ``(tp + a_pool) / (tp + fn + 1)``: its
    gold-subset rate with one pseudo-observation at the pooled gold
    sensitivity ``a_pool`` of all labelers, so a labeler with no gold
    positives starts at the pooled value and none starts at exactly 0 or 1.
    Specificity likewise. Each round's prevalence starts at its gold mean
    (the pooled gold mean for rounds without gold), kept in [0.01, 0.99].
    """
    tp, fn, tn, fp = gold_counts(ds)
    isg = ds.gold >= 0
    G = ds.n_rounds
    ng = np.bincount(ds.item_round[isg], minlength=G)
    sg = np.bincount(ds.item_round[isg], weights=ds.gold[isg].astype(float), minlength=G)
    return initial_from_counts(tp, fn, tn, fp, ng, sg)


def initial_from_counts(
    tp: IntArray, fn: IntArray, tn: IntArray, fp: IntArray, ng: npt.NDArray[Any], sg: npt.NDArray[Any]
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """:func:`initial_values` from per-labeler gold counts and per-round gold items (``ng``) and positives (``sg``)."""
    pos, neg = tp.sum() + fn.sum(), tn.sum() + fp.sum()
    a_pool = tp.sum() / pos if pos > 0 else 0.7
    b_pool = tn.sum() / neg if neg > 0 else 0.7
    alpha = (tp + a_pool) / (tp + fn + 1.0)
    beta = (tn + b_pool) / (tn + fp + 1.0)
    pooled = float(sg.sum() / ng.sum()) if ng.sum() > 0 else 0.5
    with np.errstate(invalid="ignore", divide="ignore"):
        prev = np.where(ng > 0, sg / np.maximum(ng, 1), pooled)
    return alpha, beta, np.clip(prev, 0.01, 0.99)


GOLD_LABELS_KEEP = 5_000_000
"""A calibration keeps its gold items' labels when there are at most this many (about 10 bytes each in the file);
beyond it the file keeps the per-labeler gold counts only."""


@dataclass(frozen=True)
class GoldLabels:
    """The history's gold items and every label on them, in the calibration's labeler codes.

    What an estimator that uses the gold items alone needs beyond the per-labeler counts: Rogan–Gladen's
    standard error counts how the labelers' sensitivity and specificity estimates covary through the gold items
    they share. Kept in the calibration (and its file), so that a saved and reloaded calibration gives the same
    standard errors as the one in memory.
    """

    gold: npt.NDArray[np.int8]
    item_ptr: IntArray
    labeler: IntArray
    label: npt.NDArray[np.int8]
    group: IntArray | None = None
    """Each gold item's group code when the history's items are grouped (:meth:`AnnotationSet.with_groups`):
    the gold-count rates' covariance is then cluster-robust by group; None: items independent."""

    @property
    def n_items(self) -> int:
        return int(self.gold.size)

    @property
    def annotation_item(self) -> IntArray:
        """Each label's gold item (0 .. n_items - 1)."""
        out: IntArray = np.repeat(np.arange(self.n_items, dtype=np.int64), np.diff(self.item_ptr))
        return out

    def to_dict(self) -> dict[str, Any]:
        def b64(a: npt.NDArray[Any], dtype: str) -> str:
            return base64.b64encode(np.ascontiguousarray(a, dtype=dtype).tobytes()).decode("ascii")

        out = {"n_items": self.n_items, "n_labels": int(self.label.size),
               "gold_int8_base64": b64(self.gold, "i1"), "labels_per_item_int32_le_base64": b64(np.diff(self.item_ptr), "<i4"),
               "labeler_int32_le_base64": b64(self.labeler, "<i4"), "label_int8_base64": b64(self.label, "i1")}
        if self.group is not None:
            out["group_int32_le_base64"] = b64(self.group, "<i4")
        return out

    @classmethod
    def from_dict(cls, d: Any, n_labelers: int) -> GoldLabels:
        def arr(key: str, dtype: str, n: int) -> npt.NDArray[Any]:
            try:
                a = np.frombuffer(base64.b64decode(d[key], validate=True), dtype=dtype)
            except (KeyError, TypeError, ValueError, binascii.Error) as exc:
                raise HeroEvalError(f"missing or bad field {key} ({exc})") from exc
            if a.size != n:
                raise HeroEvalError(f"{key}: expected {n} values, got {a.size}")
            return a

        try:
            n, m = int(d["n_items"]), int(d["n_labels"])
        except (KeyError, TypeError, ValueError) as exc:
            raise HeroEvalError(f"missing or bad field ({exc})") from exc
        gold = arr("gold_int8_base64", "i1", n).astype(np.int8)
        lens = arr("labels_per_item_int32_le_base64", "<i4", n).astype(np.int64)
        labeler = arr("labeler_int32_le_base64", "<i4", m).astype(np.int64)
        label = arr("label_int8_base64", "i1", m).astype(np.int8)
        if (lens < 0).any() or int(lens.sum()) != m:
            raise HeroEvalError("labels per item must be non-negative and add up to n_labels")
        if not np.isin(gold, (0, 1)).all() or not np.isin(label, (0, 1)).all():
            raise HeroEvalError("gold and labels must be 0 or 1")
        if m and (labeler.min() < 0 or labeler.max() >= n_labelers):
            raise HeroEvalError(f"labeler codes must be in 0..{n_labelers - 1}")
        ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=ptr[1:])
        group = None
        if d.get("group_int32_le_base64") is not None:  # absent from files of ungrouped histories
            group = arr("group_int32_le_base64", "<i4", n).astype(np.int64)
        return cls(gold, ptr, labeler, label, group)


def gold_labels_of(history: AnnotationSet, keep: int = GOLD_LABELS_KEEP) -> GoldLabels | None:
    """The history's gold items and their labels (None without gold, or with more than ``keep`` labels)."""
    g = np.flatnonzero(history.gold >= 0)
    if g.size == 0:
        return None
    p = np.asarray(history.item_ptr, dtype=np.int64)
    if int((p[g + 1] - p[g]).sum()) > keep:
        return None
    idx, new_ptr = annotations_of(p, g)
    group = None if history.item_group is None else np.asarray(history.item_group[g], dtype=np.int64)
    return GoldLabels(np.asarray(history.gold[g], dtype=np.int8), new_ptr,
                      np.asarray(history.labeler[idx], dtype=np.int64), np.asarray(history.label[idx], dtype=np.int8),
                      group)
