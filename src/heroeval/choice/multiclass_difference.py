"""The recommended difference of two rounds' class shares (the K-class ``compare(..., method="auto")``), and the
verdict on it.

A team ships on ``A - B``: a new model version's grade shares against the old one's. A candidate's bias on a
difference is not its bias on a round: a bias common to both rounds cancels, one that moves with the class shares
does not. The evidence is each round's own recommendation
(:func:`heroeval.choice.multiclass_auto.recommend_multiclass`, made on the same history, so the same mock rounds:
the same folds and refits; current-only Dawid–Skene's differ, as each is fitted with its own round). Re-weighting
the history's gold items by class makes a candidate's mock bias linear in the class shares ``q``: ``b(q) = M' q``,
row ``k`` of ``M`` the mean pseudo-error of the gold items of class ``k``. The **difference's mock bias** is

    ``b_d = M_A' q_A - M_B' q_B``  (``M_A = M_B`` but for Dawid–Skene),

``q_X`` round X's class shares, recovered from the candidate's estimate ``p_X = (I + M') q_X`` by a map ``q_X =
A p_X`` (``bias=``, :data:`BIAS_MAPS`: ``"inverse"``, the default, ``A = (I + M')^-1``; ``"first_order"``, ``A = I -
M'``, its first-order expansion, which leave-one-set-out on the shared sets prefers for its narrower intervals at
the same accuracy but which understates a bias that grows with the shift: on a simulated 0.25 shift with majority
vote biased it covered 0.80 per class against the inverse's 0.89; honest first). Its covariance ``S`` adds the item noise of ``M`` within
each class, through ``A`` (``r_i = A_A q_A,k (d^A_i - M^A_k) / n_k - A_B q_B,k (d^B_i - M^B_k) / n_k`` for gold
item i of class k), and the rounds' estimation noise through ``I - A`` (the difference's covariance when the
rounds share ``M``, else each round's current-round covariance). The history part of the fold estimates cancels to
first order: it moves every class's row of ``M`` by one vector, and ``q_A - q_B`` sums to 0. With equal shares
``b_d = 0``.

The rule is the round's: majority vote unless the joint test of its difference bias (``b_d' S^+ b_d``, chi-square
with K - 1 degrees of freedom) rejects at :data:`~heroeval.choice.multiclass_auto.DEFAULT_ALPHA`; else the
candidate with the smallest estimated MSE of the difference summed over the class shares, ``max(b_k^2 - S_kk, 0) +
se_k^2``. The difference's noise ``se`` is its own variance
(:func:`~heroeval.multiclass.estimators.compare_multiclass`: current parts add, the shared history's subtract) or,
when larger, the spread of its errors on each round's re-weighted gold scaled to that round's size plus the history
part. The interval of ``w' (p_A - p_B)`` (one share, the mean score) is bias-aware with the bound ``|w' b_d| +
kappa sqrt(w' S w)`` (:class:`~heroeval.inference.difference_interval.DifferenceInterval`). The difference is
``"unreliable"`` when either round's recommendation is; its interval then also spans every other candidate's
plain interval (what the candidates disagree on).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import chi2

from heroeval.choice.multiclass_auto import (
    BIAS_KAPPA,
    DEFAULT,
    DEFAULT_ALPHA,
    MultiClassRecommendation,
    recommend_multiclass,
    structure_fits,
)
from heroeval.errors import HeroEvalError
from heroeval.estimators.inversion import check_alternative
from heroeval.estimators.results import jsonable
from heroeval.inference.difference_interval import DifferenceInterval
from heroeval.inference.verdict import Verdict, interval_p_value
from heroeval.multiclass.calibration import MultiClassCalibration
from heroeval.multiclass.data import MultiClassData, as_multiclass
from heroeval.multiclass.estimators import compare_multiclass
from heroeval.multiclass.labelled import ClassIntervals
from heroeval.multiclass.mock_rounds import MOCK_FOLDS, current_covariance

__all__ = ["BIAS_MAPS", "MultiClassDifferenceRecommendation", "recommend_difference_multiclass", "verdict_multiclass"]

FloatArray = npt.NDArray[np.float64]


def _class_means(errors: FloatArray, y: npt.NDArray[np.int64], K: int) -> tuple[FloatArray, FloatArray]:
    """``M`` (row k: the mean pseudo-error of the gold items of class k; 0 for a class no gold item has) and the
    class counts."""
    n = np.bincount(y, minlength=K).astype(np.float64)
    M = np.zeros((K, errors.shape[1]))
    np.add.at(M, y, errors)
    M /= np.maximum(n, 1.0)[:, None]
    return M, n


@dataclass(frozen=True)
class _DiffScored:
    """One candidate's difference ``A - B``: estimate, own covariance and its history part, mock bias and its
    covariance, and the two rounds' scored evidence (for the empirical noise)."""

    method: str
    difference: FloatArray
    covariance: FloatArray
    history_part: FloatArray
    bias: FloatArray
    bias_cov: FloatArray
    model_variance: bool
    evidence: tuple[Any, Any]

    def parts(self, w: FloatArray) -> tuple[float, float, float, float]:
        """``(w' d, se, w' b_d, s_b)`` of the functional ``w' (p_A - p_B)``."""
        emp = float(w @ self.history_part @ w)
        for sc in self.evidence:
            dw = sc.evidence.errors @ w
            om = sc.weights
            tot = float(om.sum())
            emp += float(om @ (dw - float(om @ dw) / tot) ** 2) / tot / sc.n
        own = float(w @ self.covariance @ w) if self.model_variance else 0.0
        se2 = max(own if math.isfinite(own) else 0.0, emp)
        return (float(w @ self.difference), math.sqrt(max(se2, 0.0)), float(w @ self.bias),
                math.sqrt(max(float(w @ self.bias_cov @ w), 0.0)))

    def bias_test(self) -> tuple[float, int, float]:
        """The joint test of no difference bias over the class shares: ``T = b_d' S^+ b_d``, df K - 1, p-value."""
        df = max(self.bias.size - 1, 1)
        T = float(self.bias @ np.linalg.pinv(self.bias_cov, rcond=1e-10, hermitian=True) @ self.bias)
        return T, df, float(chi2.sf(T, df))

    def total_mse(self) -> float:
        K = self.bias.size
        out = 0.0
        for k in range(K):
            _, se, b, s_b = self.parts(np.eye(K)[k])
            out += max(b * b - s_b * s_b, 0.0) + se * se
        return out

    def part(self, w: FloatArray, kappa: float) -> tuple[float, float, float, float, float]:
        """The :class:`DifferenceInterval` part of ``w' (p_A - p_B)``: center, se, bias bound, 0, inf."""
        est, se, b, s_b = self.parts(w)
        return est, se, abs(b) + kappa * s_b, 0.0, math.inf


