"""The past-round check on the real rounds, replayed: the recommended interval with and without it, per round.

    .venv/bin/python -m benchmarks.past_rounds benchmarks/results/research/robustness/past_rounds/resamples.csv.gz \\
        --out benchmarks/results/research/robustness/past_rounds

Reads a ``benchmarks/robustness.py --groups`` run (its ``shift="groups"`` rows: the history keeps its real
rounds, so the model checks estimate each past round with its gold left out of Stage A) and replays
``recommend``'s rule from every stored candidate table (``auto_loso.replay``, tested to reproduce
``recommend``) with the past-round check's level ``transport_level`` at None (reported, never applied),
0.01, 0.05 (``DEFAULT_RULE``) and 0.20. Writes ``past_rounds_groups.csv`` (per data set and round: resamples,
coverage, mean width, how often the check widened) and ``past_rounds_sets.csv`` (per data set and level) and
prints both.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from heroeval.choice.auto import DEFAULT_RULE

from benchmarks.auto_loso import parse, replay

LEVELS: tuple[float | None, ...] = (None, 0.01, 0.05, 0.20)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("resamples", help="a robustness.py --groups resamples.csv.gz")
    ap.add_argument("--out", default="", help="folder for the two tables")
    a = ap.parse_args()
    df = pd.read_csv(a.resamples)
    autos = df[(df["method"] == "auto") & (df["shift"] == "groups")]
    if autos.empty:
        sys.exit(f"{a.resamples}: no groups rows (run robustness.py with --groups)")
    parsed = [(r, parse(r)) for _, r in autos.iterrows()]
    plain = [replay(r, replace(DEFAULT_RULE, transport_level=None), rows) for r, rows in parsed]
    out = []
    for lvl in LEVELS:
        rule = replace(DEFAULT_RULE, transport_level=lvl)
        rep = [replay(r, rule, rows) for r, rows in parsed]
        t = autos[["dataset", "group", "resample", "truth"]].copy()
        t["level"] = "none" if lvl is None else f"{lvl:g}"
        t["lo"], t["hi"] = [x[1] for x in rep], [x[2] for x in rep]
        t["cover"] = (t["lo"] <= t["truth"]) & (t["truth"] <= t["hi"])
        t["width"] = t["hi"] - t["lo"]
        t["widened"] = [abs((x[2] - x[1]) - (p[2] - p[1])) > 1e-12 for x, p in zip(rep, plain, strict=True)]
        out.append(t)
    rows = pd.concat(out, ignore_index=True)
    by_group = rows.groupby(["level", "dataset", "group"], sort=False).agg(
        resamples=("cover", "size"), coverage=("cover", "mean"), width=("width", "mean"),
        widened=("widened", "mean"), error=("truth", lambda s: np.nan)).drop(columns="error").reset_index()
    err = autos.assign(error=autos["estimate"] - autos["truth"]).groupby(["dataset", "group"])["error"].mean()
    by_group = by_group.join(err, on=["dataset", "group"])
    by_set = rows.groupby(["level", "dataset"], sort=False).agg(
        resamples=("cover", "size"), coverage=("cover", "mean"), width=("width", "mean"),
        widened=("widened", "mean")).reset_index()
    mean = by_set.groupby("level", sort=False).agg(coverage=("coverage", "mean"), width=("width", "mean"),
                                                   lowest=("coverage", "min")).reset_index()
    pd.set_option("display.width", 200)
    print(by_group.round(3).to_string(index=False))
    print()
    print(by_set.round(3).to_string(index=False))
    print()
    print("mean over the sets:")
    print(mean.round(3).to_string(index=False))
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        by_group.to_csv(Path(a.out) / "past_rounds_groups.csv", index=False)
        by_set.to_csv(Path(a.out) / "past_rounds_sets.csv", index=False)


if __name__ == "__main__":
    main()
