"""``hero demo``: every method on the bundled real example (LLM judges grading TriviaQA answers)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated

import typer

from heroeval.cli.console import console, run
from heroeval.cli.options import FmtOpt, Format, check_output


def demo_cmd(
    fmt: FmtOpt = Format.table,
    report: Annotated[Path | None, typer.Option(help="Also write the demo's self-contained HTML report here.")] = None,
) -> None:
    """Run every method on the bundled real example (LLM judges grading TriviaQA answers)."""
    from heroeval.report import terminal as _render
    from heroeval.report.html import build_report, write_report
    from heroeval.report.page_data import collect_warnings
    from heroeval.workflows.demo import example_paths, run_demo


    check_output(report, "--report", "the report")
    t0 = time.perf_counter()
    d, warns = run(lambda: collect_warnings(run_demo))
    truth = float(d.truth["true_rate"])
    if report is not None:
        p = example_paths()
        page = build_report(d.current, d.calibration, d.estimates, history=d.history, truth=truth,
                            title=f"heroeval demo: accuracy of {d.truth['current_round']} on TriviaQA",
                            sources={k: str(p[k]) for k in ("current", "history", "gold")}, warnings=warns)
        run(lambda: write_report(report, page))
    secs = time.perf_counter() - t0
    if fmt is Format.json:
        out = d.estimates.to_dict()
        out["truth"] = d.truth
        out["seconds"] = secs
        print(json.dumps(out, indent=1))
        return
    con = console()
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
