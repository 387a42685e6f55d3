"""experiments/stage_a_eb_prior.py (issue #18 item 3, Stage A with an empirical-Bayes prior): checked here cheaply."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import heroeval as he
from heroeval.estimators.misclassification import _eb_shrink
from heroeval.simulate import paper_dgp
from heroeval.stage_a.gold import gold_counts

from experiments import stage_a_eb_prior as eb


@pytest.mark.parametrize(("labels_per_item", "k"), [(None, 0.0), (3, 0.0), (3, 1e-9)])
def test_k_to_zero_is_heroeval_stage_a_and_hero1(labels_per_item: int | None, k: float) -> None:
    d = paper_dgp(3, N=500, n=200, labels_per_item=labels_per_item)
    cal = he.calibrate(d.history, tol=1e-12, max_iter=100_000)
    pr = eb.Prior(0.7, k, 0.6, k, False, False)
    fit = eb.fit_eb(d.history, pr, tol=1e-12, max_iter=100_000)
    assert fit.converged
    np.testing.assert_allclose(fit.alpha, cal.alpha, atol=1e-6)
    np.testing.assert_allclose(fit.beta, cal.beta, atol=1e-6)
    np.testing.assert_allclose(fit.prev, cal.round_prevalence, atol=1e-6)
    if k == 0:
        assert fit.objective == pytest.approx(cal.convergence.loglik, abs=1e-8 * abs(cal.convergence.loglik))
    assert he.hero1(d.current, eb.with_fit(cal, fit)).estimate == pytest.approx(he.hero1(d.current, cal).estimate,
                                                                              abs=1e-6)
    assert eb.check_k0(d.history, cal) < 1e-6


def test_gold_only_history_gives_the_eb_posterior_means() -> None:
    """With every history item gold, the MAP-EM is one step: (tp + k m) / (tp + fn + k), as ``_eb_shrink``."""
    g = np.random.default_rng(5)
    m, J = 120, 12
    y = (g.random(m) < 0.4).astype(int)
    a, b = g.uniform(0.55, 0.95, J), g.uniform(0.55, 0.95, J)
    item, lab = np.repeat(np.arange(m), J), np.tile(np.arange(J), m)
    keep = g.random(item.size) < 0.3  # sparse: labelers with few gold items
    item, lab = item[keep], lab[keep]
    z = (g.random(item.size) < np.where(y[item] == 1, a[lab], 1 - b[lab])).astype(int)
    hist = he.AnnotationSet.from_arrays(item, lab, z, gold=(np.arange(m), y))
    pr = eb.eb_prior(hist)
    fit = eb.fit_eb(hist, pr, tol=1e-12)
    tp, fn, tn, fp = (c.astype(float) for c in gold_counts(hist))
    if pr.capped_a:
        assert np.all(np.abs(fit.alpha - pr.m_a) < 1e-3)
    else:
        np.testing.assert_allclose(fit.alpha, _eb_shrink(tp, tp + fn), atol=1e-10)
    if pr.capped_b:
        assert np.all(np.abs(fit.beta - pr.m_b) < 1e-3)
    else:
        np.testing.assert_allclose(fit.beta, _eb_shrink(tn, tn + fp), atol=1e-10)


def test_no_heterogeneity_caps_k_and_pins_the_pool() -> None:
    warnings.simplefilter("ignore")
    d = paper_dgp(1, N=400, n=100, k=1e9)  # identical labelers
    pr = eb.eb_prior(d.history)
    if pr.capped_a:
        assert pr.k_a == eb.K_CAP
    fit = eb.fit_eb(d.history, eb.Prior(0.8, eb.K_CAP, 0.6, eb.K_CAP, True, True))
    assert np.all(np.abs(fit.alpha - 0.8) < 1e-2) and np.all(np.abs(fit.beta - 0.6) < 1e-2)
