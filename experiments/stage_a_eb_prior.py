"""Issue #18 item 3: Stage A with an empirical-Bayes prior per labeler (shrinkage towards the pool), then HERO-1.

    .venv/bin/python -m experiments.stage_a_eb_prior --resamples 10                      # resamples 0..9
    .venv/bin/python -m experiments.stage_a_eb_prior --first 10 --resamples 10 --append  # add 10..19
    .venv/bin/python -m experiments.stage_a_eb_prior --summarize-only                   # tables from the rows
    .venv/bin/python -m experiments.stage_a_eb_prior --check                            # k = 0 against calibrate

The prior. For the sensitivities, ``Beta(k_a m_a, k_a (1 - m_a))`` fitted by
the beta-binomial method of moments of ``rogan_gladen(shrink="eb")``
(``heroeval.stage_a.prior.beta_binomial_prior``) on the history's gold counts
(``tp_j`` successes of ``tp_j + fn_j``); for the specificities likewise on
``tn_j`` of ``tn_j + fp_j``. Stage A becomes MAP-EM (gold-anchored two-coin
Dawid–Skene, one prevalence per history round, as in heroeval) with the
M-step

    alpha_j = (sum_i gamma_i z_ij + k_a m_a) / (sum_i gamma_i + k_a)
    beta_j  = (sum_i (1 - gamma_i)(1 - z_ij) + k_b m_b) / (sum_i (1 - gamma_i) + k_b)

over labeler j's labels (gold items with gamma = their gold label): the
objective is the log-likelihood plus ``k m log alpha_j + k (1 - m) log(1 - alpha_j)``
per labeler (a ``Beta(1 + k m, 1 + k (1 - m))`` density, the convention of
heroeval's ``pseudo_count``), so on gold items alone the fit is the
empirical-Bayes posterior mean ``(tp + k m) / (tp + fn + k)`` of ``_eb_shrink``.
When the method of moments finds no heterogeneity (``k = inf``) k is capped
at ``K_CAP = 1e6``: every labeler's parameter then sits within about
``n_j / 1e6`` of the pool value. The EM is this script's own NumPy code
(``fit_eb``: per-annotation bincounts, SQUAREM from ``heroeval.core.squarem``,
heroeval's starting values ``initial_values``, parameters clipped to
[1e-9, 1 - 1e-9] as heroeval does, stop when one plain step moves no
probability by more than ``--tol``, default 1e-9). With k = 0 it is heroeval's
Stage A: ``--check``, ``tests/experiments/test_stage_a_eb_prior.py`` and the run
itself (on the first resample of every set and shift, column ``k0_gap``)
compare it with ``heroeval.calibrate`` (alpha, beta, prevalences to 1e-6).

Protocol: every binary set of ``benchmarks/real_data.py`` (``BINARY``), the
benchmark protocol's splits ``make_split(data, r, 0.10, 200, shift, 2026)``
(``--shifts``, default none and rate). Per split: ``cal = calibrate(history)``
(no checks), and four estimates of the current round, all with
``exclude_new_labelers=True`` as ``hero benchmark`` calls them:

* ``hero1``: ``hero1(current, cal)``, HERO-1 on the plain Stage A fit;
* ``hero1_eb``: ``hero1(current, replace(cal, alpha=, beta=, round_prevalence=))``
  at the EB-prior fit. Its standard error and interval use ``cal``'s
  parameter covariance, which belongs to the plain fit: they are
  approximate (and ignore that the prior is fitted). RMSE is the measure;
* ``rg``: ``rogan_gladen(current, cal)``;
* ``rg_eb``: ``rogan_gladen(current, cal, shrink="eb")``.

Writes the per-resample rows (``stage_a_eb_prior_resamples.csv.gz``: estimate,
se, interval, truth, status, and for hero1_eb the prior's ``m``, ``k`` and the
EM's map evaluations) and the summary per set, shift and method
(``stage_a_eb_prior.csv``: RMSE, bias, coverage of the 95 % interval, mean
width, RMSE over the best of the four in the cell), and prints the tables:
per shift the geometric mean over sets of each method's RMSE ratio to the
best of the four; hero1_eb against hero1 in-sample and leave-one-set-out (for
each held-out set, hero1_eb is chosen over hero1 when, on the other sets'
cells of every shift run, its geometric-mean RMSE ratio to hero1 is below 1
and its mean coverage is not more than 0.01 below hero1's, as in
``rg_shrinkage.py``); the per-set table.

Result (resamples 0..19, shifts none, half and rate, 12 sets: 36 cells of 20
splits; the rows are ``benchmarks/results/research/robustness/stage_a_eb_prior_resamples.csv.gz``,
run as ``--resamples 10 --shifts none --append``, the same for rate and for
half, then ``--first 10 --resamples 10 --shifts none,rate,half --append``;
about 33 minutes in one process on a shared 2-core machine).

Geometric mean over the 12 sets of each method's RMSE over the best of the four
in the cell (and mean coverage of the nominal 95 % interval):

    shift   hero1         hero1_eb      rg            rg_eb
    none    1.308 (0.883) 1.292 (0.912) 1.581 (0.958) 1.702 (0.958)
    half    1.196 (0.896) 1.209 (0.892) 1.402 (0.954) 1.528 (0.971)
    rate    1.547 (0.692) 1.298 (0.767) 1.359 (0.829) 1.220 (0.929)
    all     1.342 (0.824) 1.266 (0.857) 1.444 (0.914) 1.469 (0.953)

hero1_eb against hero1: geometric-mean RMSE ratio 0.988 (none; better in 6 of
12 sets), 1.011 (half; 9 of 12, by little), 0.840 (rate; 8 of 12), 0.943 over
the 36 cells. Leave-one-set-out chooses hero1_eb for every held-out set, so
the held-out ratios equal the in-sample ones. The gain is where a crowd has
many labelers with few gold items each and HERO-1's plain fit is biased:
snow_rte RMSE 0.0249 -> 0.0194 (none), 0.0655 -> 0.0369 (rate; coverage 0.45
-> 0.95), snow_temp 0.0408 -> 0.0170 (rate), trec2011_crowd 0.0704 -> 0.0453
(none), 0.1637 -> 0.1180 (rate, still twice rg_eb's 0.0530), sentiment_polarity
0.0432 -> 0.0320 (rate), adultcontent2 0.1017 -> 0.0907 (rate). duchenne does
not move (0.0434/0.0439, 0.0928/0.0936, 0.1169/0.1170). It is worse on the two
sets the issue names: bluebirds 0.0799 -> 0.1169 (none), 0.0855 -> 0.1440
(half), 0.1132 -> 0.1599 (rate) (with 10 resamples "none" had gone the other
way, 0.0517 -> 0.0410: 10 resamples of 43 items are too few to tell), and
mre_treat 0.0158 -> 0.0200, 0.0230 -> 0.0244, 0.0584 -> 0.0602; and a little on
zencrowd (0.1275 -> 0.1295, 0.0546 -> 0.0592) and possent_zheng (none 0.0224 ->
0.0262). On bluebirds (39 labelers, all labelling every item, 6 gold items in a history of 65)
the moment prior is strong (median k_a about 3, k = inf in 5-8 of 20 history
fits), and pulling good and bad labelers towards one pool rate costs more
than the noise it removes; HERO-1 on the plain fit stays the best of the four
there. Under rate shift no variant of HERO-1 reaches rg_eb (gm 1.220), and
hero1_eb's intervals (the plain fit's covariance) cover 0.767 against 0.692.
RMSE leaves out failed estimates (``failed`` in the summary): rg was
unidentified in 3 and rg_eb in 6 of bluebirds' 60 splits, no other (rg_eb
also gave the boundary 1 in 2 more, counted).
The intervals of hero1_eb are approximate; widths are nearly those of hero1
(0.161-0.176 against 0.159-0.172).

The k = 0 check within the run (resamples 0 and 10 of every set and shift, 72
fits against ``calibrate``'s default tol 1e-8): at most 1.2e-7 on 10 sets,
2.9e-6 on product_er and 1.5e-3 on adultcontent2. The latter is a flat ridge,
not a different fit: on adultcontent2 resample 0 the gap is one labeler with 4
annotations, both fits converged (this EM to 5e-12, ``calibrate`` at tol 1e-12
moves by 5e-9) and their log-likelihoods agree to 1e-11 relative.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import expit, logit

import heroeval as he
from heroeval.core.squarem import Stop, squarem
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.gold import gold_counts, initial_values
from heroeval.stage_a.prior import beta_binomial_prior as _eb_prior
from heroeval.workflows.benchmark import load_folder, make_split

from benchmarks.real_data import BINARY
from experiments._variant_loso import add_choice, cell_summary, comparison_table

HERE = Path(__file__).resolve().parents[1]
SHIFTS = ("none", "rate")
METHODS = ("hero1", "hero1_eb", "rg", "rg_eb")
K_CAP = 1e6
EPS = 1e-9
_LMAX = float(logit(1 - EPS))

FloatArray = npt.NDArray[np.float64]


# --------------------------------------------------------------------------- the EB-prior Stage A


@dataclass(frozen=True)
class Prior:
    """``Beta(k m, k (1 - m))`` for the sensitivities (``_a``) and the specificities (``_b``); k capped at K_CAP."""

    m_a: float
    k_a: float
    m_b: float
    k_b: float
    capped_a: bool
    capped_b: bool


def eb_prior(history: AnnotationSet) -> Prior:
    """The beta-binomial method-of-moments prior (``_eb_prior``) on the history's per-labeler gold counts."""
    tp, fn, tn, fp = (x.astype(np.float64) for x in gold_counts(history))
    m_a, k_a = _eb_prior(tp, tp + fn)
    m_b, k_b = _eb_prior(tn, tn + fp)
    return Prior(m_a, min(k_a, K_CAP), m_b, min(k_b, K_CAP), math.isinf(k_a), math.isinf(k_b))


