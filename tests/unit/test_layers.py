"""The package's import structure: where heroeval modules may be imported lazily, and lint-imports' contracts.

`make test` also runs `lint-imports` (the layers and acyclic contracts at the end of
pyproject.toml); this test keeps the rules import-linter cannot express. An import of a
heroeval module inside a function body (the usual way to dodge a cycle) is not allowed,
with ONE exception, for start-up time only (issue #20, item 2), in exactly two places:

* ``heroeval/cli/``: the top layer imports each command's implementation inside the
  command (``hero --help`` then imports none of it). It only imports downward, so it
  cannot hide a cycle, and grimp parses imports inside functions, so ``lint-imports``
  still checks every one of them (``test_import_linter_sees_the_cli_lazy_imports``).
* ``heroeval/__init__.py``: the public API is exposed lazily by a PEP 562 module
  ``__getattr__`` over a table of names; the same names are imported under
  ``if TYPE_CHECKING:`` for type checkers, and the two must agree.

Nowhere else: no module-level ``__getattr__``, no ``importlib.import_module`` or
``__import__``. Imports of optional third-party packages (numba, dask, duckdb,
matplotlib, playwright) inside functions are fine anywhere: they keep `import heroeval` light.
"""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "heroeval"


def _function_level_heroeval_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level > 0 or mod == "heroeval" or mod.startswith("heroeval."):
                    found.append(f"{path.relative_to(SRC.parent)}:{node.lineno} from {'.' * node.level}{mod}")
            elif isinstance(node, ast.Import):
                found += [f"{path.relative_to(SRC.parent)}:{node.lineno} import {a.name}" for a in node.names
                          if a.name == "heroeval" or a.name.startswith("heroeval.")]
    return found


LAZY_IMPORTS_ALLOWED = SRC / "cli"
"""The one package whose functions may import heroeval modules (the command line; see the module docstring)."""
PEP562_MODULE = SRC / "__init__.py"
"""The one module that may define a module-level ``__getattr__`` and call ``importlib.import_module``."""


