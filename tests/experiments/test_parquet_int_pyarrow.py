"""experiments/parquet_int_pyarrow.py (issue #43 item 5, pyarrow's reader for footer-qualified files): an
experiment, checked here cheaply against the product's read_compact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from heroeval.errors import DataError
from heroeval.ingest import _duckdb, _parquet_int
from heroeval.ingest.compact import CompactBuilder
from heroeval.ingest.options import ColumnNames
from heroeval.ingest.read import read_compact

from experiments import parquet_int_pyarrow as ex


def _history(seed: int, n: int = 500, low: int = 10, J: int = 9) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(3 * n, n, replace=False)) + low
    item = np.repeat(ids, rng.integers(1, 7, n))
    df = pd.DataFrame({"item_id": item.astype(np.int64),
                       "labeler_id": (rng.integers(0, J, item.size) * 7 + 3).astype(np.int32),
                       "label": rng.integers(0, 2, item.size).astype(np.int8)})
    return df.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def _write(df: pd.DataFrame, path: Path, row_group_size: int = 333) -> Path:
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, row_group_size=row_group_size)
    return path


@pytest.mark.parametrize("bool_labels", [False, True])
def test_the_builder_gives_read_compacts_history(tmp_path: Path, bool_labels: bool) -> None:
    df = _history(1, low=2**40 if bool_labels else -5_000)
    if bool_labels:
        df = df.assign(label=df["label"].astype(bool))
    f = _write(df, tmp_path / "h.parquet")
    ids = np.unique(df["item_id"].to_numpy())
    gold = pd.DataFrame({"item_id": np.r_[ids[::10], ids.max() + 5], "gold": np.arange(ids[::10].size + 1) % 2})
    got = ex.read_compact_pyarrow(f, gold=gold)
    want = read_compact(f, gold=gold)
    assert ex.same_history(got, want)
    assert got.report.tables[0].__dict__ == want.report.tables[0].__dict__
    assert got.report.tables[1].dropped == want.report.tables[1].dropped == {"gold for an item with no silver label": 1}
    np.testing.assert_array_equal(got.gold_set.gold, want.gold_set.gold)


def test_each_items_labels_stay_in_file_order(tmp_path: Path) -> None:
    df = _history(8)
    h = ex.read_compact_pyarrow(_write(df, tmp_path / "h.parquet"))
    # the expected layout from the rows: items by label count, ties in id order, rows in file order
    labs = np.array(sorted({str(v) for v in df["labeler_id"]}))
    code = 2 * np.searchsorted(labs, df["labeler_id"].astype(str).to_numpy()) + df["label"].to_numpy()
    ids, counts = np.unique(df["item_id"].to_numpy(), return_counts=True)
    order = ids[np.argsort(counts, kind="stable")]
    np.testing.assert_array_equal(h.code, np.concatenate([code[df["item_id"].to_numpy() == i] for i in order]))


def test_a_footer_that_lies_is_an_error_naming_the_file_and_row(tmp_path: Path) -> None:
    df = _history(12, low=0)
    f = _write(df, tmp_path / "h.parquet")
    p = _parquet_int.plan([str(f)], "parquet", ColumnNames(), _duckdb._range_pays)
    assert p is not None
    hi = int(df["item_id"].max())
    narrow = _parquet_int.ParquetPlan(**{**p.__dict__, "item_range": (p.item_range[0], hi - 1)})
    first = int(np.flatnonzero(df["item_id"].to_numpy() == hi)[0])
    with pytest.raises(DataError, match=rf"h\.parquet, row {first + 1}: an item or labeler id outside"):
        ex.build(narrow)
    # a label other than 0 and 1 that the footer did not show: caught by the placing kernel
    b = CompactBuilder(0, 3, has_rounds=False)
    item = np.array([0, 1, 1, 3], np.int64)
    lab = np.array([5, 6, 5, 6], np.int32)
    counts = np.zeros(2, np.int64)
    assert ex.count_ids(b, item, lab, 5, counts) == -1 and counts.tolist() == [2, 2]
    assert ex.count_ids(b, np.array([4], np.int64), lab[:1], 5, counts) == 0  # past the item range
    b.layout(2)
    assert ex.add_ids(b, item, lab, np.array([1, 0, 2, 1], np.int8), 5, np.array([0, 1], np.int32)) == 2


def test_the_script_runs_and_compares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(_history(3, n=100), tmp_path / "h.parquet")
    assert ex.main([str(f), "--compare"]) == 0
    assert "same history: True" in capsys.readouterr().out
