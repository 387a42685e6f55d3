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

    .venv/bin/python benchmarks/stage_a.py                    # 1e6 and 1e7
    .venv/bin/python benchmarks/stage_a.py --sizes 1e6 --skip-crowdkit

Results are printed as a table and written to benchmarks/out/stage_a.json.
See benchmarks/README.md for what every column means.
"""

from __future__ import annotations

import argparse
import gc
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
    n_items = int(round(n_target / ((MIN_K + MAX_K) / 2)))
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
    n_gold = int(round(GOLD_FRACTION * n_items))
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


def maxrss_mib(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0  # Linux: KiB


def fmt_n(n: float) -> str:
    for unit, div in (("e7", 1e7), ("e6", 1e6), ("e5", 1e5)):
        if n >= div:
            return f"{n / div:.2f}{unit}"
    return str(int(n))


def parse_sizes(s: str) -> list[int]:
    return [int(float(x)) for x in s.split(",") if x.strip()]


# ---------------------------------------------------------------------------
# heroeval side
# ---------------------------------------------------------------------------


def bench_heroeval(data: dict[str, np.ndarray], repeats: int, em_iters: int) -> dict[str, Any]:
    import heroeval as he
    from heroeval import _em
    from heroeval.calibration import design_of, initial_values

    res: dict[str, Any] = {}
    t0 = time.perf_counter()
    ds = he.AnnotationSet.from_arrays(
        data["item"], data["labeler"], data["label"],
        gold=(data["gold_items"], data["gold_values"]),
    )
    res["ingest_s"] = time.perf_counter() - t0
    n = ds.n_annotations
    res.update(n_annotations=n, n_items=ds.n_items, n_labelers=ds.n_labelers, n_gold=ds.n_gold)

    # --- the whole of Stage A, default settings (headline) ---------------
    with warnings.catch_warnings():
        warnings.simplefilter("error", he.ConvergenceWarning)
        t_cal, cal = best_of(lambda: he.calibrate(ds), repeats)
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
    t_em, fit = best_of(lambda: _em.run_em(d, a0, b0, p0, tol=1e-8, max_iter=10_000), repeats)
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
            g, _ll = _em.e_step(d, a, b, p)
            a, b, p = _em.m_step(d, g)

    plain(1)  # warm-up
    t_plain, _ = best_of(lambda: plain(em_iters), repeats)
    res["em_iters_timed"] = em_iters
    res["ns_per_ann_iter_plain"] = t_plain / (n * em_iters) * 1e9

    # --- where one plain iteration goes (ns per annotation) --------------
    g, _ = _em.e_step(d, a0, b0, p0)
    reps = max(3, em_iters)
    n_items = d.n_items
    vec = np.linspace(-1.0, 1.0, 2 * d.n_labelers)
    parts = {
        "e_step": lambda: _em.e_step(d, a0, b0, p0),
        "m_step": lambda: _em.m_step(d, g),
        "A @ v (E-step matvec)": lambda: d.A @ vec,
        "A.T @ gamma (M-step matvec)": lambda: d.AT @ g,
        "per-item elementwise (expit, log_expit, gathers)": lambda: _elementwise_items(d, g),
        "bincount(group, gamma)": lambda: np.bincount(d.group, weights=g, minlength=d.n_groups),
    }
    br: dict[str, float] = {}
    for name, fn in parts.items():
        fn()
        t, _ = best_of(lambda fn=fn: [fn() for _ in range(reps)], 3)
        br[name] = t / reps / n * 1e9
    res["breakdown_ns_per_ann"] = br
    res["n_items_per_ann"] = n_items / n
    res["maxrss_mib"] = maxrss_mib()
    del d, ds, fit, g
    gc.collect()
    return res


def _elementwise_items(d: Any, gamma: np.ndarray) -> None:
    """The per-item array work of e_step other than the matvec (approximation)."""
    from scipy.special import expit, log_expit

    p = np.full(d.n_groups, 0.3)
    lp1 = np.log(p)[d.group]
    lp0 = np.log1p(-p)[d.group]
    eta = lp1 - lp0 + gamma
    expit(eta)
    (lp0 - log_expit(-eta)).sum()
    (d.gold >= 0).any()
    d.gold == 1  # noqa: B015
    d.gold == 0  # noqa: B015


# ---------------------------------------------------------------------------
# crowd-kit side (separate venv, subprocess)
# ---------------------------------------------------------------------------

CROWDKIT_SCRIPT = textwrap.dedent(
    r'''
    import inspect, json, resource, sys, time, warnings
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
    out["maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("CROWDKIT_JSON " + json.dumps(out))
    '''
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


def bench_crowdkit(py: Path, data: dict[str, np.ndarray], iters: int, repeats: int,
                   converge: bool, tmp: Path) -> dict[str, Any]:
    npz = tmp / "data.npz"
    np.savez(npz, **{k: data[k] for k in ("item", "labeler", "label", "gold_items", "gold_values",
                                            "alpha_true", "beta_true")})
    script = tmp / "crowdkit_stage_a.py"
    script.write_text(CROWDKIT_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    r = subprocess.run([str(py), str(script), str(npz), str(iters), str(repeats), str(int(converge))],
                       capture_output=True, text=True, env=env)
    npz.unlink(missing_ok=True)
    for line in r.stdout.splitlines():
        if line.startswith("CROWDKIT_JSON "):
            return json.loads(line[len("CROWDKIT_JSON "):])
    raise RuntimeError(f"crowd-kit subprocess failed (rc {r.returncode}):\n{r.stderr[-3000:]}")


# ---------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------


def table(rows: list[list[str]], header: list[str]) -> str:
    w = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * x for x in w)
    out = ["  ".join(str(h).rjust(x) if i else str(h).ljust(x) for i, (h, x) in enumerate(zip(header, w))), line]
    for r in rows:
        out.append("  ".join(str(c).rjust(x) if i else str(c).ljust(x) for i, (c, x) in enumerate(zip(r, w))))
    return "\n".join(out)


def report(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = []
    lines.append(
        f"heroeval {meta['heroeval_version']} | numpy {meta['numpy_version']} | scipy {meta['scipy_version']} | "
        f"python {meta['python_version']} | cores {meta['cpu_count']} | {meta['machine']}"
    )
    if meta.get("crowdkit"):
        ck = meta["crowdkit"]
        lines.append(f"crowd-kit {ck.get('crowdkit_version')} (pandas {ck.get('pandas_version')}, "
                     f"numpy {ck.get('numpy_version')}) in {meta['crowdkit_venv']}")
    lines.append("(no BLAS in the EM hot path: OPENBLAS_*/MKL_* thread settings are irrelevant)")
    lines.append("")

    hdr = ["annotations", "items", "gold", "ingest s", "Stage A s", "n_iter", "ns/ann-it StageA",
           "ns/ann-it EM", "ck ns/ann-it", "ck iters", "ratio EM", "ratio StageA"]
    rows = []
    for r in results:
        h, c = r["heroeval"], r.get("crowdkit")
        rows.append([
            fmt_n(h["n_annotations"]), fmt_n(h["n_items"]), h["n_gold"],
            f"{h['ingest_s']:.2f}", f"{h['calibrate_s']:.3f}", h["n_iter"],
            f"{h['ns_per_ann_iter_calibrate']:.1f}", f"{h['ns_per_ann_iter_plain']:.1f}",
            f"{c['ns_per_ann_iter']:.0f}" if c else "-",
            c["iters_done"] if c else "-",
            f"{r['ratio_plain']:.0f}x" if c else "-",
            f"{r['ratio_calibrate']:.0f}x" if c else "-",
        ])
    lines.append(table(rows, hdr))
    lines.append("")
    lines.append("  Stage A s        = he.calibrate(ds), default settings (SQUAREM, tol 1e-8 on parameters),"
                 " best of repeats")
    lines.append("  n_iter           = cal.convergence.n_iter (EM map evaluations)")
    lines.append("  ns/ann-it StageA = Stage A s / (annotations * n_iter), everything in calibrate included")
    lines.append("  ns/ann-it EM     = one plain EM iteration (_em.e_step + _em.m_step) / annotations")
    lines.append("  ck ns/ann-it     = crowd-kit DawidSkene(n_iter=K, tol=-inf).fit(df, true_labels=gt):"
                 " (fit time - n_iter=0 fit time) / (annotations * K)")
    lines.append("  ratio EM / StageA = ck ns/ann-it / heroeval ns/ann-it (EM resp. StageA column)")
    lines.append("")

    hdr2 = ["annotations", "design s", "init s", "run_em s", "other s", "EM ns/ann-it", "e_step", "m_step",
            "A@v", "AT@g", "items elem", "bincount", "RSS MiB", "ck RSS MiB"]
    rows2 = []
    for r in results:
        h, c = r["heroeval"], r.get("crowdkit")
        b = h["breakdown_ns_per_ann"]
        rows2.append([
            fmt_n(h["n_annotations"]), f"{h['design_s']:.3f}", f"{h['init_s']:.3f}", f"{h['run_em_s']:.3f}",
            f"{h['other_s']:.3f}", f"{h['ns_per_ann_iter_run_em']:.1f}",
            f"{b['e_step']:.1f}", f"{b['m_step']:.1f}", f"{b['A @ v (E-step matvec)']:.1f}",
            f"{b['A.T @ gamma (M-step matvec)']:.1f}",
            f"{b['per-item elementwise (expit, log_expit, gathers)']:.1f}", f"{b['bincount(group, gamma)']:.1f}",
            f"{h['maxrss_mib']:.0f}", f"{c['maxrss_mib']:.0f}" if c else "-",
        ])
    lines.append("Stage A breakdown (times in s; per-part columns in ns per annotation, one call each):")
    lines.append(table(rows2, hdr2))
    lines.append("  EM ns/ann-it = run_em alone / (annotations * its n_iter); other = calibrate - design - init"
                 " - run_em (gold counts, per-labeler item counts, result object)")
    lines.append("")

    for r in results:
        h, c = r["heroeval"], r.get("crowdkit")
        lines.append(f"{fmt_n(h['n_annotations'])}: heroeval converged={h['converged']} n_iter={h['n_iter']} "
                     f"MAE(sens)={h['mae_alpha']:.4f} MAE(spec)={h['mae_beta']:.4f}")
        if c:
            lines.append(f"     crowd-kit after K={c['iters_done']}: MAE(sens)={c['mae_alpha_k']:.4f} "
                         f"MAE(spec)={c['mae_beta_k']:.4f}; init {c['init_s']:.2f}s, fit {c['fit_s']:.2f}s, "
                         f"DataFrame build {c['dataframe_build_s']:.2f}s (not timed)")
            if "converge_s" in c:
                lines.append(
                    f"     crowd-kit to its own convergence (n_iter={c['default_n_iter']}, tol={c['default_tol']} "
                    f"on ELBO/annotation): {c['converge_iters']} iters, {c['converge_s']:.2f}s, "
                    f"MAE(sens)={c['mae_alpha_conv']:.4f} MAE(spec)={c['mae_beta_conv']:.4f}; "
                    f"heroeval Stage A to tol 1e-8: {h['calibrate_s']:.3f}s -> "
                    f"{c['converge_s'] / h['calibrate_s']:.0f}x faster end to end")
    lines.append("")
    for r in results:
        h, c = r["heroeval"], r.get("crowdkit")
        ok_ns = h["ns_per_ann_iter_calibrate"] <= TARGET_NS
        ok_ns_em = h["ns_per_ann_iter_plain"] <= TARGET_NS
        s = (f"target {fmt_n(h['n_annotations'])}: <= {TARGET_NS:.0f} ns/ann-iter: Stage A "
             f"{'PASS' if ok_ns else 'FAIL'} ({h['ns_per_ann_iter_calibrate']:.1f}), plain EM "
             f"{'PASS' if ok_ns_em else 'FAIL'} ({h['ns_per_ann_iter_plain']:.1f})")
        if c:
            s += (f"; >= {TARGET_RATIO:.0f}x crowd-kit: EM {'PASS' if r['ratio_plain'] >= TARGET_RATIO else 'FAIL'} "
                  f"({r['ratio_plain']:.0f}x), Stage A "
                  f"{'PASS' if r['ratio_calibrate'] >= TARGET_RATIO else 'FAIL'} ({r['ratio_calibrate']:.0f}x)")
        lines.append(s)
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1e6,1e7", help="annotation counts, comma separated (default 1e6,1e7)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--repeats", type=int, default=3, help="heroeval timings: best of this many (default 3)")
    ap.add_argument("--em-iters", type=int, default=10, help="plain EM iterations timed per repeat (default 10)")
    ap.add_argument("--skip-crowdkit", action="store_true")
    ap.add_argument("--crowdkit-iters", default=None,
                    help="crowd-kit EM iterations K, one value or one per size (default 10 up to 2e6, else 5)")
    ap.add_argument("--crowdkit-repeats", type=int, default=1, help="crowd-kit timings: best of (default 1)")
    ap.add_argument("--crowdkit-converge-max", type=float, default=1e6,
                    help="also run crowd-kit to its own default convergence for sizes up to this (default 1e6; "
                         "0 disables)")
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
        "J": J_LABELERS, "labelers_per_item": [MIN_K, MAX_K], "prevalence": PREVALENCE,
        "gold_fraction": GOLD_FRACTION, "repeats": args.repeats, "em_iters": args.em_iters,
        "targets": {"ns_per_ann_iter_max": TARGET_NS, "ratio_min": TARGET_RATIO},
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    print(f"cores: {os.cpu_count()}  numpy {np.__version__}  scipy {scipy.__version__}  heroeval {he.__version__}",
          flush=True)

    py = None
    if not args.skip_crowdkit:
        py, how = ensure_crowdkit(args.crowdkit_venv)
        meta["crowdkit_venv"] = str(args.crowdkit_venv)
        meta["crowdkit_setup"] = how
        if py is None:
            print(f"[crowd-kit] unavailable, comparison skipped: {how}", flush=True)

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="heroeval-stage-a-") as tmpd:
        for size, K in zip(sizes, ck_iters):
            t0 = time.perf_counter()
            data = simulate(size, args.seed)
            t_sim = time.perf_counter() - t0
            print(f"[{fmt_n(size)}] simulated {data['item'].shape[0]} annotations in {t_sim:.1f}s", flush=True)
            h = bench_heroeval(data, args.repeats, args.em_iters)
            print(f"[{fmt_n(size)}] heroeval: Stage A {h['calibrate_s']:.3f}s, n_iter {h['n_iter']}, "
                  f"{h['ns_per_ann_iter_calibrate']:.1f} ns/ann-iter (plain EM {h['ns_per_ann_iter_plain']:.1f})",
                  flush=True)
            row: dict[str, Any] = {"size": size, "simulate_s": t_sim, "heroeval": h}
            if py is not None:
                converge = args.crowdkit_converge_max > 0 and size <= args.crowdkit_converge_max
                print(f"[{fmt_n(size)}] crowd-kit: K={K}{' + default convergence' if converge else ''} ...",
                      flush=True)
                c = bench_crowdkit(py, data, K, args.crowdkit_repeats, converge, Path(tmpd))
                meta["crowdkit"] = {k: c[k] for k in ("crowdkit_version", "pandas_version", "numpy_version",
                                                      "fit_signature")}
                row["crowdkit"] = c
                row["ratio_plain"] = c["ns_per_ann_iter"] / h["ns_per_ann_iter_plain"]
                row["ratio_calibrate"] = c["ns_per_ann_iter"] / h["ns_per_ann_iter_calibrate"]
                print(f"[{fmt_n(size)}] crowd-kit: {c['ns_per_ann_iter']:.0f} ns/ann-iter "
                      f"({row['ratio_plain']:.0f}x heroeval EM)", flush=True)
            results.append(row)
            del data
            gc.collect()

    meta["maxrss_mib_self"] = maxrss_mib()
    meta["maxrss_mib_children"] = maxrss_mib(resource.RUSAGE_CHILDREN)
    text = report(results, meta)
    print()
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": results, "report": text}, indent=1) + "\n")
    print(f"\nwritten {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
