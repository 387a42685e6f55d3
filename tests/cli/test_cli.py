"""The hero command end to end, on files in the default layout."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app
from heroeval.workflows.demo import example_paths
from tests.conftest import Sim

runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, sim: Sim) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("cli")
    out: dict[str, Path] = {}
    for name, ds in (("history", sim.history), ("current", sim.current)):
        pd.DataFrame(
            {
                "item_id": ds.item_ids[ds.annotation_item],
                "labeler_id": ds.labeler_ids[ds.labeler],
                "label": ds.label,
            }
        ).to_csv(d / f"{name}.csv", index=False)
        out[name] = d / f"{name}.csv"
        cov = pd.DataFrame({"item_id": ds.item_ids, "x": ds.covariates[:, 0]})  # type: ignore[index]
        cov.to_csv(d / f"{name}_x.csv", index=False)
        out[f"{name}_x"] = d / f"{name}_x.csv"
    g = sim.history.gold >= 0
    pd.DataFrame({"item_id": sim.history.item_ids[g], "gold": sim.history.gold[g]}).to_csv(d / "gold.csv", index=False)
    out["gold"] = d / "gold.csv"
    out["dir"] = d
    return out


def test_estimate_all_json_with_history(files: dict[str, Path]) -> None:
    r = runner.invoke(app, ["estimate", str(files["current"]), "--history", str(files["history"]),
                            "--gold", str(files["gold"]), "--covariates", str(files["current_x"]),
                            "--history-covariates", str(files["history_x"]), "--method", "all", "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out["estimates"]) == set(he.METHODS)
    for m in he.METHODS:
        assert 0.0 <= out["estimates"][m]["estimate"] <= 1.0
    assert out["ingest"]["current"]["tables"][0]["rows_used"] > 0
    # the CLI computes nothing itself: same numbers as the API
    H = he.read_annotations(files["history"], gold=files["gold"], covariates=files["history_x"])
    C = he.read_annotations(files["current"], covariates=files["current_x"])
    api = he.estimate(C, he.calibrate(H), method="all")
    assert isinstance(api, he.EstimateCollection)
    for m in he.METHODS:
        assert out["estimates"][m]["estimate"] == pytest.approx(api[m].estimate, abs=1e-12)


def test_calibrate_then_estimate(files: dict[str, Path]) -> None:
    cal = files["dir"] / "cal.json"
    r = runner.invoke(app, ["calibrate", str(files["history"]), "--gold", str(files["gold"]),
                            "--covariates", str(files["history_x"]), "-o", str(cal)])
    assert r.exit_code == 0, r.output
    assert "Stage A calibration" in r.stdout and "converged" in r.stdout and cal.exists()
    r = runner.invoke(app, ["estimate", str(files["current"]), "--calibration", str(cal),
                            "--covariates", str(files["current_x"])])
    assert r.exit_code == 0, r.output
    for title in ("Majority vote", "HERO-1", "HERO-2", "Gold-proportion"):
        assert title in r.stdout
    assert "not computed" in r.stdout  # hero_joint needs the history
    r = runner.invoke(app, ["estimate", str(files["current"]), "--calibration", str(cal),
                            "--method", "hero1,majority_vote", "-f", "json"])
    assert list(json.loads(r.stdout)["estimates"]) == ["hero1", "majority_vote"]


def test_calibrate_with_the_empirical_bayes_prior(files: dict[str, Path], tmp_path: Path) -> None:
    cal = tmp_path / "cal_eb.json"
    r = runner.invoke(app, ["calibrate", str(files["history"]), "--gold", str(files["gold"]), "--shrink", "eb",
                            "--no-checks", "-o", str(cal), "-f", "json"])
    assert r.exit_code == 0, r.output
    settings = json.loads(r.stdout)["calibration"]["settings"]
    assert settings["shrink"] == "eb" and len(settings["prior"]["counts"]) == 4
    assert he.load_calibration(cal).settings["prior"] == settings["prior"]
    r = runner.invoke(app, ["calibrate", str(files["history"]), "--gold", str(files["gold"]), "--shrink", "eb",
                            "--no-checks", "-o", str(cal)])
    assert r.exit_code == 0 and "empirical-Bayes prior (shrink eb): sensitivities towards" in " ".join(r.stdout.split())
    r = runner.invoke(app, ["calibrate", str(files["history"]), "--gold", str(files["gold"]), "--shrink", "eb",
                            "--classes", "0,1", "-o", str(tmp_path / "mc.json")])
    assert r.exit_code == 2 and "--shrink eb is for binary labels" in r.output


def test_cli_errors_exit_2_with_a_message(files: dict[str, Path], tmp_path: Path) -> None:
    r = runner.invoke(app, ["estimate", str(files["current"])])
    assert r.exit_code == 2 and "give exactly one of --calibration or --history" in r.stderr
    r = runner.invoke(app, ["estimate", str(files["current"]), "--history", str(files["history"])])
    assert r.exit_code == 2 and "--history needs --gold" in r.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("item_id,labeler_id,label\na,w,1\nb,w,7\n")
    r = runner.invoke(app, ["estimate", str(bad), "--history", str(files["history"]), "--gold", str(files["gold"])])
    assert r.exit_code == 2 and "row 2 (line 3): label '7'" in r.stderr.replace("\n", " ")
    r = runner.invoke(app, ["estimate", str(files["current"]), "--history", str(files["history"]),
                            "--gold", str(files["gold"]), "--method", "nope"])
    assert r.exit_code == 2 and "unknown method 'nope'" in r.stderr


def test_new_labelers_flag(files: dict[str, Path], tmp_path: Path) -> None:
    cur = pd.read_csv(files["current"], dtype=str)
    cur = pd.concat([cur, pd.DataFrame({"item_id": ["zz"], "labeler_id": ["newbie"], "label": ["1"]})])
    p = tmp_path / "cur_new.csv"
    cur.to_csv(p, index=False)
    args = ["estimate", str(p), "--history", str(files["history"]), "--gold", str(files["gold"]), "--method", "hero1"]
    r = runner.invoke(app, [*args, "--new-labelers", "error"])
    assert r.exit_code == 2 and "'newbie'" in r.stderr and "--new-labelers exclude" in r.stderr  # the option since issue 23 (item 19)
    r = runner.invoke(app, [*args, "-f", "json"])  # the default (issue #38): HERO-1 estimates the new labeler
    assert r.exit_code == 0 and list(json.loads(r.stdout)["estimates"]["hero1"]["details"]["new_labelers"]) == ["newbie"]
    r = runner.invoke(app, [*args, "--exclude-new-labelers", "-f", "json"])
    assert r.exit_code == 0
    est = json.loads(r.stdout)["estimates"]["hero1"]
    assert est["details"]["excluded_labelers"] == ["newbie"] and est["details"]["excluded_items"] == 1


def test_demo_prints_six_estimates_and_the_truth() -> None:
    r = runner.invoke(app, ["demo", "-f", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out["estimates"]) == set(he.METHODS)
    truth = json.loads(example_paths()["truth"].read_text())
    assert out["truth"]["true_rate"] == truth["true_rate"]
    r = runner.invoke(app, ["demo"])
    assert "true gold rate" in r.stdout and "HERO-2" in r.stdout


def test_version() -> None:
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and he.__version__ in r.stdout


def test_estimate_json_has_intervals(files: dict[str, Path]) -> None:
    r = runner.invoke(app, ["estimate", str(files["current"]), "--history", str(files["history"]),
                            "--gold", str(files["gold"]), "--confidence-level", "0.9", "--ci-method", "logit",
                            "--method", "hero1,majority_vote", "-f", "json"])
    assert r.exit_code == 0, r.output
    e = json.loads(r.stdout)["estimates"]["hero1"]
    assert e["confidence_level"] == 0.9 and e["ci_method"] == "logit"
    assert e["ci_low"] < e["estimate"] < e["ci_high"] and e["standard_error"] > 0
    assert e["variance_history"] > 0


def test_estimate_bootstrap(files: dict[str, Path]) -> None:
    args = ["estimate", str(files["current"]), "--history", str(files["history"]), "--gold", str(files["gold"]),
            "--method", "hero1", "--bootstrap", "30", "--seed", "3"]
    r = runner.invoke(app, [*args, "-f", "json"])
    assert r.exit_code == 0, r.output
    b = json.loads(r.stdout)["estimates"]["hero1"]["bootstrap"]
    assert b["n_resamples"] == 30 and b["standard_error"] > 0 and len(b["percentile"]) == 2
    r2 = runner.invoke(app, [*args, "-f", "json"])
    assert json.loads(r2.stdout)["estimates"]["hero1"]["bootstrap"] == b  # seeded
    assert "bootstrap SE" in runner.invoke(app, args).stdout
    r = runner.invoke(app, ["estimate", str(files["current"]), "--calibration", str(files["dir"] / "nope.json"),
                            "--bootstrap", "10"])
    assert r.exit_code == 2 and "--bootstrap refits Stage A" in r.stderr


def test_compare_json_shape(files: dict[str, Path], tmp_path: Path) -> None:
    from tests.conftest import simulate

    s2 = simulate(2, cur_prev=0.5)
    b = tmp_path / "b.csv"
    ds = s2.current
    pd.DataFrame({"item_id": ds.item_ids[ds.annotation_item], "labeler_id": ds.labeler_ids[ds.labeler],
                  "label": ds.label}).to_csv(b, index=False)
    r = runner.invoke(app, ["compare", str(files["current"]), str(b), "--history", str(files["history"]),
                            "--gold", str(files["gold"]), "--method", "all", "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert set(out["difference"]) == set(he.METHODS) - {"hero2"}
    for v in out["difference"].values():
        assert set(v) >= {"estimate", "standard_error", "ci_low", "ci_high", "p_value"}
    d = out["difference"]["hero1"]
    assert d["estimate"] == pytest.approx(out["a"]["estimates"]["hero1"]["estimate"]
                                          - out["b"]["estimates"]["hero1"]["estimate"])
    r = runner.invoke(app, ["compare", str(files["current"]), str(b), "--history", str(files["history"]),
                            "--gold", str(files["gold"]), "--method", "hero1"])
    assert r.exit_code == 0 and "Difference A - B" in r.stdout and "p-value" in r.stdout


def test_label_map_option(tmp_path: Path) -> None:
    p = tmp_path / "sxs.csv"
    p.write_text("item_id,labeler_id,label\n1,a,A\n1,b,B\n2,a,tie\n")
    g = tmp_path / "g.csv"
    g.write_text("item_id,gold\n1,A\n")
    r = runner.invoke(app, ["estimate", str(p), "--history", str(p), "--gold", str(g), "--label-map", "A=1,B=0,tie=drop",
                            "--method", "majority_vote", "-f", "json"])
    assert r.exit_code == 0, r.output
    t = json.loads(r.stdout)["ingest"]["current"]["tables"][0]
    assert t["dropped"] == {"label mapped to None by label_map (e.g. a tie)": 1}
    r = runner.invoke(app, ["estimate", str(p), "--history", str(p), "--gold", str(g), "--label-map", "A=yes"])
    assert r.exit_code == 2 and "must map to 1, 0 or drop" in r.stderr


def test_estimate_json_recommended_first(files: dict[str, Path]) -> None:
    """Issue #5: the JSON of hero estimate has a top-level "recommended" with method, estimate, interval, reason."""
    r = runner.invoke(app, ["estimate", str(files["current"]), "--history", str(files["history"]),
                            "--gold", str(files["gold"]), "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert next(iter(out)) == "recommended"
    rec = out["recommended"]
    assert {"method", "estimate", "ci_low", "ci_high", "reason"} <= set(rec)
    assert rec["method"] in out["estimates"] and rec["reason"]
    # the recommended method's numbers are that method's own when it ran at the calibration's weight
    if rec["history_weight"] in (None, 1.0):
        assert rec["estimate"] == pytest.approx(out["estimates"][rec["method"]]["estimate"], rel=1e-12)
    assert rec["ci_low"] <= rec["estimate"] <= rec["ci_high"]


def test_calibrate_prints_and_saves_model_checks(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "cal.json"
    r = runner.invoke(app, ["calibrate", str(files["history"]), "--gold", str(files["gold"]), "-o", str(out),
                            "--history-weight", "cv"])
    assert r.exit_code == 0, r.output
    assert "independent given gold" in r.stdout and "cross-validation" in r.stdout
    saved = json.loads(out.read_text())
    assert saved["checks"]["chosen_weight"] == saved["settings"]["history_weight"]
    r = runner.invoke(app, ["estimate", str(files["current"]), "--calibration", str(out), "--method", "auto",
                            "--format", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["recommended"]["reason"]
    r = runner.invoke(app, ["calibrate", str(files["history"]), "--gold", str(files["gold"]), "-o", str(out),
                            "--history-weight", "2"])
    assert r.exit_code == 2 and "--history-weight" in r.output


def test_calibrate_a_parquet_glob_with_duckdb_and_numba(files: dict[str, Path], tmp_path: Path) -> None:
    """Issue #7 through the CLI: a glob of Parquet parts, the DuckDB reader and the compiled engine."""
    pytest.importorskip("numba")
    df = pd.read_csv(files["history"], dtype=str)
    parts = [df.iloc[i::3] for i in range(3)]
    for k, p in enumerate(parts):
        p.to_parquet(tmp_path / f"part{k}.parquet")
    out = tmp_path / "cal.json"
    r = runner.invoke(app, ["calibrate", str(tmp_path / "part*.parquet"), "--gold", str(files["gold"]), "-o", str(out),
                            "--reader", "duckdb", "--engine", "numba", "--no-checks", "-f", "json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert got["ingest"]["tables"][0]["rows_read"] == len(df)
    ref = he.calibrate(he.read_annotations(files["history"], gold=files["gold"]))
    cal = he.load_calibration(out)
    assert cal.labeler_ids == ref.labeler_ids
    assert max(abs(cal.alpha - ref.alpha).max(), abs(cal.beta - ref.beta).max()) < 1e-8
    bad = runner.invoke(app, ["calibrate", str(files["history"]), "--gold", str(files["gold"]), "-o", str(out),
                              "--engine", "gpu"])
    assert bad.exit_code == 2 and "gpu" in bad.output


def test_estimate_writes_the_table_as_csv(files: dict[str, Path], tmp_path: Path) -> None:
    """Issue #38: the estimates table exported as CSV: the rows of the table model, as the terminal shows them."""
    out = tmp_path / "est.csv"
    args = ["estimate", str(files["current"]), "--history", str(files["history"]), "--gold", str(files["gold"])]
    r = runner.invoke(app, [*args, "--csv", str(out), "-f", "json"])
    assert r.exit_code == 0, r.output
    js = json.loads(r.stdout)  # stdout stays the JSON; the note goes to stderr
    df = pd.read_csv(out, index_col="method")
    assert df.index[0] == "recommended" and set(js["estimates"]) <= set(df.index)
    assert list(df.columns) == ["title", "estimate", "standard_error", "ci_low", "ci_high", "ci_method",
                                "confidence_level", "n_items", "n_annotations", "n_labelers", "status", "notes"]
    assert df.loc["recommended", "estimate"] == pytest.approx(js["recommended"]["estimate"], rel=1e-12)
    assert df.loc["recommended", "status"] == js["recommended"]["status"]
    for m, e in js["estimates"].items():
        assert df.loc[m, "estimate"] == pytest.approx(e["estimate"], rel=1e-12)
    assert "estimates table written to" in r.stderr
    bad = runner.invoke(app, [*args, "--csv", str(tmp_path / "no" / "such" / "x.csv")])
    assert bad.exit_code == 2 and "--csv" in bad.stderr


def test_compare_pairs_option(files: dict[str, Path], tmp_path: Path) -> None:
    """--pairs maps both rounds' items to prompts: the JSON says the difference is paired; a bad file is named."""
    cur = pd.read_csv(files["current"])
    ids = sorted(cur["item_id"].astype(str).unique())
    half = len(ids) // 2
    a_ids, b_ids = set(ids[:half]), set(ids[half: 2 * half])
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    cur[cur["item_id"].astype(str).isin(a_ids)].to_csv(a, index=False)
    cur[cur["item_id"].astype(str).isin(b_ids)].to_csv(b, index=False)
    pairs = tmp_path / "pairs.csv"
    pd.DataFrame({"item_id": ids[: 2 * half], "prompt_id": [f"p{i % half}" for i in range(2 * half)]}).to_csv(
        pairs, index=False)
    base = ["compare", str(a), str(b), "--history", str(files["history"]), "--gold", str(files["gold"]),
            "--method", "hero1", "--format", "json"]
    r = runner.invoke(app, [*base, "--pairs", str(pairs)])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["difference"]["hero1"]
    assert d["pairing"] == {"key": "prompt_id", "shared_prompts": half, "prompts_a": half, "prompts_b": half}
    r0 = runner.invoke(app, base)  # disjoint item ids: unpaired
    assert r0.exit_code == 0 and "pairing" not in json.loads(r0.stdout)["difference"]["hero1"]
    r = runner.invoke(app, [*base, "--pairs", str(pairs), "--pair-col", "question"])
    assert r.exit_code != 0 and "pairs.csv" in r.output and "'question'" in r.output
