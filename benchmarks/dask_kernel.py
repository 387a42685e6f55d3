"""Issue #43 item 1: a Dask worker's cost per annotation-iteration against the in-memory compiled kernel's.

Writes the scale benchmark's data (J = 50, 3-5 labels per item, 1 % gold, Parquet row groups of 1e6 whole items,
one Dask partition each), then in one process:

* in memory: ``read_annotations`` and the compiled design (:func:`heroeval.stage_a.kernels.compact_design`), the
  E step's pass (``CompactDesign.e_sums``) timed on all the history, the machine's two threads;
* on a ``LocalCluster`` of 2 worker processes of one thread each: the history loaded once
  (:func:`heroeval.stage_a.distributed.load_dask_history`), then (a) on each worker, without the scheduler, the
  partition's E-step pass (``part_stats``: the compiled kernel since issue #43 item 1) timed on its partitions,
  and the NumPy engine's pass on the same partitions (what the workers ran before), and (b) from the client, one
  EM map (``_DaskDesign.em_map``: submit, the workers' passes, gather, the M step) end to end.

Costs are medians of ``--repeats`` calls, in ns per annotation per pass; the in-memory figure is per core
(its time on 2 threads times 2), as is each worker's (one thread).

    PYTHONPATH=. .venv/bin/python -m benchmarks.dask_kernel --size 1e7 --repeats 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.scale import write_data

HERE = Path(__file__).resolve().parent


def _median_time(f: Any, repeats: int) -> float:
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _worker_costs(dask_parts: list[Any], alpha: np.ndarray, beta: np.ndarray, prev: np.ndarray,
                  repeats: int) -> dict[str, float]:
    """On a worker: its partitions' E-step pass, compiled and NumPy, seconds per pass over them and annotations."""
    from heroeval.stage_a import distributed_parts as dist
    from heroeval.stage_a import two_coin

    parts = [p for p in dask_parts if p is not None]
    n_ann = sum(int(p.design.A.nnz) for p in parts)
    for p in parts:  # build (and compile) once
        dist.part_stats(p, None, alpha, beta, prev, False)

    def compiled() -> None:
        for p in parts:
            dist.part_stats(p, None, alpha, beta, prev, False)

    def numpy_pass() -> None:
        for p in parts:
            d = p.design
            gamma, _ = two_coin.e_step(d, alpha, beta, prev, False)
            np.asarray(d.AT @ gamma)
            np.bincount(d.group, weights=gamma, minlength=d.n_groups)

    return {"annotations": float(n_ann), "compiled_s": _median_time(compiled, repeats),
            "numpy_s": _median_time(numpy_pass, max(2, repeats // 2))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="1e7")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=str(HERE / "results" / "scale" / "dask_kernel.json"))
    a = ap.parse_args(argv)

    import logging

    import dask.dataframe as dd
    import distributed

    import heroeval as he
    from heroeval.stage_a import kernels
    from heroeval.stage_a.distributed import _design, load_dask_history

    out: dict[str, Any] = {"size": a.size, "repeats": a.repeats}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        write_data(int(float(a.size)), 50, a.seed, d)
        gold = pd.read_parquet(d / "gold.parquet")
        hist = he.read_annotations(d / "history.parquet", gold=gold)
        cal = he.calibrate(hist, checks=False)
        alpha, beta, prev = cal.alpha, cal.beta, cal.round_prevalence
        cd = kernels.compact_design(hist.item_ptr, hist.labeler, hist.label, hist.n_labelers, hist.gold,
                                    hist.item_round, hist.n_rounds)
        cd.e_sums(alpha, beta, prev, False)
        t_mem = _median_time(lambda: cd.e_sums(alpha, beta, prev, False), a.repeats)
        threads = int(cd.n_chunks)
        out["n_annotations"] = hist.n_annotations
        out["in_memory"] = {"pass_s": t_mem, "threads": threads,
                            "ns_per_annotation_core": t_mem * threads / hist.n_annotations * 1e9}
        logging.getLogger("distributed").setLevel(logging.ERROR)
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                      memory_limit="6GB") as cl, distributed.Client(cl) as c:
            dh = load_dask_history(dd.read_parquet(d / "history.parquet", split_row_groups=True), gold=gold,
                                   client=c, partitioned_by_item=True)
            out["partitions"] = len(dh.parts)
            # each worker's own partitions (who_has: the worker holding each persisted partition)
            who = c.who_has(dh.parts)
            by_worker: dict[str, list[Any]] = {}
            for f in dh.parts:
                by_worker.setdefault(next(iter(who[f.key])), []).append(f)
            workers = {}
            for w, futs in by_worker.items():
                r = c.submit(_worker_costs, futs, alpha, beta, prev, a.repeats, workers=[w], pure=False).result()
                r["ns_per_annotation_compiled"] = r["compiled_s"] / r["annotations"] * 1e9
                r["ns_per_annotation_numpy"] = r["numpy_s"] / r["annotations"] * 1e9
                r["ratio_to_in_memory"] = r["ns_per_annotation_compiled"] / out["in_memory"]["ns_per_annotation_core"]
                workers[w] = r
            out["workers"] = workers
            design = _design(dh, 1.0, None, 0.0)
            design.em_map(alpha, beta, prev, False)
            out["dask_em_map_s"] = _median_time(lambda: design.em_map(alpha, beta, prev, False), a.repeats)
            out["in_memory_em_map_s"] = _median_time(lambda: cd.em_map(alpha, beta, prev, False), a.repeats)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
