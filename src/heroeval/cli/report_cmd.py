"""``hero report``: one self-contained HTML report of a round (every estimate, the labelers, the pool shift, the checks)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from heroeval.cli._messages import to_cli
from heroeval.cli.console import console, err, ingest_tables, run
from heroeval.cli.inputs import current_and_calibration, read_groups
from heroeval.cli.options import (
    FILES,
    CalOpt,
    CiMethod,
    CiOpt,
    ClassesOpt,
    CurGoldOpt,
    DesignOpt,
    Duplicates,
    DupOpt,
    EncodingOpt,
    ExcludeNewOpt,
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
    StructureOpt,
    Tie,
    TieOpt,
    check_output,
    check_sources,
    mc_new_labelers,
    mc_read_kw,
    new_labeler_rule,
    parse_label_map,
)


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
    structure: StructureOpt = "auto",
    new_labelers: NewLabelersOpt = None,
    gold_col: GoldColOpt = None,
    gold_item_col: GoldItemColOpt = None,
    encoding: EncodingOpt = None,
    current_gold: CurGoldOpt = None,
    design: DesignOpt = None,
    group_col: GroupColOpt = None,
) -> None:
    """Write one self-contained HTML report: every estimate, the labelers, the pool shift and the checks."""
    from heroeval.estimators.collection import EstimateCollection
    from heroeval.report import terminal as _render
    from heroeval.report.html import build_report, write_report
    from heroeval.report.page_data import collect_warnings
    from heroeval.workflows.api import estimate

    check_sources(calibration, history, gold, history_covariates, round_col, confidence_level)
    check_output(output, "--output", "the report")
    rule = new_labeler_rule(new_labelers, exclude_new_labelers)
    if design is not None and current_gold is None:
        err("--design goes with --current-gold (the expert labels of the selected items)")
        raise typer.Exit(2)
    if classes is not None or ordinal:
        from heroeval.cli import multiclass as _mc  # multi-class labels only: SciPy's stats and more
        if group_col is not None:
            err("--group-col is not available for multi-class labels yet")
            raise typer.Exit(2)
        excl = mc_new_labelers(rule)
        run(lambda: _mc.report(
            current, output, calibration=calibration, history=history, gold=gold, classes=classes, ordinal=ordinal,
            structure=structure, exclude_new_labelers=excl, level=confidence_level,
            read_kw=mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map), round_col=round_col,
            title=title, current_gold=current_gold, design=design))
        return

    def go() -> EstimateCollection:
        lm = parse_label_map(label_map)
        cur, hist, cal = current_and_calibration(
            current, covariates, calibration, history, gold, history_covariates, lm, 1.0, item_col=item_col,
            labeler_col=labeler_col, label_col=label_col, round_col=round_col, duplicates=duplicates,
            gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding, current_gold=current_gold,
            design=design, group_col=group_col)
        if group_col is not None:
            cur = cur.with_groups(read_groups(current, group_col, item_col))
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

    res = run(go)
    con = console()
    _render.print_all(con, *ingest_tables(),
                      _render.estimates_table(res, confidence_level=confidence_level, ci_method=ci_method.value,
                                             say=to_cli))
    con.print(f"report written to {output}")
