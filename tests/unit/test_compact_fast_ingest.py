"""read_compact's footer path (issue #43 item 5: files whose Parquet footers leave nothing to validate skip the
validating scan and are read by DuckDB's two streaming scans) gives the CompactHistory the full SQL path gives,
and files that do not qualify go through that path with its messages. (The pyarrow reader that was measured
against it: experiments/parquet_int_pyarrow.py, tests/experiments/test_parquet_int_pyarrow.py.)"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from heroeval.errors import DataError
from heroeval.ingest import _duckdb, _parquet_int
from heroeval.ingest.compact import CompactHistory
from heroeval.ingest.options import ColumnNames
from heroeval.ingest.read import read_compact


def _history(seed: int, n: int = 2_000, J: int = 9, low: int = 10, gaps: bool = True, repeats: bool = True,
             lab_step: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ids = (np.sort(rng.choice(3 * n, n, replace=False)) if gaps else np.arange(n)) + low
    k = rng.integers(1, 7, n)
    item = np.repeat(ids, k)
    lab = rng.integers(0, J, item.size) * lab_step + 3
    df = pd.DataFrame({"item_id": item.astype(np.int64), "labeler_id": lab.astype(np.int32),
                       "label": rng.integers(0, 2, item.size).astype(np.int8)})
    if not repeats:
        df = df.drop_duplicates(["item_id", "labeler_id"])
    return df.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def _gold(df: pd.DataFrame, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    ids = np.unique(df["item_id"].to_numpy())
    g = rng.choice(ids, max(1, ids.size // 10), replace=False)
    absent = [int(ids.max()) + 5, int(ids.min()) - 3]  # gold for ids with no label: counted as dropped
    return pd.DataFrame({"item_id": np.r_[g, absent], "gold": rng.integers(0, 2, g.size + 2)})


def _write(df: pd.DataFrame, path: Path, row_group_size: int = 1_500, **kw: Any) -> Path:
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, row_group_size=row_group_size, **kw)
    return path


def _canonical(ptr: np.ndarray, code: np.ndarray) -> np.ndarray:
    """The codes sorted within each item: the SQL path streams an item's rows in no fixed order."""
    item = np.repeat(np.arange(ptr.shape[0] - 1), np.diff(ptr))
    return code[np.lexsort((code, item))]


def _report(h: CompactHistory) -> list[dict[str, Any]]:
    return [{k: (dict(v) if k in ("dropped", "notes") else v) for k, v in t.__dict__.items()} for t in h.report.tables]


def _assert_same(a: CompactHistory, b: CompactHistory) -> None:
    for f in ("ptr", "gold", "group"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype, f
        np.testing.assert_array_equal(x, y, err_msg=f)
    assert a.code.dtype == b.code.dtype
    np.testing.assert_array_equal(_canonical(a.ptr, a.code), _canonical(b.ptr, b.code))
    assert list(a.labeler_ids) == list(b.labeler_ids) and a.round_ids == b.round_ids
    assert a.repeated_pairs == b.repeated_pairs and a.name == b.name
    assert _report(a) == _report(b)
    ga, gb = a.gold_set, b.gold_set
    for f in ("item_ids", "item_ptr", "gold", "item_round"):
        np.testing.assert_array_equal(getattr(ga, f), getattr(gb, f), err_msg=f)
    np.testing.assert_array_equal(_canonical(ga.item_ptr, 2 * ga.labeler + ga.label),
                                  _canonical(gb.item_ptr, 2 * gb.labeler + gb.label))


def _read(monkeypatch: pytest.MonkeyPatch, footers: bool, *args: Any, **kw: Any) -> tuple[CompactHistory, bool]:
    """read_compact with the footer path allowed (``footers``) or not (the full SQL path); and whether the footer
    path was taken."""
    taken: list[bool] = []
    real = _parquet_int.plan

    def spy(*a: Any, **k: Any) -> Any:
        p = real(*a, **k)
        taken.append(p is not None)
        return p

    with monkeypatch.context() as m:
        m.setattr(_parquet_int, "plan", spy)
        m.setattr(_parquet_int, "ENABLED", footers)
        h = read_compact(*args, **kw)
    return h, bool(taken and taken[0])


@pytest.mark.parametrize(("seed", "low", "gaps", "repeats"),
                         [(1, 10, True, True), (2, 0, False, False), (3, -5_000, True, True), (4, 2**40, True, False)])
def test_footer_path_gives_the_sql_paths_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int,
                                                 low: int, gaps: bool, repeats: bool) -> None:
    df = _history(seed, low=low, gaps=gaps, repeats=repeats)
    gold = _gold(df, seed)
    f = _write(df, tmp_path / "h.parquet")
    new, taken = _read(monkeypatch, True, f, gold=gold)
    old, old_taken = _read(monkeypatch, False, f, gold=gold)
    assert taken and not old_taken
    _assert_same(new, old)
    assert new.n_annotations == len(df) and new.report.tables[0].rows_read == len(df)
    assert new.repeated_pairs == repeats
    assert new.report.tables[1].dropped == {"gold for an item with no silver label": 2}


