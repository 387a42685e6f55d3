"""Stage A: each silver labeler's sensitivity and specificity from the gold-anchored history, and their covariance.

The EM (:mod:`~heroeval.stage_a.two_coin`, NumPy; :mod:`~heroeval.stage_a.kernels`,
compiled), the information and influence values (:mod:`~heroeval.stage_a.scoring`),
the parameter covariance, kept unformed until asked for (:mod:`~heroeval.stage_a.covariance`),
the :class:`Calibration` object and its JSON file, the EM settings
(:mod:`~heroeval.stage_a.settings`), the gold items' counts, starting values and
scores (:mod:`~heroeval.stage_a.gold`), the refits with gold items left out
(:mod:`~heroeval.stage_a.folds`), and the distributed engine
(:mod:`~heroeval.stage_a.distributed`). Stage A knows nothing of the
estimators or the checks; :func:`heroeval.calibrate` composes it with the
checks.
"""

from heroeval.stage_a.calibration import Calibration, ConvergenceInfo, load_calibration
from heroeval.stage_a.checks_record import DependenceTest, ModelChecks
from heroeval.stage_a.fit import fit_stage_a

__all__ = ["Calibration", "ConvergenceInfo", "DependenceTest", "ModelChecks", "fit_stage_a", "load_calibration"]
