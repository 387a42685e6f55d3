"""The ``hero`` command line. It reads, calls the public API and renders; it computes nothing.

Each command imports what it uses inside its body (heroeval's modules, NumPy, rich), so that
``hero --help`` and ``hero --version`` load none of it: the one place, beside the package's
``__init__``, where heroeval modules may be imported lazily (pyproject.toml, tests/unit/test_layers.py).
Module level holds only what typer needs to build the commands: their signatures and help texts.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer

from heroeval._core.jit import HAVE_NUMBA
from heroeval._version import __version__
from heroeval.cli._messages import to_cli
from heroeval.cli.store import store_app
from heroeval.errors import HeroEvalError, HeroEvalWarning

if TYPE_CHECKING:  # annotations only (strings at run time)
    from rich.console import Console

    from heroeval.ingest.annotations import AnnotationSet, IngestReport
    from heroeval.stage_a.calibration import Calibration

app = typer.Typer(
    name="hero",
    help="HERO: estimate a model's gold-label rate from noisy silver labels, calibrated on your label history.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: no '<bool>' metavars, and '[fast]' in a help text is not eaten as markup
)
app.add_typer(store_app, name="store")


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


class Engine(str, Enum):
    auto = "auto"
    numpy = "numpy"
    numba = "numba"


class Reader(str, Enum):
    auto = "auto"
    pandas = "pandas"
    duckdb = "duckdb"


class CiMethod(str, Enum):
    auto = "auto"
    score = "score"
    wald = "wald"
    logit = "logit"


class Alternative(str, Enum):
    two_sided = "two-sided"
    less = "less"
    greater = "greater"


AltOpt = Annotated[Alternative, typer.Option(help="two-sided interval, or a one-sided bound: less = 'the rate is at most ...' (upper bound), greater = 'at least ...'.")]


class Variance(str, Enum):
    sandwich = "sandwich"
    model = "model"


class Shrink(str, Enum):
    none = "none"
    eb = "eb"


class NewLabelers(str, Enum):
    error = "error"
    exclude = "exclude"
    estimate = "estimate"


class OnShift(str, Enum):
    warn = "warn"
    fallback = "fallback"
    ignore = "ignore"


class Tie(str, Enum):
    half = "half"
    positive = "positive"
    negative = "negative"
    random = "random"


def _console() -> Console:
    # a wide, plain layout when piped; rich detects colour and width on a terminal
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 132)


def _err(msg: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False).print(f"[bold red]error:[/bold red] {escape(to_cli(msg))}", soft_wrap=True)


_INGESTED: list[tuple[str, IngestReport]] = []
"""(title, report) of every table set the running command has read, in order: printed first, or before an error."""


_Read = TypeVar("_Read", bound=Any)


def _register(title: str, ds: _Read) -> _Read:
    """Keep a read table's ingest report (an AnnotationSet's or a CompactHistory's) for the ingest tables."""
    _INGESTED.append((title, ds.report))
    return ds


def _ingest_tables() -> list[Any]:
    from heroeval.report import terminal as _render

    return [_render.ingest_table(rep, title, say=to_cli) for title, rep in _INGESTED]


def _check_output(path: Path | None, option: str, what: str) -> None:
    """Fail before any work when an output file cannot be written (missing folder, a directory, read-only)."""
    if path is None:
        return
    parent = path.parent if str(path.parent) not in ("", ".") else Path(".")
    head = f"cannot write {what} to {str(path)!r} ({option})"
    if path.is_dir():
        _err(f"{head}: it is a folder; give a file name (nothing was computed)")
        raise typer.Exit(2)
    if not parent.is_dir():
        _err(f"{head}: the folder {str(parent)!r} does not exist; create it first (nothing was computed)")
        raise typer.Exit(2)
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        _err(f"{head}: not writable (nothing was computed)")
        raise typer.Exit(2)


def _new_labeler_rule(new_labelers: NewLabelers | None, exclude_new_labelers: bool) -> str | None:
    """--new-labelers, with 0.1's --exclude-new-labelers as its alias for 'exclude'."""
    if exclude_new_labelers:
        if new_labelers not in (None, NewLabelers.exclude):
            assert new_labelers is not None
            _err(f"--exclude-new-labelers contradicts --new-labelers {new_labelers.value}")
            raise typer.Exit(2)
        return "exclude"
    return None if new_labelers is None else new_labelers.value


FILES = "CSV, TSV, Parquet or JSONL; .gz allowed"
ItemCol = Annotated[str | None, typer.Option(help="Item id column (default item_id or crowd-kit's task).")]
GoldColOpt = Annotated[str | None, typer.Option(help="Gold label column of the gold file (default gold, true_label or label).")]
GoldItemColOpt = Annotated[str | None, typer.Option(help="Item id column of the gold file (default: --item-col if the gold file has it, else item_id or task).")]
EncodingOpt = Annotated[str | None, typer.Option(help="Text encoding of CSV/TSV/JSON inputs (default utf-8), e.g. cp1252 for a file saved by Excel on Windows.")]
NewLabelersOpt = Annotated[NewLabelers | None, typer.Option(help="Labelers unknown to the calibration: error, exclude (leave their labels out, counted), or estimate them from the current round (HERO-1, anchored by the calibrated ones).")]
ExcludeNewOpt = Annotated[bool, typer.Option("--exclude-new-labelers", hidden=True, help="Same as --new-labelers exclude (kept from 0.1).")]
LabelerCol = Annotated[str | None, typer.Option(help="Labeler id column (default labeler_id or worker).")]
LabelCol = Annotated[str | None, typer.Option(help="Label column (default label).")]
DupOpt = Annotated[Duplicates, typer.Option(help="Repeated (item, labeler) pairs: keep, first or error.")]
FmtOpt = Annotated[Format, typer.Option("--format", "-f", help="Output: a rich table or JSON on stdout.")]


def _read(path: Path, *, gold: Path | None = None, covariates: Path | None = None, name: str,
          item_col: str | None, labeler_col: str | None, label_col: str | None,
          round_col: str | None, duplicates: Duplicates,
          label_map: dict[str, int | None] | None = None, reader: str = "auto", memory_limit: str | None = None,
          progress: bool = False, gold_col: str | None = None, gold_item_col: str | None = None,
          encoding: str | None = None, title: str = "Ingest: history") -> AnnotationSet:
    from heroeval.ingest.read import read_annotations

    rc: Any = None if round_col is None else (False if round_col == "none" else round_col)
    ds = read_annotations(
        path, gold=gold, covariates=covariates, item_col=item_col, labeler_col=labeler_col,
        label_col=label_col, round_col=rc, duplicates=duplicates.value, name=name, label_map=label_map,
        engine=reader, memory_limit=memory_limit, progress=progress,  # type: ignore[arg-type]
        gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding,
    )
    return _register(title, ds)


