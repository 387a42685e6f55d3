"""``--scheduler``: Stage A and its model checks on Dask from the command line (``hero calibrate``, ``hero
estimate --history``, ``hero store calibrate``).

``local`` starts a :class:`distributed.LocalCluster` with one single-threaded worker process per core,
``local:N`` one with N workers; anything else is the address of a running scheduler
(``tcp://host:8786``), whose workers must have heroeval installed and read the history's path. The history
is read by Dask where it lies (Parquet: a file, a glob or a directory; or plain CSV), one partition per
group of row groups, and the checks run as :func:`heroeval.calibrate_dask` runs them. Every command that
takes the option says where Stage A ran.

On Linux the local workers are forked from the command's own process, which has heroeval, pandas, pyarrow and
numba imported already: the cluster is up and its workers ready in about 0.1 s, against 1.5-1.7 s spawned
(each spawned worker imports them again before its first task; docs/scale.md). They are spawned, as Dask
does by default, where numba's OpenMP threads have run in this process (a forked child of it terminates), and
where Dask's own setting ``DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD`` (spawn, forkserver) is set.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import multiprocessing
import os
import re
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import heroeval.stage_a.distributed_folds  # noqa: F401  (what the workers run: a forked worker has it loaded)
from heroeval.errors import HeroEvalError

if TYPE_CHECKING:  # annotations only
    from heroeval.stage_a.calibration import Calibration

__all__ = ["Where", "calibrate_on_dask", "dask_client", "dask_history", "local_cluster", "start_method"]

PARTITIONS_PER_WORKER = 2
"""Partitions per worker the history is cut into (whole row groups each), so that no worker idles while
another holds two large ones: 3 partitions on 2 workers left one worker idle a third of each pass."""


@dataclass(frozen=True)
class Where:
    """Where Stage A ran: the scheduler's address and its workers."""

    scheduler: str
    address: str
    workers: int
    started: str | None = None  # how a local cluster's workers started (fork, spawn, forkserver); None: not ours

    def line(self) -> str:
        kind = "a local Dask cluster" if self.scheduler.startswith("local") else "the Dask cluster"
        how = {None: "", "fork": ", forked", "spawn": ", spawned"}.get(self.started, f", started by {self.started}")
        return f"Stage A ran on {kind} at {self.address} ({self.workers} worker{'s' * (self.workers != 1)}{how})"

    def to_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler, "address": self.address, "workers": self.workers,
                "workers_started": self.started}


IN_MEMORY_BYTES = 20
"""About what one annotation costs in memory on the in-memory path (the read history and Stage A's design,
docs/scale.md), for :func:`size_note`."""


def size_note(n_annotations: int) -> str:
    """A note when the history would fit in this machine's memory (half of what is available), where Stage A is
    faster without ``--scheduler``; else ''."""
    import psutil

    need = IN_MEMORY_BYTES * n_annotations
    if need > psutil.virtual_memory().available / 2:
        return ""
    size = f"{need / 2**30:.1f} GiB" if need >= 2**30 else f"{max(1, round(need / 2**20))} MiB"
    return (f"; note: these {n_annotations:,} annotations (about {size} in memory) fit in this "
            "machine's memory, where Stage A is faster without --scheduler (1e7 annotations: 4.7 s in memory, "
            "7.2 s on local:2; docs/scale.md)")


def _local_workers(spec: str) -> int | None:
    """The worker count of ``local`` / ``local:N``, or None for an address."""
    if spec == "local":
        return max(1, os.cpu_count() or 1)
    m = re.fullmatch(r"local:(\d+)", spec)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise HeroEvalError(f"--scheduler {spec}: the number of workers must be at least 1")
        return n
    if spec.startswith("local:"):
        raise HeroEvalError(f"--scheduler {spec!r}: use 'local', 'local:N' (N workers) or a scheduler address "
                            "such as tcp://host:8786")
    return None


START_METHOD_VARIABLE = "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"


def _openmp_started() -> bool:
    """Whether numba's parallel kernels have run in this process on its OpenMP layer, which makes a forked child
    terminate ("fork() called from a process already using GNU OpenMP")."""
    numba = sys.modules.get("numba")
    if numba is None:
        return False
    try:
        return bool(numba.threading_layer() == "omp")
    except ValueError:  # no parallel kernel has run yet
        return False


def start_method() -> str | None:
    """How a local cluster starts its worker processes: ``fork`` on Linux unless Dask's own variable says
    otherwise or numba's OpenMP threads have started in this process (an in-memory fit before the cluster;
    None: Dask's setting, spawn by default, is kept)."""
    if START_METHOD_VARIABLE in os.environ or not sys.platform.startswith("linux") or _openmp_started():
        return None
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else None


