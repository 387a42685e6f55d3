"""Simultaneous coverage of the store's trend intervals, by simulation (docs/store.md quotes the numbers).

Six rounds share six labelers (two-coin model, 3-5 labels per item, 250
items per round); five rounds have gold on 10 % of their items, the last
none. The target is each round's prevalence (the rate of the process that
generated it). One Stage A fit holds all six rounds; the trend's intervals
must cover all six rates at once, and all five successive differences at
once, in at least about 95 % of the replications with Šidák's adjustment,
and the unadjusted intervals must not.
"""

from __future__ import annotations

import numpy as np
import pytest

import heroeval as he
from heroeval.ingest.annotations import IngestReport
from heroeval.store._rounds import RoundInfo
from heroeval.store.trend import trend_from_fit

PREV = np.array([0.35, 0.40, 0.40, 0.50, 0.55, 0.60])


def _rep(seed: int, n: int = 250, J: int = 6) -> he.AnnotationSet:
    rng = np.random.default_rng(seed)
    alpha, beta = rng.uniform(0.65, 0.95, J), rng.uniform(0.6, 0.95, J)
    items, labs, zs, rounds, gi, gv = [], [], [], [], [], []
    for g, p in enumerate(PREV):
        y = rng.random(n) < p
        for i in range(n):
            iid = f"r{g}i{i}"
            for j in rng.choice(J, size=rng.integers(3, 6), replace=False):
                items.append(iid)
                labs.append(f"L{j}")
                zs.append(int(rng.random() < (alpha[j] if y[i] else 1 - beta[j])))
            rounds.append((iid, f"v{g + 1}"))
            if g < len(PREV) - 1 and rng.random() < 0.1:
                gi.append(iid)
                gv.append(int(y[i]))
    ri, rv = zip(*rounds, strict=True)
    return he.AnnotationSet.from_arrays(items, labs, zs, gold=(gi, gv), item_round=(list(ri), list(rv)))


def coverage(reps: int, adjusts: tuple[str, ...], seed0: int = 0) -> dict[str, dict[str, float]]:
    """Share of replications whose intervals cover all rates, all differences; and each rate alone."""
    infos = [RoundInfo(g, f"v{g + 1}", None, None, (), "auto", "", "", "", 250, 0, 0, 6, (), IngestReport(()))
             for g in range(len(PREV))]
    hits = {a: np.zeros(3) for a in adjusts}
    dtrue = np.diff(PREV)
    for r in range(reps):
        cal = he.calibrate(_rep(seed0 + r))
        for a in adjusts:
            tr = trend_from_fit(cal, infos, adjust=a)
            lo = np.array([x.ci_low for x in tr.rounds])
            hi = np.array([x.ci_high for x in tr.rounds])
            dlo = np.array([d.ci_low for d in tr.differences])
            dhi = np.array([d.ci_high for d in tr.differences])
            inside = (lo <= PREV) & (PREV <= hi)
            hits[a] += [inside.all(), ((dlo <= dtrue) & (dtrue <= dhi)).all(), inside.mean()]
    return {a: dict(zip(("rates", "differences", "each_rate"), (h / reps).tolist(), strict=True))
            for a, h in hits.items()}


@pytest.mark.slow
def test_simultaneous_coverage() -> None:
    out = coverage(300, ("sidak", "none"))
    sidak, none = out["sidak"], out["none"]
    # 300 replications: a coverage of 0.95 has a Monte-Carlo SE of 0.013
    assert sidak["rates"] >= 0.92 and sidak["differences"] >= 0.92
    assert none["rates"] < sidak["rates"] and none["rates"] < 0.9  # marginal intervals do not cover all six at once
    assert 0.92 <= none["each_rate"] <= 0.98


if __name__ == "__main__":  # the numbers in docs/store.md
    import json
    import time

    t0 = time.time()
    out = coverage(1000, ("sidak", "maxz", "bonferroni", "none"))
    print(json.dumps(out, indent=1), f"{time.time() - t0:.0f} s")
