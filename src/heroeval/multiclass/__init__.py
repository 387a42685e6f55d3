"""Multi-class and ordinal (Likert) labels: K-class Stage A, HERO-1 on the simplex, baselines.

The binary path (:mod:`heroeval.stage_a.calibration`, :mod:`heroeval.estimators`) is
untouched; with K = 2 and the full structure this package reproduces it
(tests/multiclass/test_binary_equivalence.py).

>>> from heroeval.multiclass import multiclass_from_arrays, calibrate_multiclass, hero1_multiclass
>>> hist = multiclass_from_arrays([1, 1, 2, 2, 3, 3, 4, 4], ["a", "b"] * 4, [0, 0, 1, 1, 2, 1, 2, 2],
...                               classes=[0, 1, 2], gold=([1, 2, 3, 4], [0, 1, 2, 2]))
>>> cal = calibrate_multiclass(hist, structure="symmetric")
>>> cur = multiclass_from_arrays([5, 5, 6, 6], ["a", "b"] * 2, [0, 0, 2, 2], classes=[0, 1, 2])
>>> est = hero1_multiclass(cur, cal)
>>> [round(float(x), 3) for x in est.estimate]
[0.5, 0.0, 0.5]
"""

from heroeval.multiclass.calibration import MultiClassCalibration, calibrate_multiclass, load_multiclass_calibration
from heroeval.multiclass.confusion_model import solve_simplex
from heroeval.multiclass.current_gold import ppi_multiclass
from heroeval.multiclass.data import MultiClassData, as_multiclass, multiclass_from_arrays, read_multiclass
from heroeval.multiclass.estimators import (
    MC_METHODS,
    MultiClassComparison,
    MultiClassEstimate,
    compare_multiclass,
    dawid_skene_multiclass,
    estimate_multiclass,
    gold_proportion_multiclass,
    hero1_multiclass,
    hero2_multiclass,
    hero_joint_multiclass,
    majority_vote_multiclass,
)
from heroeval.multiclass.labelled import ClassIntervals
from heroeval.multiclass.plots import plot_confusion_matrices

__all__ = [
    "MC_METHODS",
    "ClassIntervals",
    "MultiClassCalibration",
    "MultiClassComparison",
    "MultiClassData",
    "MultiClassEstimate",
    "as_multiclass",
    "calibrate_multiclass",
    "compare_multiclass",
    "dawid_skene_multiclass",
    "estimate_multiclass",
    "gold_proportion_multiclass",
    "hero1_multiclass",
    "hero2_multiclass",
    "hero_joint_multiclass",
    "load_multiclass_calibration",
    "majority_vote_multiclass",
    "multiclass_from_arrays",
    "plot_confusion_matrices",
    "ppi_multiclass",
    "read_multiclass",
    "solve_simplex",
]
