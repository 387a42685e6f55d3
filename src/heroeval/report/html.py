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

import base64
import html
import io
import json
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from heroeval._version import __version__
from heroeval.checks.dependence import error_correlation
from heroeval.errors import HeroEvalError, HeroEvalWarning
from heroeval.estimators.results import METHOD_TITLES, EstimateCollection, EstimateResult, _jsonable, rate_interval
from heroeval.inference._inference import ComparisonCollection
from heroeval.ingest.annotations import AnnotationSet, IngestReport
from heroeval.stage_a.calibration import Calibration
from heroeval.workflows.api import estimate as run_estimate

__all__ = ["build_comparison_report", "build_report", "collect_warnings", "comparison_report_data",
           "render_html", "report_data", "write_report"]

T = TypeVar("T")

# display order: the HERO family first, then the baselines (majority vote right after HERO-1)
_ORDER = ("hero1", "majority_vote", "hero2", "hero_joint", "gold_proportion", "dawid_skene")
_COLOURS = {
    "recommended": "#000000",
    "hero1": "#1f77b4",
    "hero2": "#d62728",
    "hero_joint": "#2ca02c",
    "majority_vote": "#7f7f7f",
    "dawid_skene": "#9467bd",
    "gold_proportion": "#ff7f0e",
}
_MAX_PLOTTED_LABELERS = 40
_MAX_TABLE_LABELERS = 300


# ---------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------


def _recommended(res: EstimateCollection) -> EstimateResult | None:
    """The collection's recommended estimate, if it offers one (method ``auto``)."""
    rec = getattr(res, "recommended", None)
    if isinstance(rec, EstimateResult):
        return rec
    if rec is not None and isinstance(getattr(rec, "result", None), EstimateResult):
        out: EstimateResult = rec.result  # heroeval.choice.Recommendation
        return out
    for key in ("recommended", "auto"):
        if key in res.results:
            return res.results[key]
    for r in res.results.values():
        if r.method == "auto":
            return r
    return None


def _ordered(res: EstimateCollection) -> list[tuple[str, EstimateResult]]:
    """(key, result) pairs: the recommended estimate first, then HERO-1, majority vote, the rest."""
    out: list[tuple[str, EstimateResult]] = []
    rec = _recommended(res)
    if rec is not None:
        out.append(("recommended", rec))
    seen = {id(rec)}
    for m in _ORDER:
        r = res.results.get(m)
        if r is not None and id(r) not in seen:
            out.append((m, r))
            seen.add(id(r))
    for m, r in res.results.items():
        if id(r) not in seen:
            out.append((m, r))
            seen.add(id(r))
    return out


def _label(key: str, r: EstimateResult) -> str:
    if key == "recommended":
        return f"Recommended ({r.title})"
    return r.title


def _estimate_dict(key: str, r: EstimateResult, level: float, ci_method: str) -> dict[str, Any]:
    ci = r.confidence_interval(level, ci_method)
    d = r.to_dict(level)
    d.update(key=key, label=_label(key, r), ci_low=ci.low, ci_high=ci.high, ci_method=ci.method,
             ci_alternative=ci.alternative, ci_text=ci.describe())
    out: dict[str, Any] = _jsonable(d)
    return out


_GOLD_METHODS = ("hero1_ppi", "prior_ppi", "mv_ppi", "gold_only")
_Z95 = 1.959963984540054


def _gold_block(res: EstimateCollection, level: float) -> dict[str, Any] | None:
    """What the round's own expert labels say: how many, how drawn, the estimates that use them, and each
    silver-only estimate's error measured against the recommended estimate with gold (``None``: no gold)."""
    gold = [(m, r) for m, r in res.results.items() if r.method in _GOLD_METHODS]
    if not gold:
        return None
    rec = _recommended(res)
    ref = rec if rec is not None and rec.method in _GOLD_METHODS else gold[0][1]
    first = gold[0][1]
    rows = []
    for m, r in gold:
        ci = r.confidence_interval(level)
        rows.append({"method": m, "label": r.title, "estimate": r.estimate, "standard_error": r.standard_error,
                     "ci_low": ci.low, "ci_high": ci.high, "interval": ci.method,
                     "lambda": r.details.get("lambda"), "predictor": r.details.get("predictor")})
    checks = []
    for m, r in res.results.items():
        if r.method in _GOLD_METHODS or r is rec or not math.isfinite(r.estimate):
            continue
        b = r.estimate - ref.estimate
        se = ref.standard_error
        checks.append({"method": m, "label": r.title, "estimate": r.estimate, "error": b, "error_se": se,
                       "significant": bool(math.isfinite(se) and se > 0 and abs(b) > _Z95 * se)})
    out: dict[str, Any] = _jsonable({"n_gold": first.details.get("n_gold"), "n_items": first.n_items,
                      "design": first.details.get("design"), "text": first.notes[0] if first.notes else "",
                      "gold_mean": first.details.get("gold_mean"), "reference": ref.method,
                      "estimates": rows, "silver_errors": checks})
    return out


def _estimates_block(res: EstimateCollection, level: float, ci_method: str) -> dict[str, Any]:
    return {
        "order": [k for k, _ in _ordered(res)],
        "estimates": {k: _estimate_dict(k, r, level, ci_method) for k, r in _ordered(res)},
        "skipped": dict(res.skipped),
        "current_gold": _gold_block(res, level),
        "recommendation": None if getattr(res, "recommended", None) is None or not hasattr(res.recommended, "to_dict")
        else _jsonable(res.recommended.to_dict(level)),
    }


