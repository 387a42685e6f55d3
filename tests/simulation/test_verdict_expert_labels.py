"""The expert labels an undecided verdict asks for (issue #40 item 2), by simulation: with that many expert
labels in each round, does the prediction-powered difference decide as often as the plan says (power 0.8)?

Three labelers of sensitivity and specificity 0.7 (weak judges, so that 200 items per round leave a 0.08
difference undecided), a history of 1,000 items with gold on 10 %, rounds A and B of 200 items whose own rates
are exactly 0.30 and 0.22 (the verdict with expert labels is about the rounds' own rates: their finite-population
interval does not carry the rounds' sampling from a population).
:func:`heroeval.inference.gold_plan.expert_labels_to_decide` sizes ``k`` at the true difference; 150 pairs of rounds then get ``k`` expert labels each (uniform samples) and ``hero1_ppi``'s superiority verdict ("B
is lower") is taken. Fixed seeds; the Monte-Carlo SE of a 0.8 rate over 150 pairs is about 0.033. Measured when
the test was written: k = 116 expert labels per round, decided in 0.800 of 150 pairs. Stated tolerance: the rate
in [0.65, 0.95].
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import heroeval as he
from heroeval.inference.gold_plan import expert_labels_to_decide
from heroeval.inference.verdict import verdict

pytestmark = pytest.mark.slow

J, ACC, N_ROUND = 3, 0.7, 200


def _round(gen: np.random.Generator, n: int, rate: float, name: str) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    y = gen.permutation(np.arange(n) < round(n * rate)).astype(int)  # exactly n * rate positives
    u = gen.random((n, J))
    lab = np.where(y[:, None] == 1, u < ACC, u >= ACC).astype(int)
    ids = np.array([f"{name}{i}" for i in range(n)], dtype=object)
    long = pd.DataFrame({"item_id": np.repeat(ids, J), "labeler_id": np.tile([f"w{j}" for j in range(J)], n),
                         "label": lab.ravel()})
    return long, ids, y


def test_expert_labels_decide_at_the_planned_power() -> None:
    gen = np.random.default_rng(40)
    h_long, h_ids, h_y = _round(gen, 1000, 0.30, "h")
    g = gen.random(1000) < 0.10
    hist = he.read_annotations(h_long, gold=pd.DataFrame({"item_id": h_ids[g], "gold": h_y[g]}), round_col=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = he.calibrate(hist)
        a_long, _, _ = _round(gen, N_ROUND, 0.30, "a")
        b_long, _, _ = _round(gen, N_ROUND, 0.22, "b")
        a, b = (he.read_annotations(x, round_col=False, name=n) for x, n in ((a_long, "A"), (b_long, "B")))
        silver = verdict(he.compare(a, b, cal, method="hero1"), 0.0, "less", calibration=cal)
    assert not silver.decided or silver.expert_labels != silver.expert_labels  # NaN when decided
    k = int(expert_labels_to_decide(cal, mu_a=0.30, mu_b=0.22, n_a=N_ROUND, n_b=N_ROUND, distance=0.08,
                                    alpha=0.05))
    assert 5 <= k < N_ROUND, k
    decided = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in range(150):
            rg = np.random.default_rng(4000 + s)
            rounds = []
            for rate, name in ((0.30, "A"), (0.22, "B")):
                long, ids, y = _round(rg, N_ROUND, rate, name)
                pick = rg.choice(N_ROUND, k, replace=False)
                rounds.append(he.read_annotations(long, round_col=False, name=name,
                                                  gold=pd.DataFrame({"item_id": ids[pick], "gold": y[pick]})))
            c = he.compare(rounds[0], rounds[1], cal, method="hero1_ppi")
            decided.append(verdict(c, 0.0, "less").decided)
    rate = float(np.mean(decided))
    assert 0.65 <= rate <= 0.95, f"k = {k}: decided in {rate:.3f} of 150 pairs (planned power 0.8)"
