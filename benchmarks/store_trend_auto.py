"""Issue #40: does the store's trend (``Store.trend(method="auto")``) cover every version's rate together?

Per world (seeded): a store with one history round (the paper's design with hard items, so labelers err together:
:func:`heroeval.simulate.dependent_dgp`, gold on ``rho`` of its items) and ``--versions`` rounds of new model
versions without gold, each drawn with its own intercept (rates about 0.35 to 0.6) from the same labelers.
``hero store trend``'s simultaneous intervals (Šidák over the rounds) are scored against each version's realised
rate: the share of worlds where *all* versions are covered together (nominal 0.95), each version's own coverage,
and whether each version's trend row equals ``store.estimate`` (method, estimate, status).

    PYTHONPATH=. .venv/bin/python -m benchmarks.store_trend_auto --worlds 40
    PYTHONPATH=. .venv/bin/python -m benchmarks.store_trend_auto --real --worlds 10 --out benchmarks/results/store_trend_auto/real

``--real``: a store built from triviaqa's real rounds (``../shared/data/triviaqa_llm_judges``, the nine answering
models, one round each): per resample, ``--versions`` models drawn at random are the new versions (no gold), the
other models are history rounds with gold revealed on ``rho`` of their items; each version's truth is its items'
gold rate.
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import heroeval as he
from heroeval.core.parallel import run_chunks
from heroeval.errors import HeroEvalWarning
from heroeval.simulate import DEPENDENT_DEFAULTS, dependent_dgp

B0 = (-0.6, -0.2, 0.2, 0.6)  # the versions' intercepts


def _world(job: tuple[int, int, int, int, float]) -> list[dict[str, Any]]:
    seed, versions, N, n, rho = job
    o = DEPENDENT_DEFAULTS
    g = np.random.default_rng([seed, 99])  # one labeler panel for every round of the world
    alpha = g.beta(o["k"] * o["mu_alpha"], o["k"] * (1 - o["mu_alpha"]), o["J"])
    beta = g.beta(o["k"] * o["mu_beta"], o["k"] * (1 - o["mu_beta"]), o["J"])
    first = dependent_dgp(np.random.default_rng([seed, 0]), alpha=alpha, beta=beta, N=N, n=n, rho=rho)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", HeroEvalWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        st = he.Store(Path(tmp) / "hero.duckdb")
        st.add(first.history, name="history")
        truth = {}
        for k in range(versions):
            w = dependent_dgp(np.random.default_rng([seed, k + 1]), alpha=alpha, beta=beta,
                              N=N, n=n, rho=rho, current_b0=B0[k % len(B0)])
            st.add(w.current, name=f"v{k}")
            truth[f"v{k}"] = w.current_rate
        return _score(st, truth, seed)


DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "triviaqa_llm_judges"


def _real(job: tuple[int, int, int, int, float]) -> list[dict[str, Any]]:
    seed, versions, _N, _n, rho = job
    rng = np.random.default_rng([seed, 7])
    items = pd.read_csv(DATA / "items.csv")
    lab, gold = pd.read_csv(DATA / "labels.csv"), pd.read_csv(DATA / "gold.csv")
    models = np.sort(items["exam_taker"].unique())
    chosen = set(rng.choice(models, versions, replace=False).tolist())
    g = gold.set_index("item_id")["gold"]
    truth: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", HeroEvalWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        st = he.Store(Path(tmp) / "hero.duckdb")
        for m in models:
            ids = set(items.loc[items["exam_taker"] == m, "item_id"])
            rl = lab[lab["item_id"].isin(ids)]
            if m in chosen:
                st.add(rl, name=str(m), round_col=False)
                truth[str(m)] = float(g.loc[sorted(set(rl["item_id"]))].mean())
            else:
                rg = gold[gold["item_id"].isin(set(rl["item_id"]))]
                rg = rg.sample(n=max(round(rho * len(rg)), 1), random_state=int(rng.integers(2**31)))
                st.add(rl, name=str(m), gold=rg, round_col=False)
        return _score(st, truth, seed)


def _score(st: he.Store, truth: dict[str, float], seed: int) -> list[dict[str, Any]]:
    tr = st.trend(method="auto")
    by = {r.name: r for r in tr.rounds}
    rows = []
    for name, t in truth.items():
        r = by[name]
        rec = st.estimate(name).estimates.recommended
        rows.append({"world": seed, "round": name, "truth": t, "method": r.method, "estimate": r.estimate,
                     "ci_low": r.ci_low, "ci_high": r.ci_high, "status": r.status,
                     "covered": bool(r.ci_low <= t <= r.ci_high),
                     "marginal_covered": bool(r.marginal_low <= t <= r.marginal_high),
                     "width": r.ci_high - r.ci_low,
                     "agrees": bool(rec is not None and rec.method == r.method and rec.status == r.status
                                    and abs(rec.result.estimate - r.estimate) < 1e-12)})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, default=40)
    ap.add_argument("--versions", type=int, default=4)
    ap.add_argument("--N", type=int, default=2000, help="history items")
    ap.add_argument("--n", type=int, default=300, help="items per version")
    ap.add_argument("--rho", type=float, default=0.10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--real", action="store_true", help="triviaqa's real rounds instead of the simulation")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/store_trend_auto"))
    a = ap.parse_args()
    jobs = [(s, a.versions, a.N, a.n, a.rho) for s in range(a.worlds)]
    df = pd.DataFrame(run_chunks(_real if a.real else _world, jobs, [1] * len(jobs), a.workers, None))
    a.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out / "rows.csv", index=False)
    together = df.groupby("world")["covered"].all()
    summary = pd.DataFrame([{
        "worlds": together.size, "versions": a.versions, "all_covered": together.mean(),
        "each_covered": df["covered"].mean(), "marginal_each_covered": df["marginal_covered"].mean(),
        "mean_width": df["width"].mean(), "agrees_with_store_estimate": df["agrees"].mean(),
        "unreliable": (df["status"] == "unreliable").mean(),
        "methods": ", ".join(f"{k} {v}" for k, v in df["method"].value_counts().items())}])
    summary.to_csv(a.out / "summary.csv", index=False)
    print(summary.T.to_string())


if __name__ == "__main__":
    main()
