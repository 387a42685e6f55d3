"""Compare a rerun of a resample benchmark with a stored run, resample by resample.

Both files are ``resamples.csv.gz`` tables of ``benchmarks/robustness.py`` or ``benchmarks/grouped.py``. Rows
are matched on (dataset, split, group, shift, resample, method); the stored run is cut to the rerun's
resamples. The comparison first checks that the splits are the same (the methods that use no model check,
majority vote and the gold proportion, give the same estimates on every matched row), then reports, per shift
and for the recommended estimate (``auto``), coverage, mean width and RMSE in both runs, the lowest data set's
coverage, and how many resamples changed their pick::

    python -m benchmarks.rerun_compare STORED.csv.gz RERUN.csv.gz [--out TABLE.csv]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

KEY = ["dataset", "split", "group", "shift", "resample", "method"]
UNCHECKED = ("majority_vote", "gold_proportion")


def _read(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path, low_memory=False)
    df = df[pd.to_numeric(df["resample"], errors="coerce").notna()].copy()
    df["resample"] = df["resample"].astype(int)
    df["group"] = df["group"].fillna("")
    return df


def compare(stored: pd.DataFrame, rerun: pd.DataFrame, method: str = "auto") -> tuple[pd.DataFrame, dict[str, int]]:
    """The per-shift table of ``method`` in both runs, and the counts behind the same-splits check."""
    m = stored.merge(rerun, on=KEY, suffixes=("_stored", "_rerun"))
    base = m[m["method"].isin(UNCHECKED)]
    info = {"matched_rows": len(m), "rerun_rows": len(rerun),
            "unchecked_rows": len(base),
            "unchecked_rows_differing": int((~np.isclose(base["estimate_stored"], base["estimate_rerun"],
                                                         rtol=0, atol=1e-12)).sum()),
            "truth_differing": int((~np.isclose(m["truth_stored"], m["truth_rerun"], rtol=0, atol=1e-12)).sum())}
    a = m[m["method"] == method].copy()
    info["picks_changed"] = int((a["picked_stored"].fillna("") != a["picked_rerun"].fillna("")).sum())
    rows = []
    for shift, g in a.groupby("shift"):
        row: dict[str, object] = {"shift": shift, "n": len(g)}
        for s in ("stored", "rerun"):
            cov = (g[f"ci_low_{s}"] <= g[f"truth_{s}"]) & (g[f"truth_{s}"] <= g[f"ci_high_{s}"])
            row[f"coverage_{s}"] = float(cov.mean())
            row[f"lowest_set_{s}"] = float(cov.groupby(g["dataset"]).mean().min())
            row[f"width_{s}"] = float((g[f"ci_high_{s}"] - g[f"ci_low_{s}"]).mean())
            row[f"rmse_{s}"] = float(np.sqrt(((g[f"estimate_{s}"] - g[f"truth_{s}"]) ** 2).mean()))
        row["picks_changed"] = int((g["picked_stored"].fillna("") != g["picked_rerun"].fillna("")).sum())
        rows.append(row)
    return pd.DataFrame(rows), info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stored", type=Path)
    ap.add_argument("rerun", type=Path)
    ap.add_argument("--method", default="auto")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    rerun = _read(a.rerun)
    stored = _read(a.stored)
    stored = stored[stored["resample"].isin(set(rerun["resample"]))]
    table, info = compare(stored, rerun, a.method)
    print(", ".join(f"{k} {v}" for k, v in info.items()))
    if info["unchecked_rows_differing"] or info["truth_differing"]:
        print("the splits differ: the runs are not comparable resample by resample")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(table.round(4).to_string(index=False))
    if a.out is not None:
        table.assign(**{k: v for k, v in info.items()}).to_csv(a.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
