"""Issue #38 (rough edges): a one-item round warns and gets no made-up standard error; degenerate rounds raise no
raw NumPy RuntimeWarning; ``result.test`` is the test its interval inverts, callable for a p-value."""

from __future__ import annotations

import math
import warnings

import pytest

import heroeval as he
from heroeval.estimators.collection import EstimateCollection
from heroeval.workflows.api import SMALL_ROUND
from tests.conftest import Sim, simulate


@pytest.fixture(scope="module")
def checked() -> tuple[Sim, he.Calibration]:
    s = simulate(1)
    return s, he.calibrate(s.history, checks=True)


def test_one_item_round_warns_and_skips_dawid_skene(checked: tuple[Sim, he.Calibration]) -> None:
    s, cal = checked
    one = s.current.take_items([1])
    with pytest.warns(he.HeroEvalWarning, match="has one item: no standard error"):
        res = he.estimate(one, cal, method="all", recommend=True, history=s.history)
    assert isinstance(res, EstimateCollection)
    assert "dawid_skene" not in res.results and "at least 2 items" in res.skipped["dawid_skene"]
    with pytest.raises(he.HeroEvalError, match="dawid_skene needs at least 2 items"):
        he.dawid_skene(one)


def test_small_round_warns_with_its_count(checked: tuple[Sim, he.Calibration]) -> None:
    s, cal = checked
    with pytest.warns(he.HeroEvalWarning, match="has 4 items: every standard error rests on the spread of 4"):
        he.estimate(s.current.take_items(range(4)), cal)
    with warnings.catch_warnings():
        warnings.simplefilter("error", he.HeroEvalWarning)
        warnings.simplefilter("ignore", he.TransportabilityWarning)
        he.estimate(s.current.take_items(range(SMALL_ROUND)), cal)  # at the threshold: no warning


@pytest.mark.parametrize("items", [[0], [1], [0, 1], [2, 3, 4]])
def test_degenerate_rounds_raise_no_runtime_warning(checked: tuple[Sim, he.Calibration], items: list[int]) -> None:
    s, cal = checked
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        warnings.simplefilter("ignore", he.HeroEvalWarning)
        he.estimate(s.current.take_items(items), cal, method="all", recommend=True, history=s.history)


def test_result_test_is_the_p_value_its_interval_inverts(checked: tuple[Sim, he.Calibration]) -> None:
    s, cal = checked
    r = he.estimate(s.current, cal, method="hero1")
    assert isinstance(r, he.EstimateResult) and r.test is not None
    for level in (0.8, 0.95):
        ci = r.confidence_interval(level, method="score")
        for end in (ci.low, ci.high):
            assert r.test(end) == pytest.approx(1 - level, abs=1e-8)
    assert r.test(r.estimate) == pytest.approx(1.0)
    assert r.test(0.0) < 1e-6
    # the score test's own statistic is standard normal: its p-value in closed form
    z = r.test.stat(0.35)
    assert r.test(0.35) == pytest.approx(math.erfc(abs(z) / math.sqrt(2)), abs=1e-8)
    with pytest.raises(he.HeroEvalError, match="mu0 must be a rate"):
        r.test(1.5)


def test_recommended_test_matches_its_bias_aware_interval(checked: tuple[Sim, he.Calibration]) -> None:
    s, cal = checked
    res = he.estimate(s.current, cal, method="all", recommend=True, history=s.history)
    assert isinstance(res, EstimateCollection) and res.recommended is not None
    r = res.recommended.result
    assert r.test is not None
    ci = r.confidence_interval(0.9)
    if ci.method != "logit":  # an interval the test inverts (score, bias-aware, hull)
        assert r.test(ci.low) == pytest.approx(0.1, abs=1e-6)
        assert r.test(ci.high) == pytest.approx(0.1, abs=1e-6)


def test_each_interval_is_computed_once_per_result(checked: tuple[Sim, he.Calibration],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #38 (fast display): the views of a result (table, to_frame, to_dict, summary) share its intervals;
    a score-test inversion runs once per (level, method, alternative)."""
    from heroeval.estimators.inversion import ScoreTest

    s, cal = checked
    calls: list[float] = []
    real = ScoreTest.interval
    monkeypatch.setattr(ScoreTest, "interval", lambda self, lv, alt="two-sided": calls.append(lv) or real(self, lv, alt))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", he.HeroEvalWarning)
        res = he.estimate(s.current.take_items(range(12)), cal, method="all")  # small: "auto" takes the score test
    assert isinstance(res, EstimateCollection)
    res.to_frame()
    first = len(calls)
    assert first > 0
    for _ in range(3):
        res.to_frame()
        res.table().to_frame()
        res.summary()
        for r in res.results.values():
            r.to_dict()
    assert len(calls) <= 3 * first  # the one-sided bounds of to_dict at most add their own, once
    assert first <= 3 * sum(r.test is not None for r in res.results.values())  # two-sided, less, greater at most