@dataclass(frozen=True)
class EBFit:
    alpha: FloatArray
    beta: FloatArray
    prev: FloatArray
    objective: float
    n_eval: int
    converged: bool
    change: float


class _Arrays:
    """The history as flat per-annotation arrays (item, code = 2 labeler + label) and per-item gold and round."""

    def __init__(self, ds: AnnotationSet) -> None:
        self.n_items = ds.n_items
        self.J = ds.n_labelers
        self.G = ds.n_rounds
        self.item = np.repeat(np.arange(ds.n_items), np.diff(ds.item_ptr))
        self.code = 2 * ds.labeler.astype(np.int64) + ds.label.astype(np.int64)
        self.code_counts = np.bincount(self.code, minlength=2 * self.J).astype(np.float64)
        self.gold = ds.gold.astype(np.int64)
        self.gpos = np.flatnonzero(self.gold == 1)
        self.gneg = np.flatnonzero(self.gold == 0)
        self.free = self.gold < 0
        self.round = ds.item_round.astype(np.int64)
        self.round_size = np.bincount(self.round, minlength=self.G).astype(np.float64)


def _em_map(x: _Arrays, alpha: FloatArray, beta: FloatArray, prev: FloatArray, pr: Prior,
            need: bool) -> tuple[FloatArray, FloatArray, FloatArray, float]:
    """One MAP-EM step and the objective (log-likelihood + log prior) at its input."""
    a = np.clip(alpha, EPS, 1 - EPS)
    b = np.clip(beta, EPS, 1 - EPS)
    p = np.clip(prev, EPS, 1 - EPS)
    la1 = np.empty(2 * x.J)
    la0 = np.empty(2 * x.J)
    la1[0::2], la1[1::2] = np.log1p(-a), np.log(a)
    la0[0::2], la0[1::2] = np.log(b), np.log1p(-b)
    L = np.bincount(x.item, weights=(la1 - la0)[x.code], minlength=x.n_items)
    lp1, lp0 = np.log(p), np.log1p(-p)
    eta = L + (lp1 - lp0)[x.round]
    gamma = expit(eta)
    gamma[x.gpos] = 1.0
    gamma[x.gneg] = 0.0
    obj = math.nan
    if need:
        lam0 = float(x.code_counts @ la0)
        softplus = np.logaddexp(0.0, eta)
        ll = (lam0 + float(lp0[x.round].sum()) + float(softplus[x.free].sum())
              + float(L[x.gpos].sum() + (lp1 - lp0)[x.round[x.gpos]].sum()))
        prior = (pr.k_a * float(np.sum(pr.m_a * np.log(a) + (1 - pr.m_a) * np.log1p(-a)))
                 + pr.k_b * float(np.sum(pr.m_b * np.log(b) + (1 - pr.m_b) * np.log1p(-b))))
        obj = ll + prior
    s1 = np.bincount(x.code, weights=gamma[x.item], minlength=2 * x.J)
    s0 = x.code_counts - s1
    pos, neg = s1[0::2] + s1[1::2], s0[0::2] + s0[1::2]
    with np.errstate(invalid="ignore", divide="ignore"):
        a2 = np.where(pos + pr.k_a > 0, (s1[1::2] + pr.k_a * pr.m_a) / (pos + pr.k_a), 0.5)
        b2 = np.where(neg + pr.k_b > 0, (s0[0::2] + pr.k_b * pr.m_b) / (neg + pr.k_b), 0.5)
    p2 = np.bincount(x.round, weights=gamma, minlength=x.G) / np.maximum(x.round_size, 1.0)
    return np.clip(a2, EPS, 1 - EPS), np.clip(b2, EPS, 1 - EPS), np.clip(p2, EPS, 1 - EPS), obj


