"""Grouped protocol: every method and ``auto`` when the history and the current round are different item groups.

    .venv/bin/python -m benchmarks.grouped --reps 30 --out benchmarks/results/benchmark/grouped

(``--reps 3 --only trec2011_crowd`` for a quick look; ``--only`` takes set names,
``trec2011_crowd:topic``, or folder names, ``triviaqa_llm_judges`` for both of
its groupings, comma-separated.)

The sets and their groupings are ``real_data.grouped_sets`` (TREC topics,
trivia questions and answering models, entity mentions, left products, RTE
tasks, mre_treat's seed relations and batch blocks). Each runs
``run_benchmark(split="groups", shifts=["none"], rhos=(0.10,))`` with ``--reps``
resamples on 2 workers, current rounds of up to n = 200 gold items (400 for
triviaqa's answering models): resample r's current round is the (r mod G)-th
round, a group, or with more than ``--group-blocks`` (10) groups a block of
groups (``heroeval.workflows.benchmark.deal_blocks``), and the history is every
other round, one round each.

Writes ``resamples.csv.gz`` (one row per resample and method), ``summary.csv``
(``summarize_benchmark``), ``blocks.csv`` (per set: each group's block and its
items and gold items; the sets with at most ``--group-blocks`` groups list
their groups as rounds) and ``auto.csv``. Prints, per set and method, coverage,
mean interval width and RMSE; per set, ``auto``'s coverage, width and RMSE
beside HERO-1's, the best fixed method's RMSE (fixed: every method but
``auto``) and the oracle's: the RMSE of choosing, in each resample, the fixed
method with the smallest absolute error (what a perfect chooser could do);
and each set's run time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from heroeval.workflows.benchmark import GROUP_BLOCKS, BenchmarkData, deal_blocks, run_benchmark, summarize_benchmark

from benchmarks.real_data import grouped_sets


def block_table(data: BenchmarkData, group_blocks: int | None, seed: int) -> pd.DataFrame:
    """Each group of ``data`` (its labelled items), its round (its block, or itself), its items and gold items."""
    assert data.groups is not None
    items = pd.unique(data.labels["item_id"])
    g = data.groups.reindex(items).dropna().astype(str)
    gold = set(data.gold["item_id"])
    t = pd.DataFrame({"group": g.to_numpy(), "gold": [i in gold for i in g.index]})
    t = t.groupby("group").agg(items=("gold", "size"), gold_items=("gold", "sum")).reset_index()
    blocks = deal_blocks(data, group_blocks, seed)
    t["round"] = t["group"] if blocks is None else t["group"].map(blocks)
    t.insert(0, "dataset", data.name)
    return t[["dataset", "round", "group", "items", "gold_items"]].sort_values(["round", "group"])


def oracle_rmse(df: pd.DataFrame) -> pd.Series:
    """Per data set: the RMSE of the fixed method with the smallest |error| in each resample."""
    fixed = df[(df["method"] != "auto") & np.isfinite(df["estimate"])]
    err = (fixed["estimate"] - fixed["truth"]).abs()
    best = err.groupby([fixed["dataset"], fixed["resample"]]).min()
    out: pd.Series = np.sqrt(np.square(best).groupby(level="dataset").mean())
    return out


def auto_table(summ: pd.DataFrame, df: pd.DataFrame, seconds: dict[str, float]) -> pd.DataFrame:
    """Per data set: ``auto`` beside HERO-1, the best fixed method (by RMSE) and the oracle."""
    oracle = oracle_rmse(df)
    rows = []
    for ds, g in summ.groupby("dataset", sort=False):
        g = g.set_index("method")
        fixed = g.drop(index="auto", errors="ignore")
        best = str(fixed["rmse"].idxmin())
        picks = df[(df["dataset"] == ds) & (df["method"] == "auto")]["picked"]
        rows.append({
            "dataset": ds, "resamples": int(g["resamples"].max()), "n_current": g["n_current"].mean(),
            "auto_coverage": g.loc["auto", "coverage"] if "auto" in g.index else np.nan,
            "auto_width": g.loc["auto", "width"] if "auto" in g.index else np.nan,
            "auto_rmse": g.loc["auto", "rmse"] if "auto" in g.index else np.nan,
            "hero1_coverage": g.loc["hero1", "coverage"], "hero1_width": g.loc["hero1", "width"],
            "hero1_rmse": g.loc["hero1", "rmse"], "best_fixed": best, "best_fixed_rmse": fixed.loc[best, "rmse"],
            "oracle_rmse": oracle.get(ds, np.nan), "seconds": seconds.get(str(ds), np.nan),
            "picked": ", ".join(f"{k} {v}" for k, v in picks.value_counts().items()),
        })
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--reps", type=int, default=30, help="resamples per set (resample r: round r mod G)")
    ap.add_argument("--n", type=int, default=200, help="current gold items at most (triviaqa's answering models: 400)")
    ap.add_argument("--only", default="", help="comma-separated set names (trec2011_crowd:topic) or folders")
    ap.add_argument("--group-blocks", type=int, default=GROUP_BLOCKS,
                    help="more groups than this are dealt into this many blocks (0: every group a round)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/results/benchmark/grouped")
    a = ap.parse_args()
    blocks = None if a.group_blocks == 0 else a.group_blocks
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    sets = grouped_sets(Path(a.data), a.n, a.only.split(",") if a.only else ())
    if not sets:
        sys.exit(f"--only {a.only!r}: no such set")
    frames, tables, seconds = [], [], {}
    t0 = time.perf_counter()
    for data, n in sets:
        tables.append(block_table(data, blocks, a.seed))
        t = time.perf_counter()
        frames.append(run_benchmark(data, split="groups", shifts=["none"], rhos=(0.10,), resamples=a.reps, n=n,
                                    workers=a.workers, seed=a.seed, group_blocks=blocks))
        seconds[data.name] = time.perf_counter() - t
        print(f"{data.name}: {seconds[data.name]:.0f} s", file=sys.stderr, flush=True)
    df = pd.concat(frames, ignore_index=True)
    df.to_csv(out / "resamples.csv.gz", index=False)
    pd.concat(tables, ignore_index=True).to_csv(out / "blocks.csv", index=False)
    summ = summarize_benchmark(df)
    summ.to_csv(out / "summary.csv", index=False)
    tab = auto_table(summ, df, seconds)
    tab.to_csv(out / "auto.csv", index=False)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 30)
    for ds, g in summ.groupby("dataset", sort=False):
        print(f"\n{ds}: {int(g['resamples'].max())} resamples, mean current round {g['n_current'].mean():.0f} items")
        print(g[["method", "coverage", "width", "rmse", "abs_bias"]].round(3).to_string(index=False))
    print("\nauto beside HERO-1, the best fixed method and the oracle (per resample the fixed method nearest the truth):")
    print(tab.drop(columns="picked").round(3).to_string(index=False))
    for r in tab.itertuples(index=False):
        print(f"{r.dataset}: auto picked {r.picked}")
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
