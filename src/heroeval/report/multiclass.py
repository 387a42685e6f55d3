"""A self-contained HTML page for a multi-class round: prevalences with intervals, mean score, confusion heatmaps.

Built like :mod:`heroeval.report` (same stylesheet, content-security policy,
escaping and embedded JSON), with the figures of this package.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from heroeval.choice.multiclass_auto import MultiClassRecommendation
from heroeval.choice.multiclass_difference import MultiClassDifferenceRecommendation
from heroeval.estimators.table import METHOD_TITLES
from heroeval.inference.verdict import Verdict
from heroeval.multiclass.calibration import MultiClassCalibration
from heroeval.multiclass.data import MultiClassData
from heroeval.multiclass.estimators import MultiClassComparison, MultiClassEstimate
from heroeval.multiclass.plots import plot_confusion_matrices
from heroeval.report.figures import svg_img
from heroeval.report.markup import esc, num, page_start
from heroeval.version import __version__

__all__ = ["build_multiclass_comparison_report", "build_multiclass_report", "multiclass_comparison_data",
           "multiclass_report_data"]


def multiclass_report_data(current: MultiClassData, calibration: MultiClassCalibration,
                           results: Mapping[str, MultiClassEstimate], *, title: str | None = None,
                           confidence_level: float = 0.95,
                           recommendation: MultiClassRecommendation | Mapping[str, Any] | None = None
                           ) -> dict[str, Any]:
    """The numbers a multi-class report shows (embedded in the page as JSON); ``recommended`` is the
    recommendation's :meth:`~heroeval.choice.multiclass_auto.MultiClassRecommendation.to_dict` (as ``hero
    estimate --classes --json`` prints it), or the block itself when given as a mapping (with current gold:
    :func:`heroeval.multiclass.current_gold.gold_recommendation`), or None without one."""
    rec = (recommendation.to_dict(confidence_level) if isinstance(recommendation, MultiClassRecommendation)
           else None if recommendation is None else dict(recommendation))
    return {
        "kind": "multiclass",
        "title": title or f"Class prevalences of {current.annotations.name}",
        "heroeval_version": __version__,
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "classes": list(calibration.classes),
        "ordinal": bool(calibration.ordinal),
        "confidence_level": confidence_level,
        "estimates": {m: r.to_dict(confidence_level) for m, r in results.items()},
        "ingest": current.annotations.report.to_dict(),
        "n_labelers": calibration.n_labelers,
        "recommended": rec,
    }


def _recommended_html(r: Mapping[str, Any] | None, classes: Sequence[str]) -> str:
    if r is None:
        return ('<p class="muted">No recommended estimate: it needs the history and its gold (<code>--history</code>, '
                "<code>--gold</code>), not a calibration file. The methods below are shown as they are.</p>")
    cells = "".join(
        f'<td data-class="{esc(c)}">{num(r["classes"][c]["estimate"])}<br><span class="muted">'
        f'[{num(r["classes"][c]["ci_low"])}, {num(r["classes"][c]["ci_high"])}]</span></td>' for c in classes)
    ms = r["mean_score"]
    head = "".join(f"<th>{esc(c)}</th>" for c in classes)
    notes = "".join(f"<li>{esc(n)}</li>" for n in r.get("notes", []))
    return (f'<p id="recommended-status"><b>{esc(METHOD_TITLES.get(r["chosen"], r["chosen"]))}</b>, status '
            f'<b>{esc(r["status"])}</b>: {esc(r["reason"])}</p>'
            f'<div class="scroll"><table><thead><tr><th></th>{head}<th>mean score</th></tr></thead><tbody><tr>'
            f'<td>recommended</td>{cells}<td>{num(ms["estimate"])}<br><span class="muted">[{num(ms["ci_low"])}, '
            f'{num(ms["ci_high"])}]</span></td></tr></tbody></table></div>' + (f"<ul>{notes}</ul>" if notes else ""))


def _estimates_html(d: Mapping[str, Any]) -> str:
    classes: Sequence[str] = d["classes"]
    level = 100 * float(d["confidence_level"])
    head = "".join(f"<th>{esc(c)}</th>" for c in classes)
    rows = []
    for m, r in d["estimates"].items():
        cells = "".join(
            f'<td data-method="{esc(m)}" data-class="{esc(c)}">{num(r["classes"][c]["estimate"])}<br>'
            f'<span class="muted">[{num(r["classes"][c]["ci_low"])}, {num(r["classes"][c]["ci_high"])}]</span></td>'
            for c in classes)
        ms = r.get("mean_score") or {}
        score = (f'{num(ms.get("estimate"))}<br><span class="muted">[{num(ms.get("ci_low"))}, '
                 f'{num(ms.get("ci_high"))}]</span>') if ms.get("estimate") is not None else "–"
        rows.append(f"<tr><td>{esc(METHOD_TITLES.get(m, m))}</td>{cells}<td>{score}</td></tr>")
    return (f"<p>Each cell: the estimated share of the class and its {level:g}% interval.</p>"
            f'<div class="scroll"><table><thead><tr><th>method</th>{head}<th>mean score</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _ingest_html(ing: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{esc(t.get('table'))}</td><td>{esc(t.get('source'))}</td><td>{num(t.get('rows_read'), 'd')}</td>"
        f"<td>{num(t.get('rows_used'), 'd')}</td><td>{esc(', '.join(f'{k}: {v}' for k, v in (t.get('dropped') or {}).items()) or '–')}</td></tr>"
        for t in ing.get("tables", []))
    return ("<table><thead><tr><th>table</th><th>source</th><th>read</th><th>used</th><th>dropped</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")


def build_multiclass_report(current: MultiClassData, calibration: MultiClassCalibration,
                            results: Mapping[str, MultiClassEstimate], *, title: str | None = None,
                            confidence_level: float = 0.95,
                            recommendation: MultiClassRecommendation | Mapping[str, Any] | None = None) -> str:
    """One self-contained HTML page (no network fetches; untrusted names escaped); the recommended estimate
    (its bias-aware intervals) first when given, then every method's own.

    Examples
    --------
    >>> from heroeval.multiclass import multiclass_from_arrays, calibrate_multiclass, estimate_multiclass
    >>> h = multiclass_from_arrays([1, 1, 2, 2, 3, 3], ["a", "<b>"] * 3, [0, 0, 1, 1, 2, 1], classes=[0, 1, 2],
    ...                            gold=([1, 2, 3], [0, 1, 2]))
    >>> cal = calibrate_multiclass(h, structure="symmetric")
    >>> cur = multiclass_from_arrays([5, 5, 6, 6], ["a", "<b>"] * 2, [0, 0, 2, 2], classes=[0, 1, 2])
    >>> page = build_multiclass_report(cur, cal, estimate_multiclass(cur, cal, method=["hero1"]))
    >>> page.startswith("<!DOCTYPE html>") and "<b>" not in page
    True
    """
    d = multiclass_report_data(current, calibration, results, title=title, confidence_level=confidence_level,
                               recommendation=recommendation)
    fig = svg_img(plot_confusion_matrices(calibration), "confusion matrices of the labelers", "fig-confusion")
    ing = d["ingest"]
    data = json.dumps(d, allow_nan=False, default=str).replace("<", "\\u003c").replace(">", "\\u003e").replace(
        "&", "\\u0026")
    return (
        page_start(d, f"; classes {esc(', '.join(d['classes']))}{' (ordinal)' if d['ordinal'] else ''}")
        + "</header>"
        f'<section id="recommended"><h2>Recommended estimate</h2>{_recommended_html(d["recommended"], d["classes"])}'
        "</section>"
        f'<section id="estimates"><h2>Class prevalences by method (their own intervals)</h2>{_estimates_html(d)}'
        "</section>"
        f'<section id="labelers"><h2>Labelers: P(label | true class)</h2><figure>{fig}<figcaption>Rows are the '
        "true classes, columns the labels given; the labelers with the most history labels.</figcaption></figure>"
        "</section>"
        f'<section id="ingest"><h2>Ingest</h2>{_ingest_html(ing)}</section>'
        f'</main><script type="application/json" id="hero-data">{data}</script></body></html>\n'
    )


def multiclass_comparison_data(a: MultiClassData, b: MultiClassData, calibration: MultiClassCalibration,
                               comparisons: Mapping[str, MultiClassComparison], *,
                               difference: MultiClassDifferenceRecommendation | None = None,
                               verdict: Verdict | None = None, title: str | None = None,
                               confidence_level: float = 0.95) -> dict[str, Any]:
    """The numbers a multi-class comparison page shows (embedded as JSON): ``recommended`` is the recommended
    difference's :meth:`~heroeval.choice.multiclass_difference.MultiClassDifferenceRecommendation.to_dict` (with
    each round's recommendation, as ``hero compare --classes --json`` prints it), ``comparisons`` every method's
    own ``A - B``."""
    return {
        "kind": "multiclass_comparison",
        "title": title or f"Class prevalences of {a.annotations.name} against {b.annotations.name} (A - B)",
        "heroeval_version": __version__,
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "classes": list(calibration.classes),
        "ordinal": bool(calibration.ordinal),
        "confidence_level": confidence_level,
        "recommended": None if difference is None else difference.to_dict(confidence_level),
        "verdict": None if verdict is None else verdict.to_dict(),
        "comparisons": {m: c.to_dict(confidence_level) for m, c in comparisons.items()},
        "ingest": {"a": a.annotations.report.to_dict(), "b": b.annotations.report.to_dict()},
        "n_labelers": calibration.n_labelers,
    }


def _difference_html(r: Mapping[str, Any] | None, classes: Sequence[str], verdict: Mapping[str, Any] | None) -> str:
    if r is None:
        return ('<p class="muted">No recommended difference: it needs the history and its gold (<code>--history'
                '</code>, <code>--gold</code>), not a calibration file. The methods below are shown as they '
                "are.</p>")
    head = "".join(f"<th>{esc(c)}</th>" for c in classes)

    def row(label: str, d: Mapping[str, Any], sign: str) -> str:
        cells = "".join(f'<td data-class="{esc(c)}">{num(d["classes"][c]["estimate"], sign)}<br><span class="muted">'
                        f'[{num(d["classes"][c]["ci_low"], sign)}, {num(d["classes"][c]["ci_high"], sign)}]</span></td>'
                        for c in classes)
        ms = d["mean_score"]
        return (f"<tr><td>{esc(label)}</td>{cells}<td>{num(ms['estimate'], sign)}<br><span class=\"muted\">"
                f"[{num(ms['ci_low'], sign)}, {num(ms['ci_high'], sign)}]</span></td></tr>")

    rows = (row(f"A: {r['a']['chosen']} ({r['a']['status']})", r["a"], ".3f")
            + row(f"B: {r['b']['chosen']} ({r['b']['status']})", r["b"], ".3f")
            + row(f"A - B: {r['chosen']} ({r['status']})", r, "+.3f"))
    v = (f'<p id="verdict"><b>Verdict</b> (margin {num(verdict["margin"], "g")}): {esc(verdict["text"])}</p>'
         if verdict is not None else "")
    return (f'<p id="recommended-status"><b>{esc(METHOD_TITLES.get(r["chosen"], r["chosen"]))}</b>, status '
            f'<b>{esc(r["status"])}</b>: {esc(r["reason"])}</p>{v}'
            f'<p class="muted">Round A: {esc(r["a"]["reason"])}</p><p class="muted">Round B: {esc(r["b"]["reason"])}'
            f'</p><div class="scroll"><table><thead><tr><th></th>{head}<th>mean score</th></tr></thead><tbody>'
            f"{rows}</tbody></table></div>")


def _comparisons_html(d: Mapping[str, Any]) -> str:
    classes: Sequence[str] = d["classes"]
    head = "".join(f"<th>{esc(c)}</th>" for c in classes)
    rows = []
    for m, r in d["comparisons"].items():
        cells = "".join(
            f'<td data-method="{esc(m)}" data-class="{esc(c)}">{num(r["classes"][c]["estimate"], "+.3f")}<br>'
            f'<span class="muted">[{num(r["classes"][c]["ci_low"], "+.3f")}, '
            f'{num(r["classes"][c]["ci_high"], "+.3f")}]</span></td>' for c in classes)
        ms = r["mean_score"]
        rows.append(f"<tr><td>{esc(METHOD_TITLES.get(m, m))}</td>{cells}<td>{num(ms['estimate'], '+.3f')}<br>"
                    f"<span class=\"muted\">[{num(ms['ci_low'], '+.3f')}, {num(ms['ci_high'], '+.3f')}], p = "
                    f"{num(ms['p_value'], '.3g')}</span></td></tr>")
    return (f"<p>Each cell: A - B of the class share and its {100 * float(d['confidence_level']):g}% interval "
            "(Wald, the method's own).</p>"
            f'<div class="scroll"><table><thead><tr><th>method</th>{head}<th>mean score</th></tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def build_multiclass_comparison_report(a: MultiClassData, b: MultiClassData, calibration: MultiClassCalibration,
                                       comparisons: Mapping[str, MultiClassComparison], *,
                                       difference: MultiClassDifferenceRecommendation | None = None,
                                       verdict: Verdict | None = None, title: str | None = None,
                                       confidence_level: float = 0.95) -> str:
    """One self-contained HTML page comparing two K-class rounds (``hero compare --classes --report``): the
    recommended difference with each round's recommendation and the verdict first, then every method's own
    difference, the labelers' confusion matrices and both rounds' ingest."""
    d = multiclass_comparison_data(a, b, calibration, comparisons, difference=difference, verdict=verdict,
                                   title=title, confidence_level=confidence_level)
    fig = svg_img(plot_confusion_matrices(calibration), "confusion matrices of the labelers", "fig-confusion")
    data = json.dumps(d, allow_nan=False, default=str).replace("<", "\\u003c").replace(">", "\\u003e").replace(
        "&", "\\u0026")
    return (
        page_start(d, f"; classes {esc(', '.join(d['classes']))}{' (ordinal)' if d['ordinal'] else ''}")
        + "</header>"
        f'<section id="recommended"><h2>Recommended difference</h2>'
        f'{_difference_html(d["recommended"], d["classes"], d["verdict"])}</section>'
        f'<section id="comparisons"><h2>Differences by method (their own intervals)</h2>{_comparisons_html(d)}'
        "</section>"
        f'<section id="labelers"><h2>Labelers: P(label | true class)</h2><figure>{fig}<figcaption>Rows are the '
        "true classes, columns the labels given; the labelers with the most history labels.</figcaption></figure>"
        "</section>"
        f'<section id="ingest"><h2>Ingest</h2><h3>Round A</h3>{_ingest_html(d["ingest"]["a"])}<h3>Round B</h3>'
        f'{_ingest_html(d["ingest"]["b"])}</section>'
        f'</main><script type="application/json" id="hero-data">{data}</script></body></html>\n'
    )
