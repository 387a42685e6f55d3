"""The current round's gold sample: which items carry expert labels, and the design that drew them.

A gold sample is ``k`` of the round's ``n`` items with their gold labels and
inclusion probabilities ``pi_i``: a uniform random sample (``pi = k / n``, no
design given), a design with known unequal ``pi`` (``hero select``'s active
or Poisson designs), or a *stratified* design: the items are split into
strata (an item group such as the query or topic, or bins of the
predictor's value) and a simple random sample of ``k_h`` of the ``N_h``
items of stratum h is drawn (``pi = k_h / N_h``). The estimators of
:mod:`heroeval.estimators.ppi` weight each gold item by ``1 / pi`` (a Hajek
mean, which for a stratified design is the stratified mean
``sum_h (N_h / n) mean_{S_h}``); with strata their variance centres the
residuals within each stratum, ``sum_h (1 - k_h/N_h) N_h^2 s_h^2 / k_h / n^2``
(Cochran 1977, 5.9), which removes the between-strata part of the spread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from heroeval.errors import DataError
from heroeval.ingest.annotations import AnnotationSet

__all__ = ["GoldSample", "centred", "gold_sample", "variance_groups"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]



@dataclass(frozen=True)
class GoldSample:
    """The current round's gold items: positions, labels, inclusion probabilities and how they were drawn."""

    index: IntArray  # positions of the gold items among the round's items
    y: FloatArray
    pi: FloatArray  # inclusion probabilities (k / n for a uniform sample)
    design: str  # "uniform" (no design given), "design" or "stratified"
    n: int  # items in the round
    stratum: IntArray | None = None  # stratum code of each gold item (a stratified design), else None

    @property
    def n_strata(self) -> int:
        return 1 if self.stratum is None else int(np.unique(self.stratum).size)

    @property
    def k(self) -> int:
        return int(self.index.size)

    @property
    def weights(self) -> FloatArray:
        w: FloatArray = 1.0 / self.pi
        return w

    def describe(self) -> str:
        if self.stratum is not None:
            return (f"{self.k} of {self.n} items have gold, drawn by a stratified design ({self.n_strata} strata, "
                    f"inclusion probabilities {self.pi.min():.3g} to {self.pi.max():.3g}; stratified variance)")
        if self.design == "uniform":
            return f"{self.k} of {self.n} items have gold, taken as a uniform random sample"
        if np.allclose(self.pi, self.pi[0]):
            return f"{self.k} of {self.n} items have gold, drawn by a uniform design (pi = {self.pi[0]:.3g})"
        return (f"{self.k} of {self.n} items have gold, drawn by a design (inclusion probabilities "
                f"{self.pi.min():.3g} to {self.pi.max():.3g}; Hajek weights 1/pi)")


def gold_sample(data: AnnotationSet) -> GoldSample | None:
    """The gold items of a current round (``None`` when it has none), with their design."""
    idx = np.flatnonzero(data.gold >= 0).astype(np.int64)
    if idx.size == 0:
        return None
    n = data.n_items
    y = data.gold[idx].astype(float)
    if data.gold_pi is None:
        return GoldSample(idx, y, np.full(idx.size, idx.size / n), "uniform", n)
    pi = np.asarray(data.gold_pi, dtype=float)[idx]
    if not np.all(np.isfinite(pi)):
        raise DataError(f"{int((~np.isfinite(pi)).sum())} gold item(s) of {data.name!r} have no inclusion "
                        "probability in the design")
    if data.gold_stratum is None:
        return GoldSample(idx, y, pi, "design", n)
    _, codes = np.unique(np.asarray(data.gold_stratum, dtype=object)[idx].astype(str), return_inverse=True)
    return GoldSample(idx, y, pi, "stratified", n, codes.astype(np.int64))


def variance_groups(gs: GoldSample) -> IntArray:
    """The groups the design-based variance centres the gold's residuals in: the strata of a stratified design.

    One group (all zeros) without strata. A stratum holding a single gold item
    drawn with pi < 1 has no within-stratum spread of its own: such strata are
    collapsed into one group (collapsed strata, Cochran 1977, section 5A.12),
    which overstates the variance a little, never understates it; a lone one
    joins the largest stratum.
    """
    if gs.stratum is None:
        return np.zeros(gs.k, dtype=np.int64)
    codes = gs.stratum.copy()
    sizes = np.bincount(codes)
    lone = (sizes[codes] == 1) & (gs.pi < 1)
    if lone.sum() >= 2:
        codes[lone] = sizes.size
    elif lone.sum() == 1:
        codes[lone] = int(np.argmax(sizes))
    _, out = np.unique(codes, return_inverse=True)
    return out.astype(np.int64)


def centred(x: FloatArray, w: FloatArray, groups: IntArray) -> FloatArray:
    """``x`` minus its ``w``-weighted mean within each group."""
    sw = np.bincount(groups, weights=w)
    m = np.bincount(groups, weights=w * x) / np.where(sw > 0, sw, 1.0)
    out: FloatArray = x - m[groups]
    return out
