#!/usr/bin/env python
"""Issue #43 item 4: the model checks' refits started from the whole fit ("warm") against the gold-based start
("cold", what ``refit="auto"`` runs when some labeler has fewer than ``WARM_MIN_LABELS`` labels), on the
histories of ``benchmarks/checks_cost.py`` (every shared binary set's split 0 and a simulated crowd of 1,000
sparse labelers).

For each: ``calibrate(checks=False)``, then ``run_checks(start=cal, refit="warm")`` and ``refit="cold"``, timed
one after the other in one process, and how far the two sets of checks differ: the chosen weight, the largest
difference of a log score, and of a mock round's estimate, bias or its standard error. Where the likelihood has
one maximum the two agree to the EM tolerance; where it has several, a warm refit can stay on the whole fit's
maximum, which the left-out gold items helped choose.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python -m benchmarks.checks_warm_cold

Writes benchmarks/results/scale/checks_warm_cold.csv.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.checks import ModelChecks, run_checks

from benchmarks.checks_cost import histories

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "scale" / "checks_warm_cold.csv"


def differences(a: ModelChecks, b: ModelChecks) -> dict[str, float]:
    ls = max((abs(a.log_score[w][0] - b.log_score[w][0]) for w in a.log_score), default=0.0)
    mock = [abs(ra[k] - rb[k]) for ra, rb in zip(a.mock, b.mock, strict=True) for k in ("estimate", "bias", "bias_se")
            if ra[k] is not None and rb[k] is not None and np.isfinite(ra[k]) and np.isfinite(rb[k])]
    return {"log_score_max_diff": float(ls), "mock_max_diff": float(max(mock, default=0.0))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args(argv)
    rows = []
    for name, h in histories(Path(a.data), set(a.only)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            cal = he.calibrate(h, checks=False)
            fit_s = time.perf_counter() - t0
            res, secs = {}, {}
            for refit in ("warm", "cold"):
                t0 = time.perf_counter()
                res[refit] = run_checks(h, start=cal, refit=refit)
                secs[refit] = time.perf_counter() - t0
        n_lab = np.bincount(h.labeler, minlength=h.n_labelers)
        row = {"set": name, "labelers": h.n_labelers, "min_labels": int(n_lab.min()), "fit_s": fit_s,
               "warm_s": secs["warm"], "cold_s": secs["cold"], "chosen_warm": res["warm"].chosen_weight,
               "chosen_cold": res["cold"].chosen_weight, **differences(res["warm"], res["cold"])}
        rows.append(row)
        print(", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(a.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
