"""Compiled Stage A kernels (numba) on compact annotation arrays.

The NumPy engine (:mod:`heroeval._em`) builds scipy sparse matrices with one
float64 entry per (item, code) pair and runs each EM step as two sparse
mat-vecs plus several whole-array temporaries. That is fast (7-9 ns per
annotation-iteration) but holds about 20 bytes per annotation and makes
several passes over memory per step.

Here one annotation is one small integer ``code = 2 * labeler + label``
(uint16 while ``2J <= 65535``, else uint32) in item order, items own the
segments ``ptr[r]:ptr[r + 1]``, and one fused, multi-threaded pass per EM
step computes each item's log-likelihood ratio, its posterior, the
per-code posterior sums of the M-step, the per-round sums and (when asked)
the log-likelihood. Nothing per item or per annotation is written. The
covariance pass likewise streams the items once and accumulates the
observed information and the Gram matrix of the scores without forming
per-item score rows.

The formulas are exactly those of :mod:`heroeval._em` and
:mod:`heroeval._influence`; tests/unit/test_kernels.py checks both engines
agree to 1e-10. numba is an optional dependency (``pip install
heroeval[fast]``); :data:`HAVE_NUMBA` says whether it is importable.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _em

FloatArray = npt.NDArray[np.float64]

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
"""Whether numba is installed (it is imported only when a compiled kernel is first used)."""

_CHUNKS_PER_THREAD = 4
"""Items are split into this many contiguous chunks per thread (load balance; each chunk owns its sums)."""

_prange = range  # numba.prange once the kernels are compiled
_compiled: dict[str, Any] = {}


def _kernel(name: str) -> Any:
    """The compiled version of the module function ``name`` (compiled on first use, cached on disk)."""
    f = _compiled.get(name)
    if f is None:
        if not HAVE_NUMBA:
            raise ImportError("the compiled engine needs numba: pip install 'heroeval[fast]'")
        import numba

        global _prange
        _prange = numba.prange
        f = numba.njit(cache=True, nogil=True, parallel=True)(globals()[name])
        _compiled[name] = f
    return f


def threads() -> int:
    """numba's thread count (1 without numba)."""
    if not HAVE_NUMBA:
        return 1
    import numba

    return max(1, int(numba.get_num_threads()))


def _em_pass(ptr, code, gold, group, weight, has_w, d, la0, lo, log1m, need_ll, n_codes, n_groups, n_chunks):  # type: ignore[no-untyped-def]
    """One fused E step: per-chunk sums of gamma*w per code and per round, and the log-likelihood."""
    N = ptr.shape[0] - 1
    S1 = np.zeros((n_chunks, n_codes))
    GS = np.zeros((n_chunks, n_groups))
    LL = np.zeros(n_chunks)
    for t in _prange(n_chunks):
        r0 = t * N // n_chunks
        r1 = (t + 1) * N // n_chunks
        # thread-local sums, written out once: rows of S1/GS written per item would share cache lines
        s1 = np.zeros(n_codes)
        gs = np.zeros(n_groups)
        ll = 0.0
        for r in range(r0, r1):
            a0 = ptr[r]
            a1 = ptr[r + 1]
            L = 0.0
            l0 = 0.0
            if need_ll:
                for k in range(a0, a1):
                    c = code[k]
                    L += d[c]
                    l0 += la0[c]
            else:
                for k in range(a0, a1):
                    L += d[code[k]]
            g = group[r]
            gd = gold[r]
            w = weight[r] if has_w else 1.0
            if gd == 1:
                gam = 1.0
                if need_ll:
                    ll += w * (l0 + log1m[g] + lo[g] + L)
            elif gd == 0:
                gam = 0.0
                if need_ll:
                    ll += w * (l0 + log1m[g])
            else:
                eta = L + lo[g]
                # softplus(eta) = eta + log1p(e^-eta) = log1p(e^eta): the log only when the likelihood is asked for
                if eta >= 0.0:
                    e = math.exp(-eta)
                    gam = 1.0 / (1.0 + e)
                    if need_ll:
                        ll += w * (l0 + log1m[g] + eta + math.log1p(e))
                else:
                    e = math.exp(eta)
                    gam = e / (1.0 + e)
                    if need_ll:
                        ll += w * (l0 + log1m[g] + math.log1p(e))
            gw = gam * w
            if gw != 0.0:
                for k in range(a0, a1):
                    s1[code[k]] += gw
            gs[g] += gw
        S1[t, :] = s1
        GS[t, :] = gs
        LL[t] = ll
    return S1, GS, LL


