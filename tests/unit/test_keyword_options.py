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
from heroeval.inference.gold_plan import EXPERT_PLAN_DEFAULTS, ExpertPlanOptions, expert_labels
from heroeval.inference.planning import PLAN_DEFAULTS, PlanOptions, plan
from heroeval.ingest.options import COLUMN_DEFAULTS, ROW_DEFAULTS, ColumnOptions, RowOptions
from heroeval.ingest.read import COMPACT_DEFAULTS, READ_DEFAULTS, CompactOptions, ReadOptions
from heroeval.multiclass.data import MULTICLASS_READ_DEFAULTS, MultiClassReadOptions, read_multiclass
from heroeval.report.page_data import PAGE_DEFAULTS, REPORT_DEFAULTS, PageOptions, ReportOptions, report_data
from heroeval.stage_a.settings import EM_DEFAULTS, EM_SETTING_KEYS, EMOptions, EMSettings
from heroeval.workflows.benchmark import BENCHMARK_DEFAULTS, BenchmarkOptions, run_benchmark
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
    (BenchmarkOptions, BENCHMARK_DEFAULTS), (PlanOptions, PLAN_DEFAULTS), (ExpertPlanOptions, EXPERT_PLAN_DEFAULTS),
    (PageOptions, PAGE_DEFAULTS), (ReportOptions, REPORT_DEFAULTS),
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
    (lambda: plan(he.calibrate(_history()), mu=0.3, half_width=0.05, labels_per_iten=2), "plan", "labels_per_item"),
    (lambda: expert_labels(he.calibrate(_history()), mu=0.3, half_width=0.05, round_items=100, n_cm=100),
     "expert_labels", "n_mc"),
    (lambda: report_data(_current(), he.calibrate(_history()), titel="x"), "report_data", "title"),
    (lambda: run_benchmark(None, resample=2), "run_benchmark", "resamples"),  # type: ignore[arg-type]
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


def test_plan_and_report_defaults_passed_explicitly_change_nothing() -> None:
    cal = he.calibrate(_history())
    a = plan(cal, mu=0.3, half_width=0.05, n_mc=20_000)
    b = plan(cal, mu=0.3, half_width=0.05, **{**PLAN_DEFAULTS, "n_mc": 20_000})
    assert a == b
    ea = expert_labels(cal, mu=0.3, half_width=0.06, round_items=200, n_mc=5000)
    eb = expert_labels(cal, mu=0.3, half_width=0.06, round_items=200, **{**EXPERT_PLAN_DEFAULTS, "n_mc": 5000})
    assert ea.to_dict() == eb.to_dict()
    cur = _current()
    est = he.estimate(cur, cal, method="all", recommend=True)
    da = report_data(cur, cal, est)
    db = report_data(cur, cal, est, **dict(PAGE_DEFAULTS))
    da.pop("generated"), db.pop("generated")
    assert da == db


def test_report_estimate_options_go_with_estimates_none() -> None:
    cal = he.calibrate(_history())
    cur = _current()
    est = he.estimate(cur, cal, method="all", recommend=True)
    with pytest.raises(he.HeroEvalError, match=r"estimate options \['ridge'\] go with estimates=None"):
        report_data(cur, cal, est, ridge=0.1)
    d = report_data(cur, cal, recommend=False, truth=0.35, title="t")  # computed here, without the recommendation
    assert d["title"] == "t" and d["truth"] == 0.35
    assert d["primary"] == "hero1" and report_data(cur, cal)["primary"] == "recommended"
