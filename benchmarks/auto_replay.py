"""The recommended estimate's rule with and without the rate-shift test, replayed on a stored benchmark run.

    .venv/bin/python -m benchmarks.auto_replay benchmarks/results/research/robustness/shift_odds_5/resamples.csv.gz

A ``benchmarks/robustness.py`` run stores every ``auto`` row's candidate table; this replays
``DEFAULT_RULE`` and ``DEFAULT_RULE`` without its rate-shift test (``shift_level=None``, the rule before
the odds-9 fix of docs/research/robustness.md section 7) on it, without refitting, and prints per cell and per
shift type the coverage and mean width of the recommended interval beside HERO-1's width. Used for splits that
no choice of the rule saw (the odds-5 check).
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import pandas as pd

from heroeval.choice.auto import DEFAULT_RULE

from benchmarks.auto_loso import cell_table, per_shift


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("resamples", help="a robustness.py resamples.csv.gz")
    ap.add_argument("--out", default="", help="write the per-cell table here (csv)")
    a = ap.parse_args()
    df = pd.read_csv(a.resamples)
    grid = [("DEFAULT_RULE", DEFAULT_RULE), ("without the rate-shift test", replace(DEFAULT_RULE, shift_level=None))]
    cells = cell_table(df, grid)
    if a.out:
        cells.to_csv(a.out, index=False)
    pd.set_option("display.width", 200)
    wide = cells.pivot_table(index=["shift", "dataset"], columns="rule", values=["coverage", "width"])
    print(wide.round(3).to_string())
    print()
    print(pd.concat([per_shift(cells[cells["rule"] == n]).assign(rule=n) for n, _ in grid]).round(3).to_string(
        index=False))


if __name__ == "__main__":
    main()
