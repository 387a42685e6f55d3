"""``hero estimate`` and ``hero compare``: a round's gold rate, and the difference of two rounds' rates, with their
intervals, from one calibration (a calibration file, or Stage A on the history)."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from heroeval.cli._messages import to_cli
from heroeval.cli.console import busy, console, err, ingest_tables, run
from heroeval.cli.inputs import (
    columns_of,
    current_and_calibration,
    has_column,
    read,
    read_current,
    read_groups,
    read_pairs,
)
from heroeval.cli.options import (
    FILES,
    CalOpt,
    CiMethod,
    CiOpt,
    ClassesOpt,
    CsvOpt,
    CurGoldOpt,
    DesignOpt,
    Duplicates,
    DupOpt,
    EncodingOpt,
    ExcludeNewOpt,
    FmtOpt,
    Format,
    GoldColOpt,
    GoldItemColOpt,
    GoldOpt,
    GroupColOpt,
    HistCovOpt,
    HistOpt,
    ItemCol,
    LabelCol,
    LabelerCol,
    LevelOpt,
    MapOpt,
    NewLabelersOpt,
    OrdinalOpt,
    RidgeOpt,
    RoundOpt,
    SchedulerOpt,
    StructureOpt,
    Tie,
    TieOpt,
    check_output,
    check_sources,
    mc_new_labelers,
    mc_read_kw,
    new_labeler_rule,
    parse_history_weight,
    parse_label_map,
    write_csv,
)
from heroeval.errors import HeroEvalError

if TYPE_CHECKING:  # annotations only (strings at run time)
    from heroeval.ingest.annotations import AnnotationSet
    from heroeval.stage_a.calibration import Calibration


# Help texts are built when the command line starts, so they name these without importing the estimators
# (start-up time); tests/cli/test_startup.py pins them to the library's own constants.
_METHODS = ("majority_vote", "dawid_skene", "gold_proportion", "rogan_gladen", "hero1", "hero2", "hero_joint")
"""heroeval.estimators.table.METHODS"""
_ALL_GOLD_METHODS = ("hero1_ppi", "gp_ppi", "prior_ppi", "mv_ppi", "gold_only")
"""heroeval.estimators.ppi.ALL_GOLD_METHODS"""


class Alternative(str, Enum):
    two_sided = "two-sided"
    less = "less"
    greater = "greater"


AltOpt = Annotated[Alternative, typer.Option(help="two-sided interval, or a one-sided bound: less = 'the rate is at most ...' (upper bound), greater = 'at least ...'.")]
MarginOpt = Annotated[float | None, typer.Option(help="A verdict on B against A with this margin (e.g. 0.01 for one point): with --verdict less, 'B's rate is not above A's by more than the margin' (0: B's rate is lower); greater: not below; two-sided: within the margin (0: they differ).")]
VerdictOpt = Annotated[Alternative, typer.Option("--verdict", help="The verdict's alternative for B against A (with --margin): less, greater or two-sided.")]


class OnShift(str, Enum):
    warn = "warn"
    fallback = "fallback"
    ignore = "ignore"


MethodOpt = Annotated[str, typer.Option(help=f"One of {', '.join(_METHODS)} (with current gold also {', '.join(_ALL_GOLD_METHODS)}), a comma list, or all.")]
HistWeightOpt = Annotated[str, typer.Option(help="With --history: weight of gold-free history items in Stage A, a number in [0, 1] or 'cv'.")]


def _methods(method: str) -> Any:
    return "all" if method == "all" else [m.strip() for m in method.split(",") if m.strip()]


def _current_gold_text(ds: AnnotationSet, design: Path | None = None) -> str | None:
    """The ingest line for a current round's gold: how many items, how they were sampled."""
    from heroeval.estimators.gold_sample import gold_sample

    gs = gold_sample(ds)
    if gs is None:
        return None
    how = ("taken as a uniform random sample (no design given: --design names hero select's file)"
           if gs.design == "uniform" else
           f"drawn by a design ({'--design ' + str(design) if design is not None else 'a pi column in the gold file'};"
           f" inclusion probabilities {gs.pi.min():.3g} to {gs.pi.max():.3g}, Hajek weights 1/pi"
           + (f"; {gs.n_strata} strata, stratified variance" if gs.stratum is not None else "") + ")")
    return f"current gold: {gs.k} of {gs.n} items of round {ds.name!r} have expert labels, {how}"


