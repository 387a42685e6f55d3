"""Issue #40 item 2: the verdict on a difference (heroeval.inference.verdict): closed forms on a hand-made
comparison, the duality with the intervals, and its level and power by simulation (fixed seeds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

import heroeval as he
from heroeval.estimators.results import EstimateResult
from heroeval.inference.comparison import Comparison
from heroeval.inference.gold_plan import expert_labels, expert_labels_to_decide
from heroeval.inference.verdict import POWER, verdict
from heroeval.simulate import shift_dgp


def _cmp(d: float, vc: float, vh: float = 0.0) -> Comparison:
    r = EstimateResult("hero1", 0.5, 100, 300, 3)
    return Comparison("hero1", d, vc, vh, r, r)


def test_one_sided_p_values_are_the_normal_tail() -> None:
    c = _cmp(0.03, 0.0004, 0.0001)  # A - B = 0.03, SE = sqrt(0.0005)
    se = math.sqrt(0.0005)
    assert verdict(c, 0.0, "less").p_value == pytest.approx(norm.sf(0.03 / se), rel=1e-12)
    assert verdict(c, 0.01, "less").p_value == pytest.approx(norm.sf(0.04 / se), rel=1e-12)
    assert verdict(c, 0.01, "greater").p_value == pytest.approx(norm.sf((0.01 - 0.03) / se), rel=1e-12)
    assert verdict(c, 0.0, "two-sided").p_value == pytest.approx(c.p_value, rel=1e-12)
    tost = max(norm.sf((0.03 + 0.05) / se), norm.sf((0.05 - 0.03) / se))
    assert verdict(c, 0.05, "two-sided").p_value == pytest.approx(tost, rel=1e-12)


def test_decisions_agree_with_the_intervals() -> None:
    for d in np.linspace(-0.1, 0.1, 21):
        c = _cmp(float(d), 0.0009)
        ci = c.confidence_interval(0.95)
        assert verdict(c, 0.0, "two-sided").decided == (not ci.low <= 0 <= ci.high)
        lower90 = d - norm.ppf(0.95) * 0.03  # the one-sided 95 % bound of A - B
        assert verdict(c, 0.02, "less").decided == (lower90 > -0.02)


def test_words_and_items_factor() -> None:
    v = verdict(_cmp(0.05, 0.0001), 0.0, "less")
    assert v.decided and v.text.startswith("B's rate is lower than A's (p = ")
    u = verdict(_cmp(0.01, 0.0004, 0.00001), 0.0, "less")
    assert not u.decided and u.text.startswith("not enough evidence that B's rate is lower than A's")
    # k times the current items: vc / k + vh makes z = z_0.95 + z_power exactly
    k = u.items_factor
    assert 0.01 / math.sqrt(0.0004 / k + 0.00001) == pytest.approx(norm.ppf(0.95) + norm.ppf(POWER), rel=1e-9)
    assert "about" in u.text and "x the current items per round" in u.text
    wrong_way = verdict(_cmp(-0.02, 0.0004), 0.0, "less")
    assert math.isinf(wrong_way.items_factor) and "would not decide it" in wrong_way.text
    limited = verdict(_cmp(0.01, 0.0004, 0.01), 0.0, "less")  # the history alone is too uncertain
    assert math.isinf(limited.items_factor)
    assert verdict(_cmp(0.0, 0.0001), 0.05, "two-sided").text.startswith("B's rate is within 0.05 of A's")
    assert set(v.to_dict()) >= {"method", "difference", "margin", "alternative", "p_value", "decided", "text"}


@pytest.mark.parametrize("bad", [-0.01, 1.0, math.nan, True, "0.1"])
def test_bad_margin_is_named(bad: object) -> None:
    with pytest.raises(he.HeroEvalError, match="margin must be a number in"):
        verdict(_cmp(0.0, 0.001), bad, "less")  # type: ignore[arg-type]


def test_bad_alternative_and_input() -> None:
    with pytest.raises(he.HeroEvalError, match="alternative must be"):
        verdict(_cmp(0.0, 0.001), 0.0, "lower")
    with pytest.raises(he.HeroEvalError, match="needs a Comparison"):
        verdict(0.3, 0.0, "less")  # type: ignore[arg-type]


@pytest.mark.slow
def test_level_and_power_by_simulation() -> None:
    """Where the model holds (two-coin labelers, one calibration for both rounds): at B = A + margin (in the
    population) the non-inferiority test rejects at about its level; with B below A the superiority test's
    rejection rate matches the power its standard errors predict (mean of Phi(true distance / SE - z)).
    200 replications, seed 11; tolerance: 3 binomial standard errors (about 0.046 at 0.05, 0.10 at 0.5)."""
    alpha_, beta_ = np.full(6, 0.8), np.full(6, 0.75)
    rng = np.random.default_rng(11)
    at_margin, power, predicted = [], [], []
    z = norm.ppf(0.95)
    for _ in range(200):
        s = int(rng.integers(2**31))
        h = shift_dgp(s, alpha=alpha_, beta=beta_, current_rate=0.3, N=1500, n=300)
        cal = he.calibrate(h.history)
        worse = shift_dgp(s + 1, alpha=alpha_, beta=beta_, current_rate=0.35, N=10, n=300)
        better = shift_dgp(s + 2, alpha=alpha_, beta=beta_, current_rate=0.22, N=10, n=300)
        c1 = he.compare(h.current, worse.current, cal, method="hero1")
        c2 = he.compare(h.current, better.current, cal, method="hero1")
        assert isinstance(c1, Comparison) and isinstance(c2, Comparison)
        at_margin.append(verdict(c1, 0.05, "less").decided)  # population B - A = 0.05: the null's boundary
        power.append(verdict(c2, 0.0, "less").decided)
        predicted.append(norm.cdf((h.current_rate - better.current_rate) / c2.standard_error - z))
    assert np.mean(at_margin) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 200)
    p = float(np.mean(predicted))
    assert abs(np.mean(power) - p) <= 3 * math.sqrt(p * (1 - p) / 200), (np.mean(power), p)


def test_hero_compare_gives_the_verdict_per_method(tmp_path: object) -> None:
    import json
    from pathlib import Path

    import pandas as pd
    from typer.testing import CliRunner

    from heroeval.cli import app
    from heroeval.workflows.demo import example_paths

    tmp = Path(str(tmp_path))
    ex = example_paths()
    runner = CliRunner()
    cal = tmp / "c.json"
    assert runner.invoke(app, ["calibrate", str(ex["history"]), "--gold", str(ex["gold"]), "-o", str(cal)]).exit_code == 0
    cur = pd.read_csv(ex["current"])
    ids = sorted(cur["item_id"].unique())
    cur[cur["item_id"].isin(ids[:100])].to_csv(tmp / "a.csv", index=False)
    cur[cur["item_id"].isin(ids[100:])].to_csv(tmp / "b.csv", index=False)
    args = ["compare", str(tmp / "a.csv"), str(tmp / "b.csv"), "--calibration", str(cal), "--method", "hero1,majority_vote"]
    r = runner.invoke(app, [*args, "--margin", "0.05", "--verdict", "greater", "-f", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out["verdict"]) == {"hero1", "majority_vote"}
    v = out["verdict"]["hero1"]
    assert v["alternative"] == "greater" and v["margin"] == 0.05
    d = out["difference"]["hero1"]["estimate"]
    se = out["difference"]["hero1"]["standard_error"]
    assert v["p_value"] == pytest.approx(norm.sf((0.05 - d) / se), rel=1e-9)
    table = runner.invoke(app, [*args, "--margin", "0.05"])
    assert table.exit_code == 0 and "Verdict on B against A (margin 0.05)" in table.stdout
    assert "Verdict" not in runner.invoke(app, args).stdout  # no margin, no verdict


def test_expert_labels_to_decide_solves_the_power_equation() -> None:
    d = shift_dgp(5, alpha=np.full(4, 0.75), beta=np.full(4, 0.75), current_rate=0.3, N=2000, n=200)
    cal = he.calibrate(d.history)
    kw = {"mu_a": 0.30, "mu_b": 0.22, "n_a": 200, "n_b": 150, "alpha": 0.05}
    k = expert_labels_to_decide(cal, distance=0.08, **kw)
    assert 1 <= k <= 150 and k == int(k)
    plans = [expert_labels(cal, mu=m, half_width=0.1, round_items=n) for m, n in ((0.30, 200), (0.22, 150))]
    zq, z = norm.ppf(0.975), norm.ppf(0.95) + norm.ppf(POWER)

    def se(kk: int) -> float:
        return math.sqrt(sum((p.half_width_at(kk) / zq) ** 2 for p in plans))

    # the smallest k whose planned SE meets distance / (z_0.95 + z_0.8)
    assert z * se(int(k)) <= 0.08 < z * se(int(k) - 1)
    assert expert_labels_to_decide(cal, distance=0.16, **kw) < k  # a larger difference needs fewer
    assert math.isnan(expert_labels_to_decide(cal, distance=-0.01, **kw))
    assert math.isinf(expert_labels_to_decide(cal, distance=0.001, **kw))  # every item would not do
    # the verdict carries it when undecided and given the calibration, and says it in words
    c = he.compare(d.current.take_items(np.arange(100)), d.current.take_items(np.arange(100, 200)), cal,
                   method="hero1")
    way = "less" if c.estimate > 0 else "greater"  # the direction the estimate points
    v = verdict(c, 0.0, way, calibration=cal)
    assert not v.decided and v.expert_labels >= 1 and "expert labels in each round" in v.text
    assert v.to_dict()["expert_labels"] == v.expert_labels
    assert math.isnan(verdict(c, 0.0, way).expert_labels)  # not sized without the calibration
    other = verdict(c, 0.0, "greater" if way == "less" else "less", calibration=cal)
    assert math.isnan(other.expert_labels)  # the estimate points the other way: nothing to size
