"""Does `hero plan` predict HERO-1's half-width? Planned vs simulated, within 10 %.

A pilot calibration is fitted once on a simulated history (six labelers with
sensitivities A and specificities B below, N = 2000 items, 10 % gold, three
labels per item). For each design (guessed rate ``mu``, labels per item
``k``) :func:`heroeval.inference.planning.plan` gives the items ``n`` needed for a 95 %
half-width of 0.04. Then, with ``n`` current items:

* ``fixed``: 400 current rounds drawn from the calibration's own
  parameters, history fixed; simulated half-width
  ``1.96 sqrt(Var_MC(mu_hat) + c'Vc)`` (checks the current-part formula);
* ``full``: 200 replications redrawing history *and* current round from the
  true parameters and recalibrating every time; simulated half-width
  ``1.96 SD_MC(mu_hat)`` (checks the whole variance, history part included),
  and the mean reported half-width ``1.96 SE``.

A difference design (rates 0.3 vs 0.35, k = 3, power 0.8) is checked by
the share of 300 full replications whose two-sided 5 % test of the
difference rejects.

Run (about 4 minutes on one core):

    .venv/bin/python -m benchmarks.plan --out benchmarks/results/assumptions
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.inference.planning import plan, simulate_round
from heroeval.simulate import shift_dgp

from benchmarks.tables import markdown

A = np.array([0.85, 0.8, 0.9, 0.75, 0.8, 0.85])
B = np.array([0.8, 0.85, 0.7, 0.9, 0.75, 0.8])
Z = 1.959963984540054


def history(seed: int) -> he.AnnotationSet:
    return shift_dgp(seed, alpha=A, beta=B, labels_per_item=3, N=2000, n=10, rho=0.10, history_rate=0.4).history


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixed-reps", type=int, default=400)
    ap.add_argument("--full-reps", type=int, default=200)
    ap.add_argument("--power-reps", type=int, default=300)
    ap.add_argument("--half-width", type=float, default=0.04)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    cal = he.calibrate(history(0))
    names = np.asarray(cal.labeler_ids)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", he.HeroEvalWarning)
        for mu in (0.1, 0.3):
            for k in (1, 2, 3, 6):
                row = plan(cal, mu=mu, half_width=args.half_width, labels_per_item=k).rows[0]
                n = math.ceil(row.n_items)
                est = [he.hero1(simulate_round(cal, mu, n, labels_per_item=k, rng=s)[0], cal).estimate
                       for s in range(args.fixed_reps)]
                hw_fixed = Z * math.sqrt(float(np.var(est, ddof=1)) + row.history_variance)
                full, rep_hw = [], []
                for s in range(args.full_reps):
                    c = he.calibrate(history(1000 + s))
                    cur, _ = simulate_round(c, mu, n, labels_per_item=k, rng=5000 + s,
                                            alpha=A[[list(names).index(x) for x in c.labeler_ids]],
                                            beta=B[[list(names).index(x) for x in c.labeler_ids]])
                    r = he.hero1(cur, c)
                    full.append(r.estimate)
                    rep_hw.append(Z * r.standard_error)
                hw_full = Z * float(np.std(full, ddof=1))
                rows.append({"mu": mu, "labels_per_item": k, "n_planned": n, "planned_hw": args.half_width,
                             "sim_hw_fixed": hw_fixed, "ratio_fixed": hw_fixed / args.half_width,
                             "sim_hw_full": hw_full, "ratio_full": hw_full / args.half_width,
                             "mean_reported_hw": float(np.mean(rep_hw)), "full_bias": float(np.mean(full)) - mu})
        summ = pd.DataFrame(rows)
        # power of a difference
        dp = plan(cal, mu=0.3, difference=0.05, labels_per_item=3, power=0.8).rows[0]
        nd = math.ceil(dp.n_items)
        rej = []
        for s in range(args.power_reps):
            c = he.calibrate(history(20_000 + s))
            a_, _ = simulate_round(c, 0.3, nd, labels_per_item=3, rng=30_000 + s, alpha=A, beta=B, name="A")
            b_, _ = simulate_round(c, 0.35, nd, labels_per_item=3, rng=40_000 + s, alpha=A, beta=B, name="B")
            cmp = he.compare(a_, b_, c, method="hero1")
            assert isinstance(cmp, he.Comparison)
            rej.append(cmp.p_value < 0.05)
    power = float(np.mean(rej))
    secs = time.perf_counter() - t0
    md = markdown(summ)
    md += (f"\n\nDifference 0.30 vs 0.35, 3 labels per item, planned power 0.80: n = {nd} items per round; "
           f"simulated power {power:.3f} (MC SE {math.sqrt(power * (1 - power) / len(rej)):.3f}, "
           f"{len(rej)} replications).")
    print(md)
    print(f"\ndone in {secs:.0f} s")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        summ.to_csv(args.out / "plan.csv", index=False)
        (args.out / "plan.md").write_text(md + f"\n\ndone in {secs:.0f} s\n")


if __name__ == "__main__":
    main()
