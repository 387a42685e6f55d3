"""Issue #38 item 2: a calibration saved and loaded again reproduces every number of the one in memory.

Rogan–Gladen's standard error counts how the labelers' gold-estimated rates covary through the gold items they
share; the file used to keep the gold counts only, so a reloaded calibration gave 0.93-0.96 of the in-memory
standard error on the shared sets (0.37 on an LLM-judge panel). The calibration now keeps its gold items' labels
(``Calibration.gold_labels``, saved with it)."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import heroeval as he
from heroeval.errors import CalibrationFileError
from heroeval.stage_a.gold import GoldLabels, gold_labels_of
from heroeval.workflows.demo import example_paths
from tests.conftest import Sim


def _reloaded(cal: he.Calibration, tmp_path: Path) -> he.Calibration:
    cal.save(tmp_path / "cal.json")
    return he.load_calibration(tmp_path / "cal.json")


def _same_estimates(current: he.AnnotationSet, cal: he.Calibration, again: he.Calibration) -> set[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mem = he.estimate(current, cal, method="all")
        fil = he.estimate(current, again, method="all")
    assert isinstance(mem, he.EstimateCollection) and isinstance(fil, he.EstimateCollection)
    compared = set()
    for m, f in fil.items():
        r = mem[m]
        assert f.estimate == pytest.approx(r.estimate, rel=1e-9, abs=1e-12), m
        assert f.standard_error == pytest.approx(r.standard_error, rel=1e-9), m
        for side in ("low", "high"):
            assert getattr(f.confidence_interval(), side) == pytest.approx(
                getattr(r.confidence_interval(), side), rel=1e-9, abs=1e-12), (m, side)
        compared.add(m)
    assert set(mem) - compared <= {"hero_joint"}  # it needs the history itself
    return compared


def test_every_standard_error_survives_the_file(tmp_path: Path) -> None:
    ex = example_paths()
    hist = he.read_annotations(ex["history"], gold=ex["gold"], covariates=ex["history_covariates"])
    cur = he.read_annotations(ex["current"], covariates=ex["current_covariates"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = he.calibrate(hist)
    compared = _same_estimates(cur, cal, _reloaded(cal, tmp_path))
    assert {"rogan_gladen", "gold_proportion", "hero1", "hero2"} <= compared


def test_with_the_eb_prior_and_pooled_labelers(sim: Sim, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = he.calibrate(sim.history, shrink="eb", pseudo_count=0.5)
    assert "rogan_gladen" in _same_estimates(sim.current, cal, _reloaded(cal, tmp_path))


def test_a_file_without_the_gold_labels_still_loads(sim: Sim, tmp_path: Path) -> None:
    """Files written before the labels were kept load; Rogan–Gladen then uses the gold counts (labelers taken
    as independent across gold items), so its standard error differs; every other method's is the same."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = he.calibrate(sim.history)
    obj = json.loads(cal.to_json())
    del obj["gold_labels"]
    (tmp_path / "old.json").write_text(json.dumps(obj))
    old = he.load_calibration(tmp_path / "old.json")
    assert old.gold_labels is None
    rg_mem = he.rogan_gladen(sim.current, cal)
    rg_old = he.rogan_gladen(sim.current, old)
    assert rg_old.estimate == pytest.approx(rg_mem.estimate, rel=1e-12)
    assert rg_old.influence is not None and rg_old.influence.space == "gold_counts"
    assert he.hero1(sim.current, old).standard_error == pytest.approx(he.hero1(sim.current, cal).standard_error,
                                                                      rel=1e-9)


def test_gold_labels_of_a_hand_made_history() -> None:
    # items a (gold 1: p says 1, q says 0), b (no gold), c (gold 0: q says 0)
    ds = he.AnnotationSet.from_arrays(["a", "a", "b", "c"], ["p", "q", "p", "q"], [1, 0, 1, 0],
                                      gold=(["a", "c"], [1, 0]))
    gl = gold_labels_of(ds)
    assert gl is not None and gl.n_items == 2
    assert gl.gold.tolist() == [1, 0] and gl.item_ptr.tolist() == [0, 2, 3]
    p, q = (list(ds.labeler_ids).index(x) for x in ("p", "q"))
    assert gl.labeler.tolist() == [p, q, q] and gl.label.tolist() == [1, 0, 0]
    assert gl.annotation_item.tolist() == [0, 0, 1]
    back = GoldLabels.from_dict(gl.to_dict(), n_labelers=2)
    for f in dataclasses.fields(GoldLabels):
        np.testing.assert_array_equal(getattr(back, f.name), getattr(gl, f.name))
    assert gold_labels_of(ds, keep=2) is None  # more labels than kept: the counts serve
    no_gold = he.AnnotationSet.from_arrays(["a"], ["p"], [1])
    assert gold_labels_of(no_gold) is None


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.update(n_labels=d["n_labels"] + 1), "expected"),
    (lambda d: d.update(labeler_int32_le_base64="***"), "labeler_int32_le_base64"),
    (lambda d: d.pop("n_items"), "missing or bad field"),
])
def test_a_damaged_gold_labels_field_is_named(sim: Sim, tmp_path: Path, edit: object, message: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = he.calibrate(sim.history)
    obj = json.loads(cal.to_json())
    edit(obj["gold_labels"])  # type: ignore[operator]
    (tmp_path / "bad.json").write_text(json.dumps(obj))
    with pytest.raises(CalibrationFileError, match=rf"bad.json: gold_labels: .*{message}"):
        he.load_calibration(tmp_path / "bad.json")
