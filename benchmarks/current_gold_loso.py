"""Choose the small-sample variance rule of the estimates with current gold by leave-one-set-out (issue 22).

    .venv/bin/python -m benchmarks.current_gold_loso benchmarks/results/current_gold/resamples.csv.gz --out benchmarks/results/current_gold

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
  history's gold items under the calibration (in-sample log-likelihood
  ratios; the benchmark computes it apart from the product's
  :func:`heroeval.estimators.ppi.history_prior`), worth ``m = min(M,
  n_gold)`` gold items: ``(k s^2 + m s_h^2) / (k + m)``;
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
from scipy.stats import chi2
from scipy.stats import t as t_dist

from heroeval.estimators.design_interval import ONE_CLASS_HULL, SMALL_GOLD, clopper_pearson
from heroeval.estimators.ppi import PRIOR_ITEMS, PSEUDO, PSEUDO_WITH_PRIOR
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.real_data import BINARY

PSEUDO_AC = 1.959963984540054**2 / 2  # Agresti-Coull's z^2/2, the floor before this study
PS = (0.0, 0.25, 0.5, 1.0, 1.5, PSEUDO_AC, 2.5, 3.0)
MS = (0.0, 10.0, 20.0, 40.0, 80.0, 160.0)
DFS = ("k-1", "k-1+m")
PPI_METHODS = ("auto", "hero1_ppi", "prior_ppi", "mv_ppi")
GUARD = True
CONFLICT_LEVEL = 0.05
SELECT_MEAN = 0.94
SELECT_CELL = 25 / 30 - 1e-9
Rule = tuple[float, float, str, float, str]
"""(floor with the prior, prior worth M, df, floor without a prior, one-class hull: "always" or "no-prior")."""
HULLS = ("always", "no-prior")


def replay(d: pd.DataFrame, p: float, M: float, df: str = "k-1", p_none: float | None = None,
           hull: str = "always", guard: bool = GUARD) -> tuple[np.ndarray, np.ndarray]:
    """The intervals of PPI rows under a rule (numpy, vectorised over rows).

    Rows where the prior is used (M > 0, a history spread, lam > 0, no prior-data conflict) get the floor ``p``,
    ``m = min(M, n_gold_hist)`` and df ``k - 1 (+ m)``; the others the floor ``p_none`` (default ``p``) and k - 1.
    ``hull``: the small-sample rule's Clopper–Pearson hull on gold samples of one class, ``"always"`` (as for fewer
    than SMALL_GOLD items) or ``"no-prior"`` (only where the history prior is not used: with it the judges' spread on
    the history's gold sizes the interval).
    """
    p_none = p if p_none is None else p_none
    k = d["k_drawn"].to_numpy(float)
    unit = d["floor_unit"].to_numpy(float)
    var_raw = d["var_raw"].to_numpy(float)
    s2 = np.where(unit > 0, var_raw / np.where(unit > 0, unit, 1.0), 0.0)  # residual spread s^2 (uniform: exact)
    s2h, n_h = d["sigma2_hist"].to_numpy(float), d["n_gold_hist"].to_numpy(float)
    m = np.minimum(M, n_h)
    has = (m > 0) & np.isfinite(s2h) & (d["lambda"].to_numpy(float) > 0) & (unit > 0) & (k >= 2)
    if guard:  # prior-data conflict: the round's spread is significantly above the history's -> no prior
        with np.errstate(divide="ignore", invalid="ignore"):
            conflict = (k - 1) * s2 / s2h > chi2.ppf(1 - CONFLICT_LEVEL, np.maximum(k - 1, 1))
        has &= ~conflict
    m = np.where(has, m, 0.0)
    var_cur = np.where(has, unit * (k * s2 + m * np.nan_to_num(s2h)) / (k + m), var_raw)
    pp = np.where(has, p, p_none)
    var_cur = np.maximum(var_cur, unit * pp / (k + 2 * pp))
    se = np.sqrt(var_cur + np.nan_to_num(d["var_hist"].to_numpy(float)))
    dof = np.maximum(k - 1, 1) + (m if df == "k-1+m" else 0.0)
    h = t_dist.ppf(0.975, dof) * se
    est = d["estimate"].to_numpy(float)
    lo, hi = np.maximum(0.0, est - h), np.minimum(1.0, est + h)
    # the small-sample rule recomputed from the row (not read from its flag, which records the rule it ran under):
    # fewer than SMALL_GOLD gold items, or one class (all 0 or all 1) where the hull rule says so
    gm = d["gold_mean"].to_numpy(float)
    one_class = (gm <= 0) | (gm >= 1)
    small = (k < SMALL_GOLD) | ~np.isfinite(var_raw)
    small |= one_class if hull == "always" else one_class & ~has
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


def history_gold_counts(data_dir: str, seed: int = 2026) -> pd.DataFrame:
    """Gold items in each split's history (the prior's cap), for resample files written before they were stored."""
    out = []
    for name, suffix in BINARY:
        data = load_folder(Path(data_dir) / name, binary_suffix=suffix, text_components=0)
        for shift in ("none", "half", "rate"):
            for r in range(30):
                h = make_split(data, r, 0.10, 200, shift, seed).history
                out.append({"dataset": data.name, "shift": shift, "resample": r, "n_gold_hist": int((h.gold >= 0).sum())})
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("resamples")
    ap.add_argument("--out", default="benchmarks/results/current_gold")
    ap.add_argument("--method", default="auto", help="the rows whose rule is chosen (auto: the recommended one)")
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data"))
    ap.add_argument("--no-guard", action="store_true", help="replay without the prior-data conflict guard")
    ap.add_argument("--shipped", default="", help="p,M,df of the rule the stored intervals were computed with "
                    "(default: the product's constants)")
    a = ap.parse_args()
    global GUARD
    GUARD = not a.no_guard
    df = pd.read_csv(a.resamples)
    if "n_gold_hist" not in df.columns:
        df = df.merge(history_gold_counts(a.data), on=["dataset", "shift", "resample"], how="left")
    w = df[(df["method"] == "gold_only") & (df["design"] == "uniform")].copy()
    w["width"] = w["ci_high"] - w["ci_low"]
    gold_only = w.groupby(["dataset", "shift", "k"])["width"].mean()
    rows = df[(df["method"] == a.method) & (df["k"] > 0)]
    # the replay recovers the residual spread exactly only under the uniform design (s^2 = var_raw / unit); the
    # other designs' rows (per-item history priors, stratified variances) are scored by current_gold.py's tables
    n_other = int((rows["design"] != "uniform").sum())
    rows = rows[rows["design"] == "uniform"].reset_index(drop=True)
    print(f"replayed: {len(rows)} uniform-design rows ({n_other} rows of other designs not replayed)")
    shipped: Rule = (PSEUDO_WITH_PRIOR, PRIOR_ITEMS, "k-1+m", PSEUDO, ONE_CLASS_HULL)
    if a.shipped:
        parts = a.shipped.split(",")
        shipped = (float(parts[0]), float(parts[1]), parts[2], float(parts[3]), parts[4] if len(parts) > 4 else "always")
    lo, hi = replay(rows, *shipped)
    err = float(np.nanmax(np.abs(np.r_[lo - rows["ci_low"], hi - rows["ci_high"]])))
    print(f"fidelity: largest difference between the replayed and the stored intervals {err:.2e}")
    if err > 1e-9:
        sys.exit("replay does not reproduce the stored intervals")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    table: dict[Rule, pd.DataFrame] = {}

    def run(rule: Rule) -> pd.DataFrame:
        if rule not in table:
            lo, hi = replay(rows, *rule)
            r = rows[["dataset", "shift", "k", "design"]].copy()
            r["cover"] = (lo <= rows["truth"] + 1e-12) & (rows["truth"] - 1e-12 <= hi)
            r["width"] = hi - lo
            table[rule] = cells(r, gold_only)
        return table[rule]

    floors = sorted({*PS, PSEUDO, shipped[3]})
    # the floor stays positive with a prior: a predictor without error on the history's gold and on the round's
    # would otherwise get a zero variance (the study's data never do that, so the replay cannot see it)
    priors = [(p, M, dfk, h) for p in sorted({*PS, shipped[0]}) if p > 0 for M in sorted({*MS, shipped[1]}) if M > 0
              for dfk in DFS for h in HULLS]

    def narrowest(rules: list[Rule], train: list[str]) -> Rule | None:
        best, best_r = None, math.inf
        for rule in rules:
            c = run(rule)
            s = score(c[c["dataset"].isin(train)])
            if ok(s) and s["ratio_uniform"] < best_r:
                best, best_r = rule, s["ratio_uniform"]
        return best

    def choose(train: list[str]) -> tuple[Rule, Rule]:
        """The floor alone (no prior anywhere), then the prior's rule with that floor where no prior is used."""
        fl = (narrowest([(p, 0.0, "k-1", p, "always") for p in floors], train)
              or (max(floors), 0.0, "k-1", max(floors), "always"))
        pr = narrowest([(p, M, dfk, fl[3], h) for p, M, dfk, h in priors], train) or fl
        return fl, pr

    sets = sorted(rows["dataset"].unique())
    grid: list[Rule] = [(p, 0.0, "k-1", p, "always") for p in floors]
    fl_all, _ = choose(sets)
    grid += [(p, M, dfk, fl_all[3], h) for p, M, dfk, h in priors]
    insample = pd.DataFrame([{"p": r[0], "M": r[1], "df": r[2], "p_no_prior": r[3], "hull": r[4], **score(run(r))}
                             for r in grid])
    insample.to_csv(out / "loso.csv", index=False)
    pd.set_option("display.width", 250)
    print(insample.round(3).to_string(index=False))
    summ, choices = [], []
    summ.append({"rule": f"shipped {shipped}", **score(run(shipped))})
    summ.append({"rule": "floor p = z^2/2 alone (the rule before this study)",
                 **score(run((PSEUDO_AC, 0.0, "k-1", PSEUDO_AC, "always")))})
    in_fl, in_pr = choose(sets)
    held_fl, held_pr = [], []
    for s in sets:
        fl, pr = choose([x for x in sets if x != s])
        for family, rule, held in (("floor", fl, held_fl), ("prior", pr, held_pr)):
            choices.append({"family": family, "held_out": s, "p": rule[0], "M": rule[1], "df": rule[2],
                            "p_no_prior": rule[3], "hull": rule[4]})
            held.append(run(rule)[run(rule)["dataset"] == s])
    for family, rule, held in (("floor", in_fl, held_fl), ("prior", in_pr, held_pr)):
        summ.append({"rule": f"{family}: in-sample choice {rule}", **score(run(rule))})
        summ.append({"rule": f"{family}: leave-one-set-out", **score(pd.concat(held, ignore_index=True))})
    pd.DataFrame(choices).to_csv(out / "loso_choice.csv", index=False)
    print("\nchoice per held-out set:\n" + pd.DataFrame(choices).to_string(index=False))
    summ_df = pd.DataFrame(summ)
    summ_df.to_csv(out / "loso_summary.csv", index=False)
    print(summ_df.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
