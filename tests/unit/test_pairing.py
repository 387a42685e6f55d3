"""The paired difference (issue #40 item 3): closed forms, an independent computation, and a simulation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import heroeval as he
from heroeval.errors import HeroEvalError
from heroeval.estimators.results import Influence
from heroeval.inference.pairing import Pairing, paired_variance_current, resolve_pairing


def _ds(ids: list[str], name: str = "r") -> he.AnnotationSet:
    return he.read_annotations(pd.DataFrame({"item_id": ids, "labeler_id": "x", "label": 1}), round_col=False,
                               name=name)


def test_paired_variance_by_hand() -> None:
    # A: items q1, q2, q3; B: items q1, q2, q3 in another order (pairing is by prompt, not position)
    a, b = _ds(["q1", "q2", "q3"]), _ds(["q3", "q1", "q2"])
    p = Pairing.by_item_id(a, b)
    pos_a = {k: i for i, k in enumerate(a.item_ids)}
    pos_b = {k: i for i, k in enumerate(b.item_ids)}
    phi_a = {"q1": 1.0, "q2": -1.0, "q3": 2.0}
    phi_b = {"q1": 0.5, "q2": -0.5, "q3": 1.0}
    ia = Influence(np.array([phi_a[k] for k in sorted(pos_a, key=pos_a.get)]))
    ib = Influence(np.array([phi_b[k] for k in sorted(pos_b, key=pos_b.get)]))
    # psi_q = (phi_a - phi_b) / 3: 0.5/3, -0.5/3, 1/3 -> sum of squares (0.25 + 0.25 + 1) / 9
    assert paired_variance_current(ia, ib, p) == pytest.approx(1.5 / 9)
    # = Var_A + Var_B - 2 Cov: (6/9) + (1.5/9) - 2 * (0.5 + 0.5 + 2) / 9
    assert paired_variance_current(ia, ib, p) == pytest.approx(6 / 9 + 1.5 / 9 - 6 / 9)


def test_no_shared_prompt_is_the_unpaired_variance_and_clusters_within_a_round() -> None:
    rng = np.random.default_rng(3)
    a, b = _ds([f"a{i}" for i in range(7)]), _ds([f"b{i}" for i in range(5)])
    ia, ib = Influence(rng.normal(size=7)), Influence(rng.normal(size=5))
    p = Pairing.by_item_id(a, b)
    assert p.n_shared == 0 and resolve_pairing(a, b, "auto") is None
    assert paired_variance_current(ia, ib, p) == pytest.approx(ia.variance_current() + ib.variance_current())
    # two items of A on one prompt: their influence values are summed before squaring (cluster-robust)
    prompts = {**{f"a{i}": f"p{i}" for i in range(7)}, "a1": "p0", **{f"b{i}": f"z{i}" for i in range(5)}}
    q = Pairing.from_prompts(a, b, prompts)
    phi = ia.current / 7
    by_hand = (phi[0] + phi[1]) ** 2 + float(phi[2:] @ phi[2:]) + ib.variance_current()
    assert paired_variance_current(ia, ib, q) == pytest.approx(by_hand)


def test_mapping_errors_name_the_item() -> None:
    a, b = _ds(["q1", "q2"]), _ds(["q1", "q3"])
    with pytest.raises(HeroEvalError, match=r"round B .*'q3'"):
        Pairing.from_prompts(a, b, {"q1": "p1", "q2": "p2"})
    with pytest.raises(HeroEvalError, match="pairs must be"):
        resolve_pairing(a, b, "by-prompt")
    with pytest.raises(HeroEvalError, match="items"):
        resolve_pairing(a, _ds(["q1"]), Pairing.by_item_id(a, b))


def _paired_world(seed: int, n: int, acc: tuple[float, float], rho: float) -> tuple[pd.DataFrame, pd.DataFrame,
                                                                                     float]:
    """Two models answer the same n prompts; a prompt's difficulty makes both answers right or wrong together
    (correlation through a shared latent), five independent judges (sensitivity 0.85, specificity 0.8). The
    truth is the models' rates ``acc`` (the estimand of a round's influence-value variance: the round's items
    are a sample of prompts), not the realised rates of these n prompts."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    rows = []
    for m, c in zip("AB", norm.ppf(acc), strict=True):  # P(answer right) = acc exactly: the latent is N(0, 1)
        y = (np.sqrt(rho) * z + np.sqrt(1 - rho) * rng.normal(size=n) < c).astype(int)
        for j in range(5):
            lab = np.where(y == 1, rng.random(n) < 0.85, rng.random(n) > 0.8).astype(int)
            rows.append(pd.DataFrame({"item_id": [f"{m}{i}" for i in range(n)], "labeler_id": f"j{j}", "label": lab,
                                      "prompt": [f"p{i}" for i in range(n)], "model": m}))
    df = pd.concat(rows)
    return df[df.model == "A"], df[df.model == "B"], acc[0] - acc[1]


