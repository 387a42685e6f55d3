"""Build the example bundled in heroeval (src/heroeval/examples/triviaqa).

Source: ../shared/data/triviaqa_llm_judges (Thakur et al. 2024, "Judging the
Judges", arXiv:2406.12624; files from UMass-Meta-LLM-Eval/llm_eval). Nine LLM
judges and two lexical judges say whether an exam-taker LLM answered a
TriviaQA question correctly; gold is the authors' human judgment.

The 400 questions are split at random into two halves, so that history and
current items are independent draws of questions (HERO-2's variance formula
needs the current covariates to be independent of the history's):
History  = eight exam-taker models (one round each) on the first half of
           the questions, gold revealed on a seeded 10 % of their items.
Current  = the ninth exam taker (llama2-7b-chat) on the other half, no gold;
           its true gold rate is kept in truth.json for the demo to print
           beside the estimates.
Covariates (question text only, so their distribution is shared):
  q_log_chars   log length of the question
  q_log_aliases log number of accepted reference answers
  q_digits      1 if the question contains a digit

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
    items["q_digits"] = items["question"].str.contains(r"[0-9]").astype(int)
    rng = np.random.default_rng(SEED)
    questions = np.sort(items["question_id"].unique())
    cur_q = set(rng.permutation(questions)[: questions.size // 2].tolist())
    in_cur_q = items["question_id"].isin(cur_q)
    is_cur = (items["exam_taker"] == CURRENT) & in_cur_q
    is_hist = (items["exam_taker"] != CURRENT) & ~in_cur_q
    items = items[is_cur | is_hist].reset_index(drop=True)
    is_cur = (items["exam_taker"] == CURRENT).to_numpy()
    hist_items = items.loc[~is_cur, ["item_id", "exam_taker", "question_id"]]
    cur_items = items.loc[is_cur, ["item_id", "question_id"]]

    lab = labels.merge(items[["item_id", "exam_taker", "question_id"]], on="item_id", how="inner")
    hist_lab = lab[lab["exam_taker"] != CURRENT]
    cov_cols = ["q_log_chars", "q_log_aliases", "q_digits"]

    hist = hist_lab.rename(columns={"exam_taker": "round"})[["item_id", "labeler_id", "label", "round"]]
    hist.to_csv(out / "history.csv.gz", index=False)
    cur = lab[lab["exam_taker"] == CURRENT][["item_id", "labeler_id", "label"]]
    cur.to_csv(out / "current.csv.gz", index=False)

    hg = gold[gold["item_id"].isin(hist_items["item_id"])].reset_index(drop=True)
    hg = hg[rng.random(len(hg)) < GOLD_RATE]
    hg.to_csv(out / "history_gold.csv", index=False)

    items[~is_cur][["item_id", *cov_cols]].round(6).to_csv(
        out / "history_covariates.csv.gz", index=False)
    items[is_cur][["item_id", *cov_cols]].round(6).to_csv(
        out / "current_covariates.csv.gz", index=False)
    cg = gold[gold["item_id"].isin(cur_items["item_id"])]
    truth = {
        "current_round": CURRENT,
        "true_rate": float(cg["gold"].mean()),
        "n_current_items": len(cg),
        "history_rounds": sorted(hist["round"].unique().tolist()),
        "history_gold_items": len(hg),
        "questions": "history and current on disjoint random halves of the 400 questions",
        "gold_rate": GOLD_RATE,
        "seed": SEED,
    }
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    # every exam taker's true accuracy on its own items (all gold), for the store's worked example (docs/store.md)
    all_items = pd.concat([hist_items.rename(columns={"exam_taker": "round"})[["item_id", "round"]],
                           cur_items.assign(round=CURRENT)[["item_id", "round"]]])
    rates = all_items.merge(gold, on="item_id", how="inner").groupby("round")["gold"].agg(["mean", "count"])
    (out / "round_truth.json").write_text(json.dumps(
        {"what": "each exam taker's true accuracy: the mean human gold label over all its items here",
         "rounds": {r: {"true_rate": float(v["mean"]), "n_items": int(v["count"])} for r, v in rates.iterrows()}},
        indent=1) + "\n")
    print(json.dumps(truth, indent=1))


if __name__ == "__main__":
    main()
