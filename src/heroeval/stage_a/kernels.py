"""Compiled Stage A kernels (numba) on compact annotation arrays.

The NumPy engine (:mod:`heroeval.stage_a.two_coin`) builds scipy sparse matrices with one
float64 entry per (item, code) pair and runs each EM step as two sparse
mat-vecs plus several whole-array temporaries. That is fast (7-9 ns per
annotation-iteration) but holds about 20 bytes per annotation and makes
several passes over memory per step.

Here one annotation is one small integer ``code = 2 * labeler + label``
(uint16 while ``2J <= 65535``, else uint32), items own the segments
``ptr[r]:ptr[r + 1]``, and one fused pass per EM step computes each item's
posterior, the per-code posterior sums of the M-step, the per-round sums and
(when asked) the log-likelihood. Nothing per item or per annotation is
written. Three things make that pass cost about 1.3-1.8 ns per annotation on
two cores (docs/scale.md):

- posterior odds are products of per-code likelihood ratios, so no item needs
  an exp (or, for the log-likelihood, a log); items whose products leave
  [1e-100, 1e100] are recomputed in logs;
- items are stored sorted by their number of labels, so the inner loops run
  in long stretches of equal length and their exits are predicted;
- the chunks run as serial, GIL-free kernels on a small thread pool, balanced
  by cost (see :func:`run_threads` for why not numba's ``prange``).

The covariance pass streams the items once and accumulates the observed
information and the Gram matrix of the scores without forming per-item
score rows, as sums per pair of labelers (:func:`_pair_pass`): one cache line
per pair of an item's labels.

The formulas are exactly those of :mod:`heroeval.stage_a.two_coin` and
:mod:`heroeval.stage_a.scoring`; tests/unit/test_kernels.py checks both engines
agree to 1e-10. numba is a regular dependency; :data:`heroeval.core.jit.HAVE_NUMBA`
says whether it is importable (where not, the NumPy engine runs).
"""

from __future__ import annotations

import math
import mmap
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval.core import jit
from heroeval.core.jit import serial
from heroeval.stage_a import scoring, two_coin
from heroeval.stage_a.prior import PriorCounts, curvature, has_prior, log_prior

FloatArray = npt.NDArray[np.float64]



_prange = range  # numba.prange once the kernels are compiled
_compiled: dict[str, Any] = {}


def _kernel(name: str) -> Any:
    """The compiled version of the module function ``name`` (compiled on first use, cached on disk)."""
    f = _compiled.get(name)
    if f is None:
        if not jit.HAVE_NUMBA:
            raise ImportError("the compiled engine needs numba: pip install numba")
        import numba

        global _prange
        _prange = numba.prange
        f = numba.njit(cache=True, nogil=True, parallel=True)(globals()[name])
        _compiled[name] = f
    return f


def threads() -> int:
    """numba's thread count (1 without numba)."""
    if not jit.HAVE_NUMBA:
        return 1
    import numba

    return max(1, int(numba.get_num_threads()))


_TINY = 1e-100
"""Below this an item's odds or likelihood factor is recomputed in logs (products of up to 1e100 stay normal)."""
_HUGE = 1e100
_LN2 = math.log(2.0)
_N_WEIGHT_PRODUCTS = 4
"""Distinct item weights :func:`_em_chunk` keeps running products for (beyond them, a log per item)."""


