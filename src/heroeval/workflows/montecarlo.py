"""Monte-Carlo runner for the paper's simulation study and sweeps beyond it.

``experiment_configs(name)`` lists the settings of an experiment;
``run(configs, reps)`` runs every method on ``reps`` replications of each
(seeded, on several processes); ``summarize`` reduces the replications to
|bias|, SD, RMSE, coverage and mean interval width per setting and method.

Replication ``r`` of every setting uses the random stream ``(seed, r)``:
common random numbers across settings, so curves against rho or k are
smooth and differences between settings are not sampling noise.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from heroeval.core.parallel import run_chunks
from heroeval.errors import ConvergenceWarning, HeroEvalError
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.methods import majority_vote
from heroeval.estimators.table import METHODS
from heroeval.simulate import paper_dgp
from heroeval.workflows.api import calibrate, estimate

__all__ = ["EXPERIMENTS", "PAPER_TABLE", "SimConfig", "experiment_configs", "run", "summarize"]

EXPERIMENTS = ("gold-rate", "heterogeneity", "labels", "custom")

K_LEVELS = (3.0, 6.0, 12.0, 40.0, 150.0)
"""Five heterogeneity levels from extreme (3) to near-homogeneous (150); the paper names only the ends and 12."""

PAPER_TABLE: dict[float, dict[str, tuple[float, float, float] | None]] = {
    3.0: {"majority_vote": (0.158, 0.025, 0.160), "dawid_skene": (0.098, 0.038, 0.105),
          "gold_proportion": (0.042, 0.045, 0.062), "hero1": (0.021, 0.034, 0.040), "hero2": (0.020, 0.029, 0.035)},
    12.0: {"majority_vote": (0.142, 0.022, 0.144), "dawid_skene": (0.089, 0.035, 0.096),
           "gold_proportion": None, "hero1": (0.018, 0.033, 0.038), "hero2": (0.017, 0.028, 0.033)},
    150.0: {"majority_vote": (0.135, 0.020, 0.136), "dawid_skene": None, "gold_proportion": None,
            "hero1": None, "hero2": (0.015, 0.027, 0.031)},
}
"""The paper's |bias| / SD / RMSE as HERO-MATH.md lists them (None: not given there)."""

EXTRA_METHODS = ("majority_vote_ties0",)
"""Majority vote with ties counted as 0, computed beside the default (ties 1/2)."""


@dataclass(frozen=True)
class SimConfig:
    """One simulation setting (see :func:`heroeval.simulate.paper_dgp`)."""

    experiment: str = "custom"
    rho: float = 0.10
    k: float = 12.0
    labels_per_item: int | None = None  # None: every labeler labels every item
    n: int = 300
    N: int = 800
    J: int = 10
    b0: float = -0.2
    b1: float = 3.0
    pool_shift: float = 1.0  # weight of the first half of the labelers in the current round (1 = no shift)

    @property
    def label(self) -> str:
        lpi = "dense" if self.labels_per_item is None else f"{self.labels_per_item}/item"
        return f"rho={self.rho:g} k={self.k:g} {lpi}" + (f" shift={self.pool_shift:g}" if self.pool_shift != 1 else "")


def experiment_configs(
    name: str,
    *,
    rhos: Sequence[float] | None = None,
    ks: Sequence[float] | None = None,
    labels: Sequence[int | None] | None = None,
    base: SimConfig | None = None,
) -> list[SimConfig]:
    """Settings of a named experiment.

    * ``gold-rate`` (the paper's Experiment 1, setting ii): rho = 0.05, 0.06, ..., 0.10 at k = 12.
    * ``heterogeneity`` (Experiment 2): k in 3, 6, 12, 40, 150 at rho = 0.05 and 0.10.
    * ``labels`` (not in the paper): 2, 3, 5 and 10 labels per item at k = 12, rho = 0.05 and 0.10.
    * ``custom``: the product of ``rhos``, ``ks`` and ``labels`` on ``base``.

    Defaults are dense labels (every labeler labels every item) as in the
    paper, whose HERO SDs our dense runs reproduce.
    """
    b = base or SimConfig()
    if name == "gold-rate":
        grid = [(r, 12.0, b.labels_per_item) for r in (rhos or (0.05, 0.06, 0.07, 0.08, 0.09, 0.10))]
    elif name == "heterogeneity":
        grid = [(r, k, b.labels_per_item) for r in (rhos or (0.05, 0.10)) for k in (ks or K_LEVELS)]
    elif name == "labels":
        grid = [(r, 12.0, m) for r in (rhos or (0.05, 0.10)) for m in (labels or (2, 3, 5, 10))]
    elif name == "custom":
        grid = [(r, k, m) for r in (rhos or (b.rho,)) for k in (ks or (b.k,)) for m in (labels or (b.labels_per_item,))]
    else:
        raise HeroEvalError(f"unknown experiment {name!r}; choose from {list(EXPERIMENTS)}")
    for r, k, m in grid:
        if not 0 < r <= 1:
            raise HeroEvalError(f"rho must be in (0, 1], got {r!r}")
        if not k > 0:
            raise HeroEvalError(f"k must be positive, got {k!r}")
        if m is not None and not 1 <= m <= b.J:
            raise HeroEvalError(f"labels per item must be in [1, J={b.J}], got {m!r}")
    return [replace(b, experiment=name, rho=r, k=k, labels_per_item=m) for r, k, m in grid]


