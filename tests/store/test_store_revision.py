"""A calibration cached by an older heroeval (another FIT_REVISION) is refitted, not served."""

from __future__ import annotations

from pathlib import Path

import pytest

import heroeval as he
from heroeval.store import _rounds
from tests.store.test_store import _frames


def test_a_calibration_cached_under_another_revision_is_refitted(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    st = he.Store(tmp_path / "r.duckdb")
    (ann, gold), = _frames(rounds=1)
    path = tmp_path / "v1.csv"
    ann.to_csv(path, index=False)
    st.add(path, gold=gold, name="v1")
    monkeypatch.setattr(_rounds, "FIT_REVISION", _rounds.FIT_REVISION - 1)
    old = st.calibrate()
    assert old.status == "fitted" and st.calibrate().status == "cached"
    monkeypatch.undo()
    new = st.calibrate()
    assert new.status == "fitted" and new.key != old.key
    assert st.calibrate().status == "cached"
