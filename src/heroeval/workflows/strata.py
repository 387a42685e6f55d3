"""Rates per stratum of one current round (harm category, topic, query), with family-wise intervals.

:func:`heroeval.estimate` with ``by=`` (or :func:`heroeval.workflows.api.estimate_by`) splits the current
round's items into strata and estimates each stratum as a round of its own: by the same call,
:func:`heroeval.estimate`, on the stratum's items, with the same calibration, history and options. A
stratum's estimate, its status and the recommended method's reasons are therefore those ``hero estimate``
gives on that stratum alone.

Strata. ``by`` says which stratum each item is in:

* a mapping ``item id -> stratum`` or a pandas Series indexed by item id (ids compared as text, as the
  reader stores them); every item of the round must have one, and a Series that gives an item two
  strata is an error naming the item;
* a column name (``str``): the round's own per-item round column. Read the current round with
  ``read_annotations(path, round_col=by)`` (CLI: ``hero estimate --by COLUMN``), so that each item's
  value in that column is its round; an item with two values is an error naming it, as for any round
  column. An :class:`~heroeval.AnnotationSet` does not keep the name of the column its rounds came from,
  so the name only labels the output: it cannot be checked against the column that was read. A round
  read without a round column (its one round is called ``"all"``) is an error.

A stratum with fewer than :data:`MIN_ITEMS` items, or whose estimate fails (a
:class:`~heroeval.errors.HeroEvalError`, for example no calibrated labeler in it), is skipped and listed in
``StrataEstimate.skipped`` with the reason: it is counted, never dropped silently.

Family-wise intervals. The ``K`` intervals of the estimated strata cover their ``K`` rates simultaneously
at ``confidence_level`` ``L``: each stratum's interval is its own interval, computed by
:meth:`EstimateResult.confidence_interval` exactly as for a whole round (score-test inversion near 0 or 1,
logit elsewhere; bias-aware or the hull of the candidates' intervals when the recommendation distrusts
the model), at the per-stratum level

* ``"bonferroni"`` (the default): ``1 - (1 - L) / K``;
* ``"sidak"``: ``L ** (1 / K)``;
* ``"none"``: ``L`` (marginal intervals, not simultaneous).

The store's trend (:mod:`heroeval.store.trend`) uses the same critical values for rounds, where every
interval is a normal (Wald on the logit scale) interval of one joint fit. Here the strata's intervals are
whatever each stratum's method makes (score-test inversions, bias-aware intervals, hulls), and the
strata share one calibration, so their errors are positively correlated through its history term.
Bonferroni's union bound holds for any intervals and any dependence, which is why it is the default;
Šidák's level is exact for independent intervals and, for two-sided normal intervals, conservative under
any correlation (Šidák's inequality), slightly narrower; the trend's ``"maxz"`` (the quantile of
``max |Z|`` under the estimated correlation) needs one joint normal covariance of the strata's estimates,
which non-Wald intervals do not have, and is not offered. ``critical_value`` reports the normal quantile
``z_{(1 + level) / 2}`` of the per-stratum level (the Wald-equivalent multiplier). ``K`` counts the strata
with an estimate; the skipped ones carry no interval.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from heroeval.checks.model_checks import run_checks
from heroeval.errors import DataError, HeroEvalError
from heroeval.estimators.collection import EstimateCollection
from heroeval.estimators.results import DEFAULT_CI_METHOD, EstimateResult, check_level, jsonable
from heroeval.ingest.annotations import AnnotationSet
from heroeval.ingest.coding import ids_to_str
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.settings import em_settings_of

__all__ = [
    "ADJUSTMENTS",
    "MIN_ITEMS",
    "Strata",
    "StrataEstimate",
    "StratumResult",
    "family_level",
    "split_strata",
    "strata_estimate",
]

ADJUSTMENTS = ("bonferroni", "sidak", "none")
"""The family-wise adjustments of the strata's intervals (module docstring)."""

MIN_ITEMS = 2
"""A stratum with fewer items is skipped (and listed with the reason)."""

StratumResult = EstimateResult | EstimateCollection
Strata = str | Mapping[Any, Any] | pd.Series
"""What ``by`` may be: a round-column name, a mapping item id -> stratum, or a Series indexed by item id."""

FRAME_COLUMNS = ("method", "recommended", "estimate", "standard_error", "ci_low", "ci_high", "ci_method",
                 "ci_alternative", "status", "n_items", "confidence_level", "stratum_level", "notes")


