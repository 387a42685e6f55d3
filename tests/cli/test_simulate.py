"""hero simulate and the Monte-Carlo runner (small, fast settings)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app
from heroeval.errors import HeroEvalError
from heroeval.workflows import montecarlo


def test_experiment_configs() -> None:
    assert [c.rho for c in montecarlo.experiment_configs("gold-rate")] == pytest.approx([0.05, 0.06, 0.07, 0.08, 0.09, 0.10])
    het = montecarlo.experiment_configs("heterogeneity")
    assert len(het) == 10 and sorted({c.k for c in het}) == [3, 6, 12, 40, 150]
    lab = montecarlo.experiment_configs("labels")
    assert sorted({c.labels_per_item for c in lab}) == [2, 3, 5, 10]
    with pytest.raises(HeroEvalError, match="unknown experiment 'nope'"):
        montecarlo.experiment_configs("nope")
    with pytest.raises(HeroEvalError, match="rho must be in"):
        montecarlo.experiment_configs("custom", rhos=[0.0])
    with pytest.raises(HeroEvalError, match="labels per item must be in"):
        montecarlo.experiment_configs("custom", labels=[11])


def test_run_is_seeded_and_summarised() -> None:
    cfg = montecarlo.experiment_configs("custom", rhos=[0.2], base=montecarlo.SimConfig(n=80, N=150, J=5))
    a = montecarlo.run(cfg, reps=4, seed=3, workers=1)
    b = montecarlo.run(cfg, reps=4, seed=3, workers=1)
    np.testing.assert_array_equal(a["estimate"].to_numpy(), b["estimate"].to_numpy())
    assert set(a["method"]) == {*he.METHODS, "majority_vote_ties0"}
    s = montecarlo.summarize(a)
    assert set(s.columns) >= {"abs_bias", "sd", "rmse", "coverage", "ci_width"}
    h1 = s[s.method == "hero1"].iloc[0]
    e = a[a.method == "hero1"]
    assert h1.rmse == pytest.approx(float(np.sqrt(np.mean((e.estimate - e.mu0) ** 2))))
    assert math.isnan(s[s.method == "majority_vote"].iloc[0].coverage)  # its interval is not for mu0
    with pytest.raises(HeroEvalError, match="reps must be an integer >= 2"):
        montecarlo.run(cfg, reps=1)


def test_cli_simulate_writes_tables_and_figures(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "sim"
    r = runner.invoke(app, ["simulate", "--experiment", "labels", "--labels-per-item", "3,10", "--rho", "0.2",
                            "--reps", "3", "--workers", "1", "--n", "60", "--history-items", "120", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "replications in" in r.stdout
    for f in ("summary.csv", "summary.md", "replications.csv.gz", "labels_per_item_sweep.png", "labels_per_item_sweep.svg"):
        assert (out / f).exists(), f
    r = runner.invoke(app, ["simulate", "--experiment", "custom", "--reps", "2", "--workers", "1", "--n", "50",
                            "--history-items", "100", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["reps"] == 2
    r = runner.invoke(app, ["simulate", "--experiment", "custom", "--reps", "2", "--pool-shift", "3"])
    assert r.exit_code == 2 and "--pool-shift needs --labels-per-item" in r.stderr
    r = runner.invoke(app, ["simulate", "--rho", "abc"])
    assert r.exit_code == 2 and "expected comma-separated numbers" in r.stderr


def test_two_workers_give_the_same_rows() -> None:
    cfg = montecarlo.experiment_configs("custom", rhos=[0.2], base=montecarlo.SimConfig(n=60, N=120, J=5))
    one = montecarlo.run(cfg, reps=4, seed=9, workers=1)
    two = montecarlo.run(cfg, reps=4, seed=9, workers=2)
    np.testing.assert_allclose(one["estimate"].to_numpy(), two["estimate"].to_numpy(), rtol=0, atol=0)
