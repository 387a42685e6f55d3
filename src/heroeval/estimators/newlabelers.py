"""Labelers new in the current round: anchored estimation of their reliability.

A labeler the calibration does not know has no history-estimated sensitivity
and specificity. HERO can still use its labels: on the current round alone,
fit the two-coin mixture by EM with the calibrated labelers' (alpha, beta)
held at their Stage-A values, and the rate ``mu`` and the new labelers'
(alpha_u, beta_u) free. The calibrated labelers anchor the classes (no label
switching, no unsupervised Dawid–Skene ambiguity); the new labelers add
information about ``mu`` to the extent that their reliability can be learnt
from their agreement with the anchored posterior.

Inference. Write ``eta = (mu, alpha_U, beta_U)`` and ``theta`` for the
calibrated labelers' parameters. ``eta_hat`` solves ``sum_i S_i(eta; theta_hat)
= 0`` with ``S_i`` item i's observed-data score (Fisher's identity). With
``H`` the total observed information of the current round (Louis' formula,
:func:`heroeval.stage_a.scoring.scores_and_information`),

    eta_hat - eta ~= H_ee^-1 [ sum_i S_i,e  -  H_et (theta_hat - theta) ],

so the rate's current influence is ``n [H_ee^-1 S_i,e]_mu`` per item and its
history term is ``c' (theta_hat - theta)`` with ``c = -[H_ee^-1 H_et]_mu``;
``Var(theta_hat)`` is the calibration's ``parameter_covariance``, exactly as
HERO-1 propagates it. Both pieces are checked by finite differences and by
simulated coverage in the tests (``tests/unit/test_newlabelers.py``,
``tests/simulation/test_new_labelers.py``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit, logit

from heroeval.errors import ConvergenceWarning, DataError, HeroEvalError
from heroeval.estimators.common import grouped_inference
from heroeval.estimators.results import EstimateResult, Influence
from heroeval.estimators.score_equation import solve_score
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a import scoring, two_coin
from heroeval.stage_a.calibration import Calibration, ConvergenceInfo
from heroeval.stage_a.settings import StoppingRule

__all__ = ["hero1_anchored"]

FloatArray = npt.NDArray[np.float64]


def hero1_anchored(
    current: AnnotationSet,
    calibration: Calibration,
    *,
    treat_as_new: Iterable[str] = (),
    tol: float = 1e-10,
    max_iter: int = 20_000,
    method_name: str = "hero1",
) -> EstimateResult:
    """HERO-1 with labelers unknown to the calibration estimated from the current round.

    Labelers of ``current`` that are not in ``calibration`` (and those named
    in ``treat_as_new``, e.g. labelers flagged by
    :func:`heroeval.checks.drift.check_drift`) get their sensitivity and specificity
    estimated jointly with the rate by EM on the current round, the other
    labelers' parameters fixed at the calibration's. The standard error adds
    the uncertainty of the new labelers' parameters (the joint M-estimator's
    influence values) and propagates the calibration's parameter covariance.
    With no new labeler this is HERO-1 (up to the EM tolerance).

    Parameters
    ----------
    current : AnnotationSet
    calibration : Calibration
    treat_as_new : iterable of str
        Calibrated labelers whose calibration to ignore (re-estimated here).
    tol, max_iter : float, int
        EM tolerance on the parameters and iteration limit.
    method_name : str
        The ``method`` recorded in the result (``"hero1"``).

    Returns
    -------
    EstimateResult
        ``details["new_labelers"]`` maps each new labeler to its estimated
        sensitivity and specificity with their standard errors (current-round
        sampling plus calibration uncertainty).

    Examples
    --------
    >>> import numpy as np, heroeval as he
    >>> from heroeval.simulate import shift_dgp
    >>> d = shift_dgp(1, alpha=np.full(4, 0.85), beta=np.full(4, 0.8), history_pool=np.arange(3),
    ...               labels_per_item=3, n=400)
    >>> cal = he.calibrate(d.history)
    >>> res = hero1_anchored(d.current, cal)
    >>> sorted(res.details["new_labelers"])
    ['L03']
    >>> bool(abs(res.estimate - d.current_rate) < 4 * res.standard_error)
    True
    """
    if not isinstance(current, AnnotationSet):
        raise HeroEvalError(f"current must be an AnnotationSet, got {type(current).__name__}")
    if not isinstance(calibration, Calibration):
        raise HeroEvalError(f"calibration must be a Calibration, got {type(calibration).__name__}")
    if current.n_items == 0:
        raise DataError(f"current round {current.name!r} has no annotated items")
    cal = calibration
    forced = {str(x) for x in treat_as_new}
    unknown_forced = forced - set(cal.labeler_ids)
    if unknown_forced:
        raise HeroEvalError(f"treat_as_new names labelers the calibration does not know: {sorted(unknown_forced)}")
    index = cal.index_of()
    ids = [str(x) for x in current.labeler_ids]
    to_cal = np.array([index.get(x, -1) if x not in forced else -1 for x in ids], dtype=np.int64)
    known = to_cal >= 0
    Jc = len(ids)
    new_ids = [x for x, k in zip(ids, known, strict=True) if not k]
    if not known.any():
        raise HeroEvalError(
            f"current round {current.name!r}: none of its labelers is calibrated, so nothing anchors the new "
            f"ones ({new_ids[:5]}); anchored estimation needs at least one calibrated labeler"
        )
    # current-round design over the current round's own labeler codes
    d = two_coin.make_design(
        current.item_ptr, current.labeler, current.label, Jc,
        np.full(current.n_items, -1, dtype=np.int8), np.zeros(current.n_items, dtype=np.int32), 1,
        repeated=current.repeated_pairs,
    )
    a0 = np.full(Jc, 0.5)
    b0 = np.full(Jc, 0.5)
    a0[known] = cal.alpha[to_cal[known]]
    b0[known] = cal.beta[to_cal[known]]
    # start: HERO-1 on the anchored labelers' labels, then one M-step for the new ones
    la1, la0 = two_coin.code_logprobs(a0, b0)
    diff = np.where(np.repeat(known, 2), la1 - la0, 0.0)
    L_known = np.asarray(d.A @ diff, dtype=np.float64)
    mu1, st1 = solve_score(L_known)
    if st1 == "unidentified":
        mu1 = 0.5
    mu1 = float(np.clip(mu1, 0.02, 0.98))
    gamma0 = expit(logit(mu1) + L_known)
    a_m, b_m, _ = two_coin.m_step(d, gamma0)
    a0[~known] = np.clip(a_m[~known], 0.05, 0.95)
    b0[~known] = np.clip(b_m[~known], 0.05, 0.95)
    # a new labeler that starts below chance would be mirrored; start it at a safe value
    flip = ~known & (a0 + b0 < 1.05)
    a0[flip], b0[flip] = 0.7, 0.7
    fit = two_coin.run_em(d, (a0, b0, np.array([mu1])), stop=StoppingRule(tol, max_iter), fixed_labelers=known)
    conv = ConvergenceInfo.from_fit(fit, tol, max_iter, "parameters", True)
    if not fit.converged:
        warnings.warn(
            f"anchored EM for new labelers did not converge in {fit.n_iter} iterations", ConvergenceWarning,
            stacklevel=2,
        )
    mu = float(fit.prev[0])
    infl, se_new = _anchored_influence(d, fit, known, to_cal, cal)
    if mu < scoring.BOUND_TOL:
        status = "boundary_0"
    elif mu > 1 - scoring.BOUND_TOL:
        status = "boundary_1"
    else:
        status = "ok"
    new_idx = np.flatnonzero(~known)
    details: dict[str, Any] = {
        "new_labelers": {
            ids[j]: {
                "sensitivity": float(fit.alpha[j]),
                "specificity": float(fit.beta[j]),
                "sensitivity_se": float(se_new[0][k]),
                "specificity_se": float(se_new[1][k]),
                "n_annotations": int(np.count_nonzero(current.labeler == j)),
                "recalibrated": ids[j] in forced,
            }
            for k, j in enumerate(new_idx)
        },
        "new_labeler_rule": "estimate",
        "anchored_by": [ids[j] for j in np.flatnonzero(known)],
    }
    notes: tuple[str, ...] = (
        f"{len(new_ids)} labeler(s) not taken from the calibration ({', '.join(new_ids[:5])}"
        f"{' ...' if len(new_ids) > 5 else ''}): sensitivity and specificity estimated from the current round, "
        "anchored by the calibrated labelers; their uncertainty is in the interval",
    )
    if cal.covariance is None:
        notes = (*notes, "the calibration has no parameter covariance: no standard error")
    return EstimateResult(
        method=method_name,
        estimate=mu,
        n_items=current.n_items,
        n_annotations=current.n_annotations,
        n_labelers=Jc,
        status=status,
        convergence=conv,
        details=details,
        **grouped_inference(current, {"notes": notes, "influence": infl}),
    )


def _anchored_influence(
    d: two_coin.Design,
    fit: two_coin.EMFit,
    known: npt.NDArray[np.bool_],
    to_cal: npt.NDArray[np.int64],
    cal: Calibration,
) -> tuple[Influence, tuple[FloatArray, FloatArray]]:
    """Influence of the rate (and SEs of the new labelers' parameters) of the anchored fit.

    Parameter order of the current-round design: ``(alpha_1..Jc, beta_1..Jc, mu)``.
    """
    Jc = known.size
    n = d.n_items
    si = scoring.scores_and_information(d, fit.alpha, fit.beta, fit.prev, fit.gamma, gram=False)
    new = np.flatnonzero(~known)
    kn = np.flatnonzero(known)
    eta = np.concatenate([[2 * Jc], new, Jc + new])  # mu first
    th = np.concatenate([kn, Jc + kn])
    free = si.free[eta].copy()
    free[0] = True  # mu's influence is wanted even near a bound (status says boundary there)
    e_free = eta[free]
    H = si.info
    Hee = H[np.ix_(e_free, e_free)]
    Hee_inv = np.linalg.pinv(Hee, hermitian=True)
    Het = H[np.ix_(e_free, th)]
    Ssum = si.scores.tocsr(copy=True)
    Ssum.sum_duplicates()
    S = Ssum[:, e_free].toarray()  # n x |eta|
    IF_eta = S @ Hee_inv  # rows: per-item influence of eta-hat (sum scale)
    grad = -(Hee_inv @ Het)  # d eta-hat / d theta-hat
    c = np.zeros(cal.n_parameters)
    J = cal.n_labelers
    ck = to_cal[kn]
    np.add.at(c, ck, grad[0, : kn.size])
    np.add.at(c, J + ck, grad[0, kn.size :])
    V = cal.covariance
    infl = Influence(IF_eta[:, 0] * n, "stage_a", c, V, None if V is None else hash(cal.token))
    # standard errors of the new labelers' parameters (sandwich of the current part + calibration part)
    var_cur = np.sum(IF_eta**2, axis=0)
    var_hist = np.zeros(e_free.size)
    if V is not None:
        G = np.zeros((e_free.size, cal.n_parameters))
        np.add.at(G.T, ck, grad[:, : kn.size].T)
        np.add.at(G.T, J + ck, grad[:, kn.size :].T)
        var_hist = np.diag(V.quad(G.T)).copy()
    se_full = np.full(eta.size, np.nan)
    se_full[free] = np.sqrt(np.maximum(var_cur + var_hist, 0.0))
    m = new.size
    return infl, (se_full[1 : 1 + m], se_full[1 + m :])
