"""The HTML trend report of a store: rate against version with simultaneous intervals, differences, labeler drift.

Like the evaluation report (:mod:`heroeval.report.html`) the page is one
self-contained file under a strict content-security policy (no script runs,
nothing is fetched), every string from the data is escaped, and the figures
name rounds by their names (cut to 18 characters, drawn as plain text, never as
mathtext) and labelers by their number in the tables (``L1``). The numbers are
embedded as JSON (``id="hero-data"``).

Examples
--------
>>> import numpy as np
>>> from heroeval.store.trend import Trend
>>> page = build_trend_report(Trend((), (), (), 0.95, "sidak", 1.96, 1.96, None, "k", "fitted", np.zeros((0, 0))))
>>> page.startswith("<!DOCTYPE html>")
True
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np

from heroeval.report.figures import as_float, mpl, svg_img
from heroeval.report.markup import esc, json_script, num, page_start, table_html, td
from heroeval.store.trend import Trend
from heroeval.version import __version__

__all__ = ["build_trend_report", "trend_report_data"]


def trend_report_data(trend: Trend, truth: Mapping[str, float] | None = None,
                      title: str = "Rate by version") -> dict[str, Any]:
    """The report's numbers (also embedded in the page as JSON)."""
    d = trend.to_dict(truth)
    labelers = sorted({r.labeler for r in trend.drift})
    d.update(title=title, heroeval_version=__version__,
             generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), method_line=trend.method_line(),
             labelers=labelers)
    return d


def _tick(name: Any, width: int = 18) -> str:
    """A round's name as a plot label (issue #38: the plots said R1-R6), cut to ``width`` characters."""
    s = str(name)
    return s if len(s) <= width else s[: width - 1] + "…"


def _plain(labels: Any) -> None:
    for t in labels:  # a name is text, not mathtext ($, _ and ^ as written)
        t.set_parse_math(False)


def _rate_plot(d: Mapping[str, Any]) -> str:
    plt = mpl()
    rows = d["rounds"]
    m = len(rows)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.7 * m + 2), 3.4))
    x = np.arange(1, m + 1)
    est = np.array([as_float(r["estimate"]) for r in rows])
    lo = np.array([as_float(r["ci_low"]) for r in rows])
    hi = np.array([as_float(r["ci_high"]) for r in rows])
    ok = np.isfinite(lo) & np.isfinite(hi)
    ax.errorbar(x[ok], est[ok], yerr=[est[ok] - lo[ok], hi[ok] - est[ok]], fmt="o-", color="#1f77b4", capsize=3,
                label="estimate, simultaneous interval")
    ax.plot(x[~ok], est[~ok], "o", color="#1f77b4")
    if any("truth" in r and r["truth"] is not None for r in rows):
        tv = np.array([as_float(r.get("truth")) for r in rows])
        ax.plot(x, tv, "D", color="#d62728", label="truth", markersize=5)
    gm = np.array([as_float(r.get("gold_mean")) for r in rows])
    if np.isfinite(gm).any():
        ax.plot(x, gm, "x", color="#7f7f7f", label="mean of the round's gold labels")
    ax.set_xticks(x, [_tick(r["round"]) for r in rows], rotation=30, ha="right", fontsize=7)
    _plain(ax.get_xticklabels())
    ax.set_xlabel("round")
    ax.set_ylabel("rate")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return svg_img(fig, "Rate by round with simultaneous intervals", "fig-trend")


def _diff_plot(d: Mapping[str, Any]) -> str:
    plt = mpl()
    rows = d["differences"]
    fig, ax = plt.subplots(figsize=(6.0, 0.35 * len(rows) + 1.2))
    y = np.arange(len(rows))[::-1]
    est = np.array([as_float(r["difference"]) for r in rows])
    lo = np.array([as_float(r["ci_low"]) for r in rows])
    hi = np.array([as_float(r["ci_high"]) for r in rows])
    ok = np.isfinite(lo)
    ax.errorbar(est[ok], y[ok], xerr=[est[ok] - lo[ok], hi[ok] - est[ok]], fmt="D", color="#2ca02c", capsize=3)
    ax.axvline(0, color="#7f7f7f", linestyle="--", linewidth=1)
    ax.set_yticks(y, [f"{_tick(r['round'])} − {_tick(r['reference'])}" for r in rows], fontsize=7)
    _plain(ax.get_yticklabels())
    ax.set_xlabel("difference of rates")
    fig.tight_layout()
    return svg_img(fig, "Differences between rounds with simultaneous intervals", "fig-diff")


