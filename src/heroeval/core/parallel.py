"""Run independent replication chunks on worker processes, with progress."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

Row = dict[str, Any]


def run_chunks(
    fn: Callable[[Any], list[Row]],
    jobs: Sequence[Any],
    sizes: Sequence[int],
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Row]:
    """``fn(job)`` for every job (in ``workers`` processes), concatenating the rows.

    ``sizes[i]`` is how many replications job i holds; ``progress(done, total)``
    is called as jobs finish. One worker runs in this process.
    """
    workers = workers or os.cpu_count() or 1
    total = sum(sizes)
    rows: list[Row] = []
    done = 0
    if workers == 1:
        for job, size in zip(jobs, sizes, strict=True):
            rows.extend(fn(job))
            done += size
            if progress:
                progress(done, total)
        return rows
    with ProcessPoolExecutor(max_workers=workers) as ex:
        futs = {ex.submit(fn, job): size for job, size in zip(jobs, sizes, strict=True)}
        for f in as_completed(futs):
            rows.extend(f.result())
            done += futs[f]
            if progress:
                progress(done, total)
    return rows
