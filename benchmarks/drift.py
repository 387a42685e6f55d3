"""Labeler drift: size and power of heroeval.checks.drift.check_drift, and the bias it removes.

Design (heroeval.simulate.shift_dgp, every replication seeded by its index):
six labelers with fixed sensitivities A and specificities B (below); history
N = 1000 items, 10 % with gold, rate 0.4; current round n = 400 items, rate
0.3; three distinct labelers per item drawn uniformly. In the current round
labeler L00's specificity drops by ``shift`` (0 = no drift). Per setting:

* ``overall``: rejection rate of the overall chi-squared test at 0.05;
* ``flag_L00``: share of replications flagging L00 (sequential Holm, 0.05);
* ``false_flags``: share flagging any other labeler (sequential Holm), and
  ``false_flags_single``: the same with single-step Holm from one fit;
* bias (vs the population rate 0.3), SD and 95 % coverage of HERO-1 with all
  labelers, after dropping the flagged labelers (``drop``), after
  re-estimating them from the current round (``reest``), and with L00
  dropped by an oracle.

Run (about 3 minutes on one core):

    .venv/bin/python -m benchmarks.drift --reps 500 --out benchmarks/results/assumptions
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.checks.drift import check_drift, reestimate_without
from heroeval.simulate import shift_dgp

from benchmarks.tables import markdown

A = np.array([0.85, 0.8, 0.9, 0.75, 0.8, 0.85])
B = np.array([0.8, 0.85, 0.7, 0.9, 0.75, 0.8])
MU = 0.3


def one(seed: int, shift: float) -> dict[str, float]:
    cb = B.copy()
    cb[0] -= shift
    d = shift_dgp(seed, alpha=A, beta=B, current_beta=cb, labels_per_item=3, n=400, N=1000, rho=0.10,
                  history_rate=0.4, current_rate=MU)
    cal = he.calibrate(d.history)
    chk = check_drift(d.current, cal, warn=False)
    single = check_drift(d.current, cal, warn=False, sequential=False)
    out: dict[str, float] = {
        "seed": seed, "shift": shift, "overall": float(chk.overall_p < 0.05),
        "flag_L00": float("L00" in chk.flagged),
        "false_flags": float(any(x != "L00" for x in chk.flagged)),
        "false_flags_single": float(any(x != "L00" for x in single.flagged)),
    }
    fits = {"all": he.hero1(d.current, cal),
            "oracle": reestimate_without(d.current, cal, ["L00"])}
    fits["drop"] = reestimate_without(d.current, cal, chk) if chk.flagged else fits["all"]
    fits["reest"] = reestimate_without(d.current, cal, chk, how="estimate") if chk.flagged else fits["all"]
    for k, r in fits.items():
        ci = r.confidence_interval()
        out[f"est_{k}"] = r.estimate
        out[f"cov_{k}"] = float(ci.low <= MU <= ci.high)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--shifts", default="0,0.05,0.1,0.15,0.2,0.3")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = []
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", he.HeroEvalWarning)
        for shift in (float(x) for x in args.shifts.split(",")):
            for r in range(args.reps):
                rows.append(one(r, shift))
    df = pd.DataFrame(rows)
    g = df.groupby("shift")
    summ = g[["overall", "flag_L00", "false_flags", "false_flags_single"]].mean()
    for k in ("all", "drop", "reest", "oracle"):
        summ[f"bias_{k}"] = g[f"est_{k}"].mean() - MU
        summ[f"sd_{k}"] = g[f"est_{k}"].std()
        summ[f"cov_{k}"] = g[f"cov_{k}"].mean()
    summ = summ.reset_index()
    summ.insert(1, "reps", args.reps)
    secs = time.perf_counter() - t0
    md = markdown(summ)
    print(md)
    print(f"\n{len(df)} replications in {secs:.0f} s")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        summ.to_csv(args.out / "drift.csv", index=False)
        (args.out / "drift.md").write_text(md + f"\n\n{len(df)} replications in {secs:.0f} s\n")


if __name__ == "__main__":
    main()
