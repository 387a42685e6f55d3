"""The numbers of an HTML report, as one JSON-ready dict: estimates (rendered from the table model), labelers,
pool shift, diagnostics, the round's gold, warnings. :mod:`heroeval.report.html` renders it."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, TypedDict, TypeVar, Unpack

import numpy as np

from heroeval.checks.dependence import error_correlation
from heroeval.checks.model_checks import DEPENDENCE_ALPHA
from heroeval.core.options import option_names, options_of
from heroeval.errors import HeroEvalError, HeroEvalWarning
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.results import EstimateResult, jsonable, rate_interval
from heroeval.estimators.table import EstimateRow
from heroeval.inference.comparison import ComparisonCollection
from heroeval.ingest.annotations import AnnotationSet, IngestReport
from heroeval.stage_a.calibration import Calibration
from heroeval.version import __version__
from heroeval.workflows.api import estimate as run_estimate
from heroeval.workflows.options import ESTIMATE_CALL_DEFAULTS, EstimateCallOptions

__all__ = [
    "ORDER", "PAGE_DEFAULTS", "REPORT_DEFAULTS", "PageOptions", "ReportOptions", "T", "collect_warnings",
    "comparison_report_data", "label_of", "report_data", "saved_dependence",
]


T = TypeVar("T")


# display order: the HERO family first, then the baselines (majority vote right after HERO-1)
ORDER = ("hero1", "majority_vote", "hero2", "hero_joint", "gold_proportion", "dawid_skene")


def _recommended(res: EstimateCollection) -> EstimateResult | None:
    """The collection's recommended estimate, if it offers one (``recommend=True``, or an ``auto`` entry)."""
    if res.recommended is not None:
        return res.recommended.result
    for r in res.results.values():
        if r.method == "auto":
            return r
    return None


def _ordered(res: EstimateCollection, level: float = 0.95,
             ci_method: str = "auto") -> list[tuple[str, EstimateResult, EstimateRow]]:
    """(key, result, row of the table model) triples: the recommended estimate first, then HERO-1, majority
    vote, the rest (the report's order; the numbers, interval method and status are the table model's).

    Every method keeps its own row even when the recommendation is that method's result (the same object, as
    ``estimate(recommend=True)`` reuses the estimates it made); an ``auto`` entry is shown as the first row.
    """
    tab = res.table(level, ci_method)
    out: list[tuple[str, EstimateResult, EstimateRow]] = []
    if res.recommended is not None:
        out.append(("recommended", res.recommended.result, tab.row("recommended")))
    keys = [m for m in ORDER if m in res.results] + [m for m in res.results if m not in ORDER]
    for m in keys:
        r = res.results[m]
        if r.method == "auto":
            if res.recommended is None:
                out.insert(0, ("recommended", r, r.row(level, ci_method, key="recommended",
                                                       title=f"recommended ({r.title})")))
            continue
        out.append((m, r, tab.row(m)))
    return out


def label_of(key: str, r: EstimateResult) -> str:
    if key == "recommended":
        return f"recommended ({r.title})"
    return r.title


def _estimate_dict(r: EstimateResult, row: EstimateRow, level: float) -> dict[str, Any]:
    """The result's numbers for the page's data, with the table model's label, interval and status."""
    d = r.to_dict(level)
    d.update(key=row.key, label=row.title, estimate=row.estimate, standard_error=row.standard_error,
             ci_low=row.ci_low, ci_high=row.ci_high, ci_method=row.ci_method, ci_alternative=row.ci_alternative,
             ci_text=row.ci_text, status=row.status)
    out: dict[str, Any] = jsonable(d)
    return out


_GOLD_METHODS = ("hero1_ppi", "gp_ppi", "prior_ppi", "mv_ppi", "gold_only")


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
        if r.method in _GOLD_METHODS or m in ("recommended", "auto") or r.method == "auto" or not math.isfinite(r.estimate):
            continue
        b = r.estimate - ref.estimate
        se = ref.standard_error
        checks.append({"method": m, "label": r.title, "estimate": r.estimate, "error": b, "error_se": se,
                       "significant": bool(math.isfinite(se) and se > 0 and abs(b) > _Z95 * se)})
    out: dict[str, Any] = jsonable({"n_gold": first.details.get("n_gold"), "n_items": first.n_items,
                      "design": first.details.get("design"), "text": first.notes[0] if first.notes else "",
                      "gold_mean": first.details.get("gold_mean"), "reference": ref.method,
                      "estimates": rows, "silver_errors": checks})
    return out


