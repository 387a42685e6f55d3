"""Issue #7: the E-step kernel variants measured before the compiled engine's form was chosen.

    .venv/bin/python -m experiments.kernel_variants            # 250,000 items, 3-5 labels, J = 50 (~1e6 annotations)
    .venv/bin/python -m experiments.kernel_variants --items 2500000 --labelers 2000

Three versions of the fused E step (per-code posterior sums; no
log-likelihood), on the same synthetic compact codes, each in the input item
order and with items sorted by their number of labels, on numba's threads
(freshly compiled, no disk cache):

* ``exp, branches``: the log-likelihood ratio summed per item, then
  ``exp`` with a branch on its sign (the engine before this change);
* ``exp, branch-free``: the same with ``exp(-|eta|)`` and selects;
* ``odds product``: the posterior odds as a product of per-code likelihood
  ratios, one division per item and no ``exp`` (the engine's form).

Prints ns per annotation (best of 15) and the largest difference of the sums
from the first variant's.
"""

from __future__ import annotations

import argparse
import math
import time

import numba
import numpy as np
from numba import prange


@numba.njit(parallel=True, nogil=True)
def exp_branches(ptr, code, gold, d, lo, n_codes, n_chunks):  # type: ignore[no-untyped-def]
    N = ptr.shape[0] - 1
    S1 = np.zeros((n_chunks, n_codes))
    for t in prange(n_chunks):
        s1 = np.zeros(n_codes)
        for r in range(t * N // n_chunks, (t + 1) * N // n_chunks):
            L = 0.0
            for k in range(ptr[r], ptr[r + 1]):
                L += d[code[k]]
            gd = gold[r]
            if gd == 1:
                gam = 1.0
            elif gd == 0:
                gam = 0.0
            else:
                eta = L + lo
                if eta >= 0.0:
                    gam = 1.0 / (1.0 + math.exp(-eta))
                else:
                    e = math.exp(eta)
                    gam = e / (1.0 + e)
            if gam != 0.0:
                for k in range(ptr[r], ptr[r + 1]):
                    s1[code[k]] += gam
        S1[t, :] = s1
    return S1


@numba.njit(parallel=True, nogil=True)
def exp_branch_free(ptr, code, gold, d, lo, n_codes, n_chunks):  # type: ignore[no-untyped-def]
    N = ptr.shape[0] - 1
    S1 = np.zeros((n_chunks, n_codes))
    for t in prange(n_chunks):
        s1 = np.zeros(n_codes)
        for r in range(t * N // n_chunks, (t + 1) * N // n_chunks):
            L = 0.0
            for k in range(ptr[r], ptr[r + 1]):
                L += d[code[k]]
            eta = L + lo
            e = math.exp(-abs(eta))
            inv = 1.0 / (1.0 + e)
            gam = inv if eta >= 0.0 else e * inv
            gd = gold[r]
            gam = gam if gd < 0 else float(gd)
            for k in range(ptr[r], ptr[r + 1]):
                s1[code[k]] += gam
        S1[t, :] = s1
    return S1


@numba.njit(parallel=True, nogil=True)
def odds_product(ptr, code, gold, ed, elo, n_codes, n_chunks):  # type: ignore[no-untyped-def]
    N = ptr.shape[0] - 1
    S1 = np.zeros((n_chunks, n_codes))
    for t in prange(n_chunks):
        s1 = np.zeros(n_codes)
        for r in range(t * N // n_chunks, (t + 1) * N // n_chunks):
            o = elo
            for k in range(ptr[r], ptr[r + 1]):
                o *= ed[code[k]]
            gam = o / (1.0 + o)
            gd = gold[r]
            gam = gam if gd < 0 else float(gd)
            for k in range(ptr[r], ptr[r + 1]):
                s1[code[k]] += gam
        S1[t, :] = s1
    return S1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=250_000)
    ap.add_argument("--labelers", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    N, J = a.items, a.labelers
    cnt = rng.integers(3, 6, N)
    ptr = np.zeros(N + 1, np.int64)
    np.cumsum(cnt, out=ptr[1:])
    A = int(ptr[-1])
    code = (2 * rng.integers(0, J, A) + rng.integers(0, 2, A)).astype(np.uint16)
    gold = np.full(N, -1, np.int8)
    gi = rng.choice(N, N // 100, replace=False)
    gold[gi] = rng.integers(0, 2, gi.size)
    d = rng.normal(0, 1, 2 * J)
    lo = -0.8
    order = np.argsort(cnt, kind="stable")
    ptr_s = np.zeros(N + 1, np.int64)
    np.cumsum(cnt[order], out=ptr_s[1:])
    code_s = code[np.repeat(ptr[:-1][order] - ptr_s[:-1], cnt[order]) + np.arange(A)]
    layouts = {"input order": (ptr, code, gold), "sorted by label count": (ptr_s, code_s, gold[order])}
    nc = 4 * numba.get_num_threads()
    print(f"{A:,} annotations, {N:,} items, J = {J}, {numba.get_num_threads()} threads")
    ref = None
    for lay, (p_, c_, g_) in layouts.items():
        for name, f, tables in (("exp, branches", exp_branches, (d, lo)),
                                ("exp, branch-free", exp_branch_free, (d, lo)),
                                ("odds product", odds_product, (np.exp(d), math.exp(lo)))):
            s = f(p_, c_, g_, *tables, 2 * J, nc).sum(axis=0)
            ref = s if ref is None else ref
            ts = []
            for _ in range(15):
                t0 = time.perf_counter()
                f(p_, c_, g_, *tables, 2 * J, nc)
                ts.append(time.perf_counter() - t0)
            print(f"{lay:22s} {name:17s} {min(ts) / A * 1e9:6.2f} ns/annotation   "
                  f"max |diff| {np.max(np.abs(s - ref)) / np.max(np.abs(ref)):.1e} (relative)")
    ts = []
    for _ in range(15):
        t0 = time.perf_counter()
        code.sum(dtype=np.int64)
        ts.append(time.perf_counter() - t0)
    print(f"np.sum over the codes: {min(ts) / A * 1e9:.2f} ns/annotation")


if __name__ == "__main__":
    main()
