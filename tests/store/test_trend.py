"""The trend: each round's recommended estimate (method="auto", the default), or one shared fit (method="joint"),
differences from the difference of influence terms, simultaneous intervals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

import heroeval as he
from heroeval.inference.comparison import DifferenceRecommendation
from heroeval.store.trend import critical_value, holm
from tests.conftest import simulate
from tests.store.test_store import _frames


@pytest.fixture
def store(tmp_path: Path) -> he.Store:
    st = he.Store(tmp_path / "hero.duckdb")
    for k, (ann, gold) in enumerate(_frames(rounds=4)):
        st.add(ann, gold=gold, name=f"v{k + 1}")
    st.add(simulate(5, J=5, N=50, n=150, covariates=False).current, name="v5")
    return st


def test_rates_and_differences_come_from_one_fit(store: he.Store) -> None:
    tr = store.trend(drift=False, method="joint")
    assert tr.names == ("v1", "v2", "v3", "v4", "v5")
    cal = he.calibrate(store.load(list(tr.names)), checks=False)
    V = cal.parameter_covariance
    J = cal.n_labelers
    for k, r in enumerate(tr.rounds):
        assert r.estimate == pytest.approx(cal.round_prevalence[k], abs=1e-7)
        assert r.standard_error == pytest.approx(np.sqrt(V[2 * J + k, 2 * J + k]), rel=1e-4)
        assert r.ci_low < r.marginal_low < r.estimate < r.marginal_high < r.ci_high
    for i, d in enumerate(tr.differences):
        e = np.zeros(V.shape[0])
        e[2 * J + i + 1], e[2 * J + i] = 1, -1
        assert d.estimate == pytest.approx(tr.rounds[i + 1].estimate - tr.rounds[i].estimate)
        assert d.standard_error == pytest.approx(np.sqrt(e @ V @ e), rel=1e-4)
        # the shared calibration: not the sum of the two variances
        assert d.standard_error != pytest.approx(np.hypot(tr.rounds[i].standard_error,
                                                          tr.rounds[i + 1].standard_error), rel=1e-3)
    assert tr.calibration_status == "fitted"
    assert store.trend(drift=False, method="joint").calibration_status == "cached"


def test_a_round_without_gold_gets_hero_joints_estimate(store: he.Store) -> None:
    tr = store.trend(drift=False, method="joint")
    joint = store.estimate("v5").estimates["hero_joint"]
    assert tr.rounds[-1].in_history is False
    assert tr.rounds[-1].estimate == pytest.approx(joint.estimate, abs=1e-5)
    assert tr.rounds[-1].standard_error == pytest.approx(joint.standard_error, rel=0.02)


def test_baseline_adjustments_and_frames(store: he.Store) -> None:
    tr = store.trend(baseline="v2", adjust="bonferroni", drift=False, method="joint")
    assert [(d.name, d.reference) for d in tr.differences] == [("v1", "v2"), ("v3", "v2"), ("v4", "v2"),
                                                                ("v5", "v2")]
    assert tr.critical_rates == pytest.approx(norm.ppf(1 - 0.05 / 10))
    none = store.trend(adjust="none", drift=False, method="joint")
    assert none.critical_rates == pytest.approx(1.959964, abs=1e-5)
    assert all(r.ci_low == pytest.approx(r.marginal_low) for r in none.rounds)
    mz = store.trend(adjust="maxz", drift=False, method="joint")
    sd = store.trend(drift=False, method="joint")
    assert none.critical_rates < mz.critical_rates <= sd.critical_rates + 0.01
    df = sd.to_frame(truth={"v1": 0.3})
    assert list(df["round"]) == list(sd.names) and df.loc[0, "truth"] == 0.3 and np.isnan(df.loc[1, "truth"])
    assert "<table>" in sd._repr_html_() and "Šidák" in sd.method_line()
    assert sd.differences_frame().shape == (4, 10)
    d = sd.to_dict()
    assert d["adjust"] == "sidak" and len(d["rounds"]) == 5 and d["method"] == "stage_a_joint"
    with pytest.raises(he.HeroEvalError, match="baseline"):
        store.trend(baseline="nope", drift=False)


def test_critical_values() -> None:
    assert critical_value(1, 0.95, "sidak") == pytest.approx(1.959964, abs=1e-5)
    assert critical_value(5, 0.95, "sidak") == pytest.approx(norm.ppf(0.5 + 0.95 ** 0.2 / 2))
    assert critical_value(5, 0.95, "sidak") < critical_value(5, 0.95, "bonferroni")
    # max-|z| with independent estimates is Šidák's value; with perfectly correlated ones the marginal value
    assert critical_value(5, 0.95, "maxz", np.eye(5)) == pytest.approx(critical_value(5, 0.95, "sidak"), abs=0.02)
    assert critical_value(5, 0.95, "maxz", np.ones((5, 5))) == pytest.approx(1.96, abs=0.02)


def test_drift_round_by_round(store: he.Store) -> None:
    tr = store.trend()
    rounds = {r.round for r in tr.drift}
    assert rounds == {"v1", "v2", "v3", "v4", "v5"}
    labs = {r.labeler for r in tr.drift}
    assert labs == {f"L{j:02d}" for j in range(5)}
    df = tr.drift_frame()
    assert len(df) == len(tr.drift) and df["n_labels"].min() > 0
    v1 = df[df["round"] == "v1"]
    assert v1["gold_sensitivity"].notna().all()  # v1 has gold: the labelers' rates on it
    assert df[df["round"] == "v5"]["gold_sensitivity"].isna().all()


def test_auto_trend_gives_each_round_its_store_estimate(store: he.Store) -> None:
    """Issue #40: one answer everywhere. For every round the trend (the default, method="auto") shows exactly
    the recommended estimate hero store estimate gives it: method, estimate, status, the interval."""
    tr = store.trend(drift=False)
    assert tr.method == "auto" and tr.to_dict()["method"] == "auto" and "recommended" in tr.method_line()
    m = len(tr.rounds)
    for r in tr.rounds:
        rec = store.estimate(r.name).estimates.recommended
        assert rec is not None
        assert (r.method, r.estimate, r.status, r.reason) == (rec.method, rec.result.estimate, rec.status, rec.reason)
        ci = rec.result.confidence_interval(0.95)
        # a fit made now and the same fit read back from the cache: equal to rounding
        assert (r.marginal_low, r.marginal_high) == pytest.approx((ci.low, ci.high), abs=1e-12)
        assert r.ci_method == ci.method
        sim = rec.result.confidence_interval(0.95 ** (1 / m))
        assert (r.ci_low, r.ci_high) == pytest.approx((sim.low, sim.high), abs=1e-12)
        assert r.ci_low <= r.marginal_low <= r.estimate <= r.marginal_high <= r.ci_high
    df = tr.to_frame()
    assert {"method", "status", "reason", "ci_method"} <= set(df.columns)
    # the differences: hero compare's recommended difference, the round as A, on the history without either
    d = tr.differences[0]
    assert (d.name, d.reference) == ("v2", "v1")
    hist = [n for n in store.history() if n not in ("v1", "v2")]
    rec = he.compare(store.load("v2"), store.load("v1"), store.calibrate(rounds=hist).calibration,
                     history=store.load(hist))
    assert isinstance(rec, DifferenceRecommendation)
    assert (d.method, d.status) == (rec.method, rec.status)
    assert d.estimate == pytest.approx(rec.estimate, abs=1e-9)
    assert d.p_value == pytest.approx(rec.comparison.p_value, rel=1e-9)
    sim = rec.confidence_interval(0.95 ** (1 / (m - 1)))
    assert (d.ci_low, d.ci_high) == pytest.approx((sim.low, sim.high), abs=1e-9)
    p = [x.p_value for x in tr.differences]
    assert [x.p_adjusted for x in tr.differences] == pytest.approx(holm(p).tolist())
    assert "UNRELIABLE" not in tr.method_line()


def test_auto_trend_adjustments_and_method_check(store: he.Store) -> None:
    bon = store.trend(drift=False, adjust="bonferroni", baseline="v1", rounds=["v1", "v2", "v3"])
    rec = store.estimate("v2").estimates.recommended
    ci = rec.result.confidence_interval(1 - 0.05 / 3)
    assert (bon.rounds[1].ci_low, bon.rounds[1].ci_high) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert [(d.name, d.reference) for d in bon.differences] == [("v2", "v1"), ("v3", "v1")]
    none = store.trend(drift=False, adjust="none", rounds=["v1", "v2", "v3"])
    assert all((r.ci_low, r.ci_high) == (r.marginal_low, r.marginal_high) for r in none.rounds)
    assert all(d.p_adjusted == d.p_value for d in none.differences)
    mz = store.trend(drift=False, adjust="maxz", rounds=["v1", "v2", "v3"])
    sd = store.trend(drift=False, rounds=["v1", "v2", "v3"])
    assert any("Šidák" in n for n in mz.notes) and [r.ci_low for r in mz.rounds] == [r.ci_low for r in sd.rounds]
    with pytest.raises(he.HeroEvalError, match="method must be one of auto, joint"):
        store.trend(method="hero1")
    with pytest.raises(he.HeroEvalError, match="baseline"):
        store.trend(baseline="nope", drift=False)


def test_holm_by_hand() -> None:
    p = np.array([0.02, 0.001, 0.04, 0.03, np.nan])
    # sorted 0.001, 0.02, 0.03, 0.04 (m = 4): 4 * 0.001, 3 * 0.02, 2 * 0.03, 1 * 0.04 -> then running maximum
    want = [0.06, 0.004, 0.06, 0.06]
    got = holm(p)
    assert got[:4] == pytest.approx(want) and np.isnan(got[4])
    assert holm([0.5, 0.9]).tolist() == [1.0, 1.0]  # step-down: never below an earlier step
    assert holm([]).size == 0
