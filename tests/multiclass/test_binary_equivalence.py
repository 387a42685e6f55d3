"""K = 2 in the multi-class code reproduces the binary estimators and their intervals to 1e-10."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import heroeval as he
from heroeval.multiclass import (
    calibrate_multiclass,
    dawid_skene_multiclass,
    gold_proportion_multiclass,
    hero1_multiclass,
    hero2_multiclass,
    hero_joint_multiclass,
    load_multiclass_calibration,
    majority_vote_multiclass,
)
from heroeval.workflows.demo import example_paths

TOL = 1e-10
EM = {"tol": 1e-13, "max_iter": 100_000}


def _simulated() -> tuple[he.AnnotationSet, he.AnnotationSet]:
    rng = np.random.default_rng(11)
    J, N, n = 8, 600, 150
    a = rng.uniform(0.6, 0.95, J)
    b = rng.uniform(0.55, 0.9, J)

    def draw(m: int, mu: float, prefix: str, rnd: bool) -> tuple[list[str], list[str], list[int], np.ndarray, list[str]]:
        y = (rng.random(m) < mu).astype(int)
        it, lab, z = [], [], []
        for i in range(m):
            for j in rng.choice(J, 3, replace=False):
                it.append(f"{prefix}{i}")
                lab.append(f"w{j}")
                p1 = a[j] if y[i] else 1 - b[j]
                z.append(int(rng.random() < p1))
        rounds = [f"r{i % 2}" for i in range(m)] if rnd else []
        return it, lab, z, y, rounds

    it, lab, z, y, rounds = draw(N, 0.35, "h", True)
    gi = np.flatnonzero(rng.random(N) < 0.1)
    hist = he.AnnotationSet.from_arrays(it, lab, z, gold=([f"h{i}" for i in gi], y[gi]),
                                        item_round=([f"h{i}" for i in range(N)], rounds))
    it, lab, z, _, _ = draw(n, 0.5, "c", False)
    return hist, he.AnnotationSet.from_arrays(it, lab, z)


def _triviaqa() -> tuple[he.AnnotationSet, he.AnnotationSet]:
    p = example_paths()
    return (he.read_annotations(p["history"], gold=p["gold"], covariates=p["history_covariates"], name="history"),
            he.read_annotations(p["current"], covariates=p["current_covariates"], name="current"))


def _same(b: he.EstimateResult, r: he.EstimateResult) -> None:
    assert r.status == b.status
    assert abs(r.estimate - b.estimate) < TOL
    assert abs(r.standard_error - b.standard_error) < TOL
    for how in ("logit", "wald"):
        cb, cr = b.confidence_interval(0.95, how), r.confidence_interval(0.95, how)
        assert abs(cb.low - cr.low) < TOL and abs(cb.high - cr.high) < TOL


@pytest.mark.parametrize("data", [_triviaqa, _simulated], ids=["triviaqa", "simulated"])
def test_k2_reproduces_binary(data, tmp_path: Path) -> None:
    hist, cur = data()
    cal = he.calibrate(hist, **EM)
    mc = calibrate_multiclass(hist, **EM)
    # Stage A parameters: confusion[:, 1, 1] = sensitivity, confusion[:, 0, 0] = specificity
    np.testing.assert_allclose(mc.confusion[:, 1, 1], cal.alpha, atol=TOL, rtol=0)
    np.testing.assert_allclose(mc.confusion[:, 0, 0], cal.beta, atol=TOL, rtol=0)
    np.testing.assert_allclose(mc.round_prevalence[:, 1], cal.round_prevalence, atol=TOL, rtol=0)
    assert abs(mc.convergence.loglik - cal.convergence.loglik) < 1e-7
    _same(he.hero1(cur, cal), hero1_multiclass(cur, mc).component(1))
    _same(he.gold_proportion(cur, cal), gold_proportion_multiclass(cur, mc).component(1))
    _same(he.majority_vote(cur), majority_vote_multiclass(cur).component(1))
    _same(he.dawid_skene(cur, **EM), dawid_skene_multiclass(cur, **EM).component(1))
    _same(he.hero_joint(cur, cal), hero_joint_multiclass(cur, mc).component(1))
    # class 0 is the complement, with the same standard error
    h = hero1_multiclass(cur, mc)
    assert abs(h.estimate.sum() - 1) < 1e-12
    assert abs(h.standard_errors()[0] - h.standard_errors()[1]) < TOL
    # through saved files: the binary parameter covariance against the multi-class one
    if cur.covariates is not None:  # HERO-2 per component (the triviaqa example has covariates)
        for ridge in (0.0, 1.0):
            _same(he.hero2(cur, cal, ridge=ridge), hero2_multiclass(cur, mc, ridge=ridge).component(1))
    cal.save(tmp_path / "b.json")
    mc.save(tmp_path / "m.json")
    _same(he.hero1(cur, he.load_calibration(tmp_path / "b.json")),
          hero1_multiclass(cur, load_multiclass_calibration(tmp_path / "m.json")).component(1))
