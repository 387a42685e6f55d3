"""The model checks' folds are a function of the gold items' ids, not of the order a reader gives the items in.

The DuckDB reader keeps integer item ids of a Parquet file as numbers (ordered 2 < 10), the pandas reader and
a Dask history read them as text ("10" < "2"); the folds were once drawn over positions, so the same history
read two ways got other held-out folds and other log scores (1e-5 apart at 1e8, docs/scale.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.checks import run_checks
from heroeval.checks.model_checks import _folds
from heroeval.ingest.coding import item_order
from heroeval.simulate import paper_dgp


def test_the_order_of_items_depends_on_their_ids_as_text_and_the_seed_alone() -> None:
    ids = np.array([3, 10, 2, 41, 7], dtype=np.int64)
    text = ids.astype(str).astype(object)
    o_int, o_txt = item_order(ids, 0), item_order(text, 0)
    assert list(ids[o_int]) == [int(x) for x in text[o_txt]]
    perm = np.array([4, 2, 0, 3, 1])
    assert list(ids[perm][item_order(ids[perm], 0)]) == list(ids[o_int])  # the same items in any order
    assert sorted(o_int) == list(range(5))
    orders = {tuple(ids[item_order(ids, s)]) for s in range(20)}
    assert len(orders) > 10  # the seed changes it


def test_one_history_read_by_two_readers_gets_the_same_checks(tmp_path: Path) -> None:
    hist = paper_dgp(3, rho=0.3).history
    ids = hist.item_ids.astype(str)
    num = {s: k + 1 for k, s in enumerate(sorted(ids))}  # integer ids 1..n: text order differs from numeric
    rows = pd.DataFrame({"item_id": [num[ids[i]] for i in np.repeat(np.arange(hist.n_items), np.diff(hist.item_ptr))],
                         "labeler_id": hist.labeler_ids[hist.labeler], "label": hist.label})
    rows.to_parquet(tmp_path / "h.parquet")
    isg = hist.gold >= 0
    gold = pd.DataFrame({"item_id": [num[s] for s in ids[isg]], "gold": hist.gold[isg]})
    a = he.read_annotations(tmp_path / "h.parquet", gold=gold, engine="pandas")
    b = he.read_annotations(tmp_path / "h.parquet", gold=gold, engine="duckdb")
    ga, gb = a.take_items(np.flatnonzero(a.gold >= 0)), b.take_items(np.flatnonzero(b.gold >= 0))
    assert [str(x) for x in ga.item_ids] != [str(x) for x in gb.item_ids]  # the readers order the items differently
    fa = [set(np.asarray(ga.item_ids)[f].astype(str)) for f in _folds(ga, 5, 0)]
    fb = [set(np.asarray(gb.item_ids)[f].astype(str)) for f in _folds(gb, 5, 0)]
    assert fa == fb
    ca, cb = run_checks(a, past_rounds=False), run_checks(b, past_rounds=False)
    assert ca.chosen_weight == cb.chosen_weight
    for w in ca.log_score:
        assert ca.log_score[w][0] == pytest.approx(cb.log_score[w][0], abs=1e-9)
