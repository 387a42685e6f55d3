"""Issue #40 item 3: the paired difference of two answering models that answer the same questions (triviaqa).

triviaqa_llm_judges has 9 exam-taker models, each answering the same 400 TriviaQA questions (item id
``<model>__q<NNN>``, ``items.csv`` column ``question_id``), judged by 11 judges, human gold on every item.

Per resample (seeded): two exam takers are rounds A and B, restricted to the same ``--n`` questions drawn at
random (every question answered by both); the history is the other 7 exam takers' items, each model a round of
its own, gold revealed on ``--rho`` of them. ``he.compare(A, B, cal, method=[...])`` is run twice on one
calibration: paired by question (``pairs=`` the item-to-question map) and unpaired (``pairs=None``). Each
method's A - B is scored against the rounds' true gold rates (coverage and width of the 95 % interval), and the
paired width is set against the unpaired one.

    PYTHONPATH=. .venv/bin/python -m benchmarks.paired --reps 30     # about 6 minutes here
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.core.parallel import run_chunks
from heroeval.errors import HeroEvalWarning

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "triviaqa_llm_judges"
METHODS = ["majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1", "hero_joint"]


def _job(job: tuple[int, int, float, list[int]]) -> list[dict[str, Any]]:
    seed, n, rho, reps = job
    labels = pd.read_csv(DATA / "labels.csv")
    gold = pd.read_csv(DATA / "gold.csv")
    items = pd.read_csv(DATA / "items.csv")
    question = items.set_index("item_id")["question_id"].astype(str)
    model = items.set_index("item_id")["exam_taker"]
    takers = np.sort(model.unique())
    g = gold.set_index("item_id")["gold"]
    rows: list[dict[str, Any]] = []
    for r in reps:
        rng = np.random.default_rng([seed, r])
        ma, mb = rng.choice(takers, 2, replace=False)
        qa = set(question[model == ma]) & set(question[model == mb])
        qs = set(rng.choice(sorted(qa), min(n, len(qa)), replace=False).tolist())
        a_items = [i for i in model.index[model == ma] if question[i] in qs]
        b_items = [i for i in model.index[model == mb] if question[i] in qs]
        hist_items = model.index[~model.isin([ma, mb])]
        hist_lab = labels[labels["item_id"].isin(set(hist_items))].copy()
        hist_lab["round"] = model.reindex(hist_lab["item_id"]).to_numpy()
        hg = gold[gold["item_id"].isin(set(hist_items))]
        reveal = hg.sample(n=round(rho * len(hg)), random_state=int(rng.integers(2**31)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HeroEvalWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            hist = he.read_annotations(hist_lab, gold=reveal, round_col="round")
            a = he.read_annotations(labels[labels["item_id"].isin(set(a_items))], round_col=False, name="A")
            b = he.read_annotations(labels[labels["item_id"].isin(set(b_items))], round_col=False, name="B")
            truth = float(g.loc[a.item_ids.astype(str)].mean() - g.loc[b.item_ids.astype(str)].mean())
            cal = he.calibrate(hist, checks=True)
            for design, pairs in (("paired", question), ("unpaired", None)):
                cc = he.compare(a, b, cal, method=[*METHODS, "auto"], history=hist, pairs=pairs)
                got = dict(cc.comparisons)
                if cc.recommended is not None:
                    got["auto"] = cc.recommended.comparison
                for m, c in got.items():
                    ci = c.confidence_interval(0.95)
                    rows.append({"resample": r, "a": ma, "b": mb, "design": design, "method": m,
                                 "chosen": cc.recommended.method if m == "auto" and cc.recommended else m,
                                 "truth": truth, "estimate": c.estimate, "se_current": c.variance_current ** 0.5,
                                 "ci_low": ci.low, "ci_high": ci.high, "width": ci.high - ci.low,
                                 "covered": bool(ci.low <= truth <= ci.high),
                                 "paired_used": c.pairing is not None})
    return rows


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    w = df.pivot_table(index=["resample", "method"], columns="design", values="width")
    s = df.pivot_table(index=["resample", "method"], columns="design", values="se_current")
    out = df.groupby(["method", "design"]).agg(resamples=("covered", "size"), coverage=("covered", "mean"),
                                               width=("width", "mean"), paired_used=("paired_used", "mean"))
    out = out.unstack("design")
    out.columns = [f"{a}_{b}" for a, b in out.columns]
    out["width_ratio"] = (w["paired"] / w["unpaired"]).groupby("method").mean()
    out["current_se_ratio"] = (s["paired"] / s["unpaired"]).groupby("method").mean()
    return out.reset_index()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rho", type=float, default=0.10)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/compare/paired"))
    a = ap.parse_args()
    chunks = np.array_split(np.arange(a.reps), max(a.workers, 1))
    jobs = [(a.seed, a.n, a.rho, c.tolist()) for c in chunks if c.size]
    df = pd.DataFrame(run_chunks(_job, jobs, [len(j[3]) for j in jobs], a.workers, None))
    a.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out / "resamples.csv.gz", index=False)
    s = summarize(df)
    s.to_csv(a.out / "summary.csv", index=False)
    with pd.option_context("display.width", 220, "display.max_columns", 30):
        print(s.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()
