"""Fuzzing the ingest and the estimators with hostile and degenerate input (hypothesis).

Every case must end in a correct result or a clear :class:`heroeval.HeroEvalError`
(``DataError`` for bad data) -- never a raw numpy/pandas traceback or a crash --
and the ingest report must account for every row read
(``rows_read == rows_used + sum(dropped)`` for every table, and the
annotation table's ``rows_read`` equals the rows given).

Cases covered (one test each unless noted):

1. random bytes written as a ``.csv``, ``.jsonl`` and ``.parquet`` file;
2. wrong types in the id and label columns (floats, bools, None, bytes,
   nested lists, dicts, mixed objects) in a pandas table;
3. huge ids (beyond int64, 1e300, -0.0, very long strings);
4. Unicode ids and labels (any code point, including surrogates, emoji,
   combining marks, whitespace-only and NUL);
5. empty files (zero bytes), a header without rows, and empty tables;
6. duplicated header names (in a CSV file and in a pandas table);
7. NaN and +-inf covariates, and non-numeric covariate columns;
8. 10,000 labels on a single item (with ``duplicates="keep"`` and ``"first"``);
9. a labeler with no gold positives (or no gold negatives);
10. all labels equal (all 0 or all 1), in history and current;
11. a gold rate at 0 or 1 in the history, and a current rate at 0 or 1;
12. collinear (and constant) covariates for HERO-2;
13. random small annotation logs through calibrate, every estimator, the
    drift check and the anchored new-labeler estimate.

Budget: every test has ``@settings(max_examples=..., deadline=None,
derandomize=True)`` so CI runs the same examples in bounded time.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import heroeval as he
from heroeval.checks.drift import check_drift
from heroeval.errors import HeroEvalError, HeroEvalWarning

FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _accounting(ds: he.AnnotationSet, n_rows: int | None = None) -> None:
    for t in ds.report.tables:
        assert t.rows_read == t.rows_used + sum(t.dropped.values()), t
    if n_rows is not None:
        ann = ds.report.tables[0]
        assert ann.table == "annotations" and ann.rows_read == n_rows
        assert ann.rows_used == ds.n_annotations


def _read(*args: Any, n_rows: int | None = None, **kw: Any) -> he.AnnotationSet | None:
    """read_annotations; None when it refuses with a HeroEvalError (any other exception fails the test)."""
    try:
        ds = he.read_annotations(*args, **kw)
    except HeroEvalError as exc:
        assert str(exc)  # a message, naming what is wrong
        return None
    _accounting(ds, n_rows)
    return ds


def _estimate_all(hist: he.AnnotationSet, cur: he.AnnotationSet) -> None:
    """Every estimator on (hist, cur): a finite/NaN-with-status result or a HeroEvalError."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HeroEvalWarning)
        try:
            cal = he.calibrate(hist)
        except HeroEvalError:
            return
        assert np.all((cal.alpha >= 0) & (cal.alpha <= 1)) and np.all((cal.beta >= 0) & (cal.beta <= 1))
        for m in he.METHODS:
            try:
                r = he.estimate(cur, cal, method=m, new_labelers="exclude")
            except HeroEvalError:
                continue
            assert isinstance(r, he.EstimateResult)
            if r.status == "unidentified":
                assert math.isnan(r.estimate)
            else:
                assert 0.0 <= r.estimate <= 1.0, (m, r)
            ci = r.confidence_interval()
            assert math.isnan(ci.low) or 0.0 <= ci.low <= ci.high <= 1.0
        try:
            chk = check_drift(cur, cal, warn=False)
            assert chk.overall_df >= 0
        except HeroEvalError:
            pass
        try:
            r = he.hero1(cur, cal, new_labelers="estimate")
            assert math.isnan(r.estimate) or 0.0 <= r.estimate <= 1.0
        except HeroEvalError:
            pass


# 1. random bytes -----------------------------------------------------------------------------
@FUZZ
@given(data=st.binary(max_size=400), ext=st.sampled_from([".csv", ".jsonl", ".parquet", ".tsv"]))
def test_random_bytes(tmp_path_factory: pytest.TempPathFactory, data: bytes, ext: str) -> None:
    p = tmp_path_factory.mktemp("b") / f"f{ext}"
    p.write_bytes(data)
    _read(p)
    ann = pd.DataFrame({"item_id": ["a", "b"], "labeler_id": ["w", "w"], "label": [0, 1]})
    _read(ann, gold=p, n_rows=2)  # the same bytes as a gold file
    _read(ann, covariates=p, n_rows=2)  # and as a covariate file


# 2. wrong types -------------------------------------------------------------------------------
ODD = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5), st.binary(max_size=3), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
)


@FUZZ
@given(rows=st.lists(st.tuples(ODD, ODD, ODD), min_size=0, max_size=12))
def test_wrong_types(rows: list[tuple[Any, Any, Any]]) -> None:
    df = pd.DataFrame(rows, columns=["item_id", "labeler_id", "label"]) if rows else pd.DataFrame(
        {"item_id": [], "labeler_id": [], "label": []})
    _read(df, n_rows=len(df))


