#!/usr/bin/env python
"""Where the model checks' time goes: compiled passes and wall time per phase of ``calibrate(checks=True)``.

    .venv/bin/python -m benchmarks.check_passes --data /tmp/cc      # a folder written by calibrate_checks.py

Reads ``history.parquet`` and ``gold.parquet`` from ``--data``, fits once to
compile, then calibrates with the checks while counting the compiled design's
passes (E-step passes, posterior passes, pair passes of the information) and
their time, per phase: the fit itself, each whole-history refit at a history
weight, each weight's fold refits, each weight's information. The fold refits
run in lockstep (``FoldFits.fit_many``): "lockstep passes" are their shared
passes over the annotations (one per round, serving every unfinished fold),
"refit passes" the sum of the folds' own map evaluations.
"""

from __future__ import annotations

import argparse
import collections
import functools
import time
from collections.abc import Callable
from typing import Any

import heroeval as he
from heroeval.stage_a import folds as cal_mod
from heroeval.stage_a import kernels

phase = ["fit"]
count: collections.Counter[tuple[str, str]] = collections.Counter()
seconds: collections.Counter[tuple[str, str]] = collections.Counter()


def _count(cls: type, name: str, key: str) -> None:
    f = getattr(cls, name)

    @functools.wraps(f)
    def g(self: Any, *a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        r = f(self, *a, **k)
        count[(phase[0], key)] += 1
        seconds[(phase[0], key)] += time.perf_counter() - t
        return r

    setattr(cls, name, g)


def _phase(cls: type, name: str, label: Callable[[tuple[Any, ...], dict[str, Any]], str]) -> None:
    f = getattr(cls, name)

    @functools.wraps(f)
    def g(self: Any, *a: Any, **k: Any) -> Any:
        old, phase[0] = phase[0], label(a, k)
        t = time.perf_counter()
        try:
            return f(self, *a, **k)
        finally:
            seconds[(phase[0], "wall")] += time.perf_counter() - t
            phase[0] = old

    setattr(cls, name, g)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    a = ap.parse_args()
    h = he.read_annotations(f"{a.data}/history.parquet", gold=f"{a.data}/gold.parquet")
    he.calibrate(h, checks=True)  # compile
    _count(kernels.CompactDesign, "_pass", "E-step passes")
    _count(kernels.CompactDesign, "posterior", "posterior passes")
    _count(kernels.CompactDesign, "covariance_sums", "pair passes")
    _count(cal_mod.FoldFits, "_fold_sums", "lockstep passes")
    many = cal_mod.FoldFits.fit_many

    def fit_many(self: Any, *a: Any, **k: Any) -> Any:
        r = many(self, *a, **k)
        count[(phase[0], "refit passes")] += sum(f.n_iter for f in r)
        return r

    cal_mod.FoldFits.fit_many = fit_many  # type: ignore[method-assign]
    _phase(cal_mod.FoldFits, "fit_many", lambda a, k: f"fold refits, w = {a[0]:g}")
    _phase(cal_mod.FoldFits, "fit",
           lambda a, k: f"fold refits, w = {a[0]:g}" if k.get("drop") is not None else f"whole refit, w = {a[0]:g}")
    _phase(cal_mod.FoldFits, "information", lambda a, k: f"information, w = {a[0]:g}")
    t = time.perf_counter()
    he.calibrate(h, checks=True)
    total = time.perf_counter() - t
    print(f"calibrate(checks=True): {total:.2f} s\n")
    print("| phase | E-step passes | lockstep passes (refit passes) | posterior passes | pair passes | seconds |\n"
          "|---|---:|---:|---:|---:|---:|")
    for p in sorted({p for p, _ in count} | {p for p, _ in seconds}):
        wall = seconds[(p, "wall")] or sum(seconds[(p, k)] for k in ("E-step passes", "posterior passes",
                                                                        "pair passes"))
        print(f"| {p} | {count[(p, 'E-step passes')]} | {count[(p, 'lockstep passes')]} "
              f"({count[(p, 'refit passes')]}) | {count[(p, 'posterior passes')]} | {count[(p, 'pair passes')]} | "
              f"{wall:.2f} |")


if __name__ == "__main__":
    main()