def family_level(confidence_level: float, k: int, adjust: str) -> float:
    """The level of each of ``k`` intervals that cover their rates together at ``confidence_level``.

    >>> family_level(0.95, 4, "bonferroni"), round(family_level(0.95, 4, "sidak"), 5), family_level(0.95, 4, "none")
    (0.9875, 0.98726, 0.95)
    """
    level = check_level(confidence_level)
    if adjust not in ADJUSTMENTS:
        raise HeroEvalError(f"adjust must be one of {', '.join(ADJUSTMENTS)}, got {adjust!r}")
    if adjust == "none" or k <= 1:
        return level
    if adjust == "bonferroni":
        return 1 - (1 - level) / k
    return float(level ** (1.0 / k))


def _reported(res: StratumResult) -> list[tuple[str, EstimateResult, str, bool, tuple[str, ...]]]:
    """The rows a stratum reports: (method, result, status, recommended?, notes). The recommended estimate
    alone when there is one (its status the recommendation's, as the round's table shows it); otherwise
    every method's."""
    if isinstance(res, EstimateResult):
        auto = res.details.get("auto")
        if isinstance(auto, Mapping):
            return [(res.method, res, str(auto.get("status", res.status)), True, res.notes)]
        return [(res.method, res, res.status, False, res.notes)]
    if res.recommended is not None:
        rec = res.recommended
        return [(rec.method, rec.result, rec.status, True, rec.result.notes)]
    return [(m, r, r.status, False, r.notes) for m, r in res.results.items()]


def _pct(x: float) -> str:
    return f"{100 * x:.4g} %"