def test_footer_path_reads_several_files_bool_labels_and_narrow_ids(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    df = _history(7, n=3_000, lab_step=1)
    df = df.assign(item_id=df["item_id"].astype(np.int32), label=df["label"].astype(bool))
    parts = np.array_split(np.arange(len(df)), 3)
    for k, rows in enumerate(parts):
        _write(df.iloc[rows], tmp_path / f"part{k}.parquet", row_group_size=997)
    gold = _gold(df, 7)
    new, taken = _read(monkeypatch, True, str(tmp_path / "part*.parquet"), gold=gold, name="log")
    old, _ = _read(monkeypatch, False, str(tmp_path / "part*.parquet"), gold=gold, name="log")
    assert taken
    _assert_same(new, old)
    assert new.n_annotations == len(df)


def test_repeated_pairs_error_on_the_footer_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = _write(_history(9, repeats=True), tmp_path / "h.parquet")
    with pytest.raises(DataError, match="repeated"):
        _read(monkeypatch, True, f, duplicates="error")


def _nulls(df: pd.DataFrame) -> pd.DataFrame:
    out = df.astype({"item_id": "Int64", "labeler_id": "Int32", "label": "Int8"})
    out.loc[[3, 50], "item_id"] = pd.NA
    out.loc[[7], "labeler_id"] = pd.NA
    out.loc[[11, 12, 13], "label"] = pd.NA
    return out


@pytest.mark.parametrize(("change", "reason"), [
    (_nulls, "missing values"),
    (lambda d: d.assign(round=np.where(d["item_id"] % 2 == 0, "a", "b")), "round column"),
    (lambda d: d.assign(label=d["label"].astype(float)), "labels that are not integers"),
    (lambda d: d.assign(labeler_id=d["labeler_id"].astype(str)), "not integers"),
])
def test_files_that_do_not_qualify_take_the_sql_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture, change: Any,
                                                     reason: str) -> None:
    df = change(_history(10))
    f = _write(df, tmp_path / "h.parquet")
    with caplog.at_level(logging.INFO, logger="heroeval"):
        assert _parquet_int.plan([str(f)], "parquet", ColumnNames(), _duckdb._range_pays) is None
    assert reason in caplog.text
    h, taken = _read(monkeypatch, True, f, gold=_gold(_history(10), 10))
    old, _ = _read(monkeypatch, False, f, gold=_gold(_history(10), 10))
    assert not taken
    _assert_same(h, old)
    if change is _nulls:  # every row read is used or counted with its reason
        rep = h.report.tables[0]
        assert rep.dropped == {"missing item id": 2, "missing labeler id": 1, "missing label": 3}
        assert rep.rows_used + sum(rep.dropped.values()) == rep.rows_read == len(df)


def test_no_statistics_or_a_bad_label_takes_the_sql_path_and_its_message(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    df = _history(11)
    f = _write(df, tmp_path / "nostats.parquet", write_statistics=False)
    assert _parquet_int.plan([str(f)], "parquet", ColumnNames(), _duckdb._range_pays) is None
    bad = df.copy()
    bad.loc[17, "label"] = 2
    g = _write(bad, tmp_path / "bad.parquet")
    assert _parquet_int.plan([str(g)], "parquet", ColumnNames(), _duckdb._range_pays) is None
    with pytest.raises(DataError, match=r"bad\.parquet, row 18: label 2 in column 'label' is not binary"):
        _read(monkeypatch, True, g)


def test_a_footer_that_lies_sends_the_files_through_the_validating_scan(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """A row outside the ranges the footers gave (the files changed, or their statistics are wrong) stops the
    footer path; the files are read again by the validating scan: the same history as the SQL path."""
    df = _history(12, low=0, gaps=False)
    f = _write(df, tmp_path / "h.parquet")
    p = _parquet_int.plan([str(f)], "parquet", ColumnNames(), _duckdb._range_pays)
    assert p is not None
    old, _ = _read(monkeypatch, False, f)
    hi = int(df["item_id"].max())
    for lie in ({"item_range": (0, hi - 1)}, {"labeler_range": (p.labeler_range[0], p.labeler_range[1] - 1)}):
        with monkeypatch.context() as m, caplog.at_level(logging.WARNING, logger="heroeval"):
            m.setattr(_parquet_int, "plan", lambda *a, lie=lie, **k: _parquet_int.ParquetPlan(**{**p.__dict__, **lie}))
            h = read_compact(f)
        assert "outside the counted range" in caplog.text and "validating scan" in caplog.text
        _assert_same(h, old)
        caplog.clear()


def test_a_label_the_footers_did_not_show_is_named_by_the_validating_scan(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Footers that showed labels in [0, 1] over a file with a label 2: the footer path's scan stops at that
    row (no history with a code out of range), and the validating scan names it."""
    bad = _history(14, low=0, gaps=False)
    bad.loc[17, "label"] = 2
    g = _write(bad, tmp_path / "bad.parquet")
    good = _write(bad.assign(label=bad["label"].clip(0, 1)), tmp_path / "good.parquet")
    p = _parquet_int.plan([str(good)], "parquet", ColumnNames(), _duckdb._range_pays)
    assert p is not None
    with monkeypatch.context() as m:  # the good file's footers, the bad file's rows
        m.setattr(_parquet_int, "plan", lambda *a, **k: _parquet_int.ParquetPlan(**{**p.__dict__, "files": (str(g),)}))
        with pytest.raises(DataError, match=r"bad\.parquet, row 18: label 2 in column 'label' is not binary"):
            read_compact(g)


def test_integer_and_text_gold_ids_attach_the_same_gold(tmp_path: Path) -> None:
    df = _history(13, low=2**40, gaps=False)
    f = _write(df, tmp_path / "h.parquet")
    gold = _gold(df, 13)
    a = read_compact(f, gold=gold)
    b = read_compact(f, gold=gold.astype({"item_id": str}).assign(item_id=lambda g: " " + g["item_id"]))
    np.testing.assert_array_equal(a.gold, b.gold)
    np.testing.assert_array_equal(a.gold_set.item_ids, b.gold_set.item_ids)
    assert a.report.tables[1].__dict__ == {**b.report.tables[1].__dict__, "source": a.report.tables[1].source}
