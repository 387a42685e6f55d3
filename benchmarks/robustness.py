"""Issue #5's real-data table: every method and ``auto`` on every binary set, rho = 0.10, with and without pool shift.

    .venv/bin/python -m benchmarks.robustness --resamples 20 --out benchmarks/results/research/robustness

``--first 10 --resamples 20 --merge old/resamples.csv.gz`` adds resamples
10..29 to an earlier run of resamples 0..9 (the splits are seeded by the
resample index, so they are the same as a single run of 30 would make).

``--shifts`` (default none,half) chooses the random splits' shifts (none,
half: pool shift, rate: rate shift). ``--groups`` also runs the real rounds
(``split="groups"``, leave one round out; the sets and their groups are
``real_data.round_sets``: triviaqa's answering models with n = 400,
mre_treat's blocks of batches), ``--resamples`` per data set (resample r
takes group r mod G); their rows are tagged ``shift="groups"`` so that every
table groups by shift type none / half / rate / groups.

Writes ``resamples.csv.gz`` (one row per resample and method; ``picked`` says
what ``auto`` chose, ``candidates`` its candidate table as JSON),
``summary.csv`` (|bias|, SD, RMSE, coverage, mean interval width per data
set, shift and method), ``auto.csv`` (per data set and shift: the best
method's RMSE, ``auto``'s, their ratio, coverage and mean width of ``auto``,
HERO-1 and the best method, and what ``auto`` picked) and ``shift_table.csv``
(per shift type, for ``auto`` and every method in COMPARED: geometric mean
over cells of RMSE / best RMSE, worst ratio, share of cells within 10 %, mean
and minimum coverage, mean width). It prints the two criteria of the issue
(the share of cells where ``auto`` is within 10 % of the best method, and the
worst ratio) and the shift table.

``--judge`` skips the computation and judges the ``resamples.csv.gz`` already
in ``--out`` (``--resample-range A:B`` keeps resamples A..B-1, for example
those not seen when a rule was chosen). ``--bootstrap B`` (default 1000)
resamples each cell's resamples with replacement, the same draws for every
method, and reports how much the two criteria move with the resamples
(``auto_bootstrap.csv``: per cell, the share of draws with ``auto`` within
10 % of the best; printed: quantiles of the number of such cells and of the
worst ratio).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from heroeval.workflows.benchmark import RATE_SHIFT_ODDS, load_folder, run_benchmark, summarize_benchmark

from benchmarks.real_data import BINARY, round_sets

#: methods ``auto`` is compared with (every estimate a user could have picked instead)
COMPARED = ("majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1", "hero2", "hero_joint")
#: shift types in the order the tables show them (``groups``: real rounds, ``--groups``)
SHIFT_ORDER = ("none", "half", "rate", "groups")


def auto_table(summ: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """Per cell (data set, shift): the best method's, HERO-1's and ``auto``'s RMSE, coverage and mean width."""
    rows = []
    for (ds, shift), g in summ.groupby(["dataset", "shift"], sort=False):
        g = g.set_index("method")
        others = g.loc[[m for m in COMPARED if m in g.index]]
        best = others["rmse"].idxmin()
        picks = df[(df["dataset"] == ds) & (df["shift"] == shift) & (df["method"] == "auto")]["picked"]
        rows.append({
            "dataset": ds, "shift": shift, "best_method": best, "best_rmse": others.loc[best, "rmse"],
            "hero1_rmse": g.loc["hero1", "rmse"], "majority_vote_rmse": g.loc["majority_vote", "rmse"],
            "auto_rmse": g.loc["auto", "rmse"], "ratio": g.loc["auto", "rmse"] / others.loc[best, "rmse"],
            "auto_coverage": g.loc["auto", "coverage"], "auto_width": g.loc["auto", "width"],
            "hero1_coverage": g.loc["hero1", "coverage"], "hero1_width": g.loc["hero1", "width"],
            "best_coverage": others.loc[best, "coverage"], "best_width": others.loc[best, "width"],
            "picked": ", ".join(f"{k} {v}" for k, v in picks.value_counts().items()),
        })
    return pd.DataFrame(rows)


