"""``hero store ...``: the store of rounds on the command line (git- and DVC-like verbs over :class:`heroeval.Store`)."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from heroeval.cli.console import run
from heroeval.cli.options import CsvOpt, Format, SchedulerOpt, write_csv
from heroeval.errors import HeroEvalError

if TYPE_CHECKING:  # annotations only (strings at run time)
    from rich.console import Console
    from rich.table import Table

    from heroeval.store.trend import Trend

_ADJUSTMENTS = ("sidak", "bonferroni", "maxz", "none")
"""heroeval.store.trend.ADJUSTMENTS, named without importing the store (start-up time; tests/cli/test_startup.py pins it)."""

store_app = typer.Typer(
    name="store",
    help="A store of evaluation rounds (a DuckDB file): add rounds, reuse calibrations, follow the rate over versions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

T = TypeVar("T")

StoreOpt = Annotated[Path, typer.Option("--store", "-s", help="The store file (created by the first add).")]
WaitOpt = Annotated[float, typer.Option(help="Seconds to wait while another process has the store open.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of tables.")]
StoreFmtOpt = Annotated[Format | None, typer.Option("--format", "-f", help="table, or json (the same as --json), as every hero command takes it.")]
DEFAULT_STORE = Path("hero.duckdb")


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 132)


def _run(fn: Callable[[], T]) -> T:
    """Run ``fn``; a heroeval error becomes a message on stderr and exit code 2, and errors and warnings are
    told in the CLI's words (:func:`heroeval.cli.console.run`, as every other command)."""
    out: T = run(fn)
    return out


def _f(x: Any, fmt: str = ".4f") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return format(x, fmt)


def _dump(obj: Any) -> None:
    print(json.dumps(obj, indent=1, default=str, allow_nan=False))


@store_app.command("add")
def add_cmd(
    annotations: Annotated[Path, typer.Argument(help="The round's annotations (CSV, TSV, Parquet, JSONL).")],
    name: Annotated[str | None, typer.Option(help="The round's name (default: the file's stem).")] = None,
    gold: Annotated[Path | None, typer.Option(help="Gold labels of some of the round's items.")] = None,
    covariates: Annotated[Path | None, typer.Option(help="Item covariates (HERO-2).")] = None,
    model: Annotated[str | None, typer.Option(help="The model or version evaluated.")] = None,
    date: Annotated[str | None, typer.Option(help="A date for the round (free text, e.g. 2024-06-01).")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="A free tag (repeat for several).")] = None,
    role: Annotated[str, typer.Option(help="auto (history when it has gold), history or current.")] = "auto",
    split_rounds: Annotated[bool, typer.Option(help="Add each value of the file's round column as its own round.")] = False,
    item_col: Annotated[str | None, typer.Option(help="Item id column.")] = None,
    labeler_col: Annotated[str | None, typer.Option(help="Labeler id column.")] = None,
    label_col: Annotated[str | None, typer.Option(help="Label column.")] = None,
    group_col: Annotated[str | None, typer.Option("--group-col", help="A column of the file that groups the round's items (prompt, query, topic): stored with the round, so that its estimates, the history's calibration and the trend are cluster-robust by group (docs/inference.md, Grouped items).")] = None,
    store: StoreOpt = DEFAULT_STORE,
    wait: WaitOpt = 5.0,
    as_json: JsonOpt = False, fmt: StoreFmtOpt = None,
) -> None:
    """Add a round (one transaction). The same content added again is reported, not duplicated."""
    from rich.markup import escape

    from heroeval.report import terminal as _render
    from heroeval.store import Store

    def go() -> Any:
        return Store(store, wait=wait).add(annotations, name=name, gold=gold, covariates=covariates, model=model,
                                           date=date, tags=tag or (), role=role, split_rounds=split_rounds,
                                           item_col=item_col, labeler_col=labeler_col, label_col=label_col,
                                           group_col=group_col)
    res = _run(go)
    if as_json or fmt is Format.json:
        _dump({"added": [r.to_dict() for r in res.added],
               "duplicates": [{"name": a, "stored_as": r.name, "content_hash": r.content_hash}
                              for a, r in res.duplicates]})
        return
    con = _console()
    for r in res.added:
        _render.print_all(con, _render.ingest_table(r.ingest, f"Ingest: {escape(r.name)}"))
    for line in res.lines():
        con.print(escape(line), soft_wrap=True)


