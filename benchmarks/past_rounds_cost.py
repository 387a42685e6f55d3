#!/usr/bin/env python
"""What the past-round check costs: ``calibrate(checks=True)`` with and without it, on a history of rounds.

    .venv/bin/python -m benchmarks.past_rounds_cost                        # 1e6 annotations, J = 50, 10 rounds
    .venv/bin/python -m benchmarks.past_rounds_cost --size 1e7 --repeats 3

A synthetic history (``--rounds`` rounds of equal size, rates 0.2-0.6, 3-5 of ``--labelers`` labelers per item,
1 % of items with gold) is built in memory once; ``calibrate(checks=True)`` then runs with
``check_rounds=False`` (the checks of before) and ``check_rounds=True`` (the default: up to 5 more refits at
each weight auto can use, usually two), alternated ``--repeats`` times after one untimed call of each (numba compiles into its disk
cache). Prints each variant's median wall time and the ratio of the medians, and the time of the
calibration without any checks, in the same process.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

import heroeval as he


def history(n_target: int, J: int, rounds: int, seed: int) -> he.AnnotationSet:
    rng = np.random.default_rng(seed)
    alpha = 0.6 + 0.35 * rng.beta(3.0, 2.0, size=J)
    beta = 0.6 + 0.35 * rng.beta(3.0, 2.0, size=J)
    n_items = n_target // 4
    rnd = np.repeat(np.arange(rounds), -(-n_items // rounds))[:n_items]
    y = (rng.random(n_items) < rng.uniform(0.2, 0.6, rounds)[rnd]).astype(np.int8)
    k = rng.integers(3, 6, n_items)
    item = np.repeat(np.arange(n_items), k)
    # k distinct labelers per item: a random offset and stride modulo J (J prime is not needed for 3-5 of 50)
    start = rng.integers(0, J, n_items)
    pos = np.arange(item.size) - np.repeat(np.cumsum(k) - k, k)
    lab = (np.repeat(start, k) + pos) % J
    p1 = np.where(y[item] == 1, alpha[lab], 1.0 - beta[lab])
    z = (rng.random(item.size) < p1).astype(np.int8)
    g = np.flatnonzero(rng.random(n_items) < 0.01)
    return he.AnnotationSet.from_arrays(item, lab, z, gold=(g, y[g]), item_round=(np.arange(n_items), rnd))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=float, default=1e6)
    ap.add_argument("--labelers", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    h = history(int(a.size), a.labelers, a.rounds, 7)
    he.calibrate(h, checks=True, check_rounds=False)
    cal = he.calibrate(h, checks=True)
    assert cal.checks is not None and cal.checks.rounds, cal.checks
    times: dict[str, list[float]] = {"none": [], "off": [], "on": []}
    for _ in range(a.repeats):
        for key, kw in (("none", {"checks": False}), ("off", {"checks": True, "check_rounds": False}),
                        ("on", {"checks": True})):
            t = time.perf_counter()
            he.calibrate(h, **kw)  # type: ignore[arg-type]
            times[key].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"| annotations | J | rounds | no checks s | checks, no past rounds s | checks (default) s | ratio |\n"
          f"|---:|---:|---:|---:|---:|---:|---:|\n"
          f"| {h.n_annotations:.2e} | {a.labelers} | {a.rounds} | {med['none']:.2f} | {med['off']:.2f} | "
          f"{med['on']:.2f} | {med['on'] / med['off']:.2f} |")
    print("runs: " + "; ".join(f"{k} {', '.join(f'{t:.2f}' for t in v)}" for k, v in times.items()))


if __name__ == "__main__":
    main()
