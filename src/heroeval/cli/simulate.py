"""``hero simulate`` and ``hero benchmark``: every method's bias, SD, RMSE and coverage, on simulated rounds (the
paper's study and sweeps beyond it) and on a real annotation set with gold labels, by resampling."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from heroeval.cli.console import console, err, progress, run
from heroeval.cli.options import FmtOpt, Format, Shrink, parse_floats
from heroeval.errors import HeroEvalError


class Experiment(str, Enum):
    gold_rate = "gold-rate"
    heterogeneity = "heterogeneity"
    labels = "labels"
    custom = "custom"


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
        err(f"--target must be mu0 or current_rate, got {target!r}")
        raise typer.Exit(2)

    def go() -> tuple[Any, Any, float]:
        lpi: list[int | None] | None = None
        lp = parse_floats(labels_per_item, "labels-per-item")
        if lp is not None:
            lpi = [None if v == 0 else int(v) for v in lp]
        base = montecarlo.SimConfig(n=n, N=history_items, J=labelers, pool_shift=pool_shift,
                                    labels_per_item=lpi[0] if lpi and experiment is Experiment.gold_rate else None)
        if experiment is not Experiment.labels and experiment is not Experiment.custom and lpi:
            base = replace(base, labels_per_item=lpi[0])
        configs = montecarlo.experiment_configs(experiment.value, rhos=parse_floats(rho, "rho"),
                                                ks=parse_floats(k, "k"), labels=lpi, base=base)
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

    df, summ, secs = run(go)
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
    con = console()
    con.print(_render.simulation_table(summ, f"{experiment.value}: {reps} replications per setting, target {target}"))
    con.print(f"{len(df) // max(1, summ['method'].nunique()) } replications in {secs:.1f} s"
              + (f"; written to {out}" if out is not None else ""))


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
    group_blocks: Annotated[int, typer.Option(help="--split groups: more groups than this are dealt into this many blocks (a seeded shuffle, the same in every split), each block a round; 0 keeps every group a round of its own.")] = 10,
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
        rhos = parse_floats(rho, "rho") or []
        shifts = [x.strip() for x in shift.split(",") if x.strip()]
        data = load_folder(dataset_dir, binary_suffix=binary_suffix, group_col=group_col)
        t0 = time.perf_counter()
        with progress("benchmark", fmt is Format.table) as tick:
            df = run_benchmark(data, resamples=resamples, rhos=rhos, n=n, shifts=shifts, seed=seed, workers=workers,
                               split=split, progress=tick, rate_odds=rate_odds, shrink=shrink.value,
                               group_blocks=None if group_blocks == 0 else group_blocks)
        return df, summarize_benchmark(df), time.perf_counter() - t0

    df, summ, secs = run(go)
    if out is not None:

        out.mkdir(parents=True, exist_ok=True)
        df.to_csv(out / "resamples.csv.gz", index=False)
        summ.to_csv(out / "summary.csv", index=False)
        plot_benchmark(summ, out, f"{summ['dataset'].iloc[0]}: {resamples} resamples")
    if fmt is Format.json:
        print(json.dumps({"seconds": secs, "summary": json.loads(summ.to_json(orient="records"))}, indent=1))
        return
    con = console()
    how = ("" if split != "groups" else f"; split by {group_col}: each current round is a group (or block of groups) "
           "the history does not hold; shift half = the current round keeps half of the labelers")
    con.print(_render.benchmark_table(summ, f"{summ['dataset'].iloc[0]}: {resamples} resamples per setting; "
                                            "target = the current items' gold rate" + how))
    con.print(f"done in {secs:.1f} s" + (f"; written to {out}" if out is not None else ""))