@store_app.command("gold")
def gold_cmd(
    name: Annotated[str, typer.Argument(help="The stored round.")],
    gold: Annotated[Path, typer.Argument(help="Expert labels on some of its items: item_id, gold (and optionally pi), as hero estimate --current-gold reads them.")],
    design: Annotated[Path | None, typer.Option(help="The design's inclusion probabilities (item_id, pi), e.g. hero select's file, when the gold file has no pi column.")] = None,
    gold_col: Annotated[str | None, typer.Option(help="Gold label column.")] = None,
    gold_item_col: Annotated[str | None, typer.Option(help="Item id column of the gold file.")] = None,
    store: StoreOpt = DEFAULT_STORE,
    wait: WaitOpt = 5.0,
    as_json: JsonOpt = False, fmt: StoreFmtOpt = None,
) -> None:
    """Add expert labels to a stored round (one transaction); its estimates then use them as current gold."""
    from rich.markup import escape

    from heroeval.store import Store

    res = _run(lambda: Store(store, wait=wait).add_gold(name, gold, design=design, gold_col=gold_col,
                                                        gold_item_col=gold_item_col))
    if as_json or fmt is Format.json:
        _dump(res.to_dict())
        return
    con = _console()
    for line in res.lines():
        con.print(escape(line), soft_wrap=True)


@store_app.command("list")
def list_cmd(store: StoreOpt = DEFAULT_STORE, wait: WaitOpt = 5.0, as_json: JsonOpt = False, fmt: StoreFmtOpt = None) -> None:
    """The rounds in the store, in the order added."""
    from rich.markup import escape
    from rich.table import Table

    from heroeval.store import Store

    rl = _run(lambda: Store(store, wait=wait).rounds())
    if as_json or fmt is Format.json:
        _dump(rl.to_dict())
        return
    t = Table(title=f"{len(rl)} rounds in {escape(str(store))}", title_justify="left")
    for c in ("round", "model", "date", "tags", "role", "items", "labels", "gold", "labelers", "added", "content"):
        t.add_column(c, justify="right" if c in ("items", "labels", "gold", "labelers") else "left")
    for r in rl:
        t.add_row(escape(r.name), escape(r.model or ""), escape(r.date or ""), escape(", ".join(r.tags)),
                  r.role + (" (history)" if r.in_history else ""), str(r.n_items), str(r.n_annotations),
                  str(r.n_gold), str(r.n_labelers), r.added_at, r.content_hash[:12])
    _console().print(t)


@store_app.command("show")
def show_cmd(name: Annotated[str, typer.Argument(help="The round.")], store: StoreOpt = DEFAULT_STORE,
             wait: WaitOpt = 5.0, as_json: JsonOpt = False, fmt: StoreFmtOpt = None) -> None:
    """One round: its metadata, sizes, content hash and the ingest report of its add."""
    from rich.markup import escape

    from heroeval.report import terminal as _render
    from heroeval.store import Store

    r = _run(lambda: Store(store, wait=wait).round(name))
    if as_json or fmt is Format.json:
        _dump(r.to_dict())
        return
    con = _console()
    for k, v in r.to_dict().items():
        if k != "ingest":
            con.print(f"{k}: {escape(str(v))}", soft_wrap=True)
    _render.print_all(con, _render.ingest_table(r.ingest, f"Ingest: {escape(r.name)}"))


