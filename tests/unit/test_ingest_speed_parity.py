"""The pandas reader's fast paths give the same AnnotationSet as its plain ones (issue #20: ingest at 1e7 rows).

Three shortcuts make ``read_annotations(..., engine="pandas")`` fast on large files:

* a column of NumPy integers is coded from its integers (a lookup table over their range, or a hash), and only
  the distinct values are turned into strings and sorted as strings;
* from ``_COMPILED_MIN_ROWS`` rows on, the item order and the repeated (item, labeler) pairs come from one
  compiled counting sort (numba) instead of a stable argsort and pandas' ``duplicated``;
* gold ids are found by bisection among the (sorted) item ids instead of a hash table of every item.

Each is checked against an independent route to the same result: a plain-pandas reference reader written
here, the same ids given as strings (the reader's generic path), and the NumPy path (compiling switched off).
The comparisons cover every field of the set, the ingest report and the error messages.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.core import jit
from heroeval.ingest import coding as ann_mod

# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


@pytest.fixture(params=["numpy", "compiled"])
def engine_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test with the compiled kernels on for every size ("compiled") or off ("numpy")."""
    if request.param == "compiled":
        if not jit.HAVE_NUMBA:
            pytest.skip("numba is not installed")
        monkeypatch.setattr(ann_mod, "_COMPILED_MIN_ROWS", 0)
    else:
        monkeypatch.setattr(ann_mod, "_COMPILED_MIN_ROWS", 10**18)
    yield request.param


def _fields(ds: he.AnnotationSet) -> dict[str, Any]:
    return {
        "item_ids": ds.item_ids, "labeler_ids": ds.labeler_ids, "item_ptr": ds.item_ptr, "labeler": ds.labeler,
        "label": ds.label, "gold": ds.gold, "item_round": ds.item_round, "round_ids": ds.round_ids,
        "covariates": ds.covariates, "covariate_names": ds.covariate_names, "report": ds.report.to_dict(),
        "lines": ds.report.lines(), "repeated_pairs": ds.repeated_pairs, "name": ds.name,
    }


def _assert_same_set(a: he.AnnotationSet, b: he.AnnotationSet) -> None:
    fa, fb = _fields(a), _fields(b)
    for key, va in fa.items():
        vb = fb[key]
        if isinstance(va, np.ndarray) or isinstance(vb, np.ndarray):
            assert isinstance(va, np.ndarray) and isinstance(vb, np.ndarray), key
            assert va.dtype == vb.dtype and va.shape == vb.shape, (key, va.dtype, vb.dtype, va.shape, vb.shape)
            if va.dtype == object:
                assert [type(x) for x in va.tolist()] == [type(x) for x in vb.tolist()], key
                assert va.tolist() == vb.tolist(), key
            else:
                assert np.array_equal(va, vb), key
        else:
            assert va == vb, (key, va, vb)
    for t in a.report.tables:  # every row read is used or counted
        assert t.rows_read == t.rows_used + sum(t.dropped.values())


def _outcome(read: Callable[[], he.AnnotationSet]) -> tuple[str, Any]:
    try:
        return "ok", read()
    except he.DataError as exc:
        return "error", str(exc)


def _assert_same_outcome(a: tuple[str, Any], b: tuple[str, Any]) -> None:
    assert a[0] == b[0], (a, b)
    if a[0] == "ok":
        _assert_same_set(a[1], b[1])
    else:
        assert a[1] == b[1]


def _read(df: pd.DataFrame, **kw: Any) -> he.AnnotationSet:
    return he.read_annotations(df, engine="pandas", **kw)


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------

UNICODE_IDS = np.array(["é", "e", "z", "Z", "10", "9", "🙂", "中", "a b", "ß", "-1", "+1", "_", "ÿ", "Ā"], dtype=object)