BIAS_MAPS = ("first_order", "inverse")
"""How a round's shares ``q`` are recovered from a candidate's estimate ``p = (I + M') q`` for its mock bias
``M' q``: ``"inverse"``, ``q = (I + M')^-1 p`` (the default); ``"first_order"``, ``q = (I - M') p`` (its first-order
expansion: narrower, and short of a large shift's bias; the module docstring and docs/multiclass.md)."""


def _shares_map(M: FloatArray, bias: str) -> FloatArray:
    """The matrix ``A`` of ``q = A p`` (:data:`BIAS_MAPS`; a pseudo-inverse when ``I + M'`` is singular: the
    candidate cannot tell some classes apart)."""
    if bias == "first_order":
        return np.asarray(np.eye(M.shape[0]) - M.T, dtype=np.float64)
    T = np.eye(M.shape[0]) + M.T
    inv = np.linalg.inv if np.linalg.cond(T) < 1e10 else np.linalg.pinv
    return np.asarray(inv(T), dtype=np.float64)


def _scored_difference(m: str, rec_a: MultiClassRecommendation, rec_b: MultiClassRecommendation,
                       bias_map: str) -> _DiffScored:
    sa, sb = rec_a._scored[m], rec_b._scored[m]
    K = len(rec_a.classes)
    y = sa.gold_class
    ea, eb = sa.evidence.errors, sb.evidence.errors
    Ma, n = _class_means(ea, y, K)
    Mb, _ = _class_means(eb, y, K)
    Aa, Ab = _shares_map(Ma, bias_map), _shares_map(Mb, bias_map)
    pa, pb = sa.estimate.estimate, sb.estimate.estimate
    qa, qb = Aa @ pa, Ab @ pb
    bias = (pa - qa) - (pb - qb)
    # the item noise of M within each class, through d bias = A dM' q
    r = ((qa[y][:, None] * (ea - Ma[y])) @ Aa.T - (qb[y][:, None] * (eb - Mb[y])) @ Ab.T) / np.maximum(n, 1.0)[y][:, None]
    cmp = compare_multiclass(sa.estimate, sb.estimate)
    V = cmp.covariance
    ca, cb = current_covariance(sa.estimate), current_covariance(sb.estimate)
    Ga, Gb = np.eye(K) - Aa, np.eye(K) - Ab
    if np.array_equal(ea, eb):  # one M for both rounds: the estimates' noise enters through their difference
        S = r.T @ r + Ga @ (V if np.isfinite(V).all() else ca + cb) @ Ga.T
    else:
        S = r.T @ r + Ga @ ca @ Ga.T + Gb @ cb @ Gb.T
    hist = np.zeros((K, K)) if not np.isfinite(V).all() else V - ca - cb
    return _DiffScored(m, cmp.difference, V, hist, bias, S, sa.model_variance, (sa, sb))