@store_app.command("rm")
def rm_cmd(name: Annotated[str, typer.Argument(help="The round to remove.")], store: StoreOpt = DEFAULT_STORE,
           force: Annotated[bool, typer.Option(help="Remove it even if a pinned calibration used it.")] = False,
           wait: WaitOpt = 5.0) -> None:
    """Remove a round (the store's log keeps an audit line)."""
    from rich.markup import escape

    from heroeval.store import Store

    r = _run(lambda: Store(store, wait=wait).remove(name, force=force))
    _console().print(f"removed round {escape(repr(r.name))} ({r.n_items} items, {r.n_annotations} labels, "
                     f"content {r.content_hash[:12]}); logged", soft_wrap=True)


@store_app.command("role")
def role_cmd(name: Annotated[str, typer.Argument(help="The round.")],
             role: Annotated[str, typer.Argument(help="auto, history or current.")],
             store: StoreOpt = DEFAULT_STORE, wait: WaitOpt = 5.0) -> None:
    """Mark a round as history (calibrate on it), current (never) or auto (history when it has gold)."""
    from rich.markup import escape

    from heroeval.store import Store

    r = _run(lambda: Store(store, wait=wait).set_role(name, role))
    _console().print(f"round {escape(repr(r.name))}: role {r.role}{' (history)' if r.in_history else ''}")


@store_app.command("log")
def log_cmd(store: StoreOpt = DEFAULT_STORE, wait: WaitOpt = 5.0, as_json: JsonOpt = False, fmt: StoreFmtOpt = None) -> None:
    """The audit log: adds, duplicate adds, removals, role changes, pins."""
    from rich.markup import escape

    from heroeval.store import Store

    rows = _run(lambda: Store(store, wait=wait).log())
    if as_json or fmt is Format.json:
        _dump(rows)
        return
    con = _console()
    for r in rows:
        con.print(f"{r['seq']:>4} {r['at']} {r['action']:<14} {escape(str(r['round'] or ''))} "
                  f"{(r['content_hash'] or '')[:12]} {escape(json.dumps(r['detail']))}", soft_wrap=True)


@store_app.command("export")
def export_cmd(directory: Annotated[Path, typer.Argument(help="A new directory for the Parquet dataset.")],
               store: StoreOpt = DEFAULT_STORE, wait: WaitOpt = 5.0) -> None:
    """Export the rounds as a Parquet dataset partitioned by round (read by the DuckDB and Dask paths)."""
    from rich.markup import escape

    from heroeval.store import Store

    out = _run(lambda: Store(store, wait=wait).export(directory))
    _console().print(f"exported {out['rounds']} rounds ({out['annotations']} labels, {out['gold_items']} gold items) "
                     f"to {escape(str(directory))}; read with {escape(out['read_with'])}", soft_wrap=True)


@store_app.command("calibrate")
def calibrate_cmd(
    store: StoreOpt = DEFAULT_STORE,
    refit: Annotated[bool, typer.Option(help="Fit again even when a cached fit matches.")] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Also write the calibration JSON here.")] = None,
    wait: WaitOpt = 5.0,
    scheduler: SchedulerOpt = None,
) -> None:
    """Stage A on the store's history: the cached fit if the history and settings are unchanged, else a new one.

    With --scheduler a new fit runs on Dask: the history rounds are exported as Parquet to a directory beside
    the store (which the workers must read), fitted there, and the export removed."""
    from rich.markup import escape

    from heroeval.report import terminal as _render
    from heroeval.store import Store

    ran: list[str] = []

    def go() -> Any:
        st = Store(store, wait=wait)
        st.fitter = None if scheduler is None else _dask_fitter(st, store, scheduler, ran)
        return st.calibrate(refit=refit)

    sc = _run(go)
    con = _console()
    con.print(escape(sc.line()), soft_wrap=True)
    for line in ran:
        con.print(escape(line), soft_wrap=True)
    _render.print_all(con, _render.calibration_table(sc.calibration))
    if output is not None:
        sc.calibration.save(output)
        con.print(f"calibration written to {escape(str(output))}")


