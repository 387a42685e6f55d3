"""Write src/heroeval/examples/triviaqa/current_truth.csv: the gold label of every item of the bundled current round.

    .venv/bin/python scripts/build_current_truth.py [--data ../shared/data/triviaqa_llm_judges]

The labels are the human judgments of shared/data/triviaqa_llm_judges (see the example's PROVENANCE.md).
The current round's estimates never read this file; docs/current_gold.md uses it to play the experts who
label the items `hero select` chose.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from heroeval.ingest.read import read_annotations
from heroeval.workflows.demo import example_paths


def main() -> None:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(here.parent / "shared" / "data" / "triviaqa_llm_judges"))
    a = ap.parse_args()
    p = example_paths()
    cur = read_annotations(p["current"])
    gold = pd.read_csv(Path(a.data) / "gold.csv", dtype={"item_id": str}).set_index("item_id")["gold"]
    ids = cur.item_ids.astype(str)
    out = pd.DataFrame({"item_id": ids, "gold": gold.loc[ids].astype(int).to_numpy()})
    out.to_csv(p["current"].parent / "current_truth.csv", index=False)
    print(f"{len(out)} items, gold rate {out['gold'].mean():.6f}")


if __name__ == "__main__":
    main()
