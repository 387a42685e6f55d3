"""Experiment (not a heroeval method yet): a continuous HERO-1 / Rogan–Gladen combination instead of auto's switch.

    .venv/bin/python -m experiments.combination_experiment --resamples 10 --reps 100 --out benchmarks/results/research/robustness

``mu(lam) = (1 - lam) * HERO-1 + lam * RG`` with the lam that minimises the
estimated mean squared error, ``lam = (b2 + vH - c) / (b2 + vH + vR - 2c)``
clipped to [0, 1]: ``b2`` is HERO-1's squared bias relative to Rogan–Gladen
estimated on the mock rounds of held-out gold (paired difference, squared,
less its variance, floored at 0), ``vH`` and ``vR`` the two estimators'
variances on the current round and ``c`` their covariance through the
current items' influence values (their history parts are taken as
uncorrelated). With no bias evidence this is the minimum-variance
combination of two unbiased estimators; with strong evidence it becomes
Rogan–Gladen. Scored like auto: on the simulations of robustness_sim.py and
on the real-data protocol of robustness.py. Writes
``combination_sim.csv`` and ``combination_real.csv``.
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
from heroeval.core.parallel import run_chunks
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.real_data import BINARY
from benchmarks.robustness_sim import DESIGNS


def combination(current: he.AnnotationSet, cal: he.Calibration) -> tuple[float, float]:
    """The combined estimate and its lambda (the calibration must carry its checks)."""
    h = he.hero1(current, cal, exclude_new_labelers=True)
    r = he.rogan_gladen(current, cal, exclude_new_labelers=True)
    if not (math.isfinite(r.estimate) and math.isfinite(r.standard_error) and h.influence and r.influence):
        return h.estimate, 0.0
    assert cal.checks is not None
    row = cal.checks.mock_row("hero1", float(cal.settings.get("history_weight", 1.0)))
    b2 = 0.0
    if row is not None and math.isfinite(row.get("vs_robust", math.nan)):
        s2 = row["vs_robust_se"] ** 2 + h.variance_history + r.variance_history
        b2 = max(row["vs_robust"] ** 2 - s2, 0.0)
    n = h.influence.n
    c = float(h.influence.current @ r.influence.current) / n**2 if r.influence.n == n else 0.0
    vh, vr = h.standard_error**2, r.standard_error**2
    den = b2 + vh + vr - 2 * c
    lam = float(np.clip((b2 + vh - c) / den, 0.0, 1.0)) if den > 0 else 0.0
    return (1 - lam) * h.estimate + lam * r.estimate, lam


def sim_task(args: tuple[str, list[int]]) -> list[dict[str, Any]]:
    design, seeds = args
    fn, kw = DESIGNS[design]
    warnings.simplefilter("ignore")
    out = []
    for s in seeds:
        d = fn(s, **kw)
        cal = he.calibrate(d.history, checks=True)
        est, lam = combination(d.current, cal)
        out.append({"design": design, "rep": s, "combination": est, "lambda": lam,
                    "hero1": he.hero1(d.current, cal).estimate, "truth": d.current_rate})
    return out


def real_task(args: tuple[Any, int, str]) -> list[dict[str, Any]]:
    """Resample r of benchmarks/robustness.py (same seeds), scoring only the combination."""
    data, r, shift = args
    warnings.simplefilter("ignore")
    sp = make_split(data, r, 0.10, 200, shift, 2026)  # the same resample as benchmarks/robustness.py
    hist, cur, truth = sp.history, sp.current, sp.truth
    cal = he.calibrate(hist, checks=True)
    est, lam = combination(cur, cal)
    return [{"dataset": data.name, "shift": shift, "resample": r, "combination": est, "lambda": lam, "truth": truth}]


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--resamples", type=int, default=10)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", default="benchmarks/results/research/robustness")
    a = ap.parse_args()
    out = Path(a.out)
    t0 = time.perf_counter()
    jobs = [(dn, list(range(i, min(i + 10, a.reps)))) for dn in DESIGNS for i in range(0, a.reps, 10)]
    sim = pd.DataFrame(run_chunks(sim_task, jobs, [len(j[1]) for j in jobs], a.workers))
    sim.to_csv(out / "combination_sim.csv", index=False)
    for dn, g in sim.groupby("design", sort=False):
        e_c, e_h = g["combination"] - g["truth"], g["hero1"] - g["truth"]
        print(f"{dn}: combination bias {e_c.mean():+.4f} RMSE {np.sqrt((e_c**2).mean()):.4f}; HERO-1 bias "
              f"{e_h.mean():+.4f} RMSE {np.sqrt((e_h**2).mean()):.4f}; mean lambda {g['lambda'].mean():.2f}")
    rjobs = []
    for name, suffix in BINARY:
        data = load_folder(Path(a.data) / name, binary_suffix=suffix)
        rjobs += [(data, r, shift) for shift in ("none", "half") for r in range(a.resamples)]
    real = pd.DataFrame(run_chunks(real_task, rjobs, [1] * len(rjobs), a.workers))
    real.to_csv(out / "combination_real.csv", index=False)
    summ = pd.read_csv(out / "summary.csv")
    rm = real.assign(e=real["combination"] - real["truth"]).groupby(["dataset", "shift"])["e"].apply(
        lambda e: float(np.sqrt(np.mean(e**2)))).rename("combination")
    ref = summ[summ["method"] != "auto"].groupby(["dataset", "shift"])["rmse"].min().rename("best")
    auto = summ[summ["method"] == "auto"].set_index(["dataset", "shift"])["rmse"].rename("auto")
    t = pd.concat([rm, ref, auto], axis=1)
    t["ratio"] = t["combination"] / t["best"]
    print(t.round(3).to_string())
    print(f"combination within 10 % of the best method: {(t['ratio'] <= 1.10).mean():.0%}; worst {t['ratio'].max():.2f}"
          f" (auto: {(t['auto'] / t['best'] <= 1.10).mean():.0%}, worst {(t['auto'] / t['best']).max():.2f}); "
          f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
