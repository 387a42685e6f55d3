"""``hero calibrate --scheduler``: Stage A and its model checks on Dask from the command line (issue #43 item 2),
the same calibration file as in memory; clear errors for what the Dask path does not take."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app

pytest.importorskip("distributed")

runner = CliRunner()
EXAMPLE = Path(glob.glob(str(Path(he.__file__).parent / "examples" / "*" / "history.csv.gz"))[0]).parent


def _history(tmp_path: Path) -> tuple[Path, Path]:
    """The example history as Parquet in four row groups, rows of one item spread over them (so the load has to
    shuffle on the item column), and its gold labels."""
    df = pd.read_csv(EXAMPLE / "history.csv.gz", dtype=str).sample(frac=1.0, random_state=1)
    path = tmp_path / "history.parquet"
    df.to_parquet(path, row_group_size=len(df) // 4 + 1, index=False)
    return path, EXAMPLE / "history_gold.csv"


def _same_recommended(in_memory: list[str], on_dask: list[str]) -> None:
    """Both commands succeed, the Dask one says where it ran, and their recommended rows agree to 1e-8."""
    r = runner.invoke(app, in_memory)
    assert r.exit_code == 0, r.output
    mem = json.loads(r.stdout)
    r = runner.invoke(app, on_dask)
    assert r.exit_code == 0, r.output
    assert "Stage A ran on a local Dask cluster" in r.stderr
    dsk = json.loads(r.stdout)
    assert dsk["recommended"]["method"] == mem["recommended"]["method"]
    for key in ("estimate", "ci_low", "ci_high"):
        assert dsk["recommended"][key] == pytest.approx(mem["recommended"][key], abs=1e-8)


def test_scheduler_local_equals_in_memory(tmp_path: Path) -> None:
    h, g = _history(tmp_path)
    mem_out, dask_out = tmp_path / "mem.json", tmp_path / "dask.json"
    r = runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(mem_out), "--tol", "1e-10"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(dask_out), "--tol", "1e-10",
                            "--scheduler", "local:2", "-f", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["ran_on"]["scheduler"] == "local:2" and out["ran_on"]["workers"] == 2
    assert out["ran_on"]["address"].startswith("tcp://")
    assert out["ingest"]["rows_read"] == len(pd.read_parquet(h))
    mem, dsk = he.load_calibration(mem_out), he.load_calibration(dask_out)
    assert dsk.settings["engine"] == "dask" and mem.labeler_ids == dsk.labeler_ids
    for f in ("alpha", "beta", "round_prevalence"):
        np.testing.assert_allclose(getattr(dsk, f), getattr(mem, f), rtol=0, atol=1e-8)
    assert mem.checks is not None and dsk.checks is not None
    assert dsk.checks.chosen_weight == mem.checks.chosen_weight
    for w in mem.checks.weight_grid:
        assert dsk.checks.log_score[w][0] == pytest.approx(mem.checks.log_score[w][0], abs=1e-8)
    # the table view says where it ran
    r = runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(dask_out), "--no-checks",
                            "--scheduler", "local:1"])
    assert r.exit_code == 0, r.output
    assert "Stage A ran on a local Dask cluster" in r.output and "(1 worker, " in r.output
    assert "fit in this machine's memory, where Stage A is faster without --scheduler" in " ".join(r.output.split())


def test_workers_fork_on_linux_unless_dask_is_told_otherwise_or_openmp_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    from heroeval.cli import scheduler as S

    monkeypatch.delenv(S.START_METHOD_VARIABLE, raising=False)
    monkeypatch.setattr(S, "_openmp_started", lambda: False)
    monkeypatch.setattr(S.sys, "platform", "linux")
    assert S.start_method() == "fork"
    monkeypatch.setattr(S, "_openmp_started", lambda: True)  # a forked child of an OpenMP process terminates
    assert S.start_method() is None
    monkeypatch.setattr(S, "_openmp_started", lambda: False)
    monkeypatch.setenv(S.START_METHOD_VARIABLE, "spawn")
    assert S.start_method() is None
    monkeypatch.delenv(S.START_METHOD_VARIABLE)
    monkeypatch.setattr(S.sys, "platform", "darwin")
    assert S.start_method() is None
    assert S.Where("local:2", "tcp://x:1", 2, "fork").line().endswith("(2 workers, forked)")
    assert S.Where("tcp://x:1", "tcp://x:1", 3).line().endswith("(3 workers)")


def test_openmp_is_seen_once_numba_parallel_kernels_ran() -> None:
    code = ("import numpy as np, numba\n"
            "from heroeval.cli.scheduler import _openmp_started\n"
            "print(_openmp_started())\n"
            "@numba.njit(parallel=True)\n"
            "def f(x):\n"
            "    s = 0.0\n"
            "    for i in numba.prange(x.size):\n"
            "        s += x[i]\n"
            "    return s\n"
            "f(np.ones(100))\n"
            "print(_openmp_started(), numba.threading_layer())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    first, (second, layer) = r.stdout.split()[0], r.stdout.split()[1:]
    assert first == "False" and second == str(layer == "omp")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers fork on Linux only")
def test_forked_workers_from_a_fresh_command_give_the_in_memory_calibration(tmp_path: Path) -> None:
    """``hero calibrate --scheduler local:2`` in a process of its own (no OpenMP yet): forked workers, the
    in-memory calibration."""
    h, g = _history(tmp_path)
    mem_out, dask_out = tmp_path / "mem.json", tmp_path / "dask.json"
    r = runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(mem_out), "--tol", "1e-10"])
    assert r.exit_code == 0, r.output
    env = {k: v for k, v in os.environ.items() if k != "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"}
    p = subprocess.run([str(Path(sys.executable).with_name("hero")), "calibrate", str(h), "--gold", str(g), "-o",
                        str(dask_out), "--tol", "1e-10", "--scheduler", "local:2", "-f", "json"],
                       capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ran_on"]["workers_started"] == "fork"
    mem, dsk = he.load_calibration(mem_out), he.load_calibration(dask_out)
    for f in ("alpha", "beta", "round_prevalence"):
        np.testing.assert_allclose(getattr(dsk, f), getattr(mem, f), rtol=0, atol=1e-8)
    assert mem.checks is not None and dsk.checks is not None
    assert dsk.checks.chosen_weight == mem.checks.chosen_weight


def test_the_size_note_names_histories_that_fit_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    from heroeval.cli.scheduler import IN_MEMORY_BYTES, size_note

    class Mem:
        available = 2 * IN_MEMORY_BYTES * 10**6

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Mem())
    assert "1,000,000 annotations" in size_note(10**6) and "fit in this machine's memory" in size_note(10**6)
    assert size_note(10**6 + 1) == ""


@pytest.mark.parametrize(("extra", "message"), [
    (["--scheduler", "local:0"], "at least 1"),
    (["--scheduler", "local:x"], "use 'local', 'local:N'"),
    (["--scheduler", "lcoal"], "cannot reach a Dask scheduler there"),
    (["--scheduler", "local:2", "--compact"], "--compact"),
    (["--scheduler", "local:2", "--engine", "numpy"], "--engine"),
    (["--scheduler", "local:2", "--classes", "0,1,2"], "--classes"),
])
def test_scheduler_errors(tmp_path: Path, extra: list[str], message: str) -> None:
    h, g = _history(tmp_path)
    r = runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(tmp_path / "c.json"), *extra])
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert not (tmp_path / "c.json").exists()


def test_scheduler_refuses_other_files(tmp_path: Path) -> None:
    h = tmp_path / "h.jsonl"
    h.write_text('{"item_id": 1, "labeler_id": "a", "label": 1}\n')
    r = runner.invoke(app, ["calibrate", str(h), "--gold", str(EXAMPLE / "history_gold.csv"), "-o",
                            str(tmp_path / "c.json"), "--scheduler", "local:1"])
    assert r.exit_code == 2, r.output
    assert "Parquet" in r.output and "h.jsonl" in r.output


def test_store_calibrate_on_dask_equals_in_memory(tmp_path: Path) -> None:
    """``hero store calibrate --scheduler``: the store's history exported beside it, fitted on Dask, the export
    removed; the calibration the in-memory store fit gives, and cached under the same key."""
    from tests.store.test_store import _frames

    path = tmp_path / "hero.duckdb"
    st = he.Store(path)
    for k, (ann, gold) in enumerate(_frames()):
        st.add(ann, gold=gold, name=f"v{k + 1}", model=f"m{k + 1}")
    ref = he.calibrate(st.load(["v1", "v2", "v3"]), checks=True)
    out = tmp_path / "dask.json"
    r = runner.invoke(app, ["store", "calibrate", "--store", str(path), "--scheduler", "local:2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "Stage A ran on a local Dask cluster" in r.output
    assert not list(tmp_path.glob(".hero-export-*"))  # the export is gone
    cal = he.load_calibration(out)
    assert cal.settings["engine"] == "dask"
    for f in ("alpha", "beta", "round_prevalence"):
        np.testing.assert_allclose(getattr(cal, f), getattr(ref, f), rtol=0, atol=1e-8)
    assert cal.checks is not None and ref.checks is not None and cal.checks.chosen_weight == ref.checks.chosen_weight
    # the next call finds it in the cache: no cluster started
    r = runner.invoke(app, ["store", "calibrate", "--store", str(path)])
    assert r.exit_code == 0, r.output
    assert "cached" in r.output
    # hero store estimate --scheduler: a refit on Dask gives the in-memory refit's recommended estimate
    _same_recommended(["store", "estimate", "v3", "--store", str(path), "--json"],
                      ["store", "estimate", "v3", "--store", str(path), "--json", "--refit", "--scheduler", "local:2"])


def test_estimate_with_history_on_dask_equals_estimate_from_the_calibration_file(tmp_path: Path) -> None:
    """``hero estimate --history H --gold G --scheduler``: Stage A on Dask, then the estimate from that calibration,
    the same as from the in-memory calibration's file (the recommended row included); stderr says where."""
    h, g = _history(tmp_path)
    cur = EXAMPLE / "current.csv.gz"
    cal = tmp_path / "mem.json"
    r = runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(cal)])
    assert r.exit_code == 0, r.output
    _same_recommended(["estimate", str(cur), "--calibration", str(cal), "-f", "json"],
                      ["estimate", str(cur), "--history", str(h), "--gold", str(g), "--scheduler", "local:2", "-f", "json"])
    r = runner.invoke(app, ["estimate", str(cur), "--calibration", str(cal), "--scheduler", "local:1"])
    assert r.exit_code == 2 and "--calibration" in r.output