@dataclass(frozen=True)
class MultiClassDifferenceRecommendation:
    """The recommended difference ``A - B`` of two rounds' class shares, with bias-aware intervals
    (:func:`recommend_difference_multiclass`; the module docstring says how).

    Attributes
    ----------
    method : str
        The chosen candidate, estimated in both rounds.
    difference : ndarray
        Its ``p_A - p_B`` per class.
    status : {"ok", "unreliable"}
    reason : str
    candidates : pandas.DataFrame
        One row per candidate: predicted RMSE of the difference summed over classes, the p-value of its joint
        difference-bias test, its difference per class.
    round_a, round_b : MultiClassRecommendation
        Each round's own recommendation (the same as ``hero estimate --classes`` gives it).
    """

    method: str
    difference: FloatArray
    status: str
    reason: str
    candidates: pd.DataFrame
    round_a: MultiClassRecommendation
    round_b: MultiClassRecommendation
    kappa: float = BIAS_KAPPA
    _scored: dict[str, _DiffScored] = field(default_factory=dict, repr=False)

    @property
    def classes(self) -> tuple[str, ...]:
        return self.round_a.classes

    @property
    def values(self) -> FloatArray:
        return self.round_a.values

    def _weights(self, weights: Sequence[float] | FloatArray) -> FloatArray:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (len(self.classes),) or not np.isfinite(w).all():
            raise HeroEvalError(f"functional weights need {len(self.classes)} finite numbers (one per class), got "
                                f"{np.asarray(weights).tolist()!r}")
        return w

    def interval_of(self, weights: Sequence[float] | FloatArray, *, span: bool | None = None) -> DifferenceInterval:
        """The :class:`~heroeval.inference.difference_interval.DifferenceInterval` of ``sum_c weights[c] (p_A,c -
        p_B,c)``: the chosen candidate's bias-aware part and, when the difference is ``"unreliable"`` (or
        ``span=True``), every other candidate's plain one (``estimate +- z se``: where the mock rounds are too thin
        to judge the candidates, the interval spans what they disagree on; spanning their bias-aware intervals
        instead, whose bounds rest on those thin mock rounds, reached the whole range on the weather sets, 1.97 of
        2 per class, at the same coverage); clipped to ``[-(max w - min w), max w - min w]``, the functional's
        range."""
        w = self._weights(weights)
        parts = [self._scored[self.method].part(w, self.kappa)]
        if (self.status == "unreliable") if span is None else span:
            parts += [(*s.part(w, self.kappa)[:2], 0.0, 0.0, math.inf) for k, s in self._scored.items()
                      if k != self.method]
        rng = float(w.max() - w.min())
        return DifferenceInterval(tuple(parts), bound=rng if rng > 0 else 1.0)

    def functional(self, weights: Sequence[float] | FloatArray, confidence_level: float = 0.95, *,
                   span: bool | None = None) -> dict[str, float]:
        """Estimate, standard error, bias bound, bias-aware interval and two-sided p-value (of no difference, by
        the interval's rule) of ``sum_c weights[c] (p_A,c - p_B,c)``."""
        if not 0 < confidence_level < 1:
            raise HeroEvalError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
        w = self._weights(weights)
        est, se, bound, _, _ = self._scored[self.method].part(w, self.kappa)
        di = self.interval_of(w, span=span)
        lo, hi = di.interval(confidence_level)
        return {"estimate": est, "standard_error": se, "bias_bound": bound, "ci_low": lo, "ci_high": hi,
                "p_value": di.p_value(0.0)}

    def intervals(self, confidence_level: float = 0.95, *, span: bool | None = None) -> ClassIntervals:
        """The bias-aware interval of each class share's difference, in class order (and by class name)."""
        K = len(self.classes)
        out = []
        for k in range(K):
            r = self.functional(np.eye(K)[k], confidence_level, span=span)
            out.append((r["ci_low"], r["ci_high"]))
        return ClassIntervals(self.classes, out)

    def mean_score(self, confidence_level: float = 0.95) -> dict[str, float]:
        """The difference of the mean class values, ``values' (p_A - p_B)``, with its bias-aware interval."""
        return self.functional(self.values, confidence_level)

    def to_frame(self, confidence_level: float = 0.95) -> pd.DataFrame:
        """One row per class share's difference and one for the mean score's (the numbers of :meth:`to_dict`)."""
        K = len(self.classes)
        rows = [{"quantity": f"share {c}", **self.functional(np.eye(K)[k], confidence_level)}
                for k, c in enumerate(self.classes)]
        rows.append({"quantity": "mean score", **self.mean_score(confidence_level)})
        df = pd.DataFrame(rows)
        df["method"] = self.method
        df["status"] = self.status
        return df

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        K = len(self.classes)
        out: dict[str, Any] = jsonable({
            "method": "auto",
            "chosen": self.method,
            "status": self.status,
            "reason": self.reason,
            "confidence_level": confidence_level,
            "classes": {c: self.functional(np.eye(K)[k], confidence_level) for k, c in enumerate(self.classes)},
            "mean_score": self.mean_score(confidence_level),
            "candidates": self.candidates.to_dict(orient="records"),
            "a": self.round_a.to_dict(confidence_level),
            "b": self.round_b.to_dict(confidence_level),
        })
        return out

    def _repr_html_(self) -> str:
        return (f"<p><b>A - B: {self.method}</b> ({self.status}): {self.reason}</p>"
                + self.to_frame().to_html(index=False, float_format=lambda x: f"{x:.4f}"))


