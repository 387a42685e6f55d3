"""Paired rounds: A and B answer the same prompts, so their current-item errors are correlated.

When model A and model B answer the same prompts (triviaqa's answering models answer the same 400 questions),
a hard prompt makes both answers hard to judge and often both wrong: the two rounds' per-item influence values
are correlated through the prompt. The difference ``A - B`` has current-item error

    mean_A(phi_A) - mean_B(phi_B) = sum over prompts p of psi_p,
    psi_p = sum_{i in A, prompt p} phi_A,i / n_A  -  sum_{j in B, prompt p} phi_B,j / n_B,

and, prompts being the independent units, its variance is estimated by ``sum_p psi_p^2`` (the cluster-robust
sandwich with the prompt as cluster). With one item per prompt in each round this is
``Var_A + Var_B - 2 Cov_AB``: the unpaired variance minus twice the paired covariance, smaller when the
influence values move together (the usual case), larger when they move apart. A prompt seen in one round only
is a cluster of its own; several items of one round on the same prompt are summed within their cluster, so the
variance is also cluster-robust within a round. The history term is unchanged (:class:`Influence`). The
estimate itself is not changed: each round's rate is still the mean over its own items (the estimand), so with
every prompt in both rounds once it equals the mean of the per-prompt differences.

The pairing key is an item's prompt: by default the item ids themselves when the two rounds share some
(:meth:`Pairing.by_item_id`), or a mapping from item id to prompt id (:meth:`Pairing.from_prompts`; CLI
``hero compare --pairs FILE``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.errors import HeroEvalError
from heroeval.estimators.results import Influence
from heroeval.ingest.annotations import AnnotationSet

__all__ = ["Pairing", "paired_variance_current", "resolve_pairing"]

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Pairing:
    """The prompt of every item of round A (``a``) and of round B (``b``) as integer codes (aligned with each
    round's ``item_ids``), and how many prompts the two rounds share (``n_shared``). ``key`` says what the
    prompt is (``"item id"`` or the name of the mapping's column)."""

    a: IntArray
    b: IntArray
    n_shared: int
    key: str = "item id"

    @property
    def n_prompts(self) -> int:
        return int(max(self.a.max(initial=-1), self.b.max(initial=-1)) + 1)

    def describe(self) -> str:
        """One sentence for the reason and the notes."""
        return (f"paired by {self.key}: {self.n_shared} prompt(s) in both rounds (of {len(np.unique(self.a))} in "
                f"A and {len(np.unique(self.b))} in B); the difference's current-item variance is cluster-robust by "
                "prompt, with the covariance of the paired influence values")

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "shared_prompts": self.n_shared, "prompts_a": len(np.unique(self.a)),
                "prompts_b": len(np.unique(self.b))}

    @classmethod
    def _from_keys(cls, ka: npt.NDArray[np.object_], kb: npt.NDArray[np.object_], key: str) -> Pairing:
        codes, _ = pd.factorize(pd.Series(np.concatenate([ka, kb]).astype(str)), sort=False)
        ca, cb = codes[: ka.size].astype(np.int64), codes[ka.size:].astype(np.int64)
        shared = int(np.intersect1d(ca, cb).size)
        return cls(ca, cb, shared, key)

    @classmethod
    def by_item_id(cls, round_a: AnnotationSet, round_b: AnnotationSet) -> Pairing:
        """Items with the same id in both rounds answer the same prompt.

        >>> import heroeval as he, pandas as pd
        >>> a = he.read_annotations(pd.DataFrame({"item_id": ["q1", "q2"], "labeler_id": "x", "label": [1, 0]}))
        >>> b = he.read_annotations(pd.DataFrame({"item_id": ["q2", "q3"], "labeler_id": "x", "label": [1, 1]}))
        >>> p = Pairing.by_item_id(a, b)
        >>> p.n_shared, p.a.tolist(), p.b.tolist()
        (1, [0, 1], [1, 2])
        """
        return cls._from_keys(round_a.item_ids, round_b.item_ids, "item id")

    @classmethod
    def from_prompts(cls, round_a: AnnotationSet, round_b: AnnotationSet, prompts: Mapping[Any, Any] | pd.Series,
                     key: str = "prompt") -> Pairing:
        """Items map to prompts by ``prompts`` (item id to prompt id; every item of both rounds must have one)."""
        m = pd.Series(prompts) if not isinstance(prompts, pd.Series) else prompts
        m = m.copy()
        m.index = m.index.astype(str)
        if m.index.has_duplicates:
            dup = m.index[m.index.duplicated()][0]
            raise HeroEvalError(f"pairs: item {dup!r} is given more than one prompt")
        keys = []
        for who, ds in (("A", round_a), ("B", round_b)):
            ids = pd.Index(ds.item_ids.astype(str))
            missing = ids[~ids.isin(m.index)]
            if missing.size:
                raise HeroEvalError(f"pairs: {missing.size} item(s) of round {who} ({ds.name!r}) have no prompt in "
                                    f"the mapping, e.g. {missing[0]!r}")
            got = m.reindex(ids)
            if got.isna().any():
                raise HeroEvalError(f"pairs: item {ids[got.isna().to_numpy()][0]!r} of round {who} has an empty "
                                    "prompt id")
            keys.append(got.to_numpy(dtype=object))
        return cls._from_keys(keys[0], keys[1], key)


def resolve_pairing(round_a: AnnotationSet, round_b: AnnotationSet,
                    pairs: Pairing | Mapping[Any, Any] | pd.Series | str | None) -> Pairing | None:
    """``pairs="auto"``: by item id when the rounds share an item id (else unpaired); ``None``: unpaired; a
    :class:`Pairing` as given; a mapping: :meth:`Pairing.from_prompts`."""
    if pairs is None:
        return None
    if isinstance(pairs, Pairing):
        if pairs.a.size != round_a.n_items or pairs.b.size != round_b.n_items:
            raise HeroEvalError(f"pairs: the pairing has {pairs.a.size} and {pairs.b.size} items, the rounds "
                                f"{round_a.n_items} and {round_b.n_items}")
        return pairs
    if isinstance(pairs, str):
        if pairs != "auto":
            raise HeroEvalError(f"pairs must be 'auto', None, a Pairing or a mapping from item id to prompt id, "
                                f"got {pairs!r}")
        p = Pairing.by_item_id(round_a, round_b)
        return p if p.n_shared > 0 else None
    name = getattr(pairs, "name", None)
    p = Pairing.from_prompts(round_a, round_b, pairs, key=str(name) if name is not None else "prompt")
    return p if p.n_shared > 0 else None


def paired_variance_current(ia: Influence, ib: Influence, pairing: Pairing) -> float:
    """``sum_p psi_p^2`` (module docstring); NaN when an influence vector does not have one value per item of
    its round (an estimate that left items out), so that the caller falls back to the unpaired variance."""
    if ia.n != pairing.a.size or ib.n != pairing.b.size or ia.n == 0 or ib.n == 0:
        return math.nan
    k = pairing.n_prompts
    psi = (np.bincount(pairing.a, weights=ia.current / ia.n, minlength=k)
           - np.bincount(pairing.b, weights=ib.current / ib.n, minlength=k))
    return float(psi @ psi)