def fit_eb(history: AnnotationSet, prior: Prior, *, tol: float = 1e-9, max_iter: int = 20_000,
           start: tuple[FloatArray, FloatArray, FloatArray] | None = None, accelerate: bool = True) -> EBFit:
    """MAP-EM of the gold-anchored two-coin model under ``prior`` (SQUAREM on the logits).

    Starts at heroeval's ``initial_values(history)`` unless ``start`` is given; stops when one plain EM
    step moves no probability by more than ``tol`` or after ``max_iter`` map evaluations.
    """
    x = _Arrays(history)
    J = x.J
    a0, b0, p0 = initial_values(history) if start is None else start

    def F(th: FloatArray, need: bool) -> tuple[FloatArray, float]:
        p = expit(th)
        a2, b2, p2, obj = _em_map(x, p[:J], p[J:2 * J], p[2 * J:], prior, need)
        return np.clip(logit(np.concatenate([a2, b2, p2])), -_LMAX, _LMAX), obj

    def dist(u: FloatArray, v: FloatArray) -> float:
        return float(np.max(np.abs(expit(u) - expit(v))))

    th0 = np.clip(logit(np.concatenate([a0, b0, p0])), -_LMAX, _LMAX)
    res = squarem(F, th0, distance=dist, stop=Stop(tol, max_iter), accelerate=accelerate,
                  project=lambda t: np.clip(t, -_LMAX, _LMAX))
    p = expit(res.x)
    obj = _em_map(x, p[:J], p[J:2 * J], p[2 * J:], prior, True)[3]
    return EBFit(p[:J], p[J:2 * J], p[2 * J:], obj, res.n_eval, res.converged, res.change)


