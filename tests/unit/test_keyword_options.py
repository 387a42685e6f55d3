"""The public functions' keyword options, declared once as TypedDicts (heroeval.core.options): every declared
name has its default, an unknown keyword is a TypeError naming the function and the closest name, and passing
every default explicitly changes nothing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.core.options import option_names, options_of
from heroeval.estimators.registry import ESTIMATE_DEFAULTS, EstimateKeywords, estimate_methods
from heroeval.ingest.options import COLUMN_DEFAULTS, ROW_DEFAULTS, ColumnOptions, RowOptions
from heroeval.ingest.read import COMPACT_DEFAULTS, READ_DEFAULTS, CompactOptions, ReadOptions
from heroeval.multiclass.data import MULTICLASS_READ_DEFAULTS, MultiClassReadOptions, read_multiclass
from heroeval.stage_a.settings import EM_DEFAULTS, EM_SETTING_KEYS, EMOptions, EMSettings
from heroeval.workflows.options import (
    CALIBRATE_DASK_DEFAULTS,
    CALIBRATE_DEFAULTS,
    ESTIMATE_CALL_DEFAULTS,
    STAGE_A_DEFAULTS,
    CalibrateDaskOptions,
    CalibrateOptions,
    EstimateCallOptions,
    StageAOptions,
)

PAIRS = [
    (EMOptions, EM_DEFAULTS), (ColumnOptions, COLUMN_DEFAULTS), (RowOptions, ROW_DEFAULTS),
    (ReadOptions, READ_DEFAULTS), (CompactOptions, COMPACT_DEFAULTS),
    (MultiClassReadOptions, MULTICLASS_READ_DEFAULTS), (EstimateKeywords, ESTIMATE_DEFAULTS),
    (StageAOptions, STAGE_A_DEFAULTS), (CalibrateOptions, CALIBRATE_DEFAULTS),
    (CalibrateDaskOptions, CALIBRATE_DASK_DEFAULTS), (EstimateCallOptions, ESTIMATE_CALL_DEFAULTS),
]


@pytest.mark.parametrize(("declared", "defaults"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_every_declared_option_has_one_default(declared: type, defaults: dict[str, object]) -> None:
    assert set(option_names(declared)) == set(defaults)


def test_em_options_are_the_em_settings() -> None:
    assert option_names(EMOptions) == EM_SETTING_KEYS
    assert EMSettings(**EM_DEFAULTS) == EMSettings()


def test_options_of_fills_defaults_and_keeps_given() -> None:
    got = options_of("f", {"tol": 1e-3}, EMOptions, EM_DEFAULTS)
    assert got == {**EM_DEFAULTS, "tol": 1e-3}


def _history() -> he.AnnotationSet:
    rng = np.random.default_rng(3)
    n, labelers = 120, ["a", "b", "c", "d"]
    truth = rng.random(n) < 0.3
    items, labs, labels = [], [], []
    for i in range(n):
        for j, lab in enumerate(labelers):
            items.append(i)
            labs.append(lab)
            p = (0.85 - 0.05 * j) if truth[i] else (0.15 + 0.03 * j)
            labels.append(int(rng.random() < p))
    gold_ids = list(range(0, n, 4))
    return he.AnnotationSet.from_arrays(items, labs, labels, gold=(gold_ids, truth[gold_ids].astype(int)))


def _current() -> he.AnnotationSet:
    rng = np.random.default_rng(4)
    items = np.repeat(np.arange(500, 560), 4)
    labs = np.tile(["a", "b", "c", "d"], 60)
    return he.AnnotationSet.from_arrays(items, labs, (rng.random(items.size) < 0.35).astype(int))


@pytest.mark.parametrize(("call", "name", "hint"), [
    (lambda: he.calibrate(_history(), tols=1e-6), "calibrate", "tol"),
    (lambda: he.calibrate_dask("x.parquet", gold="g.csv", item_coll="task"), "calibrate_dask", "item_col"),
    (lambda: he.estimate(_current(), history=_history(), ridg=0.1), "estimate", "ridge"),
    (lambda: estimate_methods(_current(), history=_history(), on_shfit="warn"), "estimate_methods", "on_shift"),
    (lambda: he.read_annotations(pd.DataFrame({"item_id": [1], "labeler_id": ["a"], "label": [1]}),
                                 labler_col="labeler_id"), "read_annotations", "labeler_col"),
    (lambda: read_multiclass(pd.DataFrame({"item_id": [1], "labeler_id": ["a"], "label": [1]}), missin="drop"),
     "read_multiclass", "missing"),
])
def test_unknown_keyword_names_the_function_and_the_closest_name(call, name: str, hint: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match=rf"{name}\(\) got an unexpected keyword argument .*did you mean '{hint}'"):
        call()


def test_every_default_passed_explicitly_changes_nothing() -> None:
    hist, cur = _history(), _current()
    defaults = {k: v for k, v in CALIBRATE_DEFAULTS.items()}
    a, b = he.calibrate(hist), he.calibrate(hist, **defaults)
    np.testing.assert_array_equal(a.alpha, b.alpha)
    np.testing.assert_array_equal(a.beta, b.beta)
    ea = he.estimate(cur, a, method="all")
    eb = he.estimate(cur, a, method="all", **dict(ESTIMATE_CALL_DEFAULTS))
    assert list(ea) == list(eb)
    for m in ea:
        assert ea[m].to_dict() == eb[m].to_dict()


def test_keywords_still_reach_the_fit() -> None:
    hist = _history()
    loose = he.calibrate(hist, tol=1e-3, criterion="loglik", max_iter=500)
    tight = he.calibrate(hist)
    assert loose.settings["tol"] == 1e-3 and loose.settings["criterion"] == "loglik"
    assert tight.settings["tol"] == 1e-8
    with pytest.raises(he.HeroEvalError, match="tol must be a positive number"):
        he.calibrate(hist, tol=-1.0)
