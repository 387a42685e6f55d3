"""Properties: renaming labelers or items and shuffling rows change no estimate."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import heroeval as he
from tests.conftest import simulate

_S = simulate(21, J=5, N=250, n=80)


def _frame(ds: he.AnnotationSet) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "item_id": ds.item_ids[ds.annotation_item].astype(str),
            "labeler_id": ds.labeler_ids[ds.labeler].astype(str),
            "label": ds.label.astype(int),
        }
    )


def _gold(ds: he.AnnotationSet) -> pd.DataFrame:
    g = ds.gold >= 0
    return pd.DataFrame({"item_id": ds.item_ids[g].astype(str), "gold": ds.gold[g].astype(int)})


def _cov(ds: he.AnnotationSet) -> pd.DataFrame:
    return pd.DataFrame({"item_id": ds.item_ids.astype(str), "x": np.asarray(ds.covariates)[:, 0]})


def _all(hist: pd.DataFrame, gold: pd.DataFrame, hcov: pd.DataFrame, cur: pd.DataFrame, ccov: pd.DataFrame) -> dict[str, float]:
    H = he.read_annotations(hist, gold=gold, covariates=hcov)
    C = he.read_annotations(cur, covariates=ccov)
    res = he.estimate(C, he.calibrate(H, tol=1e-11), method="all")
    assert isinstance(res, he.EstimateCollection)
    return {m: r.estimate for m, r in res.items()}


BASE = _all(_frame(_S.history), _gold(_S.history), _cov(_S.history), _frame(_S.current), _cov(_S.current))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), rename_items=st.booleans(), rename_labelers=st.booleans())
def test_relabel_and_shuffle_change_nothing(seed: int, rename_items: bool, rename_labelers: bool) -> None:
    rng = np.random.default_rng(seed)
    h, c = _frame(_S.history), _frame(_S.current)
    g, hc, cc = _gold(_S.history), _cov(_S.history), _cov(_S.current)
    if rename_labelers:
        names = sorted(set(h.labeler_id))
        new = dict(zip(names, [f"z{k}" for k in rng.permutation(len(names))], strict=True))
        h = h.assign(labeler_id=h.labeler_id.map(new))
        c = c.assign(labeler_id=c.labeler_id.map(new))
    if rename_items:
        ids = sorted(set(h.item_id) | set(c.item_id))
        new = dict(zip(ids, [f"item{k}" for k in rng.permutation(len(ids))], strict=True))
        h, c = h.assign(item_id=h.item_id.map(new)), c.assign(item_id=c.item_id.map(new))
        g, hc, cc = (t.assign(item_id=t.item_id.map(new)) for t in (g, hc, cc))
    h, c, g, hc, cc = (t.sample(frac=1.0, random_state=int(rng.integers(2**31))) for t in (h, c, g, hc, cc))
    got = _all(h, g, hc, c, cc)
    for m, v in BASE.items():
        assert abs(got[m] - v) < 1e-8, (m, got[m], v)