def _random_log(n: int, n_items: int, n_labelers: int, seed: int) -> pd.DataFrame:
    """Rows drawn with replacement: some (item, labeler) pairs repeat."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "item_id": rng.integers(0, n_items, n),
        "labeler_id": rng.integers(0, n_labelers, n),
        "label": rng.integers(0, 2, n),
    })


def _id_variants() -> dict[str, pd.DataFrame]:
    """Logs whose ids are integers of every width and sign (dense and sparse ranges) or plain strings."""
    rng = np.random.default_rng(7)
    base = _random_log(3000, 400, 25, seed=1)
    out = {"int64_dense": base}
    out["int32_labeler_uint8"] = base.astype({"item_id": np.int32, "labeler_id": np.uint8, "label": np.int8})
    out["int64_negative"] = base.assign(item_id=base["item_id"] - 200)
    sparse = np.array([-(10**15), -(2**62), -7, 0, 3, 10, 99, 100, 10**12, 2**62, 2**63 - 1], dtype=np.int64)
    out["int64_sparse"] = base.assign(item_id=rng.choice(sparse, len(base)))
    big = np.array([0, 1, 9, 10, 2**63, 2**63 + 5, 2**64 - 1, 10**19, 12345], dtype=np.uint64)
    out["uint64_beyond_int64"] = base.assign(item_id=rng.choice(big, len(base)))
    out["int8_full_range"] = base.assign(item_id=rng.integers(-128, 128, len(base)).astype(np.int8),
                                         labeler_id=rng.integers(-128, 128, len(base)).astype(np.int8))
    near = np.array([10**18 - 1, 10**17, 10**17 - 1, 1, 10, 0, -1, -10, -(10**17), -(10**18 - 1)], dtype=np.int64)
    out["int64_near_1e18"] = base.assign(item_id=rng.choice(near, len(base)))
    out["int64_beyond_1e18"] = base.assign(item_id=rng.choice(np.append(near, [10**18, -(2**63)]), len(base)))
    out["int8_wide_range"] = base.assign(item_id=rng.integers(-100, 121, len(base)).astype(np.int8),  # 120 - -100
                                         labeler_id=rng.integers(-90, 91, len(base)).astype(np.int8))  # > 127
    out["int16"] = base.astype({"item_id": np.int16, "labeler_id": np.int16})
    out["uint32_dense"] = base.astype({"item_id": np.uint32, "labeler_id": np.uint16})
    out["strings"] = base.assign(item_id="q" + base["item_id"].astype(str), labeler_id="w" + base["labeler_id"].astype(str))
    out["unicode"] = base.assign(item_id=rng.choice(UNICODE_IDS, len(base)), labeler_id=rng.choice(UNICODE_IDS[:6], len(base)))
    out["one_row"] = pd.DataFrame({"item_id": [5], "labeler_id": [3], "label": [1]})
    out["no_repeats"] = pd.DataFrame({"item_id": [3, 1, 2, 1, 3], "labeler_id": [0, 0, 0, 1, 1], "label": [1, 0, 1, 1, 0]})
    return out


def _gold_for(df: pd.DataFrame, seed: int) -> pd.DataFrame:
    """Gold for a tenth of the items (as strings, the way a CSV gives them), one repeated row and unknown items."""
    rng = np.random.default_rng(seed)
    ids = pd.Series(df["item_id"].unique())
    g = ids.sample(frac=0.1, random_state=seed) if len(ids) > 9 else ids
    gold = pd.DataFrame({"item_id": g.map(str).to_numpy(dtype=object), "gold": rng.integers(0, 2, len(g))})
    unknown = pd.DataFrame({"item_id": ["not-an-item", "🙃"], "gold": [1, 0]})
    return pd.concat([gold, gold.head(1), unknown], ignore_index=True)


def _hostile_variants() -> dict[str, tuple[pd.DataFrame, dict[str, Any]]]:
    """Logs with missing and blank values, float ids, float-looking strings, rounds, gold, covariates, label maps."""
    rng = np.random.default_rng(11)
    n = 2500
    base = _random_log(n, 300, 20, seed=2)
    out: dict[str, tuple[pd.DataFrame, dict[str, Any]]] = {}
    f = base.astype(float)
    f.loc[f.index % 17 == 3, "item_id"] = np.nan
    f.loc[f.index % 19 == 4, "labeler_id"] = np.nan
    f.loc[f.index % 23 == 5, "label"] = np.nan
    out["float_ids_with_nan"] = (f, {})
    out["float_ids_fractional"] = (f.assign(item_id=f["item_id"] / 2), {})
    s = base.assign(item_id=base["item_id"].astype(str) + ".0", labeler_id=" " + base["labeler_id"].astype(str))
    s.loc[s.index % 13 == 1, "item_id"] = ""
    s.loc[s.index % 29 == 2, "labeler_id"] = "  "
    s.loc[s.index % 31 == 3, "label"] = None
    out["float_looking_strings_blanks"] = (s, {})
    mixed = base.astype({"item_id": object})
    mixed.loc[mixed.index % 5 == 0, "item_id"] = mixed.loc[mixed.index % 5 == 0, "item_id"].map(str)
    mixed.loc[mixed.index % 7 == 0, "item_id"] = None
    out["mixed_object_ids"] = (mixed, {})
    nullable = base.assign(item_id=pd.array(base["item_id"].where(base.index % 11 != 0), dtype="Int64"))
    out["nullable_int_ids"] = (nullable, {})
    out["bool_labels"] = (base.assign(label=base["label"].astype(bool)), {})
    out["string_labels"] = (base.assign(label=rng.choice(np.array(["1", "0", "true", "No", " yes ", ""], object), n)), {})
    rounds = base.assign(round=(base["item_id"] % 3).map({0: "h1", 1: "h2", 2: "current"}))
    out["rounds"] = (rounds, {})
    out["rounds_int"] = (base.assign(round=base["item_id"] % 4), {})
    conflict = rounds.copy()
    conflict.loc[40, "round"] = "elsewhere"
    out["round_conflict"] = (conflict, {})
    missing_round = rounds.copy()
    missing_round.loc[[5, 50, 500], "round"] = None
    out["round_missing"] = (missing_round, {})
    ids = np.sort(base["item_id"].unique())
    cov = pd.DataFrame({"item_id": ids, "x": np.arange(len(ids)) / 7.0, "z": np.arange(len(ids)) % 3})
    out["covariates"] = (base, {"covariates": cov})
    out["covariates_missing_row"] = (base, {"covariates": cov.iloc[1:]})
    ab = base.assign(label=rng.choice(np.array(["A", "B", "tie", "1"], object), n))
    out["label_map"] = (ab, {"label_map": {"A": 1, "B": 0, "tie": None},
                             "gold": pd.DataFrame({"item_id": [1, 2, 3], "gold": ["A", "tie", "B"]})})
    out["gold_conflict"] = (base, {"gold": pd.DataFrame({"item_id": [1, 2, 1], "gold": [1, 0, 0]})})
    out["gold_floaty_ids"] = (base, {"gold": pd.DataFrame({"item_id": ["1.0", "2", " 3 ", None, ""],
                                                           "gold": [1, 0, 1, 1, np.nan]})})
    out["bad_label"] = (base.assign(label=np.where(base.index == 77, 2, base["label"])), {})
    out["all_labels_missing"] = (base.head(5).assign(label=np.nan), {})
    return out


# ---------------------------------------------------------------------------
# an independent reference reader (plain pandas) for logs without missing values
# ---------------------------------------------------------------------------


def _reference(df: pd.DataFrame, gold: pd.DataFrame | None, duplicates: str) -> dict[str, Any]:
    """What the reader must return for a log of int or plain-string ids and 0/1 labels, written without it."""
    t = pd.DataFrame({
        "item": [str(x) for x in df["item_id"].tolist()],
        "labeler": [str(x) for x in df["labeler_id"].tolist()],
        "label": df["label"].astype(int).to_numpy(),
        "row": np.arange(len(df)),
    })
    repeat = t.duplicated(["item", "labeler"], keep="first").to_numpy()
    if duplicates == "first":
        t = t[~repeat]
    item_ids = sorted(set(t["item"]))
    labeler_ids = sorted(set(t["labeler"]))
    item_pos = {x: i for i, x in enumerate(item_ids)}
    lab_pos = {x: i for i, x in enumerate(labeler_ids)}
    t = t.assign(ic=t["item"].map(item_pos), lc=t["labeler"].map(lab_pos)).sort_values(["ic", "row"])
    counts = t.groupby("ic").size().reindex(range(len(item_ids)), fill_value=0).to_numpy()
    gold_arr = np.full(len(item_ids), -1, dtype=np.int8)
    if gold is not None:
        for i, g in zip(gold["item_id"].tolist(), gold["gold"].tolist(), strict=True):
            if str(i) in item_pos:
                gold_arr[item_pos[str(i)]] = g
    return {
        "item_ids": item_ids, "labeler_ids": labeler_ids,
        "item_ptr": np.concatenate([[0], np.cumsum(counts)]), "labeler": t["lc"].to_numpy(),
        "label": t["label"].to_numpy(), "gold": gold_arr, "n_repeats": int(repeat.sum()),
        "repeated_pairs": bool(repeat.any()) and duplicates == "keep",
    }


# ---------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("duplicates", ["keep", "first"])
@pytest.mark.parametrize("variant", list(_id_variants()))
def test_matches_a_plain_pandas_reference(engine_path: str, variant: str, duplicates: str) -> None:
    df = _id_variants()[variant]
    gold = _gold_for(df, seed=3)
    ds = _read(df, gold=gold, duplicates=duplicates)
    ref = _reference(df, gold, duplicates)
    assert ds.item_ids.dtype == object and all(type(x) is str for x in ds.item_ids)
    assert ds.item_ids.tolist() == ref["item_ids"]
    assert ds.labeler_ids.tolist() == ref["labeler_ids"]
    assert ds.item_ptr.dtype == np.int64 and ds.item_ptr.tolist() == ref["item_ptr"].tolist()
    assert ds.labeler.dtype == np.int32 and ds.labeler.tolist() == ref["labeler"].tolist()
    assert ds.label.dtype == np.int8 and ds.label.tolist() == ref["label"].tolist()
    assert ds.gold.dtype == np.int8 and ds.gold.tolist() == ref["gold"].tolist()
    assert ds.repeated_pairs == ref["repeated_pairs"]
    t = ds.report.tables[0]
    if duplicates == "first":
        assert t.dropped.get("repeated (item, labeler) pair, later rows dropped", 0) == ref["n_repeats"]
    else:
        assert t.notes.get("repeated (item, labeler) pair kept as separate labels", 0) == ref["n_repeats"]
    assert t.rows_read == len(df) == t.rows_used + sum(t.dropped.values())


@pytest.mark.parametrize("duplicates", ["keep", "first", "error"])
@pytest.mark.parametrize("variant", [v for v in _id_variants() if v not in ("strings", "unicode")])
def test_integer_ids_read_as_their_strings(engine_path: str, variant: str, duplicates: str) -> None:
    """An integer id column gives the same set, report and errors as the same ids written as strings."""
    df = _id_variants()[variant]
    df = df.assign(round=(df["item_id"].astype(np.int64) % 3 if df["item_id"].dtype != np.uint64 else df["item_id"] % 3))
    as_text = df.assign(item_id=[str(x) for x in df["item_id"].tolist()],
                        labeler_id=[str(x) for x in df["labeler_id"].tolist()],
                        round=[str(x) for x in df["round"].tolist()])
    ids = df["item_id"].unique()
    cov = pd.DataFrame({"item_id": ids, "x": np.arange(len(ids)) / 3.0})
    cov_text = cov.assign(item_id=[str(x) for x in cov["item_id"].tolist()])
    gold = _gold_for(df, seed=5)
    a = _outcome(lambda: _read(df, gold=gold, covariates=cov, duplicates=duplicates))
    b = _outcome(lambda: _read(as_text, gold=gold, covariates=cov_text, duplicates=duplicates))
    _assert_same_outcome(a, b)


@pytest.mark.parametrize("duplicates", ["keep", "first", "error"])
@pytest.mark.parametrize("variant", list(_hostile_variants()))
def test_compiled_and_numpy_paths_agree(monkeypatch: pytest.MonkeyPatch, variant: str, duplicates: str) -> None:
    """Missing values, blanks, float and mixed ids, rounds, covariates, label maps, errors: the same either way."""
    if not jit.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    df, kw = _hostile_variants()[variant]
    for missing in ("drop", "error"):
        outcomes = []
        for threshold in (10**18, 0):
            monkeypatch.setattr(ann_mod, "_COMPILED_MIN_ROWS", threshold)
            outcomes.append(_outcome(lambda: _read(df, duplicates=duplicates, missing=missing, **kw)))  # noqa: B023
        _assert_same_outcome(*outcomes)


def test_repeats_of_items_with_many_labels(engine_path: str) -> None:
    """Few items, many labels each (the compiled pass over an item's rows): repeats found as pandas finds them."""
    df = _random_log(20000, 7, 3000, seed=4)
    for duplicates in ("keep", "first"):
        ds = _read(df, duplicates=duplicates)
        ref = _reference(df, None, duplicates)
        assert ds.labeler.tolist() == ref["labeler"].tolist() and ds.item_ptr.tolist() == ref["item_ptr"].tolist()
        assert ds.repeated_pairs == ref["repeated_pairs"]
    with pytest.raises(he.DataError, match=r"row \d+: repeated \(item, labeler\) pair"):
        _read(df, duplicates="error")


def test_repeat_error_names_the_first_repeated_row(engine_path: str) -> None:
    df = pd.DataFrame({"item_id": [5, 3, 5, 3, 3], "labeler_id": [1, 2, 2, 2, 2], "label": [1, 0, 1, 1, 0]})
    with pytest.raises(he.DataError, match=r"row 4: repeated \(item, labeler\) pair \('3', '2'\); 2 repeated row"):
        _read(df, duplicates="error")


def test_sorted_gold_lookup_matches_the_hash_lookup() -> None:
    rng = np.random.default_rng(5)
    words = np.array(sorted({"".join(rng.choice(UNICODE_IDS, 3)) for _ in range(3000)}), dtype=object)
    queries = np.concatenate([rng.choice(words, 500), np.array(["", "zzz", "🙃", "é", words[0], words[-1]], object)])
    by_bisection = ann_mod._item_index(words, queries, ids_sorted=True)
    by_hash = ann_mod._item_index(words, queries)
    assert by_bisection.tolist() == by_hash.tolist()
    assert ann_mod._item_index(words[:0], queries[:3], ids_sorted=True).tolist() == [-1, -1, -1]


def _decimal_case(name: str) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    edges = np.array([10**k + d for k in range(18) for d in (-1, 0, 1)], dtype=np.int64)
    if name == "small":
        vals = rng.integers(-3000, 3000, 500)
    elif name == "magnitudes":
        vals = (rng.integers(1, 10, 3000) * 10 ** rng.integers(0, 18, 3000)) * rng.choice([-1, 1], 3000)
    elif name == "edges":
        vals = np.concatenate([edges, -edges, [0]])
    elif name == "beyond":  # 10**18 and more: sorted as strings
        vals = np.concatenate([edges, [10**18, 2**63 - 1, -(2**63)]])
    else:
        vals = np.array([7], dtype=np.int64)
    return np.unique(vals.astype(np.int64))


@pytest.mark.parametrize("name", ["small", "magnitudes", "edges", "beyond", "one"])
def test_decimal_order_sorts_as_strings(name: str) -> None:
    values = _decimal_case(name)
    order = ann_mod._decimal_order(values)
    assert [str(x) for x in values[order].tolist()] == sorted(str(x) for x in values.tolist())
    big = np.array([0, 5, 10**19, 2**64 - 1], dtype=np.uint64)
    assert [str(x) for x in big[ann_mod._decimal_order(big)].tolist()] == sorted(str(x) for x in big.tolist())
    assert ann_mod._decimal_order(np.zeros(0, dtype=np.int64)).tolist() == []
