"""``dumps_json``: the calibration file's writer (long lists of numbers on one line, same parsed value)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from heroeval.core.jsonfile import INLINE_MIN, dumps_json
from heroeval.simulate import paper_dgp
from heroeval.stage_a.calibration import load_calibration
from heroeval.workflows.api import calibrate


def test_same_value_as_plain_json_and_long_lists_inline() -> None:
    rng = np.random.default_rng(0)
    long = rng.normal(size=INLINE_MIN + 3).tolist()
    obj = {"a": 1, "b": [1.5, 2], "long": long, "nested": [{"x": long, "s": "text"}], "ints": list(range(40)),
           "mixed": [1.0] * INLINE_MIN + ["s"], "tiny": 5e-324, "neg": -0.0}
    text = dumps_json(obj)
    assert json.loads(text) == json.loads(json.dumps(obj, indent=1))
    assert json.dumps(long) in text  # one line, the C encoder's spelling
    assert '"mixed": [\n' in text  # a list that is not all numbers keeps the indented layout
    assert '"b": [\n' in text  # so does a short one
    assert math.copysign(1.0, json.loads(text)["neg"]) == -1.0


def test_strings_that_look_like_placeholders_are_written_plainly() -> None:
    obj = {"id": "\x000\x00", "\x001\x00": [0.5] * INLINE_MIN}
    assert json.loads(dumps_json(obj)) == obj
    assert dumps_json(obj) == json.dumps(obj, indent=1)


def test_non_finite_numbers_are_refused_as_before() -> None:
    with pytest.raises(ValueError):
        dumps_json({"v": [float("nan")] * INLINE_MIN})
    with pytest.raises(ValueError):
        dumps_json({"v": float("inf")})


def test_a_calibration_with_checks_round_trips(tmp_path) -> None:
    cal = calibrate(paper_dgp(0, rho=0.3).history, checks=True)
    p = tmp_path / "c.json"
    cal.save(p)
    text = p.read_text()
    assert json.loads(text) == json.loads(json.dumps(cal.to_dict(), indent=1))
    back = load_calibration(p)
    assert back.checks is not None and cal.checks is not None
    assert back.checks.items.keys() == cal.checks.items.keys()
    for k, v in cal.checks.items.items():
        np.testing.assert_allclose(back.checks.items[k], v, atol=1e-10)
    assert len(text.splitlines()) < 2_000  # the per-item arrays are not written one number per line
