"""``hero store ...`` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from heroeval.cli import app
from tests.store.test_store import _frames


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for k, (ann, gold) in enumerate(_frames(rounds=3)):
        ann.to_csv(f"v{k + 1}.csv", index=False)
        gold.to_csv(f"g{k + 1}.csv", index=False)
    return tmp_path


def run(*args: str, code: int = 0) -> str:
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == code, r.output
    return r.output


def test_the_verbs(files: Path) -> None:
    for k in (1, 2, 3):
        out = run("store", "add", f"v{k}.csv", "--gold", f"g{k}.csv", "--model", f"m{k}", "--tag", "weekly")
        assert f"added round 'v{k}'" in out and "Ingest: v" in out
    out = run("store", "add", "v1.csv", "--gold", "g1.csv", "--name", "again")
    assert "not added: the same content is stored as round 'v1'" in out and "nothing changed" in out
    assert (files / "hero.duckdb").exists()
    out = run("store", "list")
    assert "3 rounds in hero.duckdb" in out and "v3" in out
    listed = json.loads(run("store", "list", "--json"))
    assert [r["name"] for r in listed["rounds"]] == ["v1", "v2", "v3"]
    assert "content_hash" in run("store", "show", "v2")
    out = run("store", "calibrate")
    assert "fitted now" in out
    assert "reused the cached fit" in run("store", "calibrate", "-o", "cal.json")
    assert (files / "cal.json").exists()
    out = run("store", "estimate", "v3")
    assert "on 2 rounds" in out and "left out" in out and "recommended" in out
    est = json.loads(run("store", "estimate", "v3", "--json", "--method", "hero1"))
    assert est["calibration"]["status"] == "cached" and "hero1" in est["estimates"]
    assert "pinned 'launch'" in run("store", "pin", "launch", "--note", "go")
    assert "launch" in run("store", "pins")
    assert "reproduced" in run("store", "reproduce", "launch")
    run("store", "rm", "v1", code=2)
    out = run("store", "trend", "--report", "trend.html")
    assert "simultaneous" in out and "trend report written" in out and (files / "trend.html").exists()
    tr = json.loads(run("store", "trend", "--json", "--no-drift", "--baseline", "v1", "--adjust", "maxz"))
    assert tr["adjust"] == "maxz" and [d["reference"] for d in tr["differences"]] == ["v1", "v1"]
    run("store", "export", "exp")
    assert (files / "exp" / "gold.parquet").exists()
    assert "removed round 'v2'" in run("store", "rm", "v2", "--force")
    log = json.loads(run("store", "log", "--json"))
    assert log[-1]["action"] == "remove" and log[-1]["round"] == "v2"
    assert "role current" in run("store", "role", "v3", "current")


def test_errors_exit_2_with_the_file_named(files: Path) -> None:
    (files / "bad.duckdb").write_bytes(b"x" * 5000)
    r = CliRunner().invoke(app, ["store", "list", "--store", "bad.duckdb"])
    assert r.exit_code == 2 and "bad.duckdb" in r.stderr
    r = CliRunner().invoke(app, ["store", "show", "nope"])
    assert r.exit_code == 2 and "no store at hero.duckdb" in r.stderr


def test_trend_and_estimate_give_each_round_one_answer(files: Path) -> None:
    """Issue #40: for every round, hero store trend and hero store estimate agree on method, estimate and status."""
    for k in (1, 2, 3):
        run("store", "add", f"v{k}.csv", "--gold", f"g{k}.csv")
    tr = json.loads(run("store", "trend", "--format", "json", "--no-drift"))
    assert tr["method"] == "auto" and [r["round"] for r in tr["rounds"]] == ["v1", "v2", "v3"]
    for r in tr["rounds"]:
        got = CliRunner().invoke(app, ["store", "estimate", r["round"], "--format", "json"])
        assert got.exit_code == 0, got.output
        rec = json.loads(got.stdout)["recommended"]  # stderr: the drift warning hero store estimate gives
        assert (r["method"], r["status"]) == (rec["method"], rec["status"])
        assert r["estimate"] == pytest.approx(rec["estimate"], abs=1e-12)
        assert (r["marginal_low"], r["marginal_high"]) == pytest.approx((rec["ci_low"], rec["ci_high"]), abs=1e-12)
        assert r["ci_low"] <= r["marginal_low"] and r["marginal_high"] <= r["ci_high"]
    assert all(d["method"] and d["status"] in ("ok", "unreliable") for d in tr["differences"])
    out = run("store", "trend", "--no-drift")
    assert "recommended estimate" in out and "status" in out and "Holm" in out
    joint = json.loads(run("store", "trend", "--format", "json", "--no-drift", "--method", "joint"))
    assert joint["method"] == "stage_a_joint" and {r["method"] for r in joint["rounds"]} == {"stage_a_joint"}
    assert "one joint Stage A fit" in run("store", "trend", "--no-drift", "--method", "joint")
    r = CliRunner().invoke(app, ["store", "trend", "--method", "nope"])
    assert r.exit_code == 2 and "method must be one of auto, joint" in r.stderr