def _estimates_block(res: EstimateCollection, level: float, ci_method: str) -> dict[str, Any]:
    rows = _ordered(res, level, ci_method)
    return {
        "order": [k for k, _, _ in rows],
        "estimates": {k: _estimate_dict(r, row, level) for k, r, row in rows},
        "skipped": dict(res.skipped),
        "current_gold": _gold_block(res, level),
        "recommendation": None if res.recommended is None else jsonable(res.recommended.to_dict(level)),
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
    res: list[dict[str, Any]] = jsonable(out)
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
    out: dict[str, Any] = jsonable({
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
    res_out: list[dict[str, Any]] = jsonable(out)
    return res_out


def saved_dependence(calibration: Calibration) -> dict[str, Any] | None:
    """The dependence test saved with the calibration's model checks, as a diagnostics row (None without it)."""
    dep = None if calibration.checks is None else calibration.checks.dependence
    if dep is None or not math.isfinite(dep.p_value):
        return None
    ok = dep.p_value >= DEPENDENCE_ALPHA
    return {"name": "Labelers err independently given gold (dependence test on the history's gold, saved with "
                    "the calibration; p-value)", "value": dep.p_value, "format": "p", "ok": ok,
            "reading": (f"no excess agreement at {DEPENDENCE_ALPHA:g}" if ok else
                        f"labelers agree beyond independence given gold (mean error correlation "
                        f"{dep.mean_correlation:+.3f}, {dep.n_pairs_significant} of {dep.n_pairs} pairs): HERO's "
                        "likelihood methods assume independence, so their intervals are likely too narrow")}


def _dependence_checks(history: AnnotationSet | None, res: EstimateCollection,
                       calibration: Calibration | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    saved = None if calibration is None else saved_dependence(calibration)
    if saved is not None:
        out.append(saved)
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
        by_rounds = "rounds_judged" in rec.result.details
        reading = ("the recommended estimate was chosen by these errors (the smallest estimated error on a new "
                   "round among the candidates), and its interval is a prediction interval over rounds that "
                   f"carries their excess error ({math.sqrt(float(rec.result.details['round_ms'])):.3g})"
                   if by_rounds else
                   "beyond its noise: rounds differ in ways the other rounds' gold does not see, so the "
                   "recommended estimate is UNRELIABLE and its interval carries that transport error"
                   if fired else "within its noise (and the bias its interval allows): the history's "
                   "rounds transport to one another")
        out.append({"name": f"Past rounds: {rec.method}'s error on each of the history's {len(e)} rounds with its "
                            "gold left out of Stage A (root mean square)",
                    "value": rms, "format": "r", "ok": not fired, "reading": reading})
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
    # the recommended estimate first, as hero report and hero estimate show it (where it cannot be made, the
    # collection says why)
    kw = {"recommend": True, **kwargs}
    res, warns = collect_warnings(lambda: run_estimate(current, calibration, method="all", history=history, **kw))
    assert isinstance(res, EstimateCollection)
    return res, warns


class PageOptions(TypedDict, total=False):
    """A report page's keyword options (documented at :func:`report_data`); defaults in :data:`PAGE_DEFAULTS`."""

    title: str | None
    warnings: Sequence[str]
    confidence_level: float
    ci_method: str
    sources: Mapping[str, str] | None


PAGE_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "title": None, "warnings": (), "confidence_level": 0.95, "ci_method": "auto", "sources": None,
})
""":class:`PageOptions`' defaults."""


class ReportOptions(PageOptions, EstimateCallOptions, total=False):
    """:func:`report_data`'s keyword options: the page's, the reference ``truth``, and
    :func:`heroeval.estimate`'s (``recommend`` and :class:`~heroeval.workflows.options.EstimateCallOptions`),
    which apply when the report computes the estimates."""

    truth: float | None
    recommend: bool


_ESTIMATE_OPTIONS = frozenset((*option_names(EstimateCallOptions), "recommend"))
REPORT_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    **PAGE_DEFAULTS, **ESTIMATE_CALL_DEFAULTS, "truth": None, "recommend": True,
})
""":class:`ReportOptions`' defaults (the estimate options' are :func:`heroeval.estimate`'s, but ``recommend``)."""


