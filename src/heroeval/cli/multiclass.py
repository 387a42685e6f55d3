"""The multi-class paths of ``hero calibrate / estimate / compare`` (``--classes`` / ``--ordinal``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from heroeval.checks.dependence import dependence_test
from heroeval.choice.multiclass_auto import MultiClassRecommendation, recommend_multiclass
from heroeval.choice.multiclass_difference import (
    MultiClassDifferenceRecommendation,
    recommend_difference_multiclass,
    verdict_multiclass,
)
from heroeval.errors import HeroEvalError
from heroeval.multiclass.calibration import MultiClassCalibration, calibrate_multiclass, load_multiclass_calibration
from heroeval.multiclass.current_gold import gold_estimates, gold_recommendation
from heroeval.multiclass.data import MultiClassData, read_multiclass
from heroeval.multiclass.drift import MultiClassDriftCheck, check_drift_multiclass
from heroeval.multiclass.estimators import MC_METHODS, MultiClassEstimate, compare_multiclass, estimate_multiclass
from heroeval.report.html import write_report
from heroeval.report.multiclass import build_multiclass_comparison_report, build_multiclass_report
from heroeval.stage_a.checks_record import DependenceTest


def _read(path: Path, *, gold: Path | None, classes: str | None, ordinal: bool, name: str, read_kw: dict[str, Any],
          round_col: Any = False, covariates: Path | None = None, design: Path | None = None) -> MultiClassData:
    return read_multiclass(path, gold=gold, classes=classes, ordinal=ordinal, name=name, round_col=round_col,
                           covariates=covariates, design=design, **read_kw)


def _round_col(rc: str | None) -> Any:
    return None if rc is None else (False if rc == "none" else rc)


def _calibration(calibration: Path | None, history: Path | None, gold: Path | None, classes: str | None,
                 ordinal: bool, structure: str, read_kw: dict[str, Any], round_col: str | None,
                 history_covariates: Path | None = None) -> tuple[MultiClassCalibration, str | None]:
    cal, cls, _ = _calibration_and_history(calibration, history, gold, classes, ordinal, structure, read_kw,
                                           round_col, history_covariates)
    return cal, cls


def _calibration_and_history(calibration: Path | None, history: Path | None, gold: Path | None,
                             classes: str | None, ordinal: bool, structure: str, read_kw: dict[str, Any],
                             round_col: str | None, history_covariates: Path | None = None
                             ) -> tuple[MultiClassCalibration, str | None, MultiClassData | None]:
    if calibration is not None:
        cal = load_multiclass_calibration(calibration)
        if classes is not None and tuple(c.strip() for c in classes.split(",")) != cal.classes:
            raise HeroEvalError(f"--classes {classes!r} differ from the calibration's classes {list(cal.classes)}")
        return cal, ",".join(cal.classes), None
    assert history is not None
    h = _read(history, gold=gold, classes=classes, ordinal=ordinal, name="history", read_kw=read_kw,
              round_col=_round_col(round_col), covariates=history_covariates)
    return calibrate_multiclass(h, structure=structure), ",".join(h.classes), h


AUTO_NEEDS_HISTORY = ("the recommended multi-class estimate (--method auto) refits Stage A on mock rounds of the "
                      "history's gold: it needs --history and --gold, not a calibration file")


def _structures(structure: str) -> list[str] | None:
    """``--structure`` names HERO-1's one candidate structure for the recommendation, or (auto, bic) every
    structure the classes allow (None)."""
    return None if structure in ("auto", "bic") else [structure]


def _recommend(cur: MultiClassData, hist: MultiClassData, structure: str) -> MultiClassRecommendation:
    """The recommended estimate (:func:`_structures` says which structures are candidates)."""
    return recommend_multiclass(cur, hist, structures=_structures(structure))


def _recommended_lines(rec: MultiClassRecommendation, level: float) -> list[str]:
    out = [f"recommended (auto): {rec.method}, status {rec.status}: {rec.reason}"]
    for k, (c, (lo, hi)) in enumerate(zip(rec.classes, rec.intervals(level), strict=True)):
        out.append(f"  share {c}: {rec.estimate.estimate[k]:.3f} [{lo:.3f}, {hi:.3f}]")
    ms = rec.mean_score(level)
    out.append(f"  mean score: {ms['estimate']:.3f} [{ms['ci_low']:.3f}, {ms['ci_high']:.3f}]")
    return out + [f"  note: {n}" for n in rec.notes]


def calibrate(history: Path, gold: Path, output: Path, *, classes: str | None, ordinal: bool, structure: str,
              read_kw: dict[str, Any], round_col: str | None, tol: float, max_iter: int, pseudo_count: float,
              json_out: bool) -> None:
    h = _read(history, gold=gold, classes=classes, ordinal=ordinal, name="history", read_kw=read_kw,
              round_col=_round_col(round_col))
    cal = calibrate_multiclass(h, structure=structure, tol=tol, max_iter=max_iter, pseudo_count=pseudo_count)
    cal.save(output)
    dep = dependence_test(h.annotations)
    if json_out:
        print(json.dumps({"calibration": cal.to_dict(), "output": str(output), "ingest": h.annotations.report.to_dict(),
                          "dependence": dep.to_dict()}, indent=1))
        return
    con = Console(highlight=False, width=132)
    t = Table(title=f"Multi-class calibration ({cal.structure}; classes {', '.join(cal.classes)})")
    t.add_column("labeler")
    t.add_column("labels", justify="right")
    for c in cal.classes:
        t.add_column(f"P({c}|{c})", justify="right")
    for j in range(min(cal.n_labelers, 50)):
        t.add_row(cal.labeler_ids[j], str(int(cal.n_annotations[j])),
                  *[f"{cal.confusion[j, k, k]:.3f}" for k in range(cal.n_classes)])
    con.print(t)
    if cal.n_labelers > 50:
        con.print(f"... {cal.n_labelers - 50} more labelers in {output}")
    r = Table(title="History rounds: class prevalences")
    r.add_column("round")
    for c in cal.classes:
        r.add_column(c, justify="right")
    for g, rid in enumerate(cal.round_ids):
        r.add_row(rid, *[f"{v:.3f}" for v in cal.round_prevalence[g]])
    con.print(r)
    if cal.candidates:
        rule = cal.settings.get("structure_choice", {}).get("rule", "BIC")
        con.print(f"structure {cal.structure!r} chosen by {rule}: "
                  + ", ".join(f"{k} {v:.4g}" for k, v in cal.candidates.items()))
    con.print(f"EM: converged={cal.convergence.converged}, iterations {cal.convergence.n_iter}, "
              f"log-likelihood {cal.convergence.loglik:.3f}")
    con.print(_dependence_line(dep))
    con.print(f"calibration written to {output}")


def _dependence_line(dep: DependenceTest) -> str:
    """The history's conditional-dependence test in one line (heroeval.checks.dependence_test)."""
    if dep.n_pairs == 0:
        return "dependence test: no gold item has two labelers; not tested"
    verdict = ("labelers err together beyond what their per-class error rates imply: intervals that assume "
               "independence (HERO-1's own) may under-cover; the recommended estimate's mock rounds measure it"
               if dep.p_value < 0.05 else "no excess agreement of errors detected")
    return (f"dependence test on {dep.n_items} gold items, {dep.n_pairs} labeler pairs: z = {dep.z:.2f}, "
            f"p = {dep.p_value:.3g}, mean error correlation {dep.mean_correlation:.3f}: {verdict}")


