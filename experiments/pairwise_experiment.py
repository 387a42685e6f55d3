"""Issue #5, idea 2: pairwise dependence (clusters of labelers that copy a shared decision). An experiment, not a heroeval method.

Model
-----
The history's labelers are partitioned into clusters (singletons allowed).
Within a non-singleton cluster k every item i has a latent cluster decision
``u_ik`` in {0, 1} with ``P(u = 1 | Y = 1) = a_k`` and
``P(u = 1 | Y = 0) = 1 - b_k``; each label of a labeler j in cluster k on
item i copies ``u_ik`` with probability ``rho_k`` and is otherwise j's own
two-coin label (sensitivity ``alpha_j``, specificity ``beta_j``). Labelers in
singletons are plain two-coin labelers (their rho is 0: copying one's own
decision would only re-parametrise the two-coin model). So

    P(labels_i | Y) = prod_{singleton labels} P_j(z | Y)
                      * prod_k sum_u P(u | Y) prod_{labels of k on i} [rho_k 1(z = u) + (1 - rho_k) P_j(z | Y)],

exact and factorised over clusters, so HERO-1's likelihood ratios are exact.
With every rho_k = 0 it is heroeval's Stage A and HERO-1
(tests/experiments/test_pairwise_experiment.py, to 1e-6). A labeler's repeated
labels on one item are treated as separate labels (each copies or not).

Clusters (:func:`choose_clusters`) are chosen on the history's gold before
fitting, from heroeval's own pairwise residual dependence
(``heroeval.checks.dependence_test`` with every pair shown: per labeler pair
the standardised residual products on shared gold items, one-sided z,
Benjamini–Hochberg over the pairs): pairs whose BH-adjusted p is below
``LINK_ALPHA = 0.05`` are linked and the clusters are the connected
components. A component larger than ``MAX_CLUSTER = 10`` labelers is split by
average-linkage hierarchical clustering (``scipy.cluster.hierarchy``,
distance ``1 - mean residual product`` clipped to [0, 2], pairs without shared
gold at distance 1), bisected until no part exceeds the cap. Nothing else
is tuned.

Stage A: EM over (Y, u_i1..u_iK, copy indicators) with gold items' Y known,
one prevalence per history round (``AnnotationSet.item_round``, as heroeval's
Stage A), SQUAREM-accelerated with a monotone safeguard exactly as
``experiments/glad_experiment.py`` (in logit space), stopping when a plain EM
step moves no probability by more than ``tol`` (at most ``max_iter`` EM map
evaluations; fits that hit the cap are counted, ``converged``). M-steps are
closed form (weighted proportions): alpha_j/beta_j from the posterior weights
of j's non-copied labels given Y, a_k/b_k from u's posterior given Y (over the
items cluster k labelled), rho_k from the copy posteriors. Priors (MAP),
stated: ``rho_k ~ Beta(2, 4)``, ``a_k, b_k ~ Beta(2, 2)``; labelers and
prevalences unpenalised (heroeval's ``pseudo_count`` 0, as ``calibrate()``).
Start: heroeval's own ``calibrate()`` fit (alpha, beta, prevalences) and
``rho_k = 0.3``, ``a_k = b_k = 0.8``.

Variants (``--variants``): only ``pairwise`` (the model above).

HERO-1 analogue: with every history parameter fixed, ``L_i = log P(labels_i |
Y = 1) - log P(labels_i | Y = 0)`` under the fitted model and the rate solves
heroeval's score equation (``heroeval.estimators.score_equation.solve_score``). Labelers unknown
to the history are left out (as ``exclude_new_labelers=True``). Standard
error: ``1 / sqrt(sum_i psi_i(mu)^2)`` (current round only, as the GLAD
experiment's). Only the point estimate is judged.

Command (from the repository root; 2 worker processes)::

    PYTHONPATH=src OMP_NUM_THREADS=1 .venv/bin/python -m experiments.pairwise_experiment --resamples 10 --reps 50 \
        --ref ../main/benchmarks/results/research/robustness

(10 min 25 s on 2 cores, the real part 8 min 25 s) and, for the mock rounds
(run on 5 resamples only, for lack of time: 12 min 58 s, about three times
the real part's cost per resample)::

    PYTHONPATH=src OMP_NUM_THREADS=1 .venv/bin/python -m experiments.pairwise_experiment --resamples 5 --skip-sim --mock \
        --ref ../main/benchmarks/results/research/robustness

``--ref`` is the folder holding robustness.py's ``resamples.csv.gz`` (not in
git; it may hold more resamples than are run here: only resamples
0..R-1 are used, for the seven methods and for ``auto``, whose rows there are
the present rule's).

Real data: the splits of ``benchmarks/robustness.py`` (``heroeval.workflows.benchmark.make_split``,
seed 2026, rho 0.10, n 200, shift none and half, resamples 0..R-1): per
resample HERO-1 (``calibrate`` + ``hero1(exclude_new_labelers=True)``,
recomputed as an anchor: it must equal ``resamples.csv.gz``, column
``hero1_anchor_maxdiff``) and the pairwise estimate (the two shifts share
the history, so its clusters and fit are computed once per resample).
Simulation:
``dependent_dgp`` (dense, 5 of 10 labelers per item) and ``paper_dgp``
(dense, 3 of 10), seeds 0..reps-1 as in ``benchmarks/robustness_sim.py``:
the pairwise model, and HERO-1, HERO joint, ``rogan_gladen`` and ``auto``
recomputed on the same seeds. With ``--mock``, the mock-round errors of
HERO-1 and of each variant on the history's gold (:func:`mock_errors`, as
the GLAD experiment's; clusters re-chosen on each fold's history).
Writes to ``--out`` (default benchmarks/results/research/robustness):

* ``pairwise_rows_real.csv.gz``, ``pairwise_rows_sim.csv.gz``: one row per
  resample / replication (estimates, truth, cluster statistics, mean rho,
  log-likelihood gain over the two-coin fit, EM map evaluations, convergence);
* ``pairwise_real.csv``: per data set and shift, RMSE of the pairwise model,
  HERO-1, the best of the seven methods and ``auto`` (all from
  ``resamples.csv.gz`` on the same resamples), the ratios, whether the
  pairwise model would be the new best;
* ``pairwise_sim.csv``: per design and estimator: bias, SD, RMSE, RMSE over
  HERO-1's and 95 % coverage;
* with ``--mock``, ``pairwise_rows_real_mock.csv.gz`` and ``pairwise_real_mock.csv``
  instead of the real-data files above, with the mean mock errors and the
  RMSE of choosing between HERO-1 and the pairwise model by the smaller mock error.
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
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import squareform
from scipy.special import expit, logit

import heroeval as he
from heroeval.checks.model_checks import dependence_test
from heroeval.core.parallel import run_chunks
from heroeval.workflows.benchmark import load_folder, make_split

from experiments import _latent_tables as lt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

EPS = 1e-9  #: probabilities are kept in [EPS, 1 - EPS], as in heroeval.stage_a.two_coin
_LMAX = float(logit(1 - EPS))
LINK_ALPHA = 0.05  #: BH-adjusted one-sided p below which a labeler pair is linked
MAX_CLUSTER = 10  #: larger connected components are split by hierarchical clustering
RHO_PRIOR = (2.0, 4.0)  #: Beta prior on rho_k (MAP)
AB_PRIOR = (2.0, 2.0)  #: Beta prior on a_k and b_k (MAP)
RHO_START = 0.3
AB_START = 0.8


# ---------------------------------------------------------------------------
# clusters from the gold's pairwise residual dependence
# ---------------------------------------------------------------------------


def choose_clusters(history: he.AnnotationSet, link_alpha: float = LINK_ALPHA,
                    max_cluster: int = MAX_CLUSTER) -> IntArray:
    """Labeler -> cluster index (0..K-1) for labelers in non-singleton clusters, -1 for singletons (module docstring)."""


    J = history.n_labelers
    out = np.full(J, -1, dtype=np.int64)
    t = dependence_test(history, max_pairs_shown=10**9)
    if not t.pairs:
        return out
    index = {str(x): k for k, x in enumerate(history.labeler_ids)}
    pa = np.array([index[p["labelers"][0]] for p in t.pairs], dtype=np.int64)
    pb = np.array([index[p["labelers"][1]] for p in t.pairs], dtype=np.int64)
    corr = np.array([p["correlation"] for p in t.pairs], float)
    link = np.array([p["p_adjusted"] < link_alpha for p in t.pairs], bool)
    if not link.any():
        return out
    g = coo_matrix((np.ones(int(link.sum())), (pa[link], pb[link])), shape=(J, J))
    _, comp = connected_components(g, directed=False)
    dist = np.ones((J, J))
    dist[pa, pb] = dist[pb, pa] = np.clip(1.0 - np.nan_to_num(corr, nan=0.0), 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    parts: list[IntArray] = []
    stack = [np.flatnonzero(comp == c) for c in np.unique(comp)]
    while stack:
        m = stack.pop()
        if m.size < 2:
            continue
        if m.size <= max_cluster:
            parts.append(m)
            continue
        lab = fcluster(linkage(squareform(dist[np.ix_(m, m)], checks=False), method="average"), 2, criterion="maxclust")
        if np.unique(lab).size < 2:  # cannot split (all distances equal): cut in order
            lab = np.where(np.arange(m.size) < m.size // 2, 1, 2)
        stack.extend(m[lab == v] for v in np.unique(lab))
    for k, m in enumerate(sorted(parts, key=lambda x: int(x[0]))):
        out[m] = k
    return out


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Labels:
    """Annotations split into singleton labels and clustered labels (one (item, cluster) 'pair' index)."""

    N: int
    s_item: IntArray  # singleton labels: item, labeler, label
    s_lab: IntArray
    s_z: FloatArray
    c_lab: IntArray  # clustered labels: labeler, label, cluster, pair
    c_z: FloatArray
    c_k: IntArray
    c_pair: IntArray
    pair_item: IntArray  # pair -> item
    pair_k: IntArray  # pair -> cluster


def _split_labels(item: IntArray, lab: IntArray, z: FloatArray, N: int, cl: IntArray) -> _Labels:
    k = cl[lab]
    s = k < 0
    c = ~s
    key = item[c] * max(int(cl.max(initial=-1)) + 1, 1) + k[c]
    uk, inv = np.unique(key, return_inverse=True)
    K1 = max(int(cl.max(initial=-1)) + 1, 1)
    return _Labels(N, item[s], lab[s], z[s], lab[c], z[c], k[c], inv.astype(np.int64),
                   (uk // K1).astype(np.int64), (uk % K1).astype(np.int64))


@dataclass(frozen=True)
class Params:
    alpha: FloatArray
    beta: FloatArray
    prev: FloatArray  # per history round
    rho: FloatArray  # per cluster
    a: FloatArray  # P(u = 1 | Y = 1)
    b: FloatArray  # P(u = 0 | Y = 0)


def _bc(x: IntArray, weights: FloatArray, minlength: int) -> FloatArray:
    """np.bincount with weights, always float (numpy returns int64 zeros for an empty ``x``)."""
    out: FloatArray = np.bincount(x, weights=weights, minlength=minlength).astype(np.float64)
    return out


def _logp_own(alpha: FloatArray, beta: FloatArray, lab: IntArray, z: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per label: log P_j(z | Y = 1), log P_j(z | Y = 0) (two-coin)."""
    al, be = alpha[lab], beta[lab]
    p1 = np.where(z == 1, al, 1 - al)
    p0 = np.where(z == 1, 1 - be, be)
    return p1, p0


