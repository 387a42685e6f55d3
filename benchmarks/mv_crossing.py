#!/usr/bin/env python
"""Where majority vote's bias crosses zero: why it wins some rate-shifted cells (issue #18).

    .venv/bin/python -m benchmarks.mv_crossing                       # rate_odds 3 (the benchmark's default)
    .venv/bin/python -m benchmarks.mv_crossing --rate-odds 0.333 --rate-odds 9

Majority vote has no fitted parameters: on a round whose true rate is ``t``
its expected error is ``(1 - t) FPR - t FNR``, with FPR and FNR its error
rates on the negatives and positives (a tie counts one half). On every
binary set's gold items (all of them, not a history's sample) this prints
those rates, the rate ``t* = FPR / (FPR + FNR)`` where the error is zero,
and the error at the gold's own rate and at the rate the benchmark's rate
shift draws (the first draw's rate ``u p / (u p + 1 - p)``, ``u`` the odds
factor, inverted when the gold rate is above one half). Writes
``--out``/mv_crossing.csv.

``--resamples FILE`` (a ``benchmarks/robustness.py`` resamples.csv.gz) also
prints, per set and shift, majority vote's mean error in those resamples
beside the line's prediction at each resample's true rate, and ``auto``'s
geometric-mean RMSE ratio to the best method per shift type, with and
without majority vote among the methods compared.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from heroeval.workflows.benchmark import RATE_SHIFT_ODDS, load_folder

from benchmarks import real_data


def crossing(data_dir: Path, odds: list[float]) -> pd.DataFrame:
    rows = []
    for name, suffix in real_data.BINARY:
        d = load_folder(data_dir / name, binary_suffix=suffix, text_components=0)
        g = d.gold.set_index("item_id")["gold"]
        v = d.labels.groupby("item_id")["label"].agg(["mean", "size"])
        v = v[v.index.isin(g.index)]
        mv = np.where(v["mean"] > 0.5, 1.0, np.where(v["mean"] < 0.5, 0.0, 0.5))
        y = g.loc[v.index].to_numpy()
        fpr, fnr = float(mv[y == 0].mean()), float(1.0 - mv[y == 1].mean())
        p = float(y.mean())
        row = {"dataset": d.name, "labels_per_item": float(v["size"].mean()), "gold_items": int(y.size),
               "gold_rate": p, "mv_fpr": fpr, "mv_fnr": fnr,
               "zero_error_rate": fpr / (fpr + fnr) if fpr + fnr > 0 else float("nan"),
               "mv_error_at_gold_rate": (1 - p) * fpr - p * fnr}
        for o in odds:
            u = o if p <= 0.5 else 1.0 / o
            t = u * p / (u * p + 1 - p)
            row[f"rate_odds{o:g}"] = t
            row[f"mv_error_odds{o:g}"] = (1 - t) * fpr - t * fnr
        rows.append(row)
    return pd.DataFrame(rows)


def check(resamples: Path, cross: pd.DataFrame) -> None:
    """Majority vote's observed mean error against the line's, and auto's ratios with and without it."""
    df = pd.read_csv(resamples)
    df = df[df["split"] == "random"]
    rates = cross.set_index("dataset")[["mv_fpr", "mv_fnr"]]
    mv = df[df["method"] == "majority_vote"].join(rates, on="dataset")
    mv["predicted"] = (1 - mv["truth"]) * mv["mv_fpr"] - mv["truth"] * mv["mv_fnr"]
    mv["observed"] = mv["estimate"] - mv["truth"]
    g = mv.groupby(["dataset", "shift"])[["observed", "predicted"]].mean()
    print("\nmajority vote's mean error (pool shift uses half the labelers: not the line's case)")
    print(g.unstack("shift").round(3).to_string())
    d = df.assign(sq=(df["estimate"] - df["truth"]) ** 2)
    rmse = d.groupby(["shift", "dataset", "method"])["sq"].mean() ** 0.5
    wide = rmse.unstack("method")
    methods = ["majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1", "hero2", "hero_joint"]
    for label, ms in (("all methods", methods), ("without majority vote", methods[1:])):
        r = wide["auto"] / wide[[m for m in ms if m in wide.columns]].min(axis=1)
        per = r.groupby("shift").agg(lambda x: f"{np.exp(np.log(x).mean()):.3f} (worst {x.max():.2f})")
        print(f"auto / best of {label}: " + ", ".join(f"{k} {v}" for k, v in per.items()))


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--rate-odds", type=float, action="append", default=None)
    ap.add_argument("--out", default="benchmarks/results/research/robustness/shift")
    ap.add_argument("--resamples", default="", help="a robustness.py resamples.csv.gz to check the line against")
    a = ap.parse_args()
    odds = a.rate_odds or [RATE_SHIFT_ODDS]
    df = crossing(Path(a.data), odds)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    df.to_csv(Path(a.out) / "mv_crossing.csv", index=False, float_format="%.4g")
    pd.set_option("display.width", 250)
    print(df.round(3).to_string(index=False))
    if a.resamples:
        check(Path(a.resamples), df)


if __name__ == "__main__":
    main()
