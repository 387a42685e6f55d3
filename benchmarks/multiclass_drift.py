"""The K-class drift check on real sets: false alarms where nothing drifts, and detection of an injected drift.

    PYTHONPATH=. .venv/bin/python -m benchmarks.multiclass_drift --resamples 30 --out benchmarks/results/multiclass/drift

Protocol: the random splits of :mod:`benchmarks.multiclass_auto` (``shift=none``: the current round is 200 gold
items drawn uniformly, rho = 0.10 of the history has gold), where every labeler's behaviour is the same in the
history and the round by construction; Stage A with ``structure="full"`` (``hero drift --classes``' default:
each labeler's own confusion rows; a restricted structure's misfit reads as drift, ``--structure`` below);
adultcontent2: ordinal, as a full fit takes 45 s, and its current items are gold items, which were not chosen at
random (its false alarms mix misfit and a real difference). ``clean``: :func:`heroeval.multiclass.drift.check_drift_multiclass`
on the round as it is; the share of resamples with any labeler flagged is the family-wise false-alarm rate (nominal
0.05). ``injected``: the labeler with the most labels in the round (among those the calibration knows) has a share
``--inject`` of its labels replaced by the class it uses least (a judge that starts over-using a grade); the share of
resamples where it is flagged is the power, and other labelers flagged are counted.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from heroeval.core.parallel import run_chunks
from heroeval.errors import ConvergenceWarning
from heroeval.multiclass import MultiClassData, calibrate_multiclass
from heroeval.multiclass.drift import check_drift_multiclass

from benchmarks.multiclass import load
from benchmarks.multiclass_auto import SETS, split, split_arguments

STRUCTURE = {"adultcontent2": "ordinal"}
"""Per-set structure where not --structure."""


def one(args: tuple[str, pd.DataFrame, pd.DataFrame, tuple[str, ...], int, float, int, int, float, str, bool]
        ) -> list[dict[str, Any]]:
    name, lab, gold, classes, r, rho, n, seed, inject, structure, per_set = args
    warnings.simplefilter("ignore", ConvergenceWarning)
    hist, cur, _ = split(name, lab, gold, classes, r, rho, n, seed, "none")
    cal = calibrate_multiclass(hist, structure=STRUCTURE.get(name, structure) if per_set else structure)
    clean = check_drift_multiclass(cur, cal)
    ds = cur.annotations
    index = cal.index_of()
    per = np.bincount(ds.labeler, minlength=ds.n_labelers).astype(float)
    per[[str(x) not in index for x in ds.labeler_ids]] = -1
    j = int(np.argmax(per))
    mine = ds.labeler == j
    least = int(np.argmin(np.bincount(ds.label[mine], minlength=cur.n_classes)))
    rng = np.random.default_rng([seed, r, 99])
    swap = mine & (rng.random(ds.label.size) < inject)
    lbl = ds.label.copy()
    lbl[swap] = least
    drifted = check_drift_multiclass(MultiClassData(replace(ds, label=lbl), cur.classes, cur.values, cur.ordinal), cal)
    target = str(ds.labeler_ids[j])
    return [{"dataset": name, "resample": r, "structure": cal.structure, "n_tested": clean.n_tested,
             "n_untested": clean.n_untested, "clean_any_flag": bool(clean.flagged), "clean_flags": len(clean.flagged),
             "target_labels": int(mine.sum()), "target_flagged": target in drifted.flagged,
             "other_flags": len([x for x in drifted.flagged if x != target])}]


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    return df.groupby("dataset").agg(resamples=("resample", "size"), tested=("n_tested", "mean"),
                                     untested=("n_untested", "mean"), false_alarm=("clean_any_flag", "mean"),
                                     target_labels=("target_labels", "mean"), power=("target_flagged", "mean"),
                                     other_flags=("other_flags", "mean")).reset_index()


def table(s: pd.DataFrame, inject: float) -> str:
    lines = [f"| data set | labelers tested (untested) | false alarm (any flag, nominal 0.05) | injected labeler's labels "
             f"| power ({inject:.0%} of its labels moved) | other labelers flagged |", "|---|---|---:|---:|---:|---:|"]
    for _, r in s.iterrows():
        lines.append(f"| {r.dataset} | {r.tested:.1f} ({r.untested:.1f}) | {r.false_alarm:.2f} | {r.target_labels:.0f} "
                     f"| {r.power:.2f} | {r.other_flags:.2f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    split_arguments(ap)
    ap.add_argument("--inject", type=float, default=0.5)
    ap.add_argument("--structure", default="full")
    ap.add_argument("--per-set-structure", default="yes", help="no: --structure on every set (adultcontent2 too)")
    ap.add_argument("--sets", default=",".join([*SETS, "adultcontent2"]))
    ap.add_argument("--out", default="benchmarks/results/multiclass/drift")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for name in a.sets.split(","):
        lab, gold, classes = load(Path(a.data) / name)
        print(f"{name}: classes {list(classes)}", file=sys.stderr)
        jobs += [(name, lab, gold, classes, r, a.rho, a.n, a.seed, a.inject, a.structure,
                  a.per_set_structure != "no") for r in range(a.resamples)]
    rows = run_chunks(one, jobs, [1] * len(jobs), a.workers)
    df = pd.DataFrame(rows).sort_values(["dataset", "resample"]).reset_index(drop=True)
    df.to_csv(out / "resamples.csv.gz", index=False)
    s = summarize(df)
    s.to_csv(out / "summary.csv", index=False)
    (out / "table.md").write_text(table(s, a.inject) + "\n")
    print(table(s, a.inject))


if __name__ == "__main__":
    main()
