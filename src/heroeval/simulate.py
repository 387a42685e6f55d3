"""The paper's data-generating process (Section 5), as a seeded function.

Every detail the paper leaves to its unavailable appendix is a parameter
with a documented default.

The simulators' optional keywords are declared once (:mod:`heroeval.core.options`), as ``TypedDict`` groups
with their defaults beside them: :class:`SampleOptions` (the sizes of the history and the current round, the
gold share, the labels per item), which :class:`PanelOptions` (the paper's panel of labelers and its rate
curve: :func:`paper_dgp`), :class:`DependentOptions` (its hard items: :func:`dependent_dgp`) and
:class:`ShiftOptions` (the two rounds' gold rates: :func:`shift_dgp`) extend. Callers keep writing
``paper_dgp(0, rho=0.3, labels_per_item=3)``; a misspelt keyword is a type error and a :class:`TypeError`
naming the closest name.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypedDict, Unpack

import numpy as np
from scipy import integrate
from scipy.special import expit

from heroeval.core.options import options_of
from heroeval.errors import HeroEvalError
from heroeval.ingest.annotations import AnnotationSet

__all__ = [
    "DEPENDENT_DEFAULTS",
    "PANEL_DEFAULTS",
    "SAMPLE_DEFAULTS",
    "SHIFT_DEFAULTS",
    "DependentOptions",
    "PanelOptions",
    "PaperData",
    "SampleOptions",
    "ShiftData",
    "ShiftOptions",
    "dependent_dgp",
    "paper_dgp",
    "paper_target",
    "shift_dgp",
]


class SampleOptions(TypedDict, total=False):
    """The sizes of a simulated history and current round, their gold share and labels per item (documented
    at :func:`paper_dgp` and :func:`shift_dgp`)."""

    n: int
    N: int
    rho: float
    labels_per_item: int | None


SAMPLE_DEFAULTS: Mapping[str, Any] = {"n": 300, "N": 800, "rho": 0.10, "labels_per_item": None}
"""The paper's sizes: 300 current items, 800 history items, gold on 10% of them, dense labels."""


class PanelOptions(SampleOptions, total=False):
    """:class:`SampleOptions` and the paper's labeler panel and rate curve (documented at
    :func:`paper_dgp`)."""

    J: int
    k: float
    mu_alpha: float
    mu_beta: float
    b0: float
    b1: float


PANEL_DEFAULTS: Mapping[str, Any] = {
    **SAMPLE_DEFAULTS, "J": 10, "k": 12.0, "mu_alpha": 0.85, "mu_beta": 0.55, "b0": -0.2, "b1": 3.0,
}
""":func:`paper_dgp`'s defaults (the paper's design)."""


class DependentOptions(PanelOptions, total=False):
    """:class:`PanelOptions` and the hard items of :func:`dependent_dgp` (documented there)."""

    hard_share: float
    hard_fooled: float
    decoy: int | None
    current_b0: float | None


DEPENDENT_DEFAULTS: Mapping[str, Any] = {
    **PANEL_DEFAULTS, "mu_alpha": 0.90, "mu_beta": 0.80,
    "hard_share": 0.2, "hard_fooled": 0.7, "decoy": 1, "current_b0": None,
}
""":func:`dependent_dgp`'s defaults: better labelers than :data:`PANEL_DEFAULTS`'s, and hard items."""


class ShiftOptions(SampleOptions, total=False):
    """:class:`SampleOptions` and the two rounds' gold rates of :func:`shift_dgp` (documented there)."""

    history_rate: float
    current_rate: float


SHIFT_DEFAULTS: Mapping[str, Any] = {**SAMPLE_DEFAULTS, "history_rate": 0.4, "current_rate": 0.3}
""":func:`shift_dgp`'s defaults."""


@dataclass(frozen=True)
class PaperData:
    """One replication: history (with gold on a fraction rho), current round, truths."""

    history: AnnotationSet
    current: AnnotationSet
    alpha: np.ndarray
    beta: np.ndarray
    mu0: float  # population target E[sigmoid(b0 + b1 X)]
    current_rate: float  # realised gold rate of the current items


@functools.lru_cache(maxsize=64)
def _target(b0: float, b1: float) -> float:
    return paper_target(b0, b1)


