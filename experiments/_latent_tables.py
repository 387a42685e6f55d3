"""Code shared by the latent-structure experiments of issue #5 (hard class, GLAD-style difficulty, pairwise copying): their SQUAREM loop and result tables.

Each experiment writes per-resample rows with its estimate in column
``name`` (and ``{name}_se``), HERO-1's in ``hero1``, the truth, ``converged``
and ``loglik_gain``, plus its own summary columns (``model_cols``); these
functions turn them into the per-cell and per-design tables, judged against
robustness.py's resamples exactly as ``hard_class_experiment.py`` does.
"""

from __future__ import annotations

import argparse
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import heroeval as he
from heroeval import simulate
from heroeval.checks.model_checks import MIN_GOLD_PER_FOLD, _folds
from heroeval.core.squarem import Stop
from heroeval.core.squarem import squarem as _squarem
from heroeval.estimators.score_equation import psi, solve_score

from benchmarks.real_data import BINARY
from benchmarks.robustness import COMPARED

__all__ = ["BINARY", "COMPARED", "SIM_DESIGNS", "common_args", "sim_rows"]

ModelCols = Callable[[pd.DataFrame], list[str]]


def rmse(e: pd.Series) -> float:
    return float(np.sqrt(np.mean(np.square(e))))


def _cover(g: pd.DataFrame, name: str) -> pd.Series:
    return (g[name] - 1.96 * g[f"{name}_se"] <= g["truth"]) & (g["truth"] <= g[name] + 1.96 * g[f"{name}_se"])


def mock_summary(g: pd.DataFrame, name: str) -> dict[str, Any]:
    """Mock-round columns: mean mock errors and a two-way choice (the model where its mock error is smaller)."""
    col = f"mock_err_{name}"
    if col not in g or g[col].isna().all():
        return {}
    pick = g[col].abs() < g["mock_err_hero1"].abs()
    chosen = np.where(pick, g[name], g["hero1"])
    return {col: float(g[col].mean()), "mock_err_hero1": float(g["mock_err_hero1"].mean()),
            f"mock_picks_{name}": int(pick.sum()), "mock_pick_rmse": rmse(pd.Series(chosen - g["truth"].to_numpy()))}


def real_table(rows: pd.DataFrame, ref: pd.DataFrame, name: str, model_cols: ModelCols,
               count: tuple[str, Callable[[pd.DataFrame], int]]) -> pd.DataFrame:
    """Per data set and shift: RMSEs on the same resamples.

    The seven methods' and ``auto``'s from robustness.py's ``resamples.csv.gz``
    (rho 0.10), restricted to the resamples in ``rows`` (that file may hold
    more; its summary.csv is over all of them, so "best" is recomputed here).
    ``count`` names one more column and how to compute it from a cell's rows.
    """
    out = []
    for (variant, ds, shift), g in rows.groupby(["variant", "dataset", "shift"], sort=False):
        rs = set(g["resample"])
        rf = ref[(ref["dataset"] == ds) & (ref["shift"] == shift) & ref["resample"].isin(rs)]
        rm = rf.assign(err=rf["estimate"] - rf["truth"]).groupby("method")["err"].apply(rmse)
        n_ref = rf.groupby("method")["resample"].nunique()
        assert (n_ref == len(rs)).all(), (ds, shift, n_ref)
        others = rm[[m for m in COMPARED if m in rm.index]]
        best = str(others.idxmin())
        mine = rmse(g[name] - g["truth"])
        hero1 = rmse(g["hero1"] - g["truth"])
        auto = float(rm.get("auto", math.nan))
        h1ref = rf[rf["method"] == "hero1"].set_index("resample")["estimate"]
        anchor = float(np.max(np.abs(g.set_index("resample")["hero1"] - h1ref.reindex(g["resample"]))))
        row = {
            "variant": variant, "dataset": ds, "shift": shift, "resamples": len(g), f"{name}_rmse": mine,
            f"{name}_bias": float((g[name] - g["truth"]).mean()), "hero1_rmse": hero1,
            "hero1_bias": float((g["hero1"] - g["truth"]).mean()), "best_method": best,
            "best_rmse": float(others[best]), "auto_rmse": auto, f"{name}_over_best": mine / float(others[best]),
            f"{name}_over_hero1": mine / hero1, f"{name}_over_auto": mine / auto,
            "hero1_over_best": hero1 / float(others[best]), "auto_over_best": auto / float(others[best]),
            "new_best": mine < float(others[best]),
        }
        row.update({f"median_{c}": float(g[c].median()) for c in model_cols(g)})
        row.update({
            "median_loglik_gain": float(g["loglik_gain"].median()),
            f"{name}_coverage": float(_cover(g, name).mean()),
            "hero1_anchor_maxdiff": anchor, "all_converged": bool(g["converged"].all()),
            count[0]: count[1](g),
            **mock_summary(g, name),
        })
        out.append(row)
    return pd.DataFrame(out)


