#!/usr/bin/env python
"""Issue #43 item 6: what Stage A would cost at 1e11 annotations on 100 Dask workers, from costs measured here.

The model. A Dask fit (:func:`heroeval.stage_a.distributed.fit_stage_a_dask`) is a sequence of maps over the
partitions, each followed by a reduce of small sums on the client: E-step passes (``part_stats``), observed
informations for the Newton steps (``part_info``) and one covariance (``part_cov``). A map of kind ``k`` over
``P`` partitions on ``W`` workers costs

    t_k = c(P) + n_max * b_k

``c(P) = c0 + c1 P`` the scheduler's round trip for ``P`` tasks on futures already on the workers (measured with
tasks that do nothing, on the same cluster), ``n_max`` the annotations of the busiest worker and ``b_k`` the
seconds per annotation of kind ``k`` on a worker (one thread; measured from the maps of a fit at ``--size``). The
fit costs ``sum_k m_k t_k`` plus the client's own work between maps (``r``, measured: wall time less the maps'),
``m_k`` the number of maps of each kind. The load (:func:`heroeval.stage_a.distributed.load_dask_history`) costs
``L0 + l * n_max + q * (P / W - 1)``, ``L0`` measured on a tiny history (one partition), ``q`` the cost of a
partition on its worker (the difference between the fastest of three loads of the ``--size`` history in four
times more row groups and the fastest of three as it is) and ``l`` from the latter.

The check (a simulation on this machine): the same constants predict the fit and the load of a history
``--check-factor`` times larger (more partitions, more annotations per worker), which is then loaded and fitted on
the same cluster; predicted and measured are reported side by side. The maps' counts ``m_k`` come from the
fit at ``--size`` (their number does not grow with the data for the scale benchmark's crowd: 16 maps at 1e7 and at
1e8, benchmarks/results/scale/dask_parity_*.json).

Warm start (``--days``): the history is cut into ``days`` equal runs of items; Stage A is fitted on all but the
last day ("yesterday"), then the whole history is fitted from yesterday's parameters instead of the gold-based
start (in memory: the number of maps is the same as on Dask, both being one map per EM step), and the maps
counted. heroeval does not yet offer that start (``calibrate`` always starts from the gold), nor a Dask history
that keeps yesterday's loaded partitions and adds today's: both enter the estimate as what they would save.

Stragglers: a map waits for its slowest worker. Each partition's pass is timed ``--repeats`` times on its worker;
the relative spread of those times gives, by Monte Carlo with 100 workers and the partitions each would hold, the
expected slowest worker's time over the mean one's.

    PYTHONPATH=. OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.cost_1e11 --size 1e7 --check-factor 10

Writes benchmarks/results/scale/cost_1e11.json and prints the table of docs/scale.md, "1e11 on paper".
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import benchmarks.scale as scale_data

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "scale" / "cost_1e11.json"


class Maps:
    """Counts and times the client's gathers by the function their tasks ran (one gather = one map)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.inner = client.gather
        self.n: dict[str, int] = defaultdict(int)
        self.s: dict[str, float] = defaultdict(float)
        client.gather = self.gather

    def gather(self, futures: Any, *args: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        out = self.inner(futures, *args, **kw)
        fs = futures if isinstance(futures, list) else [futures]
        kind = str(fs[0].key).split("-")[0] if fs and hasattr(fs[0], "key") else "other"
        self.n[kind] += 1
        self.s[kind] += time.perf_counter() - t0
        return out

    def reset(self) -> None:
        self.n.clear()
        self.s.clear()

    def close(self) -> None:
        self.client.gather = self.inner


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _nothing(part: Any) -> int:
    return 0


def scheduler_cost(client: Any, repeats: int) -> dict[str, Any]:
    """``c(P)``: the wall time of a map of ``P`` tasks that do nothing on futures already on the workers."""
    rows = []
    for P in (2, 8, 32, 128):
        futs = client.scatter(list(range(P)))
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            client.gather([client.submit(_nothing, f, pure=False) for f in futs])
            ts.append(time.perf_counter() - t0)
        rows.append((P, statistics.median(ts)))
    c1, c0 = np.polyfit([r[0] for r in rows], [r[1] for r in rows], 1)
    return {"c0_s": float(c0), "c1_s_per_task": float(c1), "measured": rows}


def _per_partition_passes(parts: list[Any], alpha: np.ndarray, beta: np.ndarray, prev: np.ndarray,
                          repeats: int) -> list[list[float]]:
    """On a worker: each of its partitions' E-step pass (``part_stats``), ``repeats`` times (seconds)."""
    from heroeval.stage_a import distributed_parts as dist

    out = []
    for p in parts:
        dist.part_stats(p, None, alpha, beta, prev, False)
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            dist.part_stats(p, None, alpha, beta, prev, False)
            ts.append(time.perf_counter() - t0)
        out.append(ts)
    return out


def straggler_factor(client: Any, dh: Any, fit: Any, repeats: int, workers: int, parts_per_worker: int,
                     seed: int = 0, draws: int = 2000) -> dict[str, Any]:
    """The expected slowest of ``workers`` workers' map time over the mean worker's, by Monte Carlo from the spread
    of the partitions' pass times measured here (each partition's times over its own median)."""
    who = client.who_has(dh.parts)
    by_worker: dict[str, list[Any]] = defaultdict(list)
    for f in dh.parts:
        by_worker[next(iter(who[f.key]))].append(f)
    rel: list[float] = []
    for w, futs in by_worker.items():
        times = client.submit(_per_partition_passes, futs, fit.alpha, fit.beta, fit.round_prevalence, repeats,
                              workers=[w], pure=False).result()
        for ts in times:
            m = statistics.median(ts)
            rel.extend(t / m for t in ts)
    r = np.asarray(rel)
    rng = np.random.default_rng(seed)
    per_worker = rng.choice(r, size=(draws, workers, parts_per_worker)).mean(axis=2)
    return {"relative_times": {"n": int(r.size), "sd": float(r.std()), "max": float(r.max())},
            "workers": workers, "parts_per_worker": parts_per_worker,
            "expected_max_over_mean": float(per_worker.max(axis=1).mean() / per_worker.mean())}


def busiest(client: Any, dh: Any) -> tuple[int, int]:
    """The annotations of the busiest worker, and the number of workers holding partitions."""
    who = client.who_has(dh.parts)
    n = defaultdict(int)
    sizes = client.gather([client.submit(lambda p: int(p.design.A.nnz), f, pure=False) for f in dh.parts])
    for f, s in zip(dh.parts, sizes, strict=True):
        n[next(iter(who[f.key]))] += s
    return max(n.values()), len(n)


def write(size: float, out: Path, chunk_items: int, seed: int) -> dict[str, Any]:
    """The scale benchmark's data (J = 50, 3-5 labels per item, 1 % gold), row groups of ``chunk_items`` items."""
    old = scale_data.CHUNK_ITEMS
    scale_data.CHUNK_ITEMS = chunk_items
    try:
        return scale_data.write_data(int(size), 50, seed, out)
    finally:
        scale_data.CHUNK_ITEMS = old


def load_and_fit(client: Any, maps: Maps, d: Path, gold: pd.DataFrame) -> dict[str, Any]:
    """Load the history on the cluster and fit Stage A once (warm-up fit first); wall times and maps."""
    import dask.dataframe as dd

    from heroeval.stage_a.distributed import fit_stage_a_dask, load_dask_history

    t0 = time.perf_counter()
    dh = load_dask_history(dd.read_parquet(d / "history.parquet", split_row_groups=True), gold=gold, client=client,
                           partitioned_by_item=True)
    load_s = time.perf_counter() - t0
    n_max, n_workers = busiest(client, dh)
    fit_stage_a_dask(dh)  # warm-up: numba on the workers, caches
    maps.reset()
    t0 = time.perf_counter()
    cal = fit_stage_a_dask(dh)
    fit_s = time.perf_counter() - t0
    return {"dh": dh, "cal": cal, "load_s": load_s, "fit_s": fit_s, "n_max": n_max, "workers_used": n_workers,
            "partitions": len(dh.parts), "n_annotations": int(dh.n_annotations.sum()),
            "maps": dict(maps.n), "map_s": dict(maps.s)}


def load_only(client: Any, d: Path, gold: pd.DataFrame, repeats: int) -> dict[str, Any]:
    """The fastest of ``repeats`` loads of the history at ``d`` (each released before the next), with its busiest
    worker's annotations and partitions per worker."""
    import dask.dataframe as dd

    from heroeval.stage_a.distributed import load_dask_history

    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        dh = load_dask_history(dd.read_parquet(d / "history.parquet", split_row_groups=True), gold=gold,
                               client=client, partitioned_by_item=True)
        times.append(time.perf_counter() - t0)
        n_max, n_workers = busiest(client, dh)
        parts = len(dh.parts)
        del dh
    return {"load_s": min(times), "load_s_all": times, "n_max": n_max, "partitions_per_worker": parts / n_workers}


def warm_start_maps(d: Path, gold: pd.DataFrame, days: int) -> dict[str, Any]:
    """Maps of the whole history's fit from the gold-based start and from yesterday's fit (all but the last of
    ``days`` equal runs of items), in memory."""
    import heroeval as he
    from heroeval.stage_a import kernels, two_coin
    from heroeval.stage_a.fit import information_of
    from heroeval.stage_a.gold import initial_values
    from heroeval.stage_a.settings import EMSettings

    hist = he.read_annotations(d / "history.parquet", gold=gold)
    n_keep = hist.n_items - hist.n_items // days
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yesterday = he.calibrate(hist.take_items(np.arange(n_keep)), checks=False)
    dz = kernels.compact_design(hist.item_ptr, hist.labeler, hist.label, hist.n_labelers, hist.gold,
                                hist.item_round, hist.n_rounds)
    stop = EMSettings().stopping
    cold = two_coin.run_em(dz, initial_values(hist), stop=stop,
                           information=information_of(dz), posteriors=False)
    warm = two_coin.run_em(dz, (np.asarray(yesterday.alpha), np.asarray(yesterday.beta),
                                np.asarray(yesterday.round_prevalence)), stop=stop, information=information_of(dz),
                           posteriors=False)
    diff = float(max(np.max(np.abs(cold.alpha - warm.alpha)), np.max(np.abs(cold.beta - warm.beta))))
    return {"days": days, "cold_maps": int(cold.n_iter), "warm_maps": int(warm.n_iter),
            "max_abs_diff_params": diff}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=float, default=1e7)
    ap.add_argument("--check-factor", type=int, default=10)
    ap.add_argument("--chunk-items", type=int, default=250_000, help="items per row group (one partition each)")
    ap.add_argument("--days", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--target", type=float, default=1e11)
    ap.add_argument("--target-workers", type=int, default=100)
    ap.add_argument("--target-parts-per-worker", type=int, default=4)
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)

    import distributed

    logging.getLogger("distributed").setLevel(logging.ERROR)
    res: dict[str, Any] = {"size": a.size, "check_size": a.size * a.check_factor, "chunk_items": a.chunk_items}
    with tempfile.TemporaryDirectory() as tmp, distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, memory_limit="9GB") as cl, \
            distributed.Client(cl) as client:
        maps = Maps(client)
        c = scheduler_cost(client, 15)
        res["scheduler"] = c
        dirs = {}
        for name, size, chunk in (("tiny", 2e4, a.chunk_items), ("base", a.size, a.chunk_items),
                                  ("fine", a.size, max(1, a.chunk_items // 4)),
                                  ("check", a.size * a.check_factor, a.chunk_items)):
            dirs[name] = Path(tmp) / name
            dirs[name].mkdir()
            write(size, dirs[name], chunk, a.seed)
        golds = {k: pd.read_parquet(v / "gold.parquet") for k, v in dirs.items()}
        load_and_fit(client, maps, dirs["tiny"], golds["tiny"])  # warm-up: imports and compiles on the workers
        L0 = min(load_and_fit(client, maps, dirs["tiny"], golds["tiny"])["load_s"] for _ in range(3))
        rss0 = sum(client.run(_rss).values())
        base = load_and_fit(client, maps, dirs["base"], golds["base"])
        bytes_per = (sum(client.run(_rss).values()) - rss0) / base["n_annotations"]
        cP = c["c0_s"] + c["c1_s_per_task"] * base["partitions"]
        b = {k: max(base["map_s"][k] / base["maps"][k] - cP, 0.0) / base["n_max"] for k in base["maps"]}
        r = base["fit_s"] - sum(base["map_s"].values())
        # the load's constants from the fastest of three loads each: the history as it is, and the same history
        # in four times more partitions (what a partition costs its worker beyond its rows)
        coarse = load_only(client, dirs["base"], golds["base"], 3)
        fine = load_only(client, dirs["fine"], golds["fine"], 3)
        ppw_base, ppw_fine = coarse["partitions_per_worker"], fine["partitions_per_worker"]
        q = max((fine["load_s"] - coarse["load_s"]) / (ppw_fine - ppw_base), 0.0) if ppw_fine > ppw_base else 0.0
        l_per = max(coarse["load_s"] - L0 - q * (ppw_base - 1), 0.0) / coarse["n_max"]
        res["loads"] = {"coarse": coarse, "fine": fine}
        res["constants"] = {"L0_s": L0, "load_s_per_annotation_worker": l_per, "load_s_per_partition_worker": q,
                            "b_s_per_annotation": b,
                            "client_between_maps_s": r, "maps": base["maps"],
                            "worker_bytes_per_annotation": bytes_per}
        res["straggler"] = straggler_factor(client, base["dh"], base["cal"], a.repeats, a.target_workers,
                                            a.target_parts_per_worker)
        res["base"] = {k: v for k, v in base.items() if k not in ("dh", "cal")}
        del base["dh"]

        def predict(n_max: float, P: int, m: dict[str, int], per_worker: float) -> dict[str, float]:
            cp = c["c0_s"] + c["c1_s_per_task"] * P
            fit = sum(m.get(k, 0) * (cp + n_max * b[k]) for k in b) + r
            return {"load_s": L0 + l_per * n_max + q * (per_worker - 1), "fit_s": fit}

        chk = load_and_fit(client, maps, dirs["check"], golds["check"])
        pred = predict(chk["n_max"], chk["partitions"], base["maps"], chk["partitions"] / chk["workers_used"])
        del chk["dh"]
        again = load_only(client, dirs["check"], golds["check"], 2)  # the constants are fastest-of-three loads too
        res["check"] = {**{k: v for k, v in chk.items() if k not in ("dh", "cal")},
                        "load_s_fastest": min(chk["load_s"], again["load_s"]),
                        "predicted_load_s": pred["load_s"], "predicted_fit_s": pred["fit_s"],
                        "maps_predicted": base["maps"]}
        maps.close()
        res["warm_start"] = warm_start_maps(dirs["base"], golds["base"], a.days)

    # the estimate: 1e11 annotations over target workers, one thread each, as measured here
    W, ppw = a.target_workers, a.target_parts_per_worker
    n_w = a.target / W
    m_cold = res["base"]["maps"]
    warm_ratio = res["warm_start"]["warm_maps"] / res["warm_start"]["cold_maps"]
    m_warm = {k: max(1, round(v * warm_ratio)) if k == "part_stats" else v for k, v in m_cold.items()}
    slow = res["straggler"]["expected_max_over_mean"]
    est: dict[str, Any] = {"annotations": a.target, "workers": W, "partitions": W * ppw,
                           "annotations_per_worker": n_w}
    for name, m in (("cold_start", m_cold), ("warm_start", m_warm)):
        p = predict(n_w * slow, W * ppw, m, ppw)
        est[name] = {"maps": m, "fit_s": p["fit_s"]}
    q = res["constants"]["load_s_per_partition_worker"]
    est["load_all_s"] = L0 + l_per * n_w * slow + q * (ppw - 1)
    est["load_one_day_s"] = L0 + l_per * n_w / a.days * slow + q * (ppw - 1)
    est["worker_memory_gib"] = res["constants"]["worker_bytes_per_annotation"] * n_w / 2**30
    res["estimate"] = est
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1, default=float) + "\n")
    print(table(res))
    return 0


