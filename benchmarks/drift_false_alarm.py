"""Labeler drift check on real crowd data: false alarms without drift, and power.

For every binary set in the shared data folder (adultcontent2 through its
``*_binary.csv`` files; the multi-class sets are skipped), ``--splits``
random history/current splits of :func:`heroeval.benchmark.make_split`
(``rho`` = 0.10 gold share in the history, ``n`` current items capped at 40 %
of the gold items, ``shift="none"``): the current round is a random subset of
the same items and labelers, so nothing drifted by construction. Per split the
calibration is fitted on the history (``calibrate(checks=False)``) and
:func:`heroeval.checks.drift.check_drift` runs on the current round (defaults:
sequential Holm, 0.05). Reported per set and pooled:

* ``overall``: rejection rate of the overall test at nominal 0.05;
* ``any_flag``: share of splits where some labeler is flagged (family-wise);
* ``raw_rej``: share of per-labeler tests with raw p < 0.05, and ``adj_rej``:
  with adjusted p < 0.05 (pooled over the labelers of all splits);
* ``tested``: mean number of labelers with a p-value per split.

Power: the same splits with drift injected into the 3 calibrated labelers with
the most current labels. ``lenient``: 30 % of their 0-labels become 1 (a
specificity drop: their positive rate moves, which a marginal-rate test can
see); ``flip``: 30 % of all their labels are flipped (moves the rate towards
0.5 only, invisible when it is near 0.5). Reported: ``*_overall`` (overall
test rejects), ``*_flag`` (share of the 3 labelers flagged), ``*_other`` (share
of splits flagging some other labeler).

Run (``--label`` names the code version in the outputs):

    .venv/bin/python -m benchmarks.drift_false_alarm --out benchmarks/results/assumptions --label after

Writes ``drift_false_alarm_<label>.csv`` (per set and pooled) and
``drift_false_alarm_<label>_rows.csv`` (one row per split). Imports only what
every version of ``check_drift`` has, so the same script measures the old code
(``PYTHONPATH=<old src>``).
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.checks.drift import check_drift
from heroeval.core.parallel import run_chunks
from heroeval.ingest.read import read_annotations
from heroeval.workflows.benchmark import BenchmarkData, load_folder, make_split

from benchmarks.tables import markdown

DATA = Path("/work/shared/data")
SETS = {  # binary sets and the suffix of their binary view
    "adultcontent2": "_binary", "bluebirds": "", "duchenne": "", "mre_treat": "", "possent_zheng": "",
    "product_er": "", "sentiment_polarity": "", "snow_rte": "", "snow_temp": "", "trec2011_crowd": "",
    "triviaqa_llm_judges": "", "zencrowd": "",
}
LEVEL = 0.05
N_DRIFT = 3
SHARE = 0.30


def _inject(cur: he.AnnotationSet, labs: list[str], kind: str, rng: np.random.Generator) -> he.AnnotationSet:
    codes = [list(cur.labeler_ids).index(x) for x in labs]
    z = cur.label.copy()
    on = np.isin(cur.labeler, codes)
    if kind == "lenient":
        cand = np.flatnonzero(on & (z == 0))
    else:
        cand = np.flatnonzero(on)
    hit = cand[rng.random(cand.size) < SHARE]
    z[hit] = 1 - z[hit]
    return he.AnnotationSet.from_arrays(cur.item_ids[cur.annotation_item], cur.labeler_ids[cur.labeler], z,
                                        name="current")


def _summary(chk: Any, level: float = LEVEL) -> dict[str, float]:
    p = np.asarray(chk.p_value, dtype=float)
    pa = np.asarray(chk.p_adjusted, dtype=float)
    ok = np.isfinite(p)
    return {
        "overall": float(math.isfinite(chk.overall_p) and chk.overall_p < level),
        "any_flag": float(bool(chk.flagged)),
        "n_tested": int(ok.sum()),
        "n_raw_rej": int((p[ok] < level).sum()),
        "n_adj_rej": int((np.nan_to_num(pa[ok], nan=1.0) < level).sum()),
        "overall_p": float(chk.overall_p),
        # parts of the new overall test (NaN with the old code)
        "chi2_p": float(getattr(chk, "chi2_p", math.nan)),
        "min_p_test": float(getattr(chk, "min_p_test", math.nan)),
        "family_size": int(getattr(chk, "family_size", 0)),
        "min_p_raw": float(np.min(p[ok])) if ok.any() else math.nan,
    }


def _split_all(data: BenchmarkData, r: int, rho: float, n: int, seed: int) -> tuple[he.AnnotationSet, he.AnnotationSet]:
    """Like make_split, but the current items are drawn from all labelled items, not only the gold ones.

    The drift check needs no gold in the current round; where gold covers only
    part of the items (adultcontent2, duchenne, mre_treat, trec2011_crowd),
    make_split's current round is the gold subset's items, not a random draw.
    """
    rng = np.random.default_rng([seed, r, int(rho * 1000), 1])
    lab = data.labels
    items = lab["item_id"].unique()
    n_cur = min(n, int(0.4 * data.gold["item_id"].size))
    cur_items = set(rng.choice(items, n_cur, replace=False).tolist())
    is_cur = lab["item_id"].isin(cur_items).to_numpy()
    hist_lab, cur_lab = lab[~is_cur], lab[is_cur]
    hist_ids = hist_lab["item_id"].unique()
    pool = data.gold[data.gold["item_id"].isin(set(hist_ids))]
    want = round(rho * hist_ids.size)
    reveal = pool.sample(n=min(max(want, 1), len(pool)), random_state=int(rng.integers(2**31)))
    hist = read_annotations(hist_lab, gold=reveal, round_col=False, name="history")
    return hist, read_annotations(cur_lab, round_col=False, name="current")


def _job(args: tuple[str, list[int], int, int, bool, str]) -> list[dict[str, Any]]:
    name, rs, n, seed, sequential, split = args
    warnings.simplefilter("ignore")
    data = load_folder(DATA / name, text_components=0, binary_suffix=SETS[name])
    rows = []
    for r in rs:
        t0 = time.perf_counter()
        if split == "gold":
            sp = make_split(data, r, 0.10, n, "none", seed)
            hist, cur = sp.history, sp.current
        else:
            hist, cur = _split_all(data, r, 0.10, n, seed)
        cal = he.calibrate(hist, checks=False)
        row: dict[str, Any] = {"dataset": name, "split": r, "n_current": cur.n_items, "n_history": hist.n_items,
                               "labelers": cur.n_labelers}
        try:
            row.update(_summary(check_drift(cur, cal, warn=False, sequential=sequential)))
            row["error"] = ""
        except Exception as exc:  # the old code stops on some rounds: record it
            row.update({"overall": math.nan, "any_flag": math.nan, "error": f"{type(exc).__name__}: {exc}"[:200]})
        # power: drift in the 3 calibrated labelers with the most current labels
        known = set(cal.labeler_ids)
        m = np.bincount(cur.labeler, minlength=cur.n_labelers)
        order = [k for k in np.argsort(-m, kind="stable") if str(cur.labeler_ids[k]) in known]
        labs = [str(cur.labeler_ids[k]) for k in order[:N_DRIFT]]
        row["drift_labels"] = int(sum(m[list(cur.labeler_ids).index(x)] for x in labs))
        rng = np.random.default_rng([seed, r, 7])
        for kind in ("lenient", "flip"):
            try:
                chk = check_drift(_inject(cur, labs, kind, rng), cal, warn=False, sequential=sequential)
                row[f"{kind}_overall"] = float(math.isfinite(chk.overall_p) and chk.overall_p < LEVEL)
                row[f"{kind}_flag"] = sum(x in chk.flagged for x in labs) / len(labs)
                row[f"{kind}_other"] = float(any(x not in labs for x in chk.flagged))
            except Exception:
                row[f"{kind}_overall"] = row[f"{kind}_flag"] = row[f"{kind}_other"] = math.nan
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
    return rows


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    def agg(g: pd.DataFrame) -> dict[str, Any]:
        ok = g["error"] == ""
        return {
            "splits": len(g), "errors": int((~ok).sum()),
            "overall": g.loc[ok, "overall"].mean(), "any_flag": g.loc[ok, "any_flag"].mean(),
            "raw_rej": g.loc[ok, "n_raw_rej"].sum() / max(g.loc[ok, "n_tested"].sum(), 1),
            "adj_rej": g.loc[ok, "n_adj_rej"].sum() / max(g.loc[ok, "n_tested"].sum(), 1),
            "tested": g.loc[ok, "n_tested"].mean(),
            "lenient_overall": g["lenient_overall"].mean(), "lenient_flag": g["lenient_flag"].mean(),
            "lenient_other": g["lenient_other"].mean(),
            "flip_overall": g["flip_overall"].mean(), "flip_flag": g["flip_flag"].mean(),
            "flip_other": g["flip_other"].mean(),
        }

    rows = [{"dataset": k, **agg(g)} for k, g in df.groupby("dataset", sort=True)]
    rows.append({"dataset": "pooled", **agg(df)})
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--splits", type=int, default=30)
    ap.add_argument("--n", type=int, default=1000, help="current items (capped at 40 %% of the gold items)")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=10)
    ap.add_argument("--label", default="after")
    ap.add_argument("--split", choices=("gold", "all"), default="gold",
                    help="gold: heroeval.benchmark.make_split (current items drawn from the gold items); all: drawn "
                         "from all labelled items")
    ap.add_argument("--single-step", action="store_true",
                    help="check_drift(sequential=False): one fit, single-step Holm (the old code's sequential refit "
                         "after each of dozens of false flags takes minutes per split)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    t0 = time.perf_counter()
    names = [s for s in args.sets.split(",") if s]
    jobs = [(s, list(range(i, min(i + args.chunk, args.splits))), args.n, args.seed, not args.single_step, args.split)
            for s in names for i in range(0, args.splits, args.chunk)]
    rows = run_chunks(_job, jobs, [len(j[1]) for j in jobs], args.workers)
    df = pd.DataFrame(rows).sort_values(["dataset", "split"]).reset_index(drop=True)
    summ = summarize(df)
    secs = time.perf_counter() - t0
    md = markdown(summ)
    print(md)
    print(f"\n{len(df)} splits in {secs:.0f} s ({args.workers} workers); label {args.label}"
          + ("; single-step Holm" if args.single_step else "") + f"; split {args.split}")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        summ.to_csv(args.out / f"drift_false_alarm_{args.label}.csv", index=False)
        df.to_csv(args.out / f"drift_false_alarm_{args.label}_rows.csv", index=False)


if __name__ == "__main__":
    main()
