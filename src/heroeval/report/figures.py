"""The report's figures: matplotlib SVGs embedded as ``data:`` images (labelers by number, never by name)."""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["COLOURS", "MAX_PLOTTED_LABELERS", "as_float", "forest_svg", "labeler_map_svg", "mpl", "pool_svg", "svg_img"]


COLOURS = {
    "recommended": "#000000",
    "hero1": "#1f77b4",
    "hero2": "#d62728",
    "hero_joint": "#2ca02c",
    "majority_vote": "#7f7f7f",
    "dawid_skene": "#9467bd",
    "gold_proportion": "#ff7f0e",
}


MAX_PLOTTED_LABELERS = 40


def svg_img(fig: Any, alt: str, fig_id: str) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    b64 = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f'<img class="figure" id="{fig_id}" alt="{html.escape(alt)}" '
            f'src="data:image/svg+xml;base64,{b64}">')


def mpl() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "heroeval", "font.size": 9})
    return plt


def as_float(x: Any) -> float:
    return math.nan if x is None else float(x)


def _short(name: Any, n: int = 22) -> str:
    s = " ".join(str(name).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def forest_svg(rows: Sequence[Mapping[str, Any]], *, xlabel: str, ref: float | None, ref_label: str,
            truth: float | None, fig_id: str, alt: str, diff: bool = False) -> str:
    plt = mpl()
    n = max(len(rows), 1)
    fig, ax = plt.subplots(figsize=(7.2, 0.42 * n + 1.3), layout="constrained")
    ys = np.arange(len(rows))[::-1]
    for y, r in zip(ys, rows, strict=True):
        key = str(r["key"])
        est, lo, hi = as_float(r["estimate"]), as_float(r["ci_low"]), as_float(r["ci_high"])
        colour = COLOURS.get(key, "#444444")
        if math.isfinite(lo) and math.isfinite(hi):
            ax.plot([lo, hi], [y, y], color=colour, lw=2.2, solid_capstyle="butt")
        ax.plot([est], [y], marker="D" if key != "majority_vote" else "o", color=colour, ms=7,
                markeredgecolor="white" if key != "recommended" else "#000000")
    if ref is not None and math.isfinite(ref):
        ax.axvline(ref, color="#7f7f7f", ls="--", lw=1, label=ref_label)
    if truth is not None:
        ax.axvline(truth, color="#000000", ls=":", lw=1.4, label="true gold rate")
    if diff:
        ax.axvline(0.0, color="#000000", lw=0.8)
    ax.set_yticks(ys, [str(r["label"]) for r in rows])
    for t in ax.get_yticklabels():
        t.set_parse_math(False)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False, fontsize=8)
    return svg_img(fig, alt, fig_id)


def _label_offsets(x: np.ndarray, y: np.ndarray, near: float = 0.025) -> list[tuple[int, int]]:
    """Text offsets (points) for the map's labels: a label whose point is within ``near`` of an earlier one
    takes the next free corner, so close labelers' numbers do not print over each other."""
    corners = [(7, 5), (7, -11), (-13, 5), (-13, -11), (0, 12), (0, -17)]
    placed: list[tuple[float, float, int]] = []
    out = []
    for xi, yi in zip(x.tolist(), y.tolist(), strict=True):
        taken = {k for px, py, k in placed if abs(px - xi) < near and abs(py - yi) < near}
        k = next((c for c in range(len(corners)) if c not in taken), len(placed) % len(corners))
        placed.append((xi, yi, k))
        out.append(corners[k])
    return out


