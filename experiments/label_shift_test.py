"""A model-free label-shift test on the current round (issue #18, real rounds): measured and dropped.

    .venv/bin/python -m experiments.label_shift_test groups 13      # the real rounds
    .venv/bin/python -m experiments.label_shift_test none,half,rate 5   # random splits: the test's size

Under a pure rate shift every labeler's positive share in the current round is ``f_j + t d_j`` with its
false-positive rate ``f_j`` and Youden index ``d_j`` from the history's gold, whatever the dependence between
labelers: every labeler's Rogan–Gladen estimate ``mu_j`` targets the same ``t``. This tests that (Cochran-type
heterogeneity of the ``mu_j`` of labelers with at least 5 gold items of each class and 10 current labels, with
the item-clustered covariance of current and gold items, chi-squared on its rank). The hope: a test that
tells the real rounds the history cannot judge (mre_treat's batches 23-46, whose gold is 0 by construction)
from those it can.

Measured in the session of 2026-12-02 (sixth stop): on the random splits (no label shift by construction; 5
resamples per set and shift, 12 sets) it rejected at 5 % in 3, 3 and 2 of 60 rounds (none, half, rate). On the
real rounds (13 resamples) it rejected in every testable round but one: all of triviaqa's nine answering models
(p from 1e-5 to 1e-136; there the recommended interval already covers 0.90) and mre_treat's batches 1-22 (p from
6e-4 to 1e-19; errors -0.04 to -0.11), and not on mre_treat's batches 23-46 (p 0.07-0.10), the one round every
method misses by about +0.5. So it flags the rounds that are nearly fine and misses the one that fails: the
crowd on batches 23-46 behaves, consistently across labelers, like a crowd seeing a TREATS rate of about 0.24,
and no test on silver labels can see that the gold calls those items 0. Dropped; the past-round check
(``ModelChecks.rounds``, docs/research/robustness.md section 7, "Past rounds") is what was built instead.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import chi2

from heroeval import calibrate
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.real_data import BINARY, round_sets

warnings.simplefilter("ignore")
D = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


def qtest(hist: object, cur: object, cal: object, min_gold: int = 5, min_cur: int = 10) -> tuple[float, int, float]:
    """Heterogeneity of the labelers' Rogan–Gladen estimates: (Q, degrees of freedom, p)."""
    J = cal.n_labelers
    npos = (cal.gold_tp + cal.gold_fn).astype(float)
    nneg = (cal.gold_tn + cal.gold_fp).astype(float)
    a = cal.gold_tp / np.maximum(npos, 1)
    b = cal.gold_tn / np.maximum(nneg, 1)
    idx = {lab_id: k for k, lab_id in enumerate(cal.labeler_ids)}
    lab = np.array([idx.get(x, -1) for x in cur.labeler_ids])[cur.labeler]
    ok = lab >= 0
    z = cur.label.astype(float)
    n_j = np.bincount(lab[ok], minlength=J).astype(float)
    s_j = np.bincount(lab[ok], weights=z[ok], minlength=J)
    Y = a + b - 1
    u = np.flatnonzero((n_j >= min_cur) & (npos >= min_gold) & (nneg >= min_gold) & (Y > 0.2))
    if u.size < 2:
        return np.nan, 0, np.nan
    p = s_j[u] / n_j[u]
    mu_j = (p + b[u] - 1) / Y[u]
    la = (cal.gold_tp[u] + 1) / (npos[u] + 2)
    lb = (cal.gold_tn[u] + 1) / (nneg[u] + 2)
    pos = np.full(J, -1)
    pos[u] = np.arange(u.size)
    K = u.size
    # influence values of every mu_j: current items (each label's share) and the history's gold items
    kk = np.where(ok, pos[np.maximum(lab, 0)], -1)
    m = kk >= 0
    Ic = np.zeros((cur.n_items, K))
    np.add.at(Ic, (cur.annotation_item[m], kk[m]), (z[m] - p[kk[m]]) / (n_j[u][kk[m]] * Y[u][kk[m]]))
    hidx = np.array([idx.get(x, -1) for x in hist.labeler_ids])[hist.labeler]
    hk = np.where(hidx >= 0, pos[np.maximum(hidx, 0)], -1)
    g = hist.gold[hist.annotation_item]
    hm = (hk >= 0) & (g >= 0)
    kk2, it2, gg, zz = hk[hm], hist.annotation_item[hm], g[hm], hist.label.astype(float)[hm]
    # d mu / d a = -mu / Y (a's influence (z - a) / npos on positives); d mu / d b = (1 - mu) / Y (on negatives)
    va = np.where(gg == 1, (zz - a[u][kk2]) / npos[u][kk2] * (-mu_j[kk2] / Y[u][kk2]), 0.0)
    vb = np.where(gg == 0, ((1 - zz) - b[u][kk2]) / nneg[u][kk2] * ((1 - mu_j[kk2]) / Y[u][kk2]), 0.0)
    Ih = np.zeros((hist.n_items, K))
    np.add.at(Ih, (it2, kk2), va + vb)
    V = Ic.T @ Ic + Ih.T @ Ih
    # the diagonal floored at the model variances (labelers with few labels), correlations kept
    pbar = np.clip(p, 1e-3, 1 - 1e-3)
    mc = mu_j.clip(0, 1)
    mv = (pbar * (1 - pbar) / n_j[u] + mc**2 * la * (1 - la) / npos[u] + (1 - mc) ** 2 * lb * (1 - lb) / nneg[u]) / Y[u] ** 2
    d = np.sqrt(np.maximum(np.diag(V), mv))
    sd0 = np.sqrt(np.diag(V))
    sd0 = np.where(sd0 > 0, sd0, 1.0)
    V = V / np.outer(sd0, sd0) * np.outer(d, d)
    if not np.isfinite(V).all():
        return np.nan, -1, np.nan
    # contrasts r = mu_j - (inverse-variance weighted mean); Q = r' (C V C')^+ r on its rank
    w = 1 / d**2
    w /= w.sum()
    C = np.eye(K) - np.outer(np.ones(K), w)
    r = C @ mu_j
    ev, evec = np.linalg.eigh(C @ V @ C.T)
    keep = ev > 1e-8 * ev.max()
    Q = float(((evec[:, keep].T @ r) ** 2 / ev[keep]).sum())
    return Q, int(keep.sum()), float(chi2.sf(Q, int(keep.sum())))


def main() -> None:
    mode, R = sys.argv[1], int(sys.argv[2])
    rows = []
    if mode == "groups":
        for data, n in round_sets(D, 200):
            for r in range(R):
                sp = make_split(data, r, 0.1, n, "none", 0, "groups")
                Q, df, pv = qtest(sp.history, sp.current, calibrate(sp.history))
                rows.append({"set": data.name, "shift": "groups", "group": sp.group, "r": r, "Q": Q, "df": df, "p": pv})
    else:
        for name, suf in BINARY:
            data = load_folder(D / name, binary_suffix=suf)
            for shift in mode.split(","):
                for r in range(R):
                    sp = make_split(data, r, 0.1, 200, shift, 0, "random")
                    Q, df, pv = qtest(sp.history, sp.current, calibrate(sp.history))
                    rows.append({"set": data.name, "shift": shift, "r": r, "Q": Q, "df": df, "p": pv})
    out = pd.DataFrame(rows)
    keys = ["set", "group"] if mode == "groups" else ["shift"]
    print(out.groupby(keys)["p"].agg(testable="count", rejected_05=lambda p: int((p < 0.05).sum()),
                                     min="min", max="max").to_string())


if __name__ == "__main__":
    main()
