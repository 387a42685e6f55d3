"""The recommended estimate chosen and sized by out-of-round evidence (issue #39, heroeval.choice.rounds).

Checked three ways: closed forms of the random-effects figure on hand-made errors; an independent plain
implementation of the choice and of its nested re-making; and the recommendation on a simulated history of
rounds, whose interval is recomputed here from the checks' own past-round rows. Coverage by simulation is in
tests/simulation/test_rounds_choice_sim.py.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import t as student_t

import heroeval as he
from heroeval.checks.model_checks import mock_key
from heroeval.choice.auto import DEFAULT_RULE, AutoRule, recommend
from heroeval.choice.rounds import choose_by_rounds, random_effects_ms, round_evidence
from heroeval.errors import HeroEvalError
from heroeval.estimators.methods import majority_vote
from heroeval.inference.bias_aware import PredictiveTest

from .test_past_rounds import rounds_history


def _plain_dl(e: list[float], v: list[float]) -> float:
    """DerSimonian-Laird by hand, loop by loop: mu^2 + var(mu) + tau2."""
    k = len(e)
    w = [1 / x for x in v]
    mu = sum(wi * ei for wi, ei in zip(w, e, strict=True)) / sum(w)
    q = sum(wi * (ei - mu) ** 2 for wi, ei in zip(w, e, strict=True))
    c = sum(w) - sum(wi * wi for wi in w) / sum(w)
    tau2 = max(0.0, (q - (k - 1)) / c)
    ws = [1 / (x + tau2) for x in v]
    mu2 = sum(wi * ei for wi, ei in zip(ws, e, strict=True)) / sum(ws)
    return mu2 * mu2 + 1 / sum(ws) + tau2


def test_random_effects_ms_closed_forms() -> None:
    # equal errors, equal noise: no spread, mu = e, var(mu) = s^2 / K
    assert random_effects_ms(np.full(4, 0.03), np.full(4, 0.02**2)) == pytest.approx(0.03**2 + 0.02**2 / 4)
    # errors symmetric about 0 with a spread well beyond their noise: mu = 0, tau2 = DL
    e, v = np.array([0.1, -0.1, 0.1, -0.1]), np.full(4, 0.01**2)
    q = float(np.sum(e**2 / v))
    tau2 = (q - 3) / (4 / v[0] - (4 / v[0] ** 2) / (4 / v[0]))
    assert random_effects_ms(e, v) == pytest.approx(tau2 + (v[0] + tau2) / 4)
    # heteroscedastic: the same as the loop by loop computation
    e2, v2 = [0.05, 0.09, -0.02, 0.04, 0.12], [0.03**2, 0.05**2, 0.02**2, 0.01**2, 0.08**2]
    assert random_effects_ms(np.array(e2), np.array(v2)) == pytest.approx(_plain_dl(e2, v2))
    # a round measured on few items (large noise) does not pull it down as the plain mean(e^2 - s^2) does:
    # three rounds missed by 0.05 and one noisy round give 0 that way, about 0.05^2 here
    e3, v3 = np.array([0.05, 0.05, 0.05, 0.0]), np.array([1e-4, 1e-4, 1e-4, 1e-2])
    assert max(0.0, float(np.mean(e3**2 - v3))) == 0.0
    assert random_effects_ms(e3, v3) == pytest.approx(_plain_dl(list(e3), list(v3)))
    assert 0.9 * 0.05**2 < random_effects_ms(e3, v3) < 1.2 * 0.05**2


def _row(method: str, est: float, se: float, errors: list[float], noise_se: list[float], *,
         w: float | None = None, n: int = 40, rounds: list[str] | None = None) -> dict:
    ids = rounds or [f"r{k}" for k in range(len(errors))]
    return {"method": method, "history_weight": w, "estimate": est, "standard_error": se, "variance_history": 0.0,
            "past_error": errors, "past_error_se": noise_se, "past_calib_var": [None] * len(errors),
            "past_rounds": ids, "past_n_items": [n] * len(errors)}


def test_round_evidence_floor_and_missing() -> None:
    ev = round_evidence(_row("hero1", 0.5, 0.02, [0.0, 0.1], [0.0, 0.05], n=20))
    assert ev is not None
    # an error measured exactly (standard error 0) on 20 items counts with the noise of one item, 1/20
    assert ev.noise[0] == pytest.approx(1 / 400)
    assert ev.noise[1] == pytest.approx(0.05**2)
    assert round_evidence({"method": "hero1", "past_error": [0.1]}) is None  # rounds not named: an old table
    assert round_evidence(_row("hero1", 0.5, 0.02, [], [])) is None


def _plain_choice(rows: list[dict], candidates: tuple[str, ...]) -> tuple[str, float]:
    """The choice and the interval's variance recomputed without heroeval.choice.rounds' helpers."""
    def noise(row: dict, j: int) -> float:
        cv = row["past_calib_var"][j]
        cv = row["variance_history"] if cv is None else cv
        return max(row["past_error_se"][j] ** 2 + cv, 1 / row["past_n_items"][j] ** 2)

    def ms(row: dict, without: str | None = None) -> float:
        e, v = [], []
        for j, (r_id, err) in enumerate(zip(row["past_rounds"], row["past_error"], strict=True)):
            if r_id != without:
                e.append(err)
                v.append(noise(row, j))
        return _plain_dl(e, v)

    cands = [r for r in rows if r["method"] in candidates]
    best = min(cands, key=lambda r: ms(r) + r["standard_error"] ** 2)
    sq = []
    for g in sorted({x for r in cands for x in r["past_rounds"]}):
        pick = min(cands, key=lambda r: ms(r, g) + r["standard_error"] ** 2)
        j = pick["past_rounds"].index(g)
        sq.append(pick["past_error"][j] ** 2 - noise(pick, j))
    return best["method"], max(ms(best), max(0.0, float(np.mean(sq))))


def test_choice_and_nested_against_plain() -> None:
    rows = [
        _row("hero1", 0.40, 0.02, [0.06, 0.05, 0.07, 0.04], [0.02, 0.02, 0.02, 0.02], w=1.0),
        _row("majority_vote", 0.45, 0.02, [0.00, 0.01, -0.01, 0.30], [0.02, 0.02, 0.02, 0.02]),
        _row("rogan_gladen", 0.42, 0.04, [0.02, -0.03, 0.01, 0.00], [0.03, 0.03, 0.03, 0.03]),
        _row("dawid_skene", 0.41, 0.01, [0.0, 0.0, 0.0, 0.0], [0.01, 0.01, 0.01, 0.01]),  # not a candidate
    ]
    cands = ("hero1", "majority_vote", "rogan_gladen")
    rc = choose_by_rounds(rows, cands, 3)
    assert rc is not None
    method, tau2 = _plain_choice(rows, cands)
    assert rc.row["method"] == method == "rogan_gladen"
    assert rc.tau2 == pytest.approx(tau2)
    assert rc.k == 4 and rc.n_candidates == 3
    assert "round_rmse" not in rows[3]
    # left without round r3, majority vote looks best and misses r3 by 0.30: the nested figure sees it
    assert rc.ms_nested > rc.ms_chosen
    assert rc.tau2 == pytest.approx(rc.ms_nested)
    # the interval: a prediction interval with t at the Satterthwaite degrees of freedom
    t = rc.test()
    s = math.sqrt(0.04**2 + rc.tau2)
    lo, hi = t.interval(0.95)
    assert hi - 0.42 == pytest.approx(s * student_t.ppf(0.975, s**4 * 4 / rc.tau2**2))
    assert 0.42 - lo == pytest.approx(hi - 0.42)
    # too few rounds: no choice by rounds
    assert choose_by_rounds(rows, cands, 5) is None
    # ties go to the default
    tied = [_row("hero1", 0.4, 0.02, [0.0] * 3, [0.02] * 3, w=1.0), _row("hero_joint", 0.4, 0.02, [0.0] * 3,
                                                                       [0.02] * 3, w=1.0)]
    got = choose_by_rounds(tied, ("hero1", "hero_joint"), 3, first=("hero_joint", 1.0))
    assert got is not None and got.row["method"] == "hero_joint"


def test_rule_validation() -> None:
    with pytest.raises(HeroEvalError, match="rounds_min"):
        AutoRule(rounds_min=1)
    with pytest.raises(HeroEvalError, match="rounds_min"):
        AutoRule(rounds_min=2.5)  # type: ignore[arg-type]
    AutoRule(rounds_min=None)


@pytest.fixture(scope="module")
def shifted() -> tuple[he.AnnotationSet, he.Calibration, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hist, cur, truth = rounds_history(7, n_rounds=5, shift_sd=1.0)
        return cur, he.calibrate(hist, checks=True), truth


def test_recommendation_uses_rounds(shifted: tuple[he.AnnotationSet, he.Calibration, float]) -> None:
    cur, cal, _truth = shifted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec = recommend(cur, cal)
        old = recommend(cur, cal, rule=replace(DEFAULT_RULE, rounds_min=None))
    assert rec.status == "ok"
    assert "chosen by its error on the history's own rounds" in rec.reason
    assert "chosen by its error on the history's own rounds" not in old.reason
    assert rec.method in DEFAULT_RULE.round_candidates
    assert isinstance(rec.result.test, PredictiveTest)
    # the chosen row's past errors are the checks' own rows for its key, round by round
    row = next(r for r in rec.table if r["method"] == rec.method and r["history_weight"] == rec.history_weight)
    assert cal.checks is not None
    key = mock_key("hero1" if rec.method == "hero_joint" else rec.method,
                   rec.history_weight if rec.method in ("hero1", "hero_joint") else None)
    mine = [x for x in cal.checks.rounds if mock_key(x["method"], x["history_weight"]) == key]
    assert row["past_rounds"] == [str(x["round"]) for x in mine]
    assert row["past_error"] == [x["error"] for x in mine]
    # majority vote's past errors are its plain errors on each round's gold items
    mv = [x for x in cal.checks.rounds if x["method"] == "majority_vote"]
    assert len(mv) == 5
    hist = cal.history
    assert hist is not None
    for x in mv:
        g = list(hist.round_ids).index(x["round"])
        sub = hist.take_items(np.flatnonzero((hist.item_round == g) & (hist.gold >= 0)))
        own = majority_vote(sub)
        assert x["estimate"] == pytest.approx(own.estimate)
        assert x["truth"] == pytest.approx(float(sub.gold.mean()))
    # the interval is the plain recomputation's
    method, tau2 = _plain_choice([r for r in rec.table if "round_rmse" in r], DEFAULT_RULE.round_candidates)
    assert method == rec.method
    lo, hi = rec.result.confidence_interval(0.95)
    want = PredictiveTest(row["estimate"], row["standard_error"], 0.0, tau2, row["round_k"]).interval(0.95)
    assert (lo, hi) == pytest.approx(want)
    # one answer: he.estimate's recommended is the same
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = he.estimate(cur, cal, method="all", recommend=True)
    assert res.recommended is not None
    assert res.recommended.method == rec.method
    ci = res.recommended.result.confidence_interval(0.95)
    assert (ci.low, ci.high) == pytest.approx((lo, hi))