def _current_gold_json(ds: AnnotationSet, gold_file: Path | None, design: Path | None = None) -> dict[str, Any] | None:
    """The JSON record of a current round's gold (None without): how many items, how drawn, from which files."""
    from heroeval.estimators.gold_sample import gold_sample

    gs = gold_sample(ds)
    if gs is None:
        return None
    return {"n_gold": gs.k, "n_items": gs.n, "design": gs.design, "strata": gs.n_strata if gs.stratum is not None else None,
            "gold_file": None if gold_file is None else str(gold_file),
            "design_file": None if design is None else str(design), "text": _current_gold_text(ds, design)}


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
    structure: StructureOpt = "auto",
    gold_col: GoldColOpt = None,
    gold_item_col: GoldItemColOpt = None,
    encoding: EncodingOpt = None,
    current_gold: CurGoldOpt = None,
    design: DesignOpt = None,
    csv_out: Annotated[Path | None, typer.Option("--csv", help="Also write the estimates table as CSV to this file: the rows shown (recommended first), with estimate, SE, interval and its method, status and notes.")] = None,
    group_col: GroupColOpt = None,
    by: Annotated[str | None, typer.Option("--by", help="Rates per stratum: a column of the current labels file giving each item's stratum (topic, harm category, query). Each stratum is estimated as a round alone, with intervals simultaneous over the strata at --confidence-level (Bonferroni); strata with fewer than 2 items are listed as skipped.")] = None,
    scheduler: SchedulerOpt = None,
) -> None:
    """Estimate the current round's gold rate with HERO and the baselines, with confidence intervals.

    With --method all (the default) or 'auto' in the list, the recommended
    estimate comes first: the method the model checks on the history's gold
    expect to err least for this round. With --by COLUMN: one rate per
    stratum of the round, with family-wise intervals.
    """
    from rich.markup import escape

    from heroeval.estimators.collection import EstimateCollection
    from heroeval.estimators.ppi import ALL_GOLD_METHODS
    from heroeval.estimators.results import EstimateResult
    from heroeval.inference.resample import bootstrap as run_bootstrap
    from heroeval.report import terminal as _render
    from heroeval.workflows.api import estimate

    check_sources(calibration, history, gold, history_covariates, round_col, confidence_level)
    check_output(csv_out, "--csv", "the estimates table")
    hw = parse_history_weight(history_weight)
    if scheduler is not None:  # Stage A on Dask first, then the estimate from that calibration as from a file
        calibration = _dask_first(
            scheduler, calibration, history, gold, history_covariates, round_col,
            [("--classes/--ordinal", classes is not None or ordinal), ("--bootstrap", bootstrap > 0),
             ("--label-map", label_map is not None), ("--encoding", encoding is not None),
             ("--duplicates", duplicates is not Duplicates.keep)],
            history_weight=hw, checks=current_gold is None, item_col=item_col, labeler_col=labeler_col,
            label_col=label_col, gold_col=gold_col, gold_item_col=gold_item_col)
        history = gold = history_covariates = round_col = None
    rule = new_labeler_rule(new_labelers, exclude_new_labelers)
    if design is not None and current_gold is None:
        err("--design goes with --current-gold (the expert labels of the selected items)")
        raise typer.Exit(2)
    if classes is not None or ordinal:
        from heroeval.cli import multiclass as _mc  # multi-class labels only: SciPy's stats and more
        if by is not None:
            err("--by is not available for multi-class labels yet")
            raise typer.Exit(2)
        if csv_out is not None:
            err("--csv is not available for multi-class labels yet")
            raise typer.Exit(2)
        if bootstrap:
            err("--bootstrap is not available for multi-class labels yet")
            raise typer.Exit(2)
        if group_col is not None:
            err("--group-col is not available for multi-class labels yet")
            raise typer.Exit(2)
        excl = mc_new_labelers(rule)
        run(lambda: _mc.estimate(
            current, calibration=calibration, history=history, gold=gold, classes=classes, ordinal=ordinal,
            structure=structure, method=method, exclude_new_labelers=excl, level=confidence_level,
            read_kw=mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map), round_col=round_col,
            json_out=fmt is Format.json, covariates=covariates, history_covariates=history_covariates, ridge=ridge,
            current_gold=current_gold, design=design))
        return
    if bootstrap and history is None:
        err("--bootstrap refits Stage A: it needs --history and --gold, not a calibration file")
        raise typer.Exit(2)
    if by is not None:  # rates per stratum: the round's items split by the column, each estimated alone

        from heroeval.errors import DataError
        from heroeval.stage_a.calibration import load_calibration
        from heroeval.workflows.api import calibrate, estimate_by

        if bootstrap or alternative is not Alternative.two_sided:
            err("--by does not go with --bootstrap or a one-sided --alternative yet")
            raise typer.Exit(2)
        if not has_column(current, by):
            err(f"--by {by!r}: no such column in {current} (columns: {', '.join(map(str, columns_of(current)))})")
            raise typer.Exit(2)

        def go_by() -> tuple[AnnotationSet, AnnotationSet | None, Any]:
            lm = parse_label_map(label_map)
            with busy("reading and calibrating"):  # the current round with --by as its round column
                try:
                    cur = read_current(current, covariates=covariates, item_col=item_col, labeler_col=labeler_col,
                                       label_col=label_col, round_col=by, duplicates=duplicates, label_map=lm,
                                       name="current", title="Ingest: current round", encoding=encoding,
                                       gold=current_gold, design=design, gold_col=gold_col,
                                       gold_item_col=gold_item_col)
                except DataError as exc:  # an item in two strata: say it in --by's words
                    msg = str(exc)
                    if "an item must belong to one round" not in msg:
                        raise
                    msg = msg.replace("; pass round_col=False to ignore the column", "")
                    raise DataError(msg.replace(" round ", " stratum ")) from None
                if group_col is not None:
                    cur = cur.with_groups(read_groups(current, group_col, item_col))
                hist = None
                if calibration is not None:
                    cal = load_calibration(calibration)
                else:
                    assert history is not None
                    hist = read(history, gold=gold, covariates=history_covariates, name="history",
                                item_col=item_col, labeler_col=labeler_col, label_col=label_col, round_col=round_col,
                                duplicates=duplicates, label_map=lm, gold_col=gold_col, gold_item_col=gold_item_col,
                                encoding=encoding)
                    cal = calibrate(hist, history_weight=hw, checks=not cur.has_gold)
            ms = _methods(method)
            rec = ms == "all" or "auto" in ms
            ms = ms if ms == "all" else [m for m in ms if m != "auto"]
            return cur, hist, estimate_by(cur, cal, by=by, method=ms, rng=seed, recommend=rec,
                                          on_shift=on_shift.value, new_labelers=rule,  # type: ignore[arg-type]
                                          drift_check=drift_check, confidence_level=confidence_level, ridge=ridge,
                                          tie=tie.value)

        cur, hist, strata = run(go_by)
        if csv_out is not None:
            strata.to_frame(ci_method.value).to_csv(csv_out)
            print(f"rates per stratum written to {csv_out}", file=sys.stderr)
        if fmt is Format.json:
            sout = strata.to_dict(ci_method.value)
            sout["ingest"] = {"current": cur.report.to_dict(),
                              "history": None if hist is None else hist.report.to_dict()}
            print(json.dumps(sout, indent=1))
            return
        con = console()
        _render.print_all(con, *ingest_tables())
        _render.print_all(con, _render.strata_table(strata, ci_method=ci_method.value, say=to_cli))
        return

    def go() -> tuple[AnnotationSet, AnnotationSet | None, EstimateCollection, dict[str, Any]]:
        lm = parse_label_map(label_map)
        cur, hist, cal = current_and_calibration(
            current, covariates, calibration, history, gold, history_covariates, lm, hw, item_col=item_col,
            labeler_col=labeler_col, label_col=label_col, round_col=round_col, duplicates=duplicates,
            gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding, current_gold=current_gold,
            design=design, group_col=group_col)
        if group_col is not None:
            cur = cur.with_groups(read_groups(current, group_col, item_col))
        kw: dict[str, Any] = {"ridge": ridge, "tie": tie.value, "exclude_new_labelers": False}
        ms = _methods(method)
        # the recommended estimate with every method, or when 'auto' is in the list; not for a list without it
        recommend = ms == "all" or "auto" in ms
        ms = ms if ms == "all" else [m for m in ms if m != "auto"]
        res = estimate(cur, cal, method=ms, rng=seed, recommend=recommend, on_shift=on_shift.value,  # type: ignore[call-overload]
                       new_labelers=rule, drift_check=drift_check, **kw)  # type: ignore[misc]
        if isinstance(res, EstimateResult):  # pragma: no cover - a list always gives a collection
            res = EstimateCollection({res.method: res}, ingest=cur.report)
        boot: dict[str, Any] = {}
        if bootstrap:
            bkw = {**kw, "exclude_new_labelers": rule == "exclude"}
            boot = run_bootstrap(cur, cal, method=[m for m in res if m not in ALL_GOLD_METHODS],  # nor auto
                                 n_resamples=bootstrap, rng=seed,
                                 progress=fmt is Format.table and sys.stderr.isatty(), **bkw)
        return cur, hist, res, boot

    cur, hist, res, boot = run(go)
    if csv_out is not None:  # the table model, as the terminal table shows it
        res.table(confidence_level, ci_method.value, alternative.value).to_frame().to_csv(csv_out)
        print(f"estimates table written to {csv_out}", file=sys.stderr)  # stdout may be the JSON
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
    con = console()
    _render.print_all(con, *ingest_tables())
    gold_txt = _current_gold_text(cur, design)
    if gold_txt:
        con.print(escape(gold_txt), soft_wrap=True)
    _render.print_all(con, _render.estimates_table(res, confidence_level=confidence_level, say=to_cli,
                                                   ci_method=ci_method.value, bootstrap=boot,
                                                   alternative=alternative.value))


