"""The ``hero`` command line. It reads, calls the public API and renders; it computes nothing."""

from __future__ import annotations

import json
import sys
import time
import warnings
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from . import _render
from ._version import __version__
from .calibration import Calibration, calibrate, load_calibration
from .data import AnnotationSet, read_annotations
from .errors import HeroEvalError, HeroEvalWarning
from .estimators import estimate
from .inference import bootstrap as run_bootstrap
from .inference import compare
from .results import METHODS, EstimateCollection, EstimateResult

app = typer.Typer(
    name="hero",
    help="HERO: estimate a model's gold-label rate from noisy silver labels, calibrated on your label history.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class Format(str, Enum):
    table = "table"
    json = "json"


class Duplicates(str, Enum):
    keep = "keep"
    first = "first"
    error = "error"


class Criterion(str, Enum):
    parameters = "parameters"
    loglik = "loglik"


class CiMethod(str, Enum):
    wald = "wald"
    logit = "logit"


class Variance(str, Enum):
    sandwich = "sandwich"
    model = "model"


class Tie(str, Enum):
    half = "half"
    positive = "positive"
    negative = "negative"
    random = "random"


def _console() -> Console:
    # a wide, plain layout when piped; rich detects colour and width on a terminal
    return Console(highlight=False, width=None if sys.stdout.isatty() else 132)


def _err(msg: str) -> None:
    Console(stderr=True, highlight=False).print(f"[bold red]error:[/bold red] {msg}", soft_wrap=True)


ItemCol = Annotated[str | None, typer.Option(help="Item id column (default item_id or crowd-kit's task).")]
LabelerCol = Annotated[str | None, typer.Option(help="Labeler id column (default labeler_id or worker).")]
LabelCol = Annotated[str | None, typer.Option(help="Label column (default label).")]
DupOpt = Annotated[Duplicates, typer.Option(help="Repeated (item, labeler) pairs: keep, first or error.")]
FmtOpt = Annotated[Format, typer.Option("--format", "-f", help="Output: a rich table or JSON on stdout.")]


def _read(path: Path, *, gold: Path | None = None, covariates: Path | None = None, name: str,
          item_col: str | None, labeler_col: str | None, label_col: str | None,
          round_col: str | None, duplicates: Duplicates,
          label_map: dict[str, int | None] | None = None) -> AnnotationSet:
    rc: Any = None if round_col is None else (False if round_col == "none" else round_col)
    return read_annotations(
        path, gold=gold, covariates=covariates, item_col=item_col, labeler_col=labeler_col,
        label_col=label_col, round_col=rc, duplicates=duplicates.value, name=name, label_map=label_map,
    )


def _run(fn: Any) -> Any:
    """Run ``fn`` turning heroeval errors into a clean message and exit code 2."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", HeroEvalWarning)
            out = fn()
    except HeroEvalError as exc:
        _err(str(exc))
        raise typer.Exit(2) from None
    finally:
        for w in caught:
            if issubclass(w.category, HeroEvalWarning):
                Console(stderr=True, highlight=False).print(
                    f"[yellow]warning ({w.category.__name__}):[/yellow] {w.message}", soft_wrap=True)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return out


@app.command("calibrate")
def calibrate_cmd(
    history: Annotated[Path, typer.Argument(help="History annotations (CSV, Parquet or JSONL).")],
    gold: Annotated[Path, typer.Option(help="Gold labels for some history items.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the calibration JSON.")],
    covariates: Annotated[Path | None, typer.Option(help="History item covariates (for HERO-2).")] = None,
    item_col: ItemCol = None,
    labeler_col: LabelerCol = None,
    label_col: LabelCol = None,
    round_col: Annotated[str | None, typer.Option(help="Round column (default 'round' if present; 'none' ignores it).")] = None,
    duplicates: DupOpt = Duplicates.keep,
    tol: Annotated[float, typer.Option(help="EM tolerance.")] = 1e-8,
    max_iter: Annotated[int, typer.Option(help="EM iteration limit.")] = 10_000,
    criterion: Annotated[Criterion, typer.Option(help="Stop on parameter change or on log-likelihood.")] = Criterion.parameters,
    accelerate: Annotated[bool, typer.Option(help="SQUAREM acceleration.")] = True,
    pseudo_count: Annotated[float, typer.Option(help="Beta pseudo-counts per labeler in the M-step (0 = maximum likelihood).")] = 0.0,
    variance: Annotated[Variance, typer.Option(help="Parameter covariance: sandwich (influence values) or model (inverse information).")] = Variance.sandwich,
    label_map: MapOpt = None,
    fmt: FmtOpt = Format.table,
    classes: ClassesOpt = None,
    ordinal: OrdinalOpt = False,
    structure: StructureOpt = "full",
) -> None:
    """Stage A: learn each labeler's sensitivity and specificity from the history."""
    if classes is not None or ordinal:
        from .multiclass import _cli as _mc

        _run(lambda: _mc.calibrate(
            history, gold, output, classes=classes, ordinal=ordinal, structure=structure,
            read_kw=_mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map), round_col=round_col,
            tol=tol, max_iter=max_iter, pseudo_count=pseudo_count, json_out=fmt is Format.json))
        return

    def go() -> tuple[AnnotationSet, Calibration]:
        h = _read(history, gold=gold, covariates=covariates, name="history", item_col=item_col,
                  labeler_col=labeler_col, label_col=label_col, round_col=round_col, duplicates=duplicates,
                  label_map=_label_map(label_map))
        c = calibrate(h, tol=tol, max_iter=max_iter, criterion=criterion.value, accelerate=accelerate,
                      pseudo_count=pseudo_count, variance=variance.value)
        c.save(output)
        return h, c

    h, c = _run(go)
    if fmt is Format.json:
        print(json.dumps({"calibration": c.to_dict(), "output": str(output),
                          "ingest": h.report.to_dict()}, indent=1))
        return
    con = _console()
    _render.print_all(con, _render.ingest_table(h.report, "Ingest: history"), _render.calibration_table(c),
                      _render.rounds_table(c))
    con.print(f"calibration written to {output}")


