"""Issue #38 (rough edges and docs against the tool): the drift warning names what the user has, and the store's
commands say it in the CLI's words; the labeler map's labels do not print over each other and it shows no colour
bar that says nothing; the trend report names rounds; the benchmark figure has every method and the recommended
estimate; the unknown-method error lists the current-gold methods."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import heroeval as he
from heroeval.checks.drift import check_drift
from heroeval.cli import app
from heroeval.estimators.ppi import ALL_GOLD_METHODS
from heroeval.estimators.table import METHODS
from heroeval.report import plots
from heroeval.report.figures import _label_offsets, labeler_map_svg
from heroeval.report.trend import _drift_table, _tick
from heroeval.workflows.demo import example_paths


def test_drift_warning_names_the_flagged_labelers_not_a_variable() -> None:
    ex = example_paths()
    hist = he.read_annotations(ex["history"], gold=ex["gold"])
    cur = he.read_annotations(ex["current"])
    cal = he.calibrate(hist)
    with pytest.warns(he.TransportabilityWarning) as rec:
        check = check_drift(cur, cal)
    msg = str(rec[0].message)
    assert check.flagged and repr(list(check.flagged)) in msg
    assert "check.flagged" not in msg and "reestimate_without(<this round>, <its calibration>," in msg


def test_store_estimate_warns_in_the_cli_s_words(tmp_path: Path) -> None:
    ex = example_paths()
    hist = pd.read_csv(ex["history"])
    runner = CliRunner()
    db = str(tmp_path / "s.duckdb")
    for model, part in list(hist.groupby("round"))[:4]:
        f = tmp_path / f"{model}.csv"
        part.drop(columns="round").to_csv(f, index=False)
        assert runner.invoke(app, ["store", "add", str(f), "--gold", str(ex["gold"]), "--store", db]).exit_code == 0
    r = runner.invoke(app, ["store", "add", str(ex["current"]), "--name", "now", "--role", "current", "--store", db])
    assert r.exit_code == 0
    r = runner.invoke(app, ["store", "estimate", "now", "--store", db])
    assert r.exit_code == 0, r.output
    assert "labeler drift" in r.stderr  # the demo's judges drift here
    assert "hero drift with --reestimate drop" in r.stderr and "heroeval.checks" not in r.stderr


def test_close_labelers_get_separate_label_corners() -> None:
    x = np.array([0.80, 0.805, 0.81, 0.50])
    y = np.array([0.90, 0.90, 0.905, 0.50])
    off = _label_offsets(x, y)
    assert len(set(off[:3])) == 3  # three close points: three corners
    assert off[3] == off[0]  # a point far from the others keeps the first corner


def _labelers(gold: list[int]) -> list[dict[str, object]]:
    return [{"index": k + 1, "sensitivity": 0.7 + 0.02 * k, "specificity": 0.8, "sensitivity_ci": [0.6, 0.8],
             "specificity_ci": [0.7, 0.9], "n_history_labels": 100 + k, "gold_overlap": g}
            for k, g in enumerate(gold)]


def test_labeler_map_colour_bar_only_when_gold_counts_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.figure

    bars: list[int] = []
    real = matplotlib.figure.Figure.colorbar
    monkeypatch.setattr(matplotlib.figure.Figure, "colorbar",
                        lambda self, *a, **k: bars.append(1) or real(self, *a, **k))
    labeler_map_svg(_labelers([20, 20, 20]), "m1")
    labeler_map_svg(_labelers([152, 155, 158]), "m1b")  # a few per cent apart: colour says nothing
    assert bars == []
    labeler_map_svg(_labelers([5, 20, 40]), "m2")
    assert bars == [1]


def test_trend_names_rounds() -> None:
    assert _tick("llama2-13b-chat") == "llama2-13b-chat"
    assert _tick("a-very-long-model-version-name") == "a-very-long-model…"
    d = {"rounds": [{"round": "gpt-4t"}], "labelers": ["J1"],
         "drift": [{"round": "gpt-4t", "labeler": "J1", "n_labels": 10, "observed": 0.5, "expected": 0.4, "z": 1.0,
                    "p_adjusted": 0.3, "flagged": False, "gold_sensitivity": 0.8, "gold_specificity": 0.9,
                    "n_gold_labels": 5}]}
    page = _drift_table(d)
    assert "gpt-4t" in page and ">R1<" not in page


def test_benchmark_figure_has_every_method_and_the_recommended_estimate() -> None:
    assert set(METHODS) | {"auto"} <= set(plots._STYLE)
    assert plots._title("auto") == "recommended (auto)"


def test_unknown_method_lists_the_current_gold_methods() -> None:
    cur = he.AnnotationSet.from_arrays([1, 1, 2, 2], ["a", "b"] * 2, [1, 0, 0, 0])
    hist = he.AnnotationSet.from_arrays([5, 5, 6, 6, 7, 7], ["a", "b"] * 3, [1, 1, 0, 0, 1, 0],
                                        gold=([5, 6], [1, 0]))
    with pytest.raises(he.HeroEvalError) as exc:
        he.estimate(cur, history=hist, method=["nope", "hero1"])
    assert all(m in str(exc.value) for m in ALL_GOLD_METHODS)


def test_every_table_command_writes_csv(tmp_path: Path) -> None:
    """Issue #38: CSV export of any table: compare, drift, plan, store estimate and store trend take --csv, as
    hero estimate does; each file is the result's to_frame()."""
    ex = example_paths()
    runner = CliRunner()
    cal = tmp_path / "c.json"
    assert runner.invoke(app, ["calibrate", str(ex["history"]), "--gold", str(ex["gold"]), "-o", str(cal)]).exit_code == 0
    cur = str(ex["current"])
    runs = {
        "compare": ["compare", cur, cur, "--calibration", str(cal), "--method", "hero1,majority_vote"],
        "drift": ["drift", cur, "--calibration", str(cal)],
        "plan": ["plan", "--calibration", str(cal), "--mu", "0.6", "--half-width", "0.05", "--labels-per-item", "3,5"],
    }
    for name, args in runs.items():
        out = tmp_path / f"{name}.csv"
        r = runner.invoke(app, [*args, "--csv", str(out)])
        assert r.exit_code == 0, (name, r.output)
        frame = pd.read_csv(out)
        assert len(frame) >= 1, name
    assert list(pd.read_csv(tmp_path / "plan.csv")["labels_per_item"]) == [3, 5]
    assert {"hero1", "majority_vote"} <= set(pd.read_csv(tmp_path / "compare.csv").iloc[:, 0])
    db = str(tmp_path / "s.duckdb")
    hist = pd.read_csv(ex["history"])
    for model, part in list(hist.groupby("round"))[:3]:
        f = tmp_path / f"{model}.csv"
        part.drop(columns="round").to_csv(f, index=False)
        assert runner.invoke(app, ["store", "add", str(f), "--gold", str(ex["gold"]), "--store", db]).exit_code == 0
    r = runner.invoke(app, ["store", "estimate", cur, "--store", db, "--csv", str(tmp_path / "se.csv")])
    assert r.exit_code == 0, r.output
    assert pd.read_csv(tmp_path / "se.csv").iloc[0, 0] == "recommended"
    r = runner.invoke(app, ["store", "trend", "--store", db, "--no-drift", "--csv", str(tmp_path / "tr.csv")])
    assert r.exit_code == 0, r.output
    assert len(pd.read_csv(tmp_path / "tr.csv")) == 3
    r = runner.invoke(app, ["plan", "--calibration", str(cal), "--mu", "0.6", "--half-width", "0.05",
                            "--csv", str(tmp_path / "nowhere" / "p.csv")])
    assert r.exit_code == 2 and "--csv" in r.stderr


