"""Ideas measured against the product and not (or not yet) adopted (experiments/README.md lists them).

A package so that the scripts import each other and the benchmarks' helpers without editing the module
search path (``from experiments import _latent_tables``, ``from benchmarks.real_data import BINARY``).
Run them as modules from the repository root: ``.venv/bin/python -m experiments.glad_experiment --help``.
"""