def paper_target(b0: float = -0.2, b1: float = 3.0) -> float:
    """mu_0 = E[sigmoid(b0 + b1 X)] for X ~ N(0, 1), by quadrature."""

    def f(x: float) -> float:
        return float(expit(b0 + b1 * x) * np.exp(-x * x / 2) / np.sqrt(2 * np.pi))

    return float(integrate.quad(f, -12, 12, epsabs=1e-13)[0])


@dataclass(frozen=True)
class _Design:
    """What one simulated round is drawn from (the paper's design, optionally with hard items)."""

    a: np.ndarray
    b: np.ndarray
    b0: float
    b1: float
    labels_per_item: int | None
    hard_share: float | None = None  # dependent_dgp's hard items; None: the paper's independent labels
    hard_fooled: float = 0.0
    decoy: int | None = None


def _draw_round(
    gen: np.random.Generator, d: _Design, m: int, rho: float | None, weights: np.ndarray | None = None
) -> tuple[AnnotationSet, np.ndarray]:
    """One round of m items: X ~ N(0, 1), Y ~ Bernoulli(sigmoid(b0 + b1 X)), labels, gold on a share rho."""
    J = d.a.size
    x = gen.standard_normal(m)
    y = (gen.random(m) < expit(d.b0 + d.b1 * x)).astype(np.int8)
    hard = gen.random(m) < d.hard_share if d.hard_share is not None else None
    if d.labels_per_item is None:
        lab = np.tile(np.arange(J), m)
        item = np.repeat(np.arange(m), J)
    else:
        keys = gen.random((m, J))
        if weights is not None:  # Gumbel top-k: weighted sampling without replacement
            with np.errstate(divide="ignore"):
                keys = -(np.log(weights) - np.log(-np.log(gen.random((m, J)))))
        lab = np.argsort(keys, axis=1)[:, : d.labels_per_item].ravel()
        item = np.repeat(np.arange(m), d.labels_per_item)
    pz = np.where(y[item] == 1, d.a[lab], 1 - d.b[lab])
    z = (gen.random(item.size) < pz).astype(np.int8)
    if hard is not None:
        fooled = hard[item] & (gen.random(item.size) < d.hard_fooled)
        z = np.where(fooled, 1 - y[item] if d.decoy is None else d.decoy, z).astype(np.int8)
    gold = None
    if rho is not None:
        g = gen.random(m) < rho
        if not g.any():
            g[gen.integers(m)] = True
        gold = (np.flatnonzero(g), y[g])
    ds = AnnotationSet.from_arrays(item, lab, z, gold=gold, covariates=(np.arange(m), x), covariate_names=["x"],
                                   name="history" if rho is not None else "current")
    return ds, y


def _labeler_panel(o: Mapping[str, Any], alpha: np.ndarray | None, beta: np.ndarray | None,
                   rng: np.random.Generator | int | None) -> tuple[np.random.Generator, np.ndarray, np.ndarray]:
    """A simulated panel's checks (``rho``, ``labels_per_item``), its generator, and the labelers' sensitivities
    and specificities: ``alpha`` and ``beta`` when given, else drawn from Beta(k mu, k (1 - mu)), in this order."""
    J: int = o["J"]
    rho: float = o["rho"]
    k: float = o["k"]
    labels_per_item: int | None = o["labels_per_item"]
    if not 0 < rho <= 1:
        raise HeroEvalError(f"rho must be in (0, 1], got {rho!r}")
    if labels_per_item is not None and not 1 <= labels_per_item <= J:
        raise HeroEvalError(f"labels_per_item must be in [1, J={J}], got {labels_per_item!r}")
    gen = np.random.default_rng(rng)
    mu_alpha: float = o["mu_alpha"]
    mu_beta: float = o["mu_beta"]
    a = gen.beta(k * mu_alpha, k * (1 - mu_alpha), J) if alpha is None else np.asarray(alpha, dtype=float)
    b = gen.beta(k * mu_beta, k * (1 - mu_beta), J) if beta is None else np.asarray(beta, dtype=float)
    return gen, a, b


