"""The Newton phase's reused factors (issue #43, item 4): the model checks' refits on large sparse crowds.

With ``reuse`` a Newton step's damped Cholesky factor serves the steps after it while they converge fast
(:func:`heroeval.stage_a.two_coin.newton_steps`). These tests check that the fit is the one the exact Newton steps
reach (to the EM tolerance, with the same parameters at the clip), that fewer matrices are formed, that the
Newton system built from the rows and columns it keeps is the one built from the whole matrix bit for bit, and
when the refits turn it on.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from heroeval.checks.model_checks import run_checks
from heroeval.stage_a import scoring, two_coin
from heroeval.stage_a.fit import information_of, weighted_design
from heroeval.stage_a.folds import FoldFits
from heroeval.stage_a.gold import initial_values
from heroeval.stage_a.newton_factor import damped_factor, worth_reusing
from heroeval.stage_a.settings import StoppingRule

from .test_cheap_checks import _same_checks
from .test_em_newton import _vec, sparse_crowd


def _fit(d: two_coin.Design, start: tuple, reuse: bool, newton_after: int) -> tuple[two_coin.EMFit, int]:
    calls = [0]
    exact = information_of(d)

    def info(a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
        calls[0] += 1
        return exact(a, b, p)

    return two_coin.run_em(d, start, information=info, newton_after=newton_after, reuse=reuse), calls[0]


@pytest.mark.parametrize(("seed", "J", "newton_after"), [(2, 250, 20), (4, 300, 100), (5, 200, 30)])
def test_reused_factors_give_the_fit_of_exact_newton_steps(seed: int, J: int, newton_after: int) -> None:
    hist = sparse_crowd(seed, J=J)
    d = weighted_design(hist, 1.0)
    start = initial_values(hist)
    old, n_old = _fit(d, start, False, newton_after)
    new, n_new = _fit(d, start, True, newton_after)
    assert old.converged and new.converged and old.newton_steps > 0
    # both stop by Stage A's rule (one EM step moves no parameter by more than 1e-8), which leaves a fit up to
    # 1e-8 r / (1 - r) from the fixed point, r the EM rate of its slowest parameter: each within 1e-7 (r < 0.9) of
    # the fixed point found with tol 1e-13 (measured: 3.0e-8 without reuse at seed 5, 1.6e-9 at most otherwise)
    ref = two_coin.run_em(d, start, information=information_of(d), newton_after=newton_after,
                          stop=StoppingRule(1e-13, 5000))
    for f in (old, new):
        np.testing.assert_allclose(_vec(f), _vec(ref), rtol=0, atol=1e-7)
    assert new.loglik == pytest.approx(old.loglik, rel=1e-12)
    assert n_new < n_old  # fewer informations formed (and factored)
    # the parameters at the clip are the same ones: clipped ones stay clipped
    at_clip = [np.minimum(_vec(f), 1 - _vec(f)) < 1e-6 for f in (old, new)]
    assert at_clip[0].sum() > 0
    np.testing.assert_array_equal(at_clip[0], at_clip[1])


def _system_from_the_whole_matrix(x: np.ndarray, grad: np.ndarray, info: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The Newton system as it was built before: the whole logit-scale matrix, then its free rows and columns."""
    pr = expit(x)
    D = pr * (1 - pr)
    m = info * D[:, None] * D[None, :]
    m[np.diag_indices_from(m)] -= grad * (1 - 2 * pr)
    out = (np.abs(x) >= two_coin._LOGIT_MAX - two_coin.NEWTON_BOUND) & (grad * np.sign(x) >= 0)
    scale = np.abs(np.diag(m))
    free = ~out & (scale > 1e-14 * max(float(scale.max(initial=0.0)), 1e-300))
    return m[np.ix_(free, free)], free


def test_newton_system_and_information_are_unchanged_bit_for_bit() -> None:
    hist = sparse_crowd(2, J=120)
    d = weighted_design(hist, 0.5)
    fit = two_coin.run_em(d, initial_values(hist), information=information_of(d), newton_after=20)
    x = two_coin._pack(fit.alpha, fit.beta, fit.prev)
    s1, cnt, gsum, gsize, _, _ = two_coin.em_sums(d, fit.alpha, fit.beta, fit.prev)
    grad = two_coin.logit_gradient(s1, cnt, gsum, gsize, d.pseudo_count, fit.alpha, fit.beta, fit.prev)
    gamma, _ = two_coin.e_step(d, fit.alpha, fit.beta, fit.prev, need_ll=False)
    H = scoring.information(d, fit.alpha, fit.beta, fit.prev, gamma)
    assert (np.abs(x) >= two_coin._LOGIT_MAX - 1e-6).sum() > 0  # some parameters at the clip, left out
    I_ff, g_f, free = two_coin.newton_system(x, grad, H)
    ref, ref_free = _system_from_the_whole_matrix(x, grad, H)
    np.testing.assert_array_equal(free, ref_free)
    np.testing.assert_array_equal(I_ff, ref)
    np.testing.assert_array_equal(g_f, grad[free])
    # and the kept factor solves as the one-off solve did
    sol = damped_factor(I_ff, g_f, 0.0)
    assert sol is not None
    f, step = sol
    np.testing.assert_array_equal(f.solve(g_f), step)
    np.testing.assert_allclose(I_ff @ step, g_f, rtol=1e-8, atol=1e-8 * float(np.abs(g_f).max()))


def test_when_the_refits_reuse_factors() -> None:
    assert worth_reusing(1909, 54_648)  # trec2011_crowd
    assert worth_reusing(1650, 91_326)  # adultcontent2
    assert not worth_reusing(80, 4_212)  # bluebirds: the factor costs nothing
    assert not worth_reusing(801, 10_000_000)  # a pass costs more than the factor
    assert FoldFits(sparse_crowd(0, J=250)).reuse
    assert not FoldFits(sparse_crowd(0, J=30)).reuse


def test_cold_checks_with_reused_factors_equal_the_checks_from_scratch() -> None:
    """The cold refits (every labeler with few labels) reuse their factors on a crowd of 250 labelers; the checks
    from scratch (``fit_stage_a`` on each fold's items: exact Newton steps) are the same to the EM tolerance."""
    hist = sparse_crowd(6, J=250, per_labeler=20)
    assert FoldFits(hist).reuse
    grid = (0.0, 0.5, 1.0)
    cold = run_checks(hist, refit="cold", weight_grid=grid, past_rounds=False)
    scratch = run_checks(hist, refit="scratch", weight_grid=grid, past_rounds=False)
    _same_checks(cold, scratch, 1e-6)
