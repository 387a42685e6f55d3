"""Can the labeler-drift test (``heroeval.checks.check_drift``) tell the real rounds where every method fails?

Issue #18 item 6 asks that a round the history cannot be trusted for be marked
unreliable. On the real rounds (``benchmarks/robustness.py --groups``) the
recommended interval misses mre_treat's batches 23-46, whose gold is 0 by the
data's construction while the crowd labels about half of the items positive:
the labelers' behaviour given the truth differs from the history's, which no
mock round of the history's gold can see. The drift test compares each
labeler's share of positive labels on the round with what its calibrated
sensitivity and specificity predict at HERO-1's estimate; if it rejected on
the failing rounds and not on the others, ``auto`` could say "unreliable"
there.

    .venv/bin/python experiments/drift_real_rounds.py --resamples 1 --out /tmp/drift_rounds.csv

Result (2026-12-02, one resample of each round, the benchmark's groups
split, rho = 0.10): see the table this prints; the write-up is in
experiments/README.md. The test rejects strongly on rounds where HERO-1 is
accurate (mre_treat b11-15 and b16-22: p 1e-6 and 3e-8, HERO-1 off by 0.02
to 0.03) and only weakly on the round where every method is off by about
0.46 (b23-46: p 0.01). A drift flag would therefore mark good rounds
unreliable and not single out the bad one. Not adopted.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from real_data import round_sets

import heroeval as he
from heroeval.checks.drift import check_drift
from heroeval.workflows.benchmark import make_split


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--resamples", type=int, default=1, help="resamples per round")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    rows = []
    for data, n in round_sets(Path(a.data), 200):
        assert data.groups is not None
        g = data.groups.nunique()
        for r in range(a.resamples * g):
            sp = make_split(data, r, 0.10, n, "none", 0, split="groups")
            cal = he.calibrate(sp.history)
            d = check_drift(sp.current, cal, warn=False)
            h1 = he.estimate(sp.current, cal, method="hero1", exclude_new_labelers=True)
            rows.append({"dataset": data.name, "round": sp.group, "resample": r, "truth": sp.truth,
                         "hero1": h1.estimate, "hero1_error": h1.estimate - sp.truth,
                         "drift_overall_p": d.overall_p, "labelers_flagged": len(d.flagged)})
            print(rows[-1], file=sys.stderr, flush=True)
    t = pd.DataFrame(rows)
    if a.out:
        t.to_csv(a.out, index=False)
    pd.set_option("display.width", 160)
    print(t.round(4).to_string(index=False))


if __name__ == "__main__":
    main()
