"""Simulated K-class / ordinal annotation rounds (for tests and the ordinal simulation study)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from heroeval.multiclass import confusion_model
from heroeval.multiclass.data import MultiClassData, multiclass_from_arrays

__all__ = ["SimulatedRounds", "simulate_rounds"]

FloatArray = npt.NDArray[np.float64]


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
    K: int = 5,
    J: int = 10,
    n_history: int = 800,
    n_current: int = 300,
    labels_per_item: int = 3,
    rho: float = 0.10,
    prevalence_history: FloatArray | None = None,
    prevalence_current: FloatArray | None = None,
    sharpness: tuple[float, float] = (0.8, 2.0),
    structure: str = "ordinal",
    ordinal: bool = True,
) -> SimulatedRounds:
    """A history (gold on a random share ``rho``) and a current round from one labeler pool.

    Labeler j's confusion is ordinal, ``P(l | c) ∝ exp(-t_j |l - c|)`` with
    ``t_j ~ Uniform(sharpness)`` (``structure="ordinal"``), or a full matrix
    drawn as Dirichlet rows centred on that ordinal row (``"full"``); labels
    per item are drawn from distinct random labelers. Classes are 1..K. The
    history and current prevalences default to a mild and a shifted profile.
    """
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