def _logliks(L: _Labels, p: Params) -> tuple[FloatArray, FloatArray, dict[str, Any]]:
    """Per item log P(labels | Y = 1), log P(labels | Y = 0); and the clustered labels' intermediates."""
    sp1, sp0 = _logp_own(p.alpha, p.beta, L.s_lab, L.s_z)
    lam1 = _bc(L.s_item, weights=np.log(sp1), minlength=L.N)
    lam0 = _bc(L.s_item, weights=np.log(sp0), minlength=L.N)
    inter: dict[str, Any] = {}
    if L.c_z.size:
        P = L.pair_item.size
        cp1, cp0 = _logp_own(p.alpha, p.beta, L.c_lab, L.c_z)
        r = p.rho[L.c_k]
        f: dict[tuple[int, int], FloatArray] = {}
        S: dict[tuple[int, int], FloatArray] = {}
        for y, own in ((1, cp1), (0, cp0)):
            for u in (0, 1):
                f[y, u] = r * (L.c_z == u) + (1 - r) * own
                S[y, u] = _bc(L.c_pair, weights=np.log(f[y, u]), minlength=P)
        a, b = p.a[L.pair_k], p.b[L.pair_k]
        lpu = {(1, 1): np.log(a), (1, 0): np.log1p(-a), (0, 1): np.log1p(-b), (0, 0): np.log(b)}
        M = {y: np.logaddexp(lpu[y, 0] + S[y, 0], lpu[y, 1] + S[y, 1]) for y in (0, 1)}
        lam1 += _bc(L.pair_item, weights=M[1], minlength=L.N)
        lam0 += _bc(L.pair_item, weights=M[0], minlength=L.N)
        inter = {"f": f, "S": S, "lpu": lpu, "M": M, "cp": {1: cp1, 0: cp0}}
    return lam1, lam0, inter


