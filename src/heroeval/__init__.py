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
"""

from heroeval._version import __version__
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
from heroeval.ingest.read import read_annotations
from heroeval.stage_a.calibration import Calibration, ConvergenceInfo, load_calibration
from heroeval.store import Store
from heroeval.workflows.api import calibrate, estimate

__all__ = [
    "METHODS",
    "AnnotationSet",
    "BootstrapResult",
    "Calibration",
    "CalibrationFileError",
    "ClassifierMetrics",
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
    "reestimate_without",
    "rogan_gladen",
]
