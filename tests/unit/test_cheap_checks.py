"""The model checks' refits on one shared design, from the whole history's fit (issue #20, item 1).

``run_checks(refit="scratch")`` is the checks as they were (``fit_stage_a`` on a
copy of each fold's training items, from the gold-based start); the shared
design (left-out items weighted 0) with either start must give the same checks
to the EM tolerance where the likelihood has one maximum, and ``refit="auto"``
must not start from the whole fit where it may have several.
"""

from __future__ import annotations

import numpy as np
import pytest

import heroeval as he
from heroeval.checks import run_checks
from heroeval.checks.model_checks import (
    GUESS_PASSES,
    WARM_MIN_LABELS,
    _fit_from,
    _fold_start,
    _folds,
    _HistoryFolds,
)
from heroeval.simulate import paper_dgp
from heroeval.stage_a import _em
from heroeval.stage_a.calibration import (
    FoldFits,
    fit_stage_a,
    gold_counts,
    gold_information,
    information_of,
    initial_values,
)

from .test_em_newton import sparse_crowd


def _same_checks(a: he.checks.ModelChecks, b: he.checks.ModelChecks, tol: float) -> None:
    assert a.chosen_weight == b.chosen_weight and a.folds == b.folds
    for w in a.log_score:
        assert a.log_score[w][0] == pytest.approx(b.log_score[w][0], abs=tol)
        assert a.log_score[w][1] == pytest.approx(b.log_score[w][1], abs=tol)
    assert [(r["method"], r["history_weight"]) for r in a.mock] == [(r["method"], r["history_weight"]) for r in b.mock]
    for ra, rb in zip(a.mock, b.mock, strict=True):
        for key in ("estimate", "bias", "bias_se"):
            assert ra[key] == pytest.approx(rb[key], abs=tol), (ra["method"], key)


@pytest.mark.parametrize("refit", ["warm", "cold"])
def test_shared_design_checks_equal_the_checks_from_scratch(refit: str) -> None:
    hist = paper_dgp(1, rho=0.3).history
    cal = he.calibrate(hist, covariance=False)
    scratch = run_checks(hist, refit="scratch")
    shared = run_checks(hist, refit=refit, start=cal)  # type: ignore[arg-type]
    _same_checks(scratch, shared, 1e-6)


def test_calibrate_runs_the_warm_checks_and_keeps_its_fit() -> None:
    hist = paper_dgp(2, rho=0.3).history
    n_lab = np.bincount(hist.labeler, minlength=hist.n_labelers)
    assert n_lab.min() >= WARM_MIN_LABELS  # so "auto" is "warm" here
    with_checks = he.calibrate(hist, checks=True)
    without = he.calibrate(hist)
    np.testing.assert_array_equal(with_checks.alpha, without.alpha)
    np.testing.assert_array_equal(with_checks.beta, without.beta)
    np.testing.assert_allclose(with_checks.parameter_covariance, without.parameter_covariance, rtol=0, atol=0)
    _same_checks(with_checks.checks, run_checks(hist, refit="scratch"), 1e-6)


def test_fold_fits_equal_fits_on_the_training_items() -> None:
    hist = sparse_crowd(7, J=60, per_labeler=30)
    test = _folds(hist, 5, 0)[2]
    train = hist.take_items(np.setdiff1d(np.arange(hist.n_items), test))
    ff = FoldFits(hist, pseudo_count=0.5)
    for w in (0.0, 0.3, 1.0):
        ref = fit_stage_a(train, history_weight=w, pseudo_count=0.5, covariance=False)
        f = ff.fit(w, initial_values(train), drop=test, newton_after=100)
        np.testing.assert_allclose(f.alpha, ref.alpha, atol=1e-9)
        np.testing.assert_allclose(f.beta, ref.beta, atol=1e-9)
        np.testing.assert_allclose(f.prev, ref.round_prevalence, atol=1e-9)


def test_sparse_crowds_refit_from_the_gold_start() -> None:
    """Labelers with few labels: the likelihood has several maxima, so "auto" keeps the gold-based start."""
    hist = sparse_crowd(2)
    assert np.bincount(hist.labeler).min() < WARM_MIN_LABELS
    cal = he.calibrate(hist, covariance=False)
    _same_checks(run_checks(hist, refit="scratch"), run_checks(hist, start=cal), 1e-6)


@pytest.mark.parametrize("engine", ["numpy", "numba"])
def test_gold_information_is_what_leaving_the_gold_items_out_takes_away(engine: str) -> None:
    """The observed information of the whole history less that of the history without some gold items equals
    the diagonal information of those gold items alone (the matrix the refits' guesses are built from)."""
    if engine == "numba":
        pytest.importorskip("numba")
    hist = paper_dgp(0, rho=0.3).history
    cal = he.calibrate(hist, covariance=False)
    ff = FoldFits(hist, engine=engine)  # type: ignore[arg-type]
    gi = np.flatnonzero(hist.gold >= 0)[:7]
    a, b, p = cal.alpha, cal.beta, cal.round_prevalence
    H = information_of(ff.design(0.3))(a, b, p)
    H_without = information_of(ff.design(0.3, gi))(a, b, p)
    D = gold_information(hist.take_items(gi), a, b, p)
    assert np.count_nonzero(D - np.diag(np.diag(D))) == 0 and D.max() > 0
    np.testing.assert_allclose(H - H_without, D, rtol=1e-10, atol=1e-9 * np.abs(D).max())


