"""Rules for the K-class recommended difference, replayed on one run of benchmarks/multiclass_difference.py,
in-sample and leave-one-set-out.

    PYTHONPATH=. .venv/bin/python -m benchmarks.multiclass_difference_rules --run benchmarks/results/multiclass/difference

    # two variants of the product on the same splits, side by side:
    ... --run inverse=benchmarks/results/multiclass/difference --run first=FOLDER1,FOLDER2

Every resample's ``auto`` row keeps what the rule saw of each candidate: ``c_mse:<name>`` (its estimated MSE of the
difference summed over classes), ``c_p:<name>`` (its joint difference-bias test's p-value) and, per functional j (the
class shares, then the mean score), ``c_est<j>``, ``c_se<j>``, ``c_b<j>``, ``c_sb<j>`` (estimate, noise, mock bias
and its standard error). A rule is a pick (``mv_unless:<alpha>``: majority vote unless its difference bias is
significant at alpha, else the smallest estimated MSE; ``min_mse``) and a bias bound ``|b| + kappa s_b``; its
interval is rebuilt from the stored parts as the product builds it (bias-aware, the span of every candidate's when
either round is "unreliable"). Leave-one-set-out: for each set, the rule chosen on the other sets (honest first:
among rules whose coverage there is at least 0.90 on average over (class, cell) and the mean score's, with no cell
below 0.75, those within :data:`TIE` of the smallest geometric-mean L1 ratio; of them the narrowest per class) is
applied to it. Prints markdown.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from heroeval.inference.bias_aware import bias_aware_cv

PICKS = ["min_mse", "mv_unless:0.01", "mv_unless:0.05", "mv_unless:0.2"]
KAPPAS = [1.0, 1.645, 2.0]
SPANS = ["aware", "plain"]
TIE = 1.01
"""Rules whose geometric-mean L1 ratio is within this factor of the best are tied on accuracy (the candidates'
picks differ in a few resamples only); the narrowest of them is chosen."""
"""What an "unreliable" difference's interval spans besides the chosen candidate's bias-aware one: every
candidate's bias-aware interval (the product's), or every candidate's plain ``est +- 1.96 se``."""


def pick(row: pd.Series, rule: str, names: list[str]) -> str:
    mse = {n: row[f"c_mse:{n}"] for n in names if pd.notna(row.get(f"c_mse:{n}"))}
    best = min(mse, key=lambda n: mse[n])
    if rule == "min_mse":
        return best
    p = row.get("c_p:majority_vote")
    return "majority_vote" if pd.notna(p) and p >= float(rule.split(":")[1]) else best


def _interval(row: pd.Series, c: str, j: int, kappa: float, rng: float, plain: bool = False) -> tuple[float, float]:
    est, se, b, sb = (float(row[f"c_{x}{j}:{c}"]) for x in ("est", "se", "b", "sb"))
    bound = 0.0 if plain else abs(b) + kappa * sb
    h = se * bias_aware_cv(bound / se) if se > 0 else bound
    return max(-rng, est - h), min(rng, est + h)


def replay(df: pd.DataFrame) -> pd.DataFrame:
    auto = df[df["method"] == "auto"]
    names = sorted(c.split(":", 1)[1] for c in df.columns if c.startswith("c_mse:"))
    out = []
    for _, r in auto.iterrows():
        K = sum(1 for k in range(10) if pd.notna(r.get(f"truth{k}")))
        truths = [float(r[f"truth{k}"]) for k in range(K)] + [float(r["mean_truth"])]
        here = [n for n in names if pd.notna(r.get(f"c_mse:{n}"))]
        for p, kappa, sp in itertools.product(PICKS, KAPPAS, SPANS):
            c = pick(r, p, here)
            cover, width = [], []
            for j, t in enumerate(truths):
                rng = 1.0 if j < K else float(K - 1)
                lo, hi = _interval(r, c, j, kappa, rng)
                if r["status"] == "unreliable":
                    for o in here:
                        lo2, hi2 = _interval(r, o, j, kappa, rng, plain=sp == "plain")
                        lo, hi = min(lo, lo2), max(hi, hi2)
                cover.append(lo <= t <= hi)
                width.append(hi - lo)
            est = np.array([float(r[f"c_est{k}:{c}"]) for k in range(K)])
            out.append({"dataset": r["dataset"], "shift": r["shift"], "resample": r["resample"],
                        "rule": f"{p} kappa={kappa:g} span={sp}", "pick": c, "l1": float(np.abs(est - truths[:K]).sum()),
                        "cover": float(np.mean(cover[:K])), "cover_ms": float(cover[K]),
                        "width": float(np.mean(width[:K])), "width_ms": width[K]})
    return pd.DataFrame(out)