def _drift_plot(d: Mapping[str, Any]) -> str:
    plt = mpl()
    rounds = [r["round"] for r in d["rounds"]]
    labs = d["labelers"][:40]
    z = np.full((len(labs), len(rounds)), np.nan)
    flag = np.zeros_like(z, dtype=bool)
    li = {lab: k for k, lab in enumerate(labs)}
    ri = {r: k for k, r in enumerate(rounds)}
    for row in d["drift"]:
        if row["labeler"] in li and row["round"] in ri:
            z[li[row["labeler"]], ri[row["round"]]] = as_float(row["z"])
            flag[li[row["labeler"]], ri[row["round"]]] = bool(row["flagged"])
    fig, ax = plt.subplots(figsize=(max(4.5, 0.55 * len(rounds) + 2), 0.3 * len(labs) + 1.4))
    im = ax.imshow(np.clip(z, -6, 6), cmap="RdBu_r", vmin=-6, vmax=6, aspect="auto")
    for i, j in zip(*np.nonzero(flag), strict=True):
        ax.text(j, i, "●", ha="center", va="center", fontsize=7, color="black")
    ax.set_xticks(range(len(rounds)), [_tick(r) for r in rounds], rotation=30, ha="right", fontsize=7)
    _plain(ax.get_xticklabels())
    ax.set_yticks(range(len(labs)), [f"L{k}" for k in range(1, len(labs) + 1)])
    fig.colorbar(im, ax=ax, label="drift z (observed − expected positive rate)")
    fig.tight_layout()
    return svg_img(fig, "Labeler drift z by round; dots mark flagged labelers", "fig-drift")


def _rates_table(d: Mapping[str, Any]) -> str:
    truth = any(r.get("truth") is not None for r in d["rounds"])
    head = [("#", False), ("round", False), ("model", False), ("date", False), ("items", True), ("gold", True),
            ("method", False), ("estimate", True), ("SE", True), ("simultaneous interval", True),
            ("marginal interval", True), ("status", False), ("gold mean", True)]
    if truth:
        head += [("truth", True), ("error", True)]
    rows = []
    for k, r in enumerate(d["rounds"], start=1):
        status = r.get("status") or "ok"
        bad = "" if status == "ok" else ' class="bad"'
        cells = (f"<td>R{k}</td><td class=\"name\">{esc(r['round'])}</td><td class=\"name\">{esc(r['model'] or '')}</td>"
                 f"<td>{esc(r['date'] or '')}</td>{td(r['n_items'], 'items', 'd')}{td(r['n_gold'], 'gold', 'd')}"
                 f"<td class=\"name\" data-field=\"method\">{esc(r.get('method') or '')}</td>"
                 f"{td(r['estimate'], 'estimate')}{td(r['standard_error'], 'se')}"
                 f"<td class=\"num\" data-field=\"ci\">[{num(r['ci_low'])}, {num(r['ci_high'])}]</td>"
                 f"<td class=\"num\">[{num(r['marginal_low'])}, {num(r['marginal_high'])}]</td>"
                 f"<td{bad} data-field=\"status\" title=\"{esc(r.get('reason') or '')}\">{esc(status)}</td>"
                 f"{td(r['gold_mean'])}")
        if truth:
            cells += td(r.get("truth"), "truth") + td(r.get("error"), "error", "+.4f")
        rows.append(f"<tr>{cells}</tr>")
    return table_html(head, rows, "rates")


def _diffs_table(d: Mapping[str, Any]) -> str:
    pos = {r["round"]: k for k, r in enumerate(d["rounds"], start=1)}
    rows = [f"<tr><td>R{pos[r['round']]} − R{pos[r['reference']]}</td><td class=\"name\">{esc(r['round'])}</td>"
            f"<td class=\"name\">{esc(r['reference'])}</td>{td(r['difference'], 'difference', '+.4f')}"
            f"{td(r['standard_error'])}<td class=\"num\">[{num(r['ci_low'], '+.4f')}, {num(r['ci_high'], '+.4f')}]"
            f"</td>{td(r['p_value'], None, '.3g')}{td(r['p_adjusted'], 'p_adjusted', '.3g')}"
            f"<td class=\"name\">{esc(r.get('method') or '')}</td><td>{esc(r.get('status') or '')}</td></tr>"
            for r in d["differences"]]
    return table_html([("", False), ("round", False), ("minus", False), ("difference", True), ("SE", True),
                   ("simultaneous interval", True), ("p", True), ("p adjusted", True), ("method", False),
                   ("status", False)], rows, "differences")


