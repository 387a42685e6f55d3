"""Issue 23: a user's first hour with ``hero`` (items 2-25; item 1, the drift statistics, is elsewhere).

The fixtures are a split of the sentiment-polarity crowd (203 MTurk workers,
~5.5 labels per sentence) with the columns renamed ``task, worker, answer,
batch``, as the user of the issue made it. Each test's docstring names its item.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import typer.main
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app, demo
from heroeval.workflows.demo import example_paths

SP = Path("/work/shared/data/sentiment_polarity")
runner = CliRunner()

pytestmark = pytest.mark.skipif(not (SP / "labels.csv").exists(), reason="shared sentiment_polarity data absent")

RENAME = {"item_id": "task", "labeler_id": "worker", "label": "answer"}
COLS = ["--label-col", "answer"]


@pytest.fixture(scope="module")
def crowd(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("crowd")
    lab = pd.read_csv(SP / "labels.csv")
    gold = pd.read_csv(SP / "gold.csv")
    # the 25 most prolific workers (a few seconds per command), and 3 others who appear only in the current round
    counts = lab.labeler_id.value_counts()
    top, others = set(counts.index[:25]), list(counts.index[40:43])
    items = np.sort(lab[lab.labeler_id.isin(top)].item_id.unique())
    np.random.default_rng(0).shuffle(items)
    hist_items, cur_items = items[:600], items[600:800]
    h = lab[lab.item_id.isin(hist_items) & lab.labeler_id.isin(top)].rename(columns=RENAME)
    h["batch"] = h.task % 3 + 1
    c = lab[lab.item_id.isin(cur_items) & lab.labeler_id.isin(top | set(others))].rename(columns=RENAME)
    g = gold[gold.item_id.isin(hist_items[:150])].rename(columns={"item_id": "task"})
    paths = {k: d / f"{k}.csv" for k in ("hist", "cur", "gold")}
    h.to_csv(paths["hist"], index=False)
    c.to_csv(paths["cur"], index=False)
    g.to_csv(paths["gold"], index=False)
    cal = d / "cal.json"
    r = runner.invoke(app, ["calibrate", str(paths["hist"]), "--gold", str(paths["gold"]), *COLS,
                            "--round-col", "batch", "-o", str(cal), "-f", "json"])
    assert r.exit_code == 0, r.output
    new = sorted(set(c.worker) - set(h.worker))
    assert new, "the fixture's current round should have workers the history lacks"
    return {"dir": d, "h": h, "c": c, "g": g, "cal": cal, "new": new, **{k: str(v) for k, v in paths.items()}}


def _invoke(*args: str) -> Any:
    return runner.invoke(app, [str(a) for a in args])


PYTHON_ADVICE = re.compile(r"read_annotations|heroeval\.|\bhe\.|[a-z]+_[a-z_]+=|=True|=False|\(CLI")


def _no_python_advice(text: str) -> None:
    found = PYTHON_ADVICE.findall(text)
    assert not found, f"Python advice in CLI output: {found}\n{text}"


# ----------------------------------------------------------------------------------------------- item 2


def test_float_gold_ids_match(crowd: dict[str, Any], tmp_path: Path) -> None:
    """Item 2: a gold file saved by pandas with float ids (8155.0) matches the history's integer ids."""
    g = crowd["g"].assign(task=crowd["g"].task.astype(float))
    g.to_csv(tmp_path / "gold_float.csv", index=False)
    assert "8155.0" in (tmp_path / "gold_float.csv").read_text() or ".0," in (tmp_path / "gold_float.csv").read_text()
    r = _invoke("calibrate", crowd["hist"], "--gold", tmp_path / "gold_float.csv", *COLS, "--no-checks",
                "-o", tmp_path / "c.json", "-f", "json")
    assert r.exit_code == 0, r.output
    gold = next(t for t in json.loads(r.stdout)["ingest"]["tables"] if t["table"] == "gold")
    assert gold["rows_used"] == len(g) and gold["dropped"] == {}