def _check_pair(rec_a: MultiClassRecommendation, rec_b: MultiClassRecommendation) -> None:
    if rec_a.classes != rec_b.classes:
        raise HeroEvalError(f"the rounds' classes differ: {list(rec_a.classes)} and {list(rec_b.classes)}")
    ga = next(iter(rec_a._scored.values())).gold_class
    gb = next(iter(rec_b._scored.values())).gold_class
    if ga.shape != gb.shape or not np.array_equal(ga, gb):
        raise HeroEvalError("the two recommendations were not made on the same history's mock rounds (recommend both "
                            "rounds on one history, with the same folds and seed)")


def difference_from(rec_a: MultiClassRecommendation, rec_b: MultiClassRecommendation, *,
                    default_alpha: float = DEFAULT_ALPHA, bias: str = "inverse"
                    ) -> MultiClassDifferenceRecommendation:
    """The recommended difference from the two rounds' own recommendations (module docstring); both must be made
    on one history with the same folds and seed (:func:`recommend_difference_multiclass` makes them so).
    ``bias``: how the mock bias of the difference is extrapolated to the rounds' shares (:data:`BIAS_MAPS`)."""
    _check_pair(rec_a, rec_b)
    if not 0 <= default_alpha <= 1:
        raise HeroEvalError(f"default_alpha must be in [0, 1], got {default_alpha!r}")
    if bias not in BIAS_MAPS:
        raise HeroEvalError(f"bias must be one of {list(BIAS_MAPS)}, got {bias!r}")
    scored = {m: _scored_difference(m, rec_a, rec_b, bias) for m in rec_a._scored if m in rec_b._scored}
    if not scored:
        raise HeroEvalError("no candidate was scored in both rounds")
    mses = {m: s.total_mse() for m, s in scored.items()}
    mv_p = scored[DEFAULT].bias_test()[2] if DEFAULT in scored else math.nan
    kept = DEFAULT in scored and mv_p >= default_alpha
    chosen = DEFAULT if kept else min(mses, key=lambda m: mses[m])
    why = (f"{DEFAULT}: its mock bias of the difference is not significant (p = {mv_p:.2g} >= {default_alpha:g})"
           if kept else (f"{DEFAULT}'s mock bias of the difference is significant (p = {mv_p:.2g}): "
                         if DEFAULT in scored else "") + "the smallest estimated error of the difference")
    why += (f"; mock rounds of {rec_a.n_gold} gold items re-weighted to each round's class shares: predicted RMSE "
            f"{math.sqrt(mses[chosen]):.3f} summed over classes; interval bias-aware with the mock bias of the "
            f"difference plus {rec_a.kappa:g} standard error")
    status = "ok"
    bad = [n for n, r in (("A", rec_a), ("B", rec_b)) if r.status == "unreliable"]
    if bad:
        status = "unreliable"
        why += f"; unreliable: round {' and '.join(bad)} is (the interval spans every candidate's estimate)"
    rows = [{"method": m, "predicted_rmse": math.sqrt(mses[m]), "bias_p": s.bias_test()[2],
             **{f"difference {c}": float(s.difference[k]) for k, c in enumerate(rec_a.classes)}}
            for m, s in scored.items()]
    table = pd.DataFrame(rows).sort_values("predicted_rmse").reset_index(drop=True)
    return MultiClassDifferenceRecommendation(chosen, scored[chosen].difference, status, why, table, rec_a, rec_b,
                                              rec_a.kappa, scored)


