"""Heatmaps of a multi-class calibration's confusion matrices (for reports)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from heroeval.multiclass.calibration import MultiClassCalibration

__all__ = ["plot_confusion_matrices"]


def plot_confusion_matrices(calibration: MultiClassCalibration, *, labelers: Sequence[str] | None = None,
                            max_labelers: int = 12, annotate: bool = True) -> Any:
    """One heatmap per labeler of ``P(label | true class)``; returns a matplotlib ``Figure``.

    Without ``labelers`` the ``max_labelers`` labelers with the most history
    annotations are shown (in that order). Rows are true classes, columns the
    labels; each row sums to 1.

    Examples
    --------
    >>> from heroeval.multiclass import multiclass_from_arrays, calibrate_multiclass
    >>> h = multiclass_from_arrays([1, 1, 2, 2], ["a", "b"] * 2, [0, 0, 1, 2], classes=[0, 1, 2], gold=([1, 2], [0, 1]))
    >>> fig = plot_confusion_matrices(calibrate_multiclass(h, structure="symmetric"))
    >>> len(fig.axes) >= 2
    True
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cal = calibration
    if labelers is None:
        order = np.argsort(-cal.n_annotations, kind="stable")[:max_labelers]
    else:
        index = cal.index_of()
        missing = [x for x in labelers if x not in index]
        if missing:
            raise ValueError(f"labelers not in the calibration: {missing[:5]}")
        order = np.array([index[x] for x in labelers], dtype=np.int64)
    n = max(1, order.size)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    K = cal.n_classes
    size = 1.0 + 0.45 * K
    fig, axes = plt.subplots(rows, cols, figsize=(cols * size + 1.2, rows * size + 0.6), squeeze=False,
                             constrained_layout=True)
    im = None
    for ax in axes.ravel()[order.size:]:
        ax.set_visible(False)
    for ax, j in zip(axes.ravel(), order, strict=False):
        m = cal.confusion[j]
        im = ax.imshow(m, vmin=0, vmax=1, cmap="Blues")
        ax.set_title(f"{cal.labeler_ids[j]} (n={int(cal.n_annotations[j])})", fontsize=8)
        ax.set_xticks(range(K), cal.classes, fontsize=7)
        ax.set_yticks(range(K), cal.classes, fontsize=7)
        ax.set_xlabel("label", fontsize=7)
        ax.set_ylabel("true class", fontsize=7)
        if annotate and K <= 6:
            for c in range(K):
                for lab in range(K):
                    ax.text(lab, c, f"{m[c, lab]:.2f}", ha="center", va="center", fontsize=6,
                            color="white" if m[c, lab] > 0.6 else "black")
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="P(label | class)")
    fig.suptitle(f"Confusion matrices ({cal.structure} structure)", fontsize=10)
    return fig
