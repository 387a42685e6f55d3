"""Issue #5: candidate rules for ``method="auto"``, compared on the same replications and resamples.

    .venv/bin/python -m experiments.auto_rules_experiment --reps 100 --resamples 10 --out benchmarks/results/research/robustness

For every simulation replication (the four designs of ``robustness_sim.py``,
seeds 0..reps-1) and every real-data resample (``robustness.py``'s splits),
Stage A with the model checks runs once and :func:`heroeval.choice.recommend`
fills its candidate table (estimate, standard error, mock-round error and its
standard error, paired difference from Rogan-Gladen, history variance); the
rules below are then applied to the same tables. Writes
``auto_rules_sim.csv`` (RMSE per design and rule, and its ratio to HERO-1's)
and ``auto_rules_real.csv`` (cells within 10 % of the best method, worst
ratio, coverage per rule; "best" as in ``robustness.py``, from
``summary.csv`` of that run, which must exist in ``--out``).

Rules (candidates: gold-proportion, Rogan-Gladen, HERO-1 at w = 1 and the
cross-validated w > 0, HERO joint; the estimated MSE is the one
``recommend`` computes):

* ``previous``: the rule before this change (HERO-1 unless flagged at 1 % /
  5 % when independence is rejected; then Rogan-Gladen if dependent, else
  the smallest standard error; HERO joint and the w = 0 exclusion not used).
* ``previous, joint default``: the same with HERO joint as the default.
* ``mse``: always the smallest estimated MSE.
* ``flag then mse (a_ind/a_dep)``: HERO joint unless flagged at a_ind (a_dep
  once independence is rejected); then the smallest estimated MSE.
* ``gate`` (the rule ``auto`` follows): the smallest estimated MSE when
  independence is rejected at 1 %; otherwise ``flag then mse`` at 1 %.
* ``gate, average by 1/MSE`` and ``1/MSE^2``: the gate, with its choice by
  estimated MSE replaced by model averaging: every scored candidate's
  estimate weighted by its estimated MSE to the power -1 or -2, with a
  conservative interval (weighted sum of the standard errors).
* ``gate, 1/MSE^2 average over a confidence set (z)``: the same average over
  only the candidates whose estimated MSE is within ``z`` standard errors of
  the smallest (:func:`gate_confidence_set`).

With no scorable candidate (too few gold items for the mock rounds), every
rule gives ``recommend``'s own fallback (HERO joint by default). The
candidate tables are saved in ``--out`` (``auto_rules_records_*.pkl.gz``);
``--from-records`` judges the rules on them again without refitting.

``--from-benchmark DIR`` judges the rules on the real-data resamples of a
``robustness.py`` run instead (its ``resamples.csv.gz`` keeps each
resample's candidate table with the ``auto`` row), on the resamples
``--resample-range A:B`` (default: all); "best" is then computed from the
same resamples. Simulations are not run in that mode; the table goes to
``auto_rules_real_resamples_A_B.csv`` in ``--out``, with one more row that
is not a rule: the best single candidate per cell, chosen knowing the cell's
RMSEs (what a perfect selection among the candidates would reach).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import pickle
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

import heroeval as he
from heroeval.choice.auto import recommend
from heroeval.core.parallel import run_chunks
from heroeval.simulate import dependent_dgp, paper_dgp
from heroeval.workflows.benchmark import load_folder, make_split, summarize_benchmark

from benchmarks.real_data import BINARY
from benchmarks.robustness import COMPARED

DESIGNS: dict[str, tuple[Any, dict[str, Any]]] = {
    "dependent, dense": (dependent_dgp, {}),
    "dependent, 5 of 10 labelers per item": (dependent_dgp, {"labels_per_item": 5}),
    "paper (independent), dense": (paper_dgp, {}),
    "paper (independent), 3 of 10 labelers per item": (paper_dgp, {"labels_per_item": 3}),
}
PREVIOUS = ("gold_proportion", "rogan_gladen", "hero1")
Key = tuple[str, "float | None"]


def _record(hist: he.AnnotationSet, cur: he.AnnotationSet, truth: float, meta: dict[str, Any]) -> dict[str, Any]:
    cal = he.calibrate(hist, checks=True)
    assert cal.checks is not None
    rec = recommend(cur, cal, exclude_new_labelers=True)
    h1 = he.estimate(cur, cal, method="hero1", exclude_new_labelers=True)
    assert isinstance(h1, he.EstimateResult)
    table = []
    for row in rec.table:
        if "estimate" not in row or not math.isfinite(row.get("predicted_rmse", math.nan)):
            continue
        r = dict(row)
        lo, hi = r["estimate"] - 1.96 * r["standard_error"], r["estimate"] + 1.96 * r["standard_error"]
        r["cover"] = bool(lo <= truth <= hi)
        table.append(r)
    ci = rec.result.confidence_interval()
    # with no scorable candidate, recommend's own fallback (HERO joint by default) is every rule's answer
    return {**meta, "truth": truth, "table": table, "dep_p": cal.checks.dependence.p_value, "hero1": h1.estimate,
            "hero1_cover": bool(h1.confidence_interval().low <= truth <= h1.confidence_interval().high),
            "fallback": rec.result.estimate, "fallback_cover": bool(ci.low <= truth <= ci.high)}


def _sim_task(args: tuple[str, list[int]]) -> list[dict[str, Any]]:
    design, seeds = args
    warnings.simplefilter("ignore")
    fn, kw = DESIGNS[design]
    out = []
    for s in seeds:
        d = fn(s, **kw)
        out.append(_record(d.history, d.current, d.current_rate, {"cell": design, "shift": "", "rep": s}))
    return out


def _real_task(args: tuple[str, str, str, str, list[int]]) -> list[dict[str, Any]]:
    folder, name, suffix, shift, rs = args
    warnings.simplefilter("ignore")
    data = load_folder(Path(folder) / name, binary_suffix=suffix)
    out = []
    for r in rs:
        sp = make_split(data, r, 0.10, 200, shift, 2026)
        out.append(_record(sp.history, sp.current, sp.truth, {"cell": data.name, "shift": shift, "rep": r}))
    return out


def _key(r: dict[str, Any]) -> Key:
    return (r["method"], r["history_weight"])


def _flagged(rec: dict[str, Any], r: dict[str, Any], level: float) -> bool:
    crit = float(norm.ppf(1 - level / 2))
    f = abs(r["mock_bias"]) > crit * r["mock_bias_se"]
    vs, vs_se = r["mock_vs_robust"], r["mock_vs_robust_se"]  # recommend already added the history parts
    return bool(f or (math.isfinite(vs) and math.isfinite(vs_se) and abs(vs) > crit * vs_se))


def _dependent(rec: dict[str, Any]) -> bool:
    return bool(math.isfinite(rec["dep_p"]) and rec["dep_p"] < 0.01)


def _mse_pick(rows: list[dict[str, Any]]) -> dict[str, Any]:
    # ties (HERO joint is judged by HERO-1's mock round) go to the default, as in recommend
    return min(rows, key=lambda r: (r["predicted_rmse"], _key(r) != ("hero_joint", 1.0)))


def previous(rec: dict[str, Any], joint: bool = False) -> dict[str, Any] | None:
    rows = [r for r in rec["table"] if r["method"] in PREVIOUS or (joint and r["method"] == "hero_joint")]
    if not rows:
        return None
    first: Key = ("hero_joint", 1.0) if joint else ("hero1", 1.0)
    level = 0.05 if _dependent(rec) else 0.01
    ok = [r for r in rows if not _flagged(rec, r, level)]
    d = next((r for r in ok if _key(r) == first), None)
    if d is not None:
        return d
    rob = next((r for r in ok if r["method"] == "rogan_gladen"), None)
    if _dependent(rec) and rob is not None:
        return rob
    return min(ok, key=lambda r: r["standard_error"]) if ok else _mse_pick(rows)


def flag_then_mse(rec: dict[str, Any], a_ind: float, a_dep: float) -> dict[str, Any] | None:
    rows = rec["table"]
    if not rows:
        return None
    d = next((r for r in rows if _key(r) == ("hero_joint", 1.0)), None)
    if d is not None and not _flagged(rec, d, a_dep if _dependent(rec) else a_ind):
        return d
    return _mse_pick(rows)


def gate(rec: dict[str, Any]) -> dict[str, Any] | None:
    if rec["table"] and _dependent(rec):
        return _mse_pick(rec["table"])
    return flag_then_mse(rec, 0.01, 0.01)


def _average(rows: list[dict[str, Any]], power: float) -> dict[str, Any]:
    """Model averaging: the candidates' estimates weighted by (estimated MSE)^-power.

    The standard error is the weighted sum of the candidates' standard errors,
    an upper bound on the average's (the SD of a sum is at most the sum of
    SDs), so its interval is conservative whatever the correlations.
    """
    m = np.array([r["predicted_rmse"] ** 2 for r in rows])
    w = np.maximum(m, 1e-12) ** -power
    w /= w.sum()
    est = float(np.dot(w, [r["estimate"] for r in rows]))
    se = float(np.dot(w, [r["standard_error"] for r in rows]))
    return {"method": "average", "history_weight": None, "estimate": est, "standard_error": se, "weights": w}


def _gate_default(rec: dict[str, Any]) -> dict[str, Any] | None:
    """The gate's first branch: HERO joint when independence is not rejected and it is not flagged (else None)."""
    if _dependent(rec):
        return None
    d = next((r for r in rec["table"] if _key(r) == ("hero_joint", 1.0)), None)
    return d if d is not None and not _flagged(rec, d, 0.01) else None


