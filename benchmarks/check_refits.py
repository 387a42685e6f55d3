#!/usr/bin/env python
"""The model checks' refits before and after a change: their results and their passes, history by history.

    .venv/bin/python -m benchmarks.check_refits --out /tmp/after.pkl [--data /tmp/cc]
    PYTHONPATH=/tmp/base/src .venv/bin/python -m benchmarks.check_refits --out /tmp/before.pkl   # another version
    (--skip trec2011_crowd leaves out a set whose refits are "cold", from each fold's gold start, and slow)
    .venv/bin/python -m benchmarks.check_refits --compare /tmp/before.pkl /tmp/after.pkl

Runs ``calibrate(history, checks=True)`` on the benchmark protocol's splits 0
and 1, shifts none and rate, of every binary set in ``../shared/data``, on the
bundled example's history and, with ``--data``, on a folder written by
``calibrate_checks.py``; counts the map evaluations of the checks' refits
(every ``FoldFits.fit``) and keeps the checks' record. ``--compare`` prints,
per history, the two versions' refit map evaluations and the largest
differences of the checks' results: log scores, the mock rounds' estimates
and standard errors, and the per-item values (``ModelChecks.items``:
influence values, and log-likelihood ratios through the posterior they
give), and whether the chosen history weight is the same. The refits stop by Stage A's rule (one EM step moves no parameter by
more than 1e-8), so a change of path moves the results by about that much
times the conditioning, not more.
"""

from __future__ import annotations

import argparse
import pickle
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit

import heroeval as he
from heroeval.stage_a import folds as cal_mod
from heroeval.workflows.benchmark import load_folder, make_split
from heroeval.workflows.demo import example_paths

from benchmarks.real_data import BINARY

HERE = Path(__file__).resolve().parent

passes = [0]


def _count() -> None:
    f = cal_mod.FoldFits.fit

    def g(self: Any, *a: Any, **k: Any) -> Any:
        r = f(self, *a, **k)
        passes[0] += r.n_iter
        return r

    cal_mod.FoldFits.fit = g  # type: ignore[method-assign]
    many = getattr(cal_mod.FoldFits, "fit_many", None)
    if many is not None:  # refits in lockstep: each refit's map evaluations (one shared pass serves several)

        def gm(self: Any, *a: Any, **k: Any) -> Any:
            before = passes[0]
            r = many(self, *a, **k)
            if passes[0] == before:  # not already counted by fit
                passes[0] += sum(x.n_iter for x in r)
            return r

        cal_mod.FoldFits.fit_many = gm  # type: ignore[method-assign]


def _record(c: he.Calibration) -> dict[str, Any]:
    ch = c.checks
    assert ch is not None
    return {"log_score": {float(k): v for k, v in ch.log_score.items()}, "chosen": ch.chosen_weight,
            "mock": [(m["method"], m["history_weight"], m["estimate"], m["bias_se"]) for m in ch.mock],
            "items": {k: np.asarray(v, dtype=float) for k, v in ch.items.items()}}


def histories(root: Path, data: str, skip: set[str]) -> list[tuple[str, he.AnnotationSet]]:
    out = []
    for name, suffix in BINARY:
        if name in skip:
            continue
        bd = load_folder(root / name, binary_suffix=suffix, text_components=0)
        for shift in ("none", "rate"):
            for r in (0, 1):
                out.append((f"{name}{suffix} {shift} {r}", make_split(bd, r, 0.10, 200, shift, 0).history))
    ex = example_paths()
    out.append(("example", he.read_annotations(ex["history"], gold=ex["gold"])))
    if data:
        out.append((f"{data} (1e7)", he.read_annotations(f"{data}/history.parquet", gold=f"{data}/gold.parquet")))
    return out


def run(root: Path, data: str, out: str, skip: set[str]) -> None:
    _count()
    rec: dict[str, Any] = {}
    for name, h in histories(root, data, skip):
        passes[0] = 0
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = he.calibrate(h, checks=True)
        rec[name] = {**_record(c), "passes": passes[0], "seconds": time.perf_counter() - t}
        print(f"{name}: {passes[0]} refit map evaluations, {rec[name]['seconds']:.2f} s", flush=True)
    with open(out, "wb") as f:
        pickle.dump(rec, f)


def _diff(a: Any, b: Any) -> float:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        return float("inf")
    both = np.isfinite(x) & np.isfinite(y)
    if (np.isfinite(x) != np.isfinite(y)).any():
        return float("inf")
    return float(np.max(np.abs(x[both] - y[both]), initial=0.0))


def compare(pa: str, pb: str) -> None:
    A, B = (pickle.load(open(p, "rb")) for p in (pa, pb))
    print("| history | refit map evaluations: before | after | log score | mock estimates, SEs | per-item values "
          "| same weight |\n|---|---:|---:|---:|---:|---:|---|")
    tot = [0, 0]
    worst = [0.0, 0.0, 0.0]
    for name in A:
        a, b = A[name], B[name]
        ls = max((_diff(a["log_score"][w], b["log_score"][w]) for w in a["log_score"]), default=0.0)
        mk = max((_diff(x[2:], y[2:]) for x, y in zip(a["mock"], b["mock"], strict=True)), default=0.0)
        # a log-likelihood ratio through the posterior it gives: a labeler fitted within 1e-9 of 1 makes the ratio
        # itself move by the EM tolerance divided by that distance (as tests/unit/test_distributed.py compares them)
        it = max((_diff(*(expit(x[k]) if k.endswith(":llr") else x[k] for x in (a["items"], b["items"])))
                  for k in a["items"]), default=0.0)
        tot[0] += a["passes"]
        tot[1] += b["passes"]
        worst = [max(worst[0], ls), max(worst[1], mk), max(worst[2], it)]
        print(f"| {name} | {a['passes']} | {b['passes']} | {ls:.1e} | {mk:.1e} | {it:.1e} | "
              f"{'yes' if a['chosen'] == b['chosen'] else 'NO'} |")
    print(f"| all {len(A)} | {tot[0]} | {tot[1]} | {worst[0]:.1e} | {worst[1]:.1e} | {worst[2]:.1e} | |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--data", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--compare", nargs=2, default=None)
    ap.add_argument("--skip", default="", help="comma-separated set names to leave out (trec2011_crowd: its cold "
                    "refits, the same in both versions, take minutes each)")
    a = ap.parse_args()
    if a.compare:
        compare(*a.compare)
    else:
        run(Path(a.root), a.data, a.out, {x for x in a.skip.split(",") if x})


if __name__ == "__main__":
    main()
