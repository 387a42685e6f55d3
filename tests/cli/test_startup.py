"""Start-up stays light (issue #20, item 2): what `import heroeval`, `hero --help` and `hero --version` import.

Not timed (benchmarks/cli_startup.py times them); each check runs in a fresh interpreter and
reads its ``sys.modules``:

* ``import heroeval``, and also after every public name has been used once (the lazy API
  imports its modules then): no DuckDB, matplotlib, numba or Dask, which are imported only
  by the code that needs them (DuckDB ingest, plots, the compiled engine, the distributed
  path). A bare ``import heroeval`` imports no numpy, pandas or scipy either (pandas would be
  allowed; it is not needed).
* ``hero --help`` and ``hero --version``: none of those, nor numpy, pandas, scipy or pyarrow,
  and of heroeval only the command line's own modules and the light ones they need
  (``_version``, ``errors``, ``_core.jit``); every command imports its implementation when it runs.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

HEAVY_OPTIONAL = {"duckdb", "matplotlib", "numba", "dask"}
NUMERIC = {"numpy", "pandas", "scipy", "pyarrow"}
CLI_START = {"heroeval", "heroeval.version", "heroeval.errors", "heroeval.core", "heroeval.core.jit",
             "heroeval.cli", "heroeval.cli.commands", "heroeval.cli.store", "heroeval.cli._messages",
             "heroeval.cli.console", "heroeval.cli.options", "heroeval.cli.inputs", "heroeval.cli.calibrate",
             "heroeval.cli.estimate", "heroeval.cli.report_cmd", "heroeval.cli.drift", "heroeval.cli.plan",
             "heroeval.cli.simulate", "heroeval.cli.demo"}


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running ``code`` (SystemExit included)."""
    wrapped = ("import json, sys\ntry:\n" + "".join(f"    {line}\n" for line in code.splitlines())
               + "except SystemExit:\n    pass\nfinally:\n"
               "    sys.stdout.flush()\n    sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)) + '\\n')\n")
    res = subprocess.run([sys.executable, "-c", wrapped], capture_output=True, text=True, check=False, timeout=300)
    line = [x for x in res.stderr.splitlines() if x.startswith("MODULES ")]
    assert line, res.stderr[-3000:]
    return set(json.loads(line[-1][len("MODULES "):]))


def _top(mods: set[str]) -> set[str]:
    return {m.split(".")[0] for m in mods}


def test_import_heroeval_is_light() -> None:
    mods = _modules_after("import heroeval")
    assert not _top(mods) & (HEAVY_OPTIONAL | NUMERIC)
    assert {m for m in mods if m.startswith("heroeval")} == {"heroeval", "heroeval.version"}


@pytest.mark.parametrize("use", ["names", "submodules"])
def test_the_public_api_in_use_imports_no_optional_engine(use: str) -> None:
    """Every public name (or every subpackage) used once, as a notebook would: still no DuckDB, matplotlib,
    numba or Dask (they come with the reader, the plots, the compiled engine, the distributed path)."""
    code = ("import heroeval as he\nfor n in he.__all__:\n    getattr(he, n)" if use == "names" else
            "import heroeval as he\nfor n in he._SUBMODULES:\n    getattr(he, n)\n"
            "import heroeval.estimators, heroeval.workflows.api, heroeval.ingest.read")
    mods = _modules_after(code)
    assert "heroeval.workflows.api" in mods  # the names were resolved
    assert not _top(mods) & HEAVY_OPTIONAL, sorted(_top(mods) & HEAVY_OPTIONAL)


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["store", "--help"]])
def test_hero_help_and_version_import_no_implementation(args: list[str]) -> None:
    mods = _modules_after(f"sys.argv = ['hero', *{args!r}]\nfrom heroeval.cli import main\nmain()")
    assert not _top(mods) & (HEAVY_OPTIONAL | NUMERIC), sorted(_top(mods) & (HEAVY_OPTIONAL | NUMERIC))
    assert {m for m in mods if m.startswith("heroeval")} == CLI_START


def test_cli_copies_of_library_constants_are_pinned() -> None:
    """The help texts and defaults name these without importing the library; they must stay equal to it."""
    from heroeval.cli import commands, estimate, plan, store
    from heroeval.estimators.ppi import ALL_GOLD_METHODS
    from heroeval.estimators.table import METHODS
    from heroeval.inference.select import DEFAULT_MIX, DEFAULT_STRATA
    from heroeval.store.trend import ADJUSTMENTS
    from heroeval.workflows.benchmark import RATE_SHIFT_ODDS

    assert estimate._METHODS == METHODS
    assert estimate._ALL_GOLD_METHODS == ALL_GOLD_METHODS
    assert plan._DEFAULT_MIX == DEFAULT_MIX
    assert plan._DEFAULT_STRATA == DEFAULT_STRATA
    assert store._ADJUSTMENTS == ADJUSTMENTS
    rate_odds = inspect.signature(commands.benchmark_cmd).parameters["rate_odds"].default
    assert rate_odds == RATE_SHIFT_ODDS
