"""One self-contained HTML report of an evaluation: estimates, labelers, pool shift, diagnostics.

The page needs no network: its figures are matplotlib SVGs embedded as
``data:`` images, its style is inline CSS, and it runs no script. The numbers
it shows are embedded once more as JSON (``<script type="application/json"
id="hero-data">``, which browsers never execute) so tools and tests can read
them back.

Every string that comes from the data (labeler and item names, file names,
round names, warning messages) is HTML-escaped. Labeler names never reach
the figures, which label labelers by their number in the labeler table;
figures are ``<img>`` elements, in which a browser runs no script anyway.

Examples
--------
>>> from heroeval.workflows.demo import run_demo
>>> from heroeval.report import build_report, report_data
>>> d = run_demo()
>>> page = build_report(d.current, d.calibration, d.estimates, history=d.history)
>>> page.startswith("<!DOCTYPE html>") and 'id="hero-data"' in page
True
>>> report_data(d.current, d.calibration, d.estimates)["primary"]   # method="auto" comes first
'recommended'
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Unpack

from heroeval.errors import HeroEvalError
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.table import METHOD_TITLES
from heroeval.ingest.annotations import AnnotationSet
from heroeval.report.figures import MAX_PLOTTED_LABELERS, as_float, forest_svg, labeler_map_svg, pool_svg
from heroeval.report.markup import esc, json_script, num, page_start, table_html, td
from heroeval.report.page_data import PageOptions, ReportOptions, comparison_report_data, report_data
from heroeval.stage_a.calibration import Calibration

__all__ = ["build_comparison_report", "build_report", "render_html", "write_report"]
# collect_warnings, report_data and comparison_report_data live in heroeval.report.page_data; collect_warnings is
# imported here too for the command line's lazy imports


_MAX_TABLE_LABELERS = 300






# ---------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------


def _estimates_table(block: Mapping[str, Any], round_key: str, level: float, ci_method: str, primary: str | None,
                     truth: float | None = None) -> str:
    head = [("method", False), ("estimate", True), ("SE", True), (f"{100 * level:g}% CI low", True),
            (f"{100 * level:g}% CI high", True)]
    if truth is not None:
        head.append(("error", True))
    head += [("items", True), ("labels", True), ("labelers", True), ("status", False), ("notes", False)]
    rows = []
    for k in block["order"]:
        r = block["estimates"][k]
        cls = ' class="primary"' if k == primary else ""
        cells = [f'<td class="name">{esc(r["label"])}</td>', td(r["estimate"], "estimate"),
                 td(r["standard_error"], "standard_error"), td(r["ci_low"], "ci_low"), td(r["ci_high"], "ci_high")]
        if truth is not None:
            cells.append(td(float(r["estimate"]) - truth if r["estimate"] is not None else None, "error", "+.4f"))
        notes = list(r["notes"])
        if k == "majority_vote" and not any("majority-label rate" in n for n in notes):
            notes.insert(0, "its interval is for the majority-label rate, not the gold rate")
        st = str(r["status"])
        st_cls = "bad" if st.startswith("boundary") or st in ("unidentified", "unreliable") else ""
        cells += [td(r["n_items"], "n_items", "d"), td(r["n_annotations"], "n_annotations", "d"),
                  td(r["n_labelers"], "n_labelers", "d"), f'<td class="{st_cls}">{esc(st)}</td>',
                  f'<td class="name">{"<br>".join(esc(n) for n in notes)}</td>']
        rows.append(f'<tr{cls} data-round="{esc(round_key)}" data-method="{esc(k)}">{"".join(cells)}</tr>')
    for m, why in block["skipped"].items():
        rows.append(f'<tr class="skipped"><td class="name">{esc(METHOD_TITLES.get(m, m))}</td>'
                    f'<td colspan="{len(head) - 1}" class="muted">not computed: {esc(why)}</td></tr>')
    return table_html(head, rows, "estimates")


def _gold_html(g: Mapping[str, Any], round_key: str, level: float) -> str:
    """The section on the round's own expert labels (see :func:`_gold_block`)."""
    head = [("estimate with the round's gold", False), ("estimate", True), ("SE", True),
            (f"{100 * level:g}% CI low", True), (f"{100 * level:g}% CI high", True), ("interval", False),
            ("lambda", True)]
    rows = [f'<tr data-round="{esc(round_key)}" data-method="{esc(r["method"])}"><td class="name">{esc(r["label"])}</td>'
            f'{td(r["estimate"], "estimate")}{td(r["standard_error"], "standard_error")}'
            f'{td(r["ci_low"], "ci_low")}{td(r["ci_high"], "ci_high")}<td>{esc(r["interval"])}</td>'
            f'{td(r["lambda"], "lambda", ".2f")}</tr>' for r in g["estimates"]]
    out = (f"<p>{esc(g['text'])}. The estimates below use them: HERO's per-item posteriors (or the majority vote) "
           "predict each item's gold label and the gold items correct the prediction's average error "
           "(prediction-powered inference, PPI++; lambda is the weight the predictor earned). They are unbiased "
           "for this round's rate whatever the rate shift, pool shift or labelers' dependence, because the gold "
           "items are a random sample of the round.</p>" + table_html(head, rows, "gold-estimates"))
    if g["silver_errors"]:
        ref = next((r["label"] for r in g["estimates"] if r["method"] == g["reference"]), g["reference"])
        head2 = [("silver-only estimate", False), ("estimate", True), (f"error vs {ref}", True), ("SE", True),
                 ("off at 5 %", False)]
        rows2 = [f'<tr data-round="{esc(round_key)}" data-method="{esc(r["method"])}"><td class="name">'
                 f'{esc(r["label"])}</td>{td(r["estimate"], "estimate")}{td(r["error"], "error", "+.4f")}'
                 f'{td(r["error_se"], "error_se")}<td class="{"bad" if r["significant"] else ""}">'
                 f'{"yes" if r["significant"] else "no"}</td></tr>' for r in g["silver_errors"]]
        out += ("<p>The same gold measures each silver-only estimate's error on this very round (its estimate minus "
                f"{esc(ref)}; the SE is the reference's, which dominates). No mock round of the history can do "
                "that.</p>" + table_html(head2, rows2, "gold-errors"))
    return out


