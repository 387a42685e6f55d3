"""A few expert labels in the current round (issue 22): coverage and width of the estimates with current gold.

    .venv/bin/python -m benchmarks.current_gold --resamples 30 --workers 2 --out benchmarks/results/current_gold

On every binary set in ../shared/data (benchmarks/real_data.py's BINARY),
shifts none / half / rate, rho = 0.10, n = 200 current items (fewer on small
sets: make_split takes at most 40 % of the gold items), one Stage A fit per
resample and shift; the current round's gold is known for every item, so for
each budget k in {20, 50, 100} (k < n) and each design (uniform, active) a
gold sample is drawn by the design and revealed, and every estimate with
current gold is computed on it:

* ``hero1_ppi`` (the recommended estimate with current gold: ``auto``'s
  choice, run through heroeval.choice.with_gold.recommend_with_gold), ``prior_ppi``,
  ``mv_ppi`` (PPI++ with the majority vote as predictor, as ppi_py does),
  ``gold_only`` (Wilson, finite-population corrected) and ``gold_cp``
  (Clopper–Pearson on the gold, no correction), plus HERO-1 without gold for
  reference.

Writes resamples.csv.gz (one row per resample, k, design, method) and
summary.csv, and prints the tables of docs/current_gold.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from heroeval.checks.model_checks import run_checks
from heroeval.choice.with_gold import recommend_with_gold
from heroeval.core.parallel import run_chunks
from heroeval.errors import HeroEvalError, HeroEvalWarning
from heroeval.estimators import ppi as ppi_module
from heroeval.estimators.common import align, log_likelihood_ratios
from heroeval.estimators.design_interval import clopper_pearson
from heroeval.estimators.ppi import gold_estimates
from heroeval.inference.gold_plan import expert_labels
from heroeval.inference.select import select_items
from heroeval.workflows.api import calibrate, estimate
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.real_data import BINARY, grouped_sets, round_sets

PLAN_RESAMPLES = 30
"""Resamples whose calibration also runs the model checks, as ``hero calibrate`` saves them: the predictor's choice
and the plan's cross-fitted spread use them; the plan's predicted half-width at each k is recorded there (the
``plan`` rows)."""
PLAN_SKIP = ("adultcontent2_binary",)
"""Sets whose model checks are too slow to run per resample here (825 labelers: 315 s a calibration, issue #43):
calibrated without them, so HERO-1's posterior is the predictor and there is no plan row."""


def _ppi_py(y_gold, f_gold, f_rest):
    """ppi_py's PPI++ mean interval (power-tuned lambda; the package run as its users run it), 95 %."""
    import ppi_py

    if f_rest.size == 0 or y_gold.size < 2:
        return math.nan, math.nan, math.nan
    lo, hi = ppi_py.ppi_mean_ci(y_gold.astype(float), f_gold.astype(float), f_rest.astype(float), alpha=0.05)
    est = float(np.ravel(ppi_py.ppi_mean_pointestimate(y_gold.astype(float), f_gold.astype(float),
                                                      f_rest.astype(float)))[0])
    return est, float(np.ravel(lo)[0]), float(np.ravel(hi)[0])

KS = (10, 20, 50, 100)
DESIGNS = ("uniform", "active", "stratified", "stratified_group")
"""``stratified``: hero select --by posterior (4 bands, half proportional, half Neyman from the history's spread);
``stratified_group``: --by the data's item groups (the grouped protocol only; skipped, and counted in the log, where
k cannot give every group of the round two items)."""
SHIFTS = ("none", "half", "rate")


def one(data, r: int, shift: str, seed: int, ks=KS, designs=DESIGNS[:3], n: int = 200) -> list[dict]:
    """One resample's rows; ``shift="groups"``: the real rounds' split (leave group ``r mod G`` out)."""
    groups = shift in ("groups", "grouped")
    sp = make_split(data, r, 0.10, n, "none" if groups else shift, seed, "groups" if groups else "random")
    with_plan = r < PLAN_RESAMPLES and data.name not in PLAN_SKIP
    cal = calibrate(sp.history)
    if with_plan:
        # the part of the model checks the predictor's choice and the plan read (the held-out gold items' cross-fitted
        # ratios at the calibration's weight 1, and the gold-proportion rates'): the same folds and seed as
        # hero calibrate's checks, without the other weights, candidates and past rounds (4-5 times cheaper)
        cal = replace(cal, checks=run_checks(sp.history, weight_grid=(1.0,), candidates=("hero1", "gold_proportion"),
                                             past_rounds=False, start=cal))
    al = align(sp.current, cal, True)
    cur = al.data
    gold = data.gold.set_index("item_id")["gold"]
    ids = cur.item_ids.astype(str)
    y = gold.loc[ids].to_numpy()
    truth = float(y.mean())
    n = cur.n_items
    # the history's gold items under the calibration (in-sample): the residual spread a predictor had there,
    # computed here independently of the product's heroeval.estimators.ppi.history_prior (the replay's input)
    ha = align(sp.history, cal, True)
    hg = np.flatnonzero(ha.data.gold >= 0)
    h_y = ha.data.gold[hg].astype(float)
    h_L = log_likelihood_ratios(ha.data, ha.to_calib, cal.alpha, cal.beta)[hg]
    base = {"dataset": data.name, "shift": shift, "resample": r, "n_current": n, "truth": truth}
    rows = []
    h1 = estimate(cur, cal, method="hero1", drift_check=False)
    ci = h1.confidence_interval()
    rows.append({**base, "k": 0, "design": "none", "method": "hero1", "estimate": h1.estimate,
                 "se": h1.standard_error, "ci_low": ci.low, "ci_high": ci.high, "interval": ci.method})
    # the majority-vote share of each item (ppi_py's predictor here)
    ones = np.add.reduceat(cur.label.astype(float), cur.item_ptr[:-1])
    mv_share = ones / np.diff(cur.item_ptr)
    plan = None
    if with_plan and 0 < h1.estimate < 1:
        plan = expert_labels(cal, mu=float(min(max(h1.estimate, 0.01), 0.99)), half_width=0.05, round_items=n,
                             n_mc=5000)
    for k in ks:
        if k >= n:
            continue
        for design in designs:
            gen = np.random.default_rng([seed, r, k, SHIFTS.index(shift) if shift in SHIFTS else len(SHIFTS),
                                         DESIGNS.index(design)])
            try:
                if design == "stratified_group":
                    if data.groups is None:
                        continue
                    by = data.groups.reindex(pd.Index(ids)).astype(str)
                    sel = select_items(cur, cal, k, by=by.to_dict(), rng=gen)
                elif design == "stratified":
                    sel = select_items(cur, cal, k, by="posterior", rng=gen)
                else:
                    sel = select_items(cur, cal, k, design=design, rng=gen)
            except HeroEvalError as e:  # too many strata for k (the product's error); counted
                rows.append({**base, "k": k, "design": design, "method": "skipped", "estimate": math.nan,
                             "se": math.nan, "ci_low": math.nan, "ci_high": math.nan, "interval": str(e)[:80]})
                continue
            ch = sel.chosen
            pos = pd.Index(ids).get_indexer(ch["item_id"])
            c2 = cur.with_gold(ids[pos], y[pos])
            if design != "uniform":
                c2 = c2.with_design(ch["item_id"], ch["pi"], ch["stratum"] if "stratum" in ch else None)
            res, _ = gold_estimates(c2, cal, ["hero1_ppi", "gp_ppi", "prior_ppi", "mv_ppi", "gold_only"],
                                    exclude_new_labelers=True, skip_errors=True)
            rec = recommend_with_gold(c2, cal, exclude_new_labelers=True, candidates=())
            res = {"auto": rec.result, **res}
            for m, x in res.items():
                ci = x.confidence_interval()
                dd = x.details
                lam = dd.get("lambda", math.nan)
                s2h, n_hist = math.nan, int(h_y.size)
                hy, hl = h_y, h_L
                if dd.get("predictor") == "gold_proportion":  # its prior: the checks' held-out gold (cross-fitted)
                    it = {} if cal.checks is None else cal.checks.items
                    hy = np.asarray(it.get("y", []), float)
                    hl = np.asarray(it.get("gold_proportion:llr", []), float)
                    n_hist = int(hy.size) if "gold_proportion:llr" in it else 0
                if dd.get("predictor") in ("hero1", "prior", "gold_proportion") and n_hist > 1:
                    mu_c = min(max(dd["prior_rate"], 1e-6), 1 - 1e-6)
                    f_h = 1.0 / (1.0 + np.exp(-(math.log(mu_c / (1 - mu_c)) + hl)))
                    s2h = float(np.var(hy - lam * f_h, ddof=1))
                rows.append({**base, "k": k, "design": design, "method": m, "estimate": x.estimate,
                             "se": x.standard_error, "ci_low": ci.low, "ci_high": ci.high, "interval": ci.method,
                             "lambda": lam, "k_drawn": dd.get("n_gold"),
                             # replay components (benchmarks/current_gold_loso.py): the variance before the floor,
                             # the floor's unit, the history term, the small-sample rule's inputs
                             "var_raw": dd.get("variance_current_raw", math.nan),
                             "floor_unit": dd.get("variance_floor_unit", math.nan),
                             "var_hist": dd.get("variance_history", math.nan),
                             "gold_mean": dd.get("gold_mean", math.nan), "gold_neff": dd.get("gold_effective_n", math.nan),
                             "small_rule": bool(dd.get("small_sample_rule", False)), "sigma2_hist": s2h,
                             "n_gold_hist": n_hist, "chosen": rec.method if m == "auto" else None,
                             "kurtosis": dd.get("residual_excess_kurtosis", math.nan), "df": dd.get("df", math.nan)})
            if design == "uniform":
                rest = np.setdiff1d(np.arange(n), pos)
                est, lo, hi = _ppi_py(y[pos], mv_share[pos], mv_share[rest])
                rows.append({**base, "k": k, "design": design, "method": "ppi_py_mv", "estimate": est,
                             "se": math.nan, "ci_low": lo, "ci_high": hi, "interval": "ppi_py", "lambda": math.nan,
                             "k_drawn": pos.size})

            if plan is not None and design in ("uniform", "active"):  # the plan's predicted half-width at k
                hw = plan.half_width_at(k, f"{design} (HERO-PPI)")
                rows.append({**base, "k": k, "design": design, "method": "plan", "estimate": math.nan,
                             "se": math.nan, "ci_low": -hw, "ci_high": hw, "interval": "plan",
                             "lambda": math.nan, "k_drawn": pos.size})
            # Clopper-Pearson on the gold alone (uniform design only: unweighted)
            if design == "uniform":
                lo, hi = clopper_pearson(float(y[pos].sum()), float(pos.size), 0.95)
                rows.append({**base, "k": k, "design": design, "method": "gold_cp", "estimate": float(y[pos].mean()),
                             "se": math.nan, "ci_low": lo, "ci_high": hi, "interval": "clopper-pearson",
                             "lambda": 0.0, "k_drawn": pos.size})
    return rows


def _rounds_job(job: tuple) -> list[dict]:
    folder, name, rs, seed, designs = job
    warnings.simplefilter("ignore", HeroEvalWarning)
    warnings.simplefilter("ignore", RuntimeWarning)
    data, n = next(x for x in round_sets(Path(folder), 200, [name]) if x[0].name == name)
    return [row for r in rs for row in one(data, r, "groups", seed, designs=designs, n=n)]


def _grouped_job(job: tuple) -> list[dict]:
    folder, name, rs, seed, designs = job
    warnings.simplefilter("ignore", HeroEvalWarning)
    warnings.simplefilter("ignore", RuntimeWarning)
    data, n = next(x for x in grouped_sets(Path(folder), 200, [name]) if x[0].name == name)
    return [row for r in rs for row in one(data, r, "grouped", seed, designs=designs, n=n)]


def _job(job: tuple) -> list[dict]:
    folder, name, suffix, shift, resamples, seed, designs = job
    warnings.simplefilter("ignore", HeroEvalWarning)
    warnings.simplefilter("ignore", RuntimeWarning)
    data = load_folder(Path(folder) / name, binary_suffix=suffix, text_components=0)
    rows: list[dict] = []
    for r in range(resamples):
        rows.extend(one(data, r, shift, seed, designs=designs))
    return rows


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    d = df.copy()
    d["cover"] = (d["ci_low"] <= d["truth"] + 1e-12) & (d["truth"] - 1e-12 <= d["ci_high"])
    d["width"] = d["ci_high"] - d["ci_low"]
    d["err"] = d["estimate"] - d["truth"]
    g = d.groupby(["dataset", "shift", "k", "design", "method"], sort=False)
    return g.agg(resamples=("cover", "size"), coverage=("cover", "mean"), width=("width", "mean"),
                 bias=("err", "mean"), rmse=("err", lambda e: float(np.sqrt(np.mean(np.square(e))))),
                 n_current=("n_current", "mean"), lam=("lambda", "mean")).reset_index()


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--resamples", type=int, default=30)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default="benchmarks/results/current_gold")
    ap.add_argument("--only", default="")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--designs", default="",
                    help="comma-separated subset of " + ",".join(DESIGNS) + " (default: the first three; with "
                         "--grouped all four). ppi_py, Clopper-Pearson and the plan ride on the uniform design")
    ap.add_argument("--groups", action="store_true",
                    help="the real rounds instead (benchmarks/real_data.round_sets: triviaqa's answering models, "
                         "mre_treat's blocks of batches; resample r leaves round r mod G out): rounds_*.csv")
    ap.add_argument("--grouped", action="store_true",
                    help="the grouped protocol instead (benchmarks/real_data.grouped_sets: history and round made of "
                         "different item groups, 8 groupings): grouped_*.csv")
    ap.add_argument("--tables-from", default="",
                    help="comma-separated resamples.csv.gz files of earlier runs: print their tables together (and "
                         "write the merged resamples and summary to --out) without running anything")
    ap.add_argument("--stratum-floor", default=ppi_module.STRATUM_FLOOR, choices=ppi_module.STRATUM_FLOORS,
                    help="the stratified design's variance floor to measure (heroeval.estimators.ppi.STRATUM_FLOOR)")
    ap.add_argument("--stratum-prior", default=ppi_module.STRATUM_PRIOR, choices=ppi_module.STRATUM_PRIORS,
                    help="the history prior's worth per stratum to measure (heroeval.estimators.ppi.STRATUM_PRIOR)")
    a = ap.parse_args()
    # the variants measured (one per run; the workers are forked after this, so they see it)
    ppi_module.STRATUM_FLOOR, ppi_module.STRATUM_PRIOR = a.stratum_floor, a.stratum_prior
    if a.tables_from:
        merged = pd.concat([pd.read_csv(f) for f in a.tables_from.split(",")], ignore_index=True)
        Path(a.out).mkdir(parents=True, exist_ok=True)
        merged.to_csv(Path(a.out) / "resamples.csv.gz", index=False)
        summ = summarize(merged)
        summ.to_csv(Path(a.out) / "summary.csv", index=False)
        print(tables(summ))
        print(plan_table(merged))
        return
    warnings.simplefilter("ignore", HeroEvalWarning)
    warnings.simplefilter("ignore", RuntimeWarning)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    designs = tuple(a.designs.split(",")) if a.designs else DESIGNS if a.grouped else DESIGNS[:3]
    if set(designs) - set(DESIGNS):
        ap.error(f"--designs: unknown {sorted(set(designs) - set(DESIGNS))}")
    rows: list[dict] = []
    t0 = time.perf_counter()
    for name, suffix in ([] if a.groups or a.grouped else BINARY):
        if a.only and name not in a.only.split(","):
            continue
        t = time.perf_counter()
        jobs = [(a.data, name, suffix, shift, a.resamples, a.seed, designs) for shift in SHIFTS]
        rows.extend(run_chunks(_job, jobs, [a.resamples] * len(jobs), workers=a.workers))
        print(f"{name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        pd.DataFrame(rows).to_csv(out / "partial_resamples.csv.gz", index=False)  # kept if the run is stopped
    for name in (("triviaqa_llm_judges", "mre_treat") if a.groups else ()):
        if a.only and name not in a.only.split(","):
            continue
        t = time.perf_counter()
        half = a.resamples // 2
        jobs = [(a.data, name, list(range(0, half)), a.seed, designs),
                (a.data, name, list(range(half, a.resamples)), a.seed, designs)]
        rows.extend(run_chunks(_rounds_job, jobs, [len(j[2]) for j in jobs], workers=a.workers))
        print(f"{name} rounds: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    if a.grouped:
        names = [d.name for d, _ in grouped_sets(Path(a.data), 200)]
        for name in names:
            if a.only and name not in a.only.split(",") and name.split(":")[0] not in a.only.split(","):
                continue
            t = time.perf_counter()
            half = a.resamples // 2
            jobs = [(a.data, name, list(range(0, half)), a.seed, designs),
                    (a.data, name, list(range(half, a.resamples)), a.seed, designs)]
            rows.extend(run_chunks(_grouped_job, jobs, [len(j[2]) for j in jobs], workers=a.workers))
            print(f"{name} grouped: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows).sort_values(["dataset", "shift", "resample", "k", "design", "method"], kind="stable")
    prefix = "rounds_" if a.groups else "grouped_" if a.grouped else ""
    df.to_csv(out / f"{prefix}resamples.csv.gz", index=False)
    summ = summarize(df)
    summ.to_csv(out / f"{prefix}summary.csv", index=False)
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    print(tables(summ))
    print(plan_table(df))


def plan_table(df: pd.DataFrame) -> str:
    """The plan's predicted half-width at k against the recommended interval's half-width obtained on the same
    resamples (uniform design; the resamples with the plan rows)."""
    d = df.copy()
    d["width"] = d["ci_high"] - d["ci_low"]
    keys = ["dataset", "shift", "resample", "k", "design"]
    p = d[d["method"] == "plan"].set_index(keys)["width"]
    if p.empty:
        return ""
    o = d[d["method"] == "auto"].set_index(keys)["width"]
    j = pd.concat([p.rename("plan"), o.rename("obtained")], axis=1).dropna().reset_index()
    cell = j.groupby(["dataset", "shift", "k", "design"]).agg(plan=("plan", "mean"),
                                                              obtained=("obtained", "mean")).reset_index()
    cell["ratio"] = cell["obtained"] / cell["plan"]
    out = ["| data set | design | obtained / planned half-width (mean over shifts and k) | range over cells | cells |",
           "|---|---|---|---|---|"]
    for (ds, de), g in cell.groupby(["dataset", "design"]):
        out.append(f"| {ds} | {de} | {g['ratio'].mean():.3f} | {g['ratio'].min():.2f}–{g['ratio'].max():.2f} | "
                   f"{len(g)} |")
    for de, g in cell.groupby("design"):
        out.append(f"| all | {de} | {g.groupby('dataset')['ratio'].mean().mean():.3f} | {g['ratio'].min():.2f}–"
                   f"{g['ratio'].max():.2f} | {len(g)} |")
    return "\n".join(out)


def _geo(x: pd.Series) -> float:
    x = x[np.isfinite(x) & (x > 0)]
    return float(np.exp(np.mean(np.log(x)))) if len(x) else math.nan


def tables(s: pd.DataFrame) -> str:
    """The markdown tables of docs/current_gold.md from the summary."""
    out: list[str] = []
    # 1. coverage of the recommended interval, by shift, k and design
    rec = s[s["method"] == "auto"]
    skipped = s[s["method"] == "skipped"]
    if len(skipped):
        out.append(f"skipped (k too small for the strata): {int(skipped['resamples'].sum())} resample cells, "
                   + ", ".join(f"{d} k={k}" for d, k in skipped[["dataset", "k"]].drop_duplicates().to_numpy()[:12]))
        out.append("")
    s = s[~s["method"].isin(["plan", "skipped"])]  # the plan's rows are predicted widths (plan_table)
    out.append("| shift | design | k | mean coverage | min cell | cells |\n|---|---|---|---|---|---|")
    for (sh, de, k), g in rec.groupby(["shift", "design", "k"]):
        out.append(f"| {sh} | {de} | {k} | {g['coverage'].mean():.3f} | {g['coverage'].min():.2f} | {len(g)} |")
    out.append("")
    out.append("| shift | mean coverage (all k, designs) | min cell |\n|---|---|---|")
    for sh, g in rec.groupby("shift"):
        out.append(f"| {sh} | {g['coverage'].mean():.3f} | {g['coverage'].min():.2f} |")
    out.append("")
    # 2. coverage of every method, by shift
    shifts = [sh for sh in (*SHIFTS, "groups") if sh in set(s["shift"])]
    out.append("| method | " + " | ".join(shifts) + " | min cell |\n|" + "---|" * (len(shifts) + 2))
    for m, g in s[s["k"] > 0].groupby("method"):
        cov = [g[g["shift"] == sh]["coverage"].mean() for sh in shifts]
        out.append(f"| {m} | " + " | ".join(f"{c:.3f}" for c in cov) + f" | {g['coverage'].min():.2f} |")
    out.append("")
    # 3. width ratios (uniform design), geometric means over data sets and shifts, and labels saved
    key = ["dataset", "shift", "k", "design"]
    w = s.pivot_table(index=key, columns="method", values="width").reset_index()
    out.append("| k | design | HERO-PPI / gold-only (Wilson, FPC) | HERO-PPI / Clopper–Pearson | HERO-PPI / PPI++ with MV "
               "| prior-PPI / HERO-PPI | gold labels worth (gold-only k for the same width) | cells |\n"
               "|---|---|---|---|---|---|---|---|")
    gu = w[w["design"] == "uniform"].set_index(["dataset", "shift", "k"])["gold_only"]
    for (k, de), g in w[w["k"] > 0].groupby(["k", "design"]):
        # against the classical interval of a uniform sample of the same size
        ratio = g["auto"].to_numpy() / gu.reindex(pd.MultiIndex.from_frame(g[["dataset", "shift", "k"]])).to_numpy()
        ratio = pd.Series(ratio)
        cp = _geo(g["auto"] / g["gold_cp"]) if "gold_cp" in g and g["gold_cp"].notna().any() else math.nan
        n = s[(s["k"] == k) & (s["design"] == de) & (s["method"] == "auto")]["n_current"].mean()
        rho = _geo(ratio)
        k_eq = 1.0 / ((1.0 / k - 1.0 / n) * rho**2 + 1.0 / n) if math.isfinite(rho) else math.nan
        out.append(f"| {k} | {de} | {rho:.3f} | {cp:.3f} | {_geo(g['auto'] / g['mv_ppi']):.3f} | "
                   f"{_geo(g['prior_ppi'] / g['auto']):.3f} | {k_eq:.0f} (n = {n:.0f}) | {len(g)} |")
    out.append("")
    # 3b. against ppi_py's PPI++ with the majority-vote share (uniform design), and the recommended interval's
    # coverage next to ppi_py's, per k
    # ppi_py targets the population mean (no finite-population correction); "like for like" scales its width by
    # sqrt(1 - k/n), the correction heroeval applies for the round's own n items
    out.append("| k | HERO-PPI / ppi_py PPI++ (MV share), width (geo. mean) | like for like (ppi_py x sqrt(1 - k/n)) "
               "| cells | coverage HERO-PPI | coverage ppi_py |\n|---|---|---|---|---|---|")
    wu = w[w["design"] == "uniform"].merge(
        s[(s["method"] == "auto") & (s["design"] == "uniform")][["dataset", "shift", "k", "n_current"]],
        on=["dataset", "shift", "k"], how="left")
    for k, g in wu[wu["k"] > 0].groupby("k"):
        if "ppi_py_mv" not in g:
            break
        cu = rec[(rec["k"] == k) & (rec["design"] == "uniform")]["coverage"].mean()
        cp = s[(s["k"] == k) & (s["method"] == "ppi_py_mv")]["coverage"].mean()
        fpc = np.sqrt(np.clip(1 - k / g["n_current"], 0.0, 1.0))
        out.append(f"| {k} | {_geo(g['auto'] / g['ppi_py_mv']):.3f} | {_geo(g['auto'] / (g['ppi_py_mv'] * fpc)):.3f} "
                   f"| {len(g)} | {cu:.3f} | {cp:.3f} |")
    out.append("")
    # 4. every other design against uniform (the recommended interval's width, the same resamples' cells)
    u = w[w["design"] == "uniform"].set_index(["dataset", "shift", "k"])["auto"]
    out.append("| design | k | width / uniform's (geo. mean) | range over cells | coverage | coverage uniform | cells |\n"
               "|---|---|---|---|---|---|---|")
    for de in [d for d in DESIGNS[1:] if d in set(w["design"])]:
        a = w[w["design"] == de].set_index(["dataset", "shift", "k"])["auto"]
        j = pd.concat([a.rename("other"), u.rename("uniform")], axis=1).dropna()
        for k, g in j.reset_index().groupby("k"):
            r = g["other"] / g["uniform"]
            ca = rec[(rec["k"] == k) & (rec["design"] == de)]["coverage"].mean()
            cu = rec[(rec["k"] == k) & (rec["design"] == "uniform")]["coverage"].mean()
            out.append(f"| {de} | {k} | {_geo(r):.3f} | {r.min():.2f}–{r.max():.2f} | {ca:.3f} | {cu:.3f} | {len(g)} |")
    out.append("")
    # 5. per data set, k = 50, uniform
    sub = s[(s["k"] == 50) & (s["design"] == "uniform")]
    out.append("| data set | shift | n | coverage HERO-PPI | width HERO-PPI | width gold-only | width MV-PPI | "
               "lambda |\n|---|---|---|---|---|---|---|---|")
    for (ds, sh), g in sub.groupby(["dataset", "shift"], sort=False):
        gm = g.set_index("method")
        out.append(f"| {ds} | {sh} | {gm.loc['auto', 'n_current']:.0f} | {gm.loc['auto', 'coverage']:.2f} | "
                   f"{gm.loc['auto', 'width']:.3f} | {gm.loc['gold_only', 'width']:.3f} | "
                   f"{gm.loc['mv_ppi', 'width']:.3f} | {gm.loc['auto', 'lam']:.2f} |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
