"""Planning (planning.py, hero plan): closed forms, exact vs Monte Carlo, and simulated half-widths."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

import heroeval as he
from heroeval.inference.planning import hero1_variance, plan, simulate_round
from heroeval.simulate import shift_dgp

A = np.array([0.85, 0.8, 0.9, 0.75, 0.8, 0.85])
B = np.array([0.8, 0.85, 0.7, 0.9, 0.75, 0.8])


@pytest.fixture(scope="module")
def cal() -> he.Calibration:
    return he.calibrate(shift_dgp(0, alpha=A, beta=B, labels_per_item=3, N=2000).history)


def test_two_labelers_dense_closed_form(cal: he.Calibration) -> None:
    """Every labeler of a two-labeler pool: E psi^2 summed over the four label patterns by hand."""
    pool = ["L00", "L01"]
    mu = 0.3
    a, b = cal.alpha[:2], cal.beta[:2]
    info = 0.0
    for z0 in (0, 1):
        for z1 in (0, 1):
            p1 = (a[0] if z0 else 1 - a[0]) * (a[1] if z1 else 1 - a[1])
            p0 = (1 - b[0] if z0 else b[0]) * (1 - b[1] if z1 else b[1])
            pz = mu * p1 + (1 - mu) * p0
            info += ((p1 - p0) / pz) ** 2 * pz
    v = hero1_variance(cal, mu, pool=pool)
    assert v.exact and v.information == pytest.approx(info, rel=1e-12)


def test_monte_carlo_agrees_with_enumeration(cal: he.Calibration) -> None:
    ex = hero1_variance(cal, 0.25, labels_per_item=3)
    mc = hero1_variance(cal, 0.25, labels_per_item=3, pool={x: 1.0 for x in cal.labeler_ids}, rng=1)
    assert ex.exact and not mc.exact
    assert mc.information == pytest.approx(ex.information, rel=0.02)
    assert mc.history_variance == pytest.approx(ex.history_variance, rel=0.05)


def test_history_gradient_matches_hero1(cal: he.Calibration) -> None:
    """On a large simulated round, HERO-1's own history variance approaches the plan's c'Vc."""
    cur, _ = simulate_round(cal, 0.3, 40_000, labels_per_item=3, rng=5)
    r = he.hero1(cur, cal)
    v = hero1_variance(cal, r.estimate, labels_per_item=3)
    assert r.variance_history == pytest.approx(v.history_variance, rel=0.05)
    assert r.variance_current * cur.n_items == pytest.approx(1 / v.information, rel=0.05)


def test_plan_matches_simulated_half_width(cal: he.Calibration) -> None:
    """The current part of the planned half-width against the SD of HERO-1 over 300 simulated rounds drawn
    from the calibration's parameters (fixed seeds); tolerance 10 % (MC SE of an SD from 300 draws: 4 %)."""
    p = plan(cal, mu=0.3, half_width=0.05, labels_per_item=2)
    row = p.rows[0]
    n = math.ceil(row.n_items)
    z = norm.ppf(0.975)
    est = [he.hero1(simulate_round(cal, 0.3, n, labels_per_item=2, rng=s)[0], cal).estimate for s in range(300)]
    sim_hw = z * math.sqrt(float(np.var(est)) + row.history_variance)
    assert sim_hw == pytest.approx(0.05, rel=0.10)


def test_plan_goals_and_errors(cal: he.Calibration) -> None:
    p = plan(cal, mu=0.3, half_width=0.04, labels_per_item=[1, 3, 6])
    ns = [r.n_items for r in p.rows]
    assert ns[0] > ns[1] > ns[2]
    g = plan(cal, mu=0.3, n_items=math.ceil(ns[1]), labels_per_item=3)
    assert g.rows[0].half_width == pytest.approx(0.04, rel=1e-3)
    lim = plan(cal, mu=0.3, half_width=0.001)
    assert math.isinf(lim.rows[0].n_items) and "history-limited" in lim.summary()
    d80 = plan(cal, mu=0.3, difference=0.05, labels_per_item=3, power=0.8).rows[0].n_items
    d90 = plan(cal, mu=0.3, difference=0.05, labels_per_item=3, power=0.9).rows[0].n_items
    assert d90 > d80
    r2 = plan(cal, mu=0.3, half_width=0.04, labels_per_item=3, score_r2=0.5).rows[0].n_items
    assert r2 < ns[1]
    assert p.to_dict()["rows"][0]["labels_per_item"] == 1
    with pytest.raises(he.HeroEvalError, match="exactly one"):
        plan(cal, mu=0.3)
    with pytest.raises(he.HeroEvalError, match="mu must be"):
        plan(cal, mu=1.0, half_width=0.05)
    with pytest.raises(he.HeroEvalError, match="labels_per_item"):
        plan(cal, mu=0.3, half_width=0.05, labels_per_item=9)
    with pytest.raises(he.HeroEvalError, match="does not know"):
        plan(cal, mu=0.3, half_width=0.05, pool=["nobody"])
    with pytest.raises(he.HeroEvalError, match="difference"):
        plan(cal, mu=0.3, difference=0.9)
