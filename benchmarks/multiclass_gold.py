"""A few expert labels in a K-class round: prediction-powered class shares against the gold alone (issue #42, item 3).

    PYTHONPATH=. .venv/bin/python -m benchmarks.multiclass_gold --resamples 30 --out benchmarks/results/multiclass/gold

Protocol: the splits of :mod:`benchmarks.multiclass_auto` (the current round is 200 gold items, uniform or with one
class boosted, ``shift=rate``; gold on a share rho = 0.10 of the history). Then k of the round's items (k in --k)
have their gold revealed, drawn uniformly. Methods: ``gold_only`` (the k labels' class shares with the
finite-population variance), and :func:`heroeval.multiclass.current_gold.ppi_multiclass` with each predictor (majority
vote; Dawid–Skene fitted to the round's silver labels; HERO-1's posterior under the history's calibration, structure
symmetric, or ordinal on an ordinal set). Scored against the round's realised class shares (all its items' gold):
coverage of the per-class 95 % intervals (logit, as every K-class estimate's) and of the mean class code's Wald
interval, its width, and the L1 error of the shares. ``table.md`` gives the mean-score width of each method over
gold-only's (geometric mean over resamples of the ratio), and the predictor chosen by leave-one-set-out
(:func:`loso`), and the plan's predicted half-width over the obtained one
(:func:`heroeval.multiclass.current_gold.plan_expert_labels_multiclass`); ``--table`` rebuilds it from
resamples.csv.gz.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from heroeval.core.parallel import run_chunks
from heroeval.errors import ConvergenceWarning, HeroEvalError
from heroeval.inference.select import select_items
from heroeval.multiclass import calibrate_multiclass, current_gold, read_multiclass
from heroeval.multiclass.current_gold import PREDICTORS, plan_expert_labels_multiclass, ppi_multiclass
from heroeval.multiclass.estimators import plurality_votes

from benchmarks.multiclass import ORDINAL, load
from benchmarks.multiclass_auto import SETS, split, split_arguments

DESIGNS = ("uniform", "stratified")
"""``uniform``: a simple random sample of k of the round's items. ``stratified``: ``hero select --by COLUMN`` with the
column each item's plurality-vote class (ties to the first class), proportional allocation, at least two per stratum
(:func:`heroeval.inference.select.select_items` without a calibration): the strata where the judges agree hold few
errors, the case a pooled variance floor misses."""


def one(args: tuple[str, pd.DataFrame, pd.DataFrame, tuple[str, ...], int, float, int, int, str, tuple[int, ...],
                    tuple[str, ...], str]) -> list[dict[str, Any]]:
    name, lab, gold, classes, r, rho, n, seed, shift, ks, designs, floor = args
    warnings.simplefilter("ignore", ConvergenceWarning)
    current_gold.STRATUM_FLOOR = floor  # the variant measured (one per run; the product's default unless given)
    hist, cur, truth = split(name, lab, gold, classes, r, rho, n, seed, shift)
    cal = calibrate_multiclass(hist, structure="ordinal" if ORDINAL.get(name, False) else "symmetric")
    ids = cur.annotations.item_ids.astype(str)
    g_all = gold.set_index("item_id").loc[ids, "gold"].astype(str)
    cur_lab = lab[lab["item_id"].isin(set(ids.tolist()))]
    rng = np.random.default_rng([seed, r, 7, 0 if shift == "none" else 1])
    plan = plan_expert_labels_multiclass(hist, half_width=1.0, round_items=cur.n_items)  # its spreads, per k below
    mv_class = np.argmax(plurality_votes(cur), axis=1)
    rows = []
    for k in ks:
        pick = rng.choice(ids.size, size=min(k, ids.size), replace=False)  # drawn first: uniform rows as before
        for design in designs:
            rows += _fits(name, shift, r, k, design, pick, ids, g_all, cur, cur_lab, classes, cal, truth, plan,
                          mv_class, np.random.default_rng([seed, r, k, 11, 0 if shift == "none" else 1]))
    return rows


def _fits(name: str, shift: str, r: int, k: int, design: str, pick: np.ndarray, ids: np.ndarray, g_all: pd.Series,
          cur: Any, cur_lab: pd.DataFrame, classes: tuple[str, ...], cal: Any, truth: np.ndarray, plan: Any,
          mv_class: np.ndarray, gen: np.random.Generator) -> list[dict[str, Any]]:
    K = len(classes)
    vals = np.arange(K, dtype=float)
    truth_ms = float(vals @ truth)
    design_frame = None
    if design == "stratified":
        by = dict(zip(ids.tolist(), [f"plurality {classes[c]}" for c in mv_class], strict=True))
        try:
            sel = select_items(cur.annotations, None, min(k, ids.size), by=by, rng=gen)
        except HeroEvalError:  # more strata than k allows (the product's error): counted as skipped
            return [{"dataset": name, "shift": shift, "resample": r, "k": k, "design": design, "method": "skipped"}]
        ch = sel.chosen
        pick = pd.Index(ids).get_indexer(ch["item_id"].astype(str))
        design_frame = ch[["item_id", "pi", "stratum"]]
    reveal = pd.DataFrame({"item_id": ids[pick], "gold": g_all.to_numpy()[pick]})
    cg = read_multiclass(cur_lab, gold=reveal, classes=classes, ordinal=ORDINAL.get(name, False),
                         round_col=False, name="current", design=design_frame)
    rows = []
    fits = {"gold_only": ppi_multiclass(cg, lam=0.0)}
    for p in PREDICTORS:
        fits[f"ppi:{p}"] = ppi_multiclass(cg, p, calibration=cal)
    for m, est in fits.items():
        ci = est.intervals(0.95)
        ms = est.functional(vals)
        row: dict[str, Any] = {"dataset": name, "shift": shift, "resample": r, "k": k, "design": design,
                               "method": m, "df": float(est.df),
                               "n_current": cg.n_items, "lambda": float(est.details["lambda"]),
                               "l1": float(np.abs(est.estimate - truth).sum()),
                               "ms_cover": bool(ms["ci_low"] <= truth_ms <= ms["ci_high"]),
                               "ms_width": ms["ci_high"] - ms["ci_low"],
                               "ms_hw_plan": (np.nan if design != "uniform" else
                                              plan.half_width_at(k, "ppi") if m == "ppi:majority_vote" else
                                              plan.half_width_at(k, "gold_only") if m == "gold_only" else
                                              np.nan)}
        for c in range(K):
            row[f"cover{c}"] = bool(ci[c][0] <= truth[c] <= ci[c][1])
            row[f"width{c}"] = ci[c][1] - ci[c][0]
        rows.append(row)
    return rows


KEY = ["dataset", "shift", "k", "design", "resample"]


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per (set, shift, k, design, method): coverage, widths (over the same design's gold-only and over the uniform
    design's same method, geometric means over resamples), L1; rows written before designs count as uniform."""
    df = df.assign(design=df["design"].fillna("uniform")) if "design" in df else df.assign(design="uniform")
    df = df[df["method"] != "skipped"]
    cov = [c for c in df.columns if c.startswith("cover")]
    base = df[df["method"] == "gold_only"].set_index(KEY)["ms_width"]
    uni = df[df["design"] == "uniform"].set_index(["dataset", "shift", "k", "resample", "method"])["ms_width"]
    out = []
    for (d, sh, k, dz, m), g in df.groupby(["dataset", "shift", "k", "design", "method"]):
        per_class = g[cov].astype(float).mean().dropna()
        gi = g.set_index(KEY)
        ratio = gi["ms_width"] / base.reindex(gi.index)
        ui = g.set_index(["dataset", "shift", "k", "resample", "method"])
        vs_uni = ui["ms_width"] / uni.reindex(ui.index)
        out.append({"dataset": d, "shift": sh, "k": k, "design": dz, "method": m, "resamples": len(g),
                    "class_cover_mean": per_class.mean(), "class_cover_min": per_class.min(),
                    "ms_cover": g["ms_cover"].mean(), "ms_width": g["ms_width"].mean(),
                    "ms_width_vs_gold_only": float(np.exp(np.log(ratio.clip(lower=1e-12)).mean())),
                    "ms_width_vs_uniform": float(np.exp(np.log(vs_uni.clip(lower=1e-12)).mean())),
                    "l1": g["l1"].mean(), "lambda": g["lambda"].mean(),
                    "plan_over_obtained": float((g["ms_hw_plan"] / (g["ms_width"] / 2)).mean())})
    return pd.DataFrame(out)


