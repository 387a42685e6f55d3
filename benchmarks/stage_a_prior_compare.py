"""Stage A with the empirical-Bayes prior (``calibrate(shrink="eb")``) against plain Stage A, on two benchmark runs.

    .venv/bin/python -m benchmarks.stage_a_prior_compare benchmarks/results/research/robustness/shift/resamples.csv.gz \
        benchmarks/results/research/robustness/shift_eb/resamples.csv.gz --out benchmarks/results/research/robustness/shift_eb

Both runs are ``benchmarks/robustness.py`` on the same splits (same seeds), one with ``--shrink eb``. The
recommended estimate of each is replayed with today's ``DEFAULT_RULE`` on its stored candidate tables (as
``auto_replay.py`` does), so both are judged by the same rule. Every RMSE ratio is to the cell's best fixed
method over *both* runs (a method run on either Stage A counts), so the two ``auto`` columns share one
denominator; the "plain best" columns divide by the best of the plain run's methods only, the comparator of the
tables in docs/research/robustness.md section 7.

Leave-one-set-out: for each held-out set, the EB prior is chosen if on the other sets' random-split cells (none,
half, rate) ``auto``'s geometric-mean ratio is lower with it and its coverage meets the issue's bar there (at
least 0.95 on average in each shift type, as the rule's own choice asks, and 0.80 in every cell); else plain
Stage A. The held-out set's cells then take the chosen run's figures.

Writes ``prior_cells.csv`` (per cell and Stage A: auto's RMSE, ratios, coverage, width; HERO-1's RMSE and
coverage) and ``prior_summary.csv`` (per shift type: in-sample and leave-one-set-out).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from heroeval.choice.auto import DEFAULT_RULE

from benchmarks.auto_loso import cell_table
from benchmarks.robustness import COMPARED

RANDOM = ("none", "half", "rate")
COVER_MEAN, COVER_CELL = 0.95, 0.80


def _fixed(df: pd.DataFrame) -> pd.DataFrame:
    d = df[df["method"].isin([*COMPARED, "hero1"])].copy()
    d["sq"] = (d["estimate"] - d["truth"]) ** 2
    d["cover"] = (d["ci_low"] <= d["truth"]) & (d["truth"] <= d["ci_high"])
    return d.groupby(["dataset", "shift", "method"]).agg(rmse=("sq", lambda s: float(np.sqrt(s.mean()))),
                                                         coverage=("cover", "mean")).reset_index()


def cells(plain: pd.DataFrame, eb: pd.DataFrame) -> pd.DataFrame:
    """One row per (data set, shift, stage_a) with auto's figures (replayed with ``DEFAULT_RULE``) and HERO-1's."""
    fp, fe = _fixed(plain), _fixed(eb)
    best_plain = fp[fp["method"].isin(COMPARED)].groupby(["dataset", "shift"])["rmse"].min().rename("best_plain")
    best_all = pd.concat([fp[fp["method"].isin(COMPARED)], fe[fe["method"].isin(COMPARED)]]).groupby(
        ["dataset", "shift"])["rmse"].min().rename("best_all")
    out = []
    for name, df, f in (("plain", plain, fp), ("eb", eb, fe)):
        c = cell_table(df, [("DEFAULT_RULE", DEFAULT_RULE)]).drop(columns=["best_rmse", "ratio", "rule"])
        h1 = f[f["method"] == "hero1"].set_index(["dataset", "shift"])[["rmse", "coverage"]].add_prefix("hero1_")
        c = c.set_index(["dataset", "shift"]).join(best_plain).join(best_all).join(h1).reset_index()
        c["ratio"] = c["rmse"] / c["best_all"]
        c["ratio_plain_best"] = c["rmse"] / c["best_plain"]
        c["stage_a"] = name
        out.append(c)
    return pd.concat(out, ignore_index=True)


def _gm(x: pd.Series) -> float:
    return float(np.exp(np.log(x).mean()))


def covers(c: pd.DataFrame) -> bool:
    r = c[c["shift"].isin(RANDOM)]
    return bool((r.groupby("shift")["coverage"].mean() >= COVER_MEAN).all() and (r["coverage"] >= COVER_CELL).all())


def loso(c: pd.DataFrame) -> dict[str, str]:
    """Per held-out set: "eb" or "plain" (see the module docstring)."""
    out = {}
    for s in sorted(c["dataset"].unique()):
        rest = c[(c["dataset"] != s) & c["shift"].isin(RANDOM)]
        gp = _gm(rest[rest["stage_a"] == "plain"]["ratio"])
        ge = _gm(rest[rest["stage_a"] == "eb"]["ratio"])
        out[s] = "eb" if ge < gp and covers(rest[rest["stage_a"] == "eb"]) else "plain"
    return out


def summary(c: pd.DataFrame, choice: dict[str, str]) -> pd.DataFrame:
    held = c[c["stage_a"] == c["dataset"].map(choice)].assign(stage_a="leave-one-set-out")
    rows = []
    for name, g in pd.concat([c, held]).groupby("stage_a", sort=False):
        for sh, x in g.groupby("shift", sort=False):
            rows.append({"stage_a": name, "shift": sh, "cells": len(x), "coverage_mean": x["coverage"].mean(),
                         "coverage_min": x["coverage"].min(),
                         "lowest_cell": x.loc[x["coverage"].idxmin(), "dataset"],
                         "width_mean": x["width"].mean(), "hero1_width_mean": x["hero1_width"].mean(),
                         "geo_ratio": _gm(x["ratio"]), "worst_ratio": x["ratio"].max(),
                         "worst_cell": x.loc[x["ratio"].idxmax(), "dataset"],
                         "geo_ratio_plain_best": _gm(x["ratio_plain_best"]),
                         "worst_ratio_plain_best": x["ratio_plain_best"].max(),
                         "hero1_rmse_geo": _gm(x["hero1_rmse"]), "hero1_coverage_mean": x["hero1_coverage"].mean()})
    return pd.DataFrame(rows)


def oracle(plain: pd.DataFrame, eb: pd.DataFrame) -> pd.DataFrame:
    """Per shift: an oracle that picks, in each cell, the best of a candidate set, over the best fixed method of
    both runs; the sets are auto's four, the four with HERO-1 and HERO joint on the EB fit added, and the four
    all on the EB fit. What a choice rule could gain from the EB prior as extra candidates."""
    e = eb[eb["method"].isin(["hero1", "hero_joint", "gold_proportion", "hero2"])].assign(
        method=lambda d: d["method"] + "_eb")
    d = pd.concat([plain, e])
    d = d[d["method"] != "auto"]
    r = (d.assign(sq=(d["estimate"] - d["truth"]) ** 2).groupby(["dataset", "shift", "method"])["sq"].mean()
         ** 0.5).unstack()
    best = r[[*COMPARED, "hero1_eb", "hero_joint_eb", "gold_proportion_eb", "hero2_eb"]].min(axis=1)
    four = ["gold_proportion", "rogan_gladen", "hero1", "hero_joint"]
    sets = {"auto's four": four, "four + HERO-1 and HERO joint on EB": [*four, "hero1_eb", "hero_joint_eb"],
            "the four on EB": ["gold_proportion_eb", "rogan_gladen", "hero1_eb", "hero_joint_eb"]}
    rows = []
    for name, cols in sets.items():
        o = r[cols].min(axis=1) / best
        for sh, x in o.groupby(level="shift"):
            rows.append({"candidates": name, "shift": sh, "oracle_geo_ratio": _gm(x), "oracle_worst": x.max()})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("plain", help="robustness.py resamples.csv.gz with plain Stage A")
    ap.add_argument("eb", help="the same with --shrink eb")
    ap.add_argument("--out", default="", help="folder for prior_cells.csv and prior_summary.csv")
    a = ap.parse_args()
    plain, eb = pd.read_csv(a.plain), pd.read_csv(a.eb)
    key = ["dataset", "shift", "resample"]
    tp = plain[plain["method"] == "hero1"].set_index(key)["truth"]
    te = eb[eb["method"] == "hero1"].set_index(key)["truth"]
    common = tp.index.intersection(te.index)
    if not np.allclose(tp.loc[common], te.loc[common]):
        raise SystemExit("the two runs are not on the same splits (their truths differ)")
    keep = pd.MultiIndex.from_frame(plain[key]).isin(common)
    plain = plain[keep]
    eb = eb[pd.MultiIndex.from_frame(eb[key]).isin(common)]
    c = cells(plain, eb)
    choice = loso(c)
    s = summary(c, choice)
    pd.set_option("display.width", 250)
    wide = c.pivot_table(index=["shift", "dataset"], columns="stage_a",
                         values=["coverage", "width", "ratio", "hero1_rmse", "hero1_coverage"])
    print(wide.round(3).to_string())
    print()
    print(s.round(3).to_string(index=False))
    orc = oracle(plain, eb)
    print()
    print(orc.round(3).to_string(index=False))
    print("\nleave-one-set-out choice: " + ", ".join(f"{k} {v}" for k, v in choice.items()))
    print(f"in-sample (all sets): {'eb' if _gm(c[(c.stage_a == 'eb') & c['shift'].isin(RANDOM)]['ratio']) < _gm(c[(c.stage_a == 'plain') & c['shift'].isin(RANDOM)]['ratio']) and covers(c[c.stage_a == 'eb']) else 'plain'}")
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        c.to_csv(out / "prior_cells.csv", index=False, float_format="%.6g")
        s.to_csv(out / "prior_summary.csv", index=False, float_format="%.6g")
        orc.to_csv(out / "prior_oracle.csv", index=False, float_format="%.6g")
        pd.Series(choice, name="stage_a").rename_axis("held_out").to_csv(out / "prior_loso_choices.csv")
    if not math.isfinite(float(s["geo_ratio"].iloc[0])):
        raise SystemExit("non-finite ratios: a cell without a fixed method's RMSE")


if __name__ == "__main__":
    main()