def _labelers(cal: Calibration, level: float) -> list[dict[str, Any]]:
    V = cal.parameter_covariance
    J = cal.n_labelers
    out = []
    for k, lab in enumerate(cal.labeler_ids):
        row: dict[str, Any] = {"index": k + 1, "id": lab}
        for name, est, pos in (("sensitivity", cal.alpha, k), ("specificity", cal.beta, J + k)):
            se = math.sqrt(max(float(V[pos, pos]), 0.0)) if V is not None else math.nan
            ci = rate_interval(float(est[k]), se, level, "logit")
            row[name] = float(est[k])
            row[f"{name}_se"] = se
            row[f"{name}_ci"] = [ci.low, ci.high]
        tp, fn, tn, fp = (int(a[k]) for a in (cal.gold_tp, cal.gold_fn, cal.gold_tn, cal.gold_fp))
        row.update(n_history_labels=int(cal.n_annotations[k]), n_history_items=int(cal.n_items[k]),
                   gold_overlap=tp + fn + tn + fp, gold_positive=tp + fn, gold_negative=tn + fp,
                   at_bound=lab in cal.labelers_at_bound)
        out.append(row)
    res: list[dict[str, Any]] = _jsonable(out)
    return res


def _label_counts(ds: AnnotationSet) -> dict[str, int]:
    counts = np.bincount(np.asarray(ds.labeler, dtype=np.int64), minlength=ds.n_labelers)
    return {str(lab): int(c) for lab, c in zip(ds.labeler_ids, counts, strict=True)}


def _pool(cal: Calibration, rounds: Sequence[tuple[str, AnnotationSet]]) -> dict[str, Any]:
    """Each labeler's share of the labels in the history and in each round, and the total variation distance."""
    hist = {lab: int(n) for lab, n in zip(cal.labeler_ids, cal.n_annotations, strict=True)}
    cols = [("history", hist)] + [(name, _label_counts(ds)) for name, ds in rounds]
    index = {lab: k + 1 for k, lab in enumerate(cal.labeler_ids)}
    ids = list(cal.labeler_ids) + sorted({lab for _, c in cols[1:] for lab in c} - set(hist))
    totals = {name: max(sum(c.values()), 1) for name, c in cols}
    rows = []
    for lab in ids:
        row: dict[str, Any] = {"id": lab, "index": index.get(lab), "known": lab in hist}
        for name, c in cols:
            row[f"{name}_n"] = c.get(lab, 0)
            row[f"{name}_share"] = c.get(lab, 0) / totals[name]
        rows.append(row)
    tv = {name: 0.5 * sum(abs(r[f"{name}_share"] - r["history_share"]) for r in rows) for name, _ in cols[1:]}
    return {"columns": [name for name, _ in cols], "labelers": rows, "total_variation": tv,
            "new_labelers": {name: sorted(set(c) - set(hist)) for name, c in cols[1:]}}


def _calibration_summary(cal: Calibration) -> dict[str, Any]:
    out: dict[str, Any] = _jsonable({
        "n_labelers": cal.n_labelers,
        "n_history_items": cal.n_history_items,
        "n_gold_items": cal.n_gold_items,
        "n_history_labels": cal.n_history_annotations,
        "convergence": cal.convergence.to_dict(),
        "labelers_at_bound": list(cal.labelers_at_bound),
        "covariate_names": list(cal.covariate_names),
        "has_parameter_covariance": cal.covariance is not None,
        "rounds": [{"round": r, "prevalence": float(cal.round_prevalence[g]), "n_items": int(cal.round_n_items[g]),
                    "n_gold": int(cal.round_n_gold[g])} for g, r in enumerate(cal.round_ids)],
    })
    return out


def _diagnostics(res: EstimateCollection) -> list[dict[str, Any]]:
    """Assumption checks and fit diagnostics, one entry each, with a plain-language reading."""
    out: list[dict[str, Any]] = []
    h2 = res.results.get("hero2")
    if h2 is not None and "covariate_shift_p" in h2.details:
        p = float(h2.details["covariate_shift_p"])
        out.append({"name": "HERO-2 covariate shift (Wald test, current vs history means)", "value": p,
                    "format": "p", "ok": bool(p >= 1e-3),
                    "reading": "HERO-2 assumes the current items' covariates are distributed as the history's; "
                               "p < 0.001 warns, and then HERO-1 is the safer estimate"})
    if h2 is not None and "score_r2" in h2.details:
        out.append({"name": "HERO-2 covariate fit of the scores (R²)", "value": float(h2.details["score_r2"]),
                    "format": "r", "ok": True,
                    "reading": "how much of the per-item scores the covariates explain; near 0, HERO-2 gains nothing"})
    if h2 is not None and "effective_n" in h2.details:
        eff = float(h2.details["effective_n"])
        out.append({"name": "HERO-2 worth in items to HERO-1", "value": eff, "format": "n", "ok": True,
                    "reading": f"HERO-2's variance equals HERO-1's with this many current items (it has {h2.n_items})"})
    for r in res.results.values():
        if r.convergence is not None:
            c = r.convergence
            out.append({"name": f"{r.title}: EM convergence", "value": c.n_iter, "format": "it",
                        "ok": bool(c.converged),
                        "reading": ("converged" if c.converged else "NOT converged") + f" in {c.n_iter} iterations"})
        if r.status.startswith("boundary") or r.status == "unidentified":
            out.append({"name": f"{r.title}: status", "value": r.status, "format": "s", "ok": False,
                        "reading": "the estimate sits on the boundary or is not identified: no standard error"})
    mv = res.results.get("majority_vote")
    if mv is not None and "n_ties" in mv.details:
        out.append({"name": "Majority vote: tied items", "value": int(mv.details["n_ties"]), "format": "n", "ok": True,
                    "reading": f"ties scored by the rule '{mv.details.get('tie_rule')}'"})
    res_out: list[dict[str, Any]] = _jsonable(out)
    return res_out


