#!/usr/bin/env python
"""Issue #39, item 4: cluster-robust standard errors when a round's items come in groups, on the shared sets.

A random round of a set whose items have a natural grouping (TREC topics, trivia questions answered by nine
models, entity mentions, left products, RTE tasks, seed relations: ``real_data.grouped_sets``, the answering
models and mre_treat's batch blocks left out, being rounds rather than groups within one) holds several items of
one group, and the judges' errors on them move together. For every set and shift (none / half / rate) of the
benchmark protocol (``heroeval.workflows.benchmark.make_split``: rho = 0.10, current rounds of up to 200 gold
items), each resample's round is estimated twice with the same calibration (model checks on): as independent
items, and with the set's groups (:meth:`heroeval.AnnotationSet.with_groups`), every method and the recommended
estimate (``auto``). Scored against the round's own gold rate.

    PYTHONPATH=. .venv/bin/python -m benchmarks.grouped_items --reps 30 --out benchmarks/results/benchmark/grouped_items
    PYTHONPATH=. .venv/bin/python -m benchmarks.grouped_items --reps 3 --only zencrowd --shifts none

Writes ``resamples.csv.gz`` (one row per resample, method and ``clustered``) after each set, and prints per
set, shift and method the coverage and mean width of both variants, and the mean design effect.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.errors import HeroEvalWarning
from heroeval.estimators.collection import EstimateCollection
from heroeval.workflows.benchmark import BenchmarkData, make_split

from benchmarks.real_data import grouped_sets

LEFT_OUT = ("triviaqa_llm_judges:exam_taker", "mre_treat:batch")
"""Groupings that are rounds (answering models, batch blocks): a random round holds them all."""


def one_resample(data: BenchmarkData, r: int, shift: str, n: int, seed: int) -> list[dict[str, Any]]:
    assert data.groups is not None
    sp = make_split(data, r, 0.10, n, shift, seed)
    cal = he.calibrate(sp.history, checks=True)
    rows: list[dict[str, Any]] = []
    for clustered in (False, True):
        cur = sp.current.with_groups(data.groups) if clustered else sp.current
        res = he.estimate(cur, cal, method="all", ridge=1.0, exclude_new_labelers=True, recommend=True,
                          drift_check=False)
        assert isinstance(res, EstimateCollection)
        items = list(res.items())
        if res.recommended is not None:
            items.append(("auto", res.recommended.result))
        for m, x in items:
            ci = x.confidence_interval(0.95)
            infl = x.influence
            rows.append({"dataset": data.name, "shift": shift, "resample": r, "method": m, "clustered": clustered,
                         "estimate": x.estimate, "se": x.standard_error, "ci_low": ci.low, "ci_high": ci.high,
                         "truth": sp.truth, "n_current": cur.n_items,
                         "n_groups": 0 if not clustered else int(np.unique(cur.item_group).size),
                         "design_effect": math.nan if infl is None or not clustered else infl.deff,
                         "picked": res.recommended.method if m == "auto" and res.recommended is not None else "",
                         "status": x.status})
    return rows


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    d = df.assign(covered=(df["ci_low"] <= df["truth"]) & (df["truth"] <= df["ci_high"]),
                  width=df["ci_high"] - df["ci_low"], sq=(df["estimate"] - df["truth"]) ** 2)
    g = d.groupby(["dataset", "shift", "method", "clustered"])
    out = g.agg(resamples=("covered", "size"), coverage=("covered", "mean"), width=("width", "mean"),
                rmse=("sq", lambda s: float(np.sqrt(s.mean()))), deff=("design_effect", "mean"),
                groups=("n_groups", "mean")).reset_index()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--shifts", default="none,half,rate")
    ap.add_argument("--only", default="", help="Comma-separated set names (folder or folder:grouping).")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/benchmark/grouped_items"))
    a = ap.parse_args()
    warnings.simplefilter("ignore", HeroEvalWarning)
    warnings.simplefilter("ignore", RuntimeWarning)
    only = [x for x in a.only.split(",") if x]
    sets = [(d, n) for d, n in grouped_sets(Path("../shared/data"), a.n, only) if d.name not in LEFT_OUT]
    a.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for data, n in sets:
        t0 = time.perf_counter()
        for shift in a.shifts.split(","):
            for r in range(a.reps):
                rows.extend(one_resample(data, r, shift, n, a.seed))
        pd.DataFrame(rows).to_csv(a.out / "resamples.csv.gz", index=False)
        print(f"{data.name}: {time.perf_counter() - t0:.0f} s", flush=True)
    s = summarize(pd.DataFrame(rows))
    s.to_csv(a.out / "summary.csv", index=False)
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(s.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()
