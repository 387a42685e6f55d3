"""hero compare --a-gold / --b-gold: expert labels in one or both rounds (issue 22)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from heroeval.cli import app
from heroeval.workflows.demo import example_paths

runner = CliRunner()


@pytest.fixture(scope="module")
def rounds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bundled round split at random into halves A and B, 30 expert labels on each from its truth file."""
    tmp = tmp_path_factory.mktemp("cmpgold")
    ex = example_paths()
    folder = ex["history"].parent
    cal = tmp / "calib.json"
    r = runner.invoke(app, ["calibrate", str(ex["history"]), "--gold", str(folder / "history_gold.csv"),
                            "-o", str(cal), "--no-checks"])
    assert r.exit_code == 0, r.output
    cur = pd.read_csv(folder / "current.csv.gz", dtype={"item_id": str})
    truth = pd.read_csv(folder / "current_truth.csv", dtype={"item_id": str})
    rng = np.random.default_rng(3)
    items = rng.permutation(cur["item_id"].unique())
    out = {"cal": cal}
    for name, half in (("a", items[:100]), ("b", items[100:])):
        out[name] = tmp / f"round_{name}.csv"
        cur[cur["item_id"].isin(half)].to_csv(out[name], index=False)
        out[f"{name}_gold"] = tmp / f"gold_{name}.csv"
        truth[truth["item_id"].isin(rng.choice(half, 30, replace=False))].to_csv(out[f"{name}_gold"], index=False)
    return out


def _args(f: dict[str, Path], *extra: str) -> list[str]:
    return ["compare", str(f["a"]), str(f["b"]), "--calibration", str(f["cal"]), "--no-check-drift", *extra]


def test_compare_with_gold_in_both_rounds(rounds: dict[str, Path]) -> None:
    gold = ["--a-gold", str(rounds["a_gold"]), "--b-gold", str(rounds["b_gold"])]
    r = runner.invoke(app, _args(rounds, *gold, "--method", "hero1,hero1_ppi,gold_only", "-f", "json"))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out["difference"]) == {"hero1", "hero1_ppi", "gold_only"}
    d = out["difference"]["hero1_ppi"]
    assert d["n_gold"] == {"a": 30, "b": 30} and d["df"] > 1
    assert d["estimate"] == pytest.approx(out["a"]["estimates"]["hero1_ppi"]["estimate"]
                                          - out["b"]["estimates"]["hero1_ppi"]["estimate"])
    cg = out["ingest"]["current_gold"]
    assert cg["a"]["n_gold"] == 30 and cg["a"]["n_items"] == 100 and cg["a"]["gold_file"] == str(rounds["a_gold"])
    assert cg["b"]["n_gold"] == 30 and cg["b"]["n_items"] == 99
    r = runner.invoke(app, _args(rounds, *gold, "--method", "hero1,hero1_ppi"))
    assert r.exit_code == 0, r.output
    assert "current gold: 30 of 100 items of round 'A' have expert labels" in r.stdout
    assert "current gold: 30 of 99 items of round 'B' have expert labels" in r.stdout
    assert "HERO-1 + current gold (PPI++)" in r.stdout


def test_compare_with_gold_in_one_round(rounds: dict[str, Path]) -> None:
    r = runner.invoke(app, _args(rounds, "--a-gold", str(rounds["a_gold"]), "--method", "hero1_ppi"))
    assert r.exit_code == 2
    assert "round B ('B') has no current gold" in r.stderr and "--b-gold" in r.stderr
    r = runner.invoke(app, _args(rounds, "--a-gold", str(rounds["a_gold"]), "--method", "all", "-f", "json"))
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert "hero1_ppi" not in out["difference"] and "hero1" in out["difference"]
    assert "has no current gold" in out["skipped"]["hero1_ppi"]
    assert out["ingest"]["current_gold"]["b"] is None and out["ingest"]["current_gold"]["a"]["n_gold"] == 30
    r = runner.invoke(app, _args(rounds, "--a-gold", str(rounds["a_gold"]), "--method", "all"))
    assert r.exit_code == 0 and "hero1_ppi: not compared (round B ('B') has no current gold" in " ".join(
        r.stdout.split())


def test_bad_gold_file_names_the_file(rounds: dict[str, Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad_gold.csv"
    bad.write_text("item_id,verdict\nllama2-7b-chat__q001,yes\n")
    r = runner.invoke(app, _args(rounds, "--a-gold", str(rounds["a_gold"]), "--b-gold", str(bad)))
    assert r.exit_code == 2 and "bad_gold.csv" in r.stderr, r.stderr
    missing = tmp_path / "no_such_gold.csv"
    r = runner.invoke(app, _args(rounds, "--a-gold", str(missing), "--b-gold", str(rounds["b_gold"])))
    assert r.exit_code == 2 and "no_such_gold.csv" in r.stderr, r.stderr
