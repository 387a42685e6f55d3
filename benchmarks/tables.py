"""A markdown table from a DataFrame without the optional tabulate dependency."""

from __future__ import annotations

import pandas as pd


def markdown(df: pd.DataFrame, digits: int = 3) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.{digits}f}"
        return str(v)

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    sep = "|" + "|".join("---:" for _ in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *body])
