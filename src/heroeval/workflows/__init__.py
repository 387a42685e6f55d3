"""Composition: the public calibrate/estimate that combine Stage A, checks and choice, and the drivers built on them.

:mod:`~heroeval.workflows.api` (``calibrate``, ``estimate``, ``estimate_by``: rates per stratum,
:mod:`~heroeval.workflows.strata`), :mod:`~heroeval.workflows.comparing` (``compare``: the recommended difference
of two rounds),
:mod:`~heroeval.workflows.montecarlo` (``hero simulate``),
:mod:`~heroeval.workflows.benchmark` (``hero benchmark``) and
:mod:`~heroeval.workflows.demo` (``hero demo``). They compute nothing new.
"""

from heroeval.workflows.api import calibrate, estimate, estimate_by
from heroeval.workflows.comparing import compare
from heroeval.workflows.strata import StrataEstimate

__all__ = ["StrataEstimate", "calibrate", "compare", "estimate", "estimate_by"]
