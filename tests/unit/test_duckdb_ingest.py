"""Ingest through DuckDB (issue #7 item 2) gives what the pandas reader gives, with the same row report."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.errors import DataError

EXAMPLE = Path(glob.glob(str(Path(he.__file__).parent / "examples" / "*" / "history.csv.gz"))[0]).parent


def _multisets(ds: he.AnnotationSet) -> list[list[tuple[str, int]]]:
    """Each item's (labeler, label) pairs, sorted: the content of the CSR rows, whatever their order."""
    out = []
    for r in range(ds.n_items):
        s = slice(ds.item_ptr[r], ds.item_ptr[r + 1])
        out.append(sorted(zip(ds.labeler_ids[ds.labeler[s]], ds.label[s].tolist(), strict=True)))
    return out


def _by_item(ds: he.AnnotationSet) -> dict[str, tuple[int, str, list[tuple[str, int]]]]:
    """Item id -> (gold, round, its (labeler, label) pairs): the content, whatever the item order."""
    ms = _multisets(ds)
    return {str(x): (int(ds.gold[r]), ds.round_ids[ds.item_round[r]], ms[r]) for r, x in enumerate(ds.item_ids)}


def _same(a: he.AnnotationSet, b: he.AnnotationSet) -> None:
    assert list(a.labeler_ids) == list(b.labeler_ids)
    assert a.round_ids == b.round_ids
    assert a.n_items == b.n_items and a.n_annotations == b.n_annotations
    assert _by_item(a) == _by_item(b)
    if a.item_ids.dtype == b.item_ids.dtype:  # string ids: the same order too
        assert list(a.item_ids) == list(b.item_ids)
        np.testing.assert_array_equal(a.item_ptr, b.item_ptr)
    ra, rb = a.report.tables, b.report.tables
    assert [(t.table, t.rows_read, t.rows_used, dict(t.dropped), dict(t.notes)) for t in ra] == [
        (t.table, t.rows_read, t.rows_used, dict(t.dropped), dict(t.notes)) for t in rb]


def test_example_csv_same_as_pandas_and_same_calibration() -> None:
    kw = {"gold": EXAMPLE / "history_gold.csv"}
    a = he.read_annotations(EXAMPLE / "history.csv.gz", engine="pandas", **kw)
    b = he.read_annotations(EXAMPLE / "history.csv.gz", engine="duckdb", **kw)
    _same(a, b)
    ca = he.calibrate(a, tol=1e-12)
    cb = he.calibrate(b, tol=1e-12)
    np.testing.assert_allclose(ca.alpha, cb.alpha, atol=1e-10, rtol=0)
    np.testing.assert_allclose(ca.beta, cb.beta, atol=1e-10, rtol=0)
    assert ca.parameter_covariance is not None and cb.parameter_covariance is not None
    np.testing.assert_allclose(ca.parameter_covariance, cb.parameter_covariance, atol=1e-10, rtol=0)


