#!/usr/bin/env python
"""Stage A benchmark: heroeval.calibrate vs crowd-kit DawidSkene(true_labels=...).

Times heroeval's Stage A (gold-anchored two-coin EM, SQUAREM, tol 1e-8 on the
parameters) on synthetic annotation sets of ~1e6 and ~1e7 annotations
(J = 50 labelers, 3-5 distinct labelers per item, prevalence 0.3, 1 % of items
with gold) and compares the cost per annotation-iteration with crowd-kit's
DawidSkene fitted on the same data in the same run.

crowd-kit is *not* a heroeval dependency: the benchmark creates its own
virtualenv (benchmarks/.venv-crowdkit, gitignored), installs crowd-kit there
with pip if it is missing, and runs it in a subprocess on the same arrays
(passed through a temporary .npz file).

Usage (from the repository root)::

    .venv/bin/python -m benchmarks.stage_a                    # 1e6 and 1e7
    .venv/bin/python -m benchmarks.stage_a --sizes 1e6 --skip-crowdkit

Results are printed as a table and written to benchmarks/out/stage_a.json.
See benchmarks/README.md for what every column means.
"""

from __future__ import annotations

import argparse
import functools
import gc
import inspect
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_VENV = HERE / ".venv-crowdkit"
DEFAULT_OUT = HERE / "out" / "stage_a.json"

TARGET_NS = 30.0  # heroeval ns per annotation-iteration, at most
TARGET_RATIO = 40.0  # crowd-kit / heroeval per annotation-iteration, at least

J_LABELERS = 50
PREVALENCE = 0.3
GOLD_FRACTION = 0.01
MIN_K, MAX_K = 3, 5  # distinct labelers per item, uniform


# ---------------------------------------------------------------------------
# synthetic data
# ---------------------------------------------------------------------------


