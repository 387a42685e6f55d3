"""Issue #5 experiment: prediction-powered inference (PPI) with the history's gold as an ``auto`` candidate.

    .venv/bin/python -m benchmarks.robustness --resamples 30 --out OUT      # once: the splits and auto's candidates
    .venv/bin/python -m experiments.ppi_experiment --from-benchmark OUT

PPI (Angelopoulos et al. 2023; ppi_py's ``ppi_mean_ci``) estimates a mean from
a predictor on unlabelled items and a rectifier from labelled ones. Here the
predictor is the crowd's label share on an item, counting only the labelers
of the current round (so that history and current round use the same
"classifier" under pool shift), and the labelled items are the history's gold:

    PPI = mean_current(lam * s) + mean_gold(y - lam * s)

with ``lam = 1`` (plain PPI) or PPI++'s power-tuned ``lam = cov(y, s) /
((1 + n/N) var(s))`` clipped to [0, 1]. It assumes nothing about how labelers
err together, but it assumes that the gold items and the current round have
the same rate: with the same label-share classifier (conditional means ``a``
and ``b`` given Y = 1 and 0, Youden index ``J = a - b``), its bias is
``-(1 - lam J) (mu_current - mu_gold)``. The experiment estimates that bias by
the paired difference from the same classifier's prior-shift-robust
adjusted count ``ACC = (mean_current(s) - b) / J`` (identically
``PPI - ACC = -(1 - lam J)(ACC - mean_gold(y))``), and gives PPI the
estimated mean squared error ``max(d^2 - se(d)^2, 0) + var(y - lam s)(1/N + 1/n)``
that ``auto``'s other candidates get from their mock rounds. ``auto``'s rule
(the gate) is then applied with and without PPI among the candidates.

Not a heroeval method: the random splits of the benchmark have no rate
shift between history and current round, which flatters PPI; a real next
round (another model, another prompt mix) usually has one.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from heroeval.ingest.annotations import AnnotationSet
from heroeval.workflows.benchmark import load_folder, make_split, summarize_benchmark

from benchmarks.real_data import BINARY
from benchmarks.robustness import COMPARED
from experiments import auto_rules_experiment as ar

#: fewer gold items than this (after restriction to the current labelers): PPI is not scored, as auto's mock rounds
MIN_GOLD = 8


def label_share(ann: AnnotationSet, labelers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per item: the share of 1-labels among the labels by ``labelers``, and how many such labels."""
    item = ann.annotation_item
    keep = np.isin(ann.labeler_ids[ann.labeler], labelers)
    n = np.bincount(item[keep], minlength=ann.n_items).astype(float)
    s = np.bincount(item[keep], weights=ann.label[keep].astype(float), minlength=ann.n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        return s / n, n


def ppi_candidate(history: AnnotationSet, current: AnnotationSet, tuned: bool) -> dict[str, Any] | None:
    """PPI's estimate, standard error and estimated MSE as a row of auto's candidate table (None: too little gold)."""
    cl = np.unique(current.labeler_ids[current.labeler])
    sc, nc = label_share(current, cl)
    sc = sc[nc > 0]
    sh, nh = label_share(history, cl)
    g = (history.gold >= 0) & (nh > 0)
    y, s = history.gold[g].astype(float), sh[g]
    n, N = y.size, sc.size
    n1, n0 = int(y.sum()), int(n - y.sum())
    if n < MIN_GOLD or n1 == 0 or n0 == 0 or N < 2:
        return None
    a, b = float(s[y == 1].mean()), float(s[y == 0].mean())
    J = a - b
    lam = 1.0
    if tuned:
        v = float(np.concatenate([s, sc]).var(ddof=1))
        lam = float(np.clip(np.cov(y, s)[0, 1] / ((1 + n / N) * v), 0.0, 1.0)) if v > 0 else 0.0
    r = y - lam * s
    est = lam * float(sc.mean()) + float(r.mean())
    if_c = lam * (sc - sc.mean()) / N  # influence values: current items, then gold items
    if_g = (r - r.mean()) / n
    se = math.sqrt(float(if_c @ if_c + if_g @ if_g))
    if abs(J) < 1e-9:
        return None
    acc = (float(sc.mean()) - b) / J
    ia_c = (sc - sc.mean()) / (J * N)
    ia_g = np.where(y == 1, -acc * (s - a) / (J * n1), -(1 - acc) * (s - b) / (J * n0))
    d = est - acc
    dc, dg = if_c - ia_c, if_g - ia_g
    d_se = math.sqrt(float(dc @ dc + dg @ dg))
    var_err = float(r.var(ddof=1)) * (1 / N + 1 / n)  # error relative to the round's realised rate
    pred = math.sqrt(max(d * d - d_se * d_se, 0.0) + var_err)
    return {"method": "ppi_tuned" if tuned else "ppi", "history_weight": None, "estimate": est,
            "standard_error": se, "mock_bias": 0.0, "mock_bias_se": d_se, "mock_vs_robust": math.nan,
            "mock_vs_robust_se": math.nan, "variance_history": float(if_g @ if_g), "predicted_rmse": pred,
            "shift_bias": d, "acc": acc, "lam": lam}


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--from-benchmark", required=True, help="a robustness.py output folder (resamples.csv.gz)")
    ap.add_argument("--out", default="", help="folder for ppi_real.csv (default: --from-benchmark)")
    a = ap.parse_args()
    src = Path(a.from_benchmark)
    df = pd.read_csv(src / "resamples.csv.gz")
    recs = ar.records_from_benchmark(df)
    datas = {}
    for name, suffix in BINARY:
        d = load_folder(Path(a.data) / name, binary_suffix=suffix)
        datas[d.name] = d
    rows = []
    for rec in recs:
        sp = make_split(datas[rec["cell"]], rec["rep"], 0.10, 200, rec["shift"], 2026)
        if abs(sp.truth - rec["truth"]) > 1e-12:
            sys.exit(f"{rec['cell']} {rec['shift']} resample {rec['rep']}: split differs from the benchmark's")
        extra = {}
        for tuned in (False, True):
            c = ppi_candidate(sp.history, sp.current, tuned)
            if c is not None:
                c["cover"] = bool(abs(c["estimate"] - rec["truth"]) <= 1.96 * c["standard_error"])
                extra[c["method"]] = c
                rows.append({"dataset": rec["cell"], "shift": rec["shift"], "resample": rec["rep"],
                             "method": c["method"], "estimate": c["estimate"], "truth": rec["truth"],
                             "cover": c["cover"]})
        for rule, add in (("auto", ()), ("auto + ppi", ("ppi",)), ("auto + ppi_tuned", ("ppi_tuned",))):
            r2 = dict(rec, table=rec["table"] + [extra[m] for m in add if m in extra])
            p = ar.gate(r2)
            est, cov = (rec["fallback"], rec["fallback_cover"]) if p is None else (p["estimate"], p["cover"])
            rows.append({"dataset": rec["cell"], "shift": rec["shift"], "resample": rec["rep"], "method": rule,
                         "estimate": est, "truth": rec["truth"], "cover": cov,
                         "picked": "fallback" if p is None else p["method"]})
    res = pd.DataFrame(rows)
    res["err2"] = (res["estimate"] - res["truth"]) ** 2
    rmse = res.groupby(["dataset", "shift", "method"], sort=False)["err2"].mean().pow(0.5).unstack()
    summ = summarize_benchmark(df)
    best0 = summ[summ["method"].isin(COMPARED)].groupby(["dataset", "shift"])["rmse"].min()
    tab = rmse.join(best0.rename("best_without_ppi"), on=["dataset", "shift"])
    out_rows = []
    for rule, with_m in (("auto", ()), ("auto + ppi", ("ppi",)), ("auto + ppi_tuned", ("ppi_tuned",))):
        best = tab[["best_without_ppi", *with_m]].min(axis=1)
        ratio = tab[rule] / best
        tab[f"ratio {rule}"] = ratio
        out_rows.append({"rule": rule, "cells_within_10pct": int((ratio <= 1.10).sum()), "cells": len(ratio),
                         "worst_ratio": float(ratio.max()),
                         "coverage": float(res[res["method"] == rule]["cover"].mean())})
    for m in ("ppi", "ppi_tuned"):
        out_rows.append({"rule": m + " alone", "cells_within_10pct": int((tab[m] / tab[["best_without_ppi", m]].min(
            axis=1) <= 1.10).sum()), "cells": len(tab), "worst_ratio": float((tab[m] / tab["best_without_ppi"]).max()),
            "coverage": float(res[res["method"] == m]["cover"].mean())})
    out = Path(a.out) if a.out else src
    tab.reset_index().to_csv(out / "ppi_real.csv", index=False)
    pd.set_option("display.width", 220)
    print(tab.round(3).to_string())
    print(pd.DataFrame(out_rows).round(3).to_string(index=False))
    picks = res[res["method"] == "auto + ppi"].groupby(["dataset", "shift"])["picked"].agg(
        lambda x: ", ".join(f"{k} {v}" for k, v in x.value_counts().items()))
    print(picks.to_string())


if __name__ == "__main__":
    main()