@store_app.command("estimate")
def estimate_cmd(
    target: Annotated[str, typer.Argument(help="A stored round's name, or a file of annotations.")],
    store: StoreOpt = DEFAULT_STORE,
    method: Annotated[str, typer.Option(help="Methods, comma-separated, or all.")] = "all",
    covariates: Annotated[Path | None, typer.Option(help="The file's covariates (HERO-2).")] = None,
    history: Annotated[bool | None, typer.Option("--history/--no-history", help="Load the history for hero_joint (default: when it is small).")] = None,
    refit: Annotated[bool, typer.Option(help="Refit Stage A even when a cached fit matches.")] = False,
    confidence_level: Annotated[float, typer.Option(help="Confidence level.")] = 0.95,
    current_gold: Annotated[Path | None, typer.Option(help="Expert labels on some of the round's items for this estimate (not stored; hero store gold stores them).")] = None,
    design: Annotated[Path | None, typer.Option(help="With --current-gold: the design's inclusion probabilities (item_id, pi).")] = None,
    wait: WaitOpt = 5.0,
    as_json: JsonOpt = False, fmt: StoreFmtOpt = None,
    csv_out: CsvOpt = None,
    scheduler: SchedulerOpt = None,
) -> None:
    """Estimate a round against the store's history (the cached calibration, or a refit when the history changed;
    with --scheduler a refit runs on Dask, as hero store calibrate --scheduler runs it)."""
    from rich.markup import escape

    from heroeval.estimators.collection import EstimateCollection
    from heroeval.estimators.results import EstimateResult
    from heroeval.report import terminal as _render
    from heroeval.store import Store

    ms: str | list[str] = "all" if method == "all" else [m.strip() for m in method.split(",") if m.strip()]
    ran: list[str] = []

    def go() -> Any:
        st = Store(store, wait=wait)
        st.fitter = None if scheduler is None else _dask_fitter(st, store, scheduler, ran)
        return st.estimate(target, method=ms, history=history, covariates=covariates, refit=refit,
                           current_gold=current_gold, design=design)

    se = _run(go)
    for line in ran:
        print(line, file=sys.stderr)
    res = se.estimates
    if isinstance(res, EstimateResult):  # pragma: no cover - a list gives a collection
        res = EstimateCollection({res.method: res}, ingest=se.data.report)
    write_csv(res.table(confidence_level).to_frame(), csv_out, "estimates table")  # as hero estimate --csv
    if as_json or fmt is Format.json:
        out = res.to_dict(confidence_level)
        out["calibration"] = {"key": se.calibration.key, "status": se.calibration.status,
                              "rounds": list(se.calibration.rounds), "seconds": se.calibration.seconds}
        out["notes"] = list(se.notes)
        _dump(out)
        return
    con = _console()
    con.print(escape(se.calibration.line()), soft_wrap=True)
    for n in se.notes:
        con.print(f"note: {escape(n)}", soft_wrap=True)
    _render.print_all(con, _render.estimates_table(res, title=f"Estimates: {escape(se.round)}",
                                                   confidence_level=confidence_level))


@store_app.command("pin")
def pin_cmd(name: Annotated[str, typer.Argument(help="A name for the pinned calibration, e.g. launch-2024-06.")],
            note: Annotated[str, typer.Option(help="Why it was pinned.")] = "",
            store: StoreOpt = DEFAULT_STORE, wait: WaitOpt = 5.0) -> None:
    """Pin the calibration of the current history under a name (kept verbatim; `hero store reproduce` refits it)."""
    from rich.markup import escape

    from heroeval.store import Store

    sc = _run(lambda: Store(store, wait=wait).pin(name, note=note))
    _console().print(f"pinned {escape(repr(name))}: {escape(sc.line())}", soft_wrap=True)


@store_app.command("pins")
def pins_cmd(store: StoreOpt = DEFAULT_STORE, wait: WaitOpt = 5.0, as_json: JsonOpt = False, fmt: StoreFmtOpt = None) -> None:
    """The pinned calibrations."""
    from rich.markup import escape
    from rich.table import Table

    from heroeval.store import Store

    rows = _run(lambda: Store(store, wait=wait).pins())
    if as_json or fmt is Format.json:
        _dump(rows)
        return
    t = Table(title="Pinned calibrations", title_justify="left")
    for c in ("pin", "key", "rounds", "created", "note"):
        t.add_column(c)
    for p in rows:
        t.add_row(escape(p["name"]), p["key"][:12], str(len(p["rounds"])), p["created_at"], escape(p["note"]))
    _console().print(t)


