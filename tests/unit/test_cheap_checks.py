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
from heroeval.checks.fold_refits import HistoryFolds, _fold_start, _gold_gradient, _weight_start
from heroeval.checks.model_checks import WARM_MIN_LABELS, _folds
from heroeval.core.drive import drive_many
from heroeval.simulate import paper_dgp
from heroeval.stage_a import two_coin
from heroeval.stage_a.fit import fit_stage_a, information_of
from heroeval.stage_a.folds import FoldFits
from heroeval.stage_a.gold import gold_counts, gold_information, initial_values
from heroeval.stage_a.settings import EMSettings, FitSettings

from .test_em_newton import sparse_crowd
from .test_kernels import _history


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
        ref = fit_stage_a(train, history_weight=w, em=EMSettings(pseudo_count=0.5), fitting=FitSettings(covariance=False))
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


def test_a_guessed_information_gives_way_to_the_exact_one() -> None:
    """two_coin.guessed: the guess for the first GUESS_STEPS Newton iterations, then the exact information; a refit
    from its fold's gold start with a poor guess (50 times the identity) then stops where one with the exact
    information at every step does, to the EM tolerance, in a few dozen passes."""
    calls: list[int] = []
    H = np.eye(3)
    info = two_coin.guessed(H, lambda a, b, p: calls.append(1) or 2 * H, after=2)  # type: ignore[func-returns-value]
    z = np.zeros(1)
    assert [float(info(z, z, z)[0, 0]) for _ in range(4)] == [1.0, 1.0, 2.0, 2.0] and len(calls) == 2
    hist = paper_dgp(3, rho=0.3).history
    gi = np.flatnonzero(hist.gold >= 0)
    hf = HistoryFolds(FoldFits(hist), gi)
    test = _folds(hist.take_items(gi), 5, 0)[0]
    start = initial_values(hist)
    exact = hf.fit(0.3, start, drop=test)  # the information at each point
    P = 2 * hist.n_labelers + hist.n_rounds
    poor = hf.fit(0.3, start, drop=test, information=50.0 * np.eye(P))
    assert exact.converged and poor.converged and poor.n_iter < 100
    for f in ("alpha", "beta", "prev"):
        np.testing.assert_allclose(getattr(poor, f), getattr(exact, f), atol=1e-6)


def test_a_fold_refit_starts_one_newton_step_from_the_whole_fit() -> None:
    """_fold_start: the refit objective's gradient at the whole fit, from the left-out gold items' counts alone,
    equals the one a pass over the history gives (to the whole fit's EM tolerance); the step lands nearer the
    refit's maximum than the whole fit is, and the refit from there stops at the same maximum in fewer passes."""
    hist = paper_dgp(4, rho=0.3).history
    gi = np.flatnonzero(hist.gold >= 0)
    hf = HistoryFolds(FoldFits(hist), gi)
    cal = he.calibrate(hist, covariance=False)
    here = (cal.alpha, cal.beta, cal.round_prevalence)
    whole = hf.fit(1.0, here)
    here = (whole.alpha, whole.beta, whole.prev)
    H = hf.information(1.0, whole)
    test = _folds(hist.take_items(gi), 5, 0)[1]
    out = hist.take_items(gi[test])
    # the gradient by a pass over the history without the fold (plain sums, the NumPy engine)
    d = FoldFits(hist, engine="numpy").design(1.0, gi[test])
    s1, cnt, gsum, gsize, _, _ = two_coin.em_sums(d, *here)
    by_pass = two_coin.logit_gradient(s1, cnt, gsum, gsize, 0.0, *here)
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
    kept = fit_stage_a(hist, fitting=FitSettings(engine="numba"), keep_design=True)
    assert kept.history_design is not None and kept.history_information is not None
    ff = FoldFits(hist, engine="numba", design=kept.history_design)
    assert ff._compact is kept.history_design
    H = ff.information(1.0, kept.history_fit)  # type: ignore[arg-type]
    np.testing.assert_allclose(kept.history_information, H, rtol=1e-10, atol=1e-10 * np.abs(H).max())
    cal = he.calibrate(hist, checks=True, engine="numba")
    assert cal.history_design is None and cal.history_information is None
    plain = fit_stage_a(hist, fitting=FitSettings(engine="numba"))
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


