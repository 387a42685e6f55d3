"""SQUAREM: the one EM accelerator, used by Stage A, multi-class Stage A and the experiments.

Varadhan and Roland's (2008) scheme S3 around an EM map ``x -> M(x)`` on an
unconstrained parameter vector, with a monotone safeguard. Each cycle takes
two plain steps ``x1 = M(x)``, ``x2 = M(x1)``, forms ``r = x1 - x`` and
``v = x2 - 2 x1 + x``, the step length ``a = max(min(-|r| / |v|, -1), -a_max)``
and the extrapolated point ``x' = x - 2 a r + a^2 v``, then one more EM step
from ``x'``. The extrapolation is kept only if the objective at ``x'`` is not
below a reference: the objective at the start, raised at every accepted
extrapolation (EM steps never lower it, so the reference is a lower bound on
the objective at the current point and one objective evaluation per cycle
suffices); otherwise the plain double step ``x2`` is kept and ``a_max``
shrinks. ``a_max`` grows by ``mstep`` whenever the bound was hit.

The caller supplies the map, which also returns the objective at its input
when asked (``need_objective``), and the distance between successive points
that decides convergence (for example the largest probability moved).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

EMMap = Callable[[FloatArray, bool], tuple[FloatArray, float]]
"""``(x, need_objective) -> (M(x), objective at x)``; the objective may be NaN when not needed."""


@dataclass(frozen=True)
class SquaremResult:
    """Where the iteration stopped.

    ``x`` is the last point; ``n_eval`` counts EM map evaluations (so plain and
    accelerated runs compare at equal cost); ``change`` is the distance moved
    by the last plain step; ``trace`` the objectives recorded on the way.
    """

    x: FloatArray
    converged: bool
    n_eval: int
    change: float
    trace: tuple[float, ...]


@dataclass(frozen=True)
class Stop:
    """When :func:`squarem` stops: ``criterion="distance"`` when one plain step moves its ``distance`` by at most
    ``tol``, ``criterion="objective"`` when the relative change of the objective between cycles is at most ``tol``;
    or, not converged, after ``max_iter`` map evaluations."""

    tol: float
    max_iter: int
    criterion: Literal["distance", "objective"] = "distance"


def squarem(
    em_map: EMMap,
    x0: FloatArray,
    *,
    distance: Callable[[FloatArray, FloatArray], float],
    stop: Stop,
    accelerate: bool = True,
    project: Callable[[FloatArray], FloatArray] | None = None,
    progress: Callable[[int, float, float], None] | None = None,
    reference: Literal["accepted", "every"] = "accepted",
) -> SquaremResult:
    """Iterate ``em_map`` from ``x0`` until it converges or ``stop.max_iter`` map evaluations are spent.

    Parameters
    ----------
    em_map : callable
        ``em_map(x, need_objective) -> (M(x), objective at x)``.
    distance : callable
        ``distance(M(x), x)``: the convergence measure of one plain step.
    stop : Stop
        The stopping rule: its ``tol``, ``max_iter`` and ``criterion``.
    accelerate : bool
        SQUAREM when True, plain EM steps otherwise.
    project : callable, optional
        Applied to each extrapolated point (e.g. clipping logits).
    progress : callable, optional
        ``progress(map evaluations, objective, change)`` after each cycle's first step.
    reference : {"accepted", "every"}
        The safeguard's reference: raised at accepted extrapolations only
        (one objective per cycle, Stage A's default), or also to the objective
        at the start of every cycle (the experiments, whose maps compute it
        anyway).

    Examples
    --------
    EM for the mean of a normal with a known mixture weight converges to the
    fixed point of a contraction:

    >>> import numpy as np
    >>> res = squarem(lambda x, need: (0.5 * x + 1.0, -float((x[0] - 2.0) ** 2)), np.array([0.0]),
    ...               distance=lambda a, b: float(np.max(np.abs(a - b))), stop=Stop(tol=1e-10, max_iter=100))
    >>> res.converged, round(float(res.x[0]), 8)
    (True, 2.0)
    """
    tol, max_iter = stop.tol, stop.max_iter
    n_eval = 0
    trace: list[float] = []
    by_objective = stop.criterion == "objective"

    def F(x: FloatArray, need: bool) -> tuple[FloatArray, float]:
        nonlocal n_eval
        n_eval += 1
        return em_map(x, need)

    x = x0
    converged = False
    change = np.inf
    obj_prev = -np.inf
    if not accelerate:
        while n_eval < max_iter:
            x1, obj = F(x, True)
            trace.append(obj)
            change = distance(x1, x)
            if progress is not None:
                progress(n_eval, obj, change)
            if by_objective:
                done = bool(np.isfinite(obj_prev) and abs(obj - obj_prev) <= tol * abs(obj_prev))
            else:
                done = change <= tol
            x = x1
            obj_prev = obj
            if done:
                converged = True
                break
        return SquaremResult(x, converged, n_eval, float(change), tuple(trace))
    step_max, mstep = 1.0, 4.0
    ref = -np.inf
    first = True
    while n_eval < max_iter:
        x1, obj0 = F(x, first or by_objective or reference == "every")
        if first:
            ref, first = obj0, False
        elif reference == "every":
            ref = max(ref, obj0)
        if by_objective:
            trace.append(obj0)
        change = distance(x1, x)
        if progress is not None:
            progress(n_eval, obj0, change)
        if by_objective:
            done = bool(np.isfinite(obj_prev) and abs(obj0 - obj_prev) <= tol * abs(obj_prev))
        else:
            done = change <= tol
        if done:
            x = x1
            converged = True
            break
        obj_prev = obj0
        x2, _ = F(x1, False)
        r = x1 - x
        v = x2 - 2 * x1 + x
        nr = float(np.sqrt(r @ r))
        nv = float(np.sqrt(v @ v))
        if nv == 0.0 or not np.isfinite(nv):
            x = x2
            continue
        step = max(min(-nr / nv, -1.0), -step_max)
        xp = x - 2 * step * r + step * step * v
        if project is not None:
            xp = project(xp)
        x_new, obj_p = F(xp, True)
        if not by_objective:
            trace.append(obj_p)
        if not np.isfinite(obj_p) or obj_p < ref - 1e-10 * max(1.0, abs(ref)):
            x = x2  # the extrapolation went downhill: keep the plain double step
            step_max = max(1.0, step_max / mstep)
        else:
            x, ref = x_new, obj_p
            if step == -step_max:
                step_max *= mstep
    return SquaremResult(x, converged, n_eval, float(change), tuple(trace))
