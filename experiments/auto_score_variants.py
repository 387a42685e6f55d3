"""Issue #18: other ways for ``method="auto"`` to score its candidates, replayed on a stored benchmark run.

    .venv/bin/python -m experiments.auto_score_variants benchmarks/results/research/robustness/shift/resamples.csv.gz

The shipped rule (``heroeval.choice.choose``) keeps the default (HERO joint)
unless the checks find it biased or the labelers dependent, and then takes
the candidate with the smallest predicted RMSE
``sqrt(max(b^2 - s_b^2, 0) + v_mock + v_hist)`` (``b`` the rate-matched mock
bias, ``s_b`` its standard error). Variants, each with and without majority
vote among the candidates:

* score ``debiased`` (shipped), ``plain`` (``b^2`` not debiased) or
  ``upper`` (``(|b| + s_b)^2``, pessimistic);
* gate ``shipped`` (default unless flagged) or ``always`` (always the
  smallest score; the interval bias-aware whenever the pick is not the
  default or the checks flag it).

Every variant is replayed on the stored candidate tables
(``benchmarks/auto_loso.py``'s ``cell_table``), random splits only; prints
coverage, geometric-mean RMSE ratio to the best method and the worst cell
per shift type.

Result (session of 2026-12-02, the 30-resample run of section 7): no variant
meets the accuracy targets; rate shift ranges 1.365–1.446 against the
shipped 1.411, and every variant is worse than the shipped rule without
shift (1.126–1.246 against 1.111; the replay of the shipped rule gives its
stored 1.111 and 1.411 exactly). Not adopted.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import pandas as pd

from heroeval.choice.auto import CANDIDATES, DEFAULT_RULE, AutoRule

from benchmarks import auto_loso

SHIPPED = auto_loso.choose
VARIANT = {"score": "debiased", "gate": "shipped"}


def _score(r: dict[str, Any], mode: str, n_current: int, target: str) -> float:
    if VARIANT["score"] == "debiased":
        return float(r["predicted_rmse"])
    b, sb = abs(r["mock_bias"]), r["mock_bias_se"]
    v_mock = r[f"bias_se_{target}"] ** 2 * r[f"n_eff_{target}"] / max(n_current, 1)
    b2 = (b + sb) ** 2 if VARIANT["score"] == "upper" else b * b
    return math.sqrt(b2 + v_mock + r["variance_history"])


def choose_variant(rows: list[dict[str, Any]], *, dependent: bool, first: tuple[str, float | None], n_current: int,
                   rule: AutoRule = DEFAULT_RULE) -> tuple[dict[str, Any], str, bool] | None:
    got = SHIPPED(rows, dependent=dependent, first=first, n_current=n_current, rule=rule)
    if got is None:
        return None
    scored = [r for r in rows if r.get("method") in rule.candidates and math.isfinite(r.get("predicted_rmse", math.nan))]
    default = next((r for r in scored if (r["method"], r["history_weight"]) == first), None)
    keep = VARIANT["gate"] == "shipped" and not dependent and default is not None and not default["bias_flagged"]
    if keep or not scored:
        return got
    order = {id(r): i for i, r in enumerate(scored)}  # ties as the shipped rule breaks them: the default first
    best = min(scored, key=lambda r: (_score(r, VARIANT["score"], n_current, rule.rate_target),
                                      0 if r is default else 1, order[id(r)]))
    aware = got[2] or best is not default or bool(best.get("bias_flagged"))
    return best, "variant", aware


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("resamples")
    a = ap.parse_args()
    df = pd.read_csv(a.resamples)
    df = df[df["split"] == "random"]
    auto_loso.choose = choose_variant
    out = []
    for gate in ("shipped", "always"):
        for score in ("debiased", "plain", "upper"):
            VARIANT.update(gate=gate, score=score)
            for cname, cset in (("four", CANDIDATES), ("four + majority vote", (*CANDIDATES, "majority_vote"))):
                cells = auto_loso.cell_table(df, [("v", AutoRule(candidates=tuple(cset)))])
                ps = auto_loso.per_shift(cells)
                ps.insert(0, "variant", f"gate {gate}, score {score}, {cname}")
                out.append(ps)
    t = pd.concat(out, ignore_index=True)
    pd.set_option("display.width", 200)
    print(t[["variant", "shift", "coverage_mean", "coverage_min", "geo_ratio", "worst_ratio", "width_mean"]]
          .round(3).to_string(index=False))


if __name__ == "__main__":
    main()
