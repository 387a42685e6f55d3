"""The covariance of Stage A's parameters, formed as a matrix only when one is asked for.

With ``theta = (alpha, beta, prevalences)`` and optional covariate means ``m``, the
history's influence values give (:func:`heroeval.stage_a.fit.parameter_covariance`)

    V_tt = H^-1 S H^-1     (sandwich; ``H^-1`` alone for the model variance)
    V_tm = H^-1 S_X / N
    V_mm = Xc' Xc / N^2

with ``H`` the observed information, ``S`` the Gram matrix of the items' scores
and ``H^-1`` taken on the parameters off the boundary (zero rows and columns
for the others). Every standard error that involves the history is a
quadratic form ``c' V c`` in a gradient ``c``, so what an estimate needs is
``H^-1 c``: one linear solve.

With J labelers ``H`` and ``S`` are (2J + G) x (2J + G) and dense: the
missing-information part of ``H`` couples every two labelers that share an
item, so ``H`` is neither block-diagonal nor block-diagonal plus low rank.
Forming ``V`` takes an inverse and two products of such matrices (about 5 s at
J = 2,000 on two cores), a Cholesky factor of ``H`` alone about 0.7 s. But
``H`` is its complete-data diagonal minus the missing information, and
scaled by that diagonal it is well conditioned wherever the gold and the
labels identify the labelers (condition number 4 on the scale benchmark's
J = 2,000 histories). So :class:`ParameterCovariance` answers a quadratic form
by conjugate gradients preconditioned by the diagonal of ``H``: a few dozen
matrix-vector products, 0.1-0.2 s at J = 2,000. It switches to the Cholesky
factor (the previous method) when conjugate gradients do not converge within
:data:`CG_MAX_ITER` steps (or meet a direction of non-positive curvature), when
one call brings more than :data:`CG_MAX_RHS` vectors, or once the solves so
far have taken :data:`CG_BUDGET` steps in all (then a factor pays for
itself); where ``H`` is not positive definite it forms ``V`` with the
pseudo-inverse, as before. ``V`` itself is formed only when a caller asks for
the matrix (:meth:`ParameterCovariance.matrix`: a calibration file stores it,
some checks and reports read its diagonal).

Small problems (fewer than :data:`FACTOR_MIN` free parameters) form ``V``
at once, exactly as earlier versions did, and give the same numbers bit for
bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.linalg

from heroeval.stage_a import scoring

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

FACTOR_MIN = scoring._CHOLESKY_MIN
"""From this many free parameters on, ``V`` is not formed until asked for."""

CG_TOL = 1e-14
"""Conjugate gradients stop when the residual's norm is below this times the right-hand side's."""

CG_MAX_ITER = 100
"""Conjugate-gradient steps per solve before the Cholesky factor is used instead."""

CG_BUDGET = 100
"""Conjugate-gradient steps over all solves, after which the Cholesky factor is formed and used.

