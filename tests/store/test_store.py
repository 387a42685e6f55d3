"""The store: add (one transaction, content hash), list, show, remove with an audit line, export, the cache, pins."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.store import SCHEMA_VERSION, StoreError
from tests.conftest import simulate


def _frames(seed: int = 1, rounds: int = 3) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """Rounds as (annotations, gold) frames; item ids repeat across rounds, as the same prompts would."""
    out = []
    for k in range(rounds):
        s = simulate(seed + k, J=5, N=200, n=50, covariates=False, hist_prev=0.3 + 0.1 * k)
        h = s.history
        ann = pd.DataFrame({"item_id": h.item_ids[h.annotation_item], "labeler_id": h.labeler_ids[h.labeler],
                            "label": h.label})
        g = h.gold >= 0
        out.append((ann, pd.DataFrame({"item_id": h.item_ids[g], "gold": h.gold[g]})))
    return out


@pytest.fixture
def store(tmp_path: Path) -> he.Store:
    st = he.Store(tmp_path / "hero.duckdb")
    for k, (ann, gold) in enumerate(_frames()):
        st.add(ann, gold=gold, name=f"v{k + 1}", model=f"m{k + 1}", tags=["weekly"])
    return st


def test_add_list_show_remove_log(store: he.Store) -> None:
    rl = store.rounds()
    assert rl.names == ("v1", "v2", "v3")
    assert all(r.in_history and r.n_gold > 0 for r in rl)
    df = rl.to_frame()
    assert list(df["name"]) == ["v1", "v2", "v3"] and "<table>" in rl._repr_html_()
    r = store.round("v2")
    assert r.model == "m2" and r.tags == ("weekly",)
    assert r.ingest.tables[0].rows_read == r.n_annotations
    removed = store.remove("v2")
    assert store.rounds().names == ("v1", "v3") and removed.name == "v2"
    log = store.log()
    assert [x["action"] for x in log] == ["add", "add", "add", "remove"]
    assert log[-1]["round"] == "v2" and log[-1]["content_hash"] == r.content_hash
    with pytest.raises(StoreError, match="no round named 'v2'"):
        store.round("v2")


def test_same_content_is_not_added_twice(store: he.Store, tmp_path: Path) -> None:
    ann, gold = _frames()[0]
    before = store.rounds()
    p = tmp_path / "v1.parquet"
    ann.sample(frac=1.0, random_state=3).to_parquet(p)  # another format, another row order: the same content
    res = store.add(p, gold=gold, name="v1-again")
    assert res.added == () and res.duplicates[0][1].name == "v1"
    assert "nothing changed" in res.lines()[0]
    assert store.rounds() == before
    assert store.log()[-1]["action"] == "add-duplicate"
    other = ann.copy()
    other.loc[0, "label"] = 1 - other.loc[0, "label"]
    with pytest.raises(StoreError, match=r"already in .* with other content"):
        store.add(other, gold=gold, name="v1")


def test_ingest_report_counts_every_row(tmp_path: Path) -> None:
    ann, gold = _frames(rounds=1)[0]
    ann = pd.concat([ann, pd.DataFrame({"item_id": [None], "labeler_id": ["L00"], "label": [1]})])
    st = he.Store(tmp_path / "s.duckdb")
    r = st.add(ann, gold=gold, name="r").added[0]
    t = r.ingest.tables[0]
    assert t.rows_read == len(ann) and t.rows_used == len(ann) - 1 and sum(t.dropped.values()) == 1
    assert st.round("r").ingest.to_dict() == r.ingest.to_dict()


def test_split_rounds_and_round_column(tmp_path: Path) -> None:
    frames = _frames(rounds=2)
    ann = pd.concat([a.assign(item_id="r" + str(k) + a["item_id"], round=f"w{k}") for k, (a, _) in enumerate(frames)])
    st = he.Store(tmp_path / "s.duckdb")
    with pytest.raises(StoreError, match="holds 2 rounds"):
        st.add(ann, name="x")
    res = st.add(ann, split_rounds=True)
    assert [r.name for r in res.added] == ["w0", "w1"] and all(r.n_gold == 0 for r in res.added)
    assert [r.in_history for r in res.added] == [False, False]


def test_load_gives_back_the_round(store: he.Store) -> None:
    ann, gold = _frames()[0]
    ds = he.read_annotations(ann, gold=gold)
    got = store.load("v1")
    assert list(got.item_ids) == list(ds.item_ids)
    assert list(got.labeler_ids) == list(ds.labeler_ids)
    np.testing.assert_array_equal(got.item_ptr, ds.item_ptr)
    np.testing.assert_array_equal(got.gold, ds.gold)
    for a, b in ((got, ds),):
        order_a = np.lexsort((a.label, a.labeler, a.annotation_item))
        order_b = np.lexsort((b.label, b.labeler, b.annotation_item))
        np.testing.assert_array_equal(a.labeler[order_a], b.labeler[order_b])
        np.testing.assert_array_equal(a.label[order_a], b.label[order_b])
    both = store.load(["v1", "v2"])
    assert both.n_items == store.round("v1").n_items + store.round("v2").n_items  # repeated item ids stay distinct
    assert both.round_ids == ("v1", "v2")


def test_calibration_is_cached_and_refitted_when_the_history_changes(store: he.Store) -> None:
    a = store.calibrate()
    b = store.calibrate()
    assert (a.status, b.status) == ("fitted", "cached") and a.key == b.key
    np.testing.assert_allclose(a.calibration.alpha, b.calibration.alpha, rtol=0, atol=1e-15)
    assert b.calibration.checks is not None  # auto works from the cache
    direct = he.calibrate(store.load(["v1", "v2", "v3"]), checks=True)
    np.testing.assert_allclose(direct.alpha, a.calibration.alpha, atol=1e-12)
    ann, gold = _frames(seed=9, rounds=1)[0]
    store.add(ann, gold=gold, name="v4")
    c = store.calibrate()
    assert c.status == "fitted" and c.key != a.key and c.rounds == ("v1", "v2", "v3", "v4")
    store.remove("v4")
    assert store.calibrate().status == "cached"  # the same rounds again: the first fit


def test_estimate_reuses_the_fit_and_leaves_a_history_round_out(store: he.Store) -> None:
    s = simulate(5, J=5, N=50, n=120, covariates=False)
    store.add(s.current, name="new")
    assert not store.round("new").in_history
    e1 = store.estimate("new")
    e2 = store.estimate("new")
    assert e1.calibration.status in ("fitted", "cached") and e2.calibration.status == "cached"
    assert e2.calibration.rounds == ("v1", "v2", "v3")
    res = e2.estimates
    assert isinstance(res, he.EstimateCollection) and "hero_joint" in res and res.recommended is not None
    e3 = store.estimate("v2")
    assert e3.calibration.rounds == ("v1", "v3") and "left out" in e3.notes[0]
    e4 = store.estimate(s.current, history=False)
    assert "hero_joint" not in e4.estimates and e4.estimates.recommended is not None
    assert e4.estimates["hero1"].estimate == pytest.approx(res["hero1"].estimate, abs=1e-12)


def test_pin_reproduce_and_protect(store: he.Store) -> None:
    sc = store.pin("launch", note="the launch decision")
    assert [p["name"] for p in store.pins()] == ["launch"]
    cal = store.pinned("launch")
    np.testing.assert_array_equal(cal.alpha, sc.calibration.alpha)
    out = store.reproduce("launch")
    assert out["reproduced"] and out["max_abs_difference"] < 1e-9
    with pytest.raises(StoreError, match="pinned calibration"):
        store.remove("v1")
    with pytest.raises(StoreError, match="exists"):
        store.pin("launch")
    store.remove("v1", force=True)
    with pytest.raises(StoreError, match="no longer in"):
        store.reproduce("launch")
    np.testing.assert_array_equal(store.pinned("launch").beta, sc.calibration.beta)  # kept verbatim
    store.unpin("launch")
    assert store.pins() == []


def test_export_reads_back_with_duckdb_and_calibrates_the_same(store: he.Store, tmp_path: Path) -> None:
    out = store.export(tmp_path / "exp")
    assert out["rounds"] == 3
    parts = sorted(p.name for p in (tmp_path / "exp" / "annotations").iterdir())
    assert parts == ["round_id=1", "round_id=2", "round_id=3"]
    ds = he.read_annotations(str(tmp_path / "exp" / "annotations" / "*" / "*.parquet"),
                             gold=tmp_path / "exp" / "gold.parquet", engine="duckdb")
    hist = store.load(["v1", "v2", "v3"])
    assert (ds.n_items, ds.n_annotations, ds.n_gold) == (hist.n_items, hist.n_annotations, hist.n_gold)
    assert sorted(ds.round_ids) == ["v1", "v2", "v3"]
    a, b = he.calibrate(ds), he.calibrate(hist)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-9)
    manifest = json.loads((tmp_path / "exp" / "rounds.json").read_text())
    assert [r["name"] for r in manifest["rounds"]] == ["v1", "v2", "v3"]
    with pytest.raises(StoreError, match="not empty"):
        store.export(tmp_path / "exp")


def test_export_reads_with_dask(store: he.Store, tmp_path: Path) -> None:
    pytest.importorskip("dask.dataframe")
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    store.export(tmp_path / "exp")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as lc, \
            Client(lc) as client:
        cal = he.calibrate_dask(str(tmp_path / "exp" / "annotations" / "*" / "*.parquet"),
                             gold=str(tmp_path / "exp" / "gold.parquet"), client=client, partitioned_by_item=True)
    ref = he.calibrate(store.load(["v1", "v2", "v3"]))
    np.testing.assert_allclose(cal.alpha, ref.alpha, atol=1e-7)


# ---------------------------------------------------------------------------
# Files that are not (or no longer) a store this heroeval can read
# ---------------------------------------------------------------------------


def test_damaged_foreign_and_newer_files_are_named_and_left_alone(tmp_path: Path, store: he.Store) -> None:
    garbage = tmp_path / "garbage.duckdb"
    garbage.write_bytes(b"not a database" * 100)
    with pytest.raises(StoreError, match=r"garbage\.duckdb"):
        he.Store(garbage)
    assert garbage.read_bytes() == b"not a database" * 100
    truncated = tmp_path / "truncated.duckdb"
    truncated.write_bytes(store.path.read_bytes()[:6000])
    with pytest.raises(StoreError, match=r"truncated\.duckdb"):
        he.Store(truncated).rounds()
    assert truncated.stat().st_size == 6000
    foreign = tmp_path / "foreign.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE t (x INTEGER)")
    con.close()
    with pytest.raises(StoreError, match="not a heroeval store"):
        he.Store(foreign).add(_frames(rounds=1)[0][0], name="x")
    con = duckdb.connect(str(store.path))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    con.close()
    size = store.path.stat().st_size
    with pytest.raises(StoreError, match="newer heroeval"):
        he.Store(store.path)
    assert store.path.stat().st_size == size
    with pytest.raises(StoreError, match="no store at"):
        he.Store(tmp_path / "missing.duckdb").round("x")