def _messy(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 3000
    df = pd.DataFrame({
        "item_id": rng.integers(0, 700, n).astype(object),
        "labeler_id": np.array([f"w{k}" for k in rng.integers(0, 9, n)], dtype=object),
        "label": rng.integers(0, 2, n).astype(float),
    })
    df.loc[rng.choice(n, 15, replace=False), "item_id"] = None
    df.loc[rng.choice(n, 11, replace=False), "labeler_id"] = None
    df.loc[rng.choice(n, 7, replace=False), "label"] = np.nan
    return df


def test_parquet_glob_of_many_files_same_report_as_pandas(tmp_path: Path) -> None:
    df = _messy(1)
    for k, part in enumerate(np.array_split(np.arange(len(df)), 3)):
        df.iloc[part].to_parquet(tmp_path / f"part-{k}.parquet")
    gold = pd.DataFrame({"item_id": [str(i) for i in range(0, 700, 10)] + ["99999"], "gold": [1, 0] * 35 + [1]})
    a = he.read_annotations(df.assign(item_id=df["item_id"].astype("Int64")), gold=gold, engine="pandas",
                            name="messy")
    b = he.read_annotations(str(tmp_path / "part-*.parquet"), gold=gold, engine="auto", name="messy")
    assert b.item_ids.dtype.kind == "i"  # integer ids stay integers
    _same(a, b)
    assert dict(b.report.tables[0].dropped) == {"missing item id": 15, "missing labeler id": dict(
        a.report.tables[0].dropped)["missing labeler id"], "missing label": dict(a.report.tables[0].dropped)[
        "missing label"]}
    assert b.report.tables[0].rows_read == 3000
    assert dict(b.report.tables[1].dropped) == {"gold for an item with no silver label": 1}
    # a list of paths and a directory name the same files
    c = he.read_annotations(sorted(tmp_path.glob("*.parquet")), gold=gold, engine="duckdb")
    d = he.read_annotations(tmp_path, gold=gold, engine="duckdb")
    _same(b, c)
    _same(b, d)


def test_csv_with_string_labels_and_rounds(tmp_path: Path) -> None:
    df = pd.DataFrame({"task": ["a", "a", "b", "b", "c", " "], "worker": ["x", "y", "x", "y", "x", "y"],
                       "label": ["Yes", "no", "TRUE", "0", "", "1"], "round": ["r1", "r1", "r2", "r2", "r1", "r1"]})
    f = tmp_path / "log.csv"
    df.to_csv(f, index=False)
    a = he.read_annotations(f, engine="pandas")
    b = he.read_annotations(f, engine="duckdb")
    _same(a, b)
    assert dict(b.report.tables[0].dropped) == {"missing item id": 1, "missing label": 1}


def test_bad_label_names_file_and_row(tmp_path: Path) -> None:
    df = pd.DataFrame({"item_id": [1, 2, 3, 4], "labeler_id": ["a", "b", "a", "b"], "label": [0, 1, 2, 1]})
    df.to_parquet(tmp_path / "p.parquet")
    with pytest.raises(DataError, match=r"p\.parquet, row 3: label 2 in column 'label' is not binary.*1 such row"):
        he.read_annotations(tmp_path / "p.parquet", engine="duckdb")
    df.astype({"label": str}).assign(label=["0", "1", "maybe", "1"]).to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(DataError, match=r"c\.csv, row 3 \(line 4\): label 'maybe'"):
        he.read_annotations(tmp_path / "c.csv", engine="duckdb")
    df2 = df.assign(label=[0, 1, 1, 1], labeler_id=["a", None, "a", "b"])
    df2.to_parquet(tmp_path / "m.parquet")
    with pytest.raises(DataError, match=r"m\.parquet, row 2: missing"):
        he.read_annotations(tmp_path / "m.parquet", engine="duckdb", missing="error")


def test_duplicates_policies(tmp_path: Path) -> None:
    df = pd.DataFrame({"item_id": [1, 1, 1, 2], "labeler_id": ["a", "a", "b", "a"], "label": [1, 0, 1, 0]})
    df.to_parquet(tmp_path / "d.parquet")
    keep = he.read_annotations(tmp_path / "d.parquet", engine="duckdb")
    assert dict(keep.report.tables[0].notes) == {"repeated (item, labeler) pair kept as separate labels": 1}
    assert keep.repeated_pairs and keep.n_annotations == 4
    first = he.read_annotations(tmp_path / "d.parquet", engine="duckdb", duplicates="first")
    assert first.n_annotations == 3 and first.label[first.labeler == 0][0] == 1  # the first row's label is kept
    with pytest.raises(DataError, match="repeated"):
        he.read_annotations(tmp_path / "d.parquet", engine="duckdb", duplicates="error")


def test_round_conflict_and_engine_errors(tmp_path: Path) -> None:
    df = pd.DataFrame({"item_id": [1, 1], "labeler_id": ["a", "b"], "label": [1, 0], "round": ["r1", "r2"]})
    df.to_parquet(tmp_path / "r.parquet")
    with pytest.raises(DataError, match="more than one round"):
        he.read_annotations(tmp_path / "r.parquet", engine="duckdb")
    with pytest.raises(DataError, match="matches no file"):
        he.read_annotations(str(tmp_path / "none-*.parquet"))
    with pytest.raises(DataError, match="engine must be"):
        he.read_annotations(tmp_path / "r.parquet", engine="spark")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="reads files"):
        he.read_annotations(df, engine="duckdb")
    with pytest.raises(DataError, match="covariates or label_map"):
        he.read_annotations(tmp_path / "r.parquet", engine="duckdb", label_map={1: 1, 0: 0})


