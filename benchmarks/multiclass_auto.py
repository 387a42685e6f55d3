"""The recommended K-class estimate against every fixed method, on random and rate-shifted splits (issue #42).

    PYTHONPATH=. .venv/bin/python -m benchmarks.multiclass_auto --resamples 30 --out benchmarks/results/multiclass/auto

Protocol (as benchmarks/multiclass.py): per resample the current round is n items drawn among the gold items (at
most 40 % of them); every other labelled item is history; gold is revealed on a random share rho of the history's
items. ``shift=none``: the round is a uniform draw. ``shift=rate``: one class (drawn per resample) is RATE_BOOST
times as likely to be drawn as the others, so the round's class shares move away from the history's.
``shift=half`` (pool shift, as the binary benchmark's): a uniform draw whose labels are those of a random half of
the round's labelers only (items left without labels drop out of the round and its truth). The fixed
methods are majority vote, Dawid–Skene on the round alone, the gold-share calibration, and HERO-1 and HERO joint
under each confusion structure the classes allow; ``auto`` is
:func:`heroeval.choice.multiclass_auto.recommend_multiclass` with its bias-aware intervals. Scored against the round's
gold class shares: L1 error of the vector, coverage of the per-class 95 % intervals, and the mean class code (0..K-1)
with its interval. The fixed methods' intervals are their own (logit per class, Wald for the mean).

adultcontent2 (ordinal, 825 labelers, few gold) runs with ``--only adultcontent2`` and without the full structure
(:data:`STRUCTURES`). Writes resamples.csv.gz, summary.csv and table.md into --out; ``--table`` rebuilds the table from resamples.csv.gz.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from heroeval.choice.multiclass_auto import recommend_multiclass
from heroeval.core.parallel import run_chunks
from heroeval.errors import ConvergenceWarning, HeroEvalError
from heroeval.multiclass import (
    calibrate_multiclass,
    dawid_skene_multiclass,
    gold_proportion_multiclass,
    hero1_multiclass,
    hero_joint_multiclass,
    majority_vote_multiclass,
    read_multiclass,
)
from heroeval.multiclass.mock_rounds import allowed_structures

from benchmarks.multiclass import ORDINAL, load

SETS = ["dog", "face", "weather_sentiment_amt", "weather_sentiment_cf", "snow_wsd"]
RATE_BOOST = 3.0
STRUCTURES = {"adultcontent2": ("symmetric", "ordinal")}
"""Structures fitted where the full one is too dear (adultcontent2: 825 labelers, about 45 s per full fit, 12 fits per
resample); elsewhere every structure the classes allow."""


def split(name: str, lab: pd.DataFrame, gold: pd.DataFrame, classes: tuple[str, ...], r: int, rho: float, n: int,
          seed: int, shift: str) -> tuple[Any, Any, np.ndarray]:
    rng = np.random.default_rng([seed, r, int(rho * 1000), {"none": 0, "rate": 1, "half": 2}[shift]])
    gold_items = gold["item_id"].to_numpy()
    n_cur = min(n, int(0.4 * gold_items.size))
    if shift == "rate":
        boosted = classes[int(rng.integers(len(classes)))]
        w = np.where(gold["gold"].astype(str).to_numpy() == boosted, RATE_BOOST, 1.0)
        cur_items = set(rng.choice(gold_items, n_cur, replace=False, p=w / w.sum()).tolist())
    else:
        cur_items = set(rng.choice(gold_items, n_cur, replace=False).tolist())
    is_cur = lab["item_id"].isin(cur_items).to_numpy()
    hist_lab, cur_lab = lab[~is_cur], lab[is_cur]
    if shift == "half":  # pool shift: the round keeps the labels of a random half of its labelers
        who = np.sort(cur_lab["labeler_id"].astype(str).unique())
        keep = set(rng.choice(who, max(1, who.size // 2), replace=False).tolist())
        cur_lab = cur_lab[cur_lab["labeler_id"].astype(str).isin(keep)]
    hist_ids = hist_lab["item_id"].unique()
    pool = gold[gold["item_id"].isin(set(hist_ids))]
    want = max(1, round(rho * hist_ids.size))
    reveal = pool.sample(n=min(want, len(pool)), random_state=int(rng.integers(2**31)))
    ordinal = ORDINAL.get(name, False)
    hist = read_multiclass(hist_lab, gold=reveal, classes=classes, ordinal=ordinal, round_col=False, name="history")
    cur = read_multiclass(cur_lab, classes=classes, ordinal=ordinal, round_col=False, name="current")
    g = gold.set_index("item_id").loc[cur.annotations.item_ids.astype(str), "gold"].astype(str).to_numpy()
    truth = np.array([(g == c).mean() for c in classes])
    return hist, cur, truth


def one(args: tuple[str, pd.DataFrame, pd.DataFrame, tuple[str, ...], int, float, int, int, str]
        ) -> list[dict[str, Any]]:
    name, lab, gold, classes, r, rho, n, seed, shift = args
    warnings.simplefilter("ignore", ConvergenceWarning)
    hist, cur, truth = split(name, lab, gold, classes, r, rho, n, seed, shift)
    K = len(classes)
    vals = np.arange(K, dtype=float)
    structs = STRUCTURES.get(name, allowed_structures(hist))
    t0 = time.perf_counter()
    fits = {s: calibrate_multiclass(hist, structure=s) for s in structs}
    t_fit = time.perf_counter() - t0
    fixed: dict[str, Any] = {"majority_vote": majority_vote_multiclass(cur), "dawid_skene": dawid_skene_multiclass(cur),
                             "gold_proportion": gold_proportion_multiclass(cur, fits[structs[0]],
                                                                           exclude_new_labelers=True)}
    for s, cal in fits.items():
        fixed[f"hero1:{s}"] = hero1_multiclass(cur, cal, exclude_new_labelers=True)
        try:
            fixed[f"hero_joint:{s}"] = hero_joint_multiclass(cur, cal, exclude_new_labelers=True)
        except HeroEvalError:
            pass
    rows = []
    base = {"dataset": name, "shift": shift, "rho": rho, "resample": r, "n_current": cur.n_items,
            "n_gold_history": int((hist.annotations.gold >= 0).sum()), "t_fit": t_fit}
    for m, x in fixed.items():
        ci = x.intervals(0.95)
        ms = x.functional(vals)
        rows.append(_row(base, m, m, x.status, x.estimate, truth, ci, ms, vals))
    t0 = time.perf_counter()
    rec = recommend_multiclass(cur, hist, structures=structs, fits=fits)
    t_auto = time.perf_counter() - t0
    ms = rec.functional(vals, clip=(0.0, float(K - 1)))
    row = _row(base, "auto", rec.method, rec.status, rec.estimate.estimate, truth, rec.intervals(), ms, vals)
    row.update(t_auto=t_auto, n_effective_gold=rec.n_effective_gold)
    for c, sc in rec._scored.items():  # every candidate as the rule saw it, for rules replayed offline
        cov = []
        for k in range(K):
            e, _, _, h = sc.interval(np.eye(K)[k], 0.95, rec.kappa)
            cov.append(max(0.0, e - h) <= truth[k] <= min(1.0, e + h))
        row[f"c_mse:{c}"] = sc.total_mse()
        row[f"c_p:{c}"] = sc.bias_test()[2]
        row[f"c_l1:{c}"] = float(np.abs(sc.estimate.estimate - truth).sum())
        row[f"c_cover:{c}"] = float(np.mean(cov))
    for k, (lo, hi) in enumerate(rec.intervals(span=False)):  # the chosen's own bias-aware interval, no span
        row[f"cover_own{k}"] = bool(lo <= truth[k] <= hi)
        row[f"width_own{k}"] = hi - lo
    rows.append(row)
    return rows


def _row(base: dict[str, Any], method: str, chosen: str, status: str, est: np.ndarray, truth: np.ndarray,
         ci: list[tuple[float, float]], ms: dict[str, float], vals: np.ndarray) -> dict[str, Any]:
    mt = float(vals @ truth)
    row: dict[str, Any] = {**base, "method": method, "chosen": chosen, "status": status,
                           "l1": float(np.abs(est - truth).sum()), "mean_est": ms["estimate"], "mean_truth": mt,
                           "mean_cover": bool(ms["ci_low"] <= mt <= ms["ci_high"]),
                           "mean_width": ms["ci_high"] - ms["ci_low"]}
    for k in range(truth.size):
        row[f"est{k}"], row[f"truth{k}"] = float(est[k]), float(truth[k])
        row[f"cover{k}"] = bool(ci[k][0] <= truth[k] <= ci[k][1])
        row[f"width{k}"] = float(ci[k][1] - ci[k][0])
    return row


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (ds, sh, m), g in df.groupby(["dataset", "shift", "method"], sort=False):
        K = sum(1 for c in g.columns if c.startswith("cover") and c[5:].isdigit() and g[c].notna().any())
        cov = np.stack([g[f"cover{k}"].astype(float) for k in range(K)], axis=1)
        wid = np.stack([g[f"width{k}"] for k in range(K)], axis=1)
        own = {}
        if m == "auto" and "cover_own0" in g.columns:  # the chosen's own interval (this benchmark's rows only)
            co = np.stack([g[f"cover_own{k}"].astype(float) for k in range(K)], axis=1)
            own = {"coverage_own": float(co.mean()), "coverage_own_min_class": float(co.mean(axis=0).min()),
                   "width_own": float(np.mean([g[f"width_own{k}"].mean() for k in range(K)]))}
        out.append({**own, "dataset": ds, "shift": sh, "method": m, "resamples": len(g), "K": K, "l1": g["l1"].mean(),
                    "coverage_mean_class": float(np.nanmean(cov)), "coverage_min_class": float(cov.mean(axis=0).min()),
                    "width_mean_class": float(np.nanmean(wid)),
                    "mean_score_cover": float(g["mean_cover"].mean()), "mean_score_width": float(g["mean_width"].mean()),
                    "unreliable": float((g["status"] == "unreliable").mean()),
                    "chosen": " ".join(f"{k} {v}" for k, v in g["chosen"].value_counts().items()) if m == "auto" else ""})
    return pd.DataFrame(out)


def table(s: pd.DataFrame) -> str:
    lines = ["| data set | shift | best fixed (L1) | auto L1 | ratio | auto coverage per class: mean (lowest class) | "
             "mean score coverage | auto width | best fixed's coverage | unreliable | auto chose |",
             "|---|---|---|---:|---:|---|---:|---:|---:|---:|---|"]
    ratios: dict[str, list[float]] = {}
    for (ds, sh), g in s.groupby(["dataset", "shift"], sort=False):
        g = g.set_index("method")
        fixed = g.drop(index="auto")
        best = fixed["l1"].idxmin()
        a = g.loc["auto"]
        ratio = a["l1"] / fixed.loc[best, "l1"]
        ratios.setdefault(sh, []).append(ratio)
        lines.append(f"| {ds} | {sh} | {best} ({fixed.loc[best, 'l1']:.3f}) | {a['l1']:.3f} | {ratio:.2f} | "
                     f"{a['coverage_mean_class']:.2f} ({a['coverage_min_class']:.2f}) | {a['mean_score_cover']:.2f} | "
                     f"{a['width_mean_class']:.3f} | {fixed.loc[best, 'coverage_mean_class']:.2f} | "
                     f"{a['unreliable']:.2f} | {a['chosen']} |")
    lines.append("")
    for sh, r in ratios.items():
        lines.append(f"shift {sh}: auto's L1 over the best fixed method's, geometric mean {np.exp(np.mean(np.log(r))):.2f}"
                     f", worst {max(r):.2f}")
    return "\n".join(lines)


def split_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of :func:`split` every multi-class benchmark takes: data folder, resamples, round size, rho."""
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data"))
    ap.add_argument("--resamples", type=int, default=30)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rho", type=float, default=0.10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=2026)


