"""Issue #5 diagnostic: how much of the mock rounds' noise is the fold assignment?

    .venv/bin/python -m experiments.mock_fold_noise          # ~15 s

``auto`` chooses by each candidate's estimated error on mock rounds
(cross-fitted folds of the history's gold). If the random fold assignment
were a large part of that error's noise, repeating the cross-fitting with
other fold seeds would sharpen the choice. For a few real sets and splits
(``robustness.py``'s, no pool shift, resamples 0 and 1), this reruns the
checks with fold seeds 0..3 and prints, per candidate, the SD of its mock
bias across seeds next to the mock bias's own standard error (the gold
items' sampling noise): ``ratio`` = SD across seeds / standard error.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from heroeval.checks.model_checks import run_checks
from heroeval.workflows.benchmark import load_folder, make_split

SETS = ("zencrowd", "possent_zheng", "snow_rte", "duchenne")


def main() -> None:
    warnings.simplefilter("ignore")
    data_dir = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
    rows = []
    for name in SETS:
        data = load_folder(data_dir / name)
        for r in range(2):
            sp = make_split(data, r, 0.10, 200, "none", 2026)
            for seed in range(4):
                for m in run_checks(sp.history, seed=seed).mock:
                    w = m["history_weight"]
                    rows.append({"dataset": name, "resample": r, "seed": seed, "bias": m["bias"], "se": m["bias_se"],
                                 "candidate": m["method"] if w is None else f"{m['method']}@{w:g}"})
    d = pd.DataFrame(rows)
    g = d.groupby(["dataset", "resample", "candidate"]).agg(sd_across_seeds=("bias", "std"), bias_se=("se", "mean"))
    g["ratio"] = g["sd_across_seeds"] / g["bias_se"]
    pd.set_option("display.width", 160)
    print(g.round(4).to_string())
    print(g.groupby("candidate")["ratio"].median().round(3).to_string())


if __name__ == "__main__":
    main()