def _dependence_checks(history: AnnotationSet | None, res: EstimateCollection) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if history is not None and history.has_gold:
        for key, v in error_correlation(history).items():
            y = key[-1]
            if v["mean_correlation"] is None or v["shuffled_q95"] is None:
                out.append({"name": f"Labelers' errors alike on gold-{y} history items", "value": None, "format": "r",
                            "ok": None, "reading": "no pair of labelers shares 10 gold items of this class: no check"})
                continue
            out.append({"name": f"Labelers' errors alike on gold-{y} history items (mean pairwise correlation)",
                        "value": v["mean_correlation"], "format": "r", "ok": v["ok"],
                        "reading": f"HERO assumes independent errors given the truth: near 0 (shuffled: "
                                   f"{v['shuffled_mean']:+.3f}, 95% below {v['shuffled_q95']:.3f}; "
                                   f"{v['n_items']} items). Well above it, the intervals are likely too narrow"})
    rec = res.recommended
    row = None if rec is None else next(
        (r for r in rec.table if r.get("method") == rec.method and r.get("history_weight") == rec.history_weight
         and r.get("past_error")), None)
    if rec is not None and row is not None:
        e = [float(x) for x in row["past_error"]]
        rms = math.sqrt(sum(x * x for x in e) / len(e))
        fired = "transport_sd" in rec.result.details
        out.append({"name": f"Past rounds: {rec.method}'s error on each of the history's {len(e)} rounds with its "
                            "gold left out of Stage A (root mean square)",
                    "value": rms, "format": "r", "ok": not fired,
                    "reading": ("beyond its noise: rounds differ in ways the other rounds' gold does not see, so the "
                                "recommended estimate is UNRELIABLE and its interval carries that transport error"
                                if fired else "within its noise (and the bias its interval allows): the history's "
                                "rounds transport to one another")})
    h1, hj = res.results.get("hero1"), res.results.get("hero_joint")
    if h1 is not None and hj is not None and math.isfinite(h1.standard_error):
        gap = hj.estimate - h1.estimate
        out.append({"name": "HERO joint − HERO-1", "value": gap, "format": "d4", "ok": abs(gap) <= h1.standard_error,
                    "reading": "the joint fit refits the labelers' rates with the current round; a gap larger than "
                               f"HERO-1's SE ({h1.standard_error:.4f}) suggests they changed since the history"})
    return out


def _ingest(rep: IngestReport | None) -> Any:
    return None if rep is None else rep.to_dict()


def _base(calibration: Calibration, title: str, level: float, ci_method: str, warns: Sequence[str],
          truth: float | None, sources: Mapping[str, str] | None) -> dict[str, Any]:
    if not 0 < level < 1:
        raise HeroEvalError(f"confidence_level must be in (0, 1), got {level!r}")
    if ci_method not in ("auto", "score", "wald", "logit"):
        raise HeroEvalError(f"ci_method must be 'auto', 'score', 'wald' or 'logit', got {ci_method!r}")
    return {
        "format": "heroeval.report",
        "title": title,
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "heroeval_version": __version__,
        "confidence_level": level,
        "ci_method": ci_method,
        "truth": truth,
        "sources": dict(sources or {}),
        "warnings": list(warns),
        "calibration": _calibration_summary(calibration),
        "labelers": _labelers(calibration, level),
    }


def _warn_text(w: warnings.WarningMessage) -> str:
    return f"{w.category.__name__}: {w.message}"


def collect_warnings(fn: Callable[[], T]) -> tuple[T, list[str]]:
    """Run ``fn()``, returning its value and the text of the heroeval warnings it raised.

    The warnings are passed on as well (re-issued), so a caller's own
    handling still sees them.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", HeroEvalWarning)
        out = fn()
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return out, [_warn_text(w) for w in caught if issubclass(w.category, HeroEvalWarning)]


def _estimate_recording(current: AnnotationSet, calibration: Calibration, history: AnnotationSet | None,
                        kwargs: Mapping[str, Any]) -> tuple[EstimateCollection, list[str]]:
    res, warns = collect_warnings(lambda: run_estimate(current, calibration, method="all", history=history, **kwargs))
    assert isinstance(res, EstimateCollection)
    return res, warns


def report_data(
    current: AnnotationSet,
    calibration: Calibration,
    estimates: EstimateCollection | None = None,
    *,
    history: AnnotationSet | None = None,
    title: str | None = None,
    warnings: Sequence[str] = (),
    truth: float | None = None,
    confidence_level: float = 0.95,
    ci_method: str = "auto",
    sources: Mapping[str, str] | None = None,
    **estimate_kwargs: Any,
) -> dict[str, Any]:
    """The numbers of a one-round report, as a JSON-ready dict (what the HTML page shows and embeds).

    Parameters
    ----------
    current : AnnotationSet
        The current round.
    calibration : Calibration
        Stage A's calibration (from :func:`heroeval.calibrate` or a file).
    estimates : EstimateCollection, optional
        The current round's estimates; computed with ``method="all"`` (and
        ``estimate_kwargs``) when omitted, recording heroeval's warnings.
    history : AnnotationSet, optional
        The history, for its ingest report (and ``hero_joint`` when estimating).
    title : str, optional
    warnings : sequence of str
        Warnings to show (added to those recorded while estimating).
    truth : float, optional
        The true rate when known (the bundled demo), drawn as a reference line.
    confidence_level : float
    ci_method : {"auto", "score", "logit", "wald"}
        The estimates' interval (labeler intervals are always logit).
    sources : mapping, optional
        Input file names by role, shown (escaped) in the header.
    """
    warns = list(warnings)
    if estimates is None:
        estimates, recorded = _estimate_recording(current, calibration, history, estimate_kwargs)
        warns += recorded
    elif estimate_kwargs:
        raise HeroEvalError(f"estimate options {sorted(estimate_kwargs)} go with estimates=None")
    d = _base(calibration, title or f"HERO evaluation report: {current.name}", confidence_level, ci_method, warns,
              truth, sources)
    block = _estimates_block(estimates, confidence_level, ci_method)
    d.update(
        kind="estimate",
        primary=block["order"][0] if block["order"] else None,
        rounds={"current": {"name": current.name, "n_items": current.n_items, "n_labels": current.n_annotations,
                            "n_labelers": current.n_labelers, **block,
                            "diagnostics": _diagnostics(estimates)
                            + _dependence_checks(history or calibration.history, estimates)}},
        pool=_pool(calibration, [("current", current)]),
        ingest={"current": _ingest(current.report), "history": _ingest(None if history is None else history.report)},
    )
    return d


def comparison_report_data(
    comparison: Any,
    round_a: AnnotationSet,
    round_b: AnnotationSet,
    calibration: Calibration,
    *,
    history: AnnotationSet | None = None,
    title: str | None = None,
    warnings: Sequence[str] = (),
    confidence_level: float = 0.95,
    ci_method: str = "auto",
    sources: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The numbers of a two-round report (``comparison`` from :func:`heroeval.compare` with several methods)."""

    if not isinstance(comparison, ComparisonCollection):
        raise HeroEvalError("the comparison report needs a ComparisonCollection (compare(..., method=[...]))")
    d = _base(calibration, title or f"HERO comparison report: {round_a.name} - {round_b.name}", confidence_level,
              ci_method, warnings, None, sources)
    rounds = {}
    for key, ds, res in (("a", round_a, comparison.a), ("b", round_b, comparison.b)):
        rounds[key] = {"name": ds.name, "n_items": ds.n_items, "n_labels": ds.n_annotations,
                       "n_labelers": ds.n_labelers, **_estimates_block(res, confidence_level, ci_method),
                       "diagnostics": _diagnostics(res)}
    order = [k for k in rounds["a"]["order"] if k in comparison.comparisons]
    diff = {}
    for k in order:
        c = comparison.comparisons[k]
        ci = c.confidence_interval(confidence_level)
        diff[k] = _jsonable({"key": k, "label": _label(k, c.a), "a": c.a.estimate, "b": c.b.estimate,
                             "estimate": c.estimate, "standard_error": c.standard_error, "ci_low": ci.low,
                             "ci_high": ci.high, "p_value": c.p_value, "confidence_level": confidence_level})
    d.update(
        kind="comparison",
        primary=order[0] if order else None,
        difference={"order": order, "estimates": diff, "skipped": dict(comparison.skipped)},
        rounds=rounds,
        pool=_pool(calibration, [("a", round_a), ("b", round_b)]),
        ingest={"a": _ingest(round_a.report), "b": _ingest(round_b.report),
                "history": _ingest(None if history is None else history.report)},
    )
    return d


