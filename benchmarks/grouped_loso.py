"""Issue #39: the out-of-round rule's constants, replayed on the grouped protocol's stored tables and chosen by
leave-one-set-out.

    .venv/bin/python -m benchmarks.grouped_loso benchmarks/results/benchmark/grouped/resamples.csv.gz \
        --out benchmarks/results/benchmark/grouped

Every ``auto`` row that ``benchmarks/grouped.py`` stored carries its candidate table (estimates, standard
errors, the mock-round errors and each candidate's errors on the history's past rounds), and the rule is a pure
function of it (``benchmarks.auto_loso.replay``). The variants replayed:

* ``rounds_min``: None (the random mock rounds decide, as before issue #39), 2, 3 (the default), 4, 5 past
  rounds needed before they decide;
* ``round_candidates``: the four history-based candidates (``default``), with majority vote (``with_mv``, the
  default), with majority vote and current-only Dawid-Skene (``with_mv_ds``).

Judged per set (a cell) against the fixed methods (every method but ``auto``, majority vote and Dawid-Skene
included): coverage of the 95 % interval, mean width, RMSE, RMSE / the best fixed method's, width / HERO-1's.
The choice, by leave-one-set-out over the data sets (the groupings of one folder are left out together, since
they share items): among the variants whose training cells cover at least :data:`COVER_MEAN` on average and
:data:`COVER_MIN` in every cell, the smallest geometric mean of RMSE / best fixed RMSE; none qualifying, the
highest mean coverage. The in-sample choice uses every set.

Writes ``loso_variants.csv`` (every variant, per set), ``loso_choices.csv`` (the variant chosen without each
folder), ``loso_summary.csv`` (in-sample, leave-one-set-out and the default, each: mean and lowest coverage,
geometric-mean and worst RMSE ratio, mean width against HERO-1's; over all sets and over the sets in scope of the
coverage targets, :data:`BY_CONSTRUCTION` left out) and ``loso_fixed.csv`` (each fixed method's and the oracle's
geometric-mean and worst RMSE ratio to the best fixed method, and one fixed method chosen by leave-one-set-out),
and prints them.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from heroeval.checks.model_checks import CANDIDATES
from heroeval.choice.auto import DEFAULT_RULE, AutoRule

from benchmarks.auto_loso import parse, replay

COVER_MEAN = 0.93
COVER_MIN = 0.80
BY_CONSTRUCTION = ("mre_treat:batch",)
"""Grouped splits whose gold is 0 by the data's construction in some rounds (mre_treat's batches 23-46, where the
expert judged only distant-supervision positives): out of scope of the silver-only coverage targets (issue #39),
so left out of the coverage constraint of the choice and reported separately; they still count for accuracy."""
ROUNDS_MIN = (None, 2, 3, 4, 5)
ROUND_SETS = {"default": CANDIDATES, "with_mv": (*CANDIDATES, "majority_vote"),
              "with_mv_ds": (*CANDIDATES, "majority_vote", "dawid_skene")}


def variants() -> list[tuple[str, AutoRule]]:
    out = [("mock", replace(DEFAULT_RULE, rounds_min=None))]
    for k in ROUNDS_MIN[1:]:
        for name, cands in ROUND_SETS.items():
            out.append((f"rounds{k}|{name}", replace(DEFAULT_RULE, rounds_min=k, round_candidates=cands)))
            out.append((f"gate{k}|{name}", replace(DEFAULT_RULE, rounds_min=k, round_candidates=cands)))
    return out


def replay_variant(name: str, auto_row: pd.Series, rule: AutoRule, table: list[dict[str, Any]]
                   ) -> tuple[float, float, float, str]:
    """``rounds*``: the rule as ``recommend`` applies it. ``gate*``: the mock rounds' answer (``rounds_min=None``)
    unless it is unreliable (past rounds beyond their noise, or too little gold at this rate), and then the
    out-of-round choice."""
    rows = [dict(x) for x in table] if table else None
    if name.startswith("gate"):
        old = replay(auto_row, replace(rule, rounds_min=None), [dict(x) for x in table] if table else None)
        if not old[3].endswith("(unreliable)"):
            return old
    return replay(auto_row, rule, rows)


def cells(df: pd.DataFrame, grid: list[tuple[str, AutoRule]]) -> pd.DataFrame:
    """Per data set and variant: coverage, width, RMSE and the ratios (module docstring)."""
    fixed = df[df["method"] != "auto"]
    fixed_rmse = fixed.assign(e2=(fixed["estimate"] - fixed["truth"]) ** 2).groupby(["dataset", "method"])["e2"].mean()
    best = np.sqrt(fixed_rmse.groupby(level="dataset").min())
    h1 = fixed[fixed["method"] == "hero1"].groupby("dataset").apply(
        lambda g: float((g["ci_high"] - g["ci_low"]).mean()), include_groups=False)
    auto = df[df["method"] == "auto"]
    rows = []
    for ds, g in auto.groupby("dataset", sort=False):
        tables = [(r, parse(r)) for _, r in g.iterrows()]
        for name, rule in grid:
            got = [replay_variant(name, r, rule, t) for r, t in tables]
            est = np.array([x[0] for x in got])
            lo, hi = np.array([x[1] for x in got]), np.array([x[2] for x in got])
            truth = g["truth"].to_numpy()
            rmse = float(np.sqrt(np.mean((est - truth) ** 2)))
            rows.append({"dataset": ds, "folder": str(ds).split(":")[0], "variant": name, "resamples": len(got),
                         "coverage": float(np.mean((lo <= truth) & (truth <= hi))), "width": float(np.mean(hi - lo)),
                         "rmse": rmse, "best_fixed_rmse": float(best[ds]), "ratio": rmse / float(best[ds]),
                         "hero1_width": float(h1[ds]), "width_vs_hero1": float(np.mean(hi - lo)) / float(h1[ds]),
                         "width_vs_best_rmse": float(np.mean(hi - lo)) / float(best[ds]),
                         "picks": ", ".join(f"{k} {v}" for k, v in pd.Series([x[3] for x in got]).value_counts()
                                            .items())})
    return pd.DataFrame(rows)


def figures(c: pd.DataFrame) -> dict[str, float]:
    return {"cells": len(c), "coverage_mean": c["coverage"].mean(), "coverage_min": c["coverage"].min(),
            "geo_ratio": math.exp(np.log(c["ratio"]).mean()), "worst_ratio": c["ratio"].max(),
            "width_mean": c["width"].mean(), "hero1_width_mean": c["hero1_width"].mean(),
            "width_vs_hero1": c["width"].mean() / c["hero1_width"].mean(),
            "width_vs_best_rmse_geo": math.exp(np.log(c["width_vs_best_rmse"]).mean())}


def pick(c: pd.DataFrame) -> str:
    geo = c.groupby("variant")["ratio"].agg(lambda r: math.exp(np.log(r).mean()))
    scope = c[~c["dataset"].isin(BY_CONSTRUCTION)]
    per = scope.groupby("variant").agg(cov=("coverage", "mean"), low=("coverage", "min"))
    ok = per[(per["cov"] >= COVER_MEAN) & (per["low"] >= COVER_MIN)]
    return str(geo[ok.index].idxmin()) if len(ok) else str(per["cov"].idxmax())


def fixed_cells(df: pd.DataFrame) -> pd.DataFrame:
    """Per data set and fixed method: RMSE and its ratio to the set's best fixed method; and the oracle (per resample
    the fixed method nearest the truth), the figure no rule choosing among the fixed methods can beat."""
    fixed = df[df["method"] != "auto"].assign(e2=lambda d: (d["estimate"] - d["truth"]) ** 2)
    rmse = np.sqrt(fixed.groupby(["dataset", "method"])["e2"].mean()).rename("rmse").reset_index()
    rmse["best_fixed_rmse"] = rmse.groupby("dataset")["rmse"].transform("min")
    oracle = np.sqrt(fixed.groupby(["dataset", "resample"])["e2"].min().groupby(level="dataset").mean())
    orc = oracle.rename("rmse").reset_index().assign(method="oracle")
    orc["best_fixed_rmse"] = orc["dataset"].map(rmse.groupby("dataset")["best_fixed_rmse"].first())
    out = pd.concat([rmse, orc], ignore_index=True)
    out["ratio"] = out["rmse"] / out["best_fixed_rmse"]
    out["folder"] = out["dataset"].str.split(":").str[0]
    return out


def fixed_loso(f: pd.DataFrame) -> pd.DataFrame:
    """The one fixed method with the smallest geometric-mean ratio on the other folders, scored on the held-out one:
    what choosing a single method by leave-one-set-out reaches."""
    f = f[f["method"] != "oracle"]
    rows = []
    for folder in sorted(f["folder"].unique()):
        train = f[f["folder"] != folder].groupby("method")["ratio"].agg(lambda r: math.exp(np.log(r).mean()))
        m = str(train.idxmin())
        rows.append(f[(f["folder"] == folder) & (f["method"] == m)].assign(chosen=m))
    return pd.concat(rows, ignore_index=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("resamples")
    ap.add_argument("--out", default="benchmarks/results/benchmark/grouped")
    a = ap.parse_args()
    df = pd.read_csv(a.resamples)
    out = Path(a.out)
    c = cells(df, variants())
    c.to_csv(out / "loso_variants.csv", index=False)
    choices, held = [], []
    for folder in sorted(c["folder"].unique()):
        v = pick(c[c["folder"] != folder])
        choices.append({"held_out": folder, "variant": v})
        held.append(c[(c["folder"] == folder) & (c["variant"] == v)])
    pd.DataFrame(choices).to_csv(out / "loso_choices.csv", index=False)
    ins = pick(c)
    default = f"rounds{DEFAULT_RULE.rounds_min}|" + next(k for k, v in ROUND_SETS.items()
                                                           if tuple(v) == DEFAULT_RULE.round_candidates)
    views = [(f"in-sample ({ins})", c[c["variant"] == ins]), ("leave-one-set-out", pd.concat(held)),
             (f"default ({default})", c[c["variant"] == default]), ("mock rule (rounds_min=None)",
                                                                     c[c["variant"] == "mock"])]
    summ = pd.DataFrame([{"view": v, "scope": sc, **figures(t if sc == "all" else t[~t["dataset"].isin(BY_CONSTRUCTION)])}
                         for v, t in views for sc in ("all", "in scope")])
    summ.to_csv(out / "loso_summary.csv", index=False)
    f = fixed_cells(df)
    fl = fixed_loso(f)
    fixed_summ = pd.concat([f.groupby("method")["ratio"].agg(geo_ratio=lambda r: math.exp(np.log(r).mean()),
                                                              worst_ratio="max").reset_index(),
                            pd.DataFrame([{"method": "one fixed method chosen by leave-one-set-out",
                                           "geo_ratio": math.exp(np.log(fl["ratio"]).mean()),
                                           "worst_ratio": fl["ratio"].max()}])], ignore_index=True)
    fixed_summ.to_csv(out / "loso_fixed.csv", index=False)
    pd.set_option("display.width", 220)
    pd.set_option("display.max_columns", 30)
    print(pd.DataFrame(choices).to_string(index=False))
    print(summ.round(3).to_string(index=False))
    print(fixed_summ.round(3).to_string(index=False))
    print(c[c["variant"] == default][["dataset", "coverage", "width", "rmse", "best_fixed_rmse", "ratio",
                                      "width_vs_hero1", "picks"]].round(3).to_string(index=False))


if __name__ == "__main__":
    main()