@dataclass(frozen=True)
class _Data:
    L: _Labels
    grp: IntArray  # item -> round
    gsize: FloatArray
    mask1: FloatArray
    mask0: FloatArray
    J: int
    G: int
    K: int


def _prep(ds: he.AnnotationSet, cl: IntArray) -> _Data:
    gold = ds.gold
    grp = ds.item_round.astype(np.int64)
    L = _split_labels(ds.annotation_item.astype(np.int64), ds.labeler.astype(np.int64), ds.label.astype(np.float64),
                      ds.n_items, cl)
    return _Data(L, grp, np.bincount(grp, minlength=ds.n_rounds).astype(np.float64),
                 np.where(gold == 0, -np.inf, 0.0), np.where(gold == 1, -np.inf, 0.0), ds.n_labelers, ds.n_rounds,
                 int(cl.max(initial=-1)) + 1)


def _log_prior(p: Params, fit_rho: bool) -> float:
    if not fit_rho or p.rho.size == 0:
        return 0.0
    (r1, r2), (c1, c2) = RHO_PRIOR, AB_PRIOR
    return float(np.sum((r1 - 1) * np.log(p.rho) + (r2 - 1) * np.log1p(-p.rho))
                 + np.sum((c1 - 1) * np.log(p.a) + (c2 - 1) * np.log1p(-p.a))
                 + np.sum((c1 - 1) * np.log(p.b) + (c2 - 1) * np.log1p(-p.b)))