# ---------------------------------------------------------------------------
# Figures (matplotlib SVG, embedded as data: images)
# ---------------------------------------------------------------------------


def _svg_img(fig: Any, alt: str, fig_id: str) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    b64 = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f'<img class="figure" id="{fig_id}" alt="{html.escape(alt)}" '
            f'src="data:image/svg+xml;base64,{b64}">')


def _mpl() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "heroeval", "font.size": 9})
    return plt


def _f(x: Any) -> float:
    return math.nan if x is None else float(x)


def _short(name: Any, n: int = 22) -> str:
    s = " ".join(str(name).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _forest(rows: Sequence[Mapping[str, Any]], *, xlabel: str, ref: float | None, ref_label: str,
            truth: float | None, fig_id: str, alt: str, diff: bool = False) -> str:
    plt = _mpl()
    n = max(len(rows), 1)
    fig, ax = plt.subplots(figsize=(7.2, 0.42 * n + 1.3), layout="constrained")
    ys = np.arange(len(rows))[::-1]
    for y, r in zip(ys, rows, strict=True):
        key = str(r["key"])
        est, lo, hi = _f(r["estimate"]), _f(r["ci_low"]), _f(r["ci_high"])
        colour = _COLOURS.get(key, "#444444")
        if math.isfinite(lo) and math.isfinite(hi):
            ax.plot([lo, hi], [y, y], color=colour, lw=2.2, solid_capstyle="butt")
        ax.plot([est], [y], marker="D" if key != "majority_vote" else "o", color=colour, ms=7,
                markeredgecolor="white" if key != "recommended" else "#000000")
    if ref is not None and math.isfinite(ref):
        ax.axvline(ref, color="#7f7f7f", ls="--", lw=1, label=ref_label)
    if truth is not None:
        ax.axvline(truth, color="#000000", ls=":", lw=1.4, label="true gold rate")
    if diff:
        ax.axvline(0.0, color="#000000", lw=0.8)
    ax.set_yticks(ys, [str(r["label"]) for r in rows])
    for t in ax.get_yticklabels():
        t.set_parse_math(False)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlabel(xlabel)
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False, fontsize=8)
    return _svg_img(fig, alt, fig_id)