def gm(x: pd.Series) -> float:
    return float(np.exp(np.mean(np.log(x))))


def cells(rep: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    fixed = df[df["method"] != "auto"].groupby(["dataset", "shift", "method"])["l1"].mean().unstack()
    best = fixed.min(axis=1)
    cell = rep.groupby(["dataset", "shift", "rule"]).agg(
        l1=("l1", "mean"), cover=("cover", "mean"), cover_ms=("cover_ms", "mean"), width=("width", "mean"),
        width_ms=("width_ms", "mean")).reset_index()
    cell["ratio"] = cell["l1"] / cell.set_index(["dataset", "shift"]).index.map(best)
    return cell


def honest(g: pd.DataFrame) -> bool:
    return bool(g["cover"].mean() >= 0.90 and g["cover_ms"].mean() >= 0.90 and g["cover"].min() >= 0.75
                and g["cover_ms"].min() >= 0.75)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", action="append", default=None,
                    help="a run's folder, or LABEL=FOLDER[,FOLDER...] (repeatable: the runs of variants of the product "
                         "on the same splits, replayed side by side, their rules prefixed by LABEL)")
    a = ap.parse_args()
    cs = []
    for spec in a.run or ["benchmarks/results/multiclass/difference"]:
        label, _, folders = spec.rpartition("=")
        df = pd.concat([pd.read_csv(Path(f) / "resamples.csv.gz") for f in folders.split(",")], ignore_index=True)
        c = cells(replay(df), df)
        if label:
            c["rule"] = label + " " + c["rule"]
        cs.append(c)
    cell = pd.concat(cs, ignore_index=True)
    print("## In-sample, every rule\n")
    print("| rule | L1 ratio (geometric mean) | worst cell | coverage per class: mean (lowest cell) | mean score "
          "coverage (lowest) | width per class | mean score width |\n|---|---:|---:|---|---|---:|---:|")
    for rule, g in cell.groupby("rule", sort=False):
        print(f"| {rule} | {gm(g['ratio']):.3f} | {g['ratio'].max():.2f} | {g['cover'].mean():.3f} "
              f"({g['cover'].min():.2f}) | {g['cover_ms'].mean():.3f} ({g['cover_ms'].min():.2f}) | "
              f"{g['width'].mean():.3f} | {g['width_ms'].mean():.3f} |")
    print("\n## Leave-one-set-out\n")
    print("| held-out set | rule chosen on the others | L1 ratio there | coverage there (lowest cell) | mean score "
          "coverage (lowest) |\n|---|---|---:|---|---|")
    rows = []
    for ds in sorted(set(cell["dataset"])):
        rest = cell[cell["dataset"] != ds]
        ok = {r: g for r, g in rest.groupby("rule", sort=False) if honest(g)}
        pool = ok or dict(iter(rest.groupby("rule", sort=False)))
        best = min(gm(g["ratio"]) for g in pool.values())
        near = {k: g for k, g in pool.items() if gm(g["ratio"]) <= TIE * best}
        r = min(near, key=lambda k: near[k]["width"].mean())
        here = cell[(cell["dataset"] == ds) & (cell["rule"] == r)]
        rows.append(here)
        print(f"| {ds} | {r}{'' if ok else ' (no rule honest on the others)'} | {gm(here['ratio']):.2f} | "
              f"{here['cover'].mean():.3f} ({here['cover'].min():.2f}) | {here['cover_ms'].mean():.3f} "
              f"({here['cover_ms'].min():.2f}) |")
    lo = pd.concat(rows)
    print(f"\nleave-one-set-out: L1 ratio {gm(lo['ratio']):.3f} (worst {lo['ratio'].max():.2f}); coverage per class "
          f"{lo['cover'].mean():.3f} (lowest cell {lo['cover'].min():.2f}); mean score {lo['cover_ms'].mean():.3f} "
          f"(lowest {lo['cover_ms'].min():.2f})")


if __name__ == "__main__":
    main()
