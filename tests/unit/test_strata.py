"""Rates per stratum (issue #38 item 5): ``he.estimate(current, cal, by=...)`` and ``hero estimate --by COLUMN``.

Each stratum is estimated as a round alone (the same numbers as ``he.estimate`` on that stratum's items), and
the intervals are family-wise over the strata: each stratum's own interval at level ``1 - alpha / K``
(Bonferroni). The simulation checks their simultaneous coverage and the per-stratum bias.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit
from scipy.stats import norm
from typer.testing import CliRunner, Result

import heroeval as he
from heroeval.cli import app
from heroeval.errors import DataError, HeroEvalError
from heroeval.simulate import shift_dgp
from heroeval.workflows import StrataEstimate, estimate_by
from heroeval.workflows.strata import family_level

runner = CliRunner()

J = 5
ALPHA = np.array([0.85, 0.80, 0.75, 0.90, 0.70])
BETA = np.array([0.80, 0.85, 0.90, 0.75, 0.80])
LABELERS = [f"L{j:02d}" for j in range(J)]


def _history(seed: int, N: int = 400) -> he.AnnotationSet:
    """A history from :func:`shift_dgp` (labelers L00..L04, gold on 15 % of its items)."""
    return shift_dgp(seed, alpha=ALPHA, beta=BETA, N=N, n=10, rho=0.15, history_rate=0.4).history


def _current_rows(rng: np.random.Generator, rates: dict[str, float], n: int) -> pd.DataFrame:
    """A current round drawn stratum by stratum: ``n`` items per stratum with gold rate ``rates[s]``, every
    labeler labels every item (two-coin model with the history's sensitivities and specificities)."""
    rows = []
    for s, r in rates.items():
        y = rng.random(n) < r
        z = np.where(y[:, None], rng.random((n, J)) < ALPHA, rng.random((n, J)) >= BETA).astype(int)
        for i in range(n):
            for j in range(J):
                rows.append((f"{s}-{i}", LABELERS[j], int(z[i, j]), s))
    return pd.DataFrame(rows, columns=["item_id", "labeler_id", "label", "topic"])


def _set(df: pd.DataFrame, with_round: bool = True) -> he.AnnotationSet:
    ir = None
    if with_round:
        per = df.drop_duplicates("item_id")
        ir = (per["item_id"].to_numpy(), per["topic"].to_numpy())
    return he.AnnotationSet.from_arrays(df["item_id"], df["labeler_id"], df["label"], item_round=ir, name="current")


@pytest.fixture(scope="module")
def small() -> tuple[he.AnnotationSet, pd.DataFrame, he.Calibration]:
    hist = _history(3)
    df = _current_rows(np.random.default_rng(7), {"a": 0.2, "b": 0.5, "c": 0.7}, 40)
    return hist, df, he.calibrate(hist, checks=True)


# -- (a) one answer everywhere -------------------------------------------------------------------------------


def test_each_stratum_is_estimate_on_that_stratum_alone(small: tuple[he.AnnotationSet, pd.DataFrame,
                                                                     he.Calibration]) -> None:
    _, df, cal = small
    cur = _set(df, with_round=False)
    by = dict(zip(df["item_id"], df["topic"], strict=False))
    res = he.estimate(cur, cal, by=by)  # method="hero1", as estimate's default
    assert isinstance(res, StrataEstimate)
    assert res.n_strata == 3 and not res.skipped and res.adjust == "bonferroni"
    lvl = 1 - 0.05 / 3
    assert res.stratum_level == pytest.approx(lvl, abs=1e-15)
    assert res.critical_value == pytest.approx(norm.ppf(1 - 0.05 / 6), abs=1e-12)
    frame = res.to_frame()
    assert list(frame.index) == ["a", "b", "c"]
    for s in ("a", "b", "c"):
        alone = he.estimate(_set(df[df["topic"] == s], with_round=False), cal)
        assert isinstance(alone, he.EstimateResult)
        row = frame.loc[s]
        assert row["estimate"] == pytest.approx(alone.estimate, abs=1e-12)
        assert row["standard_error"] == pytest.approx(alone.standard_error, abs=1e-12)
        assert row["status"] == alone.status and row["n_items"] == 40
        ci = alone.confidence_interval(lvl)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
        assert row["ci_method"] == ci.method  # the score-test inversion on 40 items
        # independently: the logit interval with Bonferroni's critical value
        lrow = res.to_frame("logit").loc[s]
        e, se = alone.estimate, alone.standard_error
        z = norm.ppf(1 - 0.05 / (2 * 3))
        lo, hi = expit(logit(e) - z * se / (e * (1 - e))), expit(logit(e) + z * se / (e * (1 - e)))
        assert (lrow["ci_low"], lrow["ci_high"]) == pytest.approx((lo, hi), abs=1e-10)
        # wider than the marginal 95 % interval
        m = alone.confidence_interval(0.95)
        assert row["ci_low"] < m.low and row["ci_high"] > m.high
    # the level and the adjustment can change afterwards without estimating again
    sid = res.with_family(0.9, "sidak")
    assert sid.stratum_level == pytest.approx(0.9 ** (1 / 3))
    json.dumps(res.to_dict())
    assert "family-wise over 3 strata" in res.summary() and "<table" in res._repr_html_()


def test_recommended_per_stratum_matches_estimate_alone(small: tuple[he.AnnotationSet, pd.DataFrame,
                                                                    he.Calibration]) -> None:
    hist, df, cal = small
    cur = _set(df)  # the topic read as the round column
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = he.estimate(cur, cal, by="topic", method="all", recommend=True, history=hist)
        assert res.by == "topic" and res.n_strata == 3
        for s in ("a", "b", "c"):
            alone = he.estimate(_set(df[df["topic"] == s], with_round=False), cal, method="all", recommend=True,
                                history=hist)
            assert isinstance(alone, he.EstimateCollection) and alone.recommended is not None
            got = res.results[s]
            assert isinstance(got, he.EstimateCollection) and got.recommended is not None
            assert got.recommended.method == alone.recommended.method
            assert got.recommended.status == alone.recommended.status
            assert got.recommended.reason == alone.recommended.reason
            row = res.to_frame().loc[s]
            assert row["recommended"] and row["method"] == alone.recommended.method
            assert row["estimate"] == pytest.approx(alone.recommended.result.estimate, abs=1e-12)
            ci = alone.recommended.result.confidence_interval(1 - 0.05 / 3)  # bias-aware / hull if so chosen
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_model_checks_run_once_give_the_same_choice(small: tuple[he.AnnotationSet, pd.DataFrame,
                                                                 he.Calibration]) -> None:
    """A calibration without model checks: they are run once for all strata, as each stratum alone would."""
    hist, df, _ = small
    cal = he.calibrate(hist)
    cur = _set(df)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = estimate_by(cur, cal, by="topic", method="auto", history=hist, confidence_level=0.9, adjust="sidak")
        for s in ("a", "c"):
            alone = he.estimate(_set(df[df["topic"] == s], with_round=False), cal, method="auto", history=hist)
            assert isinstance(alone, he.EstimateResult)
            got = res.reported(s)
            assert got.method == alone.method and got.estimate == pytest.approx(alone.estimate, abs=1e-12)
            ci = alone.confidence_interval(0.9 ** (1 / 3))
            row = res.to_frame().loc[s]
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
            assert row["status"] == alone.details["auto"]["status"]


# -- (b) simultaneous coverage by simulation -------------------------------------------------------------------

RATES = {"s1": 0.10, "s2": 0.25, "s3": 0.45, "s4": 0.70}
REPS = 150


@pytest.mark.slow
def test_simultaneous_coverage_and_bias() -> None:
    """K = 4 strata of 120 items with gold rates 0.10 to 0.70 by construction, a fresh history (400 items,
    15 % gold) each replication; target: each stratum's population rate. Bonferroni's 95 % family-wise
    intervals must cover all four rates at once in at least 90 % of the replications (nominal 95 %; 150
    replications give a binomial standard error of about 1.8 %), the marginal 95 % intervals less often
    than the family-wise ones, and HERO-1's mean error per stratum must be within 0.015."""
    truth = np.array(list(RATES.values()))
    all_in = marginal_all_in = 0
    errors = np.zeros((REPS, len(RATES)))
    rng = np.random.default_rng(20261203)
    for r in range(REPS):
        hist = _history(1000 + r)
        cur = _set(_current_rows(rng, RATES, 120))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = he.estimate(cur, he.calibrate(hist), by="topic")
        assert isinstance(res, StrataEstimate) and res.n_strata == 4
        f = res.to_frame().loc[list(RATES)]
        all_in += bool(((f["ci_low"] <= truth) & (truth <= f["ci_high"])).all())
        m = res.with_family(adjust="none").to_frame().loc[list(RATES)]
        marginal_all_in += bool(((m["ci_low"] <= truth) & (truth <= m["ci_high"])).all())
        errors[r] = f["estimate"].to_numpy() - truth
    coverage, marginal = all_in / REPS, marginal_all_in / REPS
    bias = errors.mean(axis=0)
    print(f"simultaneous coverage {coverage:.3f} (marginal intervals {marginal:.3f}); bias {np.round(bias, 4)}; "
          f"RMSE {np.round(np.sqrt((errors ** 2).mean(axis=0)), 4)}")
    assert coverage >= 0.90
    assert marginal <= coverage
    assert np.all(np.abs(bias) < 0.015)


# -- (c) the command line ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory: pytest.TempPathFactory, small: tuple[he.AnnotationSet, pd.DataFrame,
                                                                     he.Calibration]) -> dict[str, Path]:
    hist, df, _ = small
    d = tmp_path_factory.mktemp("strata")
    pd.DataFrame({"item_id": hist.item_ids[hist.annotation_item], "labeler_id": hist.labeler_ids[hist.labeler],
                  "label": hist.label}).to_csv(d / "history.csv", index=False)
    g = hist.gold >= 0
    pd.DataFrame({"item_id": hist.item_ids[g], "gold": hist.gold[g]}).to_csv(d / "gold.csv", index=False)
    df.to_csv(d / "current.csv", index=False)
    lonely = pd.concat([df, pd.DataFrame([("z-0", "L00", 1, "z"), ("z-0", "L01", 0, "z")], columns=df.columns)])
    lonely.to_csv(d / "lonely.csv", index=False)
    two = df.copy()
    two.loc[two.index[1], "topic"] = "b"  # item a-0 labelled under topic a and topic b
    two.to_csv(d / "two.csv", index=False)
    return {"history": d / "history.csv", "gold": d / "gold.csv", "current": d / "current.csv",
            "lonely": d / "lonely.csv", "two": d / "two.csv"}