def _labeler_map(labelers: Sequence[Mapping[str, Any]], fig_id: str) -> str:
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(6.4, 5.4), layout="constrained")
    shown = sorted(labelers, key=lambda r: -int(r["n_history_labels"]))[:_MAX_PLOTTED_LABELERS]
    sens = np.array([_f(r["sensitivity"]) for r in shown])
    spec = np.array([_f(r["specificity"]) for r in shown])
    vol = np.array([float(r["n_history_labels"]) for r in shown])
    gold = np.array([float(r["gold_overlap"]) for r in shown])
    size = 20 + (400 if len(shown) <= 15 else 160) * np.sqrt(vol / max(vol.max(initial=1.0), 1.0))
    for r, x, y in zip(shown, spec, sens, strict=True):
        slo, shi = (_f(v) for v in r["specificity_ci"])
        tlo, thi = (_f(v) for v in r["sensitivity_ci"])
        if math.isfinite(slo) and math.isfinite(shi):
            ax.plot([slo, shi], [y, y], color="#888888", lw=1, zorder=1)
        if math.isfinite(tlo) and math.isfinite(thi):
            ax.plot([x, x], [tlo, thi], color="#888888", lw=1, zorder=1)
    sc = ax.scatter(spec, sens, s=size, c=gold, cmap="viridis", edgecolors="#333333", linewidths=0.6, zorder=2,
                    alpha=0.9)
    for r, x, y in zip(shown, spec, sens, strict=True):
        ax.annotate(str(int(r["index"])), (x, y), xytext=(7, 5), textcoords="offset points", fontsize=7, zorder=3,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    lo = float(min(0.4, np.nanmin(np.r_[sens, spec], initial=1.0) - 0.05))
    ax.plot([lo, 1.0], [1.0, lo], color="#bbbbbb", ls="--", lw=0.8)
    ax.text(lo + 0.01, 1.0 - 0.02, "sensitivity + specificity = 1 (coin flip)", fontsize=7, color="#888888",
            rotation=0, va="top")
    ax.set_xlim(lo, 1.02)
    ax.set_ylim(lo, 1.02)
    ax.set_xlabel("specificity  P(label 0 | gold 0)")
    ax.set_ylabel("sensitivity  P(label 1 | gold 1)")
    ax.set_aspect("equal")
    cb = fig.colorbar(sc, ax=ax, shrink=0.8)
    cb.set_label("gold items the labeler labelled")
    ax.set_title("marker area: history labels; numbers: labeler table rows", fontsize=8)
    return _svg_img(fig, "Labeler map: each labeler's sensitivity against specificity with intervals", fig_id)


def _pool_plot(pool: Mapping[str, Any], fig_id: str) -> str:
    plt = _mpl()
    cols = list(pool["columns"])
    rows = sorted(pool["labelers"], key=lambda r: -max(float(r[f"{c}_share"]) for c in cols))[:_MAX_PLOTTED_LABELERS]
    rows = rows[::-1]
    fig, ax = plt.subplots(figsize=(6.4, 0.28 * len(rows) * max(1, len(cols) - 1) + 1.6), layout="constrained")
    h = 0.8 / len(cols)
    palette = ["#bbbbbb", "#1f77b4", "#ff7f0e"]
    y = np.arange(len(rows))
    for k, c in enumerate(cols):
        ax.barh(y + (len(cols) - 1 - k) * h - 0.4 + h / 2, [float(r[f"{c}_share"]) for r in rows], height=h,
                color=palette[k % len(palette)], label=f"{c}")
    ax.set_yticks(y, [(f"#{r['index']} " if r["index"] is not None else "new: ") + _short(r["id"]) for r in rows])
    for t in ax.get_yticklabels():
        t.set_parse_math(False)
    ax.set_xlabel("share of the round's labels")
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(cols), frameon=False)
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    return _svg_img(fig, "Labeler pool shift: each labeler's share of the labels in the history and the current round",
                    fig_id)


# ---------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------

_CSS = """
:root { --fg:#1d1d1f; --muted:#5f6368; --line:#d9dce1; --warn:#8a4b00; --warnbg:#fff4e5; --ok:#1e7b34; --bad:#b3261e; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; color: var(--fg);
       margin: 0; background: #f6f7f9; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 28px 48px; background: #fff; }
h1 { font-size: 1.6em; margin: 0 0 4px; }
h2 { font-size: 1.25em; margin: 36px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05em; margin: 20px 0 6px; }
p.meta, .muted { color: var(--muted); font-size: 0.9em; }
nav a { margin-right: 14px; font-size: 0.9em; }
.headline { display: flex; flex-wrap: wrap; gap: 16px; margin: 18px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; min-width: 220px; flex: 1 1 220px; }
.card .big { font-size: 2em; font-weight: 600; font-variant-numeric: tabular-nums; }
.card.primary { border-color: #1f77b4; background: #f3f8fd; }
.warnings { background: var(--warnbg); border-left: 4px solid #e8a33d; padding: 8px 14px; margin: 12px 0; }
.warnings li { color: var(--warn); white-space: pre-wrap; overflow-wrap: anywhere; }
.warn { color: var(--warn); background: var(--warnbg); padding: 2px 6px; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 0.92em; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); vertical-align: top; text-align: left; }
th { background: #f1f3f5; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.name { max-width: 280px; overflow-wrap: anywhere; }
tr.primary td { font-weight: 600; background: #f3f8fd; }
.ok { color: var(--ok); } .bad { color: var(--bad); font-weight: 600; }
figure { margin: 8px 0 16px; }
figure img.figure { display: block; max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 0.88em; max-width: 820px; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(440px, 1fr)); gap: 18px; align-items: start; }
.scroll { overflow-x: auto; }
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _num(x: Any, fmt: str = ".4f") -> str:
    if x is None:
        return "–"
    if isinstance(x, str):
        return _e(x)
    v = float(x)
    if not math.isfinite(v):
        return "∞" if v > 0 else "–"
    return format(round(v), "d") if fmt == "d" else format(v, fmt)


def _td(x: Any, field: str | None = None, fmt: str = ".4f") -> str:
    attr = f' data-field="{_e(field)}"' if field else ""
    return f'<td class="num"{attr}>{_num(x, fmt)}</td>'


def _table(head: Sequence[tuple[str, bool]], rows: Sequence[str], cls: str = "") -> str:
    h = "".join(f'<th{" class=num" if num else ""}>{_e(t)}</th>' for t, num in head)
    c = f' class="{cls}"' if cls else ""
    return f'<div class="scroll"><table{c}><thead><tr>{h}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def page_start(d: Mapping[str, Any], meta_extra: str) -> str:
    """A report page up to its header's meta line: the strict content-security policy, the styles, the title.

    ``meta_extra`` (already escaped) follows the version and date in the meta line.
    """
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
        "style-src 'unsafe-inline'\">"
        f"<title>{_e(d['title'])}</title><style>{_CSS}</style></head><body><main>"
        f"<header><h1>{_e(d['title'])}</h1><p class=\"meta\">heroeval {_e(d['heroeval_version'])}, "
        f"{_e(d['generated'])}{meta_extra}</p>"
    )


def _json_script(data: Any) -> str:
    text = json.dumps(_jsonable(data), ensure_ascii=True, allow_nan=False, sort_keys=False)
    # nothing in the block can close the script element or open a comment
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="hero-data">{text}</script>'


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
        cells = [f'<td class="name">{_e(r["label"])}</td>', _td(r["estimate"], "estimate"),
                 _td(r["standard_error"], "standard_error"), _td(r["ci_low"], "ci_low"), _td(r["ci_high"], "ci_high")]
        if truth is not None:
            cells.append(_td(float(r["estimate"]) - truth if r["estimate"] is not None else None, "error", "+.4f"))
        notes = list(r["notes"])
        if k == "majority_vote" and not any("majority-label rate" in n for n in notes):
            notes.insert(0, "its interval is for the majority-label rate, not the gold rate")
        st = str(r["status"])
        st_cls = "bad" if st.startswith("boundary") or st == "unidentified" else ""
        cells += [_td(r["n_items"], "n_items", "d"), _td(r["n_annotations"], "n_annotations", "d"),
                  _td(r["n_labelers"], "n_labelers", "d"), f'<td class="{st_cls}">{_e(st)}</td>',
                  f'<td class="name">{"<br>".join(_e(n) for n in notes)}</td>']
        rows.append(f'<tr{cls} data-round="{_e(round_key)}" data-method="{_e(k)}">{"".join(cells)}</tr>')
    for m, why in block["skipped"].items():
        rows.append(f'<tr class="skipped"><td class="name">{_e(METHOD_TITLES.get(m, m))}</td>'
                    f'<td colspan="{len(head) - 1}" class="muted">not computed: {_e(why)}</td></tr>')
    return _table(head, rows, "estimates")


def _gold_html(g: Mapping[str, Any], round_key: str, level: float) -> str:
    """The section on the round's own expert labels (see :func:`_gold_block`)."""
    head = [("estimate with the round's gold", False), ("estimate", True), ("SE", True),
            (f"{100 * level:g}% CI low", True), (f"{100 * level:g}% CI high", True), ("interval", False),
            ("lambda", True)]
    rows = [f'<tr data-round="{_e(round_key)}" data-method="{_e(r["method"])}"><td class="name">{_e(r["label"])}</td>'
            f'{_td(r["estimate"], "estimate")}{_td(r["standard_error"], "standard_error")}'
            f'{_td(r["ci_low"], "ci_low")}{_td(r["ci_high"], "ci_high")}<td>{_e(r["interval"])}</td>'
            f'{_td(r["lambda"], "lambda", ".2f")}</tr>' for r in g["estimates"]]
    out = (f"<p>{_e(g['text'])}. The estimates below use them: HERO's per-item posteriors (or the majority vote) "
           "predict each item's gold label and the gold items correct the prediction's average error "
           "(prediction-powered inference, PPI++; lambda is the weight the predictor earned). They are unbiased "
           "for this round's rate whatever the rate shift, pool shift or labelers' dependence, because the gold "
           "items are a random sample of the round.</p>" + _table(head, rows, "gold-estimates"))
    if g["silver_errors"]:
        ref = next((r["label"] for r in g["estimates"] if r["method"] == g["reference"]), g["reference"])
        head2 = [("silver-only estimate", False), ("estimate", True), (f"error vs {ref}", True), ("SE", True),
                 ("off at 5 %", False)]
        rows2 = [f'<tr data-round="{_e(round_key)}" data-method="{_e(r["method"])}"><td class="name">'
                 f'{_e(r["label"])}</td>{_td(r["estimate"], "estimate")}{_td(r["error"], "error", "+.4f")}'
                 f'{_td(r["error_se"], "error_se")}<td class="{"bad" if r["significant"] else ""}">'
                 f'{"yes" if r["significant"] else "no"}</td></tr>' for r in g["silver_errors"]]
        out += ("<p>The same gold measures each silver-only estimate's error on this very round (its estimate minus "
                f"{_e(ref)}; the SE is the reference's, which dominates). No mock round of the history can do "
                "that.</p>" + _table(head2, rows2, "gold-errors"))
    return out


