"""heroeval: honest evaluation of generative models from noisy labels.

HERO (History Enhanced RObust evaluation) learns each silver labeler's
sensitivity and specificity from the organisation's label history (Stage A),
then estimates the current round's gold rate without gold (HERO-1), with a
control variate on covariates whose mean the history knows (HERO-2).

>>> import heroeval as he
>>> he.__version__
'0.1.0'
"""

from ._version import __version__
from .calibration import Calibration, ConvergenceInfo, calibrate, load_calibration
from .data import AnnotationSet, IngestReport, TableReport, read_annotations
from .drift import DriftCheck, check_drift, reestimate_without
from .errors import (
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
from .estimators import (
    dawid_skene,
    estimate,
    gold_proportion,
    hero1,
    hero2,
    hero_joint,
    majority_vote,
    rogan_gladen,
)
from .inference import (
    BootstrapResult,
    ClassifierMetrics,
    Comparison,
    ComparisonCollection,
    MetricEstimate,
    bootstrap,
    classifier_metrics,
    compare,
)
from .newlabelers import hero1_anchored
from .planning import Plan, plan
from .results import METHODS, ConfidenceInterval, EstimateCollection, EstimateResult, Influence

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
