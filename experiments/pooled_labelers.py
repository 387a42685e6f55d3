"""Issue #18: HERO-1 with one pooled sensitivity and specificity for the whole crowd (no per-labeler noise).

    .venv/bin/python -m experiments.pooled_labelers --only snow_rte,duchenne --shifts none,rate --resamples 10

The question: majority vote beats every calibrated method on snow_rte,
snow_temp and duchenne under the benchmark's rate shift. Is that because
per-labeler sensitivities and specificities, each fitted on a few dozen
items, are noisy? If so, one pooled labeler (every annotation's labeler
replaced by ``"pool"``, so Stage A fits the homogeneous two-coin model)
should come close to majority vote there. The benchmark's splits
(``make_split``, rho 0.10, n 200, seed 2026), then Stage A on the pooled
history and HERO-1 / HERO joint on the pooled current round. Prints RMSE and
coverage per set, shift and method; compare with
benchmarks/results/research/robustness/shift/summary.csv (same splits, 30 resamples).

Result (10 resamples, session of 2026-12-02): under rate shift pooled
HERO-1's RMSE is 0.060 on snow_rte and 0.094 on duchenne (HERO-1 0.062 and
0.110, majority vote 0.015 and 0.042); without shift 0.046 and 0.056 (HERO-1
0.025 and 0.043). Pooling does not close the gap: majority vote's edge is
where its error line crosses zero (benchmarks/mv_crossing.py), not the
per-labeler noise. Not adopted.
"""

from __future__ import annotations

import argparse
import math
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.ingest.annotations import AnnotationSet
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.real_data import BINARY


def pooled(ds: AnnotationSet) -> AnnotationSet:
    """The same annotations with one labeler, ``"pool"``."""
    return replace(ds, labeler_ids=np.array(["pool"], dtype=object), labeler=np.zeros_like(ds.labeler),
                   repeated_pairs=True)


def run(data_dir: Path, only: list[str], shifts: list[str], resamples: int) -> pd.DataFrame:
    rows = []
    for name, suffix in BINARY:
        if only and name not in only:
            continue
        data = load_folder(data_dir / name, binary_suffix=suffix, text_components=0)
        for shift in shifts:
            for r in range(resamples):
                sp = make_split(data, r, 0.10, 200, shift, 2026)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cal = he.calibrate(pooled(sp.history))
                    for m, f in (("pooled_hero1", he.hero1), ("pooled_joint", he.hero_joint)):
                        x = f(pooled(sp.current), cal)
                        lo, hi = x.confidence_interval(0.95)
                        rows.append({"dataset": data.name, "shift": shift, "resample": r, "method": m,
                                     "estimate": x.estimate, "ci_low": lo, "ci_high": hi, "truth": sp.truth})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--only", default="snow_rte,duchenne")
    ap.add_argument("--shifts", default="none,rate")
    ap.add_argument("--resamples", type=int, default=10)
    a = ap.parse_args()
    df = run(Path(a.data), [x for x in a.only.split(",") if x], a.shifts.split(","), a.resamples)
    df["sq"] = (df["estimate"] - df["truth"]) ** 2
    df["cover"] = (df["ci_low"] <= df["truth"]) & (df["truth"] <= df["ci_high"])
    out = df.groupby(["dataset", "shift", "method"]).agg(rmse=("sq", lambda s: math.sqrt(s.mean())),
                                                         coverage=("cover", "mean"))
    print(out.round(4).to_string())


if __name__ == "__main__":
    main()
