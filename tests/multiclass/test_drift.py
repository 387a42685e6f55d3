"""The K-class labeler drift check (heroeval.multiclass.drift).

Checked three ways: the statistic of one labeler recomputed by hand from its counts, the calibration and the
estimate; its size on rounds from the history's own labelers (nothing drifts); its power against a labeler that
starts over-using a class.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import chi2
from typer.testing import CliRunner

from heroeval.checks.dependence import dependence_test
from heroeval.cli import app
from heroeval.errors import HeroEvalError
from heroeval.multiclass import MultiClassData, calibrate_multiclass, hero1_multiclass, read_multiclass
from heroeval.multiclass.drift import MIN_EXPECTED, check_drift_multiclass
from heroeval.multiclass.simulate import simulate_rounds
from tests.multiclass.files import write_round


def _sim(seed: int):
    sim = simulate_rounds(np.random.default_rng(seed), K=4, J=8, n_history=600, n_current=300, rho=0.15,
                          structure="full", ordinal=False)
    return sim, calibrate_multiclass(sim.history, structure="full")


def _overuse(cur: MultiClassData, labeler: str, share: float, seed: int) -> MultiClassData:
    ds = cur.annotations
    j = list(map(str, ds.labeler_ids)).index(labeler)
    sel = (ds.labeler == j) & (np.random.default_rng(seed).random(ds.label.size) < share)
    lab = ds.label.copy()
    lab[sel] = 0
    return MultiClassData(replace(ds, label=lab), cur.classes, cur.values, cur.ordinal)


def test_statistic_of_one_labeler_by_hand() -> None:
    sim, cal = _sim(1)
    cur = sim.current
    chk = check_drift_multiclass(cur, cal)
    est = hero1_multiclass(cur, cal, exclude_new_labelers=True)
    ds = cur.annotations
    row = chk.table.iloc[0]
    j = list(map(str, ds.labeler_ids)).index(row["labeler"])
    n = np.bincount(ds.label[ds.labeler == j], minlength=4).astype(float)
    m = n.sum()
    conf = cal.confusion[cal.index_of()[row["labeler"]]]
    p = est.estimate / est.estimate.sum()
    q = p @ conf
    prev = cal.round_n_items @ cal.round_prevalence / cal.round_n_items.sum()
    h = cal.n_annotations[cal.index_of()[row["labeler"]]] * prev
    S = (np.diag(q) - np.outer(q, q)) / m + conf.T @ est.covariance() @ conf
    S += sum(p[k] ** 2 * (np.diag(conf[k]) - np.outer(conf[k], conf[k])) / (h[k] + 1) for k in range(4))
    r = n / m - q
    T = float(r @ np.linalg.pinv(S, hermitian=True) @ r)
    assert row["tested"] and row["statistic"] == pytest.approx(T, rel=1e-8)
    assert row["p_value"] == pytest.approx(chi2.sf(T, 3), rel=1e-8)
    assert [row[f"expected {c}"] for c in cur.classes] == pytest.approx(q.tolist())
    assert chk.n_tested + chk.n_untested == len(chk.table)
    assert set(chk.to_dict()) >= {"overall_p", "flagged", "labelers"}
    with pytest.raises(HeroEvalError, match="adjust must be"):
        check_drift_multiclass(cur, cal, adjust="bonferroni")


def test_size_and_power_on_simulated_rounds() -> None:
    """40 rounds from the history's labelers: a labeler flagged in at most 10 % of them (nominal family-wise 5 %);
    a labeler calling half of its items class 1 is flagged in at least 80 % of 20 rounds."""
    false_alarm, hits = 0, 0
    for s in range(40):
        sim, cal = _sim(100 + s)
        false_alarm += bool(check_drift_multiclass(sim.current, cal).flagged)
        if s < 20:
            hits += "L0" in check_drift_multiclass(_overuse(sim.current, "L0", 0.5, s), cal).flagged
    assert false_alarm / 40 <= 0.10
    assert hits / 20 >= 0.80


def test_few_labels_are_not_tested_and_cli_matches_the_library(tmp_path) -> None:
    sim, cal = _sim(3)
    cur = sim.current.take_items(np.arange(20))  # 60 labels over 8 labelers: expected counts below 5
    chk = check_drift_multiclass(cur, cal)
    assert chk.n_tested == 0 and "no labeler has enough labels" in " ".join(chk.notes)
    assert not chk.table["tested"].any() and MIN_EXPECTED == 5.0
    h, g, c = tmp_path / "h.csv", tmp_path / "g.csv", tmp_path / "c.csv"
    write_round(sim.history, h, g)
    drifted = _overuse(sim.current, "L2", 0.6, 0)
    write_round(drifted, c)
    r = CliRunner().invoke(app, ["drift", str(c), "--history", str(h), "--gold", str(g), "--classes", "1,2,3,4",
                                 "--structure", "full", "-f", "json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    want = check_drift_multiclass(read_multiclass(c, classes="1,2,3,4"),
                                  calibrate_multiclass(read_multiclass(h, gold=g, classes="1,2,3,4"),
                                                       structure="full"))
    assert got["flagged"] == list(want.flagged) and "L2" in got["flagged"]
    assert got["overall_p"] == pytest.approx(want.overall_p)
    r = CliRunner().invoke(app, ["drift", str(c), "--history", str(h), "--gold", str(g), "--classes", "1,2,3,4",
                                 "--structure", "full"])
    assert r.exit_code == 0 and "flagged at 0.05: " in r.output and "L2" in r.output


def test_dependence_test_for_k_classes_size_power_and_two_classes() -> None:
    """heroeval.checks.dependence_test on K-class annotations: with two classes it gives the binary set's numbers;
    labelers independent given the class (the simulator) are rarely flagged (p < 0.05 in at most 10 % of 40
    histories); labelers who all give the same wrong class on a fifth of the items are (p < 0.01 in all of 10)."""
    sim = simulate_rounds(np.random.default_rng(5), K=2, J=6, n_history=400, n_current=10, rho=0.5,
                          structure="full", ordinal=False)
    a = sim.history.annotations
    flipped = replace(a, label=(1 - a.label).astype(a.label.dtype), gold=np.where(a.gold >= 0, 1 - a.gold, -1)
                      .astype(a.gold.dtype))
    t2, tf = dependence_test(a), dependence_test(flipped)
    assert t2.z == pytest.approx(tf.z, rel=1e-12) and t2.n_pairs == tf.n_pairs  # class coding does not matter
    small = 0
    for s in range(40):
        h = simulate_rounds(np.random.default_rng(200 + s), K=4, J=6, n_history=300, n_current=10, rho=0.5,
                            structure="full", ordinal=False).history
        small += dependence_test(h.annotations).p_value < 0.05
    assert small / 40 <= 0.10
    for s in range(10):
        h = simulate_rounds(np.random.default_rng(300 + s), K=4, J=6, n_history=300, n_current=10, rho=0.5,
                            structure="full", ordinal=False).history
        ds = h.annotations
        rng = np.random.default_rng(s)
        hard = rng.random(ds.n_items) < 0.2
        wrong = (np.maximum(ds.gold, 0) + 1 + rng.integers(0, 3, ds.n_items)) % 4  # one wrong class per item
        lab = np.where(hard[ds.annotation_item] & (ds.gold[ds.annotation_item] >= 0), wrong[ds.annotation_item],
                       ds.label).astype(ds.label.dtype)
        assert dependence_test(replace(ds, label=lab)).p_value < 0.01


def test_cli_multiclass_calibrate_reports_the_dependence_test(tmp_path) -> None:
    sim, _ = _sim(8)
    h, g = tmp_path / "h.csv", tmp_path / "g.csv"
    write_round(sim.history, h, g)
    args = ["calibrate", str(h), "--gold", str(g), "-o", str(tmp_path / "cal.json"), "--classes", "1,2,3,4",
            "--structure", "symmetric"]
    r = CliRunner().invoke(app, [*args, "-f", "json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)["dependence"]
    want = dependence_test(read_multiclass(h, gold=g, classes="1,2,3,4").annotations)
    assert got["z"] == pytest.approx(want.z) and got["n_pairs"] == want.n_pairs
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0 and "dependence test on" in r.output
