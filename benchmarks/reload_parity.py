"""Issue #38 item 2: a calibration saved and loaded again gives every estimate the standard error and interval
the calibration in memory gives.

For each shared binary set: one resample of the benchmark protocol (history with gold on ``--rho`` of its items,
a current round of ``--n`` items without gold), ``calibrate`` the history, save the calibration to JSON and load it
back, then estimate the round with ``method="all"`` from both. HERO joint needs the history itself, so from a file
it is not computed (said in its row). Written: one row per set and method with both standard errors, their ratio
and the largest relative difference of estimate, SE and interval bounds.

    python -m benchmarks.reload_parity                       # every shared binary set
    python -m benchmarks.reload_parity --only zencrowd --out benchmarks/results/reload/parity.csv
"""

from __future__ import annotations

import argparse
import math
import tempfile
import warnings
from pathlib import Path

import pandas as pd

import heroeval as he
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.real_data import BINARY

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _rel(a: float, b: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b)):
        return 0.0 if (math.isnan(a) and math.isnan(b)) or a == b else math.inf
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def parity(name: str, suffix: str, rho: float, n: int, seed: int) -> list[dict[str, object]]:
    data = load_folder(DATA / name, binary_suffix=suffix, text_components=0)
    sp = make_split(data, 0, rho, n, "none", seed)
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
        warnings.simplefilter("ignore")
        cal = he.calibrate(sp.history)
        cal.save(Path(tmp) / "cal.json")
        again = he.load_calibration(Path(tmp) / "cal.json")
        mem = he.estimate(sp.current, cal, method="all", new_labelers="exclude")
        fil = he.estimate(sp.current, again, method="all", new_labelers="exclude")
    rows: list[dict[str, object]] = []
    for m, r in mem.items():
        f = fil.results.get(m)
        if f is None:
            rows.append({"set": name, "method": m, "se_memory": r.standard_error, "se_file": math.nan,
                         "ratio": math.nan, "max_rel_diff": math.nan, "note": fil.skipped.get(m, "not computed")})
            continue
        ci_m, ci_f = r.confidence_interval(), f.confidence_interval()
        diffs = [_rel(r.estimate, f.estimate), _rel(r.standard_error, f.standard_error), _rel(ci_m.low, ci_f.low),
                 _rel(ci_m.high, ci_f.high)]
        rows.append({"set": name, "method": m, "se_memory": r.standard_error, "se_file": f.standard_error,
                     "ratio": f.standard_error / r.standard_error if r.standard_error else math.nan,
                     "max_rel_diff": max(diffs), "note": ""})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=(), help="set names (default: every shared binary set)")
    ap.add_argument("--rho", type=float, default=0.1)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="CSV to write (default: print only)")
    a = ap.parse_args()
    rows = []
    for name, suffix in BINARY:
        if a.only and name not in a.only:
            continue
        rows += parity(name, suffix, a.rho, a.n, a.seed)
    df = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(df.to_string(index=False, float_format=lambda x: f"{x:.6g}"))
    done = df[df["note"] == ""]
    print(f"\nlargest relative difference over {len(done)} estimates of {df['set'].nunique()} sets: "
          f"{done['max_rel_diff'].max():.3g}")
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(a.out, index=False)


if __name__ == "__main__":
    main()
