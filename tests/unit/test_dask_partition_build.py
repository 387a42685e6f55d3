"""A Dask partition's build (``heroeval.stage_a.distributed_parts.build_part``) codes ids as the in-memory
reader does, whatever their type: integer columns (dense or spread, beyond 2**53), text with blanks and
missing values, integers written as floats. Checked against :func:`heroeval.read_annotations` on the same
frame, item by item, and against a plain count of the gold confusion tables. No cluster needed."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.ingest.coding import ids_to_str
from heroeval.stage_a import distributed_parts as parts

COLS = ("item_id", "labeler_id", "label", None)


def _frame(items: list[Any], labelers: list[Any], labels: list[Any]) -> pd.DataFrame:
    return pd.DataFrame({"item_id": items, "labeler_id": labelers, "label": labels})


def _by_item(part: parts.Part) -> dict[str, Counter[tuple[int, int]]]:
    """Each item's (labeler code, label) rows, keyed by the item id as text (gold items only: their ids are kept)."""
    A = part.design.A
    out = {}
    for r, name in zip(part.gold_rows, part.gold_names, strict=True):
        row = A[r]
        out[str(name)] = Counter({(int(c) // 2, int(c) % 2): int(v) for c, v in zip(row.indices, row.data,
                                                                                       strict=True)})
    return out


def _mem_by_item(mem: he.AnnotationSet) -> dict[str, Counter[tuple[int, int]]]:
    out = {}
    for i, name in enumerate(mem.item_ids):
        if mem.gold[i] < 0:
            continue
        s, e = mem.item_ptr[i], mem.item_ptr[i + 1]
        out[str(name)] = Counter(zip(mem.labeler[s:e].tolist(), mem.label[s:e].tolist(), strict=True))
    return out


def _check(df: pd.DataFrame, gold: pd.DataFrame) -> parts.Part:
    mem = he.read_annotations(df, gold=gold)
    gs = pd.Series(gold["gold"].to_numpy(dtype=float),
                   index=pd.Index(ids_to_str(gold["item_id"]).to_numpy(dtype=object)))
    part = parts.build_part(df, COLS, list(mem.labeler_ids), ["all"], gs, 0, None)
    assert part.design.n_items == mem.n_items
    assert part.n_rows == len(df)
    assert sum(part.dropped.values()) == len(df) - int(mem.item_ptr[-1])
    assert _by_item(part) == _mem_by_item(mem)
    # the gold confusion tables, counted plainly from the reader's arrays
    lab_gold = np.repeat(mem.gold, np.diff(mem.item_ptr))
    for name, g, y in (("tp", 1, 1), ("fn", 1, 0), ("tn", 0, 0), ("fp", 0, 1)):
        want = np.bincount(mem.labeler[(lab_gold == g) & (mem.label == y)], minlength=mem.n_labelers)
        np.testing.assert_array_equal(getattr(part, name), want, err_msg=name)
    np.testing.assert_array_equal(part.n_ann, np.bincount(mem.labeler, minlength=mem.n_labelers))
    return part


@pytest.mark.parametrize("spread", [False, True])
def test_integer_ids_dense_and_spread(spread: bool) -> None:
    rng = np.random.default_rng(3)
    base = np.array([2**60, 2**60 + 1, 2**53 + 1, 5, 0]) if spread else np.arange(5)
    items = rng.choice(base, 60)
    df = _frame(items.tolist(), rng.integers(0, 4, 60).tolist(), rng.integers(0, 2, 60).tolist())
    df["item_id"] = df["item_id"].astype(np.int64)
    gold = pd.DataFrame({"item_id": [str(x) for x in base[:3]], "gold": [1, 0, 1]})
    part = _check(df, gold)
    assert sorted(part.gold_names) == sorted(str(x) for x in base[:3])


def test_repeated_pairs_counted_as_the_reader_counts_them() -> None:
    df = _frame([1, 1, 1, 2, 2], [7, 7, 8, 7, 8], [1, 1, 0, 0, 0])
    part = _check(df, pd.DataFrame({"item_id": ["1", "2"], "gold": [1, 0]}))
    assert part.n_repeated == 1
    np.testing.assert_array_equal(part.n_items_lab, [2, 2])


