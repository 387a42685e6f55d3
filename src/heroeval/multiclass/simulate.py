"""Simulated K-class / ordinal annotation rounds (for tests and the ordinal simulation study).

:func:`simulate_rounds`'s optional keywords are declared once, as :class:`RoundsOptions` with
:data:`ROUNDS_DEFAULTS` beside it (:mod:`heroeval.core.options`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

import numpy as np
import numpy.typing as npt

from heroeval.core.options import options_of
from heroeval.multiclass import confusion_model
from heroeval.multiclass.data import MultiClassData, multiclass_from_arrays

__all__ = ["ROUNDS_DEFAULTS", "RoundsOptions", "SimulatedRounds", "simulate_rounds"]

FloatArray = npt.NDArray[np.float64]


class RoundsOptions(TypedDict, total=False):
    """:func:`simulate_rounds`'s keyword options (documented there)."""

    K: int
    J: int
    n_history: int
    n_current: int
    labels_per_item: int
    rho: float
    sharpness: tuple[float, float]
    structure: str
    ordinal: bool


ROUNDS_DEFAULTS: Mapping[str, Any] = {
    "K": 5, "J": 10, "n_history": 800, "n_current": 300, "labels_per_item": 3, "rho": 0.10,
    "sharpness": (0.8, 2.0), "structure": "ordinal", "ordinal": True,
}
""":func:`simulate_rounds`'s defaults."""


@dataclass(frozen=True)
class SimulatedRounds:
    history: MultiClassData
    current: MultiClassData
    confusion: FloatArray  # (J, K, K) true confusion matrices
    prevalence_current: FloatArray  # (K,) population prevalence of the current round
    realised_current: FloatArray  # (K,) class shares of the current items drawn


def simulate_rounds(
    rng: np.random.Generator,
    *,
    prevalence_history: FloatArray | None = None,
    prevalence_current: FloatArray | None = None,
    **options: Unpack[RoundsOptions],
) -> SimulatedRounds:
    """A history (gold on a random share ``rho``) and a current round from one labeler pool.

    Labeler j's confusion is ordinal, ``P(l | c) ∝ exp(-t_j |l - c|)`` with
    ``t_j ~ Uniform(sharpness)`` (``structure="ordinal"``), or a full matrix
    drawn as Dirichlet rows centred on that ordinal row (``"full"``); labels
    per item are drawn from distinct random labelers. Classes are 1..K. The
    history and current prevalences default to a mild and a shifted profile.

    Parameters
    ----------
    rng : Generator
        Randomness.
    prevalence_history, prevalence_current : arrays of length K, optional
        The rounds' class prevalences (default: weights rising linearly from 1
        for class 1 to 2 for class K in the history, falling in the current
        round).
    K, J : int, default 5, 10
        Classes, labelers.
    n_history, n_current : int, default 800, 300
        Items of each round.
    labels_per_item : int, default 3
        Distinct labelers per item, drawn uniformly.
    rho : float, default 0.10
        Share of history items with gold (at least one item has it).
    sharpness : (float, float), default (0.8, 2.0)
        The range of the labelers' ``t_j``.
    structure : {"ordinal", "full"}, default "ordinal"
        The labelers' confusion matrices, as above.
    ordinal : bool, default True
        Whether the returned data declare their classes ordered.
    """
    o = options_of("simulate_rounds", options, RoundsOptions, ROUNDS_DEFAULTS)
    K: int = o["K"]
    J: int = o["J"]
    n_history: int = o["n_history"]
    n_current: int = o["n_current"]
    labels_per_item: int = o["labels_per_item"]
    rho: float = o["rho"]
    sharpness: tuple[float, float] = o["sharpness"]
    structure: str = o["structure"]
    ordinal: bool = o["ordinal"]
    if prevalence_history is None:
        prevalence_history = np.linspace(1.0, 2.0, K) / np.linspace(1.0, 2.0, K).sum()
    if prevalence_current is None:
        prevalence_current = np.linspace(2.0, 1.0, K) / np.linspace(2.0, 1.0, K).sum()
    t = rng.uniform(*sharpness, size=J)
    conf = confusion_model.conf_from_theta("ordinal", t, K)
    if structure == "full":
        conf = np.stack([[rng.dirichlet(30 * conf[j, c]) for c in range(K)] for j in range(J)])
    classes = [str(k + 1) for k in range(K)]

    def draw(n: int, prev: FloatArray, prefix: str) -> tuple[MultiClassData, npt.NDArray[np.int64]]:
        y = rng.choice(K, size=n, p=prev)
        who = np.argsort(rng.random((n, J)), axis=1)[:, :labels_per_item]  # distinct labelers per item
        cum = np.cumsum(conf[who, y[:, None]], axis=2)  # (n, m, K) label CDFs
        u = rng.random((n, labels_per_item, 1))
        lab = np.minimum((u > cum).sum(axis=2), K - 1)
        items = np.repeat([f"{prefix}{i}" for i in range(n)], labels_per_item).tolist()
        labs = [f"L{j}" for j in who.ravel()]
        lbls = [str(v + 1) for v in lab.ravel()]
        gold = None
        if prefix == "h":
            g = rng.random(n) < rho
            if not g.any():
                g[0] = True
            idx = np.flatnonzero(g)
            gold = ([f"h{i}" for i in idx], [str(y[i] + 1) for i in idx])
        d = multiclass_from_arrays(items, labs, lbls, classes=classes, ordinal=ordinal, gold=gold,
                                   name="history" if prefix == "h" else "current")
        return d, y

    hist, _ = draw(n_history, prevalence_history, "h")
    cur, y = draw(n_current, prevalence_current, "c")
    realised = np.bincount(y, minlength=K) / n_current
    return SimulatedRounds(hist, cur, conf, np.asarray(prevalence_current, dtype=np.float64), realised)