def _read_current(path: Path, *, name: str, title: str, covariates: Path | None = None,
                  item_col: str | None, labeler_col: str | None, label_col: str | None, round_col: str | None,
                  duplicates: Duplicates, label_map: dict[str, int | None] | None,
                  encoding: str | None, gold: Path | None = None, design: Path | None = None,
                  gold_col: str | None = None, gold_item_col: str | None = None) -> AnnotationSet:
    """A current round. Its round column (--round-col, or 'round') is read only to tell several rounds apart.

    ``gold``: expert labels on some of its items (--current-gold), ``design``: how they were sampled (--design).
    """
    from heroeval.ingest.read import read_annotations

    rc: Any = None if round_col is None else (False if round_col == "none" else round_col)
    if isinstance(rc, str) and not _has_column(path, rc):
        rc = False  # the history's round column is not in this file
    if design is not None and gold is None:
        raise HeroEvalError("--design goes with --current-gold (the expert labels of the selected items)")
    ds = read_annotations(path, covariates=covariates, item_col=item_col, labeler_col=labeler_col,
                          label_col=label_col, round_col=rc, duplicates=duplicates.value, label_map=label_map,
                          name=name, encoding=encoding, gold=gold, design=design,
                          gold_col=gold_col if gold is not None else None,
                          gold_item_col=gold_item_col if gold is not None else None)
    return _register(title, ds)


def _current_gold_text(ds: AnnotationSet, design: Path | None = None) -> str | None:
    """The ingest line for a current round's gold: how many items, how they were sampled."""
    from heroeval.estimators.ppi import gold_sample

    gs = gold_sample(ds)
    if gs is None:
        return None
    how = ("taken as a uniform random sample (no design given: --design names hero select's file)"
           if gs.design == "uniform" else
           f"drawn by a design ({'--design ' + str(design) if design is not None else 'a pi column in the gold file'};"
           f" inclusion probabilities {gs.pi.min():.3g} to {gs.pi.max():.3g}, Hajek weights 1/pi)")
    return f"current gold: {gs.k} of {gs.n} items of round {ds.name!r} have expert labels, {how}"


def _current_gold_json(ds: AnnotationSet, gold_file: Path | None, design: Path | None = None) -> dict[str, Any] | None:
    """The JSON record of a current round's gold (None without): how many items, how drawn, from which files."""
    from heroeval.estimators.ppi import gold_sample

    gs = gold_sample(ds)
    if gs is None:
        return None
    return {"n_gold": gs.k, "n_items": gs.n, "design": gs.design,
            "gold_file": None if gold_file is None else str(gold_file),
            "design_file": None if design is None else str(design), "text": _current_gold_text(ds, design)}


def _has_column(path: Path, col: str) -> bool:
    try:
        return col in _columns_of(path)
    except Exception:  # unreadable here: the reader itself reports it
        return True


def _columns_of(path: Path) -> list[str]:
    import pandas as pd

    suf = [x.lower() for x in path.suffixes]
    if ".parquet" in suf or ".pq" in suf:
        import pyarrow.parquet as pq

        return list(pq.read_schema(path).names)
    if ".jsonl" in suf or ".ndjson" in suf or ".json" in suf:
        return list(pd.read_json(path, lines=True, nrows=1).columns)
    sep = "\t" if ".tsv" in suf else None
    return list(pd.read_csv(path, sep=sep, nrows=0, engine="python", encoding_errors="replace").columns)


def _current_and_calibration(
    current: Path, covariates: Path | None, calibration: Path | None, history: Path | None, gold: Path | None,
    history_covariates: Path | None, label_map: dict[str, int | None] | None, history_weight: float | Literal["cv"],
    *, item_col: str | None, labeler_col: str | None, label_col: str | None, round_col: str | None,
    duplicates: Duplicates, gold_col: str | None = None, gold_item_col: str | None = None,
    encoding: str | None = None, checks: bool = True, current_gold: Path | None = None, design: Path | None = None,
) -> tuple[AnnotationSet, AnnotationSet | None, Calibration]:
    """Read the current round, and load the calibration file or calibrate the history (with model checks)."""
    from heroeval.stage_a.calibration import load_calibration
    from heroeval.workflows.api import calibrate

    with _busy("reading and calibrating"):
        cur = _read_current(current, covariates=covariates, item_col=item_col, labeler_col=labeler_col,
                            label_col=label_col, round_col=round_col, duplicates=duplicates,
                            label_map=label_map, name="current", title="Ingest: current round", encoding=encoding,
                            gold=current_gold, design=design, gold_col=gold_col, gold_item_col=gold_item_col)
        if cur.has_gold:
            checks = False  # the round's own gold decides the recommended estimate: no mock rounds needed
        if calibration is not None:
            return cur, None, load_calibration(calibration)
        assert history is not None
        hist = _read(history, gold=gold, covariates=history_covariates, name="history", item_col=item_col,
                     labeler_col=labeler_col, label_col=label_col, round_col=round_col, duplicates=duplicates,
                     label_map=label_map, gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding)
        return cur, hist, calibrate(hist, history_weight=history_weight, checks=checks)


def _run(fn: Any) -> Any:
    """Run ``fn`` turning heroeval errors into a clean message and exit code 2."""
    from rich.console import Console
    from rich.markup import escape

    from heroeval.report import terminal as _render

    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", HeroEvalWarning)
            out = fn()
    except HeroEvalError as exc:
        if _INGESTED:  # what was read before the failure: often the reason
            _render.print_all(Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 132),
                              *_ingest_tables())
        _err(str(exc))
        raise typer.Exit(2) from None
    finally:
        for w in caught:
            if issubclass(w.category, HeroEvalWarning):
                Console(stderr=True, highlight=False).print(
                    f"[yellow]warning ({w.category.__name__}):[/yellow] {escape(to_cli(str(w.message)))}",
                    soft_wrap=True)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return out


