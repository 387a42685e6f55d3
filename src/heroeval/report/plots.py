"""Figures with matplotlib (Agg backend: files only, no display)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from heroeval.estimators.table import METHOD_TITLES

__all__ = ["plot_benchmark", "plot_sweep"]

_STYLE = {
    "majority_vote": ("#7f7f7f", "o"),
    "dawid_skene": ("#9467bd", "v"),
    "gold_proportion": ("#ff7f0e", "s"),
    "hero1": ("#1f77b4", "D"),
    "hero2": ("#d62728", "^"),
    "hero_joint": ("#2ca02c", "P"),
    "rogan_gladen": ("#8c564b", "X"),
    "auto": ("#17becf", "*"),  # the recommended estimate, scored by the benchmark as method "auto"
}


def _title(method: str) -> str:
    return METHOD_TITLES.get(method, "recommended (auto)" if method == "auto" else method)


def plot_sweep(summary: pd.DataFrame, x: str, out: Path, title: str, *, logx: bool = False) -> list[Path]:
    """RMSE and |bias| against ``x`` per method, in the style of the paper's figures.

    One figure per value of the other varying setting (e.g. one per rho in
    the heterogeneity experiment). Writes PNG and SVG; returns the paths.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [c for c in ("rho", "k", "labels_per_item", "pool_shift") if c != x and summary[c].nunique(dropna=False) > 1]
    groups = summary.groupby(others, dropna=False, sort=False) if others else [((), summary)]
    paths: list[Path] = []
    for key, g in groups:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
        for m, (color, marker) in _STYLE.items():
            gm = g[g["method"] == m].sort_values(x)
            if gm.empty:
                continue
            xs = gm[x].astype(float)
            for ax, col in zip(axes, ("rmse", "abs_bias"), strict=True):
                ax.plot(xs, gm[col], color=color, marker=marker, label=_title(m))
        for ax, lab in zip(axes, ("RMSE", "|bias|"), strict=True):
            ax.set_xlabel({"rho": "history gold rate rho", "k": "Beta concentration k (larger = more homogeneous)",
                           "labels_per_item": "labels per item"}.get(x, x))
            ax.set_ylabel(lab)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            if logx:
                ax.set_xscale("log")
        axes[0].legend(fontsize=8)
        keyt = key if isinstance(key, tuple) else (key,)
        suffix = "_".join(
            (f"{o}{v:g}" if isinstance(v, float) else f"{o}{v}").replace(".", "p") for o, v in zip(others, keyt, strict=True)
        )
        fig.suptitle(title + (f" ({', '.join(f'{o}={v}' for o, v in zip(others, keyt, strict=True))})" if others else ""))
        stem = out / (f"{x}_sweep" + (f"_{suffix}" if suffix else ""))
        for ext in ("png", "svg"):
            path = stem.parent / f"{stem.name}.{ext}"
            fig.savefig(path, dpi=120)
            paths.append(path)
        plt.close(fig)
    return paths


def plot_benchmark(summary: pd.DataFrame, out: Path, title: str) -> list[Path]:
    """Grouped bars of RMSE per method for each (rho, shift) setting of one data set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    settings = list(dict.fromkeys(zip(summary["rho"], summary["shift"], strict=True)))
    methods = [m for m in _STYLE if m in set(summary["method"])]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(settings) + 2), 4), constrained_layout=True)
    width = 0.8 / max(1, len(methods))
    for j, m in enumerate(methods):
        vals = []
        for rho, shift in settings:
            row = summary[(summary["rho"] == rho) & (summary["shift"] == shift) & (summary["method"] == m)]
            vals.append(float(row["rmse"].iloc[0]) if len(row) else np.nan)
        ax.bar(np.arange(len(settings)) + j * width, vals, width, color=_STYLE[m][0],
               label=_title(m))
    ax.set_xticks(np.arange(len(settings)) + 0.4 - width / 2)
    ax.set_xticklabels([f"rho={r:g}\nshift={sh}" for r, sh in settings])
    ax.set_ylabel("RMSE against the current round's gold rate")
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    paths = []
    for ext in ("png", "svg"):
        path = out / f"benchmark_rmse.{ext}"
        fig.savefig(path, dpi=120)
        paths.append(path)
    plt.close(fig)
    return paths
