"""Issue #5's simulations: dependent errors (where plain HERO-1 is biased) and the paper's independent design.

Issue #18 adds the dependent designs with a rate shift (the current round drawn with intercept 1.0: rate
about 0.61 against the history's 0.47) and the intervals' mean width, and later a large rate shift (intercept
3.0: rate about 0.80), the stress that the benchmark's odds-9 splits showed to break the interval.

    .venv/bin/python -m benchmarks.robustness_sim --reps 200 --out benchmarks/results/research/robustness

For each design and replication: Stage A with the model checks, every
method and ``auto`` on the current round (target: its realised gold rate),
and the dependence test's p-value on the history's gold items. Writes
``sim_replications.csv.gz`` and ``sim_summary.csv`` (bias, SD, RMSE,
coverage per design and method; the dependence test's rejection rate at 5 %;
what ``auto`` picked) and prints them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.core.parallel import run_chunks
from heroeval.simulate import dependent_dgp, paper_dgp

DESIGNS: dict[str, tuple[Any, dict[str, Any]]] = {
    "dependent, dense": (dependent_dgp, {}),
    "dependent, 5 of 10 labelers per item": (dependent_dgp, {"labels_per_item": 5}),
    "dependent, dense, rate shift": (dependent_dgp, {"current_b0": 1.0}),
    "dependent, 5 of 10 labelers per item, rate shift": (dependent_dgp, {"labels_per_item": 5, "current_b0": 1.0}),
    "dependent, dense, large rate shift": (dependent_dgp, {"current_b0": 3.0}),
    "dependent, 5 of 10 labelers per item, large rate shift": (dependent_dgp, {"labels_per_item": 5,
                                                                                "current_b0": 3.0}),
    "weakly dependent, 5 of 10 labelers per item, large rate shift": (dependent_dgp, {
        "labels_per_item": 5, "hard_fooled": 0.3, "current_b0": 3.0}),
    "weakly dependent, dense, large rate shift": (dependent_dgp, {"hard_fooled": 0.3, "current_b0": 3.0}),
    "paper (independent), dense": (paper_dgp, {}),
    "paper (independent), 3 of 10 labelers per item": (paper_dgp, {"labels_per_item": 3}),
}
METHODS = ["majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1", "hero_joint"]


def one(args: tuple[str, list[int], str]) -> list[dict[str, Any]]:
    design, seeds, shrink = args
    fn, kw = DESIGNS[design]
    rows = []
    warnings.simplefilter("ignore")
    for s in seeds:
        d = fn(s, **kw)
        cal = he.calibrate(d.history, checks=True, shrink=shrink)  # type: ignore[arg-type]
        res = he.estimate(d.current, cal, method=METHODS, recommend=True)
        assert isinstance(res, he.EstimateCollection) and res.recommended is not None
        items = [*res.items(), ("auto", res.recommended.result)]
        for m, r in items:
            lo, hi = r.confidence_interval()
            rows.append({"design": design, "rep": s, "method": m, "estimate": r.estimate, "truth": d.current_rate,
                         "mu0": d.mu0,
                         "ci_low": lo, "ci_high": hi,
                         "picked": "" if m != "auto" else (res.recommended.method + (
                             "" if res.recommended.history_weight is None else f"@{res.recommended.history_weight:g}")),
                         "dependence_p": cal.checks.dependence.p_value if cal.checks else np.nan,
                         "status": r.status, "n_current": d.current.n_items,
                         # the candidate table, so that auto_loso.py can replay other rules on it
                         "candidates": "" if m != "auto" else json.dumps(res.recommended.to_dict()["candidates"]),
                         "recommendation_status": "" if m != "auto" else res.recommended.status})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", default="benchmarks/results/research/robustness")
    ap.add_argument("--designs", default="", help="comma-separated substrings: run only designs whose name has one")
    ap.add_argument("--shrink", default="none", choices=("none", "eb"), help="Stage A's prior (calibrate(shrink=...))")
    a = ap.parse_args()
    designs = [d for d in DESIGNS if not a.designs or any(x in d for x in a.designs.split(","))]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    chunk = 10
    jobs = [(dname, list(range(i, min(i + chunk, a.reps))), a.shrink) for dname in designs
            for i in range(0, a.reps, chunk)]
    df = pd.DataFrame(run_chunks(one, jobs, [len(j[1]) for j in jobs], a.workers))
    df.to_csv(out / "sim_replications.csv.gz", index=False)
    df["err"] = df["estimate"] - df["truth"]
    df["cover"] = (df["ci_low"] <= df["truth"]) & (df["truth"] <= df["ci_high"])
    df["width"] = df["ci_high"] - df["ci_low"]
    summ = df.groupby(["design", "method"], sort=False).agg(
        reps=("err", "size"), bias=("err", "mean"), sd=("err", "std"),
        rmse=("err", lambda e: float(np.sqrt(np.mean(np.square(e))))), coverage=("cover", "mean"),
        width=("width", "mean")).reset_index()
    summ.loc[summ["method"] == "majority_vote", "coverage"] = np.nan
    dep = df[df["method"] == "auto"].groupby("design", sort=False)["dependence_p"].apply(
        lambda p: float(np.mean(p < 0.05)))
    summ["dependence_rejects"] = summ["design"].map(dep)
    summ.to_csv(out / "sim_summary.csv", index=False)
    pd.set_option("display.width", 200)
    print(summ.round(4).to_string(index=False))
    for dname in designs:
        g = summ[summ["design"] == dname].set_index("method")
        picks = df[(df["design"] == dname) & (df["method"] == "auto")]["picked"].value_counts()
        print(f"\n{dname}: auto RMSE / HERO-1 RMSE = {g.loc['auto', 'rmse'] / g.loc['hero1', 'rmse']:.3f}; "
              f"|bias| auto {abs(g.loc['auto', 'bias']):.4f} vs HERO-1 {abs(g.loc['hero1', 'bias']):.4f}; "
              f"dependence test rejects {g['dependence_rejects'].iloc[0]:.3f}; width auto / HERO-1 "
              f"{g.loc['auto', 'width'] / g.loc['hero1', 'width']:.3f}, coverage auto {g.loc['auto', 'coverage']:.3f}")
        print("  auto picked: " + ", ".join(f"{k} {v}" for k, v in picks.items()))
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