def recommend_difference_multiclass(
    current_a: MultiClassData,
    current_b: MultiClassData,
    history: MultiClassData,
    *,
    structures: Sequence[str] | None = None,
    fits: dict[str, MultiClassCalibration] | None = None,
    folds: int = MOCK_FOLDS,
    seed: int = 0,
    default_alpha: float = DEFAULT_ALPHA,
    bias: str = "inverse",
) -> MultiClassDifferenceRecommendation:
    """The recommended difference ``A - B`` of two rounds' class shares on one history (module docstring): each
    round's :func:`~heroeval.choice.multiclass_auto.recommend_multiclass` (the same as it alone gives), then
    :func:`difference_from`.

    >>> import numpy as np
    >>> from heroeval.multiclass.simulate import simulate_rounds
    >>> s = simulate_rounds(np.random.default_rng(1), K=3, n_current=600, rho=0.25)
    >>> a, b = s.current.take_items(range(300)), s.current.take_items(range(300, 600))
    >>> d = recommend_difference_multiclass(a, b, s.history)
    >>> d.status, len(d.intervals())
    ('ok', 3)
    """
    hist = as_multiclass(history, "history")
    if fits is None:
        fits = structure_fits(hist, structures)
    structs = tuple(fits) if structures is None else tuple(structures)
    rec_a, rec_b = (recommend_multiclass(c, hist, structures=structs, fits=fits, folds=folds, seed=seed,
                                         default_alpha=default_alpha) for c in (current_a, current_b))
    return difference_from(rec_a, rec_b, default_alpha=default_alpha, bias=bias)


def verdict_multiclass(difference: MultiClassDifferenceRecommendation, margin: float = 0.0,
                       alternative: str = "less", confidence_level: float = 0.95,
                       on: str | None = None) -> Verdict:
    """A test of round B against round A on one quantity of the recommended difference: ``on`` a class's share
    (its name) or ``"mean score"`` (the default). ``alternative`` and ``margin`` as
    :func:`heroeval.inference.verdict.verdict` reads them (``"less"``: B's quantity is not above A's by more than
    ``margin``); the p-value inverts the difference's bias-aware interval, so a bias the mock rounds allow for
    cannot make it decide."""
    check_alternative(alternative)
    if not 0 < confidence_level < 1:
        raise HeroEvalError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    K = len(difference.classes)
    what = "mean score" if on is None else on
    if what == "mean score":
        w = difference.values
    elif what in difference.classes:
        w = np.eye(K)[difference.classes.index(what)]
    else:
        raise HeroEvalError(f"verdict on {what!r}: name a class ({', '.join(difference.classes)}) or 'mean score'")
    rng = float(w.max() - w.min())
    if isinstance(margin, bool) or not (isinstance(margin, (int, float)) and math.isfinite(margin)
                                        and 0 <= margin < rng):
        raise HeroEvalError(f"margin must be a number in [0, {rng:g}) for the {what}, got {margin!r}")
    m = float(margin)
    p = interval_p_value(difference.interval_of(w), m, alternative)
    est, se, _, _, _ = difference._scored[difference.method].part(w, difference.kappa)
    alpha = 1 - confidence_level
    decided = bool(p == p and p < alpha)
    q = "share of " + what if what != "mean score" else what
    claim = ({"less": f"B's {q} is lower than A's", "greater": f"B's {q} is higher than A's",
              "two-sided": f"B's {q} differs from A's"}[alternative] if m == 0 else
             {"less": f"B's {q} is not above A's by more than {m:g}",
              "greater": f"B's {q} is not below A's by more than {m:g}",
              "two-sided": f"B's {q} is within {m:g} of A's"}[alternative])
    test = ("two-sided" if alternative == "two-sided" and m == 0 else "two one-sided tests"
            if alternative == "two-sided" else "one-sided")
    ptxt = "p not available" if p != p else f"p = {p:.2g}"
    text = (f"{claim} ({ptxt}, {test} at level {alpha:g})" if decided else
            f"not enough evidence that {claim} ({ptxt}, {test} at level {alpha:g})")
    return Verdict(difference.method, est, se, m, alternative, p, confidence_level, decided, math.nan, text)