def _em_map(d: _Data, p: Params, fit_rho: bool) -> tuple[Params, float]:
    """One EM step (MAP) and the log posterior at ``p``; ``fit_rho`` False: rho, a, b fixed."""
    L = d.L
    lam1, lam0, it = _logliks(L, p)
    j1 = lam1 + np.log(p.prev)[d.grp] + d.mask1
    j0 = lam0 + np.log1p(-p.prev)[d.grp] + d.mask0
    ll_i = np.logaddexp(j1, j0)
    obj = float(ll_i.sum()) + _log_prior(p, fit_rho)
    w = {1: np.exp(j1 - ll_i), 0: np.exp(j0 - ll_i)}
    J = d.J
    # own (non-copied) label weights per Y: singletons first
    num1 = _bc(L.s_lab, weights=w[1][L.s_item] * L.s_z, minlength=J)
    den1 = _bc(L.s_lab, weights=w[1][L.s_item], minlength=J)
    num0 = _bc(L.s_lab, weights=w[0][L.s_item] * (1 - L.s_z), minlength=J)
    den0 = _bc(L.s_lab, weights=w[0][L.s_item], minlength=J)
    rho, a, b = p.rho, p.a, p.b
    if L.c_z.size:
        f, S, lpu, M = it["f"], it["S"], it["lpu"], it["M"]
        r = p.rho[L.c_k]
        K = d.K
        copy = np.zeros(L.c_z.size)
        u1 = {}
        for y in (0, 1):
            wy = w[y][L.pair_item]
            own = np.zeros(L.c_z.size)
            for u in (0, 1):
                W = wy * np.exp(lpu[y, u] + S[y, u] - M[y])  # P(Y = y, u | labels) per pair
                Wa = W[L.c_pair]
                c = r * (L.c_z == u) / f[y, u]
                copy += Wa * c
                own += Wa * (1 - c)
                if u == 1:
                    u1[y] = W
            if y == 1:
                num1 += _bc(L.c_lab, weights=own * L.c_z, minlength=J)
                den1 += _bc(L.c_lab, weights=own, minlength=J)
            else:
                num0 += _bc(L.c_lab, weights=own * (1 - L.c_z), minlength=J)
                den0 += _bc(L.c_lab, weights=own, minlength=J)
        if fit_rho:
            (r1, r2), (c1, c2) = RHO_PRIOR, AB_PRIOR
            n_k = np.bincount(L.c_k, minlength=K).astype(float)
            rho = (_bc(L.c_k, weights=copy, minlength=K) + r1 - 1) / (n_k + r1 + r2 - 2)
            wy1 = _bc(L.pair_k, weights=w[1][L.pair_item], minlength=K)
            wy0 = _bc(L.pair_k, weights=w[0][L.pair_item], minlength=K)
            a = (_bc(L.pair_k, weights=u1[1], minlength=K) + c1 - 1) / (wy1 + c1 + c2 - 2)
            b = (wy0 - _bc(L.pair_k, weights=u1[0], minlength=K) + c1 - 1) / (wy0 + c1 + c2 - 2)
            rho, a, b = (np.clip(x, EPS, 1 - EPS) for x in (rho, a, b))
    with np.errstate(invalid="ignore", divide="ignore"):
        alpha = np.where(den1 > 0, num1 / den1, p.alpha)
        beta = np.where(den0 > 0, num0 / den0, p.beta)
    prev = _bc(d.grp, weights=w[1], minlength=d.G) / np.maximum(d.gsize, 1.0)
    return Params(np.clip(alpha, EPS, 1 - EPS), np.clip(beta, EPS, 1 - EPS), np.clip(prev, EPS, 1 - EPS),
                  rho, a, b), obj