def gate_average(rec: dict[str, Any], power: float) -> dict[str, Any] | None:
    """The gate, with the MSE choice replaced by an MSE-weighted average of all the candidates."""
    return gate_confidence_set(rec, math.inf, power)


def gate_confidence_set(rec: dict[str, Any], z: float, power: float = 2.0) -> dict[str, Any] | None:
    """The gate, with its MSE choice replaced by a 1/MSE^power average over the candidates not clearly worse.

    A confidence set in the spirit of Hansen, Lunde and Nason's model
    confidence set: candidate c stays when its estimated MSE exceeds the
    smallest one, m's, by less than ``z`` standard errors of the difference,
    ``sqrt(4 b_c^2 s_c^2 + 4 b_m^2 s_m^2)`` (the delta method on the two
    squared mock biases; their covariance ignored, which widens the set).
    One candidate left: it is chosen, as the gate would. ``z = inf`` keeps
    every candidate (:func:`gate_average`).
    """
    rows = rec["table"]
    if not rows:
        return None
    kept = _gate_default(rec)
    if kept is not None:
        return kept
    m = _mse_pick(rows)
    keep = [m]
    for r in rows:
        if r is m:
            continue
        se = 2 * math.hypot(r["mock_bias"] * r["mock_bias_se"], m["mock_bias"] * m["mock_bias_se"])
        if z == math.inf or (se > 0 and (r["predicted_rmse"] ** 2 - m["predicted_rmse"] ** 2) / se < z):
            keep.append(r)
    if len(keep) == 1 and z < math.inf:
        return m
    r = _average(keep, power)
    r["cover"] = bool(abs(r["estimate"] - rec["truth"]) <= 1.96 * r["standard_error"])
    return r


