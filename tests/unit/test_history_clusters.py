"""The history's cluster-robust parameter covariance (issue #39 item 4; :mod:`heroeval.stage_a.clustered`).

Three checks: a closed form (every item its own group gives the independent-items sandwich times
``N / (N - 1) * few_groups_factor(N)``), an independent plain computation (per-item scores of the two-coin
log-likelihood by finite differences, summed by group, a numerical Hessian) against the library's covariance,
and the public paths (``calibrate`` of a grouped history, its settings, a saved calibration, the errors). The
coverage simulation is tests/simulation/test_grouped_items_sim.py.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app
from heroeval.core.clusters import few_groups_factor
from heroeval.errors import HeroEvalError
from heroeval.estimators.common import gold_count_variances
from heroeval.estimators.methods import gold_proportion_rates
from heroeval.simulate import paper_dgp


@pytest.fixture(scope="module")
def history() -> he.AnnotationSet:
    return paper_dgp(3, rho=0.10, k=12, n=300).history


def test_own_groups_are_the_independent_sandwich(history: he.AnnotationSet) -> None:
    N = history.n_items
    factor = N / (N - 1) * few_groups_factor(N)
    for shrink in ("none", "eb"):
        plain = he.calibrate(history, checks=False, shrink=shrink)
        own = he.calibrate(history.with_groups({str(x): i for i, x in enumerate(history.item_ids)}),
                           checks=False, shrink=shrink)
        np.testing.assert_array_equal(own.alpha, plain.alpha)  # the fit does not move
        assert own.settings["history_item_groups"] == N and "history_item_groups" not in plain.settings
        V0, V1 = plain.parameter_covariance, own.parameter_covariance
        assert V0 is not None and V1 is not None and V1.shape == V0.shape  # covariate means included
        np.testing.assert_allclose(V1, factor * V0, rtol=1e-7, atol=1e-14)


def _item_loglik(history: he.AnnotationSet, theta: np.ndarray) -> np.ndarray:
    """Each item's observed-data log-likelihood under the two-coin model at theta = (alpha, beta, prev)."""
    J = history.n_labelers
    a, b, p = theta[:J], theta[J:2 * J], theta[2 * J]
    la1 = np.where(history.label == 1, np.log(a[history.labeler]), np.log1p(-a[history.labeler]))
    lb0 = np.where(history.label == 1, np.log1p(-b[history.labeler]), np.log(b[history.labeler]))
    l1 = np.bincount(history.annotation_item, weights=la1, minlength=history.n_items) + np.log(p)
    l0 = np.bincount(history.annotation_item, weights=lb0, minlength=history.n_items) + np.log1p(-p)
    g = history.gold
    return np.where(g == 1, l1, np.where(g == 0, l0, np.logaddexp(l1, l0)))


def test_against_a_plain_computation(history: he.AnnotationSet) -> None:
    assert history.n_rounds == 1 and history.covariates is not None
    groups = {str(x): i % 37 for i, x in enumerate(history.item_ids)}
    cal = he.calibrate(history.with_groups(groups), checks=False)
    V = cal.parameter_covariance
    assert V is not None
    J = history.n_labelers
    theta = np.concatenate([cal.alpha, cal.beta, cal.round_prevalence])
    P, h = theta.size, 1e-6
    S = np.empty((history.n_items, P))  # per-item scores, central differences
    for k in range(P):
        e = np.zeros(P)
        e[k] = h
        S[:, k] = (_item_loglik(history, theta + e) - _item_loglik(history, theta - e)) / (2 * h)
    H = np.empty((P, P))  # observed information: differences of the total score
    h2 = 1e-5
    for k in range(P):
        e = np.zeros(P)
        e[k] = h2
        sp_, sm = np.empty(P), np.empty(P)
        for m in range(P):
            f = np.zeros(P)
            f[m] = h
            sp_[m] = ((_item_loglik(history, theta + e + f) - _item_loglik(history, theta + e - f)) / (2 * h)).sum()
            sm[m] = ((_item_loglik(history, theta - e + f) - _item_loglik(history, theta - e - f)) / (2 * h)).sum()
        H[:, k] = -(sp_ - sm) / (2 * h2)
    H = (H + H.T) / 2
    code = np.array([groups[str(x)] for x in history.item_ids])
    G = 37
    Sg = np.zeros((G, P))
    np.add.at(Sg, code, S)
    X = history.covariates
    Xc = X - X.mean(axis=0)
    Xg = np.zeros((G, X.shape[1]))
    np.add.at(Xg, code, Xc)
    c = few_groups_factor(G) * G / (G - 1)
    Hinv = np.linalg.inv(H)
    V_tt = c * Hinv @ (Sg.T @ Sg) @ Hinv
    N = history.n_items
    V_tm = c * Hinv @ (Sg.T @ Xg) / N
    V_mm = c * (Xg.T @ Xg) / N**2
    np.testing.assert_allclose(V[:P, :P], V_tt, rtol=2e-4, atol=1e-9)
    np.testing.assert_allclose(V[:P, P:], V_tm, rtol=2e-4, atol=1e-9)
    np.testing.assert_allclose(V[P:, P:], V_mm, rtol=1e-10, atol=1e-14)
    assert J == 10