CalOpt = Annotated[Path | None, typer.Option(help="Calibration JSON from 'hero calibrate'.")]
HistOpt = Annotated[Path | None, typer.Option(help="History annotations (instead of --calibration).")]
GoldOpt = Annotated[Path | None, typer.Option(help="History gold labels (with --history).")]
HistCovOpt = Annotated[Path | None, typer.Option(help="History covariates (HERO-2, with --history).")]
MethodOpt = Annotated[str, typer.Option(help=f"One of {', '.join(METHODS)}, a comma list, or all.")]
RidgeOpt = Annotated[float, typer.Option(help="HERO-2 ridge penalty (standardised scale).")]
TieOpt = Annotated[Tie, typer.Option(help="Majority-vote tie rule.")]
NewLabOpt = Annotated[bool, typer.Option(help="Leave out labelers the calibration does not know (counted).")]
RoundOpt = Annotated[str | None, typer.Option(help="History round column (default 'round' if present; 'none' ignores it).")]
LevelOpt = Annotated[float, typer.Option(help="Confidence level of the intervals.")]
CiOpt = Annotated[CiMethod, typer.Option(help="Interval: wald, or logit-transformed.")]
MapOpt = Annotated[str | None, typer.Option(help="Recode labels, e.g. 'A=1,B=0,tie=drop' for a side-by-side win rate.")]
ClassesOpt = Annotated[str | None, typer.Option(help="Multi-class labels: the class order, comma-separated (e.g. 1,2,3,4,5).")]
OrdinalOpt = Annotated[bool, typer.Option(help="Multi-class labels that are ordered grades (Likert); enables --structure ordinal.")]
StructureOpt = Annotated[str, typer.Option(help="Multi-class confusion structure: full, symmetric, ordinal or auto (BIC).")]