A step is one product with ``H`` (2 P^2 flops, bound by memory), the factor P^3 / 3 flops
(bound by arithmetic): on two cores at J = 2,000 one factor costs about as much as 60-90
steps, so a caller that asks for many quadratic forms pays at most about twice the factor.
"""

CG_MAX_RHS = 8
"""A solve with more right-hand sides than this uses the Cholesky factor."""

_CACHE = 16
"""Solves remembered (by their right-hand side): a standard error is asked for several times."""


class ParameterCovariance:
    """The covariance ``V`` of the history-estimated parameters (see the module docstring).

    Build one with :meth:`from_information` (a fit's information and Gram
    matrices) or :meth:`from_matrix` (a dense matrix, e.g. read from a file).
    :meth:`quad` gives ``a' V b``, without forming ``V`` unless it was already
    formed; :meth:`matrix` forms ``V`` (once; it is kept).
    """

    def __init__(self, dim: int, *, matrix: FloatArray | None = None, n_theta: int = 0,
                 free: BoolArray | None = None, info: FloatArray | None = None,
                 gram: FloatArray | None = None, sx: FloatArray | None = None,
                 vxx: FloatArray | None = None, n_x_items: int = 0) -> None:
        self.dim = int(dim)
        self._matrix = matrix
        self._n_theta = int(n_theta)
        self._free = free
        self._info = info  # H on the free parameters (dropped once factored)
        self._chol: tuple[FloatArray, bool] | None = None
        self._gram = gram  # S on the free parameters, None for the model variance
        self._sx = sx  # S_X on the free parameters
        self._vxx = vxx
        self._n = int(n_x_items)
        self._cg_steps = 0
        self._cache: dict[bytes, FloatArray] = {}
        self._precond: FloatArray | None = None
        if matrix is None:
            if info is None or free is None:
                raise ValueError("ParameterCovariance needs a matrix or an information matrix")
            dg = np.diag(info).copy()
            if (dg > 0).all() and np.isfinite(dg).all():
                self._precond = 1.0 / dg
            else:  # a parameter without information: conjugate gradients cannot start; as before
                self._factor()

    # ------------------------------------------------------------ building
    @classmethod
    def from_matrix(cls, V: FloatArray) -> ParameterCovariance:
        """A covariance given as a dense symmetric matrix."""
        V = np.asarray(V, dtype=np.float64)
        return cls(V.shape[0], matrix=V)

    @classmethod
    def from_information(cls, H: FloatArray, free: BoolArray, gram: FloatArray | None,
                         sx: FloatArray | None = None, Xc: FloatArray | None = None,
                         factor_min: int | None = None, *, xtx: FloatArray | None = None,
                         n_x_items: int = 0) -> ParameterCovariance:
        """``V`` from the observed information ``H`` and the scores' Gram ``gram`` (None: model variance).

        ``sx`` (theta x p) are the scores' cross sums with the centred covariates
        ``Xc`` (N x p), when there are covariates. From ``factor_min`` free
        parameters on (default :data:`FACTOR_MIN`), ``H`` and ``gram`` are kept
        (not copied when no parameter is on the boundary) and ``V`` is formed
        only on request; below that it is formed at once by
        :func:`dense_covariance`. ``xtx`` (``Xc' Xc``) and ``n_x_items`` (N) may
        stand for ``Xc`` (the Dask path sums them over its partitions).
        """
        nt = H.shape[0]
        if Xc is not None:
            xtx, n_x_items = Xc.T @ Xc, Xc.shape[0]
        p = 0 if xtx is None else xtx.shape[0]
        lim = FACTOR_MIN if factor_min is None else factor_min
        nf = int(free.sum())
        if nf < max(lim, 1):
            return cls.from_matrix(dense_covariance(H, free, gram, sx, xtx=xtx, n_x_items=n_x_items))
        every = nf == nt
        Hff = H if every else H[np.ix_(free, free)]
        g = None if gram is None else (gram if every else gram[np.ix_(free, free)])
        vxx = sx_f = None
        n = 0
        if xtx is not None and sx is not None:
            n = n_x_items
            sx_f = sx[free]
            vxx = xtx / n**2
        return cls(nt + p, n_theta=nt, free=free.copy(), info=Hff, gram=g, sx=sx_f, vxx=vxx, n_x_items=n)

    # ------------------------------------------------------------ solves
    @property
    def method(self) -> str:
        """How quadratic forms are answered now: ``"matrix"``, ``"cholesky"`` or ``"cg"``."""
        return "matrix" if self._info is None and self._chol is None else "cholesky" if self._chol else "cg"

    def _factor(self) -> None:
        """Switch to the Cholesky factor of ``H`` (or, where ``H`` is not positive definite, to the matrix)."""
        if self._chol is not None or self._info is None:
            return
        try:
            c = scipy.linalg.cho_factor(self._info, check_finite=False)
        except np.linalg.LinAlgError:
            self._dense_fallback()
            return
        self._chol = (c[0], bool(c[1]))
        self._info = None
        self._cache.clear()

    def _dense_fallback(self) -> None:
        """``V`` formed with the pseudo-inverse of ``H`` (:func:`dense_covariance`), as earlier versions did."""
        assert self._info is not None and self._free is not None
        f = self._free
        nt = self._n_theta
        H = np.zeros((nt, nt))
        H[np.ix_(f, f)] = self._info
        self._set_matrix(scoring.inverse_of(H, f))

    def _set_matrix(self, Hinv: FloatArray) -> None:
        """Form ``V`` from ``H^-1`` (theta x theta, zero rows for the boundary) and keep only it."""
        assert self._free is not None
        f = self._free
        nt = self._n_theta
        every = bool(f.all())
        S = sx = None
        if self._gram is not None:
            S = self._gram if every else np.zeros((nt, nt))
            if not every:
                S[np.ix_(f, f)] = self._gram
        if self._sx is not None:
            sx = self._sx if every else np.zeros((nt, self._sx.shape[1]))
            if not every:
                sx[f] = self._sx
        V = _assemble(Hinv, S, sx, self._vxx, self._n)
        V.setflags(write=False)
        self._matrix = V
        self._info = self._gram = self._sx = self._vxx = None
        self._chol = None
        self._cache.clear()

    def _cg(self, B: FloatArray) -> FloatArray | None:
        """``H^-1 B`` by conjugate gradients preconditioned by diag(H), one column each; None if they fail."""
        H, Minv = self._info, self._precond
        assert H is not None and Minv is not None
        X = np.zeros_like(B)
        R = B.copy()
        Z = R * Minv[:, None]
        Pd = Z.copy()
        rz = np.einsum("ij,ij->j", R, Z)
        stop = CG_TOL * np.linalg.norm(B, axis=0)
        done = np.linalg.norm(R, axis=0) <= stop
        for _ in range(CG_MAX_ITER):
            if done.all():
                return X
            self._cg_steps += 1
            HP = H @ Pd
            pap = np.einsum("ij,ij->j", Pd, HP)
            if np.any(pap[~done] <= 0):
                return None  # not positive definite along this direction
            step = np.where(done, 0.0, rz / np.where(done, 1.0, pap))
            X += Pd * step
            R -= HP * step
            done = np.linalg.norm(R, axis=0) <= stop
            Z = R * Minv[:, None]
            rz_new = np.einsum("ij,ij->j", R, Z)
            Pd = Z + Pd * np.where(done, 0.0, rz_new / np.where(rz == 0, 1.0, rz))
            rz = rz_new
        return X if done.all() else None

    def _solve(self, A: FloatArray) -> FloatArray:
        """``H^-1 A`` on the free parameters (A: theta rows, any columns; the result has the free rows)."""
        assert self._free is not None
        At = A[: self._n_theta]
        Af = At if At.shape[0] == int(self._free.sum()) else At[self._free]
        Af = np.ascontiguousarray(Af)
        key = Af.tobytes() if Af.shape[1] == 1 else b""
        if key and key in self._cache:
            return self._cache[key]
        if self._chol is None and (Af.shape[1] > CG_MAX_RHS or self._cg_steps >= CG_BUDGET):
            self._factor()
        out: FloatArray | None = None
        if self._chol is None and self._info is not None:
            out = self._cg(Af)
            if out is None:
                self._factor()
        if out is None:
            if self._chol is None:
                raise _Dense
            out = scipy.linalg.cho_solve(self._chol, Af, check_finite=False)
        if key:
            if len(self._cache) >= _CACHE:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = out
        return out

    # ------------------------------------------------------------ queries
    def quad(self, a: npt.ArrayLike, b: npt.ArrayLike | None = None) -> Any:
        """``a' V b`` (``b`` defaults to ``a``).

        ``a`` and ``b`` are vectors of length :attr:`dim` (the result is a float) or
        matrices with :attr:`dim` rows (the result is a matrix).
        """
        A = np.asarray(a, dtype=np.float64)
        vec = A.ndim == 1 and (b is None or np.ndim(b) == 1)
        B = A if b is None else np.asarray(b, dtype=np.float64)
        if A.shape[0] != self.dim or B.shape[0] != self.dim:
            raise ValueError(f"expected {self.dim} rows, got {A.shape[0]} and {B.shape[0]}")
        A2 = A.reshape(self.dim, -1)
        B2 = B.reshape(self.dim, -1)
        try:
            out = self._quad_solved(A2, B2, b is None)
        except _Dense:
            out = None
        if out is None:
            assert self._matrix is not None
            out = A2.T @ (self._matrix @ B2)
        return float(out[0, 0]) if vec else out

    def _quad_solved(self, A2: FloatArray, B2: FloatArray, same: bool) -> FloatArray | None:
        if self._info is None and self._chol is None:
            return None
        assert self._free is not None
        nt = self._n_theta
        x = self._solve(A2)
        y = x if same else self._solve(B2)
        if self._gram is not None:
            out: FloatArray = x.T @ (self._gram @ y)
        else:  # model variance: a' H^-1 b
            out = x.T @ B2[:nt][self._free]
        if self._sx is not None and self._vxx is not None:
            Ax, Bx = A2[nt:], B2[nt:]
            out = out + (x.T @ self._sx) @ Bx / self._n + Ax.T @ ((y.T @ self._sx) / self._n).T
            out = out + Ax.T @ self._vxx @ Bx
        return out

    def submatrix(self, idx: npt.ArrayLike) -> FloatArray:
        """``V[np.ix_(idx, idx)]`` (solves, when ``V`` is not formed)."""
        ix = np.asarray(idx, dtype=np.int64)
        if self._matrix is not None:
            sub: FloatArray = self._matrix[np.ix_(ix, ix)].copy()
            return sub
        E = np.zeros((self.dim, ix.size))
        E[ix, np.arange(ix.size)] = 1.0
        out: FloatArray = self.quad(E)
        return 0.5 * (out + out.T)

    def matrix(self) -> FloatArray:
        """The dense ``V`` (formed on the first call and kept, in place of everything else; read-only)."""
        if self._matrix is None:
            self._factor()
        if self._matrix is None:
            assert self._chol is not None and self._free is not None
            f = self._free
            nt = self._n_theta
            nf = int(f.sum())
            inv = scipy.linalg.cho_solve(self._chol, np.eye(nf), check_finite=False)
            if nf == nt:
                Hinv = inv
            else:
                Hinv = np.zeros((nt, nt))
                Hinv[np.ix_(f, f)] = inv
            del inv
            self._set_matrix(Hinv)
        assert self._matrix is not None
        return self._matrix

    def diagonal(self) -> FloatArray:
        """The variances, ``diag(V)`` (forms ``V``)."""
        out: FloatArray = np.diag(self.matrix()).copy()
        return out


class _Dense(Exception):
    """``H`` turned out not positive definite: ``V`` is now a matrix (raised inside a solve)."""


def dense_covariance(H: FloatArray, free: BoolArray, gram: FloatArray | None, sx: FloatArray | None = None,
                     Xc: FloatArray | None = None, *, xtx: FloatArray | None = None,
                     n_x_items: int = 0) -> FloatArray:
    """``V`` formed densely: ``H^-1`` (:func:`heroeval.stage_a.scoring.inverse_of`), then the sandwich.

    The plain computation :class:`ParameterCovariance` stands in for; it forms
    the small problems' ``V`` and the tests compare the other paths with it.
    """
    if Xc is not None:
        xtx, n_x_items = Xc.T @ Xc, Xc.shape[0]
    n = n_x_items if xtx is not None else 0
    vxx = None if xtx is None or sx is None else xtx / n**2
    return _assemble(scoring.inverse_of(H, free), gram, None if xtx is None else sx, vxx, n)


def _assemble(Hinv: FloatArray, gram: FloatArray | None, sx: FloatArray | None, vxx: FloatArray | None,
              n: int) -> FloatArray:
    """``[[H^-1 S H^-1, H^-1 S_X / n], [., V_mm]]`` (``H^-1`` alone without ``S``), symmetrised."""
    Vtt = Hinv @ gram @ Hinv if gram is not None else Hinv
    if sx is None or vxx is None:
        out0: FloatArray = 0.5 * (Vtt + Vtt.T)
        return out0
    Vtx = Hinv @ sx / n
    V = np.block([[Vtt, Vtx], [Vtx.T, vxx]])
    out: FloatArray = 0.5 * (V + V.T)
    return out


def quad(V: FloatArray | ParameterCovariance, a: npt.ArrayLike, b: npt.ArrayLike | None = None) -> Any:
    """``a' V b`` for a dense covariance matrix or a :class:`ParameterCovariance`."""
    if isinstance(V, ParameterCovariance):
        return V.quad(a, b)
    A = np.asarray(a, dtype=np.float64)
    B = A if b is None else np.asarray(b, dtype=np.float64)
    out = A.T @ V @ B
    return float(out) if np.ndim(out) == 0 else out
