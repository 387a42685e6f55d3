"""Cluster-robust current-round standard errors by item group (issue #39 item 4).

Three checks: closed forms on hand-made influence values, an independent plain loop against
:func:`cluster_variance`, and the public paths (``AnnotationSet.with_groups``, ``estimate``, ``compare``,
``hero estimate --group-col``, ``hero report --group-col``) and the bootstrap by group. The coverage simulation is tests/simulation/test_grouped_items_sim.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm, t
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app
from heroeval.errors import DataError
from heroeval.estimators.clusters import cluster_variance, design_effect, few_groups_factor, with_design_effect
from heroeval.estimators.inversion import BinomialScoreTest
from heroeval.estimators.results import Influence
from heroeval.inference.resample import resample_items
from heroeval.simulate import paper_dgp

runner = CliRunner()


def test_closed_form_two_groups() -> None:
    phi = np.array([1.0, 1.0, -1.0, -1.0])
    groups = np.array([0, 0, 1, 1])
    # centred sums per group: 2 and -2 -> G/(G-1) * 8 / 16 = 1.0; iid: 4 / 16 = 0.25
    v, G = cluster_variance(phi, groups)
    assert G == 2 and v == pytest.approx(1.0)
    deff, G2 = design_effect(phi, groups)
    factor = (t.ppf(0.975, 1) / norm.ppf(0.975)) ** 2
    assert G2 == 2 and few_groups_factor(2) == pytest.approx(factor)
    assert deff == pytest.approx(4.0 * factor)  # about 168: two groups say almost nothing
    assert few_groups_factor(10_000) == pytest.approx(1.0, abs=1e-3)
    assert math.isnan(few_groups_factor(1))


def test_each_item_its_own_group_and_negative_correlation_floor_at_iid() -> None:
    rng = np.random.default_rng(0)
    phi = rng.normal(size=400)
    phi -= phi.mean()
    v_cr, G = cluster_variance(phi, np.arange(400))
    # one item per group: CR1 is the iid variance times n/(n-1)
    assert G == 400 and v_cr == pytest.approx(float(phi @ phi) / 400**2 * 400 / 399)
    deff, _ = design_effect(phi, np.arange(400))
    assert 1.0 <= deff <= 1.01
    # within-group values that cancel: the cluster-robust variance is ~0, the design effect stays 1
    pairs = np.repeat(np.arange(200), 2)
    anti = np.ravel(np.column_stack([phi[:200], -phi[:200]]))
    assert cluster_variance(anti, pairs)[0] == pytest.approx(0.0, abs=1e-12)
    assert design_effect(anti, pairs)[0] == 1.0
    # one group only, and no groups
    assert design_effect(phi, np.zeros(400, dtype=np.int32)) == (1.0, 1)
    assert design_effect(phi, None) == (1.0, 0)


def _plain_cr1(phi: list[float], groups: list[str]) -> float:
    """CR1 by an explicit loop over groups, written apart from the product."""
    n = len(phi)
    mean = sum(phi) / n
    totals: dict[str, float] = {}
    for x, g in zip(phi, groups, strict=True):
        totals[g] = totals.get(g, 0.0) + (x - mean)
    G = len(totals)
    return G / (G - 1) * sum(s * s for s in totals.values()) / n**2


def test_cluster_variance_matches_a_plain_loop() -> None:
    rng = np.random.default_rng(11)
    for _ in range(20):
        n = int(rng.integers(5, 300))
        G = int(rng.integers(2, min(n, 40) + 1))
        codes = rng.integers(0, G, size=n)
        if np.unique(codes).size < 2:
            continue
        phi = rng.normal(size=n) + rng.normal(size=G)[codes]
        v, got_g = cluster_variance(phi, codes)
        assert got_g == np.unique(codes).size
        assert v == pytest.approx(_plain_cr1(phi.tolist(), [f"g{c}" for c in codes]), rel=1e-10)


def test_influence_scales_current_variance_only() -> None:
    rng = np.random.default_rng(5)
    codes = np.repeat(np.arange(10), 20).astype(np.int32)
    phi = rng.normal(size=200) + 2 * rng.normal(size=10)[codes]
    plain = Influence(phi)
    grouped = Influence(phi, groups=codes)
    assert grouped.n_groups == 10 and grouped.deff > 3
    assert grouped.variance_current() == pytest.approx(grouped.deff * plain.variance_current())
    assert plain.deff == 1.0 and plain.n_groups == 0
    with pytest.raises(he.HeroEvalError, match="groups has 5 entries for 200"):
        Influence(phi, groups=codes[:5])


def test_wilson_test_counts_n_over_deff() -> None:
    test = BinomialScoreTest(p_hat=0.3, n=400)
    scaled = with_design_effect(test, 4.0)
    assert isinstance(scaled, BinomialScoreTest) and scaled.deff == 4.0
    assert with_design_effect(test, 1.0) is test and with_design_effect(None, 3.0) is None
    # the statistic at a null rate shrinks by sqrt(deff): as 100 items instead of 400
    assert scaled.stat(0.4) == pytest.approx(test.stat(0.4) / 2)
    assert scaled.stat(0.4) == pytest.approx(BinomialScoreTest(p_hat=0.3, n=100).stat(0.4))


def _ds(n_items: int = 6) -> he.AnnotationSet:
    rows = [(f"i{i}", f"w{j}", (i + j) % 2) for i in range(n_items) for j in range(3)]
    return he.read_annotations(pd.DataFrame(rows, columns=["item_id", "labeler_id", "label"]), round_col=False,
                               name="tiny")


def test_with_groups_inputs_and_errors() -> None:
    d = _ds()
    g = d.with_groups({f"i{i}": f"q{i // 2}" for i in range(6)})
    assert g.group_ids == ("q0", "q1", "q2") and list(g.item_group) == [0, 0, 1, 1, 2, 2]
    assert "item groups=3" in repr(g)
    s = d.with_groups(pd.Series([f"q{i // 3}" for i in range(6)], index=[f"i{i}" for i in range(6)]))
    assert list(s.item_group) == [0, 0, 0, 1, 1, 1]
    pair = d.with_groups(([f"i{i}" for i in range(6)] + ["other"], ["a"] * 6 + ["b"]))  # extra ids ignored
    assert pair.group_ids == ("a",)
    assert g.with_groups(None).item_group is None
    # kept by taking items
    assert list(g.take_items(np.array([1, 2, 5])).item_group) == [0, 1, 2]
    with pytest.raises(DataError, match=r"1 of 6 item\(s\) of 'tiny' have no group: 'i5'"):
        d.with_groups({f"i{i}": "q" for i in range(5)})
    with pytest.raises(DataError, match=r"item\(s\) \['i0'\] are given two different groups"):
        d.with_groups(([f"i{i}" for i in range(6)] + ["i0"], ["a"] * 6 + ["b"]))
    with pytest.raises(DataError, match="have no group"):
        d.with_groups(([f"i{i}" for i in range(6)], ["a"] * 5 + [None]))
    with pytest.raises(DataError, match="2 item ids but 3 groups"):
        d.with_groups((["i0", "i1"], ["a", "b", "c"]))


@pytest.fixture(scope="module")
def grouped_round() -> tuple[he.Calibration, he.AnnotationSet, dict[str, int]]:
    d = paper_dgp(7, rho=0.10, k=12, n=300)
    cal = he.calibrate(d.history)
    # groups of 30 items; the grouping is arbitrary here (items independent), so the design effect is small
    groups = {str(x): i // 30 for i, x in enumerate(d.current.item_ids)}
    return cal, d.current, groups


def test_estimate_with_groups_widens_and_notes(grouped_round: tuple[he.Calibration, he.AnnotationSet, dict[str, int]]
                                               ) -> None:
    cal, cur, groups = grouped_round
    res = he.estimate(cur, cal, method=["hero1", "majority_vote", "rogan_gladen", "gold_proportion"])
    gres = he.estimate(cur.with_groups(groups), cal, method=["hero1", "majority_vote", "rogan_gladen",
                                                             "gold_proportion"])
    assert isinstance(res, he.EstimateCollection) and isinstance(gres, he.EstimateCollection)
    for m, r in res.items():
        g = gres[m]
        assert g.estimate == pytest.approx(r.estimate)  # the point estimate does not move
        assert g.influence is not None and g.influence.n_groups == 10
        assert g.influence.deff >= 1.0
        lo, hi = r.confidence_interval(0.95), g.confidence_interval(0.95)
        assert hi.high - hi.low >= lo.high - lo.low - 1e-12, m
        assert any("cluster-robust SE over 10 item groups" in n for n in g.notes), g.notes
        assert g.to_dict()["item_groups"] == 10
        assert g.to_dict()["estimand"] == "population of item groups"
        assert not any("only 10 groups" in n for n in g.notes)  # 10 groups: no few-groups warning
    assert "estimand" not in res["hero1"].to_dict()
    # fewer than FEW_GROUPS groups: the note warns and points to the round's own rate
    few = he.estimate(cur.with_groups({k: v // 2 for k, v in groups.items()}), cal, method="hero1")
    assert isinstance(few, he.EstimateResult)
    assert any("only 5 groups" in n and "without groups" in n for n in few.notes), few.notes
    # all in one group: no cluster-robust SE, and the note says so
    one = he.estimate(cur.with_groups({k: 0 for k in groups}), cal, method="hero1")
    assert isinstance(one, he.EstimateResult)
    assert one.standard_error == pytest.approx(res["hero1"].standard_error)
    assert any("all in one group" in n for n in one.notes)


def test_group_shared_error_inflates_hero1_interval(grouped_round: tuple[he.Calibration, he.AnnotationSet,
                                                                        dict[str, int]]) -> None:
    """Influence values that move together within a group (here: groups built on the posterior's sign) give
    a design effect well above 1, and the score-test interval widens accordingly."""
    cal, cur, _ = grouped_round
    base = he.estimate(cur, cal, method="hero1")
    assert isinstance(base, he.EstimateResult) and base.influence is not None
    order = np.argsort(base.influence.current)
    groups = {str(cur.item_ids[i]): rank * 10 // cur.n_items for rank, i in enumerate(order)}
    g = he.estimate(cur.with_groups(groups), cal, method="hero1")
    assert isinstance(g, he.EstimateResult) and g.influence is not None
    assert g.influence.deff > 5
    w0 = base.confidence_interval(0.95)
    w1 = g.confidence_interval(0.95)
    assert (w1.high - w1.low) > 1.5 * (w0.high - w0.low)


def test_compare_difference_variance_grows_with_groups(grouped_round: tuple[he.Calibration, he.AnnotationSet,
                                                                           dict[str, int]]) -> None:
    cal, cur, _ = grouped_round
    a, b = cur.take_items(np.arange(0, 150)), cur.take_items(np.arange(150, 300))
    base = he.compare(a, b, cal, method="hero1", pairs=None)

    def by_influence(ds: he.AnnotationSet) -> he.AnnotationSet:
        # groups of 15 items with similar influence values: the values move together within a group
        r = he.estimate(ds, cal, method="hero1")
        assert isinstance(r, he.EstimateResult) and r.influence is not None
        order = np.argsort(r.influence.current)
        return ds.with_groups({str(ds.item_ids[i]): rank // 15 for rank, i in enumerate(order)})

    grouped = he.compare(by_influence(a), by_influence(b), cal, method="hero1", pairs=None)
    assert isinstance(base, he.Comparison) and isinstance(grouped, he.Comparison)
    assert grouped.estimate == pytest.approx(base.estimate)
    assert grouped.standard_error > 1.5 * base.standard_error
    lo0, hi0 = base.confidence_interval(0.95)
    lo1, hi1 = grouped.confidence_interval(0.95)
    assert hi1 - lo1 > 1.5 * (hi0 - lo0)


def _long(ds: he.AnnotationSet) -> pd.DataFrame:
    return pd.DataFrame({"item_id": ds.item_ids[ds.annotation_item], "labeler_id": ds.labeler_ids[ds.labeler],
                         "label": ds.label})


def test_cli_group_col(tmp_path: Path) -> None:
    d = paper_dgp(8, rho=0.10, k=12, n=200)
    cal_path = tmp_path / "cal.json"
    he.calibrate(d.history).save(cal_path)
    cur = _long(d.current)
    topic = {x: f"t{i % 7}" for i, x in enumerate(d.current.item_ids)}
    cur_path = tmp_path / "current.csv"
    cur.assign(topic=cur["item_id"].map(topic)).to_csv(cur_path, index=False)
    r = runner.invoke(app, ["estimate", str(cur_path), "--calibration", str(cal_path), "--method", "hero1",
                            "--group-col", "topic", "-f", "json"])
    assert r.exit_code == 0, r.output
    text = r.output
    assert '"item_groups": 7' in text and '"design_effect"' in text
    plain = runner.invoke(app, ["estimate", str(cur_path), "--calibration", str(cal_path), "--method", "hero1",
                                "-f", "json"])
    assert plain.exit_code == 0 and '"item_groups"' not in plain.output
    bad = runner.invoke(app, ["estimate", str(cur_path), "--calibration", str(cal_path), "--group-col", "nope"])
    assert bad.exit_code != 0
    assert "nope" in bad.output and "--group-col" in bad.output
    # an item given two topics is named
    two = cur.assign(topic=[f"t{i % 2}" for i in range(len(cur))])
    two.to_csv(cur_path, index=False)
    r2 = runner.invoke(app, ["estimate", str(cur_path), "--calibration", str(cal_path), "--group-col", "topic"])
    assert r2.exit_code != 0 and "topic" in r2.output


def test_resample_items_draws_whole_groups() -> None:
    d = paper_dgp(3, rho=0.10, k=12, n=60)
    cur = d.current.with_groups({str(x): f"g{i % 6}" for i, x in enumerate(d.current.item_ids)})
    assert cur.item_group is not None
    gen = np.random.default_rng(0)
    for _ in range(20):
        ix = resample_items(cur, gen)
        drawn = cur.item_group[ix]
        # as many groups as the round has, each drawn group with all its 10 items
        _, counts = np.unique(drawn, return_counts=True)
        assert ix.size == cur.n_items and np.all(counts % 10 == 0)
        assert sum(c // 10 for c in counts) == 6
    plain = resample_items(d.current, np.random.default_rng(0))
    np.testing.assert_array_equal(plain, np.random.default_rng(0).integers(0, 60, 60))


def test_group_bootstrap_matches_the_cluster_robust_se() -> None:
    """With influence values that move together within groups, the bootstrap by group spreads as the CR1
    standard error (without the few-groups factor, which the bootstrap does not have) says, and far more than
    the bootstrap by item."""
    d = paper_dgp(11, rho=0.10, k=12, n=400)
    cal = he.calibrate(d.history, checks=False)
    base = he.estimate(d.current, cal, method="hero1")
    assert isinstance(base, he.EstimateResult) and base.influence is not None
    order = np.argsort(base.influence.current)
    groups = {str(d.current.item_ids[i]): rank * 20 // d.current.n_items for rank, i in enumerate(order)}
    cur = d.current.with_groups(groups)
    g = he.estimate(cur, cal, method="hero1")
    assert isinstance(g, he.EstimateResult) and g.influence is not None
    v_cr, n_groups = cluster_variance(g.influence.current, cur.item_group)  # type: ignore[arg-type]
    expected = math.sqrt(v_cr + g.variance_history)
    assert n_groups == 20
    by_group = he.bootstrap(cur, cal, method="hero1", n_resamples=200, rng=5)["hero1"]
    by_item = he.bootstrap(d.current, cal, method="hero1", n_resamples=200, rng=5)["hero1"]
    assert by_group.unit == "groups" and by_item.unit == "items"
    assert by_group.to_dict()["unit"] == "groups"
    # 200 replicates: the SE of a bootstrap SE is about 5 %; allow 20 % (measured: 0.125 against 0.131; by item
    # 0.032 against the independent-items SE 0.031)
    assert by_group.standard_error == pytest.approx(expected, rel=0.20), (by_group.standard_error, expected)
    assert by_group.standard_error > 2 * by_item.standard_error


def test_cli_report_group_col_and_multiclass_refusal(tmp_path: Path) -> None:
    d = paper_dgp(8, rho=0.10, k=12, n=200)
    cal_path = tmp_path / "cal.json"
    he.calibrate(d.history).save(cal_path)
    cur = _long(d.current)
    cur_path = tmp_path / "current.csv"
    cur.assign(topic=cur["item_id"].map({x: f"t{i % 7}" for i, x in enumerate(d.current.item_ids)})).to_csv(
        cur_path, index=False)
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", str(cur_path), "--calibration", str(cal_path), "--group-col", "topic",
                            "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "cluster-robust SE over 7 item groups" in out.read_text()
    for cmd in (["estimate", str(cur_path)], ["report", str(cur_path), "-o", str(tmp_path / "m.html")]):
        m = runner.invoke(app, [*cmd, "--calibration", str(cal_path), "--group-col", "topic", "--classes", "0,1"])
        assert m.exit_code != 0 and "--group-col is not available for multi-class" in m.output, m.output
