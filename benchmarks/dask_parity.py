#!/usr/bin/env python
"""Dask parity benchmark (issue #20 item 7): Stage A in memory and on a Dask LocalCluster, side by side.

For each size (annotations, J = 50, the scale benchmark's data: 3-5 labelers per
item, 1 % gold, Parquet in row groups of 1e6 whole items), in one fresh child
process:

1. reads the history into memory (``read_annotations``, default reader) and
   onto a Dask LocalCluster (``load_dask_history``, one partition per row group,
   ``partitioned_by_item=True``; ``--workers`` processes of one thread each, started
   before the in-memory read as ``hero calibrate --scheduler local:N`` starts them,
   forked on Linux; ``--start spawn``: Dask's default start);
2. fits Stage A ``--repeats`` times each way, interleaved (in memory:
   ``calibrate`` with its defaults, so the compiled engine from 1e6
   annotations; Dask: ``fit_stage_a_dask``), with the default options and with
   ``history_weight=0.3, pseudo_count=1``, and reports the median and the
   minimum wall time and the largest difference of the parameters;
3. with ``--checks``, once each: ``calibrate(checks=True)`` on the history in
   memory and ``heroeval.calibrate_dask(checks=True)`` (which loads the
   history on the cluster again), and whether they chose the same weight.

Both sides share the machine's cores (the in-memory engine uses every core;
the cluster's workers one thread each), so on a busy machine the times are
noisy: that is why they are interleaved and repeated.

Usage::

    .venv/bin/python -m benchmarks.dask_parity --sizes 1e7 --repeats 3 --checks

Writes benchmarks/out/dask_parity.json and prints one line per measurement.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.scale import write_data

HERE = Path(__file__).resolve().parent

CHILD = r'''
import json, logging, statistics, sys, time, warnings
import numpy as np
import pandas as pd
import dask.dataframe as dd
import distributed
import heroeval as he
from heroeval.cli.scheduler import local_cluster, start_method
from heroeval.stage_a.distributed import fit_stage_a_dask, load_dask_history
from heroeval.stage_a.settings import EMSettings

d, repeats, workers, checks, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
logging.getLogger("distributed").setLevel(logging.ERROR)
out = {"repeats": repeats, "workers": workers}

def peak_gib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 2**20

def diff(a, b):
    return float(max(np.max(np.abs(a.alpha - b.alpha)), np.max(np.abs(a.beta - b.beta)),
                     np.max(np.abs(a.round_prevalence - b.round_prevalence))))

gold = pd.read_parquet(d + "/gold.parquet")
if start == "heroeval":  # as `hero calibrate --scheduler local:N` starts it (forked workers on Linux)
    cluster = local_cluster(workers, memory_limit="6GB")
else:  # Dask's default start (spawned workers, which import heroeval at their first task)
    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None, memory_limit="6GB")
out["start"] = start
out["start_method"] = start_method() if start == "heroeval" else "spawn"
with cluster as cl, distributed.Client(cl) as c:
    t0 = time.perf_counter()
    hist = he.read_annotations(d + "/history.parquet", gold=gold)
    out["read_in_memory_s"] = time.perf_counter() - t0
    out["n_annotations"] = hist.n_annotations
    t0 = time.perf_counter()
    dh = load_dask_history(dd.read_parquet(d + "/history.parquet", split_row_groups=True), gold=gold, client=c,
                           partitioned_by_item=True)
    out["load_dask_s"] = time.perf_counter() - t0
    out["partitions"] = len(dh.parts)
    for name, kw in (("default", {}), ("w0.3_c1", {"history_weight": 0.3, "pseudo_count": 1.0})):
        tm, td = [], []
        for _ in range(repeats):
            t0 = time.perf_counter(); mem = he.calibrate(hist, **kw); tm.append(time.perf_counter() - t0)
            t0 = time.perf_counter(); cal = fit_stage_a_dask(dh, em=EMSettings(pseudo_count=kw.get("pseudo_count", 0.0)), history_weight=kw.get("history_weight", 1.0)); td.append(time.perf_counter() - t0)
        rel_cov = float(np.max(np.abs(mem.parameter_covariance - cal.parameter_covariance))
                        / np.max(np.abs(mem.parameter_covariance)))
        out[name] = {"in_memory_s": tm, "dask_s": td, "in_memory_median_s": statistics.median(tm),
                     "dask_median_s": statistics.median(td), "engine": mem.settings["engine"],
                     "em_maps": [mem.convergence.n_iter, cal.convergence.n_iter],
                     "max_abs_diff_params": diff(mem, cal), "max_rel_diff_covariance": rel_cov}
        print(f"{name}: in memory {statistics.median(tm):.2f} s (min {min(tm):.2f}), "
              f"dask {statistics.median(td):.2f} s (min {min(td):.2f}); max |diff| {diff(mem, cal):.1e}", flush=True)
    del dh
    if checks:
        t0 = time.perf_counter(); mem = he.calibrate(hist, checks=True); tm = time.perf_counter() - t0
        t0 = time.perf_counter()
        cal = he.calibrate_dask(dd.read_parquet(d + "/history.parquet", split_row_groups=True), gold=gold, client=c,
                                partitioned_by_item=True, checks=True)
        td = time.perf_counter() - t0
        out["checks"] = {"in_memory_s": tm, "dask_s_with_load": td, "max_abs_diff_params": diff(mem, cal),
                         "chosen_weight": [mem.checks.chosen_weight, cal.checks.chosen_weight],
                         "log_score_max_abs_diff": float(max(abs(mem.checks.log_score[w][0] - cal.checks.log_score[w][0])
                                                             for w in mem.checks.weight_grid))}
        print(f"checks: in memory {tm:.2f} s, dask (load included) {td:.2f} s", flush=True)
out["client_peak_rss_gib"] = peak_gib()
print("DASK_PARITY_JSON " + json.dumps(out))
'''


def run(data_dir: Path, repeats: int, workers: int, checks: bool, start: str = "heroeval") -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-c", CHILD, str(data_dir), str(repeats), str(workers), "1" if checks else "0",
                        start],
                       capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("DASK_PARITY_JSON "):
            out: dict[str, Any] = json.loads(line[len("DASK_PARITY_JSON "):])
            return out
        print("  " + line, flush=True)
    raise RuntimeError(f"child failed (rc {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1e7")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--checks", action="store_true", help="also time calibrate(checks=True) both ways, once each")
    ap.add_argument("--start", choices=("heroeval", "spawn"), default="heroeval",
                    help="how the LocalCluster starts its workers: as `hero ... --scheduler local:N` does (forked "
                         "on Linux, before the in-memory read) or Dask's default (spawned)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--out", default=str(HERE / "out" / "dask_parity.json"))
    a = ap.parse_args(argv)
    base = Path(a.tmp) if a.tmp else Path(tempfile.mkdtemp(prefix="hero-daskparity-"))
    rows = []
    for n in [int(float(x)) for x in a.sizes.split(",") if x]:
        d = base / f"n{n:.0e}"
        d.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        meta = write_data(n, 50, a.seed, d)
        print(f"[data] {meta['n_annotations']:,} annotations written in {time.perf_counter() - t0:.1f}s", flush=True)
        r = run(d, a.repeats, a.workers, a.checks, a.start)
        r["size"] = n
        rows.append(r)
        print(json.dumps(r), flush=True)
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
