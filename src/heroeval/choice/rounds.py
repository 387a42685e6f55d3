"""The recommended estimate chosen and sized by out-of-round evidence (issue #39).

When the history holds rounds (model versions, batches, weeks, queries) with
gold, the model checks estimated each past round with its gold left out of
Stage A (:func:`heroeval.checks.model_checks.run_checks`, ``ModelChecks.rounds``):
every candidate's error on a round whose content, rate and labeler behaviour
it has not seen the gold of. The random mock rounds of held-out gold items
come from the history's own content and cannot see such differences; whole
rounds left out can. With at least ``min_rounds`` such rounds,

* **the choice**: each candidate's mean squared error on a new round is
  estimated as ``m + se^2``: ``m = max(0, mean_k(e_k^2 - s_k^2))`` its mean
  squared error on the past rounds beyond their noise (``e_k`` its error on
  round k, ``s_k^2`` that error's sampling variance: the round's gold items
  and the other rounds' gold counts), and ``se`` its standard error on this
  round. The smallest wins (:func:`choose_by_rounds`);
* **the interval**: a prediction interval over rounds, ``estimate ± t sqrt(se^2
  + tau2)`` (:class:`heroeval.inference.bias_aware.PredictiveTest` without a
  bias bound), ``tau2`` the larger of the chosen candidate's ``m`` and the
  same for the choice itself: the choice re-made with each past round left
  out and scored on that round (nested, so that picking the smallest of
  several noisy estimates does not make the interval too short).
  ``mean(e^2)`` estimates ``mu^2 + sigma^2`` when the rounds' errors have mean
  ``mu`` and spread ``sigma``, and an interval of half-width ``z sqrt(mu^2 +
  sigma^2 + se^2)`` covers a normal error of that mean and spread at least at
  the nominal level; Student's t (Satterthwaite degrees of freedom, ``tau2``
  resting on the past rounds) pays for estimating it from few rounds.

Everything here is a pure function of the candidates' rows (their estimate,
standard error and past-round errors), so that stored tables can be replayed
(``benchmarks/auto_loso.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from heroeval.checks.model_checks import transport_spread
from heroeval.estimators.records import Recommendation
from heroeval.estimators.results import EstimateResult
from heroeval.inference.bias_aware import PredictiveTest

__all__ = ["RoundEvidence", "RoundsChoice", "choose_by_rounds", "random_effects_ms", "round_evidence",
           "rounds_recommendation"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RoundEvidence:
    """One candidate's errors on the past rounds: ``errors[k]`` on round ``rounds[k]``, with sampling variance
    ``noise[k]`` (its mock error's variance plus the calibration's part)."""

    rounds: tuple[str, ...]
    errors: FloatArray
    noise: FloatArray

    @property
    def k(self) -> int:
        return len(self.rounds)

    def ms_excess(self, without: str | None = None) -> float:
        """The mean squared error a new round's estimate carries beyond its own noise, from the rounds (all, or all
        but ``without``): :func:`random_effects_ms`; NaN without rounds."""
        keep = np.array([r != without for r in self.rounds], dtype=bool)
        if not keep.any():
            return math.nan
        return random_effects_ms(self.errors[keep], self.noise[keep])


def random_effects_ms(errors: FloatArray, noise: FloatArray) -> float:
    """``mu^2 + var(mu) + tau2``: the expected square of a new round's error under the random-effects model
    ``e_k ~ N(mu, tau2 + noise_k)``, with DerSimonian and Laird's ``tau2`` and the random-effects weighted mean
    ``mu`` (weights ``1 / (noise_k + tau2)``, ``var(mu)`` their sum's inverse).

    Weighting by precision keeps a round whose error was measured on few or hard items from pulling the
    estimate down by its large noise, as the plain ``mean(e^2 - s^2)`` does; adding ``var(mu)`` rather than
    subtracting it makes the figure err on the side of a wider interval when few rounds pin ``mu`` down.
    """
    e, v = np.asarray(errors, dtype=np.float64), np.asarray(noise, dtype=np.float64)
    tau2 = transport_spread(e, np.sqrt(v))[3]  # Cochran's Q and DerSimonian-Laird, as the difference uses them
    ws = 1.0 / (v + tau2)
    mu = float(ws @ e / ws.sum())
    return mu * mu + 1.0 / float(ws.sum()) + tau2


def round_evidence(row: Mapping[str, Any]) -> RoundEvidence | None:
    """A candidate row's past-round errors (``past_error``, ``past_error_se``, ``past_calib_var``,
    ``past_rounds``, ``past_n_items``; the noise at least ``1 / n^2`` on ``n`` gold items; the row's ``variance_history`` stands in where the checks computed no calibration variance),
    or None when the row has none (or a table written before the rounds were named)."""
    e, ids = row.get("past_error") or [], row.get("past_rounds") or []
    n_items = row.get("past_n_items") or []
    if not e or len(ids) != len(e) or len(n_items) != len(e):
        return None
    se = np.asarray(row.get("past_error_se") or [math.nan] * len(e), dtype=np.float64)
    vh = float(row.get("variance_history", 0.0) or 0.0)
    cv = [vh if v is None or not math.isfinite(float(v)) else float(v)
          for v in (row.get("past_calib_var") or [None] * len(e))]
    err = np.asarray(e, dtype=np.float64)
    # an error measured on n gold items is known to no better than one item's worth, 1 / n: a round where every
    # labeler agreed with the gold has a standard error of (nearly) 0, and would otherwise outweigh all others
    floor = 1.0 / np.maximum(np.asarray(n_items, dtype=np.float64), 1.0) ** 2
    noise = np.maximum(se**2 + np.maximum(np.asarray(cv, dtype=np.float64), 0.0), floor)
    ok = np.isfinite(err) & np.isfinite(noise)
    if not ok.any():
        return None
    return RoundEvidence(tuple(str(r) for r, o in zip(ids, ok, strict=True) if o), err[ok], noise[ok])


@dataclass(frozen=True)
class RoundsChoice:
    """What :func:`choose_by_rounds` decided: the chosen ``row``, the variance ``tau2`` its interval adds, the
    number ``k`` of past rounds it rests on, the chosen row's own excess ``ms_chosen`` and the nested choice's
    ``ms_nested``, and how many candidates were judged."""

    row: dict[str, Any]
    tau2: float
    k: int
    ms_chosen: float
    ms_nested: float
    n_candidates: int

    def test(self) -> PredictiveTest:
        """The chosen estimate's interval: a prediction interval over rounds."""
        return PredictiveTest(float(self.row["estimate"]), float(self.row["standard_error"]), 0.0, self.tau2,
                              self.k, label="prediction interval over past rounds")


def choose_by_rounds(rows: Sequence[dict[str, Any]], candidates: Sequence[str], min_rounds: int,
                     first: tuple[str, float | None] | None = None) -> RoundsChoice | None:
    """The candidate with the smallest estimated out-of-round mean squared error (module docstring), or None
    when fewer than ``min_rounds`` past rounds judge any candidate.

    Adds ``round_ms`` (the excess ``m``), ``round_rmse`` (``sqrt(m + se^2)``) and ``round_k`` to every judged
    row. Ties go to ``first`` (the default), then to the rows' order.
    """
    judged: list[tuple[dict[str, Any], RoundEvidence]] = []
    for row in rows:
        if row.get("method") not in candidates or "estimate" not in row:
            continue
        se, est = float(row.get("standard_error", math.nan)), float(row.get("estimate", math.nan))
        ev = round_evidence(row)
        if ev is None or ev.k < min_rounds or not (math.isfinite(se) and math.isfinite(est)):
            continue
        m = ev.ms_excess()
        row["round_ms"], row["round_rmse"], row["round_k"] = m, math.sqrt(m + se * se), ev.k
        judged.append((row, ev))
    if not judged:
        return None

    def rank(item: tuple[dict[str, Any], RoundEvidence], ms: float) -> tuple[float, int, int]:
        row = item[0]
        is_first = first is not None and (row["method"], row["history_weight"]) == first
        return ms + float(row["standard_error"]) ** 2, 0 if is_first else 1, judged.index(item)

    best, ev_best = min(judged, key=lambda it: rank(it, it[0]["round_ms"]))
    # the choice re-made without each past round, scored on that round
    nested_e2: list[float] = []
    for g in sorted({r for _, ev in judged for r in ev.rounds}):
        having = [it for it in judged if g in it[1].rounds and it[1].k > 1]
        if not having:
            continue
        _, pick_ev = min(having, key=lambda it: rank(it, it[1].ms_excess(without=g)))
        j = pick_ev.rounds.index(g)
        nested_e2.append(float(pick_ev.errors[j] ** 2 - pick_ev.noise[j]))
    ms_nested = max(0.0, float(np.mean(nested_e2))) if nested_e2 else math.nan
    ms_chosen = float(best["round_ms"])
    tau2 = max(ms_chosen, ms_nested) if math.isfinite(ms_nested) else ms_chosen
    return RoundsChoice(best, tau2, ev_best.k, ms_chosen, ms_nested, len(judged))


NAMES = {"hero1": "HERO-1", "hero_joint": "HERO joint", "gold_proportion": "the gold-only calibration",
         "rogan_gladen": "Rogan–Gladen", "majority_vote": "majority vote", "dawid_skene": "current-only Dawid–Skene"}


def rounds_recommendation(rc: RoundsChoice, results: Mapping[tuple[str, float | None], EstimateResult],
                          rows: list[dict[str, Any]], dep_txt: str) -> Recommendation:
    """The recommendation :func:`choose_by_rounds` made: the chosen estimate with its prediction interval over
    rounds, and the reason in words."""
    best = rc.row
    m, w = best["method"], best["history_weight"]
    r = results[(m, w)]
    before = r.confidence_interval(0.95)
    test = rc.test()
    # majority vote's own interval is for the majority-label rate; this one is for the gold rate, since the past
    # rounds' errors are against their gold
    kept = tuple(n for n in r.notes if "majority-label rate" not in n)
    r = replace(r, test=test, details={**r.details, "round_ms": rc.tau2, "rounds_judged": rc.k},
                notes=(*kept, f"prediction interval for the gold rate over {rc.k} past rounds: their excess error "
                              f"{math.sqrt(rc.tau2):.3g} added in quadrature"))
    after = r.confidence_interval(0.95)
    wtxt = f" (history weight {w:g})" if w is not None else ""
    judged = sorted((x for x in rows if "round_rmse" in x), key=lambda x: x["round_rmse"])
    others = ", ".join(f"{NAMES.get(x['method'], x['method'])}"
                       + (f"@{x['history_weight']:g}" if x["method"] == "hero1" else "")
                       + f" {x['round_rmse']:.3g}" for x in judged if x is not best)
    who = m if m != "hero_joint" else f"hero_joint (judged by HERO-1 at weight {w:g}, whose likelihood it uses)"
    nested = (f"; the choice itself, re-made with each past round left out, missed by {math.sqrt(rc.ms_nested):.3g} "
              "beyond the noise" if math.isfinite(rc.ms_nested) else "")
    reason = (f"{m}{wtxt}: chosen by its error on the history's own rounds: with each of {rc.k} past rounds' gold "
              f"left out of Stage A in turn, {who} had the smallest estimated error on a new round (RMSE "
              f"{best['round_rmse']:.3g}: its past rounds' error beyond their noise, {math.sqrt(rc.ms_chosen):.3g}, "
              f"and its standard error here, {float(best['standard_error']):.2g}, in quadrature; the others: "
              f"{others or 'none judged'}){nested}; the 95 % interval is a prediction interval over rounds: the "
              f"larger of those two excess errors ({math.sqrt(rc.tau2):.3g}) added to the standard error in "
              f"quadrature with a t critical value for a variance estimated from {rc.k} rounds, which makes it "
              f"{after.high - after.low:.3g} wide (the method's own interval: {before.high - before.low:.3g}); "
              f"{dep_txt}")
    return Recommendation(m, w, r, reason, rows, "ok", dict(results))
