"""Terminal rendering with rich. Presentation only: computes nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from heroeval.core.jit import HAVE_NUMBA
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.results import EstimateResult
from heroeval.estimators.table import EstimateRow
from heroeval.ingest.annotations import IngestReport
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.fit import NUMBA_MIN_ANNOTATIONS
from heroeval.workflows.strata import StrataEstimate


def _ci_cell(row: EstimateRow) -> str:
    """``[low, high]``; a one-sided interval (asked for, or at an estimate of 0 or 1) also as a bound in words."""
    cell = f"[{_f(row.ci_low)}, {_f(row.ci_high)}]"
    if row.ci_alternative != "two-sided":
        cell += f" {row.ci_text}"
    return cell


def estimates_table(
    res: EstimateCollection,
    truth: float | None = None,
    title: str = "Estimates",
    confidence_level: float = 0.95,
    ci_method: str = "auto",
    bootstrap: Mapping[str, Any] | None = None,
    say: Callable[[str], str] = str,
    alternative: str = "two-sided",
) -> Table:
    """Every estimate, rendered from the table model (:meth:`EstimateCollection.table`); ``say`` rewrites the
    notes and reasons (the CLI names its options there). The bootstrap and error columns are this view's."""
    tab = res.table(confidence_level, ci_method, alternative)
    t = Table(title=title, title_justify="left")
    t.add_column("method")
    t.add_column("estimate", justify="right")
    t.add_column("SE", justify="right")
    t.add_column(tab.interval_header(), justify="center")
    if bootstrap:
        t.add_column("bootstrap SE / percentile CI", justify="center")
    if truth is not None:
        t.add_column("error", justify="right")
    t.add_column("items", justify="right")
    t.add_column("labels", justify="right")
    t.add_column("status / notes")
    rec = tab.recommended
    if rec is not None:  # the recommended estimate first, then every method
        label = (f"[bold red]UNRELIABLE: {escape(rec.title)}[/bold red]" if rec.unreliable
                 else f"[bold]{escape(rec.title)}[/bold]")
        row = [label, f"[bold]{rec.estimate:.4f}[/bold]", _f(rec.standard_error), f"[bold]{_ci_cell(rec)}[/bold]"]
        row += [""] * ((1 if bootstrap else 0) + (1 if truth is not None else 0))
        if truth is not None:
            row[-1] = f"{rec.estimate - truth:+.4f}"
        row += [str(rec.n_items), str(rec.n_annotations),
                escape(say("; ".join(["auto: see why below", *rec.notes])))]
        t.add_row(*row, end_section=True)
        t.caption = f"why: {escape(say(tab.reason or ''))}"
        t.caption_justify = "left"
    for er in tab.methods:
        r = res.results[er.key]
        row = [er.title, f"{er.estimate:.4f}", _f(er.standard_error), _ci_cell(er)]
        if bootstrap:
            b = bootstrap.get(er.key)
            if b is None:
                row.append("")
            else:
                bc = b.confidence_interval(confidence_level)
                row.append(f"{_f(b.standard_error)} [{_f(bc.low)}, {_f(bc.high)}]")
        if truth is not None:
            row.append(f"{er.estimate - truth:+.4f}")
        row += [str(er.n_items), str(er.n_annotations), _status(r, say)]
        t.add_row(*row)
    extra = (1 if bootstrap else 0) + (1 if truth is not None else 0)
    for m, why in tab.skipped.items():
        t.add_row(m, "-", "", "", *([""] * extra), "", "", f"[dim]not computed: {escape(say(why))}[/dim]")
    if truth is not None:
        t.add_row("[bold]true gold rate[/bold]", f"[bold]{truth:.4f}[/bold]", *([""] * (5 + extra)))
    return t


