"""Issue 23 (a user's first hour), the Python API's items. Each test's docstring names its item."""

from __future__ import annotations

import ast
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.errors import MultipleRoundsWarning
from heroeval.estimators import table as results_module  # METHOD_TITLES lives with the table model
from heroeval.simulate import shift_dgp

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sim() -> tuple[he.AnnotationSet, he.AnnotationSet, he.Calibration]:
    d = shift_dgp(3, alpha=np.full(5, 0.85), beta=np.full(5, 0.85), N=800, n=300)
    return d.history, d.current, he.calibrate(d.history)


def test_text_ids_written_as_floats_are_integers(tmp_path: Path) -> None:
    """Item 2: a text id column of '8155.0' (pandas' float ids) matches integer ids; mixed columns are kept."""
    pd.DataFrame({"item_id": [1, 1, 2, 2], "labeler_id": ["a", "b", "a", "b"], "label": [1, 1, 0, 0]}).to_csv(
        tmp_path / "a.csv", index=False)
    pd.DataFrame({"item_id": ["1.0", "2.0"], "gold": [1, 0]}).to_csv(tmp_path / "g.csv", index=False)
    ds = he.read_annotations(tmp_path / "a.csv", gold=tmp_path / "g.csv")
    assert ds.n_gold == 2
    mixed = pd.DataFrame({"item_id": ["1.0", "x"], "labeler_id": ["a", "a"], "label": [1, 0]})
    assert sorted(he.read_annotations(mixed).item_ids) == ["1.0", "x"]


def test_estimate_warns_of_drift_like_the_cli() -> None:
    """Item 3: he.estimate runs the drift check (as hero estimate does) and keeps it on the collection."""
    d = shift_dgp(3, alpha=np.full(5, 0.85), beta=np.full(5, 0.85), current_beta=np.array([0.85] * 4 + [0.3]),
                  N=1500, n=600)
    cal = he.calibrate(d.history)
    with pytest.warns(he.TransportabilityWarning, match="labeler drift"):
        res = he.estimate(d.current, cal, method=["hero1", "majority_vote"])
    assert isinstance(res, he.EstimateCollection) and res.drift is not None and res.drift.flagged
    with warnings.catch_warnings():
        warnings.simplefilter("error", he.TransportabilityWarning)
        he.estimate(d.current, cal, method="majority_vote")  # no calibrated method: no check
        he.estimate(d.current, cal, method="hero1", drift_check=False)


def test_encoding_parameter(tmp_path: Path) -> None:
    """Item 6: read_annotations(encoding=) reads a cp1252 file; without it the error names the line and the fix."""
    pd.DataFrame({"item_id": [1, 2], "labeler_id": ["a", "Renée"], "label": [1, 0]}).to_csv(
        tmp_path / "w.csv", index=False, encoding="cp1252")
    with pytest.raises(he.DataError, match=r"line 3 .*encoding='cp1252'"):
        he.read_annotations(tmp_path / "w.csv")
    assert "Renée" in he.read_annotations(tmp_path / "w.csv", encoding="cp1252").labeler_ids


def test_results_in_a_notebook(sim: tuple[he.AnnotationSet, he.AnnotationSet, he.Calibration]) -> None:
    """Item 9: reprs show SE and CI (and p); to_frame() and _repr_html_ everywhere; labeler_frame; summary()."""
    hist, cur, cal = sim
    r = he.hero1(cur, cal)
    assert "standard_error=" in repr(r) and "ci_95=[" in repr(r)
    f = r.to_frame()
    assert isinstance(f, pd.DataFrame) and f.loc["hero1", "estimate"] == r.estimate
    assert f.loc["hero1", "standard_error"] == pytest.approx(r.standard_error)
    assert "<table" in r._repr_html_()
    col = he.estimate(cur, cal, method="all", history=hist, recommend=True, drift_check=False)
    cf = col.to_frame()
    assert next(iter(cf.index)) == "recommended" and set(col) <= set(cf.index)
    assert "<table" in col._repr_html_() and "Recommended" in repr(col)
    c = he.compare(cur, cur.take_items(range(100)), cal, method="hero1")
    assert "p_value=" in repr(c) and "standard_error=" in repr(c) and "ci_95=" in repr(c)
    assert c.to_frame().loc["hero1", "difference"] == c.estimate and "<table" in c._repr_html_()
    cc = he.compare(cur, cur.take_items(range(100)), cal, method=["hero1", "majority_vote"])
    assert "A - B" in cc.summary() and "majority_vote" in cc.to_frame().index and "<table" in cc._repr_html_()
    br = he.bootstrap(cur, cal, n_resamples=10, rng=1)["hero1"]
    assert "standard_error=" in repr(br) and "percentile_ci_95=" in repr(br)
    assert "<table" in br._repr_html_() and br.to_frame().shape[0] == 1
    lf = cal.labeler_frame()
    assert list(lf.index) == list(cal.labeler_ids) and {"sensitivity", "specificity", "at_bound"} <= set(lf.columns)
    assert isinstance(cal.labeler_table(), list)  # kept as it was


