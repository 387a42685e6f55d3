"""The options the commands share: their types and help texts, their choices, and the checks and parsing
of their values that run before any work (a wrong combination exits with code 2, nothing computed).

An option one command alone takes is declared with that command.
"""

from __future__ import annotations

import math
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from heroeval.cli.console import err
from heroeval.errors import HeroEvalError


class Format(str, Enum):
    table = "table"
    json = "json"


class Duplicates(str, Enum):
    keep = "keep"
    first = "first"
    error = "error"


class CiMethod(str, Enum):
    auto = "auto"
    score = "score"
    wald = "wald"
    logit = "logit"


class Shrink(str, Enum):
    none = "none"
    eb = "eb"


class NewLabelers(str, Enum):
    error = "error"
    exclude = "exclude"
    estimate = "estimate"


class Tie(str, Enum):
    half = "half"
    positive = "positive"
    negative = "negative"
    random = "random"


FILES = "CSV, TSV, Parquet or JSONL; .gz allowed"
ItemCol = Annotated[str | None, typer.Option(help="Item id column (default item_id or crowd-kit's task).")]
GoldColOpt = Annotated[str | None, typer.Option(help="Gold label column of the gold file (default gold, true_label or label).")]
GoldItemColOpt = Annotated[str | None, typer.Option(help="Item id column of the gold file (default: --item-col if the gold file has it, else item_id or task).")]
EncodingOpt = Annotated[str | None, typer.Option(help="Text encoding of CSV/TSV/JSON inputs (default utf-8), e.g. cp1252 for a file saved by Excel on Windows.")]
NewLabelersOpt = Annotated[NewLabelers | None, typer.Option(help="Labelers unknown to the calibration: error, exclude (leave their labels out, counted), or estimate them from the current round (HERO-1, anchored by the calibrated ones). Default: HERO-1 estimates them and every other method excludes them, each row saying so (multi-class labels: every method excludes them).")]
ExcludeNewOpt = Annotated[bool, typer.Option("--exclude-new-labelers", hidden=True, help="Same as --new-labelers exclude (kept from 0.1).")]
LabelerCol = Annotated[str | None, typer.Option(help="Labeler id column (default labeler_id or worker).")]
LabelCol = Annotated[str | None, typer.Option(help="Label column (default label).")]
DupOpt = Annotated[Duplicates, typer.Option(help="Repeated (item, labeler) pairs: keep, first or error.")]
FmtOpt = Annotated[Format, typer.Option("--format", "-f", help="Output: a rich table or JSON on stdout.")]
CalOpt = Annotated[Path | None, typer.Option(help="Calibration JSON from 'hero calibrate'.")]
HistOpt = Annotated[Path | None, typer.Option(help="History annotations (instead of --calibration).")]
GoldOpt = Annotated[Path | None, typer.Option(help="History gold labels (with --history).")]
HistCovOpt = Annotated[Path | None, typer.Option(help="History covariates (HERO-2, with --history).")]
CurGoldOpt = Annotated[Path | None, typer.Option(help="Expert (gold) labels on some items of the current round: item_id, gold (and optionally pi). They are used by the estimates with current gold (hero1_ppi: HERO-1's posteriors rectified by them), which the recommended estimate then is.")]
DesignOpt = Annotated[Path | None, typer.Option(help="How the current gold items were sampled: the selection file 'hero select' wrote (item_id, pi). Without it (and without a pi column in the gold file) they are taken as a uniform random sample.")]
GroupColOpt = Annotated[str | None, typer.Option("--group-col", help="A column of the current labels file that groups its items (prompt, query, topic, conversation): items of a group are treated as dependent and the standard errors become cluster-robust by group, for the rate over the population of groups (estimates with current gold excepted; docs/inference.md, Grouped items). With --history, its items are grouped by the same column when its file has it.")]
HistGroupColOpt = Annotated[str | None, typer.Option("--group-col", help="A column of the history labels file that groups its items (prompt, query, topic): the calibration's parameter covariance becomes cluster-robust by group (docs/inference.md, Grouped items).")]
RidgeOpt = Annotated[float, typer.Option(help="HERO-2 ridge penalty (standardised scale).")]
TieOpt = Annotated[Tie, typer.Option(help="Majority-vote tie rule.")]
RoundOpt = Annotated[str | None, typer.Option(help="History round column (default 'round' if present; 'none' ignores it).")]
LevelOpt = Annotated[float, typer.Option(help="Confidence level of the intervals.")]
CiOpt = Annotated[CiMethod, typer.Option(help="Interval: auto (score-test inversion near 0 or 1, logit elsewhere), score, wald, or logit-transformed.")]
MapOpt = Annotated[str | None, typer.Option(help="Recode labels, e.g. 'A=1,B=0,tie=drop' for a side-by-side win rate.")]
ClassesOpt = Annotated[str | None, typer.Option(help="Multi-class labels: the class order, comma-separated (e.g. 1,2,3,4,5).")]
OrdinalOpt = Annotated[bool, typer.Option(help="Multi-class labels that are ordered grades (Likert); enables --structure ordinal.")]
StructureOpt = Annotated[str, typer.Option(help="Multi-class confusion structure: full, symmetric, ordinal, auto (the smallest error of HERO-1 on mock rounds of the history's gold) or bic (the smallest BIC); with --method auto, auto or bic lets every structure compete.")]


