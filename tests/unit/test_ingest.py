"""Ingest: formats, column names, row policies and the row accounting."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import heroeval as he
from heroeval.errors import DataError

ANN = pd.DataFrame(
    {
        "item_id": ["b", "a", "b", "c", "a"],
        "labeler_id": ["w1", "w1", "w2", "w2", "w3"],
        "label": [1, 0, 1, 0, 1],
    }
)
GOLD = pd.DataFrame({"item_id": ["a", "c"], "gold": [0, 0]})


def _check_accounting(ds: he.AnnotationSet) -> None:
    for t in ds.report.tables:
        assert t.rows_read == t.rows_used + sum(t.dropped.values())


def test_codes_sorted_by_item_and_labeler() -> None:
    ds = he.read_annotations(ANN, gold=GOLD)
    assert list(ds.item_ids) == ["a", "b", "c"]
    assert list(ds.labeler_ids) == ["w1", "w2", "w3"]
    assert ds.item_ptr.tolist() == [0, 2, 4, 5]
    # item a: rows (a, w1, 0) and (a, w3, 1) in input order
    assert ds.labeler.tolist() == [0, 2, 0, 1, 1]
    assert ds.label.tolist() == [0, 1, 1, 1, 0]
    assert ds.gold.tolist() == [0, -1, 0]
    assert ds.n_gold == 2 and ds.round_ids == ("all",)
    _check_accounting(ds)


@pytest.mark.parametrize("fmt", ["csv", "csv.gz", "tsv", "parquet", "jsonl"])
def test_file_formats_agree(tmp_path: Path, fmt: str) -> None:
    p = tmp_path / f"ann.{fmt}"
    g = tmp_path / "gold.csv"
    GOLD.to_csv(g, index=False)
    if fmt.startswith("csv"):
        ANN.to_csv(p, index=False)
    elif fmt == "tsv":
        ANN.to_csv(p, index=False, sep="\t")
    elif fmt == "parquet":
        ANN.to_parquet(p)
    else:
        ANN.to_json(p, orient="records", lines=True)
    ds = he.read_annotations(p, gold=g)
    ref = he.read_annotations(ANN, gold=GOLD)
    assert list(ds.item_ids) == list(ref.item_ids)
    assert np.array_equal(ds.label, ref.label) and np.array_equal(ds.gold, ref.gold)
    assert ds.name == "ann"


@pytest.mark.parametrize("kind", ["polars", "pyarrow"])
def test_in_memory_tables(kind: str) -> None:
    obj = pl.from_pandas(ANN) if kind == "polars" else pa.Table.from_pandas(ANN)
    ds = he.read_annotations(obj)
    assert ds.n_annotations == 5 and kind in ds.report.tables[0].source


def test_crowdkit_columns_and_gold_series() -> None:
    df = ANN.rename(columns={"item_id": "task", "labeler_id": "worker"})
    gt = pd.Series([0, 0], index=["a", "c"])
    ds = he.read_annotations(df, gold=gt)
    assert ds.n_gold == 2


def test_custom_column_names() -> None:
    df = ANN.rename(columns={"item_id": "prompt", "labeler_id": "rater", "label": "bad"})
    ds = he.read_annotations(df, item_col="prompt", labeler_col="rater", label_col="bad")
    assert ds.n_items == 3
    with pytest.raises(DataError, match=r"no column 'nope' for the item"):
        he.read_annotations(df, item_col="nope")
    with pytest.raises(DataError, match=r"cannot find the item column .*\['prompt', 'rater', 'bad'\]"):
        he.read_annotations(df)


def test_ids_are_strings_not_numbers() -> None:
    df = pd.DataFrame({"item_id": ["007", "7"], "labeler_id": ["1", "1"], "label": [1, 0]})
    ds = he.read_annotations(df)
    assert list(ds.item_ids) == ["007", "7"]


def test_csv_ids_kept_verbatim(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text("item_id,labeler_id,label\n007,01,1\n7,1,0\n")
    ds = he.read_annotations(p)
    assert sorted(ds.item_ids) == ["007", "7"] and sorted(ds.labeler_ids) == ["01", "1"]


def test_float_ids_from_nan_columns_match_integer_gold() -> None:
    df = pd.DataFrame({"item_id": [1.0, 2.0, np.nan], "labeler_id": ["a", "a", "a"], "label": [1, 0, 1]})
    ds = he.read_annotations(df, gold=pd.DataFrame({"item_id": [1], "gold": [1]}))
    assert list(ds.item_ids) == ["1", "2"] and ds.n_gold == 1
    assert ds.report.tables[0].dropped == {"missing item id": 1}


@pytest.mark.parametrize(
    ("values", "ok"),
    [
        ([True, False], [1, 0]),
        (["true", "FALSE"], [1, 0]),
        ([1.0, 0.0], [1, 0]),
        (["1", " 0 "], [1, 0]),
    ],
)
def test_binary_spellings(values: list[object], ok: list[int]) -> None:
    df = pd.DataFrame({"item_id": ["x", "y"], "labeler_id": ["a", "a"], "label": values})
    ds = he.read_annotations(df)
    assert ds.label.tolist() == ok


def test_non_binary_label_names_file_row_and_value(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_text("item_id,labeler_id,label\ni1,a,1\ni2,a,2\ni3,a,3\n")
    with pytest.raises(DataError, match=r"bad\.csv, row 2 \(line 3\): label '2' in column 'label' is not binary.*2 such row"):
        he.read_annotations(p)
    df = pd.DataFrame({"item_id": ["x", "y"], "labeler_id": ["a", "a"], "label": [0, 5]})
    with pytest.raises(DataError, match=r"<pandas.DataFrame annotations>, row 2: label 5"):
        he.read_annotations(df)
    df = pd.DataFrame({"item_id": ["x"], "labeler_id": ["a"], "label": ["yes please"]})
    with pytest.raises(DataError, match=r"'yes please'"):
        he.read_annotations(df)


def test_missing_values_dropped_and_counted(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    p.write_text("item_id,labeler_id,label\ni1,a,1\n,a,1\ni2,,0\ni3,b,\ni4,b,0\n")
    ds = he.read_annotations(p)
    t = ds.report.tables[0]
    assert t.rows_read == 5 and t.rows_used == 2
    assert dict(t.dropped) == {"missing item id": 1, "missing labeler id": 1, "missing label": 1}
    with pytest.raises(DataError, match=r"m\.csv, row 2 \(line 3\): missing item"):
        he.read_annotations(p, missing="error")


def test_duplicate_policies() -> None:
    df = pd.DataFrame({"item_id": ["x", "x", "x", "y"], "labeler_id": ["a", "a", "b", "a"], "label": [1, 0, 1, 0]})
    keep = he.read_annotations(df)
    assert keep.n_annotations == 4
    assert keep.report.tables[0].notes == {"repeated (item, labeler) pair kept as separate labels": 1}
    first = he.read_annotations(df, duplicates="first")
    assert first.n_annotations == 3 and first.label[:2].tolist() == [1, 1]
    assert sum(first.report.tables[0].dropped.values()) == 1
    with pytest.raises(DataError, match=r"row 2: repeated \(item, labeler\) pair \('x', 'a'\)"):
        he.read_annotations(df, duplicates="error")
    with pytest.raises(DataError, match="duplicates must be"):
        he.read_annotations(df, duplicates="sum")  # type: ignore[arg-type]


def test_gold_policies() -> None:
    gold = pd.DataFrame({"item_id": ["a", "zzz", "c", "c", None], "gold": [0, 1, 0, 0, 1]})
    ds = he.read_annotations(ANN, gold=gold)
    t = ds.report.tables[1]
    assert t.table == "gold" and t.rows_read == 5 and t.rows_used == 2
    assert dict(t.dropped) == {
        "missing item id": 1,
        "gold for an item with no silver label": 1,
        "repeated gold row (same value)": 1,
    }
    bad = pd.DataFrame({"item_id": ["a", "a"], "gold": [0, 1]})
    with pytest.raises(DataError, match=r"row 2: gold for item 'a' is 1 here but 0 on an earlier row"):
        he.read_annotations(ANN, gold=bad)
    with pytest.raises(DataError, match=r"gold label 'maybe'"):
        he.read_annotations(ANN, gold=pd.DataFrame({"item_id": ["a"], "gold": ["maybe"]}))


def test_covariate_policies() -> None:
    cov = pd.DataFrame({"item_id": ["a", "b", "c", "q"], "len": [1.0, 2.0, 3.0, 9.0], "flag": [True, False, True, True]})
    ds = he.read_annotations(ANN, covariates=cov)
    assert ds.covariate_names == ("len", "flag")
    assert ds.covariates is not None and ds.covariates[:, 0].tolist() == [1.0, 2.0, 3.0]
    assert ds.report.tables[1].dropped == {"covariates for an item with no silver label": 1}
    with pytest.raises(DataError, match=r"1 annotated item\(s\) have no covariate row, e.g. \['c'\]"):
        he.read_annotations(ANN, covariates=cov.iloc[:2])
    with pytest.raises(DataError, match=r"covariate column 'txt' is not numeric"):
        he.read_annotations(ANN, covariates=cov.assign(txt="hello"))
    nan = cov.assign(len=[1.0, np.nan, 3.0, 9.0])
    with pytest.raises(DataError, match=r"row 2: covariate 'len' is missing"):
        he.read_annotations(ANN, covariates=nan)
    with pytest.raises(DataError, match=r"second covariate row for item 'a'"):
        he.read_annotations(ANN, covariates=pd.concat([cov, cov.iloc[:1]]))
    sub = he.read_annotations(ANN, covariates=cov, covariate_cols=["len"])
    assert sub.covariate_names == ("len",)


def test_rounds() -> None:
    df = ANN.assign(round=["r2", "r1", "r2", "r2", "r1"])
    ds = he.read_annotations(df)
    assert ds.round_ids == ("r1", "r2") and ds.item_round.tolist() == [0, 1, 1]
    clash = ANN.assign(round=["r2", "r1", "r1", "r2", "r1"])
    with pytest.raises(DataError, match=r"row 3: item 'b' is in round 'r1' here but in round 'r2'.*round_col=False"):
        he.read_annotations(clash)
    assert he.read_annotations(clash, round_col=False).n_rounds == 1


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"annotations file '.*nope.csv' does not exist"):
        he.read_annotations(tmp_path / "nope.csv")
    p = tmp_path / "x.xlsx"
    p.write_text("x")
    with pytest.raises(DataError, match=r"unknown format '.xlsx'"):
        he.read_annotations(p)
    with pytest.raises(DataError, match="expected a file path or a pandas/polars/pyarrow table, got int"):
        he.read_annotations(3)


def test_report_is_json_serialisable() -> None:
    ds = he.read_annotations(ANN, gold=GOLD)
    s = json.dumps(ds.report.to_dict())
    assert "annotations" in s
    assert ds.report.lines()[0].startswith("annotations (<pandas.DataFrame annotations>): 5 rows read, 5 used")


def test_arrays_are_read_only() -> None:
    ds = he.read_annotations(ANN)
    with pytest.raises(ValueError, match="read-only"):
        ds.label[0] = 1


def test_select_labelers() -> None:
    ds = he.read_annotations(ANN, gold=GOLD)
    sub, n_ann, n_items = ds.select_labelers(np.array([True, False, False]))
    assert (n_ann, n_items) == (3, 1)
    assert list(sub.item_ids) == ["a", "b"] and list(sub.labeler_ids) == ["w1"]
    assert sub.gold.tolist() == [0, -1]