def comparison_table(cc: Any, confidence_level: float = 0.95) -> Table:
    t = Table(title="Difference A - B (shared calibration)", title_justify="left")
    for col, just in (("method", "left"), ("A", "right"), ("B", "right"), ("A - B", "right"), ("SE", "right"),
                      (f"{100 * confidence_level:g}% CI", "center"), ("p-value", "right")):
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    rec = getattr(cc, "recommended", None)
    rows = ([(f"recommended ({rec.comparison.a.title})", rec.comparison)] if rec is not None else []) + [
        (c.a.title, c) for c in cc.values()]
    for k, (title, c) in enumerate(rows):
        ci = c.confidence_interval(confidence_level)
        p = c.p_value
        ptxt = p_text(p)
        if p == p and p < 0.05:
            ptxt = f"[bold]{ptxt}[/bold]"
        t.add_row(title, f"{c.a.estimate:.4f}", f"{c.b.estimate:.4f}", f"{c.estimate:+.4f}",
                  _f(c.standard_error), f"[{_f(ci.low, True)}, {_f(ci.high, True)}]", ptxt,
                  style="bold" if rec is not None and k == 0 else None)
    t.caption = "majority vote's interval is for the difference of majority-label rates, not of gold rates"
    if rec is not None:
        t.caption += f"; the recommended row's interval: {rec.comparison.confidence_interval(confidence_level).method}"
    t.caption_justify = "left"
    return t


def recommended_difference_lines(rec: Any, confidence_level: float = 0.95) -> list[str]:
    """The recommended difference in words: the line, each round's own recommended estimate (as ``hero estimate``
    gives it) and why."""
    out = [rec.line(confidence_level)]
    parts = []
    for who, r in (("A", rec.a), ("B", rec.b)):
        ci = r.result.confidence_interval(confidence_level)
        parts.append(f"round {who}: {r.method} {r.result.estimate:.4f} [{ci.low:.4f}, {ci.high:.4f}], status "
                     f"{r.status}")
        out.append("  " + parts[-1] + " (its recommended estimate, as hero estimate gives it)")
    out.append(f"  why: {rec.reason}")
    return out


ROGAN_GLADEN_FILE_NOTE = (
    "SE from the calibration file's gold counts, which treat the labelers' gold errors as independent; with the "
    "history itself (--history) the gold items' labels count together, and the SE is larger when labelers err "
    "together")


def p_text(p: float) -> str:
    """A p-value for a table: 4 decimals, or its order of magnitude below 1e-4 (never 0.0000)."""
    if p != p:
        return "-"
    if p >= 1e-4:
        return f"{p:.4f}"
    return "<1e-300" if p < 1e-300 else f"{p:.1e}"


def _f(x: float, signed: bool = False) -> str:
    if x != x:
        return "-"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _status(r: EstimateResult, say: Callable[[str], str] = str) -> str:
    parts = []
    if r.status != "ok":
        parts.append(f"[yellow]{r.status}[/yellow]")
    if r.convergence is not None:
        c = r.convergence
        parts.append(f"EM {c.n_iter} it" + ("" if c.converged else " [red]not converged[/red]"))
    if r.method == "hero2":
        g = r.details.get("gamma", {})
        parts.append("gamma " + ", ".join(f"{k}={v:.3g}" for k, v in g.items()))
        eff = r.details.get("effective_n")
        if eff is not None and eff == eff:
            saved = r.details.get("items_saved", 0.0)
            parts.append(f"worth {eff:.0f} items to HERO-1 ({saved:+.0f})" if eff != float("inf")
                         else "below HERO-1's history variance")
    if r.method == "majority_vote":
        parts.append(f"ties={r.details.get('n_ties')} ({r.details.get('tie_rule')})")
    if r.method == "rogan_gladen" and r.influence is not None and r.influence.space == "gold_counts":
        parts.append(ROGAN_GLADEN_FILE_NOTE)
    parts.extend(escape(say(n)) for n in r.notes)
    return "; ".join(parts)


