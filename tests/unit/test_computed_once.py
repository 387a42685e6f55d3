"""Each estimate is computed once per call (issue #37 item 3): ``estimate(method="all", recommend=True)`` hands
the estimates it made to the drift check and to the recommendation instead of running them again, and
``calibrate(checks=True)`` runs each estimator once per data set, calibration and setting."""

from __future__ import annotations

import collections
import glob
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import heroeval as he

ESTIMATORS = ("majority_vote", "dawid_skene", "gold_proportion", "hero1", "hero2", "rogan_gladen", "hero_joint")
EXAMPLE = Path(glob.glob(str(Path(he.__file__).parent / "examples" / "*" / "history.csv.gz"))[0]).parent

Key = tuple[str, int, object, tuple[tuple[str, str], ...]]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[collections.Counter[Key]]:
    """Every call of an estimator, keyed by its name, the data it ran on, the calibration's history weight and
    its other arguments: two calls with one key compute the same estimate."""
    counter: collections.Counter[Key] = collections.Counter()
    alive: list[object] = []  # the data sets seen, kept alive so that no two of them share an id()
    for name in ESTIMATORS:
        f = getattr(he, name)  # the function, wherever it is defined

        def counted(*args: Any, _f: Any = f, _name: str = name, **kw: Any) -> Any:
            cal = args[1] if len(args) > 1 else kw.get("calibration")
            w = None if cal is None else cal.settings.get("history_weight")
            alive.append(args[0])
            counter[(_name, id(args[0]), w, tuple(sorted((k, repr(v)) for k, v in kw.items())))] += 1
            return _f(*args, **kw)

        for mod in list(sys.modules.values()):  # the estimator under every name it is imported as
            if getattr(mod, "__name__", "").startswith("heroeval") and getattr(mod, name, None) is f:
                monkeypatch.setattr(mod, name, counted)
    yield counter


@pytest.fixture(scope="module")
def example() -> tuple[he.AnnotationSet, he.AnnotationSet]:
    hist = he.read_annotations(EXAMPLE / "history.csv.gz", gold=EXAMPLE / "history_gold.csv")
    cur = he.read_annotations(EXAMPLE / "current.csv.gz")
    return hist, cur


def _repeated(counter: collections.Counter[Key]) -> dict[Key, int]:
    return {k: n for k, n in counter.items() if n > 1}


def test_estimate_all_with_recommendation_runs_each_once(calls: collections.Counter[Key],
                                                         example: tuple[he.AnnotationSet, he.AnnotationSet]) -> None:
    hist, cur = example
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = he.calibrate(hist, checks=True)
        calls.clear()
        res = he.estimate(cur, cal, method="all", recommend=True, history=hist)
    assert res.recommended is not None and res.drift is not None
    on_round = collections.Counter({k: n for k, n in calls.items() if k[1] == id(cur)})
    assert _repeated(on_round) == {}
    # every method of "all" ran on the round, HERO-1 at the calibration's weight and at the checks' other one
    assert {k[0] for k in on_round} >= {"majority_vote", "dawid_skene", "gold_proportion", "hero1", "rogan_gladen",
                                        "hero_joint"}
    assert len({k[2] for k in on_round if k[0] == "hero1"}) == sum(n for k, n in on_round.items() if k[0] == "hero1")


def test_same_answer_as_a_separate_recommendation(example: tuple[he.AnnotationSet, he.AnnotationSet]) -> None:
    """Reusing the estimates changes nothing: the recommendation equals ``method="auto"``'s own run."""
    hist, cur = example
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = he.calibrate(hist, checks=True)
        both = he.estimate(cur, cal, method="all", recommend=True, history=hist)
        alone = he.estimate(cur, cal, method="auto", history=hist)
    rec = both.recommended
    assert rec.method == alone.details["auto"]["method"]
    assert rec.result.estimate == alone.estimate
    np.testing.assert_array_equal(rec.table, alone.details["auto"]["candidates"])


def test_calibrate_with_checks_runs_each_once_per_data_set(calls: collections.Counter[Key],
                                                           example: tuple[he.AnnotationSet, he.AnnotationSet]) -> None:
    hist, _ = example
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        he.calibrate(hist, checks=True)
    assert sum(calls.values()) > 0  # the checks do run estimators (mock rounds, held-out rounds)
    assert _repeated(calls) == {}