def test_blank_history_id_keeps_integer_ids(crowd: dict[str, Any], tmp_path: Path) -> None:
    """Item 2: a history id column with one blank (pandas writes '10001.0' for every id) keeps the ids '10001'."""
    h = crowd["h"].copy()
    h["task"] = h["task"].astype(float)
    h.loc[h.index[3], "task"] = np.nan
    h.to_csv(tmp_path / "hist_blank.csv", index=False)
    ds = he.read_annotations(tmp_path / "hist_blank.csv", gold=crowd["gold"], label_col="answer", round_col=False)
    assert not any(str(x).endswith(".0") for x in ds.item_ids)
    assert ds.n_gold == len(crowd["g"])
    assert ds.report.tables[0].dropped == {"missing item id": 1}


def test_gold_for_other_items_says_so_with_the_ingest_table(crowd: dict[str, Any], tmp_path: Path) -> None:
    """Item 2: gold for the wrong items: 'N gold rows read, 0 match a history item', after the ingest table."""
    wrong = pd.DataFrame({"task": crowd["c"].task.unique()[:40], "gold": 1})
    wrong.to_csv(tmp_path / "wrong.csv", index=False)
    r = _invoke("calibrate", crowd["hist"], "--gold", tmp_path / "wrong.csv", *COLS, "-o", tmp_path / "c.json")
    assert r.exit_code == 2
    assert "40 gold rows read, 0 match a history item" in r.stderr
    assert "Ingest: history" in r.stderr and r.stderr.index("Ingest: history") < r.stderr.index("error:")
    assert "Pass gold= to read_annotations" not in r.stderr
    with pytest.raises(he.DataError, match="40 gold rows read, 0 match a history item"):
        he.calibrate(he.read_annotations(crowd["hist"], gold=tmp_path / "wrong.csv", label_col="answer"))


# ----------------------------------------------------------------------------------------------- item 3


@pytest.fixture(scope="module")
def drifted(crowd: dict[str, Any]) -> str:
    """The current round with its most prolific worker answering 1 to everything: labeler drift."""
    c = crowd["c"].copy()
    top = c.worker.value_counts().index[0]
    c.loc[c.worker == top, "answer"] = 1
    c = c[c.worker.isin(set(crowd["h"].worker))]
    p = crowd["dir"] / "drifted.csv"
    c.to_csv(p, index=False)
    return str(p)


def test_report_and_commands_agree_on_drift(crowd: dict[str, Any], drifted: str, tmp_path: Path) -> None:
    """Item 3: hero report, hero estimate and hero compare all warn of the drift; the report shows it."""
    est = _invoke("estimate", drifted, "--calibration", crowd["cal"], *COLS, "--method", "hero1")
    assert est.exit_code == 0, est.output
    assert "TransportabilityWarning" in est.stderr
    rep = _invoke("report", drifted, "--calibration", crowd["cal"], *COLS, "-o", tmp_path / "r.html")
    assert rep.exit_code == 0, rep.output
    html = (tmp_path / "r.html").read_text()
    assert "No warnings." not in html and "labeler drift" in html
    cmp_ = _invoke("compare", drifted, crowd["cur"], "--calibration", crowd["cal"], *COLS, "--method", "hero1",
                   "--new-labelers", "exclude")
    assert cmp_.exit_code == 0, cmp_.output
    assert "TransportabilityWarning" in cmp_.stderr and "labeler drift in 'A'" in cmp_.stderr


def test_demo_report_shows_drift(tmp_path: Path) -> None:
    """Item 3: the demo warns of drift like hero estimate on its data, and its report lists the warning."""
    r = _invoke("demo", "--report", tmp_path / "demo.html")
    assert r.exit_code == 0, r.output
    assert "TransportabilityWarning" in r.stderr
    html = (tmp_path / "demo.html").read_text()
    assert "No warnings." not in html and "labeler drift" in html


# ----------------------------------------------------------------------------------------------- item 4