ZERO = Prior(0.5, 0.0, 0.5, 0.0, False, False)
"""No prior: plain maximum likelihood, heroeval's Stage A."""


def with_fit(cal: Calibration, fit: EBFit) -> Calibration:
    """``cal`` with the EB fit's parameters (its covariance, gold scores and history stay those of the plain fit)."""
    return replace(cal, alpha=fit.alpha, beta=fit.beta, round_prevalence=fit.prev)


def check_k0(history: AnnotationSet, cal: Calibration | None = None) -> float:
    """Largest |difference| between ``fit_eb`` with k = 0 and ``calibrate(history)`` (alpha, beta, prevalences)."""
    cal = he.calibrate(history, tol=1e-12, max_iter=100_000) if cal is None else cal
    f = fit_eb(history, ZERO, tol=1e-12, max_iter=100_000)
    return float(max(np.max(np.abs(f.alpha - cal.alpha)), np.max(np.abs(f.beta - cal.beta)),
                     np.max(np.abs(f.prev - cal.round_prevalence))))


# --------------------------------------------------------------------------- the protocol


def _row(name: str, shift: str, r: int, method: str, x: he.EstimateResult, truth: float, **extra: float) -> dict:
    lo, hi = x.confidence_interval(0.95)
    return {"dataset": name, "shift": shift, "resample": r, "method": method, "estimate": x.estimate,
            "se": x.standard_error, "ci_low": lo, "ci_high": hi, "truth": truth, "status": x.status, **extra}


