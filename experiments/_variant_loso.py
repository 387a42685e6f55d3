"""What ``rg_shrinkage.py`` and ``stage_a_eb_prior.py`` share: a variant of a method against the plain method,
per (set, shift) cell, in-sample and with the variant chosen leave-one-set-out.

``w`` is a wide table with one row per cell, columns ``dataset``, ``shift`` and
``rmse_<m>``, ``coverage_<m>``, ``mean_width_<m>`` for the plain method's and the
variant's column suffix ``m``, and ``log_ratio = log(rmse_<variant> / rmse_<plain>)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

COVERAGE_SLACK = 0.01
"""The variant is chosen only if its mean coverage is at most this much below the plain method's."""


def cell_summary(rows: pd.DataFrame, by: str) -> pd.DataFrame:
    """Per (set, shift, ``by``): resamples, RMSE (failed estimates left out), bias, coverage of the 95 % interval,
    mean width and the number of failed (NaN) estimates, from per-resample rows with estimate, truth and interval."""
    d = rows.copy()
    d["err"] = d["estimate"] - d["truth"]
    d["cover"] = (d["ci_low"] <= d["truth"]) & (d["truth"] <= d["ci_high"])
    d["width"] = d["ci_high"] - d["ci_low"]
    return d.groupby(["dataset", "shift", by], sort=False).agg(
        resamples=("err", "size"), rmse=("err", lambda e: float(np.sqrt(np.nanmean(np.square(e))))),
        bias=("err", "mean"), coverage=("cover", "mean"), mean_width=("width", "mean"),
        failed=("estimate", lambda e: int(np.isnan(e).sum()))).reset_index()


def loso_choice(w: pd.DataFrame, plain: str, variant: str) -> dict[str, str]:
    """For each held-out set: ``variant`` if on the other sets' cells its gm RMSE ratio to ``plain`` is below 1 and
    its mean coverage is no more than :data:`COVERAGE_SLACK` below; else ``plain``."""
    out = {}
    for s in w["dataset"].unique():
        rest = w[w["dataset"] != s]
        gm = math.exp(float(rest["log_ratio"].mean()))
        cov_ok = rest[f"coverage_{variant}"].mean() >= rest[f"coverage_{plain}"].mean() - COVERAGE_SLACK
        out[s] = variant if gm < 1 and cov_ok else plain
    return out


def add_choice(w: pd.DataFrame, plain: str, variant: str) -> pd.DataFrame:
    """``w`` with the leave-one-set-out choice per set (``chosen``) and the chosen method's RMSE, coverage and log
    RMSE ratio to ``plain``."""
    w["chosen"] = w["dataset"].map(loso_choice(w, plain, variant))
    v = w["chosen"] == variant
    w["rmse_chosen"] = np.where(v, w[f"rmse_{variant}"], w[f"rmse_{plain}"])
    w["coverage_chosen"] = np.where(v, w[f"coverage_{variant}"], w[f"coverage_{plain}"])
    w["log_ratio_chosen"] = np.log(w["rmse_chosen"] / w[f"rmse_{plain}"])
    return w


def comparison_table(w: pd.DataFrame, plain: str, variant: str, shifts: Sequence[str], names: tuple[str, str]
                     ) -> list[str]:
    """The variant against the plain method per shift and over all cells, in-sample and leave-one-set-out (after
    :func:`add_choice`); ``names`` are how the header calls the plain method and the variant."""
    p, v = names
    lines = [f"| shift | sets | gm RMSE ratio {v}/{p} | {v} better in | coverage {p} | coverage {v} | width {p} "
             f"| width {v} | LOSO: {v} chosen for | LOSO gm ratio chosen/{p} | LOSO coverage chosen |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for sh in (*shifts, "all"):
        x = w if sh == "all" else w[w["shift"] == sh]
        lines.append(
            f"| {sh} | {len(x)} | {math.exp(x['log_ratio'].mean()):.3f} | {int((x['log_ratio'] < 0).sum())} of {len(x)} "
            f"| {x[f'coverage_{plain}'].mean():.3f} | {x[f'coverage_{variant}'].mean():.3f} "
            f"| {x[f'mean_width_{plain}'].mean():.3f} | {x[f'mean_width_{variant}'].mean():.3f} "
            f"| {int((x['chosen'] == variant).sum())} of {len(x)} "
            f"| {math.exp(x['log_ratio_chosen'].mean()):.3f} | {x['coverage_chosen'].mean():.3f} |")
    return lines
