"""Integer item ids beyond 2**53 get their gold exactly: 2**60 and 2**60 + 1 are one float, two items."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.ingest.coding import whole_numbers


def test_whole_numbers_are_exact_for_digits_and_bounded_for_floats() -> None:
    big = 2**60
    vals, ok = whole_numbers([str(big), str(big + 1), " 7 ", "12.0", "1e3", "x", "", "1.5", str(2**63),
                              str(-(2**63)), "3e20"])
    assert list(ok) == [True, True, True, True, True, False, False, False, False, True, False]
    assert list(vals[ok]) == [big, big + 1, 7, 12, 1000, -(2**63)]


@pytest.mark.parametrize("reader", ["compact", "duckdb"])
@pytest.mark.parametrize("gold_as_text", [False, True])
def test_gold_goes_to_the_item_with_its_exact_id(tmp_path: Path, reader: str, gold_as_text: bool) -> None:
    big = 2**60
    rng = np.random.default_rng(0)
    items = big + np.arange(400, dtype=np.int64)  # neighbours share a float from 2**53 on
    rows = pd.DataFrame({"item_id": np.repeat(items, 3), "labeler_id": np.tile(np.arange(3), 400),
                         "label": rng.integers(0, 2, 1200)})
    rows.to_parquet(tmp_path / "h.parquet")
    odd = items[1::2][:50]  # gold only on odd ids: each one's float is its even neighbour's
    gold = pd.DataFrame({"item_id": [str(x) for x in odd] if gold_as_text else odd, "gold": 1})
    if reader == "compact":
        h = he.read_compact(tmp_path / "h.parquet", gold=gold)
        got = np.asarray(h.gold_set.item_ids).astype(np.int64)
    else:
        a = he.read_annotations(tmp_path / "h.parquet", gold=gold, engine="duckdb")
        got = np.asarray(a.item_ids)[a.gold >= 0].astype(np.int64)
    assert sorted(got.tolist()) == sorted(odd.tolist())
