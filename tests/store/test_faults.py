"""Faults: a process killed during an add, two processes adding at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

import heroeval as he
from heroeval.store import StoreError
from tests.store.test_store import _frames

ROOT = Path(__file__).resolve().parents[2]

# A child that adds a large round (2e6 labels, built without ingest so the add starts at once) and
# prints each step of the add's transaction; PAUSE makes it sleep at one step (holding the lock).
CHILD = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import heroeval as he
    import heroeval.store.store as S
    from heroeval.ingest.annotations import AnnotationSet, IngestReport, TableReport
    path, pause = sys.argv[1], sys.argv[2]
    n_items, k = 400_000, 5
    rng = np.random.default_rng(0)
    items = np.array([f"big{i:07d}" for i in range(n_items)], dtype=object)
    ds = AnnotationSet(items, np.array([f"L{j:02d}" for j in range(8)], dtype=object),
                       np.arange(0, n_items * k + 1, k, dtype=np.int64),
                       rng.integers(0, 8, n_items * k).astype(np.int32), rng.integers(0, 2, n_items * k).astype(np.int8),
                       np.full(n_items, -1, dtype=np.int8), np.zeros(n_items, dtype=np.int32), ("all",), None, (),
                       IngestReport((TableReport("annotations", "big", n_items * k, n_items * k),)), "big")
    def hook(step):
        print(step, flush=True)
        if step == pause:
            time.sleep(60)
    S._TEST_HOOK = hook
    print("start", flush=True)
    he.Store(path, wait=float(os.environ.get("WAIT", "0"))).add(ds, name="big")
    print("done", flush=True)
""")


def _child(path: Path, pause: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(path), pause], stdout=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT)


def _wait_for(p: subprocess.Popen[str], line: str, timeout: float = 120) -> None:
    t0 = time.monotonic()
    assert p.stdout is not None
    while time.monotonic() - t0 < timeout:
        got = p.stdout.readline().strip()
        if got == line:
            return
        if got == "" and p.poll() is not None:
            raise AssertionError(f"child ended (code {p.returncode}) before {line!r}")
    raise AssertionError(f"child did not reach {line!r}")


def _snapshot(st: he.Store) -> tuple[object, ...]:
    con = duckdb.connect(str(st.path), read_only=True)
    try:
        counts = tuple(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                       for t in ("rounds", "items", "annotations", "labelers", "log"))
    finally:
        con.close()
    return st.rounds().names, counts


@pytest.mark.parametrize("kill_at", ["items", "before-commit"])
def test_a_kill_during_an_add_leaves_the_store_as_it_was(tmp_path: Path, kill_at: str) -> None:
    st = he.Store(tmp_path / "hero.duckdb")
    ann, gold = _frames(rounds=1)[0]
    st.add(ann, gold=gold, name="v1")
    before = _snapshot(st)
    # "items": killed while the 2e6 annotations are being inserted; "before-commit": everything inserted, not committed
    p = _child(st.path, "before-commit" if kill_at == "before-commit" else "never")
    try:
        _wait_for(p, kill_at)
        os.kill(p.pid, signal.SIGKILL)
    finally:
        p.wait(30)
    assert p.returncode == -signal.SIGKILL
    after = he.Store(st.path)
    assert _snapshot(after) == before
    ann2, gold2 = _frames(seed=7, rounds=1)[0]
    after.add(ann2, gold=gold2, name="v2")  # and the store takes the next add
    assert after.rounds().names == ("v1", "v2")


def test_two_writers_one_waits_or_fails_clearly(tmp_path: Path) -> None:
    st = he.Store(tmp_path / "hero.duckdb")
    ann, gold = _frames(rounds=1)[0]
    st.add(ann, gold=gold, name="v1")
    p = _child(st.path, "items")  # holds the store open, mid-transaction
    try:
        _wait_for(p, "items")
        ann2, gold2 = _frames(seed=7, rounds=1)[0]
        t0 = time.monotonic()
        with pytest.raises(StoreError, match=r"in use by process \d+.*--wait.*Nothing was changed"):
            he.Store(st.path, wait=0.5).add(ann2, gold=gold2, name="v2")
        assert time.monotonic() - t0 >= 0.5
        with pytest.raises(StoreError, match="in use"):
            he.Store(st.path, wait=0).rounds()
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
    he.Store(st.path).add(ann2, gold=gold2, name="v2")
    assert he.Store(st.path).rounds().names == ("v1", "v2")


def test_a_second_writer_that_waits_gets_its_turn(tmp_path: Path) -> None:
    st = he.Store(tmp_path / "hero.duckdb")
    p = _child(st.path, "never")
    try:
        _wait_for(p, "items")
        ann, gold = _frames(rounds=1)[0]
        he.Store(st.path, wait=120).add(ann, gold=gold, name="v1")  # waits for the child's add to commit
        _wait_for(p, "done")
    finally:
        p.wait(60)
    assert p.returncode == 0
    assert set(he.Store(st.path).rounds().names) == {"big", "v1"}
