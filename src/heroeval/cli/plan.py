"""``hero plan`` and ``hero select``: design a round before labelling it (how many items, how many expert
labels for an interval's width) and choose the items to send to the experts."""

from __future__ import annotations

import json
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from heroeval.cli.console import console, err, ingest_tables, register, run
from heroeval.cli.inputs import read_current
from heroeval.cli.options import (
    FILES,
    ClassesOpt,
    CsvOpt,
    Duplicates,
    DupOpt,
    EncodingOpt,
    FmtOpt,
    Format,
    ItemCol,
    LabelCol,
    LabelerCol,
    LevelOpt,
    MapOpt,
    NewLabelersOpt,
    OrdinalOpt,
    check_output,
    mc_read_kw,
    parse_floats,
    parse_label_map,
    write_csv,
)
from heroeval.errors import HeroEvalError

# The default is built when the command line starts, so it names this without importing the library
# (start-up time); tests/cli/test_startup.py pins it to the library's own constant.
_DEFAULT_MIX = 0.5
"""heroeval.inference.select.DEFAULT_MIX"""


def plan_cmd(
    calibration: Annotated[Path | None, typer.Option(help="Calibration JSON from 'hero calibrate' (binary labels; required there).")] = None,
    mu: Annotated[float | None, typer.Option(help="Guessed gold rate of the round (round A for --difference; binary labels, required there).")] = None,
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
    csv_out: CsvOpt = None,
    classes: ClassesOpt = None,
    ordinal: OrdinalOpt = False,
    history: Annotated[Path | None, typer.Option(help="Multi-class --expert-labels: the history's annotations, whose gold items measure the predictor's residual spread.")] = None,
    gold: Annotated[Path | None, typer.Option(help="Multi-class --expert-labels: the history's gold labels (item_id, gold).")] = None,
    target: Annotated[str, typer.Option(help="Multi-class --expert-labels: size the interval of the mean score (mean_score) or of the widest class share (shares).")] = "mean_score",
) -> None:
    """Plan a round: items (per labels-per-item) for a CI half-width or to detect a difference.

    With --expert-labels: expert labels in the current round for a half-width
    (multi-class labels: with --classes or --ordinal, --history and --gold).
    """
    import numpy as np
    from rich.markup import escape

    from heroeval.inference.gold_plan import expert_labels as plan_expert_labels
    from heroeval.inference.planning import plan
    from heroeval.stage_a.calibration import load_calibration

    if classes is not None or ordinal:
        if not expert_labels or half_width is None or round_items is None or history is None or gold is None:
            err("multi-class labels: hero plan gives expert labels only (--expert-labels with --half-width, "
                "--round-items, --history and --gold)")
            raise typer.Exit(2)

        def go_mc() -> Any:
            from heroeval.multiclass.current_gold import plan_expert_labels_multiclass
            from heroeval.multiclass.data import read_multiclass

            h = read_multiclass(history, gold=gold, classes=classes, ordinal=ordinal, name="history", round_col=False)
            return plan_expert_labels_multiclass(h, half_width=half_width, round_items=round_items,
                                                 confidence_level=confidence_level, target=target)

        mp = run(go_mc)
        if fmt is Format.json:
            print(json.dumps(mp.to_dict(), indent=1, default=float))
        else:
            console().print(escape(mp.summary()), soft_wrap=True)
        return
    if calibration is None or mu is None:
        err("hero plan needs --calibration and --mu (binary labels; multi-class: --classes with --expert-labels)")
        raise typer.Exit(2)
    if expert_labels:
        if half_width is None or round_items is None or difference is not None or n_items is not None \
                or bound is not None:
            err("--expert-labels needs --half-width and --round-items (and none of --difference, --n-items, --bound)")
            raise typer.Exit(2)

        def go_expert() -> Any:
            cal = load_calibration(calibration)
            lp = parse_floats(labels_per_item, "labels-per-item")
            return plan_expert_labels(cal, mu=mu, half_width=half_width, round_items=round_items,
                                      confidence_level=confidence_level,
                                      labels_per_item=None if lp is None else int(lp[0]),
                                      pool=None if pool is None else [x.strip() for x in pool.split(",") if x.strip()],
                                      rng=seed)

        ep = run(go_expert)
        if fmt is Format.json:
            print(json.dumps(ep.to_dict(), indent=1, default=float))
        else:
            console().print(escape(ep.summary()), soft_wrap=True)
        return

    def go() -> Any:
        cal = load_calibration(calibration)
        lp = parse_floats(labels_per_item, "labels-per-item")
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
    p = run(go)
    write_csv(p.to_frame(), csv_out, "plan table")
    if fmt is Format.json:
        print(json.dumps(p.to_dict(), indent=1))
        return
    text = p.summary()
    if difference is not None:
        text = text.replace(f"a difference of {p.target:g}", f"a difference A - B of {p.target:g} (B at "
                            f"{mu - p.target:g})", 1)
    console().print(escape(text), soft_wrap=True)