def test_compare_with_history_on_dask_equals_compare_from_the_calibration_file(tmp_path: Path) -> None:
    """``hero compare A B --history H --gold G --scheduler``: Stage A on Dask without checks (as ``hero compare
    --history`` fits in memory), then the comparison as from that calibration's file."""
    h, g = _history(tmp_path)
    cur = pd.read_csv(EXAMPLE / "current.csv.gz", dtype=str)
    items = cur["item_id"].unique()
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    cur[cur["item_id"].isin(items[::2])].to_csv(a, index=False)
    cur[cur["item_id"].isin(items[1::2])].to_csv(b, index=False)
    cal = tmp_path / "mem.json"
    assert runner.invoke(app, ["calibrate", str(h), "--gold", str(g), "-o", str(cal), "--no-checks"]).exit_code == 0
    r = runner.invoke(app, ["compare", str(a), str(b), "--calibration", str(cal), "-f", "json"])
    assert r.exit_code == 0, r.output
    mem = json.loads(r.stdout)
    r = runner.invoke(app, ["compare", str(a), str(b), "--history", str(h), "--gold", str(g), "--scheduler",
                            "local:2", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert "Stage A ran on a local Dask cluster" in r.stderr
    dsk = json.loads(r.stdout)
    assert mem["recommended"] is None and dsk["recommended"] is None  # no checks, no recommendation
    assert set(dsk["difference"]) == set(mem["difference"]) and "hero1" in mem["difference"]
    for m, d in mem["difference"].items():
        for key in ("estimate", "ci_low", "ci_high"):
            assert dsk["difference"][m][key] == pytest.approx(d[key], abs=1e-8), (m, key)
