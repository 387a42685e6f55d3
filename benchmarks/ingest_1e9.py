#!/usr/bin/env python
"""Compact ingest against DuckDB's plain scan of the same Parquet files (issue #43 item 5), with its floor.

For each size it writes (or, with ``--keep-data``, reuses) ``benchmarks/scale.py``'s seeded history (J = 50
labelers, 3-5 labels per item, integer item ids, rows shuffled within row groups of 1e6 items) and its gold
file, then for each reader in ``--readers`` runs one fresh child process that, in this order:

1. compiles the ingest's kernels on a tiny file (numba caches them on disk; not timed);
2. measures what first writing fresh memory costs here: 1 GiB filled by one thread, 1 GiB filled by every
   core (:func:`heroeval.core.memory.filled`), and the 1 GiB rewritten (the probe's peak is then reset);
3. times DuckDB's plain scan of the files (every column read and summed: ``count(*)``, ``sum`` of each),
   once to warm the page cache and once timed;
4. times ``read_compact(history, gold=...)``, with its phases (the ingest's own log messages, each with
   the page faults since the last), the fresh memory it first touched (minor faults x 4 KiB), the peak
   resident memory, and the bytes of the arrays the result holds;
5. hashes the result's arrays (after the timing) so the readers' outputs can be compared.

The floor printed is DuckDB's plain scan plus the result's bytes at the measured first-touch cost (one
thread and all cores): no ingest that reads the files and writes the result can be faster. The readers:
``fast`` is the default (``read_compact``: when the footers qualify, DuckDB's two streaming scans without the
validating one); ``duckdb`` forces the SQL path with its validating scan (the reader before issue #43 item 5);
``pyarrow`` runs the experiment that was measured and not adopted, pyarrow's Parquet reader row group by row
group into the same arrays (``experiments/parquet_int_pyarrow.py``'s ``read_compact_pyarrow``, which the product
no longer holds; run from the repository root so that ``experiments`` imports).

Usage::

    .venv/bin/python -m benchmarks.ingest_1e9 --sizes 1e8 --tmp /tmp/hero-ingest --keep-data
    .venv/bin/python -m benchmarks.ingest_1e9 --sizes 1e9 --tmp /tmp/hero-ingest --keep-data --readers fast,duckdb

Writes benchmarks/results/scale/ingest_1e9.json (``--out``) and prints one line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.scale import write_data

HERE = Path(__file__).resolve().parent
TARGET_RATIO = 2.0

CHILD = r'''
import hashlib, json, logging, resource, sys, time
import numpy as np
import pandas as pd
import duckdb
import heroeval as he
from heroeval.core.memory import filled
from heroeval.ingest import _parquet_int
d, reader, tiny = sys.argv[1], sys.argv[2], sys.argv[3]
read = he.read_compact  # the default: the footers' plan, read by DuckDB's two streaming scans
if reader == "duckdb":  # the SQL path with its validating scan (the reader before issue #43 item 5)
    _parquet_int.ENABLED = False
elif reader == "pyarrow":  # the experiment: the footers' plan, read by pyarrow's Parquet reader
    from experiments.parquet_int_pyarrow import read_compact_pyarrow as read
out = {"reader": reader}
def minflt():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
t0 = time.perf_counter()
read(tiny, gold=pd.DataFrame({"item_id": [1], "gold": [1]}))  # the kernels, compiled or loaded
out["jit_warmup_s"] = time.perf_counter() - t0
probe = np.empty(2**27)  # 1 GiB, never touched
t0 = time.perf_counter(); probe.fill(1.0); out["first_touch_s_per_gib"] = time.perf_counter() - t0
t0 = time.perf_counter(); probe.fill(2.0); out["rewrite_s_per_gib"] = time.perf_counter() - t0
# a second GiB while the first is held (not the pages just freed), its pages first written by every core
t0 = time.perf_counter(); probe2 = filled(2**27, np.float64, 1.0); out["first_touch_all_cores_s_per_gib"] = time.perf_counter() - t0
del probe, probe2
scan = "SELECT count(*), sum(item_id), sum(labeler_id), sum(label) FROM read_parquet(?)"
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
con.execute(scan, [d + "/history.parquet"]).fetchall()  # the page cache
t0 = time.perf_counter()
n_rows = con.execute(scan, [d + "/history.parquet"]).fetchall()[0][0]
out["duckdb_scan_s"] = time.perf_counter() - t0
con.close()
del con
with open("/proc/self/clear_refs", "w") as f:  # the probe and the scan are not the ingest: reset VmHWM
    f.write("5")
gold = pd.read_parquet(d + "/gold.parquet")
phases = []
class Phases(logging.Handler):
    def emit(self, record):
        phases.append((record.getMessage(), time.perf_counter(), minflt()))
log = logging.getLogger("heroeval")
log.setLevel(logging.INFO)
log.addHandler(Phases())
f0 = minflt()
t_start = time.perf_counter()
hist = read(d + "/history.parquet", gold=gold)
t_end = time.perf_counter()
f_end = minflt()
out["ingest_s"] = t_end - t_start
out["ingest_faults_gib"] = (f_end - f0) * 4096 / 2**30
with open("/proc/self/status") as f:
    out["peak_during_ingest_gib"] = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 2**20
marks = [("start", t_start, f0), *phases, ("end", t_end, f_end)]
out["phases"] = [{"after": a[0], "s": b[1] - a[1], "faults_gib": (b[2] - a[2]) * 4096 / 2**30}
                 for a, b in zip(marks[:-1], marks[1:])]
arrays = {"ptr": hist.ptr, "code": hist.code, "gold": hist.gold, "group": hist.group}
out["result_bytes"] = {k: int(v.nbytes) for k, v in arrays.items()}
# the group array without rounds is np.zeros (pages never written: the kernel maps them on first read)
out["result_written_gib"] = sum(v.nbytes for k, v in arrays.items() if k != "group" or hist.n_rounds > 1) / 2**30
out["result_gib"] = sum(v.nbytes for v in arrays.values()) / 2**30
out["n_rows"] = int(n_rows)
out["n_annotations"], out["n_items"], out["n_labelers"] = hist.n_annotations, hist.n_items, hist.n_labelers
out["report"] = [{k: (dict(v) if k in ("dropped", "notes") else v) for k, v in t.__dict__.items()} for t in hist.report.tables]
h = hashlib.blake2b(digest_size=16)
for k in ("ptr", "code", "gold", "group"):
    h.update(k.encode()); h.update(str(arrays[k].dtype).encode()); h.update(memoryview(np.ascontiguousarray(arrays[k])).cast("B"))
for a in (hist.gold_set.item_ids, hist.gold_set.item_ptr, hist.gold_set.labeler, hist.gold_set.label,
          hist.gold_set.gold, hist.labeler_ids.astype(str)):
    h.update(np.ascontiguousarray(a).tobytes())
out["result_hash"] = h.hexdigest()
print("INGEST_JSON " + json.dumps(out))
'''


def tiny_file(where: Path) -> str:
    """A small Parquet history with the benchmark's column types (the kernels compile for these)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = where / "tiny.parquet"
    pq.write_table(pa.table({"item_id": np.array([1, 1, 2, 2, 3], np.int64),
                             "labeler_id": np.array([0, 1, 0, 1, 1], np.int32),
                             "label": np.array([1, 0, 1, 1, 0], np.int8)}), p)
    return str(p)


