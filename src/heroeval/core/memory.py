"""Large arrays whose pages are first written by every core at once.

Writing a page for the first time costs a page fault. On a virtual machine
that hands freed memory back to its host (virtio-balloon free page reporting,
common in clouds), that fault is the host's too: on the machine of our
benchmarks it costs about 6 s per GiB on one core, 15 to 30 times rewriting
the same memory, and two cores halve it. The ingest's serial kernels write
their arrays in input order, one core at a time; :func:`filled` writes the
pages first, split over the cores, so the kernels then rewrite memory that is
already there. Below :data:`PARALLEL_BYTES` the threads cost more than they
save and the array is filled as ``np.full`` would.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["PARALLEL_BYTES", "filled", "n_cores"]

PARALLEL_BYTES = 1 << 26
"""Arrays at least this large (64 MiB) are first written by all cores."""


def n_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def filled(n: int, dtype: npt.DTypeLike, value: Any = 0) -> npt.NDArray[Any]:
    """``np.full(n, value, dtype)``, the pages first written by every core in parallel when the array is large."""
    if n < 0:
        raise ValueError(f"n must be at least 0, got {n}")
    a = np.empty(int(n), dtype=dtype)
    cores = n_cores()
    if a.nbytes < PARALLEL_BYTES or cores == 1:
        a.fill(value)
        return a
    with ThreadPoolExecutor(max_workers=cores) as ex:  # ndarray.fill releases the GIL
        for _ in ex.map(lambda part: part.fill(value), np.array_split(a, cores)):
            pass
    return a