def _drift_table(d: Mapping[str, Any]) -> str:
    lnum = {lab: k for k, lab in enumerate(d["labelers"], start=1)}
    rows = []
    for r in d["drift"][:2000]:
        cls = ' class="bad"' if r["flagged"] else ""
        rows.append(f"<tr><td class=\"name\">{esc(r['round'])}</td><td>L{lnum.get(r['labeler'], '?')}</td>"
                    f"<td class=\"name\">{esc(r['labeler'])}</td>{td(r['n_labels'], None, 'd')}"
                    f"{td(r['observed'])}{td(r['expected'])}{td(r['z'], None, '+.2f')}"
                    f"{td(r['p_adjusted'], None, '.3g')}<td{cls}>{'drift' if r['flagged'] else ''}</td>"
                    f"{td(r['gold_sensitivity'])}{td(r['gold_specificity'])}{td(r['n_gold_labels'], None, 'd')}</tr>")
    return table_html([("round", False), ("", False), ("labeler", False), ("labels", True), ("positive rate", True),
                   ("expected", True), ("z", True), ("p (Holm)", True), ("", False), ("sensitivity on gold", True),
                   ("specificity on gold", True), ("gold labels", True)], rows, "drift")


def render_trend(d: Mapping[str, Any]) -> str:
    parts = [page_start(d, f" — store {esc(d['store'])}, calibration {esc(d['calibration']['key'][:12])} "
                          f"({esc(d['calibration']['status'])})") + "</header>"]
    parts.append('<nav><a href="#rates">Rates</a><a href="#differences">Differences</a>'
                 '<a href="#drift">Labeler drift</a><a href="#notes">Notes</a></nav>')
    if d.get("method") == "auto":
        how = (" Every round's rate is its recommended estimate, the one hero store estimate gives it (the method "
               "the model checks choose, its interval bias-aware where they find a bias, its status and the reason: "
               "hover over the status); every difference is the recommended difference of hero compare, on the "
               "calibration of the history without either round.")
    else:
        how = (" Every round is a prevalence of one Stage A fit on the store's rounds (gold items with their label, "
               "the others through the labelers' calibrated errors), so the rates and differences share one "
               "parameter covariance.")
    parts.append(f'<p class="muted" id="method">{esc(d["method_line"])}.{esc(how)}</p>')
    parts.append('<h2 id="rates">Rates</h2>')
    if d["rounds"]:
        parts.append(f"<figure>{_rate_plot(d)}<figcaption>Each round's rate with its simultaneous interval. Diamonds: the true rate when given; crosses: the mean of the "
                     "round's few gold labels.</figcaption></figure>")
    parts.append(_rates_table(d))
    ref = "the previous round" if d["baseline"] == "previous" else esc(d["baseline"])
    parts.append(f'<h2 id="differences">Differences (each round minus {ref})</h2>')
    if d["differences"]:
        parts.append(f"<figure>{_diff_plot(d)}<figcaption>Differences with simultaneous intervals; the dashed line is "
                     "no change.</figcaption></figure>")
    parts.append(_diffs_table(d))
    parts.append('<h2 id="drift">Labeler drift, round by round</h2>')
    if d["drift"]:
        parts.append(f"<figure>{_drift_plot(d)}<figcaption>z of each labeler's positive rate against what the rest "
                     "of the history implies at the round's HERO-1 rate (heroeval.check_drift); dots: flagged after "
                     "Holm's adjustment within the round. Labelers are numbered as in the table.</figcaption></figure>")
        parts.append(_drift_table(d))
    else:
        parts.append("<p>No drift check was run.</p>")
    notes = "".join(f"<li>{esc(n)}</li>" for n in d["notes"]) or "<li>None.</li>"
    parts.append(f'<h2 id="notes">Notes</h2><ul class="notes">{notes}</ul>')
    parts.append(json_script(d))
    parts.append("</main></body></html>\n")
    return "".join(parts)


def build_trend_report(trend: Trend, truth: Mapping[str, float] | None = None,
                       title: str = "Rate by version") -> str:
    """The trend report as one self-contained HTML page (write it with :func:`heroeval.report.write_report`)."""
    return render_trend(trend_report_data(trend, truth, title))