def _em_chunk(r0, r1, ptr, code, gold, group, weight, has_w, ed, elo, d, lo, need_ll, n_codes, n_groups):  # type: ignore[no-untyped-def]
    """One fused E step over items ``r0:r1``: sums of gamma*w per code and per round, and the log-likelihood's item part.

    An item's posterior odds are a product of table entries, ``o = elo[g] * prod ed[code]``
    (prior odds times likelihood ratios), so a step needs no exp per item. Its
    likelihood is ``(1 - p_g) * prod P(label | Y=0) * f`` with ``f = 1 + o`` (no gold),
    ``o`` (gold 1) or 1 (gold 0); the first two factors summed over items in logs are
    fixed sums over codes and rounds (:meth:`CompactDesign._pass` adds them), so only
    ``sum w log f`` is returned, and unweighted it is a running product of the ``f``
    whose binary exponent is taken out now and then: no log per item either. An item
    whose odds leave [1e-100, 1e100] (many labels from nearly perfect labelers) is
    recomputed from the log tables ``d, lo`` as the NumPy engine does.
    """
    # one buffer with 64 bytes of padding each side: no other thread's data shares its cache lines
    buf = np.zeros(n_codes + n_groups + 16)
    s1 = buf[8:8 + n_codes]
    gs = buf[8 + n_codes:8 + n_codes + n_groups]
    ll = 0.0
    acc = 1.0  # running product of unweighted factors f, times 2**ex
    ex = 0
    # weighted: a running product per distinct weight, for the first few seen (the history weight's designs have
    # three: gold 1, gold-free w, left out 0), so the weighted pass needs no log per item either
    wv = np.zeros(_N_WEIGHT_PRODUCTS)
    wa = np.ones(_N_WEIGHT_PRODUCTS)
    we = np.zeros(_N_WEIGHT_PRODUCTS, dtype=np.int64)
    nw = 0
    for r in range(r0, r1):
        if has_w and weight[r] == 0.0:  # an item left out adds nothing
            continue
        a0 = ptr[r]
        a1 = ptr[r + 1]
        g = group[r]
        gd = gold[r]
        o = elo[g]
        for k in range(a0, a1):
            o *= ed[code[k]]
        if o > _TINY and o < _HUGE:
            gam = o / (1.0 + o)
            if need_ll:
                f = 1.0 + o if gd < 0 else (o if gd == 1 else 1.0)
                if has_w:
                    wr = weight[r]
                    t = 0
                    while t < nw and wv[t] != wr:
                        t += 1
                    if t == nw and nw < _N_WEIGHT_PRODUCTS:
                        wv[t] = wr
                        nw += 1
                    if t < nw:
                        wa[t] *= f
                        if wa[t] > 1e200 or wa[t] < 1e-200:
                            m, e2 = math.frexp(wa[t])
                            wa[t] = m
                            we[t] += e2
                    else:
                        ll += wr * math.log(f)
                else:
                    acc *= f
                    if acc > 1e200 or acc < 1e-200:
                        m, e2 = math.frexp(acc)
                        acc = m
                        ex += e2
        else:
            L = 0.0
            for k in range(a0, a1):
                L += d[code[k]]
            eta = L + lo[g]
            if eta >= 0.0:
                e = math.exp(-eta)
                gam = 1.0 / (1.0 + e)
                sp = eta + math.log1p(e)  # softplus(eta) = log(1 + o)
            else:
                e = math.exp(eta)
                gam = e / (1.0 + e)
                sp = math.log1p(e)
            if need_ll:
                w = weight[r] if has_w else 1.0
                ll += w * (sp if gd < 0 else (eta if gd == 1 else 0.0))
        if gd >= 0:
            gam = float(gd)
        gw = gam * weight[r] if has_w else gam
        for k in range(a0, a1):
            s1[code[k]] += gw
        gs[g] += gw
    for t in range(nw):
        ll += wv[t] * (math.log(wa[t]) + we[t] * _LN2)
    return s1.copy(), gs.copy(), ll + math.log(acc) + ex * _LN2


def _em_chunk_folds(r0, r1, ptr, code, gold, group, fold, wfree, ed, elo, d, lo, n_codes, n_groups):  # type: ignore[no-untyped-def]
    """:func:`_em_chunk` for ``M`` parameter sets at once, set ``m`` on the design of one fold refit: the items
    whose ``fold`` is ``m`` left out, other gold items of weight 1, gold-free items of weight ``wfree``.

    ``ed, d`` are (n_codes, M) and ``elo, lo`` (n_groups, M): one column per set.
    Each set's sums are those :func:`_em_chunk` gives on its own design (the
    same items in the same order), and its log-likelihood part the same to
    rounding (gold and gold-free items' factors in two running products), for
    the cost of one read of the annotations: the model checks' fold refits run in
    lockstep on it. Returns (M, n_codes) and (M, n_groups) sums and M
    log-likelihood parts. A left-out item adds 0 to its set's sums (which
    leaves them as they are), so the loops over sets have no branch.
    """
    M = ed.shape[1]
    s1 = np.zeros((n_codes, M))
    gs = np.zeros((n_groups, M))
    # running products of the factors f per set and per weight (1: gold items, wfree: gold-free), times 2**ex
    acc = np.ones((M, 2))
    ex = np.zeros((M, 2), dtype=np.int64)
    ll = np.zeros(M)
    o = np.empty(M)
    for r in range(r0, r1):
        a0 = ptr[r]
        a1 = ptr[r + 1]
        g = group[r]
        gd = gold[r]
        fr = fold[r]
        wr = 1.0 if gd >= 0 else wfree
        if wr == 0.0:
            continue
        for m in range(M):
            o[m] = elo[g, m]
        for k in range(a0, a1):
            c = code[k]
            for m in range(M):
                o[m] *= ed[c, m]
        for m in range(M):
            if m == fr:  # left out of this set
                o[m] = 0.0
                continue
            om = o[m]
            if om > _TINY and om < _HUGE:
                gam = om / (1.0 + om)
                f = 1.0 + om if gd < 0 else (om if gd == 1 else 1.0)
                t = 0 if gd >= 0 else 1
                acc[m, t] *= f
                if acc[m, t] > 1e200 or acc[m, t] < 1e-200:
                    mm, e2 = math.frexp(acc[m, t])
                    acc[m, t] = mm
                    ex[m, t] += e2
            else:
                L = 0.0
                for k in range(a0, a1):
                    L += d[code[k], m]
                eta = L + lo[g, m]
                if eta >= 0.0:
                    e = math.exp(-eta)
                    gam = 1.0 / (1.0 + e)
                    sp = eta + math.log1p(e)
                else:
                    e = math.exp(eta)
                    gam = e / (1.0 + e)
                    sp = math.log1p(e)
                ll[m] += wr * (sp if gd < 0 else (eta if gd == 1 else 0.0))
            if gd >= 0:
                gam = float(gd)
            o[m] = gam * wr
        for k in range(a0, a1):
            c = code[k]
            for m in range(M):
                s1[c, m] += o[m]
        for m in range(M):
            gs[g, m] += o[m]
    for m in range(M):
        ll[m] += math.log(acc[m, 0]) + ex[m, 0] * _LN2 + wfree * (math.log(acc[m, 1]) + ex[m, 1] * _LN2)
    return s1.T.copy(), gs.T.copy(), ll


