#!/usr/bin/env python
"""What the model checks cost: ``hero calibrate`` with default options against ``--no-checks`` (issue #20).

    .venv/bin/python -m benchmarks.calibrate_checks                 # 1e7 annotations, J = 50, ~1 min
    .venv/bin/python -m benchmarks.calibrate_checks --data DIR      # reuse a folder written by an earlier run

Writes the benchmark's synthetic history with ``scale.write_data`` (3-5
labelers per item, 1 % gold, Parquet), runs ``hero calibrate`` once without
timing (numba compiles into its disk cache), then times each variant once, in
a fresh process, as wall time of the whole command (reading, Stage A, the
checks, writing the JSON), and prints the ratio. ``--repeats N`` alternates
the two variants N times and reports each one's median and the ratio of the
medians (one run of each moved by up to 1.6 s between runs here).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks import scale

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=float, default=1e7)
    ap.add_argument("--labelers", type=int, default=50)
    ap.add_argument("--data", default="")
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    d = Path(a.data) if a.data else Path(tempfile.mkdtemp(prefix="hero-checks-"))
    if not (d / "history.parquet").exists():
        d.mkdir(parents=True, exist_ok=True)
        print(scale.write_data(int(a.size), a.labelers, 7, d), file=sys.stderr)
    r = scale.time_cli(d, a.repeats)  # the same timing benchmarks/scale.py runs (--cli-sizes)
    no, yes = r["cli_runs_no_checks"], r["cli_runs_checks"]
    t_no, t_yes = statistics.median(no), statistics.median(yes)
    runs = "" if a.repeats == 1 else (f" (runs: --no-checks {', '.join(f'{t:.2f}' for t in no)}; "
                                       f"default {', '.join(f'{t:.2f}' for t in yes)})")
    print(f"| annotations | J | --no-checks s | default (checks) s | ratio |\n|---:|---:|---:|---:|---:|\n"
          f"| {a.size:.0e} | {a.labelers} | {t_no:.2f} | {t_yes:.2f} | {t_yes / t_no:.2f} |{runs}")


if __name__ == "__main__":
    main()
