"""The recommended K-class difference A - B and its verdict (heroeval.choice.multiclass_difference)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from heroeval.choice.multiclass_auto import recommend_multiclass
from heroeval.choice.multiclass_difference import (
    difference_from,
    recommend_difference_multiclass,
    verdict_multiclass,
)
from heroeval.cli import app
from heroeval.errors import HeroEvalError
from heroeval.multiclass import compare_multiclass, majority_vote_multiclass, multiclass_from_arrays
from heroeval.multiclass.data import MultiClassData
from tests.multiclass.files import write_round

runner = CliRunner()
K = 3
CLASSES = ["a", "b", "c"]


def _rounds(seed: int, p_a: list[float], p_b: list[float], *, n_hist: int = 500, n: int = 200, J: int = 8,
            rho: float = 0.2, accuracy: tuple[float, float] = (0.55, 0.85)) -> tuple[MultiClassData, MultiClassData, MultiClassData, np.ndarray]:
    """A history (prevalence uniform, gold on rho of it) and rounds A and B from one pool of labelers who over-use
    class a (each: a row of its confusion moves 0.25 of its mass to a); the realised A - B shares."""
    rng = np.random.default_rng(seed)
    acc = rng.uniform(*accuracy, size=J)
    conf = np.empty((J, K, K))
    for j in range(J):
        for c in range(K):
            row = np.full(K, (1 - acc[j]) / (K - 1))
            row[c] = acc[j]
            row = 0.75 * row
            row[0] += 0.25
            conf[j, c] = row

    def draw(nn: int, p: list[float], prefix: str, gold: bool) -> tuple[MultiClassData, np.ndarray]:
        y = rng.choice(K, size=nn, p=p)
        who = np.argsort(rng.random((nn, J)), axis=1)[:, :3]
        lab = np.array([[rng.choice(K, p=conf[j, y[i]]) for j in who[i]] for i in range(nn)])
        items = np.repeat([f"{prefix}{i}" for i in range(nn)], 3).tolist()
        g = None
        if gold:
            idx = np.flatnonzero(rng.random(nn) < rho)
            g = ([f"{prefix}{i}" for i in idx], [CLASSES[y[i]] for i in idx])
        d = multiclass_from_arrays(items, [f"L{j}" for j in who.ravel()], [CLASSES[v] for v in lab.ravel()],
                                   classes=CLASSES, gold=g, name=prefix)
        return d, np.bincount(y, minlength=K) / nn

    h, _ = draw(n_hist, [1 / 3] * 3, "h", True)
    a, sa = draw(n, p_a, "A", False)
    b, sb = draw(n, p_b, "B", False)
    return h, a, b, sa - sb


def test_difference_bias_is_the_difference_of_rate_weighted_mock_biases() -> None:
    """Closed form: re-weighting gold item i of class k by q_k / g_k (g the gold's shares) gives the mock bias
    b(q) at shares q, computed here plainly from the items. The difference's bias is b(q_A) - b(q_B): with
    ``bias="first_order"`` at the rounds' estimated shares, q_X = p_X; with ``"inverse"`` (the default) at the
    shares whose estimate, bias added back, is the round's: q_X + b(q_X) = p_X."""
    h, a, b, _ = _rounds(3, [0.6, 0.3, 0.1], [0.2, 0.3, 0.5])
    inv = recommend_difference_multiclass(a, b, h)
    d = difference_from(inv.round_a, inv.round_b, bias="first_order")
    y = d.round_a._scored["majority_vote"].gold_class
    g = np.bincount(y, minlength=K) / y.size

    def mock_bias(e: np.ndarray, q: np.ndarray) -> np.ndarray:
        w = (q / g)[y]
        return (w[:, None] * e).sum(axis=0) / w.sum()

    for m in ("majority_vote", "gold_proportion", "hero1:full"):
        e = d.round_a._scored[m].evidence.errors
        p_a, p_b = (r._scored[m].estimate.estimate for r in (d.round_a, d.round_b))
        assert d._scored[m].bias == pytest.approx(mock_bias(e, p_a) - mock_bias(e, p_b), abs=1e-12)
        # q + b(q) = p is linear in q: solve it by plain fixed-point iteration, not by the module's inverse
        qs = []
        for p in (p_a, p_b):
            q = p.copy()
            for _ in range(2000):
                q = p - mock_bias(e, q)
            assert q + mock_bias(e, q) == pytest.approx(p, abs=1e-10)
            qs.append(q)
        assert inv._scored[m].bias == pytest.approx(mock_bias(e, qs[0]) - mock_bias(e, qs[1]), abs=1e-9)
        assert d._scored[m].difference == pytest.approx(p_a - p_b, abs=1e-12)
    with pytest.raises(HeroEvalError, match="bias must be one of"):
        difference_from(d.round_a, d.round_b, bias="second_order")


def test_the_same_round_twice_has_no_difference_and_no_bias() -> None:
    h, a, _, _ = _rounds(4, [0.5, 0.3, 0.2], [0.5, 0.3, 0.2])
    d = recommend_difference_multiclass(a, a, h)
    assert d.method == "majority_vote" and d.status == "ok"
    for s in d._scored.values():
        assert np.abs(s.difference).max() < 1e-12 and np.abs(s.bias).max() < 1e-12
    for lo, hi in d.intervals():
        assert lo < 0 < hi
    assert d.mean_score()["p_value"] == pytest.approx(1.0)
    # the per-round recommendations are the single-round ones
    alone = recommend_multiclass(a, h)
    assert d.round_a.method == alone.method
    assert d.round_a.to_dict() == alone.to_dict()


def test_recommendations_on_different_histories_are_refused() -> None:
    h, a, b, _ = _rounds(5, [0.5, 0.3, 0.2], [0.3, 0.3, 0.4])
    h2, _, _, _ = _rounds(6, [0.5, 0.3, 0.2], [0.3, 0.3, 0.4])
    with pytest.raises(HeroEvalError, match="same history's mock rounds"):
        difference_from(recommend_multiclass(a, h), recommend_multiclass(b, h2))


def test_coverage_of_the_recommended_difference_when_majority_vote_is_biased() -> None:
    """Simulation (15 seeds, fixed): labelers over-use class a, and A's shares differ from B's by 0.25 in a and
    c, so majority vote's difference is biased (its own Wald interval of a's share misses the truth in most
    seeds). The recommended difference's intervals cover the realised A - B: >= 0.85 over the 45 (class, seed)
    cells and >= 0.8 for the mean score (nominal 0.95; binomial sd about 0.03 and 0.06). (With weaker labelers,
    accuracy 0.55-0.85, and a 0.4 shift the mean score covers about 0.7: Stage A's error there exceeds its
    standard error; docs/multiclass.md.)"""
    cover, cover_ms, mv_cover_a = [], [], []
    for seed in range(15):
        h, a, b, truth = _rounds(100 + seed, [0.5, 0.3, 0.2], [0.25, 0.3, 0.45], accuracy=(0.7, 0.9))
        d = recommend_difference_multiclass(a, b, h)
        cover += [lo <= t <= hi for (lo, hi), t in zip(d.intervals(), truth, strict=True)]
        ms = d.mean_score()
        t_ms = float(np.arange(K) @ truth)
        cover_ms.append(ms["ci_low"] <= t_ms <= ms["ci_high"])
        mv = compare_multiclass(majority_vote_multiclass(a), majority_vote_multiclass(b)).functional(np.eye(K)[0])
        mv_cover_a.append(mv["ci_low"] <= truth[0] <= mv["ci_high"])
    assert np.mean(cover) >= 0.85, np.mean(cover)
    assert np.mean(cover_ms) >= 0.8, np.mean(cover_ms)
    assert np.mean(mv_cover_a) <= 0.6, np.mean(mv_cover_a)  # the bias the rule has to see


def test_verdict_on_a_class_share_and_the_mean_score() -> None:
    h, a, b, _ = _rounds(7, [0.6, 0.3, 0.1], [0.2, 0.3, 0.5], accuracy=(0.7, 0.9))
    d = recommend_difference_multiclass(a, b, h)
    for on, w in (("c", np.eye(K)[2]), (None, d.values)):
        up = d.interval_of(w).interval(0.95, "less")[1]  # the one-sided 95 % upper bound of A - B
        lo = d.interval_of(w).interval(0.95, "greater")[0]
        assert verdict_multiclass(d, 0.0, "greater", on=on).decided == (up < 0)
        assert verdict_multiclass(d, 0.0, "less", on=on).decided == (lo > 0)
    # B has 0.4 more of class c: the smallest-MSE candidate (default_alpha=1) decides it
    d1 = recommend_difference_multiclass(a, b, h, default_alpha=1.0)
    v = verdict_multiclass(d1, 0.0, "greater", on="c")
    assert v.decided and v.text.startswith("B's share of c is higher than A's")
    assert not verdict_multiclass(d1, 0.0, "less", on="c").decided
    v = verdict_multiclass(d1, 0.0, "greater")
    assert v.decided and "mean score" in v.text
    assert d.interval_of(d.values).bound == pytest.approx(2.0)
    with pytest.raises(HeroEvalError, match="name a class"):
        verdict_multiclass(d, 0.0, on="z")
    with pytest.raises(HeroEvalError, match=r"margin must be a number in \[0, 1\)"):
        verdict_multiclass(d, 1.0, on="a")


def test_cli_compare_recommends_one_answer(tmp_path: Path) -> None:
    h, a, b, _ = _rounds(8, [0.6, 0.3, 0.1], [0.2, 0.3, 0.5], n=120, accuracy=(0.7, 0.9))
    hp, gp, ap, bp = (tmp_path / f for f in ("h.csv", "g.csv", "a.csv", "b.csv"))
    write_round(h, hp, gp)
    write_round(a, ap)
    write_round(b, bp)
    common = ["--history", str(hp), "--gold", str(gp), "--classes", "a,b,c"]
    rep = tmp_path / "cmp.html"
    r = runner.invoke(app, ["compare", str(ap), str(bp), *common, "-f", "json", "--margin", "0", "--verdict",
                            "greater", "--verdict-on", "c", "--report", str(rep)])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    r = runner.invoke(app, ["estimate", str(ap), *common, "--method", "auto", "-f", "json"])
    assert r.exit_code == 0, r.output
    alone = json.loads(r.output)["recommended"]
    assert got["recommended"]["a"]["chosen"] == alone["chosen"]
    for c in CLASSES:
        assert got["recommended"]["a"]["classes"][c] == pytest.approx(alone["classes"][c])
    v = got["verdict"]
    assert v["decided"] == (v["p_value"] < 0.05) and "B's share of c is higher than A's" in v["text"]
    page = rep.read_text()
    assert "Recommended difference" in page and "share of c is higher than A" in page
    data = json.loads(page.split('id="hero-data">')[1].split("</script>")[0])
    assert data["recommended"]["mean_score"] == pytest.approx(got["recommended"]["mean_score"])
    r = runner.invoke(app, ["compare", str(ap), str(bp), *common])
    assert r.exit_code == 0, r.output
    assert "recommended difference A - B (auto)" in r.output and "round B:" in r.output
    # a verdict needs the recommended difference, which needs the history
    cal = tmp_path / "cal.json"
    assert runner.invoke(app, ["calibrate", str(hp), "--gold", str(gp), "-o", str(cal), "--classes", "a,b,c"]
                         ).exit_code == 0
    r = runner.invoke(app, ["compare", str(ap), str(bp), "--calibration", str(cal), "--classes", "a,b,c",
                            "--margin", "0.05"])
    assert r.exit_code == 2 and "need --history and --gold" in r.output
    r = runner.invoke(app, ["compare", str(ap), str(bp), "--calibration", str(cal), "--verdict-on", "a"])
    assert r.exit_code == 2 and "--verdict-on is for multi-class labels" in r.output


def test_intervals_are_labelled_by_class() -> None:
    """Every K-class intervals() is a tuple of pairs in class order that is also indexed by class name."""
    import pickle

    from heroeval.multiclass import ClassIntervals

    h, a, b, _ = _rounds(9, [0.5, 0.3, 0.2], [0.3, 0.3, 0.4], n=80)
    d = recommend_difference_multiclass(a, b, h)
    for ci in (d.intervals(), d.round_a.intervals(), majority_vote_multiclass(a).intervals()):
        assert isinstance(ci, ClassIntervals) and ci.classes == tuple(CLASSES)
        assert ci["c"] == ci[2] and [lo for lo, _ in ci] == [ci[c][0] for c in CLASSES]
        assert ci.to_dict()["b"] == {"ci_low": ci[1][0], "ci_high": ci[1][1]}
        assert pickle.loads(pickle.dumps(ci)) == ci
    with pytest.raises(KeyError, match="no class 'z'"):
        d.intervals()["z"]


def test_full_structure_warns_when_a_class_has_no_gold() -> None:
    """Item 5 of issue #42: a class the history's gold never shows leaves the full structure's row for it
    unanchored; calibrate says so (SparseGoldWarning), the symmetric structure does not need to."""
    import warnings

    from heroeval.errors import SparseGoldWarning
    from heroeval.multiclass import calibrate_multiclass

    h = multiclass_from_arrays([1, 1, 2, 2, 3, 3, 4, 4], ["x", "y"] * 4, ["a", "a", "b", "b", "c", "b", "c", "c"],
                               classes=CLASSES, gold=([1, 2], ["a", "b"]))
    with pytest.warns(SparseGoldWarning, match="no gold item of class\\(es\\) 'c'"):
        cal = calibrate_multiclass(h, structure="full")
    assert cal.convergence.accelerate  # the EM is SQUAREM-accelerated, and the record says so
    with warnings.catch_warnings():
        warnings.simplefilter("error", SparseGoldWarning)
        calibrate_multiclass(h, structure="symmetric")
