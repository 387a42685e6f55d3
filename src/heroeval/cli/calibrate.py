"""``hero calibrate``: Stage A on the history (each labeler's sensitivity and specificity), with its model checks."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from heroeval.cli.console import busy, console, err, ingest_tables, register, run
from heroeval.cli.inputs import read, read_groups
from heroeval.cli.options import (
    FILES,
    ClassesOpt,
    Duplicates,
    DupOpt,
    EncodingOpt,
    FmtOpt,
    Format,
    GoldColOpt,
    GoldItemColOpt,
    HistGroupColOpt,
    ItemCol,
    LabelCol,
    LabelerCol,
    MapOpt,
    OrdinalOpt,
    SchedulerOpt,
    Shrink,
    StructureOpt,
    check_output,
    mc_read_kw,
    parse_history_weight,
    parse_label_map,
)
from heroeval.core.jit import HAVE_NUMBA

if TYPE_CHECKING:  # annotations only (strings at run time)
    from heroeval.cli.scheduler import Where
    from heroeval.ingest.annotations import AnnotationSet
    from heroeval.stage_a.calibration import Calibration
    from heroeval.workflows.options import StageAOptions


class Criterion(str, Enum):
    parameters = "parameters"
    loglik = "loglik"


class Engine(str, Enum):
    auto = "auto"
    numpy = "numpy"
    numba = "numba"


class Reader(str, Enum):
    auto = "auto"
    pandas = "pandas"
    duckdb = "duckdb"


class Variance(str, Enum):
    sandwich = "sandwich"
    model = "model"


def calibrate_cmd(
    history: Annotated[Path, typer.Argument(help=f"History annotations ({FILES}).")],
    gold: Annotated[Path, typer.Option(help="Gold labels for some history items.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the calibration JSON.")],
    history_covariates: Annotated[Path | None, typer.Option(help="History item covariates (for HERO-2).")] = None,
    covariates: Annotated[Path | None, typer.Option(hidden=True, help="Same as --history-covariates (kept from 0.1).")] = None,
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
    shrink: Annotated[Shrink, typer.Option(help="eb: shrink each labeler's sensitivity and specificity towards the pool by an empirical-Bayes prior fitted to the gold counts (labelers with little gold gain most); none: no prior beyond --pseudo-count.")] = Shrink.none,
    variance: Annotated[Variance, typer.Option(help="Parameter covariance: sandwich (influence values) or model (inverse information).")] = Variance.sandwich,
    history_weight: Annotated[str, typer.Option(help="Weight of gold-free history items in Stage A: a number in [0, 1] (1 = the paper) or 'cv' (chosen by cross-validated log score on the gold).")] = "1",
    checks: Annotated[bool, typer.Option(help="Model checks on the gold items (cross-validation, mock rounds, dependence test); saved in the calibration and used by --method auto.")] = True,
    past_rounds: Annotated[bool, typer.Option(help="With the checks, also estimate each history round (--round-col) with its gold left out of Stage A, when two or more rounds hold 8+ gold items; --method auto calls a round unreliable when its method missed them (docs/auto.md, step 7). --no-past-rounds skips their refits.")] = True,
    label_map: MapOpt = None,
    fmt: FmtOpt = Format.table,
    classes: ClassesOpt = None,
    ordinal: OrdinalOpt = False,
    structure: StructureOpt = "auto",
    engine: Annotated[Engine, typer.Option(help="Stage A engine: numpy, numba (compiled; " + ("installed" if HAVE_NUMBA else "needs numba, not installed: pip install numba") + ") or auto (numba from 1e6 annotations when installed).")] = Engine.auto,
    reader: Annotated[Reader, typer.Option(help="Reader: pandas, duckdb (globs, directories, files larger than memory) or auto (duckdb for globs, directories and files from 256 MB).")] = Reader.auto,
    memory_limit: Annotated[str | None, typer.Option(help="DuckDB memory limit for the duckdb reader, e.g. 2GB (it spills to disk beyond).")] = None,
    gold_col: GoldColOpt = None,
    gold_item_col: GoldItemColOpt = None,
    encoding: EncodingOpt = None,
    compact: Annotated[bool, typer.Option(help="Read Parquet with integer item ids straight into the compiled engine's arrays (histories near memory's size: about a third of the memory); no model checks.")] = False,
    group_col: HistGroupColOpt = None,
    scheduler: SchedulerOpt = None,
) -> None:
    """Stage A: learn each labeler's sensitivity and specificity from the history.

    HISTORY may be a glob ('logs/*.parquet') or a directory with the duckdb reader. With --scheduler, Stage A
    and its checks run on Dask and the history stays on the workers.
    """
    from heroeval.ingest.compact import CompactHistory
    from heroeval.ingest.read import read_compact
    from heroeval.report import terminal as _render
    from heroeval.workflows.api import calibrate
    from heroeval.workflows.options import StageAOptions

    hw = parse_history_weight(history_weight)
    check_output(output, "--output", "the calibration")
    if covariates is not None:
        if history_covariates is not None:
            err("give --history-covariates once (--covariates is its old name)")
            raise typer.Exit(2)
        history_covariates = covariates
    if group_col is not None and (classes is not None or ordinal or compact):
        err("--group-col is not available for multi-class labels or with --compact yet")
        raise typer.Exit(2)
    if scheduler is not None:
        odd = [name for name, off in (
            ("--classes/--ordinal", classes is not None or ordinal), ("--compact", compact),
            ("--group-col", group_col is not None), ("--label-map", label_map is not None),
            ("--encoding", encoding is not None), ("--reader", reader is not Reader.auto),
            ("--memory-limit", memory_limit is not None), ("--engine", engine is not Engine.auto),
            ("--duplicates", duplicates is not Duplicates.keep)) if off]
        if odd:
            err(f"--scheduler (Stage A on Dask) takes none of {', '.join(odd)}: binary labels, every annotation kept")
            raise typer.Exit(2)
        _on_dask(history, gold, output, history_covariates, fmt, item_col=item_col, labeler_col=labeler_col,
                 label_col=label_col, round_col=None if round_col is None else (False if round_col == "none" else round_col),
                 gold_col=gold_col, gold_item_col=gold_item_col, scheduler=scheduler,
                 options=StageAOptions(tol=tol, max_iter=max_iter, criterion=criterion.value, accelerate=accelerate,
                                       pseudo_count=pseudo_count, shrink=shrink.value, variance=variance.value,
                                       history_weight=hw, checks=checks, check_rounds=past_rounds))
        return

    if classes is not None or ordinal:
        if shrink is Shrink.eb:
            err("--shrink eb is for binary labels; multi-class and ordinal calibrations take --pseudo-count")
            raise typer.Exit(2)
        from heroeval.cli import multiclass as _mc  # multi-class labels only: SciPy's stats and more

        run(lambda: _mc.calibrate(
            history, gold, output, classes=classes, ordinal=ordinal, structure=structure,
            read_kw=mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map), round_col=round_col,
            tol=tol, max_iter=max_iter, pseudo_count=pseudo_count, json_out=fmt is Format.json))
        return

    run_checks = checks
    if compact:
        if history_covariates is not None or label_map is not None or encoding is not None or hw == "cv":
            err("--compact takes none of --history-covariates, --label-map, --encoding, --history-weight cv")
            raise typer.Exit(2)
        if checks:
            from rich.console import Console

            Console(stderr=True, highlight=False).print(
                "note: model checks skipped: --compact keeps no history items for their refits (--no-checks "
                "silences this note)", soft_wrap=True)
        run_checks = False

    def go() -> tuple[AnnotationSet | CompactHistory, Calibration]:
        h: AnnotationSet | CompactHistory
        with busy("reading the history"):
            if compact:
                h = register("Ingest: history", read_compact(
                    history, gold=gold, item_col=item_col, labeler_col=labeler_col, label_col=label_col,
                    round_col=None if round_col is None else (False if round_col == "none" else round_col),
                    duplicates=duplicates.value, name="history", memory_limit=memory_limit,  # type: ignore[arg-type]
                    gold_col=gold_col,
                    gold_item_col=gold_item_col))
            else:
                h = read(history, gold=gold, covariates=history_covariates, name="history", item_col=item_col,
                         labeler_col=labeler_col, label_col=label_col, round_col=round_col, duplicates=duplicates,
                         label_map=parse_label_map(label_map), reader=reader.value, memory_limit=memory_limit,
                         gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding)
                if group_col is not None:
                    h = h.with_groups(read_groups(history, group_col, item_col))
        what = "Stage A: EM on the history" + (" and model checks" if run_checks or hw == "cv" else "")
        with busy(what) as say:
            def em_progress(n: int, ll: float, change: float) -> None:
                if say is not None:
                    ll_s = "" if ll != ll else f", log-likelihood {ll:,.3f}"
                    say(f"{what}: {n} EM maps{ll_s}, largest parameter change {change:.1e}")

            c = calibrate(h, tol=tol, max_iter=max_iter, criterion=criterion.value, accelerate=accelerate,
                          pseudo_count=pseudo_count, shrink=shrink.value, variance=variance.value, history_weight=hw,
                          checks=run_checks, check_rounds=past_rounds,
                          engine=engine.value, progress=em_progress)
        c.save(output)
        return h, c

    h, c = run(go)
    if fmt is Format.json:
        print(json.dumps({"calibration": c.to_dict(), "output": str(output),
                          "ingest": h.report.to_dict()}, indent=1))
        return
    con = console()
    _render.print_all(con, *ingest_tables(), _render.calibration_table(c),
                      _render.rounds_table(c), *_render.checks_tables(c))
    con.print(f"calibration written to {output}")


def _on_dask(history: Path, gold: Path, output: Path, covariates: Path | None, fmt: Format, *, scheduler: str,
             options: StageAOptions, **columns: object) -> None:
    """``hero calibrate --scheduler``: Stage A and its checks on Dask; the calibration file as in memory."""
    from heroeval.cli.scheduler import calibrate_on_dask, size_note
    from heroeval.report import terminal as _render

    def go() -> tuple[Calibration, Where]:
        with busy("Stage A on Dask: reading the history on the workers, EM" + (" and model checks" if options["checks"] else "")):
            cal, where = calibrate_on_dask(scheduler, history, gold, covariates=covariates, columns=dict(columns),
                                           options=dict(options))
        cal.save(output)
        return cal, where

    c, where = run(go)
    dropped = dict(c.settings.get("rows_dropped", {}))
    ingest = {"rows_read": c.settings.get("rows_read"), "rows_dropped": dropped,
              "partitions": c.settings.get("partitions")}
    if fmt is Format.json:
        print(json.dumps({"calibration": c.to_dict(), "output": str(output), "ingest": ingest,
                          "ran_on": where.to_dict()}, indent=1))
        return
    con = console()
    con.print(where.line() + f": {c.settings.get('rows_read'):,} rows read in {c.settings.get('partitions')} "
              f"partition{'s' * (c.settings.get('partitions') != 1)}" + ("" if not dropped else ", dropped: " + ", ".join(f"{v:,} {k}" for k, v in dropped.items()))
              + size_note(int(c.n_annotations.sum())))
    _render.print_all(con, _render.calibration_table(c), _render.rounds_table(c), *_render.checks_tables(c))
    con.print(f"calibration written to {output}")
