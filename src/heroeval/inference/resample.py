"""The two-sample cluster bootstrap: resample the history's and the current round's items (or groups), refit
Stage A, rerun the methods. The check on the influence-function standard errors (docs/inference.md,
"Bootstrap")."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.errors import ConvergenceWarning, HeroEvalError
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.registry import estimate_methods
from heroeval.estimators.results import ConfidenceInterval, check_level, jsonable
from heroeval.estimators.table import METHODS
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.fit import fit_stage_a
from heroeval.stage_a.settings import EMSettings, FitSettings

__all__ = ["BootstrapResult", "bootstrap", "resample_items"]

FloatArray = npt.NDArray[np.float64]



@dataclass(frozen=True)
class BootstrapResult:
    """A two-sample cluster bootstrap of one method's estimate.

    History items and current items are resampled with replacement (each
    item with all its labels), Stage A is refitted, and the method rerun.
    ``unit`` says what was drawn: ``"items"``, or ``"groups"`` when the
    current round has item groups (:meth:`AnnotationSet.with_groups`; whole
    groups drawn with replacement, the cluster bootstrap).
    """

    method: str
    estimate: float
    replicates: FloatArray = field(repr=False)
    n_failed: int = 0
    unit: str = "items"

    @property
    def standard_error(self) -> float:
        r = self.replicates[np.isfinite(self.replicates)]
        return float(np.std(r, ddof=1)) if r.size > 1 else math.nan

    def confidence_interval(self, confidence_level: float = 0.95, method: str = "percentile") -> ConfidenceInterval:
        """``"percentile"``: quantiles of the replicates; ``"basic"``: 2 * estimate minus them."""
        level = check_level(confidence_level)
        r = self.replicates[np.isfinite(self.replicates)]
        if r.size < 2:
            return ConfidenceInterval(math.nan, math.nan, level, method)
        lo_q, hi_q = np.quantile(r, [(1 - level) / 2, (1 + level) / 2])
        if method == "percentile":
            return ConfidenceInterval(float(lo_q), float(hi_q), level, method)
        if method == "basic":
            return ConfidenceInterval(
                max(0.0, 2 * self.estimate - float(hi_q)), min(1.0, 2 * self.estimate - float(lo_q)), level, method
            )
        raise HeroEvalError(f"bootstrap interval method must be 'percentile' or 'basic', got {method!r}")

    def to_frame(self, confidence_level: float = 0.95) -> pd.DataFrame:
        """A one-row DataFrame (index: the method): estimate, bootstrap SE, percentile and basic intervals."""
        p = self.confidence_interval(confidence_level, "percentile")
        b = self.confidence_interval(confidence_level, "basic")
        return pd.DataFrame([{"method": self.method, "estimate": self.estimate, "standard_error": self.standard_error,
                              "ci_low": p.low, "ci_high": p.high, "basic_low": b.low, "basic_high": b.high,
                              "confidence_level": confidence_level, "n_resamples": int(self.replicates.size),
                              "n_failed": self.n_failed, "unit": self.unit}]).set_index("method")

    def _repr_html_(self) -> str:
        return str(self.to_frame().to_html(float_format=lambda x: f"{x:.4f}"))

    def __repr__(self) -> str:
        ci = self.confidence_interval()
        return (f"BootstrapResult(method={self.method!r}, estimate={self.estimate:.4f}, "
                f"standard_error={self.standard_error:.4f}, percentile_ci_95=[{ci.low:.4f}, {ci.high:.4f}], "
                f"n_resamples={self.replicates.size}, n_failed={self.n_failed})")

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        p = self.confidence_interval(confidence_level, "percentile")
        b = self.confidence_interval(confidence_level, "basic")
        out: dict[str, Any] = jsonable(
            {
                "estimate": self.estimate,
                "standard_error": self.standard_error,
                "n_resamples": int(self.replicates.size),
                "n_failed": self.n_failed,
                "unit": self.unit,
                "percentile": [p.low, p.high],
                "basic": [b.low, b.high],
                "confidence_level": confidence_level,
            }
        )
        return out


def bootstrap(
    current: AnnotationSet,
    calibration: Calibration,
    *,
    method: str | Sequence[str] = "hero1",
    n_resamples: int = 200,
    rng: np.random.Generator | int | None = None,
    progress: bool = False,
    **kwargs: Any,
) -> dict[str, BootstrapResult]:
    """Two-sample cluster bootstrap: resample history and current items, refit everything.

    A round (history or current) whose items come in groups (:meth:`AnnotationSet.with_groups`) is resampled
    by group: whole groups with replacement, each with all its items, so that the replicates vary as the
    cluster-robust standard error says (``BootstrapResult.unit`` is then ``"groups"``).

    Needs the history (``calibration.history``, i.e. a calibration fitted in
    this process). Stage A is refitted on each resampled history with the
    calibration's settings. Returns one :class:`BootstrapResult` per method.

    Examples
    --------
    >>> import heroeval as he
    >>> from heroeval.simulate import paper_dgp
    >>> d = paper_dgp(0)
    >>> b = he.bootstrap(d.current, he.calibrate(d.history), n_resamples=20, rng=1)
    >>> b["hero1"].replicates.shape
    (20,)
    """
    if calibration.history is None:
        raise HeroEvalError("the bootstrap refits Stage A: it needs the history, not only a calibration file")
    if not (isinstance(n_resamples, int) and n_resamples >= 2):
        raise HeroEvalError(f"n_resamples must be an integer >= 2, got {n_resamples!r}")
    gen = np.random.default_rng(rng)
    hist = calibration.history
    s = calibration.settings
    methods = list(METHODS) if method == "all" else ([method] if isinstance(method, str) else list(method))
    base = estimate_methods(current, calibration, method=methods, **kwargs)
    assert isinstance(base, EstimateCollection)
    methods = list(base)
    reps = {m: np.full(n_resamples, np.nan) for m in methods}
    failed = dict.fromkeys(methods, 0)
    it: Any = range(n_resamples)
    if progress:
        from rich.progress import track

        it = track(it, description="bootstrap", transient=True)
    for b in it:
        hb = hist.take_items(resample_items(hist, gen))
        cb = current.take_items(resample_items(current, gen))
        if not hb.has_gold:
            for m in methods:
                failed[m] += 1
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            cal_b = fit_stage_a(  # the calibration's own EM settings (an EB prior refitted on each resample's gold)
                hb, em=EMSettings.from_dict(s), fitting=FitSettings(covariance=False),
                history_weight=float(s.get("history_weight", 1.0)),  # the resampled fit at the calibration's own w
            )
            res = estimate_methods(cb, cal_b, method=methods, **kwargs)
        assert isinstance(res, EstimateCollection)
        for m in methods:
            if m in res:
                reps[m][b] = res[m].estimate
            else:
                failed[m] += 1
    unit = "items" if current.item_group is None else "groups"
    return {m: BootstrapResult(m, base[m].estimate, reps[m], failed[m], unit) for m in methods}


def resample_items(data: AnnotationSet, gen: np.random.Generator) -> npt.NDArray[np.int64]:
    """Indices of ``data``'s items for one bootstrap resample: ``n_items`` items drawn with replacement, or, when
    its items come in groups, as many groups as it has drawn with replacement, each with all its items."""
    if data.item_group is None:
        return gen.integers(0, data.n_items, data.n_items)
    order = np.argsort(data.item_group, kind="stable")
    codes, starts, sizes = np.unique(data.item_group[order], return_index=True, return_counts=True)
    pick = gen.integers(0, codes.size, codes.size)
    return np.concatenate([order[starts[g]:starts[g] + sizes[g]] for g in pick]).astype(np.int64)
