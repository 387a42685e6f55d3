"""Stage A on (label pattern, count) rows equals Stage A on items (issue #7, item 3)."""

from __future__ import annotations

import numpy as np
import pytest

import heroeval as he
from heroeval.simulate import paper_dgp
from heroeval.stage_a import compression
from heroeval.stage_a.fit import weighted_design


def _few_judges(seed: int, repeated: bool = False) -> he.AnnotationSet:
    """4 judges on every item, 2 history rounds: at most 16 patterns per round."""
    rng = np.random.default_rng(seed)
    n = 3000
    y = rng.random(n) < 0.4
    a = np.array([0.9, 0.8, 0.7, 0.95])
    b = np.array([0.85, 0.6, 0.9, 0.7])
    item = np.repeat(np.arange(n), 4)
    lab = np.tile(np.arange(4), n)
    p = np.where(y[item], a[lab], 1 - b[lab])
    z = (rng.random(item.size) < p).astype(int)
    if repeated:  # a second label by judge 0 on the first 500 items
        extra = np.arange(500)
        item = np.concatenate([item, extra])
        lab = np.concatenate([lab, np.zeros(500, dtype=int)])
        z = np.concatenate([z, (rng.random(500) < np.where(y[extra], a[0], 1 - b[0])).astype(int)])
    g = rng.random(n) < 0.05
    rounds = np.where(np.arange(n) < n // 2, "r1", "r2")
    return he.AnnotationSet.from_arrays(item, [f"j{k}" for k in lab], z, gold=(np.flatnonzero(g), y[g].astype(int)),
                                        item_round=(np.arange(n), rounds))


@pytest.mark.parametrize(("repeated", "w"), [(False, 1.0), (True, 1.0), (False, 0.3)])
def test_compressed_fit_equals_the_item_fit(repeated: bool, w: float) -> None:
    hist = _few_judges(1, repeated)
    d = weighted_design(hist, w)
    dc = compression.compress(d)
    assert dc is not None and dc.n_items < hist.n_items / 10
    assert dc.count is not None and dc.count.sum() == hist.n_items
    full = he.calibrate(hist, compress=False, history_weight=w)
    comp = he.calibrate(hist, compress=True, history_weight=w)
    np.testing.assert_allclose(comp.alpha, full.alpha, atol=1e-10)
    np.testing.assert_allclose(comp.beta, full.beta, atol=1e-10)
    np.testing.assert_allclose(comp.round_prevalence, full.round_prevalence, atol=1e-10)
    assert comp.convergence.loglik == pytest.approx(full.convergence.loglik, rel=1e-12)
    assert comp.parameter_covariance is not None and full.parameter_covariance is not None
    np.testing.assert_allclose(comp.parameter_covariance, full.parameter_covariance, rtol=1e-7, atol=1e-14)
    assert comp.history_fit is not None and full.history_fit is not None
    np.testing.assert_allclose(comp.history_fit.gamma, full.history_fit.gamma, atol=1e-9)


def test_no_compression_when_it_does_not_pay() -> None:
    d = paper_dgp(0, labels_per_item=3)  # 10 judges, 3 per item: patterns are nearly all distinct
    assert compression.compress(weighted_design(d.history, 1.0)) is None


def test_model_variance_and_estimates_agree() -> None:
    hist = _few_judges(2)
    cur = _few_judges(3).take_items(range(300))
    for variance in ("sandwich", "model"):
        a = he.hero1(cur, he.calibrate(hist, compress=False, variance=variance))
        b = he.hero1(cur, he.calibrate(hist, compress=True, variance=variance))
        assert b.estimate == pytest.approx(a.estimate, abs=1e-10)
        assert b.standard_error == pytest.approx(a.standard_error, rel=1e-7)
