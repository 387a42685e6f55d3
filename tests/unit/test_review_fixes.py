"""Regression tests for defects found in review (each names the defect)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app
from heroeval.errors import HeroEvalError
from heroeval.stage_a import two_coin
from heroeval.stage_a.covariance import ParameterCovariance
from tests.conftest import Sim, simulate


def test_history_that_does_not_match_the_calibration_is_refused(calibration: he.Calibration, sim: Sim) -> None:
    loaded = he.Calibration.from_dict(calibration.to_dict())
    other = simulate(5, J=7).history  # an extra labeler
    with pytest.raises(HeroEvalError, match="the history does not match the calibration"):
        he.estimate(sim.current, loaded, history=other, method="hero_joint")


def test_design_checks_labeler_codes() -> None:
    with pytest.raises(ValueError, match="labeler codes out of range"):
        two_coin.make_design(np.array([0, 1]), np.array([3]), np.array([1]), 2, np.array([-1], dtype=np.int8),
                        np.array([0]), 1)


def test_em_prevalence_at_the_bound_is_a_boundary_estimate(calibration: he.Calibration, sim: Sim) -> None:
    cur = sim.current
    zeros = he.AnnotationSet.from_arrays(cur.item_ids[cur.annotation_item], cur.labeler_ids[cur.labeler],
                                         np.zeros(cur.n_annotations, dtype=int))
    for m in ("dawid_skene", "hero_joint", "hero1"):
        r = he.estimate(zeros, calibration, method=m)
        assert isinstance(r, he.EstimateResult)
        assert r.status == "boundary_0", m
        # no standard error, so no logit interval; the default interval is the one-sided bound by test inversion
        assert math.isnan(r.standard_error) and math.isnan(r.confidence_interval(method="logit").low), m
        ci = r.confidence_interval()
        if m == "dawid_skene":  # no test inversion for the current-only EM: still no interval
            assert math.isnan(ci.low)
        else:
            assert ci.low == 0.0 and 0 < ci.high < 1 and ci.alternative == "less", m


def test_hero2_does_not_depend_on_covariate_units(calibration: he.Calibration, sim: Sim) -> None:
    cur, hist = sim.current, sim.history

    def with_cols(ds: he.AnnotationSet, scale: float) -> he.AnnotationSet:
        x = np.asarray(ds.covariates)[:, 0]
        big = 500 + 4500 * np.random.default_rng(0).random(ds.n_items)
        return he.AnnotationSet.from_arrays(ds.item_ids[ds.annotation_item], ds.labeler_ids[ds.labeler], ds.label,
                                            gold=(ds.item_ids[ds.gold >= 0], ds.gold[ds.gold >= 0]),
                                            covariates=(ds.item_ids, np.c_[x * scale, big]),
                                            covariate_names=["x", "length"])

    r = [he.hero2(with_cols(cur, s), he.calibrate(with_cols(hist, s))) for s in (1.0, 1e-3)]
    assert r[0].estimate == pytest.approx(r[1].estimate, abs=1e-9)
    assert r[0].standard_error == pytest.approx(r[1].standard_error, rel=1e-6)
    assert r[1].details["constant_columns"] == []


def test_na_like_ids_are_ids(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text("item_id,labeler_id,label\nnull,NA,1\nN/A,None,0\nx,NA,\n")
    g = tmp_path / "g.csv"
    g.write_text("item_id,gold\nnull,1\n")
    ds = he.read_annotations(p, gold=g)
    assert sorted(ds.item_ids) == ["N/A", "null"] and sorted(ds.labeler_ids) == ["NA", "None"]
    assert ds.n_gold == 1
    assert ds.report.tables[0].dropped == {"missing label": 1}


def test_gold_and_covariate_item_column_follow_item_col() -> None:
    ann = pd.DataFrame({"prompt": ["a", "b"], "labeler_id": ["w", "w"], "label": [1, 0]})
    gold = pd.DataFrame({"prompt": ["a"], "gold": [1]})
    cov = pd.DataFrame({"prompt": ["a", "b"], "x": [1.0, 2.0]})
    ds = he.read_annotations(ann, gold=gold, covariates=cov, item_col="prompt")
    assert ds.n_gold == 1 and ds.covariate_names == ("x",)


def test_parameter_covariance_must_be_psd(calibration: he.Calibration) -> None:
    bad = dataclasses.replace(
        calibration, covariance=ParameterCovariance.from_matrix(-np.asarray(calibration.parameter_covariance)))
    with pytest.raises(he.CalibrationFileError, match="not positive semi-definite"):
        he.Calibration.from_dict(bad.to_dict())


def test_two_loads_of_one_file_combine(tmp_path: Path, calibration: he.Calibration, sim: Sim) -> None:
    p = tmp_path / "c.json"
    calibration.save(p)
    a = he.hero1(sim.current, he.load_calibration(p))
    b = he.hero1(simulate(3).current, he.load_calibration(p))
    assert a.influence is not None and b.influence is not None
    assert math.isfinite(a.influence.history_covariance(b.influence))


def test_compare_all_reports_skipped_methods(calibration: he.Calibration, sim: Sim) -> None:
    cur = sim.current
    bare = he.AnnotationSet.from_arrays(cur.item_ids[cur.annotation_item], cur.labeler_ids[cur.labeler], cur.label)
    cc = he.compare(sim.current, bare, calibration, method="all")
    assert isinstance(cc, he.ComparisonCollection)
    assert "hero2" not in cc and "hero2" in cc.skipped and "hero2" in cc.to_dict()["skipped"]


def test_cli_validates_options_before_work(tmp_path: Path) -> None:
    runner = CliRunner()
    p = tmp_path / "a.csv"
    p.write_text("item_id,labeler_id,label\n1,a,1\n")
    c = tmp_path / "c.json"
    c.write_text(json.dumps({}))
    r = runner.invoke(app, ["estimate", str(p), "--calibration", str(c), "--confidence-level", "95"])
    assert r.exit_code == 2 and "--confidence-level must be in (0, 1), got 95" in r.stderr
    r = runner.invoke(app, ["estimate", str(p), "--calibration", str(c), "--round-col", "round"])
    assert r.exit_code == 2 and "--round-col goes with --history" in r.stderr
