"""Stage A's slow fits: pin parameters that head to 0 or 1, and refit the rest (issue "fast by default", item 6).

    .venv/bin/python -m experiments.em_boundary_pinning      # ~20 s

Runs SQUAREM for K0 map evaluations
if not converged, parameters within 1e-6
of a bound that moved towards it in the last plain step are fixed at the clip
bound (1e-9 from 0 or 1) and SQUAREM continues on the rest
at convergence a
free EM step checks that no pinned parameter wants to move inwards (else it is
released). Measured on the three slowest fits of benchmarks/em_convergence.py:
it does not help (trec2011_crowd 917-946 map evaluations against 958 today,
the simulated crowd 1,099-1,102 against 1,090, adultcontent2 225-229 against
229). The slow part is interior: a few labelers with few labels and a
parameter near, not at, a bound (sensitivity 0.9994 from 85 labels) converge
linearly at a rate near 1, polishing the last 1e-4 to the 1e-8 tolerance.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import expit

import heroeval as he
from heroeval.core.squarem import Stop, squarem
from heroeval.stage_a import two_coin
from heroeval.stage_a.fit import weighted_design
from heroeval.stage_a.gold import initial_values
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.em_convergence import crowd

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

def fit(hist: he.AnnotationSet, K0: int = 300, PIN: float = 1e-6, tol: float = 1e-8, max_iter: int = 10000) -> tuple:  # type: ignore[type-arg]
    d = weighted_design(hist, 1.0, 0.0)
    J = d.n_labelers
    a0, b0, p0 = initial_values(hist)
    th = two_coin._pack(a0, b0, p0)
    fixed = np.zeros(th.size, bool)
    th_fix = th.copy()
    total = 0
    rounds = 0
    def F(x, need):
        a, b, p = two_coin._unpack(x, J)
        a2, b2, p2, ll = two_coin.em_map(d, a, b, p, need)
        out = two_coin._pack(a2, b2, p2)
        out[fixed] = th_fix[fixed]
        return out, ll
    def dist(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.max(np.abs(expit(a) - expit(b))))

    budget = K0
    while True:
        res = squarem(F, th, distance=dist, stop=Stop(tol, budget), project=lambda x: np.clip(x, -two_coin._LOGIT_MAX, two_coin._LOGIT_MAX))
        total += res.n_eval
        th = res.x
        rounds += 1
        if res.converged:
            # KKT check: free step for pinned
            a, b, p = two_coin._unpack(th, J)
            a2, b2, p2, _ = two_coin.em_map(d, a, b, p, False)
            free = two_coin._pack(a2, b2, p2)
            inward = fixed & (np.abs(expit(free) - expit(th)) > tol)
            total += 1
            if not inward.any():
                return th, total, True, int(fixed.sum()), rounds
            fixed &= ~inward
            budget = max_iter - total
            continue
        if total >= max_iter:
            return th, total, False, int(fixed.sum()), rounds
        # pin parameters within PIN of a bound that moved toward it in the last plain step
        x1, _ = F(th, False)
        total += 1
        p_now, p_next = expit(th), expit(x1)
        near_hi = (p_next > 1 - PIN) & (p_next >= p_now)
        near_lo = (p_next < PIN) & (p_next <= p_now)
        cand = (near_hi | near_lo)
        cand[2*J:] = False
        new = cand & ~fixed
        if not new.any():
            budget = max_iter - total
            continue
        fixed |= new
        th = th.copy()
        th[near_hi & new] = two_coin._LOGIT_MAX
        th[near_lo & new] = -two_coin._LOGIT_MAX
        th_fix = th.copy()
        budget = min(K0, max_iter - total)

def main() -> None:
    warnings.simplefilter('ignore')
    for name, hist in [('trec2011', make_split(load_folder(DATA / 'trec2011_crowd', text_components=0), 0, .1, 200, 'none', 2026).history),
                       ('adult', make_split(load_folder(DATA / 'adultcontent2', binary_suffix='_binary', text_components=0), 0, .1, 200, 'none', 2026).history),
                       ('crowd', crowd())]:
        cal = he.calibrate(hist, covariance=False)
        for K0 in (50, 100):
            t = time.perf_counter()
            th, n, ok, nfix, rounds = fit(hist, K0=K0)
            s = time.perf_counter() - t
            a, b, p = two_coin._unpack(th, hist.n_labelers)
            print(name, 'K0', K0, 'evals', n, 'conv', ok, 'pinned', nfix, 'rounds', rounds, f'{s:.2f}s', 'vs today', cal.convergence.n_iter,
                  'max|da|', float(np.max(np.abs(a - cal.alpha))), 'max|db|', float(np.max(np.abs(b - cal.beta))), 'max|dp|', float(np.max(np.abs(p - cal.round_prevalence))))


if __name__ == "__main__":
    main()
