"""hero report, compare --report, demo --report, and plain output when piped."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from heroeval.cli import app
from heroeval.workflows.demo import example_paths
from tests.cli.test_cli import files  # noqa: F401  (fixture)
from tests.conftest import Sim

runner = CliRunner()
ANSI = re.compile(r"\x1b\[")


def _data(page: Path) -> dict[str, Any]:
    m = re.search(r'id="hero-data">(.*?)</script>', page.read_text(encoding="utf-8"), re.S)
    assert m is not None
    out: dict[str, Any] = json.loads(m.group(1))
    return out


def test_report_from_history_matches_estimate_json(files: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    src = ["--history", str(files["history"]), "--gold", str(files["gold"]), "--covariates", str(files["current_x"]),
           "--history-covariates", str(files["history_x"])]
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", str(files["current"]), *src, "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert f"report written to {out}" in r.stdout.replace("\n", "")
    assert not ANSI.search(r.output)
    d = _data(out)
    e = runner.invoke(app, ["estimate", str(files["current"]), *src, "--format", "json"])
    full = json.loads(e.stdout)
    est = full["estimates"]
    shown = dict(d["rounds"]["current"]["estimates"])
    rec = shown.pop("recommended")  # the report shows the recommended estimate first, as the JSON does
    assert full["recommended"] is not None
    for f in ("estimate", "ci_low", "ci_high"):
        assert rec[f] == pytest.approx(full["recommended"][f], rel=1e-12, abs=1e-15), f
    assert set(shown) == set(est)
    for m in est:
        for f in ("estimate", "standard_error", "ci_low", "ci_high"):
            assert shown[m][f] == pytest.approx(est[m][f], rel=1e-12, abs=1e-15), (m, f)
    assert d["sources"]["current"] == str(files["current"])
    assert d["ingest"]["history"] is not None


def test_report_from_calibration_file(files: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    cal = tmp_path / "cal.json"
    r = runner.invoke(app, ["calibrate", str(files["history"]), "--gold", str(files["gold"]), "-o", str(cal)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", str(files["current"]), "--calibration", str(cal), "-o", str(out),
                            "--title", "Round <42>", "--ci-method", "wald"])
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    assert "<title>Round &lt;42&gt;</title>" in text
    d = _data(out)
    assert d["ci_method"] == "wald" and "hero2" in d["rounds"]["current"]["skipped"]


def test_report_bad_sources(files: dict[str, Path], tmp_path: Path) -> None:  # noqa: F811
    r = runner.invoke(app, ["report", str(files["current"]), "-o", str(tmp_path / "r.html")])
    assert r.exit_code == 2 and "give exactly one of --calibration or --history" in r.stderr
    r = runner.invoke(app, ["report", str(files["current"]), "--history", str(files["history"]),
                            "--gold", str(files["gold"]), "-o", str(tmp_path / "no" / "r.html")])
    assert r.exit_code == 2 and "cannot write the report" in r.stderr


def test_compare_report(files: dict[str, Path], tmp_path: Path, sim: Sim) -> None:  # noqa: F811
    out = tmp_path / "c.html"
    r = runner.invoke(app, ["compare", str(files["current"]), str(files["current"]), "--history",
                            str(files["history"]), "--gold", str(files["gold"]), "--method", "hero1",
                            "--report", str(out), "--format", "json"])
    assert r.exit_code == 0, r.output
    cj = json.loads(r.stdout)
    d = _data(out)
    assert d["kind"] == "comparison"
    # --report widens one method to all; the same round twice differs by exactly 0
    assert {"hero1", "majority_vote", "hero_joint"} <= set(d["difference"]["estimates"])
    assert d["difference"]["estimates"]["hero1"]["estimate"] == 0.0
    assert cj["difference"]["hero1"]["estimate"] == 0.0


def test_demo_report_and_plain_when_piped(tmp_path: Path) -> None:
    out = tmp_path / "demo.html"
    r = runner.invoke(app, ["demo", "--report", str(out)])
    assert r.exit_code == 0, r.output
    assert f"HTML report written to {out}" in r.stdout.replace("\n", "")
    assert not ANSI.search(r.output) and not ANSI.search(r.stderr)
    d = _data(out)
    truth = json.loads(example_paths()["truth"].read_text())["true_rate"]
    assert d["truth"] == truth and d["primary"] == "recommended"
    # tables keep numbers right-aligned: every estimate in the estimates table ends at the same column
    lines = [ln for ln in r.stdout.splitlines() if re.match(r"^[│|] (HERO|Majority|Dawid|Gold)", ln)]
    ends = {ln.index(f"{float(m.group(0)):.4f}") + 6 for ln in lines if (m := re.search(r"\b0\.\d{4}\b", ln))}
    assert len(lines) >= 6 and len(ends) == 1


def test_warnings_coloured_only_on_a_colour_terminal(files: dict[str, Path], tmp_path: Path, sim: Sim) -> None:  # noqa: F811
    # a current round whose covariate is shifted: HERO-2 warns on stderr
    shifted = tmp_path / "x.csv"
    cur = sim.current
    pd.DataFrame({"item_id": cur.item_ids, "x": cur.covariates[:, 0] + 3.0}).to_csv(shifted, index=False)  # type: ignore[index]
    args = ["estimate", str(files["current"]), "--history", str(files["history"]), "--gold", str(files["gold"]),
            "--covariates", str(shifted), "--history-covariates", str(files["history_x"])]
    plain = runner.invoke(app, args)
    assert plain.exit_code == 0, plain.output
    assert "warning (CovariateShiftWarning)" in plain.stderr
    assert not ANSI.search(plain.stdout) and not ANSI.search(plain.stderr)
    colour = runner.invoke(app, args, env={"FORCE_COLOR": "1", "NO_COLOR": None, "TERM": "xterm-256color"})
    assert colour.exit_code == 0, colour.output
    assert ANSI.search(colour.stderr) and "CovariateShiftWarning" in colour.stderr


def test_progress_and_spinner_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    from heroeval.cli import console as cli

    with cli.progress("x") as tick:  # pytest's captured stderr is not a terminal
        assert tick is None
    with cli.progress("x", enabled=False) as tick:
        assert tick is None
    fake = io.StringIO()
    monkeypatch.setattr(fake, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys, "stderr", fake)
    with cli.progress("benchmark") as tick:
        assert tick is not None
        tick(1, 4)
        tick(4, 4)
    with cli.busy("Stage A"):
        pass
