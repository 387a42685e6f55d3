"""Checks of HERO's assumptions: model checks on the history's gold, labeler dependence, and drift.

The model checks (:func:`run_checks`) cross-validate Stage A on the gold
items and run every candidate method on mock rounds of held-out gold; the
dependence test (:func:`dependence_test`) asks whether labelers err
together; the drift check (:func:`check_drift`) whether the current round's
labelers still behave as the calibration says.
"""

from heroeval.checks.dependence import dependence_test, error_correlation
from heroeval.checks.drift import check_drift, reestimate_without
from heroeval.checks.model_checks import CANDIDATES, MOCK_METHODS, WEIGHT_GRID, rate_matched_mock, run_checks
from heroeval.estimators.records import DriftCheck
from heroeval.stage_a.checks_record import DependenceTest, ModelChecks

__all__ = [
    "CANDIDATES",
    "MOCK_METHODS",
    "WEIGHT_GRID",
    "DependenceTest",
    "DriftCheck",
    "ModelChecks",
    "check_drift",
    "dependence_test",
    "error_correlation",
    "rate_matched_mock",
    "reestimate_without",
    "run_checks",
]
