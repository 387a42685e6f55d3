"""The scripts behind a number in the README or docs/ (benchmarks/README.md lists them).

A package so that the scripts import each other's helpers without editing the module search path
(``from benchmarks.tables import markdown``, ``from benchmarks.real_data import BINARY``).
Run them as modules from the repository root: ``.venv/bin/python -m benchmarks.scale --help``.
Their outputs are in ``benchmarks/results/``.
"""
