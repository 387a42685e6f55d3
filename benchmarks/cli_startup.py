#!/usr/bin/env python
"""Start-up time of the ``hero`` command line and of ``import heroeval`` (issue #20, item 2).

Runs each command ``--runs`` times (default 11), interleaved so that a burst of load on a
shared machine hits every command alike, and prints the median wall time and the median
CPU time (user + system, of the child process) of each:

* ``hero --help`` and ``hero --version``: the console script of the interpreter's
  environment (``<venv>/bin/hero``);
* ``python -c "import heroeval"``: what a notebook pays;
* the floor, in the same run: ``python -c pass`` (the interpreter alone) and
  ``python -c "import typer"`` (the CLI framework, which ``hero`` cannot avoid).

``--baseline-src DIR`` also times another checkout's ``src`` folder (e.g. the commit before
the lazy imports, unpacked with ``git archive``) with the same interpreter, by putting it
first on ``PYTHONPATH`` and running the console script's two lines
(``from heroeval.cli import main; main()``) under ``python -c``.

Usage::

    .venv/bin/python -m benchmarks.cli_startup                   # 11 runs of each
    mkdir -p /tmp/base && git archive faa312d src | tar -x -C /tmp/base
    .venv/bin/python -m benchmarks.cli_startup --baseline-src /tmp/base/src

Only the standard library is used here; nothing of heroeval is imported by this process.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERO_MAIN = "import sys; sys.argv[0] = 'hero'; from heroeval.cli import main; sys.exit(main())"


def _time_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run; the command must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=11, help="runs of each command (the median is reported)")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="another checkout's src folder, timed with the same interpreter for comparison")
    args = ap.parse_args()

    py = sys.executable
    hero = str(Path(py).with_name("hero"))
    if not Path(hero).exists():
        raise SystemExit(f"no console script {hero}: run `make .venv/.installed` first")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    cases: list[tuple[str, str, list[str], dict[str, str]]] = [
        ("floor", "python -c pass", [py, "-c", "pass"], env),
        ("floor", 'python -c "import typer"', [py, "-c", "import typer"], env),
        ("this tree", "hero --help", [hero, "--help"], env),
        ("this tree", "hero --version", [hero, "--version"], env),
        ("this tree", 'python -c "import heroeval"', [py, "-c", "import heroeval"], env),
    ]
    if args.baseline_src is not None:
        base = str(args.baseline_src.resolve())
        if not (Path(base) / "heroeval" / "__init__.py").exists():
            raise SystemExit(f"{base} has no heroeval package")
        benv = dict(env, PYTHONPATH=base)
        cases += [
            ("baseline", "hero --help", [py, "-c", HERO_MAIN, "--help"], benv),
            ("baseline", "hero --version", [py, "-c", HERO_MAIN, "--version"], benv),
            ("baseline", 'python -c "import heroeval"', [py, "-c", "import heroeval"], benv),
        ]

    for _, _, cmd, e in cases:  # warm-up: byte-code compiled, files in the page cache
        _time_once(cmd, e)
    walls: dict[int, list[float]] = {i: [] for i in range(len(cases))}
    cpus: dict[int, list[float]] = {i: [] for i in range(len(cases))}
    for _ in range(args.runs):
        for i, (_, _, cmd, e) in enumerate(cases):
            w, c = _time_once(cmd, e)
            walls[i].append(w)
            cpus[i].append(c)

    print(f"start-up, median of {args.runs} runs ({py}; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at the end)")
    if args.baseline_src is not None:
        print(f"baseline: {args.baseline_src}")
    head = f"{'':<10} {'command':<30} {'wall s':>7} {'CPU s':>7} {'min wall':>8} {'max wall':>8}"
    print(head)
    print("-" * len(head))
    for i, (group, label, _, _) in enumerate(cases):
        w, c = walls[i], cpus[i]
        print(f"{group:<10} {label:<30} {statistics.median(w):>7.3f} {statistics.median(c):>7.3f} "
              f"{min(w):>8.3f} {max(w):>8.3f}")


if __name__ == "__main__":
    main()