def table(res: dict[str, Any]) -> str:
    ch, e, k = res["check"], res["estimate"], res["constants"]
    lines = [
        "| | measured | predicted | ratio |", "|---|---:|---:|---:|",
        f"| load, {ch['n_annotations']:.1e} annotations, {ch['partitions']} partitions, fastest of three | "
        f"{ch['load_s_fastest']:.2f} s | {ch['predicted_load_s']:.2f} s | "
        f"{ch['predicted_load_s'] / ch['load_s_fastest']:.2f} |",
        f"| the same, the first load (new files) | {ch['load_s']:.2f} s | {ch['predicted_load_s']:.2f} s | "
        f"{ch['predicted_load_s'] / ch['load_s']:.2f} |",
        f"| Stage A fit, same | {ch['fit_s']:.2f} s | {ch['predicted_fit_s']:.2f} s | "
        f"{ch['predicted_fit_s'] / ch['fit_s']:.2f} |",
        "",
        f"constants (2 workers, {res['base']['n_annotations']:.1e} annotations, {res['base']['partitions']} "
        f"partitions): c0 {res['scheduler']['c0_s'] * 1e3:.2f} ms, c1 {res['scheduler']['c1_s_per_task'] * 1e3:.3f} "
        f"ms/task, b " + ", ".join(f"{n} {v * 1e9:.2f} ns" for n, v in k["b_s_per_annotation"].items())
        + f", client between maps {k['client_between_maps_s']:.2f} s, L0 {k['L0_s']:.2f} s, "
        f"load {k['load_s_per_annotation_worker'] * 1e9:.0f} ns/annotation/worker and "
        f"{k['load_s_per_partition_worker'] * 1e3:.0f} ms/partition/worker; maps {k['maps']}",
        f"warm start: {res['warm_start']['cold_maps']} -> {res['warm_start']['warm_maps']} EM maps "
        f"(yesterday = all but 1/{res['warm_start']['days']} of the items; params differ by "
        f"{res['warm_start']['max_abs_diff_params']:.1e}); straggler factor "
        f"{res['straggler']['expected_max_over_mean']:.3f} at {e['workers']} workers",
        "",
        f"| {e['annotations']:.0e} annotations on {e['workers']} workers | seconds |", "|---|---:|",
        f"| load the whole history | {e['load_all_s']:.0f} |",
        f"| load one day (1/{res['warm_start']['days']}) | {e['load_one_day_s']:.1f} |",
        f"| a worker's memory for its partitions (GiB) | {e['worker_memory_gib']:.1f} |",
        f"| Stage A, gold-based start | {e['cold_start']['fit_s']:.1f} |",
        f"| Stage A, from yesterday's calibration | {e['warm_start']['fit_s']:.1f} |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