@store_app.command("reproduce")
def reproduce_cmd(name: Annotated[str, typer.Argument(help="The pin.")], store: StoreOpt = DEFAULT_STORE,
                  output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the pinned calibration JSON here.")] = None,
                  wait: WaitOpt = 5.0) -> None:
    """Refit a pinned calibration from its rounds and say whether it reproduces."""
    from rich.markup import escape

    from heroeval.store import Store

    st = Store(store, wait=wait)
    out = _run(lambda: st.reproduce(name))
    con = _console()
    con.print(f"pin {escape(repr(name))}: refitted on {len(out['rounds'])} rounds; largest parameter difference "
              f"{out['max_abs_difference']:.2e}: {'reproduced' if out['reproduced'] else 'NOT reproduced'}")
    if output is not None:
        _run(lambda: st.pinned(name)).save(output)
        con.print(f"pinned calibration written to {escape(str(output))}")
    if not out["reproduced"]:
        raise typer.Exit(1)


def _truth(path: Path | None) -> dict[str, float] | None:
    """Round name to true rate from a JSON file: ``{"name": rate}`` or ``{"rounds": {"name": {"true_rate": r}}}``."""
    if path is None:
        return None
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise HeroEvalError(f"--truth {path}: {exc}") from exc
    obj = obj.get("rounds", obj) if isinstance(obj, dict) else obj
    if not isinstance(obj, dict):
        raise HeroEvalError(f"--truth {path}: expected a JSON object of round names")
    return {str(k): float(v["true_rate"] if isinstance(v, dict) else v) for k, v in obj.items()}


def trend_table(tr: Trend, truth: dict[str, float] | None) -> Table:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"Rate by round ({escape(tr.method_line())})", title_justify="left")
    show_model = any(r.model not in (None, r.name) for r in tr.rounds)
    auto = tr.method == "auto"
    cols = ["round", *(["model"] if show_model else []), "items", "gold", *(["method"] if auto else []),
            "estimate", "SE", "simultaneous CI", *(["status"] if auto else []), "difference", "diff CI", "p (adj.)"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("round", "model") else "right", no_wrap=c.endswith("CI"))
    if truth is not None:
        t.add_column("truth", justify="right")
    diffs = {d.name: d for d in tr.differences}
    for r in tr.rounds:
        d = diffs.get(r.name)
        status = r.status if r.status == "ok" else f"[bold]{r.status.upper()}[/bold]"
        row = [escape(r.name), *([escape(r.model or "")] if show_model else []), str(r.n_items), str(r.n_gold),
               *([escape(r.method)] if auto else []), _f(r.estimate), _f(r.standard_error),
               f"[{_f(r.ci_low)}, {_f(r.ci_high)}]", *([status] if auto else []),
               "" if d is None else _f(d.estimate, "+.4f"),
               "" if d is None else f"[{_f(d.ci_low, '+.4f')}, {_f(d.ci_high, '+.4f')}]",
               "" if d is None else _f(d.p_adjusted, ".3g")]
        if truth is not None:
            row.append(_f(truth.get(r.name, math.nan)))
        t.add_row(*row)
    ref = "the previous round" if tr.baseline is None else escape(repr(tr.baseline))
    cal = ("calibration: each round's history without it, as hero store estimate" if tr.calibration_key == "per-round"
           else f"calibration {tr.calibration_key[:12]}")
    how = ("; the recommended difference (hero compare), p-values adjusted by "
           f"{'none' if tr.adjust == 'none' else 'Holm'}" if auto else "")
    t.caption = f"difference: each round minus {ref}{how}; {cal} ({tr.calibration_status})"
    t.caption_justify = "left"
    return t


