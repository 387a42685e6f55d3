"""Choose the per-stratum safeguards of the stratified design by leave-one-set-out (issue 41).

    .venv/bin/python -m benchmarks.stratum_loso --variant own=benchmarks/results/current_gold/per_stratum \
        --variant shared=benchmarks/results/current_gold/shared_floor --out benchmarks/results/current_gold/stratum_loso

Each variant is a run of ``benchmarks/current_gold.py --designs stratified`` and
``--grouped --designs stratified,stratified_group`` with one setting of
``heroeval.estimators.ppi.STRATUM_FLOOR`` / ``STRATUM_PRIOR`` (its folder holds
``resamples.csv.gz`` and ``grouped_resamples.csv.gz``). The stratified rows
cannot be replayed from the stored figures (they keep the pooled variance, not
each stratum's), so every variant is a full run on the same splits and
resamples. The uniform design's rows (``--uniform``, the rerun of 2026-12-07 on
the same splits; one stratum is the same rule under every variant) give the
width against uniform.

The rule is the uniform design's (``benchmarks/current_gold_loso.py``), fixed
before these runs: among the variants whose recommended interval covers at
least :data:`SELECT_MEAN` on average in every protocol (none, half, rate; the
grouped protocol under each stratified design) and at least 25 of 30 resamples
in every training cell, the narrowest by the geometric mean over cells of the
width against the gold alone (Wilson, finite-population corrected) of the same
design; when none passes, the one with the highest lowest protocol mean
(honest first). A held-out set is held out with its grouped splits
(``mre_treat:batch`` goes with ``mre_treat``). Prints and writes
``cells.csv`` (every variant's cells), ``choice.csv`` and ``summary.csv``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.current_gold_loso import SELECT_CELL, SELECT_MEAN, geo

DESIGNS = ("stratified", "stratified_group")


def _rows(folder: Path, designs: tuple[str, ...]) -> pd.DataFrame:
    parts = [pd.read_csv(folder / f, low_memory=False) for f in ("resamples.csv.gz", "grouped_resamples.csv.gz")
             if (folder / f).exists()]
    if not parts:
        raise SystemExit(f"{folder}: no resamples.csv.gz or grouped_resamples.csv.gz")
    d = pd.concat(parts, ignore_index=True)
    d = d[d["design"].isin(designs) & d["method"].isin(["auto", "gold_only"])].copy()
    d["width"] = d["ci_high"] - d["ci_low"]
    d["cover"] = (d["ci_low"] <= d["truth"] + 1e-12) & (d["truth"] - 1e-12 <= d["ci_high"])
    return d


def cells(rows: pd.DataFrame, uniform: pd.DataFrame) -> pd.DataFrame:
    """Per (data set, shift, k, design): the recommended interval's coverage and mean width, its width against the
    gold alone of the same design and against the uniform design's recommended interval (same resamples)."""
    keys = ["dataset", "shift", "k", "design"]
    auto = rows[rows["method"] == "auto"]
    c = auto.groupby(keys).agg(coverage=("cover", "mean"), width=("width", "mean"),
                               resamples=("cover", "size")).reset_index()
    go = rows[rows["method"] == "gold_only"].groupby(keys)["width"].mean()
    c["ratio"] = c["width"].to_numpy() / go.reindex(pd.MultiIndex.from_frame(c[keys])).to_numpy()
    u = uniform.groupby(["dataset", "shift", "k"])["width"].mean()
    c["vs_uniform"] = c["width"].to_numpy() / u.reindex(pd.MultiIndex.from_frame(c[keys[:3]])).to_numpy()
    c["protocol"] = np.where(c["shift"].isin(["none", "half", "rate"]), c["shift"], c["shift"] + ":" + c["design"])
    c["set"] = c["dataset"].str.split(":").str[0]
    return c


def score(c: pd.DataFrame) -> dict[str, float]:
    by = c.groupby("protocol")["coverage"].mean()
    out = {"min_protocol_mean": float(by.min()), "min_cell": float(c["coverage"].min()),
           **{f"cov_{p}": float(v) for p, v in by.items()}, "ratio_gold_only": geo(c["ratio"]),
           "vs_uniform": geo(c["vs_uniform"])}
    for k in sorted(c["k"].unique()):
        ck = c[c["k"] == k]
        out[f"cov_k{k}"] = float(ck["coverage"].mean())
        out[f"min_k{k}"] = float(ck["coverage"].min())
        out[f"vs_uniform_k{k}"] = geo(ck[ck["protocol"].isin(["none", "half", "rate"])]["vs_uniform"])
        out[f"gold_only_k{k}"] = geo(ck["ratio"])
    return out


def ok(s: dict[str, float]) -> bool:
    return s["min_protocol_mean"] >= SELECT_MEAN and s["min_cell"] >= SELECT_CELL


def choose(table: dict[str, pd.DataFrame], train: list[str]) -> str:
    scores = {v: score(c[c["set"].isin(train)]) for v, c in table.items()}
    passing = [v for v, s in scores.items() if ok(s)]
    if passing:
        return min(passing, key=lambda v: scores[v]["ratio_gold_only"])
    return max(scores, key=lambda v: scores[v]["min_protocol_mean"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", required=True, help="NAME=FOLDER (repeat)")
    ap.add_argument("--uniform", default="benchmarks/results/current_gold/uniform_rerun",
                    help="folder of the run whose uniform rows give the width against uniform")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    uni = _rows(Path(a.uniform), ("uniform",))
    uni = uni[uni["method"] == "auto"]
    table: dict[str, pd.DataFrame] = {}
    for spec in a.variant:
        name, _, folder = spec.partition("=")
        if not folder:
            raise SystemExit(f"--variant {spec!r}: expected NAME=FOLDER")
        table[name] = cells(_rows(Path(folder), DESIGNS), uni)
    sizes = {v: len(c) for v, c in table.items()}
    if len(set(sizes.values())) != 1:
        raise SystemExit(f"the variants have different cells: {sizes} (run them on the same splits)")
    sets = sorted(next(iter(table.values()))["set"].unique())
    pd.set_option("display.width", 250)
    insample = pd.DataFrame([{"variant": v, **score(c)} for v, c in table.items()])
    print("in-sample, every variant:\n" + insample.round(3).T.to_string(header=False))
    choices, held = [], []
    for s in sets:
        v = choose(table, [x for x in sets if x != s])
        choices.append({"held_out": s, "choice": v})
        held.append(table[v][table[v]["set"] == s])
    in_choice = choose(table, sets)
    choice_df = pd.DataFrame(choices)
    print("\nchoice per held-out set:\n" + choice_df.to_string(index=False))
    loso = pd.concat(held, ignore_index=True)
    summ = pd.DataFrame([{"rule": f"in-sample choice: {in_choice}", **score(table[in_choice])},
                         {"rule": "leave-one-set-out", **score(loso)}])
    print("\n" + summ.round(3).T.to_string(header=False))
    per_set = loso.groupby("set").agg(coverage=("coverage", "mean"), lowest=("coverage", "min"),
                                      vs_uniform=("vs_uniform", geo)).reset_index()
    print("\nheld out, per set:\n" + per_set.round(3).to_string(index=False))
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        pd.concat([c.assign(variant=v) for v, c in table.items()]).to_csv(out / "cells.csv", index=False)
        choice_df.to_csv(out / "choice.csv", index=False)
        summ.to_csv(out / "summary.csv", index=False)
    if not math.isfinite(summ["min_cell"].iloc[1]):
        raise SystemExit("no held-out cell was scored")


if __name__ == "__main__":
    main()
