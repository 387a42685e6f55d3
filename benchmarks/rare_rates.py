"""Rare-rate study (issue 19): coverage of HERO-1's intervals and upper bounds for rates of 0 to 5 %.

Design (every choice a flag):

* J = 10 labelers; sensitivities the paper's, alpha_j ~ Beta(0.85 k, 0.15 k) with k = 12;
  specificities high, beta_j ~ Uniform(0.95, 0.99). Labels independent given Y.
* History: N = 3,000 items at prevalence 0.10, gold on 10 % of them (300 gold items),
  labelled like the current round (dense: all 10 labelers; sparse: 3 distinct labelers drawn
  uniformly per item). Stage A (``heroeval.calibrate``, sandwich covariance) on it.
* The labelers and the history are redrawn every ``--block`` replicates (default 20); one history
  serves that block of replicates in every (mu, n) cell, so a cell's 2,000 replicates see 100
  histories and its coverage includes the history's uncertainty.
* Current round: n in {200, 1000, 10000} items, Y_i ~ Bernoulli(mu), mu in {0, .001, .005, .01, .02, .05};
  the target is the population rate mu. Items are drawn as counts over the (labeler set, label
  pattern) cells, which is the same i.i.d. design as item by item and lets n = 10,000 cost nothing.
* HERO-1 given the calibration is the 1-D score root; its intervals are computed by the library's
  own code (heroeval.estimators.inversion.ScoreTest, the same object ``hero1`` attaches).

Reported per cell: coverage of the score-inversion interval (two-sided 95 %, with the one-sided
bound at an estimate of 0, as the library reports it) and of the one-sided 95 % upper bound; the same
for the previous logit interval from the influence-function SE (an estimate of 0 had no interval:
counted as not covering, and the share of such rounds is given); the default (``auto``) interval; the
bounds' means; Clopper–Pearson on majority-vote labels (ties, possible with 10 labels, count as
positive); and the expert sample size m whose Clopper–Pearson upper bound has the same mean as
HERO-1's (the bound's worth in expert labels).

    .venv/bin/python -m benchmarks.rare_rates --reps 2000 --out benchmarks/results/rare_rates
"""

from __future__ import annotations

import argparse
import math
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.special import expit, logit
from scipy.stats import beta as beta_dist
from scipy.stats import binom, norm

import heroeval as he
from heroeval.estimators.inversion import PatternTable, ScoreTest, pattern_table
from heroeval.estimators.results import SCORE_COUNT
from heroeval.estimators.score_equation import psi
from heroeval.stage_a.scoring import kappa

MUS = (0.0, 0.001, 0.005, 0.01, 0.02, 0.05)
NS = (200, 1000, 10000)
LEVEL = 0.95


def draw_history(gen: np.random.Generator, a: np.ndarray, b: np.ndarray, N: int, prev: float, gold: float,
                 k: int | None) -> he.AnnotationSet:
    J = a.size
    y = gen.random(N) < prev
    if k is None:
        labs = np.tile(np.arange(J), (N, 1))
    else:
        labs = np.argsort(gen.random((N, J)), axis=1)[:, :k]
    p1 = np.where(y[:, None], a[labs], 1 - b[labs])
    z = (gen.random(labs.shape) < p1).astype(int)
    items = np.repeat(np.arange(N), labs.shape[1])
    g = np.flatnonzero(gen.random(N) < gold)
    return he.AnnotationSet.from_arrays(items, [f"L{j:02d}" for j in labs.ravel()], z.ravel(),
                                        gold=(g, y[g].astype(int)))


