"""Writing K-class data as the CSV files the command line reads (labels; gold on the items that have it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from heroeval.multiclass import MultiClassData


def write_round(d: MultiClassData, labels: Path, gold: Path | None = None) -> None:
    """``labels``: item_id, labeler_id, label; ``gold`` (if given): item_id, gold for the items with gold."""
    a = d.annotations
    i = a.annotation_item
    pd.DataFrame({"item_id": a.item_ids[i], "labeler_id": a.labeler_ids[a.labeler],
                  "label": np.array(d.classes)[a.label]}).to_csv(labels, index=False)
    if gold is not None:
        m = a.gold >= 0
        pd.DataFrame({"item_id": a.item_ids[m], "gold": np.array(d.classes)[a.gold[m]]}).to_csv(gold, index=False)
