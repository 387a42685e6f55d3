"""The Newton phase's parameters on an exponential tail (issue #43, item 4: the cold refits on sparse crowds).

A parameter whose likelihood keeps rising towards 0 or 1 has, on the logit scale, an objective like
``C - c exp(-|x|)``: each Newton step moves its logit by exactly 1, so the fit crawls to the clip one factor e
at a time while the rest has long converged. :func:`heroeval.stage_a.two_coin.newton_steps` tries the clip for
such parameters at once (``TAIL_BOUND``, ``TAIL_STEP``) and keeps it only if the objective does not go down.
These tests check the closed form behind the rule, that the rule fires and never lowers the objective, and that
the fit it reaches is the one without it: the same parameters at the clip, the same objective to rounding and
the same values to what the stopping rule leaves open.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

import heroeval as he
from heroeval.stage_a import two_coin
from heroeval.stage_a.fit import information_of, weighted_design
from heroeval.stage_a.gold import initial_values
from heroeval.stage_a.settings import StoppingRule

from .test_em_newton import _vec, sparse_crowd

TAIL_BOUND = two_coin.TAIL_BOUND  # the product's, before a test sets it


def _run(seed: int, J: int, newton_after: int, tail_bound: float, monkeypatch: pytest.MonkeyPatch
         ) -> tuple[two_coin.EMFit, list[np.ndarray], list[float]]:
    """A fit with the Newton phase (reused factors, as the checks' refits), the points it passed and their
    objectives, with ``TAIL_BOUND`` set (0 turns the rule off)."""
    monkeypatch.setattr(two_coin, "TAIL_BOUND", tail_bound)
    hist = sparse_crowd(seed, J=J)
    d = weighted_design(hist, 1.0)
    points: list[np.ndarray] = []
    objectives: list[float] = []
    real = two_coin.em_sums

    def sums(dd: two_coin.Design, a: np.ndarray, b: np.ndarray, p: np.ndarray) -> two_coin.Sums:
        out = real(dd, a, b, p)
        points.append(np.concatenate([a, b, p]))
        objectives.append(float(out[-1]))
        return out

    monkeypatch.setattr(two_coin, "em_sums", sums)
    fit = two_coin.run_em(d, initial_values(hist), information=information_of(d), newton_after=newton_after,
                          reuse=True)
    monkeypatch.setattr(two_coin, "em_sums", real)
    return fit, points, objectives


@pytest.mark.parametrize(("seed", "J", "newton_after"), [(4, 300, 100), (5, 200, 30), (0, 250, 100)])
def test_the_tail_rule_reaches_the_fit_without_it(seed: int, J: int, newton_after: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    off, _, _ = _run(seed, J, newton_after, 0.0, monkeypatch)
    on, points, objectives = _run(seed, J, newton_after, TAIL_BOUND, monkeypatch)
    assert off.converged and on.converged
    # the rule fired: some parameter went from inside TAIL_BOUND (not at the clip) straight to the clip
    lo = two_coin.EPS * 1.01
    jumped = [np.any((np.minimum(u, 1 - u) > 1e-6) & (np.minimum(u, 1 - u) < TAIL_BOUND)
                     & (np.minimum(v, 1 - v) <= lo)) for u, v in pairwise(points)]
    assert any(jumped)
    # the objective never went down at the points the Newton phase kept (it is safeguarded; within rounding)
    assert on.loglik == pytest.approx(off.loglik, rel=1e-12)
    assert max(objectives) <= on.loglik + two_coin.LL_ROUNDING * abs(on.loglik)
    # the same parameters at the clip, and both fits at the fixed point found with tol 1e-13 to what the stopping
    # rule leaves open: an EM step of at most 1e-8 leaves a fit up to 1e-8 r / (1 - r) from it, r the EM rate of
    # its slowest parameter; 3e-7 allows r up to 0.97. Measured: off within 1.7e-9 on all three; on within
    # 1.6e-9 at seeds 4 and 5, 1.4e-7 at seed 0, whose path with the rule ends on a ridge where r is about 0.93
    at_clip = [np.minimum(_vec(f), 1 - _vec(f)) < 1e-6 for f in (off, on)]
    np.testing.assert_array_equal(at_clip[0], at_clip[1])
    hist = sparse_crowd(seed, J=J)
    d = weighted_design(hist, 1.0)
    ref = two_coin.run_em(d, initial_values(hist), information=information_of(d), newton_after=newton_after,
                          stop=StoppingRule(1e-13, 5000), reuse=True)
    assert ref.converged
    for f in (off, on):
        np.testing.assert_allclose(_vec(f), _vec(ref), rtol=0, atol=3e-7)


def test_the_tail_rule_leaves_interior_parameters_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A well-identified crowd (many labels per labeler, rates inside (0.1, 0.9)): no parameter is ever on a tail,
    so the fit is the same point for point with the rule on and off."""
    rng = np.random.default_rng(3)
    n, J = 600, 6
    y = rng.random(n) < 0.4
    item = np.repeat(np.arange(n), J)
    lab = np.tile(np.arange(J), n)
    alpha, beta = rng.uniform(0.65, 0.85, J), rng.uniform(0.65, 0.85, J)
    label = (rng.random(item.size) < np.where(y[item], alpha[lab], 1 - beta[lab])).astype(int)
    hist = he.AnnotationSet.from_arrays(item, lab.astype(str), label, gold=(np.arange(60), y[:60].astype(int)))
    d = weighted_design(hist, 1.0)
    fits = []
    for tb in (0.0, TAIL_BOUND):
        monkeypatch.setattr(two_coin, "TAIL_BOUND", tb)
        fits.append(two_coin.run_em(d, initial_values(hist), information=information_of(d), newton_after=0,
                                    stop=StoppingRule(1e-10, 500)))
    assert np.min(np.minimum(_vec(fits[1]), 1 - _vec(fits[1]))) > 0.05
    assert fits[0].n_iter == fits[1].n_iter
    np.testing.assert_array_equal(_vec(fits[0]), _vec(fits[1]))


def test_a_tail_snap_that_lowers_the_objective_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sensitivity whose maximum is inside, at 1/1000: gold items only, one labeler who says 1 on one of 1,000
    positives. From 0.005 the first Newton step moves its logit by -0.80 (the closed form: gradient
    1 - 1000 * 0.005 = -4 over curvature 1000 * 0.005 * 0.995), to about 0.0022, where the gradient still points
    outwards: the rule tries the clip, whose objective is lower by about log(0.0022 / 1e-9), and must refuse it.
    The fit ends at 0.001 and the objective never goes down along the points it keeps."""
    n = 1000
    item = np.arange(2 * n)
    label = np.zeros(2 * n, dtype=int)
    label[0] = 1  # one 1 among the positives
    label[n + 200:] = 1  # 800 of the 1,000 negatives said 1: specificity 0.2
    gold = np.r_[np.ones(n, dtype=int), np.zeros(n, dtype=int)]
    hist = he.AnnotationSet.from_arrays(item, np.zeros(2 * n, dtype=int).astype(str), label,
                                        gold=(item, gold))
    d = weighted_design(hist, 1.0)
    start = (np.array([0.005]), np.array([0.5]), np.array([0.5]))
    seen: list[float] = []
    real = two_coin.em_sums

    def sums(dd: two_coin.Design, a: np.ndarray, b: np.ndarray, p: np.ndarray) -> two_coin.Sums:
        seen.append(float(a[0]))
        return real(dd, a, b, p)

    monkeypatch.setattr(two_coin, "em_sums", sums)
    fit = two_coin.run_em(d, start, information=information_of(d), newton_after=0)
    monkeypatch.undo()
    assert fit.converged
    # the first Newton step is the binomial's on the logit, (s1 - n p) / (n p (1 - p)) = -0.804: on the tail's side
    step = (1 - n * 0.005) / (n * 0.005 * 0.995)
    assert np.log(seen[1] / (1 - seen[1])) - np.log(0.005 / 0.995) == pytest.approx(step, rel=1e-9)
    assert step <= -two_coin.TAIL_STEP
    # then the rule tried the clip, and the fit did not stay there
    assert seen[2] == pytest.approx(two_coin.EPS, rel=1e-6)
    assert fit.alpha[0] == pytest.approx(1 / n, rel=1e-6)
    assert fit.beta[0] == pytest.approx(0.2, rel=1e-6)
    tr = np.asarray(fit.loglik_trace)
    assert np.all(np.diff(tr) >= -two_coin.LL_ROUNDING * np.abs(tr[1:]))
