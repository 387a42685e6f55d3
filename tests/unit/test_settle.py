"""An unreliable recommendation says how many expert labels of this round would settle it (issue #39, item 3).

Checked against the closed form of the gold-only count (``k = S^2 / ((h/z)^2 + S^2/n)``, ``S^2 = mu (1 - mu)``,
written here independently of heroeval.inference.gold_plan), on a simulated history whose rounds differ in
content (the past-round check makes the round unreliable), and on the edge cases that fall back to the plain
sentence.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import replace

import pytest
from scipy.stats import norm

import heroeval as he
from heroeval.choice.auto import AutoRule, recommend
from heroeval.choice.settle import settle_sentence

from .test_past_rounds import rounds_history


def _gold_only(mu: float, h: float, n: int) -> int:
    s2 = mu * (1 - mu)
    k = s2 / ((h / float(norm.ppf(0.975))) ** 2 + s2 / n)
    return min(math.ceil(k), n)


@pytest.fixture(scope="module")
def unreliable() -> tuple[he.AnnotationSet, he.Calibration, he.Recommendation]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hist, cur, _ = rounds_history(11, n_rounds=4, shift_sd=1.5, rho=0.2)
        cal = he.calibrate(hist, checks=True)
        rec = recommend(cur, cal, rule=AutoRule(rounds_min=None))
    return cur, cal, rec


def test_unreliable_reason_counts_the_labels(unreliable: tuple[he.AnnotationSet, he.Calibration, he.Recommendation]
                                             ) -> None:
    cur, _cal, rec = unreliable
    assert rec.status == "unreliable"
    own = rec.results[(rec.method, rec.history_weight)]
    ci = own.confidence_interval(0.95)
    h = (ci.high - ci.low) / 2
    m = re.search(r"Labelling about (\d+) of this round's (\d+) items at random would settle it with the gold alone "
                  r"at ± ([0-9.]+) \(the chosen method's own half-width\); with the labelers' labels as the predictor "
                  r"\(hero select, HERO-PPI\) about (\d+) if their model held", rec.reason)
    assert m is not None, rec.reason
    gold, n, shown, ppi = int(m[1]), int(m[2]), float(m[3]), int(m[4])
    assert n == cur.n_items
    assert shown == pytest.approx(h, rel=1e-2)
    assert gold == _gold_only(min(max(own.estimate, 0.02), 0.98), h, n)
    # the labels as a predictor can only help (the model figure is at most the gold-only bound)
    assert 1 <= ppi <= gold < n


def test_edge_cases_fall_back_to_the_plain_sentence(
        unreliable: tuple[he.AnnotationSet, he.Calibration, he.Recommendation]) -> None:
    cur, cal, rec = unreliable
    own = rec.results[(rec.method, rec.history_weight)]
    plain = "Label some of this round's items (hero select) to pin it down"
    assert settle_sentence(cur.take_items([0]), cal, own) == plain  # a round of one item: nothing to plan
    assert settle_sentence(cur, cal, replace(own, estimate=math.nan)) == plain


def test_a_tighter_target_needs_more_labels() -> None:
    """The count grows as the chosen method's own interval narrows, and reaches the whole round for a tiny one."""
    n = 250
    counts = [_gold_only(0.3, h, n) for h in (0.2, 0.1, 0.05, 0.01, 1e-4)]
    assert counts == sorted(counts) and counts[-1] == n