def paper_dgp(
    rng: np.random.Generator | int | None = None,
    *,
    alpha: np.ndarray | None = None,
    beta: np.ndarray | None = None,
    current_labeler_weights: np.ndarray | None = None,
    **options: Unpack[PanelOptions],
) -> PaperData:
    """Draw one replication of the paper's simulation design.

    Parameters
    ----------
    rng : Generator, int or None
        Randomness (a seed or a Generator).
    n, N, J : int, default 300, 800, 10
        Current items, history items, labelers (paper: 300, 800, 10).
    rho : float, default 0.10
        Share of history items with gold (paper: 0.05 to 0.10).
    k : float, default 12.0
        Beta concentration of the labelers' parameters: alpha_j ~ Beta(k mu_alpha,
        k (1 - mu_alpha)), beta_j ~ Beta(k mu_beta, k (1 - mu_beta)); smaller is
        more heterogeneous (paper: five levels from 3 to 150).
    mu_alpha, mu_beta : float, default 0.85, 0.55
        Mean sensitivity and specificity of the labelers.
    b0, b1 : float, default -0.2, 3.0
        The rate curve: Y ~ Bernoulli(sigmoid(b0 + b1 X)), X ~ N(0, 1), in
        both rounds (``mu0`` is its mean, :func:`paper_target`).
    labels_per_item : int or None, default None
        None (default): every labeler labels every item (dense). Otherwise each
        item gets that many distinct labelers drawn uniformly.
    alpha, beta : arrays, optional
        Fixed labeler parameters instead of drawing them (by default they are
        redrawn at every call, i.e. every replication).
    current_labeler_weights : array of length J, optional
        Labeler-pool shift: with ``labels_per_item`` set, the current round's
        labelers are drawn without replacement with these relative weights
        (the history's uniformly).

    Examples
    --------
    >>> from heroeval.simulate import paper_dgp
    >>> d = paper_dgp(0)
    >>> d.history.n_items, d.current.n_items, d.history.n_labelers
    (800, 300, 10)
    """
    o = options_of("paper_dgp", options, PanelOptions, PANEL_DEFAULTS)
    n: int = o["n"]
    N: int = o["N"]
    J: int = o["J"]
    b0: float = o["b0"]
    b1: float = o["b1"]
    labels_per_item: int | None = o["labels_per_item"]
    gen, a, b = _labeler_panel(o, alpha, beta, rng)

    if current_labeler_weights is not None:
        w = np.asarray(current_labeler_weights, dtype=float)
        if w.shape != (J,) or (w < 0).any() or np.count_nonzero(w) < (labels_per_item or J):
            raise HeroEvalError(
                f"current_labeler_weights must be {J} non-negative weights with at least labels_per_item positive"
            )
        if labels_per_item is None:
            raise HeroEvalError("current_labeler_weights needs labels_per_item (a dense design has no pool to shift)")

    design = _Design(a, b, b0, b1, labels_per_item)
    cw = None if current_labeler_weights is None else np.asarray(current_labeler_weights, float)
    cur, yc = _draw_round(gen, design, n, None, weights=cw)
    hist, _ = _draw_round(gen, design, N, o["rho"])
    return PaperData(hist, cur, a, b, _target(b0, b1), float(yc.mean()))


