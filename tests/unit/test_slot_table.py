"""The slot table that places streamed rows of integer item ids (heroeval.ingest._csr.SlotTable), against a plain
implementation: a stable argsort of the rows by item position."""

from __future__ import annotations

import numpy as np
import pytest

from heroeval.ingest import _csr
from heroeval.ingest._csr import SlotTable

pytest.importorskip("numba")


def _plain(item_off: np.ndarray, n_range: int, by_size: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of the offsets (-1 absent), item offsets into the rows, and the order that sorts the rows."""
    cnt = np.bincount(item_off, minlength=n_range)
    present = np.flatnonzero(cnt)
    items = present[np.argsort(cnt[present], kind="stable")] if by_size else present
    pos = np.full(n_range, -1, dtype=np.int64)
    pos[items] = np.arange(items.size)
    ptr = np.concatenate([[0], np.cumsum(cnt[items])])
    order = np.argsort(pos[item_off], kind="stable")
    return pos, ptr, order


def _fill(t: SlotTable, u: np.ndarray, v: np.ndarray, y: np.ndarray, rc: np.ndarray, packed: bool,
          batch: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    for s in range(0, u.size, batch):
        t.count(u[s:s + batch])
    ptr = t.layout()
    out_l = np.zeros(int(ptr[-1]), dtype=np.uint16 if packed else np.int32)
    out_y = np.zeros(0 if packed else int(ptr[-1]), dtype=np.int8)
    lab_code = np.arange(int(v.max()) + 1, dtype=np.int32)
    for s in range(0, u.size, batch):
        t.scatter(u[s:s + batch], v[s:s + batch], y[s:s + batch], rc[s:s + batch], lab_code, out_l, out_y, packed)
    return ptr, out_l, out_y


@pytest.mark.parametrize("by_size", [False, True])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("wide", [False, True])
def test_slot_table_places_rows_as_a_stable_sort_does(by_size: bool, packed: bool, wide: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if wide:  # the 8-byte table used from 2**31 labels on
        monkeypatch.setattr(_csr, "INT32_SLOTS", 0)
    rng = np.random.default_rng(3)
    n_range = 40
    u = rng.integers(0, n_range, 300).astype(np.int32)
    u[u % 7 == 3] = 0  # gaps in the ids, and one item with many rows
    v = rng.integers(0, 5, u.size).astype(np.int32)
    y = rng.integers(0, 2, u.size).astype(np.int8)
    t = SlotTable(100, 100 + n_range - 1, by_size=by_size, has_rounds=False)
    ptr, out_l, out_y = _fill(t, u, v, y, np.zeros(0, np.int32), packed)
    assert t.slot.dtype == (np.int64 if wide else np.int32)
    pos, ptr0, order = _plain(u, n_range, by_size)
    np.testing.assert_array_equal(ptr, ptr0)
    if packed:
        np.testing.assert_array_equal(out_l, (2 * v + y)[order])
    else:
        np.testing.assert_array_equal(out_l, v[order])
        np.testing.assert_array_equal(out_y, y[order])
    item_round = np.zeros(ptr.size - 1, np.int32)
    assert t.settle(ptr, item_round) == -1
    ids = np.arange(90, 150, dtype=np.int64)
    np.testing.assert_array_equal(t.positions(ids), np.where((ids >= 100) & (ids < 140), pos[(ids - 100) % n_range], -1))


def test_slot_table_more_than_255_rows_an_item() -> None:
    u = np.array([1] * 300 + [0, 2, 2], dtype=np.int32)
    v = np.zeros(u.size, np.int32)
    y = np.ones(u.size, np.int8)
    t = SlotTable(0, 2, by_size=True, has_rounds=False)
    ptr, out_l, _ = _fill(t, u, v, y, np.zeros(0, np.int32), True, batch=50)
    np.testing.assert_array_equal(ptr, [0, 1, 3, 303])
    assert (out_l == 1).all()
    assert t.settle(ptr, np.zeros(3, np.int32)) == -1
    np.testing.assert_array_equal(t.positions(np.array([0, 1, 2])), [0, 2, 1])


def test_slot_table_rounds_and_the_first_item_in_two() -> None:
    u = np.array([2, 0, 2, 0, 0], dtype=np.int32)
    rc = np.array([1, 0, 1, 0, 0], dtype=np.int32)
    t = SlotTable(0, 2, by_size=True, has_rounds=True)
    ptr, _, _ = _fill(t, u, np.zeros(5, np.int32), np.zeros(5, np.int8), rc, True)
    item_round = np.full(2, -1, np.int32)
    assert t.settle(ptr, item_round) == -1
    np.testing.assert_array_equal(item_round, [1, 0])  # item 2 (two rows) first, then item 0 (three)
    t2 = SlotTable(0, 2, by_size=False, has_rounds=True)
    rc2 = rc.copy()
    rc2[4] = 5  # item 0 in rounds 0 and 5
    ptr2, _, _ = _fill(t2, u, np.zeros(5, np.int32), np.zeros(5, np.int8), rc2, True)
    assert t2.settle(ptr2, np.full(2, -1, np.int32)) == 0  # item 0 is at position 0 in id order


def test_slot_table_refuses_rows_that_do_not_match_the_counts() -> None:
    def counted() -> tuple[SlotTable, np.ndarray, np.ndarray]:
        t = SlotTable(0, 3, by_size=True, has_rounds=False)
        t.count(np.array([0, 0, 1, 3], np.int32))
        ptr = t.layout()
        return t, ptr, np.zeros(int(ptr[-1]), np.uint16)

    lab = np.zeros(1, np.int32)
    none = np.zeros(0, np.int32)
    # an id that had no rows in the first scan
    t, ptr, code = counted()
    with pytest.raises(ValueError, match="has no slot"):
        t.scatter(np.array([2], np.int32), np.array([0], np.int32), np.zeros(1, np.int8), none, lab, code, none, True)
    # a row past the last slot
    t, ptr, code = counted()
    with pytest.raises(ValueError, match="has no slot"):
        t.scatter(np.array([0, 0, 0, 1, 3], np.int32), np.zeros(5, np.int32), np.zeros(5, np.int8), none, lab, code,
                  none, True)
    # item 1 a row more (into item 3's slot) and item 3 none: the same number of rows, found when settling
    t, ptr, code = counted()
    t.scatter(np.array([1, 1, 0, 0], np.int32), np.zeros(4, np.int32), np.zeros(4, np.int8), none, lab, code, none,
              True)
    with pytest.raises(ValueError, match="do not match"):
        t.settle(ptr, np.zeros(3, np.int32))
    # a labeler offset outside the code table
    t, ptr, code = counted()
    with pytest.raises(ValueError, match="labeler offset 4"):
        t.scatter(np.array([0], np.int32), np.array([4], np.int32), np.zeros(1, np.int8), none, lab, code, none, True)
