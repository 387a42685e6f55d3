"""EM kernels for the binary two-coin (Dawid–Skene) model.

Pure NumPy/SciPy on int-coded arrays; no pandas, no validation, no I/O.

Each annotation is coded ``c = 2 * labeler + label``. With per-code log
probabilities ``la1[c] = log P(z | Y=1)`` and ``la0[c] = log P(z | Y=0)``,
an item's log-likelihood ratio is ``L_r = sum_c A[r, c] (la1[c] - la0[c])``
where ``A`` is the (items x codes) count matrix. The E-step is one sparse
mat-vec ``A @ d``; the M-step one sparse mat-vec ``A.T @ gamma``; the
log-likelihood needs ``sum_r lambda_r(0) = counts @ la0`` and one pass over
items. Nothing per annotation is touched in Python.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.special import expit, logit

from heroeval.core.drive import drive
from heroeval.core.squarem import Stop, squarem
from heroeval.stage_a.newton_factor import DampedFactor, damped_solve
from heroeval.stage_a.prior import PriorCounts, counts4, log_prior
from heroeval.stage_a.settings import StoppingRule

EPS = 1e-9
"""Sensitivities and specificities are kept in [EPS, 1 - EPS] so logs stay finite."""

_LOGIT_MAX = float(logit(1 - EPS))
CSC_ITEMS = 500_000
"""Above this many items a design keeps its transpose as a CSC view (no CSR copy of the whole history)."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Design:
    """Compact sparse design of an annotation set for EM."""

    n_items: int
    n_labelers: int
    n_groups: int
    A: sp.csr_matrix  # items x 2J counts
    AT: sp.csr_matrix | sp.csc_matrix  # 2J x items counts
    code_counts: FloatArray  # (2J,)
    gold: npt.NDArray[np.int8]  # (items,), -1 = no gold
    group: npt.NDArray[np.int32]  # (items,)
    group_size: FloatArray  # (G,)
    gold_pos: IntArray  # items with gold 1
    gold_neg: IntArray  # items with gold 0
    weight: FloatArray | None = None  # optional per-row weights of the likelihood (1 = full), counts included
    pseudo_count: PriorCounts = 0.0  # the prior's pseudo-counts on every alpha_j, beta_j (MAP-EM; see stage_a.prior)
    count: FloatArray | None = None  # rows that stand for several identical items: how many (see compress)
    row_of_item: IntArray | None = None  # with count: the row of each original item

    @property
    def is_gold(self) -> npt.NDArray[np.bool_]:
        return self.gold >= 0


def make_design(
    item_ptr: IntArray,
    labeler: npt.NDArray[np.integer],
    label: npt.NDArray[np.integer],
    n_labelers: int,
    gold: npt.NDArray[np.int8],
    group: npt.NDArray[np.integer],
    n_groups: int,
    repeated: bool = True,
    transpose_copy: bool | None = None,
) -> Design:
    """The NumPy engine's design of a history's labels (items in ``item_ptr``'s order). ``transpose_copy``: keep
    ``A^T`` as a CSR copy (True) or as the CSC view of ``A`` (False, no memory); default by :data:`CSC_ITEMS`."""
    n_items = int(item_ptr.shape[0] - 1)
    code = 2 * labeler.astype(np.int64) + label.astype(np.int64)
    n_codes = 2 * n_labelers
    if code.size and (code.min() < 0 or code.max() >= n_codes):
        raise ValueError(f"labeler codes out of range [0, {n_labelers})")  # scipy would not check
    data = np.ones(code.shape[0], dtype=np.float64)
    A = sp.csr_matrix((data, code, item_ptr.astype(np.int64)), shape=(n_items, n_codes))
    if repeated:
        A.sum_duplicates()  # repeated (item, labeler, label) rows become counts
    # M-step mat-vec: a CSR copy of A^T wins while gamma fits in cache; beyond that the CSC
    # view A.T (no copy) reads gamma once (measured in benchmarks/stage_a.py)
    AT = A.T.tocsr() if (n_items <= CSC_ITEMS if transpose_copy is None else transpose_copy) else A.T
    code_counts = np.bincount(code, minlength=n_codes).astype(np.float64)
    group32 = group.astype(np.int32)
    group_size = np.bincount(group32, minlength=n_groups).astype(np.float64)
    return Design(
        n_items=n_items,
        n_labelers=n_labelers,
        n_groups=n_groups,
        A=A,
        AT=AT,
        code_counts=code_counts,
        gold=gold.astype(np.int8),
        gold_pos=np.flatnonzero(gold == 1),
        gold_neg=np.flatnonzero(gold == 0),
        group=group32,
        group_size=group_size,
    )


_BINCOUNT_CHUNK = 1 << 22


