"""A labeler new in the current round: coverage of HERO-1 with its anchored estimate.

Design (heroeval.simulate.shift_dgp, every replication seeded by its index):
five labelers with sensitivities A and specificities B (below); the history
(N = 800 items, 10 % gold, rate 0.4) is labelled by L00-L03 only; the
current round (n = 300 items, rate 0.3) by all five, ``k`` distinct labelers
per item, so L04 is new. Per setting, for HERO-1 with the new labeler
estimated (``hero1(new_labelers="estimate")``) and excluded: bias against
the population rate 0.3, Monte-Carlo SD, mean SE, mean SE / SD and coverage
of the 95 % logit interval. The ``strong_new`` setting makes the new labeler
the most reliable (0.95 / 0.95) and the calibrated ones weak (0.7 / 0.7),
where anchoring matters most.

Run (about 1 minute on one core):

    .venv/bin/python -m benchmarks.new_labelers --reps 500 --out benchmarks/results/assumptions
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.simulate import shift_dgp

from benchmarks.tables import markdown

MU = 0.3
SETTINGS = {
    "k3": (np.array([0.85, 0.8, 0.9, 0.75, 0.8]), np.array([0.8, 0.85, 0.7, 0.9, 0.75]), 3),
    "k2": (np.array([0.85, 0.8, 0.9, 0.75, 0.8]), np.array([0.8, 0.85, 0.7, 0.9, 0.75]), 2),
    "strong_new": (np.array([0.7, 0.7, 0.7, 0.7, 0.95]), np.array([0.7, 0.7, 0.7, 0.7, 0.95]), 3),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = []
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", he.HeroEvalWarning)
        for name, (a, b, k) in SETTINGS.items():
            for r in range(args.reps):
                d = shift_dgp(30_000 + r, alpha=a, beta=b, history_pool=np.arange(4), labels_per_item=k, n=300,
                              N=800, rho=0.10, history_rate=0.4, current_rate=MU)
                cal = he.calibrate(d.history)
                for rule in ("estimate", "exclude"):
                    res = he.hero1(d.current, cal, new_labelers=rule)  # type: ignore[arg-type]
                    ci = res.confidence_interval()
                    rows.append({"setting": name, "rule": rule, "est": res.estimate, "se": res.standard_error,
                                 "cover": float(ci.low <= MU <= ci.high)})
    df = pd.DataFrame(rows)
    g = df.groupby(["setting", "rule"], sort=False)
    summ = pd.DataFrame({"reps": g.size(), "bias": g["est"].mean() - MU, "sd": g["est"].std(),
                         "mean_se": g["se"].mean(), "coverage": g["cover"].mean()})
    summ["se_over_sd"] = summ["mean_se"] / summ["sd"]
    summ["coverage_mc_se"] = np.sqrt(summ["coverage"] * (1 - summ["coverage"]) / summ["reps"])
    summ = summ.reset_index()
    secs = time.perf_counter() - t0
    md = markdown(summ)
    print(md)
    print(f"\n{len(df) // 2} replications in {secs:.0f} s")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        summ.to_csv(args.out / "new_labelers.csv", index=False)
        (args.out / "new_labelers.md").write_text(md + f"\n\n{len(df) // 2} replications in {secs:.0f} s\n")


if __name__ == "__main__":
    main()
