"""Every code example in README.md and docs/*.md runs here.

The rules (also in docs/guide.md, "About the examples"):

* a fenced ```python block is executed; the blocks of one file run in order,
  in one namespace, interleaved with its console blocks;
* in a fenced ```console (or ```bash, ```sh, ```shell) block, each line that
  starts with ``$ hero`` is run in-process (lines ending in ``\\`` continue
  it) and must exit 0. The lines that follow a command, up to the next ``$``
  line, are its expected output: each must appear in the real output
  (spaces collapsed; ``...`` matches anything);
* ``$ make TARGET`` lines are not run (``make test`` is this suite, and the
  other targets install things), but TARGET must exist in the Makefile;
* any other ``$`` command in a console block fails this test: examples that
  cannot run here (hours of CPU, data outside the repository) go in a
  ```text fence. Those opt-outs are counted per file below, so a new one is
  a deliberate change.

Each file runs in a fresh temporary folder holding ``src/heroeval/examples``
(a link to the bundled example data), so the examples' relative paths work
and their outputs (calibration files, reports) land in the temporary folder.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from heroeval.cli import app
from heroeval.workflows.demo import example_paths

ROOT = Path(__file__).resolve().parents[2]
FILES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
SHELLS = {"console", "bash", "sh", "shell"}
# text-fenced blocks holding `$` commands that are deliberately not run, per file (see the module docstring)
OPT_OUTS = {"README.md": 2, "docs/benchmark.md": 2, "docs/simulation.md": 1, "docs/multiclass.md": 7, "docs/scale.md": 6,
            "docs/measurements.md": 2, "docs/research/robustness.md": 12}

FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)


@dataclass
class Block:
    lang: str
    code: str
    line: int


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    return [Block(m.group(1).lower(), m.group(2), text.count("\n", 0, m.start()) + 2) for m in FENCE.finditer(text)]


@dataclass
class Command:
    argv: str
    expected: list[str]
    line: int


def commands(b: Block) -> Iterator[Command]:
    lines = b.code.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if not ln.startswith("$ "):
            i += 1
            continue
        start = i
        cmd = ln[2:]
        while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        out = []
        while i < len(lines) and not lines[i].startswith("$ "):
            out.append(lines[i])
            i += 1
        yield Command(cmd, [x for x in out if x.strip()], b.line + start)


def _norm(s: str) -> str:
    return " ".join(s.split())


def _matches(expected: str, output: str) -> bool:
    e = _norm(expected)
    if "..." not in e:
        return e in output
    pattern = ".*?".join(re.escape(part) for part in e.split("..."))
    return re.search(pattern, output) is not None


def _make_targets() -> set[str]:
    return set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "src" / "heroeval").mkdir(parents=True)
    os.symlink(example_paths()["history"].parent.parent, tmp_path / "src" / "heroeval" / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", FILES)
def test_examples_run(name: str, workdir: Path) -> None:
    path = ROOT / name
    runner = CliRunner()
    namespace: dict[str, object] = {"__name__": f"docs_example_{path.stem}"}
    targets = _make_targets()
    opted_out = 0
    ran = 0
    for b in blocks(path):
        where = f"{name}:{b.line}"
        if b.lang == "python":
            exec(compile(b.code, where, "exec"), namespace)  # the documentation's own code
            ran += 1
        elif b.lang in SHELLS:
            for c in commands(b):
                argv = shlex.split(c.argv, comments=True)
                loc = f"{name}:{c.line}"
                if argv[0] == "make":
                    assert len(argv) == 2 and argv[1] in targets, f"{loc}: no Makefile target {argv[1:]}"
                    continue
                assert argv[0] == "hero", (
                    f"{loc}: '{c.argv}' cannot run in the tests: put it in a ```text fence (and count it in OPT_OUTS)")
                r = runner.invoke(app, argv[1:])
                assert r.exit_code == 0, f"{loc}: {c.argv}\n{r.output}\n{r.stderr}"
                got = _norm(r.stdout)
                for e in c.expected:
                    assert _matches(e, got), f"{loc}: expected output line not in the real output:\n{e}\n---\n{r.stdout}"
                ran += 1
        elif any(ln.startswith("$ ") for ln in b.code.splitlines()):
            opted_out += 1
    assert opted_out == OPT_OUTS.get(name, 0), f"{name}: {opted_out} not-run command blocks; update OPT_OUTS deliberately"
    if name == "README.md" or name == "docs/guide.md":
        assert ran >= 5, f"{name}: only {ran} examples ran"


def test_parser_on_a_made_up_block() -> None:
    b = Block("console", "$ hero a \\\n   --b c  # comment\nout 1\n\n$ make demo\n$ hero d\n", 10)
    cs = list(commands(b))
    assert [c.argv for c in cs] == ["hero a  --b c  # comment", "make demo", "hero d"]
    assert shlex.split(cs[0].argv, comments=True) == ["hero", "a", "--b", "c"]
    assert cs[0].expected == ["out 1"] and cs[0].line == 10
    assert _matches("HERO-1   0.6087 ...  0.0352", "| HERO-1 | 0.6087 | 0.0352 |") is False
    assert _matches("HERO-1 ... 0.0352", "| HERO-1 | 0.6087 | 0.0352 |")