def _mc_read_kw(item_col: str | None, labeler_col: str | None, label_col: str | None, duplicates: Duplicates,
                label_map: str | None) -> dict[str, Any]:
    if label_map is not None:
        raise HeroEvalError("--label-map is for binary labels; with --classes give the classes themselves")
    return {"item_col": item_col, "labeler_col": labeler_col, "label_col": label_col, "duplicates": duplicates.value}


def _label_map(spec: str | None) -> dict[str, int | None] | None:
    if spec is None:
        return None
    out: dict[str, int | None] = {}
    for part in spec.split(","):
        if "=" not in part:
            raise HeroEvalError(f"--label-map: expected KEY=1, KEY=0 or KEY=drop, got {part!r}")
        k, v = (x.strip() for x in part.split("=", 1))
        if v not in ("0", "1", "drop"):
            raise HeroEvalError(f"--label-map: {k!r} must map to 1, 0 or drop, got {v!r}")
        out[k] = None if v == "drop" else int(v)
    return out


def _check_sources(calibration: Path | None, history: Path | None, gold: Path | None,
                   history_covariates: Path | None, round_col: str | None = None,
                   confidence_level: float = 0.95) -> None:
    if not 0 < confidence_level < 1:
        _err(f"--confidence-level must be in (0, 1), got {confidence_level:g}")
        raise typer.Exit(2)
    if calibration is not None and round_col is not None:
        _err("--round-col goes with --history; a calibration file already holds the history's rounds")
        raise typer.Exit(2)
    if (calibration is None) == (history is None):
        _err("give exactly one of --calibration or --history (with --gold)")
        raise typer.Exit(2)
    if history is not None and gold is None:
        _err("--history needs --gold (the history's gold labels)")
        raise typer.Exit(2)
    if calibration is not None and history_covariates is not None:
        _err("--history-covariates goes with --history; a calibration file already holds the history's covariate mean")
        raise typer.Exit(2)


def _methods(method: str) -> Any:
    return "all" if method == "all" else [m.strip() for m in method.split(",") if m.strip()]


