"""Expert labels on a stored round (issue #41 item 5): ``Store.add_gold`` / ``hero store gold``, ``--current-gold``
at estimate time, and rounds stored twice (the re-add workaround) kept out of each other's calibrations."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app
from heroeval.errors import HeroEvalWarning
from heroeval.store import StoreError
from tests.store.test_store import _frames


@pytest.fixture
def parts(tmp_path: Path):
    st = he.Store(tmp_path / "hero.duckdb")
    fr = _frames(rounds=3)
    for k in (0, 1):
        st.add(fr[k][0], gold=fr[k][1], name=f"v{k + 1}")
    ann, gold = fr[2]
    st.add(ann, name="week")  # no gold: role auto, so a current round
    return st, ann, gold


def test_add_gold_then_estimate_uses_it_as_current_gold(parts) -> None:
    st, ann, gold = parts
    before = st.round("week")
    assert not before.in_history and before.n_gold == 0
    g20 = gold.head(20)
    res = st.add_gold("week", g20)
    assert (res.new, res.already, res.round.n_gold, res.design) == (20, 0, 20, False)
    assert res.joined_history and res.round.in_history and "joins the history" in " ".join(res.lines())
    assert res.round.content_hash != before.content_hash
    assert st.log()[-1]["action"] == "gold" and st.log()[-1]["detail"]["new"] == 20
    se = st.estimate("week", method="all")
    assert se.calibration.rounds == ("v1", "v2")  # never calibrated on itself
    rec = se.estimates.recommended
    assert rec.method == "hero1_ppi" and rec.result.details["n_gold"] == 20
    # the same as estimating the round with those expert labels by hand
    cal = he.calibrate(st.load(["v1", "v2"]), checks=True, seed=0)
    cur = he.read_annotations(ann, gold=g20, name="week")
    want = he.estimate(cur, cal, method="hero1_ppi", drift_check=False)
    assert rec.result.estimate == pytest.approx(want.estimate, abs=1e-9)
    # the same labels again change nothing; a contradicting one or an unknown item is refused, nothing changed
    again = st.add_gold("week", g20.head(5))
    assert (again.new, again.already) == (0, 5) and again.round.content_hash == res.round.content_hash
    bad = g20.head(1).assign(gold=1 - g20["gold"].iloc[0])
    with pytest.raises(StoreError, match="already have another gold label"):
        st.add_gold("week", bad)
    with pytest.raises(StoreError, match="not items of round 'week'"):
        st.add_gold("week", pd.DataFrame({"item_id": ["nope"], "gold": [1]}))
    assert st.round("week").content_hash == res.round.content_hash


def test_gold_with_a_design_is_kept_and_weights_the_estimate(parts) -> None:
    st, _, gold = parts
    g = gold.head(12).assign(pi=[0.2, 0.4] * 6)
    res = st.add_gold("week", g)
    assert res.design
    ds = st.load("week")
    assert ds.gold_pi is not None and ds.n_gold == 12
    se = st.estimate("week", method="hero1_ppi")
    assert se.estimates.details["design"] == "design"
    with pytest.raises(StoreError, match="need their inclusion probabilities"):
        st.add_gold("week", gold.iloc[12:14])
    st.remove("week")  # its design rows go with it
    assert "week" not in st.rounds().names


def test_current_gold_at_estimate_time_is_not_stored(parts) -> None:
    st, _, gold = parts
    se = st.estimate("week", method="all", current_gold=gold.head(15))
    assert se.estimates.recommended.method == "hero1_ppi"
    assert any("15 expert label(s) given for this estimate" in n for n in se.notes)
    assert st.round("week").n_gold == 0


def test_the_re_add_workaround_warns_and_is_kept_out_of_the_calibration(parts) -> None:
    st, ann, gold = parts
    with pytest.warns(HeroEvalWarning, match="holds the same annotations as round"):
        st.add(ann, gold=gold, name="week-gold")
    assert st.round("week-gold").in_history
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        se = st.estimate("week", method="hero1")
    assert "week-gold" not in se.calibration.rounds
    assert any("stored twice" in n for n in se.notes)


def test_cli_store_gold_and_current_gold(parts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, gold = parts
    monkeypatch.chdir(tmp_path)
    gold.head(20).to_csv("expert.csv", index=False)
    gold.iloc[20:30].to_csv("more.csv", index=False)
    r = CliRunner().invoke(app, ["store", "estimate", "week", "--current-gold", "more.csv", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["recommended"]["method"] == "hero1_ppi"
    r = CliRunner().invoke(app, ["store", "gold", "week", "expert.csv"])
    assert r.exit_code == 0, r.output
    assert "20 expert label(s) added" in r.output
    r = CliRunner().invoke(app, ["store", "gold", "week", "missing.csv"])
    assert r.exit_code == 2 and "missing.csv" in r.output
    out = json.loads(CliRunner().invoke(app, ["store", "estimate", "week", "--json"]).output)
    assert out["recommended"]["method"] == "hero1_ppi"
