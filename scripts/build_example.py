"""Build the example bundled in heroeval (src/heroeval/examples/triviaqa).

Source: ../shared/data/triviaqa_llm_judges (Thakur et al. 2024, "Judging the
Judges", arXiv:2406.12624; files from UMass-Meta-LLM-Eval/llm_eval). Nine LLM
judges and two lexical judges say whether an exam-taker LLM answered a
TriviaQA question correctly; gold is the authors' human judgment.

History  = eight exam-taker models (one round each), gold revealed on a
           seeded 10 % of their items.
Current  = the ninth exam taker (llama2-7b-chat), no gold; its true gold
           rate is kept in truth.json for the demo to print beside the
           estimates.
Covariates (question-level, identical distribution in every round because
all exam takers answer the same 400 questions):
  q_log_chars   log length of the question
  q_log_aliases log number of accepted reference answers
  q_hist_rate   share of positive silver labels the question received in
                the history (a difficulty score computed from history
                labels only, no gold)

Run: python scripts/build_example.py [--data ../shared/data/triviaqa_llm_judges]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

CURRENT = "llama2-7b-chat"
GOLD_RATE = 0.10
SEED = 20261129


def main() -> None:
    ap = argparse.ArgumentParser()
    here = Path(__file__).resolve().parent.parent
    ap.add_argument("--data", default=str(here.parent / "shared" / "data" / "triviaqa_llm_judges"))
    ap.add_argument("--out", default=str(here / "src" / "heroeval" / "examples" / "triviaqa"))
    a = ap.parse_args()
    src, out = Path(a.data), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    labels = pd.read_csv(src / "labels.csv", dtype={"item_id": str, "labeler_id": str})
    gold = pd.read_csv(src / "gold.csv", dtype={"item_id": str})
    items = pd.read_csv(src / "items.csv", dtype={"item_id": str})
    items["q_log_chars"] = np.log(items["question"].str.len())
    items["q_log_aliases"] = np.log(items["reference_answers"].str.count(r" \| ") + 1)
    is_cur = items["exam_taker"] == CURRENT
    hist_items = items.loc[~is_cur, ["item_id", "exam_taker", "question_id"]]
    cur_items = items.loc[is_cur, ["item_id", "question_id"]]

    lab = labels.merge(items[["item_id", "exam_taker", "question_id"]], on="item_id", how="left")
    hist_lab = lab[lab["exam_taker"] != CURRENT]
    q_rate = hist_lab.groupby("question_id")["label"].mean().rename("q_hist_rate")
    items = items.merge(q_rate, on="question_id", how="left")
    items["q_hist_rate"] = items["q_hist_rate"].fillna(q_rate.mean())
    cov_cols = ["q_log_chars", "q_log_aliases", "q_hist_rate"]

    hist = hist_lab.rename(columns={"exam_taker": "round"})[["item_id", "labeler_id", "label", "round"]]
    hist.to_csv(out / "history.csv.gz", index=False)
    cur = lab[lab["exam_taker"] == CURRENT][["item_id", "labeler_id", "label"]]
    cur.to_csv(out / "current.csv.gz", index=False)

    rng = np.random.default_rng(SEED)
    hg = gold[gold["item_id"].isin(hist_items["item_id"])].reset_index(drop=True)
    hg = hg[rng.random(len(hg)) < GOLD_RATE]
    hg.to_csv(out / "history_gold.csv", index=False)

    items[~is_cur.to_numpy()][["item_id", *cov_cols]].round(6).to_csv(
        out / "history_covariates.csv.gz", index=False)
    items[is_cur.to_numpy()][["item_id", *cov_cols]].round(6).to_csv(
        out / "current_covariates.csv.gz", index=False)
    cg = gold[gold["item_id"].isin(cur_items["item_id"])]
    truth = {
        "current_round": CURRENT,
        "true_rate": float(cg["gold"].mean()),
        "n_current_items": len(cg),
        "history_rounds": sorted(hist["round"].unique().tolist()),
        "history_gold_items": len(hg),
        "gold_rate": GOLD_RATE,
        "seed": SEED,
    }
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    print(json.dumps(truth, indent=1))


if __name__ == "__main__":
    main()