@app.command("estimate")
def estimate_cmd(
    current: Annotated[Path, typer.Argument(help="Current-round annotations (no gold needed).")],
    calibration: CalOpt = None,
    history: HistOpt = None,
    gold: GoldOpt = None,
    covariates: Annotated[Path | None, typer.Option(help="Current-round covariates (HERO-2).")] = None,
    history_covariates: HistCovOpt = None,
    method: MethodOpt = "all",
    ridge: RidgeOpt = 0.0,
    tie: TieOpt = Tie.half,
    exclude_new_labelers: NewLabOpt = False,
    confidence_level: LevelOpt = 0.95,
    ci_method: CiOpt = CiMethod.logit,
    bootstrap: Annotated[int, typer.Option(help="Also run a two-sample cluster bootstrap with this many resamples (needs --history).")] = 0,
    seed: Annotated[int | None, typer.Option(help="Seed of the bootstrap and of --tie random.")] = None,
    label_map: MapOpt = None,
    item_col: ItemCol = None,
    labeler_col: LabelerCol = None,
    label_col: LabelCol = None,
    round_col: RoundOpt = None,
    duplicates: DupOpt = Duplicates.keep,
    fmt: FmtOpt = Format.table,
    classes: ClassesOpt = None,
    ordinal: OrdinalOpt = False,
    structure: StructureOpt = "full",
) -> None:
    """Estimate the current round's gold rate with HERO and the baselines, with confidence intervals."""
    _check_sources(calibration, history, gold, history_covariates, round_col, confidence_level)
    if classes is not None or ordinal:
        if bootstrap:
            _err("--bootstrap is not available for multi-class labels yet")
            raise typer.Exit(2)
        from .multiclass import _cli as _mc

        _run(lambda: _mc.estimate(
            current, calibration=calibration, history=history, gold=gold, classes=classes, ordinal=ordinal,
            structure=structure, method=method, exclude_new_labelers=exclude_new_labelers, level=confidence_level,
            read_kw=_mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map), round_col=round_col,
            json_out=fmt is Format.json, covariates=covariates, history_covariates=history_covariates, ridge=ridge))
        return
    if bootstrap and history is None:
        _err("--bootstrap refits Stage A: it needs --history and --gold, not a calibration file")
        raise typer.Exit(2)

    def go() -> tuple[AnnotationSet, AnnotationSet | None, EstimateCollection, dict[str, Any]]:
        lm = _label_map(label_map)
        cur = read_annotations(current, covariates=covariates, item_col=item_col, labeler_col=labeler_col,
                               label_col=label_col, round_col=False, duplicates=duplicates.value,
                               label_map=lm, name="current")
        hist = None
        if calibration is not None:
            cal = load_calibration(calibration)
        else:
            assert history is not None
            hist = _read(history, gold=gold, covariates=history_covariates, name="history", item_col=item_col,
                         labeler_col=labeler_col, label_col=label_col, round_col=round_col,
                         duplicates=duplicates, label_map=lm)
            cal = calibrate(hist)
        kw: dict[str, Any] = {"ridge": ridge, "tie": tie.value, "exclude_new_labelers": exclude_new_labelers}
        res = estimate(cur, cal, method=_methods(method), rng=seed, **kw)
        if isinstance(res, EstimateResult):  # pragma: no cover - a list always gives a collection
            res = EstimateCollection({res.method: res}, ingest=cur.report)
        boot: dict[str, Any] = {}
        if bootstrap:
            boot = run_bootstrap(cur, cal, method=list(res), n_resamples=bootstrap, rng=seed,
                                 progress=fmt is Format.table and sys.stderr.isatty(), **kw)
        return cur, hist, res, boot

    cur, hist, res, boot = _run(go)
    if fmt is Format.json:
        out = res.to_dict(confidence_level)
        for m, r in res.items():  # intervals by the requested method
            ci = r.confidence_interval(confidence_level, ci_method.value)
            out["estimates"][m].update(ci_low=_num(ci.low), ci_high=_num(ci.high), ci_method=ci.method)
            if m in boot:
                out["estimates"][m]["bootstrap"] = boot[m].to_dict(confidence_level)
        out["ingest"] = {"current": cur.report.to_dict(),
                         "history": None if hist is None else hist.report.to_dict()}
        print(json.dumps(out, indent=1))
        return
    con = _console()
    _render.print_all(con, _render.ingest_table(cur.report, "Ingest: current round"))
    if hist is not None:
        _render.print_all(con, _render.ingest_table(hist.report, "Ingest: history"))
    _render.print_all(con, _render.estimates_table(res, confidence_level=confidence_level,
                                                   ci_method=ci_method.value, bootstrap=boot))