def test_recommended_row_says_new_labelers_were_left_out(crowd: dict[str, Any]) -> None:
    """Item 4: with --new-labelers estimate, the recommended row notes that it left the new labelers out."""
    r = _invoke("estimate", crowd["cur"], "--calibration", crowd["cal"], *COLS, "--new-labelers", "estimate",
                "--no-check-drift")
    assert r.exit_code == 0, r.output
    text = " ".join(r.stdout.split())
    assert "new labelers left out of the recommended estimate" in text.replace("│", "").replace("  ", " ") or \
        "new labelers left out of the recommended" in re.sub(r"[│\s]+", " ", r.stdout)
    j = _invoke("estimate", crowd["cur"], "--calibration", crowd["cal"], *COLS, "--new-labelers", "estimate",
                "--no-check-drift", "-f", "json")
    rec = json.loads(j.stdout)["recommended"]
    assert "new labelers left out of the recommended estimate" in rec["reason"]


# ----------------------------------------------------------------------------------------------- item 5


def test_gold_col_options(crowd: dict[str, Any], tmp_path: Path) -> None:
    """Item 5: --gold-col and --gold-item-col name the gold file's columns; the error names them."""
    crowd["g"].rename(columns={"task": "sentence", "gold": "truth"}).to_csv(tmp_path / "g.csv", index=False)
    bad = _invoke("calibrate", crowd["hist"], "--gold", tmp_path / "g.csv", *COLS, "-o", tmp_path / "c.json")
    assert bad.exit_code == 2 and "--gold-item-col" in bad.stderr and "*_col" not in bad.stderr
    ok = _invoke("calibrate", crowd["hist"], "--gold", tmp_path / "g.csv", *COLS, "--gold-item-col", "sentence",
                 "--gold-col", "truth", "--no-checks", "-o", tmp_path / "c.json")
    assert ok.exit_code == 0, ok.output


# ----------------------------------------------------------------------------------------------- item 6


def test_cp1252_file(crowd: dict[str, Any], tmp_path: Path) -> None:
    """Item 6: a cp1252 CSV: an error naming the line and --encoding; --encoding cp1252 reads it."""
    c = crowd["c"].copy()
    c["worker"] = c["worker"].where(c.index != c.index[4], "Renée")
    c.to_csv(tmp_path / "cp.csv", index=False, encoding="cp1252")
    r = _invoke("estimate", tmp_path / "cp.csv", "--calibration", crowd["cal"], *COLS)
    assert r.exit_code == 2
    assert "line 6" in r.stderr and "--encoding cp1252" in r.stderr
    ok = _invoke("estimate", tmp_path / "cp.csv", "--calibration", crowd["cal"], *COLS, "--encoding", "cp1252",
                 "--method", "majority_vote")
    assert ok.exit_code == 0, ok.output


# ----------------------------------------------------------------------------------------------- item 7


@pytest.mark.parametrize("cmd", ["calibrate", "report", "compare", "demo"])
def test_output_path_checked_before_the_work(crowd: dict[str, Any], tmp_path: Path, cmd: str) -> None:
    """Item 7: an output in a missing folder fails at once, cleanly, before reading anything."""
    out = tmp_path / "missing_dir" / "x.out"
    args = {
        "calibrate": ["calibrate", crowd["hist"], "--gold", crowd["gold"], *COLS, "-o", out],
        "report": ["report", crowd["cur"], "--calibration", crowd["cal"], *COLS, "-o", out],
        "compare": ["compare", crowd["cur"], crowd["cur"], "--calibration", crowd["cal"], *COLS, "--report", out],
        "demo": ["demo", "--report", out],
    }[cmd]
    r = _invoke(*args)
    assert (r.exit_code == 2 and r.exception is None) or isinstance(r.exception, SystemExit)
    assert "does not exist" in r.stderr and "nothing was computed" in r.stderr
    assert "Ingest" not in r.output and "Traceback" not in r.output


# ----------------------------------------------------------------------------------------------- item 8


def test_plan_default_is_the_historys_labels_per_item(crowd: dict[str, Any]) -> None:
    """Item 8: hero plan's default design is the history's labels per item, not every worker on every item."""
    r = _invoke("plan", "--calibration", crowd["cal"], "--mu", "0.5", "--half-width", "0.05", "-f", "json")
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)["rows"][0]
    per_item = len(crowd["h"]) / crowd["h"].task.nunique()
    assert row["labels_per_item"] == round(per_item) < 20
    assert any("history's mean" in n for n in json.loads(r.stdout)["notes"])