def test_reads_under_a_small_memory_limit(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 1_000_000
    df = pd.DataFrame({"item_id": rng.permutation(n) // 4, "labeler_id": rng.integers(0, 50, n).astype(str),
                       "label": rng.integers(0, 2, n).astype(np.int8)})
    df.to_parquet(tmp_path / "big.parquet")
    ds = he.read_annotations(tmp_path / "big.parquet", engine="duckdb", memory_limit="100MB")
    assert ds.n_annotations == n and ds.n_items == n // 4
    assert np.all(np.diff(ds.item_ptr) == 4)


def test_tsv_same_as_pandas(tmp_path: Path) -> None:
    f = tmp_path / "log.tsv"
    f.write_text("item_id\tlabeler_id\tlabel\n1\ta\t1\n1\tb\t0\n2\ta\ttrue\n")
    _same(he.read_annotations(f, engine="pandas"), he.read_annotations(f, engine="duckdb"))


def _ints_log(seed: int, labeler_kind: str, rounds: bool, dense: bool = False) -> pd.DataFrame:
    """Integer item ids with gaps (or every id in a range: ``dense``), labelers as integers (some beyond 9, so string order differs) or strings,
    a few rows with something missing, repeated pairs, and optionally a round per item."""
    rng = np.random.default_rng(seed)
    ids = (np.arange(700) if dense else np.sort(rng.choice(5_000, 700, replace=False))) - 1_000  # negative ids too
    item = np.repeat(ids, rng.integers(1, 6, ids.size))
    lab = rng.integers(0, 40, item.size)
    df = pd.DataFrame({"item_id": item, "labeler_id": lab if labeler_kind == "int" else [f"w{v}" for v in lab],
                       "label": rng.integers(0, 2, item.size).astype(float)})
    if rounds:
        df["round"] = [f"r{(v // 7) % 3}" for v in item]
    df.loc[rng.choice(len(df), 5, replace=False), "label"] = np.nan
    df = pd.concat([df, df.iloc[:3]], ignore_index=True)  # repeated (item, labeler) pairs
    return df.sample(frac=1.0, random_state=seed).reset_index(drop=True)


@pytest.mark.parametrize(("labeler_kind", "rounds", "dense"), [("int", False, False), ("int", True, False),
                                                             ("str", False, False), ("str", True, True),
                                                             ("int", False, True)])
def test_integer_items_without_a_dictionary_equal_the_dictionary_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, labeler_kind: str, rounds: bool, dense: bool) -> None:
    """Issue #20 item 4: integer item ids go through a code table over their range (two streamed scans, no
    hash table of the items); the result is the dictionary path's, array for array, report for report."""
    from heroeval.ingest import _duckdb

    df = _ints_log(3, labeler_kind, rounds, dense)
    df.to_parquet(tmp_path / "a.parquet")
    g = df.drop_duplicates("item_id").iloc[::9]
    gold = pd.DataFrame({"item_id": g["item_id"], "gold": (g["item_id"] % 2).astype(int)})
    absent = sorted(set(range(int(df["item_id"].min()) - 3, int(df["item_id"].max()) + 3)) - set(df["item_id"]))
    gold = pd.concat([gold, pd.DataFrame({"item_id": absent[:2] + absent[-2:], "gold": 1})])  # no silver labels
    assert dense == (len(absent) == 5)  # 3 below the lowest id, 2 above the highest, none between
    calls: list[tuple[int, int]] = []
    real = _duckdb._range_pays
    monkeypatch.setattr(_duckdb, "_range_pays", lambda lo, hi, n: calls.append((lo, hi)) or real(lo, hi, n))
    a = he.read_annotations(tmp_path / "a.parquet", gold=gold, engine="duckdb")
    assert calls and calls[0] == (int(df["item_id"].min()), int(df["item_id"].max()))  # the range path ran
    monkeypatch.setattr(_duckdb, "_range_pays", lambda lo, hi, n: False)
    b = he.read_annotations(tmp_path / "a.parquet", gold=gold, engine="duckdb")
    assert a.item_ids.dtype == np.int64 and b.item_ids.dtype == np.int64
    np.testing.assert_array_equal(a.item_ids, b.item_ids)
    np.testing.assert_array_equal(a.item_ptr, b.item_ptr)
    assert list(a.labeler_ids) == list(b.labeler_ids)
    assert list(a.labeler_ids) == sorted(a.labeler_ids)  # string order, as the dictionary's ORDER BY
    np.testing.assert_array_equal(a.gold, b.gold)
    np.testing.assert_array_equal(a.item_round, b.item_round)
    assert a.round_ids == b.round_ids and a.repeated_pairs and b.repeated_pairs
    _same(a, b)
    assert a.report.tables[0].dropped == {"missing label": 5}
    assert a.report.tables[1].dropped == {"gold for an item with no silver label": 4}
    assert int((a.gold >= 0).sum()) == len(g)
    # and the content is the log's: every item's (labeler, label) pairs, rows with a missing label dropped
    kept = df.dropna(subset=["label"])
    want = {int(i): sorted(zip(s["labeler_id"].astype(str), s["label"].astype(int), strict=True))
            for i, s in kept.groupby("item_id")}
    assert {int(x): m for x, m in zip(a.item_ids, _multisets(a), strict=True)} == want
    with pytest.raises(DataError, match="repeated"):
        he.read_annotations(tmp_path / "a.parquet", engine="duckdb", duplicates="error")