def test_grouped_history_paths_and_errors(history: he.AnnotationSet, tmp_path: Path) -> None:
    grouped = history.with_groups({str(x): f"q{i % 20}" for i, x in enumerate(history.item_ids)})
    cal = he.calibrate(grouped, checks=False)
    assert cal.settings["history_item_groups"] == 20
    path = tmp_path / "cal.json"
    cal.save(path)
    back = he.load_calibration(path)
    assert back.settings["history_item_groups"] == 20
    np.testing.assert_allclose(back.parameter_covariance, cal.parameter_covariance, rtol=1e-12)
    # the compiled engine fits, the covariance comes from the same per-item scores
    numba = he.calibrate(grouped, checks=False, engine="numba")
    np.testing.assert_allclose(numba.parameter_covariance, cal.parameter_covariance, rtol=1e-5, atol=1e-12)
    with pytest.raises(HeroEvalError, match="variance='sandwich'"):
        he.calibrate(grouped, checks=False, variance="model")
    # one group: nothing to cluster; the independent-items covariance
    one = he.calibrate(history.with_groups(dict.fromkeys((str(x) for x in history.item_ids), "all")), checks=False)
    assert "history_item_groups" not in one.settings
    np.testing.assert_allclose(one.parameter_covariance, he.calibrate(history, checks=False).parameter_covariance)
    # the checks and the estimates run on a grouped history
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = he.calibrate(grouped)
    d = paper_dgp(3, rho=0.10, k=12, n=300)
    r = he.estimate(d.current, full, method="hero1")
    assert isinstance(r, he.EstimateResult) and np.isfinite(r.variance_history)