def shift_table(summ: pd.DataFrame) -> pd.DataFrame:
    """Per shift type and method (``auto`` and every method in COMPARED), over the cells (data sets) of that shift.

    ``geo_ratio``: geometric mean over cells of RMSE / the best COMPARED
    method's RMSE in the cell; ``worst_ratio`` its maximum; ``within_10pct``:
    share of cells with ratio <= 1.10; ``mean_coverage`` / ``min_coverage``
    over cells (NaN for majority vote, whose interval is not for the gold
    rate); ``mean_width``: mean over cells of the cell's mean interval width.
    ``cells`` counts the cells where the method ran (HERO-2 needs item text).
    """
    order = {s: i for i, s in enumerate(SHIFT_ORDER)}
    rows = []
    for shift, g in sorted(summ.groupby("shift", sort=False), key=lambda kv: order.get(str(kv[0]), len(order))):
        rmse = g.pivot_table(index="dataset", columns="method", values="rmse")
        best = rmse[[m for m in COMPARED if m in rmse.columns]].min(axis=1)
        for m in ("auto", *COMPARED):
            if m not in rmse.columns:
                continue
            ratio = (rmse[m] / best).dropna()
            gm = g[g["method"] == m]
            rows.append({
                "shift": shift, "method": m, "cells": int(ratio.size),
                "geo_ratio": float(np.exp(np.log(ratio).mean())) if ratio.size else np.nan,
                "worst_ratio": float(ratio.max()) if ratio.size else np.nan,
                "within_10pct": float((ratio <= 1.10).mean()) if ratio.size else np.nan,
                "mean_coverage": float(gm["coverage"].mean()), "min_coverage": float(gm["coverage"].min()),
                "mean_width": float(gm["width"].mean()),
            })
    return pd.DataFrame(rows)


def print_shift_table(st: pd.DataFrame) -> None:
    """Per shift type: ``auto``'s line, then each fixed method's geometric-mean ratio, mean coverage and width."""
    for shift, g in st.groupby("shift", sort=False):
        g = g.set_index("method")
        a = g.loc["auto"]
        fixed = g.drop(index="auto")
        best_fixed = fixed["geo_ratio"].idxmin()
        beats = bool(a["geo_ratio"] < fixed["geo_ratio"].min())
        print(f"shift {shift} ({int(a['cells'])} cells): auto coverage mean {a['mean_coverage']:.3f}, "
              f"min {a['min_coverage']:.3f}; width {a['mean_width']:.3f} (HERO-1 {g.loc['hero1', 'mean_width']:.3f}); "
              f"RMSE / best: geometric mean {a['geo_ratio']:.3f}, worst {a['worst_ratio']:.2f}; "
              f"beats every fixed method's geometric mean: {'yes' if beats else 'no'} "
              f"(best fixed: {best_fixed} {fixed.loc[best_fixed, 'geo_ratio']:.3f})")
    wide = st.pivot_table(index="method", columns="shift", values=["geo_ratio", "mean_coverage", "mean_width"],
                          sort=False, dropna=False)
    wide = wide.reindex([m for m in ("auto", *COMPARED) if m in set(st["method"])])
    print(wide.round(3).to_string())


