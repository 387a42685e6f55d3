"""Conditional dependence between labelers given the gold label.

Stage A's two-coin model assumes labelers err independently given the gold
label. :func:`dependence_test` tests that on the history's gold items: for
every pair of labelers that labelled the same gold items, the standardised
residual products ``t = (z_j - a_j)(z_k - a_k) / sqrt(a_j (1 - a_j) a_k (1 - a_k))``,
with ``z_j`` whether labeler j's label agrees with the gold and ``a_j`` its
leave-this-item-out rate of agreeing among gold items of the item's class,
have mean 0 under conditional independence. With two classes this is the
label itself (on gold-0 items both residuals change sign, their product
does not); the same code tests K-class labels (a
:class:`~heroeval.multiclass.MultiClassData`'s ``annotations``: class codes in
``label`` and ``gold``), where it asks whether two labelers *err* together
beyond what their per-class error rates imply. Per pair,
``z = sum t / sqrt(n)`` (one-sided: labelers that agree beyond what
independence implies), with Benjamini–Hochberg adjustment; overall,
``Z = sum t / sqrt(number of pair-items)``: under independence each ``t`` has
mean 0 and variance 1 and the products of different pairs are uncorrelated
(even on one item), so ``Z`` is approximately standard normal.

:func:`error_correlation` (shown in the report) is a shuffle test of the
same question on the posteriors of gold-free items.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import norm

from heroeval.core.multiple import benjamini_hochberg
from heroeval.estimators.results import jsonable
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.checks_record import DependenceTest

__all__ = ["dependence_test", "error_correlation"]

FloatArray = npt.NDArray[np.float64]


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
    y = history.gold[it].astype(np.int64)
    # the labeler agrees with the gold class: for two classes the same residual products as the label itself (on
    # gold-0 items both residuals change sign), and it makes the test one for K classes as well
    z = (history.label[on_gold].astype(np.int64) == y).astype(np.float64)
    n_class = int(history.gold[gi].max()) + 1 if gi.size else 2
    # per labeler and class: labels and agreements on gold items; per (item, labeler): own labels and agreements
    n_cls = np.zeros((max(n_class, 2), J))
    s_cls = np.zeros((max(n_class, 2), J))
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


def error_correlation(history: AnnotationSet, *, n_shuffles: int = 50, max_items: int = 5000,
                      seed: int = 0) -> dict[str, Any]:
    """How alike the labelers' mistakes are on the history's gold items (HERO assumes independent errors).

    Within each gold class, each labeler's error indicator per gold item
    (its mean over repeated labels) is correlated with every other labeler's
    over the items both labelled (pairs with fewer than 10 common items are
    left out); the statistic is the mean of those pairwise correlations.
    Under conditional independence it is near 0; the reference is the same
    statistic after shuffling each labeler's errors across the items it
    labelled (``n_shuffles`` times, fixed ``seed``), which makes them
    independent while keeping each labeler's error rate.

    Returns, per class (``"gold_1"``, ``"gold_0"``): the number of items, the
    mean correlation, the shuffles' mean and 95th percentile, and ``ok``
    (the observed mean does not exceed that percentile).
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    item = history.annotation_item
    gold = np.asarray(history.gold)[item]
    out: dict[str, Any] = {}
    for y in (1, 0):
        keep = gold == y
        if not keep.any():
            continue
        df = pd.DataFrame({"item": item[keep], "lab": np.asarray(history.labeler)[keep],
                           "err": (np.asarray(history.label)[keep] != y).astype(float)})
        wide = df.pivot_table(index="item", columns="lab", values="err", aggfunc="mean")
        if len(wide) > max_items:
            wide = wide.iloc[np.sort(rng.choice(len(wide), max_items, replace=False))]

        def mean_corr(w: pd.DataFrame) -> float:
            c = w.corr(min_periods=10).to_numpy()
            off = c[~np.eye(len(c), dtype=bool)]
            off = off[np.isfinite(off)]
            return float(off.mean()) if off.size else math.nan

        def shuffled(w: pd.DataFrame) -> pd.DataFrame:
            arr = w.to_numpy().copy()
            for j in range(arr.shape[1]):
                seen = np.flatnonzero(~np.isnan(arr[:, j]))
                arr[seen, j] = arr[rng.permutation(seen), j]
            return pd.DataFrame(arr, index=w.index, columns=w.columns)

        obs = mean_corr(wide)
        null = np.array([mean_corr(shuffled(wide)) for _ in range(n_shuffles)])
        null = null[np.isfinite(null)]
        q95 = float(np.quantile(null, 0.95)) if null.size else math.nan
        out[f"gold_{y}"] = {"n_items": len(wide), "mean_correlation": obs,
                            "shuffled_mean": float(null.mean()) if null.size else math.nan,
                            "shuffled_q95": q95, "ok": bool(not math.isfinite(obs) or not math.isfinite(q95)
                                                            or obs <= q95)}
    res: dict[str, Any] = jsonable(out)
    return res
