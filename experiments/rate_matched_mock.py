"""Issue #5 follow-up diagnostic: do rate-matched mock rounds show the bias at the current round's rate?

    .venv/bin/python -m experiments.rate_matched_mock --resamples 10                # ~1 min on 2 cores
    .venv/bin/python -m experiments.rate_matched_mock --resamples 10 --shift none

Under ``shift="rate"`` (the current round drawn with 3x the odds of a
positive) the mock rounds of ``heroeval.checks`` measure each candidate's
error at the history gold's rate, and the likelihood methods' error at the
current rate differs (docs/research/robustness.md, "Rate shift"). Proposed remedy:
weight the held-out gold items by class to the current round's rate
(``mu_t / ybar`` for a positive, ``(1 - mu_t) / (1 - ybar)`` for a negative),
solve the weighted score equation on the pooled cross-fitted log-likelihood
ratios, and take its error against the weighted gold rate (``mu_t``). With the
labelers' error rates given the gold label unchanged, the weighted gold items
have the current round's label distribution.

Per data set (robustness.py's splits, ``shift="rate"`` or ``"none"``, resamples 0..R-1),
for HERO-1 at w = 1 and the gold-proportion calibration, this prints the mean
actual error on the current round next to the mean mock-round error
unweighted, weighted to ``rogan_gladen``'s estimate of the current rate
(what ``recommend`` could do) and weighted to the true current rate (the
weighting's best case), and the mean absolute gap between mock and actual
error for each. Not a heroeval method: a check of the idea before an issue.
"""

from __future__ import annotations

import argparse
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import brentq

import heroeval as he
from heroeval.checks.model_checks import MIN_GOLD_PER_FOLD, _folds, _mock_llr
from heroeval.core.parallel import run_chunks
from heroeval.estimators.score_equation import psi, solve_score
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.real_data import BINARY


def weighted_root(L: np.ndarray, w: np.ndarray) -> float:
    """Root in [0, 1] of sum_i w_i psi_i(mu; L_i) (decreasing in mu); 0 or 1 at the boundary."""
    def f(mu: float) -> float:
        return float(np.dot(w, psi(mu, L)))

    if not f(0.0) > 0:
        return 0.0
    if not f(1.0) < 0:
        return 1.0
    return float(brentq(f, 0.0, 1.0, xtol=1e-12))


def one_split(data: Any, r: int, shift: str) -> dict[str, Any] | None:
    sp = make_split(data, r, 0.10, 200, shift, 2026)
    hist, cur = sp.history, sp.current
    k = min(5, hist.n_gold // MIN_GOLD_PER_FOLD)
    if k < 2:
        return None
    cal = he.calibrate(hist, covariance=False)
    out: dict[str, Any] = {"dataset": data.name, "resample": r, "truth": sp.truth}
    for m in ("hero1", "gold_proportion", "rogan_gladen"):
        res = he.estimate(cur, cal, method=m, exclude_new_labelers=True)
        assert isinstance(res, he.EstimateResult)
        out[f"{m}_err"] = res.estimate - sp.truth
        out[f"{m}_est"] = res.estimate
    all_items = np.arange(hist.n_items)
    L: dict[str, list[np.ndarray]] = {"hero1": [], "gold_proportion": []}
    ys = []
    for test in _folds(hist, k, 0):
        h_k = hist.take_items(np.setdiff1d(all_items, test, assume_unique=True))
        m_k = hist.take_items(test)
        c_k = he.calibrate(h_k, covariance=False)
        L["hero1"].append(_mock_llr(m_k, c_k.alpha, c_k.beta))
        tp, fn, tn, fp = c_k.gold_tp, c_k.gold_fn, c_k.gold_tn, c_k.gold_fp
        L["gold_proportion"].append(_mock_llr(m_k, (tp + 1.0) / (tp + fn + 2.0), (tn + 1.0) / (tn + fp + 2.0)))
        ys.append(hist.gold[test].astype(float))
    y = np.concatenate(ys)
    ybar = float(y.mean())
    for m, parts in L.items():
        Lm = np.concatenate(parts)
        mu, _ = solve_score(Lm)
        out[f"{m}_mock"] = mu - ybar
        for tag, target in (("rg", out["rogan_gladen_est"]), ("oracle", sp.truth)):
            t = float(np.clip(target, 0.02, 0.98))
            w = np.where(y == 1, t / ybar, (1 - t) / (1 - ybar))
            out[f"{m}_mock_{tag}"] = weighted_root(Lm, w) - float(np.dot(w, y) / w.sum())
    return out


def _task(args: tuple[str, str, str, list[int], str]) -> list[dict[str, Any]]:
    folder, name, suffix, rs, shift = args
    warnings.simplefilter("ignore")
    data = load_folder(Path(folder) / name, binary_suffix=suffix)
    return [x for r in rs if (x := one_split(data, r, shift)) is not None]


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--resamples", type=int, default=10)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", default="benchmarks/results/research/robustness")
    ap.add_argument("--shift", default="rate", help="rate (default) or none: the random splits, where weighting should change little")
    a = ap.parse_args()
    jobs = [(a.data, n, sfx, list(range(i, min(i + 5, a.resamples))), a.shift) for n, sfx in BINARY
            for i in range(0, a.resamples, 5)]
    rows = pd.DataFrame(run_chunks(_task, jobs, [len(j[3]) for j in jobs], a.workers))
    out = []
    for ds, g in rows.groupby("dataset", sort=False):
        for m in ("hero1", "gold_proportion"):
            e = g[f"{m}_err"]
            row = {"dataset": ds, "method": m, "resamples": len(g), "actual_error": e.mean(),
                   "actual_rmse": math.sqrt((e**2).mean())}
            for tag, col in (("unweighted", f"{m}_mock"), ("weighted_rg", f"{m}_mock_rg"),
                             ("weighted_true_rate", f"{m}_mock_oracle")):
                row[f"mock_{tag}"] = g[col].mean()
                row[f"gap_{tag}"] = (g[col] - e).abs().mean()
            out.append(row)
    tab = pd.DataFrame(out)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    tab.to_csv(Path(a.out) / f"rate_matched_mock_{a.shift}.csv", index=False)
    pd.set_option("display.width", 220)
    print(tab.round(3).to_string(index=False))
    for m, g in tab.groupby("method", sort=False):
        print(f"{m}: mean |mock - actual| unweighted {g['gap_unweighted'].mean():.3f}, weighted to rogan_gladen's rate "
              f"{g['gap_weighted_rg'].mean():.3f}, weighted to the true rate {g['gap_weighted_true_rate'].mean():.3f}")


if __name__ == "__main__":
    main()
