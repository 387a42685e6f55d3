"""The trend: one shared fit, differences from the difference of influence terms, simultaneous intervals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

import heroeval as he
from heroeval.store.trend import critical_value
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
    tr = store.trend(drift=False)
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
    assert tr.calibration_status == "fitted" and store.trend(drift=False).calibration_status == "cached"


def test_a_round_without_gold_gets_hero_joints_estimate(store: he.Store) -> None:
    tr = store.trend(drift=False)
    joint = store.estimate("v5").estimates["hero_joint"]
    assert tr.rounds[-1].in_history is False
    assert tr.rounds[-1].estimate == pytest.approx(joint.estimate, abs=1e-5)
    assert tr.rounds[-1].standard_error == pytest.approx(joint.standard_error, rel=0.02)


def test_baseline_adjustments_and_frames(store: he.Store) -> None:
    tr = store.trend(baseline="v2", adjust="bonferroni", drift=False)
    assert [(d.name, d.reference) for d in tr.differences] == [("v1", "v2"), ("v3", "v2"), ("v4", "v2"),
                                                                ("v5", "v2")]
    assert tr.critical_rates == pytest.approx(norm.ppf(1 - 0.05 / 10))
    none = store.trend(adjust="none", drift=False)
    assert none.critical_rates == pytest.approx(1.959964, abs=1e-5)
    assert all(r.ci_low == pytest.approx(r.marginal_low) for r in none.rounds)
    mz = store.trend(adjust="maxz", drift=False)
    sd = store.trend(drift=False)
    assert none.critical_rates < mz.critical_rates <= sd.critical_rates + 0.01
    df = sd.to_frame(truth={"v1": 0.3})
    assert list(df["round"]) == list(sd.names) and df.loc[0, "truth"] == 0.3 and np.isnan(df.loc[1, "truth"])
    assert "<table>" in sd._repr_html_() and "Šidák" in sd.method_line()
    assert sd.differences_frame().shape == (4, 8)
    d = sd.to_dict()
    assert d["adjust"] == "sidak" and len(d["rounds"]) == 5
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