def drift_table(d: Mapping[str, Any], show_all: bool = False) -> Table:
    """The drift check (``DriftCheck.to_dict()``): the flagged labelers (every one with ``show_all``), the overall test."""
    labs = list(d.get("labelers", []))
    flagged = [x for x in labs if x.get("flagged")]
    rows = labs if show_all else flagged
    ov = d.get("overall", {})
    p_all = ov.get("p_value")
    t = Table(title=(f"Labeler drift: {len(labs)} labeler(s) tested, {len(flagged)} flagged "
                     f"({d.get('adjust')}, level {d.get('significance')})"), title_justify="left")
    for col in ("labeler", "labels", "observed", "expected", "z", f"p ({d.get('adjust')})", ""):
        t.add_column(col, justify="left" if col == "labeler" else "right")

    def num(x: Any, fmt: str) -> str:
        return "-" if x is None else format(float(x), fmt)

    for x in rows:
        t.add_row(escape(str(x.get("id"))), str(x.get("n_annotations")), num(x.get("observed"), ".4f"),
                  num(x.get("expected"), ".4f"), num(x.get("z"), ".2f"),
                  "-" if x.get("p_adjusted") is None else p_text(float(x["p_adjusted"])),
                  "DRIFT" if x.get("flagged") else "")
    stat = ov.get("stat")
    cap = [f"overall: chi2 = {num(stat, '.3f')} on {ov.get('df')} df, p = "
           f"{'-' if p_all is None else p_text(float(p_all))}"]
    if not show_all:
        cap.append("no labeler flagged" if not flagged else "")
        cap.append("--all lists every labeler")
    cap.extend(escape(str(n)) for n in d.get("notes", []))
    t.caption = "\n".join(c for c in cap if c)
    t.caption_justify = "left"
    return t


def ingest_table(rep: IngestReport, title: str, say: Callable[[str], str] = str) -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column("table")
    t.add_column("source", overflow="fold")
    t.add_column("read", justify="right")
    t.add_column("used", justify="right")
    t.add_column("dropped / notes")
    for tr in rep.tables:
        why = [f"[yellow]dropped {n}[/yellow]: {escape(say(k))}" for k, n in tr.dropped.items()]
        why += [f"{n}: {escape(say(k))}" for k, n in tr.notes.items()]
        src = tr.source if tr.source.startswith("<") else Path(tr.source).name
        t.add_row(tr.table, src, str(tr.rows_read), str(tr.rows_used), "\n".join(why) or "-")
    return t


def _engine_text(cal: Calibration) -> str:
    """Which Stage A engine ran, and why not the compiled one when it did not (fits made by 0.1 do not say)."""
    engine = cal.settings.get("engine")
    if engine == "numba":
        return "; compiled engine (numba)"
    if engine == "numpy":
        n = cal.n_history_annotations
        if n < NUMBA_MIN_ANNOTATIONS:
            why = (f"{n:,} annotations, below the {NUMBA_MIN_ANNOTATIONS:,} from which compiling pays; "
                   + ("numba is installed" if HAVE_NUMBA else "numba is not installed either"))
        else:
            why = ("chosen with engine numpy, or numba was missing where it was fitted" if HAVE_NUMBA
                   else "numba is not installed: pip install numba")
        return f"; NumPy engine ({why})"
    return ""


def _prior_text(cal: Calibration) -> str:
    """Stage A's empirical-Bayes prior (``shrink="eb"``), where there is one: the pooled rates and strengths."""
    pr = cal.settings.get("prior")
    if cal.settings.get("shrink") != "eb" or not isinstance(pr, dict):
        return ""

    def part(what: str, key: str) -> str:
        capped = " (capped at the gold)" if pr.get(f"capped_{key}") else ""
        return f"{what} towards {pr[f'm_{key}']:.3f} with k = {pr[f'k_{key}']:.3g}{capped}"

    return ("; empirical-Bayes prior (shrink eb): " + part("sensitivities", "sensitivity") + ", "
            + part("specificities", "specificity"))


