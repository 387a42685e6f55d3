#!/usr/bin/env python
"""What the model checks cost against the fit: ``calibrate(checks=True)`` and ``calibrate(checks=False)`` wall time.

    .venv/bin/python -m benchmarks.checks_cost --label after
    PYTHONPATH=/tmp/base_src .venv/bin/python -m benchmarks.checks_cost --label before   # another version
    .venv/bin/python -m benchmarks.checks_cost --table    # the two side by side (benchmarks/results/scale/)
    .venv/bin/python -m benchmarks.checks_cost --table session_start,after   # any two labels

Histories: the benchmark protocol's split 0 (shift none, rho 0.10, n 200;
:func:`heroeval.workflows.benchmark.make_split`) of every binary set in
``../shared/data`` (``benchmarks.real_data.BINARY``), and a simulated sparse
crowd (:func:`sparse_crowd`: 1,000 labelers, 3 labels per item, labelers'
activity skewed so that most have few labels, 10% gold). Each history is
calibrated without checks, then with them (the model checks' refits, cold
on all of these: some labeler has fewer than ``WARM_MIN_LABELS`` labels),
one after the other, in one process; a warm-up fit on the bundled example
comes first. Writes ``checks_cost_<label>.csv`` and ``.json``; ``--table``
prints the markdown table of the ``before`` and ``after`` files.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.workflows.benchmark import load_folder, make_split
from heroeval.workflows.demo import example_paths

from benchmarks.real_data import BINARY

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "scale"


def sparse_crowd(n_labelers: int = 1000, n_items: int = 10_000, per_item: int = 3, gold_share: float = 0.10,
                 seed: int = 0) -> he.AnnotationSet:
    """A simulated sparse crowd: ``n_items`` items with ``per_item`` labels each from distinct labelers drawn with
    Zipf-like activity (a few labelers label hundreds of items, most a handful), sensitivities and specificities
    from Beta(8, 2) (about 0.8), prevalence 0.3, gold on ``gold_share`` of the items. numpy, fixed seed."""
    rng = np.random.default_rng(seed)
    act = 1.0 / np.arange(1, n_labelers + 1) ** 0.8
    act /= act.sum()
    sens, spec = rng.beta(8, 2, n_labelers), rng.beta(8, 2, n_labelers)
    y = (rng.random(n_items) < 0.3).astype(int)
    who = np.stack([rng.choice(n_labelers, per_item, replace=False, p=act) for _ in range(n_items)])
    item = np.repeat(np.arange(n_items), per_item)
    lab = who.ravel()
    yy = y[item]
    right = rng.random(item.size) < np.where(yy == 1, sens[lab], spec[lab])
    z = np.where(right, yy, 1 - yy)
    ann = pd.DataFrame({"item_id": [f"i{i}" for i in item], "labeler_id": [f"l{j}" for j in lab], "label": z})
    g = np.flatnonzero(rng.random(n_items) < gold_share)
    gold = pd.DataFrame({"item_id": [f"i{i}" for i in g], "gold": y[g]})
    return he.read_annotations(ann, gold=gold)


def histories(root: Path, only: set[str]) -> list[tuple[str, he.AnnotationSet]]:
    out = []
    for name, suffix in BINARY:
        if only and name not in only:
            continue
        bd = load_folder(root / name, binary_suffix=suffix, text_components=0)
        out.append((name, make_split(bd, 0, 0.10, 200, "none", 0).history))
    if not only or "sparse_crowd_1000" in only:
        out.append(("sparse_crowd_1000", sparse_crowd()))
    return out


def run(root: Path, label: str, only: set[str]) -> None:
    ex = example_paths()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        he.calibrate(he.read_annotations(ex["history"], gold=ex["gold"]), checks=True)  # warm-up
    rows = []
    for name, h in histories(root, only):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            he.calibrate(h, checks=False)
            t_fit = time.perf_counter() - t
            t = time.perf_counter()
            c = he.calibrate(h, checks=True)
            t_chk = time.perf_counter() - t
        assert c.checks is not None
        rows.append({"set": name, "labelers": h.n_labelers, "annotations": h.n_annotations, "items": h.n_items,
                     "gold": int((h.gold >= 0).sum()), "checks_false_s": round(t_fit, 3),
                     "checks_true_s": round(t_chk, 3), "ratio": round(t_chk / t_fit, 2),
                     "chosen_weight": c.checks.chosen_weight})
        print(rows[-1], flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(OUT / f"checks_cost_{label}.csv", index=False)
    (OUT / f"checks_cost_{label}.json").write_text(json.dumps(rows, indent=1) + "\n")


def table(labels: tuple[str, str] = ("before", "after")) -> None:
    b, a = (pd.read_csv(OUT / f"checks_cost_{x}.csv") for x in labels)
    m = b.merge(a, on=["set", "labelers", "annotations"], suffixes=("_b", "_a"))
    print("| set | labelers | annotations | before: checks=False s | checks=True s | ratio "
          "| after: checks=False s | checks=True s | ratio |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in m.itertuples():
        print(f"| {r.set} | {r.labelers} | {r.annotations} | {r.checks_false_s_b:.2f} | {r.checks_true_s_b:.2f} | "
              f"{r.ratio_b:.1f} | {r.checks_false_s_a:.2f} | {r.checks_true_s_a:.2f} | {r.ratio_a:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--label", default="after")
    ap.add_argument("--only", default="", help="comma-separated set names (sparse_crowd_1000: the simulated crowd)")
    ap.add_argument("--table", nargs="?", const="before,after", default=None,
                    help="print the markdown table of two runs' files (labels, default before,after)")
    a = ap.parse_args()
    if a.table:
        first, second = a.table.split(",")
        table((first, second))
    else:
        run(Path(a.root), a.label, {x for x in a.only.split(",") if x})


if __name__ == "__main__":
    main()
