"""The simulators' keyword options (issue #37), declared once as TypedDicts (heroeval.core.options): every
declared name has its default, passing every default explicitly draws the same data, a keyword still has its
effect, and an unknown keyword is a TypeError naming the function and the closest name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest

from heroeval.core.options import option_names
from heroeval.ingest.annotations import AnnotationSet
from heroeval.multiclass.simulate import ROUNDS_DEFAULTS, RoundsOptions, SimulatedRounds, simulate_rounds
from heroeval.simulate import (
    DEPENDENT_DEFAULTS,
    PANEL_DEFAULTS,
    SAMPLE_DEFAULTS,
    SHIFT_DEFAULTS,
    DependentOptions,
    PanelOptions,
    PaperData,
    SampleOptions,
    ShiftData,
    ShiftOptions,
    dependent_dgp,
    paper_dgp,
    shift_dgp,
)

A = np.array([0.85, 0.8, 0.9, 0.75, 0.7])
B = np.array([0.8, 0.7, 0.9, 0.75, 0.6])

PAIRS = [
    (SampleOptions, SAMPLE_DEFAULTS), (PanelOptions, PANEL_DEFAULTS), (DependentOptions, DEPENDENT_DEFAULTS),
    (ShiftOptions, SHIFT_DEFAULTS), (RoundsOptions, ROUNDS_DEFAULTS),
]


@pytest.mark.parametrize(("declared", "defaults"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_every_declared_option_has_one_default(declared: type, defaults: Mapping[str, Any]) -> None:
    assert option_names(declared) == tuple(defaults)


def test_the_defaults_are_the_former_signatures() -> None:
    """A frozen copy of the keyword defaults the four functions had as named parameters."""
    assert dict(PANEL_DEFAULTS) == {"n": 300, "N": 800, "J": 10, "rho": 0.10, "k": 12.0, "mu_alpha": 0.85,
                                    "mu_beta": 0.55, "b0": -0.2, "b1": 3.0, "labels_per_item": None}
    assert dict(DEPENDENT_DEFAULTS) == {**PANEL_DEFAULTS, "mu_alpha": 0.90, "mu_beta": 0.80, "hard_share": 0.2,
                                        "hard_fooled": 0.7, "decoy": 1, "current_b0": None}
    assert dict(SHIFT_DEFAULTS) == {"n": 300, "N": 800, "rho": 0.10, "labels_per_item": None,
                                    "history_rate": 0.4, "current_rate": 0.3}
    assert dict(ROUNDS_DEFAULTS) == {"K": 5, "J": 10, "n_history": 800, "n_current": 300, "labels_per_item": 3,
                                     "rho": 0.10, "sharpness": (0.8, 2.0), "structure": "ordinal",
                                     "ordinal": True}


def _same_set(a: AnnotationSet, b: AnnotationSet) -> None:
    for f in ("item_ids", "labeler_ids", "item_ptr", "labeler", "label", "gold", "item_round"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    if a.covariates is None:
        assert b.covariates is None
    else:
        np.testing.assert_array_equal(a.covariates, b.covariates)
    assert a.name == b.name


def _same(a: PaperData | ShiftData | SimulatedRounds, b: PaperData | ShiftData | SimulatedRounds) -> None:
    assert type(a) is type(b)
    if isinstance(a, SimulatedRounds) and isinstance(b, SimulatedRounds):
        _same_set(a.history.annotations, b.history.annotations)
        _same_set(a.current.annotations, b.current.annotations)
        for f in ("confusion", "prevalence_current", "realised_current"):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
        assert (a.history.classes, a.history.ordinal) == (b.history.classes, b.history.ordinal)
        return
    assert isinstance(a, PaperData | ShiftData) and isinstance(b, PaperData | ShiftData)
    _same_set(a.history, b.history)
    _same_set(a.current, b.current)
    for f in ("alpha", "beta", "current_alpha", "current_beta", "mu0", "current_rate", "labeler_ids"):
        if hasattr(a, f):
            np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)


CALLS: dict[str, tuple[Callable[..., Any], Mapping[str, Any], dict[str, Any]]] = {
    # name: (function, its defaults, the named arguments of the call)
    "paper_dgp": (paper_dgp, PANEL_DEFAULTS, {}),
    "dependent_dgp": (dependent_dgp, DEPENDENT_DEFAULTS, {}),
    "shift_dgp": (shift_dgp, SHIFT_DEFAULTS, {"alpha": A, "beta": B}),
    "simulate_rounds": (simulate_rounds, ROUNDS_DEFAULTS, {}),
}


def _rng(name: str, seed: int) -> Any:
    return np.random.default_rng(seed) if name == "simulate_rounds" else seed


@pytest.mark.parametrize("name", list(CALLS))
def test_every_default_passed_explicitly_draws_the_same_data(name: str) -> None:
    fn, defaults, named = CALLS[name]
    _same(fn(_rng(name, 3), **named), fn(_rng(name, 3), **named, **dict(defaults)))


@pytest.mark.parametrize("name", list(CALLS))
def test_unknown_keyword_names_the_function_and_the_closest_name(name: str) -> None:
    fn, _, named = CALLS[name]
    with pytest.raises(TypeError, match=rf"{name}\(\) got an unexpected keyword argument 'rhoo'; did you mean 'rho'"):
        fn(_rng(name, 0), **named, rhoo=0.1)


def test_paper_dgp_keywords_take_effect() -> None:
    d = paper_dgp(0, n=40, N=60, J=4, labels_per_item=2, rho=1.0)
    assert (d.current.n_items, d.history.n_items, d.history.n_labelers, d.alpha.size) == (40, 60, 4, 4)
    assert d.history.n_annotations == 2 * 60 and d.history.n_gold == 60
    # with the labelers' rates fixed, the curve (b0, b1) moves the rate and mu0
    lo = paper_dgp(1, alpha=A, beta=B, J=5, b0=-3.0)
    hi = paper_dgp(1, alpha=A, beta=B, J=5, b0=2.0, b1=1.0)
    assert lo.mu0 < 0.3 < 0.7 < hi.mu0
    np.testing.assert_array_equal(lo.alpha, A)
    # the labelers' means and concentration: a near-degenerate Beta draws near the means
    tight = paper_dgp(2, k=1e9, mu_alpha=0.7, mu_beta=0.6)
    np.testing.assert_allclose(tight.alpha, 0.7, atol=1e-3)
    np.testing.assert_allclose(tight.beta, 0.6, atol=1e-3)


def test_dependent_dgp_keywords_take_effect() -> None:
    plain = paper_dgp(4, alpha=A, beta=B, J=5)
    none_hard = dependent_dgp(4, alpha=A, beta=B, J=5, hard_share=0.0)
    # no hard item: the marginal rates are the labelers' own
    np.testing.assert_array_equal(none_hard.alpha, A)
    np.testing.assert_array_equal(none_hard.beta, B)
    assert plain.mu0 == none_hard.mu0
    d = dependent_dgp(4, alpha=A, beta=B, J=5, hard_share=0.5, hard_fooled=0.4, decoy=0)
    np.testing.assert_allclose(d.alpha, (1 - 0.2) * A)
    np.testing.assert_allclose(d.beta, (1 - 0.2) * B + 0.2)
    shifted = dependent_dgp(4, current_b0=1.0, n=50, N=70)
    assert shifted.mu0 > dependent_dgp(4, n=50, N=70).mu0
    assert (shifted.current.n_items, shifted.history.n_items) == (50, 70)


def test_shift_dgp_keywords_take_effect() -> None:
    d = shift_dgp(5, alpha=A, beta=B, n=30, N=50, rho=1.0, labels_per_item=2, history_rate=1.0,
                  current_rate=0.0)
    assert (d.current.n_items, d.history.n_items, d.history.n_gold) == (30, 50, 50)
    assert d.history.n_annotations == 2 * 50 and d.current_rate == 0.0
    assert set(d.history.gold.tolist()) == {1}


def test_simulate_rounds_keywords_take_effect() -> None:
    sim = simulate_rounds(np.random.default_rng(6), K=3, J=4, n_history=50, n_current=20, labels_per_item=2,
                          rho=1.0, ordinal=False, structure="full", sharpness=(1.0, 1.5))
    assert (sim.history.n_items, sim.current.n_items, sim.history.n_classes) == (50, 20, 3)
    assert sim.confusion.shape == (4, 3, 3) and not sim.history.ordinal
    assert sim.history.annotations.n_annotations == 2 * 50 and sim.history.annotations.n_gold == 50
    # the ordinal structure's rows are exp(-t |l - c|), normalised, with t drawn from sharpness
    ordinal = simulate_rounds(np.random.default_rng(6), K=3, J=4, n_history=50, n_current=20,
                              sharpness=(1.0, 1.5))
    row = ordinal.confusion[0, 0]
    assert 1.0 <= np.log(row[0] / row[1]) <= 1.5
