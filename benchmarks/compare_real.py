"""Issue #40: every method's difference of two rounds (A - B) on the shared binary sets, and the recommended one.

``auto`` is the recommended difference (``he.compare(..., method="auto")``, :mod:`heroeval.choice.difference`),
beside each method's own row, so that it is judged against the best fixed method, majority vote included.

Protocol, per set and resample (seeded by set, scenario and resample):

1. Hold out ``3 n`` gold items (``n`` = ``--n``, or a fifth of the gold when fewer; at most half the gold) for the
   two rounds of ``n`` items each (the slack lets both rounds have their class counts); every
   other labelled item is history, with gold revealed on ``--rho`` of it (only items with gold can be).
2. Draw rounds A and B, disjoint, from the held-out items by class so that their gold rates are ``p_A`` and
   ``p_B = p_A + delta`` (scenarios ``equal``: delta 0, ``plus05``: 0.05, ``plus10``: 0.10, centred on the
   held-out items' rate), or, for ``pool``, equal rates with A labelled only by a random half of the labelers and
   B by the other half (a labeler-pool change between rounds, no change of model).
3. ``calibrate`` the history, ``compare(A, B, method=[...])``; score every method's A - B against the two
   rounds' true gold rates: the interval's coverage and width, whether its two-sided test rejects "no
   difference" at 0.05, and whether the **superiority verdict** (:func:`heroeval.inference.verdict.verdict`,
   margin 0, ``alternative="greater"``: "B's rate is higher than A's", one-sided at 0.05) decides: a false
   rejection at delta 0, power otherwise (B's rate is the higher one in ``plus05`` and ``plus10``).

Scenario ``grouped`` (the rounds differ in content): on every set with a natural item grouping
(:func:`benchmarks.real_data.grouped_sets`: answering models, batches, queries, topics, tasks; groups dealt into
blocks as ``hero benchmark --split groups`` does), A and B are up to ``n`` gold items of two distinct blocks drawn
at random per resample, and the history is every other block (gold revealed on ``rho`` of its items), each block
a round of it (so that the past-round check can see how the methods' errors vary between rounds), so A, B and
the history differ in content and in rate as real rounds do.

Leave-one-set-out: the row ``auto_loso`` is the recommended difference under the single-round rule's constants
chosen with the held-out set left out (``benchmarks/results/research/robustness/shift/loso_choices.csv``, from
``benchmarks/auto_loso.py``); where that fold's rule is the default, it is the ``auto`` row itself.

    .venv/bin/python -m benchmarks.compare_real --reps 10            # every shared binary set (~15 min here)
    .venv/bin/python -m benchmarks.compare_real --only zencrowd --reps 4
    .venv/bin/python -m benchmarks.compare_real --reps 30 --scenarios grouped --out benchmarks/results/compare/grouped

Results are written after each set (a stopped run keeps the sets it finished).
"""

from __future__ import annotations

import argparse
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.choice.auto import DEFAULT_RULE, AutoRule, recommend, with_checks
from heroeval.choice.difference import recommend_difference
from heroeval.core.parallel import run_chunks
from heroeval.errors import HeroEvalError, HeroEvalWarning
from heroeval.estimators.common import dispatch_rule, has_unknown
from heroeval.inference.comparison import Comparison, DifferenceRecommendation
from heroeval.inference.verdict import verdict
from heroeval.workflows.benchmark import GROUP_BLOCKS, BenchmarkData, deal_blocks, load_folder

from benchmarks.auto_loso import rules
from benchmarks.real_data import BINARY, grouped_sets

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
METHODS = ["majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1", "hero_joint"]
SCENARIOS = {"equal": 0.0, "plus05": 0.05, "plus10": 0.10, "pool": 0.0}
GROUPED = "grouped"
LOSO_CHOICES = Path(__file__).resolve().parent / "results" / "research" / "robustness" / "shift" / "loso_choices.csv"


