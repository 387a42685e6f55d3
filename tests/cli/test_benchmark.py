"""hero benchmark on a user's folder in the labels.csv / gold.csv / items.csv layout."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from heroeval.cli import app
from heroeval.errors import DataError, HeroEvalError
from heroeval.workflows.benchmark import BENCHMARK_DEFAULTS, load_folder, run_benchmark, summarize_benchmark
from tests.conftest import simulate


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    s = simulate(12, J=6, N=400, n=10, gold_rate=1.0)
    h = s.history
    d = tmp_path_factory.mktemp("userdata")
    pd.DataFrame({"item_id": h.item_ids[h.annotation_item], "labeler_id": h.labeler_ids[h.labeler],
                  "label": h.label}).to_csv(d / "labels.csv", index=False)
    pd.DataFrame({"item_id": h.item_ids, "gold": h.gold}).to_csv(d / "gold.csv", index=False)
    words = np.array(["good", "bad", "fine", "poor", "great", "awful", "ok", "meh"])
    rng = np.random.default_rng(0)
    text = [" ".join(rng.choice(words, 5)) for _ in range(h.n_items)]
    pd.DataFrame({"item_id": h.item_ids, "text": text}).to_csv(d / "items.csv", index=False)
    return d


def test_protocol(folder: Path) -> None:
    data = load_folder(folder, text_components=3)
    assert data.covariates is not None and data.covariates.shape[1] == 4
    df = run_benchmark(data, resamples=2, rhos=[0.1], n=60, shifts=["none", "half"], workers=1)
    s = summarize_benchmark(df)
    assert set(s["shift"]) == {"none", "half"} and len(s) == 16  # 7 methods + auto, 2 shifts
    row = df[(df["method"] == "hero1") & (df["shift"] == "none")].iloc[0]
    assert row.n_current == 60 and abs(row.rho_effective - 0.1) < 0.01
    assert np.isfinite(s["rmse"]).all()


def test_runs_with_a_first_resample_extend_a_run(folder: Path) -> None:
    """Resample r is the same split whatever the call, so runs over different ranges can be pooled."""
    data = load_folder(folder, text_components=0)
    a = run_benchmark(data, resamples=2, rhos=[0.1], n=60, shifts=["none"], workers=1)
    b = run_benchmark(data, resamples=2, rhos=[0.1], n=60, shifts=["none"], workers=1, first_resample=1)
    assert sorted(b["resample"].unique()) == [1, 2]
    key = ["resample", "method"]
    both = a[a["resample"] == 1].merge(b[b["resample"] == 1], on=key, suffixes=("_a", "_b"))
    assert len(both) == (a["resample"] == 1).sum() > 0
    np.testing.assert_allclose(both["estimate_a"], both["estimate_b"], rtol=0, atol=1e-12)
    cands = json.loads(a[(a["method"] == "auto")]["candidates"].iloc[0])
    assert {c["method"] for c in cands} >= {"hero1", "rogan_gladen", "gold_proportion"}
    assert (a.loc[a["method"] != "auto", "candidates"] == "").all()
    with pytest.raises(HeroEvalError, match="first_resample"):
        run_benchmark(data, resamples=2, first_resample=-1)


def test_rate_shift_moves_the_current_rate_and_nothing_else(folder: Path) -> None:
    from heroeval.workflows.benchmark import RATE_SHIFT_ODDS, make_split

    data = load_folder(folder, text_components=0)
    y = data.gold["gold"].to_numpy()
    p = y.mean()
    up = RATE_SHIFT_ODDS if p <= 0.5 else 1 / RATE_SHIFT_ODDS
    rates = {sh: np.mean([make_split(data, r, 0.1, 60, sh, 2026).truth for r in range(30)]) for sh in ("none", "rate")}
    # drawing 60 of 400 items with the positives' odds times `up` (the first draws' rate, exact for small samples)
    first = up * p / (up * p + 1 - p)
    assert abs(rates["none"] - p) < 0.03
    assert abs(rates["rate"] - first) < 0.05 and abs(rates["rate"] - p) > 0.08
    a, b = make_split(data, 0, 0.1, 60, "rate", 2026), make_split(data, 0, 0.1, 60, "none", 2026)
    assert a.current.n_labelers == b.current.n_labelers  # the labeler pool is not touched
    with pytest.raises(HeroEvalError, match="shift must be one of"):
        run_benchmark(data, resamples=2, shifts=["drift"])
    # another factor: below 1 the rate moves the other way, by the same first-draw formula
    for odds in (1 / 3, 9.0):
        u = odds if p <= 0.5 else 1 / odds
        got = np.mean([make_split(data, r, 0.1, 60, "rate", 2026, rate_odds=odds).truth for r in range(30)])
        assert abs(got - u * p / (u * p + 1 - p)) < 0.05, (odds, got)
    assert make_split(data, 0, 0.1, 60, "rate", 2026, rate_odds=RATE_SHIFT_ODDS).truth == a.truth
    for bad in (0.0, -1.0, math.inf, True):
        with pytest.raises(HeroEvalError, match="rate_odds must be a positive number"):
            run_benchmark(data, resamples=2, shifts=["rate"], rate_odds=bad)  # type: ignore[arg-type]


def test_cli_benchmark_on_a_new_folder(folder: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["benchmark", str(folder), "--resamples", "2", "--rho", "0.1", "--n", "50",
                                 "--shift", "none", "--workers", "1", "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "HERO" in r.stdout or "hero1" in r.stdout
    assert (tmp_path / "o" / "summary.csv").exists() and (tmp_path / "o" / "benchmark_rmse.png").exists()
    r = CliRunner().invoke(app, ["benchmark", str(folder), "--resamples", "2", "--rho", "0.1", "--n", "50",
                                 "--shift", "none", "--workers", "1", "-f", "json"])
    assert r.exit_code == 0 and len(json.loads(r.stdout)["summary"]) == 8  # 7 methods + auto
    plain = {(x["method"]): x["rmse"] for x in json.loads(r.stdout)["summary"]}
    r = CliRunner().invoke(app, ["benchmark", str(folder), "--resamples", "2", "--rho", "0.1", "--n", "50",
                                 "--shift", "none", "--workers", "1", "--shrink", "eb", "-f", "json"])
    assert r.exit_code == 0, r.output
    eb = {(x["method"]): x["rmse"] for x in json.loads(r.stdout)["summary"]}
    assert eb["majority_vote"] == plain["majority_vote"] and eb["hero1"] != plain["hero1"]  # Stage A's prior only


def test_malformed_folders(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist or is not a folder"):
        load_folder(tmp_path / "nope")
    (tmp_path / "labels.csv").write_text("item_id,labeler_id,label\n1,a,1\n")
    with pytest.raises(DataError, match=r"has no gold\.csv"):
        load_folder(tmp_path)
    (tmp_path / "gold.csv").write_text("item_id,gold\n1,1\n")
    with pytest.raises(DataError, match="only 1 gold items have silver labels; the benchmark needs at least 20"):
        load_folder(tmp_path)
    (tmp_path / "labels.csv").write_text("item,who,label\n1,a,1\n")
    r = CliRunner().invoke(app, ["benchmark", str(tmp_path)])
    assert r.exit_code == 2 and "cannot find the labeler column" in r.stderr


def test_leave_one_group_out(folder: Path, tmp_path: Path) -> None:
    items = pd.read_csv(folder / "items.csv")
    items["round"] = np.where(np.arange(len(items)) % 2 == 0, "r1", "r2")
    d = tmp_path / "grouped"
    d.mkdir()
    for f in ("labels.csv", "gold.csv"):
        (d / f).write_text((folder / f).read_text())
    items.to_csv(d / "items.csv", index=False)
    data = load_folder(d, text_components=3, group_col="round")
    df = run_benchmark(data, resamples=2, rhos=[0.1], n=50, shifts=["none"], workers=1, split="groups")
    assert set(df["group"]) == {"r1", "r2"} and set(df["split"]) == {"groups"}
    with pytest.raises(DataError, match="no column 'batch'"):
        load_folder(d, group_col="batch")
    r = CliRunner().invoke(app, ["benchmark", str(d), "--split", "groups", "--resamples", "2", "--rho", "0.1",
                                 "--shift", "none", "--n", "40", "--workers", "1"])
    assert r.exit_code == 2 and "needs item groups" in r.stderr
    r = CliRunner().invoke(app, ["benchmark", str(d), "--split", "groups", "--group-col", "round", "--resamples", "2",
                                 "--rho", "0.1", "--shift", "none", "--n", "40", "--workers", "1"])
    assert r.exit_code == 0, r.output


def test_summary_reports_mean_interval_width() -> None:
    """``width`` is the mean of ci_high - ci_low over the resamples with a finite interval, beside RMSE and coverage."""
    inf, nan = math.inf, math.nan
    df = pd.DataFrame({
        "dataset": "d", "split": "random", "rho": 0.1, "shift": "none",
        "method": ["hero1"] * 4 + ["auto"] * 3 + ["majority_vote"] * 2,
        "resample": [0, 1, 2, 3, 0, 1, 2, 0, 1],
        "estimate": [0.50, 0.40, 0.55, 0.52, 0.48, 0.45, 0.60, 0.30, 0.35],
        "ci_low": [0.40, 0.35, -inf, nan, 0.40, 0.30, 0.55, 0.25, 0.30],
        "ci_high": [0.60, 0.45, 0.70, 0.60, 0.58, 0.60, 0.65, 0.35, 0.42],
        "truth": [0.50, 0.50, 0.50, 0.50, 0.50, 0.50, 0.50, 0.50, 0.50],
        "n_current": 100, "rho_effective": 0.1, "score_r2": nan,
    })
    s = summarize_benchmark(df).set_index("method")
    # by hand: hero1's finite intervals are resamples 0 and 1 (0.20 and 0.10); auto's 0.18, 0.30, 0.10
    assert s.loc["hero1", "width"] == pytest.approx((0.20 + 0.10) / 2, abs=1e-12)
    assert s.loc["auto", "width"] == pytest.approx((0.18 + 0.30 + 0.10) / 3, abs=1e-12)
    assert s.loc["majority_vote", "width"] == pytest.approx((0.10 + 0.12) / 2, abs=1e-12)
    # the existing columns are kept, and mean the same as before
    assert {"resamples", "bias", "abs_bias", "sd", "rmse", "coverage", "n_current", "rho_effective",
            "score_r2"} <= set(s.columns)
    assert s.loc["auto", "rmse"] == pytest.approx(math.sqrt((0.02**2 + 0.05**2 + 0.10**2) / 3), abs=1e-12)
    assert s.loc["auto", "coverage"] == pytest.approx(2 / 3)  # [0.55, 0.65] misses 0.50
    assert s.loc["hero1", "coverage"] == pytest.approx(2 / 4)  # [0.35, 0.45] misses; a NaN bound does not cover
    assert math.isnan(s.loc["majority_vote", "coverage"])
    one = summarize_benchmark(df[df["method"] == "hero1"].assign(ci_low=nan))
    assert math.isnan(one["width"].iloc[0])  # no finite interval: no width


def test_default_shifts_are_none_half_and_rate() -> None:
    assert BENCHMARK_DEFAULTS["shifts"] == ("none", "half", "rate")
    r = CliRunner().invoke(app, ["benchmark", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    assert "[default: none,half,rate]" in " ".join(r.stdout.split())


def test_groups_leave_out_the_rate_shift(folder: Path, tmp_path: Path) -> None:
    """Issue #38: with split='groups' a rate-shifted draw repeated shift 'none'; it is left out, with a warning."""
    import heroeval as he

    items = pd.read_csv(folder / "items.csv")
    items["round"] = np.where(np.arange(len(items)) % 2 == 0, "r1", "r2")
    d = tmp_path / "grouped"
    d.mkdir()
    for f in ("labels.csv", "gold.csv"):
        (d / f).write_text((folder / f).read_text())
    items.to_csv(d / "items.csv", index=False)
    data = load_folder(d, text_components=0, group_col="round")
    with pytest.warns(he.errors.HeroEvalWarning, match="shift 'rate' left out"):
        df = run_benchmark(data, resamples=2, rhos=[0.1], n=50, shifts=["none", "rate"], workers=1, split="groups")
    assert set(df["shift"]) == {"none"}
    with pytest.raises(HeroEvalError, match="does not apply to split='groups'"):
        run_benchmark(data, resamples=2, rhos=[0.1], n=50, shifts=["rate"], workers=1, split="groups")


def test_runs_without_scikit_learn(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #38: a folder with items.csv stopped the benchmark where scikit-learn is not installed; now the text
    covariates are left out with a warning that says how to get them."""
    import sys

    import heroeval as he

    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn raises ImportError
    monkeypatch.setitem(sys.modules, "sklearn.decomposition", None)
    monkeypatch.setitem(sys.modules, "sklearn.feature_extraction.text", None)
    assert (folder / "items.csv").exists()
    with pytest.warns(he.errors.HeroEvalWarning, match="need scikit-learn"):
        data = load_folder(folder, text_components=3)
    assert data.covariates is None
    df = run_benchmark(data, resamples=2, rhos=[0.1], n=40, shifts=["none"], workers=1)
    assert "hero2" not in set(df["method"])