def _posterior_chunk(r0, r1, ptr, code, gold, group, ed, elo, d, lo, order, has_order, out):  # type: ignore[no-untyped-def]
    """Posteriors of items ``r0:r1`` into ``out[order[r]]`` (input order; ``out[r]`` without an order).

    The odds product of :func:`_em_chunk`, in logs when out of range.
    """
    for r in range(r0, r1):
        gd = gold[r]
        if gd >= 0:
            v = float(gd)
        else:
            g = group[r]
            o = elo[g]
            for k in range(ptr[r], ptr[r + 1]):
                o *= ed[code[k]]
            if o > _TINY and o < _HUGE:
                v = o / (1.0 + o)
            else:
                L = 0.0
                for k in range(ptr[r], ptr[r + 1]):
                    L += d[code[k]]
                eta = L + lo[g]
                if eta >= 0.0:
                    v = 1.0 / (1.0 + math.exp(-eta))
                else:
                    e = math.exp(eta)
                    v = e / (1.0 + e)
        out[order[r] if has_order else r] = v
    return 0


def _size_range(ptr):  # type: ignore[no-untyped-def]
    """The smallest and the largest item size."""
    lo = ptr[1] - ptr[0]
    hi = lo
    for r in range(1, ptr.shape[0] - 1):
        k = ptr[r + 1] - ptr[r]
        lo = min(lo, k)
        hi = max(hi, k)
    return lo, hi


def _order_by_size(ptr, max_size, order, ptr_out):  # type: ignore[no-untyped-def]
    """``order`` = the items sorted by their number of labels, ties in input order (a counting sort:
    the permutation ``np.argsort(sizes, kind="stable")`` gives, without its 8-byte index array), and
    ``ptr_out`` their offsets in that order (each size class's items are consecutive and of one size,
    so the offsets follow from the counts, with no lookup of the items)."""
    n = ptr.shape[0] - 1
    start = np.zeros(max_size + 2, dtype=np.int64)
    for r in range(n):
        start[ptr[r + 1] - ptr[r] + 1] += 1
    for k in range(1, max_size + 2):
        start[k] += start[k - 1]
    ptr_out[0] = 0
    for k in range(max_size + 1):
        for r in range(start[k], start[k + 1]):
            ptr_out[r + 1] = ptr_out[r] + k
    for r in range(n):
        k = ptr[r + 1] - ptr[r]
        order[start[k]] = r
        start[k] += 1
    return 0


def _distinct_per_labeler(ptr, code, J):  # type: ignore[no-untyped-def]
    """Items each labeler labelled (``code // 2``), a labeler counted once per item however often it labelled it."""
    out = np.zeros(J, dtype=np.int64)
    for r in range(ptr.shape[0] - 1):
        for p in range(ptr[r], ptr[r + 1]):
            j = code[p] // 2
            seen = False
            for q in range(ptr[r], p):
                if code[q] // 2 == j:
                    seen = True
                    break
            if not seen:
                out[j] += 1
    return out


def distinct_items_per_labeler(ptr: npt.NDArray[np.int64], code: npt.NDArray[np.integer[Any]],
                               n_labelers: int) -> npt.NDArray[np.int64]:
    """Distinct items per labeler of items packed as codes ``2 * labeler + label``."""
    out: npt.NDArray[np.int64] = _serial("_distinct_per_labeler")(ptr, code, n_labelers)
    return out


def _weighted_code_counts(ptr, code, bounds, weight, n_codes):  # type: ignore[no-untyped-def]
    n_chunks = bounds.shape[0] - 1
    C = np.zeros((n_chunks, n_codes))
    for t in _prange(n_chunks):
        for r in range(bounds[t], bounds[t + 1]):
            w = weight[r]
            for k in range(ptr[r], ptr[r + 1]):
                C[t, code[k]] += w
    return C


def _gather_codes(ptr_in, labeler, label, order, ptr_out, out, bounds):  # type: ignore[no-untyped-def]
    """``out`` = the codes ``2 * labeler + label`` with items taken in ``order`` (a gather, no temporaries)."""
    for t in _prange(bounds.shape[0] - 1):
        for r in range(bounds[t], bounds[t + 1]):
            a = ptr_in[order[r]]
            b = ptr_out[r]
            for i in range(ptr_out[r + 1] - b):
                out[b + i] = 2 * labeler[a + i] + label[a + i]