def test_plan_difference_is_a_minus_b(crowd: dict[str, Any]) -> None:
    """Item 8: --difference is A - B, as hero compare reports it."""
    args = ["plan", "--calibration", crowd["cal"], "--mu", "0.5", "--labels-per-item", "5"]
    r = _invoke(*args, "--difference", "0.1", "-f", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    cal = he.load_calibration(crowd["cal"])
    b_lower = he.plan(cal, mu=0.5, difference=-0.1, labels_per_item=5)  # round B at 0.4
    assert out["target"] == 0.1
    assert out["rows"][0]["n_items"] == pytest.approx(b_lower.rows[0].n_items, rel=1e-9)
    t = _invoke(*args, "--difference", "0.1")
    assert "A - B of 0.1 (B at 0.4)" in t.stdout


# ----------------------------------------------------------------------------------------------- item 10


def test_rogan_gladen_se_from_a_calibration_file_is_explained(crowd: dict[str, Any]) -> None:
    """Item 10: from a calibration file Rogan-Gladen's SE differs from --history's; the row says why."""
    ex = example_paths()
    r = _invoke("estimate", ex["current"], "--calibration", Path(__file__).parents[1] / "data" / "v0.1" /
                "calibration.json", "--method", "rogan_gladen,hero1", "--no-check-drift")
    assert r.exit_code == 0, r.output
    assert "treat the labelers' gold errors as independent" in re.sub(r"[│\s]+", " ", r.stdout)


# ----------------------------------------------------------------------------------------------- item 11


def test_label_value_errors_point_to_label_map_and_classes(crowd: dict[str, Any], tmp_path: Path) -> None:
    """Item 11: a label 2 suggests --label-map and --classes; '2=drop' passes 0/1 through; the note says drop."""
    c = crowd["c"].copy()
    c.loc[c.index[:7], "answer"] = 2
    c.to_csv(tmp_path / "three.csv", index=False)
    r = _invoke("estimate", tmp_path / "three.csv", "--calibration", crowd["cal"], *COLS)
    assert r.exit_code == 2
    assert "--label-map" in r.stderr and "--classes" in r.stderr and "not supported yet" not in r.stderr
    ok = _invoke("estimate", tmp_path / "three.csv", "--calibration", crowd["cal"], *COLS, "--label-map", "2=drop",
                 "--method", "majority_vote")
    assert ok.exit_code == 0, ok.output
    text = re.sub(r"[│\s]+", " ", ok.stdout)
    assert "dropped 7: label mapped to drop by --label-map" in text and "None" not in text


# ----------------------------------------------------------------------------------------------- item 12


def test_calibration_of_other_data(crowd: dict[str, Any]) -> None:
    """Item 12: a calibration from a different history: the error says so instead of advising exclusion."""
    r = _invoke("estimate", crowd["cur"], "--calibration", Path(__file__).parents[1] / "data" / "v0.1" /
                "calibration.json", *COLS)
    assert r.exit_code == 2
    assert "the calibration probably belongs to other data" in r.stderr
    assert "--new-labelers exclude to leave" not in r.stderr


# ----------------------------------------------------------------------------------------------- item 13


def test_cli_errors_and_warnings_name_options(crowd: dict[str, Any], drifted: str, tmp_path: Path) -> None:
    """Item 13: errors and warnings in the CLI name its options, never Python parameters or functions."""
    outs = []
    r = _invoke("calibrate", crowd["hist"], *COLS, "--gold", crowd["cur"], "-o", tmp_path / "c.json")  # no gold col
    outs.append(r)
    pd.DataFrame({"task": [1], "gold": [1]}).to_csv(tmp_path / "g1.csv", index=False)
    outs.append(_invoke("calibrate", crowd["hist"], *COLS, "--gold", tmp_path / "g1.csv", "-o", tmp_path / "c.json"))
    outs.append(_invoke("plan", "--calibration", crowd["cal"], "--mu", "0.5"))
    outs.append(_invoke("estimate", crowd["cur"], "--calibration", crowd["cal"], *COLS, "--new-labelers",
                        "error"))  # new labelers, asked to stop (by default HERO-1 estimates them, the rest exclude)
    outs.append(_invoke("estimate", drifted, "--calibration", crowd["cal"], *COLS, "--method", "hero1"))  # drift
    for r in outs:
        assert r.stderr, r.output
        _no_python_advice(r.stderr)
    assert "--half-width, --difference, --n-items or --bound" in outs[2].stderr
    assert "--new-labelers exclude" in outs[3].stderr
    assert "hero drift" in outs[4].stderr


# ----------------------------------------------------------------------------------------------- item 14


@pytest.mark.parametrize("sep", ["\t", ";"])
def test_tab_or_semicolon_separated_csv(crowd: dict[str, Any], tmp_path: Path, sep: str) -> None:
    """Item 14: a tab- or semicolon-separated .csv is read (the delimiter is sniffed from the header)."""
    crowd["c"].to_csv(tmp_path / "x.csv", sep=sep, index=False)
    r = _invoke("estimate", tmp_path / "x.csv", "--calibration", crowd["cal"], *COLS, "--method", "majority_vote",
                "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["ingest"]["current"]["tables"][0]["rows_used"] == len(crowd["c"])


def test_json_array_and_long_column_lists(crowd: dict[str, Any], tmp_path: Path) -> None:
    """Item 14: a JSON array of records is read; a wide table's column list is cut short in errors."""
    crowd["c"].to_json(tmp_path / "x.json", orient="records")
    r = _invoke("estimate", tmp_path / "x.json", "--calibration", crowd["cal"], *COLS, "--method", "majority_vote")
    assert r.exit_code == 0, r.output
    pd.DataFrame(np.zeros((2, 600)), columns=[f"c{i}" for i in range(600)]).to_csv(tmp_path / "wide.csv", index=False)
    bad = _invoke("estimate", tmp_path / "wide.csv", "--calibration", crowd["cal"])
    assert bad.exit_code == 2 and "600 columns" in bad.stderr
    assert len(bad.stderr.split("error:")[1]) < 600 and "c599" not in bad.stderr


# ----------------------------------------------------------------------------------------------- item 15


def test_every_command_prints_its_ingest_report(crowd: dict[str, Any], tmp_path: Path) -> None:
    """Item 15: report, compare --history, drift, estimate and calibrate print an ingest table per input."""
    hist = ["--history", crowd["hist"], "--gold", crowd["gold"], "--round-col", "batch"]
    small = crowd["dir"] / "small_cur.csv"
    c = crowd["c"][crowd["c"].worker.isin(set(crowd["h"].worker))]
    c.to_csv(small, index=False)
    runs = {
        "report": (_invoke("report", small, "--calibration", crowd["cal"], *COLS, "-o", tmp_path / "r.html"),
                   ["Ingest: current round"]),
        "compare": (_invoke("compare", small, small, *hist, *COLS, "--method", "hero1"),
                    ["Ingest: round A", "Ingest: round B", "Ingest: history"]),
        "drift": (_invoke("drift", small, "--calibration", crowd["cal"], *COLS), ["Ingest: current round"]),
        "estimate": (_invoke("estimate", small, *hist, *COLS, "--method", "hero1", "--no-check-drift"),
                     ["Ingest: current round", "Ingest: history"]),
    }
    for name, (r, titles) in runs.items():
        assert r.exit_code == 0, (name, r.output)
        for t in titles:
            assert t in r.stdout, (name, t)
        assert r.stdout.index(titles[0]) < 40, name  # first


# ----------------------------------------------------------------------------------------------- item 16


def test_recommendation_and_calibrate_text_agree(crowd: dict[str, Any], tmp_path: Path) -> None:
    """Item 16: the reason does not call the chosen method's model wrong; calibrate says what its w is for."""
    r = _invoke("estimate", crowd["cur"], "--calibration", crowd["cal"], *COLS, "--new-labelers", "exclude",
                "--no-check-drift", "-f", "json")
    reason = json.loads(r.stdout)["recommended"]["reason"]
    assert "the model behind the likelihood methods is wrong" not in reason
    assert ("smallest predicted error" in reason or "no significant bias" in reason
            or "smallest estimated error on a new round" in reason)
    c = _invoke("calibrate", crowd["hist"], "--gold", crowd["gold"], *COLS, "-o", tmp_path / "c.json")
    text = re.sub(r"\s+", " ", c.stdout)
    assert "chosen by log score" not in text and "a candidate weight for --method auto" in text
    assert "this calibration itself is fitted at w = 1" in text


# ----------------------------------------------------------------------------------------------- item 17


def test_no_unrequested_recommended_row(crowd: dict[str, Any]) -> None:
    """Item 17: a --method list without auto gets no recommended row; with auto it does."""
    base = ["estimate", crowd["cur"], "--calibration", crowd["cal"], *COLS, "--new-labelers", "exclude",
            "--no-check-drift"]
    r = _invoke(*base, "--method", "hero1,majority_vote")
    assert r.exit_code == 0 and "recommended" not in r.stdout
    j = _invoke(*base, "--method", "hero1,majority_vote", "-f", "json")
    assert json.loads(j.stdout)["recommended"] is None
    a = _invoke(*base, "--method", "hero1,auto", "-f", "json")
    assert json.loads(a.stdout)["recommended"] is not None


# ----------------------------------------------------------------------------------------------- item 18


def test_drift_shows_flagged_labelers_and_all_on_request(crowd: dict[str, Any], drifted: str) -> None:
    """Item 18: hero drift lists the flagged labelers only (--all lists every one) and does not repeat them on stderr."""
    r = _invoke("drift", drifted, "--calibration", crowd["cal"], *COLS, "--reestimate", "none")
    assert r.exit_code == 0, r.output
    flagged = json.loads(_invoke("drift", drifted, "--calibration", crowd["cal"], *COLS, "--reestimate", "none",
                                 "-f", "json").stdout)["flagged"]
    n_all = crowd["c"][crowd["c"].worker.isin(set(crowd["h"].worker))].worker.nunique()
    flagged_rows = [ln for ln in r.stdout.splitlines() if "DRIFT" in ln]
    assert 0 < len(flagged) == len(flagged_rows) < n_all
    assert all(any(f in ln for ln in flagged_rows) for f in flagged)
    assert "--all lists every labeler" in r.stdout
    assert "TransportabilityWarning" not in r.stderr
    a = _invoke("drift", drifted, "--calibration", crowd["cal"], *COLS, "--reestimate", "none", "--all")
    listed = sum(1 for w in set(crowd["c"].worker) & set(crowd["h"].worker) if w in a.stdout)
    assert listed == n_all


# ----------------------------------------------------------------------------------------------- item 19


def test_option_names_are_consistent() -> None:
    """Item 19: one name per option across commands (old names hidden but working); plain, honest help."""
    cmds = typer.main.get_command(app).commands  # type: ignore[attr-defined]

    def opts(cmd: str, hidden: bool = False) -> set[str]:
        return {o for p in cmds[cmd].params if getattr(p, "hidden", False) == hidden for o in p.opts}

    for cmd in ("estimate", "report", "compare", "drift"):
        assert "--new-labelers" in opts(cmd), cmd
        assert "--exclude-new-labelers" in opts(cmd, hidden=True), cmd
        assert {"--gold-col", "--gold-item-col", "--encoding"} <= opts(cmd), cmd
    assert "--history-covariates" in opts("calibrate") and "--covariates" in opts("calibrate", hidden=True)
    assert "--reps" in opts("simulate") and "--reps" in opts("benchmark")
    assert "--resamples" in opts("benchmark", hidden=True)
    h = runner.invoke(app, ["calibrate", "--help"], env={"COLUMNS": "200"}).stdout
    assert "<bool>" not in h and "pip install 'heroeval'" not in h
    e = runner.invoke(app, ["estimate", "--help"], env={"COLUMNS": "200"}).stdout
    assert "TSV" in e


def test_old_option_names_still_work(crowd: dict[str, Any], tmp_path: Path) -> None:
    """Item 19: calibrate --covariates and --exclude-new-labelers keep working as hidden aliases."""
    r = _invoke("estimate", crowd["cur"], "--calibration", crowd["cal"], *COLS, "--exclude-new-labelers",
                "--method", "hero1", "--no-check-drift", "-f", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["estimates"]["hero1"]["details"]["excluded_labelers"] == crowd["new"]
    clash = _invoke("estimate", crowd["cur"], "--calibration", crowd["cal"], *COLS, "--exclude-new-labelers",
                    "--new-labelers", "estimate")
    assert clash.exit_code == 2 and "contradicts" in clash.stderr


# ----------------------------------------------------------------------------------------------- item 21


def test_small_p_values_and_sparse_labelers(crowd: dict[str, Any], tmp_path: Path) -> None:
    """Item 21: p-values never print as 0.0000; sparse labelers at a bound are not called 'never erring'."""
    # a worker with 5 labels on gold-free items, all 1: the EM fits its specificity at the bound
    h = pd.concat([crowd["h"], pd.DataFrame({"task": crowd["h"].task[~crowd["h"].task.isin(crowd["g"].task)].unique()[:5],
                                             "worker": "ZZSPARSE", "answer": 1, "batch": 1})])
    h.to_csv(tmp_path / "h.csv", index=False)
    r = _invoke("calibrate", tmp_path / "h.csv", "--gold", crowd["gold"], *COLS, "-o", tmp_path / "c.json")
    assert r.exit_code == 0, r.output
    dep = r.stdout.split("independent given gold")[1].split("\n")[4]
    assert "excess agreement" in dep and " 0.0000 " not in dep
    cal = he.load_calibration(tmp_path / "c.json")
    assert "ZZSPARSE" in cal.labelers_at_bound
    text = re.sub(r"\s+", " ", r.stdout)
    assert "few labels are fitted at a bound" in text
    for sentence in text.split("labeler(s)"):
        if "never (or always) erring" in sentence:
            assert "ZZSPARSE" not in sentence


# ----------------------------------------------------------------------------------------------- item 22


def test_multi_round_current_file_warns(crowd: dict[str, Any]) -> None:
    """Item 22: a multi-round file passed as the current round warns, naming its rounds."""
    r = _invoke("estimate", crowd["hist"], "--history", crowd["hist"], "--gold", crowd["gold"], *COLS,
                "--round-col", "batch", "--method", "majority_vote")
    assert r.exit_code == 0, r.output
    assert "MultipleRoundsWarning" in r.stderr and "3 rounds ('1', '2', '3')" in r.stderr


# ----------------------------------------------------------------------------------------------- item 24


def test_demo_reports_wall_time(tmp_path: Path) -> None:
    """Item 24: the demo reports the wall time the user waited (start-up included), not a part of it."""
    t = demo._process_seconds()
    assert t is not None and t > 0.5  # this process has been running the tests for longer than that
    r = _invoke("demo")
    m = re.search(r"demo finished in ([0-9.]+) s of wall time", r.stdout)
    assert m and float(m.group(1)) >= t


# ----------------------------------------------------------------------------------------------- item 25


def test_drift_sets_new_labelers_aside(crowd: dict[str, Any]) -> None:
    """Item 25: hero drift with a few new workers sets them aside (counted) instead of stopping."""
    r = _invoke("drift", crowd["cur"], "--calibration", crowd["cal"], *COLS, "--reestimate", "drop")
    assert r.exit_code == 0, r.output
    assert f"set aside {len(crowd['new'])} labeler(s) new in this round" in r.stdout
    j = _invoke("drift", crowd["cur"], "--calibration", crowd["cal"], *COLS, "-f", "json")
    assert json.loads(j.stdout)["new_labelers_set_aside"]["labelers"] == crowd["new"]
    e = _invoke("drift", crowd["cur"], "--calibration", crowd["cal"], *COLS, "--new-labelers", "error")
    assert e.exit_code == 2 and "not in the calibration" in e.stderr
