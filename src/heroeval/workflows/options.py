"""The public entry points' keyword options, declared once (:mod:`heroeval.core.options`).

:func:`heroeval.calibrate` and :func:`heroeval.calibrate_dask` share Stage A's options (:class:`StageAOptions`:
the EM settings, the variance, the history weight and the model checks); each adds its own (the in-memory
engine's, or the column names of a history on Dask). :func:`heroeval.estimate` takes the estimators' options
(:class:`~heroeval.estimators.registry.EstimateKeywords`) and the drift check. Their defaults sit beside them,
taken from the settings objects where one exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from heroeval.checks.model_checks import CheckSettings
from heroeval.estimators.registry import ESTIMATE_DEFAULTS, EstimateKeywords
from heroeval.ingest.options import COLUMN_DEFAULTS, ColumnOptions
from heroeval.stage_a import two_coin
from heroeval.stage_a.settings import EM_DEFAULTS, EMOptions, Engine, FitSettings, Variance

__all__ = [
    "CALIBRATE_DASK_DEFAULTS",
    "CALIBRATE_DEFAULTS",
    "ESTIMATE_CALL_DEFAULTS",
    "STAGE_A_DEFAULTS",
    "CalibrateDaskOptions",
    "CalibrateOptions",
    "EstimateCallOptions",
    "StageAOptions",
]


class StageAOptions(EMOptions, total=False):
    """Stage A's keyword options shared by :func:`heroeval.calibrate` and :func:`heroeval.calibrate_dask`
    (documented at :func:`heroeval.calibrate`)."""

    variance: Variance
    covariance: bool
    history_weight: float | Literal["cv"]
    checks: bool
    check_folds: int
    check_rounds: bool
    seed: int
    progress: bool | two_coin.Progress


_FIT = FitSettings()
_CHECKS = CheckSettings()

STAGE_A_DEFAULTS: Mapping[str, Any] = {
    **EM_DEFAULTS, "variance": _FIT.variance, "covariance": _FIT.covariance, "history_weight": 1.0,
    "checks": False, "check_folds": _CHECKS.folds, "check_rounds": _CHECKS.past_rounds, "seed": _CHECKS.seed,
    "progress": False,
}


class CalibrateOptions(StageAOptions, total=False):
    """:func:`heroeval.calibrate`'s keyword options: Stage A's and the in-memory engine's."""

    compress: bool
    engine: Engine


CALIBRATE_DEFAULTS: Mapping[str, Any] = {**STAGE_A_DEFAULTS, "compress": _FIT.compress, "engine": _FIT.engine}


class CalibrateDaskOptions(StageAOptions, ColumnOptions, total=False):
    """:func:`heroeval.calibrate_dask`'s keyword options: Stage A's and the history's column names."""


CALIBRATE_DASK_DEFAULTS: Mapping[str, Any] = {**STAGE_A_DEFAULTS, **COLUMN_DEFAULTS}


class EstimateCallOptions(EstimateKeywords, total=False):
    """:func:`heroeval.estimate`'s keyword options: the estimators' and the drift check's."""

    drift_check: bool


ESTIMATE_CALL_DEFAULTS: Mapping[str, Any] = {**ESTIMATE_DEFAULTS, "drift_check": True}
