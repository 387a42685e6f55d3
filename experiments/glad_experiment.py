"""Issue #5, idea 1: item difficulty as in GLAD. An experiment, not a heroeval method.

Model
-----
Each item r has a gold class ``Y_r`` in {0, 1} and a latent difficulty class
``c_r`` in {1, ..., K}, independent of ``Y_r``, with ``P(c) = pi_c`` (one
``pi`` for the whole history, fitted) and a *fixed* scale ``s_c > 0``
(default grid ``SCALES = (1, 0.5, 0.15)``: easy, medium, hard). On an item of
class c labeler j says 1 with probability ``sigmoid(s_c logit(alpha_j))`` if
``Y = 1`` and ``1 - sigmoid(s_c logit(beta_j))`` if ``Y = 0``: difficulty
shrinks every labeler's log-odds of being right towards 0 (GLAD's idea,
Whitehill et al. 2009, made asymmetric as the two-coin model and with a
finite difficulty grid so that EM stays simple and the likelihood ratios
exact). Labels are independent given ``(Y, c)`` and dependent given ``Y``
alone (hard items make every labeler noisier at once, but not wrong in the
same direction). Class 1 (``s = 1``) is the two-coin model of heroeval's
Stage A, so ``pi = (1, 0, ..., 0)`` is heroeval's Stage A and HERO-1
(tests/experiments/test_glad_experiment.py, to 1e-6). With ``lambda_r(y, c)`` the
class-c log-likelihood of item r's labels,

    P(labels_r | Y = y) = sum_c pi_c exp(lambda_r(y, c)).

Stage A: EM over the 2K states (Y, c) of every item (gold items: Y known, c
latent), one prevalence per history round (``AnnotationSet.item_round``, as
heroeval's Stage A), SQUAREM-accelerated with a monotone safeguard exactly as
``experiments/hard_class_experiment.py``, stopping when a plain EM step moves
no probability by more than ``tol``. M-step: prevalences and ``pi`` in closed
form; ``logit(alpha_j)`` (and ``logit(beta_j)``) maximise the concave 1-D
function ``sum_c [n1_jc log sigmoid(s_c x) + n0_jc log sigmoid(-s_c x)]``
(``n1_jc``, ``n0_jc``: posterior weights of (Y = 1, c) on j's correct and
wrong labels), by a vectorised damped Newton iteration (step halving until
the objective does not decrease) run to ``|step| < 1e-12`` (at most 100
iterations; the fit counts M-steps that hit that cap, ``newton_capped``).
The scales are not fitted (a fixed grid; fitting them would add a 1-D
search per class and the label-switching worries it brings). Priors (MAP):
``pi ~ Dirichlet(9, 2, 2)``, i.e. pseudo-counts ``PI_PSEUDO = (8, 1, 1)``
added to the expected class counts, and for the labelers heroeval's
``pseudo_count`` (default 0, as ``calibrate()``). Start: heroeval's own
``calibrate()`` fit (alpha, beta, prevalences) and ``pi = (0.8, 0.1, 0.1)``
(the prior's mode). There is no label switching among the classes (their
scales are fixed and distinct); Y's is ruled out by the start and the gold.

Variants (``--variants``, both by default): ``glad_grid`` (the model above)
and ``glad_grid_weak`` (pseudo-counts ``(0.8, 0.1, 0.1)`` on pi, ten times
weaker; added after the first run, where on the paper's independent design
the specified prior rather than the data kept 5-10 % of the items in the
shrunken classes, the fit losing 0.2-0.7 nats of log-likelihood to it).

HERO-1 analogue: with every history parameter fixed, ``L_i = log sum_c pi_c
P(labels_i | Y = 1, c) - log sum_c pi_c P(labels_i | Y = 0, c)`` and the
rate solves heroeval's score equation (``heroeval.estimators.score_equation.solve_score``).
Labelers unknown to the history are left out (as ``exclude_new_labelers=True``).
Standard error: ``1 / sqrt(sum_i psi_i(mu)^2)`` (current round only, as the
hard-class experiment's). Only the point estimate is judged.

Command (from the repository root; 2 worker processes)::

    PYTHONPATH=src .venv/bin/python -m experiments.glad_experiment --resamples 10 --reps 50 \
        --ref ../main/benchmarks/results/research/robustness

(both variants: 7 min 7 s on 2 shared cores) and, for the mock rounds (7 min 43 s)::

    PYTHONPATH=src .venv/bin/python -m experiments.glad_experiment --resamples 10 --skip-sim --mock \
        --variants glad_grid --ref ../main/benchmarks/results/research/robustness

``--ref`` is the folder holding robustness.py's ``resamples.csv.gz`` (not in
git; it may hold more resamples than are run here: only resamples
0..R-1 are used, for the seven methods and for ``auto``, whose rows there are
the present rule's).

Real data: the splits of ``benchmarks/robustness.py`` (``heroeval.workflows.benchmark.make_split``,
seed 2026, rho 0.10, n 200, shift none and half, resamples 0..R-1): per
resample HERO-1 (``calibrate`` + ``hero1(exclude_new_labelers=True)``,
recomputed as an anchor: it must equal ``resamples.csv.gz``, column
``hero1_anchor_maxdiff``) and the GLAD estimate. Simulation:
``dependent_dgp`` (dense, 5 of 10 labelers per item) and ``paper_dgp``
(dense, 3 of 10), seeds 0..reps-1 as in ``benchmarks/robustness_sim.py``:
GLAD, and HERO-1, HERO joint, ``rogan_gladen`` and ``auto`` recomputed on
the same seeds. With ``--mock``, the mock-round errors of HERO-1 and of
each variant on the history's gold (:func:`mock_errors`, as the hard-class
experiment's).
Writes to ``--out`` (default benchmarks/results/research/robustness):

* ``glad_rows_real.csv.gz``, ``glad_rows_sim.csv.gz``: one row per resample /
  replication (estimates, truth, fitted pi, log-likelihood gain over the
  two-coin fit, EM map evaluations, convergence);
* ``glad_real.csv``: per data set and shift, RMSE of GLAD, HERO-1, the best
  of the seven methods and ``auto`` (all from ``resamples.csv.gz`` on the
  same resamples), the ratios, whether GLAD would be the new best;
* ``glad_sim.csv``: per design and estimator: bias, SD, RMSE, RMSE over
  HERO-1's and 95 % coverage;
* with ``--mock``, ``glad_rows_real_mock.csv.gz`` and ``glad_real_mock.csv``
  instead of the real-data files above, with the mean mock errors and the
  RMSE of choosing between HERO-1 and GLAD by the smaller mock error.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import expit, logit, logsumexp

import heroeval as he
from heroeval.core.parallel import run_chunks
from heroeval.workflows.benchmark import load_folder, make_split

from experiments import _latent_tables as lt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

EPS = 1e-9  #: probabilities are kept in [EPS, 1 - EPS], as in heroeval.stage_a.two_coin
_LMAX = float(logit(1 - EPS))
SCALES = (1.0, 0.5, 0.15)  #: fixed difficulty grid: class 1 is the two-coin model
PI_PSEUDO = (8.0, 1.0, 1.0)  #: pseudo-counts on pi (a Dirichlet(9, 2, 2) prior, MAP)
PI_START = (0.8, 0.1, 0.1)
NEWTON_TOL = 1e-12
NEWTON_MAX = 100


def _log_sigmoid(x: FloatArray) -> FloatArray:
    out: FloatArray = -np.logaddexp(0.0, -x)
    return out


def _logpi(pi: FloatArray) -> FloatArray:
    with np.errstate(divide="ignore"):
        out: FloatArray = np.log(pi)
    return out


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Data:
    item: IntArray  # annotation -> item
    code: IntArray  # annotation -> 2 * labeler + label
    grp: IntArray  # item -> round
    gsize: FloatArray  # items per round
    mask1: FloatArray  # item: 0, or -inf where gold rules out Y = 1
    mask0: FloatArray  # item: 0, or -inf where gold rules out Y = 0
    J: int
    G: int


def _prep(ds: he.AnnotationSet) -> _Data:
    gold = ds.gold
    mask1 = np.where(gold == 0, -np.inf, 0.0)
    mask0 = np.where(gold == 1, -np.inf, 0.0)
    grp = ds.item_round.astype(np.int64)
    return _Data(
        item=ds.annotation_item, code=2 * ds.labeler.astype(np.int64) + ds.label.astype(np.int64), grp=grp,
        gsize=np.bincount(grp, minlength=ds.n_rounds).astype(np.float64), mask1=mask1, mask0=mask0,
        J=ds.n_labelers, G=ds.n_rounds,
    )


def _class_logliks(item: IntArray, code: IntArray, N: int, la: FloatArray, lb: FloatArray,
                   scales: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(items, K) log P(labels | Y = 1, c) and log P(labels | Y = 0, c); ``la``, ``lb``: logit(alpha), logit(beta)."""
    K = scales.size
    lam1 = np.empty((N, K))
    lam0 = np.empty((N, K))
    t1 = np.empty(2 * la.size)
    t0 = np.empty(2 * la.size)
    for c, s in enumerate(scales):
        t1[0::2], t1[1::2] = _log_sigmoid(-s * la), _log_sigmoid(s * la)
        t0[0::2], t0[1::2] = _log_sigmoid(s * lb), _log_sigmoid(-s * lb)
        lam1[:, c] = np.bincount(item, weights=t1[code], minlength=N)
        lam0[:, c] = np.bincount(item, weights=t0[code], minlength=N)
    return lam1, lam0


