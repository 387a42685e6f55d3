"""A kurtosis-aware t for the estimates with current gold (issue 41), replayed on the benchmark's stored rows.

    .venv/bin/python -m experiments.kurtosis_df RESAMPLES.csv.gz [GROUPED_RESAMPLES.csv.gz ...]

The recommended interval with current gold is ``estimate +- t_df SE`` with
``df = k - 1`` (plus the history prior's worth). On the grouped protocol at
k = 100 of a 200-item round it covered 0.924 on average (cells down to
0.833), while the gold alone covered; on a fixed triviaqa round (split by
question) repeated uniform samples gave the PPI estimates' z a spread of
1.11-1.15 against the gold alone's 0.96. The residuals ``y - lam f`` there
have an excess kurtosis of about 11 (13 of 200 items with a large residual):
when a predictor errs rarely and largely, the variance estimate rests on the
few such items a sample holds, and an interval whose df assume normal
residuals is too short.

The variant: the variance estimate's own variance is about
``sigma^4 (2 / (k - 1) + kappa / k)`` for residuals of excess kurtosis
``kappa``, so its effective degrees of freedom are
``df_kappa = 2 / (2 / (k - 1) + c max(kappa, 0) (1 - k / n) / k)`` (the
finite-population factor on the fourth-moment term; ``c`` scales it; ``c = 0``
is the shipped rule), and the t quantile takes ``min(df, df_kappa)``. ``kappa``
is the gold residuals' design-weighted sample excess kurtosis
(``details["residual_excess_kurtosis"]``, stored by benchmarks/current_gold.py
as ``kurtosis``). The replay only widens (``df_kappa <= df`` where it acts):
the new interval is the hull of the stored one and ``estimate +- t' SE``,
clipped to [0, 1], which is exact for the small-sample rule's hull too.

For each binary set held out, ``c`` is chosen on the others by the uniform
design's rule (benchmarks/current_gold_loso.py: cover >= 0.94 on average in
every shift type and 25 of 30 in every training cell, then the narrowest
against the gold alone); a set's grouped splits go with it. Prints coverage
and width per (protocol, k), in-sample and held out.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd
from scipy.stats import t as t_dist

from benchmarks.current_gold_loso import SELECT_CELL, SELECT_MEAN, geo

CS = (0.0, 0.25, 0.5, 1.0, 2.0)


def replay(d: pd.DataFrame, c: float) -> tuple[np.ndarray, np.ndarray]:
    """The recommended interval with the t quantile at ``min(df, df_kappa(c))``."""
    k = d["k_drawn"].to_numpy(float)
    n = d["n_current"].to_numpy(float)
    kap = np.nan_to_num(d["kurtosis"].to_numpy(float), nan=0.0)
    df = d["df"].to_numpy(float)
    lo, hi = d["ci_low"].to_numpy(float), d["ci_high"].to_numpy(float)
    if c == 0:
        return lo, hi
    with np.errstate(divide="ignore", invalid="ignore"):
        dk = 2.0 / (2.0 / np.maximum(k - 1, 1) + c * np.maximum(kap, 0) * np.maximum(1 - k / n, 0) / k)
    use = (d["interval"].astype(str) != "wilson").to_numpy() & np.isfinite(df) & np.isfinite(dk) & (dk < df)
    t_new = t_dist.ppf(0.975, np.where(use, dk, 1e6))
    est, se = d["estimate"].to_numpy(float), d["se"].to_numpy(float)
    lo2 = np.where(use, np.maximum(np.minimum(lo, est - t_new * se), 0.0), lo)
    hi2 = np.where(use, np.minimum(np.maximum(hi, est + t_new * se), 1.0), hi)
    return lo2, hi2


def cells(d: pd.DataFrame, gold_only: pd.Series, c: float) -> pd.DataFrame:
    lo, hi = replay(d, c)
    r = d[["dataset", "shift", "k"]].copy()
    r["cover"] = (lo <= d["truth"].to_numpy() + 1e-12) & (d["truth"].to_numpy() - 1e-12 <= hi)
    r["width"] = hi - lo
    out = r.groupby(["dataset", "shift", "k"]).agg(coverage=("cover", "mean"), width=("width", "mean")).reset_index()
    out["ratio"] = out["width"].to_numpy() / gold_only.reindex(pd.MultiIndex.from_frame(
        out[["dataset", "shift", "k"]])).to_numpy()
    out["set"] = out["dataset"].str.split(":").str[0]
    return out


def score(c: pd.DataFrame) -> dict[str, float]:
    by = c.groupby("shift")["coverage"].mean()
    out = {"min_shift_mean": float(by.min()), "min_cell": float(c["coverage"].min()),
           **{f"cov_{s}": float(v) for s, v in by.items()}, "ratio": geo(c["ratio"])}
    for k in sorted(c["k"].unique()):
        ck = c[c["k"] == k]
        out[f"cov_k{k}"] = float(ck["coverage"].mean())
        out[f"ratio_k{k}"] = geo(ck["ratio"])
        for s in sorted(ck["shift"].unique()):
            out[f"cov_{s}_k{k}"] = float(ck[ck["shift"] == s]["coverage"].mean())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    d = pd.concat([pd.read_csv(f, low_memory=False) for f in a.files], ignore_index=True)
    d = d[d["design"] == "uniform"]
    if "kurtosis" not in d.columns:
        raise SystemExit("these rows have no kurtosis column: rerun benchmarks/current_gold.py (this session's)")
    go = d[d["method"] == "gold_only"].assign(width=lambda x: x["ci_high"] - x["ci_low"])
    gold_only = go.groupby(["dataset", "shift", "k"])["width"].mean()
    auto = d[d["method"] == "auto"].reset_index(drop=True)
    table = {c: cells(auto, gold_only, c) for c in CS}
    pd.set_option("display.width", 250)
    print(pd.DataFrame([{"c": c, **score(t)} for c, t in table.items()]).round(3).T.to_string(header=False))
    sets = sorted(table[0.0]["set"].unique())
    held, choice = [], []
    for s in sets:
        train = {c: score(t[t["set"] != s]) for c, t in table.items()}
        ok = [c for c, sc in train.items() if sc["min_shift_mean"] >= SELECT_MEAN and sc["min_cell"] >= SELECT_CELL]
        pick = min(ok, key=lambda c: train[c]["ratio"]) if ok else max(train, key=lambda c: train[c]["min_shift_mean"])
        choice.append((s, pick))
        held.append(table[pick][table[pick]["set"] == s])
    print("\nchoice per held-out set: " + ", ".join(f"{s} {c:g}" for s, c in choice))
    print("\nheld out:\n" + pd.Series(score(pd.concat(held))).round(3).to_string())
    if not math.isfinite(score(pd.concat(held))["min_cell"]):
        raise SystemExit("no held-out cell")


if __name__ == "__main__":
    main()
