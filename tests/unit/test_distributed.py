"""Stage A on a Dask LocalCluster with 2 workers equals the in-memory fit (issue #7 item 5)."""

from __future__ import annotations

import glob
import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.errors import DataError

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
from heroeval.stage_a.distributed import calibrate_dask  # noqa: E402

EXAMPLE = Path(glob.glob(str(Path(he.__file__).parent / "examples" / "*" / "history.csv.gz"))[0]).parent


@pytest.fixture(scope="module")
def client() -> Iterator[object]:
    logging.getLogger("distributed").setLevel(logging.ERROR)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            distributed.Client(cl) as c:
        yield c


def _close(a: he.Calibration, b: he.Calibration, tol: float = 1e-9) -> None:
    assert a.labeler_ids == b.labeler_ids and a.round_ids == b.round_ids
    for f in ("alpha", "beta", "round_prevalence"):
        np.testing.assert_allclose(getattr(a, f), getattr(b, f), rtol=0, atol=tol)
    for f in ("n_annotations", "n_items", "gold_tp", "gold_fn", "gold_tn", "gold_fp", "round_n_items", "round_n_gold"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert a.parameter_covariance is not None and b.parameter_covariance is not None
    scale = np.max(np.abs(a.parameter_covariance))
    np.testing.assert_allclose(a.parameter_covariance, b.parameter_covariance, rtol=0, atol=tol * scale)


def test_demo_history_on_two_workers_equals_in_memory(client: object) -> None:
    mem = he.calibrate(he.read_annotations(EXAMPLE / "history.csv.gz", gold=EXAMPLE / "history_gold.csv"))
    df = pd.read_csv(EXAMPLE / "history.csv.gz", dtype=str)
    ddf = dd.from_pandas(df, npartitions=5)  # rows of one item spread over partitions: shuffled on the item
    cal = calibrate_dask(ddf, gold=EXAMPLE / "history_gold.csv", client=client)
    _close(mem, cal)
    assert cal.convergence.n_iter == mem.convergence.n_iter
    assert cal.history is None and cal.settings["engine"] == "dask"
    # the estimate built from either calibration is the same
    cur = he.read_annotations(EXAMPLE / "current.csv.gz")
    e1, e2 = he.hero1(cur, mem), he.hero1(cur, cal)
    assert e1.estimate == pytest.approx(e2.estimate, abs=1e-10)
    assert e1.standard_error == pytest.approx(e2.standard_error, rel=1e-8)


def test_parquet_partitioned_by_item_with_missing_rows(client: object, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n_items, J = 3000, 15
    y = rng.random(n_items) < 0.35
    a, b = rng.uniform(0.6, 0.95, J), rng.uniform(0.6, 0.95, J)
    k = rng.integers(2, 6, n_items)
    item = np.repeat(np.arange(n_items), k)
    lab = np.concatenate([rng.choice(J, kk, replace=False) for kk in k])
    z = (rng.random(item.size) < np.where(y[item], a[lab], 1 - b[lab])).astype(float)
    z[rng.choice(z.size, 9, replace=False)] = np.nan
    df = pd.DataFrame({"item_id": item, "labeler_id": [f"j{x}" for x in lab], "label": z})
    for q, part in enumerate(np.array_split(np.arange(n_items), 4)):  # whole items per file
        df[df["item_id"].isin(part)].to_parquet(tmp_path / f"h{q}.parquet")
    g = np.flatnonzero(rng.random(n_items) < 0.05)
    gold = pd.DataFrame({"item_id": g, "gold": y[g].astype(int)})
    mem = he.calibrate(he.read_annotations(df, gold=gold))
    cal = calibrate_dask(str(tmp_path / "h*.parquet"), gold=gold, client=client, partitioned_by_item=True)
    _close(mem, cal)
    assert cal.settings["rows_read"] == len(df) and cal.settings["rows_dropped"] == {"missing label": 9}


def test_errors(client: object) -> None:
    df = pd.DataFrame({"item_id": ["1", "2"], "labeler_id": ["a", "b"], "label": ["1", "7"]})
    with pytest.raises(DataError, match="not binary"):
        calibrate_dask(dd.from_pandas(df, npartitions=1), gold=pd.DataFrame({"item_id": ["1"], "gold": [1]}),
                       client=client)
    ok = df.assign(label=["1", "0"])
    with pytest.raises(DataError, match="no gold"):
        calibrate_dask(dd.from_pandas(ok, npartitions=1), gold=pd.DataFrame({"item_id": ["9"], "gold": [1]}),
                       client=client)
    with pytest.raises(he.errors.HeroEvalError, match="dask DataFrame"):
        calibrate_dask(df, gold=pd.DataFrame({"item_id": ["1"], "gold": [1]}), client=client)


def test_partitioned_by_item_is_checked(client: object) -> None:
    df = pd.DataFrame({"item_id": ["1", "1", "2", "2"], "labeler_id": ["a", "b", "a", "b"], "label": ["1", "0", "1", "1"]})
    ddf = dd.from_pandas(df, npartitions=2, sort=False)  # item "1"... rows 0-1 and 2-3: check one split
    ddf_split = dd.from_pandas(df.iloc[[0, 2, 1, 3]], npartitions=2, sort=False)  # item 1 in both partitions
    gold = pd.DataFrame({"item_id": ["1"], "gold": [1]})
    with pytest.raises(DataError, match="more than one partition"):
        calibrate_dask(ddf_split, gold=gold, client=client, partitioned_by_item=True)
    calibrate_dask(ddf, gold=gold, client=client, partitioned_by_item=True)