@app.command("calibrate")
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
    structure: StructureOpt = "full",
    engine: Annotated[Engine, typer.Option(help="Stage A engine: numpy, numba (compiled; " + ("installed" if HAVE_NUMBA else "needs numba, not installed: pip install numba") + ") or auto (numba from 1e6 annotations when installed).")] = Engine.auto,
    reader: Annotated[Reader, typer.Option(help="Reader: pandas, duckdb (globs, directories, files larger than memory) or auto (duckdb for globs, directories and files from 256 MB).")] = Reader.auto,
    memory_limit: Annotated[str | None, typer.Option(help="DuckDB memory limit for the duckdb reader, e.g. 2GB (it spills to disk beyond).")] = None,
    gold_col: GoldColOpt = None,
    gold_item_col: GoldItemColOpt = None,
    encoding: EncodingOpt = None,
    compact: Annotated[bool, typer.Option(help="Read Parquet with integer item ids straight into the compiled engine's arrays (histories near memory's size: about a third of the memory); no model checks.")] = False,
) -> None:
    """Stage A: learn each labeler's sensitivity and specificity from the history.

    HISTORY may be a glob ('logs/*.parquet') or a directory with the duckdb reader.
    """
    from heroeval.ingest.compact import CompactHistory
    from heroeval.ingest.read import read_compact
    from heroeval.report import terminal as _render
    from heroeval.workflows.api import calibrate

    hw = _history_weight(history_weight)
    _check_output(output, "--output", "the calibration")
    if covariates is not None:
        if history_covariates is not None:
            _err("give --history-covariates once (--covariates is its old name)")
            raise typer.Exit(2)
        history_covariates = covariates
    if classes is not None or ordinal:
        if shrink is Shrink.eb:
            _err("--shrink eb is for binary labels; multi-class and ordinal calibrations take --pseudo-count")
            raise typer.Exit(2)
        from heroeval.cli import multiclass as _mc  # multi-class labels only: SciPy's stats and more

        _run(lambda: _mc.calibrate(
            history, gold, output, classes=classes, ordinal=ordinal, structure=structure,
            read_kw=_mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map), round_col=round_col,
            tol=tol, max_iter=max_iter, pseudo_count=pseudo_count, json_out=fmt is Format.json))
        return

    run_checks = checks
    if compact:
        if history_covariates is not None or label_map is not None or encoding is not None or hw == "cv":
            _err("--compact takes none of --history-covariates, --label-map, --encoding, --history-weight cv")
            raise typer.Exit(2)
        if checks:
            from rich.console import Console

            Console(stderr=True, highlight=False).print(
                "note: model checks skipped: --compact keeps no history items for their refits (--no-checks "
                "silences this note)", soft_wrap=True)
        run_checks = False

    def go() -> tuple[AnnotationSet | CompactHistory, Calibration]:
        h: AnnotationSet | CompactHistory
        with _busy("reading the history"):
            if compact:
                h = _register("Ingest: history", read_compact(
                    history, gold=gold, item_col=item_col, labeler_col=labeler_col, label_col=label_col,
                    round_col=None if round_col is None else (False if round_col == "none" else round_col),
                    duplicates=duplicates.value, name="history", memory_limit=memory_limit,  # type: ignore[arg-type]
                    gold_col=gold_col,
                    gold_item_col=gold_item_col))
            else:
                h = _read(history, gold=gold, covariates=history_covariates, name="history", item_col=item_col,
                          labeler_col=labeler_col, label_col=label_col, round_col=round_col, duplicates=duplicates,
                          label_map=_label_map(label_map), reader=reader.value, memory_limit=memory_limit,
                          gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding)
        what = "Stage A: EM on the history" + (" and model checks" if run_checks or hw == "cv" else "")
        with _busy(what) as say:
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

    h, c = _run(go)
    if fmt is Format.json:
        print(json.dumps({"calibration": c.to_dict(), "output": str(output),
                          "ingest": h.report.to_dict()}, indent=1))
        return
    con = _console()
    _render.print_all(con, *_ingest_tables(), _render.calibration_table(c),
                      _render.rounds_table(c), *_render.checks_tables(c))
    con.print(f"calibration written to {output}")


# Help texts and defaults are built when the command line starts, so they name these without importing the
# estimators (start-up time); tests/cli/test_startup.py pins them to the library's own constants.
_METHODS = ("majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1", "hero2", "hero_joint")
"""heroeval.estimators.results.METHODS"""
_ALL_GOLD_METHODS = ("hero1_ppi", "prior_ppi", "mv_ppi", "gold_only")
"""heroeval.estimators.ppi.ALL_GOLD_METHODS"""
_DEFAULT_MIX = 0.5
"""heroeval.inference.select.DEFAULT_MIX"""

CalOpt = Annotated[Path | None, typer.Option(help="Calibration JSON from 'hero calibrate'.")]
HistOpt = Annotated[Path | None, typer.Option(help="History annotations (instead of --calibration).")]
GoldOpt = Annotated[Path | None, typer.Option(help="History gold labels (with --history).")]
HistCovOpt = Annotated[Path | None, typer.Option(help="History covariates (HERO-2, with --history).")]
MethodOpt = Annotated[str, typer.Option(help=f"One of {', '.join(_METHODS)} (with current gold also {', '.join(_ALL_GOLD_METHODS)}), a comma list, or all.")]
CurGoldOpt = Annotated[Path | None, typer.Option(help="Expert (gold) labels on some items of the current round: item_id, gold (and optionally pi). They are used by the estimates with current gold (hero1_ppi: HERO-1's posteriors rectified by them), which the recommended estimate then is.")]
DesignOpt = Annotated[Path | None, typer.Option(help="How the current gold items were sampled: the selection file 'hero select' wrote (item_id, pi). Without it (and without a pi column in the gold file) they are taken as a uniform random sample.")]
RidgeOpt = Annotated[float, typer.Option(help="HERO-2 ridge penalty (standardised scale).")]
TieOpt = Annotated[Tie, typer.Option(help="Majority-vote tie rule.")]
RoundOpt = Annotated[str | None, typer.Option(help="History round column (default 'round' if present; 'none' ignores it).")]
LevelOpt = Annotated[float, typer.Option(help="Confidence level of the intervals.")]
CiOpt = Annotated[CiMethod, typer.Option(help="Interval: auto (score-test inversion near 0 or 1, logit elsewhere), score, wald, or logit-transformed.")]
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


def _history_weight(spec: str) -> float | Literal["cv"]:
    if spec.strip().lower() == "cv":
        return "cv"
    try:
        w = float(spec)
    except ValueError:
        w = math.nan
    if not 0 <= w <= 1:
        _err(f"--history-weight must be a number in [0, 1] or 'cv', got {spec!r}")
        raise typer.Exit(2)
    return w


HistWeightOpt = Annotated[str, typer.Option(help="With --history: weight of gold-free history items in Stage A, a number in [0, 1] or 'cv'.")]


def _methods(method: str) -> Any:
    return "all" if method == "all" else [m.strip() for m in method.split(",") if m.strip()]