def loso_rule(set_name: str) -> AutoRule:
    """The single-round rule chosen with ``set_name`` left out (``auto_loso.py``'s fold; the default if none)."""
    choices = pd.read_csv(LOSO_CHOICES).set_index("held_out")["rule"]
    if set_name not in choices.index:
        return DEFAULT_RULE
    by_name = dict(rules())
    return by_name[str(choices.loc[set_name])]


def _history(data: BenchmarkData, held: set[Any], rho: float, rng: np.random.Generator,
             rounds: pd.Series | None = None) -> he.AnnotationSet:
    """Every labelled item not held out, gold revealed on ``rho`` of them; ``rounds`` (item -> round) keeps the
    history's rounds, so that the recommended estimate can use its out-of-round evidence."""
    lab = data.labels
    hist_lab = lab[~lab["item_id"].isin(held)]
    hist_items = hist_lab["item_id"].unique()
    hg = data.gold[data.gold["item_id"].isin(set(hist_items))]
    reveal = hg.sample(n=min(max(round(rho * hist_items.size), 1), len(hg)), random_state=int(rng.integers(2**31)))
    if rounds is None:
        return he.read_annotations(hist_lab, gold=reveal, round_col=False)
    hist_lab = hist_lab.assign(round=hist_lab["item_id"].map(rounds).astype(str).to_numpy())
    return he.read_annotations(hist_lab, gold=reveal, round_col="round")


def _grouped_rounds(data: BenchmarkData, r: int, n: int, rho: float, seed: int
                    ) -> tuple[he.AnnotationSet, he.AnnotationSet, he.AnnotationSet, float, float] | None:
    """Rounds A and B from two distinct blocks of groups; the history every other block."""
    assert data.groups is not None
    rng = np.random.default_rng([seed, r, len(SCENARIOS)])
    gold = data.gold.set_index("item_id")["gold"]
    items = pd.unique(data.labels["item_id"])
    g = data.groups.reindex(items).dropna().astype(str)
    blocks = deal_blocks(data, GROUP_BLOCKS, seed)
    block = g if blocks is None else g.map(blocks)
    gold_block = block[block.index.isin(gold.index)]
    ok = [k for k, c in gold_block.value_counts().items() if c >= 20]
    if len(ok) < 2:
        return None
    ka, kb = rng.choice(np.sort(np.array(ok, dtype=object)), 2, replace=False)
    a_pool, b_pool = gold_block.index[gold_block == ka].to_numpy(), gold_block.index[gold_block == kb].to_numpy()
    a_items = rng.choice(a_pool, min(n, a_pool.size), replace=False)
    b_items = rng.choice(b_pool, min(n, b_pool.size), replace=False)
    held = set(block.index[block.isin([ka, kb])])
    hist = _history(data, held, rho, rng, rounds=block)  # the history keeps its blocks as rounds
    lab = data.labels
    a = he.read_annotations(lab[lab["item_id"].isin(set(a_items))], round_col=False, name="A")
    b = he.read_annotations(lab[lab["item_id"].isin(set(b_items))], round_col=False, name="B")
    return hist, a, b, float(gold.loc[a_items].mean()), float(gold.loc[b_items].mean())