def test_fold_sums_in_one_pass_equal_each_refits_own_pass() -> None:
    """FoldFits._fold_sums (the kernel _em_chunk_folds): the sums of five refits in one pass are, bit for bit, those
    each refit's own design gives, the objective to rounding; also where the odds leave [1e-100, 1e100] and are
    recomputed in logs (labelers at the clip, 1e-9 from the boundary, 14 labels an item), at w = 1 and w = 0.3."""
    pytest.importorskip("numba")
    hist = paper_dgp(8, rho=0.3, J=14).history
    ff = FoldFits(hist, engine="numba", pseudo_count=0.5)
    gi = np.flatnonzero(hist.gold >= 0)
    drops = [gi[k::5] for k in range(5)]
    J = hist.n_labelers
    cal = he.calibrate(hist, covariance=False)
    rng = np.random.default_rng(0)
    points = []
    for m in range(5):
        a = np.clip(cal.alpha + 0.02 * rng.normal(size=J), 0.05, 0.95)
        b = np.clip(cal.beta + 0.02 * rng.normal(size=J), 0.05, 0.95)
        if m == 3:
            a[:], b[:] = 1 - 1e-9, 1 - 1e-9  # every ratio 1e9 or 1e-9: items with 12 labels alike leave the range
        points.append(two_coin._pack(a, b, cal.round_prevalence))
    d = ff.design(1.0)
    _, _, lr, lo, _ = d._tables(*two_coin._unpack(points[3], J))
    eta = np.add.reduceat(lr[d.code], d.ptr[:-1]) + lo[d.group]
    assert np.abs(eta).max() > np.log(1e100)  # so the log path runs
    for w in (1.0, 0.3):
        many = ff._fold_sums(w, drops, points)
        for m in range(5):
            one = two_coin.em_sums(ff.design(w, drops[m]), *two_coin._unpack(points[m], J))
            for i in range(4):
                np.testing.assert_array_equal(many[m][i], one[i])
            assert many[m][4] is one[4] is True
            assert many[m][5] == pytest.approx(one[5], rel=1e-12)


def test_refits_in_lockstep_equal_one_refit_each() -> None:
    """FoldFits.fit_many (the Newton phases of five refits in lockstep, one pass each round) gives each refit the
    fit, the passes and the steps of FoldFits.fit on its own, from the same start with the same information."""
    pytest.importorskip("numba")
    hist = paper_dgp(9, rho=0.3).history
    ff = FoldFits(hist, engine="numba")
    gi = np.flatnonzero(hist.gold >= 0)
    drops = [gi[k::5] for k in range(5)]
    whole = ff.fit(0.3, initial_values(hist), newton_after=100)
    here = (whole.alpha, whole.beta, whole.prev)
    H = ff.information(0.3, whole)
    # starts at different distances, so the refits finish in different rounds and the lockstep passes serve
    # five, then fewer, then one (its own design's pass)
    rng = np.random.default_rng(3)
    starts = [(np.clip(here[0] + s * rng.normal(size=here[0].size), 0.05, 0.99), here[1], here[2])
              for s in (0.0, 0.01, 0.03, 0.1, 0.2)]
    infos = [H - gold_information(hist.take_items(dr), *here) for dr in drops]
    many = ff.fit_many(0.3, starts, drops, infos)
    assert all(f.converged for f in many) and len({f.n_iter for f in many}) >= 3
    for f, s, dr, Hk in zip(many, starts, drops, infos, strict=True):
        one = ff.fit(0.3, s, drop=dr, information=Hk)
        assert one.converged and abs(f.n_iter - one.n_iter) <= 2  # the same steps but where a gain is within rounding
        for name in ("alpha", "beta", "prev"):
            np.testing.assert_allclose(getattr(f, name), getattr(one, name), rtol=0, atol=1e-9)
    with pytest.raises(he.HeroEvalError, match="disjoint"):
        ff.fit_many(0.3, starts[:2], [drops[0], drops[0]], infos[:2])