CsvOpt = Annotated[Path | None, typer.Option("--csv", help="Also write the table as CSV to this file (the rows the terminal shows; stdout may be the JSON).")]


def write_csv(frame: Any, path: Path | None, what: str) -> None:
    """Write a result's ``to_frame()`` as CSV (``--csv``) and say so on stderr (stdout may hold the JSON)."""
    if path is None:
        return
    try:
        frame.to_csv(path)
    except OSError as exc:
        err(f"cannot write the {what} to {str(path)!r} (--csv): {exc.strerror or exc}")
        raise typer.Exit(2) from None
    print(f"{what} written to {path}", file=sys.stderr)


def check_output(path: Path | None, option: str, what: str) -> None:
    """Fail before any work when an output file cannot be written (missing folder, a directory, read-only)."""
    if path is None:
        return
    parent = path.parent if str(path.parent) not in ("", ".") else Path(".")
    head = f"cannot write {what} to {str(path)!r} ({option})"
    if path.is_dir():
        err(f"{head}: it is a folder; give a file name (nothing was computed)")
        raise typer.Exit(2)
    if not parent.is_dir():
        err(f"{head}: the folder {str(parent)!r} does not exist; create it first (nothing was computed)")
        raise typer.Exit(2)
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        err(f"{head}: not writable (nothing was computed)")
        raise typer.Exit(2)


def new_labeler_rule(new_labelers: NewLabelers | None, exclude_new_labelers: bool) -> str | None:
    """--new-labelers, with 0.1's --exclude-new-labelers as its alias for 'exclude'."""
    if exclude_new_labelers:
        if new_labelers not in (None, NewLabelers.exclude):
            assert new_labelers is not None
            err(f"--exclude-new-labelers contradicts --new-labelers {new_labelers.value}")
            raise typer.Exit(2)
        return "exclude"
    return None if new_labelers is None else new_labelers.value


def mc_read_kw(item_col: str | None, labeler_col: str | None, label_col: str | None, duplicates: Duplicates,
               label_map: str | None) -> dict[str, Any]:
    if label_map is not None:
        raise HeroEvalError("--label-map is for binary labels; with --classes give the classes themselves")
    return {"item_col": item_col, "labeler_col": labeler_col, "label_col": label_col, "duplicates": duplicates.value}


def parse_label_map(spec: str | None) -> dict[str, int | None] | None:
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


def check_sources(calibration: Path | None, history: Path | None, gold: Path | None,
                  history_covariates: Path | None, round_col: str | None = None,
                  confidence_level: float = 0.95) -> None:
    if not 0 < confidence_level < 1:
        err(f"--confidence-level must be in (0, 1), got {confidence_level:g}")
        raise typer.Exit(2)
    if calibration is not None and round_col is not None:
        err("--round-col goes with --history; a calibration file already holds the history's rounds")
        raise typer.Exit(2)
    if (calibration is None) == (history is None):
        err("give exactly one of --calibration or --history (with --gold)")
        raise typer.Exit(2)
    if history is not None and gold is None:
        err("--history needs --gold (the history's gold labels)")
        raise typer.Exit(2)
    if calibration is not None and history_covariates is not None:
        err("--history-covariates goes with --history; a calibration file already holds the history's covariate mean")
        raise typer.Exit(2)


def parse_history_weight(spec: str) -> float | Literal["cv"]:
    if spec.strip().lower() == "cv":
        return "cv"
    try:
        w = float(spec)
    except ValueError:
        w = math.nan
    if not 0 <= w <= 1:
        err(f"--history-weight must be a number in [0, 1] or 'cv', got {spec!r}")
        raise typer.Exit(2)
    return w


def mc_new_labelers(rule: str | None) -> bool:
    """Whether multi-class methods leave out labelers unknown to the calibration: by default they do, each row
    saying so (the binary path's rule for every method but HERO-1, which estimates them there); ``error`` stops."""
    if rule == "estimate":
        err("--new-labelers estimate is not available for multi-class labels yet; use exclude")
        raise typer.Exit(2)
    return rule != "error"


def parse_floats(spec: str | None, what: str) -> list[float] | None:
    if spec is None:
        return None
    try:
        return [float(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise HeroEvalError(f"--{what}: expected comma-separated numbers, got {spec!r}") from None

SchedulerOpt = Annotated[str | None, typer.Option(
    help="Run Stage A and its model checks on Dask: 'local' (a local cluster, one worker process per core), "
         "'local:N' (N workers) or a scheduler's address (tcp://host:8786; its workers need heroeval and must "
         "read the history's path). The history must be Parquet (file, glob or directory) or plain CSV.")]