def _pack(p: Params, fit_rho: bool) -> FloatArray:
    parts = [p.alpha, p.beta, p.prev] + ([p.rho, p.a, p.b] if fit_rho else [])
    return np.clip(logit(np.concatenate(parts)), -_LMAX, _LMAX)


def _unpack(th: FloatArray, d: _Data, fixed: Params, fit_rho: bool) -> Params:
    q = np.clip(expit(th), EPS, 1 - EPS)
    J, G, K = d.J, d.G, d.K
    alpha, beta, prev = q[:J], q[J:2 * J], q[2 * J:2 * J + G]
    if fit_rho:
        o = 2 * J + G
        return Params(alpha, beta, prev, q[o:o + K], q[o + K:o + 2 * K], q[o + 2 * K:o + 3 * K])
    return Params(alpha, beta, prev, fixed.rho, fixed.a, fixed.b)


def _probs(p: Params) -> FloatArray:
    return np.concatenate([p.alpha, p.beta, p.prev, p.rho, p.a, p.b])


@dataclass(frozen=True)
class PairwiseFit:
    labeler_ids: tuple[str, ...]
    clusters: IntArray  # labeler -> cluster, -1: singleton
    params: Params
    objective: float  # log posterior (log-likelihood + log prior)
    loglik: float  # log-likelihood alone
    n_iter: int  # EM map evaluations
    converged: bool