def compare_cmd(
    a_current: Annotated[Path, typer.Argument(help=f"Round A's annotations, e.g. model A's outputs ({FILES}).")],
    b_current: Annotated[Path, typer.Argument(help=f"Round B's annotations, e.g. model B's outputs ({FILES}).")],
    more: Annotated[list[Path] | None, typer.Argument(help="More rounds (model versions): each is then compared with A, with simultaneous intervals and Holm-adjusted p-values and verdicts (--adjust); one difference per version, the recommended one unless --method names one.", show_default=False)] = None,
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
    structure: StructureOpt = "auto",
    new_labelers: NewLabelersOpt = None,
    drift_check: Annotated[bool, typer.Option("--check-drift/--no-check-drift", help="Test each round's labelers against their calibration (warns on drift).")] = True,
    gold_col: GoldColOpt = None,
    gold_item_col: GoldItemColOpt = None,
    encoding: EncodingOpt = None,
    a_gold: Annotated[Path | None, typer.Option(help="Expert (gold) labels on some items of round A: item_id, gold (and optionally pi), as hero estimate --current-gold reads them. With gold in both rounds the estimates with current gold (hero1_ppi, mv_ppi, gold_only) are compared too.")] = None,
    b_gold: Annotated[Path | None, typer.Option(help="Expert (gold) labels on some items of round B (see --a-gold).")] = None,
    csv_out: CsvOpt = None,
    margin: MarginOpt = None,
    verdict_alt: VerdictOpt = Alternative.less,
    pairs_file: Annotated[Path | None, typer.Option("--pairs", help="When A and B answer the same prompts: a file mapping every item id of both rounds (column item_id, or --item-col) to its prompt (--pair-col); the differences then use the pairing. Without it, items with the same id in both rounds are paired.")] = None,
    pair_col: Annotated[str, typer.Option(help="The prompt column of --pairs.")] = "prompt_id",
    unpaired: Annotated[bool, typer.Option("--unpaired", help="Treat the rounds' items as independent even when they share item ids (as heroeval 0.1 did).")] = False,
    group_col: Annotated[str | None, typer.Option("--group-col", help="A column of both rounds' labels files that groups their items (prompt, query, topic): standard errors cluster-robust by group within each round (see hero estimate --group-col; with --pairs, the pairing's prompts are the clusters).")] = None,
    adjust: Annotated[str, typer.Option(help="With more than two rounds: the simultaneous intervals' adjustment, sidak, bonferroni or none (p-values are then Holm-adjusted unless none).")] = "sidak",
    verdict_on: Annotated[str | None, typer.Option("--verdict-on", help="With --classes/--ordinal and --margin: the quantity the verdict tests, a class (its share) or 'mean score' (the default).")] = None,
    scheduler: SchedulerOpt = None,
) -> None:
    """Difference of two rounds' gold rates (A - B) sharing one calibration, with intervals and p-values.

    With --a-gold and --b-gold (expert labels on a random sample of each
    round's items) the estimates with current gold are compared as well.
    With more rounds (hero compare A B C ...), each is compared with A
    with family-wise error control.
    """
    from rich.markup import escape

    from heroeval.checks.drift import check_drift
    from heroeval.estimators.ppi import ALL_GOLD_METHODS
    from heroeval.inference.comparison import ComparisonCollection
    from heroeval.inference.verdict import verdict
    from heroeval.report import terminal as _render
    from heroeval.report.html import build_comparison_report, write_report
    from heroeval.report.page_data import collect_warnings
    from heroeval.stage_a.calibration import load_calibration
    from heroeval.workflows.api import calibrate, warn_multiple_rounds
    from heroeval.workflows.comparing import compare

    check_sources(calibration, history, gold, history_covariates, round_col, confidence_level)
    check_output(report, "--report", "the report")
    rule = new_labeler_rule(new_labelers, exclude_new_labelers)
    if scheduler is not None:  # Stage A on Dask (as in memory from --history: no checks), then as from a file
        calibration = _dask_first(
            scheduler, calibration, history, gold, history_covariates, round_col,
            [("--classes/--ordinal", classes is not None or ordinal), ("more than two rounds", bool(more)),
             ("--group-col", group_col is not None), ("--label-map", label_map is not None),
             ("--encoding", encoding is not None), ("--duplicates", duplicates is not Duplicates.keep)],
            history_weight=1.0, checks=False, item_col=item_col, labeler_col=labeler_col, label_col=label_col,
            gold_col=gold_col, gold_item_col=gold_item_col)
        history = gold = history_covariates = round_col = None
    if more:
        from heroeval.cli.versions import compare_versions_cmd  # several versions: its own output

        unsupported = [o for o, v in (("--a-gold", a_gold), ("--b-gold", b_gold), ("--report", report),
                                      ("--a-covariates", a_covariates), ("--b-covariates", b_covariates),
                                      ("--classes", classes), ("--ordinal", ordinal or None),
                                      ("--group-col", group_col)) if v is not None]
        if unsupported:
            err(f"{', '.join(unsupported)}: not available with more than two rounds yet (compare two at a time)")
            raise typer.Exit(2)
        if adjust not in ("sidak", "bonferroni", "none"):
            err(f"--adjust must be sidak, bonferroni or none, got {adjust!r}")
            raise typer.Exit(2)
        compare_versions_cmd(
            [a_current, b_current, *more], calibration=calibration, history=history, gold=gold,
            history_covariates=history_covariates, method=method, ridge=ridge, tie=tie.value, new_labelers=rule,
            confidence_level=confidence_level, label_map=parse_label_map(label_map),
            read_kw={"item_col": item_col, "labeler_col": labeler_col, "label_col": label_col,
                     "round_col": round_col, "encoding": encoding},
            gold_cols={"gold_col": gold_col, "gold_item_col": gold_item_col}, json_out=fmt is Format.json,
            csv_out=csv_out, margin=margin, alternative=verdict_alt.value, adjust=adjust, pairs_file=pairs_file,
            pair_col=pair_col, unpaired=unpaired, drift_check=drift_check, duplicates=duplicates)
        return
    if classes is not None or ordinal:
        from heroeval.cli import multiclass as _mc  # multi-class labels only: SciPy's stats and more
        if a_gold is not None or b_gold is not None:
            err("--a-gold / --b-gold are not available for multi-class labels yet")
            raise typer.Exit(2)
        excl = mc_new_labelers(rule)
        run(lambda: _mc.compare(
            a_current, b_current, calibration=calibration, history=history, gold=gold, classes=classes,
            ordinal=ordinal, structure=structure, method=method, exclude_new_labelers=excl,
            level=confidence_level, read_kw=mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map),
            round_col=round_col, json_out=fmt is Format.json,
            verdict=None if margin is None else (margin, verdict_alt.value, verdict_on), report=report))
        return
    if verdict_on is not None:
        err("--verdict-on is for multi-class labels (--classes / --ordinal); a binary verdict is on the rate")
        raise typer.Exit(2)
    if report is not None and method != "all" and len(_methods(method)) < 2:
        method = "all"  # the report shows every method; one method alone gives no collection

    def go() -> tuple[Any, AnnotationSet, AnnotationSet, Calibration]:
        lm = parse_label_map(label_map)
        rd: dict[str, Any] = {"item_col": item_col, "labeler_col": labeler_col, "label_col": label_col,
                              "round_col": round_col, "duplicates": duplicates, "label_map": lm, "encoding": encoding}
        prompts = None if pairs_file is None else read_pairs(pairs_file, pair_col, item_col)
        with busy("reading and calibrating"):
            gk: dict[str, Any] = {"gold_col": gold_col, "gold_item_col": gold_item_col}
            a = read_current(a_current, covariates=a_covariates, name="A", title="Ingest: round A", gold=a_gold,
                             **gk, **rd)
            b = read_current(b_current, covariates=b_covariates, name="B", title="Ingest: round B", gold=b_gold,
                             **gk, **rd)
            if group_col is not None:
                a = a.with_groups(read_groups(a_current, group_col, item_col))
                b = b.with_groups(read_groups(b_current, group_col, item_col))
            hist = None
            if calibration is not None:
                cal = load_calibration(calibration)
            else:
                assert history is not None
                hist = read(history, gold=gold, covariates=history_covariates, name="history", item_col=item_col,
                            labeler_col=labeler_col, label_col=label_col, round_col=round_col,
                            duplicates=duplicates, label_map=lm, gold_col=gold_col, gold_item_col=gold_item_col,
                            encoding=encoding)
                if group_col is not None and has_column(history, group_col):
                    hist = hist.with_groups(read_groups(history, group_col, item_col))
                cal = calibrate(hist)
        wanted = _methods(method)

        def compare_rounds() -> Any:
            for r in (a, b):
                warn_multiple_rounds(r)
            out = compare(a, b, cal, method=wanted if wanted == "all" else list(wanted), history=hist, ridge=ridge,
                          tie=tie.value, new_labelers=rule, pairs=None if unpaired else "auto" if prompts is None else prompts)
            if drift_check:  # the same check, and warning, as hero estimate gives each round
                for r in (a, b):
                    try:
                        check_drift(r, cal)
                    except HeroEvalError:
                        pass  # nothing to test (no calibrated labeler): the comparison says why
            return out

        cc, warns = collect_warnings(compare_rounds)
        if report is not None:
            src = {"A": a_current, "B": b_current, "calibration": calibration, "history": history, "gold": gold}
            page = build_comparison_report(
                cc, a, b, cal, history=None if calibration is not None else hist, warnings=warns,
                confidence_level=confidence_level, sources={k: str(v) for k, v in src.items() if v is not None})
            write_report(report, page)
        return cc, a, b, cal

    cc, a, b, cal = run(go)
    write_csv(cc.to_frame(confidence_level), csv_out, "comparison table")
    rec = cc.recommended if isinstance(cc, ComparisonCollection) else None
    pairs = ([("recommended", rec.comparison)] if rec is not None else []) + list(
        cc.comparisons.items() if isinstance(cc, ComparisonCollection) else [(cc.method, cc)])
    verdicts = {} if margin is None else run(lambda: {m: verdict(c, margin, verdict_alt.value, confidence_level,
                                                                 calibration=cal) for m, c in pairs})
    if fmt is Format.json:
        out = cc.to_dict(confidence_level)
        if verdicts:
            out["verdict"] = {m: v.to_dict() for m, v in verdicts.items()}
        out["ingest"] = {"a": a.report.to_dict(), "b": b.report.to_dict()}
        if a.has_gold or b.has_gold:
            out["ingest"]["current_gold"] = {"a": _current_gold_json(a, a_gold), "b": _current_gold_json(b, b_gold)}
        print(json.dumps(out, indent=1))
        return
    con = console()
    _render.print_all(con, *ingest_tables())
    for r in (a, b):
        gold_txt = _current_gold_text(r)
        if gold_txt:
            con.print(escape(gold_txt), soft_wrap=True)
    if rec is not None:
        for line in _render.recommended_difference_lines(rec, confidence_level):
            con.print(escape(line), soft_wrap=True)
    _render.print_all(con, _render.comparison_table(cc, confidence_level))
    if verdicts:  # the recommended one first; the methods rest on different assumptions and may disagree
        con.print(f"Verdict on B against A (margin {margin:g})" + (", recommended first:" if rec else ", by method:"))
        for m, v in verdicts.items():
            con.print(escape(f"  {m if m != 'recommended' else f'recommended ({v.method})'}: {v.text}"),
                      soft_wrap=True)
    if isinstance(cc, ComparisonCollection):
        for m, why in cc.skipped.items():
            if m in ALL_GOLD_METHODS or m == "auto":
                con.print(escape(f"{m if m != 'auto' else 'recommended'}: not compared ({why})"), soft_wrap=True)
    if report is not None:
        con.print(f"report written to {report}")


