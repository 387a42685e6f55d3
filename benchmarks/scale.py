#!/usr/bin/env python
"""Scale benchmark (issue #7): from Parquet on disk to a calibrated HERO-1 estimate.

For each size (annotations) and labeler count J, the script

1. writes a seeded synthetic history to Parquet (item, labeler, label; 3-5
   distinct labelers per item, prevalence 0.3, sensitivities and
   specificities in (0.6, 0.95)), a gold file (1 % of the items) and a
   current round of 10,000 items (not timed);
2. runs, in a fresh child process, ``read_annotations(engine="duckdb")``,
   ``calibrate(engine="numba")`` (SQUAREM EM to tol 1e-8, then the sandwich
   covariance) and ``hero1`` on the current round, and reports each stage's
   wall time and the child's peak resident memory (the whole process tree:
   DuckDB and numba run threads inside it, no further processes);
3. in the same child, times one compiled EM map evaluation (the fused pass
   the EM repeats) and one streaming ``np.sum`` over the same compact uint16
   codes, the physical floor of any pass over the data;
4. for the sizes in ``--cli-sizes`` (J = 50 rows), times the command line on
   the same files, in fresh processes: ``hero calibrate`` with its defaults
   (the model checks on) against ``--no-checks``, alternated
   ``--cli-repeats`` times after one untimed run of each (numba's cache and
   the page cache), and ``hero --help`` (median of 11 runs);
5. up to ``--crowdkit-max`` annotations, runs crowd-kit's
   ``DawidSkene(true_labels=...)`` for ``--crowdkit-iters`` iterations on
   the same data in its own virtualenv (see stage_a.py) and gives the ratio
   of its ns per annotation-iteration to ours.

Usage::

    .venv/bin/python -m benchmarks.scale                          # 1e6, 1e7, 1e8 x J = 50, 2000
    .venv/bin/python -m benchmarks.scale --sizes 1e6 --labelers 50 --skip-crowdkit   # a quick look

Writes benchmarks/out/scale.json and prints a table (see the README).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks import stage_a  # (crowd-kit venv and subprocess helpers)

HERE = Path(__file__).resolve().parent

PREVALENCE = 0.3
GOLD_FRACTION = 0.01
MIN_K, MAX_K = 3, 5
CHUNK_ITEMS = 1_000_000
CURRENT_ITEMS = 10_000
TARGET_S_1E8 = 90.0
TARGET_GB_1E8 = 4.0
TARGET_NS = 10.0
TARGET_RATIO = 150.0


def _labels(rng: np.random.Generator, n_items: int, J: int, alpha: np.ndarray, beta: np.ndarray,
            first_item: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    k = rng.integers(MIN_K, MAX_K + 1, size=n_items)
    labs = np.empty((n_items, MAX_K), dtype=np.int32)
    for c in range(MAX_K):  # distinct labelers per item: sample without replacement by rejection
        labs[:, c] = rng.integers(0, J, size=n_items)
        while True:
            dup = (labs[:, :c] == labs[:, c : c + 1]).any(axis=1) if c else np.zeros(n_items, bool)
            if not dup.any():
                break
            labs[dup, c] = rng.integers(0, J, size=int(dup.sum()))
    keep = np.arange(MAX_K)[None, :] < k[:, None]
    item = np.repeat(np.arange(first_item, first_item + n_items, dtype=np.int64), k)
    labeler = labs[keep]
    y = (rng.random(n_items) < PREVALENCE).astype(np.int8)
    yi = np.repeat(y, k)
    p1 = np.where(yi == 1, alpha[labeler], 1.0 - beta[labeler])
    label = (rng.random(item.shape[0]) < p1).astype(np.int8)
    return {"item_id": item, "labeler_id": labeler, "label": label}, y


def write_data(n_target: int, J: int, seed: int, out: Path) -> dict[str, Any]:
    """Parquet history, gold and current-round files.

    The history is written in row groups of 1e6 items (about 8e6 rows); the
    rows of a row group are shuffled (a log interleaves items), and no item
    spans two row groups (so a Dask partition per row group holds whole items).
    """
    rng = np.random.default_rng(seed)
    alpha = 0.6 + 0.35 * rng.beta(3.0, 2.0, size=J)
    beta = 0.6 + 0.35 * rng.beta(3.0, 2.0, size=J)
    n_items = round(n_target / ((MIN_K + MAX_K) / 2))
    hist = out / "history.parquet"
    schema = pa.schema([("item_id", pa.int64()), ("labeler_id", pa.int32()), ("label", pa.int8())])
    n_ann = 0
    gold_items: list[np.ndarray] = []
    gold_vals: list[np.ndarray] = []
    with pq.ParquetWriter(hist, schema) as w:
        for start in range(0, n_items, CHUNK_ITEMS):
            m = min(CHUNK_ITEMS, n_items - start)
            cols, y = _labels(rng, m, J, alpha, beta, start)
            perm = rng.permutation(cols["label"].shape[0])  # a log interleaves items: shuffle each row group
            # one row group per chunk of items (pyarrow would otherwise cut row groups at 1Mi rows, mid-item)
            w.write_table(pa.table({k: v[perm] for k, v in cols.items()}, schema=schema), row_group_size=perm.size)
            n_ann += cols["label"].shape[0]
            g = np.flatnonzero(rng.random(m) < GOLD_FRACTION)
            gold_items.append(g + start)
            gold_vals.append(y[g])
    pq.write_table(pa.table({"item_id": np.concatenate(gold_items), "gold": np.concatenate(gold_vals)}),
                   out / "gold.parquet")
    cols, y = _labels(rng, CURRENT_ITEMS, J, alpha, beta, n_items)
    pq.write_table(pa.table(cols), out / "current.parquet")
    return {"n_annotations": n_ann, "n_items": n_items, "current_rate": float(y.mean())}


CHILD = r'''
import json, sys, time, resource
import numpy as np
import pandas as pd
import heroeval as he
from heroeval.ingest._csr import CsrBuilder
from heroeval.stage_a import kernels
d = sys.argv[1]
out = {}
# numba compiles on first use and caches on disk; time that once, apart from the run
t0 = time.perf_counter()
# (items of different sizes, so the sorting kernels compile too)
tiny = he.AnnotationSet.from_arrays([1, 1, 1, 2, 2], ["a", "b", "c", "a", "b"], [1, 0, 1, 0, 0], gold=([1], [1]))
he.calibrate(tiny, engine="numba")
csr = CsrBuilder(np.array([2]))
csr.add(np.zeros(2, np.int32), np.arange(2, dtype=np.int32), np.zeros(2, np.int8), np.zeros(2, np.int32))
csr.finish()
from heroeval.ingest._csr import RangeCsrBuilder  # the integer-id ingest's kernels, with the dtypes DuckDB streams
rcsr = RangeCsrBuilder(0, 1, False)
rcsr.count(np.array([0, 1, 1], np.int32), np.array([0, 1, 0], np.int32), np.zeros(2, np.int64))
rcsr.layout()
rcsr.add_mapped(np.array([0, 1, 1], np.int32), np.array([0, 1, 0], np.int32), np.zeros(3, np.int8),
                np.zeros(0, np.int32), np.arange(2, dtype=np.int32))
rcsr.finish()
from heroeval.ingest.compact import CompactBuilder
cb = CompactBuilder(0, 1, False)
cb.count(np.array([0, 1, 1], np.int32), np.array([0, 1, 0], np.int32), np.zeros(2, np.int64))
cb.layout(2)
cb.add(np.array([0, 1, 1], np.int32), np.array([0, 1, 0], np.int32), np.zeros(3, np.int8), np.zeros(0, np.int32),
       np.arange(2, dtype=np.int32))
cb.finish()
out["jit_warmup_s"] = time.perf_counter() - t0
# What first touching fresh memory costs on this machine, the physical floor under every new array: on a
# virtual machine that hands freed memory back to its host (virtio-balloon free page reporting), a page
# first written after a pause costs the host's fault, measured here at about 6 s per GiB on one thread.
probe = np.empty(2**27)  # 1 GiB
t0 = time.perf_counter(); probe.fill(1.0); out["first_touch_s_per_gib"] = time.perf_counter() - t0
t0 = time.perf_counter(); probe.fill(2.0); out["rewrite_s_per_gib"] = time.perf_counter() - t0
del probe
try:  # the probe is not the run: reset the peak resident memory (VmHWM) it set
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
except OSError:
    out["peak_includes_probe"] = True
def minflt():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
f0 = minflt()
t_start = time.perf_counter()
t0 = time.perf_counter()
if len(sys.argv) > 3 and sys.argv[3] == "compact":  # straight into the compiled engine's arrays
    hist = he.read_compact(d + "/history.parquet", gold=pd.read_parquet(d + "/gold.parquet"), memory_limit=sys.argv[2])
else:
    hist = he.read_annotations(d + "/history.parquet", gold=pd.read_parquet(d + "/gold.parquet"), engine="duckdb",
                               memory_limit=sys.argv[2])
out["ingest_s"] = time.perf_counter() - t0
out["ingest_faults_gib"] = (minflt() - f0) * 4096 / 2**30  # pages first touched (4 KiB each), in GiB
with open("/proc/self/status") as f:
    out["peak_after_ingest_gib"] = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 2**20
iters = []
t0 = time.perf_counter()
cal = he.calibrate(hist, engine="numba", progress=lambda n, ll, ch: iters.append((time.perf_counter(), n)))
out["calibrate_s"] = time.perf_counter() - t0
out["calibrate_faults_gib"] = (minflt() - f0) * 4096 / 2**30 - out["ingest_faults_gib"]
out["em_map_evaluations"] = cal.convergence.n_iter
out["converged"] = bool(cal.convergence.converged)
t0 = time.perf_counter()
cur = he.read_annotations(d + "/current.parquet", engine="pandas")
est = he.hero1(cur, cal)
out["hero1_s"] = time.perf_counter() - t0
out["hero1"] = [est.estimate, *map(float, est.confidence_interval())]
out["total_s"] = time.perf_counter() - t_start
with open("/proc/self/status") as f:  # Parquet to HERO-1, before the timing design below
    out["peak_end_to_end_gib"] = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 2**20
out["n_annotations"] = hist.n_annotations
# DuckDB's plain scan of the same file (every column read and summed): the floor for the ingest
import duckdb
t0 = time.perf_counter()
duckdb.connect().execute("SELECT count(*), sum(item_id), sum(labeler_id), sum(label) FROM read_parquet(?)",
                         [d + "/history.parquet"]).fetchall()
out["duckdb_scan_s"] = time.perf_counter() - t0
# the compiled EM map evaluation and a streaming np.sum over the same compact codes
if isinstance(hist, he.CompactHistory):
    cd = kernels.design_of_codes(hist.ptr, hist.code, hist.gold, hist.group, hist.n_labelers, hist.n_rounds)
else:
    cd = kernels.compact_design(hist.item_ptr, hist.labeler, hist.label, hist.n_labelers, hist.gold,
                                 hist.item_round, hist.n_rounds)
a, b, p = cal.alpha, cal.beta, cal.round_prevalence
def best(f):
    """Best of at least 5 calls, and of as many as fit in 2 s (up to 100): small sizes are noisy."""
    ts = []
    t_end = time.perf_counter() + 2.0
    while len(ts) < 5 or (time.perf_counter() < t_end and len(ts) < 100):
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return min(ts), len(ts)
cd.em_map(a, b, p, False)
out["em_map_nll_s"], out["em_map_reps"] = best(lambda: cd.em_map(a, b, p, False))
out["em_map_ll_s"], _ = best(lambda: cd.em_map(a, b, p, True))
# as calibrate runs them: each SQUAREM cycle is three maps, one of which computes the log-likelihood
out["em_map_s"] = (2 * out["em_map_nll_s"] + out["em_map_ll_s"]) / 3
out["np_sum_s"], _ = best(lambda: cd.code.sum(dtype=np.int64))
out["threads"] = kernels.threads()
with open("/proc/self/status") as f:
    out["peak_rss_gib"] = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 2**20
print("SCALE_JSON " + json.dumps(out))
'''


DASK_CHILD = r'''
import json, logging, sys, time
import numpy as np
import pandas as pd
import dask.dataframe as dd
import distributed
import heroeval as he
d = sys.argv[1]
out = {}
gold = pd.read_parquet(d + "/gold.parquet")
t0 = time.perf_counter()
hist = he.read_annotations(d + "/history.parquet", gold=gold, engine="duckdb")
mem = he.calibrate(hist, engine="numba")
out["in_memory_s"] = time.perf_counter() - t0
out["n_annotations"] = hist.n_annotations
del hist
logging.getLogger("distributed").setLevel(logging.ERROR)
with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                              memory_limit="6GB") as cl, distributed.Client(cl) as c:
    t0 = time.perf_counter()
    ddf = dd.read_parquet(d + "/history.parquet", split_row_groups=True)
    cal = he.calibrate_dask(ddf, gold=gold, client=c, partitioned_by_item=True)
    out["dask_s"] = time.perf_counter() - t0
    out["partitions"] = cal.settings["partitions"]
out["em_maps"] = [mem.convergence.n_iter, cal.convergence.n_iter]
out["max_abs_diff_alpha_beta_prev"] = float(max(np.max(np.abs(mem.alpha - cal.alpha)), np.max(np.abs(mem.beta - cal.beta)),
                                                np.max(np.abs(mem.round_prevalence - cal.round_prevalence))))
out["max_rel_diff_covariance"] = float(np.max(np.abs(mem.parameter_covariance - cal.parameter_covariance))
                                       / np.max(np.abs(mem.parameter_covariance)))
print("DASK_JSON " + json.dumps(out))
'''


def run_dask(data_dir: Path) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-c", DASK_CHILD, str(data_dir)], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("DASK_JSON "):
            out: dict[str, Any] = json.loads(line[len("DASK_JSON "):])
            return out
    raise RuntimeError(f"dask child failed (rc {r.returncode}):\n{r.stderr[-3000:]}")


def run_child(data_dir: Path, memory_limit: str, compact: bool = False) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CHILD, str(data_dir), memory_limit, *(["compact"] if compact else [])],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    for line in r.stdout.splitlines():
        if "SCALE_JSON " in line:
            out: dict[str, Any] = json.loads(line.split("SCALE_JSON ", 1)[1])
            out["child_wall_s"] = wall
            out["rusage_children_maxrss_gib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
            return out
    raise RuntimeError(f"child failed (rc {r.returncode}):\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-3000:]}")


def crowdkit(py: Path, data_dir: Path, iters: int, tmp: Path) -> dict[str, Any]:
    h = pq.read_table(data_dir / "history.parquet").to_pandas()
    g = pq.read_table(data_dir / "gold.parquet").to_pandas()
    J = int(h["labeler_id"].max()) + 1
    z = {"item": h["item_id"].to_numpy(), "labeler": h["labeler_id"].to_numpy().astype(np.int64),
         "label": h["label"].to_numpy(), "gold_items": g["item_id"].to_numpy(),
         "gold_values": g["gold"].to_numpy().astype(np.int8), "alpha_true": np.full(J, 0.8),
         "beta_true": np.full(J, 0.8)}
    del h
    return stage_a.bench_crowdkit(py, z, iters, 1, False, tmp)


def time_cli(d: Path, repeats: int) -> dict[str, Any]:
    """Wall times of ``hero calibrate`` on ``d``'s files with the defaults and with ``--no-checks`` (alternated,
    after one untimed run of each) and of ``hero --help``, each a whole command in a fresh process."""
    hero = Path(sys.executable).parent / "hero"

    def run(*cmd: str) -> float:
        t = time.perf_counter()
        subprocess.run([str(hero), *cmd], check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t

    cal = ("calibrate", str(d / "history.parquet"), "--gold", str(d / "gold.parquet"), "-o", str(d / "calib.json"))
    run(*cal, "--no-checks")
    run(*cal)
    no: list[float] = []
    yes: list[float] = []
    for _ in range(repeats):
        no.append(run(*cal, "--no-checks"))
        yes.append(run(*cal))
    helps = [run("--help") for _ in range(11)]
    t_no, t_yes = statistics.median(no), statistics.median(yes)
    return {"cli_no_checks_s": t_no, "cli_checks_s": t_yes, "cli_ratio": t_yes / t_no, "cli_runs_no_checks": no,
            "cli_runs_checks": yes, "cli_help_s": statistics.median(helps)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1e6,1e7,1e8")
    ap.add_argument("--labelers", default="50,2000")
    ap.add_argument("--crowdkit-max", type=float, default=1e7)
    ap.add_argument("--crowdkit-iters", type=int, default=5)
    ap.add_argument("--skip-crowdkit", action="store_true")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--duckdb-memory", default="1GB", help="DuckDB's memory_limit during the ingest")
    ap.add_argument("--tmp", default=None, help="where the Parquet files go (default: a temporary directory)")
    ap.add_argument("--dask-sizes", default="1e7", help="also fit these sizes (J = 50) on a 2-worker Dask LocalCluster, "
                    "beside the in-memory fit, e.g. 1e7")
    ap.add_argument("--out", default=str(HERE / "out" / "scale.json"))
    ap.add_argument("--compact", action="store_true",
                    help="read with read_compact (straight into the compiled engine's arrays) instead of "
                         "read_annotations")
    ap.add_argument("--cli-sizes", default="1e7", help="time hero calibrate (with and without the checks) and "
                    "hero --help on these sizes' J = 50 files, e.g. 1e7 ('' for none)")
    ap.add_argument("--cli-repeats", type=int, default=5)
    ap.add_argument("--keep-data", action="store_true",
                    help="keep the Parquet files under --tmp and reuse those an earlier run with the same seed wrote")
    a = ap.parse_args(argv)
    sizes = [int(float(s)) for s in a.sizes.split(",") if s]
    cli_sizes = {int(float(s)) for s in a.cli_sizes.split(",") if s}
    Js = [int(s) for s in a.labelers.split(",")]
    py = None
    if not a.skip_crowdkit:
        py, how = stage_a.ensure_crowdkit(stage_a.DEFAULT_VENV)
        print(f"[crowd-kit] {how}", flush=True)
    rows = []
    base = Path(a.tmp) if a.tmp else Path(tempfile.mkdtemp(prefix="hero-scale-"))
    for n in sizes:
        for J in Js:
            d = base / f"n{n:.0e}_J{J}"
            d.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            saved = d / "meta.json"
            if a.keep_data and saved.exists() and json.loads(saved.read_text()).get("seed") == a.seed:
                meta = {k: v for k, v in json.loads(saved.read_text()).items() if k != "seed"}
                print(f"[data] {n:.0e} annotations, J={J}: reusing {d}", flush=True)
            else:
                meta = write_data(n, J, a.seed, d)
                print(f"[data] {n:.0e} annotations, J={J}: {meta['n_annotations']:,} written in "
                      f"{time.perf_counter() - t0:.1f}s", flush=True)
                if a.keep_data:
                    saved.write_text(json.dumps({**meta, "seed": a.seed}))
            res = run_child(d, a.duckdb_memory, a.compact)
            res["reader"] = "read_compact" if a.compact else "read_annotations"
            res.update(meta, size=n, J=J)
            res["ns_per_ann_iter"] = res["em_map_s"] / res["n_annotations"] * 1e9
            res["ns_per_ann_iter_with_ll"] = res["em_map_ll_s"] / res["n_annotations"] * 1e9
            res["ns_per_ann_iter_without_ll"] = res["em_map_nll_s"] / res["n_annotations"] * 1e9
            res["np_sum_ns_per_ann"] = res["np_sum_s"] / res["n_annotations"] * 1e9
            if n in cli_sizes and J == 50:
                res.update(time_cli(d, a.cli_repeats))
                print(f"[cli] hero calibrate {res['cli_checks_s']:.2f}s with the checks, {res['cli_no_checks_s']:.2f}s "
                      f"with --no-checks (ratio {res['cli_ratio']:.2f}; medians of {a.cli_repeats}); hero --help "
                      f"{res['cli_help_s']:.3f}s", flush=True)
            if py is not None and n <= a.crowdkit_max:
                ck = crowdkit(py, d, a.crowdkit_iters, base)
                res["crowdkit_ns_per_ann_iter"] = ck["ns_per_ann_iter"]
                res["crowdkit_peak_rss_gib"] = ck["maxrss_mib"] / 1024
                res["ratio_crowdkit"] = ck["ns_per_ann_iter"] / res["ns_per_ann_iter"]
                # crowd-kit computes its ELBO every iteration: the ratio against our maps that all do
                res["ratio_crowdkit_with_ll"] = ck["ns_per_ann_iter"] / res["ns_per_ann_iter_with_ll"]
            rows.append(res)
            print(_line(res), flush=True)
            if not a.keep_data:
                for f in d.iterdir():
                    f.unlink()
                d.rmdir()
    dask_rows = []
    for n in [int(float(x)) for x in a.dask_sizes.split(",") if x]:
        d = base / f"dask_n{n:.0e}"
        d.mkdir(parents=True, exist_ok=True)
        write_data(n, 50, a.seed, d)
        r = run_dask(d)
        dask_rows.append(r)
        print(f"[dask] {r['n_annotations']:,} ann: in memory {r['in_memory_s']:.1f}s, Dask LocalCluster (2 workers, "
              f"{r['partitions']} partitions) {r['dask_s']:.1f}s; max |diff| alpha/beta/prevalence "
              f"{r['max_abs_diff_alpha_beta_prev']:.1e}, covariance (relative) {r['max_rel_diff_covariance']:.1e}; "
              f"EM maps {r['em_maps']}", flush=True)
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"rows": rows, "dask": dask_rows, "cpu_count": os.cpu_count()}, indent=1))
    if rows:
        print()
        print(table(rows))
    cli = [r for r in rows if "cli_ratio" in r]
    if cli:
        print("\n| annotations | J | hero calibrate, --no-checks (s) | hero calibrate, defaults: checks on (s) | ratio "
              "| hero --help (s) |\n|---|---|---|---|---|---|")
        for r in cli:
            print(f"| {r['n_annotations']:.2e} | {r['J']} | {r['cli_no_checks_s']:.2f} | {r['cli_checks_s']:.2f} | "
                  f"{r['cli_ratio']:.2f} | {r['cli_help_s']:.3f} |")
    return 0


def _line(r: dict[str, Any]) -> str:
    ck = (f", crowd-kit {r['crowdkit_ns_per_ann_iter']:.0f} ns (x{r['ratio_crowdkit']:.0f}; "
          f"x{r['ratio_crowdkit_with_ll']:.0f} against maps that all compute the log-likelihood)"
          if "ratio_crowdkit" in r else "")
    return (f"[run] {r['n_annotations']:,} ann J={r['J']}: ingest {r['ingest_s']:.1f}s (DuckDB's plain scan "
            f"{r.get('duckdb_scan_s', float('nan')):.1f}s), calibrate "
            f"{r['calibrate_s']:.1f}s ({r['em_map_evaluations']} maps), total {r['total_s']:.1f}s, peak "
            f"{r.get('peak_end_to_end_gib', float('nan')):.2f} GiB to HERO-1 ({r['peak_rss_gib']:.2f} with the timing "
            f"design), {r['ns_per_ann_iter']:.2f} ns/ann-iter (without/with the "
            f"log-likelihood {r['ns_per_ann_iter_without_ll']:.2f}/{r['ns_per_ann_iter_with_ll']:.2f}), np.sum "
            f"{r['np_sum_ns_per_ann']:.2f} ns/ann{ck}; fresh memory first touched: ingest "
            f"{r.get('ingest_faults_gib', float('nan')):.1f} GiB, calibrate {r.get('calibrate_faults_gib', float('nan')):.1f} "
            f"GiB, at {r.get('first_touch_s_per_gib', float('nan')):.2f} s/GiB on one thread "
            f"(rewriting {r.get('rewrite_s_per_gib', float('nan')):.2f})")


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| annotations | J | ingest (s) | calibrate (s) | HERO-1 (s) | end to end (s) | peak memory to HERO-1 (GiB) | EM maps "
            "| ns / annotation-iteration (without / with log-likelihood) | np.sum ns / annotation | ratio to np.sum "
            "| crowd-kit ns / ann-iter | ratio to crowd-kit (against maps with log-likelihood) |")
    out = [head, "|" + "---|" * 13]
    for r in rows:
        ck = (f"{r['crowdkit_ns_per_ann_iter']:.0f} | {r['ratio_crowdkit']:.0f}x ({r['ratio_crowdkit_with_ll']:.0f}x)"
              if "ratio_crowdkit" in r else "not run | ")
        out.append(
            f"| {r['n_annotations']:.2e} | {r['J']} | {r['ingest_s']:.1f} | {r['calibrate_s']:.1f} | "
            f"{r['hero1_s']:.2f} | {r['total_s']:.1f} | {r.get('peak_end_to_end_gib', float('nan')):.2f} | "
            f"{r['em_map_evaluations']} | "
            f"{r['ns_per_ann_iter']:.2f} ({r['ns_per_ann_iter_without_ll']:.2f} / {r['ns_per_ann_iter_with_ll']:.2f}) | "
            f"{r['np_sum_ns_per_ann']:.3f} | {r['ns_per_ann_iter'] / r['np_sum_ns_per_ann']:.0f}x | {ck} |")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