def labeler_map_svg(labelers: Sequence[Mapping[str, Any]], fig_id: str) -> str:
    plt = mpl()
    fig, ax = plt.subplots(figsize=(6.4, 5.4), layout="constrained")
    shown = sorted(labelers, key=lambda r: -int(r["n_history_labels"]))[:MAX_PLOTTED_LABELERS]
    sens = np.array([as_float(r["sensitivity"]) for r in shown])
    spec = np.array([as_float(r["specificity"]) for r in shown])
    vol = np.array([float(r["n_history_labels"]) for r in shown])
    gold = np.array([float(r["gold_overlap"]) for r in shown])
    size = 20 + (400 if len(shown) <= 15 else 160) * np.sqrt(vol / max(vol.max(initial=1.0), 1.0))
    for r, x, y in zip(shown, spec, sens, strict=True):
        slo, shi = (as_float(v) for v in r["specificity_ci"])
        tlo, thi = (as_float(v) for v in r["sensitivity_ci"])
        if math.isfinite(slo) and math.isfinite(shi):
            ax.plot([slo, shi], [y, y], color="#888888", lw=1, zorder=1)
        if math.isfinite(tlo) and math.isfinite(thi):
            ax.plot([x, x], [tlo, thi], color="#888888", lw=1, zorder=1)
    # colour by gold overlap only when it differs enough to matter (the largest at least 1.5x the smallest);
    # otherwise one colour, and the title gives the range
    g_lo, g_hi = (float(np.nanmin(gold)), float(np.nanmax(gold))) if gold.size else (math.nan, math.nan)
    varied = bool(gold.size) and g_hi >= 1.5 * max(g_lo, 1.0)
    sc = ax.scatter(spec, sens, s=size, c=gold if varied else "#3b75af", cmap="viridis" if varied else None,
                    edgecolors="#333333", linewidths=0.6, zorder=2, alpha=0.9)
    for r, x, y, (dx, dy) in zip(shown, spec, sens, _label_offsets(spec, sens), strict=True):
        ax.annotate(str(int(r["index"])), (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=7, zorder=3,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    lo = float(min(0.4, np.nanmin(np.r_[sens, spec], initial=1.0) - 0.05))
    ax.plot([lo, 1.0], [1.0, lo], color="#bbbbbb", ls="--", lw=0.8)
    ax.text(lo + 0.01, 1.0 - 0.02, "sensitivity + specificity = 1 (coin flip)", fontsize=7, color="#888888",
            rotation=0, va="top")
    ax.set_xlim(lo, 1.02)
    ax.set_ylim(lo, 1.02)
    ax.set_xlabel("specificity  P(label 0 | gold 0)")
    ax.set_ylabel("sensitivity  P(label 1 | gold 1)")
    ax.set_aspect("equal")
    if varied:  # a colour bar only when the colours say something
        cb = fig.colorbar(sc, ax=ax, shrink=0.8)
        cb.set_label("gold items the labeler labelled")
        ax.set_title("marker area: history labels; numbers: labeler table rows", fontsize=8)
    else:
        each = ("" if not (gold.size and math.isfinite(g_lo)) else f"; each labelled {int(g_lo)} gold items"
                if g_lo == g_hi else f"; each labelled {int(g_lo)}–{int(g_hi)} gold items")
        ax.set_title(f"marker area: history labels; numbers: labeler table rows{each}", fontsize=8)
    return svg_img(fig, "Labeler map: each labeler's sensitivity against specificity with intervals", fig_id)


def pool_svg(pool: Mapping[str, Any], fig_id: str) -> str:
    plt = mpl()
    cols = list(pool["columns"])
    rows = sorted(pool["labelers"], key=lambda r: -max(float(r[f"{c}_share"]) for c in cols))[:MAX_PLOTTED_LABELERS]
    rows = rows[::-1]
    fig, ax = plt.subplots(figsize=(6.4, 0.28 * len(rows) * max(1, len(cols) - 1) + 1.6), layout="constrained")
    h = 0.8 / len(cols)
    palette = ["#bbbbbb", "#1f77b4", "#ff7f0e"]
    y = np.arange(len(rows))
    for k, c in enumerate(cols):
        ax.barh(y + (len(cols) - 1 - k) * h - 0.4 + h / 2, [float(r[f"{c}_share"]) for r in rows], height=h,
                color=palette[k % len(palette)], label=f"{c}")
    ax.set_yticks(y, [(f"#{r['index']} " if r["index"] is not None else "new: ") + _short(r["id"]) for r in rows])
    for t in ax.get_yticklabels():
        t.set_parse_math(False)
    ax.set_xlabel("share of the round's labels")
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(cols), frameon=False)
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    return svg_img(fig, "Labeler pool shift: each labeler's share of the labels in the history and the current round",
                    fig_id)