def template(J: int, k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """One item per possible labeler set: item_ptr and labeler index (calibration order)."""
    sets = [tuple(range(J))] if k is None else list(combinations(range(J), k))
    lab = np.concatenate([np.array(s) for s in sets])
    ptr = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(np.int64)
    return ptr, lab.astype(np.int64)


def cp_upper(x: np.ndarray, n: int, level: float) -> np.ndarray:
    out = np.ones(np.shape(x))
    x = np.asarray(x)
    ok = x < n
    out[ok] = beta_dist.ppf(level, x[ok] + 1, n - x[ok])
    return out


def expected_cp_upper(m: int, mu: float, level: float) -> float:
    if mu == 0:
        return float(1 - (1 - level) ** (1 / m))
    lo, hi = int(binom.ppf(1e-9, m, mu)), int(binom.ppf(1 - 1e-9, m, mu))
    x = np.arange(lo, hi + 1)
    return float(binom.pmf(x, m, mu) @ cp_upper(x, m, level))


def expert_worth(bound: float, mu: float, level: float) -> float:
    """The expert sample size whose Clopper–Pearson upper bound has mean ``bound``."""
    if not (math.isfinite(bound) and bound > mu):
        return math.nan
    if mu == 0:
        return math.log(1 - level) / math.log1p(-bound)
    lo, hi = 1, 2
    while expected_cp_upper(hi, mu, level) > bound:
        hi *= 2
        if hi > 10**8:
            return math.inf
    lo = hi // 2
    while hi - lo > max(1, lo // 200):
        mid = (lo + hi) // 2
        if expected_cp_upper(mid, mu, level) > bound:
            lo = mid
        else:
            hi = mid
    return float(hi)


def run(args: argparse.Namespace) -> pd.DataFrame:
    J = args.J
    designs = {d: k for d, k in {"dense": None, "sparse3": 3}.items() if d in args.designs}
    MUS, NS = args.mus, args.ns
    z2 = float(norm.ppf(0.5 + LEVEL / 2))
    z1 = float(norm.ppf(LEVEL))
    rows = []
    gen = np.random.default_rng(args.seed)
    n_blocks = math.ceil(args.reps / args.block)
    for dname, k in designs.items():
        ptr, lab = template(J, k)
        n_sets = ptr.size - 1
        klen = J if k is None else k
        rec: dict[tuple[float, int], list[tuple[float, ...]]] = {(m, n): [] for m in MUS for n in NS}
        t0 = time.time()
        for blk in range(n_blocks):
            a = gen.beta(args.k * 0.85, args.k * 0.15, J)
            b = gen.uniform(args.spec_low, args.spec_high, J)
            hist = draw_history(gen, a, b, args.N, args.history_prev, args.gold, k)
            cal = he.calibrate(hist)
            idx = np.array([cal.index_of()[f"L{j:02d}"] for j in range(J)])
            lab_c = idx[lab]
            # true pattern probabilities (for drawing) and the calibration's table (for estimating)
            true_tab = pattern_table(ptr, lab_c, a[np.argsort(idx)], b[np.argsort(idx)])
            est_tab = pattern_table(ptr, lab_c, cal.alpha, cal.beta)
            set_of_row = np.repeat(np.arange(n_sets), 2**klen)
            Z = ((np.arange(2**klen)[:, None] >> np.arange(klen)) & 1)
            npos = np.tile(Z.sum(axis=1), n_sets)
            mv = (2 * npos >= klen).astype(float)  # ties (5 of 10) count as positive
            f1 = est_tab.w1  # each set has one item in the template
            f0 = est_tab.w0
            V = cal.parameter_covariance
            P = cal.n_parameters
            UaUb = (est_tab.Ua - est_tab.Ub).tocsr()
            for mu in MUS:
                pr = (mu * true_tab.w1 + (1 - mu) * true_tab.w0) / n_sets
                pr = pr / pr.sum()
                for n in NS:
                    for _ in range(args.block):
                        cnt = gen.multinomial(n, pr).astype(float)
                        nz = np.flatnonzero(cnt)
                        L, c = est_tab.L[nz], cnt[nz]
                        n_s = np.bincount(set_of_row[nz], weights=c, minlength=n_sets)
                        tab = PatternTable(est_tab.L, f1 * n_s[set_of_row], f0 * n_s[set_of_row],
                                           est_tab.Ua, est_tab.Ub, n)
                        test = ScoreTest(center=0.0, L=L, counts=c, item_ptr=ptr, labeler=lab_c, alpha=cal.alpha,
                                         beta=cal.beta, space="stage_a", V=V, n_parameters=P)
                        test._cache["table"] = tab

                        def f(m: float, L: np.ndarray = L, c: np.ndarray = c) -> float:
                            return float(c @ psi(m, L))

                        if not f(0.0) > 0:
                            est, status = 0.0, "boundary_0"
                        elif not f(1.0) < 0:
                            est, status = 1.0, "boundary_1"
                        else:
                            est, status = brentq(f, 0.0, 1.0, xtol=1e-15), "interior"
                        object.__setattr__(test, "center", est)
                        # score inversion: two-sided (one-sided at a boundary estimate) and upper bound
                        up = test.interval(LEVEL, "less")[1]
                        if status == "boundary_0":
                            lo2, hi2 = 0.0, up
                        else:
                            lo2, hi2 = test.interval(LEVEL, "two-sided")
                        # previous: logit interval from the influence SE (none at the boundary)
                        if status == "interior":
                            ps = psi(est, L)
                            info = float(c @ ps**2) / n
                            pbar = float(c @ ps) / n
                            vcur = float(c @ (ps - pbar) ** 2) / n**2 / info**2
                            G = np.asarray(UaUb.T[:, nz] @ (c * kappa(est, L))) / n
                            cc = np.zeros(P)
                            cc[: 2 * J] = G / info
                            se = math.sqrt(vcur + float(cc @ V @ cc))
                            s = se / (est * (1 - est))
                            lg = float(logit(est))
                            llo, lhi = float(expit(lg - z2 * s)), float(expit(lg + z2 * s))
                            lup = float(expit(lg + z1 * s))
                        else:
                            llo = lhi = lup = math.nan
                        score_region = status != "interior" or n * min(est, 1 - est) < SCORE_COUNT
                        if score_region:
                            alo, ahi, aup = lo2, hi2, up
                        else:
                            alo, ahi, aup = llo, lhi, lup
                        x_mv = float(c @ mv[nz])
                        mvu = float(cp_upper(np.array([x_mv]), n, LEVEL)[0])
                        rec[(mu, n)].append((est, lo2, hi2, up, llo, lhi, lup, alo, ahi, aup, mvu,
                                             float(status == "boundary_0")))
            if blk % 10 == 9:
                print(f"{dname}: block {blk + 1}/{n_blocks} ({time.time() - t0:.0f} s)", flush=True)
        for (mu, n), vals in rec.items():
            A = np.array(vals)
            est, lo2, hi2, up, llo, lhi, lup, alo, ahi, aup, mvu, b0 = A.T
            cov = lambda lo, hi, mu=mu: float(np.mean((lo <= mu) & (mu <= hi)))  # noqa: E731  (NaN: not covered)
            hero_mean = float(np.mean(up))
            rows.append({
                "design": dname, "mu": mu, "n": n, "mu_n": mu * n, "reps": len(vals),
                "mean_estimate": float(np.mean(est)), "share_estimate_0": float(np.mean(b0)),
                "cov2_score": cov(lo2, hi2), "cov1_score": float(np.mean(up >= mu)),
                "cov2_logit_old": cov(llo, lhi), "cov1_logit_old": float(np.mean(lup >= mu)),
                "cov2_default": cov(alo, ahi), "cov1_default": float(np.mean(aup >= mu)),
                "mean_upper_score": hero_mean, "mean_upper_default": float(np.mean(aup)),
                "cov1_mv_cp": float(np.mean(mvu >= mu)), "mean_upper_mv_cp": float(np.mean(mvu)),
                "expert_labels_same_bound": expert_worth(hero_mean, mu, LEVEL),
            })
    return pd.DataFrame(rows)


def markdown(df: pd.DataFrame, args: argparse.Namespace) -> str:
    out = [f"Replicates per cell: {int(df['reps'].min())}; history redrawn every {args.block} replicates "
           f"(N = {args.N}, {args.gold:.0%} gold, prevalence {args.history_prev}); J = {args.J}, "
           f"alpha ~ Beta({0.85 * args.k:g}, {0.15 * args.k:g}), beta ~ U({args.spec_low}, {args.spec_high}).", "",
           "| design | mu | n | mu·n | est = 0 | cov 2-sided score | cov 2-sided logit (old) | cov 1-sided score "
           "| cov 1-sided logit (old) | mean bound HERO-1 | MV-CP cov 1-sided | MV-CP mean bound "
           "| expert labels for HERO-1's bound |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in df.itertuples():
        out.append(f"| {r.design} | {r.mu:g} | {r.n} | {r.mu_n:g} | {r.share_estimate_0:.2f} | {r.cov2_score:.3f} | "
                   f"{r.cov2_logit_old:.3f} | {r.cov1_score:.3f} | {r.cov1_logit_old:.3f} | "
                   f"{100 * r.mean_upper_score:.3f} % | {r.cov1_mv_cp:.3f} | {100 * r.mean_upper_mv_cp:.3f} % | "
                   f"{r.expert_labels_same_bound:,.0f} |")
    return "\n".join(out) + "\n"


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--block", type=int, default=20)
    ap.add_argument("--J", type=int, default=10)
    ap.add_argument("--N", type=int, default=3000)
    ap.add_argument("--gold", type=float, default=0.10)
    ap.add_argument("--history-prev", type=float, default=0.10)
    ap.add_argument("--k", type=float, default=12.0)
    ap.add_argument("--spec-low", type=float, default=0.95)
    ap.add_argument("--spec-high", type=float, default=0.99)
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/rare_rates"))
    ap.add_argument("--mus", type=float, nargs="+", default=list(MUS))
    ap.add_argument("--ns", type=int, nargs="+", default=list(NS))
    ap.add_argument("--designs", nargs="+", default=["dense", "sparse3"])
    return ap


def main() -> None:
    args = parser().parse_args()
    t = time.time()
    df = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out / "rare_rates.csv", index=False)
    (args.out / "rare_rates_table.md").write_text(markdown(df, args))
    print(markdown(df, args))
    print(f"{time.time() - t:.0f} s")


if __name__ == "__main__":
    main()