# 3. huge ids ----------------------------------------------------------------------------------
HUGE = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(min_value=-1e300, max_value=1e300),
    st.just(-0.0), st.text(min_size=500, max_size=2000, alphabet="ab"),
)


@FUZZ
@given(ids=st.lists(HUGE, min_size=1, max_size=8), labels=st.lists(st.integers(0, 1), min_size=8, max_size=8))
def test_huge_ids(ids: list[Any], labels: list[int]) -> None:
    n = len(ids)
    df = pd.DataFrame({"item_id": pd.Series(ids, dtype=object), "labeler_id": pd.Series(ids[::-1], dtype=object),
                       "label": labels[:n]})
    ds = _read(df, n_rows=n)
    if ds is not None:
        assert ds.n_annotations <= n


# 4. Unicode -----------------------------------------------------------------------------------
@FUZZ
@given(items=st.lists(st.text(min_size=0, max_size=6), min_size=1, max_size=10),
       labs=st.lists(st.text(min_size=0, max_size=4), min_size=10, max_size=10),
       labels=st.lists(st.sampled_from(["0", "1", "true", "False", " 1 ", "٢", "１", "yes", ""]), min_size=10,
                       max_size=10))
def test_unicode(tmp_path_factory: pytest.TempPathFactory, items: list[str], labs: list[str], labels: list[str]) -> None:
    n = len(items)
    df = pd.DataFrame({"item_id": items, "labeler_id": labs[:n], "label": labels[:n]})
    ds = _read(df, n_rows=n)
    # the same table through a UTF-8 CSV file (surrogates cannot be encoded: skip those)
    try:
        text = df.to_csv(index=False)
        text.encode("utf-8")
    except UnicodeEncodeError:
        return
    p = tmp_path_factory.mktemp("u") / "u.csv"
    p.write_text(text, encoding="utf-8")
    ds2 = _read(p)
    if ds is not None and ds2 is not None:
        assert ds2.n_annotations <= ds.n_annotations + n


# 5. empty files -------------------------------------------------------------------------------
@pytest.mark.parametrize("content", ["", "item_id,labeler_id,label\n", "\n\n", "item_id\n"])
@pytest.mark.parametrize("ext", [".csv", ".jsonl", ".tsv"])
def test_empty_files(tmp_path: Path, content: str, ext: str) -> None:
    p = tmp_path / f"e{ext}"
    p.write_text(content)
    ds = _read(p)
    assert ds is None or ds.n_annotations == 0


def test_empty_table_reads_empty_and_estimators_refuse() -> None:
    empty = he.read_annotations(pd.DataFrame({"item_id": [], "labeler_id": [], "label": []}))
    assert empty.n_items == 0 and empty.report.tables[0].rows_read == 0
    with pytest.raises(HeroEvalError, match="no annotated items"):
        he.majority_vote(empty)
    with pytest.raises(HeroEvalError, match="no gold"):
        he.calibrate(empty)


# 6. duplicated headers ------------------------------------------------------------------------
@FUZZ
@given(dup=st.sampled_from(["item_id", "labeler_id", "label"]), n=st.integers(1, 6))
def test_duplicated_headers(tmp_path_factory: pytest.TempPathFactory, dup: str, n: int) -> None:
    cols = ["item_id", "labeler_id", "label", dup]
    rows = [[f"i{k}", f"w{k % 2}", k % 2, (k + 1) % 2] for k in range(n)]
    p = tmp_path_factory.mktemp("d") / "d.csv"
    p.write_text(",".join(cols) + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    _read(p, n_rows=n)
    df = pd.DataFrame(rows, columns=cols)
    _read(df, n_rows=n)


# 7. NaN / inf covariates ----------------------------------------------------------------------
@FUZZ
@given(vals=st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.none(), st.text(max_size=2)),
                     min_size=3, max_size=3))
def test_bad_covariates(vals: list[Any]) -> None:
    ann = pd.DataFrame({"item_id": ["a", "b", "c"], "labeler_id": ["w", "w", "w"], "label": [0, 1, 1]})
    cov = pd.DataFrame({"item_id": ["a", "b", "c"], "x": pd.Series(vals, dtype=object)})
    ds = _read(ann, covariates=cov, n_rows=3)
    if ds is not None:
        assert ds.covariates is not None and np.isfinite(ds.covariates).all()


# 8. 10,000 labels on one item -----------------------------------------------------------------
@pytest.mark.parametrize("duplicates", ["keep", "first"])
def test_ten_thousand_labels_on_one_item(duplicates: str) -> None:
    rng = np.random.default_rng(0)
    m = 10_000
    ann = pd.DataFrame({"item_id": ["big"] * m + [f"i{k}" for k in range(300)],
                        "labeler_id": [f"w{k % 5}" for k in range(m)] + [f"w{k % 5}" for k in range(300)],
                        "label": np.r_[rng.integers(0, 2, m), rng.integers(0, 2, 300)]})
    gold = pd.DataFrame({"item_id": [f"i{k}" for k in range(0, 300, 3)], "gold": rng.integers(0, 2, 100)})
    ds = _read(ann, gold=gold, duplicates=duplicates, n_rows=len(ann))
    assert ds is not None
    assert ds.n_annotations == (len(ann) if duplicates == "keep" else 5 + 300)
    cur = he.read_annotations(ann.iloc[:m])
    _estimate_all(ds, cur)