@app.command("estimate")
def estimate_cmd(
    current: Annotated[Path, typer.Argument(help=f"Current-round annotations ({FILES}; no gold needed).")],
    calibration: CalOpt = None,
    history: HistOpt = None,
    gold: GoldOpt = None,
    covariates: Annotated[Path | None, typer.Option(help="Current-round covariates (HERO-2).")] = None,
    history_covariates: HistCovOpt = None,
    method: MethodOpt = "all",
    ridge: RidgeOpt = 0.0,
    tie: TieOpt = Tie.half,
    exclude_new_labelers: ExcludeNewOpt = False,
    history_weight: HistWeightOpt = "1",
    new_labelers: NewLabelersOpt = None,
    on_shift: Annotated[OnShift, typer.Option(help="HERO-2 on covariate shift: warn, fallback (return HERO-1) or ignore.")] = OnShift.warn,
    drift_check: Annotated[bool, typer.Option("--check-drift/--no-check-drift", help="With hero1, hero2 or hero_joint: test whether each labeler's current positive rate matches its calibration (warns; JSON key 'drift').")] = True,
    confidence_level: LevelOpt = 0.95,
    ci_method: CiOpt = CiMethod.auto,
    alternative: AltOpt = Alternative.two_sided,
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
    gold_col: GoldColOpt = None,
    gold_item_col: GoldItemColOpt = None,
    encoding: EncodingOpt = None,
    current_gold: CurGoldOpt = None,
    design: DesignOpt = None,
) -> None:
    """Estimate the current round's gold rate with HERO and the baselines, with confidence intervals.

    With --method all (the default) or 'auto' in the list, the recommended
    estimate comes first: the method the model checks on the history's gold
    expect to err least for this round.
    """
    from rich.markup import escape

    from heroeval.estimators.ppi import ALL_GOLD_METHODS
    from heroeval.estimators.results import EstimateCollection, EstimateResult
    from heroeval.inference._inference import bootstrap as run_bootstrap
    from heroeval.report import terminal as _render
    from heroeval.workflows.api import estimate

    _check_sources(calibration, history, gold, history_covariates, round_col, confidence_level)
    hw = _history_weight(history_weight)
    rule = _new_labeler_rule(new_labelers, exclude_new_labelers)
    if design is not None and current_gold is None:
        _err("--design goes with --current-gold (the expert labels of the selected items)")
        raise typer.Exit(2)
    if classes is not None or ordinal:
        from heroeval.cli import multiclass as _mc  # multi-class labels only: SciPy's stats and more
        if current_gold is not None:
            _err("--current-gold is not available for multi-class labels yet")
            raise typer.Exit(2)
        if bootstrap:
            _err("--bootstrap is not available for multi-class labels yet")
            raise typer.Exit(2)
        _mc_new_labelers(rule)
        _run(lambda: _mc.estimate(
            current, calibration=calibration, history=history, gold=gold, classes=classes, ordinal=ordinal,
            structure=structure, method=method, exclude_new_labelers=rule == "exclude", level=confidence_level,
            read_kw=_mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map), round_col=round_col,
            json_out=fmt is Format.json, covariates=covariates, history_covariates=history_covariates, ridge=ridge))
        return
    if bootstrap and history is None:
        _err("--bootstrap refits Stage A: it needs --history and --gold, not a calibration file")
        raise typer.Exit(2)

    def go() -> tuple[AnnotationSet, AnnotationSet | None, EstimateCollection, dict[str, Any]]:
        lm = _label_map(label_map)
        cur, hist, cal = _current_and_calibration(
            current, covariates, calibration, history, gold, history_covariates, lm, hw, item_col=item_col,
            labeler_col=labeler_col, label_col=label_col, round_col=round_col, duplicates=duplicates,
            gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding, current_gold=current_gold,
            design=design)
        kw: dict[str, Any] = {"ridge": ridge, "tie": tie.value, "exclude_new_labelers": False}
        ms = _methods(method)
        # the recommended estimate with every method, or when 'auto' is in the list; not for a list without it
        recommend = ms == "all" or "auto" in ms
        ms = ms if ms == "all" else [m for m in ms if m != "auto"]
        res = estimate(cur, cal, method=ms, rng=seed, recommend=recommend, on_shift=on_shift.value,
                       new_labelers=rule, drift_check=drift_check, **kw)  # type: ignore[arg-type]
        if isinstance(res, EstimateResult):  # pragma: no cover - a list always gives a collection
            res = EstimateCollection({res.method: res}, ingest=cur.report)
        boot: dict[str, Any] = {}
        if bootstrap:
            bkw = {**kw, "exclude_new_labelers": rule == "exclude"}
            boot = run_bootstrap(cur, cal, method=[m for m in res if m not in ALL_GOLD_METHODS],  # nor auto
                                 n_resamples=bootstrap, rng=seed,
                                 progress=fmt is Format.table and sys.stderr.isatty(), **bkw)
        return cur, hist, res, boot

    cur, hist, res, boot = _run(go)
    if fmt is Format.json:
        out = res.to_dict(confidence_level)
        if res.drift is not None:
            out["drift"] = res.drift if isinstance(res.drift, dict) else (
                {"error": res.drift} if isinstance(res.drift, str) else res.drift.to_dict())
        for m, r in res.items():  # intervals by the requested method
            ci = r.confidence_interval(confidence_level, ci_method.value, alternative.value)
            out["estimates"][m].update(ci_low=_num(ci.low), ci_high=_num(ci.high), ci_method=ci.method,
                                       ci_alternative=ci.alternative, ci_text=ci.describe())
            if m in boot:
                out["estimates"][m]["bootstrap"] = boot[m].to_dict(confidence_level)
        out["ingest"] = {"current": cur.report.to_dict(),
                         "history": None if hist is None else hist.report.to_dict()}
        cg = _current_gold_json(cur, current_gold, design)
        if cg is not None:
            out["ingest"]["current_gold"] = cg
        print(json.dumps(out, indent=1))
        return
    con = _console()
    _render.print_all(con, *_ingest_tables())
    gold_txt = _current_gold_text(cur, design)
    if gold_txt:
        con.print(escape(gold_txt), soft_wrap=True)
    _render.print_all(con, _render.estimates_table(res, confidence_level=confidence_level, say=to_cli,
                                                   ci_method=ci_method.value, bootstrap=boot,
                                                   alternative=alternative.value))


def _mc_new_labelers(rule: str | None) -> None:
    if rule == "estimate":
        _err("--new-labelers estimate is not available for multi-class labels yet; use exclude")
        raise typer.Exit(2)


