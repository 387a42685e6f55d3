"""``hero calibrate --compact``: the compact history from the command line, the same calibration as without it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app

runner = CliRunner()


def test_calibrate_compact_equals_calibrate_without_checks(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    n, J = 1500, 8
    y = (rng.random(n) < 0.35).astype(int)
    k = rng.integers(2, 5, n)
    item = np.repeat(np.arange(n), k)
    lab = rng.integers(0, J, item.size)
    label = (rng.random(item.size) < np.where(y[item] == 1, 0.85, 0.2)).astype(int)
    pd.DataFrame({"item_id": item, "labeler_id": lab, "label": label}).drop_duplicates(
        ["item_id", "labeler_id"]).to_parquet(tmp_path / "h.parquet")
    g = rng.choice(n, 150, replace=False)
    pd.DataFrame({"item_id": g, "gold": y[g]}).to_csv(tmp_path / "g.csv", index=False)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    r = runner.invoke(app, ["calibrate", str(tmp_path / "h.parquet"), "--gold", str(tmp_path / "g.csv"), "-o", str(a),
                            "--compact", "--tol", "1e-12"])
    assert r.exit_code == 0, r.output
    assert "model checks skipped" in r.output
    r = runner.invoke(app, ["calibrate", str(tmp_path / "h.parquet"), "--gold", str(tmp_path / "g.csv"), "-o", str(b),
                            "--no-checks", "--reader", "duckdb", "--engine", "numba", "--tol", "1e-12"])
    assert r.exit_code == 0, r.output
    ca, cb = he.load_calibration(a), he.load_calibration(b)
    np.testing.assert_allclose(ca.alpha, cb.alpha, rtol=0, atol=1e-10)
    np.testing.assert_allclose(ca.beta, cb.beta, rtol=0, atol=1e-10)
    assert json.loads(a.read_text())["settings"]["history_storage"] == "compact"
    r = runner.invoke(app, ["calibrate", str(tmp_path / "h.parquet"), "--gold", str(tmp_path / "g.csv"), "-o", str(a),
                            "--compact", "--history-weight", "cv"])
    assert r.exit_code == 2 and "--compact takes none of" in r.output