def simulate(n_target: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded two-coin data with ~n_target annotations.

    Labeler sensitivity/specificity: 0.6 + 0.35 * Beta(3, 2), i.e. in
    (0.6, 0.95) with mean 0.81. Each item gets k ~ U{3,4,5} distinct labelers
    (uniform over the 50), its true label is Bernoulli(0.3), and 1 % of the
    items (chosen uniformly) carry their true label as gold. Annotation rows
    are shuffled, as in a real export.
    """
    rng = np.random.default_rng(seed)
    J = J_LABELERS
    alpha = 0.6 + 0.35 * rng.beta(3.0, 2.0, size=J)
    beta = 0.6 + 0.35 * rng.beta(3.0, 2.0, size=J)
    n_items = round(n_target / ((MIN_K + MAX_K) / 2))
    k = rng.integers(MIN_K, MAX_K + 1, size=n_items)
    # MAX_K distinct labelers per item by rejection (P(all distinct) ~ 0.81), keep the first k
    labs = rng.integers(0, J, size=(n_items, MAX_K), dtype=np.int16)
    while True:
        s = np.sort(labs, axis=1)
        bad = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
        if bad.size == 0:
            break
        labs[bad] = rng.integers(0, J, size=(bad.size, MAX_K), dtype=np.int16)
    del s
    keep = np.arange(MAX_K)[None, :] < k[:, None]
    item = np.repeat(np.arange(n_items, dtype=np.int64), k)
    labeler = labs[keep].astype(np.int64)
    del labs, keep
    y = (rng.random(n_items) < PREVALENCE).astype(np.int8)
    yi = y[item]
    u = rng.random(item.shape[0])
    p1 = np.where(yi == 1, alpha[labeler], 1.0 - beta[labeler])  # P(label = 1)
    label = (u < p1).astype(np.int8)
    del yi, u, p1
    perm = rng.permutation(item.shape[0])
    item, labeler, label = item[perm], labeler[perm], label[perm]
    del perm
    n_gold = round(GOLD_FRACTION * n_items)
    gold_items = np.sort(rng.choice(n_items, size=n_gold, replace=False)).astype(np.int64)
    gold_values = y[gold_items].astype(np.int8)
    return {
        "item": item,
        "labeler": labeler,
        "label": label,
        "gold_items": gold_items,
        "gold_values": gold_values,
        "alpha_true": alpha,
        "beta_true": beta,
        "y_true": y,
    }


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def best_of(fn: Any, repeats: int) -> tuple[float, Any]:
    """Best wall time of ``repeats`` calls (perf_counter) and the last result."""
    best = np.inf
    out = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return float(best), out


def peak_rss_mib() -> float:
    """Peak resident set size of this process (VmHWM; ru_maxrss survives exec on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def fmt_n(n: float) -> str:
    return f"{n:.2e}".replace("e+0", "e").replace("e+", "e")


def _git_state() -> str:
    """Commit of the checkout and whether src/ has uncommitted changes (what was actually timed)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], cwd=HERE.parent, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + uncommitted changes in src/" if dirty else "")


def parse_sizes(s: str) -> list[int]:
    return [int(float(x)) for x in s.split(",") if x.strip()]


# ---------------------------------------------------------------------------
# heroeval side
# ---------------------------------------------------------------------------


def bench_heroeval(data: dict[str, np.ndarray], repeats: int, em_iters: int) -> dict[str, Any]:
    import heroeval as he
    from heroeval.stage_a import two_coin
    from heroeval.stage_a.fit import design_of
    from heroeval.stage_a.gold import initial_values
    from heroeval.stage_a.settings import StoppingRule

    res: dict[str, Any] = {}
    t0 = time.perf_counter()
    ds = he.AnnotationSet.from_arrays(
        data["item"],
        data["labeler"],
        data["label"],
        gold=(data["gold_items"], data["gold_values"]),
    )
    res["ingest_s"] = time.perf_counter() - t0
    n = ds.n_annotations
    res.update(n_annotations=n, n_items=ds.n_items, n_labelers=ds.n_labelers, n_gold=ds.n_gold)

    # --- the whole of Stage A, default settings (headline) ---------------
    with warnings.catch_warnings():
        warnings.simplefilter("error", he.ConvergenceWarning)
        t_cal, cal = best_of(lambda: he.calibrate(ds, covariance=False), repeats)
        # the parameter covariance for standard errors (scores + Louis information), timed apart
        t_cov, _ = best_of(lambda: he.calibrate(ds), 1)
    res["covariance_s"] = max(t_cov - t_cal, 0.0)
    conv = cal.convergence
    res["calibrate_s"] = t_cal
    res["n_iter"] = conv.n_iter
    res["converged"] = conv.converged
    res["loglik"] = conv.loglik
    res["ns_per_ann_iter_calibrate"] = t_cal / (n * conv.n_iter) * 1e9

    # accuracy against the simulation truth (sanity check, not timed)
    true_idx = np.asarray([int(x) for x in cal.labeler_ids])
    res["mae_alpha"] = float(np.mean(np.abs(cal.alpha - data["alpha_true"][true_idx])))
    res["mae_beta"] = float(np.mean(np.abs(cal.beta - data["beta_true"][true_idx])))
    del cal

    # --- pieces of calibrate ----------------------------------------------
    t_design, d = best_of(lambda: design_of(ds), repeats)
    t_init, (a0, b0, p0) = best_of(lambda: initial_values(ds), repeats)
    t_em, fit = best_of(lambda: two_coin.run_em(d, (a0, b0, p0), stop=StoppingRule(1e-8, 10_000)), repeats)
    res["design_s"] = t_design
    res["init_s"] = t_init
    res["run_em_s"] = t_em
    res["run_em_n_iter"] = fit.n_iter
    res["ns_per_ann_iter_run_em"] = t_em / (n * fit.n_iter) * 1e9
    res["other_s"] = max(t_cal - t_design - t_init - t_em, 0.0)

    # --- one plain EM iteration (e_step + m_step), from the start values --
    def plain(k: int) -> None:
        a, b, p = a0, b0, p0
        for _ in range(k):
            g, _ll = two_coin.e_step(d, a, b, p)
            a, b, p = two_coin.m_step(d, g)

    plain(1)  # warm-up
    t_plain, _ = best_of(lambda: plain(em_iters), repeats)
    res["em_iters_timed"] = em_iters
    res["ns_per_ann_iter_plain"] = t_plain / (n * em_iters) * 1e9

    # --- where the time goes (ns per annotation, best of 3) ---------------
    # e_step / m_step as they are, then the primitive operations they are made
    # of, on arrays of the sizes they use (A: items x 2J CSR of counts; per-item
    # arrays have n_items = n / 4 entries, so a per-item op costs 1/4 of its
    # per-item time per annotation).
    from scipy.special import expit, log_expit

    g, _ = two_coin.e_step(d, a0, b0, p0)
    la1, la0 = two_coin.code_logprobs(a0, b0)
    v = la1 - la0
    eta = np.asarray(d.A @ v) + float(np.log(p0[0]) - np.log1p(-p0[0]))
    gold_pos = np.flatnonzero(d.gold == 1)

    def gold_fix() -> None:
        gam = g.copy()
        gam[gold_pos] = 1.0

    parts: dict[str, Callable[[], object]] = {
        "e_step (with log-likelihood)": lambda: two_coin.e_step(d, a0, b0, p0),
    }
    if "need_ll" in inspect.signature(two_coin.e_step).parameters:
        parts["e_step(need_ll=False)"] = lambda: two_coin.e_step(d, a0, b0, p0, need_ll=False)
    parts.update(
        {
            "m_step": lambda: two_coin.m_step(d, g),
            "A @ v (items x 2J CSR mat-vec)": lambda: d.A @ v,
            "AT @ gamma (2J x items CSR)": lambda: d.AT @ g,
            "A.T @ gamma (CSC view of A)": lambda: d.A.T @ g,
            "scipy expit(eta)": lambda: expit(eta),
            "scipy log_expit(eta)": lambda: log_expit(eta),
            "np.exp(eta)": lambda: np.exp(eta),
            "np.log(gamma)": lambda: np.log(g + 0.5),
            "np.log1p(gamma)": lambda: np.log1p(g),
            "np.where(eta >= 0, a, b)": lambda: np.where(eta >= 0, eta, g),
            "bincount(group, gamma)": lambda: np.bincount(d.group, weights=g, minlength=d.n_groups),
            "gamma.copy(); gamma[gold_pos] = 1": gold_fix,
        }
    )
    br: dict[str, float] = {}

    def many(fn: Callable[[], object], reps: int) -> None:
        for _ in range(reps):
            fn()

    for name, fn in parts.items():
        reps = max(3, em_iters)
        fn()
        t, _ = best_of(functools.partial(many, fn, reps), 3)
        br[name] = t / reps / n * 1e9
    res["breakdown_ns_per_ann"] = br
    res["maxrss_mib"] = peak_rss_mib()
    return res


# ---------------------------------------------------------------------------
# crowd-kit side (separate venv, subprocess)
# ---------------------------------------------------------------------------

CROWDKIT_SCRIPT = textwrap.dedent(
    r"""
    import inspect, json, sys, time, warnings
    import numpy as np
    import pandas as pd
    import crowdkit
    from crowdkit.aggregation import DawidSkene

    warnings.simplefilter("ignore")  # pandas deprecation noise from crowd-kit internals
    path, iters, repeats, converge = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    z = np.load(path)
    t0 = time.perf_counter()
    df = pd.DataFrame({"task": z["item"], "worker": z["labeler"], "label": z["label"].astype(np.int64)})
    gt = pd.Series(z["gold_values"].astype(np.int64), index=pd.Index(z["gold_items"], name="task"))
    build_s = time.perf_counter() - t0
    n = len(df)
    a_true, b_true = z["alpha_true"], z["beta_true"]

    def fit(n_iter, tol):
        m = DawidSkene(n_iter=n_iter, tol=tol)
        t0 = time.perf_counter()
        m.fit(df, true_labels=gt)
        return time.perf_counter() - t0, m

    def mae(m):
        e = m.errors_
        w = e.index.get_level_values(0).unique()
        sens = np.array([e.loc[(x, 1), 1] for x in w])
        spec = np.array([e.loc[(x, 0), 0] for x in w])
        idx = np.asarray(w, dtype=np.int64)
        return float(np.mean(np.abs(sens - a_true[idx]))), float(np.mean(np.abs(spec - b_true[idx])))

    out = {"crowdkit_version": crowdkit.__version__ if hasattr(crowdkit, "__version__") else None,
           "pandas_version": pd.__version__, "numpy_version": np.__version__,
           "fit_signature": str(inspect.signature(DawidSkene.fit)),
           "n_annotations": n, "dataframe_build_s": build_s, "iters": iters}
    # initialisation only (majority vote + gold correction + one M-step): n_iter=0
    t_init = min(fit(0, float("-inf"))[0] for _ in range(repeats))
    # exactly `iters` EM iterations: tol=-inf so the ELBO rule can never stop it early
    best, m = None, None
    for _ in range(repeats):
        t, mm = fit(iters, float("-inf"))
        if best is None or t < best:
            best, m = t, mm
    done = len(m.loss_history_)
    out.update(init_s=t_init, fit_s=best, iters_done=done,
               ns_per_ann_iter=(best - t_init) / (n * done) * 1e9,
               ns_per_ann_iter_incl_init=best / (n * done) * 1e9)
    out["mae_alpha_k"], out["mae_beta_k"] = mae(m)
    del m
    if converge:
        # crowd-kit's own defaults (n_iter=100, tol=1e-5 on the per-annotation ELBO)
        d = DawidSkene()
        t, m = fit(d.n_iter, d.tol)
        out.update(default_n_iter=d.n_iter, default_tol=d.tol, converge_s=t,
                   converge_iters=len(m.loss_history_))
        out["mae_alpha_conv"], out["mae_beta_conv"] = mae(m)
    with open("/proc/self/status") as f:  # VmHWM: ru_maxrss would include the parent's peak (kept across exec)
        out["maxrss_mib"] = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024.0
    print("CROWDKIT_JSON " + json.dumps(out))
    """
)


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def ensure_crowdkit(venv: Path) -> tuple[Path | None, str]:
    """A python with crowd-kit importable, creating/filling ``venv`` if needed."""
    py = venv_python(venv)
    check = [str(py), "-c", "import crowdkit.aggregation"]
    if py.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return py, "present"
    base = shutil.which("python3") or sys.executable
    if not py.exists():
        print(f"[crowd-kit] creating venv {venv}", flush=True)
        r = subprocess.run([base, "-m", "venv", str(venv)], capture_output=True, text=True)
        if r.returncode != 0:
            return None, f"venv creation failed: {r.stderr.strip()[-400:]}"
    print("[crowd-kit] pip install crowd-kit (one-off) ...", flush=True)
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "crowd-kit"], capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"pip install crowd-kit failed (is PyPI reachable?): {r.stderr.strip()[-400:]}"
    if subprocess.run(check, capture_output=True).returncode != 0:
        return None, "crowd-kit installed but does not import"
    return py, "installed"


def bench_crowdkit(
    py: Path, data: dict[str, np.ndarray], iters: int, repeats: int, converge: bool, tmp: Path
) -> dict[str, Any]:
    npz = tmp / "data.npz"
    np.savez(
        npz,
        item=data["item"],
        labeler=data["labeler"],
        label=data["label"],
        gold_items=data["gold_items"],
        gold_values=data["gold_values"],
        alpha_true=data["alpha_true"],
        beta_true=data["beta_true"],
    )
    script = tmp / "crowdkit_stage_a.py"
    script.write_text(CROWDKIT_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run(
        [str(py), str(script), str(npz), str(iters), str(repeats), str(int(converge))],
        capture_output=True,
        text=True,
        env=env,
    )
    npz.unlink(missing_ok=True)
    for line in r.stdout.splitlines():
        if line.startswith("CROWDKIT_JSON "):
            out: dict[str, Any] = json.loads(line[len("CROWDKIT_JSON ") :])
            return out
    raise RuntimeError(f"crowd-kit subprocess failed (rc {r.returncode}):\n{r.stderr[-3000:]}")


# ---------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------


def table(rows: list[list[str]], header: list[str]) -> str:
    w = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * x for x in w)
    out = [
        "  ".join(str(h).rjust(x) if i else str(h).ljust(x) for i, (h, x) in enumerate(zip(header, w, strict=True))),
        line,
    ]
    for r in rows:
        out.append(
            "  ".join(str(c).rjust(x) if i else str(c).ljust(x) for i, (c, x) in enumerate(zip(r, w, strict=True)))
        )
    return "\n".join(out)


def _fmt_opt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def report(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = []
    lines.append(
        f"heroeval {meta['heroeval_version']} | numpy {meta['numpy_version']} | scipy {meta['scipy_version']} | "
        f"python {meta['python_version']} | cores {meta['cpu_count']} | {meta['machine']}"
    )
    lines.append(f"code: git {meta.get('git', 'unknown')}")
    if meta.get("crowdkit"):
        ck = meta["crowdkit"]
        lines.append(
            f"crowd-kit {ck.get('crowdkit_version')} (pandas {ck.get('pandas_version')}, "
            f"numpy {ck.get('numpy_version')}) in {meta['crowdkit_venv']}"
        )
    lines.append("(no BLAS in the EM hot path: OPENBLAS_*/MKL_* thread settings are irrelevant)")
    ck_peak = max((r["crowdkit"]["maxrss_mib"] for r in results if r.get("crowdkit")), default=None)
    lines.append(
        f"peak RSS: this process {meta.get('peak_rss_mib_main', float('nan')):.0f} MiB"
        + (
            f", crowd-kit subprocess {ck_peak:.0f} MiB (run before heroeval's ingest of the same size)"
            if ck_peak
            else ""
        )
    )
    lines.append("")

    hdr = [
        "annotations",
        "items",
        "gold",
        "ingest s",
        "Stage A s",
        "n_iter",
        "ns/ann-it StageA",
        "ns/ann-it EM",
        "ck ns/ann-it",
        "ck iters",
        "ratio EM",
        "ratio StageA",
    ]
    rows = []
    for r in results:
        h, c = r["heroeval"], r.get("crowdkit")
        rows.append(
            [
                fmt_n(h["n_annotations"]),
                fmt_n(h["n_items"]),
                h["n_gold"],
                f"{h['ingest_s']:.2f}",
                f"{h['calibrate_s']:.3f}",
                h["n_iter"],
                f"{h['ns_per_ann_iter_calibrate']:.1f}",
                f"{h['ns_per_ann_iter_plain']:.1f}",
                f"{c['ns_per_ann_iter']:.0f}" if c else "-",
                c["iters_done"] if c else "-",
                f"{r['ratio_plain']:.0f}x" if c else "-",
                f"{r['ratio_calibrate']:.0f}x" if c else "-",
            ]
        )
    lines.append(table(rows, hdr))
    lines.append("")
    lines.append(
        "  Stage A s        = he.calibrate(ds, covariance=False): the EM fit and its bookkeeping (SQUAREM, tol 1e-8), best of repeats"
    )
    lines.append("  n_iter           = cal.convergence.n_iter (EM map evaluations)")
    lines.append("  ns/ann-it StageA = Stage A s / (annotations * n_iter), everything in calibrate included")
    lines.append("  ns/ann-it EM     = one plain EM iteration (two_coin.e_step + two_coin.m_step) / annotations")
    lines.append(
        "  ck ns/ann-it     = crowd-kit DawidSkene(n_iter=K, tol=-inf).fit(df, true_labels=gt):"
        " (fit time - n_iter=0 fit time) / (annotations * K)"
    )
    lines.append("  ratio EM / StageA = ck ns/ann-it / heroeval ns/ann-it (EM resp. StageA column)")
    lines.append("")

    hdr2 = [
        "annotations",
        "design s",
        "init s",
        "run_em s",
        "other s",
        "run_em ns/ann-it",
        "+covariance s",
        "heroeval peak RSS MiB",
        "crowd-kit peak RSS MiB",
    ]
    rows2 = []
    for r in results:
        h, c = r["heroeval"], r.get("crowdkit")
        rows2.append(
            [
                fmt_n(h["n_annotations"]),
                f"{h['design_s']:.3f}",
                f"{h['init_s']:.3f}",
                f"{h['run_em_s']:.3f}",
                f"{h['other_s']:.3f}",
                f"{h['ns_per_ann_iter_run_em']:.1f}",
                f"{h.get('covariance_s', float('nan')):.3f}",
                f"{h['maxrss_mib']:.0f}",
                f"{c['maxrss_mib']:.0f}" if c else "-",
            ]
        )
    lines.append("Stage A split (seconds, best of repeats each):")
    lines.append(table(rows2, hdr2))
    lines.append(
        "  design = design_of(ds); init = initial_values(ds); run_em = two_coin.run_em alone;"
        " other = Stage A - design - init - run_em"
    )
    lines.append("  (calibrate's bookkeeping after the fit: gold counts, per-labeler item counts, result object)")
    lines.append("  +covariance = extra time of he.calibrate(ds) (the default) over covariance=False: the history")
    lines.append("  parameters' covariance for standard errors, computed once after the EM (not per iteration)")
    lines.append("")

    names = list(dict.fromkeys(k for r in results for k in r["heroeval"]["breakdown_ns_per_ann"]))
    hdr3 = ["part (ns per annotation, one call)", *[fmt_n(r["heroeval"]["n_annotations"]) for r in results]]
    rows3 = [[k, *[_fmt_opt(r["heroeval"]["breakdown_ns_per_ann"].get(k)) for r in results]] for k in names]
    lines.append("Where one plain EM iteration goes: e_step / m_step as they are, then the primitive operations")
    lines.append("they are built from, on arrays of the same sizes (ns per annotation; items = annotations / 4):")
    lines.append(table(rows3, hdr3))
    lines.append("")

    for r in results:
        h, c = r["heroeval"], r.get("crowdkit")
        lines.append(
            f"{fmt_n(h['n_annotations'])}: heroeval converged={h['converged']} n_iter={h['n_iter']} "
            f"MAE(sens)={h['mae_alpha']:.4f} MAE(spec)={h['mae_beta']:.4f}"
        )
        if c:
            lines.append(
                f"     crowd-kit after K={c['iters_done']}: MAE(sens)={c['mae_alpha_k']:.4f} "
                f"MAE(spec)={c['mae_beta_k']:.4f}; init {c['init_s']:.2f}s, fit {c['fit_s']:.2f}s, "
                f"DataFrame build {c['dataframe_build_s']:.2f}s (not timed)"
            )
            if "converge_s" in c:
                lines.append(
                    f"     crowd-kit to its own convergence (n_iter={c['default_n_iter']}, tol={c['default_tol']} "
                    f"on ELBO/annotation): {c['converge_iters']} iters, {c['converge_s']:.2f}s, "
                    f"MAE(sens)={c['mae_alpha_conv']:.4f} MAE(spec)={c['mae_beta_conv']:.4f}; "
                    f"heroeval Stage A to tol 1e-8: {h['calibrate_s']:.3f}s -> "
                    f"{c['converge_s'] / h['calibrate_s']:.0f}x faster end to end"
                )
    lines.append("")
    for r in results:
        h, c = r["heroeval"], r.get("crowdkit")
        ok_ns = h["ns_per_ann_iter_calibrate"] <= TARGET_NS
        ok_ns_em = h["ns_per_ann_iter_plain"] <= TARGET_NS
        s = (
            f"target {fmt_n(h['n_annotations'])}: <= {TARGET_NS:.0f} ns/ann-iter: Stage A "
            f"{'PASS' if ok_ns else 'FAIL'} ({h['ns_per_ann_iter_calibrate']:.1f}), plain EM "
            f"{'PASS' if ok_ns_em else 'FAIL'} ({h['ns_per_ann_iter_plain']:.1f})"
        )
        if c:
            s += (
                f"; >= {TARGET_RATIO:.0f}x crowd-kit: EM {'PASS' if r['ratio_plain'] >= TARGET_RATIO else 'FAIL'} "
                f"({r['ratio_plain']:.0f}x), Stage A "
                f"{'PASS' if r['ratio_calibrate'] >= TARGET_RATIO else 'FAIL'} ({r['ratio_calibrate']:.0f}x)"
            )
        lines.append(s)
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sizes", default="1e6,1e7", help="annotation counts, comma separated (default 1e6,1e7)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--repeats", type=int, default=3, help="heroeval timings: best of this many (default 3)")
    ap.add_argument("--em-iters", type=int, default=10, help="plain EM iterations timed per repeat (default 10)")
    ap.add_argument("--skip-crowdkit", action="store_true")
    ap.add_argument(
        "--crowdkit-iters",
        default=None,
        help="crowd-kit EM iterations K, one value or one per size (default 10 up to 2e6, else 5)",
    )
    ap.add_argument(
        "--crowdkit-repeats",
        type=int,
        default=None,
        help="crowd-kit timings: best of this many (default 3 up to 2e6 annotations, else 1)",
    )
    ap.add_argument(
        "--crowdkit-converge-max",
        type=float,
        default=1e6,
        help="also run crowd-kit to its own default convergence for sizes up to this (default 1e6; 0 disables)",
    )
    ap.add_argument("--crowdkit-venv", type=Path, default=DEFAULT_VENV)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)

    import scipy

    import heroeval as he

    sizes = parse_sizes(args.sizes)
    if args.crowdkit_iters is None:
        ck_iters = [10 if s <= 2_000_000 else 5 for s in sizes]
    else:
        vals = [int(x) for x in args.crowdkit_iters.split(",")]
        ck_iters = vals * len(sizes) if len(vals) == 1 else vals
        if len(ck_iters) != len(sizes):
            ap.error("--crowdkit-iters needs one value or one per size")

    meta: dict[str, Any] = {
        "heroeval_version": he.__version__,
        "numpy_version": np.__version__,
        "scipy_version": scipy.__version__,
        "python_version": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "machine": f"{platform.system()} {platform.machine()} {platform.processor() or ''}".strip(),
        "seed": args.seed,
        "J": J_LABELERS,
        "labelers_per_item": [MIN_K, MAX_K],
        "prevalence": PREVALENCE,
        "gold_fraction": GOLD_FRACTION,
        "repeats": args.repeats,
        "em_iters": args.em_iters,
        "targets": {"ns_per_ann_iter_max": TARGET_NS, "ratio_min": TARGET_RATIO},
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "git": _git_state(),
    }
    print(
        f"cores: {os.cpu_count()}  numpy {np.__version__}  scipy {scipy.__version__}  heroeval {he.__version__}",
        flush=True,
    )

    py = None
    if not args.skip_crowdkit:
        py, how = ensure_crowdkit(args.crowdkit_venv)
        meta["crowdkit_venv"] = str(args.crowdkit_venv)
        meta["crowdkit_setup"] = how
        if py is None:
            print(f"[crowd-kit] unavailable, comparison skipped: {how}", flush=True)

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="heroeval-stage-a-") as tmpd:
        for size, K in zip(sizes, ck_iters, strict=True):
            t0 = time.perf_counter()
            data = simulate(size, args.seed)
            t_sim = time.perf_counter() - t0
            print(f"[{fmt_n(size)}] simulated {data['item'].shape[0]} annotations in {t_sim:.1f}s", flush=True)
            row: dict[str, Any] = {"size": size, "simulate_s": t_sim}
            c = None
            if py is not None:
                # crowd-kit first, while this process holds only the raw arrays (keeps the joint peak low)
                converge = args.crowdkit_converge_max > 0 and size <= args.crowdkit_converge_max
                print(f"[{fmt_n(size)}] crowd-kit: K={K}{' + default convergence' if converge else ''} ...", flush=True)
                ck_rep = args.crowdkit_repeats or (3 if size <= 2_000_000 else 1)
                c = bench_crowdkit(py, data, K, ck_rep, converge, Path(tmpd))
                c["repeats"] = ck_rep
                meta["crowdkit"] = {
                    k: c[k] for k in ("crowdkit_version", "pandas_version", "numpy_version", "fit_signature")
                }
                print(f"[{fmt_n(size)}] crowd-kit: {c['ns_per_ann_iter']:.0f} ns/ann-iter", flush=True)
            h = bench_heroeval(data, args.repeats, args.em_iters)
            row["heroeval"] = h
            print(
                f"[{fmt_n(size)}] heroeval: Stage A {h['calibrate_s']:.3f}s, n_iter {h['n_iter']}, "
                f"{h['ns_per_ann_iter_calibrate']:.1f} ns/ann-iter (plain EM {h['ns_per_ann_iter_plain']:.1f})",
                flush=True,
            )
            if c is not None:
                row["crowdkit"] = c
                row["ratio_plain"] = c["ns_per_ann_iter"] / h["ns_per_ann_iter_plain"]
                row["ratio_calibrate"] = c["ns_per_ann_iter"] / h["ns_per_ann_iter_calibrate"]
            results.append(row)
            del data
            gc.collect()

    meta["peak_rss_mib_main"] = peak_rss_mib()
    text = report(results, meta)
    print()
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": results, "report": text}, indent=1) + "\n")
    print(f"\nwritten {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
