"""Labeler drift check on sparse crowds: small counts, boundary fits, new workers, and the overall level (issue 23)."""

from __future__ import annotations

import itertools
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import beta as beta_dist

import heroeval as he
from heroeval.checks.drift import check_drift, exact_test, reestimate_without, tarone_adjust, tarone_family_size
from heroeval.errors import UnknownLabelerError
from heroeval.workflows.benchmark import load_folder, make_split

SHARED = Path("/work/shared/data")


def sparse_crowd(seed: int, *, J: int = 120, N: int = 2000, n: int = 600, per_item: int = 4,
                 history_rate: float = 0.4, current_rate: float = 0.3) -> tuple[he.AnnotationSet, he.AnnotationSet]:
    """A crowd with a Zipf workload: a few busy workers, most with a handful of labels; 10 % gold in the history.

    Labels are independent given the gold label; nothing drifts (only the rate moves, which HERO allows).
    """
    g = np.random.default_rng([seed, 23])
    w = 1.0 / np.arange(1, J + 1) ** 1.3
    w /= w.sum()
    alpha = g.uniform(0.65, 0.95, J)
    beta = g.uniform(0.65, 0.95, J)
    ids = np.array([f"w{j:03d}" for j in range(J)])

    def draw(n_items: int, rate: float, prefix: str) -> tuple[list[str], list[str], list[int], np.ndarray]:
        y = (g.random(n_items) < rate).astype(int)
        it: list[str] = []
        lab: list[str] = []
        z: list[int] = []
        for i in range(n_items):
            who = g.choice(J, per_item, replace=False, p=w)
            p1 = np.where(y[i] == 1, alpha[who], 1 - beta[who])
            it += [f"{prefix}{i}"] * per_item
            lab += list(ids[who])
            z += list((g.random(per_item) < p1).astype(int))
        return it, lab, z, y

    hi, hl, hz, hy = draw(N, history_rate, "h")
    gold_items = g.choice(N, N // 10, replace=False)
    hist = he.AnnotationSet.from_arrays(hi, hl, hz, gold=([f"h{i}" for i in gold_items], hy[gold_items]),
                                        name="history")
    ci, cl, cz, _ = draw(n, current_rate, "c")
    return hist, he.AnnotationSet.from_arrays(ci, cl, cz, name="current")


# ------------------------------------------------------------------ exact test against plain computations


def _enumerate(s: int, m: int, pi: float) -> tuple[float, float]:
    """Two-sided p-value and smallest attainable one by summing over all 2^m label vectors."""
    prob = {k: 0.0 for k in range(m + 1)}
    for v in itertools.product((0, 1), repeat=m):
        prob[sum(v)] += math.prod(pi if x else 1 - pi for x in v)
    lo = sum(prob[k] for k in range(s + 1))
    hi = sum(prob[k] for k in range(s, m + 1))
    return min(1.0, 2 * min(lo, hi)), min(1.0, 2 * min(prob[0], prob[m]))


def _mixture(s: int, m: int, pi: float, v: float) -> float:
    """Two-sided p-value when the rate is Beta(mean pi, variance v): integrate the binomial over the beta density."""
    ab = pi * (1 - pi) / v - 1
    a, b = pi * ab, (1 - pi) * ab

    def pk(k: int) -> float:
        f = lambda t: math.comb(m, k) * t**k * (1 - t) ** (m - k) * beta_dist.pdf(t, a, b)  # noqa: E731
        return float(integrate.quad(f, 0, 1, limit=200)[0])

    probs = [pk(k) for k in range(m + 1)]
    return min(1.0, 2 * min(sum(probs[: s + 1]), sum(probs[s:])))


@pytest.mark.parametrize(("s", "m", "pi"), [(0, 1, 0.3), (1, 1, 0.3), (0, 5, 0.46), (5, 5, 0.46), (2, 6, 0.12),
                                            (7, 8, 0.5), (3, 7, 0.9)])
def test_exact_test_matches_enumeration(s: int, m: int, pi: float) -> None:
    p, p_min = exact_test(s, m, pi)
    p_ref, min_ref = _enumerate(s, m, pi)
    assert p == pytest.approx(p_ref, rel=1e-10, abs=1e-14)
    assert p_min == pytest.approx(min_ref, rel=1e-10, abs=1e-14)


@pytest.mark.parametrize(("s", "m", "pi", "v"), [(0, 5, 0.4, 0.01), (4, 6, 0.2, 0.02), (2, 3, 0.5, 0.05)])
def test_beta_binomial_matches_integration(s: int, m: int, pi: float, v: float) -> None:
    extra = v * (m - 1) / m  # exact_test takes the extra variance of s / m
    p, _ = exact_test(s, m, pi, extra)
    assert p == pytest.approx(_mixture(s, m, pi, v), rel=1e-6)


def test_tarone_by_hand() -> None:
    # two tests can reach anything; three cannot go below 0.5: k = 1 counts 2 > 1, k = 2 counts 2 <= 2
    assert tarone_family_size([0.0, 0.0, 0.5, 0.9, 0.9], 0.05) == 2
    # everything attainable: plain Bonferroni count
    assert tarone_family_size([0.0] * 7, 0.05) == 7
    # single-label labelers (attainable p = 2 min(pi, 1 - pi) ~ 0.9) never enter the family
    assert tarone_family_size([0.0, 0.9, 0.92, 0.95], 0.05) == 1
    holm = tarone_adjust([0.01, 0.04, 0.03, 0.9], [0.0, 0.0, 0.0, 0.9], "holm", 0.05)
    assert np.allclose(holm, [0.03, 0.06, 0.06, 1.0])
    bh = tarone_adjust([0.01, 0.04, 0.03, 0.9], [0.0, 0.0, 0.0, 0.9], "bh", 0.05)
    assert np.allclose(bh, [0.03, 0.04, 0.04, 1.0])


# ------------------------------------------------------------------ sparse crowds (fail on the old code)


def test_one_label_labeler_is_not_flagged() -> None:
    """The old check gave a labeler with one label z ~ 30 (the empirical variance of one label is 0)."""
    hist, cur = sparse_crowd(1)
    cal = he.calibrate(hist)
    chk = check_drift(cur, cal, warn=False)
    few = np.flatnonzero(chk.n_annotations <= 5)
    assert few.size >= 10
    for k in few:
        assert chk.test[k] == "exact" and chk.p_value[k] >= chk.min_attainable_p[k] - 1e-12
        assert chk.labeler_ids[k] not in chk.flagged
    one = np.flatnonzero(chk.n_annotations == 1)
    assert one.size
    for k in one:  # one label: p is 1 or 2 min(pi, 1 - pi) (binomial), never small
        assert chk.p_value[k] >= min(1.0, 2 * min(chk.expected[k], 1 - chk.expected[k])) - 1e-9
        assert abs(chk.z[k]) < 5
    assert not chk.drift_detected


def test_boundary_fitted_labeler_is_guarded() -> None:
    """A labeler fitted at sensitivity 0 and specificity 1 (always says 0) from 6 history labels, who then says 1
    twice: the calibration's rate is 1e-9, the old check's p-value about 1e-18."""
    hist, cur = sparse_crowd(2, J=30)
    gold_items = hist.item_ids[hist.gold >= 0]
    y = hist.gold[hist.gold >= 0]
    pos, neg = gold_items[y == 1][:2], gold_items[y == 0][:4]
    h2 = he.AnnotationSet.from_arrays(
        np.r_[hist.item_ids[hist.annotation_item], pos, neg], np.r_[hist.labeler_ids[hist.labeler], ["X"] * 6],
        np.r_[hist.label, [0] * 6], gold=(gold_items, y), name="history")
    cal = he.calibrate(h2)
    j = cal.labeler_ids.index("X")
    assert cal.alpha[j] < 1e-6 and cal.beta[j] > 1 - 1e-6 and "X" in cal.labelers_at_bound
    c_items = cur.item_ids[cur.annotation_item][:2]
    c2 = he.AnnotationSet.from_arrays(np.r_[cur.item_ids[cur.annotation_item], c_items],
                                      np.r_[cur.labeler_ids[cur.labeler], ["X", "X"]], np.r_[cur.label, [1, 1]])
    chk = check_drift(c2, cal, warn=False)
    k = chk.labeler_ids.index("X")
    assert "X" in chk.boundary and chk.test[k] == "exact"
    assert 0.01 < chk.expected[k] < 0.5  # Jeffreys posterior means, not 1e-9
    assert chk.p_value[k] > 1e-3 and "X" not in chk.flagged


def test_unknown_labeler_is_excluded_with_a_note() -> None:
    """Issue item 25: a crowd round with one new worker (3 labels) must not stop the check or the re-estimate."""
    hist, cur = sparse_crowd(3, J=40)
    cal = he.calibrate(hist)
    items = cur.item_ids[cur.annotation_item][:3]
    c2 = he.AnnotationSet.from_arrays(np.r_[cur.item_ids[cur.annotation_item], items],
                                      np.r_[cur.labeler_ids[cur.labeler], ["NEW"] * 3], np.r_[cur.label, [1, 0, 1]],
                                      name="round")
    chk = check_drift(c2, cal, warn=False)
    assert chk.excluded == ("NEW",) and "NEW" not in chk.labeler_ids
    assert any("unknown to the calibration" in x and "3 annotations" in x for x in chk.notes)
    ref = check_drift(cur, cal, warn=False)
    assert chk.mu == pytest.approx(ref.mu) and chk.overall_p == pytest.approx(ref.overall_p)
    # re-estimating without some labelers leaves the new one out too (it stopped with UnknownLabelerError)
    busiest = [str(chk.labeler_ids[int(np.argmax(chk.n_annotations))])]
    res = reestimate_without(c2, cal, busiest)
    assert res.details["dropped_labelers"] == busiest and res.details["excluded_labelers"] == ["NEW"]
    with pytest.raises(UnknownLabelerError, match="NEW"):
        check_drift(c2, cal, warn=False, new_labelers="error")
    with pytest.raises(UnknownLabelerError, match="NEW"):
        reestimate_without(c2, cal, busiest, new_labelers="error")


@pytest.mark.skipif(not (SHARED / "sentiment_polarity").is_dir(), reason="shared data folder not available")
def test_random_split_of_sentiment_polarity_has_no_alarm() -> None:
    """The reported case: a random split (no drift by construction); the old check gave chi2 = 734 on 169 df,
    p = 2e-71, and flagged 19 labelers with 1-5 labels."""
    data = load_folder(SHARED / "sentiment_polarity", text_components=0)
    sp = make_split(data, 1, 0.10, 1000, "none", 2026)
    cal = he.calibrate(sp.history, checks=False)
    chk = check_drift(sp.current, cal, warn=False)
    assert chk.flagged == () and chk.overall_p > 0.05
    assert np.all(np.abs(chk.z[np.isfinite(chk.z)]) < 4)


@pytest.mark.slow
def test_size_on_a_sparse_simulated_crowd() -> None:
    """No drift, 120 workers with a Zipf workload (most with 1-10 current labels), the rate moving from 0.4 to 0.3.
    Over 100 fixed seeds the overall test and the family-wise flag rate at 0.05 must each be <= 0.10 (Monte-Carlo
    SE at 0.05: 0.022) and >= 0 trivially; the per-labeler z statistics must have SD in [0.8, 1.2]."""
    overall = flags = 0
    zs: list[float] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", he.HeroEvalWarning)
        for s in range(100):
            hist, cur = sparse_crowd(100 + s)
            chk = check_drift(cur, he.calibrate(hist), warn=False)
            overall += chk.overall_p < 0.05
            flags += bool(chk.flagged)
            zs.extend(chk.z[np.array(chk.test) == "z"])
    assert overall / 100 <= 0.10, overall
    assert flags / 100 <= 0.10, flags
    assert 0.8 < float(np.std(zs)) < 1.2