def _one(cfg: SimConfig, seed: int, rep: int) -> list[dict[str, Any]]:
    warnings.simplefilter("ignore", ConvergenceWarning)
    rng = np.random.default_rng([seed, rep])
    weights = None
    if cfg.pool_shift != 1.0:
        weights = np.r_[np.full(cfg.J // 2, cfg.pool_shift), np.ones(cfg.J - cfg.J // 2)]
    d = paper_dgp(rng, n=cfg.n, N=cfg.N, J=cfg.J, rho=cfg.rho, k=cfg.k, b0=cfg.b0, b1=cfg.b1,
                  labels_per_item=cfg.labels_per_item, current_labeler_weights=weights)
    cal = calibrate(d.history)
    res = estimate(d.current, cal, method="all")
    assert isinstance(res, EstimateCollection)
    rows = []
    base = {**asdict(cfg), "rep": rep, "mu0": d.mu0, "current_rate": d.current_rate}
    results = dict(res.items())
    results["majority_vote_ties0"] = majority_vote(d.current, tie="negative")
    for m, r in results.items():
        ci = r.confidence_interval(0.95)
        rows.append({**base, "method": m, "estimate": r.estimate, "se": r.standard_error,
                     "ci_low": ci.low, "ci_high": ci.high, "converged": r.convergence.converged if r.convergence else True})
    return rows


def _chunk(args: tuple[SimConfig, int, Sequence[int]]) -> list[dict[str, Any]]:
    cfg, seed, reps = args
    out: list[dict[str, Any]] = []
    for r in reps:
        out.extend(_one(cfg, seed, r))
    return out


def run(
    configs: Sequence[SimConfig],
    reps: int = 200,
    *,
    seed: int = 2026,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Run every method on ``reps`` replications of each setting; one row per replication and method.

    ``workers`` processes (default: the number of cores). ``progress(done, total)``
    is called as replications finish.
    """
    if not (isinstance(reps, int) and reps >= 2):
        raise HeroEvalError(f"reps must be an integer >= 2, got {reps!r}")
    per = max(1, min(25, reps // (2 * (workers or os.cpu_count() or 1)) or 1))
    jobs = [(cfg, seed, list(range(s, min(s + per, reps)))) for cfg in configs for s in range(0, reps, per)]
    rows = run_chunks(_chunk, jobs, [len(j[2]) for j in jobs], workers, progress)
    df = pd.DataFrame(rows)
    return df.sort_values(["experiment", "rho", "k", "labels_per_item", "pool_shift", "rep", "method"],
                          kind="stable", na_position="first").reset_index(drop=True)


def summarize(df: pd.DataFrame, target: str = "mu0") -> pd.DataFrame:
    """|bias|, SD, RMSE, coverage and mean 95 % interval width per setting and method.

    ``target="mu0"`` (the population rate, the paper's target) or
    ``"current_rate"`` (the realised gold rate of the current items).
    """
    keys = ["experiment", "rho", "k", "labels_per_item", "pool_shift", "method"]
    d = df.copy()
    d["labels_per_item"] = d["labels_per_item"].astype("Int64")
    d["err"] = d["estimate"] - d[target]
    d["cover"] = (d["ci_low"] <= d[target]) & (d[target] <= d["ci_high"])
    d["width"] = d["ci_high"] - d["ci_low"]
    g = d.groupby(keys, sort=False, dropna=False)
    out = g.agg(reps=("err", "size"), bias=("err", "mean"), sd=("estimate", "std"),
                rmse=("err", lambda e: float(np.sqrt(np.mean(np.square(e))))),
                coverage=("cover", "mean"), ci_width=("width", "mean"),
                converged=("converged", "mean")).reset_index()
    out["abs_bias"] = out["bias"].abs()
    out.loc[out["method"].isin(("majority_vote", "majority_vote_ties0")), ["coverage", "ci_width"]] = math.nan
    order = {m: i for i, m in enumerate((*METHODS, *EXTRA_METHODS))}
    out["_o"] = out["method"].map(order)
    return out.sort_values([*keys[:-1], "_o"], kind="stable").drop(columns="_o").reset_index(drop=True)
