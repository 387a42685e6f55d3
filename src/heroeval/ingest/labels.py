"""Ingest: parsing label columns.

A binary label or gold column is parsed to int8 codes and a missing mask (:func:`parse_binary`, the default
:data:`LabelParser`; the multi-class reader passes its own), after an optional recoding by a ``label_map``
(:func:`_apply_label_map`). A value that is not binary is a DataError naming the source, row and value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.errors import DataError
from heroeval.ingest.coding import _is_plain_int
from heroeval.ingest.tables import LoadedTable

_TRUE = frozenset({"1", "true", "t", "yes", "1.0"})
_FALSE = frozenset({"0", "false", "f", "no", "0.0"})


def _apply_label_map(
    t: LoadedTable, df: pd.DataFrame, col: str, label_map: Mapping[Any, int | None], what: str
) -> tuple[pd.DataFrame, npt.NDArray[np.bool_]]:
    """Recode ``col`` by ``label_map`` (keys compared as stripped strings); None marks rows to drop."""
    table = {str(k).strip(): v for k, v in label_map.items()}
    for k, v in table.items():
        if v not in (0, 1, None):
            raise DataError(f"label_map: {k!r} maps to {v!r}; values must be 0, 1 or None")
    raw = df[col]
    miss = raw.isna().to_numpy()
    keys = raw.astype("string").str.strip()
    known = keys.isin(list(table)).fillna(False).to_numpy(dtype=bool)
    # values already binary (0/1, true/false, ...) that the map does not name pass through unchanged
    low = keys.str.lower()
    binary = {**{k: 1 for k in _TRUE}, **{k: 0 for k in _FALSE}}
    passthrough = ~miss & ~known & low.isin(list(binary)).fillna(False).to_numpy(dtype=bool)
    unknown = ~miss & ~known & ~passthrough
    if unknown.any():
        r = int(np.flatnonzero(unknown)[0])
        raise DataError(
            f"{t.where(r)}: {what} {raw.iloc[r]!r} in column {col!r} is not in label_map "
            f"(keys {sorted(table)}; values already 0/1 or true/false pass through); "
            f"{int(unknown.sum())} such row(s) in all"
        )
    mapped = keys.map(table)
    if passthrough.any():
        mapped = mapped.astype(object)
        mapped[passthrough] = low[passthrough].map(binary).to_numpy(dtype=object)
    drop = (~miss & mapped.isna().to_numpy()).astype(bool)
    out = df.copy()
    out[col] = pd.to_numeric(mapped, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return out, drop


LabelParser = Callable[[pd.Series, "LoadedTable", str, str], tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_]]]
"""``(column, table, column name, what) -> (int8 codes, missing mask)``; ``build_annotation_set`` takes one (multi-class hook)."""


def parse_binary(s: pd.Series, t: LoadedTable, col: str, what: str) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_]]:
    """Parse a binary column; returns values (int8) and a missing mask.

    Raises a DataError naming the first offending row and value.
    """
    missing = s.isna().to_numpy()
    n = len(s)
    out = np.zeros(n, dtype=np.int8)
    if pd.api.types.is_bool_dtype(s.dtype):
        out[~missing] = s[~missing].astype(bool).to_numpy()
        return out, missing
    if _is_plain_int(s.dtype):  # no missing values, no float copy
        ints = s.to_numpy()
        bad = (ints != 0) & (ints != 1)
        if bad.any():
            _bad_value(t, col, what, bad, s)
        return ints.astype(np.int8), missing
    if pd.api.types.is_numeric_dtype(s.dtype):
        vals = s.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~missing & (vals != 0) & (vals != 1)
        if bad.any():
            _bad_value(t, col, what, bad, s)
        out[~missing] = vals[~missing].astype(np.int8)
        return out, missing
    low = s.astype("string").str.strip().str.lower()
    missing = missing | (low == "").fillna(True).to_numpy()
    is_true = low.isin(_TRUE).fillna(False).to_numpy(dtype=bool)
    is_false = low.isin(_FALSE).fillna(False).to_numpy(dtype=bool)
    bad = ~missing & ~is_true & ~is_false
    if bad.any():
        _bad_value(t, col, what, bad, s)
    out[is_true] = 1
    return out, missing


def _bad_value(t: LoadedTable, col: str, what: str, bad: npt.NDArray[np.bool_], s: pd.Series) -> None:
    where, value, count = t.first_bad(bad, s)
    raise DataError(
        f"{where}: {what} {value!r} in column {col!r} is not binary "
        f"(expected 0/1 or true/false); {count} such row(s) in all. "
        "Recode other values with label_map= (e.g. {'A': 1, 'B': 0, 'tie': None}), or read multi-class labels "
        "with heroeval.multiclass (classes=)."
    )