def test_text_ids_blanks_missing_and_floaty() -> None:
    df = _frame(["a", " ", None, "b", "a", "c", "b"], ["x", "y", "x", None, "y", "x", "x"], [1, 0, 1, 1, 0, 0, 1])
    part = _check(df, pd.DataFrame({"item_id": ["a", "b", "c"], "gold": [0, 1, 1]}))
    assert part.dropped == {"missing item id": 2, "missing labeler id": 1}
    # integers written as floats in a text column are the integers' ids, as the reader reads them
    df2 = _frame(["3.0", "4.0", "3.0", "4.0"], ["x", "x", "y", "y"], [1, 0, 1, 1])
    part2 = _check(df2, pd.DataFrame({"item_id": ["3", "4"], "gold": [1, 0]}))
    assert sorted(part2.gold_names) == ["3", "4"]


def test_float_ids_with_a_missing_value() -> None:
    df = _frame([3.0, np.nan, 4.0, 3.0], [1, 1, 2, 2], [1, 0, 0, 1])
    part = _check(df, pd.DataFrame({"item_id": ["3", "4"], "gold": [1, 0]}))
    assert part.dropped == {"missing item id": 1}


def test_gold_by_integer_needs_the_id_written_plainly() -> None:
    """Gold ids '007' or '-0' are not the integers 7 and 0 as the reader reads an integer column ('7', '0')."""
    look = parts.GoldLookup.of(pd.Series([1.0, 0.0, 1.0, 0.0, 1.0, 1.0],
                                         index=pd.Index(["007", "-0", "7", "x", str(2**63), str(-(2**63))],
                                                        dtype=object)))
    assert look.by_int.index.tolist() == [7, -(2**63)]
    df = _frame([7, 0, 7, 0], [1, 1, 2, 2], [1, 0, 1, 0])
    df["item_id"] = df["item_id"].astype(np.int64)
    part = parts.build_part(df, COLS, ["1", "2"], ["all"], look, 0, None)
    assert part.gold_names.tolist() == ["7"]


def test_partitions_in_their_own_dictionaries_widened_to_the_history() -> None:
    """Each partition codes its own labelers and rounds; widened to the history's dictionaries, the partitions
    together are the reader's history: the same rows per item, the same gold tables, rounds and counts."""
    df = pd.DataFrame({"item_id": ["i1", "i1", "i2", "i3", "i3", "i4", "i4", "i5"],
                       "labeler_id": ["b", "d", "b", "a", "c", "c", "e", "a"],
                       "label": [1, 0, 1, 0, 0, 1, 1, 0],
                       "round": ["w2", "w2", "w1", "w3", "w3", "w1", "w1", "w3"]})
    gold = pd.DataFrame({"item_id": ["i1", "i3", "i4", "i5"], "gold": [1, 0, 1, 0]})
    mem = he.read_annotations(df, gold=gold, round_col="round")
    gs = gold.set_index("item_id")["gold"].astype(float)
    cols = ("item_id", "labeler_id", "label", "round")
    built = [parts.build_local(df.iloc[:3], cols, gs, 0, None), parts.build_local(df.iloc[3:], cols, gs, 1, None)]
    assert built[0].labelers == ("b", "d") and built[1].labelers == ("a", "c", "e")
    assert built[0].rounds == ("w1", "w2") and built[1].rounds == ("w1", "w3")
    labs, rounds = list(mem.labeler_ids), list(mem.round_ids)
    wide = [parts.build_part(df.iloc[:3], cols, labs, rounds, gs, 0, None),
            parts.build_part(df.iloc[3:], cols, labs, rounds, gs, 1, None)]
    got: dict[str, Counter[tuple[int, int]]] = {}
    for p in wide:
        got |= _by_item(p)
        assert p.design.A.has_sorted_indices
    assert got == _mem_by_item(mem)
    lab_gold = np.repeat(mem.gold, np.diff(mem.item_ptr))
    for name, g, y in (("tp", 1, 1), ("fn", 1, 0), ("tn", 0, 0), ("fp", 0, 1)):
        want = np.bincount(mem.labeler[(lab_gold == g) & (mem.label == y)], minlength=mem.n_labelers)
        np.testing.assert_array_equal(sum(getattr(p, name) for p in wide), want, err_msg=name)
    np.testing.assert_array_equal(sum(p.round_items for p in wide), np.bincount(mem.item_round, minlength=3))
    np.testing.assert_array_equal(sum(p.design.code_counts for p in wide),
                                  np.bincount(2 * mem.labeler + mem.label, minlength=2 * mem.n_labelers))
    # each item's round, through the widened codes
    for p in wide:
        for r, name in zip(p.gold_rows, p.gold_names, strict=True):
            k = list(mem.item_ids).index(name)
            assert p.design.group[r] == mem.item_round[k]
    with pytest.raises(he.DataError, match="labeler 'e' is not in the history's labelers"):
        parts.build_part(df.iloc[3:], cols, ["a", "c"], rounds, gs, 1, None)
