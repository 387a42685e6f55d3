"""Labeler drift for K classes: does each labeler's current label distribution match its calibration?

HERO-1 assumes each labeler's confusion matrix ``pi_j`` (rows: true class, columns: label) is the same in the
current round as in the history. Whatever the dependence between labelers, labeler j's current labels then have
the marginal distribution

    q_j = p' pi_j      (a K-vector: p the round's class shares),

and the counts ``n_j`` of j's ``m_j`` current labels, when j's items are a random draw from the round, are
Multinomial(m_j, q_j). :func:`check_drift_multiclass` compares ``n_j / m_j`` with ``q_j`` at HERO-1's estimate
``p_hat`` and the calibration's matrices (the K-class form of :func:`heroeval.checks.drift.check_drift`):

* **Residual and its covariance.** ``r_j = n_j / m_j - q_j`` with covariance the sum of three parts: the
  multinomial ``(diag q - q q') / m_j``; ``p_hat``'s, ``pi_j' V_p pi_j`` (``V_p`` HERO-1's covariance; the
  correlation with ``n_j``, from which ``p_hat`` is partly fitted, is left out, which overstates the variance);
  and the calibration's, each row ``c`` of ``pi_j`` taken as known to a Dirichlet's spread ``(diag r - r r') /
  (h_jc + 1)``, ``h_jc`` the labeler's history labels times the history's share of class ``c``, weighted by
  ``p_hat_c^2`` (an approximation that overstates the spread of the one-parameter structures).
* **Per-labeler test.** ``T_j = r_j' S_j^+ r_j`` against chi-squared with ``K - 1`` degrees of freedom (the
  residual sums to 0), where every expected count ``m_j q_jc`` is at least :data:`MIN_EXPECTED`; labelers with
  fewer labels are listed as not tested (no test of them could reach a small p-value).
* **Multiplicity.** Holm (default) or Benjamini–Hochberg over the tested labelers
  (:func:`heroeval.core.multiple.tarone_adjust`); ``overall_p`` is the Holm-adjusted smallest p-value (the
  family-wise test that some labeler drifted).

The check tests each labeler's own rows: with a restricted structure (``symmetric``, ``ordinal``) a labeler whose
errors are class-specific does not fit, and the misfit reads as drift (a note says so); use ``structure="full"``.
Labelers unknown to the calibration are left out, with a note. Size and power: ``benchmarks/multiclass_drift.py``
(random splits of the shared sets, where nothing drifts by construction, and one labeler's labels shifted by a
class); ``tests/multiclass/test_drift.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import chi2

from heroeval.core.multiple import tarone_adjust
from heroeval.errors import HeroEvalError
from heroeval.multiclass.calibration import MultiClassCalibration
from heroeval.multiclass.data import MultiClassData, as_multiclass
from heroeval.multiclass.estimators import MultiClassEstimate, hero1_multiclass

__all__ = ["MIN_EXPECTED", "MultiClassDriftCheck", "check_drift_multiclass"]

FloatArray = npt.NDArray[np.float64]

MIN_EXPECTED = 5.0
"""A labeler is tested when each of its expected label counts ``m_j q_jc`` reaches this (Cochran's rule for the
chi-squared approximation)."""


@dataclass(frozen=True)
class MultiClassDriftCheck:
    """The K-class drift check of a round (:func:`check_drift_multiclass`): one row per labeler in ``table``."""

    table: pd.DataFrame
    significance: float
    adjust: str
    overall_p: float
    flagged: tuple[str, ...]
    n_tested: int
    n_untested: int
    excluded: tuple[str, ...]
    estimate: MultiClassEstimate
    notes: tuple[str, ...] = ()

    def to_frame(self) -> pd.DataFrame:
        return self.table.copy()

    def summary(self) -> str:
        head = (f"labeler drift (K classes): {self.n_tested} labeler(s) tested, {self.n_untested} with too few labels "
                f"to test (an expected count below {MIN_EXPECTED:g}); overall p = {self.overall_p:.3g} ({self.adjust})")
        if self.flagged:
            head += (f"; {len(self.flagged)} flagged at {self.significance:g}: {', '.join(self.flagged[:10])}"
                     f"{' ...' if len(self.flagged) > 10 else ''}: their current labels do not follow their history "
                     "confusion matrices at this round's estimated shares, which HERO-1 assumes")
        else:
            head += f"; none flagged at {self.significance:g}"
        return head + "".join(f"\nnote: {n}" for n in self.notes)

    def to_dict(self) -> dict[str, Any]:
        return {"significance": self.significance, "adjust": self.adjust, "overall_p": _num(self.overall_p),
                "flagged": list(self.flagged), "n_tested": self.n_tested, "n_untested": self.n_untested,
                "excluded": list(self.excluded), "notes": list(self.notes),
                "labelers": [{k: _num(v) if isinstance(v, float) else v for k, v in r.items()}
                             for r in self.table.to_dict(orient="records")]}

    def _repr_html_(self) -> str:
        return f"<p>{self.summary()}</p>" + self.table.to_html(index=False, float_format=lambda x: f"{x:.4g}")


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else float(x)


def check_drift_multiclass(current: MultiClassData, calibration: MultiClassCalibration, *,
                           estimate: MultiClassEstimate | None = None, significance: float = 0.05,
                           adjust: str = "holm") -> MultiClassDriftCheck:
    """Test each labeler's current label distribution against its calibration (module docstring).

    ``estimate``: the round's HERO-1 estimate (computed, leaving unknown labelers out, when not given).
    """
    cur = as_multiclass(current, "current")
    if cur.classes != calibration.classes:
        raise HeroEvalError(f"the current round's classes {list(cur.classes)} differ from the calibration's "
                            f"{list(calibration.classes)}")
    if not 0 < significance < 1:
        raise HeroEvalError(f"significance must be in (0, 1), got {significance!r}")
    if adjust not in ("holm", "bh"):
        raise HeroEvalError(f"adjust must be 'holm' or 'bh', got {adjust!r}")
    est = hero1_multiclass(cur, calibration, exclude_new_labelers=True) if estimate is None else estimate
    K = cur.n_classes
    ds = cur.annotations
    index = calibration.index_of()
    names = [str(x) for x in ds.labeler_ids]
    counts = np.zeros((len(names), K))
    np.add.at(counts, (ds.labeler.astype(np.int64), ds.label.astype(np.int64)), 1.0)
    p = np.clip(est.estimate, 0.0, 1.0)
    p = p / p.sum()
    V_p = est.covariance()
    V_p = np.where(np.isfinite(V_p), V_p, 0.0)
    w_hist = calibration.round_n_items.astype(float)
    prev = (w_hist @ calibration.round_prevalence) / max(float(w_hist.sum()), 1.0)
    rows, excluded = [], []
    for j, name in enumerate(names):
        m = float(counts[j].sum())
        if m == 0:
            continue
        c = index.get(name)
        if c is None:
            excluded.append(name)
            continue
        conf = calibration.confusion[c]
        q = p @ conf
        r = counts[j] / m - q
        S = (np.diag(q) - np.outer(q, q)) / m + conf.T @ V_p @ conf
        h = float(calibration.n_annotations[c]) * prev
        for k in range(K):
            row = conf[k]
            S = S + p[k] ** 2 * (np.diag(row) - np.outer(row, row)) / (h[k] + 1.0)
        tested = bool(np.all(m * q >= MIN_EXPECTED))
        T = float(r @ np.linalg.pinv(S, rcond=1e-10, hermitian=True) @ r) if tested else math.nan
        rows.append({"labeler": name, "labels": int(m), "tested": tested, "statistic": T,
                     "df": K - 1, "p_value": float(chi2.sf(T, K - 1)) if tested else math.nan,
                     **{f"observed {cl}": float(counts[j, k] / m) for k, cl in enumerate(cur.classes)},
                     **{f"expected {cl}": float(q[k]) for k, cl in enumerate(cur.classes)}})
    table = pd.DataFrame(rows)
    notes: list[str] = []
    if calibration.structure != "full":
        notes.append(f"the calibration's structure is {calibration.structure!r}: it cannot represent each labeler's "
                     "class-specific errors, and that misfit reads as drift (on random splits of dog, where nothing "
                     "drifts, symmetric flagged 4-5 labelers a round, full 0-1); calibrate with structure='full' "
                     "for this check")
    if excluded:
        notes.append(f"{len(excluded)} labeler(s) unknown to the calibration left out: "
                     f"{', '.join(excluded[:5])}{' ...' if len(excluded) > 5 else ''}")
    if table.empty:
        return MultiClassDriftCheck(table, significance, adjust, math.nan, (), 0, 0, tuple(excluded), est,
                                    (*notes, "no labeler of the round is known to the calibration"))
    pv = table["p_value"].to_numpy(dtype=float)
    adj = tarone_adjust(pv, np.where(np.isfinite(pv), 0.0, np.nan), adjust, significance)
    table["p_adjusted"] = adj
    table["flagged"] = np.isfinite(adj) & (adj <= significance)
    n_tested = int(table["tested"].sum())
    overall = float(np.nanmin(adj)) if n_tested else math.nan
    if not n_tested:
        notes.append(f"no labeler has enough labels to test (every expected count at least {MIN_EXPECTED:g})")
    flagged = tuple(table.loc[table["flagged"], "labeler"].astype(str))
    return MultiClassDriftCheck(table, significance, adjust, overall, flagged, n_tested, len(table) - n_tested,
                                tuple(excluded), est, tuple(notes))