def _forest_rows(block: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [block["estimates"][k] for k in block["order"]]


def _mv(block: Mapping[str, Any]) -> float | None:
    mv = block["estimates"].get("majority_vote")
    return None if mv is None else _f(mv["estimate"])


def _headline_cards(d: Mapping[str, Any]) -> str:
    level = 100 * float(d["confidence_level"])
    cards = []
    if d["kind"] == "comparison":
        diff = d["difference"]
        for k in diff["order"][:1] + (["majority_vote"] if "majority_vote" in diff["estimates"] else []):
            r = diff["estimates"][k]
            cls = "card primary" if k == d["primary"] else "card"
            cards.append(
                f'<div class="{cls}" data-method="{_e(k)}"><div class="muted">{_e(r["label"])}: A − B</div>'
                f'<div class="big" data-field="estimate">{_num(r["estimate"], "+.4f")}</div>'
                f'<div>{level:g}% CI [{_num(r["ci_low"], "+.4f")}, {_num(r["ci_high"], "+.4f")}], '
                f'p = {_num(r["p_value"])}</div></div>')
        return f'<div class="headline">{"".join(cards)}</div>'
    block = d["rounds"]["current"]
    keys = block["order"][:1] + [k for k in ("majority_vote",) if k in block["estimates"] and k != block["order"][0]]
    for k in keys:
        r = block["estimates"][k]
        cls = "card primary" if k == d["primary"] else "card"
        sub = "naive baseline: " if k == "majority_vote" else ("primary estimate: " if k == d["primary"] else "")
        cards.append(
            f'<div class="{cls}" data-method="{_e(k)}"><div class="muted">{_e(sub)}{_e(r["label"])}</div>'
            f'<div class="big" data-field="estimate">{_num(r["estimate"])}</div>'
            f'<div>{level:g}% CI [{_num(r["ci_low"])}, {_num(r["ci_high"])}], SE {_num(r["standard_error"])}</div>'
            + (f'<div data-field="bound">the rate is {_e(r["ci_text"])}</div>'
               if r.get("ci_alternative", "two-sided") != "two-sided" else "")
            + ('<div class="warn" data-field="status"><b>UNRELIABLE</b>: do not ship on this interval '
               '(see why)</div>' if k == "recommended" and block.get("recommendation")
               and block["recommendation"].get("status") == "unreliable" else "")
            + (f'<div class="muted" data-field="reason">why: {_e(block["recommendation"]["reason"])}</div>'
               if k == "recommended" and block.get("recommendation") else "")
            + '</div>')
    if d.get("truth") is not None:
        cards.append(f'<div class="card"><div class="muted">true gold rate (known for the demo only)</div>'
                     f'<div class="big">{_num(d["truth"])}</div></div>')
    return f'<div class="headline">{"".join(cards)}</div>'


def _warnings_html(d: Mapping[str, Any]) -> str:
    w = list(d["warnings"])
    cal = d["calibration"]
    if not cal["convergence"]["converged"]:
        w.append(f"Stage A EM did not converge in {cal['convergence']['n_iter']} iterations")
    if not w:
        return '<p class="ok" id="no-warnings">No warnings.</p>'
    return '<div class="warnings"><ul id="warning-list">' + "".join(f"<li>{_e(x)}</li>" for x in w) + "</ul></div>"


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
            f'{_td(r["index"], "index", "d")}<td class="name labeler-name">{_e(r["id"])}{bound}</td>'
            f'{_td(r["sensitivity"], "sensitivity", ".3f")}'
            f'<td class="num">[{_num(r["sensitivity_ci"][0], ".3f")}, {_num(r["sensitivity_ci"][1], ".3f")}]</td>'
            f'{_td(r["specificity"], "specificity", ".3f")}'
            f'<td class="num">[{_num(r["specificity_ci"][0], ".3f")}, {_num(r["specificity_ci"][1], ".3f")}]</td>'
            f'{_td(r["n_history_labels"], "n_history_labels", "d")}'
            + "".join(_td(p.get(f"{c}_n", 0), f"{c}_n", "d") for c in cur_cols)
            + f'{_td(r["gold_overlap"], "gold_overlap", "d")}'
            f'<td class="num">{int(r["gold_positive"])}/{int(r["gold_negative"])}</td></tr>')
    more = len(d["labelers"]) - _MAX_TABLE_LABELERS
    extra = f'<p class="muted">{more} more labelers are in the embedded JSON.</p>' if more > 0 else ""
    return _table(head, rows, "labelers") + extra


