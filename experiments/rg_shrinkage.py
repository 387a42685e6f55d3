"""Issue #18 item 3: Rogan–Gladen with empirical-Bayes shrunk gold rates (``rogan_gladen(shrink="eb")``) on the real sets.

    .venv/bin/python -m experiments.rg_shrinkage --resamples 10                      # resamples 0..9
    .venv/bin/python -m experiments.rg_shrinkage --first 10 --resamples 20 --append  # add 10..29
    .venv/bin/python -m experiments.rg_shrinkage --summarize-only                   # tables from the rows

Every binary set of ``benchmarks/real_data.py`` (``BINARY``), the benchmark
protocol's splits ``make_split(data, r, 0.10, 200, shift, 2026)`` for shift in
none, half and rate; per split only ``calibrate(history, checks=False)`` and
``rogan_gladen(current, cal, exclude_new_labelers=True, shrink=...)`` for
shrink "none" and "eb" (as the benchmark calls it). Writes the per-resample
rows (``rg_shrinkage_resamples.csv``) and the summary per set, shift and
variant (``rg_shrinkage.csv``: RMSE, bias, coverage of the 95 % interval,
mean width), and prints the per-shift tables: in-sample (every set) and
leave-one-set-out (for each held-out set, "eb" is chosen over "none" when,
on the other 11 sets' cells of all three shifts, its geometric-mean RMSE
ratio is below 1 and its mean coverage is not more than 0.01 below plain's;
the held-out set is then scored with the chosen variant).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.real_data import BINARY
from experiments._variant_loso import add_choice, cell_summary, comparison_table

HERE = Path(__file__).resolve().parents[1]
SHIFTS = ("none", "half", "rate")
VARIANTS = ("none", "eb")


def run(data_dir: Path, first: int, resamples: int, only: list[str]) -> pd.DataFrame:
    rows = []
    for name, suffix in BINARY:
        if only and name not in only:
            continue
        t = time.perf_counter()
        data = load_folder(data_dir / name, binary_suffix=suffix)
        for shift in SHIFTS:
            for r in range(first, first + resamples):
                sp = make_split(data, r, 0.10, 200, shift, 2026)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cal = he.calibrate(sp.history, checks=False)
                    for v in VARIANTS:
                        x = he.rogan_gladen(sp.current, cal, exclude_new_labelers=True, shrink=v)  # type: ignore[arg-type]
                        lo, hi = x.confidence_interval(0.95)
                        rows.append({"dataset": data.name, "shift": shift, "resample": r, "shrink": v,
                                     "estimate": x.estimate, "se": x.standard_error, "ci_low": lo, "ci_high": hi,
                                     "truth": sp.truth, "status": x.status,
                                     "labelers_used": x.details.get("labelers_used", 0)})
        print(f"{data.name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    return pd.DataFrame(rows)


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    return cell_summary(rows, "shrink")


def _wide(summ: pd.DataFrame) -> pd.DataFrame:
    w = summ.pivot_table(index=["dataset", "shift"], columns="shrink", values=["rmse", "coverage", "mean_width", "bias"])
    w.columns = [f"{a}_{b}" for a, b in w.columns]
    w["log_ratio"] = np.log(w["rmse_eb"] / w["rmse_none"])
    return w.reset_index()


def tables(summ: pd.DataFrame) -> str:
    w = add_choice(_wide(summ), "none", "eb")
    lines = comparison_table(w, "none", "eb", SHIFTS, ("none", "eb"))
    lines.append("")
    lines.append("| set | shift | RMSE none | RMSE eb | bias none | bias eb | coverage none | coverage eb | LOSO choice |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for _, r in w.iterrows():
        lines.append(f"| {r['dataset']} | {r['shift']} | {r['rmse_none']:.4f} | {r['rmse_eb']:.4f} | {r['bias_none']:+.4f} "
                     f"| {r['bias_eb']:+.4f} | {r['coverage_none']:.2f} | {r['coverage_eb']:.2f} | {r['chosen']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(HERE.parent / "shared" / "data"))
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=10)
    ap.add_argument("--only", default="", help="comma-separated data set names")
    ap.add_argument("--out", default=str(HERE / "benchmarks" / "results" / "research" / "robustness"))
    ap.add_argument("--append", action="store_true", help="add to the existing per-resample rows")
    ap.add_argument("--summarize-only", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    rows_f = out / "rg_shrinkage_resamples.csv"
    if a.summarize_only:
        rows = pd.read_csv(rows_f)
    else:
        t0 = time.perf_counter()
        rows = run(Path(a.data), a.first, a.resamples, [s for s in a.only.split(",") if s])
        print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        if a.append and rows_f.exists():
            rows = pd.concat([pd.read_csv(rows_f), rows], ignore_index=True)
            rows = rows.drop_duplicates(["dataset", "shift", "resample", "shrink"], keep="last")
        out.mkdir(parents=True, exist_ok=True)
        rows.to_csv(rows_f, index=False, float_format="%.10g")
    summ = summarize(rows)
    summ.to_csv(out / "rg_shrinkage.csv", index=False, float_format="%.6g")
    print(f"resamples {int(rows['resample'].min())}..{int(rows['resample'].max())}")
    print(tables(summ))


if __name__ == "__main__":
    main()