def table(s: pd.DataFrame) -> str:
    lines = ["| data set | shift | k | design | method | coverage per class: mean (lowest) | mean score coverage "
             "| mean score width | width / gold-only | width / uniform | L1 | lambda |",
             "|---|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for _, r in s.iterrows():
        lines.append(f"| {r.dataset} | {r['shift']} | {r.k} | {r.design} | {r.method} | {r.class_cover_mean:.2f} "
                     f"({r.class_cover_min:.2f}) | {r.ms_cover:.2f} | {r.ms_width:.3f} | {r.ms_width_vs_gold_only:.2f} "
                     f"| {r.ms_width_vs_uniform:.2f} | {r.l1:.3f} | {r['lambda']:.2f} |")
    lines.append("")
    for (dz, k, m), g in s.groupby(["design", "k", "method"]):
        lines.append(f"{dz}, k = {k}, {m}: coverage per class {g.class_cover_mean.mean():.3f} (lowest cell "
                     f"{g.class_cover_min.min():.2f}), mean score {g.ms_cover.mean():.3f} (lowest {g.ms_cover.min():.2f}), "
                     f"mean-score width over gold-only's {np.exp(np.log(g.ms_width_vs_gold_only).mean()):.2f}, over "
                     f"the uniform design's {np.exp(np.log(g.ms_width_vs_uniform).mean()):.2f} (geometric means over "
                     "cells)")
    lines += ["", "hero plan --expert-labels --classes (the mean score's half-width predicted from the history's gold, "
              "over the one obtained; mean over resamples):", "",
              "| data set | k | ppi:majority_vote | gold_only |", "|---|---:|---:|---:|"]
    for (d, k), g in s[s["design"] == "uniform"].groupby(["dataset", "k"]):
        r = g.groupby("method")["plan_over_obtained"].mean()
        lines.append(f"| {d} | {k} | {r.get('ppi:majority_vote', np.nan):.2f} | {r.get('gold_only', np.nan):.2f} |")
    return "\n".join(lines)


def loso(s: pd.DataFrame) -> str:
    """The recommended predictor chosen by leave-one-set-out: for each held-out set, the predictor with the
    narrowest mean-score interval (geometric mean of width / gold-only's over the other sets' cells) among those whose
    per-class coverage averages at least 0.93 there; the held-out set's figures with that choice."""
    ppi = s[s["method"].str.startswith("ppi:") & (s["design"] == "uniform")]
    lines = ["| held-out set | chosen on the others | coverage per class: mean (lowest) | mean score coverage "
             "| width / gold-only |", "|---|---|---|---:|---:|"]
    for d in sorted(ppi["dataset"].unique()):
        rest = ppi[ppi["dataset"] != d]
        if rest.empty:  # one set only: nothing to choose on
            continue
        agg = rest.groupby("method").agg(cov=("class_cover_mean", "mean"),
                                         w=("ms_width_vs_gold_only", lambda x: float(np.exp(np.log(x).mean()))))
        ok = agg[agg["cov"] >= 0.93]
        pick = str((ok if len(ok) else agg)["w"].idxmin())
        h = ppi[(ppi["dataset"] == d) & (ppi["method"] == pick)]
        lines.append(f"| {d} | {pick} | {h.class_cover_mean.mean():.3f} ({h.class_cover_min.min():.2f}) | "
                     f"{h.ms_cover.mean():.3f} | {np.exp(np.log(h.ms_width_vs_gold_only).mean()):.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    split_arguments(ap)
    ap.add_argument("--k", default="20,50")
    ap.add_argument("--shifts", default="none,rate")
    ap.add_argument("--designs", default="uniform", help=f"comma-separated, of {', '.join(DESIGNS)}")
    ap.add_argument("--stratum-floor", default=current_gold.STRATUM_FLOOR, choices=current_gold.STRATUM_FLOORS,
                    help="the variant of the stratified design's variance floor to measure (STRATUM_FLOOR)")
    ap.add_argument("--sets", default=",".join([*SETS, "adultcontent2"]))
    ap.add_argument("--out", default="benchmarks/results/multiclass/gold")
    ap.add_argument("--table", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.table:
        s = summarize(pd.read_csv(out / "resamples.csv.gz"))
        print(table(s) + "\n\n" + loso(s))
        return
    ks = tuple(int(x) for x in a.k.split(","))
    designs = tuple(a.designs.split(","))
    if set(designs) - set(DESIGNS):
        ap.error(f"--designs: unknown {sorted(set(designs) - set(DESIGNS))}; choose among {list(DESIGNS)}")
    jobs = []
    for name in a.sets.split(","):
        lab, gold, classes = load(Path(a.data) / name)
        print(f"{name}: classes {list(classes)}, {lab['item_id'].nunique()} items, {len(gold)} gold", file=sys.stderr)
        for sh in a.shifts.split(","):
            jobs += [(name, lab, gold, classes, r, a.rho, a.n, a.seed, sh, ks, designs, a.stratum_floor)
                     for r in range(a.resamples)]
    t0 = time.perf_counter()
    rows = run_chunks(one, jobs, [1] * len(jobs), a.workers)
    df = pd.DataFrame(rows).sort_values(["dataset", "shift", "k", "design", "resample", "method"]).reset_index(drop=True)
    df.to_csv(out / "resamples.csv.gz", index=False)
    s = summarize(df)
    s.to_csv(out / "summary.csv", index=False)
    (out / "table.md").write_text(table(s) + "\n\n" + loso(s) + "\n")
    print(table(s) + "\n\n" + loso(s))
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
