"""A history read straight into the compiled engine's arrays (issue #20 item 4: 1e9 within memory) gives the
calibration that the same file read as an AnnotationSet gives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.errors import DataError, HeroEvalError
from heroeval.ingest.read import read_compact


def _log(seed: int, rounds: bool, repeats: bool, n: int = 3_000, J: int = 12) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(3 * n, n, replace=False)) + 10  # gaps in the ids
    y = (rng.random(n) < 0.3).astype(int)
    alpha, beta = rng.uniform(0.6, 0.95, J), rng.uniform(0.6, 0.95, J)
    k = rng.integers(1, 6, n)
    item = np.repeat(np.arange(n), k)
    lab = rng.integers(0, J, item.size) * 7 + 3  # integer labeler ids, not 0..J-1
    j = (lab - 3) // 7
    label = (rng.random(item.size) < np.where(y[item] == 1, alpha[j], 1 - beta[j])).astype(float)
    df = pd.DataFrame({"item_id": ids[item], "labeler_id": lab, "label": label})
    if rounds:
        df["round"] = np.where(ids[item] < ids[n // 2], "v1", "v2")
    df.loc[rng.choice(len(df), 4, replace=False), "label"] = np.nan
    if not repeats:
        df = df.drop_duplicates(["item_id", "labeler_id"])
    df = df.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    g = rng.choice(n, n // 10, replace=False)
    gold = pd.DataFrame({"item_id": np.r_[ids[g], [1, 2]], "gold": np.r_[y[g], [1, 0]]})  # two ids with no labels
    return df, gold


@pytest.mark.parametrize(("rounds", "repeats", "w"), [(False, False, 1.0), (True, True, 1.0), (False, True, 0.3)])
def test_compact_history_calibrates_as_the_annotation_set_does(tmp_path: Path, rounds: bool, repeats: bool,
                                                               w: float) -> None:
    df, gold = _log(4, rounds, repeats)
    df.to_parquet(tmp_path / "h.parquet")
    ds = he.read_annotations(tmp_path / "h.parquet", gold=gold, engine="duckdb")
    ch = read_compact(tmp_path / "h.parquet", gold=gold)
    assert (ch.n_items, ch.n_annotations, ch.n_labelers, ch.round_ids) == (ds.n_items, ds.n_annotations,
                                                                          ds.n_labelers, ds.round_ids)
    assert list(ch.labeler_ids) == list(ds.labeler_ids) and ch.repeated_pairs == ds.repeated_pairs
    assert [t.__dict__ for t in ch.report.tables] == [t.__dict__ for t in ds.report.tables]
    assert ch.report.tables[1].dropped == {"gold for an item with no silver label": 2}
    # items by label count (ties in id order), the gold items decoded in id order
    sizes = np.diff(ds.item_ptr)
    order = np.argsort(sizes, kind="stable")
    np.testing.assert_array_equal(np.diff(ch.ptr), sizes[order])
    np.testing.assert_array_equal(ch.gold, ds.gold[order])
    np.testing.assert_array_equal(ch.group, ds.item_round[order])
    np.testing.assert_array_equal(ch.gold_set.item_ids, ds.item_ids[ds.gold >= 0])
    a = he.calibrate(ds, engine="numba", tol=1e-12, history_weight=w)
    b = he.calibrate(ch, tol=1e-12, history_weight=w)
    for f in ("alpha", "beta", "round_prevalence"):
        np.testing.assert_allclose(getattr(b, f), getattr(a, f), rtol=0, atol=1e-10)
    for f in ("n_annotations", "n_items", "gold_tp", "gold_fn", "gold_tn", "gold_fp", "round_n_items",
              "round_n_gold"):
        np.testing.assert_array_equal(getattr(b, f), getattr(a, f))
    assert a.parameter_covariance is not None and b.parameter_covariance is not None
    np.testing.assert_allclose(b.parameter_covariance, a.parameter_covariance, rtol=1e-8, atol=1e-12)
    assert a.gold_scores is not None and b.gold_scores is not None
    np.testing.assert_array_equal(b.gold_scores.y, a.gold_scores.y)
    np.testing.assert_allclose(b.gold_scores.llr, a.gold_scores.llr, rtol=0, atol=1e-8)
    assert b.history is None and b.settings["history_storage"] == "compact"
    # and the estimate for a current round
    cur = df.assign(item_id=df["item_id"] + 10**6).dropna().head(800)
    ea, eb = he.hero1(he.read_annotations(cur), a), he.hero1(he.read_annotations(cur), b)
    assert eb.estimate == pytest.approx(ea.estimate, abs=1e-9)
    np.testing.assert_allclose(tuple(eb.confidence_interval())[:2], tuple(ea.confidence_interval())[:2], rtol=1e-7)


def test_compact_reading_says_what_it_needs(tmp_path: Path) -> None:
    df, gold = _log(5, False, False, n=200)
    df.assign(item_id=df["item_id"].astype(str) + "x").to_parquet(tmp_path / "s.parquet")
    with pytest.raises(DataError, match="compact reading needs integer item ids"):
        read_compact(tmp_path / "s.parquet", gold=gold)
    df.to_csv(tmp_path / "h.csv", index=False)
    with pytest.raises(DataError, match="compact reading needs integer item ids"):
        read_compact(tmp_path / "h.csv", gold=gold)
    df.to_parquet(tmp_path / "h.parquet")
    ch = read_compact(tmp_path / "h.parquet", gold=gold)
    with pytest.raises(HeroEvalError, match="model checks"):
        he.calibrate(ch, checks=True)
    with pytest.raises(HeroEvalError, match="compiled engine"):
        he.calibrate(ch, engine="numpy")
    with pytest.raises(DataError, match="no gold"):
        he.calibrate(read_compact(tmp_path / "h.parquet"))
    rep = pd.concat([df, df.head(2)])
    rep.to_parquet(tmp_path / "r.parquet")
    with pytest.raises(DataError, match="repeated"):
        read_compact(tmp_path / "r.parquet", gold=gold, duplicates="error")