def _cli(files: dict[str, Path], current: str, *extra: str) -> Result:
    return runner.invoke(app, ["estimate", str(files[current]), "--history", str(files["history"]),
                               "--gold", str(files["gold"]), "--by", "topic", "--method", "hero1,rogan_gladen",
                               *extra])


def test_cli_by_table_and_json(cli_files: dict[str, Path], small: tuple[he.AnnotationSet, pd.DataFrame,
                                                                          he.Calibration]) -> None:
    r = _cli(cli_files, "current")
    assert r.exit_code == 0, r.output
    out = r.output
    assert "Rates per topic" in out and "family-wise over 3 strata" in out and "98.33 %" in out
    r = _cli(cli_files, "current", "--format", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["by"] == "topic" and d["n_strata"] == 3 and d["adjust"] == "bonferroni"
    assert d["stratum_level"] == pytest.approx(1 - 0.05 / 3)
    # the CLI computes nothing itself: the API on the same files
    hist = he.read_annotations(cli_files["history"], gold=cli_files["gold"])
    cur = he.read_annotations(cli_files["current"], round_col="topic")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        api = he.estimate(cur, he.calibrate(hist), by="topic", method=["hero1", "rogan_gladen"])
    frame = api.to_frame()
    rows = {(x["stratum"], x["method"]): x for x in d["strata"]}
    assert len(rows) == 6  # no recommendation asked: every method's row, a family per method
    for (s, m), x in rows.items():
        want = frame[(frame.index == s) & (frame["method"] == m)].iloc[0]
        assert x["estimate"] == pytest.approx(want["estimate"], abs=1e-12)
        assert x["ci_high"] == pytest.approx(want["ci_high"], abs=1e-12)


def test_cli_by_recommended_default(cli_files: dict[str, Path]) -> None:
    r = runner.invoke(app, ["estimate", str(cli_files["current"]), "--history", str(cli_files["history"]),
                            "--gold", str(cli_files["gold"]), "--by", "topic", "--format", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert [x["stratum"] for x in d["strata"]] == ["a", "b", "c"]
    assert all(x["recommended"] for x in d["strata"])
    assert set(d["results"]) == {"a", "b", "c"} and d["results"]["a"]["recommended"] is not None


def test_cli_by_bad_input(cli_files: dict[str, Path], tmp_path: Path) -> None:
    r = runner.invoke(app, ["estimate", str(cli_files["current"]), "--history", str(cli_files["history"]),
                            "--gold", str(cli_files["gold"]), "--by", "harm"])
    assert r.exit_code == 2 and "harm" in r.output and "no such column" in r.output
    r = _cli(cli_files, "two")
    assert r.exit_code != 0 and "a-0" in r.output and "stratum" in r.output
    r = _cli(cli_files, "lonely", "--csv", str(tmp_path / "strata.csv"))
    assert r.exit_code == 0, r.output
    assert "skipped" in r.output and "1 item" in r.output
    csv = pd.read_csv(tmp_path / "strata.csv", index_col="stratum")
    assert csv.loc["z", "status"] == "skipped" and csv.loc["z", "n_items"] == 1


# -- (d) bad input and edge cases in Python --------------------------------------------------------------------


def test_by_errors_and_edge_cases(small: tuple[he.AnnotationSet, pd.DataFrame, he.Calibration]) -> None:
    _, df, cal = small
    plain = _set(df, with_round=False)
    by = dict(zip(df["item_id"], df["topic"], strict=False))
    # a column name for a round read without a round column
    with pytest.raises(HeroEvalError, match="round_col='topic'"):
        he.estimate(plain, cal, by="topic")
    # an item without a stratum; an item in two strata (a Series)
    with pytest.raises(DataError, match="have no stratum"):
        he.estimate(plain, cal, by={k: v for k, v in by.items() if k != "a-3"})
    s = pd.Series(by)
    s = pd.concat([s, pd.Series({"b-1": "c"})])
    with pytest.raises(DataError, match="'b-1' is in two strata"):
        he.estimate(plain, cal, by=s)
    with pytest.raises(HeroEvalError, match="adjust"):
        estimate_by(plain, cal, by=by, adjust="holm")
    # a stratum of one item: skipped and counted, K counts the others
    one = {**by, "a-0": "tiny"}
    res = he.estimate(plain, cal, by=one)
    assert res.n_strata == 3 and res.sizes["tiny"] == 1 and "at least 2" in res.skipped["tiny"]
    assert res.stratum_level == pytest.approx(1 - 0.05 / 3)
    f = res.to_frame()
    assert f.loc["tiny", "status"] == "skipped" and np.isnan(f["estimate"]["tiny"])
    assert "skipped: 1 item" in res.summary()
    assert res.to_dict()["skipped"] == {"tiny": res.skipped["tiny"]}
    # K = 1: the marginal interval, the same as the round's own
    res1 = he.estimate(plain, cal, by=dict.fromkeys(by, "all items"))
    whole = he.estimate(plain, cal)
    assert isinstance(whole, he.EstimateResult)
    assert res1.n_strata == 1 and res1.stratum_level == 0.95
    row = res1.to_frame().loc["all items"]
    ci = whole.confidence_interval(0.95)
    assert row["estimate"] == pytest.approx(whole.estimate, abs=1e-12)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    # every stratum too small: an error, not an empty result
    with pytest.raises(HeroEvalError, match="no stratum"):
        he.estimate(plain.take_items([0, 1]), cal, by={plain.item_ids[0]: "x", plain.item_ids[1]: "y"})


def test_family_level() -> None:
    assert family_level(0.95, 1, "bonferroni") == 0.95
    assert family_level(0.95, 5, "bonferroni") == pytest.approx(0.99)
    assert family_level(0.95, 5, "sidak") == pytest.approx(0.95 ** 0.2)
    with pytest.raises(HeroEvalError):
        family_level(1.5, 2, "sidak")
