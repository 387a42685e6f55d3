"""The damped Cholesky factor of a Newton system, kept so that the steps after it can reuse it.

:func:`heroeval.stage_a.two_coin.newton_steps` solves the observed information on the logits at each point. On a
large sparse crowd (trec2011_crowd, adultcontent2: about 1,900 parameters, 1,400 of them in the system) forming
that matrix and factoring it cost a hundred passes over the annotations each; the model checks' refits took
several such steps per refit. With ``reuse`` a step from a nearby point solves the factor kept here instead (a
chord step: one pass, no matrix), as long as those steps converge fast; see ``newton_steps``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.linalg

__all__ = ["REUSE_MIN_PARAMETERS", "DampedFactor", "damped_factor", "damped_solve", "worth_reusing"]

FloatArray = npt.NDArray[np.float64]

DAMP_MAX = 1e6
"""The largest damping :func:`damped_factor` tries."""


REUSE_MIN_PARAMETERS = 400
"""Below this many parameters a Newton system costs less than the passes a reused factor's slower steps take."""


def worth_reusing(n_parameters: int, n_annotations: int) -> bool:
    """Whether the Newton steps of a fit with ``n_parameters`` on ``n_annotations`` should reuse their factor.

    Forming the information costs a sparse product over the items' pairs of labels and a dense matrix of
    ``n_parameters ** 2`` entries, factoring it ``n_parameters ** 3 / 3`` operations; a pass costs about one
    operation per annotation. Reuse when the dense matrix alone has more entries than there are annotations and
    there are at least :data:`REUSE_MIN_PARAMETERS` parameters (trec2011_crowd: 1,909 parameters, 55,000
    annotations; a system cost about 150 passes).
    """
    return n_parameters >= REUSE_MIN_PARAMETERS and n_parameters * n_parameters >= n_annotations


@dataclass(frozen=True, eq=False)
class DampedFactor:
    """``H + damp diag(H)`` factored: the Cholesky factor ``factor`` of ``S H S + damp I``, ``S = diag(scale)``,
    ``scale = 1 / sqrt|diag H|``; ``free`` and ``out`` are the parameters in the system and those left out at
    the clip when it was formed (:func:`heroeval.stage_a.two_coin.newton_system`)."""

    factor: tuple[FloatArray, bool]
    scale: FloatArray
    damp: float
    free: npt.NDArray[np.bool_] | None = None
    out: npt.NDArray[np.bool_] | None = None

    def solve(self, g: FloatArray) -> FloatArray:
        """``(H + damp diag(H))^-1 g``."""
        s = self.scale
        out: FloatArray = s * scipy.linalg.cho_solve(self.factor, s * g, check_finite=False)
        return out


def damped_factor(H: FloatArray, g: FloatArray, damp: float) -> tuple[DampedFactor, FloatArray] | None:
    """``(H + damp diag(H))^-1 g`` by Cholesky, with ``damp`` raised until the matrix is positive definite (and
    the step finite): the factor and the step, or None if no damping up to :data:`DAMP_MAX` works."""
    s = 1.0 / np.sqrt(np.abs(np.diag(H)))
    Hs = H * s[:, None]
    Hs *= s[None, :]
    lam = damp
    A = np.empty_like(Hs)  # one buffer for every damping tried (the factor overwrites it)
    while lam <= DAMP_MAX:
        np.copyto(A, Hs)
        A[np.diag_indices_from(A)] += lam
        try:
            cf = scipy.linalg.cho_factor(A, overwrite_a=True, check_finite=False)
            f = DampedFactor(cf, s, lam)
            out = f.solve(g)
            if np.isfinite(out).all():
                return f, out
        except np.linalg.LinAlgError:
            pass
        lam = max(1e-8, 10 * lam)
    return None


def damped_solve(H: FloatArray, g: FloatArray, damp: float) -> tuple[FloatArray, float, DampedFactor | None] | None:
    """``(H + damp diag(H))^-1 g`` by Cholesky, with ``damp`` raised until the matrix is positive definite.

    Returns the step, the damping used and the factor (None for an empty system), or None if no damping up to
    1e6 works (:func:`damped_factor`).
    """
    if g.size == 0:
        return np.zeros(0), damp, None
    sol = damped_factor(H, g, damp)
    return None if sol is None else (sol[1], sol[0].damp, sol[0])
