"""experiments/glad_experiment.py (issue #5, GLAD-style item difficulty): an experiment, checked here cheaply."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import expit, logit

import heroeval as he
from heroeval.simulate import paper_dgp
from heroeval.stage_a.gold import initial_values

from experiments import glad_experiment as gl


@pytest.mark.parametrize("labels_per_item", [None, 3])
def test_pi_easy_only_is_heroeval_stage_a_and_hero1(labels_per_item: int | None) -> None:
    d = paper_dgp(3, N=500, n=200, labels_per_item=labels_per_item)
    cal = he.calibrate(d.history, tol=1e-12, max_iter=100_000)
    # start from heroeval's own starting values, not from its fit
    fit = gl.fit_glad(d.history, pi=(1.0, 0.0, 0.0), tol=1e-12, init=initial_values(d.history))
    assert fit.converged and fit.newton_capped == 0
    np.testing.assert_allclose(fit.params.alpha, cal.alpha, atol=1e-6)
    np.testing.assert_allclose(fit.params.beta, cal.beta, atol=1e-6)
    np.testing.assert_allclose(fit.params.prev, cal.round_prevalence, atol=1e-6)
    est = gl.estimate_rate(fit, d.current)
    assert est.estimate == pytest.approx(he.hero1(d.current, cal).estimate, abs=1e-6)
    assert fit.loglik == pytest.approx(cal.convergence.loglik, abs=1e-6 * abs(cal.convergence.loglik))
    assert gl.two_coin_loglik(d.history, cal) == pytest.approx(cal.convergence.loglik, abs=1e-6 * abs(cal.convergence.loglik))


def test_newton_m_step_matches_scipy() -> None:
    g = np.random.default_rng(1)
    s = np.array(gl.SCALES)
    a = g.uniform(0, 50, (6, 3))
    b = g.uniform(0, 20, (6, 3))
    a[0] = 0.0  # only wrong labels: towards the lower bound
    b[1] = 0.0  # only right labels: towards the upper bound
    a[2] = b[2] = 0.0  # no weight: stays put
    x0 = g.normal(0, 1, 6)
    x, ok = gl.newton_logit(x0, a, b, s)
    assert ok
    assert x[0] == pytest.approx(-gl._LMAX) and x[1] == pytest.approx(gl._LMAX) and x[2] == x0[2]
    for j in range(3, 6):
        def negf(v: float, j: int = j) -> float:
            z = v * s
            return -float(np.sum(a[j] * np.log(expit(z)) + b[j] * np.log(expit(-z))))
        ref = minimize_scalar(negf, bounds=(-20, 20), method="bounded", options={"xatol": 1e-10}).x
        assert x[j] == pytest.approx(ref, abs=1e-6)
    # one class at scale 1: the closed form
    x1, _ = gl.newton_logit(np.zeros(1), np.array([[7.0]]), np.array([[3.0]]), np.array([1.0]))
    assert x1[0] == pytest.approx(float(logit(0.7)), abs=1e-12)


def _glad_sim(seed: int, N: int = 1500, n: int = 400, J: int = 8, pi: tuple[float, ...] = (0.6, 0.2, 0.2),
              rho: float = 0.1) -> tuple[he.AnnotationSet, he.AnnotationSet, float]:
    """Draw history and current round from the GLAD-style model itself (dense)."""
    g = np.random.default_rng(seed)
    la = logit(g.uniform(0.75, 0.95, J))
    lb = logit(g.uniform(0.75, 0.95, J))
    sc = np.array(gl.SCALES)

    def draw(m: int, prev: float, gold: bool) -> tuple[he.AnnotationSet, np.ndarray]:
        y = (g.random(m) < prev).astype(int)
        c = g.choice(len(pi), size=m, p=pi)
        item = np.repeat(np.arange(m), J)
        lab = np.tile(np.arange(J), m)
        s = sc[c[item]]
        p1 = np.where(y[item] == 1, expit(s * la[lab]), 1 - expit(s * lb[lab]))
        z = (g.random(item.size) < p1).astype(int)
        gl_ = None
        if gold:
            gi = np.flatnonzero(g.random(m) < rho)
            gl_ = (gi, y[gi])
        return he.AnnotationSet.from_arrays(item, lab, z, gold=gl_), y

    hist, _ = draw(N, 0.4, True)
    cur, yc = draw(n, 0.2, False)
    return hist, cur, float(yc.mean())


def test_fits_its_own_model() -> None:
    warnings.simplefilter("ignore")
    err_glad, err_h1, pis = [], [], []
    for s in range(6):
        hist, cur, truth = _glad_sim(s)
        cal = he.calibrate(hist, covariance=False)
        fit = gl.fit_glad(hist, cal)
        assert fit.converged and fit.newton_capped == 0
        assert fit.loglik > gl.two_coin_loglik(hist, cal)
        pis.append(fit.params.pi)
        err_glad.append(gl.estimate_rate(fit, cur).estimate - truth)
        err_h1.append(he.hero1(cur, cal).estimate - truth)
    pi_mean = np.mean(pis, axis=0)
    # seeded: see the printed values when this is changed
    print(pi_mean, np.mean(err_glad), np.mean(err_h1), np.sqrt(np.mean(np.square(err_glad))), np.sqrt(np.mean(np.square(err_h1))))
    assert pi_mean[0] == pytest.approx(0.6, abs=0.1)
    assert abs(float(np.mean(err_glad))) < 0.02
