"""The codebase's shape in figures (issue #37): run from the repository root.

    python scripts/codebase_figures.py            # the table
    python scripts/codebase_figures.py --check    # exit 1 when a figure is over its target
    python scripts/codebase_figures.py --list     # also every offender, one per line
    python scripts/codebase_figures.py --require private,all   # exit 1 listing offenders (run by make test)

Figures, each with its target:

* the largest module under ``src/heroeval`` (numba kernel modules, named ``*kernel*``, separately);
* imports across subpackages of a private name (``_x``) or from a private module (``a._b``);
* the length of ``heroeval.__all__``;
* functions outside ``cli/`` with 10 or more parameters (a ``**options`` catch-all counts as one: the
  keyword options a ``TypedDict`` declares once, :mod:`heroeval.core.options`, are one group, as a
  settings object would be; ``*args`` counts as one too);
* ``sys.path`` edits in ``benchmarks/`` and ``experiments/``;
* README lines;
* literal lists of the EM settings' keys in ``src/`` outside the settings module (written once there, as the
  fields of ``EMSettings``).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PKG = SRC / "heroeval"
EM_KEYS = frozenset({"tol", "max_iter", "criterion", "accelerate", "pseudo_count", "shrink"})
SYS_PATH = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend)\b|\[.*\]\s*=|\s*=|\s*\+=)")


@dataclass
class Figure:
    key: str
    name: str
    value: int
    target: int
    offenders: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.value <= self.target


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _dotted(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _subpackage(dotted: str) -> str:
    """``heroeval.stage_a.fit`` -> ``stage_a``; a top-level module is its own subpackage."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else ""


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _resolve(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def largest(kernels: bool) -> Figure:
    sizes = []
    for p in _modules():
        if ("kernel" in p.stem) == kernels:
            sizes.append((len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(ROOT))))
    sizes.sort(reverse=True)
    target = 900 if kernels else 800
    name = "largest kernel module (lines)" if kernels else "largest module (lines)"
    return Figure("kernel-size" if kernels else "module-size", name, sizes[0][0] if sizes else 0, target,
                  [f"{n:5d} {f}" for n, f in sizes if n > target])


def private_imports() -> Figure:
    hits: list[str] = []
    for p in _modules():
        here = _dotted(p)
        sub = _subpackage(here)
        tree = ast.parse(p.read_text(encoding="utf-8"), str(p))
        for node in ast.walk(tree):
            targets: list[tuple[str, list[str]]] = []
            if isinstance(node, ast.ImportFrom):
                mod = _resolve(node, here, p.name == "__init__.py")
                targets.append((mod, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                targets += [(a.name, []) for a in node.names]
            for mod, names in targets:
                if not mod.startswith("heroeval"):
                    continue
                other = _subpackage(mod)
                if other == sub:
                    continue
                # "from heroeval import x": x may be a subpackage; judge it as the module it names
                parts = mod.split(".")[1:]
                bad_mod = any(_private(x) for x in parts)
                bad_names = [n for n in names if _private(n)]
                if bad_mod or bad_names:
                    what = mod + (f" import {', '.join(bad_names or names)}" if names else "")
                    hits.append(f"{p.relative_to(ROOT)}:{node.lineno}: {what}")
    return Figure("private", "cross-subpackage private imports", len(hits), 0, hits)


def all_names() -> Figure:
    import heroeval  # the installed package (pip install -e .): its __all__ is built from one table

    return Figure("all", "heroeval.__all__ names", len(heroeval.__all__), 25, list(heroeval.__all__))


def long_signatures() -> Figure:
    hits = []
    for p in _modules():
        if "cli" in p.relative_to(PKG).parts[:1]:
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"), str(p))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                params += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
                if len(params) >= 10:
                    hits.append((len(params), f"{p.relative_to(ROOT)}:{node.lineno}: {node.name} ({len(params)})"))
    hits.sort(reverse=True)
    return Figure("signatures", "functions outside cli/ with >= 10 parameters", len(hits), 10, [h for _, h in hits])


def sys_path_edits() -> Figure:
    hits = []
    for folder in ("benchmarks", "experiments"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
                if SYS_PATH.search(line.split("#", 1)[0]):
                    hits.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    return Figure("sys-path", "sys.path edits in benchmarks/ and experiments/", len(hits), 0, hits)


def readme_lines() -> Figure:
    n = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    return Figure("readme", "README.md lines", n, 250)


def em_key_lists() -> Figure:
    """Literal collections (tuple, list, set, dict keys, call keywords) naming four or more EM settings."""
    hits = []
    for p in _modules():
        if p.name == "settings.py" and p.parent.name == "stage_a":
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"), str(p))
        for node in ast.walk(tree):
            keys: list[object] = []
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                keys = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            elif isinstance(node, ast.Dict):
                keys = [e.value for e in node.keys if isinstance(e, ast.Constant)]
            if len(EM_KEYS.intersection(k for k in keys if isinstance(k, str))) >= 4:
                hits.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    return Figure("em-keys", "EM settings key lists outside stage_a/settings.py", len(hits), 0, hits)


def figures() -> list[Figure]:
    return [largest(False), largest(True), private_imports(), all_names(), long_signatures(), sys_path_edits(),
            readme_lines(), em_key_lists()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a figure is over its target")
    ap.add_argument("--list", action="store_true", help="list every offender")
    ap.add_argument("--require", default="", metavar="KEY,...",
                    help="exit 1 when one of these figures is over its target, listing its offenders (make test "
                         "requires those already at target); keys: module-size, kernel-size, private, all, "
                         "signatures, sys-path, readme, em-keys")
    args = ap.parse_args(argv)
    figs = figures()
    required = {k for k in args.require.split(",") if k}
    unknown = required - {f.key for f in figs}
    if unknown:
        ap.error(f"unknown figure key(s): {sorted(unknown)}")
    if required:
        over = [f for f in figs if f.key in required and not f.ok]
        for f in over:
            print(f"{f.name}: {f.value}, over its target of {f.target}:")
            for o in f.offenders:
                print(f"    {o}")
        if not over:
            print(f"codebase figures at target: {', '.join(sorted(required))}")
        return 1 if over else 0
    width = max(len(f.name) for f in figs)
    for f in figs:
        print(f"{f.name:<{width}}  {f.value:6d}   target <= {f.target:<4d} {'ok' if f.ok else 'OVER'}")
        if args.list:
            for o in f.offenders:
                print(f"    {o}")
    return 1 if args.check and not all(f.ok for f in figs) else 0


if __name__ == "__main__":
    sys.exit(main())
