"""The covariance of Stage A's parameters, kept factored until a dense matrix is asked for.

With ``theta = (alpha, beta, prevalences)`` and optional covariate means ``m``, the
history's influence values give (:func:`heroeval.stage_a.calibration.parameter_covariance`)

    V_tt = H^-1 S H^-1     (sandwich; ``H^-1`` alone for the model variance)
    V_tm = H^-1 S_X / N
    V_mm = Xc' Xc / N^2

with ``H`` the observed information, ``S`` the Gram matrix of the items' scores
and ``H^-1`` taken on the parameters off the boundary (zero rows and columns
for the others). Every standard error that involves the history is a
quadratic form ``c' V c`` in a gradient ``c``. With J labelers ``H`` and ``S`` are
(2J + G) x (2J + G) and dense: the missing-information part of ``H`` couples
every two labelers that share an item, so ``H`` is neither block-diagonal nor
block-diagonal plus low rank. Forming ``V`` takes an inverse and two products
of such matrices (about 5 s at J = 2,000 on two cores); a quadratic form from
the Cholesky factor of ``H`` takes two triangular solves and one product with
``S`` (tens of milliseconds). :class:`ParameterCovariance` keeps the factor and
``S``, answers quadratic forms from them, and forms ``V`` only when a caller
asks for the matrix (:meth:`ParameterCovariance.matrix`: a calibration file
stores it, some checks and reports read its diagonal).

Small problems (fewer than :data:`FACTOR_MIN` free parameters) form ``V``
at once, exactly as before this class existed: the pseudo-inverse of ``H``
there, and the results equal those of earlier versions bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.linalg

from heroeval.stage_a import _influence

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

FACTOR_MIN = _influence._CHOLESKY_MIN
"""From this many free parameters on, ``V`` stays factored (when ``H`` is positive definite on them)."""


class ParameterCovariance:
    """The covariance ``V`` of the history-estimated parameters (see the module docstring).

    Build one with :meth:`from_information` (a fit's information and Gram
    matrices) or :meth:`from_matrix` (a dense matrix, e.g. read from a file).
    :meth:`quad` gives ``a' V b`` without forming ``V`` when it is factored;
    :meth:`matrix` forms ``V`` (once; it is kept).
    """

    def __init__(self, dim: int, *, matrix: FloatArray | None = None, n_theta: int = 0,
                 free: BoolArray | None = None, chol: tuple[FloatArray, bool] | None = None,
                 gram: FloatArray | None = None, sx: FloatArray | None = None,
                 vxx: FloatArray | None = None, n_x_items: int = 0) -> None:
        self.dim = int(dim)
        self._matrix = matrix
        self._n_theta = int(n_theta)
        self._free = free
        self._chol = chol
        self._gram = gram
        self._sx = sx
        self._vxx = vxx
        self._n = int(n_x_items)
        if matrix is None and (chol is None or free is None):
            raise ValueError("ParameterCovariance needs a matrix or a Cholesky factor")

    # ------------------------------------------------------------ building
    @classmethod
    def from_matrix(cls, V: FloatArray) -> ParameterCovariance:
        """A covariance given as a dense symmetric matrix."""
        V = np.asarray(V, dtype=np.float64)
        return cls(V.shape[0], matrix=V)

    @classmethod
    def from_information(cls, H: FloatArray, free: BoolArray, gram: FloatArray | None,
                         sx: FloatArray | None = None, Xc: FloatArray | None = None,
                         factor_min: int | None = None) -> ParameterCovariance:
        """``V`` from the observed information ``H``, the scores' Gram ``gram`` (None: model variance).

        ``sx`` (theta x p) are the scores' cross sums with the centred covariates
        ``Xc`` (N x p), when there are covariates. From
        ``factor_min`` free parameters on (default :data:`FACTOR_MIN`), ``H`` is
        kept as its Cholesky factor on the free parameters and ``V`` is formed
        only on request; below that, or when ``H`` is not positive definite there,
        ``V`` is formed at once as :func:`dense_covariance` does.
        """
        nt = H.shape[0]
        p = 0 if Xc is None else Xc.shape[1]
        lim = FACTOR_MIN if factor_min is None else factor_min
        nf = int(free.sum())
        if nf >= max(lim, 1):
            Hff = H if nf == nt else H[np.ix_(free, free)]
            try:
                chol = scipy.linalg.cho_factor(Hff, overwrite_a=Hff is not H, check_finite=False)
            except np.linalg.LinAlgError:
                chol = None
            if chol is not None:
                g = None
                if gram is not None:
                    g = gram if nf == nt else gram[np.ix_(free, free)]
                vxx = sx_f = None
                n = 0
                if Xc is not None and sx is not None:
                    n = Xc.shape[0]
                    sx_f = sx[free]
                    vxx = Xc.T @ Xc / n**2
                return cls(nt + p, n_theta=nt, free=free.copy(), chol=(chol[0], bool(chol[1])), gram=g,
                           sx=sx_f, vxx=vxx, n_x_items=n)
        return cls.from_matrix(dense_covariance(H, free, gram, sx, Xc))

    # ------------------------------------------------------------ queries
    @property
    def factored(self) -> bool:
        """Whether ``V`` is held as a factor (quadratic forms by solves) rather than as a matrix."""
        return self._chol is not None

    def _solve(self, A: FloatArray) -> FloatArray:
        """``H^-1 A`` on the free parameters (rows of the free theta parameters only)."""
        assert self._chol is not None and self._free is not None
        At = A[: self._n_theta]
        Af = At if At.shape[0] == int(self._free.sum()) else At[self._free]
        out: FloatArray = scipy.linalg.cho_solve(self._chol, Af, check_finite=False)
        return out

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
        if self._chol is None:
            assert self._matrix is not None
            out = A2.T @ (self._matrix @ B2)
        else:
            assert self._free is not None
            nt = self._n_theta
            x = self._solve(A2)
            y = x if b is None else self._solve(B2)
            if self._gram is not None:
                out = x.T @ (self._gram @ y)
            else:  # model variance: a' H^-1 b
                Bf = B2[:nt][self._free]
                out = x.T @ Bf
            if self._sx is not None and self._vxx is not None:
                Ax, Bx = A2[nt:], B2[nt:]
                out = out + (x.T @ self._sx) @ Bx / self._n + Ax.T @ ((y.T @ self._sx) / self._n).T
                out = out + Ax.T @ self._vxx @ Bx
        return float(out[0, 0]) if vec else out

    def submatrix(self, idx: npt.ArrayLike) -> FloatArray:
        """``V[np.ix_(idx, idx)]``: one solve per index when ``V`` is factored."""
        ix = np.asarray(idx, dtype=np.int64)
        if self._chol is None:
            assert self._matrix is not None
            sub: FloatArray = self._matrix[np.ix_(ix, ix)].copy()
            return sub
        E = np.zeros((self.dim, ix.size))
        E[ix, np.arange(ix.size)] = 1.0
        out: FloatArray = self.quad(E)
        return 0.5 * (out + out.T)

    def matrix(self) -> FloatArray:
        """The dense ``V`` (formed on the first call and kept; a read-only array)."""
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
            if self._gram is None:
                Vtt = Hinv
            elif nf == nt:
                Vtt = Hinv @ self._gram @ Hinv
            else:
                S = np.zeros((nt, nt))
                S[np.ix_(f, f)] = self._gram
                Vtt = Hinv @ S @ Hinv
            if self._sx is None or self._vxx is None:
                V = 0.5 * (Vtt + Vtt.T)
            else:
                sx = np.zeros((nt, self._sx.shape[1]))
                sx[f] = self._sx
                Vtx = Hinv @ sx / self._n
                Vb = np.block([[Vtt, Vtx], [Vtx.T, self._vxx]])
                V = 0.5 * (Vb + Vb.T)
            V.setflags(write=False)
            self._matrix = V
        return self._matrix

    def diagonal(self) -> FloatArray:
        """The variances, ``diag(V)`` (forms ``V``)."""
        out: FloatArray = np.diag(self.matrix()).copy()
        return out


def dense_covariance(H: FloatArray, free: BoolArray, gram: FloatArray | None, sx: FloatArray | None = None,
                     Xc: FloatArray | None = None) -> FloatArray:
    """``V`` formed densely: ``H^-1`` (:func:`heroeval.stage_a._influence.inverse_of`), then the sandwich.

    The plain computation :class:`ParameterCovariance` stands in for; it forms
    the small problems' ``V`` and the tests compare the factored form with it.
    """
    Hinv = _influence.inverse_of(H, free)
    Vtt = Hinv @ gram @ Hinv if gram is not None else Hinv
    if Xc is None or sx is None:
        out0: FloatArray = 0.5 * (Vtt + Vtt.T)
        return out0
    N = Xc.shape[0]
    Vtx = Hinv @ sx / N
    Vxx = Xc.T @ Xc / N**2
    V = np.block([[Vtt, Vtx], [Vtx.T, Vxx]])
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