def _rounds(data: BenchmarkData, scenario: str, r: int, n: int, rho: float, seed: int
            ) -> tuple[he.AnnotationSet, he.AnnotationSet, he.AnnotationSet, float, float] | None:
    rng = np.random.default_rng([seed, r, list(SCENARIOS).index(scenario)])
    gold = data.gold.set_index("item_id")["gold"]
    ids = gold.index.to_numpy()
    n_each = min(n, ids.size // 5)
    held = rng.choice(ids, min(3 * n_each, ids.size // 2), replace=False)  # slack for the class counts
    y = gold.loc[held].to_numpy()
    pos, neg = held[y == 1], held[y == 0]
    delta = SCENARIOS[scenario]
    base = min(max(float(y.mean()) - delta / 2, 0.02), 0.98 - delta)
    ka, kb = round(n_each * base), round(n_each * (base + delta))
    if ka + kb > pos.size or 2 * n_each - ka - kb > neg.size:
        return None  # not enough items of a class for these rates
    pos, neg = rng.permutation(pos), rng.permutation(neg)
    a_items = np.r_[pos[:ka], neg[: n_each - ka]]
    b_items = np.r_[pos[ka: ka + kb], neg[n_each - ka: 2 * n_each - ka - kb]]
    lab = data.labels
    hist = _history(data, set(held), rho, rng)
    a_lab, b_lab = lab[lab["item_id"].isin(set(a_items))], lab[lab["item_id"].isin(set(b_items))]
    if scenario == "pool":
        labelers = np.sort(lab["labeler_id"].unique())
        half = set(rng.choice(labelers, labelers.size // 2, replace=False).tolist())
        a_lab = a_lab[a_lab["labeler_id"].isin(half)]
        b_lab = b_lab[~b_lab["labeler_id"].isin(half)]
    if a_lab["item_id"].nunique() < 20 or b_lab["item_id"].nunique() < 20:
        return None
    a = he.read_annotations(a_lab, round_col=False, name="A")
    b = he.read_annotations(b_lab, round_col=False, name="B")
    ta = float(gold.loc[a_lab["item_id"].unique()].mean())
    tb = float(gold.loc[b_lab["item_id"].unique()].mean())
    return hist, a, b, ta, tb


def _loso_difference(a: he.AnnotationSet, b: he.AnnotationSet, cal: he.Calibration, rule: AutoRule,
                     excl: bool) -> DifferenceRecommendation:
    """The recommended difference under ``rule`` (as ``compare(method="auto")`` makes it with the default rule)."""
    cal = with_checks(cal)
    rec_a = recommend(a, cal, exclude_new_labelers=excl, rule=rule)
    rec_b = recommend(b, cal, exclude_new_labelers=excl, rule=rule)
    return recommend_difference(a, b, cal, rec_a, rec_b, exclude_new_labelers=excl, rule=rule, pairing=None)


def _scored(c: Comparison | DifferenceRecommendation, truth: float) -> dict[str, Any]:
    comp = c.comparison if isinstance(c, DifferenceRecommendation) else c
    ci = comp.confidence_interval(0.95)
    v = verdict(c, margin=0.0, alternative="greater", confidence_level=0.95)
    return {"estimate": comp.estimate, "ci_low": ci.low, "ci_high": ci.high,
            "covered": bool(ci.low <= truth <= ci.high), "width": ci.high - ci.low,
            "rejects": bool(comp.p_value < 0.05), "superior": bool(v.decided), "verdict_p": v.p_value, "failed": ""}


def _cell(job: tuple[str, str, str, int, float, int, Sequence[int]]) -> list[dict[str, Any]]:
    name, suffix, scenario, n, rho, seed, reps = job
    if scenario == GROUPED:
        data = next(d for d, _ in grouped_sets(DATA, n, [name]) if d.name == name)
        folder = name.split(":")[0]
    else:
        data = load_folder(DATA / name, binary_suffix=suffix, text_components=0)
        folder = data.name
    rule = loso_rule(folder)
    rows: list[dict[str, Any]] = []
    for r in reps:
        got = _grouped_rounds(data, r, n, rho, seed) if scenario == GROUPED else _rounds(data, scenario, r, n, rho, seed)
        if got is None:
            continue
        hist, a, b, ta, tb = got
        truth = ta - tb
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HeroEvalWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            cal = he.calibrate(hist)
            why = ""
            try:  # every method and the recommended difference ("auto") in one call, on one calibration
                cc = he.compare(a, b, cal, method=[*METHODS, "auto"], history=hist, new_labelers="auto")
            except HeroEvalError as exc:
                cc = None
                why = str(exc)[:200]
            base = {"set": data.name, "scenario": scenario, "resample": r, "truth": truth,
                    "n_a": a.n_items, "n_b": b.n_items}
            for m in [*METHODS, "auto"]:
                c: Comparison | DifferenceRecommendation | None = None
                extra: dict[str, Any] = {}
                if cc is None:
                    pass
                elif m == "auto" and cc.recommended is not None:
                    c = cc.recommended
                    extra = {"chosen": cc.recommended.method, "status": cc.recommended.status}
                elif m in cc.comparisons:
                    c = cc.comparisons[m]
                else:
                    why = cc.skipped.get(m, "not computed")
                if c is None:  # counted, with the reason (e.g. no influence values at a boundary)
                    rows.append({**base, "method": m, "failed": why[:200] or "failed"})
                    continue
                rows.append({**base, "method": m, **extra, **_scored(c, truth)})
            auto_row = rows[-1]
            if rule == DEFAULT_RULE or auto_row["failed"]:
                rows.append({**auto_row, "method": "auto_loso"})
                continue
            try:
                excl = any(dispatch_rule(x, cal, "auto", False) in ("exclude", "auto") or has_unknown(x, cal)
                           for x in (a, b))  # as compare's own recommended difference decides it
                d = _loso_difference(a, b, cal, rule, excl)
                rows.append({**base, "method": "auto_loso", "chosen": d.method, "status": d.status,
                             **_scored(d, truth)})
            except HeroEvalError as exc:
                rows.append({**base, "method": "auto_loso", "failed": str(exc)[:200]})
    return rows


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    df = df.assign(failed=df["failed"].fillna(""))  # a CSV read back has NaN for ""
    failed = (df["failed"] != "").groupby([df["scenario"], df["method"]], sort=False).sum().rename("failed")
    df = df[df["failed"] == ""]
    g = df.groupby(["scenario", "method"], sort=False)
    per_set = df.groupby(["set", "scenario", "method"]).agg(coverage=("covered", "mean")).reset_index()
    worst = per_set.groupby(["scenario", "method"]).coverage.min().rename("worst_set_coverage")
    out = g.agg(resamples=("covered", "size"), coverage=("covered", "mean"), width=("width", "mean"),
                rejects=("rejects", "mean"), superior=("superior", "mean")).join(worst)
    err = (df["estimate"] - df["truth"]) ** 2
    out["rmse"] = np.sqrt(err.groupby([df["scenario"], df["method"]]).mean())
    return out.join(failed).reset_index()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rho", type=float, default=0.10)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--only", default=None, help="Comma-separated set names (grouped: folder or folder:grouping).")
    ap.add_argument("--exclude", default="", help="Comma-separated folders left out (e.g. the slow large crowds).")
    ap.add_argument("--scenarios", default=",".join([*SCENARIOS, GROUPED]),
                    help=f"Comma-separated, of {', '.join([*SCENARIOS, GROUPED])}.")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/compare"))
    a = ap.parse_args()
    scen = a.scenarios.split(",")
    bad = [x for x in scen if x not in [*SCENARIOS, GROUPED]]
    if bad:
        ap.error(f"--scenarios: unknown {bad}")
    only = None if a.only is None else a.only.split(",")
    skip = set(filter(None, a.exclude.split(",")))
    per_set: list[list[tuple[str, str, str, int, float, int, list[int]]]] = []
    for nm, sx in BINARY:
        if (only is None or nm in only) and nm not in skip:
            per_set.append([(nm, sx, sc, a.n, a.rho, a.seed, list(range(a.reps))) for sc in SCENARIOS if sc in scen])
    if GROUPED in scen:
        for d, n_g in grouped_sets(DATA, a.n, only or ()):
            if d.name.split(":")[0] in skip:
                continue
            per_set.append([(d.name, "", GROUPED, n_g, a.rho, a.seed, list(range(a.reps)))])
    a.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for jobs in per_set:
        if not jobs:
            continue
        rows += run_chunks(_cell, jobs, [a.reps] * len(jobs), a.workers, None)
        df = pd.DataFrame(rows)  # written after each set: a stopped run keeps what it finished
        df.to_csv(a.out / "resamples.csv.gz", index=False)
        summarize(df).to_csv(a.out / "summary.csv", index=False)
        print(f"done {jobs[0][0]}", flush=True)
    s = summarize(pd.DataFrame(rows))
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(s.to_string(index=False, float_format=lambda x: f"{x:.3f}"))


if __name__ == "__main__":
    main()