def sim_table(rows: pd.DataFrame, name: str, model_cols: ModelCols) -> pd.DataFrame:
    out = []
    for (variant, design), g in rows.groupby(["variant", "design"], sort=False):
        ests: dict[str, pd.Series] = {name: g[name] - g["truth"]}
        cover = {name: _cover(g, name).mean()}
        for m in ("hero1", "hero_joint", "rogan_gladen", "auto"):
            ests[m] = g[f"{m}_est"] - g["truth"]
            cover[m] = ((g[f"{m}_lo"] <= g["truth"]) & (g["truth"] <= g[f"{m}_hi"])).mean()
        h1 = rmse(ests["hero1"])
        for m, e in ests.items():
            row = {"variant": variant, "design": design, "method": m, "reps": len(e), "bias": float(e.mean()),
                   "sd": float(e.std()), "rmse": rmse(e), "rmse_over_hero1": rmse(e) / h1,
                   "coverage": float(cover.get(m, math.nan))}
            row.update({f"median_{c}": float(g[c].median()) if m == name else math.nan for c in model_cols(g)})
            row["converged"] = int(g["converged"].sum()) if m == name else math.nan
            out.append(row)
    return pd.DataFrame(out)


def real_summary(tab: pd.DataFrame, name: str, label: str) -> str:
    lines = []
    for v, tv in tab.groupby("variant", sort=False):
        n = len(tv)
        lines.append(
            f"{v}: {label} better than HERO-1 in {int((tv[f'{name}_over_hero1'] < 1).sum())} of {n}; within 10 % of the best "
            f"in {int((tv[f'{name}_over_best'] <= 1.10).sum())} of {n}; new best in {int(tv['new_best'].sum())}; "
            f"worst ratio to best {tv[f'{name}_over_best'].max():.2f}. For reference: HERO-1 within 10 % in "
            f"{int((tv['hero1_over_best'] <= 1.10).sum())} (worst {tv['hero1_over_best'].max():.2f}), auto within 10 % in "
            f"{int((tv['auto_over_best'] <= 1.10).sum())} (worst {tv['auto_over_best'].max():.2f}), auto better than "
            f"HERO-1 in {int((tv['auto_rmse'] < tv['hero1_rmse']).sum())}")
        if "mock_pick_rmse" in tv and tv["mock_pick_rmse"].notna().any():
            r = tv["mock_pick_rmse"] / tv["hero1_rmse"]
            lines.append(
                f"{v}: choosing between HERO-1 and {label} by the smaller mock error: geometric-mean RMSE ratio to HERO-1 "
                f"{float(np.exp(np.log(r).mean())):.3f}, better in {int((r < 1).sum())}, worse in {int((r > 1).sum())}; "
                f"within 10 % of the best in {int((tv['mock_pick_rmse'] / tv['best_rmse'] <= 1.10).sum())} of {n}")
    return "\n".join(lines)


def squarem(em_map: Callable[[np.ndarray], tuple[np.ndarray, float, float]], th0: np.ndarray, tol: float,
            max_iter: int, project: Callable[[np.ndarray], np.ndarray] | None = None) -> tuple[np.ndarray, bool, int]:
    """SQUAREM (Varadhan and Roland's S3) around an EM map, with a monotone safeguard, as the three experiments fit.

    ``em_map(th)`` returns the next parameter vector, the objective (log
    posterior) at ``th`` and the largest probability moved by the step; the
    fit stops when a plain step moves none by more than ``tol``, or after
    ``max_iter`` map evaluations. An extrapolated point (``project``\\ ed, if
    given) is kept only if its objective is not below the best seen; otherwise
    the plain double step is taken and the step bound shrinks. Returns the
    parameters, whether it converged and the number of map evaluations.
    """
    moved = [np.inf]

    def step(th: np.ndarray, need_objective: bool) -> tuple[np.ndarray, float]:
        nxt, obj, moved[0] = em_map(th)
        return nxt, obj

    # heroeval's one SQUAREM; the distance of a step is what the map reported for it
    res = _squarem(step, th0, distance=lambda _new, _old: moved[0], stop=Stop(tol, max_iter), project=project,
                   reference="every")
    return res.x, res.converged, res.n_eval


@dataclass(frozen=True)
class RateEstimate:
    estimate: float
    se: float
    status: str
    n_items: int


def rate_from_llr(L: np.ndarray) -> RateEstimate:
    """HERO-1 analogue: the root of HERO's score equation with a model's per-item log-likelihood ratios ``L``.

    Standard error: ``1 / sqrt(sum_i psi_i(mu)^2)``, the current round's
    observed information for ``mu`` alone (the history's uncertainty ignored).
    """

    mu, status = solve_score(L)
    se = math.nan
    if status == "interior":
        info = float(np.sum(psi(mu, L) ** 2))
        se = 1.0 / math.sqrt(info) if info > 0 else math.nan
    return RateEstimate(mu, se, status, L.size)


