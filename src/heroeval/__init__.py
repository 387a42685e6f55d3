"""heroeval: honest evaluation of generative models from noisy labels.

HERO (History Enhanced RObust evaluation) learns each silver labeler's
sensitivity and specificity from the organisation's label history (Stage A),
then estimates the current round's gold rate without gold (HERO-1), with a
control variate on covariates whose mean the history knows (HERO-2).

>>> import heroeval as he
>>> he.__version__
'0.1.0'

The package is layered, bottom to top (each layer imports only from those
below it; ``lint-imports`` checks it): :mod:`~heroeval.errors` and
``_core``; :mod:`~heroeval.ingest`; :mod:`~heroeval.simulate` (synthetic
data); :mod:`~heroeval.stage_a`; :mod:`~heroeval.estimators`;
:mod:`~heroeval.inference`, :mod:`~heroeval.checks` and
:mod:`~heroeval.multiclass`; :mod:`~heroeval.choice`;
:mod:`~heroeval.workflows`; ``report``; ``cli``.

``import heroeval`` is light: the public names below are imported on first use
(PEP 562 ``__getattr__``), so a notebook or ``hero --help`` does not pay for
pandas, SciPy or the estimators until it uses them. This module and ``cli`` are
the only places allowed to load heroeval modules lazily (see pyproject.toml).
"""

import importlib
from typing import TYPE_CHECKING

from heroeval._version import __version__

_EXPORTS: dict[str, str] = {
    "DriftCheck": "heroeval.checks.drift",
    "check_drift": "heroeval.checks.drift",
    "reestimate_without": "heroeval.checks.drift",
    "CalibrationFileError": "heroeval.errors",
    "ConvergenceWarning": "heroeval.errors",
    "CovariateShiftWarning": "heroeval.errors",
    "DataError": "heroeval.errors",
    "HeroEvalError": "heroeval.errors",
    "HeroEvalWarning": "heroeval.errors",
    "SharedCovariatesWarning": "heroeval.errors",
    "TransportabilityWarning": "heroeval.errors",
    "UnknownLabelerError": "heroeval.errors",
    "dawid_skene": "heroeval.estimators._methods",
    "gold_proportion": "heroeval.estimators._methods",
    "hero1": "heroeval.estimators._methods",
    "hero2": "heroeval.estimators._methods",
    "hero_joint": "heroeval.estimators._methods",
    "majority_vote": "heroeval.estimators._methods",
    "rogan_gladen": "heroeval.estimators._methods",
    "hero1_anchored": "heroeval.estimators.newlabelers",
    "ConfidenceInterval": "heroeval.estimators.results",
    "EstimateCollection": "heroeval.estimators.results",
    "EstimateResult": "heroeval.estimators.results",
    "Influence": "heroeval.estimators.results",
    "METHODS": "heroeval.estimators.results",
    "BootstrapResult": "heroeval.inference._inference",
    "ClassifierMetrics": "heroeval.inference._inference",
    "Comparison": "heroeval.inference._inference",
    "ComparisonCollection": "heroeval.inference._inference",
    "MetricEstimate": "heroeval.inference._inference",
    "bootstrap": "heroeval.inference._inference",
    "classifier_metrics": "heroeval.inference._inference",
    "compare": "heroeval.inference._inference",
    "Plan": "heroeval.inference.planning",
    "plan": "heroeval.inference.planning",
    "AnnotationSet": "heroeval.ingest.annotations",
    "IngestReport": "heroeval.ingest.annotations",
    "TableReport": "heroeval.ingest.annotations",
    "read_annotations": "heroeval.ingest.read",
    "read_compact": "heroeval.ingest.read",
    "CompactHistory": "heroeval.ingest.compact",
    "Calibration": "heroeval.stage_a.calibration",
    "ConvergenceInfo": "heroeval.stage_a.calibration",
    "load_calibration": "heroeval.stage_a.calibration",
    "Store": "heroeval.store",
    "calibrate": "heroeval.workflows.api",
    "calibrate_dask": "heroeval.workflows.api",
    "estimate": "heroeval.workflows.api",
}
"""Each public name and the module that defines it: imported on first use (PEP 562), see ``__getattr__``."""

_SUBMODULES = ("checks", "choice", "cli", "errors", "estimators", "examples", "inference", "ingest", "multiclass",
                "report", "simulate", "stage_a", "store", "workflows")
"""``heroeval.<name>`` works after a bare ``import heroeval`` (as it did when the package imported everything):
the subpackage or module is imported on first access."""

if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, eagerly
    from heroeval.checks.drift import DriftCheck, check_drift, reestimate_without
    from heroeval.errors import (
        CalibrationFileError,
        ConvergenceWarning,
        CovariateShiftWarning,
        DataError,
        HeroEvalError,
        HeroEvalWarning,
        SharedCovariatesWarning,
        TransportabilityWarning,
        UnknownLabelerError,
    )
    from heroeval.estimators._methods import (
        dawid_skene,
        gold_proportion,
        hero1,
        hero2,
        hero_joint,
        majority_vote,
        rogan_gladen,
    )
    from heroeval.estimators.newlabelers import hero1_anchored
    from heroeval.estimators.results import METHODS, ConfidenceInterval, EstimateCollection, EstimateResult, Influence
    from heroeval.inference._inference import (
        BootstrapResult,
        ClassifierMetrics,
        Comparison,
        ComparisonCollection,
        MetricEstimate,
        bootstrap,
        classifier_metrics,
        compare,
    )
    from heroeval.inference.planning import Plan, plan
    from heroeval.ingest.annotations import AnnotationSet, IngestReport, TableReport
    from heroeval.ingest.compact import CompactHistory
    from heroeval.ingest.read import read_annotations, read_compact
    from heroeval.stage_a.calibration import Calibration, ConvergenceInfo, load_calibration
    from heroeval.store import Store
    from heroeval.workflows.api import calibrate, calibrate_dask, estimate

__all__ = [
    "METHODS",
    "AnnotationSet",
    "BootstrapResult",
    "Calibration",
    "CalibrationFileError",
    "ClassifierMetrics",
    "CompactHistory",
    "Comparison",
    "ComparisonCollection",
    "ConfidenceInterval",
    "ConvergenceInfo",
    "ConvergenceWarning",
    "CovariateShiftWarning",
    "DataError",
    "DriftCheck",
    "EstimateCollection",
    "EstimateResult",
    "HeroEvalError",
    "HeroEvalWarning",
    "Influence",
    "IngestReport",
    "MetricEstimate",
    "Plan",
    "SharedCovariatesWarning",
    "Store",
    "TableReport",
    "TransportabilityWarning",
    "UnknownLabelerError",
    "__version__",
    "bootstrap",
    "calibrate",
    "calibrate_dask",
    "check_drift",
    "classifier_metrics",
    "compare",
    "dawid_skene",
    "estimate",
    "gold_proportion",
    "hero1",
    "hero1_anchored",
    "hero2",
    "hero_joint",
    "load_calibration",
    "majority_vote",
    "plan",
    "read_annotations",
    "read_compact",
    "reestimate_without",
    "rogan_gladen",
]


if not TYPE_CHECKING:  # hidden from type checkers, so that a misspelt ``he.name`` stays an error for mypy

    def __getattr__(name: str) -> object:
        """PEP 562: import a public name's module on first access, so that ``import heroeval`` stays light."""
        module = _EXPORTS.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module), name)
            globals()[name] = value  # later lookups skip this function
            return value
        if name in _SUBMODULES:
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))
