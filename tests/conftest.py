"""Shared fixtures: small synthetic histories and current rounds from the two-coin model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import heroeval as he


@dataclass
class Sim:
    history: he.AnnotationSet
    current: he.AnnotationSet
    alpha: np.ndarray
    beta: np.ndarray
    true_rate: float


def simulate(
    seed: int,
    *,
    J: int = 6,
    N: int = 400,
    n: int = 150,
    labels_per_item: tuple[int, int] = (3, 5),
    gold_rate: float = 0.15,
    hist_prev: float = 0.4,
    cur_prev: float = 0.3,
    covariates: bool = True,
) -> Sim:
    rng = np.random.default_rng(seed)
    alpha = rng.uniform(0.6, 0.95, J)
    beta = rng.uniform(0.55, 0.95, J)
    names = np.array([f"L{j:02d}" for j in range(J)])

    def round_(n_items: int, prev: float, prefix: str) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        x = rng.normal(size=n_items)
        p = 1 / (1 + np.exp(-(np.log(prev / (1 - prev)) + 1.5 * x)))
        y = (rng.random(n_items) < p).astype(int)
        k = rng.integers(labels_per_item[0], labels_per_item[1] + 1, n_items)
        items, labs, zs = [], [], []
        for i in range(n_items):
            js = rng.choice(J, size=min(k[i], J), replace=False)
            for j in js:
                pz = alpha[j] if y[i] else 1 - beta[j]
                items.append(f"{prefix}{i:05d}")
                labs.append(names[j])
                zs.append(int(rng.random() < pz))
        ids = np.array([f"{prefix}{i:05d}" for i in range(n_items)])
        return {"item": np.array(items), "labeler": np.array(labs), "label": np.array(zs)}, y, np.c_[x, ids]

    h, yh, xh = round_(N, hist_prev, "h")
    c, yc, xc = round_(n, cur_prev, "c")
    ids_h = xh[:, 1]
    g = rng.random(N) < gold_rate
    g[:2] = True
    hist = he.AnnotationSet.from_arrays(
        h["item"], h["labeler"], h["label"],
        gold=(ids_h[g], yh[g]),
        covariates=(ids_h, xh[:, 0].astype(float)) if covariates else None,
        covariate_names=["x"],
        name="history",
    )
    cur = he.AnnotationSet.from_arrays(
        c["item"], c["labeler"], c["label"],
        covariates=(xc[:, 1], xc[:, 0].astype(float)) if covariates else None,
        covariate_names=["x"],
        name="current",
    )
    return Sim(hist, cur, alpha, beta, float(yc.mean()))


@pytest.fixture(scope="session")
def sim() -> Sim:
    return simulate(1)


@pytest.fixture(scope="session")
def calibration(sim: Sim) -> he.Calibration:
    return he.calibrate(sim.history)