def bincount(x: npt.NDArray[Any], minlength: int, weights: FloatArray | None = None) -> FloatArray:
    """``np.bincount`` in chunks, as float64.

    ``np.bincount`` first casts its input to intp (8 bytes per element): for a
    billion small codes that is an 8 GB temporary. Chunks keep it at 32 MB.
    """
    n = int(x.shape[0])
    if n <= _BINCOUNT_CHUNK:
        out: FloatArray = np.bincount(x, weights=weights, minlength=minlength).astype(np.float64)
        return out
    acc = np.zeros(minlength, dtype=np.float64)
    for s in range(0, n, _BINCOUNT_CHUNK):
        w = None if weights is None else weights[s:s + _BINCOUNT_CHUNK]
        acc += np.bincount(x[s:s + _BINCOUNT_CHUNK], weights=w, minlength=minlength)
    return acc


def code_logprobs(alpha: FloatArray, beta: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per-code log P(z | Y=1) and log P(z | Y=0), interleaved (z = 0, 1)."""
    a = np.clip(alpha, EPS, 1 - EPS)
    b = np.clip(beta, EPS, 1 - EPS)
    la1 = np.empty(2 * a.shape[0])
    la0 = np.empty(2 * a.shape[0])
    la1[0::2] = np.log1p(-a)
    la1[1::2] = np.log(a)
    la0[0::2] = np.log(b)
    la0[1::2] = np.log1p(-b)
    return la1, la0


def item_llr(design_A: sp.csr_matrix, alpha: FloatArray, beta: FloatArray) -> FloatArray:
    """L_r = lambda_r(1) - lambda_r(0) for every item."""
    la1, la0 = code_logprobs(alpha, beta)
    out: FloatArray = np.asarray(design_A @ (la1 - la0), dtype=np.float64)
    return out


def e_step(
    d: Design, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool = True
) -> tuple[FloatArray, float]:
    """Posterior P(Y_r = 1 | data) for every item and the observed log-likelihood.

    The log-likelihood (NaN when ``need_ll`` is False) is
    ``sum_r lambda_r(0) + sum_r [log(1 - mu_g) + softplus(eta_r)]`` for items
    without gold, with ``eta_r = logit mu_g + L_r``; a gold item contributes
    ``log mu_g + L_r`` (gold 1) or ``log(1 - mu_g)`` (gold 0) on top of its
    ``lambda_r(0)``. ``sum_r lambda_r(0) = counts @ la0`` needs no item pass.
    With pseudo-counts in ``d.pseudo_count`` the log Beta prior is added, so
    the value is the objective that MAP-EM increases.
    """
    la1, la0 = code_logprobs(alpha, beta)
    L = np.asarray(d.A @ (la1 - la0))
    p = np.clip(prev, EPS, 1 - EPS)
    log1m = np.log1p(-p)
    lo = np.log(p) - log1m
    eta = L + lo[0] if d.n_groups == 1 else L + lo[d.group]
    gamma = expit(eta)
    if not need_ll:
        gamma[d.gold_pos] = 1.0
        gamma[d.gold_neg] = 0.0
        return gamma, float("nan")
    # softplus(eta) = max(eta, 0) - log(max(gamma, 1 - gamma)), exact; the log's argument is in [1/2, 1]
    sp = np.maximum(eta, 0.0) - np.log(np.maximum(gamma, 1.0 - gamma))
    gamma[d.gold_pos] = 1.0
    gamma[d.gold_neg] = 0.0
    prior = log_prior(d.pseudo_count, alpha, beta)
    w = d.weight
    if w is None:
        gold_pos_term = float(L[d.gold_pos].sum() + (lo[d.group[d.gold_pos]]).sum())
        ll = (
            float(d.code_counts @ la0)
            + float(d.group_size @ log1m)
            + float(sp.sum() - sp[d.gold_pos].sum() - sp[d.gold_neg].sum())
            + gold_pos_term
        )
        return gamma, prior + ll
    # weighted likelihood: each item's whole contribution scaled by w_r
    lp0 = log1m[d.group]
    ll_item = lp0 + sp
    ll_item[d.gold_pos] = lp0[d.gold_pos] + lo[d.group[d.gold_pos]] + L[d.gold_pos]
    ll_item[d.gold_neg] = lp0[d.gold_neg]
    lam0 = np.asarray(d.A @ la0)
    return gamma, prior + float(w @ (lam0 + ll_item))


def m_step(d: Design, gamma: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Closed-form maximisers given posteriors ``gamma`` (MAP with ``d.pseudo_count``)."""
    w = d.weight
    gw = gamma if w is None else gamma * w
    s1 = np.asarray(d.AT @ gw)  # sum of gamma per code
    cnt = d.code_counts if w is None else np.asarray(d.AT @ w)
    if w is None:
        if d.n_groups == 1:
            gsum = np.array([gamma.sum()])
        else:
            gsum = np.bincount(d.group, weights=gamma, minlength=d.n_groups).astype(np.float64)
        return m_from_sums(s1, cnt, gsum, d.group_size, d.pseudo_count, weighted=False)
    gsum = np.bincount(d.group, weights=gw, minlength=d.n_groups).astype(np.float64)
    wsum = np.bincount(d.group, weights=w, minlength=d.n_groups).astype(np.float64)
    return m_from_sums(s1, cnt, gsum, wsum, d.pseudo_count, weighted=True)


def m_from_sums(
    s1: FloatArray, cnt: FloatArray, gsum: FloatArray, gsize: FloatArray, c: PriorCounts, weighted: bool
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The M-step from its sufficient statistics (shared by every engine).

    ``s1`` and ``cnt`` are, per code ``2 j + z``, the (weighted) sums of the
    posteriors and of the annotations; ``gsum`` and ``gsize`` the per-round
    (weighted) sums of the posteriors and of the items; ``c`` the prior's
    pseudo-counts (:mod:`heroeval.stage_a.prior`).
    """
    a1, a0, b1, b0 = counts4(c)
    s0 = cnt - s1  # sum of (1 - gamma) per code
    pos_tot = s1[0::2] + s1[1::2] + (a1 + a0)
    neg_tot = s0[0::2] + s0[1::2] + (b1 + b0)
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = np.where(pos_tot > 0, (s1[1::2] + a1) / pos_tot, 0.5)
        beta = np.where(neg_tot > 0, (s0[0::2] + b1) / neg_tot, 0.5)
    prev = gsum / (np.maximum(gsize, 1e-300) if weighted else np.maximum(gsize, 1.0))
    return (
        np.clip(alpha, EPS, 1 - EPS),
        np.clip(beta, EPS, 1 - EPS),
        np.clip(prev, EPS, 1 - EPS),
    )


def em_map(
    d: Design | Any, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool
) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """One EM step on either engine's design, and the log-likelihood at its input (NaN unless asked)."""
    if isinstance(d, Design):
        gamma, ll = e_step(d, alpha, beta, prev, need_ll)
        a2, b2, p2 = m_step(d, gamma)
        return a2, b2, p2, ll
    out: tuple[FloatArray, FloatArray, FloatArray, float] = d.em_map(alpha, beta, prev, need_ll)
    return out


def em_sums(d: Design | Any, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> Sums:
    """The M-step's sufficient statistics at ``(alpha, beta, prev)`` and the objective there.

    Returns ``(s1, cnt, gsum, gsize, weighted, loglik)`` as :func:`m_from_sums`
    takes them; one E pass on either engine. The Newton polish of
    :func:`run_em` gets from them both the EM step and the gradient.
    """
    if isinstance(d, Design):
        gamma, ll = e_step(d, alpha, beta, prev, True)
        w = d.weight
        gw = gamma if w is None else gamma * w
        s1 = np.asarray(d.AT @ gw, dtype=np.float64)
        if w is None:
            gsum = np.bincount(d.group, weights=gamma, minlength=d.n_groups).astype(np.float64)
            return s1, d.code_counts, gsum, d.group_size, False, ll
        cnt = np.asarray(d.AT @ w, dtype=np.float64)
        gsum = np.bincount(d.group, weights=gw, minlength=d.n_groups).astype(np.float64)
        wsum = np.bincount(d.group, weights=w, minlength=d.n_groups).astype(np.float64)
        return s1, cnt, gsum, wsum, True, ll
    out: tuple[FloatArray, FloatArray, FloatArray, FloatArray, bool, float] = d.em_sums(alpha, beta, prev)
    return out


def logit_gradient(
    s1: FloatArray, cnt: FloatArray, gsum: FloatArray, gsize: FloatArray, c: PriorCounts,
    alpha: FloatArray, beta: FloatArray, prev: FloatArray,
) -> FloatArray:
    """Gradient of the objective (log-likelihood plus log prior) in the logits of (alpha, beta, prev).

    By Fisher's identity it is the complete-data score at the posteriors: for
    ``theta = logit alpha_j``, ``sum gamma z + a1 - alpha_j (sum gamma + a1 + a0)``
    over labeler j's annotations (``a1, a0`` the prior's pseudo-counts), that
    is the M-step's denominator times ``M(alpha)_j - alpha_j``; likewise for
    beta and the prevalences.
    """
    a1, a0, b1, b0 = counts4(c)
    s0 = cnt - s1
    pos = s1[0::2] + s1[1::2]
    neg = s0[0::2] + s0[1::2]
    return np.concatenate([s1[1::2] + a1 - alpha * (pos + (a1 + a0)), s0[0::2] + b1 - beta * (neg + (b1 + b0)),
                           gsum - prev * gsize])


def posterior(d: Design | Any, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> tuple[FloatArray, float]:
    if isinstance(d, Design):
        return e_step(d, alpha, beta, prev)
    out: tuple[FloatArray, float] = d.posterior(alpha, beta, prev)
    return out


@dataclass(frozen=True)
class EMFit:
    alpha: FloatArray
    beta: FloatArray
    prev: FloatArray
    gamma: FloatArray
    loglik: float
    n_iter: int  # EM map evaluations
    converged: bool
    max_change: float  # last max |parameter change| (probability scale)
    loglik_trace: tuple[float, ...]
    newton_steps: int = 0  # Newton steps tried after SQUAREM slowed (each one map evaluation more)


def _pack(alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> FloatArray:
    th: FloatArray = np.clip(logit(np.concatenate([alpha, beta, prev])), -_LOGIT_MAX, _LOGIT_MAX)
    return th


def _unpack(th: FloatArray, J: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    p = expit(th)
    return p[:J], p[J : 2 * J], p[2 * J :]


Progress = Callable[[int, float, float], None]
"""``progress(map_evaluations, log_likelihood or NaN, max parameter change)``, called once per EM cycle."""

Sums = tuple[FloatArray, FloatArray, FloatArray, FloatArray, bool, float]
"""What :func:`em_sums` returns: ``(s1, cnt, gsum, gsize, weighted, objective)``."""

Information = Callable[[FloatArray, FloatArray, FloatArray], FloatArray]
"""``information(alpha, beta, prev)``: the observed information on the probability scale (P x P)."""

NEWTON_AFTER = 100
"""Map evaluations of SQUAREM before :func:`run_em` turns to Newton steps (when given the information)."""

GUESS_STEPS = 8
"""Newton steps with a guessed information (:func:`guessed`) before the exact one is taken at each step."""


def guessed(H: FloatArray, exact: Information, after: int = GUESS_STEPS) -> Information:
    """An information for :func:`run_em`'s Newton steps: the fixed guess ``H`` for the first ``after`` Newton
    iterations (calls), then ``exact`` at each one (a pass over the data each).

    A guess from a nearby fit makes the steps converge in a few passes where it
    is close; where the fit is far from where the guess was formed (a fold's
    refit at a lower history weight on a small history, whose parameters move
    far) the steps with it converge only linearly, hundreds of passes, and the
    exact information restores Newton's quadratic convergence. Either way the
    fit stops by Stage A's rule.
    """
    steps = 0

    def info(a: FloatArray, b: FloatArray, p: FloatArray) -> FloatArray:
        nonlocal steps
        steps += 1
        return H if steps <= after else exact(a, b, p)

    return info

NEWTON_BOUND = 1e-6
"""Logits this close to the clip (parameters at 1e-9 or 1 - 1e-9) take EM steps in the Newton phase."""

UNIDENTIFIED_COUNT = 1e-6
"""A parameter whose weighted count (a labeler's posterior-weighted positives for its sensitivity, negatives for its
specificity, a round's items for its prevalence) is below this is left out of the Newton phase's stopping rule: the
likelihood is flat in it to rounding, and EM moves it by a constant amount each step without end (a fold refit of
sentiment_polarity, a labeler with 5 labels on items whose posteriors are all below 1e-10: 10,000 map evaluations
without converging)."""

LL_ROUNDING = 1e-12
"""A Newton step that lowers the objective by less than this share of it is kept if the EM step at the new point
is shorter: near the maximum the gain is far below the rounding of a sum over millions of items (a change of
5e-8 in the parameters gains about 1e-9 on an objective of 1e6), and refusing steps for rounding cost the model
checks' refits a dozen passes."""

CHORD_RATE = 0.95
"""With ``reuse`` (:func:`newton_steps`), a step on the last Newton step's factor is kept only if the EM step at
its end is at most this share of the one at its start; otherwise the matrix is formed and factored afresh."""

CHORD_FROM = 1e-4
"""With ``reuse``, steps on a kept factor are taken only where the EM step is at most this long: far from the
maximum they can lead a refit to another one (a cold refit on a sparse crowd of 250 labelers did)."""

_NEWTON_TRIES = 6
"""Damped Newton steps tried from one point before an EM step is taken instead."""

TAIL_BOUND = 1e-2
"""Parameters this close to 0 or 1 may go to the clip before the rest has converged (``TAIL_STEP``)."""

TAIL_STEP = 0.5
"""A parameter within :data:`TAIL_BOUND` of 0 or 1 whose last Newton step took its logit this far outwards, with
the gradient still pointing out, is on the likelihood's exponential tail (``l = C - c exp(-|x|)``, where a Newton
step moves ``x`` by exactly 1 and the fit crawls to the clip one factor e at a time). :func:`newton_steps` tries
the clip for those at once and keeps it if the objective does not go down."""

RUN_EM_STOP = StoppingRule(max_iter=5000)
""":func:`run_em`'s stopping rule when none is given (Stage A's, :class:`EMSettings
<heroeval.stage_a.settings.EMSettings>`, allows 10,000 map evaluations)."""


@dataclass(frozen=True)
class FixedLabelers:
    """Labelers whose sensitivity and specificity an EM run keeps at given values: ``mask`` (one per labeler)
    and the values ``alpha`` and ``beta`` (every labeler's; those of the others are not read)."""

    mask: npt.NDArray[np.bool_]
    alpha: FloatArray
    beta: FloatArray

    def apply(self, a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(a, b)`` with the fixed labelers' entries set to their values."""
        return np.where(self.mask, self.alpha, a), np.where(self.mask, self.beta, b)


def run_em(
    d: Design | Any,
    start: tuple[FloatArray, FloatArray, FloatArray],
    *,
    stop: StoppingRule = RUN_EM_STOP,
    fixed_labelers: npt.NDArray[np.bool_] | None = None,
    progress: Progress | None = None,
    information: Information | None = None,
    newton_after: int = NEWTON_AFTER,
    posteriors: bool = True,
    reuse: bool = False,
) -> EMFit:
    """Maximise the observed-data likelihood by EM from ``start`` (alpha, beta, prevalences), optionally
    SQUAREM-accelerated.

    ``stop`` holds ``tol``, ``max_iter``, ``criterion`` and ``accelerate``.
    ``criterion="parameters"`` stops when one plain EM step moves no
    probability parameter by more than ``tol``; ``criterion="loglik"`` stops
    when the relative change of the log-likelihood is below ``tol`` (the
    paper's rule, with ``tol=1e-6, max_iter=200, accelerate=False``).
    ``fixed_labelers`` keeps those labelers' alpha and beta at their start
    values (used by the joint fit of new labelers, later issues).
    ``n_iter`` counts EM map evaluations, so accelerated and plain runs
    compare at equal cost.

    With ``information`` (and ``accelerate``, ``criterion="parameters"``), a
    fit that SQUAREM has not finished in ``newton_after`` map evaluations
    continues with safeguarded Newton steps on the logits (:func:`newton_steps`):
    where a few parameters converge linearly at a rate near 1, EM and SQUAREM
    crawl for hundreds of steps, Newton's method takes a handful. The stopping
    rule is unchanged (one plain EM step moves no parameter by more than
    ``tol``), and a fit that converges within ``newton_after`` is exactly the
    SQUAREM fit; ``newton_after=0`` starts with Newton steps. ``posteriors=False`` skips the final pass for the posteriors
    (``gamma`` is then empty and ``loglik`` the last one recorded, NaN if none). ``reuse``: the Newton steps reuse
    a factor while its steps converge fast (:func:`newton_steps`; the model checks' refits).
    """
    alpha0, beta0, prev0 = start
    tol, max_iter, criterion, accelerate = stop.tol, stop.max_iter, stop.criterion, stop.accelerate
    J = d.n_labelers
    fixed = None if fixed_labelers is None else FixedLabelers(fixed_labelers, alpha0.copy(), beta0.copy())
    n_eval = 0

    def F(th: FloatArray, need_ll: bool = True) -> tuple[FloatArray, float]:
        nonlocal n_eval
        n_eval += 1
        a, b, p = _unpack(th, J)
        a2, b2, p2, ll = em_map(d, a, b, p, need_ll)
        if fixed is not None:
            a2, b2 = fixed.apply(a2, b2)
        return _pack(a2, b2, p2), ll

    def change(th_a: FloatArray, th_b: FloatArray) -> float:
        return float(np.max(np.abs(expit(th_a) - expit(th_b)))) if th_a.size else 0.0

    def newton_phase(th: FloatArray, budget: int, n_done: int) -> _NewtonResult:
        """:func:`newton_steps` on this design, one :func:`em_sums` pass per point."""
        assert information is not None
        shown = None if progress is None else (lambda n, ll, ch: progress(n_done + n, ll, ch))
        gen = newton_steps(J, getattr(d, "pseudo_count", 0.0), th, information, tol=tol, budget=budget,
                           fixed=fixed, progress=shown, reuse=reuse)
        return drive(gen, lambda x: em_sums(d, *_unpack(x, J)))

    newton = information is not None and accelerate and criterion == "parameters"
    if newton and newton_after <= 0:  # straight to Newton steps (a start next to the solution)
        ph = newton_phase(_pack(alpha0, beta0, prev0), max_iter, 0)
        if not posteriors:
            return newton_fit(ph, J)
        a, b, p = _unpack(ph.x, J)
        gamma, ll = posterior(d, a, b, p)
        return replace(newton_fit(ph, J), gamma=gamma, loglik=ll)
    res = squarem(
        F, _pack(alpha0, beta0, prev0), distance=change,
        stop=Stop(tol, min(max_iter, max(int(newton_after), 1)) if newton else max_iter,
                  "objective" if criterion == "loglik" else "distance"), accelerate=accelerate,
        project=lambda x: np.clip(x, -_LOGIT_MAX, _LOGIT_MAX), progress=progress,
    )
    th, converged, max_change, trace = res.x, res.converged, res.change, list(res.trace)
    steps = 0
    if newton and not converged and n_eval < max_iter:
        ph = newton_phase(th, max_iter - n_eval, n_eval)
        th, converged, max_change, steps = ph.x, ph.converged, ph.change, ph.steps
        n_eval += ph.n_eval
        trace.extend(ph.trace)
    a, b, p = _unpack(th, J)
    if posteriors:
        gamma, ll = posterior(d, a, b, p)
    else:
        gamma, ll = np.zeros(0), (trace[-1] if trace else float("nan"))
    return EMFit(
        alpha=a,
        beta=b,
        prev=p,
        gamma=gamma,
        loglik=ll,
        n_iter=n_eval,
        converged=converged,
        max_change=float(max_change),
        loglik_trace=tuple(trace),
        newton_steps=steps,
    )


@dataclass(frozen=True)
class _NewtonResult:
    x: FloatArray
    converged: bool
    change: float
    n_eval: int
    steps: int
    trace: tuple[float, ...]


def newton_steps(
    J: int,
    c: PriorCounts,
    th: FloatArray,
    information: Information,
    *,
    tol: float,
    budget: int,
    fixed: FixedLabelers | None,
    progress: Progress | None,
    reuse: bool = False,
) -> Generator[FloatArray, Sums, _NewtonResult]:
    """Safeguarded Newton steps on the logits from ``th`` until one EM step moves no parameter by more than ``tol``.

    A generator: it yields each point (logits) whose sums it needs and is sent
    back :func:`em_sums` there (``J`` labelers, pseudo-count ``c``), so the
    caller decides how a pass runs (:func:`run_em` one design at a time,
    :func:`drive_many` several refits in one pass each); it returns a
    :class:`_NewtonResult`. At most ``budget`` passes; ``fixed`` labelers keep
    their values; ``progress`` counts this generator's passes.

    Each pass at a point gives the objective there, the EM step ``M`` and the
    gradient (:func:`em_sums`, :func:`logit_gradient`). The step solves the
    observed information on the logit scale (``D I D - diag(g (1 - 2 p))``,
    ``D = p (1 - p)``) on every parameter with curvature, except logits at the
    clip (1e-9 or 1 - 1e-9) that the gradient pushes outwards; those and
    labelers held fixed take their EM value. The matrix is scaled to unit
    diagonal and damped (Levenberg–Marquardt) until it is positive definite;
    the damping follows the ratio of the gain to the quadratic model's. A step
    is kept only if the objective does not decrease (or, within rounding,
    :data:`LL_ROUNDING`, if the EM step there is shorter); up to
    :data:`_NEWTON_TRIES` more damped steps are tried, then an EM step (which
    never decreases it). Near a saddle of the likelihood, where EM and SQUAREM
    crawl (adultcontent2 after 100 map evaluations), the damped step follows
    the direction of positive curvature out. On convergence the
    EM image ``M(x)`` is returned, as SQUAREM does, after parameters within
    :data:`NEWTON_BOUND` of 0 or 1 whose gradient points outwards are moved to
    the clip (1e-9 or 1 - 1e-9) if that does not lower the objective, and
    the iteration goes on from there until it has converged again; those within
    :data:`TAIL_BOUND` whose last Newton step moved them outwards by
    :data:`TAIL_STEP` or more are tried at the clip at once, before the rest
    has converged (kept if the objective does not go down). Parameters
    whose weighted count is below :data:`UNIDENTIFIED_COUNT` are left out of
    the stopping rule (the likelihood is flat in them).

    With ``reuse``, after a kept Newton step the next steps solve that step's
    damped factor (:class:`heroeval.stage_a.newton_factor.DampedFactor`) with
    the gradient at their own point: one pass each, without forming the
    information or factoring it again. Such a step is kept while the EM step
    shrinks by :data:`CHORD_RATE` or more and the objective does not go down;
    otherwise (or when the parameters left out at the clip change) the
    matrix is formed and factored at the point. The fit stops by the same
    rule, and not right after a step on a kept factor longer than ``tol``
    (its error is a share of that step, where a Newton step's is its square).
    """
    n_eval = 0
    trace: list[float] = []

    ident = np.ones(th.size, dtype=bool)
    a1, a0, b1, b0 = counts4(c)

    def at(x: FloatArray, sums: Sums) -> tuple[FloatArray, FloatArray, float]:
        nonlocal n_eval, ident
        n_eval += 1
        a, b, p = _unpack(x, J)
        s1, cnt, gsum, gsize, weighted, ll = sums
        s0 = cnt - s1
        # each parameter's weighted count (its M step's denominator): below UNIDENTIFIED_COUNT it moves the
        # objective by less than rounding, and EM moves it without end
        ident = np.concatenate([s1[0::2] + s1[1::2] + (a1 + a0), s0[0::2] + s0[1::2] + (b1 + b0), gsize]) >= UNIDENTIFIED_COUNT
        a2, b2, p2 = m_from_sums(s1, cnt, gsum, gsize, c, weighted)
        grad = logit_gradient(s1, cnt, gsum, gsize, c, a, b, p)
        if fixed is not None:
            a2, b2 = fixed.apply(a2, b2)
        return _pack(a2, b2, p2), grad, ll

    def dist(u: FloatArray, v: FloatArray, among: npt.NDArray[np.bool_] | None = None) -> float:
        """The largest change of an identified parameter (probability scale) between two points (of those in
        ``among``)."""
        keep = ident if among is None else ident & among
        return float(np.max(np.abs(expit(u) - expit(v))[keep], initial=0.0))

    refused = np.zeros(th.size, dtype=bool)  # parameters whose snap to the clip lowered the objective

    x = th
    xm, grad, ll = at(x, (yield x))
    damp = 0.0
    steps = 0
    chord: DampedFactor | None = None  # with reuse, the factor of the last Newton step kept
    chord_size = 0.0  # how far the last step taken on a kept factor moved (0: the last step was not one)
    last_step: FloatArray | None = None  # the last kept Newton step (logits)
    while True:
        trace.append(ll)
        ch = dist(xm, x)
        if progress is not None:
            progress(n_eval, ll, ch)
        # parameters within NEWTON_BOUND of 0 or 1 that the gradient pushes outwards go to the clip, where EM
        # (and damped Newton steps along a flat likelihood) would take them at a crawl: a trec2011_crowd fold
        # refit took 76 Newton steps of 0.036 in one logit each, the objective flat, before it converged. Not
        # those already at the clip here, whose EM image lies just inside it: snapping them again would give
        # the same point, a cycle that ran to the iteration limit (a product_er fold refit, 10,000 map
        # evaluations where 110 reach the same fit); nor those whose snap lowered the objective before
        pr = expit(xm)
        outward = (grad * np.sign(xm) > 0) & (np.abs(xm) < _LOGIT_MAX) & (np.abs(x) < _LOGIT_MAX) & ~refused
        edge = np.minimum(pr, 1 - pr)
        snap = (edge < NEWTON_BOUND) & outward
        # those on an exponential tail (TAIL_STEP) go there as soon as the last Newton step shows it
        tail = None if last_step is None or ch <= tol else (
            outward & (edge < TAIL_BOUND) & (last_step * np.sign(xm) >= TAIL_STEP))
        last_step = None
        if tail is not None and tail.any() and n_eval < budget:
            cand = xm.copy()
            cand[tail] = np.sign(xm[tail]) * _LOGIT_MAX
            xm2, grad2, ll2 = at(cand, (yield cand))
            if ll2 >= ll:
                x, xm, grad, ll, chord_size = cand, xm2, grad2, ll2, 0.0
                continue
            refused |= tail
        # converged, or converged but for the parameters on their way to the clip
        if ch <= tol or (snap.any() and dist(xm, x, ~snap) <= tol):
            if snap.any() and n_eval < budget:
                cand = xm.copy()
                cand[snap] = np.sign(xm[snap]) * _LOGIT_MAX
                xm2, grad2, ll2 = at(cand, (yield cand))
                if ll2 >= ll:  # a step like any other: go on from there until converged again
                    x, xm, grad, ll = cand, xm2, grad2, ll2
                    continue
                refused |= snap
            if ch <= tol and chord_size <= (1 - CHORD_RATE) * tol:
                return _NewtonResult(xm, True, ch, n_eval, steps, tuple(trace))
        if n_eval >= budget:
            return _NewtonResult(x, False, ch, n_eval, steps, tuple(trace))
        cand_c = None if chord is None or ch > CHORD_FROM else _chord_point(chord, x, xm, grad)
        if cand_c is not None:  # a step on the kept factor, kept while the EM step shrinks by CHORD_RATE or more
            steps += 1
            xm2, grad2, ll2 = at(cand_c, (yield cand_c))
            ch2 = dist(xm2, cand_c)
            if (ll2 >= ll or (ll2 >= ll - LL_ROUNDING * abs(ll) and ch2 < ch)) and ch2 <= CHORD_RATE * ch:
                chord_size = dist(cand_c, x)
                x, xm, grad, ll = cand_c, xm2, grad2, ll2
                continue
            if n_eval >= budget:
                return _NewtonResult(x, False, ch, n_eval, steps, tuple(trace))
        chord, chord_size = None, 0.0  # a Newton step from here on the matrix formed here
        a, b, p = _unpack(x, J)
        I_ff, g_f, free = newton_system(x, grad, information(a, b, p), None if fixed is None else fixed.mask)
        moved = False
        for _ in range(_NEWTON_TRIES):
            sol = damped_solve(I_ff, g_f, damp)
            if sol is None or n_eval >= budget:
                break
            s_f, damp, fac = sol
            step = xm - x  # parameters outside the Newton system take their EM step
            step[free] = s_f
            steps += 1
            cand = np.clip(x + step, -_LOGIT_MAX, _LOGIT_MAX)
            xm2, grad2, ll2 = at(cand, (yield cand))
            slack = LL_ROUNDING * abs(ll)
            # kept if the objective does not go down, or goes down within rounding while the EM step shrinks
            # (progress towards the fixed point where the objective can no longer tell; no cycling)
            if ll2 >= ll or (ll2 >= ll - slack and dist(xm2, cand) < ch):
                # Levenberg-Marquardt: less damping when the quadratic model predicted the gain well (a change
                # within rounding counts as predicted, so that sums in another order take the same steps)
                pred = float(g_f @ s_f - 0.5 * s_f @ I_ff @ s_f)
                ratio = (ll2 - ll) / pred if pred > 0 and abs(ll2 - ll) > slack else 1.0
                if ratio > 0.75:
                    damp = damp / 4 if damp > 1e-8 else 0.0
                elif ratio < 0.25:
                    damp = max(4 * damp, 1e-4)
                if reuse and fac is not None:
                    chord = replace(fac, free=free, out=_clip_out(x, grad))
                last_step = cand - x
                x, xm, grad, ll = cand, xm2, grad2, ll2
                moved = True
                break
            damp = max(8 * damp, 1e-4)  # the objective went down: not kept; a shorter, more gradient-like step
        if not moved:  # an EM step, which never decreases the objective
            if n_eval >= budget:
                return _NewtonResult(x, False, ch, n_eval, steps, tuple(trace))
            x, (xm, grad, ll) = xm, at(xm, (yield xm))


def newton_fit(ph: _NewtonResult, J: int) -> EMFit:
    """The fit a Newton phase from the start ends in, without posteriors (``loglik`` the last objective)."""
    a, b, p = _unpack(ph.x, J)
    return EMFit(alpha=a, beta=b, prev=p, gamma=np.zeros(0), loglik=ph.trace[-1], n_iter=ph.n_eval,
                 converged=ph.converged, max_change=float(ph.change), loglik_trace=ph.trace, newton_steps=ph.steps)


def newton_system(x: FloatArray, grad: FloatArray, info: FloatArray,
                  fixed: npt.NDArray[np.bool_] | None = None) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """The Newton system on the logits at ``x``: ``(I_ff, g_f, free)``.

    ``grad`` is the objective's gradient on the logits, ``info`` its observed
    information on the probability scale (P x P); the logit-scale matrix is
    ``D info D - diag(grad (1 - 2 p))``, ``D = p (1 - p)``. ``free`` leaves out
    parameters without curvature, logits at the clip that the gradient pushes
    outwards, and the labelers ``fixed`` (their sensitivity and specificity).
    """
    pr = expit(x)
    D = pr * (1 - pr)
    shift = grad * (1 - 2 * pr)
    diag = np.diagonal(info) * D * D - shift  # the matrix's diagonal, as the matrix has it
    out = _clip_out(x, grad)
    scale = np.abs(diag)
    free = ~out & (scale > 1e-14 * max(float(scale.max(initial=0.0)), 1e-300))
    if fixed is not None:
        J = fixed.size
        free[:J] &= ~fixed
        free[J:2 * J] &= ~fixed
    # only the rows and columns in the system (a third of them are at the clip on a large sparse crowd)
    at = np.flatnonzero(free)
    Df = D[at]
    # one new matrix, scaled in place. The information comes column-major from the sparse product; gathering its
    # rows and columns in that order is the same values, several times faster than through a row-major
    # result (sparse_crowd_1000's checks: 13 ms of a Newton system's 14 ms at 1,255 of 2,001 parameters)
    m = info.T[np.ix_(at, at)].T if info.flags.f_contiguous and not info.flags.c_contiguous else info[np.ix_(at, at)]
    m *= Df[:, None]
    m *= Df[None, :]
    m[np.diag_indices_from(m)] -= shift[at]
    return m, grad[free], free


def _clip_out(x: FloatArray, grad: FloatArray) -> npt.NDArray[np.bool_]:
    """Logits at the clip that the objective pushes outwards: a logit there stays out of the Newton system only
    while the gradient points outwards."""
    out: npt.NDArray[np.bool_] = (np.abs(x) >= _LOGIT_MAX - NEWTON_BOUND) & (grad * np.sign(x) >= 0)
    return out


def _chord_point(f: DampedFactor, x: FloatArray, xm: FloatArray, grad: FloatArray) -> FloatArray | None:
    """The step from ``x`` on a kept factor ``f`` (its parameters, the rest their EM step to ``xm``), or None when
    the parameters the system leaves out at the clip are no longer those it was formed without."""
    if f.free is None or f.out is None or not np.array_equal(_clip_out(x, grad), f.out):
        return None
    step = xm - x
    step[f.free] = f.solve(grad[f.free])
    out: FloatArray = np.clip(x + step, -_LOGIT_MAX, _LOGIT_MAX)
    return out


def newton_point(alpha: FloatArray, beta: FloatArray, prev: FloatArray, grad: FloatArray,
                 info: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """One Newton step on the logits from ``(alpha, beta, prev)``, whose objective has the logit-scale gradient
    ``grad`` and the probability-scale information ``info`` (:func:`newton_system`; undamped, or the least damping
    that makes the matrix positive definite), clipped; the point itself when no step solves. A starting point, not
    a fit: :func:`run_em` from there decides convergence."""
    x = _pack(alpha, beta, prev)
    I_ff, g_f, free = newton_system(x, grad, info)
    sol = damped_solve(I_ff, g_f, 0.0)
    if sol is not None:
        x[free] += sol[0]
    return _unpack(np.clip(x, -_LOGIT_MAX, _LOGIT_MAX), alpha.size)