def known_labelers(labeler_ids: tuple[str, ...], current: Any) -> tuple[Any, np.ndarray]:
    """The current round without labelers unknown to the fit, and each remaining labeler's index in the fit."""
    index = {lab: k for k, lab in enumerate(labeler_ids)}
    idx = np.array([index.get(str(x), -1) for x in current.labeler_ids], dtype=np.int64)
    data, _, _ = current.select_labelers(idx >= 0)
    return data, idx[idx >= 0]


def mock_errors(hist: Any, keys: tuple[str, ...], fold_llrs: Callable[[Any, Any, Any], dict[str, np.ndarray]],
                folds: int = 5) -> dict[str, float]:
    """Mock-round errors on the history's gold, as heroeval's checks do them for HERO-1.

    The gold items are split into folds (``heroeval.checks.model_checks._folds``, seed 0);
    each fold is left out of the history, Stage A (``calibrate``) is refitted
    on the rest and ``fold_llrs(h_k, m_k, cal)`` gives the fold's items their
    log-likelihood ratios under each model in ``keys``; the ratios of all
    folds are pooled into one score equation per model; the error is its root
    minus the gold items' rate.
    """

    k = min(folds, hist.n_gold // MIN_GOLD_PER_FOLD)
    if k < 2:
        return {m: math.nan for m in keys}
    fold_items = _folds(hist, k, 0)
    all_items = np.arange(hist.n_items)
    L: dict[str, list[np.ndarray]] = {m: [] for m in keys}
    for test in fold_items:
        h_k = hist.take_items(np.setdiff1d(all_items, test, assume_unique=True))
        m_k = hist.take_items(test)
        got = fold_llrs(h_k, m_k, he.calibrate(h_k, covariance=False))
        for m in keys:
            L[m].append(got[m])
    ybar = float(hist.gold[np.concatenate(fold_items)].mean())
    out = {}
    for m, parts in L.items():
        mu, status = solve_score(np.concatenate(parts))
        out[m] = mu - ybar if status != "unidentified" else math.nan
    return out


SIM_DESIGNS: dict[str, tuple[str, dict[str, Any]]] = {
    "dependent, dense": ("dependent_dgp", {}),
    "dependent, 5 of 10 labelers per item": ("dependent_dgp", {"labels_per_item": 5}),
    "paper (independent), dense": ("paper_dgp", {}),
    "paper (independent), 3 of 10 labelers per item": ("paper_dgp", {"labels_per_item": 3}),
}
"""The simulated designs of the three experiments (as robustness_sim.py)."""


def sim_rows(design: str, seeds: Iterable[int], fit_rows: Callable[[Any], Iterable[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One design's seeds: the experiment's rows (``fit_rows(simulated data)``) beside the product's references.

    The references are ``rogan_gladen``, HERO-1, HERO joint and ``auto`` with their
    estimates and intervals, from a calibration with the checks on, as
    robustness_sim.py computes them; each experiment row's ``hero1`` must equal the
    product's HERO-1 (its null reproduces Stage A).
    """
    fname, kw = SIM_DESIGNS[design]
    fn = getattr(simulate, fname)
    warnings.simplefilter("ignore")
    rows = []
    for s in seeds:
        d = fn(s, **kw)
        cal = he.calibrate(d.history, checks=True)  # as robustness_sim.py (the checks do not change the fit)
        res = he.estimate(d.current, cal, method=["rogan_gladen", "hero1", "hero_joint"], recommend=True)
        assert isinstance(res, he.EstimateCollection) and res.recommended is not None
        others: dict[str, Any] = {}
        for m, r in [*res.items(), ("auto", res.recommended.result)]:
            lo, hi = r.confidence_interval()
            others[f"{m}_est"], others[f"{m}_lo"], others[f"{m}_hi"] = r.estimate, lo, hi
        for x in fit_rows(d):
            assert abs(others["hero1_est"] - x["hero1"]) < 1e-9
            rows.append({"design": design, "rep": s, **x, **others})
    return rows


def common_args(ap: argparse.ArgumentParser, variants: Iterable[str]) -> None:
    """The options every latent-structure experiment takes."""
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--resamples", type=int, default=10)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", default=str(here / "benchmarks" / "results" / "research" / "robustness"))
    ap.add_argument("--ref", default=str(here / "benchmarks" / "results" / "research" / "robustness"),
                    help="folder of benchmarks/robustness.py's outputs (its resamples.csv.gz is not in git)")
    ap.add_argument("--only", default="", help="comma-separated data set names")
    ap.add_argument("--variants", default=",".join(variants), help="comma-separated: " + ", ".join(variants))
    ap.add_argument("--mock", action="store_true",
                    help="real data: also the mock-round errors on the history's gold (5 refits per model)")
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--skip-sim", action="store_true")