def run_child(d: Path, reader: str, tiny: str) -> dict[str, Any]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CHILD, str(d), reader, tiny], capture_output=True, text=True, env=env)
    for line in r.stdout.splitlines():
        if "INGEST_JSON " in line:  # (after DuckDB's progress bar, when it drew one)
            out: dict[str, Any] = json.loads(line.split("INGEST_JSON ", 1)[1])
            out["child_wall_s"] = time.perf_counter() - t0
            return out
    raise RuntimeError(f"child failed (rc {r.returncode}):\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-3000:]}")


def with_floor(r: dict[str, Any]) -> dict[str, Any]:
    """The floor and the ratios, from the child's own measurements."""
    r["floor_s"] = r["duckdb_scan_s"] + r["result_written_gib"] * r["first_touch_s_per_gib"]
    r["floor_all_cores_s"] = r["duckdb_scan_s"] + r["result_written_gib"] * r["first_touch_all_cores_s_per_gib"]
    r["ratio_to_duckdb_scan"] = r["ingest_s"] / r["duckdb_scan_s"]
    r["floor_ratio_to_duckdb_scan"] = r["floor_s"] / r["duckdb_scan_s"]
    r["floor_all_cores_ratio_to_duckdb_scan"] = r["floor_all_cores_s"] / r["duckdb_scan_s"]
    return r


