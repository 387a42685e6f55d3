"""The package's import structure: no heroeval import inside a function, and lint-imports' contracts hold.

`make test` also runs `lint-imports` (the layers and acyclic contracts at the end of
pyproject.toml); this test keeps the one rule import-linter cannot express: an import
of a heroeval module inside a function body (the usual way to dodge a cycle) is not
allowed anywhere in the package. Imports of optional third-party packages (numba,
dask, duckdb, matplotlib) inside functions are fine: they keep `import heroeval` light.
"""

from __future__ import annotations

import ast
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


def test_no_heroeval_import_inside_a_function() -> None:
    bad = [hit for p in sorted(SRC.rglob("*.py")) for hit in _function_level_heroeval_imports(p)]
    assert bad == []


def test_the_checker_sees_a_function_level_import(tmp_path: Path) -> None:
    """The rule above can fail: a seeded violation is found."""
    p = SRC / "_seeded_for_test.py"
    try:
        p.write_text("def f():\n    from heroeval.stage_a import _em\n    return _em\n", encoding="utf-8")
        assert _function_level_heroeval_imports(p) == ["heroeval/_seeded_for_test.py:2 from heroeval.stage_a"]
    finally:
        p.unlink()


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