def _num(x: float) -> float | None:
    return x if x == x and abs(x) != float("inf") else None


def _dask_first(scheduler: str, calibration: Path | None, history: Path | None, gold: Path | None,
                covariates: Path | None, round_col: str | None, refused: list[tuple[str, bool]], *,
                history_weight: float | str, checks: bool, **columns: Any) -> Path:
    """``--scheduler`` on ``hero estimate`` and ``hero compare``: Stage A (and, with ``checks``, its model checks) on
    Dask from ``--history``, saved to a temporary calibration file that the command then reads as it reads
    ``--calibration`` (removed when the command ends); says on stderr where Stage A ran. Options the Dask path
    does not take (``refused``: name, given) are an error, as is a calibration file."""
    import atexit
    import shutil
    import tempfile

    from heroeval.cli.scheduler import calibrate_on_dask, size_note

    odd = [name for name, given in [("--calibration", calibration is not None), *refused] if given]
    if odd:
        err(f"--scheduler (Stage A on Dask from --history) takes none of {', '.join(odd)}")
        raise typer.Exit(2)
    assert history is not None and gold is not None

    def go() -> Path:
        cal, where = calibrate_on_dask(
            scheduler, history, gold, covariates=covariates,
            columns={**columns, "round_col": None if round_col is None else (False if round_col == "none" else round_col)},
            options={"history_weight": history_weight, "checks": checks})
        tmp = Path(tempfile.mkdtemp(prefix="hero-dask-calibration-"))
        atexit.register(shutil.rmtree, tmp, True)
        path = tmp / "calibration.json"
        cal.save(path)
        print(where.line() + f" ({cal.settings.get('rows_read', 0):,} history rows read)"
              + size_note(int(cal.n_annotations.sum())), file=sys.stderr)
        return path

    out: Path = run(go)
    return out