def _pair_pass(r0, r1, ptr, code, group, gamma, weight, has_w, ua, ub, m_of_group, pg_of_group, J, G, X, gram, bounds, out,  # type: ignore[no-untyped-def]
               order, has_order):
    """The covariance pass over items ``r0:r1`` as sums per labeler pair (see :meth:`CompactDesign.covariance_sums`).

    An item's complete-data score difference ``u_r`` and score ``s_r`` have, for each
    of its labels, one entry at the labeler's sensitivity and one at its
    specificity, and one entry at the round's prevalence. Their outer products
    add, for each pair of the item's labels (labelers ``a <= b``), to four
    entries of the information's missing part and four of the scores' Gram:
    (alpha_a, alpha_b), (alpha_a, beta_b), (beta_a, alpha_b), (beta_a, beta_b).
    Those eight sums are kept side by side in one 64-byte cell per labeler pair
    (row ``a * J - a (a - 1) / 2 + b - a`` of ``cells``, the packed upper triangle: missing in 0:4, Gram in 4:8), so a pair of labels
    touches one cache line, where the P x P matrices took eight scattered
    updates. Pairs of one labeler's labels (a label with itself, a labeler twice on
    an item) are summed in a small J-row table first, added to the cells at the end. Cells hold sums over ordered pairs of labels (the pair (b, a) is the
    transposed cell); the labels' pairs with the prevalence go to ``LG`` (labeler
    x round: missing alpha, missing beta, Gram alpha, Gram beta), the
    prevalences' own to ``GG``, the prevalences' complete-data information to ``DM``. The
    chunk starting at ``bounds[t]`` adds its pair sums to ``out[t]`` (zeros on entry;
    allocated by the caller, see :func:`_zeros`). ``gamma`` and ``X`` are in input item
    order, read through ``order`` when ``has_order`` (no reordered copy of them).
    """
    p = X.shape[1]
    P = 2 * J + G
    t = 0
    while bounds[t] != r0:
        t += 1
    cells = out[t]
    DG = np.zeros((J, cells.shape[1]))  # the cells of pairs of one labeler's labels: few, and cache-resident
    LG = np.zeros((J, G, 4))
    GG = np.zeros((G, 2))
    SX = np.zeros((P, p))
    GA = np.zeros(2 * J)
    GB = np.zeros(2 * J)
    DM = np.zeros(G)
    kmax = 0
    for r in range(r0, r1):
        kmax = max(kmax, ptr[r + 1] - ptr[r])
    lab = np.empty(kmax, dtype=np.int64)
    av = np.empty(kmax)
    bv = np.empty(kmax)
    for r in range(r0, r1):
        a0 = ptr[r]
        k = ptr[r + 1] - a0
        xr = order[r] if has_order else r
        g = gamma[xr]
        w = weight[r] if has_w else 1.0
        grp = group[r]
        mg = m_of_group[grp]
        pg = pg_of_group[grp]
        DM[grp] += w * g / (pg * pg) + w * (1.0 - g) / ((1.0 - pg) * (1.0 - pg))
        wm = g * (1.0 - g) * w
        w2 = w * w
        s11 = w2 * g * g
        s10 = w2 * g * (1.0 - g)
        s00 = w2 * (1.0 - g) * (1.0 - g)
        for i in range(k):
            c = code[a0 + i]
            lab[i] = c // 2
            av[i] = ua[c]
            bv[i] = ub[c]
            GA[c] += g * w
            GB[c] += (1.0 - g) * w
        for i in range(k):
            la = lab[i]
            ai = av[i]
            bi = bv[i]
            # the label with itself: one ordered pair
            DG[la, 0] += wm * ai * ai
            DG[la, 1] -= wm * ai * bi
            DG[la, 2] -= wm * bi * ai
            DG[la, 3] += wm * bi * bi
            if gram:
                DG[la, 4] += s11 * ai * ai
                DG[la, 5] += s10 * ai * bi
                DG[la, 6] += s10 * bi * ai
                DG[la, 7] += s00 * bi * bi
            for j in range(i + 1, k):
                lb = lab[j]
                aj = av[j]
                bj = bv[j]
                if la == lb:  # a labeler twice on the item: both ordered pairs fall in its own cell
                    DG[la, 0] += 2.0 * wm * ai * aj
                    DG[la, 1] -= wm * (ai * bj + aj * bi)
                    DG[la, 2] -= wm * (ai * bj + aj * bi)
                    DG[la, 3] += 2.0 * wm * bi * bj
                    if gram:
                        DG[la, 4] += 2.0 * s11 * ai * aj
                        DG[la, 5] += s10 * (ai * bj + aj * bi)
                        DG[la, 6] += s10 * (ai * bj + aj * bi)
                        DG[la, 7] += 2.0 * s00 * bi * bj
                    continue
                if la < lb:
                    q = la * J - (la * (la - 1)) // 2 + (lb - la)
                    xa, xb, ya, yb = ai, bi, aj, bj
                else:
                    q = lb * J - (lb * (lb - 1)) // 2 + (la - lb)
                    xa, xb, ya, yb = aj, bj, ai, bi
                cells[q, 0] += wm * xa * ya
                cells[q, 1] -= wm * xa * yb
                cells[q, 2] -= wm * xb * ya
                cells[q, 3] += wm * xb * yb
                if gram:
                    cells[q, 4] += s11 * xa * ya
                    cells[q, 5] += s10 * xa * yb
                    cells[q, 6] += s10 * xb * ya
                    cells[q, 7] += s00 * xb * yb
            LG[la, grp, 0] += wm * mg * ai
            LG[la, grp, 1] -= wm * mg * bi
            if gram:
                LG[la, grp, 2] += w2 * g * (g - pg) * mg * ai
                LG[la, grp, 3] += w2 * (1.0 - g) * (g - pg) * mg * bi
        GG[grp, 0] += wm * mg * mg
        if gram:
            GG[grp, 1] += w2 * (g - pg) * (g - pg) * mg * mg
        if p > 0:
            for i in range(k):
                sa = w * g * av[i]
                sb = w * (1.0 - g) * bv[i]
                for t in range(p):
                    SX[lab[i], t] += sa * X[xr, t]
                    SX[J + lab[i], t] += sb * X[xr, t]
            sm = w * (g - pg) * mg
            for t in range(p):
                SX[2 * J + grp, t] += sm * X[xr, t]
    for a in range(J):
        q = a * J - (a * (a - 1)) // 2
        for c in range(cells.shape[1]):
            cells[q, c] += DG[a, c]
    return LG, GG, SX, GA, GB, DM