def dependent_dgp(
    rng: np.random.Generator | int | None = None,
    *,
    alpha: np.ndarray | None = None,
    beta: np.ndarray | None = None,
    **options: Unpack[DependentOptions],
) -> PaperData:
    """The paper's design with errors that labelers share: hard items.

    Defaults differ from :func:`paper_dgp` in the labelers' quality (mean
    sensitivity 0.9, specificity 0.8, so that the gold-only rates stay
    informative once hard items are mixed in).

    A share ``hard_share`` of items (history and current alike) is *hard*:
    on a hard item every labeler, independently with probability
    ``hard_fooled``, gives the label ``decoy`` (default 1: a plausible wrong
    answer that judges accept; ``None``: the wrong label ``1 - Y``), and
    otherwise labels as in :func:`paper_dgp`. Labels are then dependent
    given the gold label (on a hard item most labelers say the same wrong
    thing together), as with crowds fooled by the same items or LLM judges
    trained on the same data. Each labeler's marginal sensitivity and
    specificity stay well defined (with ``h q = hard_share * hard_fooled``:
    for ``decoy=1``, ``alpha_j' = alpha_j + h q (1 - alpha_j)`` and
    ``beta_j' = (1 - h q) beta_j``); the returned ``alpha`` and ``beta``
    are these marginal rates, the ones a gold-only estimate
    targets. The two-coin likelihood is wrong here, so Stage A and HERO-1
    are biased; moment estimators that use only each labeler's marginal
    rates (:func:`heroeval.rogan_gladen`) are not.

    ``current_b0`` draws the current round with another intercept (a rate
    shift: a new model version's defect rate differs from the history's;
    ``current_b0=1.0`` gives a rate of about 0.61 against the default 0.47), with
    the labelers' behaviour given the gold label unchanged. ``mu0`` is then
    the current round's population rate.

    Parameters
    ----------
    rng : Generator, int or None
        Randomness (a seed or a Generator).
    n, N, J, rho, k, b0, b1, labels_per_item, alpha, beta
        As in :func:`paper_dgp`, with the same defaults (``alpha`` and
        ``beta`` fix the labelers' rates on the items that are not hard).
    mu_alpha, mu_beta : float, default 0.90, 0.80
        Mean sensitivity and specificity of the labelers on the items that
        are not hard.
    hard_share : float, default 0.2
        Share of hard items, in [0, 1].
    hard_fooled : float, default 0.7
        Probability that a labeler is fooled on a hard item, in [0, 1].
    decoy : {1, 0, None}, default 1
        The label a fooled labeler gives (None: the wrong label ``1 - Y``).
    current_b0 : float or None, default None
        The current round's intercept (None: ``b0``).

    Examples
    --------
    >>> from heroeval.simulate import dependent_dgp
    >>> d = dependent_dgp(0)
    >>> d.history.n_items, d.current.n_items
    (800, 300)
    """
    o = options_of("dependent_dgp", options, DependentOptions, DEPENDENT_DEFAULTS)
    n: int = o["n"]
    N: int = o["N"]
    b0: float = o["b0"]
    b1: float = o["b1"]
    labels_per_item: int | None = o["labels_per_item"]
    hard_share: float = o["hard_share"]
    hard_fooled: float = o["hard_fooled"]
    decoy: int | None = o["decoy"]
    current_b0: float | None = o["current_b0"]
    if decoy not in (None, 0, 1):
        raise HeroEvalError(f"decoy must be 0, 1 or None, got {decoy!r}")
    if not 0 <= hard_share <= 1 or not 0 <= hard_fooled <= 1:
        raise HeroEvalError(f"hard_share and hard_fooled must be in [0, 1], got {hard_share!r}, {hard_fooled!r}")
    gen, a, b = _labeler_panel(o, alpha, beta, rng)
    hq = hard_share * hard_fooled

    design = _Design(a, b, b0, b1, labels_per_item, hard_share, hard_fooled, decoy)
    cb0 = b0 if current_b0 is None else float(current_b0)
    cur, yc = _draw_round(gen, replace(design, b0=cb0), n, None)
    hist, _ = _draw_round(gen, design, N, o["rho"])
    # marginal P(z = 1 | Y = 1) and P(z = 0 | Y = 0)
    a_marg = (1 - hq) * a + (hq if decoy == 1 else 0.0)
    b_marg = (1 - hq) * b + (hq if decoy == 0 else 0.0)
    return PaperData(hist, cur, a_marg, b_marg, _target(cb0, b1), float(yc.mean()))


@dataclass(frozen=True)
class ShiftData:
    """One replication of :func:`shift_dgp`: history, current round and the true parameters."""

    history: AnnotationSet
    current: AnnotationSet
    alpha: np.ndarray  # history sensitivities, one per labeler
    beta: np.ndarray  # history specificities
    current_alpha: np.ndarray  # current-round sensitivities
    current_beta: np.ndarray  # current-round specificities
    current_rate: float  # realised gold rate of the current items
    labeler_ids: tuple[str, ...]