def fit_pairwise(
    history: he.AnnotationSet,
    cal: he.Calibration | None = None,
    *,
    clusters: IntArray | None = None,
    rho: float | None = None,
    tol: float = 1e-8,
    max_iter: int = 20_000,
    init: tuple[FloatArray, FloatArray, FloatArray] | None = None,
) -> PairwiseFit:
    """Stage A of the cluster-copying model (module docstring).

    ``cal``: heroeval's calibration of the same history, the start (fitted
    here when None). ``clusters``: labeler -> cluster (-1 singleton); chosen by
    :func:`choose_clusters` when None. ``rho``: fix every rho_k (0 is
    heroeval's Stage A). ``init``: (alpha, beta, prevalences) to start from
    instead of ``cal``.
    """
    if init is None:
        if cal is None:
            cal = he.calibrate(history, covariance=False)
        init = (np.asarray(cal.alpha, float), np.asarray(cal.beta, float), np.asarray(cal.round_prevalence, float))
    cl = choose_clusters(history) if clusters is None else np.asarray(clusters, np.int64)
    d = _prep(history, cl)
    K = d.K
    fit_rho = rho is None and K > 0
    a_i, b_i, p_i = (np.clip(np.asarray(x, float), EPS, 1 - EPS) for x in init)
    r0 = RHO_START if rho is None else rho
    start = Params(a_i, b_i, p_i, np.full(K, r0), np.full(K, AB_START), np.full(K, AB_START))
    def em_map(th: FloatArray) -> tuple[FloatArray, float, float]:
        p_in = _unpack(th, d, start, fit_rho)
        p2, obj = _em_map(d, p_in, fit_rho)
        return _pack(p2, fit_rho), obj, float(np.max(np.abs(_probs(p2) - _probs(p_in))))

    th, converged, n_eval = lt.squarem(em_map, _pack(start, fit_rho), tol, max_iter)
    p = _unpack(th, d, start, fit_rho)
    ll = _loglik(d, p)
    return PairwiseFit(tuple(str(x) for x in history.labeler_ids), cl, p, ll + _log_prior(p, fit_rho), ll,
                       n_eval, converged)


def _loglik(d: _Data, p: Params) -> float:
    lam1, lam0, _ = _logliks(d.L, p)
    j1 = lam1 + np.log(p.prev)[d.grp] + d.mask1
    j0 = lam0 + np.log1p(-p.prev)[d.grp] + d.mask0
    return float(np.logaddexp(j1, j0).sum())


def two_coin_loglik(history: he.AnnotationSet, cal: he.Calibration) -> float:
    """heroeval's Stage A log-likelihood at ``cal`` (the model without clusters)."""
    a = np.clip(np.asarray(cal.alpha, float), EPS, 1 - EPS)
    b = np.clip(np.asarray(cal.beta, float), EPS, 1 - EPS)
    e = np.zeros(0)
    p = Params(a, b, np.clip(np.asarray(cal.round_prevalence, float), EPS, 1 - EPS), e, e, e)
    return _loglik(_prep(history, np.full(history.n_labelers, -1, dtype=np.int64)), p)


RateEstimate = lt.RateEstimate


def current_llr(fit: PairwiseFit, current: he.AnnotationSet) -> FloatArray:
    """Per current item: log P(labels | Y=1) - log P(labels | Y=0) under the fitted model (unknown labelers left out)."""
    data, idx = lt.known_labelers(fit.labeler_ids, current)
    lab = idx[data.labeler]
    L = _split_labels(data.annotation_item.astype(np.int64), lab, data.label.astype(np.float64), data.n_items,
                      fit.clusters)
    lam1, lam0, _ = _logliks(L, fit.params)
    out: FloatArray = lam1 - lam0
    return out


def estimate_rate(fit: PairwiseFit, current: he.AnnotationSet) -> RateEstimate:
    """HERO-1 analogue: the root of the score equation with the model's log-likelihood ratios."""
    return lt.rate_from_llr(current_llr(fit, current))


def cluster_stats(fit: PairwiseFit) -> dict[str, float]:
    cl = fit.clusters
    sizes = np.bincount(cl[cl >= 0]) if (cl >= 0).any() else np.zeros(0, dtype=np.int64)
    return {"n_clusters": float(sizes.size), "largest_cluster": float(sizes.max(initial=0)),
            "clustered_labelers": float(sizes.sum()),
            "rho_mean": float(np.mean(fit.params.rho)) if fit.params.rho.size else math.nan}
# ---------------------------------------------------------------------------
# the experiment (as experiments/pairwise_experiment.py)
# ---------------------------------------------------------------------------

#: variant -> cluster-choice settings (link_alpha, max_cluster). Only the model as specified.
VARIANTS: dict[str, tuple[float, int]] = {"pairwise": (LINK_ALPHA, MAX_CLUSTER)}