@dataclass(frozen=True)
class StrataEstimate:
    """The rates of a current round's strata, each estimated as a round alone, with family-wise intervals.

    Attributes
    ----------
    by : str
        What the strata are (the column name, or ``"stratum"`` for a mapping).
    results : mapping of str to EstimateResult or EstimateCollection
        Each estimated stratum's result, as :func:`heroeval.estimate` returns it for that stratum alone
        (an :class:`EstimateCollection` with ``method="all"``, a list or ``recommend=True``).
    sizes : mapping of str to int
        Items in every stratum, the skipped ones included.
    skipped : mapping of str to str
        The strata not estimated, with the reason.
    confidence_level : float
        The family-wise level: the intervals cover all the strata's rates at once at this level.
    adjust : str
        ``"bonferroni"``, ``"sidak"`` or ``"none"`` (module docstring).
    """

    by: str
    results: Mapping[str, StratumResult]
    sizes: Mapping[str, int]
    skipped: Mapping[str, str] = field(default_factory=dict)
    confidence_level: float = 0.95
    adjust: str = "bonferroni"

    def __post_init__(self) -> None:
        family_level(self.confidence_level, 1, self.adjust)  # validates both
        for name in ("results", "sizes", "skipped"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @property
    def n_strata(self) -> int:
        """K: the strata with an estimate (the family the intervals cover together)."""
        return len(self.results)

    @property
    def stratum_level(self) -> float:
        """The level of each stratum's interval (:func:`family_level`)."""
        return family_level(self.confidence_level, self.n_strata, self.adjust)

    @property
    def critical_value(self) -> float:
        """The normal quantile of the per-stratum level, ``z_{(1 + level) / 2}`` (a Wald interval's multiplier)."""
        return float(norm.ppf(0.5 + self.stratum_level / 2))

    def with_family(self, confidence_level: float | None = None, adjust: str | None = None) -> StrataEstimate:
        """The same estimates with another family-wise level or adjustment (nothing is estimated again)."""
        return replace(self, confidence_level=self.confidence_level if confidence_level is None else confidence_level,
                       adjust=self.adjust if adjust is None else adjust)

    def reported(self, stratum: str) -> EstimateResult:
        """The estimate a stratum reports: the recommended one, or its only method's."""
        rows = _reported(self.results[stratum])
        if len(rows) != 1:
            raise HeroEvalError(f"stratum {stratum!r} holds {len(rows)} methods and no recommended estimate: "
                                "read them from .results[stratum]")
        return rows[0][1]

    def records(self, ci_method: str = DEFAULT_CI_METHOD) -> list[dict[str, Any]]:
        """One record per stratum (and method, without a recommendation), the skipped strata last."""
        level = self.stratum_level
        out: list[dict[str, Any]] = []
        for s, res in self.results.items():
            for m, r, status, rec, notes in _reported(res):
                ci = r.confidence_interval(level, ci_method)
                out.append({"stratum": s, "method": m, "recommended": rec, "estimate": r.estimate,
                            "standard_error": r.standard_error, "ci_low": ci.low, "ci_high": ci.high,
                            "ci_method": ci.method, "ci_alternative": ci.alternative, "status": status,
                            "n_items": self.sizes.get(s, r.n_items), "confidence_level": self.confidence_level,
                            "stratum_level": level, "notes": "; ".join(notes)})
        for s, why in self.skipped.items():
            out.append({"stratum": s, "method": "", "recommended": False, "estimate": math.nan,
                        "standard_error": math.nan, "ci_low": math.nan, "ci_high": math.nan, "ci_method": "",
                        "ci_alternative": "", "status": "skipped", "n_items": self.sizes.get(s, 0),
                        "confidence_level": self.confidence_level, "stratum_level": math.nan, "notes": why})
        return out

    def to_frame(self, ci_method: str = DEFAULT_CI_METHOD) -> pd.DataFrame:
        """One row per stratum (index: the stratum), with its estimate and family-wise interval.

        Columns: method, recommended, estimate, standard_error, ci_low, ci_high (family-wise: at
        ``stratum_level``), ci_method, ci_alternative, status (the recommendation's for a recommended
        estimate), n_items (the stratum's), confidence_level (the family's), stratum_level, notes. A
        stratum without a recommended estimate and with several methods has one row per method (each
        method's K intervals are a family). Skipped strata come last, with status ``"skipped"`` and the
        reason in notes.
        """
        df = pd.DataFrame(self.records(ci_method), columns=["stratum", *FRAME_COLUMNS])
        return df.set_index("stratum")

    def to_dict(self, ci_method: str = DEFAULT_CI_METHOD) -> dict[str, Any]:
        """JSON-ready: the family (level, adjustment, K, per-stratum level, critical value), one record per
        stratum, the skipped strata, and each stratum's full result at the per-stratum level."""
        level = self.stratum_level

        def full(res: StratumResult) -> dict[str, Any]:
            d = res.to_dict(level)
            d.pop("ingest", None)  # the round's, the same for every stratum
            return d

        return {
            "by": self.by, "confidence_level": self.confidence_level, "adjust": self.adjust,
            "n_strata": self.n_strata, "stratum_level": level, "critical_value": self.critical_value,
            "strata": [jsonable(r) for r in self.records(ci_method)],
            "skipped": dict(self.skipped),
            "results": {s: jsonable(full(res)) for s, res in self.results.items()},
        }

    def family_text(self) -> str:
        """The family-wise statement in words."""
        k = self.n_strata
        if self.adjust == "none":
            return f"{_pct(self.confidence_level)} intervals, one stratum at a time (not simultaneous over {k})"
        how = {"bonferroni": "Bonferroni", "sidak": "Šidák"}[self.adjust]
        return (f"{_pct(self.confidence_level)} family-wise over {k} strata ({how}: each interval at "
                f"{_pct(self.stratum_level)}, critical value {self.critical_value:.3f})")

    def summary(self, ci_method: str = DEFAULT_CI_METHOD) -> str:
        """A plain-text table: one line per stratum, then the skipped strata with the reason."""
        lines = [f"Rates per {self.by}: {self.family_text()}"]
        recs = self.records(ci_method)
        width = max([len(str(r["stratum"])) for r in recs] + [len(self.by)])
        lines.append(f"{self.by:<{width}}  {'method':<16} {'estimate':>9} {'SE':>8}  {'interval':<19} "
                     f"{'items':>6}  status")
        for r in recs:
            if r["status"] == "skipped":
                lines.append(f"{r['stratum']:<{width}}  {'-':<16} {'-':>9} {'':>8}  {'':<19} {r['n_items']:>6}  "
                             f"skipped: {r['notes']}")
                continue
            ci = f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]"
            m = r["method"] + (" (rec.)" if r["recommended"] else "")
            lines.append(f"{r['stratum']:<{width}}  {m:<16} {r['estimate']:>9.4f} {r['standard_error']:>8.4f}  "
                         f"{ci:<19} {r['n_items']:>6}  {r['status']}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<StrataEstimate: {self.n_strata} strata, {len(self.skipped)} skipped>\n{self.summary()}"

    def _repr_html_(self) -> str:
        head = f"<p><b>Rates per {html.escape(self.by)}</b>: {html.escape(self.family_text())}</p>"
        return head + str(self.to_frame().to_html(float_format=lambda x: f"{x:.4f}", na_rep=""))


# ---------------------------------------------------------------------------
# Splitting a round and estimating each stratum
# ---------------------------------------------------------------------------


def _codes_from_mapping(current: AnnotationSet, by: Mapping[Any, Any] | pd.Series) -> tuple[tuple[str, ...],
                                                                                            np.ndarray]:
    """Stratum names (sorted) and each item's stratum code from a mapping or a Series indexed by item id."""
    s = by.copy() if isinstance(by, pd.Series) else pd.Series(list(by.values()), index=list(by.keys()),
                                                              dtype=object)
    s = s[s.notna()]
    ids = ids_to_str(pd.Series(s.index.to_numpy(dtype=object))).to_numpy(dtype=object)
    vals = np.asarray([str(v) for v in s.to_numpy(dtype=object)], dtype=object)
    table = pd.DataFrame({"item": ids, "stratum": vals}).drop_duplicates()
    two = table["item"].duplicated(keep=False)
    if two.any():
        item = table.loc[two, "item"].iloc[0]
        two_names = sorted(table.loc[table["item"] == item, "stratum"])
        raise DataError(f"by: item {item!r} is in two strata ({two_names[0]!r} and {two_names[1]!r}); an item must "
                        "belong to one stratum")
    lookup = dict(zip(table["item"], table["stratum"], strict=True))
    got = [lookup.get(str(i)) for i in current.item_ids]
    missing = [str(i) for i, g in zip(current.item_ids, got, strict=True) if g is None]
    if missing:
        shown = ", ".join(repr(x) for x in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise DataError(f"by: {len(missing)} of the {current.n_items} items of {current.name!r} have no stratum "
                        f"({shown}); give every item one")
    names = tuple(sorted({g for g in got if g is not None}))
    code = {n: k for k, n in enumerate(names)}
    return names, np.asarray([code[g] for g in got if g is not None], dtype=np.int64)


def split_strata(current: AnnotationSet, by: Strata) -> tuple[str, dict[str, AnnotationSet]]:
    """The label of the strata and each stratum's items as a round of its own (one round named after it).

    See the module docstring for what ``by`` may be.
    """
    if isinstance(by, str):
        if current.round_ids == ("all",):
            raise HeroEvalError(
                f"by={by!r}: the current round {current.name!r} was read without a round column, so its items "
                f"have no stratum. Read it with read_annotations(path, round_col={by!r}) (CLI: hero estimate "
                "--by COLUMN), or pass by as a mapping (or a pandas Series) from item id to stratum")
        label, names, codes = by, current.round_ids, np.asarray(current.item_round, dtype=np.int64)
    elif isinstance(by, (Mapping, pd.Series)):
        label = str(by.name) if isinstance(by, pd.Series) and by.name is not None else "stratum"
        names, codes = _codes_from_mapping(current, by)
    else:
        raise HeroEvalError(f"by must be a column name, a mapping item -> stratum or a pandas Series, "
                            f"got {type(by).__name__}")
    out: dict[str, AnnotationSet] = {}
    for k, name in enumerate(names):
        idx = np.flatnonzero(codes == k)
        if idx.size == 0:
            continue  # a round name with no item left (rows dropped at reading)
        sub = current.take_items(idx, name=f"{current.name}[{label}={name}]")
        out[name] = replace(sub, item_round=np.zeros(idx.size, dtype=np.int32), round_ids=(name,))
    return label, out


def strata_estimate(
    current: AnnotationSet,
    by: Strata,
    calibration: Calibration,
    estimate_one: Callable[[AnnotationSet, Calibration], StratumResult],
    *,
    recommends: bool,
    confidence_level: float = 0.95,
    adjust: str = "bonferroni",
) -> StrataEstimate:
    """Split ``current`` by ``by`` and estimate each stratum with ``estimate_one(stratum, calibration)``.

    ``recommends``: whether ``estimate_one`` makes the recommended estimate. The recommendation needs the
    model checks; when ``calibration`` has none but keeps its history, they are run here once (as
    :func:`heroeval.choice.recommend` would run them on every stratum: the same call, with the
    calibration's EM settings) and attached for every stratum.
    """
    family_level(confidence_level, 1, adjust)
    label, strata = split_strata(current, by)
    sizes = {s: sub.n_items for s, sub in strata.items()}
    skipped: dict[str, str] = {}
    small = {s for s, n in sizes.items() if n < MIN_ITEMS}
    for s in small:
        skipped[s] = f"{sizes[s]} item{'s' if sizes[s] != 1 else ''}: a stratum needs at least {MIN_ITEMS}"
    cal = calibration
    if (recommends and cal.checks is None and cal.history is not None
            and any(not sub.has_gold for s, sub in strata.items() if s not in small)):
        cal = replace(cal, checks=run_checks(cal.history, em_settings=em_settings_of(cal.settings), start=cal))
    results: dict[str, StratumResult] = {}
    for s, sub in strata.items():
        if s in small:
            continue
        try:
            results[s] = estimate_one(sub, cal)
        except HeroEvalError as exc:
            skipped[s] = f"not estimated: {exc}"
    if not results:
        why = "; ".join(f"{s}: {w}" for s, w in skipped.items()) or "no item"
        raise HeroEvalError(f"no stratum of {current.name!r} by {label!r} could be estimated ({why})")
    order = list(strata)
    return StrataEstimate(label, results, sizes, {s: skipped[s] for s in order if s in skipped},
                          confidence_level, adjust)