def line(r: dict[str, Any]) -> str:
    return (f"[{r['reader']}] {r['n_annotations']:,} annotations: ingest {r['ingest_s']:.1f}s, DuckDB's plain scan "
            f"{r['duckdb_scan_s']:.1f}s, ratio {r['ratio_to_duckdb_scan']:.2f} (target {TARGET_RATIO:.0f}); floor "
            f"{r['floor_s']:.1f}s = scan + {r['result_written_gib']:.2f} GiB written x "
            f"{r['first_touch_s_per_gib']:.2f} s/GiB (ratio {r['floor_ratio_to_duckdb_scan']:.2f}; with every core "
            f"first-touching at {r['first_touch_all_cores_s_per_gib']:.2f} s/GiB {r['floor_all_cores_s']:.1f}s, ratio "
            f"{r['floor_all_cores_ratio_to_duckdb_scan']:.2f}); ingest faulted {r['ingest_faults_gib']:.2f} GiB, "
            f"peak {r['peak_during_ingest_gib']:.2f} GiB\n" + "\n".join(
                f"    {p['s']:7.2f}s {p['faults_gib']:6.2f} GiB  from: {p['after'][:90]}" for p in r["phases"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1e9")
    ap.add_argument("--readers", default="fast", help="comma-separated: fast (the default reader), duckdb (SQL path), "
                    "pyarrow (experiments/parquet_int_pyarrow.py)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tmp", default=None, help="where the Parquet files go (default: a temporary directory)")
    ap.add_argument("--keep-data", action="store_true",
                    help="keep the files under --tmp and reuse those an earlier run with the same seed wrote")
    ap.add_argument("--out", default=str(HERE / "results" / "scale" / "ingest_1e9.json"))
    a = ap.parse_args(argv)
    base = Path(a.tmp) if a.tmp else Path(tempfile.mkdtemp(prefix="hero-ingest-"))
    base.mkdir(parents=True, exist_ok=True)
    tiny = tiny_file(base)
    rows = []
    for n in [int(float(s)) for s in a.sizes.split(",") if s]:
        d = base / f"n{n:.0e}_J50"
        d.mkdir(parents=True, exist_ok=True)
        saved = d / "meta.json"
        if a.keep_data and saved.exists() and json.loads(saved.read_text()).get("seed") == a.seed:
            meta = {k: v for k, v in json.loads(saved.read_text()).items() if k != "seed"}
        else:
            t0 = time.perf_counter()
            meta = write_data(n, 50, a.seed, d)
            print(f"[data] {meta['n_annotations']:,} annotations written in {time.perf_counter() - t0:.0f}s", flush=True)
            if a.keep_data:
                saved.write_text(json.dumps({**meta, "seed": a.seed}))
        for reader in a.readers.split(","):
            r = with_floor(run_child(d, reader, tiny))
            r.update(size=n, J=50, **{k: v for k, v in meta.items() if k != "n_annotations"})
            rows.append(r)
            print(line(r), flush=True)
        if not a.keep_data:
            for f in d.iterdir():
                f.unlink()
            d.rmdir()
    hashes = {(r["size"], r["result_hash"]) for r in rows}
    same = len(hashes) == len({r["size"] for r in rows})
    if len(rows) > 1:
        print(f"results identical across readers: {same}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"rows": rows, "same_results_across_readers": same,
                                       "cpu_count": os.cpu_count()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
