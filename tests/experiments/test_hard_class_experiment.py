"""experiments/hard_class_experiment.py (issue #5, the latent hard-item class): an experiment, checked here cheaply."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import heroeval as he
from heroeval.simulate import paper_dgp
from heroeval.stage_a.gold import initial_values

from experiments import hard_class_experiment as hc


@pytest.mark.parametrize("labels_per_item", [None, 3])
def test_h_zero_is_heroeval_stage_a_and_hero1(labels_per_item: int | None) -> None:
    d = paper_dgp(3, N=500, n=200, labels_per_item=labels_per_item)
    cal = he.calibrate(d.history, tol=1e-12, max_iter=100_000)
    # start from heroeval's own starting values, not from its fit
    fit = hc.fit_hard(d.history, h=0.0, tol=1e-12, init=initial_values(d.history))
    assert fit.converged
    np.testing.assert_allclose(fit.params.alpha, cal.alpha, atol=1e-6)
    np.testing.assert_allclose(fit.params.beta, cal.beta, atol=1e-6)
    np.testing.assert_allclose(fit.params.prev, cal.round_prevalence, atol=1e-6)
    est = hc.estimate_rate(fit, d.current)
    assert est.estimate == pytest.approx(he.hero1(d.current, cal).estimate, abs=1e-6)
    assert fit.loglik == pytest.approx(cal.convergence.loglik, abs=1e-6 * abs(cal.convergence.loglik))


def _hard_sim(seed: int, N: int = 1500, n: int = 400, J: int = 8, h: float = 0.2, a_h: float = 0.9,
              b_h: float = 0.7, rho: float = 0.1) -> tuple[he.AnnotationSet, he.AnnotationSet, float]:
    """Draw history and current round from the hard-class model itself (dense)."""
    g = np.random.default_rng(seed)
    alpha = g.uniform(0.7, 0.95, J)
    beta = g.uniform(0.7, 0.95, J)

    def draw(m: int, prev: float, gold: bool) -> tuple[he.AnnotationSet, np.ndarray]:
        y = (g.random(m) < prev).astype(int)
        hard = g.random(m) < h
        item = np.repeat(np.arange(m), J)
        lab = np.tile(np.arange(J), m)
        p1 = np.where(hard[item], np.where(y[item] == 1, a_h, b_h), np.where(y[item] == 1, alpha[lab], 1 - beta[lab]))
        z = (g.random(item.size) < p1).astype(int)
        gl = None
        if gold:
            gi = np.flatnonzero(g.random(m) < rho)
            gl = (gi, y[gi])
        return he.AnnotationSet.from_arrays(item, lab, z, gold=gl), y

    hist, _ = draw(N, 0.4, True)
    cur, yc = draw(n, 0.3, False)
    return hist, cur, float(yc.mean())


def test_roughly_unbiased_on_its_own_model() -> None:
    warnings.simplefilter("ignore")
    err_hard, err_h1 = [], []
    for s in range(12):
        hist, cur, truth = _hard_sim(s)
        cal = he.calibrate(hist, covariance=False)
        fit = hc.fit_hard(hist, cal)
        assert fit.converged
        err_hard.append(hc.estimate_rate(fit, cur).estimate - truth)
        err_h1.append(he.hero1(cur, cal).estimate - truth)
    bias_hard, bias_h1 = float(np.mean(err_hard)), float(np.mean(err_h1))
    # seeded: observed bias +0.012 (SE 0.006) for the hard class, +0.128 for HERO-1; tolerance 0.03
    assert abs(bias_hard) < 0.03
    assert abs(bias_hard) < abs(bias_h1)