@app.command("compare")
def compare_cmd(
    a_current: Annotated[Path, typer.Argument(help="Round A's annotations (e.g. model A's outputs).")],
    b_current: Annotated[Path, typer.Argument(help="Round B's annotations (e.g. model B's outputs).")],
    calibration: CalOpt = None,
    history: HistOpt = None,
    gold: GoldOpt = None,
    a_covariates: Annotated[Path | None, typer.Option(help="Round A's covariates (HERO-2).")] = None,
    b_covariates: Annotated[Path | None, typer.Option(help="Round B's covariates (HERO-2).")] = None,
    history_covariates: HistCovOpt = None,
    method: MethodOpt = "all",
    ridge: RidgeOpt = 0.0,
    tie: TieOpt = Tie.half,
    exclude_new_labelers: NewLabOpt = False,
    confidence_level: LevelOpt = 0.95,
    label_map: MapOpt = None,
    item_col: ItemCol = None,
    labeler_col: LabelerCol = None,
    label_col: LabelCol = None,
    round_col: RoundOpt = None,
    duplicates: DupOpt = Duplicates.keep,
    fmt: FmtOpt = Format.table,
    classes: ClassesOpt = None,
    ordinal: OrdinalOpt = False,
    structure: StructureOpt = "full",
) -> None:
    """Difference of two rounds' gold rates (A - B) sharing one calibration, with intervals and p-values."""
    _check_sources(calibration, history, gold, history_covariates, round_col, confidence_level)
    if classes is not None or ordinal:
        from .multiclass import _cli as _mc

        _run(lambda: _mc.compare(
            a_current, b_current, calibration=calibration, history=history, gold=gold, classes=classes,
            ordinal=ordinal, structure=structure, method=method, exclude_new_labelers=exclude_new_labelers,
            level=confidence_level, read_kw=_mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map),
            round_col=round_col, json_out=fmt is Format.json))
        return

    def go() -> tuple[Any, AnnotationSet, AnnotationSet]:
        lm = _label_map(label_map)
        rd: dict[str, Any] = {"item_col": item_col, "labeler_col": labeler_col, "label_col": label_col,
                              "round_col": False, "duplicates": duplicates.value, "label_map": lm}
        a = read_annotations(a_current, covariates=a_covariates, name="A", **rd)
        b = read_annotations(b_current, covariates=b_covariates, name="B", **rd)
        if calibration is not None:
            cal = load_calibration(calibration)
        else:
            assert history is not None
            hist = _read(history, gold=gold, covariates=history_covariates, name="history", item_col=item_col,
                         labeler_col=labeler_col, label_col=label_col, round_col=round_col,
                         duplicates=duplicates, label_map=lm)
            cal = calibrate(hist)
        wanted = _methods(method)
        cc = compare(a, b, cal, method=wanted if wanted == "all" else list(wanted), ridge=ridge, tie=tie.value,
                     exclude_new_labelers=exclude_new_labelers)
        return cc, a, b

    cc, a, b = _run(go)
    if fmt is Format.json:
        out = cc.to_dict(confidence_level)
        out["ingest"] = {"a": a.report.to_dict(), "b": b.report.to_dict()}
        print(json.dumps(out, indent=1))
        return
    con = _console()
    _render.print_all(con, _render.ingest_table(a.report, "Ingest: round A"), _render.ingest_table(b.report, "Ingest: round B"),
                      _render.comparison_table(cc, confidence_level))


def _num(x: float) -> float | None:
    return x if x == x and abs(x) != float("inf") else None


class Experiment(str, Enum):
    gold_rate = "gold-rate"
    heterogeneity = "heterogeneity"
    labels = "labels"
    custom = "custom"


