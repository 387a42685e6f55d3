"""Does Stage A's EM finish? Map evaluations, status and time on every shared set and on a sparse simulated crowd.

    .venv/bin/python -m benchmarks.em_convergence --out benchmarks/results/scale          # ~2-5 min on 2 cores

For every binary set in ../shared/data (adultcontent2 in its binary view), the
history is the benchmark's split 0 (``heroeval.workflows.benchmark.make_split``,
rho = 0.10 gold, 200 current items held out, no shift), calibrated with the
defaults (SQUAREM, parameter tolerance 1e-8, at most 10,000 map evaluations,
no model checks, no covariance). For every multi-class set, the whole set with
gold on a seeded 10 % of its items, ``calibrate_multiclass`` (symmetric
structure). Plus a simulated crowd: 1,000 labelers with sensitivities and
specificities from the paper's Beta design, 2-5 labels per item, about 100
items per labeler (28,500 items), 10 % gold.

Writes ``em_convergence.csv`` and prints a markdown table: map evaluations,
converged, the last parameter change, labelers with a parameter within 1e-6 of
0 or 1, and seconds (wall, one fit, on a machine that may be shared). Binary
sets are fitted twice: "before", SQUAREM alone (Stage A without its Newton
phase: ``calibration.information_of`` patched to give none), and "after", the
default (Newton steps once SQUAREM has spent 100 map evaluations); with the
largest parameter difference between the two and their log-likelihoods'.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.errors import ConvergenceWarning
from heroeval.multiclass import calibrate_multiclass, read_multiclass
from heroeval.stage_a import calibration as calmod
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.real_data import BINARY
from benchmarks.tables import markdown

MULTICLASS = ["adultcontent2", "dog", "face", "snow_wsd", "weather_sentiment_amt", "weather_sentiment_cf"]


def crowd(seed: int = 0, J: int = 1000, per_labeler: int = 100, gold_share: float = 0.10) -> he.AnnotationSet:
    """A sparse crowd: J labelers, 2-5 distinct labelers per item, about ``per_labeler`` items each."""
    rng = np.random.default_rng(seed)
    alpha = rng.beta(0.85 * 12, 0.15 * 12, J)
    beta = rng.beta(0.55 * 12, 0.45 * 12, J)
    n_items = int(J * per_labeler / 3.5)
    y = rng.random(n_items) < 0.3
    k = rng.integers(2, 6, n_items)
    item = np.repeat(np.arange(n_items), k)
    lab = np.concatenate([rng.choice(J, size=int(kk), replace=False) for kk in k])
    yi = y[item]
    p1 = np.where(yi, alpha[lab], 1 - beta[lab])
    label = (rng.random(item.size) < p1).astype(int)
    g = np.flatnonzero(rng.random(n_items) < gold_share)
    return he.AnnotationSet.from_arrays(item, lab.astype(str), label, gold=(g, y[g].astype(int)), name="crowd J=1000")


def _fit(hist: he.AnnotationSet, newton: bool) -> tuple[he.Calibration, float]:
    real = calmod.information_of
    if not newton:
        calmod.information_of = lambda d: None  # type: ignore[assignment,return-value]
    try:
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            cal = he.calibrate(hist, covariance=False)
        return cal, time.perf_counter() - t
    finally:
        calmod.information_of = real


def binary_row(name: str, hist: he.AnnotationSet) -> dict[str, object]:
    old, sec_old = _fit(hist, newton=False)
    cal, sec = _fit(hist, newton=True)
    conv = cal.convergence
    near = int(np.sum((np.minimum(cal.alpha, 1 - cal.alpha) < 1e-6) | (np.minimum(cal.beta, 1 - cal.beta) < 1e-6)))
    v_old = np.concatenate([old.alpha, old.beta, old.round_prevalence])
    v_new = np.concatenate([cal.alpha, cal.beta, cal.round_prevalence])
    return {"data": name, "kind": "binary", "labelers": cal.n_labelers, "annotations": hist.n_annotations,
            "maps_before": old.convergence.n_iter, "seconds_before": round(sec_old, 2),
            "map_evaluations": conv.n_iter, "newton_steps": cal.history_fit.newton_steps if cal.history_fit else 0,
            "converged": conv.converged, "last_change": f"{conv.max_change:.1e}",
            "labelers_at_bound": near, "status": "converged" if conv.converged else "max_iter",
            "seconds": round(sec, 2), "max_param_diff": f"{np.max(np.abs(v_new - v_old)):.1e}",
            "loglik_after_minus_before": f"{conv.loglik - old.convergence.loglik:+.1e}"}


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--out", default="")
    ap.add_argument("--skip-multiclass", action="store_true")
    a = ap.parse_args()
    rows: list[dict[str, object]] = []
    for name, suffix in BINARY:
        data = load_folder(Path(a.data) / name, binary_suffix=suffix, text_components=0)
        hist = make_split(data, 0, 0.10, 200, "none", 2026).history
        rows.append(binary_row(name, hist))
        print(rows[-1], file=sys.stderr, flush=True)
    rows.append(binary_row("simulated crowd (J = 1,000)", crowd()))
    print(rows[-1], file=sys.stderr, flush=True)
    if not a.skip_multiclass:
        for name in MULTICLASS:
            p = Path(a.data) / name
            md = read_multiclass(p / "labels.csv", gold=p / "gold.csv", round_col=False)
            rng = np.random.default_rng(2026)
            keep = md.annotations.gold >= 0
            hide = np.flatnonzero(keep)[rng.random(int(keep.sum())) >= 0.10]
            g = md.annotations.gold.copy()
            g[hide] = -1
            md = replace(md, annotations=replace(md.annotations, gold=g))
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                mc = calibrate_multiclass(md, structure="symmetric", covariance=False)
            rows.append({"data": name, "kind": "multi-class", "labelers": md.annotations.n_labelers,
                         "annotations": md.annotations.n_annotations, "maps_before": "-", "seconds_before": "-",
                         "map_evaluations": mc.convergence.n_iter, "newton_steps": "-",
                         "converged": mc.convergence.converged, "last_change": f"{mc.convergence.max_change:.1e}",
                         "labelers_at_bound": "-", "status": "converged" if mc.convergence.converged else "max_iter",
                         "seconds": round(time.perf_counter() - t, 2), "max_param_diff": "-",
                         "loglik_after_minus_before": "-"})
            print(rows[-1], file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    print(markdown(df))
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        df.to_csv(Path(a.out) / "em_convergence.csv", index=False)


if __name__ == "__main__":
    main()
