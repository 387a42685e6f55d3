"""Issue #38 item 3: on held-out resamples whose current round has labelers new to the history, the default call
runs and says what it did with them.

For each shared binary set and resample of the benchmark protocol (history with gold on ``--rho`` of its items,
a current round of ``--n`` items; ``--shift half`` also keeps only half the labeler pool in the current round),
``calibrate`` the history and estimate the round with ``method="all"`` twice: with ``new_labelers="error"`` (the
old default, counted as stopped when it raises ``UnknownLabelerError``) and with the default. Written: per set,
resamples, resamples with new labelers, stopped with "error", run with the default, and of those the ones whose
HERO-1 row estimated the new labelers and whose every other row says it left them out.

    python -m benchmarks.new_labelers_default --reps 10 --out benchmarks/results/assumptions/new_labelers_default.csv
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import pandas as pd

import heroeval as he
from heroeval.errors import UnknownLabelerError
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.real_data import BINARY

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def one(name: str, suffix: str, reps: int, rho: float, n: int, shift: str, seed: int) -> dict[str, object]:
    data = load_folder(DATA / name, binary_suffix=suffix, text_components=0)
    row: dict[str, object] = {"set": name, "shift": shift, "resamples": reps, "with_new": 0, "stopped_before": 0,
                              "ran_default": 0, "hero1_estimated": 0, "others_said": 0, "failed_default": 0,
                              "hero1_default_covered": 0, "hero1_exclude_covered": 0, "hero1_default_abs_err": 0.0,
                              "hero1_exclude_abs_err": 0.0, "hero1_default_width": 0.0, "hero1_exclude_width": 0.0}
    for r in range(reps):
        sp = make_split(data, r, rho, n, shift, seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cal = he.calibrate(sp.history)
            known = set(cal.labeler_ids)
            new = [str(x) for x in sp.current.labeler_ids if str(x) not in known]
            if not new:
                continue
            row["with_new"] = int(row["with_new"]) + 1  # type: ignore[call-overload]
            try:
                he.estimate(sp.current, cal, method="all", new_labelers="error", drift_check=False)
            except UnknownLabelerError:
                row["stopped_before"] = int(row["stopped_before"]) + 1  # type: ignore[call-overload]
            try:
                res = he.estimate(sp.current, cal, method="all", drift_check=False)
            except Exception as exc:  # counted, with its message
                row["failed_default"] = int(row["failed_default"]) + 1  # type: ignore[call-overload]
                row["last_failure"] = f"{type(exc).__name__}: {exc}"[:200]
                continue
        assert isinstance(res, he.EstimateCollection)
        row["ran_default"] = int(row["ran_default"]) + 1  # type: ignore[call-overload]
        h1 = res.results.get("hero1")
        if h1 is not None and list(h1.details.get("new_labelers", [])):
            row["hero1_estimated"] = int(row["hero1_estimated"]) + 1  # type: ignore[call-overload]
        # HERO-1 by default (the new labelers estimated) against HERO-1 with them left out: coverage, error, width
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ex = he.estimate(sp.current, cal, method="hero1", new_labelers="exclude", drift_check=False)
        assert isinstance(ex, he.EstimateResult)
        for tag, x in (("default", h1), ("exclude", ex)):
            if x is None:
                continue
            ci = x.confidence_interval()
            row[f"hero1_{tag}_covered"] = int(row[f"hero1_{tag}_covered"]) + int(ci.low <= sp.truth <= ci.high)  # type: ignore[call-overload]
            row[f"hero1_{tag}_abs_err"] = float(row[f"hero1_{tag}_abs_err"]) + abs(x.estimate - sp.truth)  # type: ignore[arg-type]
            row[f"hero1_{tag}_width"] = float(row[f"hero1_{tag}_width"]) + (ci.high - ci.low)  # type: ignore[arg-type]
        others = [x for m, x in res.results.items() if m not in ("hero1", "majority_vote", "dawid_skene")]
        if others and all(x.details.get("excluded_labelers") for x in others):
            row["others_said"] = int(row["others_said"]) + 1  # type: ignore[call-overload]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=(), help="set names (default: every shared binary set)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rho", type=float, default=0.1)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--shift", default="none,half")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    rows = [one(name, suffix, a.reps, a.rho, a.n, shift, a.seed) for name, suffix in BINARY
            if not a.only or name in a.only for shift in a.shift.split(",")]
    df = pd.DataFrame(rows)
    for tag in ("default", "exclude"):  # sums -> means over the resamples that ran
        ran = df["ran_default"].where(df["ran_default"] > 0)
        df[f"hero1_{tag}_abs_err"] = df[f"hero1_{tag}_abs_err"] / ran
        df[f"hero1_{tag}_width"] = df[f"hero1_{tag}_width"] / ran
    with pd.option_context("display.width", 250):
        print(df.to_string(index=False))
    print(f"\nresamples with new labelers: {int(df['with_new'].sum())}; stopped with new_labelers='error': "
          f"{int(df['stopped_before'].sum())}; ran with the default: {int(df['ran_default'].sum())} "
          f"(failed: {int(df['failed_default'].sum())})")
    ran = int(df["ran_default"].sum())
    if ran:
        w = df["ran_default"] / ran
        for tag in ("default", "exclude"):
            print(f"HERO-1 {tag:>7}: covered {int(df[f'hero1_{tag}_covered'].sum())} of {ran}, mean |error| "
                  f"{(df[f'hero1_{tag}_abs_err'].fillna(0) * w).sum():.4f}, mean width "
                  f"{(df[f'hero1_{tag}_width'].fillna(0) * w).sum():.4f}")
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(a.out, index=False)


if __name__ == "__main__":
    main()