# 9-11. degenerate labelers and rates ---------------------------------------------------------
@settings(FUZZ, max_examples=15)
@given(
    gold_vals=st.sampled_from(["all0", "all1", "mixed"]),
    cur_labels=st.sampled_from(["all0", "all1", "random"]),
    no_pos_labeler=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_degenerate_labelers_and_rates(gold_vals: str, cur_labels: str, no_pos_labeler: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_h, n_c, J = 60, 30, 3
    items = np.repeat([f"h{k}" for k in range(n_h)], J)
    labs = np.tile([f"w{j}" for j in range(J)], n_h)
    y = {"all0": np.zeros(n_h, int), "all1": np.ones(n_h, int), "mixed": rng.integers(0, 2, n_h)}[gold_vals]
    z = np.where(rng.random(n_h * J) < 0.8, np.repeat(y, J), 1 - np.repeat(y, J))
    g = np.arange(0, n_h, 4)
    gold_y = y[g].copy()
    if no_pos_labeler:  # labeler w0 only labels gold-negative items among the gold ones
        keep = ~((labs == "w0") & np.isin(items, [f"h{k}" for k in g[gold_y == 1]]))
        items, labs, z = items[keep], labs[keep], z[keep]
    hist = _read(pd.DataFrame({"item_id": items, "labeler_id": labs, "label": z}),
                 gold=pd.DataFrame({"item_id": [f"h{k}" for k in g], "gold": gold_y}))
    assert hist is not None
    zc = {"all0": np.zeros(n_c * J, int), "all1": np.ones(n_c * J, int), "random": rng.integers(0, 2, n_c * J)}[cur_labels]
    cur = _read(pd.DataFrame({"item_id": np.repeat([f"c{k}" for k in range(n_c)], J),
                              "labeler_id": np.tile([f"w{j}" for j in range(J)], n_c), "label": zc}))
    assert cur is not None
    _estimate_all(hist, cur)


# 12. collinear covariates ---------------------------------------------------------------------
@settings(FUZZ, max_examples=10)
@given(seed=st.integers(0, 2**16), kind=st.sampled_from(["copy", "scaled", "constant", "sum"]))
def test_collinear_covariates(seed: int, kind: str) -> None:
    rng = np.random.default_rng(seed)

    def make(prefix: str, n: int, gold: bool) -> he.AnnotationSet:
        ids = [f"{prefix}{k}" for k in range(n)]
        y = rng.integers(0, 2, n)
        items = np.repeat(ids, 3)
        z = np.where(rng.random(3 * n) < 0.8, np.repeat(y, 3), 1 - np.repeat(y, 3))
        x1 = rng.normal(size=n) + y
        x2 = {"copy": x1, "scaled": 3 * x1 - 1, "constant": np.full(n, 2.0), "sum": x1 + 0}[kind]
        cov = pd.DataFrame({"item_id": ids, "x1": x1, "x2": x2, "x3": x1 + x2})
        gd = pd.DataFrame({"item_id": ids[::5], "gold": y[::5]}) if gold else None
        ds = _read(pd.DataFrame({"item_id": items, "labeler_id": np.tile(["a", "b", "c"], n), "label": z}),
                   gold=gd, covariates=cov)
        assert ds is not None
        return ds

    hist, cur = make("h", 80, True), make("c", 40, False)
    _estimate_all(hist, cur)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HeroEvalWarning)
        r = he.hero2(cur, he.calibrate(hist), on_shift="fallback")
        assert 0 <= r.estimate <= 1 and math.isfinite(r.standard_error)


# 13. random small logs through everything -----------------------------------------------------
@FUZZ
@given(
    n_items=st.integers(1, 25), J=st.integers(1, 4), seed=st.integers(0, 2**16),
    gold_share=st.floats(0.05, 1.0), new_labeler=st.booleans(),
)
def test_random_small_logs(n_items: int, J: int, seed: int, gold_share: float, new_labeler: bool) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 4 * n_items + 1))
    items = rng.integers(0, n_items, m)
    labs = rng.integers(0, J, m)
    hist = _read(pd.DataFrame({"item_id": items, "labeler_id": labs, "label": rng.integers(0, 2, m)}),
                 gold=pd.DataFrame({"item_id": np.arange(n_items), "gold": rng.integers(0, 2, n_items)})
                 .sample(frac=gold_share, random_state=seed), n_rows=m)
    assert hist is not None
    mc = int(rng.integers(1, 3 * n_items + 1))
    lc = rng.integers(0, J + (1 if new_labeler else 0), mc)
    cur = _read(pd.DataFrame({"item_id": 1000 + rng.integers(0, n_items, mc), "labeler_id": lc,
                              "label": rng.integers(0, 2, mc)}), n_rows=mc)
    assert cur is not None
    _estimate_all(hist, cur)
