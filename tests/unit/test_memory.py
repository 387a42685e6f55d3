"""heroeval.core.memory.filled: np.full, with large arrays first written by every core."""

from __future__ import annotations

import numpy as np
import pytest

from heroeval.core import memory
from heroeval.core.memory import filled


@pytest.mark.parametrize("n", [0, 1, 1000])
def test_small_arrays_equal_np_full(n: int) -> None:
    a = filled(n, np.int8, -1)
    assert a.dtype == np.int8 and a.shape == (n,)
    np.testing.assert_array_equal(a, np.full(n, -1, np.int8))


def test_large_arrays_are_filled_by_several_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "PARALLEL_BYTES", 64)
    monkeypatch.setattr(memory, "n_cores", lambda: 3)
    a = filled(1001, np.int64, 7)  # three unequal parts
    np.testing.assert_array_equal(a, np.full(1001, 7, np.int64))
    b = filled(10, np.float64, 0.5)
    np.testing.assert_array_equal(b, np.full(10, 0.5))


def test_negative_length_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 0"):
        filled(-1, np.int32)