class SelectDesign(str, Enum):
    active = "active"
    uniform = "uniform"
    poisson = "poisson"
    stratified = "stratified"


_DEFAULT_STRATA = 4
"""heroeval.inference.select.DEFAULT_STRATA"""


MC_STRATA_NOTE = ("multi-class labels: strata by the plurality-vote class were measured about as wide as the uniform "
                  "design (1.12 / 1.01 / 0.97 times its width at k = 20 / 50 / 100 on the shared sets, "
                  "docs/multiclass.md); strata pay where the column separates items on which the judges err "
                  "differently")


def select_cmd(
    current: Annotated[Path, typer.Argument(help=f"Current-round annotations ({FILES}).")],
    k: Annotated[int, typer.Option("--k", "-k", help="Budget: how many items to send to the experts.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the selected items (CSV: item_id, pi, predictor, design; stratified: stratum, spread).")],
    calibration: Annotated[Path | None, typer.Option(help="Calibration JSON from 'hero calibrate' (needed by the active and poisson designs).")] = None,
    design: Annotated[SelectDesign, typer.Option(help="uniform (default; measured narrower than active below about half the round, docs/current_gold.md): a simple random sample of k items; active: items whose gold the silver labels leave uncertain are likelier (pi proportional to sqrt(f(1-f)), mixed with uniform), exactly k items; poisson: the same pi, drawn independently; stratified: a simple random sample in each stratum of --by.")] = SelectDesign.uniform,
    mix: Annotated[float, typer.Option(help="Active designs: share of the uniform design in the mixture (bounds every weight 1/pi by n/(mix k)); stratified: share of the proportional allocation (the rest Neyman's, from the history's residual spread).")] = _DEFAULT_MIX,
    by: Annotated[str | None, typer.Option(help="Stratify (implies --design stratified): 'posterior' (--strata bands of the items' posterior; needs --calibration) or an item-level column of CURRENT (or of --groups) such as a query or topic.")] = None,
    strata: Annotated[int, typer.Option(help="With --by posterior: how many equal-count bands.")] = _DEFAULT_STRATA,
    groups: Annotated[Path | None, typer.Option(help="With --by COLUMN: the table holding the column (item_id, COLUMN), if not CURRENT.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the draw.")] = None,
    new_labelers: NewLabelersOpt = None,
    label_map: MapOpt = None,
    item_col: ItemCol = None,
    labeler_col: LabelerCol = None,
    label_col: LabelCol = None,
    duplicates: DupOpt = Duplicates.keep,
    encoding: EncodingOpt = None,
    classes: ClassesOpt = None,
    ordinal: OrdinalOpt = False,
    fmt: FmtOpt = Format.table,
) -> None:
    """Choose the current items to send to the experts, with their sampling probabilities.

    Label the selected items, then pass their labels back with
    'hero estimate CURRENT ... --current-gold gold.csv --design SELECTION':
    the estimates with current gold weight each item by 1/pi.
    """
    from rich.markup import escape

    from heroeval.inference.select import select_items
    from heroeval.ingest.read import read_item_groups
    from heroeval.report import terminal as _render
    from heroeval.stage_a.calibration import load_calibration

    check_output(output, "--output", "the selection")
    if by is not None and design not in (SelectDesign.uniform, SelectDesign.stratified):
        err(f"--by gives the strata of the stratified design, not of the {design.value} one")
        raise typer.Exit(2)
    if by is None and design is SelectDesign.stratified:
        by = "posterior"
    if groups is not None and by in (None, "posterior"):
        err("--groups goes with --by COLUMN (the table holding the column)")
        raise typer.Exit(2)
    multiclass = classes is not None or ordinal
    if multiclass and (by == "posterior" or (by is None and design is not SelectDesign.uniform)):
        err("multi-class labels: the selection is uniform or stratified by an item column (--by COLUMN); the "
            "active and poisson designs and strata by the posterior need a binary calibration's posteriors")
        raise typer.Exit(2)
    if multiclass and encoding is not None:
        err("--encoding is not available for multi-class labels yet (they are read as UTF-8)")
        raise typer.Exit(2)
    if multiclass and calibration is not None:
        err("multi-class labels: --calibration is not used by the uniform or --by COLUMN selection; leave it out")
        raise typer.Exit(2)
    needs_cal = by == "posterior" or (by is None and design is not SelectDesign.uniform)
    if needs_cal and calibration is None:
        what = "strata by the posterior need" if by == "posterior" else f"the {design.value} design needs"
        err(f"{what} --calibration (the items' posteriors); or use --design uniform or --by COLUMN")
        raise typer.Exit(2)

    def go() -> Any:
        if multiclass:  # the items' ids only: the K-class reader checks the labels against the classes
            from heroeval.multiclass.data import read_multiclass

            cur = register("Ingest: current round", read_multiclass(
                current, classes=classes, ordinal=ordinal, name="current", round_col=False,
                **mc_read_kw(item_col, labeler_col, label_col, duplicates, label_map)).annotations)
        else:
            cur = read_current(current, name="current", title="Ingest: current round", item_col=item_col,
                               labeler_col=labeler_col, label_col=label_col, round_col=None, duplicates=duplicates,
                               label_map=parse_label_map(label_map), encoding=encoding)
        cal = None if calibration is None else load_calibration(calibration)
        strata_by: Any = by
        if by is not None and by != "posterior":
            strata_by = read_item_groups(current if groups is None else groups, by, item_col=item_col,
                                         encoding=encoding)
        sel = select_items(cur, cal, k, design=design.value if by is None else "stratified", mix=mix, rng=seed,
                           exclude_new_labelers=new_labelers is not None and new_labelers.value == "exclude",
                           by=strata_by, n_strata=strata)
        if multiclass and by is not None:
            sel = replace(sel, notes=(*sel.notes, MC_STRATA_NOTE))
        sel.chosen.to_csv(output, index=False)
        return sel

    sel = run(go)
    if fmt is Format.json:
        print(json.dumps({"design": sel.design, "k": sel.k, "mix": sel.mix, "output": str(output),
                          "items": sel.chosen["item_id"].tolist(), "pi": sel.chosen["pi"].round(6).tolist(),
                          "strata": None if sel.strata is None else sel.strata.to_dict(orient="records"),
                          "notes": list(sel.notes)}, indent=1, default=float))
        return
    con = console()
    _render.print_all(con, *ingest_tables())
    con.print(escape(sel.summary()), soft_wrap=True)
    cls = f" --classes {classes}" if classes is not None else " --ordinal" if ordinal else ""
    con.print(f"selection written to {output}; label these items, then: hero estimate {current}{cls} ... "
              f"--current-gold GOLD.csv --design {output}", soft_wrap=True)