def test_label_map_passes_binary_values_through() -> None:
    """Item 11: a partial label_map recodes what it names and passes 0/1 through; a multi-class value hints."""
    df = pd.DataFrame({"item_id": [1, 1, 2, 2], "labeler_id": ["a", "b", "a", "b"], "label": [1, 2, 0, 1]})
    ds = he.read_annotations(df, label_map={"2": None})
    assert ds.n_annotations == 3
    with pytest.raises(he.DataError, match=r"label_map=.*multiclass") as e:
        he.read_annotations(df)
    assert "not supported yet" not in str(e.value)


def test_delimiters_and_json_arrays(tmp_path: Path) -> None:
    """Item 14: a tab- or semicolon-separated .csv and a JSON array file are read."""
    df = pd.DataFrame({"task": [1, 1, 2], "worker": ["a", "b", "a"], "label": [1, 0, 1]})
    for sep, name in (("\t", "t.csv"), (";", "s.csv")):
        df.to_csv(tmp_path / name, sep=sep, index=False)
        assert he.read_annotations(tmp_path / name).n_annotations == 3
    df.to_json(tmp_path / "a.json", orient="records")
    assert he.read_annotations(tmp_path / "a.json").n_annotations == 3
    df.rename(columns={"task": "x"}).to_csv(tmp_path / "bad.csv", sep="|", index=False)
    with pytest.raises(he.DataError, match="item_col="):
        he.read_annotations(tmp_path / "bad.csv")


def test_multi_round_current_warns(sim: tuple[he.AnnotationSet, he.AnnotationSet, he.Calibration]) -> None:
    """Item 22: a current round whose round column names several rounds warns that they are pooled."""
    _, cur, cal = sim
    items = cur.item_ids
    two = he.AnnotationSet.from_arrays(cur.item_ids[cur.annotation_item], cur.labeler_ids[cur.labeler], cur.label,
                                       item_round=(items, np.where(np.arange(len(items)) % 2 == 0, "r1", "r2")))
    with pytest.warns(MultipleRoundsWarning, match=r"2 rounds \('r1', 'r2'\)"):
        he.estimate(two, cal, method="hero1", drift_check=False)


def test_review_items() -> None:
    """Item 23: he.checks.run_checks works after `import heroeval`; METHOD_TITLES has no repeated key;
    the EstimateResult docstring says the SE is NaN (not None); the README's layout names every subpackage."""
    assert callable(he.checks.run_checks)
    tree = ast.parse(Path(results_module.__file__).read_text())
    titles = next(n.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                  and any(getattr(t, "id", None) == "METHOD_TITLES" for t in n.targets))
    assert isinstance(titles, ast.Dict)
    keys = [k.value for k in titles.keys if isinstance(k, ast.Constant)]
    assert len(keys) == len(set(keys))
    doc = he.EstimateResult.__doc__ or ""
    assert "None until then" not in doc and "NaN" in doc
    assert math.isnan(he.EstimateResult("hero1", 0.5, 1, 1, 1).standard_error)
    layout = (ROOT / "README.md").read_text().split("## Layout")[1]
    for sub in sorted(p.name for p in (ROOT / "src" / "heroeval").iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert f"  {sub}/" in layout, sub
    assert "data.py" not in layout and "_render.py" not in layout


def test_methods_doc_knows_new_labelers_are_estimated() -> None:
    """Item 20: docs/methods.md no longer calls estimating new labelers a planned extension."""
    text = (ROOT / "docs" / "methods.md").read_text()
    assert "planned extension" not in text and 'new_labelers="estimate"' in text
