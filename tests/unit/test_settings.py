"""Stage A's EM settings object: its rules, its file form, and the one key list every layer uses."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

import heroeval as he
from heroeval.errors import HeroEvalError
from heroeval.stage_a.settings import EM_SETTING_KEYS, EMSettings, check_em_settings, check_shrink, em_settings_of
from heroeval.workflows.options import CALIBRATE_DASK_DEFAULTS, CALIBRATE_DEFAULTS

SRC = Path(he.__file__).parent


def test_defaults_match_calibrate() -> None:
    for k, v in EMSettings().to_dict().items():
        assert CALIBRATE_DEFAULTS[k] == v, k
        assert CALIBRATE_DASK_DEFAULTS[k] == v, k


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"tol": 0}, "tol must be a positive number, got 0"),
    ({"tol": float("nan")}, "tol must be a positive number, got nan"),
    ({"max_iter": 0}, "max_iter must be a positive integer, got 0"),
    ({"max_iter": 2.5}, "max_iter must be a positive integer, got 2.5"),
    ({"criterion": "lik"}, "criterion must be 'parameters' or 'loglik', got 'lik'"),
    ({"pseudo_count": -1}, "pseudo_count must be a non-negative number, got -1"),
    ({"shrink": "js"}, "shrink must be 'none' or 'eb' (empirical Bayes), got 'js'"),
])
def test_each_rule_names_the_parameter(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(HeroEvalError, match=re.escape(message)):
        EMSettings(**kwargs)  # type: ignore[arg-type]
    # the one-by-one checker and the public function give the same message
    full = {**EMSettings().to_dict(), **kwargs}
    with pytest.raises(HeroEvalError, match=re.escape(message.split(", got")[0])):
        check_em_settings(full["tol"], full["max_iter"], full["criterion"], full["pseudo_count"], full["shrink"])
    hist = he.AnnotationSet.from_arrays([1, 1, 2, 2], ["a", "b", "a", "b"], [1, 1, 0, 0], gold=([1, 2], [1, 0]))
    with pytest.raises(HeroEvalError, match=re.escape(message.split(", got")[0])):
        he.calibrate(hist, **kwargs)  # type: ignore[arg-type]


def test_round_trip_and_other_keys_ignored() -> None:
    s = EMSettings(tol=1e-6, max_iter=50, criterion="loglik", accelerate=False, pseudo_count=1, shrink="eb")
    d = s.to_dict()
    assert list(d) == list(EM_SETTING_KEYS)
    assert isinstance(d["pseudo_count"], float)
    assert EMSettings.from_dict(json.loads(json.dumps({**d, "variance": "model", "engine": "numba"}))) == s
    assert EMSettings.from_dict({}) == EMSettings()
    assert em_settings_of({"tol": 1e-3, "seed": 0}) == {"tol": 1e-3}
    assert check_shrink("eb") == "eb"


def test_a_calibrations_settings_hold_the_keys_in_order() -> None:
    hist = he.AnnotationSet.from_arrays([1, 1, 2, 2, 3, 3], ["a", "b", "a", "b", "a", "b"], [1, 1, 0, 1, 0, 0],
                                        gold=([1, 3], [1, 0]))
    cal = he.calibrate(hist, pseudo_count=0.5)
    assert [k for k in cal.settings if k in EM_SETTING_KEYS] == list(EM_SETTING_KEYS)
    assert EMSettings.from_dict(cal.settings) == EMSettings(pseudo_count=0.5)


def _literal_key_lists(path: Path) -> list[int]:
    keys = set(EM_SETTING_KEYS)
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            names = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            if len(names & keys) >= 4:
                out.append(node.lineno)
    return out


def test_the_key_list_is_written_nowhere_else() -> None:
    """The EM settings' names are typed out by hand in no module of the package (they are the dataclass's fields)."""
    found = {str(p.relative_to(SRC)): lines for p in SRC.rglob("*.py") if (lines := _literal_key_lists(p))}
    assert found == {}