@dataclass(frozen=True)
class Params:
    la: FloatArray  # logit(alpha)
    lb: FloatArray  # logit(beta)
    prev: FloatArray  # per history round
    pi: FloatArray  # difficulty class shares

    @property
    def alpha(self) -> FloatArray:
        out: FloatArray = expit(self.la)
        return out

    @property
    def beta(self) -> FloatArray:
        out: FloatArray = expit(self.lb)
        return out


def _joint(d: _Data, p: Params, scales: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(items, K) log P(labels, Y = 1, c) and log P(labels, Y = 0, c)."""
    N = d.mask1.size
    lam1, lam0 = _class_logliks(d.item, d.code, N, p.la, p.lb, scales)
    lpi = _logpi(p.pi)
    j1 = lam1 + lpi + (np.log(p.prev)[d.grp] + d.mask1)[:, None]
    j0 = lam0 + lpi + (np.log1p(-p.prev)[d.grp] + d.mask0)[:, None]
    return j1, j0


def newton_logit(x: FloatArray, a: FloatArray, b: FloatArray, s: FloatArray) -> tuple[FloatArray, bool]:
    """Per row j: argmax over x of ``sum_c a_jc log sigmoid(s_c x) + b_jc log sigmoid(-s_c x)`` (concave), in [-LMAX, LMAX].

    Damped Newton from ``x`` (step halving until the objective does not
    decrease). Rows without weight keep ``x``. Returns the maximiser and
    whether every row's last step was below NEWTON_TOL.
    """
    x = np.clip(np.asarray(x, float).copy(), -_LMAX, _LMAX)
    n = a + b

    def f(v: FloatArray) -> FloatArray:
        z = v[:, None] * s
        out: FloatArray = (a * _log_sigmoid(z) + b * _log_sigmoid(-z)).sum(axis=1)
        return out

    fx = f(x)
    for _ in range(NEWTON_MAX):
        z = x[:, None] * s
        p, q = expit(z), expit(-z)  # q = 1 - p without cancellation
        g = (s * (a * q - b * p)).sum(axis=1)
        h = (s * s * n * p * q).sum(axis=1)
        step = np.where(h > 0, g / np.where(h > 0, h, 1.0), 0.0)
        step = np.where((h <= 0) & (g != 0), np.sign(g) * 5.0, step)  # flat region (saturated): move towards the bound
        step = np.clip(step, -5.0, 5.0)
        t = np.ones_like(x)
        xn = np.clip(x + step, -_LMAX, _LMAX)
        fn = f(xn)
        for _ in range(60):
            bad = fn < fx - 1e-13 * np.maximum(1.0, np.abs(fx))
            if not bad.any():
                break
            t = np.where(bad, t / 2, t)
            xn = np.where(bad, np.clip(x + t * step, -_LMAX, _LMAX), xn)
            fn = np.where(bad, f(xn), fn)
        moved = np.abs(xn - x)
        x, fx = xn, np.maximum(fn, fx)
        if float(moved.max(initial=0.0)) < NEWTON_TOL:
            return x, True
    return x, False


def _log_prior(p: Params, c: float, pi_pseudo: FloatArray | None) -> float:
    lp = 0.0
    if c > 0:
        lp += c * float(np.sum(_log_sigmoid(p.la) + _log_sigmoid(-p.la) + _log_sigmoid(p.lb) + _log_sigmoid(-p.lb)))
    if pi_pseudo is not None:
        lp += float(np.sum(pi_pseudo * np.log(p.pi)))
    return lp


def _em_map(d: _Data, p: Params, scales: FloatArray, c: float, pi_pseudo: FloatArray | None,
            counter: list[int]) -> tuple[Params, float]:
    """One EM step (MAP) and the log posterior at ``p``; ``pi_pseudo`` None: pi fixed."""
    j1, j0 = _joint(d, p, scales)
    ll_i = np.logaddexp(logsumexp(j1, axis=1), logsumexp(j0, axis=1))
    obj = float(ll_i.sum()) + _log_prior(p, c, pi_pseudo)
    W1 = np.exp(j1 - ll_i[:, None])  # (items, K): P(Y = 1, c | labels)
    W0 = np.exp(j0 - ll_i[:, None])
    K = scales.size
    J2 = 2 * d.J
    n1c = np.empty((d.J, K))  # Y = 1: weight on 1-labels (right), per labeler and class
    n1w = np.empty((d.J, K))  # Y = 1: on 0-labels (wrong)
    n0c = np.empty((d.J, K))  # Y = 0: on 0-labels (right)
    n0w = np.empty((d.J, K))  # Y = 0: on 1-labels (wrong)
    for k in range(K):
        s1 = np.bincount(d.code, weights=W1[d.item, k], minlength=J2)
        s0 = np.bincount(d.code, weights=W0[d.item, k], minlength=J2)
        n1c[:, k], n1w[:, k] = s1[1::2], s1[0::2]
        n0c[:, k], n0w[:, k] = s0[0::2], s0[1::2]
    sc = scales
    if c > 0:  # heroeval's pseudo_count: c pseudo labels of each kind at scale 1
        sc = np.append(scales, 1.0)
        cc = np.full((d.J, 1), c)
        n1c, n1w, n0c, n0w = (np.hstack([x, cc]) for x in (n1c, n1w, n0c, n0w))
    la, ok1 = newton_logit(p.la, n1c, n1w, sc)
    lb, ok0 = newton_logit(p.lb, n0c, n0w, sc)
    counter[0] += int(not ok1) + int(not ok0)
    w1 = W1.sum(axis=1)
    prev = np.bincount(d.grp, weights=w1, minlength=d.G) / np.maximum(d.gsize, 1.0)
    if pi_pseudo is None:
        pi = p.pi
    else:
        cnt = W1.sum(axis=0) + W0.sum(axis=0) + pi_pseudo
        pi = np.clip(cnt / cnt.sum(), EPS, 1.0)
        pi = pi / pi.sum()
    return Params(la, lb, np.clip(prev, EPS, 1 - EPS), pi), obj


def _pack(p: Params, fit_pi: bool) -> FloatArray:
    parts = [p.la, p.lb, np.clip(logit(p.prev), -_LMAX, _LMAX)]
    if fit_pi:
        parts.append(np.log(p.pi))
    return np.concatenate(parts)


def _unpack(th: FloatArray, J: int, G: int, fixed_pi: FloatArray, fit_pi: bool) -> Params:
    la = np.clip(th[:J], -_LMAX, _LMAX)
    lb = np.clip(th[J:2 * J], -_LMAX, _LMAX)
    prev = np.clip(expit(th[2 * J:2 * J + G]), EPS, 1 - EPS)
    if fit_pi:
        lp = th[2 * J + G:]
        pi = np.exp(lp - logsumexp(lp))
        pi = np.clip(pi, EPS, 1.0)
        pi = pi / pi.sum()
    else:
        pi = fixed_pi
    return Params(la, lb, prev, pi)


def _probs(p: Params) -> FloatArray:
    return np.concatenate([p.alpha, p.beta, p.prev, p.pi])


@dataclass(frozen=True)
class GladFit:
    labeler_ids: tuple[str, ...]
    params: Params
    scales: FloatArray
    objective: float  # log posterior (log-likelihood + log prior)
    loglik: float  # log-likelihood alone
    n_iter: int  # EM map evaluations
    converged: bool
    newton_capped: int  # M-steps whose Newton iteration hit NEWTON_MAX


def fit_glad(
    history: he.AnnotationSet,
    cal: he.Calibration | None = None,
    *,
    scales: tuple[float, ...] = SCALES,
    pi: tuple[float, ...] | None = None,
    pi_pseudo: tuple[float, ...] = PI_PSEUDO,
    pi_start: tuple[float, ...] = PI_START,
    pseudo_count: float = 0.0,
    tol: float = 1e-8,
    max_iter: int = 20_000,
    init: tuple[FloatArray, FloatArray, FloatArray] | None = None,
) -> GladFit:
    """Stage A of the GLAD-style model (module docstring).

    ``cal``: heroeval's calibration of the same history, the start (fitted
    here when None). ``pi``: fix the class shares (``(1, 0, ..., 0)`` is
    heroeval's Stage A). ``init``: (alpha, beta, prevalences) to start from
    instead of ``cal``.
    """
    if init is None:
        if cal is None:
            cal = he.calibrate(history, pseudo_count=pseudo_count, covariance=False)
        init = (np.asarray(cal.alpha, float), np.asarray(cal.beta, float), np.asarray(cal.round_prevalence, float))
    sc = np.asarray(scales, float)
    d = _prep(history)
    fit_pi = pi is None
    pp = np.asarray(pi_pseudo, float) if fit_pi else None
    a_i, b_i, p_i = (np.clip(np.asarray(x, float), EPS, 1 - EPS) for x in init)
    pi0 = np.asarray(pi_start if fit_pi else pi, float)
    pi0 = pi0 / pi0.sum()
    start = Params(logit(a_i), logit(b_i), p_i, pi0)
    J, G = d.J, d.G
    counter = [0]

    def em_map(th: FloatArray) -> tuple[FloatArray, float, float]:
        p_in = _unpack(th, J, G, pi0, fit_pi)
        p2, obj = _em_map(d, p_in, sc, pseudo_count, pp, counter)
        return _pack(p2, fit_pi), obj, float(np.max(np.abs(_probs(p2) - _probs(p_in))))

    th, converged, n_eval = lt.squarem(em_map, _pack(start, fit_pi), tol, max_iter)
    p = _unpack(th, J, G, pi0, fit_pi)
    ll = _loglik(d, p, sc)
    return GladFit(tuple(str(x) for x in history.labeler_ids), p, sc, ll + _log_prior(p, pseudo_count, pp), ll,
                   n_eval, converged, counter[0])


def _loglik(d: _Data, p: Params, scales: FloatArray) -> float:
    j1, j0 = _joint(d, p, scales)
    return float(np.logaddexp(logsumexp(j1, axis=1), logsumexp(j0, axis=1)).sum())


def two_coin_loglik(history: he.AnnotationSet, cal: he.Calibration) -> float:
    """heroeval's Stage A log-likelihood at ``cal`` (the model with pi = (1, 0, ..., 0))."""
    a = np.clip(np.asarray(cal.alpha, float), EPS, 1 - EPS)
    b = np.clip(np.asarray(cal.beta, float), EPS, 1 - EPS)
    p = Params(logit(a), logit(b), np.clip(np.asarray(cal.round_prevalence, float), EPS, 1 - EPS), np.array([1.0]))
    return _loglik(_prep(history), p, np.array([1.0]))


RateEstimate = lt.RateEstimate


def current_llr(fit: GladFit, current: he.AnnotationSet) -> FloatArray:
    """Per current item: log P(labels | Y=1) - log P(labels | Y=0) under the fitted mixture (unknown labelers left out)."""
    data, idx = lt.known_labelers(fit.labeler_ids, current)
    N = data.n_items
    code = 2 * idx[data.labeler] + data.label.astype(np.int64)
    p = fit.params
    lam1, lam0 = _class_logliks(data.annotation_item, code, N, p.la, p.lb, fit.scales)
    lpi = _logpi(p.pi)
    out: FloatArray = logsumexp(lam1 + lpi, axis=1) - logsumexp(lam0 + lpi, axis=1)
    return out


def estimate_rate(fit: GladFit, current: he.AnnotationSet) -> RateEstimate:
    """HERO-1 analogue: the root of the score equation with the mixture's log-likelihood ratios."""
    return lt.rate_from_llr(current_llr(fit, current))


# ---------------------------------------------------------------------------
# the experiment (as experiments/hard_class_experiment.py)
# ---------------------------------------------------------------------------

#: variant -> pseudo-counts on pi. "glad_grid": the model as specified; "glad_grid_weak": a ten times weaker
#: prior (added after the first run: where the two-coin model holds, the specified prior, not the data, kept
#: 5-10 % of the items in the shrunken classes, at a small loss of log-likelihood)
VARIANTS: dict[str, tuple[float, ...]] = {"glad_grid": PI_PSEUDO, "glad_grid_weak": (0.8, 0.1, 0.1)}


def mock_errors(hist: he.AnnotationSet, variants: list[str], pseudo_count: float = 0.0,
                scales: tuple[float, ...] = SCALES, folds: int = 5) -> dict[str, float]:
    """Mock-round errors on the history's gold, as hard_class_experiment.mock_errors (and heroeval's checks for HERO-1).

    The gold items are split into folds (``heroeval.checks.model_checks._folds``, seed 0);
    each fold is left out of the history, the models are refitted on the rest
    and give the fold's items their log-likelihood ratios; the ratios of all
    folds are pooled into one score equation; the error is its root minus the
    gold items' rate. Keys: ``"hero1"`` and each variant.
    """
    sc = np.asarray(scales, float)

    def fold_llrs(h_k: he.AnnotationSet, m_k: he.AnnotationSet, cal: he.Calibration) -> dict[str, FloatArray]:
        a = np.clip(np.asarray(cal.alpha, float), EPS, 1 - EPS)
        b = np.clip(np.asarray(cal.beta, float), EPS, 1 - EPS)
        two = GladFit(tuple(str(x) for x in h_k.labeler_ids),
                      Params(logit(a), logit(b), np.asarray(cal.round_prevalence, float), np.array([1.0])),
                      np.array([1.0]), math.nan, math.nan, 0, True, 0)
        out = {"hero1": current_llr(two, m_k)}
        for v in variants:
            fit = fit_glad(h_k, cal, scales=tuple(sc), pseudo_count=pseudo_count, pi_pseudo=VARIANTS[v])
            out[v] = current_llr(fit, m_k)
        return out

    return lt.mock_errors(hist, ("hero1", *variants), fold_llrs, folds)


def _fit_rows(hist: he.AnnotationSet, cur: he.AnnotationSet, truth: float, pseudo_count: float,
              scales: tuple[float, ...], variants: list[str], mk: dict[str, float] | None = None) -> list[dict[str, Any]]:
    mk = mk or {}
    cal = he.calibrate(hist, covariance=False)
    h1 = he.hero1(cur, cal, exclude_new_labelers=True)
    ll0 = two_coin_loglik(hist, cal)
    rows = [_fit_row(hist, cur, truth, pseudo_count, scales, v, cal, h1.estimate, ll0) for v in variants]
    for v, row in zip(variants, rows, strict=True):
        row["mock_err_hero1"], row["mock_err_glad"] = mk.get("hero1", math.nan), mk.get(v, math.nan)
    return rows


def _fit_row(hist: he.AnnotationSet, cur: he.AnnotationSet, truth: float, pseudo_count: float,
             scales: tuple[float, ...], variant: str, cal: he.Calibration, h1: float, ll0: float) -> dict[str, Any]:
    t = time.perf_counter()
    fit = fit_glad(hist, cal, scales=scales, pseudo_count=pseudo_count, pi_pseudo=VARIANTS[variant])
    est = estimate_rate(fit, cur)
    p = fit.params
    row: dict[str, Any] = {
        "variant": variant, "truth": truth, "hero1": h1, "glad": est.estimate, "glad_se": est.se,
        "glad_status": est.status,
    }
    row.update({f"pi{k + 1}": float(x) for k, x in enumerate(p.pi)})
    row.update({
        "loglik_gain": fit.loglik - ll0, "em_evals": fit.n_iter, "converged": fit.converged,
        "newton_capped": fit.newton_capped, "seconds": time.perf_counter() - t,
    })
    return row


def _real_task(args: tuple[str, str, list[int], float, tuple[float, ...], list[str], bool]) -> list[dict[str, Any]]:

    folder, suffix, rs, pseudo_count, scales, variants, mock = args
    warnings.simplefilter("ignore")
    data = load_folder(folder, binary_suffix=suffix)
    rows: list[dict[str, Any]] = []
    for r in rs:
        mk: dict[str, float] | None = None
        hist_ids = None
        for shift in ("none", "half"):
            sp = make_split(data, r, 0.10, 200, shift, 2026)
            # the shift only drops current labels: both shifts share the history (and its mock rounds)
            if hist_ids is None:
                hist_ids = sp.history.item_ids
                mk = mock_errors(sp.history, variants, pseudo_count, scales) if mock else None
            assert np.array_equal(hist_ids, sp.history.item_ids)
            rows.extend({"dataset": data.name, "shift": shift, "resample": r, **x}
                        for x in _fit_rows(sp.history, sp.current, sp.truth, pseudo_count, scales, variants, mk))
    return rows


SIM_DESIGNS = lt.SIM_DESIGNS


def _sim_task(args: tuple[str, list[int], float, tuple[float, ...], list[str]]) -> list[dict[str, Any]]:
    design, seeds, pseudo_count, scales, variants = args
    return lt.sim_rows(design, seeds, lambda d: _fit_rows(d.history, d.current, d.current_rate, pseudo_count, scales, variants))


def _rmse(e: pd.Series) -> float:
    return lt.rmse(e)


def _pi_cols(g: pd.DataFrame) -> list[str]:
    return [c for c in g.columns if c.startswith("pi") and c[2:].isdigit()]


def real_table(rows: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Per data set and shift: RMSEs on the same resamples (:func:`_latent_tables.real_table`)."""
    return lt.real_table(rows, ref, "glad", _pi_cols, ("newton_capped", lambda g: int(g["newton_capped"].sum())))


def sim_table(rows: pd.DataFrame) -> pd.DataFrame:
    return lt.sim_table(rows, "glad", _pi_cols)


def real_summary(tab: pd.DataFrame) -> str:
    return lt.real_summary(tab, "glad", "GLAD")


def main() -> None:
    ap = argparse.ArgumentParser()
    lt.common_args(ap, VARIANTS)
    ap.add_argument("--pseudo-count", type=float, default=0.0, help="labelers' pseudo-count (heroeval's pseudo_count)")
    ap.add_argument("--scales", default=",".join(str(x) for x in SCALES), help="comma-separated difficulty grid, first 1")
    a = ap.parse_args()
    scales = tuple(float(x) for x in a.scales.split(","))
    variants = a.variants.split(",")
    if len(scales) != len(PI_PSEUDO):
        raise SystemExit(f"--scales needs {len(PI_PSEUDO)} values (PI_PSEUDO, PI_START)")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 250)
    t0 = time.perf_counter()
    if not a.skip_real:
        jobs = [(str(Path(a.data) / name), suffix, [r], a.pseudo_count, scales, variants, a.mock)
                for name, suffix in lt.BINARY if not a.only or name in a.only.split(",") for r in range(a.resamples)]
        real = pd.DataFrame(run_chunks(_real_task, jobs, [1] * len(jobs), a.workers))
        real = real.sort_values(["variant", "dataset", "shift", "resample"], kind="stable").reset_index(drop=True)
        sfx = "_mock" if a.mock else ""  # the mock rounds' run is kept apart from the main one
        real.to_csv(out / f"glad_rows_real{sfx}.csv.gz", index=False)
        ref = pd.read_csv(Path(a.ref) / "resamples.csv.gz")
        ref = ref[ref["rho"] == 0.1]
        tab = real_table(real, ref)
        tab.to_csv(out / f"glad_real{sfx}.csv", index=False)
        print(tab[["variant", "dataset", "shift", "glad_rmse", "glad_bias", "hero1_rmse", "hero1_bias", "best_method", "best_rmse",
                   "auto_rmse", "glad_over_best", "glad_over_hero1", *[c for c in tab.columns if c.startswith("median_")],
                   "hero1_anchor_maxdiff", "all_converged"]].round(3).to_string(index=False))
        print(real_summary(tab) + f"; {time.perf_counter() - t0:.0f} s", flush=True)
    if not a.skip_sim:
        jobs2 = [(dn, list(range(i, min(i + 10, a.reps))), a.pseudo_count, scales, variants) for dn in SIM_DESIGNS
                 for i in range(0, a.reps, 10)]
        sim = pd.DataFrame(run_chunks(_sim_task, jobs2, [len(j[1]) for j in jobs2], a.workers))
        sim = sim.sort_values(["variant", "design", "rep"], kind="stable").reset_index(drop=True)
        sim.to_csv(out / "glad_rows_sim.csv.gz", index=False)
        stab = sim_table(sim)
        stab.to_csv(out / "glad_sim.csv", index=False)
        print(stab.round(4).to_string(index=False))
        for v, sv in stab.groupby("variant", sort=False):
            print(v)
            print(sv.pivot(index="method", columns="design", values="rmse").round(4).to_string())
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