def _forest_rows(block: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [block["estimates"][k] for k in block["order"]]


def _mv(block: Mapping[str, Any]) -> float | None:
    mv = block["estimates"].get("majority_vote")
    return None if mv is None else as_float(mv["estimate"])


def _headline_cards(d: Mapping[str, Any]) -> str:
    level = 100 * float(d["confidence_level"])
    cards = []
    if d["kind"] == "comparison":
        diff = d["difference"]
        for k in diff["order"][:1] + (["majority_vote"] if "majority_vote" in diff["estimates"] else []):
            r = diff["estimates"][k]
            cls = "card primary" if k == d["primary"] else "card"
            cards.append(
                f'<div class="{cls}" data-method="{esc(k)}"><div class="muted">{esc(r["label"])}: A − B</div>'
                f'<div class="big" data-field="estimate">{num(r["estimate"], "+.4f")}</div>'
                f'<div>{level:g}% CI [{num(r["ci_low"], "+.4f")}, {num(r["ci_high"], "+.4f")}], '
                f'p = {num(r["p_value"])}</div>'
                + ('<div class="warn" data-field="status"><b>UNRELIABLE</b>: do not ship on this interval '
                   '(see why)</div>' if r.get("status") == "unreliable" else "")
                + (f'<div class="muted" data-field="reason">why: {esc(r["reason"])}</div>' if r.get("reason") else "")
                + '</div>')
        return f'<div class="headline">{"".join(cards)}</div>'
    block = d["rounds"]["current"]
    keys = block["order"][:1] + [k for k in ("majority_vote",) if k in block["estimates"] and k != block["order"][0]]
    for k in keys:
        r = block["estimates"][k]
        cls = "card primary" if k == d["primary"] else "card"
        sub = "naive baseline: " if k == "majority_vote" else ("primary estimate: " if k == d["primary"] else "")
        cards.append(
            f'<div class="{cls}" data-method="{esc(k)}"><div class="muted">{esc(sub)}{esc(r["label"])}</div>'
            f'<div class="big" data-field="estimate">{num(r["estimate"])}</div>'
            f'<div>{level:g}% CI [{num(r["ci_low"])}, {num(r["ci_high"])}], SE {num(r["standard_error"])}</div>'
            + (f'<div data-field="bound">the rate is {esc(r["ci_text"])}</div>'
               if r.get("ci_alternative", "two-sided") != "two-sided" else "")
            + ('<div class="warn" data-field="status"><b>UNRELIABLE</b>: do not ship on this interval '
               '(see why)</div>' if k == "recommended" and block.get("recommendation")
               and block["recommendation"].get("status") == "unreliable" else "")
            + (f'<div class="muted" data-field="reason">why: {esc(block["recommendation"]["reason"])}</div>'
               if k == "recommended" and block.get("recommendation") else "")
            + '</div>')
    if d.get("truth") is not None:
        cards.append(f'<div class="card"><div class="muted">true gold rate (known for the demo only)</div>'
                     f'<div class="big">{num(d["truth"])}</div></div>')
    return f'<div class="headline">{"".join(cards)}</div>'


def _warnings_html(d: Mapping[str, Any]) -> str:
    w = list(d["warnings"])
    cal = d["calibration"]
    if not cal["convergence"]["converged"]:
        w.append(f"Stage A EM did not converge in {cal['convergence']['n_iter']} iterations")
    if not w:
        return '<p class="ok" id="no-warnings">No warnings.</p>'
    return '<div class="warnings"><ul id="warning-list">' + "".join(f"<li>{esc(x)}</li>" for x in w) + "</ul></div>"


def _labeler_table(d: Mapping[str, Any]) -> str:
    level = 100 * float(d["confidence_level"])
    pool = {r["id"]: r for r in d["pool"]["labelers"]}
    cur_cols = [c for c in d["pool"]["columns"] if c != "history"]
    head = [("#", True), ("labeler", False), ("sensitivity", True), (f"{level:g}% CI", True), ("specificity", True),
            (f"{level:g}% CI", True), ("history labels", True), *((f"{c} labels", True) for c in cur_cols),
            ("gold overlap", True), ("gold +/−", True)]
    rows = []
    for r in sorted(d["labelers"], key=lambda r: -int(r["n_history_labels"]))[:_MAX_TABLE_LABELERS]:
        p = pool.get(r["id"], {})
        bound = ' <span class="bad" title="fitted on the boundary">●</span>' if r["at_bound"] else ""
        rows.append(
            f'<tr data-labeler-index="{int(r["index"])}">'
            f'{td(r["index"], "index", "d")}<td class="name labeler-name">{esc(r["id"])}{bound}</td>'
            f'{td(r["sensitivity"], "sensitivity", ".3f")}'
            f'<td class="num">[{num(r["sensitivity_ci"][0], ".3f")}, {num(r["sensitivity_ci"][1], ".3f")}]</td>'
            f'{td(r["specificity"], "specificity", ".3f")}'
            f'<td class="num">[{num(r["specificity_ci"][0], ".3f")}, {num(r["specificity_ci"][1], ".3f")}]</td>'
            f'{td(r["n_history_labels"], "n_history_labels", "d")}'
            + "".join(td(p.get(f"{c}_n", 0), f"{c}_n", "d") for c in cur_cols)
            + f'{td(r["gold_overlap"], "gold_overlap", "d")}'
            f'<td class="num">{int(r["gold_positive"])}/{int(r["gold_negative"])}</td></tr>')
    more = len(d["labelers"]) - _MAX_TABLE_LABELERS
    extra = f'<p class="muted">{more} more labelers are in the embedded JSON.</p>' if more > 0 else ""
    return table_html(head, rows, "labelers") + extra


def _pool_table(d: Mapping[str, Any]) -> str:
    cols = d["pool"]["columns"]
    head = [("#", True), ("labeler", False), *((f"{c} share", True) for c in cols)]
    rows = []
    for r in sorted(d["pool"]["labelers"], key=lambda r: -float(r["history_share"]))[:_MAX_TABLE_LABELERS]:
        idx = td(r["index"], "index", "d") if r["index"] is not None else '<td class="num">new</td>'
        rows.append(f'<tr>{idx}<td class="name">{esc(r["id"])}</td>'
                    + "".join(td(r[f"{c}_share"], f"{c}_share", ".3f") for c in cols) + "</tr>")
    return table_html(head, rows, "pool")


def _diagnostics_html(d: Mapping[str, Any]) -> str:
    cal = d["calibration"]
    c = cal["convergence"]
    parts = [
        "<h3>Stage A (the history)</h3>",
        f'<p>{cal["n_labelers"]} labelers, {cal["n_history_items"]} history items of which {cal["n_gold_items"]} '
        f'have gold, {cal["n_history_labels"]} labels. EM '
        + (f'<span class="ok">converged</span> in {c["n_iter"]} iterations'
           if c["converged"] else f'<span class="bad">did NOT converge</span> in {c["n_iter"]} iterations')
        + f' (log-likelihood {num(c["loglik"], ".2f")}, last parameter change {num(c["max_change"], ".2g")}).</p>',
    ]
    if cal["labelers_at_bound"]:
        names = ", ".join(esc(x) for x in cal["labelers_at_bound"][:20])
        parts.append(f'<p class="bad">Fitted as never erring on one side (sensitivity or specificity at 0 or 1): '
                     f'{names}{" ..." if len(cal["labelers_at_bound"]) > 20 else ""}. More gold on them is the '
                     'remedy; their intervals are points.</p>')
    if not cal["has_parameter_covariance"]:
        parts.append('<p class="bad">The calibration has no parameter covariance: no standard errors.</p>')
    rows = [f'<tr><td class="name">{esc(r["round"])}</td>{td(r["prevalence"], "prevalence")}'
            f'{td(r["n_items"], "n_items", "d")}{td(r["n_gold"], "n_gold", "d")}</tr>' for r in cal["rounds"]]
    parts.append(table_html([("history round", False), ("gold rate (EM)", True), ("items", True), ("gold", True)], rows,
                        "rounds"))
    for key, block in d["rounds"].items():
        if not block["diagnostics"]:
            continue
        parts.append(f"<h3>Checks on {esc(block['name'])}</h3>")
        rows = []
        for x in block["diagnostics"]:
            fmt = {"p": ".3g", "r": ".3f", "n": ".0f", "it": "d", "d4": "+.4f"}.get(x["format"])
            val = esc(x["value"]) if fmt is None else num(x["value"], fmt)
            mark = ('<span class="muted">n/a</span>' if x["ok"] is None
                    else '<span class="ok">ok</span>' if x["ok"] else '<span class="bad">check</span>')
            rows.append(f'<tr data-round="{esc(key)}"><td class="name">{esc(x["name"])}</td>'
                        f'<td class="num">{val}</td><td>{mark}</td><td class="name">{esc(x["reading"])}</td></tr>')
        parts.append(table_html([("check", False), ("value", True), ("", False), ("what it means", False)], rows))
    return "".join(parts)


def _ingest_html(d: Mapping[str, Any]) -> str:
    parts = []
    for key, rep in d["ingest"].items():
        if rep is None:
            continue
        rows = []
        for t in rep["tables"]:
            why = [f'dropped {int(n)}: {esc(k)}' for k, n in t["dropped"].items()]
            why += [f'{int(n)}: {esc(k)}' for k, n in t["notes"].items()]
            src = str(t["source"])
            src = src if src.startswith("<") else Path(src).name
            rows.append(f'<tr><td>{esc(t["table"])}</td><td class="name">{esc(src)}</td>'
                        f'{td(t["rows_read"], "rows_read", "d")}{td(t["rows_used"], "rows_used", "d")}'
                        f'<td class="name">{"<br>".join(why) or "–"}</td></tr>')
        parts.append(f"<h3>{esc(key)}</h3>" + table_html([("table", False), ("source", False), ("rows read", True),
                                                     ("rows used", True), ("dropped / notes", False)], rows, "ingest"))
    return "".join(parts)


def _diff_table(d: Mapping[str, Any]) -> str:
    level = 100 * float(d["confidence_level"])
    head = [("method", False), ("A", True), ("B", True), ("A − B", True), ("SE", True), (f"{level:g}% CI low", True),
            (f"{level:g}% CI high", True), ("p-value", True)]
    rows = []
    for k in d["difference"]["order"]:
        r = d["difference"]["estimates"][k]
        cls = ' class="primary"' if k == d["primary"] else ""
        rows.append(f'<tr{cls} data-round="difference" data-method="{esc(k)}"><td class="name">{esc(r["label"])}</td>'
                    f'{td(r["a"], "a")}{td(r["b"], "b")}{td(r["estimate"], "estimate", "+.4f")}'
                    f'{td(r["standard_error"], "standard_error")}{td(r["ci_low"], "ci_low", "+.4f")}'
                    f'{td(r["ci_high"], "ci_high", "+.4f")}{td(r["p_value"], "p_value")}</tr>')
    for m, why in d["difference"]["skipped"].items():
        rows.append(f'<tr class="skipped"><td class="name">{esc(METHOD_TITLES.get(m, m))}</td>'
                    f'<td colspan="7" class="muted">not computed: {esc(why)}</td></tr>')
    return table_html(head, rows, "difference")


def _truncated(n: int, which: str) -> str:
    if n <= MAX_PLOTTED_LABELERS:
        return ""
    return f" The figure draws the {MAX_PLOTTED_LABELERS} of {n} labelers {which}; the table lists more."


def render_html(d: Mapping[str, Any]) -> str:
    """The HTML page of a report dict (from :func:`report_data` or :func:`comparison_report_data`)."""
    level = float(d["confidence_level"])
    ci_method = str(d["ci_method"])
    sources = "".join(f"<li>{esc(k)}: <code>{esc(Path(v).name)}</code></li>" for k, v in d["sources"].items())
    sections: list[tuple[str, str, str]] = []
    if d["kind"] == "comparison":
        diff_rows = [{**d["difference"]["estimates"][k]} for k in d["difference"]["order"]]
        fig = forest_svg(diff_rows, xlabel="difference of gold rates, A − B", ref=None, ref_label="", truth=None,
                      fig_id="fig-forest-difference", alt="Forest plot of the difference A - B by method", diff=True)
        sections.append(("difference", "Difference A − B",
                         f"<figure>{fig}<figcaption>Each method's difference of the two rounds' rates with its "
                         f"{100 * level:g}% interval (Wald; the recommended one bias-aware when the model checks "
                         "find a bias of the difference to allow for). Both rounds share one calibration; the "
                         "interval counts that shared history once. Majority vote's difference is of "
                         "majority-label rates."
                         f"</figcaption></figure>{_diff_table(d)}"))
    for key, block in d["rounds"].items():
        name = block["name"]
        heading = "Estimates" if d["kind"] == "estimate" else f"Round {key.upper()}: {name}"
        fig = forest_svg(_forest_rows(block), xlabel="estimated gold rate", ref=_mv(block),
                      ref_label="majority vote (naive)", truth=d.get("truth"), fig_id=f"fig-forest-{key}",
                      alt=f"Forest plot of every method's estimate for {name}")
        intro = (f'<p>{esc(name)}: {block["n_items"]} items, {block["n_labels"]} labels from {block["n_labelers"]} '
                 f'labelers. Intervals: {100 * level:g}% ({esc(ci_method)}).</p>')
        sections.append((f"estimates-{key}", heading,
                         intro + f"<figure>{fig}<figcaption>Each method's estimate (diamond) and interval (bar); "
                         "the dashed line is the naive majority vote. HERO corrects each labeler's known "
                         "errors; majority vote does not.</figcaption></figure>"
                         + _estimates_table(block, key, level, ci_method, d["primary"], d.get("truth"))))
        if block.get("current_gold"):
            sections.append((f"gold-{key}", "Expert labels in this round" if d["kind"] == "estimate"
                             else f"Round {key.upper()}: expert labels", _gold_html(block["current_gold"], key, level)))
    lmap = labeler_map_svg(d["labelers"], "fig-labelers")
    sections.append(("labelers", "Labelers: who can be trusted",
                     f"<figure>{lmap}<figcaption>Each labeler's sensitivity against specificity as Stage A "
                     "estimated them from the history, with "
                     f"{100 * level:g}% intervals (logit). Far from the dashed line is informative; the colour counts "
                     "the gold items the labeler labelled (the anchor of its estimate); the area its history labels. "
                     "Numbers are the rows below." + _truncated(len(d["labelers"]), "with the most history labels")
                     + "</figcaption></figure>" + _labeler_table(d)))
    pfig = pool_svg(d["pool"], "fig-pool")
    tv = ", ".join(f"{esc(k)}: {num(v, '.3f')}" for k, v in d["pool"]["total_variation"].items())
    new = {k: v for k, v in d["pool"]["new_labelers"].items() if v}
    new_txt = "".join(f"<p class='bad'>Labelers in {esc(k)} that the history does not know: "
                      f"{esc(', '.join(v[:20]))}{' ...' if len(v) > 20 else ''}.</p>" for k, v in new.items())
    sections.append(("pool", "Labeler pool shift",
                     f"<figure>{pfig}<figcaption>Each labeler's share of the labels in the history and in the "
                     "current round(s). HERO allows the pool to shift (it corrects each labeler separately); "
                     "majority vote and the current-only Dawid-Skene do not."
                     + _truncated(len(d["pool"]["labelers"]), "with the largest shares")
                     + f"</figcaption></figure><p>Total variation distance from the history's shares: {tv}.</p>"
                     + new_txt + _pool_table(d)))
    sections.append(("diagnostics", "Assumptions and diagnostics", _diagnostics_html(d)
                     + "<p class='muted'>HERO assumes labelers err independently given the truth and keep their "
                       "sensitivity and specificity from the history to the current round; see docs/guide.md for "
                       "how to check both.</p>"))
    sections.append(("ingest", "Ingest: rows used and dropped", _ingest_html(d)))
    nav = "".join(f'<a href="#{sid}">{esc(h)}</a>' for sid, h, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{esc(h)}</h2>{content}</section>' for sid, h, content in sections)
    return (
        page_start(d, "") + (f"<ul class=\"meta\">{sources}</ul>" if sources else "")
        + f"<nav>{nav}</nav></header>"
        + _headline_cards(d)
        + f'<section id="warnings"><h2>Warnings</h2>{_warnings_html(d)}</section>'
        + body + "</main>" + json_script(d) + "</body></html>\n"
    )


def build_report(current: AnnotationSet, calibration: Calibration, estimates: EstimateCollection | None = None,
                 *, history: AnnotationSet | None = None, **options: Unpack[ReportOptions]) -> str:
    """The HTML page of a one-round report; arguments as :func:`report_data`."""
    return render_html(report_data(current, calibration, estimates, history=history, **options))


def build_comparison_report(comparison: Any, round_a: AnnotationSet, round_b: AnnotationSet,
                            calibration: Calibration, *, history: AnnotationSet | None = None,
                            **options: Unpack[PageOptions]) -> str:
    """The HTML page of a two-round report; arguments as :func:`comparison_report_data`."""
    return render_html(comparison_report_data(comparison, round_a, round_b, calibration, history=history,
                                              **options))


def write_report(path: str | Path, page: str) -> Path:
    """Write a page built by :func:`build_report` (UTF-8); returns the path."""
    p = Path(path)
    try:
        p.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise HeroEvalError(f"cannot write the report to {p}: {exc.strerror or exc}") from None
    return p
