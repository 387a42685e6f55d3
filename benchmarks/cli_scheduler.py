#!/usr/bin/env python
"""``hero calibrate`` in memory and with ``--scheduler local:N``, end to end, side by side (issue #43 item 2).

Writes the scale benchmark's history (J = 50, 3-5 labels per item, 1 % gold, Parquet in row groups of 1e6
whole items; ``benchmarks.scale.write_data``) and runs the command line both ways, alternated, ``--repeats``
times each: the wall time of the whole process (start-up, reading, Stage A, the model checks with their
defaults, writing the calibration file). Then compares the two calibration files: the largest difference of
the parameters, and whether the checks chose the same weight.

Usage::

    .venv/bin/python -m benchmarks.cli_scheduler --size 1e7 --repeats 3

Writes benchmarks/out/cli_scheduler.json (or --out) and prints one line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from heroeval.stage_a.calibration import load_calibration

from benchmarks.scale import write_data

HERE = Path(__file__).resolve().parent
HERO = str(Path(sys.executable).with_name("hero"))


def _run(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "120"})
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return dt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1e7")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scheduler", default="local:2")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--out", default=str(HERE / "out" / "cli_scheduler.json"))
    a = ap.parse_args(argv)
    base = Path(a.tmp) if a.tmp else Path(tempfile.mkdtemp(prefix="hero-cli-scheduler-"))
    base.mkdir(parents=True, exist_ok=True)
    n = int(float(a.size))
    meta = write_data(n, 50, a.seed, base)
    print(f"[data] {meta['n_annotations']:,} annotations in {base}", flush=True)
    common = [HERO, "calibrate", str(base / "history.parquet"), "--gold", str(base / "gold.parquet")]
    mem_cmd = [*common, "-o", str(base / "memory.json")]
    dask_cmd = [*common, "-o", str(base / "dask.json"), "--scheduler", a.scheduler]
    _run(mem_cmd)  # one untimed run each: numba's and Python's caches on disk, as a user's second run
    _run(dask_cmd)
    tm, td = [], []
    for k in range(a.repeats):
        tm.append(_run(mem_cmd))
        td.append(_run(dask_cmd))
        print(f"run {k + 1}: in memory {tm[-1]:.2f} s, --scheduler {a.scheduler} {td[-1]:.2f} s", flush=True)
    mem, dsk = load_calibration(base / "memory.json"), load_calibration(base / "dask.json")
    diff = float(max(np.max(np.abs(mem.alpha - dsk.alpha)), np.max(np.abs(mem.beta - dsk.beta)),
                     np.max(np.abs(mem.round_prevalence - dsk.round_prevalence))))
    assert mem.checks is not None and dsk.checks is not None
    out: dict[str, Any] = {
        "size": n, "n_annotations": meta["n_annotations"], "scheduler": a.scheduler, "repeats": a.repeats,
        "in_memory_s": tm, "dask_s": td, "in_memory_median_s": statistics.median(tm),
        "dask_median_s": statistics.median(td), "ratio_of_medians": statistics.median(td) / statistics.median(tm),
        "max_abs_diff_params": diff, "chosen_weight": [mem.checks.chosen_weight, dsk.checks.chosen_weight],
        "partitions": dsk.settings.get("partitions"), "load_average": os.getloadavg(),
    }
    print(f"median: in memory {out['in_memory_median_s']:.2f} s, dask {out['dask_median_s']:.2f} s, ratio "
          f"{out['ratio_of_medians']:.2f}; max |diff| {diff:.1e}; chosen weight {out['chosen_weight']}", flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    if not a.tmp:
        for f in base.iterdir():
            f.unlink()
        base.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
