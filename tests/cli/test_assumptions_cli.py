"""hero drift, hero plan and estimate --new-labelers / --on-shift end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app
from heroeval.simulate import shift_dgp

runner = CliRunner()


def _dump(ds: he.AnnotationSet, path: Path) -> Path:
    pd.DataFrame({"item_id": ds.item_ids[ds.annotation_item], "labeler_id": ds.labeler_ids[ds.labeler],
                  "label": ds.label}).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("assume")
    a, b = np.full(5, 0.85), np.full(5, 0.85)
    cb = b.copy()
    cb[4] = 0.4
    drift = shift_dgp(3, alpha=a, beta=b, current_beta=cb, N=1500, n=600, labels_per_item=3)
    new = shift_dgp(4, alpha=a, beta=b, history_pool=np.arange(4), N=1500, n=600, labels_per_item=3)
    out = {"history": _dump(drift.history, d / "h.csv"), "drift": _dump(drift.current, d / "c_drift.csv"),
           "new_history": _dump(new.history, d / "h2.csv"), "new": _dump(new.current, d / "c_new.csv")}
    for key, ds in (("gold", drift.history), ("gold2", new.history)):
        g = ds.gold >= 0
        pd.DataFrame({"item_id": ds.item_ids[g], "gold": ds.gold[g]}).to_csv(d / f"{key}.csv", index=False)
        out[key] = d / f"{key}.csv"
    out["cal"] = d / "cal.json"
    he.calibrate(drift.history).save(out["cal"])
    return out


def test_drift_command(files: dict[str, Path]) -> None:
    r = runner.invoke(app, ["drift", str(files["drift"]), "--calibration", str(files["cal"]), "-f", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["flagged"] == ["L04"]
    assert out["hero1_reestimated"]["details"]["dropped_labelers"] == ["L04"]
    assert "TransportabilityWarning" in r.stderr and "L04" in r.stderr
    r = runner.invoke(app, ["drift", str(files["drift"]), "--history", str(files["history"]), "--gold",
                            str(files["gold"]), "--reestimate", "estimate"])
    assert r.exit_code == 0 and "DRIFT" in r.stdout and "flagged labelers estimate" in r.stdout
    r = runner.invoke(app, ["drift", str(files["drift"]), "--calibration", str(files["cal"]), "--reestimate", "x"])
    assert r.exit_code == 2


def test_new_labelers_option(files: dict[str, Path]) -> None:
    base = ["estimate", str(files["new"]), "--history", str(files["new_history"]), "--gold", str(files["gold2"]),
            "--method", "hero1", "-f", "json"]
    r = runner.invoke(app, [*base, "--new-labelers", "estimate"])
    assert r.exit_code == 0, r.output
    det = json.loads(r.stdout)["estimates"]["hero1"]["details"]
    assert list(det["new_labelers"]) == ["L04"]
    r = runner.invoke(app, [*base, "--new-labelers", "exclude"])
    assert r.exit_code == 0 and json.loads(r.stdout)["estimates"]["hero1"]["details"]["excluded_labelers"] == ["L04"]
    r = runner.invoke(app, [*base, "--exclude-new-labelers"])
    assert r.exit_code == 0
    r = runner.invoke(app, base)  # the default (issue #38): HERO-1 estimates the new labeler
    assert r.exit_code == 0 and list(json.loads(r.stdout)["estimates"]["hero1"]["details"]["new_labelers"]) == ["L04"]
    r = runner.invoke(app, [*base, "--new-labelers", "error"])
    assert r.exit_code == 2 and "--new-labelers estimate" in r.stderr


def test_plan_command(files: dict[str, Path]) -> None:
    r = runner.invoke(app, ["plan", "--calibration", str(files["cal"]), "--mu", "0.3", "--half-width", "0.04",
                            "--labels-per-item", "1,3", "-f", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    assert [x["labels_per_item"] for x in rows] == [1, 3] and rows[0]["n_items"] > rows[1]["n_items"]
    r = runner.invoke(app, ["plan", "--calibration", str(files["cal"]), "--mu", "0.3", "--difference", "0.05",
                            "--pool", "L00=2,L01=1,L02=1"])
    assert r.exit_code == 0 and "items per round" in r.stdout
    r = runner.invoke(app, ["plan", "--calibration", str(files["cal"]), "--mu", "0.3"])
    assert r.exit_code == 2 and "exactly one" in r.stderr
    r = runner.invoke(app, ["plan", "--calibration", str(files["cal"]), "--mu", "0.3", "--half-width", "0.05",
                            "--pool", "L00=2,L01"])
    assert r.exit_code == 2 and "--pool" in r.stderr


def test_estimate_checks_drift_by_default(files: dict[str, Path]) -> None:
    base = ["estimate", str(files["drift"]), "--calibration", str(files["cal"]), "--method", "hero1", "-f", "json"]
    r = runner.invoke(app, base)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["drift"]["flagged"] == ["L04"]
    assert "TransportabilityWarning" in r.stderr
    r = runner.invoke(app, [*base, "--no-check-drift"])
    assert r.exit_code == 0 and "drift" not in json.loads(r.stdout) and "Transportability" not in r.stderr