RULES: dict[str, Callable[[dict[str, Any]], dict[str, Any] | None]] = {
    "previous": previous,
    "previous, joint default": lambda rec: previous(rec, joint=True),
    "mse": lambda rec: _mse_pick(rec["table"]) if rec["table"] else None,
    "flag then mse (1 %/5 %)": lambda rec: flag_then_mse(rec, 0.01, 0.05),
    "flag then mse (1 %/20 %)": lambda rec: flag_then_mse(rec, 0.01, 0.20),
    "flag then mse (5 %/5 %)": lambda rec: flag_then_mse(rec, 0.05, 0.05),
    "gate (auto)": gate,
    "gate, average by 1/MSE": lambda rec: gate_average(rec, 1.0),
    "gate, average by 1/MSE^2": lambda rec: gate_average(rec, 2.0),
    "gate, 1/MSE^2 average over a confidence set (z = 0.5)": lambda rec: gate_confidence_set(rec, 0.5),
    "gate, 1/MSE^2 average over a confidence set (z = 1)": lambda rec: gate_confidence_set(rec, 1.0),
    "gate, 1/MSE^2 average over a confidence set (z = 1.645)": lambda rec: gate_confidence_set(rec, 1.645),
}


def _apply(recs: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for rec in recs:
        for name, rule in RULES.items():
            r = rule(rec)
            if r is None:  # records saved before "fallback" was kept fell back to HERO-1
                est, cover = rec.get("fallback", rec["hero1"]), rec.get("fallback_cover", rec["hero1_cover"])
            else:
                est, cover = r["estimate"], r["cover"]
            rows.append({"cell": rec["cell"], "shift": rec["shift"], "rep": rec["rep"], "rule": name,
                         "err": est - rec["truth"], "cover": cover})
        rows.append({"cell": rec["cell"], "shift": rec["shift"], "rep": rec["rep"], "rule": "hero1",
                     "err": rec["hero1"] - rec["truth"], "cover": rec["hero1_cover"]})
    return pd.DataFrame(rows)


def _records(path: Path, saved: bool, compute: Callable[[], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The candidate tables: those saved at ``path`` (``saved``), or computed and saved there for ``--from-records``."""
    if saved:
        with gzip.open(path, "rb") as f:
            out: list[dict[str, Any]] = pickle.load(f)
        return out
    recs = compute()
    with gzip.open(path, "wb") as f:
        pickle.dump(recs, f)
    return recs


def records_from_benchmark(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Candidate tables as :func:`_record` makes them, from robustness.py's resamples (the auto row's ``candidates``)."""
    out = []
    for (ds, sh, r), g in df.groupby(["dataset", "shift", "resample"], sort=False):
        g = g.set_index("method")
        truth = float(g["truth"].iloc[0])
        auto, h1 = g.loc["auto"], g.loc["hero1"]
        raw = auto["candidates"] if isinstance(auto["candidates"], str) else "[]"
        table = []
        for c in json.loads(raw):
            c = {k: (math.nan if v is None and k != "history_weight" else v) for k, v in c.items()}
            if "estimate" not in c or not math.isfinite(c.get("predicted_rmse", math.nan)):
                continue
            lo, hi = c["estimate"] - 1.96 * c["standard_error"], c["estimate"] + 1.96 * c["standard_error"]
            c["cover"] = bool(lo <= truth <= hi)
            table.append(c)
        out.append({"cell": ds, "shift": sh, "rep": int(r), "truth": truth, "table": table,
                    "dep_p": float(auto["dependence_p"]), "hero1": float(h1["estimate"]),
                    "hero1_cover": bool(h1["ci_low"] <= truth <= h1["ci_high"]),
                    "fallback": float(auto["estimate"]), "fallback_cover": bool(auto["ci_low"] <= truth <= auto["ci_high"])})
    return out


def oracle_candidate(recs: list[dict[str, Any]], best: pd.Series) -> pd.DataFrame:
    """Not a rule: per cell, the one candidate with the smallest RMSE over the cell's resamples.

    What a selection could reach if it knew, for each data set and shift, which
    candidate is best there. HERO-1 at w = 1 and at the cross-validated
    weight are two candidates (the latter is HERO-1 at w = 1 when the log
    score chose it); a candidate missing from some resamples of a cell is not
    considered there.
    """
    rows = []
    for rec in recs:
        t: dict[str, float] = {}
        for r in rec["table"]:
            m, w = r["method"], r["history_weight"]
            t[m if m != "hero1" else "hero1@1" if w == 1.0 else "hero1@cv"] = r["estimate"]
        if "hero1@cv" not in t and "hero1@1" in t:
            t["hero1@cv"] = t["hero1@1"]
        rows += [{"cell": rec["cell"], "shift": rec["shift"], "k": k, "e2": (v - rec["truth"]) ** 2}
                 for k, v in t.items()]
    d = pd.DataFrame(rows)
    n_res = pd.DataFrame([{"cell": r["cell"], "shift": r["shift"]} for r in recs]).value_counts()
    g = d.groupby(["cell", "shift", "k"])["e2"].agg(["mean", "size"]).reset_index()
    g = g[g["size"].to_numpy() == n_res.loc[list(zip(g["cell"], g["shift"], strict=True))].to_numpy()]
    g["rmse"] = np.sqrt(g["mean"])
    o = g.loc[g.groupby(["cell", "shift"])["rmse"].idxmin(), ["cell", "shift", "k", "rmse"]]
    o["ratio"] = o["rmse"].to_numpy() / [best.loc[(c, sh)] for c, sh in zip(o["cell"], o["shift"], strict=True)]
    return o.rename(columns={"k": "candidate"}).reset_index(drop=True)


def _judge_real(recs: list[dict[str, Any]], best: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    real = _apply(recs)
    rs = real.groupby(["cell", "shift", "rule"], sort=False).agg(rmse=("err", _rmse), coverage=("cover", "mean"))
    rs = rs.reset_index()
    rs["ratio"] = rs["rmse"] / [best.loc[(c, s)] for c, s in zip(rs["cell"], rs["shift"], strict=True)]
    tab = rs.groupby("rule", sort=False).agg(cells_within_10pct=("ratio", lambda r: int((r <= 1.10).sum())),
                                             cells=("ratio", "size"), worst_ratio=("ratio", "max"),
                                             coverage=("coverage", "mean")).reset_index()
    return rs, tab


def _rmse(e: pd.Series) -> float:
    return float(np.sqrt(np.mean(np.square(e))))


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--resamples", type=int, default=10)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--out", default="benchmarks/results/research/robustness")
    ap.add_argument("--only", default="", help="comma-separated data set names (a smoke run)")
    ap.add_argument("--from-records", action="store_true",
                    help="judge the rules on the candidate tables a previous run saved in --out (no refitting)")
    ap.add_argument("--from-benchmark", default="",
                    help="a robustness.py output folder: judge the rules on its real-data resamples only")
    ap.add_argument("--resample-range", default="", help="A:B, the resamples A..B-1 of --from-benchmark")
    a = ap.parse_args()
    out = Path(a.out)
    pd.set_option("display.width", 200)
    if a.from_benchmark:

        df = pd.read_csv(Path(a.from_benchmark) / "resamples.csv.gz")
        lo, hi = 0, int(df["resample"].max()) + 1
        if a.resample_range:
            lo, hi = (int(x) for x in a.resample_range.split(":"))
            df = df[(df["resample"] >= lo) & (df["resample"] < hi)]
        summ = summarize_benchmark(df)
        best = summ[summ["method"].isin(COMPARED)].groupby(["dataset", "shift"])["rmse"].min()
        recs = records_from_benchmark(df)
        rs, tab = _judge_real(recs, best)
        orc = oracle_candidate(recs, best)
        print(rs[rs["rule"] == "gate (auto)"].round(3).to_string(index=False))
        print(orc.round(3).to_string(index=False))
        tab = pd.concat([tab, pd.DataFrame([{
            "rule": "oracle: best candidate per cell (not a rule)",
            "cells_within_10pct": int((orc["ratio"] <= 1.10).sum()), "cells": len(orc),
            "worst_ratio": float(orc["ratio"].max()), "coverage": math.nan}])], ignore_index=True)
        print(tab.round(3).to_string(index=False))
        out.mkdir(parents=True, exist_ok=True)
        tab.to_csv(out / f"auto_rules_real_resamples_{lo}_{hi}.csv", index=False)
        return
    jobs_s = [(d, list(range(i, min(i + 10, a.reps)))) for d in DESIGNS for i in range(0, a.reps, 10)]
    recs_s = _records(out / "auto_rules_records_sim.pkl.gz", a.from_records,
                      lambda: run_chunks(_sim_task, jobs_s, [len(j[1]) for j in jobs_s], a.workers))
    sim = _apply(recs_s)
    ss = sim.groupby(["cell", "rule"], sort=False).agg(rmse=("err", _rmse), bias=("err", "mean"),
                                                       coverage=("cover", "mean")).reset_index()
    h1 = ss[ss["rule"] == "hero1"].set_index("cell")["rmse"]
    ss["ratio_to_hero1"] = ss["rmse"] / ss["cell"].map(h1)
    ss.to_csv(out / "auto_rules_sim.csv", index=False)
    print(ss.round(4).to_string(index=False))
    jobs_r = [(a.data, n, sfx, sh, list(range(i, min(i + 5, a.resamples))))
              for n, sfx in BINARY if not a.only or n in a.only.split(",")
              for sh in ("none", "half") for i in range(0, a.resamples, 5)]
    recs_r = _records(out / "auto_rules_records_real.pkl.gz", a.from_records,
                      lambda: run_chunks(_real_task, jobs_r, [len(j[4]) for j in jobs_r], a.workers))
    summ = pd.read_csv(out / "summary.csv")
    best = summ[summ["method"].isin(COMPARED)].groupby(["dataset", "shift"])["rmse"].min()
    _, tab = _judge_real(recs_r, best)
    tab.to_csv(out / "auto_rules_real.csv", index=False)
    print(tab.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