def test_one_status_vocabulary_in_every_view() -> None:
    """Issue #38: status words mixed 'ok' and 'interior'; now every method says 'ok' for an estimate inside (0, 1),
    and to_frame(), summary() and to_dict() carry the same word as the result."""
    from tests.conftest import simulate

    s = simulate(3)
    cal = he.calibrate(s.history, checks=True)
    vocab = {"ok", "boundary_0", "boundary_1", "unidentified", "unreliable"}
    for cur in (s.current, s.current.take_items(range(12))):
        res = he.estimate(cur, cal, method="all", recommend=True, history=s.history)
        frame = res.to_frame()
        assert set(frame["status"]) <= vocab, set(frame["status"])
        for m, r in res.results.items():
            assert r.status in vocab and r.to_dict()["status"] == r.status == frame.loc[m, "status"]
        assert "interior" not in res.summary()


def test_store_commands_take_format_json_as_every_command(tmp_path: Path) -> None:
    """The store's commands took only --json where every other hero command takes -f/--format json."""
    ex = example_paths()
    runner = CliRunner()
    db = str(tmp_path / "s.duckdb")
    assert runner.invoke(app, ["store", "add", str(ex["current"]), "--name", "now", "--store", db]).exit_code == 0
    for args in (["store", "list"], ["store", "log"], ["store", "show", "now"], ["store", "pins"]):
        a = runner.invoke(app, [*args, "--store", db, "-f", "json"])
        b = runner.invoke(app, [*args, "--store", db, "--json"])
        assert a.exit_code == 0 and b.exit_code == 0, (args, a.output)
        assert json.loads(a.stdout) == json.loads(b.stdout)


def test_compare_skips_a_method_it_cannot_compare(monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/compare_real.py found compare(method=[...]) stopping at 'rogan_gladen: no influence values,
    cannot compare'; a list now skips that method with the reason (a single method still raises)."""
    from heroeval.inference import comparison
    from tests.conftest import simulate

    s = simulate(2)
    cal = he.calibrate(s.history)
    real = comparison.difference

    def fussy(a: he.EstimateResult, b: he.EstimateResult, pairing: Any = None) -> comparison.Comparison:
        if a.method == "rogan_gladen":
            raise he.HeroEvalError("rogan_gladen: no influence values, cannot compare")
        return real(a, b, pairing)

    monkeypatch.setattr(comparison, "difference", fussy)
    a, b = s.current.take_items(range(70)), s.current.take_items(range(70, 150))
    cc = he.compare(a, b, cal, method=["hero1", "rogan_gladen"])
    assert isinstance(cc, comparison.ComparisonCollection)
    assert list(cc) == ["hero1"] and "no influence values" in cc.skipped["rogan_gladen"]
    with pytest.raises(he.HeroEvalError, match="no influence values"):
        he.compare(a, b, cal, method="rogan_gladen")