def _pool_table(d: Mapping[str, Any]) -> str:
    cols = d["pool"]["columns"]
    head = [("#", True), ("labeler", False), *((f"{c} share", True) for c in cols)]
    rows = []
    for r in sorted(d["pool"]["labelers"], key=lambda r: -float(r["history_share"]))[:_MAX_TABLE_LABELERS]:
        idx = _td(r["index"], "index", "d") if r["index"] is not None else '<td class="num">new</td>'
        rows.append(f'<tr>{idx}<td class="name">{_e(r["id"])}</td>'
                    + "".join(_td(r[f"{c}_share"], f"{c}_share", ".3f") for c in cols) + "</tr>")
    return _table(head, rows, "pool")


def _diagnostics_html(d: Mapping[str, Any]) -> str:
    cal = d["calibration"]
    c = cal["convergence"]
    parts = [
        "<h3>Stage A (the history)</h3>",
        f'<p>{cal["n_labelers"]} labelers, {cal["n_history_items"]} history items of which {cal["n_gold_items"]} '
        f'have gold, {cal["n_history_labels"]} labels. EM '
        + (f'<span class="ok">converged</span> in {c["n_iter"]} iterations'
           if c["converged"] else f'<span class="bad">did NOT converge</span> in {c["n_iter"]} iterations')
        + f' (log-likelihood {_num(c["loglik"], ".2f")}, last parameter change {_num(c["max_change"], ".2g")}).</p>',
    ]
    if cal["labelers_at_bound"]:
        names = ", ".join(_e(x) for x in cal["labelers_at_bound"][:20])
        parts.append(f'<p class="bad">Fitted as never erring on one side (sensitivity or specificity at 0 or 1): '
                     f'{names}{" ..." if len(cal["labelers_at_bound"]) > 20 else ""}. More gold on them is the '
                     'remedy; their intervals are points.</p>')
    if not cal["has_parameter_covariance"]:
        parts.append('<p class="bad">The calibration has no parameter covariance: no standard errors.</p>')
    rows = [f'<tr><td class="name">{_e(r["round"])}</td>{_td(r["prevalence"], "prevalence")}'
            f'{_td(r["n_items"], "n_items", "d")}{_td(r["n_gold"], "n_gold", "d")}</tr>' for r in cal["rounds"]]
    parts.append(_table([("history round", False), ("gold rate (EM)", True), ("items", True), ("gold", True)], rows,
                        "rounds"))
    for key, block in d["rounds"].items():
        if not block["diagnostics"]:
            continue
        parts.append(f"<h3>Checks on {_e(block['name'])}</h3>")
        rows = []
        for x in block["diagnostics"]:
            fmt = {"p": ".3g", "r": ".3f", "n": ".0f", "it": "d", "d4": "+.4f"}.get(x["format"])
            val = _e(x["value"]) if fmt is None else _num(x["value"], fmt)
            mark = ('<span class="muted">n/a</span>' if x["ok"] is None
                    else '<span class="ok">ok</span>' if x["ok"] else '<span class="bad">check</span>')
            rows.append(f'<tr data-round="{_e(key)}"><td class="name">{_e(x["name"])}</td>'
                        f'<td class="num">{val}</td><td>{mark}</td><td class="name">{_e(x["reading"])}</td></tr>')
        parts.append(_table([("check", False), ("value", True), ("", False), ("what it means", False)], rows))
    return "".join(parts)