def _methods(method: str) -> Any:
    if method == "all":
        return "all"
    out = [m.strip() for m in method.split(",") if m.strip() and m.strip() != "auto"]
    for m in out:
        if m not in MC_METHODS:
            raise HeroEvalError(f"--method {m!r}: multi-class methods are {list(MC_METHODS)}, auto or all")
    return out


def _table(res: dict[str, MultiClassEstimate], level: float, title: str) -> Table:
    first = next(iter(res.values()))
    t = Table(title=title)
    t.add_column("method")
    for c in first.classes:
        t.add_column(f"{c}", justify="right")
    t.add_column("mean score", justify="right")
    for m, r in res.items():
        ci = r.intervals(level)
        ms = r.mean_score(level)
        t.add_row(m, *[f"{r.estimate[k]:.3f} [{ci[k][0]:.3f}, {ci[k][1]:.3f}]" for k in range(len(r.classes))],
                  f"{ms['estimate']:.3f} [{ms['ci_low']:.3f}, {ms['ci_high']:.3f}]")
    return t


def estimate(current: Path, *, calibration: Path | None, history: Path | None, gold: Path | None,
             classes: str | None, ordinal: bool, structure: str, method: str, exclude_new_labelers: bool,
             level: float, read_kw: dict[str, Any], round_col: str | None, json_out: bool,
             covariates: Path | None = None, history_covariates: Path | None = None, ridge: float = 0.0,
             current_gold: Path | None = None, design: Path | None = None) -> None:
    wants_auto = method == "all" or "auto" in [m.strip() for m in method.split(",")]
    if wants_auto and method != "all" and history is None and current_gold is None:
        raise HeroEvalError(AUTO_NEEDS_HISTORY)
    cal, cls, hist = _calibration_and_history(calibration, history, gold, classes, ordinal, structure, read_kw,
                                              round_col, history_covariates)
    cur = _read(current, gold=current_gold, classes=cls, ordinal=cal.ordinal, name="current", read_kw=read_kw,
                covariates=covariates, design=design)
    wanted = _methods(method)
    res: dict[str, MultiClassEstimate] = dict(estimate_multiclass(
        cur, cal, method=wanted, exclude_new_labelers=exclude_new_labelers, ridge=ridge)) if wanted else {}
    golds = gold_estimates(cur, cal) if current_gold is not None else {}
    res.update(golds)
    # with the round's own gold the recommendation is the prediction-powered estimate (unbiased whatever the shift);
    # without it, the mock-round recommendation from the history's gold
    gold_rec = gold_recommendation(golds, level) if golds and wants_auto else None
    rec = _recommend(cur, hist, structure) if wants_auto and hist is not None and gold_rec is None else None
    if json_out:
        out: dict[str, Any] = {"estimates": {m: r.to_dict(level) for m, r in res.items()},
                               "ingest": cur.annotations.report.to_dict()}
        out["recommended"] = rec.to_dict(level) if rec is not None else gold_rec
        if out["recommended"] is None and wants_auto:
            out["recommended_note"] = AUTO_NEEDS_HISTORY
        print(json.dumps(out, indent=1))
        return
    con = Console(highlight=False, width=160)
    if rec is not None:
        for line in _recommended_lines(rec, level):
            con.print(line)
    elif gold_rec is not None:
        for line in _gold_recommended_lines(gold_rec):
            con.print(line)
    elif wants_auto:
        con.print(f"note: {AUTO_NEEDS_HISTORY}")
    if res:
        con.print(_table(res, level, f"Class prevalences of the current round by each method ({100 * level:g}% CI, "
                                     "each method's own interval)"))
    for m, r in res.items():
        for note in r.notes:
            con.print(f"{m}: {note}")


