"""Rules for the K-class recommended estimate, replayed on one run of benchmarks/multiclass_auto.py, in-sample and
leave-one-set-out.

    PYTHONPATH=. .venv/bin/python -m benchmarks.multiclass_auto_rules --run benchmarks/results/multiclass/auto

Every resample's row of ``auto`` keeps what the rule saw of each candidate (``c_mse:<name>`` its estimated MSE,
``c_p:<name>`` the p-value of its joint mock-bias test, ``c_l1:<name>`` its actual L1 error, ``c_cover:<name>`` the
share of classes its bias-aware interval covered). A rule picks a candidate per resample from the first two; its
coverage is the picked candidate's, or the span's (the ``auto`` row's) when the round was "unreliable", which does
not depend on the pick. Rules: ``min_mse`` (the product's), and ``mv_unless:<alpha>``: majority vote unless its mock
bias is significant at alpha, then the smallest estimated MSE. Leave-one-set-out: for each set, the rule with the
smallest geometric-mean L1 ratio over the other sets (among rules whose coverage there is at least 0.90) is applied
to it. Prints markdown.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

RULES = ["min_mse", "mv_unless:0.01", "mv_unless:0.05", "mv_unless:0.2"]


def pick(row: pd.Series, rule: str, names: list[str]) -> str:
    mse = {n: row[f"c_mse:{n}"] for n in names if pd.notna(row.get(f"c_mse:{n}"))}
    best = min(mse, key=lambda n: mse[n])
    if rule == "min_mse":
        return best
    alpha = float(rule.split(":")[1])
    p = row.get("c_p:majority_vote")
    return "majority_vote" if pd.notna(p) and p >= alpha else best


def replay(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (resample, rule): the pick, its L1, its coverage; and per (cell) the best fixed L1."""
    auto = df[df["method"] == "auto"]
    names = sorted(c.split(":", 1)[1] for c in df.columns if c.startswith("c_mse:"))
    K = sum(1 for c in df.columns if c.startswith("cover") and c[5:].isdigit())
    out = []
    for _, r in auto.iterrows():
        span = np.nanmean([float(r[f"cover{k}"]) for k in range(K) if pd.notna(r.get(f"cover{k}"))])
        for rule in RULES:
            c = pick(r, rule, names)
            out.append({"dataset": r["dataset"], "shift": r["shift"], "resample": r["resample"], "rule": rule,
                        "pick": c, "l1": r[f"c_l1:{c}"],
                        "cover": span if r["status"] == "unreliable" else r[f"c_cover:{c}"]})
    return pd.DataFrame(out)


def ratios(rep: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    fixed = df[df["method"] != "auto"].groupby(["dataset", "shift", "method"])["l1"].mean().unstack()
    best = fixed.min(axis=1)
    cell = rep.groupby(["dataset", "shift", "rule"]).agg(l1=("l1", "mean"), cover=("cover", "mean")).reset_index()
    cell["ratio"] = cell["l1"] / cell.set_index(["dataset", "shift"]).index.map(best)
    return cell


def gm(x: pd.Series) -> float:
    return float(np.exp(np.mean(np.log(x))))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="benchmarks/results/multiclass/auto")
    a = ap.parse_args()
    df = pd.read_csv(Path(a.run) / "resamples.csv.gz")
    rep = replay(df)
    cell = ratios(rep, df)
    fixed = df[df["method"] != "auto"].groupby(["dataset", "shift", "method"])["l1"].mean().unstack()
    fixed_ratio = fixed.div(fixed.min(axis=1), axis=0)
    print("## In-sample: L1 over the best fixed method's per cell (geometric mean), coverage per class (mean)\n")
    print("| rule | shift | L1 ratio | worst cell | coverage | lowest cell |\n|---|---|---:|---:|---:|---:|")
    for (rule, sh), g in cell.groupby(["rule", "shift"]):
        print(f"| {rule} | {sh} | {gm(g['ratio']):.3f} | {g['ratio'].max():.2f} | {g['cover'].mean():.3f} | "
              f"{g['cover'].min():.2f} |")
    print("\n## Each fixed method's L1 ratio (geometric mean over cells)\n")
    print("| method | " + " | ".join(sorted(set(cell["shift"]))) + " |\n|---|" + "---:|" * cell["shift"].nunique())
    for m in fixed_ratio.columns:
        vals = [gm(fixed_ratio[m].xs(sh, level="shift")) for sh in sorted(set(cell["shift"]))]
        print(f"| {m} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")
    print("\n## Leave-one-set-out\n")
    print("| held-out set | rule chosen on the others | L1 ratio there (per shift) | coverage there |\n|---|---|---|---:|")
    lo_rows = []
    for ds in sorted(set(cell["dataset"])):
        rest = cell[cell["dataset"] != ds]
        score = {r: gm(g["ratio"]) for r, g in rest.groupby("rule") if g["cover"].mean() >= 0.90}
        r = min(score, key=lambda k: score[k])
        here = cell[(cell["dataset"] == ds) & (cell["rule"] == r)]
        lo_rows.append(here)
        print(f"| {ds} | {r} | " + ", ".join(f"{s} {v:.2f}" for s, v in zip(here["shift"], here["ratio"], strict=True))
              + f" | {here['cover'].mean():.3f} |")
    lo = pd.concat(lo_rows)
    for sh, g in lo.groupby("shift"):
        print(f"\nleave-one-set-out, shift {sh}: L1 ratio {gm(g['ratio']):.3f} (worst {g['ratio'].max():.2f}), "
              f"coverage {g['cover'].mean():.3f} (lowest cell {g['cover'].min():.2f})")


if __name__ == "__main__":
    main()
