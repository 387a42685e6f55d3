"""The predictor's residuals on the history's gold at a round's rate: what expert labels on the round will cost.

The spread of the residual ``y - lam f`` of the posterior predictor ``f``
that the estimate with current gold rectifies
(:func:`heroeval.estimators.ppi.choose_predictor`), measured on the
history's gold items weighted by class to the round's rate ``mu``
(:func:`heroeval.stage_a.checks_record.class_weights`): cross-fitted on the
model checks' held-out gold items when the calibration carries them, else
in-sample on its gold scores (optimistic). The plan
(:mod:`heroeval.inference.gold_plan`) sizes the gold sample from it; the
stratified design (:mod:`heroeval.inference.select`) allocates it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from heroeval.estimators.ppi import choose_predictor, item_posterior
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.checks_record import class_weights

__all__ = ["MeasuredResiduals", "measured_residuals"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class MeasuredResiduals:
    """The predictor's residuals on the history's gold at the round's rate: what ``k`` expert labels will cost."""

    y: FloatArray
    f: FloatArray
    weight: FloatArray  # class weights to the round's rate
    lam: float
    variance: float  # weighted residual spread S^2
    evidence: str  # "cross-fitted" (the model checks' held-out gold) or "in-sample" (the calibration's gold scores)
    n_gold: int
    predictor: str = "hero1"  # the posterior the estimate will rectify (heroeval.estimators.ppi.choose_predictor)

    @property
    def residual(self) -> FloatArray:
        r: FloatArray = self.y - self.lam * self.f
        return r


def measured_residuals(calibration: Calibration, mu: float) -> MeasuredResiduals | None:
    """The posterior predictor's residuals on the history's gold weighted to rate ``mu`` (module docstring).

    The predictor is the one the estimate rectifies
    (:func:`heroeval.estimators.ppi.choose_predictor`). Cross-fitted when the
    calibration carries its model checks (their held-out gold items'
    log-likelihood ratios: HERO's at the calibration's history weight, else at
    weight 1, or the gold-proportion rates'), in-sample from its gold scores
    otherwise; ``None`` with neither, or when the gold has one class only.
    """
    ch = calibration.checks
    own_w = float(calibration.settings.get("history_weight", 1.0))
    y = llr = None
    evidence = ""
    predictor = choose_predictor(calibration).predictor
    keys = ["gold_proportion:llr"] if predictor == "gold_proportion" else [f"hero1@{hw:g}:llr" for hw in (own_w, 1.0)]
    if ch is not None and "y" in ch.items:
        for key in keys:
            if key in ch.items:
                y, llr, evidence = np.asarray(ch.items["y"], float), np.asarray(ch.items[key], float), "cross-fitted"
                break
    if y is None and calibration.gold_scores is not None:
        y, llr, evidence = calibration.gold_scores.y, calibration.gold_scores.llr, "in-sample"
    if y is None or llr is None or y.size < 2 or not 0 < float(y.mean()) < 1:
        return None
    f = item_posterior(llr, mu)
    w = class_weights(y, mu)
    w = w / w.sum()
    fb, yb = float(w @ f), float(w @ y)
    sxx = float(w @ (f - fb) ** 2)
    lam = float(min(max(float(w @ ((f - fb) * (y - yb))) / sxx, 0.0), 1.0)) if sxx > 1e-12 else 0.0
    r = y - lam * f
    var = float(w @ (r - float(w @ r)) ** 2) * y.size / max(y.size - 1, 1)
    return MeasuredResiduals(y, f, w, lam, var, evidence, int(y.size), predictor)
