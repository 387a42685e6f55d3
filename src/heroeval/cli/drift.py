"""``hero drift``: does each labeler's current positive rate match its calibration? (and HERO-1 without the flagged)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from heroeval.cli.console import console, err, ingest_tables, run
from heroeval.cli.inputs import read, read_current
from heroeval.cli.options import (
    FILES,
    CalOpt,
    ClassesOpt,
    CsvOpt,
    Duplicates,
    DupOpt,
    EncodingOpt,
    ExcludeNewOpt,
    FmtOpt,
    Format,
    GoldColOpt,
    GoldItemColOpt,
    GoldOpt,
    HistOpt,
    ItemCol,
    LabelCol,
    LabelerCol,
    MapOpt,
    NewLabelers,
    OrdinalOpt,
    RoundOpt,
    check_sources,
    mc_read_kw,
    new_labeler_rule,
    parse_label_map,
    write_csv,
)


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
    csv_out: CsvOpt = None,
    classes: ClassesOpt = None,
    ordinal: OrdinalOpt = False,
    structure: Annotated[str, typer.Option(help="Multi-class: the confusion structure of Stage A when --history is given. full (default): each labeler's own rows; a restricted one (symmetric, ordinal) cannot represent a labeler's class-specific errors, and that misfit reads as drift (docs/multiclass.md).")] = "full",
) -> None:
    """Labeler drift check: does each labeler's current positive rate (with --classes: label distribution) match
    its calibration?"""
    import numpy as np
    from rich.markup import escape

    from heroeval.checks.drift import check_drift, reestimate_without
    from heroeval.estimators.methods import hero1
    from heroeval.report import terminal as _render
    from heroeval.stage_a.calibration import load_calibration
    from heroeval.workflows.api import calibrate, estimate, warn_multiple_rounds


    check_sources(calibration, history, gold, None, round_col)
    if reestimate not in ("none", "drop", "estimate"):
        err(f"--reestimate must be none, drop or estimate, got {reestimate!r}")
        raise typer.Exit(2)
    rule = new_labeler_rule(new_labelers, exclude_new_labelers)
    if rule == "estimate":
        err("--new-labelers estimate: a labeler new in this round has no calibration to test for drift; "
            "use exclude (the default) or error")
        raise typer.Exit(2)

    if classes is not None or ordinal:
        if rule == "error":
            err("multi-class drift: labelers unknown to the calibration are left out (and named); --new-labelers "
                "error is not available for multi-class labels yet")
            raise typer.Exit(2)

        def go_mc() -> Any:
            from heroeval.cli import multiclass as _mc

            return _mc.drift(current, calibration=calibration, history=history, gold=gold, classes=classes,
                             ordinal=ordinal, structure=structure, significance=significance, adjust=adjust,
                             read_kw=mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map),
                             round_col=round_col)

        mchk = run(go_mc)
        write_csv(mchk.to_frame(), csv_out, "drift table")
        if fmt is Format.json:
            print(json.dumps(mchk.to_dict(), indent=1))
            return
        con = console()
        con.print(escape(mchk.summary()), soft_wrap=True)
        shown = mchk.table if show_all else mchk.table[mchk.table["flagged"]]
        if len(shown):
            con.print(escape(shown[["labeler", "labels", "statistic", "p_value", "p_adjusted", "flagged"]]
                             .to_string(index=False, float_format=lambda x: f"{x:.4g}")))
        return

    def go() -> tuple[Any, Any, Any, dict[str, Any] | None]:
        lm = parse_label_map(label_map)
        cur = read_current(current, item_col=item_col, labeler_col=labeler_col, label_col=label_col,
                           round_col=round_col, duplicates=duplicates, label_map=lm, name="current",
                           title="Ingest: current round", encoding=encoding)
        if calibration is not None:
            cal = load_calibration(calibration)
        else:
            assert history is not None
            cal = calibrate(read(history, gold=gold, name="history", item_col=item_col, labeler_col=labeler_col,
                                 label_col=label_col, round_col=round_col, duplicates=duplicates, label_map=lm,
                                 gold_col=gold_col, gold_item_col=gold_item_col, encoding=encoding))
        warn_multiple_rounds(cur)
        index = cal.index_of()
        known = np.array([str(x) in index for x in cur.labeler_ids], dtype=bool)
        aside: dict[str, Any] | None = None
        if not known.all():
            new_ids = [str(x) for x in cur.labeler_ids[~known]]
            if rule == "error" or known.sum() == 0:
                estimate(cur, cal, method="hero1", drift_check=False, new_labelers="error")  # raises the error naming them
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

    chk, before, after, aside = run(go)
    write_csv(chk.to_frame(), csv_out, "drift table")
    if fmt is Format.json:
        out = chk.to_dict()
        if after is not None:
            out["hero1_all_labelers"] = before.to_dict()
            out["hero1_reestimated"] = after.to_dict()
        if aside is not None:
            out["new_labelers_set_aside"] = aside
        print(json.dumps(out, indent=1))
        return
    con = console()
    _render.print_all(con, *ingest_tables())
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
