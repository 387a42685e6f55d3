"""``hero compare A B C ...``: several model versions against the first, with family-wise error control."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from heroeval.cli.console import busy, console, err, ingest_tables, run
from heroeval.cli.inputs import read, read_current, read_pairs
from heroeval.cli.options import Duplicates, write_csv
from heroeval.errors import HeroEvalError


def round_names(paths: list[Path]) -> list[str]:
    """Each round's name: its file's stem (without a compression suffix), or the whole path where two are the
    same."""
    stems = [(Path(p.stem) if p.suffix in (".gz", ".bz2", ".xz", ".zst") else p).stem for p in paths]
    names = stems if len(set(stems)) == len(stems) else [str(p) for p in paths]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        err(f"the same file is given twice: {dup}")
        raise typer.Exit(2)
    return names


def compare_versions_cmd(paths: list[Path], *, calibration: Path | None, history: Path | None, gold: Path | None,
                         history_covariates: Path | None, method: str, ridge: float, tie: str, new_labelers: Any,
                         confidence_level: float, label_map: dict[str, int | None] | None, read_kw: dict[str, Any],
                         gold_cols: dict[str, Any], json_out: bool, csv_out: Path | None, margin: float | None,
                         alternative: str, adjust: str, pairs_file: Path | None, pair_col: str, unpaired: bool,
                         drift_check: bool, duplicates: Duplicates) -> None:
    """Every round after the first against the first (:func:`heroeval.compare_versions`)."""
    from rich.markup import escape

    from heroeval.checks.drift import check_drift
    from heroeval.report import terminal as _render
    from heroeval.report.page_data import collect_warnings
    from heroeval.stage_a.calibration import load_calibration
    from heroeval.workflows.api import calibrate, warn_multiple_rounds
    from heroeval.workflows.comparing import compare_versions

    if method == "all":
        method = "auto"  # one difference per version: the recommended one
    elif "," in method:
        err("--method: with more than two rounds give one method (or auto, the default): one difference per version")
        raise typer.Exit(2)
    names = round_names(paths)

    def go() -> tuple[Any, list[Any]]:
        prompts = None if pairs_file is None else read_pairs(pairs_file, pair_col, read_kw.get("item_col"))
        with busy("reading and calibrating"):
            rounds = [read_current(p, name=n, title=f"Ingest: {n}", **read_kw, label_map=label_map,
                                   duplicates=duplicates) for p, n in zip(paths, names, strict=True)]
            hist = None
            if calibration is not None:
                cal = load_calibration(calibration)
            else:
                assert history is not None
                hist = read(history, gold=gold, covariates=history_covariates, name="history",
                            duplicates=duplicates, label_map=label_map, **read_kw, **gold_cols)
                cal = calibrate(hist)

        def versions() -> Any:
            for r in rounds:
                warn_multiple_rounds(r)
            out = compare_versions(rounds, cal, method=method, history=hist, ridge=ridge, tie=tie,
                                   new_labelers=new_labelers, confidence_level=confidence_level, adjust=adjust,
                                   margin=margin, alternative=alternative,
                                   pairs=None if unpaired else "auto" if prompts is None else prompts)
            if drift_check:
                for r in rounds:
                    try:
                        check_drift(r, cal)
                    except HeroEvalError:
                        pass  # nothing to test (no calibrated labeler)
            return out

        vc, _warns = collect_warnings(versions)
        return vc, rounds

    vc, rounds = run(go)
    write_csv(vc.to_frame(), csv_out, "versions table")
    if json_out:
        out = vc.to_dict()
        out["ingest"] = {r.name: r.report.to_dict() for r in rounds}
        print(json.dumps(out, indent=1))
        return
    con = console()
    _render.print_all(con, *ingest_tables())
    for line in vc.lines():
        con.print(escape(line), soft_wrap=True)
    for r in vc.rows:
        con.print(escape(f"  why {r.version}: {r.reason}"), soft_wrap=True)