def run(data_dir: Path, first: int, resamples: int, only: list[str], shifts: tuple[str, ...],
        tol: float, save: Callable[[pd.DataFrame], object] | None = None) -> pd.DataFrame:
    """The protocol's rows; ``save`` gets the rows so far after each set."""
    rows: list[dict] = []
    for name, suffix in BINARY:
        if only and name not in only:
            continue
        t = time.perf_counter()
        data = load_folder(data_dir / name, binary_suffix=suffix)
        for shift in shifts:
            for r in range(first, first + resamples):
                sp = make_split(data, r, 0.10, 200, shift, 2026)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cal = he.calibrate(sp.history, checks=False)
                    pr = eb_prior(sp.history)
                    fit = fit_eb(sp.history, pr, tol=tol)
                    cur = sp.current
                    # the k -> 0 check on the first resample of each cell: the k = 0 fit against calibrate's
                    gap = math.nan
                    if r == first:
                        z = fit_eb(sp.history, ZERO, tol=1e-11, max_iter=50_000)
                        gap = float(max(np.max(np.abs(z.alpha - cal.alpha)), np.max(np.abs(z.beta - cal.beta)),
                                        np.max(np.abs(z.prev - cal.round_prevalence))))
                    rows.append(_row(data.name, shift, r, "hero1", he.hero1(cur, cal, exclude_new_labelers=True),
                                     sp.truth, k0_gap=gap))
                    rows.append(_row(data.name, shift, r, "hero1_eb",
                                     he.hero1(cur, with_fit(cal, fit), exclude_new_labelers=True), sp.truth,
                                     m_a=pr.m_a, k_a=pr.k_a, m_b=pr.m_b, k_b=pr.k_b, em_evals=fit.n_eval,
                                     em_converged=fit.converged,
                                     max_shift=float(max(np.max(np.abs(fit.alpha - cal.alpha)),
                                                         np.max(np.abs(fit.beta - cal.beta))))))
                    for v, m in (("none", "rg"), ("eb", "rg_eb")):
                        rows.append(_row(data.name, shift, r, m,
                                         he.rogan_gladen(cur, cal, exclude_new_labelers=True, shrink=v),  # type: ignore[arg-type]
                                         sp.truth))
        print(f"{data.name}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        if save is not None:
            save(pd.DataFrame(rows))
    return pd.DataFrame(rows)


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    out = cell_summary(rows, "method")
    out["ratio_to_best"] = out["rmse"] / out.groupby(["dataset", "shift"])["rmse"].transform("min")
    return out


def _wide(summ: pd.DataFrame) -> pd.DataFrame:
    w = summ.pivot_table(index=["dataset", "shift"], columns="method",
                         values=["rmse", "coverage", "mean_width", "bias", "ratio_to_best"])
    w.columns = [f"{a}_{b}" for a, b in w.columns]
    w["log_ratio"] = np.log(w["rmse_hero1_eb"] / w["rmse_hero1"])
    return w.reset_index()


def tables(summ: pd.DataFrame) -> str:
    w = _wide(summ)
    shifts = [s for s in ("none", "half", "rate") if s in set(w["shift"])]
    lines = ["Geometric mean over sets of RMSE / best of the four in the cell; coverage and width: means over sets",
             "", "| shift | sets | " + " | ".join(f"gm ratio {m}" for m in METHODS) + " | "
             + " | ".join(f"coverage {m}" for m in METHODS) + " | " + " | ".join(f"width {m}" for m in METHODS) + " |",
             "|---|---|" + "---|" * (3 * len(METHODS))]
    for sh in (*shifts, "all"):
        x = w if sh == "all" else w[w["shift"] == sh]
        lines.append(f"| {sh} | {len(x)} | "
                     + " | ".join(f"{math.exp(np.log(x[f'ratio_to_best_{m}']).mean()):.3f}" for m in METHODS) + " | "
                     + " | ".join(f"{x[f'coverage_{m}'].mean():.3f}" for m in METHODS) + " | "
                     + " | ".join(f"{x[f'mean_width_{m}'].mean():.3f}" for m in METHODS) + " |")
    add_choice(w, "hero1", "hero1_eb")
    lines += ["", "hero1_eb against hero1 (plain Stage A), in-sample and leave-one-set-out", "",
              *comparison_table(w, "hero1", "hero1_eb", shifts, ("plain", "eb"))]
    lines += ["", "| set | shift | " + " | ".join(f"RMSE {m}" for m in METHODS) + " | bias hero1 | bias hero1_eb | "
              + " | ".join(f"cov {m}" for m in METHODS) + " | LOSO choice |",
              "|---|---|" + "---|" * (2 * len(METHODS) + 3)]
    for _, r in w.iterrows():
        lines.append(f"| {r['dataset']} | {r['shift']} | " + " | ".join(f"{r[f'rmse_{m}']:.4f}" for m in METHODS)
                     + f" | {r['bias_hero1']:+.4f} | {r['bias_hero1_eb']:+.4f} | "
                     + " | ".join(f"{r[f'coverage_{m}']:.2f}" for m in METHODS) + f" | {r['chosen']} |")
    return "\n".join(lines)


def prior_table(rows: pd.DataFrame) -> str:
    d = rows[rows["method"] == "hero1_eb"]
    g = d.groupby(["dataset", "shift"], sort=False).agg(
        m_a=("m_a", "median"), k_a=("k_a", "median"), capped_a=("k_a", lambda k: int((k >= K_CAP).sum())),
        m_b=("m_b", "median"), k_b=("k_b", "median"), capped_b=("k_b", lambda k: int((k >= K_CAP).sum())),
        em_evals=("em_evals", "median"), not_converged=("em_converged", lambda c: int((~c.astype(bool)).sum())),
        max_shift=("max_shift", "median")).reset_index()
    lines = ["The prior (medians over resamples; capped: resamples with k = inf, set to 1e6) and the EB fit",
             "", "| set | shift | m_a | k_a | capped | m_b | k_b | capped | EM evals | not converged "
             "| max abs(eb - plain) alpha, beta |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in g.iterrows():
        lines.append(f"| {r['dataset']} | {r['shift']} | {r['m_a']:.3f} | {r['k_a']:.3g} | {r['capped_a']} "
                     f"| {r['m_b']:.3f} | {r['k_b']:.3g} | {r['capped_b']} | {r['em_evals']:.0f} "
                     f"| {r['not_converged']} | {r['max_shift']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(HERE.parent / "shared" / "data"))
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=10)
    ap.add_argument("--shifts", default=",".join(SHIFTS), help="comma-separated: none, half, rate")
    ap.add_argument("--only", default="", help="comma-separated data set names")
    ap.add_argument("--tol", type=float, default=1e-9, help="the EB fit's stopping tolerance")
    ap.add_argument("--out", default=str(HERE / "benchmarks" / "results" / "research" / "robustness"))
    ap.add_argument("--append", action="store_true", help="add to the existing per-resample rows")
    ap.add_argument("--summarize-only", action="store_true")
    ap.add_argument("--check", action="store_true",
                    help="only compare the k = 0 fit with calibrate on resample 0 of each set (shift none)")
    a = ap.parse_args()
    only = [s for s in a.only.split(",") if s]
    if a.check:
        for name, suffix in BINARY:
            if only and name not in only:
                continue
            data = load_folder(Path(a.data) / name, binary_suffix=suffix)
            sp = make_split(data, 0, 0.10, 200, "none", 2026)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                print(f"{name}: max |k=0 fit - calibrate| = {check_k0(sp.history):.2e}", flush=True)
        return
    out = Path(a.out)
    rows_f = out / "stage_a_eb_prior_resamples.csv.gz"
    if a.summarize_only:
        rows = pd.read_csv(rows_f)
    else:
        old = pd.read_csv(rows_f) if a.append and rows_f.exists() else None
        out.mkdir(parents=True, exist_ok=True)

        def save(new: pd.DataFrame) -> pd.DataFrame:
            rows = new if old is None else pd.concat([old, new], ignore_index=True).drop_duplicates(
                ["dataset", "shift", "resample", "method"], keep="last")
            rows.to_csv(rows_f, index=False, float_format="%.10g")
            return rows

        t0 = time.perf_counter()
        rows = save(run(Path(a.data), a.first, a.resamples, only, tuple(a.shifts.split(",")), a.tol, save))
        print(f"total {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    summ = summarize(rows)
    summ.to_csv(out / "stage_a_eb_prior.csv", index=False, float_format="%.6g")
    print(f"resamples {int(rows['resample'].min())}..{int(rows['resample'].max())}")
    print(tables(summ))
    print()
    print(prior_table(rows))
    gaps = rows.loc[rows["method"] == "hero1", "k0_gap"].dropna()
    print(f"\nk = 0 fit against calibrate (first resample of each cell, {gaps.size} fits): "
          f"largest |difference| in alpha, beta, prevalences {gaps.max():.2e}")


if __name__ == "__main__":
    main()