def _floats(spec: str | None, what: str) -> list[float] | None:
    if spec is None:
        return None
    try:
        return [float(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise HeroEvalError(f"--{what}: expected comma-separated numbers, got {spec!r}") from None


@app.command("simulate")
def simulate_cmd(
    experiment: Annotated[Experiment, typer.Option(help="gold-rate (paper Exp. 1), heterogeneity (Exp. 2), labels (labels per item, not in the paper), custom.")] = Experiment.heterogeneity,
    reps: Annotated[int, typer.Option(help="Replications per setting (the paper: 200).")] = 200,
    seed: Annotated[int, typer.Option(help="Seed; replication r of every setting uses the stream (seed, r).")] = 2026,
    out: Annotated[Path | None, typer.Option(help="Folder for replications.csv.gz, summary.csv, summary.md and figures.")] = None,
    workers: Annotated[int | None, typer.Option(help="Processes (default: all cores).")] = None,
    rho: Annotated[str | None, typer.Option(help="History gold rates, comma-separated (overrides the experiment's).")] = None,
    k: Annotated[str | None, typer.Option(help="Beta concentrations k, comma-separated.")] = None,
    labels_per_item: Annotated[str | None, typer.Option(help="Labels per item, comma-separated; 0 = every labeler labels every item.")] = None,
    n: Annotated[int, typer.Option(help="Current items.")] = 300,
    history_items: Annotated[int, typer.Option("--history-items", help="History items N.")] = 800,
    labelers: Annotated[int, typer.Option(help="Labelers J.")] = 10,
    pool_shift: Annotated[float, typer.Option(help="Weight of the first half of the labelers in the current round (1 = no shift; needs labels per item).")] = 1.0,
    target: Annotated[str, typer.Option(help="mu0 (population rate, the paper's) or current_rate (realised rate of the current items).")] = "mu0",
    fmt: FmtOpt = Format.table,
) -> None:
    """Reproduce the paper's simulation study (and sweeps it did not run): bias, SD, RMSE, coverage per method."""
    from . import montecarlo

    if target not in ("mu0", "current_rate"):
        _err(f"--target must be mu0 or current_rate, got {target!r}")
        raise typer.Exit(2)

    def go() -> tuple[Any, Any, float]:
        lpi: list[int | None] | None = None
        lp = _floats(labels_per_item, "labels-per-item")
        if lp is not None:
            lpi = [None if v == 0 else int(v) for v in lp]
        base = montecarlo.SimConfig(n=n, N=history_items, J=labelers, pool_shift=pool_shift,
                                    labels_per_item=lpi[0] if lpi and experiment is Experiment.gold_rate else None)
        if experiment is not Experiment.labels and experiment is not Experiment.custom and lpi:
            base = replace(base, labels_per_item=lpi[0])
        configs = montecarlo.experiment_configs(experiment.value, rhos=_floats(rho, "rho"), ks=_floats(k, "k"),
                                                labels=lpi, base=base)
        if pool_shift != 1.0 and any(c.labels_per_item is None for c in configs):
            raise HeroEvalError("--pool-shift needs --labels-per-item (a dense design has no pool to shift)")
        t0 = time.perf_counter()
        if fmt is Format.table and sys.stderr.isatty():
            from rich.progress import Progress

            with Progress(transient=True) as prog:
                task = prog.add_task("simulating", total=len(configs) * reps)
                df = montecarlo.run(configs, reps, seed=seed, workers=workers,
                                    progress=lambda d, t: prog.update(task, completed=d))
        else:
            df = montecarlo.run(configs, reps, seed=seed, workers=workers)
        secs = time.perf_counter() - t0
        return df, montecarlo.summarize(df, target), secs

    df, summ, secs = _run(go)
    if out is not None:
        from .plots import plot_sweep

        out.mkdir(parents=True, exist_ok=True)
        df.to_csv(out / "replications.csv.gz", index=False)
        summ.to_csv(out / "summary.csv", index=False)
        (out / "summary.md").write_text(_render.summary_markdown(summ, secs, reps))
        x = {"gold-rate": "rho", "heterogeneity": "k", "labels": "labels_per_item"}.get(experiment.value)
        if x is not None:
            plot_sweep(summ, x, out, f"{experiment.value}: {reps} replications", logx=x == "k")
    if fmt is Format.json:
        print(json.dumps({"seconds": secs, "reps": reps, "target": target,
                          "summary": json.loads(summ.to_json(orient="records"))}, indent=1))
        return
    con = _console()
    con.print(_render.simulation_table(summ, f"{experiment.value}: {reps} replications per setting, target {target}"))
    con.print(f"{len(df) // max(1, summ['method'].nunique()) } replications in {secs:.1f} s"
              + (f"; written to {out}" if out is not None else ""))


@app.command("benchmark")
def benchmark_cmd(
    dataset_dir: Annotated[Path, typer.Argument(help="A folder with labels.csv, gold.csv and optionally items.csv (text).")],
    resamples: Annotated[int, typer.Option(help="Random history/current splits per setting.")] = 20,
    rho: Annotated[str, typer.Option(help="Shares of history items with gold revealed, comma-separated.")] = "0.05,0.10",
    n: Annotated[int, typer.Option(help="Current items per split (at most 40% of the gold items).")] = 200,
    shift: Annotated[str, typer.Option(help="none and/or half (the current round keeps half of the labelers), comma-separated.")] = "none,half",
    binary_suffix: Annotated[str, typer.Option(help="Read labels<suffix>.csv and gold<suffix>.csv, e.g. _binary.")] = "",
    split: Annotated[str, typer.Option(help="random splits, or groups: leave one real round out (needs --group-col).")] = "random",
    group_col: Annotated[str | None, typer.Option(help="Column of items.csv that groups items into real rounds.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the splits.")] = 2026,
    workers: Annotated[int | None, typer.Option(help="Processes (default: all cores).")] = None,
    out: Annotated[Path | None, typer.Option(help="Folder for resamples.csv.gz, summary.csv and a figure.")] = None,
    fmt: FmtOpt = Format.table,
) -> None:
    """Every method on a real annotation set with gold labels, by resampling (|bias|, SD, RMSE, coverage)."""
    from .benchmark import load_folder, run_benchmark, summarize_benchmark

    def go() -> tuple[Any, Any, float]:
        rhos = _floats(rho, "rho") or []
        shifts = [x.strip() for x in shift.split(",") if x.strip()]
        data = load_folder(dataset_dir, binary_suffix=binary_suffix, group_col=group_col)
        t0 = time.perf_counter()
        df = run_benchmark(data, resamples=resamples, rhos=rhos, n=n, shifts=shifts, seed=seed, workers=workers,
                           split=split)
        return df, summarize_benchmark(df), time.perf_counter() - t0

    df, summ, secs = _run(go)
    if out is not None:
        from .plots import plot_benchmark

        out.mkdir(parents=True, exist_ok=True)
        df.to_csv(out / "resamples.csv.gz", index=False)
        summ.to_csv(out / "summary.csv", index=False)
        plot_benchmark(summ, out, f"{summ['dataset'].iloc[0]}: {resamples} resamples")
    if fmt is Format.json:
        print(json.dumps({"seconds": secs, "summary": json.loads(summ.to_json(orient="records"))}, indent=1))
        return
    con = _console()
    con.print(_render.benchmark_table(summ, f"{summ['dataset'].iloc[0]}: {resamples} resamples per setting; "
                                            "target = the current items' gold rate"))
    con.print(f"done in {secs:.1f} s" + (f"; written to {out}" if out is not None else ""))


@app.command("demo")
def demo_cmd(fmt: FmtOpt = Format.table) -> None:
    """Run every method on the bundled real example (LLM judges grading TriviaQA answers)."""
    from .demo import example_paths, run_demo

    t0 = time.perf_counter()
    d = _run(run_demo)
    secs = time.perf_counter() - t0
    truth = float(d.truth["true_rate"])
    if fmt is Format.json:
        out = d.estimates.to_dict()
        out["truth"] = d.truth
        out["seconds"] = secs
        print(json.dumps(out, indent=1))
        return
    con = _console()
    con.print(
        "[bold]heroeval demo[/bold]: nine LLM judges and two lexical judges say whether an exam-taker "
        "LLM's TriviaQA answer is correct; gold is human judgment (Thakur et al. 2024).\n"
        f"History: {len(d.truth['history_rounds'])} exam-taker models, {d.history.n_items} items, gold on "
        f"{d.history.n_gold} ({d.truth['gold_rate']:.0%}). Current round: {d.truth['current_round']}, "
        f"{d.current.n_items} items, no gold.\nData: {example_paths()['provenance'].parent}"
    )
    _render.print_all(
        con,
        _render.ingest_table(d.history.report, "Ingest: history"),
        _render.ingest_table(d.current.report, "Ingest: current round"),
        _render.calibration_table(d.calibration),
        _render.rounds_table(d.calibration),
        _render.estimates_table(d.estimates, truth=truth,
                                title=f"Accuracy of {d.truth['current_round']}: estimates vs the true gold rate"),
    )
    con.print(f"demo finished in {secs:.2f} s")


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        print(f"heroeval {__version__}")
        raise typer.Exit(0)


def main() -> None:  # pragma: no cover - console-script entry
    app(prog_name="hero")


if __name__ == "__main__":  # pragma: no cover
    main()