def mock_errors(hist: he.AnnotationSet, variants: list[str], folds: int = 5) -> dict[str, float]:
    """Mock-round errors on the history's gold, as pairwise_experiment.mock_errors (and heroeval's checks for HERO-1).

    The gold items are split into folds (``heroeval.checks.model_checks._folds``, seed 0);
    each fold is left out of the history, the models are refitted on the rest
    and give the fold's items their log-likelihood ratios; the ratios of all
    folds are pooled into one score equation; the error is its root minus the
    gold items' rate. Keys: ``"hero1"`` and each variant.
    """
    def fold_llrs(h_k: he.AnnotationSet, m_k: he.AnnotationSet, cal: he.Calibration) -> dict[str, FloatArray]:
        a = np.clip(np.asarray(cal.alpha, float), EPS, 1 - EPS)
        b = np.clip(np.asarray(cal.beta, float), EPS, 1 - EPS)
        e = np.zeros(0)
        two = PairwiseFit(tuple(str(x) for x in h_k.labeler_ids), np.full(h_k.n_labelers, -1, dtype=np.int64),
                          Params(a, b, np.asarray(cal.round_prevalence, float), e, e, e), math.nan, math.nan, 0, True)
        out = {"hero1": current_llr(two, m_k)}
        for v in variants:
            la_, mc_ = VARIANTS[v]
            fit = fit_pairwise(h_k, cal, clusters=choose_clusters(h_k, la_, mc_))
            out[v] = current_llr(fit, m_k)
        return out

    return lt.mock_errors(hist, ("hero1", *variants), fold_llrs, folds)


def _fit_rows(hist: he.AnnotationSet, cur: he.AnnotationSet, truth: float, variants: list[str],
              mk: dict[str, float] | None = None,
              cache: dict[str, tuple[PairwiseFit, float]] | None = None) -> list[dict[str, Any]]:
    """``cache``: variant -> (fit, seconds), shared by calls on the same history (both shifts share it)."""
    mk = mk or {}
    cal = he.calibrate(hist, covariance=False)
    h1 = he.hero1(cur, cal, exclude_new_labelers=True)
    ll0 = two_coin_loglik(hist, cal)
    rows = [_fit_row(hist, cur, truth, v, cal, h1.estimate, ll0, cache) for v in variants]
    for v, row in zip(variants, rows, strict=True):
        row["mock_err_hero1"], row["mock_err_pairwise"] = mk.get("hero1", math.nan), mk.get(v, math.nan)
    return rows


def _fit_row(hist: he.AnnotationSet, cur: he.AnnotationSet, truth: float, variant: str, cal: he.Calibration,
             h1: float, ll0: float, cache: dict[str, tuple[PairwiseFit, float]] | None = None) -> dict[str, Any]:
    if cache is not None and variant in cache:
        fit, secs = cache[variant]
    else:
        t = time.perf_counter()
        la_, mc_ = VARIANTS[variant]
        fit = fit_pairwise(hist, cal, clusters=choose_clusters(hist, la_, mc_))
        secs = time.perf_counter() - t
        if cache is not None:
            cache[variant] = (fit, secs)
    est = estimate_rate(fit, cur)
    row: dict[str, Any] = {
        "variant": variant, "truth": truth, "hero1": h1, "pairwise": est.estimate, "pairwise_se": est.se,
        "pairwise_status": est.status,
    }
    row.update(cluster_stats(fit))
    row.update({
        "loglik_gain": fit.loglik - ll0, "em_evals": fit.n_iter, "converged": fit.converged,
        "seconds": secs,
    })
    return row


def _real_task(args: tuple[str, str, list[int], list[str], bool]) -> list[dict[str, Any]]:

    folder, suffix, rs, variants, mock = args
    warnings.simplefilter("ignore")
    data = load_folder(folder, binary_suffix=suffix)
    rows: list[dict[str, Any]] = []
    for r in rs:
        mk: dict[str, float] | None = None
        hist_ids = None
        cache: dict[str, tuple[PairwiseFit, float]] = {}  # the history's fit, shared by both shifts
        for shift in ("none", "half"):
            sp = make_split(data, r, 0.10, 200, shift, 2026)
            # the shift only drops current labels: both shifts share the history (and its mock rounds)
            if hist_ids is None:
                hist_ids = sp.history.item_ids
                mk = mock_errors(sp.history, variants) if mock else None
            assert np.array_equal(hist_ids, sp.history.item_ids)
            rows.extend({"dataset": data.name, "shift": shift, "resample": r, **x}
                        for x in _fit_rows(sp.history, sp.current, sp.truth, variants, mk, cache))
    return rows


