"""Timings of the store (docs/store.md): an add into a large store, an estimate with a cached fit and with a refit.

Builds a store of ``--base`` annotations (rounds of 1e6 annotations: 200,000
items x 5 labels from 50 labelers, two-coin model) in a temporary directory;
the first ``--history-rounds`` rounds carry gold on 1 % of their items (the
history), the others none (past versions without gold). Base rounds are
added as AnnotationSets (already int-coded, so building the store is not
dominated by CSV parsing); the timed add reads a Parquet file of 1e6
annotations through ``he.read_annotations`` like any user add. Then:

* add: the 1e6-annotation round into the full store (read + hash + insert, one transaction);
* re-add: the same file again (read + hash, found, nothing written);
* estimate, cached: a new 10,000-item round (Parquet file) against the cached calibration, ``method="all"``
  with the recommended estimate from the saved model checks, the history not loaded (``history=False``);
  and ``method="hero1"``;
* estimate, refit: the same with ``refit=True`` (loads the history rounds from the store, Stage A with the
  model checks, caches the fit).

    .venv/bin/python -m benchmarks.store                      # 1e8 base (about 15-25 minutes here)
    .venv/bin/python -m benchmarks.store --base 1e7           # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.ingest.annotations import AnnotationSet, IngestReport, TableReport

J = 50
K = 5


def synth(seed: int, n_items: int, prefix: str, gold_share: float, alpha: np.ndarray, beta: np.ndarray,
          prev: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.random(n_items) < prev
    lab = rng.integers(0, J, (n_items, K))  # may repeat a labeler on an item (kept as separate labels)
    yy = np.repeat(y, K)
    p = np.where(yy, alpha[lab.ravel()], 1 - beta[lab.ravel()])
    z = (rng.random(n_items * K) < p).astype(np.int8)
    items = np.array([f"{prefix}{i:07d}" for i in range(n_items)], dtype=object)
    gold = np.where(rng.random(n_items) < gold_share, y.astype(np.int8), np.int8(-1)).astype(np.int8)
    return items, lab.ravel().astype(np.int32), z, gold


def as_set(items: np.ndarray, lab: np.ndarray, z: np.ndarray, gold: np.ndarray, name: str) -> AnnotationSet:
    n = items.size
    order = np.argsort(items, kind="stable")  # items are zero-padded: already sorted
    assert np.all(order == np.arange(n))
    rep = IngestReport((TableReport("annotations", name, n * K, n * K),))
    return AnnotationSet(items, np.array([f"L{j:02d}" for j in range(J)], dtype=object),
                         np.arange(0, n * K + 1, K, dtype=np.int64), lab, z, gold,
                         np.zeros(n, dtype=np.int32), ("all",), None, (), rep, name)


def to_files(items: np.ndarray, lab: np.ndarray, z: np.ndarray, gold: np.ndarray, path: Path) -> Path | None:
    pd.DataFrame({"item_id": np.repeat(items, K), "labeler_id": [f"L{j:02d}" for j in lab], "label": z}) \
        .to_parquet(path, index=False)
    g = gold >= 0
    if not g.any():
        return None
    gp = path.with_name(path.stem + "_gold.parquet")
    pd.DataFrame({"item_id": items[g], "gold": gold[g]}).to_parquet(gp, index=False)
    return gp


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=float, default=1e8, help="annotations in the store before the timed add")
    ap.add_argument("--history-rounds", type=int, default=10, help="base rounds with gold (1 %% of items)")
    ap.add_argument("--dir", default=None, help="working directory (default: a temporary one, removed)")
    ap.add_argument("--out", default="benchmarks/results/store/store_timings.json")
    a = ap.parse_args()
    work = Path(a.dir or tempfile.mkdtemp(prefix="hero-store-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    alpha, beta = rng.uniform(0.65, 0.95, J), rng.uniform(0.6, 0.95, J)
    n_round = 200_000
    n_base_rounds = round(a.base / (n_round * K))
    st = he.Store(work / "hero.duckdb", wait=60)
    t0 = time.perf_counter()
    for r in range(n_base_rounds):
        items, lab, z, gold = synth(r + 1, n_round, f"r{r:03d}_", 0.01 if r < a.history_rounds else 0.0, alpha,
                                    beta, 0.3 + 0.002 * r)
        st.add(as_set(items, lab, z, gold, f"v{r:03d}"), name=f"v{r:03d}", model=f"model-{r:03d}")
        if (r + 1) % 10 == 0:
            print(f"built {r + 1}/{n_base_rounds} rounds, {time.perf_counter() - t0:.0f} s", flush=True)
    build_s = time.perf_counter() - t0
    rounds = st.rounds()
    n_base = sum(x.n_annotations for x in rounds)
    out: dict[str, object] = {"base_annotations": n_base, "base_rounds": len(rounds),
                              "history_rounds": a.history_rounds,
                              "history_annotations": sum(x.n_annotations for x in rounds if x.in_history),
                              "build_s": build_s}
    print(json.dumps(out), flush=True)
    # the first calibration (not timed as an estimate): fills the cache
    t0 = time.perf_counter()
    sc = st.calibrate()
    out["first_calibration_s"] = time.perf_counter() - t0
    out["first_calibration_status"] = sc.status
    # the timed add: 1e6 annotations from a Parquet file, with gold
    items, lab, z, gold = synth(10_000, n_round, "new_", 0.01, alpha, beta, 0.35)
    f_add = work / "week.parquet"
    g_add = to_files(items, lab, z, gold, f_add)
    t0 = time.perf_counter()
    ds = he.read_annotations(f_add, gold=g_add)
    out["add_read_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = st.add(f_add, gold=g_add, name="week", model="model-new")
    out["add_s"] = time.perf_counter() - t0
    assert res.added and res.added[0].n_annotations == ds.n_annotations
    t0 = time.perf_counter()
    res = st.add(f_add, gold=g_add, name="week-again")
    out["readd_s"] = time.perf_counter() - t0
    assert not res.added and res.duplicates
    # the new round to estimate: 10,000 items, no gold
    items, lab, z, gold = synth(20_000, 10_000, "cur_", 0.0, alpha, beta, 0.25)
    f_cur = work / "current.parquet"
    to_files(items, lab, z, gold, f_cur)
    st.remove("week")  # back to the calibrated history, so the next estimate finds the cached fit
    timings = {}
    for label, kw in (("cached_all", {"method": "all", "history": False}),
                      ("cached_hero1", {"method": "hero1", "history": False}),
                      ("refit_all", {"method": "all", "history": False, "refit": True})):
        t0 = time.perf_counter()
        e = st.estimate(f_cur, **kw)
        secs = time.perf_counter() - t0
        r1 = e.estimates if isinstance(e.estimates, he.EstimateResult) else e.estimates["hero1"]
        rec = getattr(e.estimates, "recommended", None)
        timings[label] = {"seconds": secs, "calibration": e.calibration.status,
                          "hero1": r1.estimate, "recommended": None if rec is None else rec.method}
        print(label, json.dumps(timings[label]), flush=True)
    out["estimate"] = timings
    out["store_bytes"] = os.path.getsize(st.path)
    out["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    out["cpu_count"] = os.cpu_count()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    if a.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