def _unpack_pairs(m0, m1, cells, LG, GG, J, G, H, S):  # type: ignore[no-untyped-def]
    """The dense matrices of the pair sums (the layout of :func:`_pair_pass`): ``H -= missing`` (m = 0), ``S += Gram`` (m = 1).

    Matrix m is ``sign`` times the symmetric matrix whose pair sums are ``cells[:, 4m:4m + 4]``,
    ``LG[:, :, 2m:2m + 2]`` (labelers with the rounds' prevalences) and ``GG[:, m]`` (the
    prevalences' own). Labeler pairs are taken in 64 x 64 tiles, so the transposed entries
    land in a few cache-resident blocks. The two matrices run as two chunks on two threads.
    """
    for m in range(m0, m1):
        off = 4 * m
        sign = -1.0 if m == 0 else 1.0
        out = H if m == 0 else S
        T = 64
        for a0 in range(0, J, T):
            a1 = min(a0 + T, J)
            for b0 in range(a0, J, T):
                b1 = min(b0 + T, J)
                for a in range(a0, a1):
                    row = a * J - (a * (a - 1)) // 2 - a  # cell of (a, b) is row + b
                    for b in range(max(a, b0), b1):
                        q = row + b
                        aa = sign * cells[q, off]
                        ab = sign * cells[q, off + 1]
                        ba = sign * cells[q, off + 2]
                        bb = sign * cells[q, off + 3]
                        out[a, b] += aa
                        out[J + a, J + b] += bb
                        out[a, J + b] += ab
                        out[J + b, a] += ab
                        if b != a:
                            out[b, a] += aa
                            out[J + b, J + a] += bb
                            out[b, J + a] += ba
                            out[J + a, b] += ba
        h = off // 2
        for a in range(J):
            for g in range(G):
                x = sign * LG[a, g, h]
                y = sign * LG[a, g, h + 1]
                out[a, 2 * J + g] += x
                out[2 * J + g, a] += x
                out[J + a, 2 * J + g] += y
                out[2 * J + g, J + a] += y
        for g in range(G):
            out[2 * J + g, 2 * J + g] += sign * GG[g, off // 4]
    return 0


def _zeros(shape: tuple[int, ...]) -> FloatArray:
    """A zero float64 array; from 64 MiB on, on transparent huge pages where the system offers them on request.

    The covariance pass adds to scattered rows of arrays of hundreds of MB: with 4 KiB
    pages nearly every update misses the TLB as well as the cache.
    """
    n = int(np.prod(shape))
    if 8 * n < 1 << 26 or not hasattr(mmap, "MADV_HUGEPAGE"):
        return np.zeros(shape)
    buf = mmap.mmap(-1, 8 * n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        buf.madvise(mmap.MADV_HUGEPAGE)
    except OSError:
        pass
    out: FloatArray = np.frombuffer(buf, dtype=np.float64).reshape(shape)
    return out


_PAIR_BYTES = 1 << 30
"""At most this many bytes of per-thread pair sums in the covariance pass (fewer threads beyond it)."""


@dataclass(frozen=True, eq=False)
class CompactDesign:
    """Stage A's data as compact arrays, for the compiled engine.

    Same model and weights as :class:`heroeval.stage_a.two_coin.Design` (``weight``,
    ``pseudo_count``), without the sparse matrices. Items are stored sorted
    by their number of labels (``order[r]`` is the input item at position
    ``r``; None: input order), so the per-item loops have runs of equal
    length and the CPU predicts their exits; ``bounds`` splits the items into
    chunks of about equal numbers of annotations, for the threads. Every
    per-item array here (``gold``, ``group``, ``weight``) is in the stored
    order; every method takes and returns per-item arrays in input order.
    """

    n_items: int
    n_labelers: int
    n_groups: int
    ptr: npt.NDArray[np.int64]
    code: npt.NDArray[np.integer[Any]]
    gold: npt.NDArray[np.int8]
    group: npt.NDArray[np.int32]
    code_counts: FloatArray  # (2J,) weighted number of annotations per code
    group_size: FloatArray  # (G,) weighted number of items per round
    bounds: npt.NDArray[np.int64]  # (n_chunks + 1,) item positions where the chunks start
    order: npt.NDArray[np.int32] | npt.NDArray[np.int64] | None = None
    weight: FloatArray | None = None
    pseudo_count: PriorCounts = 0.0

    @property
    def n_annotations(self) -> int:
        return int(self.code.shape[0])

    @property
    def n_chunks(self) -> int:
        return int(self.bounds.shape[0] - 1)

    def rechunked(self, n_chunks: int) -> CompactDesign:
        """The same design split into ``n_chunks`` chunks (the sums change only in the order of additions)."""
        return replace(self, bounds=chunk_bounds(self.ptr, n_chunks))

    def _tables(
        self, alpha: FloatArray, beta: FloatArray, prev: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]:
        la1, la0 = two_coin.code_logprobs(alpha, beta)
        p = np.clip(prev, two_coin.EPS, 1 - two_coin.EPS)
        log1m = np.log1p(-p)
        lo = np.log(p) - log1m
        d = la1 - la0
        # the product form's tables (likelihood ratios, prior odds), the log forms, and the fixed log-likelihood part
        fixed = float(self.code_counts @ la0 + self.group_size @ log1m)
        ed: FloatArray = np.exp(d)
        return ed, p / (1 - p), d, lo, fixed

    def _w(self) -> tuple[FloatArray, bool]:
        return (self.weight, True) if self.weight is not None else (np.empty(0), False)

    def _pass(
        self, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool
    ) -> tuple[FloatArray, FloatArray, float]:
        """Per-code and per-round posterior sums and the log-likelihood (NaN unless ``need_ll``)."""
        w, has_w = self._w()
        ed, elo, d, lo, fixed = self._tables(alpha, beta, prev)
        parts = run_threads("_em_chunk", self.bounds, self.ptr, self.code, self.gold, self.group, w, has_w,
                           ed, elo, d, lo, need_ll, 2 * self.n_labelers, self.n_groups)
        s1: FloatArray = np.sum([q[0] for q in parts], axis=0)
        gs: FloatArray = np.sum([q[1] for q in parts], axis=0)
        ll = fixed + float(sum(q[2] for q in parts)) if need_ll else float("nan")
        return s1, gs, ll

    def e_sums(
        self, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool
    ) -> tuple[FloatArray, FloatArray, float]:
        """The E step's sums, as a partition of a Dask history returns them: per-code and per-round posterior
        sums and the log-likelihood without the prior (NaN unless ``need_ll``)."""
        return self._pass(alpha, beta, prev, need_ll)

    def em_map(
        self, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool
    ) -> tuple[FloatArray, FloatArray, FloatArray, float]:
        """One EM step ``(alpha, beta, prev) -> M(E(.))`` and the log-likelihood at the input (NaN unless asked)."""
        s1, gsum, ll = self._pass(alpha, beta, prev, need_ll)
        if need_ll:
            ll += _prior(self.pseudo_count, alpha, beta)
        a2, b2, p2 = two_coin.m_from_sums(s1, self.code_counts, gsum, self.group_size, self.pseudo_count,
                                     weighted=self.weight is not None)
        return a2, b2, p2, ll

    def em_sums(
        self, alpha: FloatArray, beta: FloatArray, prev: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, bool, float]:
        """The M-step's sufficient statistics and the objective (see :func:`heroeval.stage_a.two_coin.em_sums`)."""
        s1, gsum, ll = self._pass(alpha, beta, prev, True)
        return (s1, self.code_counts, gsum, self.group_size, self.weight is not None,
                ll + _prior(self.pseudo_count, alpha, beta))

    def information(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> FloatArray:
        """The observed information at ``(alpha, beta, prev)``: a posterior pass and the covariance pass."""
        gamma, _ = self.posterior(alpha, beta, prev, need_ll=False)
        H, _, _ = self.covariance_sums(alpha, beta, prev, gamma, None, False)
        return H

    def posterior(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray,
                  need_ll: bool = True) -> tuple[FloatArray, float]:
        """Posteriors P(Y_r = 1 | data) in input item order (gold items: their gold) and the log-likelihood (NaN
        unless ``need_ll``, which costs a pass more)."""
        ll = self._pass(alpha, beta, prev, True)[2] if need_ll else float("nan")
        ed, elo, d, lo, _ = self._tables(alpha, beta, prev)
        g = np.empty(self.n_items)
        order, has_order = (self.order, True) if self.order is not None else (np.zeros(0, np.int32), False)
        run_threads("_posterior_chunk", self.bounds, self.ptr, self.code, self.gold, self.group, ed, elo, d, lo,
                   order, has_order, g)
        return g, ll + _prior(self.pseudo_count, alpha, beta)

    def covariance_sums(
        self, alpha: FloatArray, beta: FloatArray, prev: FloatArray, gamma: FloatArray, X: FloatArray | None,
        gram: bool,
    ) -> tuple[FloatArray, FloatArray, FloatArray | None]:
        """Observed information H, Gram of the scores (NaN unless ``gram``) and scores' cross sums with X."""
        J, G = self.n_labelers, self.n_groups
        P = 2 * J + G
        ua, ub, ia, ib = scoring._code_weights(alpha, beta)
        p = np.clip(prev, two_coin.EPS, 1 - two_coin.EPS)
        w, has_w = self._w()
        Xc = np.ascontiguousarray(np.zeros((self.n_items, 0)) if X is None else X - X.mean(axis=0))
        order, has_order = (self.order, True) if self.order is not None else (np.zeros(0, np.int32), False)
        n_cells = J * (J + 1) // 2
        width = 8 if gram else 4
        # one chunk per thread, each with its own pair sums; fewer threads where those would pass _PAIR_BYTES
        copies = max(1, min(self.n_chunks, _PAIR_BYTES // max(1, 8 * width * n_cells)))
        bounds = self.bounds if copies == self.n_chunks else chunk_bounds(self.ptr, copies)
        out = _zeros((copies, n_cells, width))
        parts = run_threads("_pair_pass", bounds, self.ptr, self.code, self.group, gamma, w, has_w, ua, ub,
                            1 / (p * (1 - p)), p, J, G, Xc, gram, bounds, out, order, has_order)
        LG, GG, SX, GA, GB, Dm = parts[0]
        for q in parts[1:]:
            LG += q[0]
            GG += q[1]
            SX += q[2]
            GA += q[3]
            GB += q[4]
            Dm += q[5]
        del parts
        cells = out[0]
        for t in range(1, copies):
            cells += out[t]
        H = np.zeros((P, P))
        StS = np.zeros((P, P)) if gram else np.full((P, P), np.nan)
        run_threads("_unpack_pairs", np.arange(3 if gram else 2, dtype=np.int64), cells, LG, GG, J, G, H, StS)
        del cells, out
        Da = (GA * ia)[0::2] + (GA * ia)[1::2]
        Db = (GB * ib)[0::2] + (GB * ib)[1::2]
        if has_prior(self.pseudo_count):
            ca, cb = curvature(self.pseudo_count, alpha, beta)
            Da = Da + ca
            Db = Db + cb
        H[np.diag_indices(P)] += np.concatenate([Da, Db, Dm])
        return H, StS, (None if X is None else SX)


def _prior(c: PriorCounts, alpha: FloatArray, beta: FloatArray) -> float:
    return log_prior(c, alpha, beta)


def code_dtype(n_labelers: int) -> type[np.integer[Any]]:
    """The smallest unsigned integer type that holds every code ``2 * labeler + label``.

    Unsigned, because numba checks signed indices for negative wrap-around on every access.
    """
    return np.uint16 if 2 * n_labelers <= np.iinfo(np.uint16).max else np.uint32


def n_chunks() -> int:
    """Chunks per pass: one per thread (the chunks are balanced by cost, see :func:`chunk_bounds`)."""
    return threads()


_ITEM_COST = 4
"""An item's fixed cost in the E step (division, branches, loads), in annotations' worth; for load balance."""


def chunk_bounds(ptr: npt.NDArray[np.int64], n_chunks: int) -> npt.NDArray[np.int64]:
    """Item positions splitting the items into ``n_chunks`` runs of about equal cost.

    An item costs its annotations plus :data:`_ITEM_COST`, so chunks of many small
    items and chunks of few large ones take about equally long (items are sorted by
    size). Found by bisection on ``ptr[r] + _ITEM_COST * r``, without a per-item array.
    """
    n_items = int(ptr.shape[0] - 1)
    n_chunks = max(int(n_chunks), 1)
    total = int(ptr[-1]) + _ITEM_COST * n_items
    out = np.zeros(n_chunks + 1, dtype=np.int64)
    out[-1] = n_items
    for t in range(1, n_chunks):
        target = total * t // n_chunks
        lo, hi = int(out[t - 1]), n_items  # the first r with cost(r) >= target
        while lo < hi:
            mid = (lo + hi) // 2
            if int(ptr[mid]) + _ITEM_COST * mid < target:
                lo = mid + 1
            else:
                hi = mid
        out[t] = lo
    return out


_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def _forget_pool() -> None:
    """After a fork the child has none of the parent's pool threads: start a new pool there."""
    global _pool, _pool_size
    _pool, _pool_size = None, 0


os.register_at_fork(after_in_child=_forget_pool)


def run_threads(name: str, bounds: npt.NDArray[np.int64], *args: Any) -> list[Any]:
    """Run the serial compiled kernel ``name(r0, r1, *args)`` on each chunk, in parallel threads.

    The kernels release the GIL (``nogil``), so plain threads run them on all cores;
    this thread runs the last chunk. (Threads rather than numba's ``parallel=True``:
    on this project's benchmark machine a ``prange`` kernel loaded from numba's disk
    cache ran 15-25 % slower than freshly compiled, while a serial kernel does not.)
    """
    global _pool, _pool_size
    f = _serial(name)
    n = int(bounds.shape[0] - 1)
    if n <= 1:
        return [f(int(bounds[0]), int(bounds[-1]), *args)]
    if _pool is None or _pool_size < n - 1:
        _pool = ThreadPoolExecutor(max_workers=n - 1, thread_name_prefix="heroeval-em")
        _pool_size = n - 1
    futures = [_pool.submit(f, int(bounds[t]), int(bounds[t + 1]), *args) for t in range(n - 1)]
    last = f(int(bounds[n - 1]), int(bounds[n]), *args)
    return [fu.result() for fu in futures] + [last]


def compact_design(
    ptr: npt.NDArray[np.int64],
    labeler: npt.NDArray[np.integer[Any]],
    label: npt.NDArray[np.integer[Any]],
    n_labelers: int,
    gold: npt.NDArray[np.int8],
    group: npt.NDArray[np.integer[Any]],
    n_groups: int,
    weight: FloatArray | None = None,
    pseudo_count: PriorCounts = 0.0,
    sort_items: bool = True,
) -> CompactDesign:
    """Pack annotations into one code each, sort the items by label count and precompute the M-step's constants.

    ``sort_items=False`` keeps the input item order (the results differ only by
    the order of floating-point additions).
    """
    if not jit.HAVE_NUMBA:
        raise ImportError("the compiled engine needs numba: pip install numba")
    dt = code_dtype(n_labelers)
    n_items = int(ptr.shape[0] - 1)
    p64 = np.ascontiguousarray(ptr, dtype=np.int64)
    order: npt.NDArray[np.int32] | npt.NDArray[np.int64] | None = None
    ptr_out = p64
    if sort_items and n_items > 1:
        k_min, k_max = _serial("_size_range")(p64)
        if k_min != k_max:
            order = np.empty(n_items, dtype=np.int32) if n_items < np.iinfo(np.int32).max else np.empty(
                n_items, dtype=np.int64)
            ptr_out = np.empty(n_items + 1, dtype=np.int64)
            _serial("_order_by_size")(p64, k_max, order, ptr_out)
    bounds = chunk_bounds(ptr_out, n_chunks())
    code = np.empty(labeler.shape[0], dtype=dt)
    if order is None:
        for s0 in range(0, code.shape[0], 1 << 22):  # in chunks: no whole-array temporaries
            sl = slice(s0, s0 + (1 << 22))
            np.multiply(labeler[sl], 2, out=code[sl], casting="unsafe")
            code[sl] += label[sl].astype(dt)
    else:
        _kernel("_gather_codes")(p64, labeler, label, order, ptr_out, code, bounds)
    g32 = np.ascontiguousarray(group, dtype=np.int32)
    g8 = np.ascontiguousarray(gold, dtype=np.int8)
    if order is not None:
        g32, g8 = g32[order], g8[order]
        weight = None if weight is None else np.ascontiguousarray(weight[order], dtype=np.float64)
    return design_of_codes(ptr_out, code, g8, g32, n_labelers, n_groups, weight, pseudo_count, order, bounds)


def design_of_codes(
    ptr: npt.NDArray[np.int64], code: npt.NDArray[np.integer[Any]], gold: npt.NDArray[np.int8],
    group: npt.NDArray[np.int32], n_labelers: int, n_groups: int, weight: FloatArray | None = None,
    pseudo_count: PriorCounts = 0.0, order: npt.NDArray[np.int32] | npt.NDArray[np.int64] | None = None,
    bounds: npt.NDArray[np.int64] | None = None,
) -> CompactDesign:
    """The design of items already packed as codes ``2 * labeler + label`` (offsets ``ptr``; per-item ``gold``,
    ``group`` and ``weight`` in the same order): the M-step's constants, no copy of the arrays."""
    if bounds is None:
        bounds = chunk_bounds(ptr, n_chunks())
    n_codes = 2 * n_labelers
    if weight is None:
        counts = two_coin.bincount(code, n_codes)
        gsize = two_coin.bincount(group, n_groups)
    else:
        counts = _kernel("_weighted_code_counts")(ptr, code, bounds, weight, n_codes).sum(axis=0)
        gsize = np.bincount(group, weights=weight, minlength=n_groups).astype(np.float64)
    return CompactDesign(
        n_items=int(ptr.shape[0] - 1), n_labelers=n_labelers, n_groups=n_groups, ptr=ptr, code=code, gold=gold,
        group=group, code_counts=counts, group_size=gsize, bounds=bounds, order=order, weight=weight,
        pseudo_count=pseudo_count,
    )


def _serial(name: str) -> Any:
    """A single-threaded compiled kernel of this module (compiled on first use, cached on disk)."""
    return serial(globals()[name])
