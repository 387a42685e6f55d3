"""Stage A on a Dask LocalCluster with 2 workers equals the in-memory fit (issue #7 item 5), with every option
and the model checks (issue #20 item 7)."""

from __future__ import annotations

import dataclasses
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
    cal = he.calibrate_dask(ddf, gold=EXAMPLE / "history_gold.csv", client=client)
    _close(mem, cal)
    assert cal.convergence.n_iter == mem.convergence.n_iter
    assert cal.history is None and cal.settings["engine"] == "dask"
    # the history's gold items as the calibration scores them (the estimates with current gold read them)
    assert mem.gold_scores is not None and cal.gold_scores is not None
    assert cal.gold_scores.n_gold == mem.gold_scores.n_gold
    np.testing.assert_array_equal(cal.gold_scores.y, mem.gold_scores.y)
    np.testing.assert_allclose(cal.gold_scores.llr, mem.gold_scores.llr, rtol=0, atol=1e-9)
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
    cal = he.calibrate_dask(str(tmp_path / "h*.parquet"), gold=gold, client=client, partitioned_by_item=True)
    _close(mem, cal)
    assert cal.settings["rows_read"] == len(df) and cal.settings["rows_dropped"] == {"missing label": 9}


def test_errors(client: object) -> None:
    df = pd.DataFrame({"item_id": ["1", "2"], "labeler_id": ["a", "b"], "label": ["1", "7"]})
    with pytest.raises(DataError, match="not binary"):
        he.calibrate_dask(dd.from_pandas(df, npartitions=1), gold=pd.DataFrame({"item_id": ["1"], "gold": [1]}),
                       client=client)
    ok = df.assign(label=["1", "0"])
    with pytest.raises(DataError, match="no gold"):
        he.calibrate_dask(dd.from_pandas(ok, npartitions=1), gold=pd.DataFrame({"item_id": ["9"], "gold": [1]}),
                       client=client)
    with pytest.raises(he.errors.HeroEvalError, match="dask DataFrame"):
        he.calibrate_dask(df, gold=pd.DataFrame({"item_id": ["1"], "gold": [1]}), client=client)


def test_partitioned_by_item_is_checked(client: object) -> None:
    df = pd.DataFrame({"item_id": ["1", "1", "2", "2"], "labeler_id": ["a", "b", "a", "b"], "label": ["1", "0", "1", "1"]})
    ddf = dd.from_pandas(df, npartitions=2, sort=False)  # item "1"... rows 0-1 and 2-3: check one split
    ddf_split = dd.from_pandas(df.iloc[[0, 2, 1, 3]], npartitions=2, sort=False)  # item 1 in both partitions
    gold = pd.DataFrame({"item_id": ["1"], "gold": [1]})
    with pytest.raises(DataError, match="more than one partition"):
        he.calibrate_dask(ddf_split, gold=gold, client=client, partitioned_by_item=True)
    he.calibrate_dask(ddf, gold=gold, client=client, partitioned_by_item=True)
    # item ranges that overlap without a shared item (1, 3 and 2, 4): the hashes decide, and find no split
    inter = pd.DataFrame({"item_id": [1, 1, 3, 3, 2, 2, 4, 4], "labeler_id": ["a", "b"] * 4,
                          "label": [1, 0, 1, 1, 0, 0, 1, 0]})
    ddf_inter = dd.from_pandas(inter, npartitions=2, sort=False)
    assert ddf_inter.npartitions == 2
    he.calibrate_dask(ddf_inter, gold=pd.DataFrame({"item_id": ["1", "2"], "gold": [1, 0]}), client=client,
                      partitioned_by_item=True)
    # and integer ranges that overlap with one shared item
    with pytest.raises(DataError, match="1 item"):
        he.calibrate_dask(dd.from_pandas(inter.replace({"item_id": {4: 1}}), npartitions=2, sort=False),
                          gold=pd.DataFrame({"item_id": ["1", "2"], "gold": [1, 0]}), client=client,
                          partitioned_by_item=True)


