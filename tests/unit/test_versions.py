"""Several versions against a baseline (heroeval.inference.versions, he.compare_versions, hero compare A B C)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app
from heroeval.errors import HeroEvalError
from heroeval.estimators.results import EstimateResult
from heroeval.inference.comparison import Comparison
from heroeval.inference.verdict import verdict, verdicts_holm
from heroeval.inference.versions import versions_from
from heroeval.simulate import shift_dgp
from heroeval.workflows.demo import example_paths


def _cmp(d: float, vc: float) -> Comparison:
    r = EstimateResult("hero1", 0.5, 100, 300, 3)
    return Comparison("hero1", d, vc, 0.0, r, r)


def test_holm_verdicts_by_hand() -> None:
    cs = [_cmp(0.06, 0.0004), _cmp(0.03, 0.0004), _cmp(0.045, 0.0004)]  # SE 0.02
    raw = [norm.sf(d / 0.02) for d in (0.06, 0.03, 0.045)]
    # Holm by hand: sorted raw p (0.06, 0.045, 0.03) times 3, 2, 1, running maximum
    order = np.argsort(raw)
    steps = np.maximum.accumulate([min(1.0, (3 - k) * raw[i]) for k, i in enumerate(order)])
    want = np.empty(3)
    want[order] = steps
    vs = verdicts_holm(cs, 0.0, "less", 0.95, names=[("base", "v1"), ("base", "v2"), ("base", "v3")])
    assert [v.p_value for v in vs] == pytest.approx(want.tolist(), rel=1e-12)
    assert [v.decided for v in vs] == [bool(p < 0.05) for p in want]
    assert vs[0].text.startswith("v1's rate is lower than base's (Holm-adjusted p = ")
    assert "over 3 comparisons" in vs[1].text
    unadjusted = verdicts_holm(cs, 0.0, "less", 0.95, adjust=False)
    assert [v.p_value for v in unadjusted] == pytest.approx([verdict(c, 0.0, "less").p_value for c in cs])
    with pytest.raises(HeroEvalError, match="names"):
        verdicts_holm(cs, names=[("a", "b")])


def test_simultaneous_intervals_use_the_sidak_level() -> None:
    cs = {"v1": _cmp(0.02, 0.0004), "v2": _cmp(-0.01, 0.0009)}
    vc = versions_from("base", cs, confidence_level=0.95, adjust="sidak")
    each = 0.95 ** 0.5
    assert vc.level_each == pytest.approx(each)
    z = norm.ppf(0.5 + each / 2)
    r = vc["v2"]
    assert (r.ci_low, r.ci_high) == pytest.approx((-0.01 - z * 0.03, -0.01 + z * 0.03), rel=1e-12)
    assert (r.ci_low_each, r.ci_high_each) == pytest.approx((-0.01 - 1.959964 * 0.03, -0.01 + 1.959964 * 0.03),
                                                            rel=1e-6)
    bonf = versions_from("base", cs, adjust="bonferroni")
    assert bonf.level_each == pytest.approx(0.975)
    raw = [2 * norm.sf(0.02 / 0.02), 2 * norm.sf(0.01 / 0.03)]
    assert [vc["v1"].p_holm, vc["v2"].p_holm] == pytest.approx([min(1, 2 * min(raw)), max(2 * min(raw), max(raw))])
    none = versions_from("base", cs, adjust="none")
    assert none.level_each == 0.95 and none["v1"].p_holm == pytest.approx(raw[0])
    frame = vc.to_frame()
    assert list(frame.index) == ["v1", "v2"] and {"ci_low", "ci_low_each", "p_holm", "status"} <= set(frame.columns)
    assert json.loads(json.dumps(vc.to_dict()))["versions"][1]["version"] == "v2"
    with pytest.raises(HeroEvalError, match="adjust"):
        versions_from("base", cs, adjust="maxz")
    with pytest.raises(HeroEvalError, match="at least one version"):
        versions_from("base", {})


def _worlds(rates: list[float], seed: int) -> tuple[he.AnnotationSet, list[he.AnnotationSet], list[float]]:
    a = np.full(6, 0.8)
    ws = [shift_dgp(seed * 10 + k, alpha=a, beta=a, current_rate=r, N=3000, n=500) for k, r in enumerate(rates)]
    return (ws[0].history, [w.current.take_items(range(500), name=f"v{k}") for k, w in enumerate(ws)],
            [w.current_rate for w in ws])


def _rounds(rates: list[float], seed: int) -> tuple[he.AnnotationSet, list[he.AnnotationSet]]:
    hist, rounds, _ = _worlds(rates, seed)
    return hist, rounds


def test_each_version_is_the_two_round_compare() -> None:
    hist, rounds = _rounds([0.3, 0.2, 0.35], 1)
    cal = he.calibrate(hist)
    vc = he.compare_versions(rounds, cal, history=hist, margin=0.02)
    assert vc.baseline == "v0" and [r.version for r in vc.rows] == ["v1", "v2"]
    for r, other in zip(vc.rows, rounds[1:], strict=True):
        two = he.compare(rounds[0], other, cal, history=hist)
        ci = two.confidence_interval(0.95)
        assert (r.method, r.estimate, r.status) == (two.method, two.estimate, two.status)
        assert (r.ci_low_each, r.ci_high_each) == pytest.approx((ci.low, ci.high), rel=1e-12)
        assert r.ci_low <= r.ci_low_each and r.ci_high >= r.ci_high_each
    vb = he.compare_versions(rounds, cal, baseline="v1", method="hero1", history=hist)
    assert vb.baseline == "v1" and [r.version for r in vb.rows] == ["v0", "v2"] and vb.rows[0].method == "hero1"
    with pytest.raises(HeroEvalError, match="baseline"):
        he.compare_versions(rounds, cal, baseline="nope")
    with pytest.raises(HeroEvalError, match="distinct"):
        he.compare_versions([rounds[0], rounds[0]], cal)
    with pytest.raises(HeroEvalError, match="one method"):
        he.compare_versions(rounds, cal, method="all")


@pytest.mark.slow
def test_family_wise_coverage_by_simulation() -> None:
    """100 worlds, three versions against a baseline, HERO-1 (its model holds): the Šidák intervals cover all
    three differences together in >= 0.90 of worlds (nominal 0.95; binomial sd 0.022 at 100 worlds), and the
    Holm verdicts at equal rates falsely reject any of the three in <= 0.10."""
    covered = false_any = 0
    worlds = 100
    for s in range(worlds):
        hist, rounds, rates = _worlds([0.3, 0.3, 0.3, 0.3], 100 + s)
        cal = he.calibrate(hist)
        vc = he.compare_versions(rounds, cal, method="hero1", history=hist, margin=0.0, alternative="two-sided")
        truth = [rates[0] - r for r in rates[1:]]  # the realised rates' differences
        covered += all(row.ci_low <= t <= row.ci_high for row, t in zip(vc.rows, truth, strict=True))
        false_any += any(row.verdict is not None and row.verdict.decided for row in vc.rows)
    assert covered / worlds >= 0.90
    assert false_any / worlds <= 0.10


def test_hero_compare_with_three_rounds(tmp_path: Path) -> None:
    ex = example_paths()
    runner = CliRunner()
    cal = tmp_path / "c.json"
    assert runner.invoke(app, ["calibrate", str(ex["history"]), "--gold", str(ex["gold"]), "-o", str(cal)]).exit_code == 0
    cur = pd.read_csv(ex["current"])
    ids = sorted(cur["item_id"].unique())
    files = []
    for k, part in enumerate(np.array_split(np.array(ids), 3)):
        f = tmp_path / f"model{k}.csv"
        cur[cur["item_id"].isin(set(part))].to_csv(f, index=False)
        files.append(str(f))
    args = ["compare", *files, "--calibration", str(cal), "--method", "hero1"]
    r = runner.invoke(app, [*args, "--margin", "0.05", "-f", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["baseline"] == "model0" and [v["version"] for v in out["versions"]] == ["model1", "model2"]
    assert out["level_each"] == pytest.approx(0.95 ** 0.5)
    assert out["versions"][0]["verdict"]["text"].count("model1's rate") == 1
    two = runner.invoke(app, ["compare", files[0], files[1], "--calibration", str(cal), "--method", "hero1",
                              "-f", "json"])
    assert two.exit_code == 0, two.output
    d = json.loads(two.stdout)["difference"]["hero1"]
    assert out["versions"][0]["estimate"] == pytest.approx(d["estimate"], rel=1e-12)
    assert out["versions"][0]["ci_low_each"] == pytest.approx(d["ci_low"], rel=1e-12)
    table = runner.invoke(app, [*args, "--adjust", "bonferroni"])
    assert table.exit_code == 0 and "bonferroni: each at 0.9750" in table.stdout
    bad = runner.invoke(app, [*args, "--report", str(tmp_path / "r.html")])
    assert bad.exit_code == 2 and "--report" in bad.output
    bad = runner.invoke(app, [*args, "--adjust", "holm"])
    assert bad.exit_code == 2 and "--adjust" in bad.output