def test_a_refit_from_a_poor_guess_turns_to_squarem_and_stops_where_it_would() -> None:
    """_fit_from: Newton steps with a guessed information, SQUAREM when they have not finished in GUESS_PASSES;
    the fit equals SQUAREM's alone to the EM tolerance, with a good guess, a poor one and none."""
    hist = paper_dgp(3, rho=0.3).history
    gi = np.flatnonzero(hist.gold >= 0)
    hf = _HistoryFolds(FoldFits(hist), gi)
    cal = he.calibrate(hist, covariance=False)
    start = (cal.alpha, cal.beta, cal.round_prevalence)
    plain = hf.fit(0.3, start, newton_after=_em.NEWTON_AFTER)
    good = hf.information(0.3, plain)
    P = good.shape[0]
    for guess in (good, 50.0 * np.eye(P), None):
        f = _fit_from(hf, 0.3, start, guess, {})
        assert f.converged
        np.testing.assert_allclose(f.alpha, plain.alpha, atol=1e-6)
        np.testing.assert_allclose(f.prev, plain.prev, atol=1e-6)
    poor = hf.fit(0.3, start, information=50.0 * np.eye(P), max_iter=GUESS_PASSES)
    assert not poor.converged  # so the poor guess did take the SQUAREM turn above


def test_a_fold_refit_starts_one_newton_step_from_the_whole_fit() -> None:
    """_fold_start: the refit objective's gradient at the whole fit, from the left-out gold items' counts alone,
    equals the one a pass over the history gives (to the whole fit's EM tolerance); the step lands nearer the
    refit's maximum than the whole fit is, and the refit from there stops at the same maximum in fewer passes."""
    hist = paper_dgp(4, rho=0.3).history
    gi = np.flatnonzero(hist.gold >= 0)
    hf = _HistoryFolds(FoldFits(hist), gi)
    cal = he.calibrate(hist, covariance=False)
    here = (cal.alpha, cal.beta, cal.round_prevalence)
    whole = hf.fit(1.0, here)
    here = (whole.alpha, whole.beta, whole.prev)
    H = hf.information(1.0, whole)
    test = _folds(hist.take_items(gi), 5, 0)[1]
    out = hist.take_items(gi[test])
    # the gradient by a pass over the history without the fold (plain sums, the NumPy engine)
    d = FoldFits(hist, engine="numpy").design(1.0, gi[test])
    s1, cnt, gsum, gsize, _, _ = _em.em_sums(d, *here)
    by_pass = _em.logit_gradient(s1, cnt, gsum, gsize, 0.0, *here)
    tp, fn, tn, fp = gold_counts(out)
    y1 = np.bincount(out.item_round, weights=(out.gold == 1).astype(float), minlength=out.n_rounds)
    n = np.bincount(out.item_round, minlength=out.n_rounds)
    a, b, p = here
    closed = -np.concatenate([tp * (1 - a) - fn * a, tn * (1 - b) - fp * b, y1 * (1 - p) - (n - y1) * p])
    np.testing.assert_allclose(by_pass, closed, atol=1e-5 * np.abs(closed).max())
    start = _fold_start(out, here, H)
    from_here = hf.fit(1.0, here, drop=test, information=H)
    from_start = hf.fit(1.0, start, drop=test, information=H)
    assert from_here.converged and from_start.converged
    gap = lambda x: np.abs(np.concatenate(x) - np.concatenate(  # noqa: E731
        (from_here.alpha, from_here.beta, from_here.prev))).max()
    assert gap(start) < 0.25 * gap(here)
    for f in ("alpha", "beta", "prev"):
        np.testing.assert_allclose(getattr(from_start, f), getattr(from_here, f), atol=1e-7)
    assert from_start.n_iter < from_here.n_iter


def test_calibrate_shares_its_design_and_information_with_the_checks_and_drops_them() -> None:
    """With the compiled engine the checks refit on the fit's own design and take its information at w = 1:
    the same checks as on a design and information of their own, and the calibration returned keeps neither."""
    pytest.importorskip("numba")
    hist = paper_dgp(5, rho=0.3).history
    kept = fit_stage_a(hist, engine="numba", keep_design=True)
    assert kept.history_design is not None and kept.history_information is not None
    ff = FoldFits(hist, engine="numba", design=kept.history_design)
    assert ff._compact is kept.history_design
    H = ff.information(1.0, kept.history_fit)  # type: ignore[arg-type]
    np.testing.assert_allclose(kept.history_information, H, rtol=1e-10, atol=1e-10 * np.abs(H).max())
    cal = he.calibrate(hist, checks=True, engine="numba")
    assert cal.history_design is None and cal.history_information is None
    plain = fit_stage_a(hist, engine="numba")
    assert plain.history_design is None
    _same_checks(cal.checks, run_checks(hist, start=plain, em_settings={"engine": "numba"}), 1e-9)


def test_the_left_out_items_kept_per_fold_give_the_design_a_fresh_one_gives() -> None:
    pytest.importorskip("numba")
    hist = paper_dgp(6, rho=0.3).history
    drop = np.flatnonzero(hist.gold >= 0)[::5]
    ff = FoldFits(hist, engine="numba")
    ff.design(0.3, drop)  # fills the fold's entry
    for w in (0.3, 1.0, 0.1):
        kept, fresh = ff.design(w, drop), FoldFits(hist, engine="numba").design(w, drop)
        for f in ("weight", "code_counts", "group_size"):
            np.testing.assert_array_equal(getattr(kept, f), getattr(fresh, f))
    assert float(ff.design(1.0, drop).weight.sum()) == hist.n_items - drop.size  # type: ignore[union-attr]