def calibration_table(cal: Calibration, max_rows: int = 30) -> Table:
    c = cal.convergence
    state = "converged" if c.converged else "[red]NOT converged[/red]"
    t = Table(
        title=(
            f"Stage A calibration: {cal.n_labelers} labelers, {cal.n_history_items} history items "
            f"({cal.n_gold_items} gold), {len(cal.round_ids)} round(s); EM {state} in {c.n_iter} "
            f"iterations, log-lik {c.loglik:.2f}{_engine_text(cal)}{_prior_text(cal)}"
            + (f"; covariance cluster-robust over {cal.settings['history_item_groups']} item groups"
               if "history_item_groups" in cal.settings else "")
        ),
        title_justify="left",
    )
    t.add_column("labeler")
    t.add_column("sensitivity", justify="right")
    t.add_column("specificity", justify="right")
    t.add_column("labels", justify="right")
    t.add_column("gold pos/neg", justify="right")
    order = sorted(range(cal.n_labelers), key=lambda k: -int(cal.n_annotations[k]))
    for k in order[:max_rows]:
        t.add_row(
            cal.labeler_ids[k],
            f"{cal.alpha[k]:.3f}",
            f"{cal.beta[k]:.3f}",
            str(int(cal.n_annotations[k])),
            f"{int(cal.gold_tp[k] + cal.gold_fn[k])}/{int(cal.gold_tn[k] + cal.gold_fp[k])}",
        )
    if cal.n_labelers > max_rows:
        t.add_row(f"... {cal.n_labelers - max_rows} more", "", "", "", "")
    bound = cal.labelers_at_bound
    if bound:
        index = cal.index_of()
        # a labeler with gold on the side where it is fitted perfect has evidence of it; one without has none
        sparse = [lab for lab in bound if _bound_unsupported(cal, index[lab])]
        evidenced = [lab for lab in bound if lab not in set(sparse)]
        parts = []
        if evidenced:
            shown = escape(", ".join(evidenced[:8]) + (" ..." if len(evidenced) > 8 else ""))
            parts.append(
                f"{len(evidenced)} labeler(s) fitted at a bound, as never (or always) erring on one side ({shown}): "
                "one contrary label "
                "from them outweighs about 20 nats of other evidence. More gold on them is the remedy; "
                "--pseudo-count shrinks towards 1/2 and can bias the rate (docs/methods.md)")
        if sparse:
            shown = escape(", ".join(sparse[:8]) + (" ..." if len(sparse) > 8 else ""))
            parts.append(
                f"{len(sparse)} labeler(s) with no gold on that side and few labels are fitted at a bound "
                f"(sensitivity or specificity 0 or 1: {shown}); their labels barely inform it, so it says little "
                "about them. --pseudo-count shrinks such labelers towards 1/2")
        t.caption = "[yellow]" + "\n".join(parts) + "[/yellow]"
        t.caption_justify = "left"
    return t


SPARSE_LABELS = 20
"""A labeler fitted at a bound with no gold on that side and fewer labels than this is called sparse, not perfect."""


def _bound_unsupported(cal: Calibration, k: int) -> bool:
    a, b = float(cal.alpha[k]), float(cal.beta[k])
    pos = int(cal.gold_tp[k] + cal.gold_fn[k])  # gold positives: evidence on the sensitivity
    neg = int(cal.gold_tn[k] + cal.gold_fp[k])  # gold negatives: evidence on the specificity
    few = int(cal.n_annotations[k]) < SPARSE_LABELS
    sens_bound = min(a, 1 - a) < 1e-6
    spec_bound = min(b, 1 - b) < 1e-6
    return few and ((sens_bound and pos == 0) or not sens_bound) and ((spec_bound and neg == 0) or not spec_bound)


def rounds_table(cal: Calibration) -> Table:
    t = Table(title="History rounds", title_justify="left")
    t.add_column("round")
    t.add_column("prevalence", justify="right")
    t.add_column("items", justify="right")
    t.add_column("gold", justify="right")
    for g, r in enumerate(cal.round_ids):
        t.add_row(r, f"{cal.round_prevalence[g]:.4f}", str(int(cal.round_n_items[g])), str(int(cal.round_n_gold[g])))
    return t


def print_all(console: Console, *renderables: Any) -> None:
    for r in renderables:
        console.print(r)


def _cell(v: Any, fmt: str) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "-" if f != f else format(f, fmt)


def _lpi(v: Any) -> str:
    import pandas as pd

    return "all" if v is None or pd.isna(v) else str(int(v))


