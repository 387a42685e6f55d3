"""The recommended K-class difference ``A - B`` against every fixed method's, on random, rate-shifted and
pool-shifted pairs of rounds (issue #42: the recommended difference and verdict for K classes).

    PYTHONPATH=. .venv/bin/python -m benchmarks.multiclass_difference --resamples 30 \\
        --out benchmarks/results/multiclass/difference

Protocol (as benchmarks/multiclass_auto.py, with two rounds): per resample rounds A and B are disjoint draws of n
items each among the gold items (each at most 20 % of them); every other labelled item is history; gold is revealed
on a random share rho of the history's items. ``shift=none``: both rounds uniform draws (the true difference is
sampling noise). ``shift=rate``: B's draw makes one class (drawn per resample) RATE_BOOST times as likely, so B's
class shares move away from A's and the history's (a new model version that errs differently). ``shift=half``: a
uniform B whose labels are those of a random half of its labelers (pool shift between the rounds). The fixed
methods are those of the single-round benchmark, each compared with itself
(:func:`heroeval.multiclass.estimators.compare_multiclass`, its own Wald interval per class share and for the mean
class code); ``auto`` is :func:`heroeval.choice.multiclass_difference.recommend_difference_multiclass` with its
bias-aware intervals (``--bias``: how its mock bias is extrapolated to the rounds' shares). Scored against the rounds' gold class shares: L1 error of the difference vector, coverage of
the per-class 95 % intervals and of the mean score's. The rule has no constant of its own (it is the single round's,
whose constants were chosen by leave-one-set-out); ``benchmarks/multiclass_difference_rules.py`` replays the
variants of the pick, the bias bound's kappa and the unreliable span on the stored parts, in-sample and
leave-one-set-out.

Writes resamples.csv.gz, summary.csv and table.md into --out; ``--table`` rebuilds the table from resamples.csv.gz.
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

from heroeval.choice.multiclass_difference import recommend_difference_multiclass
from heroeval.core.parallel import run_chunks
from heroeval.errors import ConvergenceWarning, HeroEvalError
from heroeval.multiclass import (
    calibrate_multiclass,
    compare_multiclass,
    dawid_skene_multiclass,
    gold_proportion_multiclass,
    hero1_multiclass,
    hero_joint_multiclass,
    majority_vote_multiclass,
    read_multiclass,
)
from heroeval.multiclass.mock_rounds import allowed_structures

from benchmarks.multiclass import ORDINAL, load
from benchmarks.multiclass_auto import RATE_BOOST, SETS, STRUCTURES, _row, split_arguments, summarize


def split(name: str, lab: pd.DataFrame, gold: pd.DataFrame, classes: tuple[str, ...], r: int, rho: float, n: int,
          seed: int, shift: str) -> tuple[Any, Any, Any, np.ndarray]:
    rng = np.random.default_rng([seed, r, int(rho * 1000), {"none": 0, "rate": 1, "half": 2}[shift], 7])
    gold_items = gold["item_id"].to_numpy()
    n_cur = min(n, int(0.2 * gold_items.size))
    a_items = rng.choice(gold_items, n_cur, replace=False)
    rest = gold[~gold["item_id"].isin(set(a_items.tolist()))]
    w = np.ones(len(rest))
    if shift == "rate":
        boosted = classes[int(rng.integers(len(classes)))]
        w = np.where(rest["gold"].astype(str).to_numpy() == boosted, RATE_BOOST, 1.0)
    b_items = rng.choice(rest["item_id"].to_numpy(), n_cur, replace=False, p=w / w.sum())
    in_a = lab["item_id"].isin(set(a_items.tolist())).to_numpy()
    in_b = lab["item_id"].isin(set(b_items.tolist())).to_numpy()
    hist_lab, a_lab, b_lab = lab[~(in_a | in_b)], lab[in_a], lab[in_b]
    if shift == "half":
        who = np.sort(b_lab["labeler_id"].astype(str).unique())
        keep = set(rng.choice(who, max(1, who.size // 2), replace=False).tolist())
        b_lab = b_lab[b_lab["labeler_id"].astype(str).isin(keep)]
    hist_ids = hist_lab["item_id"].unique()
    pool = gold[gold["item_id"].isin(set(hist_ids))]
    reveal = pool.sample(n=min(max(1, round(rho * hist_ids.size)), len(pool)), random_state=int(rng.integers(2**31)))
    ordinal = ORDINAL.get(name, False)
    hist = read_multiclass(hist_lab, gold=reveal, classes=classes, ordinal=ordinal, round_col=False, name="history")
    a = read_multiclass(a_lab, classes=classes, ordinal=ordinal, round_col=False, name="A")
    b = read_multiclass(b_lab, classes=classes, ordinal=ordinal, round_col=False, name="B")
    g = gold.set_index("item_id")["gold"].astype(str)

    def shares(d: Any) -> np.ndarray:
        x = g.loc[d.annotations.item_ids.astype(str)].to_numpy()
        return np.array([(x == c).mean() for c in classes])

    return hist, a, b, shares(a) - shares(b)


def one(args: tuple[str, pd.DataFrame, pd.DataFrame, tuple[str, ...], int, float, int, int, str, str]
        ) -> list[dict[str, Any]]:
    name, lab, gold, classes, r, rho, n, seed, shift, bias = args
    warnings.simplefilter("ignore", ConvergenceWarning)
    hist, a, b, truth = split(name, lab, gold, classes, r, rho, n, seed, shift)
    K = len(classes)
    vals = np.arange(K, dtype=float)
    structs = STRUCTURES.get(name, allowed_structures(hist))
    fits = {s: calibrate_multiclass(hist, structure=s) for s in structs}

    def fixed(cur: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"majority_vote": majority_vote_multiclass(cur), "dawid_skene": dawid_skene_multiclass(cur),
                               "gold_proportion": gold_proportion_multiclass(cur, fits[structs[0]],
                                                                             exclude_new_labelers=True)}
        for s, cal in fits.items():
            out[f"hero1:{s}"] = hero1_multiclass(cur, cal, exclude_new_labelers=True)
            try:
                out[f"hero_joint:{s}"] = hero_joint_multiclass(cur, cal, exclude_new_labelers=True)
            except HeroEvalError:
                pass
        return out

    fa, fb = fixed(a), fixed(b)
    base = {"dataset": name, "shift": shift, "rho": rho, "resample": r, "n_a": a.n_items, "n_b": b.n_items,
            "n_gold_history": int((hist.annotations.gold >= 0).sum())}
    rows = []
    for m in fa:
        if m not in fb:
            continue
        c = compare_multiclass(fa[m], fb[m])
        ci = [(f["ci_low"], f["ci_high"]) for f in (c.functional(np.eye(K)[k]) for k in range(K))]
        rows.append(_row(base, m, m, "", c.difference, truth, ci, c.functional(vals), vals))
    t0 = time.perf_counter()
    d = recommend_difference_multiclass(a, b, hist, structures=structs, bias=bias)
    row = _row(base, "auto", d.method, d.status, d.difference, truth, d.intervals(), d.functional(vals), vals)
    row.update(t_auto=time.perf_counter() - t0, chosen_a=d.round_a.method, chosen_b=d.round_b.method)
    for c, sc in d._scored.items():  # every candidate as the rule saw it, for rules replayed offline
        row[f"c_mse:{c}"] = sc.total_mse()
        row[f"c_p:{c}"] = sc.bias_test()[2]
        for j, w in enumerate([*np.eye(K), vals]):
            row.update(dict(zip([f"c_{x}{j}:{c}" for x in ("est", "se", "b", "sb")], sc.parts(w), strict=True)))
    rows.append(row)
    return rows


def table(s: pd.DataFrame) -> str:
    lines = ["| data set | shift | best fixed (L1) | auto L1 | ratio | auto coverage per class: mean (lowest class) | "
             "mean score coverage (width) | best fixed's coverage (lowest) | unreliable | auto chose |",
             "|---|---|---|---:|---:|---|---|---|---:|---|"]
    ratios: dict[str, list[float]] = {}
    for (ds, sh), g in s.groupby(["dataset", "shift"], sort=False):
        g = g.set_index("method")
        fx = g.drop(index="auto")
        best = fx["l1"].idxmin()
        au = g.loc["auto"]
        ratio = au["l1"] / fx.loc[best, "l1"]
        ratios.setdefault(sh, []).append(ratio)
        lines.append(f"| {ds} | {sh} | {best} ({fx.loc[best, 'l1']:.3f}) | {au['l1']:.3f} | {ratio:.2f} | "
                     f"{au['coverage_mean_class']:.2f} ({au['coverage_min_class']:.2f}) | "
                     f"{au['mean_score_cover']:.2f} ({au['mean_score_width']:.3f}) | "
                     f"{fx.loc[best, 'coverage_mean_class']:.2f} ({fx.loc[best, 'coverage_min_class']:.2f}) | "
                     f"{au['unreliable']:.2f} | {au['chosen']} |")
    lines.append("")
    for sh, r in ratios.items():
        lines.append(f"shift {sh}: auto's L1 over the best fixed method's, geometric mean {np.exp(np.mean(np.log(r))):.2f}"
                     f", worst {max(r):.2f}")
    a = s[s["method"] == "auto"]
    lines.append(f"auto coverage over (class, cell): mean {a['coverage_mean_class'].mean():.3f}, lowest cell "
                 f"{a['coverage_min_class'].min():.2f}; mean score: mean {a['mean_score_cover'].mean():.3f}, lowest "
                 f"{a['mean_score_cover'].min():.2f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    split_arguments(ap)
    ap.add_argument("--shifts", default="none,rate,half")
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="benchmarks/results/multiclass/difference")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--bias", default="inverse", help="the difference's bias map (heroeval.choice."
                    "multiclass_difference.BIAS_MAPS)")
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
            jobs += [(name, lab, gold, classes, r, a.rho, a.n, a.seed, sh, a.bias) for r in range(a.resamples)]
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
