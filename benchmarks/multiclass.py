"""Multi-class benchmark: every K-class method on the multi-class sets in ../shared/data, by resampling.

    .venv/bin/python -m benchmarks.multiclass --resamples 20 --out benchmarks/results/multiclass

Protocol (as heroeval.workflows.benchmark for binary data): per resample, the current
round is n items drawn among the gold items (at most 40 % of them); every
other labelled item is history; gold is revealed on a random share rho of
the history items (all of the history's gold items when it has fewer). Each
method's class-prevalence vector is scored against the current items' gold
class shares: RMSE per class, L1 error of the vector, and coverage of the
per-class 95 % intervals (logit, as the binary rates). Also the mean class
value (class codes as values) and its Wald interval, for the ordinal sets.

``--structures`` lists the confusion structures to fit, or the rules that choose one (``auto``: the held-out
gold log score, ``bic``); the ``structure`` column is what was asked, ``chosen`` what the rule chose.

Writes resamples.csv.gz, summary.csv and table.md into --out.
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
from heroeval.errors import ConvergenceWarning
from heroeval.multiclass import MC_METHODS, calibrate_multiclass, estimate_multiclass, read_multiclass

SETS = ["dog", "face", "weather_sentiment_amt", "weather_sentiment_cf", "adultcontent2", "snow_wsd"]
ORDINAL = {"adultcontent2": True}  # G < P < R < X ratings; the others are nominal


def load(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, ...]]:
    """labels and gold of a folder, through the multi-class reader (validates classes, rows)."""
    d = read_multiclass(folder / "labels.csv", gold=folder / "gold.csv", round_col=False)
    ds = d.annotations
    idx = ds.annotation_item
    labels = pd.DataFrame({"item_id": ds.item_ids[idx].astype(str), "labeler_id": ds.labeler_ids[ds.labeler].astype(str),
                           "label": np.asarray(d.classes, dtype=object)[ds.label]})
    g = ds.gold >= 0
    gold = pd.DataFrame({"item_id": ds.item_ids[g].astype(str), "gold": np.asarray(d.classes, dtype=object)[ds.gold[g]]})
    return labels, gold, d.classes


def one(args: tuple[str, pd.DataFrame, pd.DataFrame, tuple[str, ...], int, float, int, int, str]) -> list[dict[str, Any]]:
    name, lab, gold, classes, r, rho, n, seed, structure = args
    warnings.simplefilter("ignore", ConvergenceWarning)
    rng = np.random.default_rng([seed, r, int(rho * 1000)])
    gold_items = gold["item_id"].to_numpy()
    n_cur = min(n, int(0.4 * gold_items.size))
    cur_items = set(rng.choice(gold_items, n_cur, replace=False).tolist())
    is_cur = lab["item_id"].isin(cur_items).to_numpy()
    hist_lab, cur_lab = lab[~is_cur], lab[is_cur]
    hist_ids = hist_lab["item_id"].unique()
    pool = gold[gold["item_id"].isin(set(hist_ids))]
    want = max(1, round(rho * hist_ids.size))
    reveal = pool.sample(n=min(want, len(pool)), random_state=int(rng.integers(2**31)))
    ordinal = ORDINAL.get(name, False)
    hist = read_multiclass(hist_lab, gold=reveal, classes=classes, ordinal=ordinal, round_col=False, name="history")
    cur = read_multiclass(cur_lab, classes=classes, ordinal=ordinal, round_col=False, name="current")
    K = len(classes)
    g = gold.set_index("item_id").loc[cur.annotations.item_ids.astype(str), "gold"].to_numpy()
    truth = np.array([(g == c).mean() for c in classes])
    t0 = time.perf_counter()
    cal = calibrate_multiclass(hist, structure=structure)
    t_cal = time.perf_counter() - t0
    res = estimate_multiclass(cur, cal, method="all", exclude_new_labelers=True)
    rows = []
    vals = np.arange(K, dtype=float)
    for m, x in res.items():
        se = x.standard_errors()
        ci = x.intervals(0.95)
        ms = x.functional(vals)
        row: dict[str, Any] = {"dataset": name, "structure": structure, "chosen": cal.structure, "rho": rho,
                               "resample": r, "method": m,
                               "n_current": cur.n_items, "n_history": hist.n_items,
                               "rho_effective": hist.annotations.n_gold / hist.n_items,
                               "l1": float(np.abs(x.estimate - truth).sum()), "status": x.status, "t_cal": t_cal,
                               "mean_est": ms["estimate"], "mean_truth": float(vals @ truth),
                               "mean_cover": bool(ms["ci_low"] <= vals @ truth <= ms["ci_high"])}
        for k in range(K):
            row[f"est{k}"] = float(x.estimate[k])
            row[f"truth{k}"] = float(truth[k])
            row[f"se{k}"] = float(se[k])
            row[f"cover{k}"] = bool(ci[k][0] <= truth[k] <= ci[k][1])
        rows.append(row)
    return rows


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (ds, st, rho, m), g in df.groupby(["dataset", "structure", "rho", "method"], sort=False):
        K = sum(1 for c in g.columns if c.startswith("est") and g[c].notna().any())
        err = np.stack([g[f"est{k}"] - g[f"truth{k}"] for k in range(K)], axis=1)
        cov = np.stack([g[f"cover{k}"].astype(float) for k in range(K)], axis=1)
        rmse = np.sqrt(np.nanmean(err**2, axis=0))
        out.append({"dataset": ds, "structure": st, "rho": rho, "method": m, "resamples": len(g), "K": K,
                    "n_current": g["n_current"].mean(), "rho_effective": g["rho_effective"].mean(),
                    "l1": g["l1"].mean(), "rmse_mean_class": float(rmse.mean()),
                    "rmse_per_class": " ".join(f"{v:.3f}" for v in rmse),
                    "coverage_mean_class": float(np.nanmean(cov)) if m != "majority_vote" else np.nan,
                    "coverage_per_class": " ".join(f"{v:.2f}" for v in cov.mean(axis=0)) if m != "majority_vote" else "",
                    "mean_score_rmse": float(np.sqrt(np.mean((g["mean_est"] - g["mean_truth"]) ** 2))),
                    "mean_score_cover": float(g["mean_cover"].mean()) if m != "majority_vote" else np.nan,
                    "boundary_share": float((g["status"] != "interior").mean()), "t_cal": g["t_cal"].mean()})
    order = {m: i for i, m in enumerate(MC_METHODS)}
    s = pd.DataFrame(out)
    s["_o"] = s["method"].map(order)
    return s.sort_values(["dataset", "structure", "rho", "_o"]).drop(columns="_o").reset_index(drop=True)


def table(s: pd.DataFrame) -> str:
    short = {"majority_vote": "MV", "dawid_skene": "DS", "gold_proportion": "GP", "hero1": "H1", "hero2": "H2",
             "hero_joint": "HJ"}
    methods = [m for m in MC_METHODS if m in set(s["method"])]
    lines = ["| data set | K | structure | n | " + " | ".join(short.get(m, m) for m in methods) + " |",
             "|---|---|---|---|" + "---|" * len(methods)]
    for (ds, st), g in s.groupby(["dataset", "structure"], sort=False):
        g = g.set_index("method")
        best = g["l1"].idxmin()
        cells = []
        for m in methods:
            if m not in g.index:
                cells.append("—")
                continue
            r = g.loc[m]
            c = f"{r['l1']:.3f}" + ("" if m == "majority_vote" else f" ({r['coverage_mean_class']:.2f})")
            cells.append(f"**{c}**" if m == best else c)
        lines.append(f"| {ds} | {int(g['K'].iloc[0])} | {st} | {g['n_current'].iloc[0]:.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--resamples", type=int, default=20)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rho", type=float, default=0.10)
    ap.add_argument("--structures", default="full,symmetric")
    ap.add_argument("--only", default="")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default="benchmarks/results/multiclass")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for name in SETS:
        if a.only and name not in a.only.split(","):
            continue
        lab, gold, classes = load(Path(a.data) / name)
        print(f"{name}: classes {list(classes)}, {lab['item_id'].nunique()} items, {len(gold)} gold", file=sys.stderr)
        for st in a.structures.split(","):
            jobs += [(name, lab, gold, classes, r, a.rho, a.n, a.seed, st) for r in range(a.resamples)]
    t0 = time.perf_counter()
    rows = run_chunks(one, jobs, [1] * len(jobs), a.workers)
    df = pd.DataFrame(rows).sort_values(["dataset", "structure", "resample", "method"]).reset_index(drop=True)
    df.to_csv(out / "resamples.csv.gz", index=False)
    s = summarize(df)
    s.to_csv(out / "summary.csv", index=False)
    (out / "table.md").write_text(table(s) + "\n")
    print(table(s))
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
