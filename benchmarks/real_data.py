"""Every method on every binary data set in ../shared/data (see heroeval.benchmark for the protocol).

    .venv/bin/python benchmarks/real_data.py --resamples 20 --out docs/benchmark

Writes per-resample rows (``resamples.csv.gz``), the summary (``summary.csv``)
and ``table.md`` (RMSE, |bias| and coverage per data set, rho, shift, method).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from heroeval.benchmark import load_folder, run_benchmark, summarize_benchmark

BINARY = [
    ("adultcontent2", "_binary"), ("bluebirds", ""), ("duchenne", ""), ("mre_treat", ""), ("possent_zheng", ""),
    ("product_er", ""), ("sentiment_polarity", ""), ("snow_rte", ""), ("snow_temp", ""), ("trec2011_crowd", ""),
    ("triviaqa_llm_judges", ""), ("zencrowd", ""),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--resamples", type=int, default=20)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--out", default="docs/benchmark")
    ap.add_argument("--only", default="", help="comma-separated data set names")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    frames = []
    t0 = time.perf_counter()
    for name, suffix in BINARY:
        if a.only and name not in a.only.split(","):
            continue
        t = time.perf_counter()
        data = load_folder(Path(a.data) / name, binary_suffix=suffix)
        frames.append(run_benchmark(data, resamples=a.resamples, n=a.n))
        print(f"{data.name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    df = pd.concat(frames, ignore_index=True)
    df.to_csv(out / "resamples.csv.gz", index=False)
    summ = summarize_benchmark(df)
    summ.to_csv(out / "summary.csv", index=False)
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
