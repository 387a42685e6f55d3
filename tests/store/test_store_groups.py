"""Item groups in the store (issue #39 item 4, one answer everywhere): a round added with ``group_col`` keeps its
groups, and its store estimate, the history's calibration and the trend are cluster-robust as ``hero estimate
--group-col`` is."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app
from heroeval.store._rounds import GROUPS_TABLE
from tests.store.test_store import _frames


def _grouped(ann: pd.DataFrame, k: int) -> pd.DataFrame:
    """A prompt column: items in groups of about 10, the same prompt ids in every round."""
    ids = pd.unique(ann["item_id"])
    return ann.assign(prompt=ann["item_id"].map({x: f"p{i % k}" for i, x in enumerate(ids)}))


@pytest.fixture
def store(tmp_path: Path) -> he.Store:
    st = he.Store(tmp_path / "hero.duckdb")
    frames = _frames(rounds=3)
    for k, (ann, gold) in enumerate(frames):
        path = tmp_path / f"v{k + 1}.csv"
        _grouped(ann, 25).to_csv(path, index=False)
        st.add(path, gold=gold, name=f"v{k + 1}", group_col="prompt" if k != 1 else None)  # v2 without groups
    cur = _grouped(_frames(seed=7, rounds=1)[0][0], 25)  # new content: not a twin of a history round
    cur.to_csv(tmp_path / "cur.csv", index=False)
    st.add(tmp_path / "cur.csv", name="now", role="current", group_col="prompt")
    return st


def test_groups_are_stored_and_loaded(store: he.Store) -> None:
    now = store.load("now")
    assert now.item_group is not None and len(now.group_ids) == 25
    assert store.load("v2").item_group is None
    hist = store.load(["v1", "v2", "v3"])
    assert hist.item_group is not None
    # v1's and v3's prompts are shared groups; each of v2's items is its own group
    assert len(hist.group_ids) == 25 + store.round("v2").n_items
    store.remove("v3")
    with store._con() as con:  # the removed round's groups go with it
        assert con.execute(f"SELECT count(*) FROM {GROUPS_TABLE} WHERE round_id = 3").fetchone()[0] == 0


def test_store_estimate_is_hero_estimate_with_groups(store: he.Store) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        se = store.estimate("now", method="hero1")
        hist = store.load(["v1", "v2", "v3"])
        cal = he.calibrate(hist)
        direct = he.estimate(store.load("now"), cal, method="hero1")
    r = se.estimates
    assert isinstance(r, he.EstimateResult) and isinstance(direct, he.EstimateResult)
    assert cal.settings["history_item_groups"] == len(hist.group_ids)
    assert se.calibration.calibration.settings["history_item_groups"] == len(hist.group_ids)
    assert r.estimate == pytest.approx(direct.estimate, rel=1e-9)
    assert r.standard_error == pytest.approx(direct.standard_error, rel=1e-6)
    assert r.to_dict()["item_groups"] == 25
    # and the trend gives the round the same answer
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = store.trend(["v1", "v3", "now"], drift=False)
        rec = store.estimate("now").estimates
    assert isinstance(rec, he.EstimateCollection) and rec.recommended is not None
    row = next(x for x in tr.rounds if x.name == "now")
    assert row.estimate == pytest.approx(rec.recommended.result.estimate, rel=1e-9)
    assert row.marginal_low == pytest.approx(rec.recommended.result.confidence_interval(0.95).low, rel=1e-9)


def test_cli_store_add_group_col(tmp_path: Path) -> None:
    ann, gold = _frames(rounds=1)[0]
    path = tmp_path / "r.csv"
    _grouped(ann, 10).to_csv(path, index=False)
    gold.to_csv(tmp_path / "g.csv", index=False)
    runner = CliRunner()
    db = str(tmp_path / "s.duckdb")
    r = runner.invoke(app, ["store", "add", str(path), "--gold", str(tmp_path / "g.csv"), "--group-col", "prompt",
                            "--store", db, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["added"][0]["name"] == "r"
    assert len(he.Store(db).load("r").group_ids) == 10
    bad = runner.invoke(app, ["store", "add", str(path), "--name", "r2", "--group-col", "nope", "--store", db])
    assert bad.exit_code != 0 and "nope" in bad.output
    assert np.all(he.Store(db).rounds().names == ("r",))


def test_groups_are_part_of_the_cached_calibration_key(tmp_path: Path) -> None:
    st = he.Store(tmp_path / "k.duckdb")
    (ann, gold), = _frames(rounds=1)
    path = tmp_path / "v1.csv"
    _grouped(ann, 25).to_csv(path, index=False)
    st.add(path, gold=gold, name="v1")
    plain = st.calibrate()
    assert st.calibrate().status == "cached"
    st.remove("v1")
    st.add(path, gold=gold, name="v1", group_col="prompt")  # the same content, now with groups
    grouped = st.calibrate()
    assert grouped.status == "fitted" and grouped.key != plain.key
    assert grouped.calibration.settings["history_item_groups"] == 25
    assert "history_item_groups" not in plain.calibration.settings
