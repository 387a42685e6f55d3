"""Issue #38: the recommended method is the same whether the history or its calibration file is passed, or the
reason says why not. A calibration file holds Stage A's fit, not the history, so ``hero_joint`` (which refits
Stage A with the current round) cannot run from it; HERO-1, judged by the same mock rounds, takes its place, and
the reason now says so (before, the two calls named different methods with no word on why)."""

from __future__ import annotations

from pathlib import Path

import pytest

import heroeval as he
from heroeval.choice.auto import STAND_IN
from heroeval.estimators.collection import EstimateCollection
from tests.conftest import simulate


@pytest.mark.parametrize("seed", [1, 2])
def test_calibration_file_names_hero_joint_s_stand_in(seed: int, tmp_path: Path) -> None:
    sim = simulate(seed, N=600, gold_rate=0.2)
    cal = he.calibrate(sim.history, checks=True)
    cal.save(tmp_path / "c.json")
    loaded = he.load_calibration(tmp_path / "c.json")
    from_file = he.estimate(sim.current, loaded, method="all", recommend=True)
    from_history = he.estimate(sim.current, history=sim.history, method="all", recommend=True)
    assert isinstance(from_file, EstimateCollection) and isinstance(from_history, EstimateCollection)
    a, b = from_file.recommended, from_history.recommended
    assert a is not None and b is not None
    if b.method == "hero_joint":
        assert a.method == "hero1" and a.reason.endswith(STAND_IN)
        assert "hero_joint" not in from_file.results  # it cannot run from the file: the stand-in is needed
        assert abs(a.result.estimate - b.result.estimate) < 3 * b.result.standard_error
    else:  # the same choice: nothing to explain
        assert a.method == b.method and STAND_IN not in a.reason
    assert STAND_IN not in b.reason


def test_in_memory_calibration_with_its_history_needs_no_stand_in() -> None:
    s = simulate(1, N=600, gold_rate=0.2)
    cal = he.calibrate(s.history, checks=True)  # holds its history: hero_joint can run
    res = he.estimate(s.current, cal, method="all", recommend=True)
    assert isinstance(res, EstimateCollection) and res.recommended is not None
    assert STAND_IN not in res.recommended.reason