@contextlib.contextmanager
def local_cluster(n: int, **options: Any) -> Iterator[Any]:
    """A LocalCluster of ``n`` single-threaded worker processes, forked where :func:`start_method` says so
    (``options``: more of LocalCluster's, such as ``memory_limit``). Start it before reading large data into
    this process: a forked worker shares the process's memory, and its resident size, which Dask's memory
    limits read, starts at the process's."""
    import dask
    import distributed

    method = start_method()
    with contextlib.ExitStack() as stack:
        if method is not None:
            stack.enter_context(dask.config.set({"distributed.worker.multiprocessing-method": method}))
            # Python 3.12+ warns on every fork of a process with threads (the cluster's event loop is one); the
            # workers' start is the fork Dask documents as an option
            warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks",
                                    category=DeprecationWarning)
        cluster = stack.enter_context(distributed.LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, **options))
        yield cluster


@contextlib.contextmanager
def dask_client(spec: str) -> Iterator[tuple[Any, Where]]:
    """A Dask client for ``--scheduler spec`` (a local cluster started and closed here, or a running one)."""
    try:
        import distributed
    except ImportError as e:
        raise HeroEvalError("--scheduler needs Dask: pip install 'heroeval[dask]'") from e
    n = _local_workers(spec)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    if n is not None:
        import dask

        with local_cluster(n) as cl, distributed.Client(cl) as c:  # type: ignore[no-untyped-call]
            # inside local_cluster's configuration: how its workers started
            started = str(dask.config.get("distributed.worker.multiprocessing-method"))
            yield c, Where(spec, str(cl.scheduler_address), n, started)
        return
    try:
        client = distributed.Client(spec, timeout="20s")  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as e:  # unreachable, or not an address (ValueError)
        raise HeroEvalError(f"--scheduler {spec}: cannot reach a Dask scheduler there ({e}); use 'local', "
                            "'local:N' or an address such as tcp://host:8786") from e
    with client as c:
        yield c, Where(spec, spec, len(c.scheduler_info().get("workers", {})))


def _parquet_files(path: Path) -> list[Path] | None:
    """The Parquet files of a file, a directory or a glob, or None when the history is not Parquet."""
    s = str(path)
    if any(ch in s for ch in "*?["):
        files = sorted(Path(p) for p in glob.glob(s, recursive=True))
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix == ".parquet")
    else:
        files = [path]
    if files and all(f.suffix in (".parquet", ".pq") for f in files):
        return files
    return None


def _readable(path: Path) -> list[Path] | None:
    """The history's Parquet files, or None for CSV; a clear error for anything else (before a cluster starts)."""
    files = _parquet_files(path)
    if files is None:
        s = str(path)
        if not (s.endswith(".csv") or s.endswith(".csv.gz") or any(ch in s for ch in "*?[")):
            raise HeroEvalError(f"{path}: --scheduler reads Parquet (a file, glob or directory of .parquet files) "
                                "or CSV (.csv, .csv.gz) histories")
        if not any(ch in s for ch in "*?[") and not path.exists():
            raise HeroEvalError(f"{path}: no such file")
        return None
    if not files:
        raise HeroEvalError(f"{path}: no Parquet files there")
    for f in files:
        if not f.exists():
            raise HeroEvalError(f"{f}: no such file")
    return files


def dask_history(path: Path, workers: int) -> Any:
    """The history at ``path`` as a Dask DataFrame, cut into about ``PARTITIONS_PER_WORKER`` partitions per worker
    of whole row groups (Parquet) or blocks of 64 MB (CSV; compressed CSV: one partition per file)."""
    import dask.dataframe as dd
    import pyarrow.parquet as pq

    files = _readable(path)
    if files is None:
        s = str(path)
        return dd.read_csv(s, dtype=str, blocksize=None if s.endswith(".gz") else "64MB", keep_default_na=False,
                           na_values=[""])
    row_groups = sum(pq.ParquetFile(f).metadata.num_row_groups for f in files)
    per_part = max(1, row_groups // max(1, PARTITIONS_PER_WORKER * workers))
    return dd.read_parquet([str(f) for f in files], split_row_groups=per_part)


def calibrate_on_dask(spec: str, history: Path, gold: Path, *, covariates: Path | None = None,
                      columns: dict[str, Any], options: dict[str, Any]) -> tuple[Calibration, Where]:
    """:func:`heroeval.calibrate_dask` on the history at ``history`` through ``--scheduler spec``: the history
    checked for whole items per partition and shuffled on the item column only when it is not."""
    from heroeval.workflows.api import calibrate_dask

    _readable(history)
    with dask_client(spec) as (client, where):
        frame = dask_history(history, max(1, where.workers))
        cal = calibrate_dask(frame, gold=gold, client=client, covariates=covariates, partitioned_by_item="auto",
                             **columns, **options)
    return cal, where
