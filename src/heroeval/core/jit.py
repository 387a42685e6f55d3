"""numba, when installed: whether it is, and single-threaded compiled kernels (compiled on first use, cached on disk).

numba is a regular dependency (where it cannot be imported, the NumPy engine runs). It is
imported only when a compiled kernel is first used, so ``import heroeval``
stays light.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
"""Whether numba is installed (it is imported only when a compiled kernel is first used)."""

_compiled: dict[Callable[..., Any], Any] = {}


def require_numba(what: str = "the compiled engine") -> None:
    """Raise ImportError naming the extra to install when numba is missing."""
    if not HAVE_NUMBA:
        raise ImportError(f"{what} needs numba: pip install numba")


def serial(fn: Callable[..., Any]) -> Any:
    """``fn`` compiled by numba as a serial, GIL-free kernel (compiled once, cached on disk)."""
    f = _compiled.get(fn)
    if f is None:
        require_numba("the compiled kernels")
        import numba  # optional dependency, imported on first use

        f = numba.njit(cache=True, nogil=True)(fn)
        _compiled[fn] = f
    return f