def main() -> None:
    ap = argparse.ArgumentParser()
    split_arguments(ap)
    ap.add_argument("--shifts", default="none,rate")
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="benchmarks/results/multiclass/auto")
    ap.add_argument("--table", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.table:
        s = summarize(pd.read_csv(out / "resamples.csv.gz"))
        print(table(s))
        return
    jobs = []
    for name in [*SETS, "adultcontent2"] if a.only else SETS:
        if a.only and name not in a.only.split(","):
            continue
        lab, gold, classes = load(Path(a.data) / name)
        print(f"{name}: classes {list(classes)}, {lab['item_id'].nunique()} items, {len(gold)} gold", file=sys.stderr)
        for sh in a.shifts.split(","):
            jobs += [(name, lab, gold, classes, r, a.rho, a.n, a.seed, sh) for r in range(a.resamples)]
    t0 = time.perf_counter()
    rows = run_chunks(one, jobs, [1] * len(jobs), a.workers)
    df = pd.DataFrame(rows).sort_values(["dataset", "shift", "resample", "method"]).reset_index(drop=True)
    df.to_csv(out / "resamples.csv.gz", index=False)
    s = summarize(df)
    s.to_csv(out / "summary.csv", index=False)
    (out / "table.md").write_text(table(s) + "\n")
    print(table(s))
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