def test_drive_many_sends_each_generator_its_own_sums_until_it_returns() -> None:
    """drive_many: generators that finish after different numbers of points; each gets the sums of the point it
    asked for, and the results come back in the generators' order."""

    def asks(k: int):  # type: ignore[no-untyped-def]
        got = []
        for i in range(k):
            got.append((yield np.array([10.0 * k + i])))
        return got

    calls: list[list[int]] = []

    def evaluate(which: list[int], xs: list[np.ndarray]) -> list[float]:
        calls.append(which)
        return [float(x[0]) + 0.5 for x in xs]

    out = drive_many([asks(3), asks(1), asks(2)], evaluate)  # type: ignore[arg-type]
    assert out == [[30.5, 31.5, 32.5], [10.5], [20.5, 21.5]]
    assert calls == [[0, 1, 2], [0, 2], [0]]


def test_a_refit_at_a_lower_weight_starts_from_the_gold_items_alone() -> None:
    """_weight_start: at a fold's fit at w = 1, the gradient of its objective at w = 0.3 by a pass equals
    (1 - 0.3) times its kept gold items' own gradient (closed form, no pass); the step from there lands nearer
    the refit's maximum at 0.3 than its fit at 1 is, and the refit from either stops at the same maximum."""
    hist = paper_dgp(10, rho=0.3).history
    gi = np.flatnonzero(hist.gold >= 0)
    ff = FoldFits(hist, engine="numpy")
    hf = HistoryFolds(ff, gi)
    gold_set = hist.take_items(gi)
    test = _folds(gold_set, 5, 0)[3]
    kept = gold_set.take_items(np.setdiff1d(np.arange(gold_set.n_items), test))
    at1 = hf.fit(1.0, initial_values(hist), drop=test, newton_after=100, tol=1e-12)
    at = (at1.alpha, at1.beta, at1.prev)
    s1, cnt, gsum, gsize, _, _ = two_coin.em_sums(ff.design(0.3, gi[test]), *at)
    by_pass = two_coin.logit_gradient(s1, cnt, gsum, gsize, 0.0, *at)
    closed = (1 - 0.3) * _gold_gradient(kept, at)
    np.testing.assert_allclose(by_pass, closed, atol=1e-6 * np.abs(closed).max())
    H1 = hf.information(1.0, at1) - gold_information(gold_set.take_items(test), *at)
    start, H03 = _weight_start(kept, at, H1, 1.0, 0.3)
    ref = hf.fit(0.3, at, drop=test, newton_after=100, tol=1e-12)
    gap = lambda x: np.abs(np.concatenate(x) - np.concatenate((ref.alpha, ref.beta, ref.prev))).max()  # noqa: E731
    assert gap(start) < 0.25 * gap(at)
    f = hf.fit(0.3, start, drop=test, information=H03)
    assert f.converged
    np.testing.assert_allclose(np.concatenate((f.alpha, f.beta, f.prev)),
                               np.concatenate((ref.alpha, ref.beta, ref.prev)), atol=1e-7)


def test_lockstep_checks_with_two_rounds_and_pseudo_counts_equal_the_checks_from_scratch() -> None:
    """The compiled engine's warm checks (folds in lockstep, chained across weights, _weight_start with the
    prior's gradient) on a history of two rounds with pseudo-counts: the checks of refits from scratch."""
    pytest.importorskip("numba")
    hist = _history(11)
    assert hist.n_rounds == 2 and np.bincount(hist.labeler).min() >= WARM_MIN_LABELS
    cal = he.calibrate(hist, checks=True, pseudo_count=0.5, engine="numba")
    scratch = run_checks(hist, refit="scratch", em_settings={"pseudo_count": 0.5})
    _same_checks(cal.checks, scratch, 1e-6)