def _posterior(ptr, code, gold, group, d, lo, n_chunks):  # type: ignore[no-untyped-def]
    N = ptr.shape[0] - 1
    out = np.empty(N)
    for t in _prange(n_chunks):
        for r in range(t * N // n_chunks, (t + 1) * N // n_chunks):
            gd = gold[r]
            if gd >= 0:
                out[r] = float(gd)
                continue
            L = 0.0
            for k in range(ptr[r], ptr[r + 1]):
                L += d[code[k]]
            eta = L + lo[group[r]]
            if eta >= 0.0:
                out[r] = 1.0 / (1.0 + math.exp(-eta))
            else:
                e = math.exp(eta)
                out[r] = e / (1.0 + e)
    return out


def _weighted_code_counts(ptr, code, weight, n_codes, n_chunks):  # type: ignore[no-untyped-def]
    N = ptr.shape[0] - 1
    C = np.zeros((n_chunks, n_codes))
    for t in _prange(n_chunks):
        for r in range(t * N // n_chunks, (t + 1) * N // n_chunks):
            w = weight[r]
            for k in range(ptr[r], ptr[r + 1]):
                C[t, code[k]] += w
    return C


def _cov_pass(ptr, code, group, gamma, weight, has_w, ua, ub, pg_of_group, J, P, X, n_chunks, gram):  # type: ignore[no-untyped-def]
    """Streamed sums for the observed information and the sandwich.

    Returns per-chunk ``missing = sum_r g(1-g) w u_r u_r'``, ``StS = sum_r
    w^2 s_r s_r'`` (upper triangles only; the caller symmetrises),
    ``SX = sum_r w s_r x_r'`` and per-code sums of gamma*w and (1-gamma)*w.
    """
    N = ptr.shape[0] - 1
    p = X.shape[1]
    M = np.zeros((n_chunks, P, P))
    S = np.zeros((n_chunks, P, P)) if gram else np.zeros((n_chunks, 1, 1))
    SX = np.zeros((n_chunks, P, p))
    GA = np.zeros((n_chunks, 2 * J))
    GB = np.zeros((n_chunks, 2 * J))
    kmax = 0
    for r in range(N):
        kmax = max(kmax, ptr[r + 1] - ptr[r])
    for t in _prange(n_chunks):
        col = np.empty(2 * kmax + 1, dtype=np.int64)
        uu = np.empty(2 * kmax + 1)
        ss = np.empty(2 * kmax + 1)
        for r in range(t * N // n_chunks, (t + 1) * N // n_chunks):
            a0 = ptr[r]
            k = ptr[r + 1] - a0
            g = gamma[r]
            w = weight[r] if has_w else 1.0
            grp = group[r]
            pg = pg_of_group[grp]
            for i in range(k):
                c = code[a0 + i]
                lab = c // 2
                col[i] = lab
                uu[i] = ua[c]
                ss[i] = g * ua[c]
                col[k + i] = J + lab
                uu[k + i] = -ub[c]
                ss[k + i] = (1.0 - g) * ub[c]
                GA[t, c] += g * w
                GB[t, c] += (1.0 - g) * w
            m = 2 * k
            col[m] = 2 * J + grp
            uu[m] = 1.0 / (pg * (1.0 - pg))
            ss[m] = (g - pg) / (pg * (1.0 - pg))
            n = m + 1
            wm = g * (1.0 - g) * w
            if wm != 0.0:
                for i in range(n):
                    ci = col[i]
                    ui = uu[i] * wm
                    for j in range(n):
                        cj = col[j]
                        if cj >= ci:
                            M[t, ci, cj] += ui * uu[j]
            if gram:
                w2 = w * w
                for i in range(n):
                    ci = col[i]
                    si = ss[i] * w2
                    for j in range(n):
                        cj = col[j]
                        if cj >= ci:
                            S[t, ci, cj] += si * ss[j]
            if p > 0:
                for i in range(n):
                    ci = col[i]
                    si = ss[i] * w
                    for q in range(p):
                        SX[t, ci, q] += si * X[r, q]
    return M, S, SX, GA, GB


def _sym_upper(U: FloatArray) -> FloatArray:
    """A symmetric matrix from sums kept on and above the diagonal (entries (i, j) with i <= j)."""
    out: FloatArray = np.triu(U) + np.triu(U, 1).T
    return out


@dataclass(frozen=True, eq=False)
class CompactDesign:
    """Stage A's data as compact arrays, for the compiled engine.

    Same model and weights as :class:`heroeval._em.Design` (``weight``,
    ``pseudo_count``), without the sparse matrices.
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
    weight: FloatArray | None = None
    pseudo_count: float = 0.0
    n_chunks: int = 1

    @property
    def n_annotations(self) -> int:
        return int(self.code.shape[0])

    def _tables(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> tuple[FloatArray, ...]:
        la1, la0 = _em.code_logprobs(alpha, beta)
        p = np.clip(prev, _em.EPS, 1 - _em.EPS)
        log1m = np.log1p(-p)
        lo = np.log(p) - log1m
        return la1 - la0, la0, lo, log1m

    def _w(self) -> tuple[FloatArray, bool]:
        return (self.weight, True) if self.weight is not None else (np.empty(0), False)

    def em_map(
        self, alpha: FloatArray, beta: FloatArray, prev: FloatArray, need_ll: bool
    ) -> tuple[FloatArray, FloatArray, FloatArray, float]:
        """One EM step ``(alpha, beta, prev) -> M(E(.))`` and the log-likelihood at the input (NaN unless asked)."""
        d, la0, lo, log1m = self._tables(alpha, beta, prev)
        w, has_w = self._w()
        S1, GS, LL = _kernel("_em_pass")(self.ptr, self.code, self.gold, self.group, w, has_w, d, la0, lo, log1m, need_ll,
                              2 * self.n_labelers, self.n_groups, self.n_chunks)
        s1 = S1.sum(axis=0)
        gsum = GS.sum(axis=0)
        ll = float("nan")
        if need_ll:
            ll = float(LL.sum()) + _prior(self.pseudo_count, alpha, beta)
        a2, b2, p2 = _em.m_from_sums(s1, self.code_counts, gsum, self.group_size, self.pseudo_count,
                                     weighted=self.weight is not None)
        return a2, b2, p2, ll

    def posterior(self, alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> tuple[FloatArray, float]:
        """Posteriors P(Y_r = 1 | data) (gold items: their gold) and the log-likelihood."""
        d, la0, lo, log1m = self._tables(alpha, beta, prev)
        w, has_w = self._w()
        _, _, LL = _kernel("_em_pass")(self.ptr, self.code, self.gold, self.group, w, has_w, d, la0, lo, log1m, True,
                            2 * self.n_labelers, self.n_groups, self.n_chunks)
        gamma = _kernel("_posterior")(self.ptr, self.code, self.gold, self.group, d, lo, self.n_chunks)
        return gamma, float(LL.sum()) + _prior(self.pseudo_count, alpha, beta)

    def covariance_sums(
        self, alpha: FloatArray, beta: FloatArray, prev: FloatArray, gamma: FloatArray, X: FloatArray | None,
        gram: bool,
    ) -> tuple[FloatArray, FloatArray, FloatArray | None]:
        """Observed information H, Gram of the scores (NaN unless ``gram``) and scores' cross sums with X."""
        from . import _influence

        J, G = self.n_labelers, self.n_groups
        P = 2 * J + G
        ua, ub, ia, ib = _influence._code_weights(alpha, beta)
        p = np.clip(prev, _em.EPS, 1 - _em.EPS)
        w, has_w = self._w()
        Xc = np.zeros((self.n_items, 0)) if X is None else np.ascontiguousarray(X - X.mean(axis=0))
        # one chunk per thread: each holds two P x P sums
        M, S, SX, GA, GB = _kernel("_cov_pass")(self.ptr, self.code, self.group, gamma, w, has_w, ua, ub, p, J, P,
                                                Xc, threads(), gram)
        missing = _sym_upper(M.sum(axis=0))
        StS = _sym_upper(S.sum(axis=0)) if gram else np.full((P, P), np.nan)
        ga = GA.sum(axis=0)
        gb = GB.sum(axis=0)
        Da = (ga * ia)[0::2] + (ga * ia)[1::2]
        Db = (gb * ib)[0::2] + (gb * ib)[1::2]
        Dm = np.zeros(G)
        for s0 in range(0, self.n_items, 1 << 22):  # in chunks: whole-array temporaries would be 8 bytes per item each
            sl = slice(s0, s0 + (1 << 22))
            g_ = gamma[sl]
            gw = g_ if self.weight is None else g_ * self.weight[sl]
            onew = (1 - g_) if self.weight is None else (1 - g_) * self.weight[sl]
            pg = p[self.group[sl]]
            Dm += np.bincount(self.group[sl], weights=gw / pg**2 + onew / (1 - pg) ** 2, minlength=G)
        c = self.pseudo_count
        if c > 0:
            a = np.clip(alpha, _em.EPS, 1 - _em.EPS)
            b = np.clip(beta, _em.EPS, 1 - _em.EPS)
            Da = Da + c * (1 / a**2 + 1 / (1 - a) ** 2)
            Db = Db + c * (1 / b**2 + 1 / (1 - b) ** 2)
        H = np.diag(np.concatenate([Da, Db, Dm])) - missing
        return H, StS, (None if X is None else SX.sum(axis=0))


def _prior(c: float, alpha: FloatArray, beta: FloatArray) -> float:
    if c <= 0:
        return 0.0
    a = np.clip(alpha, _em.EPS, 1 - _em.EPS)
    b = np.clip(beta, _em.EPS, 1 - _em.EPS)
    return c * float(np.sum(np.log(a) + np.log1p(-a) + np.log(b) + np.log1p(-b)))


def code_dtype(n_labelers: int) -> type[np.integer[Any]]:
    """The smallest unsigned integer type that holds every code ``2 * labeler + label``.

    Unsigned, because numba checks signed indices for negative wrap-around on every access.
    """
    return np.uint16 if 2 * n_labelers <= np.iinfo(np.uint16).max else np.uint32


def n_chunks() -> int:
    return threads() * _CHUNKS_PER_THREAD


def compact_design(
    ptr: npt.NDArray[np.int64],
    labeler: npt.NDArray[np.integer[Any]],
    label: npt.NDArray[np.integer[Any]],
    n_labelers: int,
    gold: npt.NDArray[np.int8],
    group: npt.NDArray[np.integer[Any]],
    n_groups: int,
    weight: FloatArray | None = None,
    pseudo_count: float = 0.0,
) -> CompactDesign:
    """Pack annotations into one code each and precompute the constant sums of the M-step."""
    if not HAVE_NUMBA:
        raise ImportError("the compiled engine needs numba: pip install 'heroeval[fast]'")
    dt = code_dtype(n_labelers)
    code = np.empty(labeler.shape[0], dtype=dt)
    for s0 in range(0, code.shape[0], 1 << 22):  # in chunks: no whole-array temporaries
        sl = slice(s0, s0 + (1 << 22))
        np.multiply(labeler[sl], 2, out=code[sl], casting="unsafe")
        code[sl] += label[sl].astype(dt)
    nc = n_chunks()
    n_codes = 2 * n_labelers
    g32 = np.ascontiguousarray(group, dtype=np.int32)
    p64 = np.ascontiguousarray(ptr, dtype=np.int64)
    if weight is None:
        counts = _em.bincount(code, n_codes)
        gsize = _em.bincount(g32, n_groups)
    else:
        counts = _kernel("_weighted_code_counts")(p64, code, weight, n_codes, nc).sum(axis=0)
        gsize = np.bincount(g32, weights=weight, minlength=n_groups).astype(np.float64)
    return CompactDesign(
        n_items=int(p64.shape[0] - 1), n_labelers=n_labelers, n_groups=n_groups, ptr=p64, code=code,
        gold=np.ascontiguousarray(gold, dtype=np.int8), group=g32, code_counts=counts, group_size=gsize,
        weight=weight, pseudo_count=pseudo_count, n_chunks=nc,
    )


def _scatter(ic, lc, y, rc, ptr, pos, out_l, out_y, item_round, conflict):  # type: ignore[no-untyped-def]
    """Place one batch of coded rows at their items' next free slots (a counting sort, batch by batch).

    ``pos[k]`` is item k's next free slot; ``item_round`` takes each item's round, and
    ``conflict[0]`` the first item seen in two rounds (-1: none). Returns False if a row
    falls outside its item's slots (the counts were wrong).
    """
    for a in range(ic.shape[0]):
        k = ic[a]
        p = pos[k]
        if p >= ptr[k + 1]:
            return False
        out_l[p] = lc[a]
        out_y[p] = y[a]
        pos[k] = p + 1
        r = rc[a]
        if item_round[k] < 0:
            item_round[k] = r
        elif item_round[k] != r and conflict[0] < 0:
            conflict[0] = k
    return True


def _repeats(ptr, lab):  # type: ignore[no-untyped-def]
    """Rows that repeat an earlier labeler of the same item: their number and the first one's position."""
    n_dup = 0
    first = -1
    for k in range(ptr.shape[0] - 1):
        for p in range(ptr[k] + 1, ptr[k + 1]):
            for q in range(ptr[k], p):
                if lab[q] == lab[p]:
                    n_dup += 1
                    if first < 0:
                        first = p
                    break
    return n_dup, first


def _serial(name: str) -> Any:
    """A single-threaded compiled kernel (compiled on first use, cached on disk)."""
    f = _compiled.get(name)
    if f is None:
        if not HAVE_NUMBA:
            raise ImportError("the compiled kernels need numba: pip install 'heroeval[fast]'")
        import numba

        f = numba.njit(cache=True, nogil=True)(globals()[name])
        _compiled[name] = f
    return f


class CsrBuilder:
    """Builds the item-sorted arrays from coded rows streamed in batches, with no copy of the stream.

    ``counts`` are the rows per item (known before the stream: DuckDB counts them with
    the item dictionary); each batch is scattered straight to its final place.
    """

    def __init__(self, counts: npt.NDArray[np.integer[Any]]) -> None:
        n_items = int(counts.shape[0])
        self.ptr = np.zeros(n_items + 1, dtype=np.int64)
        np.cumsum(counts, out=self.ptr[1:])
        n = int(self.ptr[-1])
        self.pos = self.ptr[:-1].copy()
        self.labeler = np.empty(n, dtype=np.int32)
        self.label = np.empty(n, dtype=np.int8)
        self.item_round = np.full(n_items, -1, dtype=np.int32)
        self.conflict = np.full(1, -1, dtype=np.int64)

    def add(self, ic: npt.NDArray[Any], lc: npt.NDArray[Any], y: npt.NDArray[Any], rc: npt.NDArray[Any]) -> None:
        if ic.size and (int(ic.min()) < 0 or int(ic.max()) >= self.pos.shape[0]):
            raise ValueError("item code out of range")
        if not _serial("_scatter")(ic, lc, y, rc, self.ptr, self.pos, self.labeler, self.label, self.item_round,
                                   self.conflict):
            raise ValueError("more streamed rows for an item than counted")

    def finish(self) -> tuple[int, int]:
        """Check every slot was filled; return (repeated rows, position of the first)."""
        if not np.array_equal(self.pos, self.ptr[1:]):
            raise ValueError("the streamed rows do not match the per-item counts")
        n_dup, first = _serial("_repeats")(self.ptr, self.labeler)
        return int(n_dup), int(first)