def _lazy_loading_outside_the_exception(path: Path) -> list[str]:
    """Function-level heroeval imports outside heroeval/cli/, and PEP 562 or import_module outside __init__.py."""
    where = str(path.relative_to(SRC.parent))
    found = [] if path.is_relative_to(LAZY_IMPORTS_ALLOWED) else _function_level_heroeval_imports(path)
    if path == PEP562_MODULE:
        return found
    tree = ast.parse(path.read_text(encoding="utf-8"))
    fns = {id(n) for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(tree):  # a module-level (also under if/try at module level) def __getattr__ / __dir__
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("__getattr__", "__dir__"):
            parents = [p for p in ast.walk(tree) if id(p) in fns or isinstance(p, ast.ClassDef)]
            if not any(node in ast.walk(p) and p is not node for p in parents):
                found.append(f"{where}:{node.lineno} module-level {node.name} (PEP 562)")
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in ("import_module", "__import__"):
                found.append(f"{where}:{node.lineno} {name}()")
    return found


def test_lazy_heroeval_imports_only_where_the_exception_allows() -> None:
    bad = [hit for p in sorted(SRC.rglob("*.py")) for hit in _lazy_loading_outside_the_exception(p)]
    assert bad == []


def test_the_exception_is_used_where_it_is_allowed() -> None:
    """The CLI does import lazily (else the exception would be dead), and only it."""
    cli = [hit for p in sorted(LAZY_IMPORTS_ALLOWED.rglob("*.py")) for hit in _function_level_heroeval_imports(p)]
    assert len(cli) > 10
    assert all(hit.startswith("heroeval/cli/") for hit in cli)


def test_the_checker_sees_a_function_level_import(tmp_path: Path) -> None:
    """The rules above can fail: seeded violations are found, and the same import under cli/ is allowed."""
    body = "def f():\n    from heroeval.stage_a import _em\n    return _em\n"
    p = SRC / "_seeded_for_test.py"
    q = SRC / "report" / "_seeded_for_test.py"
    c = LAZY_IMPORTS_ALLOWED / "_seeded_for_test.py"
    try:
        p.write_text(body, encoding="utf-8")
        assert _function_level_heroeval_imports(p) == ["heroeval/_seeded_for_test.py:2 from heroeval.stage_a"]
        assert _lazy_loading_outside_the_exception(p) == ["heroeval/_seeded_for_test.py:2 from heroeval.stage_a"]
        q.write_text("import importlib\n\nif True:\n    def __getattr__(name):\n"
                     "        return importlib.import_module('heroeval.' + name)\n", encoding="utf-8")
        assert _lazy_loading_outside_the_exception(q) == [
            "heroeval/report/_seeded_for_test.py:4 module-level __getattr__ (PEP 562)",
            "heroeval/report/_seeded_for_test.py:5 import_module()"]
        c.write_text(body, encoding="utf-8")
        assert _function_level_heroeval_imports(c) == ["heroeval/cli/_seeded_for_test.py:2 from heroeval.stage_a"]
        assert _lazy_loading_outside_the_exception(c) == []
    finally:
        for x in (p, q, c):
            x.unlink(missing_ok=True)


def _type_checking_imports(path: Path) -> dict[str, str]:
    """name -> module of the imports under ``if TYPE_CHECKING:`` at a module's top level."""
    out: dict[str, str] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                out.update({a.asname or a.name: imp.module for a in imp.names})
    return out


def test_the_lazy_public_api_is_complete() -> None:
    """heroeval/__init__.py: the lazy table, the TYPE_CHECKING imports and __all__ name the same things,
    and every public name resolves both ways (he.X and from heroeval import X)."""
    import heroeval as he

    assert he._EXPORTS == _type_checking_imports(PEP562_MODULE)
    assert set(he.__all__) == set(he._PUBLIC) | {"__version__"} and len(he.__all__) <= 25
    assert he._EXPORTS == {**he._PUBLIC, **he._ALSO} and not set(he._PUBLIC) & set(he._ALSO)
    assert len(he.__all__) == len(set(he.__all__))
    assert set(he.__all__) <= set(dir(he))
    for name, module in he._EXPORTS.items():
        obj = getattr(he, name)
        exec(f"from heroeval import {name} as _x", ns := {})
        assert ns["_x"] is obj is getattr(importlib.import_module(module), name), name
    for sub in he._SUBMODULES:
        assert getattr(he, sub) is importlib.import_module(f"heroeval.{sub}")
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        he.not_a_name  # type: ignore[attr-defined]  # noqa: B018


def test_import_linter_sees_the_cli_lazy_imports() -> None:
    """grimp (import-linter's graph) records imports inside functions, so lint-imports checks the CLI's lazy ones,
    in every module of heroeval/cli/; the imports under TYPE_CHECKING (excluded, as in pyproject.toml) are not
    what it relies on."""
    grimp = pytest.importorskip("grimp")
    g = grimp.build_graph("heroeval", exclude_type_checking_imports=True)
    every: set[str] = set()
    for path in sorted(LAZY_IMPORTS_ALLOWED.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        lazy = {m for hit in _function_level_heroeval_imports(path)
                for m in [hit.rsplit(" ", 1)[1]] if m.startswith("heroeval.")}
        every |= lazy
        seen = g.find_modules_directly_imported_by(module)
        # `from heroeval.report import terminal` is recorded as heroeval.report.terminal
        assert all(m in seen or any(x.startswith(m + ".") for x in seen) for m in lazy), (module, lazy - seen)
    assert "heroeval.workflows.api" in every


@pytest.mark.skipif(shutil.which("lint-imports", path=str(Path(sys.executable).parent)) is None,
                    reason="import-linter is not installed")
def test_import_contracts_hold() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe is not None
    res = subprocess.run([exe], cwd=SRC.parents[1], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout[-3000:]
    assert " 0 broken" in res.stdout


def _cycles(adj: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), i.e. the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in adj.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(adj):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert _cycles({"a": ["b"], "b": []}) == []


def test_module_import_graph_has_no_cycle() -> None:
    """Every heroeval module, every import between them (grimp, import-linter's graph builder): no cycle."""
    grimp = pytest.importorskip("grimp")
    g = grimp.build_graph("heroeval", exclude_type_checking_imports=True)
    adj = {m: sorted(x for x in g.find_modules_directly_imported_by(m) if x.startswith("heroeval"))
           for m in g.modules if m.startswith("heroeval")}
    assert len(adj) > 50
    assert _cycles(adj) == []
