"""The codebase figures of issue #37 (scripts/codebase_figures.py): the rules held at target, and the counter
itself on a hand-made tree (so that a rule that passes is a rule that can fail)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("codebase_figures", ROOT / "scripts" / "codebase_figures.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["codebase_figures"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_rules_held_at_target() -> None:
    figs = {f.key: f for f in _figures().figures()}
    for key in ("private", "all", "sys-path", "em-keys", "readme", "kernel-size", "module-size"):
        assert figs[key].ok, (key, figs[key].value, figs[key].offenders[:10])


def test_private_imports_counted_on_a_hand_made_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cf = _figures()
    pkg = tmp_path / "src" / "heroeval"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text(
        "from heroeval.b._y import z\n"          # a private module of another subpackage: counted
        "from heroeval.b.w import _q, ok\n"      # a private name of another subpackage: counted
        "from heroeval.a._p import r\n"          # private, but within the same subpackage: allowed
        "from heroeval.b.w import fine\n"        # public: allowed
        "import heroeval.b._v\n"                 # a private module, imported whole: counted
        "from heroeval import __version__\n")   # a dunder is not private
    (pkg / "a" / "_p.py").write_text("from . import x\nfrom ._q import y\n")  # relative, same subpackage: allowed
    monkeypatch.setattr(cf, "SRC", tmp_path / "src")
    monkeypatch.setattr(cf, "PKG", pkg)
    monkeypatch.setattr(cf, "ROOT", tmp_path)
    fig = cf.private_imports()
    assert fig.value == 3, fig.offenders
    assert [o.split(": ", 1)[1] for o in fig.offenders] == ["heroeval.b._y import z", "heroeval.b.w import _q",
                                                            "heroeval.b._v"]


def test_em_key_lists_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cf = _figures()
    pkg = tmp_path / "src" / "heroeval"
    (pkg / "stage_a").mkdir(parents=True)
    (pkg / "stage_a" / "settings.py").write_text('KEYS = ("tol", "max_iter", "criterion", "accelerate")\n')
    (pkg / "m.py").write_text('A = {"tol": 1, "max_iter": 2, "criterion": 3, "shrink": 4}\nB = ("tol", "shrink")\n')
    monkeypatch.setattr(cf, "SRC", tmp_path / "src")
    monkeypatch.setattr(cf, "PKG", pkg)
    monkeypatch.setattr(cf, "ROOT", tmp_path)
    fig = cf.em_key_lists()
    assert fig.value == 1 and fig.offenders == ["src/heroeval/m.py:1"]