@pytest.mark.slow
def test_paired_interval_covers_and_is_narrower_by_simulation() -> None:
    """200 worlds, prompts shared by both models with a latent correlation of 0.8: the paired 95 % interval of
    HERO-1's A - B covers 0.95 +- 0.035 and is narrower than the unpaired one; unpaired over-covers."""
    rng = np.random.default_rng(11)
    hist_rows, gold = [], []
    for g in range(3):  # a history of three rounds with gold on a fifth, the same judges
        y = (rng.random(1500) < 0.5 + 0.1 * g).astype(int)
        for j in range(5):
            lab = np.where(y == 1, rng.random(1500) < 0.85, rng.random(1500) > 0.8).astype(int)
            hist_rows.append(pd.DataFrame({"item_id": [f"h{g}_{i}" for i in range(1500)], "labeler_id": f"j{j}",
                                           "label": lab, "round": f"r{g}"}))
        gold.append(pd.DataFrame({"item_id": [f"h{g}_{i}" for i in range(0, 1500, 5)], "gold": y[::5]}))
    hist = he.read_annotations(pd.concat(hist_rows), gold=pd.concat(gold), round_col="round")
    cal = he.calibrate(hist)
    cover = {"paired": 0, "unpaired": 0}
    ratio = []
    worlds = 200
    for s in range(worlds):
        da, db, truth = _paired_world(s, 200, (0.7, 0.6), 0.8)
        a = he.read_annotations(da[["item_id", "labeler_id", "label"]], round_col=False, name="A")
        b = he.read_annotations(db[["item_id", "labeler_id", "label"]], round_col=False, name="B")
        prompts = pd.concat([da, db]).drop_duplicates("item_id").set_index("item_id")["prompt"]
        cp = he.compare(a, b, cal, method="hero1", pairs=prompts)
        cu = he.compare(a, b, cal, method="hero1", pairs=None)
        assert cp.pairing is not None and cu.pairing is None
        assert cp.estimate == cu.estimate
        for k, c in (("paired", cp), ("unpaired", cu)):
            ci = c.confidence_interval(0.95)
            cover[k] += ci.low <= truth <= ci.high
        ratio.append(cp.standard_error / cu.standard_error)
    assert abs(cover["paired"] / worlds - 0.95) <= 0.035, cover
    assert cover["unpaired"] >= cover["paired"]
    assert np.mean(ratio) < 0.85, np.mean(ratio)


def test_compare_pairs_shared_item_ids_by_default() -> None:
    from heroeval.simulate import paper_dgp

    d = paper_dgp(1)
    cal = he.calibrate(d.history)
    a = d.current.take_items(range(300))
    # the same 300 items as round B: pairing by item id makes A - B's current variance exactly 0
    c = he.compare(a, a, cal, method="hero1")
    assert c.pairing is not None and c.pairing.n_shared == 300
    assert c.variance_current == pytest.approx(0.0, abs=1e-15)
    assert "pairing" in c.to_dict()
    u = he.compare(a, a, cal, method="hero1", pairs=None)
    assert u.pairing is None and u.variance_current > 0
