"""Choose the small-sample variance rule of the estimates with current gold by leave-one-set-out (issue 22).

    .venv/bin/python benchmarks/current_gold_loso.py docs/current_gold/resamples.csv.gz --out docs/current_gold

The interval of a prediction-powered estimate is ``estimate +- t_df SE``.
With few gold items its current-round variance, the spread of the residuals
``y - lam f`` over the gold, is often near zero because the sample holds no
item where the predictor errs. The safeguards replayed here on the rows
``benchmarks/current_gold.py`` stored (each PPI row keeps the variance
before any safeguard, the floor's unit, the history term, the small-sample
rule's inputs and the history prior's spread and worth, so every variant is
recomputed exactly, without refitting anything):

* an Agresti–Coull floor: the residual variance is at least that of
  ``p`` pseudo-discordant gold items at each end of the residual's range,
  ``p / (k + 2 p)`` (``p = 0``: none; ``z^2 / 2 = 1.92``: Agresti–Coull's
  count);
* a history prior (a moderated variance, as in limma): the residual
  variance is shrunk towards the predictor's residual spread on the
  history's held-out gold items (the model checks' cross-fitted
  log-likelihood ratios, :func:`heroeval.estimators.ppi.history_prior`),
  worth ``m = min(M, n_eff)`` gold items: ``(k s^2 + m s_h^2) / (k + m)``.
  The spread is taken at the gold's own rate (``at = "hist"``) or with the
  items weighted by class to the round's estimated rate (``"cur"``);
  ``"insample"`` replays the earlier study's in-sample ratios (not
  available to the product: a calibration does not keep them);
* the t quantile's degrees of freedom: ``k - 1``, or ``k - 1 + m`` (limma's
  moderated t).

Two rules are chosen: the one with a history prior (used when the
calibration carries the checks' record) and the floor alone (used when it
does not). For each of the 12 binary sets the rule is chosen on the other
11: the narrowest (geometric mean over uniform-design cells of the width
ratio to the gold-alone Wilson interval at the same k) among those whose
recommended interval covers at least 0.94 on average in every shift type
and at least 25 of 30 resamples (0.833) in every training cell. These are
the issue's targets (0.93, 0.80) with a margin of 0.01 and of one resample,
fixed before the replay was run: choosing right at the targets let a
held-out cell fall to 0.767 in the first study. The held-out set's cells are
then scored with that choice. Prints and writes ``loso.csv`` (every
variant in-sample), ``loso_choice.csv`` (the choice per held-out set) and
``loso_summary.csv``; the fidelity line checks that the shipped rule's
replay reproduces the stored intervals.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import t as t_dist

from heroeval.estimators.ppi import PRIOR_AT_CURRENT_RATE, PRIOR_ITEMS, PSEUDO, clopper_pearson

PS = (0.0, 0.25, 0.5, 1.0, 1.5, PSEUDO, 2.5, 3.0)
MS = (0.0, 10.0, 20.0, 40.0, 80.0, 160.0)
ATS = ("cur", "hist", "insample")
DFS = ("k-1", "k-1+m")
PPI_METHODS = ("auto", "hero1_ppi", "prior_ppi", "mv_ppi")
SELECT_MEAN = 0.94
SELECT_CELL = 25 / 30 - 1e-9
Rule = tuple[float, float, str, str]


def replay(d: pd.DataFrame, p: float, M: float, at: str = "cur", df: str = "k-1") -> tuple[np.ndarray, np.ndarray]:
    """The intervals of PPI rows under floor ``p`` and history prior worth ``M`` (numpy, vectorised over rows)."""
    k = d["k_drawn"].to_numpy(float)
    unit = d["floor_unit"].to_numpy(float)
    var_raw = d["var_raw"].to_numpy(float)
    s2 = np.where(unit > 0, var_raw / np.where(unit > 0, unit, 1.0), 0.0)  # residual spread s^2 (uniform: exact)
    if at == "insample":
        s2h = d["sigma2_hist"].to_numpy(float)
        n_h = np.where(np.isfinite(s2h), np.inf, 0.0)
    else:
        s2h, n_h = d[f"s2h_{at}"].to_numpy(float), np.nan_to_num(d[f"m_{at}"].to_numpy(float))
    m = np.minimum(M, n_h) if M > 0 else np.zeros_like(k)
    has = (m > 0) & np.isfinite(s2h) & (d["lambda"].to_numpy(float) > 0) & (unit > 0)
    m = np.where(has, m, 0.0)
    var_cur = np.where(has, unit * (k * s2 + m * np.nan_to_num(s2h)) / (k + m), var_raw)
    var_cur = np.maximum(var_cur, unit * p / (k + 2 * p))
    se = np.sqrt(var_cur + np.nan_to_num(d["var_hist"].to_numpy(float)))
    dof = np.maximum(k - 1, 1) + (m if df == "k-1+m" else 0.0)
    h = t_dist.ppf(0.975, dof) * se
    est = d["estimate"].to_numpy(float)
    lo, hi = np.maximum(0.0, est - h), np.minimum(1.0, est + h)
    small = d["small_rule"].to_numpy(bool)
    for i in np.flatnonzero(small):
        g, n = float(d["gold_mean"].iloc[i]), float(d["gold_neff"].iloc[i])
        cl, ch = clopper_pearson(g * n, n, 0.95)
        lo[i] = cl if not math.isfinite(lo[i]) else min(lo[i], cl)
        hi[i] = ch if not math.isfinite(hi[i]) else max(hi[i], ch)
    return lo, hi


def cells(rows: pd.DataFrame, gold_only: pd.Series) -> pd.DataFrame:
    """Coverage and mean width per (data set, shift, k, design), with the width ratio to the gold alone."""
    g = rows.groupby(["dataset", "shift", "k", "design"])
    c = g.agg(coverage=("cover", "mean"), width=("width", "mean")).reset_index()
    key = pd.MultiIndex.from_frame(c[["dataset", "shift", "k"]])
    c["ratio"] = c["width"].to_numpy() / gold_only.reindex(key).to_numpy()
    return c


def geo(x: pd.Series | np.ndarray) -> float:
    x = np.asarray(x, float)
    x = x[np.isfinite(x) & (x > 0)]
    return float(np.exp(np.mean(np.log(x)))) if x.size else math.nan


def score(c: pd.DataFrame) -> dict[str, float]:
    by_shift = c.groupby("shift")["coverage"].mean()
    u = c[c["design"] == "uniform"]
    return {"min_shift_mean": float(by_shift.min()), "min_cell": float(c["coverage"].min()),
            "min_cell_uniform": float(u["coverage"].min()),
            **{f"cov_{s}": float(v) for s, v in by_shift.items()},
            "ratio_uniform": geo(u["ratio"]), "ratio_all": geo(c["ratio"]),
            **{f"ratio_k{k}": geo(u[u["k"] == k]["ratio"]) for k in sorted(c["k"].unique())}}


def ok(s: dict[str, float]) -> bool:
    return s["min_shift_mean"] >= SELECT_MEAN and s["min_cell"] >= SELECT_CELL


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("resamples")
    ap.add_argument("--out", default="docs/current_gold")
    ap.add_argument("--method", default="auto", help="the rows whose rule is chosen (auto: the recommended one)")
    a = ap.parse_args()
    df = pd.read_csv(a.resamples)
    w = df[(df["method"] == "gold_only") & (df["design"] == "uniform")].copy()
    w["width"] = w["ci_high"] - w["ci_low"]
    gold_only = w.groupby(["dataset", "shift", "k"])["width"].mean()
    rows = df[(df["method"] == a.method) & (df["k"] > 0)].reset_index(drop=True)
    shipped: Rule = (PSEUDO, PRIOR_ITEMS, "cur" if PRIOR_AT_CURRENT_RATE else "hist", "k-1")
    lo, hi = replay(rows, *shipped)
    err = float(np.nanmax(np.abs(np.r_[lo - rows["ci_low"], hi - rows["ci_high"]])))
    print(f"fidelity: largest difference between the replayed and the stored intervals {err:.2e}")
    if err > 1e-9:
        sys.exit("replay does not reproduce the stored intervals")
    table: dict[Rule, pd.DataFrame] = {}
    for p in PS:
        for M in MS:
            for at in ATS if M > 0 else ("cur",):
                for dfk in DFS if M > 0 else ("k-1",):
                    lo, hi = replay(rows, p, M, at, dfk)
                    r = rows[["dataset", "shift", "k", "design"]].copy()
                    r["cover"] = (lo <= rows["truth"] + 1e-12) & (rows["truth"] - 1e-12 <= hi)
                    r["width"] = hi - lo
                    table[(p, M, at, dfk)] = cells(r, gold_only)
    insample = pd.DataFrame([{"p": p, "M": M, "at": at, "df": dfk, **score(c)}
                             for (p, M, at, dfk), c in table.items()])
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    insample.to_csv(out / "loso.csv", index=False)
    pd.set_option("display.width", 250)
    print(insample.round(3).to_string(index=False))
    sets = sorted(rows["dataset"].unique())

    def choose(train: list[str], family: str) -> Rule:
        best, best_r = None, math.inf
        for key, c in table.items():
            if (family == "floor") != (key[1] == 0) or key[2] == "insample":
                continue
            s = score(c[c["dataset"].isin(train)])
            if ok(s) and s["ratio_uniform"] < best_r:
                best, best_r = key, s["ratio_uniform"]
        return best if best is not None else (max(PS), 0.0, "cur", "k-1")

    summ, choices = [], []
    summ.append({"rule": f"shipped {shipped}", **score(table[shipped])})
    summ.append({"rule": "before this study (p = z^2/2, no prior)", **score(table[(PSEUDO, 0.0, "cur", "k-1")])})
    for family in ("prior", "floor"):
        in_choice = choose(sets, family)
        held: list[pd.DataFrame] = []
        for s in sets:
            key = choose([x for x in sets if x != s], family)
            choices.append({"family": family, "held_out": s, "p": key[0], "M": key[1], "at": key[2], "df": key[3]})
            held.append(table[key][table[key]["dataset"] == s])
        summ.append({"rule": f"{family}: in-sample choice {in_choice}", **score(table[in_choice])})
        summ.append({"rule": f"{family}: leave-one-set-out", **score(pd.concat(held, ignore_index=True))})
    pd.DataFrame(choices).to_csv(out / "loso_choice.csv", index=False)
    print("\nchoice per held-out set:\n" + pd.DataFrame(choices).to_string(index=False))
    summ_df = pd.DataFrame(summ)
    summ_df.to_csv(out / "loso_summary.csv", index=False)
    print(summ_df.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