@app.command("compare")
def compare_cmd(
    a_current: Annotated[Path, typer.Argument(help=f"Round A's annotations, e.g. model A's outputs ({FILES}).")],
    b_current: Annotated[Path, typer.Argument(help=f"Round B's annotations, e.g. model B's outputs ({FILES}).")],
    calibration: CalOpt = None,
    history: HistOpt = None,
    gold: GoldOpt = None,
    a_covariates: Annotated[Path | None, typer.Option(help="Round A's covariates (HERO-2).")] = None,
    b_covariates: Annotated[Path | None, typer.Option(help="Round B's covariates (HERO-2).")] = None,
    history_covariates: HistCovOpt = None,
    method: MethodOpt = "all",
    ridge: RidgeOpt = 0.0,
    tie: TieOpt = Tie.half,
    exclude_new_labelers: ExcludeNewOpt = False,
    confidence_level: LevelOpt = 0.95,
    label_map: MapOpt = None,
    item_col: ItemCol = None,
    labeler_col: LabelerCol = None,
    label_col: LabelCol = None,
    round_col: RoundOpt = None,
    duplicates: DupOpt = Duplicates.keep,
    fmt: FmtOpt = Format.table,
    report: Annotated[Path | None, typer.Option(help="Also write a self-contained HTML report of both rounds and the difference.")] = None,
    classes: ClassesOpt = None,
    ordinal: OrdinalOpt = False,
    structure: StructureOpt = "full",
    new_labelers: NewLabelersOpt = None,
    drift_check: Annotated[bool, typer.Option("--check-drift/--no-check-drift", help="Test each round's labelers against their calibration (warns on drift).")] = True,
    gold_col: GoldColOpt = None,
    gold_item_col: GoldItemColOpt = None,
    encoding: EncodingOpt = None,
    a_gold: Annotated[Path | None, typer.Option(help="Expert (gold) labels on some items of round A: item_id, gold (and optionally pi), as hero estimate --current-gold reads them. With gold in both rounds the estimates with current gold (hero1_ppi, mv_ppi, gold_only) are compared too.")] = None,
    b_gold: Annotated[Path | None, typer.Option(help="Expert (gold) labels on some items of round B (see --a-gold).")] = None,
) -> None:
    """Difference of two rounds' gold rates (A - B) sharing one calibration, with intervals and p-values.

    With --a-gold and --b-gold (expert labels on a random sample of each
    round's items) the estimates with current gold are compared as well.
    """
    from rich.markup import escape

    from heroeval.checks.drift import check_drift
    from heroeval.estimators.ppi import ALL_GOLD_METHODS
    from heroeval.inference._inference import ComparisonCollection, compare
    from heroeval.report import terminal as _render
    from heroeval.report.html import build_comparison_report, collect_warnings, write_report
    from heroeval.stage_a.calibration import load_calibration
    from heroeval.workflows.api import calibrate, warn_multiple_rounds

    _check_sources(calibration, history, gold, history_covariates, round_col, confidence_level)
    _check_output(report, "--report", "the report")
    rule = _new_labeler_rule(new_labelers, exclude_new_labelers)
    if classes is not None or ordinal:
        from heroeval.cli import multiclass as _mc  # multi-class labels only: SciPy's stats and more
        if a_gold is not None or b_gold is not None:
            _err("--a-gold / --b-gold are not available for multi-class labels yet")
            raise typer.Exit(2)
        if report is not None:
            _err("--report is not available for multi-class labels yet")
            raise typer.Exit(2)
        _mc_new_labelers(rule)
        _run(lambda: _mc.compare(
            a_current, b_current, calibration=calibration, history=history, gold=gold, classes=classes,
            ordinal=ordinal, structure=structure, method=method, exclude_new_labelers=rule == "exclude",
            level=confidence_level, read_kw=_mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map),
            round_col=round_col, json_out=fmt is Format.json))
        return
    if report is not None and method != "all" and len(_methods(method)) < 2:
        method = "all"  # the report shows every method; one method alone gives no collection

    def go() -> tuple[Any, AnnotationSet, AnnotationSet]:
        lm = _label_map(label_map)
        rd: dict[str, Any] = {"item_col": item_col, "labeler_col": labeler_col, "label_col": label_col,
                              "round_col": round_col, "duplicates": duplicates, "label_map": lm, "encoding": encoding}
        with _busy("reading and calibrating"):
            gk: dict[str, Any] = {"gold_col": gold_col, "gold_item_col": gold_item_col}
            a = _read_current(a_current, covariates=a_covariates, name="A", title="Ingest: round A", gold=a_gold,
                              **gk, **rd)
            b = _read_current(b_current, covariates=b_covariates, name="B", title="Ingest: round B", gold=b_gold,
                              **gk, **rd)
            hist = None
            if calibration is not None:
                cal = load_calibration(calibration)
            else:
                assert history is not None
                hist = _read(history, gold=gold, covariates=history_covariates, name="history", item_col=item_col,
                             labeler_col=labeler_col, label_col=label_col, round_col=round_col,
                             duplicates=duplicates, label_map=lm, gold_col=gold_col, gold_item_col=gold_item_col,
                             encoding=encoding)
                cal = calibrate(hist)
        wanted = _methods(method)

        def run() -> Any:
            for r in (a, b):
                warn_multiple_rounds(r)
            out = compare(a, b, cal, method=wanted if wanted == "all" else list(wanted), ridge=ridge, tie=tie.value,
                          new_labelers=rule)
            if drift_check:  # the same check, and warning, as hero estimate gives each round
                for r in (a, b):
                    try:
                        check_drift(r, cal)
                    except HeroEvalError:
                        pass  # nothing to test (no calibrated labeler): the comparison says why
            return out

        cc, warns = collect_warnings(run)
        if report is not None:
            src = {"A": a_current, "B": b_current, "calibration": calibration, "history": history, "gold": gold}
            page = build_comparison_report(
                cc, a, b, cal, history=None if calibration is not None else hist, warnings=warns,
                confidence_level=confidence_level, sources={k: str(v) for k, v in src.items() if v is not None})
            write_report(report, page)
        return cc, a, b

    cc, a, b = _run(go)
    if fmt is Format.json:
        out = cc.to_dict(confidence_level)
        out["ingest"] = {"a": a.report.to_dict(), "b": b.report.to_dict()}
        if a.has_gold or b.has_gold:
            out["ingest"]["current_gold"] = {"a": _current_gold_json(a, a_gold), "b": _current_gold_json(b, b_gold)}
        print(json.dumps(out, indent=1))
        return
    con = _console()
    _render.print_all(con, *_ingest_tables())
    for r in (a, b):
        gold_txt = _current_gold_text(r)
        if gold_txt:
            con.print(escape(gold_txt), soft_wrap=True)
    _render.print_all(con, _render.comparison_table(cc, confidence_level))
    if isinstance(cc, ComparisonCollection):
        for m, why in cc.skipped.items():
            if m in ALL_GOLD_METHODS:
                con.print(escape(f"{m}: not compared ({why})"), soft_wrap=True)
    if report is not None:
        con.print(f"report written to {report}")


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
    from heroeval.report import terminal as _render
    from heroeval.report.plots import plot_sweep
    from heroeval.workflows import montecarlo


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
    reps: Annotated[int, typer.Option(help="Random history/current splits (resamples) per setting; as in hero simulate.")] = 20,
    rho: Annotated[str, typer.Option(help="Shares of history items with gold revealed, comma-separated.")] = "0.05,0.10",
    n: Annotated[int, typer.Option(help="Current items per split (at most 40% of the gold items).")] = 200,
    shift: Annotated[str, typer.Option(help="none, half (the current round keeps half of the labelers) and/or rate (its items drawn with --rate-odds times the odds of a positive), comma-separated.")] = "none,half,rate",
    rate_odds: Annotated[float, typer.Option(help="--shift rate: factor on a gold positive's odds of entering the current round (inverted when the gold rate is above one half); below 1 moves the rate away from one half.")] = 3.0,
    binary_suffix: Annotated[str, typer.Option(help="Read labels<suffix>.csv and gold<suffix>.csv, e.g. _binary.")] = "",
    shrink: Annotated[Shrink, typer.Option(help="Stage A's prior in every split (as hero calibrate --shrink).")] = Shrink.none,
    split: Annotated[str, typer.Option(help="random splits, or groups: leave one real round out (needs --group-col).")] = "random",
    group_col: Annotated[str | None, typer.Option(help="Column of items.csv that groups items into real rounds.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the splits.")] = 2026,
    workers: Annotated[int | None, typer.Option(help="Processes (default: all cores).")] = None,
    out: Annotated[Path | None, typer.Option(help="Folder for resamples.csv.gz, summary.csv and a figure.")] = None,
    fmt: FmtOpt = Format.table,
    resamples_alias: Annotated[int | None, typer.Option("--resamples", hidden=True, help="Same as --reps (kept from 0.1).")] = None,
) -> None:
    """Every method on a real annotation set with gold labels, by resampling (|bias|, SD, RMSE, coverage, width)."""
    from heroeval.report import terminal as _render
    from heroeval.report.plots import plot_benchmark
    from heroeval.workflows.benchmark import load_folder, run_benchmark, summarize_benchmark

    resamples = reps if resamples_alias is None else resamples_alias

    def go() -> tuple[Any, Any, float]:
        rhos = _floats(rho, "rho") or []
        shifts = [x.strip() for x in shift.split(",") if x.strip()]
        data = load_folder(dataset_dir, binary_suffix=binary_suffix, group_col=group_col)
        t0 = time.perf_counter()
        with _progress("benchmark", fmt is Format.table) as tick:
            df = run_benchmark(data, resamples=resamples, rhos=rhos, n=n, shifts=shifts, seed=seed, workers=workers,
                               split=split, progress=tick, rate_odds=rate_odds, shrink=shrink.value)
        return df, summarize_benchmark(df), time.perf_counter() - t0

    df, summ, secs = _run(go)
    if out is not None:

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
def demo_cmd(
    fmt: FmtOpt = Format.table,
    report: Annotated[Path | None, typer.Option(help="Also write the demo's self-contained HTML report here.")] = None,
) -> None:
    """Run every method on the bundled real example (LLM judges grading TriviaQA answers)."""
    from heroeval.report import terminal as _render
    from heroeval.report.html import build_report, collect_warnings, write_report
    from heroeval.workflows.demo import example_paths, run_demo


    _check_output(report, "--report", "the report")
    t0 = time.perf_counter()
    d, warns = _run(lambda: collect_warnings(run_demo))
    truth = float(d.truth["true_rate"])
    if report is not None:
        p = example_paths()
        page = build_report(d.current, d.calibration, d.estimates, history=d.history, truth=truth,
                            title=f"heroeval demo: accuracy of {d.truth['current_round']} on TriviaQA",
                            sources={k: str(p[k]) for k in ("current", "history", "gold")}, warnings=warns)
        _run(lambda: write_report(report, page))
    secs = time.perf_counter() - t0
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
    wall = _process_seconds()
    con.print(f"demo finished in {wall:.1f} s of wall time" if wall is not None else
              f"demo finished in {secs:.1f} s (after start-up)")
    if report is not None:
        con.print(f"HTML report written to {report}")


