"""Coverage of the influence-function intervals on the paper's DGP (slow; run by `make test`).

Fixed seeds; stated tolerances. With 300 replications the Monte-Carlo SE of a
95 % coverage is 1.3 points, so the band [0.91, 0.99] is about 3 SE wide each
side. The full 1,000-replication study is benchmarks/coverage_study.py
(benchmarks/results/coverage/coverage.md).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import heroeval as he
from heroeval.simulate import paper_dgp

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dense() -> dict[str, dict[str, np.ndarray]]:
    out: dict[str, dict[str, list[float]]] = {m: {"est": [], "se": [], "cov": []} for m in ("hero1", "hero2", "hero_joint")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", he.ConvergenceWarning)
        for s in range(300):
            d = paper_dgp(10_000 + s, rho=0.10, k=12)
            cal = he.calibrate(d.history)
            res = he.estimate(d.current, cal, method=list(out))
            assert isinstance(res, he.EstimateCollection)
            for m, r in res.items():
                ci = r.confidence_interval()
                out[m]["est"].append(r.estimate)
                out[m]["se"].append(r.standard_error)
                out[m]["cov"].append(float(ci.low <= d.mu0 <= ci.high))
    return {m: {k: np.asarray(v) for k, v in d.items()} for m, d in out.items()}


@pytest.mark.parametrize("method", ["hero1", "hero2", "hero_joint"])
def test_dense_coverage_and_se_calibration(dense: dict[str, dict[str, np.ndarray]], method: str) -> None:
    d = dense[method]
    assert 0.91 <= d["cov"].mean() <= 0.99
    ratio = np.mean(d["se"]) / np.std(d["est"], ddof=1)
    assert 0.85 <= ratio <= 1.15


def test_compare_covers_zero_under_pool_shift_where_majority_vote_fails() -> None:
    """Two rounds with the same rate, labeler pools shifted: HERO's difference interval covers 0."""
    cover = {"hero1": [], "majority_vote": []}  # type: dict[str, list[float]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", he.ConvergenceWarning)
        for s in range(150):
            gen = np.random.default_rng(20_000 + s)
            alpha = gen.beta(12 * 0.85, 12 * 0.15, 10)
            beta = gen.beta(12 * 0.55, 12 * 0.45, 10)
            w = np.r_[np.full(5, 10.0), np.full(5, 1.0)]
            a = paper_dgp(gen, labels_per_item=3, alpha=alpha, beta=beta, current_labeler_weights=w)
            b = paper_dgp(gen, labels_per_item=3, alpha=alpha, beta=beta, current_labeler_weights=w[::-1])
            cc = he.compare(a.current, b.current, he.calibrate(a.history), method=list(cover))
            assert isinstance(cc, he.ComparisonCollection)
            for m, c in cc.items():
                ci = c.confidence_interval()
                cover[m].append(float(ci.low <= 0.0 <= ci.high))
    assert np.mean(cover["hero1"]) >= 0.90
    assert np.mean(cover["majority_vote"]) <= 0.85