def _ingest_html(d: Mapping[str, Any]) -> str:
    parts = []
    for key, rep in d["ingest"].items():
        if rep is None:
            continue
        rows = []
        for t in rep["tables"]:
            why = [f'dropped {int(n)}: {_e(k)}' for k, n in t["dropped"].items()]
            why += [f'{int(n)}: {_e(k)}' for k, n in t["notes"].items()]
            src = str(t["source"])
            src = src if src.startswith("<") else Path(src).name
            rows.append(f'<tr><td>{_e(t["table"])}</td><td class="name">{_e(src)}</td>'
                        f'{_td(t["rows_read"], "rows_read", "d")}{_td(t["rows_used"], "rows_used", "d")}'
                        f'<td class="name">{"<br>".join(why) or "–"}</td></tr>')
        parts.append(f"<h3>{_e(key)}</h3>" + _table([("table", False), ("source", False), ("rows read", True),
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
        rows.append(f'<tr{cls} data-round="difference" data-method="{_e(k)}"><td class="name">{_e(r["label"])}</td>'
                    f'{_td(r["a"], "a")}{_td(r["b"], "b")}{_td(r["estimate"], "estimate", "+.4f")}'
                    f'{_td(r["standard_error"], "standard_error")}{_td(r["ci_low"], "ci_low", "+.4f")}'
                    f'{_td(r["ci_high"], "ci_high", "+.4f")}{_td(r["p_value"], "p_value")}</tr>')
    for m, why in d["difference"]["skipped"].items():
        rows.append(f'<tr class="skipped"><td class="name">{_e(METHOD_TITLES.get(m, m))}</td>'
                    f'<td colspan="7" class="muted">not computed: {_e(why)}</td></tr>')
    return _table(head, rows, "difference")


def _truncated(n: int, which: str) -> str:
    if n <= _MAX_PLOTTED_LABELERS:
        return ""
    return f" The figure draws the {_MAX_PLOTTED_LABELERS} of {n} labelers {which}; the table lists more."


def render_html(d: Mapping[str, Any]) -> str:
    """The HTML page of a report dict (from :func:`report_data` or :func:`comparison_report_data`)."""
    level = float(d["confidence_level"])
    ci_method = str(d["ci_method"])
    sources = "".join(f"<li>{_e(k)}: <code>{_e(Path(v).name)}</code></li>" for k, v in d["sources"].items())
    sections: list[tuple[str, str, str]] = []
    if d["kind"] == "comparison":
        diff_rows = [{**d["difference"]["estimates"][k]} for k in d["difference"]["order"]]
        fig = _forest(diff_rows, xlabel="difference of gold rates, A − B", ref=None, ref_label="", truth=None,
                      fig_id="fig-forest-difference", alt="Forest plot of the difference A - B by method", diff=True)
        sections.append(("difference", "Difference A − B",
                         f"<figure>{fig}<figcaption>Each method's difference of the two rounds' rates with its "
                         f"{100 * level:g}% Wald interval. Both rounds share one calibration; the interval counts "
                         "that shared history once. Majority vote's difference is of majority-label rates."
                         f"</figcaption></figure>{_diff_table(d)}"))
    for key, block in d["rounds"].items():
        name = block["name"]
        heading = "Estimates" if d["kind"] == "estimate" else f"Round {key.upper()}: {name}"
        fig = _forest(_forest_rows(block), xlabel="estimated gold rate", ref=_mv(block),
                      ref_label="majority vote (naive)", truth=d.get("truth"), fig_id=f"fig-forest-{key}",
                      alt=f"Forest plot of every method's estimate for {name}")
        intro = (f'<p>{_e(name)}: {block["n_items"]} items, {block["n_labels"]} labels from {block["n_labelers"]} '
                 f'labelers. Intervals: {100 * level:g}% ({_e(ci_method)}).</p>')
        sections.append((f"estimates-{key}", heading,
                         intro + f"<figure>{fig}<figcaption>Each method's estimate (diamond) and interval (bar); "
                         "the dashed line is the naive majority vote. HERO corrects each labeler's known "
                         "errors; majority vote does not.</figcaption></figure>"
                         + _estimates_table(block, key, level, ci_method, d["primary"], d.get("truth"))))
        if block.get("current_gold"):
            sections.append((f"gold-{key}", "Expert labels in this round" if d["kind"] == "estimate"
                             else f"Round {key.upper()}: expert labels", _gold_html(block["current_gold"], key, level)))
    lmap = _labeler_map(d["labelers"], "fig-labelers")
    sections.append(("labelers", "Labelers: who can be trusted",
                     f"<figure>{lmap}<figcaption>Each labeler's sensitivity against specificity as Stage A "
                     "estimated them from the history, with "
                     f"{100 * level:g}% intervals (logit). Far from the dashed line is informative; the colour counts "
                     "the gold items the labeler labelled (the anchor of its estimate); the area its history labels. "
                     "Numbers are the rows below." + _truncated(len(d["labelers"]), "with the most history labels")
                     + "</figcaption></figure>" + _labeler_table(d)))
    pfig = _pool_plot(d["pool"], "fig-pool")
    tv = ", ".join(f"{_e(k)}: {_num(v, '.3f')}" for k, v in d["pool"]["total_variation"].items())
    new = {k: v for k, v in d["pool"]["new_labelers"].items() if v}
    new_txt = "".join(f"<p class='bad'>Labelers in {_e(k)} that the history does not know: "
                      f"{_e(', '.join(v[:20]))}{' ...' if len(v) > 20 else ''}.</p>" for k, v in new.items())
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
    nav = "".join(f'<a href="#{sid}">{_e(h)}</a>' for sid, h, _ in sections)
    body = "".join(f'<section id="{sid}"><h2>{_e(h)}</h2>{content}</section>' for sid, h, content in sections)
    return (
        page_start(d, "") + (f"<ul class=\"meta\">{sources}</ul>" if sources else "")
        + f"<nav>{nav}</nav></header>"
        + _headline_cards(d)
        + f'<section id="warnings"><h2>Warnings</h2>{_warnings_html(d)}</section>'
        + body + "</main>" + _json_script(d) + "</body></html>\n"
    )


def build_report(current: AnnotationSet, calibration: Calibration, estimates: EstimateCollection | None = None,
                 **kwargs: Any) -> str:
    """The HTML page of a one-round report; arguments as :func:`report_data`."""
    return render_html(report_data(current, calibration, estimates, **kwargs))


def build_comparison_report(comparison: Any, round_a: AnnotationSet, round_b: AnnotationSet,
                            calibration: Calibration, **kwargs: Any) -> str:
    """The HTML page of a two-round report; arguments as :func:`comparison_report_data`."""
    return render_html(comparison_report_data(comparison, round_a, round_b, calibration, **kwargs))


def write_report(path: str | Path, page: str) -> Path:
    """Write a page built by :func:`build_report` (UTF-8); returns the path."""
    p = Path(path)
    try:
        p.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise HeroEvalError(f"cannot write the report to {p}: {exc.strerror or exc}") from None
    return p