def test_cli_calibrate_and_estimate_group_the_history(history: he.AnnotationSet, tmp_path: Path) -> None:
    runner = CliRunner()
    d = paper_dgp(3, rho=0.10, k=12, n=300)

    def long(ds: he.AnnotationSet, prefix: str, k: int) -> pd.DataFrame:
        df = pd.DataFrame({"item_id": ds.item_ids[ds.annotation_item], "labeler_id": ds.labeler_ids[ds.labeler],
                           "label": ds.label})
        return df.assign(prompt=df["item_id"].map({x: f"{prefix}{i % k}" for i, x in enumerate(ds.item_ids)}))

    long(d.history, "p", 20).to_csv(tmp_path / "hist.csv", index=False)
    long(d.current, "c", 15).to_csv(tmp_path / "cur.csv", index=False)
    g = d.history.gold
    pd.DataFrame({"item_id": d.history.item_ids[g >= 0], "gold": g[g >= 0]}).to_csv(tmp_path / "gold.csv",
                                                                                  index=False)
    h, gold, cur = (str(tmp_path / f) for f in ("hist.csv", "gold.csv", "cur.csv"))
    r = runner.invoke(app, ["calibrate", h, "--gold", gold, "--group-col", "prompt", "-o",
                            str(tmp_path / "cal.json"), "--no-checks", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["calibration"]["settings"]["history_item_groups"] == 20
    # hero estimate --history --group-col groups both rounds; the same as the calibration file
    e1 = runner.invoke(app, ["estimate", cur, "--history", h, "--gold", gold, "--group-col", "prompt",
                             "--method", "hero1", "-f", "json"])
    e2 = runner.invoke(app, ["estimate", cur, "--calibration", str(tmp_path / "cal.json"), "--group-col",
                             "prompt", "--method", "hero1", "-f", "json"])
    assert e1.exit_code == 0 and e2.exit_code == 0, e1.output + e2.output
    r1, r2 = (json.loads(x.output)["estimates"]["hero1"] for x in (e1, e2))
    assert r1["variance_history"] == pytest.approx(r2["variance_history"], rel=1e-9)
    assert r1["item_groups"] == 15
    bad = runner.invoke(app, ["calibrate", h, "--gold", gold, "--group-col", "prompt", "--classes", "0,1", "-o",
                              str(tmp_path / "m.json")])
    assert bad.exit_code != 0 and "--group-col is not available" in bad.output


def test_gold_count_covariance_by_group(history: he.AnnotationSet, tmp_path: Path) -> None:
    """The gold-proportion rates' covariance with a grouped history: every gold item its own group gives the
    independent variances on the diagonal (times N/(N-1) and the factor); a plain loop over groups agrees; the
    gold-proportion standard error grows with groups that share errors, and a saved calibration keeps them."""
    plain = he.calibrate(history, checks=False)
    a, b = gold_proportion_rates(plain)
    diag = gold_count_variances(plain, a, b)
    assert diag.ndim == 1
    own = he.calibrate(history.with_groups({str(x): i for i, x in enumerate(history.item_ids)}), checks=False)
    V = gold_count_variances(own, a, b)
    n_gold = int((history.gold >= 0).sum())
    assert V.shape == (2 * history.n_labelers,) * 2
    np.testing.assert_allclose(np.diag(V), diag * n_gold / (n_gold - 1) * few_groups_factor(n_gold), rtol=1e-10)
    # a plain loop: each group's summed influence rows
    groups = {str(x): i % 15 for i, x in enumerate(history.item_ids)}
    cal = he.calibrate(history.with_groups(groups), checks=False)
    V15 = gold_count_variances(cal, a, b)
    J = history.n_labelers
    n_pos, n_neg = plain.gold_tp + plain.gold_fn, plain.gold_tn + plain.gold_fp
    sums: dict[int, np.ndarray] = {}
    for r in np.flatnonzero(history.gold >= 0):
        f = np.zeros(2 * J)
        for k in range(int(history.item_ptr[r]), int(history.item_ptr[r + 1])):
            j, y = int(history.labeler[k]), float(history.label[k])
            if history.gold[r] == 1:
                f[j] += (y - a[j]) / (n_pos[j] + 2)
            else:
                f[J + j] += (1 - y - b[j]) / (n_neg[j] + 2)
        g = groups[str(history.item_ids[r])]
        sums[g] = sums.get(g, np.zeros(2 * J)) + f
    F = np.array(list(sums.values()))
    G = len(set(groups.values()))
    np.testing.assert_allclose(V15, few_groups_factor(G) * G / (G - 1) * F.T @ F, rtol=1e-10, atol=1e-15)
    # the estimate's history variance uses it, and the file keeps the groups
    d = paper_dgp(3, rho=0.10, k=12, n=300)
    r0 = he.estimate(d.current, plain, method="gold_proportion")
    r1 = he.estimate(d.current, cal, method="gold_proportion")
    assert isinstance(r0, he.EstimateResult) and isinstance(r1, he.EstimateResult)
    assert r1.estimate == pytest.approx(r0.estimate)
    assert r1.influence is not None
    c = r1.influence.history
    assert r1.variance_history == pytest.approx(float(c @ V15 @ c), rel=1e-12)
    cal.save(tmp_path / "g.json")
    back = he.load_calibration(tmp_path / "g.json")
    r2 = he.estimate(d.current, back, method="gold_proportion")
    assert isinstance(r2, he.EstimateResult) and r2.variance_history == pytest.approx(r1.variance_history, rel=1e-12)
    lo, hi = r1.confidence_interval(0.95)
    assert lo <= r1.estimate <= hi