SIM_DESIGNS = lt.SIM_DESIGNS


def _sim_task(args: tuple[str, list[int], list[str]]) -> list[dict[str, Any]]:
    design, seeds, variants = args
    return lt.sim_rows(design, seeds, lambda d: _fit_rows(d.history, d.current, d.current_rate, variants))


def _rmse(e: pd.Series) -> float:
    return lt.rmse(e)


def _pi_cols(g: pd.DataFrame) -> list[str]:
    """The model's own summary columns (cluster statistics and mean rho; glad_experiment.py's pi columns)."""
    return [c for c in ("n_clusters", "largest_cluster", "clustered_labelers", "rho_mean") if c in g.columns]


def real_table(rows: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Per data set and shift: RMSEs on the same resamples (:func:`_latent_tables.real_table`)."""
    return lt.real_table(rows, ref, "pairwise", _pi_cols, ("n_converged", lambda g: int(g["converged"].sum())))


def sim_table(rows: pd.DataFrame) -> pd.DataFrame:
    return lt.sim_table(rows, "pairwise", _pi_cols)


def real_summary(tab: pd.DataFrame) -> str:
    return lt.real_summary(tab, "pairwise", "the pairwise model")


def _progress(t0: float) -> Any:
    def f(done: int, total: int) -> None:
        print(f"{done} of {total} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    return f


def main() -> None:
    ap = argparse.ArgumentParser()
    lt.common_args(ap, VARIANTS)
    a = ap.parse_args()
    variants = a.variants.split(",")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    pd.set_option("display.width", 250)
    t0 = time.perf_counter()
    if not a.skip_real:
        jobs = [(str(Path(a.data) / name), suffix, [r], variants, a.mock)
                for name, suffix in lt.BINARY if not a.only or name in a.only.split(",") for r in range(a.resamples)]
        real = pd.DataFrame(run_chunks(_real_task, jobs, [1] * len(jobs), a.workers, _progress(t0)))
        real = real.sort_values(["variant", "dataset", "shift", "resample"], kind="stable").reset_index(drop=True)
        sfx = "_mock" if a.mock else ""  # the mock rounds' run is kept apart from the main one
        real.to_csv(out / f"pairwise_rows_real{sfx}.csv.gz", index=False)
        ref = pd.read_csv(Path(a.ref) / "resamples.csv.gz")
        ref = ref[ref["rho"] == 0.1]
        tab = real_table(real, ref)
        tab.to_csv(out / f"pairwise_real{sfx}.csv", index=False)
        print(tab[["variant", "dataset", "shift", "pairwise_rmse", "pairwise_bias", "hero1_rmse", "hero1_bias", "best_method", "best_rmse",
                   "auto_rmse", "pairwise_over_best", "pairwise_over_hero1", *[c for c in tab.columns if c.startswith("median_")],
                   "hero1_anchor_maxdiff", "all_converged"]].round(3).to_string(index=False))
        print(real_summary(tab) + f"; {time.perf_counter() - t0:.0f} s", flush=True)
    if not a.skip_sim:
        jobs2 = [(dn, list(range(i, min(i + 10, a.reps))), variants) for dn in SIM_DESIGNS
                 for i in range(0, a.reps, 10)]
        sim = pd.DataFrame(run_chunks(_sim_task, jobs2, [len(j[1]) for j in jobs2], a.workers, _progress(t0)))
        sim = sim.sort_values(["variant", "design", "rep"], kind="stable").reset_index(drop=True)
        sim.to_csv(out / "pairwise_rows_sim.csv.gz", index=False)
        stab = sim_table(sim)
        stab.to_csv(out / "pairwise_sim.csv", index=False)
        print(stab.round(4).to_string(index=False))
        for v, sv in stab.groupby("variant", sort=False):
            print(v)
            print(sv.pivot(index="method", columns="design", values="rmse").round(4).to_string())
    print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
