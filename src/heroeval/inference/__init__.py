"""Inference beyond one estimate: differences between rounds, the bootstrap, classifier metrics, and planning.

Standard errors come from the estimators' influence values (current round
plus history); see docs/inference.md.
"""

from heroeval.inference.comparison import (
    ClassifierMetrics,
    Comparison,
    ComparisonCollection,
    MetricEstimate,
    classifier_metrics,
    compare,
)
from heroeval.inference.planning import Plan, plan
from heroeval.inference.resample import BootstrapResult, bootstrap

__all__ = [
    "BootstrapResult",
    "ClassifierMetrics",
    "Comparison",
    "ComparisonCollection",
    "MetricEstimate",
    "Plan",
    "bootstrap",
    "classifier_metrics",
    "compare",
    "plan",
]