@store_app.command("trend")
def trend_cmd(
    rounds: Annotated[list[str] | None, typer.Argument(help="Rounds in order (default: all, in the order added).")] = None,
    store: StoreOpt = DEFAULT_STORE,
    baseline: Annotated[str | None, typer.Option(help="Differences from this round (default: from the previous one).")] = None,
    adjust: Annotated[str, typer.Option(help=f"Multiplicity: {', '.join(_ADJUSTMENTS)}.")] = "sidak",
    method: Annotated[str, typer.Option(help="auto: each round's recommended estimate, as hero store estimate gives it (default); joint: every round from one Stage A fit.")] = "auto",
    confidence_level: Annotated[float, typer.Option(help="Simultaneous confidence level.")] = 0.95,
    drift: Annotated[bool, typer.Option("--drift/--no-drift", help="Test each round's labelers for drift against the rest of the history.")] = True,
    truth: Annotated[Path | None, typer.Option(help="JSON of true rates by round name, shown beside the estimates.")] = None,
    report: Annotated[Path | None, typer.Option(help="Write the HTML trend report here.")] = None,
    wait: WaitOpt = 5.0,
    as_json: JsonOpt = False, fmt: StoreFmtOpt = None,
    csv_out: CsvOpt = None,
) -> None:
    """Each round's rate with simultaneous intervals, the differences, and the labelers' drift round by round."""
    from rich.markup import escape

    from heroeval.report import terminal as _render
    from heroeval.report.html import write_report
    from heroeval.report.trend import build_trend_report
    from heroeval.store import Store

    def go() -> tuple[Trend, dict[str, float] | None]:
        tr = Store(store, wait=wait).trend(rounds or None, baseline=baseline, confidence_level=confidence_level,
                                           adjust=adjust, drift=drift, method=method)
        return tr, _truth(truth)
    tr, tmap = _run(go)
    write_csv(tr.to_frame(tmap), csv_out, "trend table")
    if report is not None:
        _run(lambda: write_report(report, build_trend_report(tr, truth=tmap)))
    if as_json or fmt is Format.json:
        _dump(tr.to_dict(tmap))
        return
    con = _console()
    _render.print_all(con, trend_table(tr, tmap))
    flagged = [r for r in tr.drift if r.flagged]
    if drift:
        con.print(f"labeler drift: {len(flagged)} of {len(tr.drift)} (round, labeler) pairs flagged "
                  "(Holm within each round)" + ("" if not flagged else ": " + "; ".join(
                      f"{escape(r.round)}/{escape(r.labeler)}" for r in flagged[:12])
                      + (" ..." if len(flagged) > 12 else "")), soft_wrap=True)
    bad = [r.name for r in tr.rounds if r.status != "ok"]
    if bad:
        con.print(f"UNRELIABLE or unavailable: {', '.join(escape(b) for b in bad)} (hero store estimate NAME says why)",
                  soft_wrap=True)
    for n in tr.notes:
        con.print(f"note: {escape(n)}", soft_wrap=True)
    if report is not None:
        con.print(f"trend report written to {escape(str(report))}")


def _dask_fitter(st: Any, store: Path, scheduler: str, ran: list[str]) -> Any:
    """``--scheduler`` on ``hero store calibrate|estimate``: a :attr:`heroeval.store.Store.fitter` that
    exports the rounds as Parquet to a directory beside the store (which the workers must read), fits Stage A
    there on Dask and removes the export; ``ran`` collects where it ran."""
    import tempfile

    from heroeval.cli.scheduler import calibrate_on_dask, size_note

    def fit(names: Any, settings: Any) -> Any:
        with tempfile.TemporaryDirectory(dir=Path(store).resolve().parent, prefix=".hero-export-") as tmp:
            st.export(tmp, rounds=list(names))
            cov = Path(tmp) / "covariates.parquet"
            cal, where = calibrate_on_dask(scheduler, Path(tmp) / "annotations", Path(tmp) / "gold.parquet",
                                           covariates=cov if cov.exists() else None, columns={},
                                           options=dict(settings))
        ran.append(where.line() + size_note(int(cal.n_annotations.sum())))
        return cal
    return fit