def bootstrap_criteria(df: pd.DataFrame, draws: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The issue's two criteria under resampling of each cell's resamples (paired across methods).

    Returns the per-cell share of draws in which ``auto`` is within 10 % of
    the best method, and per draw the number of such cells and the worst ratio.
    """
    rng = np.random.default_rng(seed)
    sq = (df["estimate"] - df["truth"]) ** 2
    wide = df.assign(sq=sq).pivot_table(index=["dataset", "shift", "resample"], columns="method", values="sq")
    cols = [m for m in COMPARED if m in wide.columns]
    cells, ratios = [], []
    for (ds, sh), g in wide.groupby(level=["dataset", "shift"], sort=False):
        comp = g[cols].to_numpy()
        auto = g["auto"].to_numpy()
        idx = rng.integers(0, len(g), size=(draws, len(g)))
        with warnings.catch_warnings():  # a method missing in a cell (hero2 without text) is all-NaN there
            warnings.simplefilter("ignore", RuntimeWarning)
            m_comp = np.sqrt(np.nanmean(comp[idx], axis=1))  # draws x methods
        best = np.min(np.where(np.isnan(m_comp), np.inf, m_comp), axis=1)
        ratios.append(np.sqrt(auto[idx].mean(axis=1)) / best)
        cells.append((ds, sh))
    r = np.array(ratios)  # cells x draws
    per_cell = pd.DataFrame(cells, columns=["dataset", "shift"])
    per_cell["share_within_10pct"] = (r <= 1.10).mean(axis=1)
    per_cell["ratio_median"] = np.median(r, axis=1)
    per_cell["ratio_q05"], per_cell["ratio_q95"] = np.quantile(r, 0.05, axis=1), np.quantile(r, 0.95, axis=1)
    return per_cell, (r <= 1.10).sum(axis=0), r.max(axis=0)


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--resamples", type=int, default=20)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rho", type=float, default=0.10)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", default="benchmarks/results/research/robustness")
    ap.add_argument("--only", default="", help="comma-separated data set names")
    ap.add_argument("--shifts", default="none,half", help="comma-separated: none, half (pool shift), rate (rate shift)")
    ap.add_argument("--first", type=int, default=0, help="first resample index (to extend an earlier run)")
    ap.add_argument("--merge", default="", help="an earlier run's resamples.csv.gz to pool with this one")
    ap.add_argument("--judge", action="store_true", help="judge the resamples.csv.gz already in --out (no fitting)")
    ap.add_argument("--resample-range", default="", help="with --judge: A:B keeps resamples A..B-1")
    ap.add_argument("--bootstrap", type=int, default=1000, help="bootstrap draws for the criteria's noise (0: none)")
    ap.add_argument("--rate-odds", type=float, default=RATE_SHIFT_ODDS,
                    help="shift=rate: factor on a gold positive's odds of entering the current round (default 3; "
                         "below 1 moves the rate away from one half)")
    ap.add_argument("--groups", action="store_true",
                    help="also leave one real round out (split='groups', rows tagged shift='groups'): triviaqa's "
                         "answering models (n = 400), mre_treat's blocks of batches; --resamples per data set")
    ap.add_argument("--shrink", default="none", choices=("none", "eb"),
                    help="Stage A's prior for every method that uses the calibration (calibrate(shrink=...))")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    frames = []
    t0 = time.perf_counter()
    for name, suffix in BINARY:
        if a.judge or (a.only and name not in a.only.split(",")):
            continue
        t = time.perf_counter()
        data = load_folder(Path(a.data) / name, binary_suffix=suffix)
        frames.append(run_benchmark(data, resamples=a.resamples, n=a.n, rhos=(a.rho,), workers=a.workers,
                                    first_resample=a.first, shifts=a.shifts.split(","), rate_odds=a.rate_odds,
                                    shrink=a.shrink))
        print(f"{data.name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    if a.groups and not a.judge:
        for data, n in round_sets(Path(a.data), a.n, a.only.split(",") if a.only else ()):
            t = time.perf_counter()
            g = run_benchmark(data, resamples=a.resamples, n=n, rhos=(a.rho,), workers=a.workers,
                              first_resample=a.first, shifts=["none"], split="groups", shrink=a.shrink)
            frames.append(g.assign(shift="groups"))  # resample r: group r mod G; split stays "groups"
            print(f"{data.name} rounds: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    if a.judge:
        df = pd.read_csv(out / "resamples.csv.gz")
        if a.resample_range:
            lo, hi = (int(x) for x in a.resample_range.split(":"))
            df = df[(df["resample"] >= lo) & (df["resample"] < hi)]
        out = out / f"judged_{lo}_{hi}" if a.resample_range else out
        out.mkdir(exist_ok=True)
    else:
        df = pd.concat(frames, ignore_index=True)
    if a.merge and not a.judge:
        old = pd.read_csv(a.merge)
        if a.only:
            old = old[old["dataset"].isin(set(df["dataset"]))]
        clash = old.merge(df[["dataset", "shift", "resample"]].drop_duplicates(), on=["dataset", "shift", "resample"])
        if len(clash):
            sys.exit(f"--merge {a.merge}: resamples {sorted(clash['resample'].unique())} are in both runs")
        df = pd.concat([old, df], ignore_index=True)
    if not a.judge:
        df.to_csv(out / "resamples.csv.gz", index=False)
    summ = summarize_benchmark(df)
    summ.to_csv(out / "summary.csv", index=False)
    tab = auto_table(summ, df)
    tab.to_csv(out / "auto.csv", index=False)
    pd.set_option("display.width", 200)
    print(tab.drop(columns="picked").round(3).to_string(index=False))
    within = float((tab["ratio"] <= 1.10).mean())
    print(f"auto within 10 % of the best method: {within:.0%} of {len(tab)} cells; worst ratio {tab['ratio'].max():.2f}; "
          f"total {time.perf_counter() - t0:.0f} s")
    wide = summ.pivot_table(index=["dataset", "shift"], columns="method", values="rmse")
    best = wide[[m for m in COMPARED if m in wide.columns]].min(axis=1)
    geo = {m: float(np.exp(np.log(wide[m] / best).mean())) for m in ("auto", *COMPARED) if m in wide.columns}
    print("geometric mean over all cells of RMSE / best RMSE: " + ", ".join(f"{m} {v:.3f}" for m, v in geo.items()))
    st = shift_table(summ)
    st.to_csv(out / "shift_table.csv", index=False)
    print_shift_table(st)
    if a.bootstrap > 0:
        per_cell, count, worst = bootstrap_criteria(df, a.bootstrap)
        per_cell.to_csv(out / "auto_bootstrap.csv", index=False)
        q = [0.05, 0.5, 0.95]
        print(f"bootstrap over each cell's {df['resample'].nunique()} resamples ({a.bootstrap} draws): cells within "
              f"10 %: 5/50/95 % quantiles {np.quantile(count, q).tolist()} of {len(per_cell)}; "
              f"P(at least 80 % of cells) = {np.mean(count >= 0.8 * len(per_cell)):.3f}; worst ratio quantiles "
              f"{np.round(np.quantile(worst, q), 2).tolist()}; P(worst <= 1.5) = {np.mean(worst <= 1.5):.3f}")


if __name__ == "__main__":
    main()
