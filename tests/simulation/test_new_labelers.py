"""Coverage of HERO-1 with a labeler new in the current round (anchored estimate), slow.

200 replications of shift_dgp: five labelers, L04 absent from the history;
three labels per current item; target the population rate 0.3. With 200
replications the MC SE of a 95 % coverage is 1.5 points; the band
[0.91, 0.99] is about 3 SE each side. The 500-replication run is
benchmarks/new_labelers.py (docs/assumptions.md).
"""

from __future__ import annotations

import numpy as np
import pytest

import heroeval as he
from heroeval.simulate import shift_dgp

pytestmark = pytest.mark.slow


def test_coverage_with_a_new_labeler() -> None:
    a = np.array([0.85, 0.8, 0.9, 0.75, 0.8])
    b = np.array([0.8, 0.85, 0.7, 0.9, 0.75])
    cov, est, se = [], [], []
    for s in range(200):
        d = shift_dgp(20_000 + s, alpha=a, beta=b, history_pool=np.arange(4), labels_per_item=3, n=300, N=800)
        r = he.hero1(d.current, he.calibrate(d.history), new_labelers="estimate")
        ci = r.confidence_interval()
        cov.append(ci.low <= 0.3 <= ci.high)
        est.append(r.estimate)
        se.append(r.standard_error)
    assert 0.91 <= np.mean(cov) <= 0.99
    assert abs(np.mean(est) - 0.3) < 0.01
    assert np.mean(se) == pytest.approx(np.std(est), rel=0.2)