def test_partitioned_by_item_auto_shuffles_only_when_it_must(client: object) -> None:
    """``partitioned_by_item="auto"`` (what ``hero calibrate --scheduler`` passes): the check, then a shuffle on the
    item column when an item has rows in two partitions; either way the in-memory fit."""
    mem = he.calibrate(he.read_annotations(EXAMPLE / "history.csv.gz", gold=EXAMPLE / "history_gold.csv"))
    df = pd.read_csv(EXAMPLE / "history.csv.gz", dtype=str)
    thirds = np.array_split(df["item_id"].unique(), 3)  # whole items per partition
    whole = dd.concat([dd.from_pandas(df[df["item_id"].isin(ids)], npartitions=1) for ids in thirds])
    split = dd.from_pandas(df.sample(frac=1.0, random_state=3), npartitions=3, sort=False)
    he.calibrate_dask(whole, gold=EXAMPLE / "history_gold.csv", client=client, partitioned_by_item=True)  # no split
    for frame in (whole, split):
        _close(mem, he.calibrate_dask(frame, gold=EXAMPLE / "history_gold.csv", client=client,
                                      partitioned_by_item="auto"))
    with pytest.raises(he.HeroEvalError, match="partitioned_by_item must be"):
        he.calibrate_dask(whole, gold=EXAMPLE / "history_gold.csv", client=client, partitioned_by_item="yes")


def test_lockstep_fold_sums_equal_each_refit_alone(client: object) -> None:
    """One partition's sums for several refits in one task (the compiled lockstep kernel) equal each refit's own
    weighted pass, and the NumPy fallback (no numba on the worker) gives the same."""
    from heroeval.stage_a import distributed_folds as folds_module
    from heroeval.stage_a import distributed_parts as dist_module

    mem = he.read_annotations(EXAMPLE / "history.csv.gz", gold=EXAMPLE / "history_gold.csv")
    cal = he.calibrate(mem)
    df = pd.read_csv(EXAMPLE / "history.csv.gz", dtype=str)
    part = dist_module.build_part(df, ("item_id", "labeler_id", "label", "round"), list(mem.labeler_ids),
                                   list(mem.round_ids),
                                   pd.read_csv(EXAMPLE / "history_gold.csv", dtype={"item_id": str})
                                   .set_index("item_id")["gold"], 0, None)
    n_gold = part.gold_rows.size
    drops = [np.arange(0, n_gold, 3), np.arange(1, n_gold, 3), np.arange(2, n_gold, 3)]
    rng = np.random.default_rng(0)
    a = np.clip(cal.alpha + rng.normal(0, 0.02, (3, cal.alpha.size)), 0.05, 0.99)
    b = np.clip(cal.beta + rng.normal(0, 0.02, (3, cal.beta.size)), 0.05, 0.99)
    p = np.tile(cal.round_prevalence, (3, 1))
    w = 0.4
    if dist_module.jit.HAVE_NUMBA:
        assert dist_module.compact_of(part, None) is not None  # the compiled kernel runs below
    together = folds_module._part_fold_sums(part, w, drops, a, b, p)
    for m, dr in enumerate(drops):
        wt = dist_module.part_weights(part, w, dr)
        s1, gs, ll = dist_module.part_stats(part, wt, a[m], b[m], p[m], True)
        cnt, gsize = dist_module.part_counts(part, wt)
        la0 = dist_module.two_coin.code_logprobs(a[m], b[m])[1]
        fixed = float(cnt @ la0 + gsize @ np.log1p(-p[m]))
        np.testing.assert_allclose(together[0][m], s1, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(together[1][m], gs, rtol=1e-12, atol=1e-9)
        assert together[2][m] + fixed == pytest.approx(ll, rel=1e-11)
    orig = folds_module.compact_of
    try:
        folds_module.compact_of = lambda p, wt: None  # as on a worker without numba
        plain = folds_module._part_fold_sums(part, w, drops, a, b, p)
    finally:
        folds_module.compact_of = orig
    for x, y in zip(together, plain, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-11, atol=1e-9)


def test_refit_at_weight_zero_on_the_gold_items_equals_the_pass_over_the_partitions(client: object) -> None:
    """At history weight 0 a fold's refit runs on the gold items on the client; the same EM on the partitions'
    design, where every other item weighs 0 (what it ran before), gives the same fit."""
    from heroeval.stage_a import two_coin
    from heroeval.stage_a.distributed import load_dask_history
    from heroeval.stage_a.distributed_folds import DaskFoldFits
    from heroeval.stage_a.settings import StoppingRule

    mem = he.read_annotations(EXAMPLE / "history.csv.gz", gold=EXAMPLE / "history_gold.csv")
    dh = load_dask_history(dd.from_pandas(pd.read_csv(EXAMPLE / "history.csv.gz", dtype=str), npartitions=3),
                           gold=EXAMPLE / "history_gold.csv", client=client, round_col="round")
    ff = DaskFoldFits(dh, pseudo_count=1.0)
    n_gold = dh.gold_items().n_items
    start = (np.full(mem.n_labelers, 0.7), np.full(mem.n_labelers, 0.8), np.full(mem.n_rounds, 0.3))
    for drop in (None, np.arange(0, n_gold, 4)):
        quick = ff.fit(0.0, start, drop=drop, tol=1e-12)
        d = ff.design(0.0, drop)
        slow = two_coin.run_em(d, start, stop=StoppingRule(1e-12, 10_000, accelerate=False), posteriors=False)
        for x, y in zip((quick.alpha, quick.beta, quick.prev), (slow.alpha, slow.beta, slow.prev), strict=True):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-12)
        assert quick.n_iter == slow.n_iter


