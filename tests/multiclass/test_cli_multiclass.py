"""hero calibrate / estimate / compare with --classes / --ordinal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from heroeval.cli import app
from heroeval.multiclass import (
    calibrate_multiclass,
    hero1_multiclass,
    load_multiclass_calibration,
    read_multiclass,
)
from heroeval.multiclass.current_gold import plan_expert_labels_multiclass, ppi_multiclass
from heroeval.multiclass.simulate import simulate_rounds
from tests.multiclass.files import write_round

runner = CliRunner()


_dump = write_round


def test_cli_multiclass(tmp_path: Path) -> None:
    sim = simulate_rounds(np.random.default_rng(1), K=5, J=6, n_history=300, n_current=100)
    h, g, c = tmp_path / "h.csv", tmp_path / "g.csv", tmp_path / "c.csv"
    _dump(sim.history, h, g)
    _dump(sim.current, c)
    out = tmp_path / "cal.json"
    r = runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(out), "--classes", "1,2,3,4,5",
                            "--ordinal", "--structure", "ordinal", "-f", "json"])
    assert r.exit_code == 0, r.output
    cal = load_multiclass_calibration(out)
    assert cal.structure == "ordinal" and cal.classes == ("1", "2", "3", "4", "5")
    r = runner.invoke(app, ["estimate", str(c), "--calibration", str(out), "--ordinal", "--method", "hero1", "-f", "json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)["estimates"]["hero1"]
    direct = hero1_multiclass(sim.current, calibrate_multiclass(sim.history, structure="ordinal"))
    assert abs(got["mean_score"]["estimate"] - direct.mean_score()["estimate"]) < 1e-6
    assert abs(got["classes"]["3"]["estimate"] - direct.estimate[2]) < 1e-6
    r = runner.invoke(app, ["compare", str(c), str(c), "--history", str(h), "--gold", str(g), "--classes", "1,2,3,4,5",
                            "--method", "hero1"])
    assert r.exit_code == 0, r.output
    assert "+0.000" in r.output
    # a label outside the classes: a clean error naming the file and row
    bad = tmp_path / "bad.csv"
    bad.write_text("item_id,labeler_id,label\n1,L0,3\n1,L1,9\n")
    r = runner.invoke(app, ["estimate", str(bad), "--calibration", str(out), "--classes", "1,2,3,4,5"])
    assert r.exit_code == 2
    assert "bad.csv, row 2" in r.output and "not one of the classes" in r.output


def test_cli_multiclass_report(tmp_path: Path) -> None:
    """hero report --classes: one self-contained page with the prevalences and the confusion heatmaps."""
    import re

    sim = simulate_rounds(np.random.default_rng(2), K=3, J=4, n_history=200, n_current=80)
    h, g, c = tmp_path / "h.csv", tmp_path / "g.csv", tmp_path / "c.csv"
    _dump(sim.history, h, g)
    _dump(sim.current, c)
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", str(c), "--history", str(h), "--gold", str(g), "--classes", "1,2,3",
                            "--structure", "full", "-o", str(out), "--title", "<grades>"])
    assert r.exit_code == 0, r.output
    page = out.read_text(encoding="utf-8")
    assert "<title>&lt;grades&gt;</title>" in page and 'id="fig-confusion"' in page
    assert not re.search(r'(src|href)="https?:', page)
    data = json.loads(re.search(r'<script type="application/json" id="hero-data">(.*?)</script>', page, re.S)[1])
    direct = hero1_multiclass(sim.current, calibrate_multiclass(sim.history))
    assert abs(data["estimates"]["hero1"]["classes"]["2"]["estimate"] - direct.estimate[1]) < 1e-9


def test_cli_multiclass_recommended(tmp_path: Path) -> None:
    """hero estimate --classes: the recommended estimate (auto) is the library's, in the terminal and the JSON; with
    a calibration file alone it says what it needs."""
    from heroeval.choice.multiclass_auto import recommend_multiclass
    from heroeval.multiclass import read_multiclass

    sim = simulate_rounds(np.random.default_rng(3), K=3, J=5, n_history=400, n_current=120, ordinal=False)
    h, g, c = tmp_path / "h.csv", tmp_path / "g.csv", tmp_path / "c.csv"
    _dump(sim.history, h, g)
    _dump(sim.current, c)
    r = runner.invoke(app, ["estimate", str(c), "--history", str(h), "--gold", str(g), "--classes", "1,2,3",
                            "--method", "auto", "-f", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["estimates"] == {}
    hist = read_multiclass(h, gold=g, classes="1,2,3", round_col=False)
    cur = read_multiclass(c, classes="1,2,3", round_col=False)
    rec = recommend_multiclass(cur, hist)
    got = out["recommended"]
    assert got["chosen"] == rec.method and got["status"] == rec.status
    for k, cl in enumerate(rec.classes):
        lo, hi = rec.intervals()[k]
        assert got["classes"][cl]["estimate"] == float(rec.estimate.estimate[k])
        assert abs(got["classes"][cl]["ci_low"] - lo) < 1e-12 and abs(got["classes"][cl]["ci_high"] - hi) < 1e-12
    r = runner.invoke(app, ["estimate", str(c), "--history", str(h), "--gold", str(g), "--classes", "1,2,3"])
    assert r.exit_code == 0, r.output
    assert f"recommended (auto): {rec.method}, status {rec.status}" in r.output
    lo, hi = rec.intervals()[0]
    assert f"share 1: {rec.estimate.estimate[0]:.3f} [{lo:.3f}, {hi:.3f}]" in r.output
    cal = tmp_path / "cal.json"
    assert runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(cal), "--classes", "1,2,3"]).exit_code == 0
    r = runner.invoke(app, ["estimate", str(c), "--calibration", str(cal), "--method", "auto", "--classes", "1,2,3"])
    assert r.exit_code != 0 and "needs --history and --gold" in r.output
    r = runner.invoke(app, ["estimate", str(c), "--calibration", str(cal), "--classes", "1,2,3"])
    assert r.exit_code == 0 and "needs --history and --gold" in r.output


def test_cli_multiclass_report_shows_the_recommended_estimate_of_hero_estimate(tmp_path: Path) -> None:
    """One answer everywhere: hero report --classes embeds and prints the recommended estimate, status and
    intervals that hero estimate --classes --json gives for the same inputs; with a calibration file alone it says
    why there is none."""
    sim = simulate_rounds(np.random.default_rng(4), K=3, J=5, n_history=300, n_current=100, ordinal=False)
    h, g, c = tmp_path / "h.csv", tmp_path / "g.csv", tmp_path / "c.csv"
    _dump(sim.history, h, g)
    _dump(sim.current, c)
    common = [str(c), "--history", str(h), "--gold", str(g), "--classes", "1,2,3", "--structure", "symmetric"]
    r = runner.invoke(app, ["estimate", *common, "--method", "auto", "-f", "json"])
    assert r.exit_code == 0, r.output
    want = json.loads(r.stdout)["recommended"]
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", *common, "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert f"recommended (auto): {want['chosen']}, status {want['status']}" in r.output
    page = out.read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="hero-data">(.*?)</script>', page, re.S)[1])
    got = data["recommended"]
    assert got["chosen"] == want["chosen"] and got["status"] == want["status"] and got["reason"] == want["reason"]
    for cl in ("1", "2", "3"):
        for key in ("estimate", "ci_low", "ci_high"):
            assert got["classes"][cl][key] == want["classes"][cl][key]
    assert got["mean_score"] == want["mean_score"]
    assert 'id="recommended-status"' in page
    cal = tmp_path / "cal.json"
    assert runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(cal), "--classes", "1,2,3"]).exit_code == 0
    r = runner.invoke(app, ["report", str(c), "--calibration", str(cal), "--classes", "1,2,3", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "needs --history and --gold" in r.output
    assert "No recommended estimate" in out.read_text(encoding="utf-8")


def test_cli_multiclass_estimate_with_current_gold_recommends_the_prediction_powered_shares(tmp_path: Path) -> None:
    """hero estimate --classes --current-gold: the gold-based estimates join the table, the recommended estimate is
    ppi:majority_vote with the library's numbers, the silver estimates are those without the gold, a --design file
    without inclusion probabilities is refused naming the column, and hero report --classes --current-gold shows the same recommended estimate."""
    hist = simulate_rounds(np.random.default_rng(6), K=3, J=5, n_history=300, n_current=10, ordinal=False).history
    rnd = simulate_rounds(np.random.default_rng(7), K=3, J=5, n_history=200, n_current=10, rho=0.2,
                          ordinal=False).history  # a round whose gold (on 20 % of its items) plays current gold
    h, g, c, cg = tmp_path / "h.csv", tmp_path / "g.csv", tmp_path / "c.csv", tmp_path / "cg.csv"
    _dump(hist, h, g)
    _dump(rnd, c, cg)
    cal = tmp_path / "cal.json"
    assert runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(cal), "--classes", "1,2,3",
                               "--structure", "symmetric"]).exit_code == 0
    base = [str(c), "--calibration", str(cal), "--classes", "1,2,3", "--new-labelers", "exclude", "-f", "json"]
    r = runner.invoke(app, ["estimate", *base, "--current-gold", str(cg), "--method", "all"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    rec = out["recommended"]
    assert rec["chosen"] == "ppi:majority_vote" and "expert labels on the round" in rec["reason"]
    want = ppi_multiclass(read_multiclass(c, gold=cg, classes=["1", "2", "3"]), "majority_vote").to_dict()
    for cl in ("1", "2", "3"):
        for key in ("estimate", "ci_low", "ci_high"):
            assert rec["classes"][cl][key] == pytest.approx(want["classes"][cl][key], abs=1e-12)
    assert {"gold_only", "ppi:majority_vote", "ppi:dawid_skene", "ppi:hero1"} <= set(out["estimates"])
    silver = json.loads(runner.invoke(app, ["estimate", *base, "--method", "hero1"]).stdout)["estimates"]["hero1"]
    assert out["estimates"]["hero1"]["classes"] == silver["classes"]
    r = runner.invoke(app, ["estimate", *base, "--current-gold", str(cg), "--design", str(cg)])
    assert r.exit_code == 2 and "no column 'pi' (inclusion probabilities)" in r.output  # not a design file
    page = tmp_path / "r.html"
    r = runner.invoke(app, ["report", *base[:-2], "--current-gold", str(cg), "-o", str(page)])
    assert r.exit_code == 0, r.output
    assert f"recommended (auto, current gold): {rec['chosen']}, status {rec['status']}" in r.output
    data = json.loads(re.search(r'<script type="application/json" id="hero-data">(.*?)</script>',
                                page.read_text(encoding="utf-8"), re.S)[1])
    got = data["recommended"]
    assert got["chosen"] == rec["chosen"] and got["reason"] == rec["reason"] and got["mean_score"] == rec["mean_score"]
    assert got["classes"] == rec["classes"] and "ppi:majority_vote" in data["estimates"]


def test_cli_multiclass_select_then_estimate_with_the_design(tmp_path: Path) -> None:
    """hero select --classes draws a uniform or a stratified (--by COLUMN) sample; hero estimate --classes
    --current-gold --design weights by it: the uniform file gives the numbers of no design, the stratified one
    the stratified variance; the active design is refused for K classes with a reason."""
    rnd = simulate_rounds(np.random.default_rng(9), K=3, J=5, n_history=240, n_current=10, rho=1.0,
                          ordinal=False).history  # every item's gold known: the experts' answers
    c, allg = tmp_path / "c.csv", tmp_path / "all_gold.csv"
    _dump(rnd, c, allg)
    gold = pd.read_csv(allg, dtype=str)
    ids = pd.read_csv(c, dtype=str)["item_id"].unique()
    groups = tmp_path / "groups.csv"
    pd.DataFrame({"item_id": ids, "topic": np.where(np.arange(ids.size) % 3 == 0, "a", "b")}).to_csv(groups,
                                                                                                    index=False)
    base = [str(c), "--classes", "1,2,3"]
    sel = tmp_path / "sel.csv"
    r = runner.invoke(app, ["select", *base, "-k", "40", "-o", str(sel), "--seed", "1"])
    assert r.exit_code == 0, r.output
    assert "about as wide as the uniform design" not in " ".join(r.output.split())
    s = pd.read_csv(sel, dtype={"item_id": str})
    assert len(s) == 40 and np.allclose(s["pi"], 40 / ids.size)
    cg = tmp_path / "cg.csv"
    gold[gold["item_id"].isin(set(s["item_id"]))].to_csv(cg, index=False)
    d_uniform = read_multiclass(c, gold=cg, classes=["1", "2", "3"], design=sel)
    plain = ppi_multiclass(read_multiclass(c, gold=cg, classes=["1", "2", "3"]))
    with_design = ppi_multiclass(d_uniform)
    np.testing.assert_allclose(with_design.estimate, plain.estimate, atol=1e-12)
    np.testing.assert_allclose(with_design.covariance(), plain.covariance(), atol=1e-12)
    r = runner.invoke(app, ["select", *base, "-k", "40", "-o", str(sel), "--by", "topic", "--groups", str(groups),
                            "--seed", "2"])
    assert r.exit_code == 0, r.output
    assert "about as wide as the uniform design" in " ".join(r.output.split())  # what the shared sets showed
    s = pd.read_csv(sel, dtype={"item_id": str})
    assert set(s["stratum"]) == {"a", "b"}
    gold[gold["item_id"].isin(set(s["item_id"]))].to_csv(cg, index=False)
    est = ppi_multiclass(read_multiclass(c, gold=cg, classes=["1", "2", "3"], design=sel))
    assert "stratified design (2 strata" in est.details["gold"]
    hist_cal = tmp_path / "cal.json"
    hist = simulate_rounds(np.random.default_rng(10), K=3, J=5, n_history=300, n_current=10, ordinal=False).history
    h, g = tmp_path / "h.csv", tmp_path / "g.csv"
    _dump(hist, h, g)
    assert runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(hist_cal), "--classes", "1,2,3",
                               "--structure", "symmetric"]).exit_code == 0
    r = runner.invoke(app, ["estimate", *base, "--calibration", str(hist_cal), "--current-gold", str(cg), "--design",
                            str(sel), "--new-labelers", "exclude", "-f", "json"])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)["recommended"]
    assert rec["chosen"] == "ppi:majority_vote"
    assert rec["classes"]["1"]["estimate"] == pytest.approx(
        ppi_multiclass(read_multiclass(c, gold=cg, classes=["1", "2", "3"], design=sel)).estimate[0], abs=1e-12)
    r = runner.invoke(app, ["select", *base, "-k", "40", "-o", str(sel), "--design", "active"])
    assert r.exit_code == 2 and "uniform or stratified by an item column" in r.output


def test_cli_multiclass_plan_expert_labels(tmp_path: Path) -> None:
    """hero plan --expert-labels --classes: the library's plan from the history's gold, in text and JSON; a K-class
    plan without --history is refused with what it needs."""
    hist = simulate_rounds(np.random.default_rng(12), K=3, J=5, n_history=300, n_current=10, rho=0.2,
                           ordinal=False).history
    h, g = tmp_path / "h.csv", tmp_path / "g.csv"
    _dump(hist, h, g)
    args = ["plan", "--expert-labels", "--classes", "1,2,3", "--history", str(h), "--gold", str(g),
            "--round-items", "250", "--half-width", "0.1"]
    r = runner.invoke(app, [*args, "-f", "json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    want = plan_expert_labels_multiclass(read_multiclass(h, gold=g, classes=["1", "2", "3"]), half_width=0.1,
                                         round_items=250)
    assert got["k_ppi"] == want.k_ppi and got["k_gold_only"] == want.k_gold_only
    r = runner.invoke(app, args)
    assert r.exit_code == 0 and f"{want.k_ppi} with the prediction-powered estimate" in r.output
    r = runner.invoke(app, ["plan", "--expert-labels", "--classes", "1,2,3", "--round-items", "250",
                            "--half-width", "0.1"])
    assert r.exit_code == 2 and "--history and --gold" in r.output


def test_cli_multiclass_new_labelers_are_left_out_by_default(tmp_path: Path) -> None:
    """A round with a labeler the calibration does not know: by default every multi-class method leaves that
    labeler's labels out and says so (as the binary path does for every method but HERO-1), the same answer as
    --new-labelers exclude, in estimate, compare and report; --new-labelers error stops and names the labeler."""
    sim = simulate_rounds(np.random.default_rng(11), K=3, J=5, n_history=300, n_current=80, ordinal=False)
    h, g, c = tmp_path / "h.csv", tmp_path / "g.csv", tmp_path / "c.csv"
    _dump(sim.history, h, g)
    _dump(sim.current, c)
    cur = pd.read_csv(c, dtype=str)
    first = cur["labeler_id"] == cur["labeler_id"].iloc[0]
    cur.loc[first, "labeler_id"] = "newcomer"  # one labeler of the round unknown to the history
    cur.to_csv(c, index=False)
    cal = tmp_path / "cal.json"
    assert runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(cal), "--classes", "1,2,3"]).exit_code == 0
    base = [str(c), "--calibration", str(cal), "--classes", "1,2,3", "--method", "hero1,majority_vote", "-f", "json"]
    default = runner.invoke(app, ["estimate", *base])
    assert default.exit_code == 0, default.output
    excl = runner.invoke(app, ["estimate", *base, "--new-labelers", "exclude"])
    assert default.stdout == excl.stdout
    notes = json.loads(default.stdout)["estimates"]["hero1"]["notes"]
    assert [x for x in notes if x.startswith(f"excluded 1 labeler(s) unknown to the calibration: {int(first.sum())} "
                                             "annotations")]
    stop = runner.invoke(app, ["estimate", *base, "--new-labelers", "error"])
    assert stop.exit_code != 0 and "'newcomer'" in stop.output and "--new-labelers exclude" in stop.output
    both = [str(c), str(c), "--calibration", str(cal), "--classes", "1,2,3", "--method", "hero1", "-f", "json"]
    cmp_default, cmp_excl = runner.invoke(app, ["compare", *both]), runner.invoke(app, ["compare", *both, "--new-labelers",
                                                                                       "exclude"])
    assert cmp_default.exit_code == 0, cmp_default.output
    assert cmp_default.stdout == cmp_excl.stdout
    page = tmp_path / "r.html"
    rep = runner.invoke(app, ["report", str(c), "--calibration", str(cal), "--classes", "1,2,3", "-o", str(page)])
    assert rep.exit_code == 0, rep.output
    assert "unknown to the calibration" in page.read_text(encoding="utf-8")
    # with current gold: the hero1 predictor's posteriors leave the newcomer out and say so
    rnd = simulate_rounds(np.random.default_rng(12), K=3, J=5, n_history=200, n_current=10, rho=0.2,
                          ordinal=False).history
    c2, cg = tmp_path / "c2.csv", tmp_path / "cg.csv"
    _dump(rnd, c2, cg)
    cur2 = pd.read_csv(c2, dtype=str)
    cur2.loc[cur2["labeler_id"] == cur2["labeler_id"].iloc[0], "labeler_id"] = "newcomer"
    cur2.to_csv(c2, index=False)
    r = runner.invoke(app, ["estimate", str(c2), "--calibration", str(cal), "--classes", "1,2,3", "--current-gold",
                            str(cg), "-f", "json"])
    assert r.exit_code == 0, r.output
    notes = json.loads(r.stdout)["estimates"]["ppi:hero1"]["notes"]
    assert [x for x in notes if x.startswith("the hero1 predictor leaves out 1 labeler(s) unknown to the calibration")]
