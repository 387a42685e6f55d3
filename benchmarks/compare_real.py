"""Issue #40: every method's difference of two rounds (A - B) on the shared binary sets, and the recommended one.

``auto`` is the recommended difference (``he.compare(..., method="auto")``, :mod:`heroeval.choice.difference`),
beside each method's own row, so that it is judged against the best fixed method, majority vote included.

Protocol, per set and resample (seeded by set, scenario and resample):

1. Hold out ``3 n`` gold items (``n`` = ``--n``, or a fifth of the gold when fewer; at most half the gold) for the
   two rounds of ``n`` items each (the slack lets both rounds have their class counts); every
   other labelled item is history, with gold revealed on ``--rho`` of it (only items with gold can be).
2. Draw rounds A and B, disjoint, from the held-out items by class so that their gold rates are ``p_A`` and
   ``p_B = p_A + delta`` (scenarios ``equal``: delta 0, ``plus05``: 0.05, ``plus10``: 0.10, centred on the
   held-out items' rate), or, for ``pool``, equal rates with A labelled only by a random half of the labelers and
   B by the other half (a labeler-pool change between rounds, no change of model).
3. ``calibrate`` the history, ``compare(A, B, method=[...])``; score every method's A - B against the two
   rounds' true gold rates: the interval's coverage and width, and whether its two-sided test rejects "no
   difference" at 0.05 (a false rejection at delta 0, power otherwise).

    .venv/bin/python -m benchmarks.compare_real --reps 10            # every shared binary set (~15 min here)
    .venv/bin/python -m benchmarks.compare_real --only zencrowd --reps 4
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.core.parallel import run_chunks
from heroeval.errors import HeroEvalError, HeroEvalWarning
from heroeval.inference.comparison import Comparison
from heroeval.workflows.benchmark import BenchmarkData, load_folder

from benchmarks.real_data import BINARY

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
METHODS = ["majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1", "hero_joint"]
SCENARIOS = {"equal": 0.0, "plus05": 0.05, "plus10": 0.10, "pool": 0.0}


def _rounds(data: BenchmarkData, scenario: str, r: int, n: int, rho: float, seed: int
            ) -> tuple[he.AnnotationSet, he.AnnotationSet, he.AnnotationSet, float, float] | None:
    rng = np.random.default_rng([seed, r, list(SCENARIOS).index(scenario)])
    gold = data.gold.set_index("item_id")["gold"]
    ids = gold.index.to_numpy()
    n_each = min(n, ids.size // 5)
    held = rng.choice(ids, min(3 * n_each, ids.size // 2), replace=False)  # slack for the class counts
    y = gold.loc[held].to_numpy()
    pos, neg = held[y == 1], held[y == 0]
    delta = SCENARIOS[scenario]
    base = min(max(float(y.mean()) - delta / 2, 0.02), 0.98 - delta)
    ka, kb = round(n_each * base), round(n_each * (base + delta))
    if ka + kb > pos.size or 2 * n_each - ka - kb > neg.size:
        return None  # not enough items of a class for these rates
    pos, neg = rng.permutation(pos), rng.permutation(neg)
    a_items = np.r_[pos[:ka], neg[: n_each - ka]]
    b_items = np.r_[pos[ka: ka + kb], neg[n_each - ka: 2 * n_each - ka - kb]]
    lab = data.labels
    hist_lab = lab[~lab["item_id"].isin(set(held))]
    hist_items = hist_lab["item_id"].unique()
    hg = data.gold[data.gold["item_id"].isin(set(hist_items))]
    reveal = hg.sample(n=min(max(round(rho * hist_items.size), 1), len(hg)), random_state=int(rng.integers(2**31)))
    a_lab, b_lab = lab[lab["item_id"].isin(set(a_items))], lab[lab["item_id"].isin(set(b_items))]
    if scenario == "pool":
        labelers = np.sort(lab["labeler_id"].unique())
        half = set(rng.choice(labelers, labelers.size // 2, replace=False).tolist())
        a_lab = a_lab[a_lab["labeler_id"].isin(half)]
        b_lab = b_lab[~b_lab["labeler_id"].isin(half)]
    if a_lab["item_id"].nunique() < 20 or b_lab["item_id"].nunique() < 20:
        return None
    hist = he.read_annotations(hist_lab, gold=reveal, round_col=False)
    a = he.read_annotations(a_lab, round_col=False, name="A")
    b = he.read_annotations(b_lab, round_col=False, name="B")
    ta = float(gold.loc[a_lab["item_id"].unique()].mean())
    tb = float(gold.loc[b_lab["item_id"].unique()].mean())
    return hist, a, b, ta, tb


def _cell(job: tuple[str, str, str, int, float, int, Sequence[int]]) -> list[dict[str, Any]]:
    name, suffix, scenario, n, rho, seed, reps = job
    data = load_folder(DATA / name, binary_suffix=suffix, text_components=0)
    rows: list[dict[str, Any]] = []
    for r in reps:
        got = _rounds(data, scenario, r, n, rho, seed)
        if got is None:
            continue
        hist, a, b, ta, tb = got
        truth = ta - tb
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HeroEvalWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            cal = he.calibrate(hist)
            try:  # every method and the recommended difference ("auto") in one call, on one calibration
                cc = he.compare(a, b, cal, method=[*METHODS, "auto"], history=hist)
            except HeroEvalError as exc:
                cc = None
                why = str(exc)[:200]
            for m in [*METHODS, "auto"]:
                base = {"set": data.name, "scenario": scenario, "resample": r, "method": m, "truth": truth,
                        "n_a": a.n_items, "n_b": b.n_items}
                c: Comparison | None = None
                extra: dict[str, Any] = {}
                if cc is None:
                    pass
                elif m == "auto" and cc.recommended is not None:
                    c = cc.recommended.comparison
                    extra = {"chosen": cc.recommended.method, "status": cc.recommended.status}
                elif m in cc.comparisons:
                    c = cc.comparisons[m]
                else:
                    why = cc.skipped.get(m, "not computed")
                if c is None:  # counted, with the reason (e.g. no influence values at a boundary)
                    rows.append({**base, "failed": why[:200] or "failed"})
                    continue
                ci = c.confidence_interval(0.95)
                rows.append({**base, **extra, "estimate": c.estimate, "ci_low": ci.low, "ci_high": ci.high,
                             "covered": bool(ci.low <= truth <= ci.high), "width": ci.high - ci.low,
                             "rejects": bool(c.p_value < 0.05), "failed": ""})
    return rows


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    failed = (df["failed"] != "").groupby([df["scenario"], df["method"]], sort=False).sum().rename("failed")
    df = df[df["failed"] == ""]
    g = df.groupby(["scenario", "method"], sort=False)
    per_set = df.groupby(["set", "scenario", "method"]).agg(coverage=("covered", "mean")).reset_index()
    worst = per_set.groupby(["scenario", "method"]).coverage.min().rename("worst_set_coverage")
    out = g.agg(resamples=("covered", "size"), coverage=("covered", "mean"), width=("width", "mean"),
                rejects=("rejects", "mean")).join(worst)
    err = (df["estimate"] - df["truth"]) ** 2
    out["rmse"] = np.sqrt(err.groupby([df["scenario"], df["method"]]).mean())
    return out.join(failed).reset_index()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rho", type=float, default=0.10)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--only", default=None, help="Comma-separated set names.")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/compare"))
    a = ap.parse_args()
    sets = [(nm, sx) for nm, sx in BINARY if a.only is None or nm in a.only.split(",")]
    jobs = [(nm, sx, sc, a.n, a.rho, a.seed, list(range(a.reps))) for nm, sx in sets for sc in SCENARIOS]
    df = pd.DataFrame(run_chunks(_cell, jobs, [a.reps] * len(jobs), a.workers, None))
    a.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out / "resamples.csv.gz", index=False)
    s = summarize(df)
    s.to_csv(a.out / "summary.csv", index=False)
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(s.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()
