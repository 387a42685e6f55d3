"""Issue #5's real-data table: every method and ``auto`` on every binary set, rho = 0.10, with and without pool shift.

    .venv/bin/python benchmarks/robustness.py --resamples 20 --out docs/robustness

Writes ``resamples.csv.gz`` (one row per resample and method; ``picked`` says
what ``auto`` chose), ``summary.csv`` (|bias|, SD, RMSE, coverage per data
set, shift and method) and ``auto.csv`` (per data set and shift: the best
method's RMSE, ``auto``'s, their ratio, and what ``auto`` picked), and prints
the two criteria of the issue: the share of cells where ``auto`` is within
10 % of the best method, and the worst ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from heroeval.benchmark import load_folder, run_benchmark, summarize_benchmark

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_data import BINARY

#: methods ``auto`` is compared with (every estimate a user could have picked instead)
COMPARED = ("majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1", "hero2", "hero_joint")


def auto_table(summ: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
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
            "auto_coverage": g.loc["auto", "coverage"],
            "picked": ", ".join(f"{k} {v}" for k, v in picks.value_counts().items()),
        })
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--resamples", type=int, default=20)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rho", type=float, default=0.10)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", default="docs/robustness")
    ap.add_argument("--only", default="", help="comma-separated data set names")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    frames = []
    t0 = time.perf_counter()
    for name, suffix in BINARY:
        if a.only and name not in a.only.split(","):
            continue
        t = time.perf_counter()
        data = load_folder(Path(a.data) / name, binary_suffix=suffix)
        frames.append(run_benchmark(data, resamples=a.resamples, n=a.n, rhos=(a.rho,), workers=a.workers))
        print(f"{data.name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    df = pd.concat(frames, ignore_index=True)
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


if __name__ == "__main__":
    main()
