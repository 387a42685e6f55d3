"""A small data set whose labeler, item, round and file names try to inject HTML or script."""

from __future__ import annotations

from dataclasses import dataclass

import heroeval as he
from tests.conftest import simulate

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
FLAG_SCRIPT = "<script>window.__pwned = 1</script>"
FLAG_IMG = "'><img src=x onerror=\"window.__pwned = 2\">"
CLOSER = "</script><script>window.__pwned = 3</script>"
MATH = "$\\frac{1}{0}$ & <b>bold</b>"
HOSTILE = (SCRIPT, IMG, FLAG_SCRIPT, FLAG_IMG, CLOSER, MATH)


@dataclass
class Hostile:
    history: he.AnnotationSet
    current: he.AnnotationSet
    calibration: he.Calibration
    estimates: he.EstimateCollection


def _rename(ds: he.AnnotationSet, names: dict[str, str], item_prefix: str, name: str,
            gold: bool) -> he.AnnotationSet:
    items = ds.item_ids[ds.annotation_item]
    labs = [names.get(x, x) for x in ds.labeler_ids[ds.labeler]]
    g = ds.gold >= 0
    return he.AnnotationSet.from_arrays(
        [item_prefix + str(i) for i in items], labs, ds.label,
        gold=([item_prefix + str(i) for i in ds.item_ids[g]], ds.gold[g]) if gold else None,
        covariates=([item_prefix + str(i) for i in ds.item_ids], ds.covariates),
        covariate_names=["x"], name=name,
    )


def hostile() -> Hostile:
    """Six labelers named by HOSTILE, items prefixed by a script tag, a hostile round name."""
    s = simulate(7, J=6, N=300, n=120)
    names = {f"L{j:02d}": HOSTILE[j] for j in range(6)}
    h = _rename(s.history, names, SCRIPT, "history", True)
    c = _rename(s.current, names, IMG, CLOSER, False)
    cal = he.calibrate(h)
    res = he.estimate(c, cal, method="all", history=h)
    assert isinstance(res, he.EstimateCollection)
    return Hostile(h, c, cal, res)