def shift_dgp(
    rng: np.random.Generator | int | None,
    *,
    alpha: np.ndarray,
    beta: np.ndarray,
    current_alpha: np.ndarray | None = None,
    current_beta: np.ndarray | None = None,
    history_pool: np.ndarray | None = None,
    current_pool: np.ndarray | None = None,
    **options: Unpack[ShiftOptions],
) -> ShiftData:
    """History and current round whose labelers may change between them (drift, new labelers).

    Labeler j labels an item with Y=1 as 1 with probability ``alpha[j]`` in
    the history and ``current_alpha[j]`` in the current round (specificities
    likewise); by default the current parameters equal the history's. The
    history's items are labelled by labelers in ``history_pool`` (default
    all), the current round's by ``current_pool`` (default all): a labeler
    only in ``current_pool`` is new in the current round. Each item gets
    ``labels_per_item`` distinct labelers drawn uniformly from its pool
    (``None``: every labeler of the pool). Items are i.i.d. with gold rates
    ``history_rate`` and ``current_rate``; a share ``rho`` of history items
    has gold. Labeler ids are ``"L00"``, ``"L01"``, ...

    Parameters
    ----------
    rng : Generator, int or None
        Randomness (a seed or a Generator).
    alpha, beta : arrays of length J
        The history's sensitivities and specificities, one per labeler.
    current_alpha, current_beta : arrays of length J, optional
        The current round's (default: the history's).
    history_pool, current_pool : integer arrays, optional
        The labelers (indices into ``alpha``) of each round (default: all).
    n, N : int, default 300, 800
        Current items, history items.
    rho : float, default 0.10
        Share of history items with gold.
    labels_per_item : int or None, default None
        Distinct labelers per item, drawn uniformly from its round's pool
        (None: every labeler of the pool).
    history_rate, current_rate : float, default 0.4, 0.3
        The rounds' gold rates.

    Examples
    --------
    >>> import numpy as np
    >>> from heroeval.simulate import shift_dgp
    >>> d = shift_dgp(0, alpha=np.full(4, 0.8), beta=np.full(4, 0.7), current_beta=np.array([0.7, 0.7, 0.7, 0.4]))
    >>> d.current.n_items, d.history.n_labelers
    (300, 4)
    """
    o = options_of("shift_dgp", options, ShiftOptions, SHIFT_DEFAULTS)
    n: int = o["n"]
    N: int = o["N"]
    rho: float = o["rho"]
    labels_per_item: int | None = o["labels_per_item"]
    history_rate: float = o["history_rate"]
    current_rate: float = o["current_rate"]
    a = np.asarray(alpha, dtype=float)
    b = np.asarray(beta, dtype=float)
    J = a.size
    ca = a if current_alpha is None else np.asarray(current_alpha, dtype=float)
    cb = b if current_beta is None else np.asarray(current_beta, dtype=float)
    if b.shape != (J,) or ca.shape != (J,) or cb.shape != (J,):
        raise HeroEvalError(f"alpha, beta, current_alpha and current_beta must all have length {J}")
    hp = np.arange(J) if history_pool is None else np.asarray(history_pool, dtype=np.int64)
    cp = np.arange(J) if current_pool is None else np.asarray(current_pool, dtype=np.int64)
    if labels_per_item is not None and not 1 <= labels_per_item <= min(hp.size, cp.size):
        raise HeroEvalError(f"labels_per_item must be in [1, {min(hp.size, cp.size)}], got {labels_per_item!r}")
    if not 0 < rho <= 1:
        raise HeroEvalError(f"rho must be in (0, 1], got {rho!r}")
    gen = np.random.default_rng(rng)
    names = np.array([f"L{j:02d}" for j in range(J)])

    def draw(m: int, pool: np.ndarray, aa: np.ndarray, bb: np.ndarray, rate: float, prefix: str,
             gold_share: float | None) -> tuple[AnnotationSet, np.ndarray]:
        y = (gen.random(m) < rate).astype(np.int8)
        k = pool.size if labels_per_item is None else labels_per_item
        lab = pool[np.argsort(gen.random((m, pool.size)), axis=1)[:, :k]].ravel()
        item = np.repeat(np.arange(m), k)
        pz = np.where(y[item] == 1, aa[lab], 1 - bb[lab])
        z = (gen.random(item.size) < pz).astype(np.int8)
        ids = np.char.add(prefix, np.arange(m).astype(str))
        gold = None
        if gold_share is not None:
            g = gen.random(m) < gold_share
            if not g.any():
                g[gen.integers(m)] = True
            gold = (ids[g], y[g])
        return AnnotationSet.from_arrays(ids[item], names[lab], z, gold=gold, name=prefix), y

    hist, _ = draw(N, hp, a, b, history_rate, "h", rho)
    cur, yc = draw(n, cp, ca, cb, current_rate, "c", None)
    return ShiftData(hist, cur, a, b, ca, cb, float(yc.mean()), tuple(str(x) for x in names))
