"""The K-class labeler drift check (heroeval.multiclass.drift).

Checked three ways: the statistic of one labeler recomputed by hand from its counts, the calibration and the
estimate; its size on rounds from the history's own labelers (nothing drifts); its power against a labeler that
starts over-using a class.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2
from typer.testing import CliRunner

from heroeval.cli import app
from heroeval.errors import HeroEvalError
from heroeval.multiclass import MultiClassData, calibrate_multiclass, hero1_multiclass, read_multiclass
from heroeval.multiclass.drift import MIN_EXPECTED, check_drift_multiclass
from heroeval.multiclass.simulate import simulate_rounds


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
    def dump(d: MultiClassData, f, g=None) -> None:
        a = d.annotations
        i = a.annotation_item
        pd.DataFrame({"item_id": a.item_ids[i], "labeler_id": a.labeler_ids[a.labeler],
                      "label": np.array(d.classes)[a.label]}).to_csv(f, index=False)
        if g is not None:
            mk = a.gold >= 0
            pd.DataFrame({"item_id": a.item_ids[mk], "gold": np.array(d.classes)[a.gold[mk]]}).to_csv(g, index=False)

    h, g, c = tmp_path / "h.csv", tmp_path / "g.csv", tmp_path / "c.csv"
    dump(sim.history, h, g)
    drifted = _overuse(sim.current, "L2", 0.6, 0)
    dump(drifted, c)
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