def test_integer_items_in_two_rounds_named_by_the_range_path(tmp_path: Path) -> None:
    df = pd.DataFrame({"item_id": [5, 5, 9], "labeler_id": [1, 2, 1], "label": [1, 0, 1], "round": ["a", "b", "a"]})
    df.to_parquet(tmp_path / "r.parquet")
    with pytest.raises(DataError, match="item 5 appears in more than one round"):
        he.read_annotations(tmp_path / "r.parquet", engine="duckdb")


def test_integer_ids_far_apart_and_rows_all_dropped(tmp_path: Path) -> None:
    """Labeler ids spread over 1e12 take DuckDB's dictionary (no table over their range); item ids spread wider than
    the rows do too; a log whose every row is dropped gives no items either way, with every row counted."""
    df = pd.DataFrame({"item_id": [7, 7, 9, 9, 11], "labeler_id": [10**12, 3, 3, 10**12, 5],
                       "label": [1, 0, 1, 1, 0]})
    df.to_parquet(tmp_path / "far.parquet")
    a = he.read_annotations(tmp_path / "far.parquet", engine="duckdb")
    assert list(a.labeler_ids) == sorted(["1000000000000", "3", "5"]) and list(a.item_ids) == [7, 9, 11]
    _same(a, he.read_annotations(df, engine="pandas"))
    sparse = df.assign(item_id=df["item_id"] * 10**9)
    sparse.to_parquet(tmp_path / "sparse.parquet")
    b = he.read_annotations(tmp_path / "sparse.parquet", engine="duckdb")
    assert list(b.item_ids) == [7 * 10**9, 9 * 10**9, 11 * 10**9]
    gone = df.assign(label=np.nan)
    gone.to_parquet(tmp_path / "gone.parquet")
    c = he.read_annotations(tmp_path / "gone.parquet", engine="duckdb")
    assert c.n_items == 0 and c.n_annotations == 0 and c.report.tables[0].dropped == {"missing label": 5}
    _same(c, he.read_annotations(gone, engine="pandas"))