def _gold_recommended_lines(r: dict[str, Any]) -> list[str]:
    """The recommended estimate with current gold (:func:`~heroeval.multiclass.current_gold.gold_recommendation`)."""
    out = [f"recommended (auto, current gold): {r['chosen']}, status {r['status']}: {r['reason']}"]
    for c, v in r["classes"].items():
        out.append(f"  share {c}: {v['estimate']:.3f} [{v['ci_low']:.3f}, {v['ci_high']:.3f}]")
    ms = r["mean_score"]
    out.append(f"  mean score: {ms['estimate']:.3f} [{ms['ci_low']:.3f}, {ms['ci_high']:.3f}]")
    return out


def _difference_lines(d: MultiClassDifferenceRecommendation, level: float) -> list[str]:
    out = [f"recommended difference A - B (auto): {d.method}, status {d.status}: {d.reason}"]
    for c, (lo, hi), x in zip(d.classes, d.intervals(level), d.difference, strict=True):
        out.append(f"  share {c}: {x:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    ms = d.mean_score(level)
    out.append(f"  mean score: {ms['estimate']:+.3f} [{ms['ci_low']:+.3f}, {ms['ci_high']:+.3f}], "
               f"p = {ms['p_value']:.3g}")
    return out


DIFFERENCE_NEEDS_HISTORY = ("the recommended multi-class difference and its verdict refit Stage A on mock rounds of "
                            "the history's gold: they need --history and --gold, not a calibration file")


def compare(a_current: Path, b_current: Path, *, calibration: Path | None, history: Path | None, gold: Path | None,
            classes: str | None, ordinal: bool, structure: str, method: str, exclude_new_labelers: bool,
            level: float, read_kw: dict[str, Any], round_col: str | None, json_out: bool,
            verdict: tuple[float, str, str | None] | None = None, report: Path | None = None) -> None:
    """``hero compare --classes/--ordinal``: each method's ``A - B``; with the history, the recommended difference
    (:func:`~heroeval.choice.multiclass_difference.recommend_difference_multiclass`, each round's recommendation as
    ``hero estimate --classes`` gives it) and, with ``verdict = (margin, alternative, on)``, the verdict on it."""
    cal, cls, hist = _calibration_and_history(calibration, history, gold, classes, ordinal, structure, read_kw,
                                              round_col)
    if verdict is not None and hist is None:
        raise HeroEvalError(f"--margin: {DIFFERENCE_NEEDS_HISTORY}")
    a = _read(a_current, gold=None, classes=cls, ordinal=cal.ordinal, name="A", read_kw=read_kw)
    b = _read(b_current, gold=None, classes=cls, ordinal=cal.ordinal, name="B", read_kw=read_kw)
    ra = estimate_multiclass(a, cal, method=_methods(method), exclude_new_labelers=exclude_new_labelers)
    rb = estimate_multiclass(b, cal, method=list(ra), exclude_new_labelers=exclude_new_labelers)
    comps = {m: compare_multiclass(ra[m], rb[m]) for m in ra}
    drec = (recommend_difference_multiclass(a, b, hist, structures=_structures(structure)) if hist is not None
            else None)
    v = None if verdict is None or drec is None else verdict_multiclass(drec, verdict[0], verdict[1], level,
                                                                         on=verdict[2])
    if report is not None:
        write_report(report, build_multiclass_comparison_report(a, b, cal, comps, difference=drec, verdict=v,
                                                                confidence_level=level))
    if json_out:
        out: dict[str, Any] = {"recommended": None if drec is None else drec.to_dict(level),
                               "comparisons": {m: c.to_dict(level) for m, c in comps.items()},
                               "ingest": {"a": a.annotations.report.to_dict(), "b": b.annotations.report.to_dict()}}
        if drec is None:
            out["recommended_note"] = DIFFERENCE_NEEDS_HISTORY
        if v is not None:
            out["verdict"] = v.to_dict()
        print(json.dumps(out, indent=1))
        return
    con = Console(highlight=False, width=160)
    if drec is not None:
        for name, r in (("A", drec.round_a), ("B", drec.round_b)):
            con.print(f"round {name}:")
            for line in _recommended_lines(r, level):
                con.print(f"  {line}")
        for line in _difference_lines(drec, level):
            con.print(line)
        if v is not None:
            con.print(f"verdict on B against A (margin {v.margin:g}, recommended {drec.method}): {v.text}")
    else:
        con.print(f"note: {DIFFERENCE_NEEDS_HISTORY}")
    t = Table(title=f"Difference of class prevalences, A - B ({100 * level:g}% CI, each method's own interval)")
    t.add_column("method")
    for c in cal.classes:
        t.add_column(c, justify="right")
    t.add_column("mean score", justify="right")
    for m, cmp in comps.items():
        cells = []
        for k in range(len(cal.classes)):
            f = cmp.functional(np.eye(len(cal.classes))[k], level)
            cells.append(f"{f['estimate']:+.3f} [{f['ci_low']:+.3f}, {f['ci_high']:+.3f}]")
        f = cmp.functional(cmp.values, level)
        cells.append(f"{f['estimate']:+.3f} [{f['ci_low']:+.3f}, {f['ci_high']:+.3f}] p={f['p_value']:.3g}")
        t.add_row(m, *cells)
    con.print(t)
    if report is not None:
        con.print(f"report written to {report}")


def report(current: Path, output: Path, *, calibration: Path | None, history: Path | None, gold: Path | None,
           classes: str | None, ordinal: bool, structure: str, exclude_new_labelers: bool, level: float,
           read_kw: dict[str, Any], round_col: str | None, title: str | None,
           current_gold: Path | None = None, design: Path | None = None) -> None:
    """``hero report --classes/--ordinal``: the multi-class HTML page (the recommended estimate, as ``hero estimate
    --classes`` gives it, when the history or the round's gold is given; every method's own; confusion heatmaps)."""

    cal, cls, hist = _calibration_and_history(calibration, history, gold, classes, ordinal, structure, read_kw,
                                              round_col)
    cur = _read(current, gold=current_gold, classes=cls, ordinal=cal.ordinal, name="current", read_kw=read_kw,
                design=design)
    res: dict[str, MultiClassEstimate] = dict(estimate_multiclass(cur, cal, method="all",
                                                                  exclude_new_labelers=exclude_new_labelers))
    golds = gold_estimates(cur, cal) if current_gold is not None else {}
    res.update(golds)
    gold_rec = gold_recommendation(golds, level) if golds else None
    rec = _recommend(cur, hist, structure) if hist is not None and gold_rec is None else None
    write_report(output, build_multiclass_report(cur, cal, res, title=title, confidence_level=level,
                                                 recommendation=rec if rec is not None else gold_rec))
    con = Console(highlight=False, width=160)
    lines = (_recommended_lines(rec, level) if rec is not None else _gold_recommended_lines(gold_rec)
             if gold_rec is not None else [f"note: {AUTO_NEEDS_HISTORY}"])
    for line in lines:
        con.print(line)
    con.print(_table(res, level, f"Class prevalences of the current round by each method ({100 * level:g}% CI, "
                                 "each method's own interval)"))
    con.print(f"report written to {output}")


def drift(current: Path, *, calibration: Path | None, history: Path | None, gold: Path | None, classes: str | None,
          ordinal: bool, structure: str, significance: float, adjust: str, read_kw: dict[str, Any],
          round_col: str | None) -> MultiClassDriftCheck:
    """``hero drift --classes/--ordinal``: each labeler's current label distribution against its calibration."""
    cal, cls = _calibration(calibration, history, gold, classes, ordinal, structure, read_kw, round_col)
    cur = _read(current, gold=None, classes=cls, ordinal=cal.ordinal, name="current", read_kw=read_kw)
    return check_drift_multiclass(cur, cal, significance=significance, adjust=adjust)
