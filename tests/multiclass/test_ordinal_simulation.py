"""Monte-Carlo: 5-point ordinal labels, HERO-1's mean score is unbiased and its interval covers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from heroeval.errors import ConvergenceWarning
from heroeval.multiclass import calibrate_multiclass, hero1_multiclass
from heroeval.multiclass.simulate import simulate_rounds

REPS = 200


@pytest.mark.slow
def test_ordinal_mean_score_bias_and_coverage() -> None:
    est, se, cover, truth_ = [], [], [], []
    for r in range(REPS):
        sim = simulate_rounds(np.random.default_rng([2026, r]), K=5, J=8, n_history=500, n_current=200)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            cal = calibrate_multiclass(sim.history, structure="ordinal")
        ms = hero1_multiclass(sim.current, cal).mean_score()
        truth = float(sim.current.values @ sim.prevalence_current)
        est.append(ms["estimate"])
        se.append(ms["standard_error"])
        truth_.append(truth)
        cover.append(ms["ci_low"] <= truth <= ms["ci_high"])
    err = np.asarray(est) - np.asarray(truth_)
    sd = err.std(ddof=1)
    # bias within 3 Monte-Carlo standard errors (plus 0.01 for the estimator's O(1/n) bias)
    assert abs(err.mean()) < 3 * sd / np.sqrt(REPS) + 0.01
    # the influence-function SE matches the spread of the estimates within 15 %
    assert abs(np.mean(se) / sd - 1) < 0.15
    # 95 % interval: binomial SD of the coverage at 200 reps is 0.015; allow 3 SD
    assert 0.905 <= np.mean(cover) <= 0.995
