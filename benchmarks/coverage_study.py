"""Coverage study: do heroeval's 95 % intervals cover 95 % of the time?

Three parts, each seeded:

1. ``rates``: the paper's data-generating process (heroeval.simulate.paper_dgp;
   n = 300, N = 800, J = 10, b0 = -0.2, b1 = 3, labeler parameters redrawn
   every replication), dense labels (every labeler labels every item) and
   sparse labels (3 per item), heterogeneity k and gold rate rho varied.
   Target: the population rate mu0 = E[sigmoid(b0 + b1 X)]. Reported per
   method: bias, Monte-Carlo SD, mean SE, mean SE / MC SD, coverage of the
   Wald and logit intervals.
2. ``compare``: two rounds with the same true rate whose labeler pools are
   shifted (round A drawn mostly from labelers 0-4, round B from 5-9; 3 labels
   per item). Coverage of 0 by the interval for the difference, for every
   method (majority vote is the naive one).
3. ``bootstrap``: the bundled demo data; influence-function SE against a
   two-sample cluster bootstrap SE for every method.

Run (about 15 minutes on 2 cores for the full study):

    .venv/bin/python -m benchmarks.coverage_study --reps 1000 --out benchmarks/results/coverage

It writes ``rates.csv``, ``compare.csv``, ``bootstrap.csv`` and ``coverage.md``
(the tables that docs/inference.md quotes).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.simulate import paper_dgp

METHODS = list(he.METHODS)


def _one_rate(args: tuple[int, int | None, float, float]) -> list[dict[str, Any]]:
    seed, lpi, rho, k = args
    warnings.simplefilter("ignore")
    d = paper_dgp(seed, labels_per_item=lpi, rho=rho, k=k)
    cal = he.calibrate(d.history)
    res = he.estimate(d.current, cal, method="all")
    assert isinstance(res, he.EstimateCollection)
    out = []
    for m in METHODS:
        r = res[m]
        w = r.confidence_interval(0.95, "wald")
        lg = r.confidence_interval(0.95, "logit")
        out.append(
            {
                "seed": seed, "design": "dense" if lpi is None else f"{lpi}/item", "rho": rho, "k": k,
                "method": m, "estimate": r.estimate, "se": r.standard_error, "mu0": d.mu0,
                "cover_wald": w.low <= d.mu0 <= w.high, "cover_logit": lg.low <= d.mu0 <= lg.high,
            }
        )
    return out


def _one_compare(seed: int) -> list[dict[str, Any]]:
    warnings.simplefilter("ignore")
    gen = np.random.default_rng(seed)
    J = 10
    k = 12.0
    alpha = gen.beta(k * 0.85, k * 0.15, J)
    beta = gen.beta(k * 0.55, k * 0.45, J)
    wa = np.r_[np.full(5, 10.0), np.full(5, 1.0)]
    a = paper_dgp(gen, labels_per_item=3, alpha=alpha, beta=beta, current_labeler_weights=wa)
    b = paper_dgp(gen, labels_per_item=3, alpha=alpha, beta=beta, current_labeler_weights=wa[::-1])
    cal = he.calibrate(a.history)  # one history (round A's), shared by both rounds
    cc = he.compare(a.current, b.current, cal, method="all")
    assert isinstance(cc, he.ComparisonCollection)
    out = []
    for m, c in cc.items():
        ci = c.confidence_interval(0.95)
        out.append({"seed": seed, "method": m, "difference": c.estimate, "se": c.standard_error,
                    "covers_zero": ci.low <= 0 <= ci.high, "p_value": c.p_value})
    return out


def _summarise_rates(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (design, rho, k, m), g in df.groupby(["design", "rho", "k", "method"], sort=False):
        e = g["estimate"].to_numpy()
        s = g["se"].to_numpy()
        sd = float(np.std(e, ddof=1))
        rows.append({
            "design": design, "rho": rho, "k": k, "method": m, "reps": len(g),
            "bias": float(np.mean(e - g["mu0"])), "mc_sd": sd, "mean_se": float(np.nanmean(s)),
            "se_over_sd": float(np.nanmean(s)) / sd if sd > 0 else math.nan,
            "cover_wald": float(g["cover_wald"].mean()), "cover_logit": float(g["cover_logit"].mean()),
        })
    return pd.DataFrame(rows)


def _md(df: pd.DataFrame, cols: list[str], fmt: dict[str, str]) -> str:
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    body = ""
    for _, r in df.iterrows():
        body += "| " + " | ".join(format(r[c], fmt.get(c, "")) if c in fmt else str(r[c]) for c in cols) + " |\n"
    return head + body


def _demo_bootstrap(n_boot: int, seed: int) -> pd.DataFrame:
    from heroeval.workflows.demo import run_demo

    d = run_demo()
    t = time.perf_counter()
    boot = he.bootstrap(d.current, d.calibration, method="all", n_resamples=n_boot, rng=seed)
    secs = time.perf_counter() - t
    rows = []
    for m in METHODS:
        r = d.estimates[m]
        b = boot[m]
        rows.append({"method": m, "estimate": r.estimate, "se_influence": r.standard_error,
                     "se_bootstrap": b.standard_error, "ratio": r.standard_error / b.standard_error,
                     "n_resamples": n_boot, "failed": b.n_failed, "seconds": secs})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--boot", type=int, default=500, help="bootstrap resamples on the demo data")
    ap.add_argument("--k", default="3,12,150", help="heterogeneity levels")
    ap.add_argument("--rho", default="0.05,0.10")
    ap.add_argument("--designs", default="dense,3", help="'dense' and/or labels per item")
    ap.add_argument("--parts", default="rates,compare,bootstrap")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default="benchmarks/results/coverage")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = a.parts.split(",")
    t0 = time.perf_counter()
    md = [f"# Coverage study (heroeval {he.__version__})\n",
          f"Command: `python -m benchmarks.coverage_study --reps {a.reps} --boot {a.boot} --k {a.k} --rho {a.rho} "
          f"--designs {a.designs} --parts {a.parts}`\n"]
    with ProcessPoolExecutor(max_workers=a.workers) as ex:
        if "rates" in parts:
            jobs = []
            for design in a.designs.split(","):
                lpi = None if design == "dense" else int(design)
                for rho in map(float, a.rho.split(",")):
                    for k in map(float, a.k.split(",")):
                        jobs += [(s, lpi, rho, k) for s in range(a.reps)]
            rows = [r for chunk in ex.map(_one_rate, jobs, chunksize=20) for r in chunk]
            df = pd.DataFrame(rows)
            df.to_csv(out / "rates.csv.gz", index=False)
            summ = _summarise_rates(df)
            summ.to_csv(out / "rates_summary.csv", index=False)
            md.append("## Rates: coverage of mu0 by 95 % intervals\n")
            md.append(_md(summ, ["design", "rho", "k", "method", "reps", "bias", "mc_sd", "mean_se", "se_over_sd",
                                 "cover_wald", "cover_logit"],
                          {"bias": "+.4f", "mc_sd": ".4f", "mean_se": ".4f", "se_over_sd": ".3f",
                           "cover_wald": ".3f", "cover_logit": ".3f", "rho": ".2f", "k": "g"}))
            print(f"rates done in {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
        if "compare" in parts:
            rows = [r for chunk in ex.map(_one_compare, range(a.reps), chunksize=20) for r in chunk]
            df = pd.DataFrame(rows)
            df.to_csv(out / "compare.csv.gz", index=False)
            summ = df.groupby("method", sort=False).agg(
                reps=("seed", "size"), mean_difference=("difference", "mean"), sd_difference=("difference", "std"),
                mean_se=("se", "mean"), covers_zero=("covers_zero", "mean"),
                rejects_at_5pct=("p_value", lambda p: float(np.mean(p < 0.05))),
            ).reset_index()
            summ.to_csv(out / "compare_summary.csv", index=False)
            md.append("\n## Compare: two rounds, same true rate, shifted labeler pools (3 labels per item)\n")
            md.append(_md(summ, ["method", "reps", "mean_difference", "sd_difference", "mean_se", "covers_zero",
                                 "rejects_at_5pct"],
                          {"mean_difference": "+.4f", "sd_difference": ".4f", "mean_se": ".4f",
                           "covers_zero": ".3f", "rejects_at_5pct": ".3f"}))
            print(f"compare done in {time.perf_counter() - t0:.0f}s", file=sys.stderr, flush=True)
    if "bootstrap" in parts:
        bt = _demo_bootstrap(a.boot, 7)
        bt.to_csv(out / "bootstrap.csv", index=False)
        md.append("\n## Bootstrap vs influence-function SE on the demo data\n")
        md.append(_md(bt, ["method", "estimate", "se_influence", "se_bootstrap", "ratio", "n_resamples", "failed"],
                      {"estimate": ".4f", "se_influence": ".4f", "se_bootstrap": ".4f", "ratio": ".3f"}))
    md.append(f"\nTotal time {time.perf_counter() - t0:.0f} s on {a.workers} worker(s).\n")
    (out / "coverage.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
