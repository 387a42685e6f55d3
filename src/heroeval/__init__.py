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

from heroeval.version import __version__

_PUBLIC: dict[str, str] = {
    "check_drift": "heroeval.checks.drift",
    "reestimate_without": "heroeval.checks.drift",
    "dawid_skene": "heroeval.estimators.methods",
    "gold_proportion": "heroeval.estimators.methods",
    "hero1": "heroeval.estimators.methods",
    "hero2": "heroeval.estimators.control_variate",
    "hero_joint": "heroeval.estimators.methods",
    "majority_vote": "heroeval.estimators.methods",
    "rogan_gladen": "heroeval.estimators.misclassification",
    "hero1_anchored": "heroeval.estimators.newlabelers",
    "bootstrap": "heroeval.inference.resample",
    "classifier_metrics": "heroeval.inference.comparison",
    "compare": "heroeval.workflows.comparing",
    "plan": "heroeval.inference.planning",
    "AnnotationSet": "heroeval.ingest.annotations",
    "read_annotations": "heroeval.ingest.read",
    "read_compact": "heroeval.ingest.read",
    "CompactHistory": "heroeval.ingest.compact",
    "Calibration": "heroeval.stage_a.calibration",
    "load_calibration": "heroeval.stage_a.calibration",
    "Store": "heroeval.store",
    "calibrate": "heroeval.workflows.api",
    "calibrate_dask": "heroeval.workflows.api",
    "estimate": "heroeval.workflows.api",
}
"""The public names (``__all__``) and the modules that define them: imported on first use (PEP 562)."""

_ALSO: dict[str, str] = {
    "compare_versions": "heroeval.workflows.comparing",
    "DriftCheck": "heroeval.estimators.records",
    "CalibrationFileError": "heroeval.errors",
    "ConvergenceWarning": "heroeval.errors",
    "CovariateShiftWarning": "heroeval.errors",
    "DataError": "heroeval.errors",
    "HeroEvalError": "heroeval.errors",
    "HeroEvalWarning": "heroeval.errors",
    "SharedCovariatesWarning": "heroeval.errors",
    "TransportabilityWarning": "heroeval.errors",
    "UnknownLabelerError": "heroeval.errors",
    "ConfidenceInterval": "heroeval.estimators.results",
    "EstimateCollection": "heroeval.estimators.collection",
    "EstimateResult": "heroeval.estimators.results",
    "Influence": "heroeval.estimators.results",
    "METHODS": "heroeval.estimators.table",
    "BootstrapResult": "heroeval.inference.resample",
    "ClassifierMetrics": "heroeval.inference.comparison",
    "Comparison": "heroeval.inference.comparison",
    "ComparisonCollection": "heroeval.inference.comparison",
    "MetricEstimate": "heroeval.inference.comparison",
    "Plan": "heroeval.inference.planning",
    "IngestReport": "heroeval.ingest.annotations",
    "TableReport": "heroeval.ingest.annotations",
    "ConvergenceInfo": "heroeval.stage_a.calibration",
}
"""Names reachable as ``heroeval.<name>`` since 0.1 whose home is their module (results in
:mod:`heroeval.estimators`, :mod:`heroeval.inference` and :mod:`heroeval.ingest`, errors and warnings in
:mod:`heroeval.errors`): they still work, lazily, but are not in ``__all__``."""

_EXPORTS = {**_PUBLIC, **_ALSO}

_SUBMODULES = ("checks", "choice", "cli", "errors", "estimators", "examples", "inference", "ingest", "multiclass",
                "report", "simulate", "stage_a", "store", "workflows")
"""``heroeval.<name>`` works after a bare ``import heroeval`` (as it did when the package imported everything):
the subpackage or module is imported on first access."""

if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, eagerly ("X as X": re-exported)
    from heroeval.checks.drift import check_drift as check_drift
    from heroeval.checks.drift import reestimate_without as reestimate_without
    from heroeval.errors import (
        CalibrationFileError as CalibrationFileError,
    )
    from heroeval.errors import (
        ConvergenceWarning as ConvergenceWarning,
    )
    from heroeval.errors import (
        CovariateShiftWarning as CovariateShiftWarning,
    )
    from heroeval.errors import (
        DataError as DataError,
    )
    from heroeval.errors import (
        HeroEvalError as HeroEvalError,
    )
    from heroeval.errors import (
        HeroEvalWarning as HeroEvalWarning,
    )
    from heroeval.errors import (
        SharedCovariatesWarning as SharedCovariatesWarning,
    )
    from heroeval.errors import (
        TransportabilityWarning as TransportabilityWarning,
    )
    from heroeval.errors import (
        UnknownLabelerError as UnknownLabelerError,
    )
    from heroeval.estimators.collection import EstimateCollection as EstimateCollection
    from heroeval.estimators.control_variate import hero2 as hero2
    from heroeval.estimators.methods import (
        dawid_skene as dawid_skene,
    )
    from heroeval.estimators.methods import (
        gold_proportion as gold_proportion,
    )
    from heroeval.estimators.methods import (
        hero1 as hero1,
    )
    from heroeval.estimators.methods import (
        hero_joint as hero_joint,
    )
    from heroeval.estimators.methods import (
        majority_vote as majority_vote,
    )
    from heroeval.estimators.misclassification import rogan_gladen as rogan_gladen
    from heroeval.estimators.newlabelers import hero1_anchored as hero1_anchored
    from heroeval.estimators.records import DriftCheck as DriftCheck
    from heroeval.estimators.results import (
        ConfidenceInterval as ConfidenceInterval,
    )
    from heroeval.estimators.results import (
        EstimateResult as EstimateResult,
    )
    from heroeval.estimators.results import (
        Influence as Influence,
    )
    from heroeval.estimators.table import METHODS as METHODS
    from heroeval.inference.comparison import (
        ClassifierMetrics as ClassifierMetrics,
    )
    from heroeval.inference.comparison import (
        Comparison as Comparison,
    )
    from heroeval.inference.comparison import (
        ComparisonCollection as ComparisonCollection,
    )
    from heroeval.inference.comparison import (
        MetricEstimate as MetricEstimate,
    )
    from heroeval.inference.comparison import (
        classifier_metrics as classifier_metrics,
    )
    from heroeval.inference.planning import Plan as Plan
    from heroeval.inference.planning import plan as plan
    from heroeval.inference.resample import (
        BootstrapResult as BootstrapResult,
    )
    from heroeval.inference.resample import (
        bootstrap as bootstrap,
    )
    from heroeval.ingest.annotations import (
        AnnotationSet as AnnotationSet,
    )
    from heroeval.ingest.annotations import (
        IngestReport as IngestReport,
    )
    from heroeval.ingest.annotations import (
        TableReport as TableReport,
    )
    from heroeval.ingest.compact import CompactHistory as CompactHistory
    from heroeval.ingest.read import read_annotations as read_annotations
    from heroeval.ingest.read import read_compact as read_compact
    from heroeval.stage_a.calibration import (
        Calibration as Calibration,
    )
    from heroeval.stage_a.calibration import (
        ConvergenceInfo as ConvergenceInfo,
    )
    from heroeval.stage_a.calibration import (
        load_calibration as load_calibration,
    )
    from heroeval.store import Store as Store
    from heroeval.workflows.api import calibrate as calibrate
    from heroeval.workflows.api import calibrate_dask as calibrate_dask
    from heroeval.workflows.api import estimate as estimate
    from heroeval.workflows.comparing import (
        compare as compare,
    )
    from heroeval.workflows.comparing import (
        compare_versions as compare_versions,
    )

__all__ = ["__version__", *_PUBLIC]


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