def simulation_table(summ: Any, title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for c in ("rho", "k", "labels", "method", "|bias|", "SD", "RMSE", "coverage", "CI width"):
        t.add_column(c, justify="left" if c == "method" else "right")
    prev = None
    for r in summ.itertuples():
        key = (r.rho, r.k, r.labels_per_item, r.pool_shift)
        if prev is not None and key != prev:
            t.add_section()
        prev = key
        lpi = _lpi(r.labels_per_item)
        t.add_row(_cell(r.rho, "g"), _cell(r.k, "g"), lpi, r.method, _cell(r.abs_bias, ".3f"), _cell(r.sd, ".3f"),
                  _cell(r.rmse, ".3f"), _cell(r.coverage, ".3f"), _cell(r.ci_width, ".3f"))
    return t


def summary_markdown(summ: Any, secs: float, reps: int) -> str:
    lines = [f"{reps} replications per setting, {secs:.1f} s.", "",
             "| rho | k | labels/item | method | abs bias | SD | RMSE | coverage | CI width |", "|---|---|---|---|---|---|---|---|---|"]
    for r in summ.itertuples():
        lpi = _lpi(r.labels_per_item)
        lines.append(f"| {_cell(r.rho, 'g')} | {_cell(r.k, 'g')} | {lpi} | {r.method} | {_cell(r.abs_bias, '.3f')} | "
                     f"{_cell(r.sd, '.3f')} | {_cell(r.rmse, '.3f')} | {_cell(r.coverage, '.3f')} | {_cell(r.ci_width, '.3f')} |")
    return "\n".join(lines) + "\n"


def benchmark_table(summ: Any, title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for c in ("rho", "shift", "method", "|bias|", "SD", "RMSE", "coverage", "width", "current n", "score R2"):
        t.add_column(c, justify="left" if c in ("method", "shift") else "right")
    prev = None
    for r in summ.itertuples():
        key = (r.rho, r.shift)
        if prev is not None and key != prev:
            t.add_section()
        prev = key
        t.add_row(_cell(r.rho, "g"), str(r.shift), str(r.method), _cell(r.abs_bias, ".3f"), _cell(r.sd, ".3f"),
                  _cell(r.rmse, ".3f"), _cell(r.coverage, ".2f"), _cell(r.width, ".3f"), _cell(r.n_current, ".0f"),
                  _cell(r.score_r2, ".3f"))
    t.caption = ("majority vote's interval is not for the gold rate (no coverage); width = mean width of the 95% "
                 "interval; score R2 = HERO-2's covariate fit")
    t.caption_justify = "left"
    return t


def _past_rounds_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """The past-round check: per history round, each method's error with the round's gold left out of Stage A."""
    keys: list[tuple[str, Any]] = []
    by: dict[tuple[str, Any], dict[tuple[str, Any], Mapping[str, Any]]] = {}
    rounds: dict[str, Mapping[str, Any]] = {}
    for r in rows:
        k = (str(r["method"]), r["history_weight"])
        if k not in keys:
            keys.append(k)
        rounds.setdefault(str(r["round"]), r)
        by.setdefault((str(r["round"]), r["n_items"]), {})[k] = r
    t = Table(title="Model check: past rounds, each estimated with its gold left out of Stage A", title_justify="left")
    for col in ("round", "gold items", "gold rate"):
        t.add_column(col, justify="left" if col == "round" else "right")
    for m, w in keys:
        t.add_column(escape(m if w is None else f"{m} w={w:g}") + " error", justify="right")
    for name, r0 in rounds.items():
        cells = by[(name, r0["n_items"])]
        t.add_row(escape(name), str(r0["n_items"]), _f(r0["truth"]),
                  *[f"{cells[k]['error']:+.4f} ± {cells[k]['error_se']:.4f}" if k in cells else "" for k in keys])
    t.caption = ("error = the method's estimate from the round's silver labels minus the round's gold rate, with "
                 "Stage A refitted without that round's gold. --method auto calls a round unreliable, and widens "
                 "its interval, when its chosen method missed these beyond their noise (docs/auto.md, step 7)")
    t.caption_justify = "left"
    return t


def checks_tables(cal: Calibration) -> list[Table]:
    """The model checks kept in a calibration (``calibrate(checks=True)``), as tables."""
    chk = cal.checks
    if chk is None:
        return []
    out = []
    dep = chk.dependence
    t = Table(title="Model check: labelers' errors independent given gold?", title_justify="left")
    for col in ("test", "z", "p-value", "pairs", "pairs significant (BH 5%)", "gold items"):
        t.add_column(col, justify="left" if col == "test" else "right")
    pv = p_text(dep.p_value)
    if dep.p_value == dep.p_value and dep.p_value < 0.05:
        pv = f"[bold red]{pv}[/bold red]"
    t.add_row("excess agreement (one-sided)", _f(dep.z), pv, str(dep.n_pairs), str(dep.n_pairs_significant),
              str(dep.n_items))
    out.append(t)
    if chk.log_score:
        t = Table(title=f"Model check: {chk.folds}-fold cross-validation on {chk.n_gold} gold items",
                  title_justify="left")
        t.add_column("history weight w", justify="right")
        t.add_column("log score (higher is better)", justify="right")
        t.add_column("HERO-1 mock-round error", justify="right")
        for w, (m, se) in chk.log_score.items():
            row = chk.mock_row("hero1", w)
            mark = " *" if w == chk.chosen_weight else ""
            err = "" if row is None else f"{row['bias']:+.4f} ± {row['bias_se']:.4f}"
            t.add_row(f"{w:g}{mark}", f"{m:.4f} ± {se:.4f}", err)
        own = float(cal.settings.get("history_weight", 1.0))
        which = ("a candidate weight for --method auto, which compares HERO-1 at w = 1 and at this weight on the "
                 "mock rounds (the recommended row names the weight it took)" if chk.chosen_weight > 0 else
                 "w = 0 (the gold items alone) is not a candidate of --method auto, which compares HERO-1 at w = 1 "
                 "with the other methods")
        t.caption = (f"* the best log score: {which}; this "
                     f"calibration itself is fitted at w = {own:g} (--history-weight cv fits it at the * weight). "
                     "Mock round = held-out gold items, rate estimated from their labels")
        t.caption_justify = "left"
        out.append(t)
        t = Table(title="Model check: mock-round error of the other methods", title_justify="left")
        for col in ("method", "mock estimate", "gold rate", "error", "vs rogan_gladen"):
            t.add_column(col, justify="left" if col == "method" else "right")
        for row in chk.mock:
            if row["method"] == "hero1":
                continue
            vs = row.get("vs_robust", float("nan"))
            t.add_row(escape(str(row["method"])), _f(row["estimate"]), _f(row["truth"]),
                      f"{row['bias']:+.4f} ± {row['bias_se']:.4f}",
                      "" if vs != vs else f"{vs:+.4f} ± {row.get('vs_robust_se', float('nan')):.4f}")
        out.append(t)
    if chk.rounds:
        out.append(_past_rounds_table(chk.rounds))
    for note in chk.notes:
        t = Table(title=f"Model check note: {escape(note)}", title_justify="left")
        out.append(t)
    return out


def strata_table(se: StrataEstimate, ci_method: str = "auto", say: Callable[[str], str] = str) -> Table:
    """Rates per stratum (:class:`~heroeval.workflows.strata.StrataEstimate`): one row per stratum with its
    recommended (or only) estimate and its family-wise interval; the family-wise level in the title, the
    skipped strata as rows with the reason."""
    t = Table(title=f"Rates per {escape(se.by)}: {escape(se.family_text())}", title_justify="left")
    t.add_column(escape(se.by))
    t.add_column("method")
    t.add_column("estimate", justify="right")
    t.add_column("SE", justify="right")
    t.add_column(f"{100 * se.confidence_level:g} % family-wise CI", justify="center")
    t.add_column("items", justify="right")
    t.add_column("status / notes")
    for r in se.records(ci_method):
        if r["status"] == "skipped":
            t.add_row(escape(str(r["stratum"])), "-", "-", "", "", str(r["n_items"]),
                      f"[dim]skipped: {escape(say(str(r['notes'])))}[/dim]")
            continue
        unreliable = r["status"] == "unreliable"
        method = escape(str(r["method"])) + (" (recommended)" if r["recommended"] else "")
        if unreliable:
            method = f"[bold red]UNRELIABLE: {method}[/bold red]"
        status = "; ".join(x for x in (r["status"] if r["status"] not in ("ok", "interior") else "",
                                       say(str(r["notes"]))) if x)
        t.add_row(escape(str(r["stratum"])), method, f"{r['estimate']:.4f}", _f(r["standard_error"]),
                  f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}] ({escape(str(r['ci_method']))})", str(r["n_items"]),
                  escape(status))
    return t