def _process_seconds() -> float | None:
    """Wall time since this process started (what the user waited, start-up and imports included); Linux only."""
    try:
        with open("/proc/self/stat") as fh:
            start_ticks = float(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


@contextmanager
def _progress(what: str, enabled: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """A transient rich progress bar on stderr fed by ``tick(done, total)``; None when stderr is not a terminal."""
    from rich.console import Console

    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as prog:
        task = prog.add_task(what, total=None)
        yield lambda done, total: prog.update(task, completed=done, total=total)


@contextmanager
def _busy(what: str) -> Iterator[Callable[[str], None] | None]:
    """A transient spinner on stderr while a long step (reading, Stage A's EM) runs; nothing when piped.

    Yields ``say(text)``, which replaces the spinner's text (None when stderr is not a terminal).
    """
    from rich.console import Console

    if not sys.stderr.isatty():
        yield None
        return
    with Console(stderr=True).status(what) as status:
        yield lambda text: status.update(text)


@app.command("report")
def report_cmd(
    current: Annotated[Path, typer.Argument(help=f"Current-round annotations ({FILES}; no gold needed).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the HTML report.")],
    calibration: CalOpt = None,
    history: HistOpt = None,
    gold: GoldOpt = None,
    covariates: Annotated[Path | None, typer.Option(help="Current-round covariates (HERO-2).")] = None,
    history_covariates: HistCovOpt = None,
    title: Annotated[str | None, typer.Option(help="Title of the page.")] = None,
    ridge: RidgeOpt = 0.0,
    tie: TieOpt = Tie.half,
    exclude_new_labelers: ExcludeNewOpt = False,
    confidence_level: LevelOpt = 0.95,
    ci_method: CiOpt = CiMethod.auto,
    seed: Annotated[int | None, typer.Option(help="Seed of --tie random.")] = None,
    label_map: MapOpt = None,
    item_col: ItemCol = None,
    labeler_col: LabelerCol = None,
    label_col: LabelCol = None,
    round_col: RoundOpt = None,
    duplicates: DupOpt = Duplicates.keep,
    classes: ClassesOpt = None,
    ordinal: OrdinalOpt = False,
    structure: StructureOpt = "full",
    new_labelers: NewLabelersOpt = None,
    gold_col: GoldColOpt = None,
    gold_item_col: GoldItemColOpt = None,
    encoding: EncodingOpt = None,
    current_gold: CurGoldOpt = None,
    design: DesignOpt = None,
) -> None:
    """Write one self-contained HTML report: every estimate, the labelers, the pool shift and the checks."""
    from heroeval.estimators.results import EstimateCollection
    from heroeval.report import terminal as _render
    from heroeval.report.html import build_report, collect_warnings, write_report
    from heroeval.workflows.api import estimate

    _check_sources(calibration, history, gold, history_covariates, round_col, confidence_level)
    _check_output(output, "--output", "the report")
    rule = _new_labeler_rule(new_labelers, exclude_new_labelers)
    if design is not None and current_gold is None:
        _err("--design goes with --current-gold (the expert labels of the selected items)")
        raise typer.Exit(2)
    if classes is not None or ordinal:
        from heroeval.cli import multiclass as _mc  # multi-class labels only: SciPy's stats and more
        if current_gold is not None:
            _err("--current-gold is not available for multi-class labels yet")
            raise typer.Exit(2)
        _mc_new_labelers(rule)
        _run(lambda: _mc.report(
            current, output, calibration=calibration, history=history, gold=gold, classes=classes, ordinal=ordinal,
            structure=structure, exclude_new_labelers=rule == "exclude", level=confidence_level,
            read_kw=_mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map), round_col=round_col,
            title=title))
        return

    def go() -> EstimateCollection:
        lm = _label_map(label_map)
        cur, hist, cal = _current_and_calibration(
            current, covariates, calibration, history, gold, history_covariates, lm, 1.0, item_col=item_col,
            labeler_col=labeler_col, label_col=label_col, round_col=round_col, duplicates=duplicates,
            gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding, current_gold=current_gold,
            design=design)
        kw: dict[str, Any] = {"ridge": ridge, "tie": tie.value, "new_labelers": rule}
        res, warns = collect_warnings(lambda: estimate(cur, cal, method="all", history=hist, rng=seed,
                                                       recommend=True, **kw))
        assert isinstance(res, EstimateCollection)
        src = {"current": current, "calibration": calibration, "history": history, "gold": gold,
               "current gold": current_gold, "design": design}
        page = build_report(cur, cal, res, history=hist, title=title, warnings=warns,
                            confidence_level=confidence_level, ci_method=ci_method.value,
                            sources={k: str(v) for k, v in src.items() if v is not None})
        write_report(output, page)
        return res

    res = _run(go)
    con = _console()
    _render.print_all(con, *_ingest_tables(),
                      _render.estimates_table(res, confidence_level=confidence_level, ci_method=ci_method.value,
                                             say=to_cli))
    con.print(f"report written to {output}")


@app.command("drift")
def drift_cmd(
    current: Annotated[Path, typer.Argument(help=f"Current-round annotations ({FILES}).")],
    calibration: CalOpt = None,
    history: HistOpt = None,
    gold: GoldOpt = None,
    significance: Annotated[float, typer.Option(help="Level of the per-labeler (adjusted) and overall tests.")] = 0.05,
    adjust: Annotated[str, typer.Option(help="Multiple-testing adjustment: holm or bh.")] = "holm",
    reestimate: Annotated[str, typer.Option(help="Also re-estimate HERO-1 without trusting flagged labelers: none, drop or estimate.")] = "drop",
    label_map: MapOpt = None,
    item_col: ItemCol = None,
    labeler_col: LabelerCol = None,
    label_col: LabelCol = None,
    round_col: RoundOpt = None,
    duplicates: DupOpt = Duplicates.keep,
    fmt: FmtOpt = Format.table,
    new_labelers: Annotated[NewLabelers, typer.Option(help="Labelers unknown to the calibration: exclude (set their annotations aside before the check, counted) or error. They have no calibration to test.")] = NewLabelers.exclude,
    exclude_new_labelers: ExcludeNewOpt = False,
    show_all: Annotated[bool, typer.Option("--all", help="List every labeler (default: the flagged ones only).")] = False,
    gold_col: GoldColOpt = None,
    gold_item_col: GoldItemColOpt = None,
    encoding: EncodingOpt = None,
) -> None:
    """Labeler drift check: does each labeler's current positive rate match its calibration?"""
    import numpy as np
    from rich.markup import escape

    from heroeval.checks.drift import check_drift, reestimate_without
    from heroeval.estimators._methods import hero1
    from heroeval.report import terminal as _render
    from heroeval.stage_a.calibration import load_calibration
    from heroeval.workflows.api import calibrate, estimate, warn_multiple_rounds


    _check_sources(calibration, history, gold, None, round_col)
    if reestimate not in ("none", "drop", "estimate"):
        _err(f"--reestimate must be none, drop or estimate, got {reestimate!r}")
        raise typer.Exit(2)
    rule = _new_labeler_rule(new_labelers, exclude_new_labelers)
    if rule == "estimate":
        _err("--new-labelers estimate: a labeler new in this round has no calibration to test for drift; "
             "use exclude (the default) or error")
        raise typer.Exit(2)

    def go() -> tuple[Any, Any, Any, dict[str, Any] | None]:
        lm = _label_map(label_map)
        cur = _read_current(current, item_col=item_col, labeler_col=labeler_col, label_col=label_col,
                            round_col=round_col, duplicates=duplicates, label_map=lm, name="current",
                            title="Ingest: current round", encoding=encoding)
        if calibration is not None:
            cal = load_calibration(calibration)
        else:
            assert history is not None
            cal = calibrate(_read(history, gold=gold, name="history", item_col=item_col, labeler_col=labeler_col,
                                  label_col=label_col, round_col=round_col, duplicates=duplicates, label_map=lm,
                                  gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding))
        warn_multiple_rounds(cur)
        index = cal.index_of()
        known = np.array([str(x) in index for x in cur.labeler_ids], dtype=bool)
        aside: dict[str, Any] | None = None
        if not known.all():
            new_ids = [str(x) for x in cur.labeler_ids[~known]]
            if rule == "error" or known.sum() == 0:
                estimate(cur, cal, method="hero1", drift_check=False)  # raises the error that names them
            cur, n_ann, n_items = cur.select_labelers(known)
            aside = {"labelers": new_ids, "annotations": n_ann, "items_left_without_labels": n_items}
        # the table names the flagged labelers; the warning is for JSON output, whose reader sees only stderr
        chk = check_drift(cur, cal, significance=significance, adjust=adjust,  # type: ignore[arg-type]
                          warn=fmt is Format.json)
        before = after = None
        if reestimate != "none" and chk.flagged:
            before = hero1(cur, cal, new_labelers="exclude")
            after = reestimate_without(cur, cal, chk, how=reestimate)  # type: ignore[arg-type]
        return chk, before, after, aside

    chk, before, after, aside = _run(go)
    if fmt is Format.json:
        out = chk.to_dict()
        if after is not None:
            out["hero1_all_labelers"] = before.to_dict()
            out["hero1_reestimated"] = after.to_dict()
        if aside is not None:
            out["new_labelers_set_aside"] = aside
        print(json.dumps(out, indent=1))
        return
    con = _console()
    _render.print_all(con, *_ingest_tables())
    if aside is not None:
        shown = ", ".join(aside["labelers"][:8]) + (" ..." if len(aside["labelers"]) > 8 else "")
        con.print(f"set aside {len(aside['labelers'])} labeler(s) new in this round (not in the calibration; "
                  f"--new-labelers exclude): {aside['annotations']} annotations, "
                  f"{aside['items_left_without_labels']} item(s) left without labels: {escape(shown)}", soft_wrap=True)
    if show_all:
        con.print(escape(chk.summary()), soft_wrap=True)
    else:
        con.print(_render.drift_table(chk.to_dict()))
    if after is not None:
        for title, r in (("HERO-1, all labelers", before), (f"HERO-1, flagged labelers {reestimate}", after)):
            ci = r.confidence_interval()
            con.print(f"{title}: {r.estimate:.4f} (SE {r.standard_error:.4f}, 95% CI [{ci.low:.4f}, {ci.high:.4f}])")


@app.command("plan")
def plan_cmd(
    calibration: Annotated[Path, typer.Option(help="Calibration JSON from 'hero calibrate'.")],
    mu: Annotated[float, typer.Option(help="Guessed gold rate of the round (round A for --difference).")],
    half_width: Annotated[float | None, typer.Option(help="Target half-width of the confidence interval.")] = None,
    difference: Annotated[float | None, typer.Option(help="Difference between two rounds to detect, A - B as hero compare reports it (round B's rate is --mu minus it).")] = None,
    n_items: Annotated[int | None, typer.Option(help="Report the half-width at this many items instead.")] = None,
    power: Annotated[float, typer.Option(help="Power for --difference (and --bound: the chance the bound falls below it).")] = 0.8,
    bound: Annotated[float | None, typer.Option(help="Target upper bound: items for the one-sided upper bound to fall below this when the rate is --mu (which may be 0).")] = None,
    confidence_level: LevelOpt = 0.95,
    labels_per_item: Annotated[str | None, typer.Option(help="Labels per item, comma-separated (default: the history's mean labels per item, or every labeler of --pool).")] = None,
    pool: Annotated[str | None, typer.Option(help="Labelers who will label, e.g. 'a,b,c' or with shares 'a=2,b=1'.")] = None,
    score_r2: Annotated[float, typer.Option(help="HERO-2: share of score variance the covariates explain (from an earlier round).")] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed of the Monte Carlo expectation (when not enumerated exactly).")] = 0,
    fmt: FmtOpt = Format.table,
    expert_labels: Annotated[bool, typer.Option("--expert-labels", help="Instead: how many expert (gold) labels in the current round give --half-width, for the uniform and active designs of 'hero select' and for the gold alone (needs --round-items).")] = False,
    round_items: Annotated[int | None, typer.Option(help="With --expert-labels: items in the current round.")] = None,
) -> None:
    """Plan a round: items (per labels-per-item) for a CI half-width or to detect a difference.

    With --expert-labels: expert labels in the current round for a half-width.
    """
    import numpy as np
    from rich.markup import escape

    from heroeval.inference.gold_plan import expert_labels as plan_expert_labels
    from heroeval.inference.planning import plan
    from heroeval.stage_a.calibration import load_calibration

    if expert_labels:
        if half_width is None or round_items is None or difference is not None or n_items is not None \
                or bound is not None:
            _err("--expert-labels needs --half-width and --round-items (and none of --difference, --n-items, --bound)")
            raise typer.Exit(2)

        def go_expert() -> Any:
            cal = load_calibration(calibration)
            lp = _floats(labels_per_item, "labels-per-item")
            return plan_expert_labels(cal, mu=mu, half_width=half_width, round_items=round_items,
                                      confidence_level=confidence_level,
                                      labels_per_item=None if lp is None else int(lp[0]),
                                      pool=None if pool is None else [x.strip() for x in pool.split(",") if x.strip()],
                                      rng=seed)

        ep = _run(go_expert)
        if fmt is Format.json:
            print(json.dumps(ep.to_dict(), indent=1, default=float))
        else:
            _console().print(escape(ep.summary()), soft_wrap=True)
        return

    def go() -> Any:
        cal = load_calibration(calibration)
        lp = _floats(labels_per_item, "labels-per-item")
        ks: Any = None if lp is None else [int(v) for v in lp]
        pl: Any = None
        if ks is None and pool is None:
            # the history's design: its mean labels per item, labelers drawn as often as they labelled there
            per_item = float(np.sum(cal.n_annotations)) / max(cal.n_history_items, 1)
            k = max(1, round(per_item))
            if k < cal.n_labelers:
                ks = [k]
                pl = {lab: float(n) for lab, n in zip(cal.labeler_ids, cal.n_annotations, strict=True) if n > 0}
                notes.append(f"labels per item: {k}, the history's mean ({per_item:.2f}), each drawn from the "
                             "history's labelers in proportion to their labels there (--labels-per-item and --pool "
                             "change it)")
        if pool is not None:
            parts = [x.strip() for x in pool.split(",") if x.strip()]
            if all("=" in x for x in parts):
                try:
                    pl = {k.strip(): float(v) for k, v in (x.split("=", 1) for x in parts)}
                except ValueError:
                    raise HeroEvalError(f"--pool: shares must be numbers, got {pool!r}") from None
            elif any("=" in x for x in parts):
                raise HeroEvalError(f"--pool: give shares for every labeler or for none, got {pool!r}")
            else:
                pl = parts
        # hero compare reports A - B; plan() takes B - A (round B's rate is mu + difference)
        out = plan(cal, mu=mu, half_width=half_width, difference=None if difference is None else -difference,
                   n_items=n_items, power=power, confidence_level=confidence_level, labels_per_item=ks, pool=pl,
                   score_r2=score_r2, rng=seed, bound=bound)
        if difference is not None:
            out = replace(out, target=float(difference))
        return replace(out, notes=(*out.notes, *notes)) if notes else out

    notes: list[str] = []
    p = _run(go)
    if fmt is Format.json:
        print(json.dumps(p.to_dict(), indent=1))
        return
    text = p.summary()
    if difference is not None:
        text = text.replace(f"a difference of {p.target:g}", f"a difference A - B of {p.target:g} (B at "
                            f"{mu - p.target:g})", 1)
    _console().print(escape(text), soft_wrap=True)


class SelectDesign(str, Enum):
    active = "active"
    uniform = "uniform"
    poisson = "poisson"


@app.command("select")
def select_cmd(
    current: Annotated[Path, typer.Argument(help=f"Current-round annotations ({FILES}).")],
    k: Annotated[int, typer.Option("--k", "-k", help="Budget: how many items to send to the experts.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the selected items (CSV: item_id, pi, predictor, design).")],
    calibration: Annotated[Path | None, typer.Option(help="Calibration JSON from 'hero calibrate' (needed by the active and poisson designs).")] = None,
    design: Annotated[SelectDesign, typer.Option(help="uniform (default; measured narrower than active below about half the round, docs/current_gold.md): a simple random sample of k items; active: items whose gold the silver labels leave uncertain are likelier (pi proportional to sqrt(f(1-f)), mixed with uniform), exactly k items; poisson: the same pi, drawn independently.")] = SelectDesign.uniform,
    mix: Annotated[float, typer.Option(help="Active designs: share of the uniform design in the mixture (bounds every weight 1/pi by n/(mix k)).")] = _DEFAULT_MIX,
    seed: Annotated[int | None, typer.Option(help="Seed of the draw.")] = None,
    new_labelers: NewLabelersOpt = None,
    label_map: MapOpt = None,
    item_col: ItemCol = None,
    labeler_col: LabelerCol = None,
    label_col: LabelCol = None,
    duplicates: DupOpt = Duplicates.keep,
    encoding: EncodingOpt = None,
    fmt: FmtOpt = Format.table,
) -> None:
    """Choose the current items to send to the experts, with their sampling probabilities.

    Label the selected items, then pass their labels back with
    'hero estimate CURRENT ... --current-gold gold.csv --design SELECTION':
    the estimates with current gold weight each item by 1/pi.
    """
    from rich.markup import escape

    from heroeval.inference.select import select_items
    from heroeval.report import terminal as _render
    from heroeval.stage_a.calibration import load_calibration

    _check_output(output, "--output", "the selection")
    if design is not SelectDesign.uniform and calibration is None:
        _err(f"the {design.value} design needs --calibration (the items' posteriors); or use --design uniform")
        raise typer.Exit(2)

    def go() -> Any:
        cur = _read_current(current, name="current", title="Ingest: current round", item_col=item_col,
                            labeler_col=labeler_col, label_col=label_col, round_col=None, duplicates=duplicates,
                            label_map=_label_map(label_map), encoding=encoding)
        cal = None if calibration is None else load_calibration(calibration)
        sel = select_items(cur, cal, k, design=design.value, mix=mix, rng=seed,
                           exclude_new_labelers=new_labelers is not None and new_labelers.value == "exclude")
        sel.chosen.to_csv(output, index=False)
        return sel

    sel = _run(go)
    if fmt is Format.json:
        print(json.dumps({"design": sel.design, "k": sel.k, "mix": sel.mix, "output": str(output),
                          "items": sel.chosen["item_id"].tolist(), "pi": sel.chosen["pi"].round(6).tolist(),
                          "notes": list(sel.notes)}, indent=1))
        return
    con = _console()
    _render.print_all(con, *_ingest_tables())
    con.print(escape(sel.summary()), soft_wrap=True)
    con.print(f"selection written to {output}; label these items, then: hero estimate {current} ... "
              f"--current-gold GOLD.csv --design {output}", soft_wrap=True)


def _print_version(value: bool) -> None:
    if value:
        print(f"heroeval {__version__}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def _root(
    # eager, and handled by its callback: `hero --version` exits while its options are parsed, before typer
    # builds its (pydantic) converters for the other options, which would double the start-up time
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.", is_eager=True,
                                          callback=_print_version)] = False,
) -> None:
    _INGESTED.clear()  # a new command (the CLI's tests run many in one process)


def main() -> None:  # pragma: no cover - console-script entry
    app(prog_name="hero")


if __name__ == "__main__":  # pragma: no cover
    main()