# ---------------------------------------------------------------------------
# Parity of the options (issue #20 item 7): history_weight, pseudo_count, covariates, the Newton phase, the checks
# ---------------------------------------------------------------------------

PARITY = 1e-9


def _demo_dask() -> tuple[he.AnnotationSet, object]:
    h = he.read_annotations(EXAMPLE / "history.csv.gz", gold=EXAMPLE / "history_gold.csv",
                            covariates=EXAMPLE / "history_covariates.csv.gz")
    df = pd.read_csv(EXAMPLE / "history.csv.gz", dtype=str)
    return h, dd.from_pandas(df, npartitions=4)


def _sparse_crowd(seed: int, n_items: int = 3000, J: int = 120) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Many labelers with 2-4 labels per item (about 40-80 labels each): SQUAREM needs Newton steps here."""
    rng = np.random.default_rng(seed)
    y = rng.random(n_items) < 0.3
    a, b = rng.uniform(0.55, 0.95, J), rng.uniform(0.55, 0.95, J)
    k = rng.integers(2, 5, n_items)
    item = np.repeat(np.arange(n_items), k)
    lab = np.concatenate([rng.choice(J, kk, replace=False) for kk in k])
    z = (rng.random(item.size) < np.where(y[item], a[lab], 1 - b[lab])).astype(int)
    df = pd.DataFrame({"item_id": item, "labeler_id": [f"j{x}" for x in lab], "label": z})
    g = np.flatnonzero(rng.random(n_items) < 0.1)
    return df, pd.DataFrame({"item_id": g, "gold": y[g].astype(int)})


@pytest.mark.parametrize("kw", [{"history_weight": 0.3}, {"history_weight": 0.0}, {"pseudo_count": 1.0},
                                {"history_weight": 0.1, "pseudo_count": 0.5, "variance": "model"},
                                {"shrink": "eb"}, {"shrink": "eb", "pseudo_count": 0.5, "history_weight": 0.3}])
def test_weight_and_pseudo_count_equal_in_memory(client: object, kw: dict[str, float]) -> None:
    _, ddf = _demo_dask()
    h = he.read_annotations(EXAMPLE / "history.csv.gz", gold=EXAMPLE / "history_gold.csv")
    mem = he.calibrate(h, **kw)  # type: ignore[arg-type]
    cal = he.calibrate_dask(ddf, gold=EXAMPLE / "history_gold.csv", client=client, **kw)  # type: ignore[arg-type]
    _close(mem, cal, PARITY)
    assert cal.convergence.n_iter == mem.convergence.n_iter
    assert cal.convergence.loglik == pytest.approx(mem.convergence.loglik, rel=1e-12)  # the prior included
    for k in ("history_weight", "pseudo_count", "variance", "shrink"):
        assert cal.settings[k] == mem.settings[k]
    if kw.get("shrink") == "eb":
        np.testing.assert_allclose(cal.settings["prior"]["counts"], mem.settings["prior"]["counts"], rtol=1e-12)


def test_covariates_equal_in_memory(client: object) -> None:
    h, ddf = _demo_dask()
    mem = he.calibrate(h)
    cal = he.calibrate_dask(ddf, gold=EXAMPLE / "history_gold.csv", covariates=EXAMPLE / "history_covariates.csv.gz",
                         client=client)
    _close(mem, cal, PARITY)  # the covariance now holds the covariate means' rows and their cross terms
    assert cal.covariate_names == mem.covariate_names and cal.n_covariate_items == mem.n_covariate_items
    assert mem.covariate_mean is not None and cal.covariate_mean is not None
    assert mem.covariate_cov is not None and cal.covariate_cov is not None
    np.testing.assert_allclose(cal.covariate_mean, mem.covariate_mean, rtol=1e-12, atol=0)
    np.testing.assert_allclose(cal.covariate_cov, mem.covariate_cov, rtol=1e-10, atol=0)
    cur = he.read_annotations(EXAMPLE / "current.csv.gz", covariates=EXAMPLE / "current_covariates.csv.gz")
    e1, e2 = he.hero2(cur, mem), he.hero2(cur, cal)
    assert e2.estimate == pytest.approx(e1.estimate, abs=PARITY)
    assert e2.standard_error == pytest.approx(e1.standard_error, rel=1e-8)
    # with Stage A's EB prior: its pooled rates' cross terms with the covariate means, on the client
    mem_eb = he.calibrate(h, shrink="eb")
    cal_eb = he.calibrate_dask(ddf, gold=EXAMPLE / "history_gold.csv", covariates=EXAMPLE / "history_covariates.csv.gz",
                            client=client, shrink="eb")
    _close(mem_eb, cal_eb, PARITY)
    assert he.hero2(cur, cal_eb).standard_error == pytest.approx(he.hero2(cur, mem_eb).standard_error, rel=1e-8)
    # the covariate table is checked as the pandas reader checks it
    cov = pd.read_csv(EXAMPLE / "history_covariates.csv.gz")
    with pytest.raises(DataError, match="no covariate row"):
        he.calibrate_dask(ddf, gold=EXAMPLE / "history_gold.csv", covariates=cov.iloc[5:], client=client)
    with pytest.raises(DataError, match="second covariate row"):
        he.calibrate_dask(ddf, gold=EXAMPLE / "history_gold.csv", covariates=pd.concat([cov, cov.iloc[:1]]),
                       client=client)


def test_newton_phase_equal_in_memory(client: object) -> None:
    df, gold = _sparse_crowd(1)
    mem = he.calibrate(he.read_annotations(df, gold=gold))
    assert mem.history_fit is not None and mem.history_fit.newton_steps > 0  # SQUAREM alone is slow here
    cal = he.calibrate_dask(dd.from_pandas(df, npartitions=3), gold=gold, client=client, pseudo_count=0.0)
    _close(mem, cal, PARITY)
    assert cal.history_fit is not None and cal.history_fit.newton_steps == mem.history_fit.newton_steps
    assert cal.convergence.n_iter == mem.convergence.n_iter


def _checks_close(a: he.Calibration, b: he.Calibration) -> None:
    """The model checks of two calibrations: every number to PARITY; the held-out items' log-likelihood ratios
    through the posterior they give (a labeler fitted within 1e-6 of 1 makes the ratio itself move by
    the EM tolerance divided by that distance)."""
    ca, cb = a.checks, b.checks
    assert ca is not None and cb is not None
    assert ca.chosen_weight == cb.chosen_weight and ca.folds == cb.folds and ca.notes == cb.notes
    da, db = ca.to_dict(), cb.to_dict()
    ia, ib = da.pop("items"), db.pop("items")

    def walk(x: object, y: object, where: str) -> None:
        if isinstance(x, dict):
            assert isinstance(y, dict) and x.keys() == y.keys(), where
            for k in x:
                walk(x[k], y[k], f"{where}/{k}")
        elif isinstance(x, list):
            assert isinstance(y, list) and len(x) == len(y), where
            for k, (u, v) in enumerate(zip(x, y, strict=True)):
                walk(u, v, f"{where}[{k}]")
        elif isinstance(x, float) and isinstance(y, float):
            assert x == pytest.approx(y, abs=PARITY, nan_ok=True), where
        else:
            assert x == y, where

    walk(da, db, "checks")
    assert ia.keys() == ib.keys()
    for k in ia:
        u, v = np.asarray(ia[k]), np.asarray(ib[k])
        if k.endswith(":llr"):
            u, v = 1 / (1 + np.exp(-u)), 1 / (1 + np.exp(-v))
        np.testing.assert_allclose(u, v, rtol=0, atol=PARITY, err_msg=k)


def test_checks_and_cv_equal_in_memory(client: object) -> None:
    h = he.read_annotations(EXAMPLE / "history.csv.gz", gold=EXAMPLE / "history_gold.csv")
    ddf = dd.from_pandas(pd.read_csv(EXAMPLE / "history.csv.gz", dtype=str), npartitions=4)
    assert int(np.bincount(h.labeler).min()) >= 200  # the warm refits (from the whole fit, Newton steps)
    for kw in ({"checks": True}, {"history_weight": "cv", "pseudo_count": 1.0}, {"checks": True, "shrink": "eb"}):
        mem = he.calibrate(h, **kw)  # type: ignore[arg-type]
        cal = he.calibrate_dask(ddf, gold=EXAMPLE / "history_gold.csv", client=client, **kw)  # type: ignore[arg-type]
        _close(mem, cal, PARITY)
        _checks_close(mem, cal)
        assert cal.settings["history_weight"] == mem.settings["history_weight"]
    # the recommended estimate reads the checks: the same method and estimate as from the in-memory calibration
    # without its history (which adds hero_joint to the candidates; a Dask calibration keeps no history)
    cur = he.read_annotations(EXAMPLE / "current.csv.gz")
    r1 = he.estimate(cur, dataclasses.replace(mem, history=None), method="auto", drift_check=False)
    r2 = he.estimate(cur, cal, method="auto", drift_check=False)
    assert r1.details["auto"]["method"] == r2.details["auto"]["method"]
    assert r2.estimate == pytest.approx(r1.estimate, abs=PARITY)


def test_cold_checks_equal_in_memory(client: object) -> None:
    df, gold = _sparse_crowd(4, n_items=1500, J=40)
    h = he.read_annotations(df, gold=gold)
    assert int(np.bincount(h.labeler).min()) < 200  # the cold refits (from each fold's gold start)
    for shrink in ("none", "eb"):  # eb: each fold's prior from its kept gold, on the client
        mem = he.calibrate(h, checks=True, shrink=shrink)  # type: ignore[arg-type]
        cal = he.calibrate_dask(dd.from_pandas(df, npartitions=3), gold=gold, client=client, checks=True,
                                shrink=shrink)  # type: ignore[arg-type]
        _close(mem, cal, PARITY)
        _checks_close(mem, cal)


def test_option_errors(client: object) -> None:
    df = pd.read_csv(EXAMPLE / "history.csv.gz", dtype=str).iloc[:200]
    ddf = dd.from_pandas(df, npartitions=1)
    g = EXAMPLE / "history_gold.csv"
    with pytest.raises(he.errors.HeroEvalError, match="history_weight"):
        he.calibrate_dask(ddf, gold=g, client=client, history_weight=1.5)
    with pytest.raises(he.errors.HeroEvalError, match="pseudo_count"):
        he.calibrate_dask(ddf, gold=g, client=client, pseudo_count=-1.0)
    with pytest.raises(he.errors.HeroEvalError, match="shrink must be"):
        he.calibrate_dask(ddf, gold=g, client=client, shrink="yes")  # type: ignore[arg-type]
    with pytest.raises(he.errors.HeroEvalError, match="check_folds"):
        he.calibrate_dask(ddf, gold=g, client=client, checks=True, check_folds=1)
    with pytest.raises(he.errors.HeroEvalError, match="covariate_cols needs covariates"):
        he.calibrate_dask(ddf, gold=g, client=client, covariate_cols=["x"])


def test_labelers_and_rounds_only_on_dropped_rows(client: object) -> None:
    """The pandas reader keeps only labelers and rounds of rows it uses; so does the Dask path."""
    df, gold = _sparse_crowd(2, n_items=600, J=12)
    df["round"] = np.where(df["item_id"] % 2 == 0, "r0", "r1")
    extra = pd.DataFrame({"item_id": [10_000, 10_001], "labeler_id": ["ghost", "j1"], "label": [np.nan, np.nan],
                          "round": ["r0", "r9"]})  # a labeler and a round seen only on rows without a label
    df = pd.concat([df, extra], ignore_index=True)
    mem = he.calibrate(he.read_annotations(df, gold=gold, round_col="round"))
    cal = he.calibrate_dask(dd.from_pandas(df, npartitions=3), gold=gold, client=client, round_col="round")
    assert "ghost" not in cal.labeler_ids and "r9" not in cal.round_ids
    _close(mem, cal, PARITY)
    assert cal.settings["rows_dropped"] == {"missing label": 2}


def test_workers_run_the_compiled_kernel(client: object) -> None:
    """With numba on the workers, each partition's E step is the in-memory engine's compiled pass (issue #43
    item 1), and its sums equal the NumPy design's to rounding."""
    pytest.importorskip("numba")
    from heroeval.stage_a import distributed_parts as dist_module

    client.run(dist_module._COMPACT.clear)  # type: ignore[attr-defined]
    df = pd.read_csv(EXAMPLE / "history.csv.gz", dtype=str)
    cal = he.calibrate_dask(dd.from_pandas(df, npartitions=4), gold=EXAMPLE / "history_gold.csv", client=client)
    sizes = client.run(lambda: len(dist_module._COMPACT))  # type: ignore[attr-defined]
    assert sum(sizes.values()) >= 4, sizes  # every partition built its compiled design
    # one partition's sums both ways, weighted as a fold's refit weights it
    mem = he.read_annotations(EXAMPLE / "history.csv.gz", gold=EXAMPLE / "history_gold.csv")
    part = dist_module.build_part(df, ("item_id", "labeler_id", "label", "round"), list(mem.labeler_ids),
                                   list(mem.round_ids),
                                   pd.read_csv(EXAMPLE / "history_gold.csv", dtype={"item_id": str})
                                   .set_index("item_id")["gold"], 0, None)
    wt = dist_module.part_weights(part, 0.3, np.arange(5))
    a, b, p = cal.alpha, cal.beta, cal.round_prevalence
    for w in (None, wt):
        compiled = dist_module.part_stats(part, w, a, b, p, True)
        d = dist_module.weighted(part, w)
        gamma, ll = dist_module.two_coin.e_step(d, a, b, p, True)
        gw = gamma if w is None else gamma * w
        np.testing.assert_allclose(compiled[0], np.asarray(d.AT @ gw), rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(compiled[1], np.bincount(d.group, weights=gw, minlength=d.n_groups),
                                   rtol=1e-12, atol=1e-9)
        assert compiled[2] == pytest.approx(ll, rel=1e-12)


def test_ids_written_as_floats_in_some_partitions_only_are_refused(client: object) -> None:
    """Each partition turns its ids into text on its own; where the in-memory reader would read a column
    differently ('3.0' stays '3.0' when another id is 'x'), the load says so instead of coding two ways."""
    df = pd.DataFrame({"item_id": ["a", "a", "b", "b", "c", "c", "d", "d"],
                       "labeler_id": ["3.0", "4.0", "3.0", "4.0", "x", "3.0", "x", "4.0"],
                       "label": [1, 0, 1, 1, 0, 0, 1, 0]})
    ddf = dd.from_pandas(df, npartitions=2, sort=False)
    assert ddf.npartitions == 2
    gold = pd.DataFrame({"item_id": ["a", "c"], "gold": [1, 0]})
    with pytest.raises(he.DataError, match="'labeler_id' holds integers written as floats"):
        he.calibrate_dask(ddf, gold=gold, client=client, partitioned_by_item=True)
    # written one way, the same history loads
    ok = dd.from_pandas(df.assign(labeler_id=df["labeler_id"].str.replace(".0", "", regex=False)), npartitions=2,
                        sort=False)
    assert he.calibrate_dask(ok, gold=gold, client=client, partitioned_by_item=True).labeler_ids == ("3", "4", "x")