def report_data(
    current: AnnotationSet,
    calibration: Calibration,
    estimates: EstimateCollection | None = None,
    *,
    history: AnnotationSet | None = None,
    **options: Unpack[ReportOptions],
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
    recommend, ridge, tie, rng, new_labelers, exclude_new_labelers, on_shift, drift_check
        :func:`heroeval.estimate`'s options (``recommend`` defaults to True here), when ``estimates`` is omitted.
    """
    o = options_of("report_data", options, ReportOptions, REPORT_DEFAULTS)
    title, confidence_level, ci_method, truth = o["title"], o["confidence_level"], o["ci_method"], o["truth"]
    estimate_kwargs = {k: v for k, v in options.items() if k in _ESTIMATE_OPTIONS}
    warns = list(o["warnings"])
    if estimates is None:
        estimates, recorded = _estimate_recording(current, calibration, history, estimate_kwargs)
        warns += recorded
    elif estimate_kwargs:
        raise HeroEvalError(f"estimate options {sorted(estimate_kwargs)} go with estimates=None")
    saved = saved_dependence(calibration)
    if saved is not None and not saved["ok"]:  # a failed saved check is a warning, not only a red row
        warns.append(f"Model checks saved with the calibration: {saved['reading']} (dependence test p = "
                     f"{saved['value']:.3g})")
    d = _base(calibration, title or f"HERO evaluation report: {current.name}", confidence_level, ci_method, warns,
              truth, o["sources"])
    block = _estimates_block(estimates, confidence_level, ci_method)
    d.update(
        kind="estimate",
        primary=block["order"][0] if block["order"] else None,
        rounds={"current": {"name": current.name, "n_items": current.n_items, "n_labels": current.n_annotations,
                            "n_labelers": current.n_labelers, **block,
                            "diagnostics": _diagnostics(estimates)
                            + _dependence_checks(history or calibration.history, estimates, calibration)}},
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
    **options: Unpack[PageOptions],
) -> dict[str, Any]:
    """The numbers of a two-round report (``comparison`` from :func:`heroeval.compare` with several methods);
    the page's options as :func:`report_data` takes them."""
    o = options_of("comparison_report_data", options, PageOptions, PAGE_DEFAULTS)
    title, confidence_level, ci_method = o["title"], o["confidence_level"], o["ci_method"]

    if not isinstance(comparison, ComparisonCollection):
        raise HeroEvalError("the comparison report needs a ComparisonCollection (compare(..., method=[...]))")
    d = _base(calibration, title or f"HERO comparison report: {round_a.name} - {round_b.name}", confidence_level,
              ci_method, o["warnings"], None, o["sources"])
    rec = comparison.recommended
    per_round = (comparison.a, comparison.b) if rec is None else (  # each round's own recommended estimate
        replace(comparison.a, recommended=rec.a), replace(comparison.b, recommended=rec.b))
    rounds = {}
    for key, ds, res in (("a", round_a, per_round[0]), ("b", round_b, per_round[1])):
        rounds[key] = {"name": ds.name, "n_items": ds.n_items, "n_labels": ds.n_annotations,
                       "n_labelers": ds.n_labelers, **_estimates_block(res, confidence_level, ci_method),
                       "diagnostics": _diagnostics(res)}
    order = [k for k in rounds["a"]["order"] if k in comparison.comparisons]
    pairs = [(k, comparison.comparisons[k], label_of(k, comparison.comparisons[k].a)) for k in order]
    if rec is not None:  # the recommended difference first, as hero compare prints it
        order = ["recommended", *order]
        pairs.insert(0, ("recommended", rec.comparison, f"recommended ({label_of(rec.method, rec.comparison.a)})"))
    diff = {}
    for k, c, label in pairs:
        ci = c.confidence_interval(confidence_level)
        diff[k] = jsonable({"key": k, "label": label, "a": c.a.estimate, "b": c.b.estimate,
                             "estimate": c.estimate, "standard_error": c.standard_error, "ci_low": ci.low,
                             "ci_high": ci.high, "p_value": c.p_value, "confidence_level": confidence_level,
                             "ci_method": ci.method})
    if rec is not None:
        diff["recommended"].update(jsonable({"method": rec.method, "status": rec.status, "reason": rec.reason}))
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
