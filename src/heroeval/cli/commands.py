"""The ``hero`` command line: the typer app and its commands. It reads, calls the public API and renders; it computes
nothing.

Each command lives in the module of its job (``calibrate``, ``estimate`` and ``compare``, ``report``, ``drift``,
``plan`` and ``select``, ``simulate`` and ``benchmark``, ``demo``; ``store`` is a group of its own) and is
registered here; the options they share are in :mod:`heroeval.cli.options`, how they run and print in
:mod:`heroeval.cli.console`, the reading of their files in :mod:`heroeval.cli.inputs`.

Each command imports what it uses inside its body (heroeval's modules, NumPy, rich), so that
``hero --help`` and ``hero --version`` load none of it: the one place, beside the package's
``__init__``, where heroeval modules may be imported lazily (pyproject.toml, tests/unit/test_layers.py).
Module level, in every module of the command line, holds only what typer needs to build the commands:
their signatures and help texts.
"""

from __future__ import annotations

from typing import Annotated

import typer

from heroeval.cli.calibrate import calibrate_cmd
from heroeval.cli.console import INGESTED
from heroeval.cli.demo import demo_cmd
from heroeval.cli.drift import drift_cmd
from heroeval.cli.estimate import compare_cmd, estimate_cmd
from heroeval.cli.plan import plan_cmd, select_cmd
from heroeval.cli.report_cmd import report_cmd
from heroeval.cli.simulate import benchmark_cmd, simulate_cmd
from heroeval.cli.store import store_app
from heroeval.version import __version__

app = typer.Typer(
    name="hero",
    help="HERO: estimate a model's gold-label rate from noisy silver labels, calibrated on your label history.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: no '<bool>' metavars, and '[fast]' in a help text is not eaten as markup
)
app.add_typer(store_app, name="store")

# in this order in `hero --help`
app.command("calibrate")(calibrate_cmd)
app.command("estimate")(estimate_cmd)
app.command("compare")(compare_cmd)
app.command("simulate")(simulate_cmd)
app.command("benchmark")(benchmark_cmd)
app.command("demo")(demo_cmd)
app.command("report")(report_cmd)
app.command("drift")(drift_cmd)
app.command("plan")(plan_cmd)
app.command("select")(select_cmd)


def _print_version(value: bool) -> None:
    if value:
        print(f"heroeval {__version__}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def _root(
    # eager, and handled by its callback: `hero --version` exits while its options are parsed, before typer
    # builds its (pydantic) converters for the other options, which would double the start-up time
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", is_eager=True,
                                          callback=_print_version)] = False,
) -> None:
    INGESTED.clear()  # a new command (the CLI's tests run many in one process)


def main() -> None:  # pragma: no cover - console-script entry
    app(prog_name="hero")


if __name__ == "__main__":  # pragma: no cover
    main()
