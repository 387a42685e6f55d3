"""Current-round class-prevalence vectors: HERO-1 on the simplex, the joint fit and the K-class baselines."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import norm

from heroeval.errors import ConvergenceWarning, DataError, HeroEvalError, UnknownLabelerError
from heroeval.estimators.results import EstimateResult, Influence, rate_interval
from heroeval.ingest.annotations import AnnotationSet
from heroeval.multiclass import confusion_model
from heroeval.multiclass.calibration import MultiClassCalibration, design_of
from heroeval.multiclass.confusion_model import solve_simplex
from heroeval.multiclass.data import MultiClassData, as_multiclass
from heroeval.multiclass.labelled import ClassIntervals
from heroeval.stage_a.calibration import ConvergenceInfo

__all__ = [
    "MC_METHODS",
    "MultiClassComparison",
    "MultiClassEstimate",
    "compare_multiclass",
    "dawid_skene_multiclass",
    "estimate_multiclass",
    "gold_proportion_multiclass",
    "hero1_multiclass",
    "hero2_multiclass",
    "hero_joint_multiclass",
    "majority_vote_multiclass",
    "plurality_votes",
]

FloatArray = npt.NDArray[np.float64]
MC_METHODS = ("majority_vote", "dawid_skene", "gold_proportion", "hero1", "hero2", "hero_joint")


def _wald(est: float, se: float, level: float) -> tuple[float, float]:
    if not (math.isfinite(est) and math.isfinite(se)):
        return math.nan, math.nan
    z = float(norm.ppf(0.5 + level / 2))
    return est - z * se, est + z * se


@dataclass(frozen=True, eq=False)
class MultiClassEstimate:
    """A current round's class-prevalence vector by one method, with its influence values.

    ``estimate - truth ~= mean(current) + history term``: ``current`` holds
    one K-vector per current item; the history term is either per history
    unit (``history``, one K-vector per history item or gold-count cell; its
    covariance is ``history' history``) or a parameter gradient
    ``history_grad`` (P, K) with the calibration's ``parameter_covariance``
    ``gram``. Any linear functional ``w' p`` (a class share, the share of
    grades >= 4, the mean score) takes its influence as ``w`` times these.
    """

    method: str
    classes: tuple[str, ...]
    values: FloatArray
    estimate: FloatArray
    n_items: int
    n_annotations: int
    n_labelers: int
    current: FloatArray | None  # (n, K)
    history: FloatArray | None = None  # (U, K)
    history_grad: FloatArray | None = None  # (P, K)
    gram: FloatArray | None = None
    calibration_id: int | None = None
    component_status: tuple[str, ...] = ()
    convergence: ConvergenceInfo | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "details", MappingProxyType(dict(self.details)))
        if not self.component_status:
            object.__setattr__(self, "component_status", ("ok",) * len(self.classes))

    @property
    def status(self) -> str:
        if any(s == "unidentified" for s in self.component_status):
            return "unidentified"
        return "boundary" if any(s.startswith("boundary") for s in self.component_status) else "ok"

    def _influence(self, w: FloatArray) -> Influence | None:
        if self.current is None:
            return None
        cur = self.current @ w
        if self.history is not None:
            return Influence(cur, "items", self.history @ w, None, self.calibration_id)
        if self.history_grad is not None:
            return Influence(cur, "stage_a", self.history_grad @ w, self.gram, self.calibration_id)
        return Influence(cur)

    def covariance(self) -> FloatArray:
        """K x K covariance of the estimated vector (current + history parts)."""
        K = len(self.classes)
        if self.current is None:
            return np.full((K, K), np.nan)
        n = self.current.shape[0]
        V = self.current.T @ self.current / n**2
        if self.history is not None:
            V = V + self.history.T @ self.history
        elif self.history_grad is not None:
            if self.gram is None:
                return np.full((K, K), np.nan)
            V = V + self.history_grad.T @ self.gram @ self.history_grad
        out: FloatArray = V
        return out

    def standard_errors(self) -> FloatArray:
        se = np.sqrt(np.maximum(np.diag(self.covariance()), 0.0))
        bad = np.array([s.startswith("boundary") or s == "unidentified" for s in self.component_status])
        se[bad] = np.nan
        return se

    def component(self, c: int | str) -> EstimateResult:
        """Class c's share as a binary-style :class:`EstimateResult` (logit interval by default)."""
        k = self.classes.index(str(c)) if isinstance(c, str) else int(c)
        w = np.zeros(len(self.classes))
        w[k] = 1.0
        return EstimateResult(method=self.method, estimate=float(self.estimate[k]), n_items=self.n_items,
                              n_annotations=self.n_annotations, n_labelers=self.n_labelers,
                              status=self.component_status[k], convergence=self.convergence,
                              details={"class": self.classes[k]}, notes=self.notes, influence=self._influence(w))

    def functional(self, weights: Sequence[float] | FloatArray, confidence_level: float = 0.95) -> dict[str, float]:
        """Estimate, SE and Wald interval of ``sum_c weights[c] p_c``."""
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (len(self.classes),):
            raise HeroEvalError(f"functional weights need {len(self.classes)} numbers (one per class), got {w.shape}")
        est = float(w @ self.estimate)
        infl = self._influence(w)
        se = math.sqrt(max(infl.variance(), 0.0)) if infl is not None and self.status != "unidentified" else math.nan
        lo, hi = _wald(est, se, confidence_level)
        return {"estimate": est, "standard_error": se, "ci_low": lo, "ci_high": hi}

    def mean_score(self, confidence_level: float = 0.95) -> dict[str, float]:
        """The mean class value ``sum_c values[c] p_c`` (ordinal grades) with a Wald interval."""
        return self.functional(self.values, confidence_level)

    def intervals(self, confidence_level: float = 0.95, method: str = "logit") -> ClassIntervals:
        """Per-class intervals (as the binary rate intervals: logit by default), labelled by class."""
        se = self.standard_errors()
        out = []
        for k in range(len(self.classes)):
            ci = rate_interval(float(self.estimate[k]), float(se[k]), confidence_level, method)
            out.append((ci.low, ci.high))
        return ClassIntervals(self.classes, out)

    def to_frame(self, confidence_level: float = 0.95) -> pd.DataFrame:
        """One row per class share and one for the mean score: estimate, SE, interval (the ones :meth:`to_dict`
        gives), status."""
        se = self.standard_errors()
        ci = self.intervals(confidence_level)
        rows: list[dict[str, Any]] = [
            {"quantity": f"share {c}", "estimate": float(self.estimate[k]), "standard_error": float(se[k]),
             "ci_low": ci[k][0], "ci_high": ci[k][1], "status": self.component_status[k]}
            for k, c in enumerate(self.classes)]
        rows.append({"quantity": "mean score", **self.mean_score(confidence_level), "status": self.status})
        df = pd.DataFrame(rows)
        df.insert(0, "method", self.method)
        return df

    def _repr_html_(self) -> str:
        return (f"<p><b>{self.method}</b> ({self.status})</p>"
                + self.to_frame().to_html(index=False, float_format=lambda x: f"{x:.4f}"))

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        se = self.standard_errors()
        ci = self.intervals(confidence_level)
        ms = self.mean_score(confidence_level)
        return {
            "method": self.method,
            "classes": {c: {"estimate": float(self.estimate[k]), "standard_error": _num(se[k]),
                            "ci_low": _num(ci[k][0]), "ci_high": _num(ci[k][1]), "status": self.component_status[k]}
                        for k, c in enumerate(self.classes)},
            "mean_score": {k: _num(v) for k, v in ms.items()},
            "confidence_level": confidence_level,
            "status": self.status,
            "n_items": self.n_items,
            "n_annotations": self.n_annotations,
            "convergence": None if self.convergence is None else self.convergence.to_dict(),
            "details": {k: v for k, v in self.details.items() if isinstance(v, (int, float, str, list, dict))},
            "notes": list(self.notes),
        }


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


# ---------------------------------------------------------------------------
# Current round alignment
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Cur:
    data: AnnotationSet
    lab: npt.NDArray[np.int64]  # calibration labeler index per annotation
    notes: tuple[str, ...]


def _check_current(current: Any) -> MultiClassData:
    cur = as_multiclass(current, "current")
    if cur.annotations.n_items == 0:
        raise DataError(f"current round {cur.name!r} has no annotated items")
    return cur


def _check_cal(calibration: Any, cur: MultiClassData) -> MultiClassCalibration:
    if not isinstance(calibration, MultiClassCalibration):
        raise HeroEvalError(f"calibration must be a MultiClassCalibration (calibrate_multiclass), got "
                            f"{type(calibration).__name__}")
    if calibration.classes != cur.classes:
        raise HeroEvalError(f"the current round's classes {list(cur.classes)} differ from the calibration's "
                            f"{list(calibration.classes)}; read it with classes= in the same order")
    return calibration


def _align(cur: MultiClassData, cal: MultiClassCalibration, exclude_new_labelers: bool) -> _Cur:
    ds = cur.annotations
    index = cal.index_of()
    idx = np.array([index.get(str(x), -1) for x in ds.labeler_ids], dtype=np.int64)
    unknown = idx < 0
    notes: list[str] = []
    if unknown.any():
        names = tuple(str(x) for x in ds.labeler_ids[unknown])
        if not exclude_new_labelers:
            raise UnknownLabelerError(
                f"{len(names)} labeler(s) of the current round {ds.name!r} are not in the calibration: "
                f"{', '.join(repr(x) for x in names[:10])}; pass exclude_new_labelers=True to leave their labels out",
                names)
        ds, n_removed, n_items = ds.select_labelers(~unknown)
        if ds.n_items == 0:
            raise DataError(f"current round {cur.name!r}: every annotation is by a labeler unknown to the calibration")
        idx = idx[~unknown]
        notes.append(f"excluded {len(names)} labeler(s) unknown to the calibration: {n_removed} annotations, "
                     f"{n_items} item(s) left without labels")
    return _Cur(ds, idx[ds.labeler], tuple(notes))


def _cur_design(c: _Cur, K: int, J: int) -> confusion_model.Design:
    ds = c.data
    return confusion_model.make_design(ds.item_ptr, c.lab, ds.label, np.full(ds.n_items, -1), np.zeros(ds.n_items), K, J, 1)


# ---------------------------------------------------------------------------
# HERO-1 on the simplex
# ---------------------------------------------------------------------------


def _component_status(p: FloatArray, tol: float = 0.0) -> tuple[str, ...]:
    out = []
    for v in p:
        if not math.isfinite(v):
            out.append("unidentified")
        elif v <= tol:
            out.append("boundary_0")
        elif v >= 1 - tol:
            out.append("boundary_1")
        else:
            out.append("ok")
    return tuple(out)


@dataclass(frozen=True)
class _ScoreParts:
    current: FloatArray  # (n, K)
    C: FloatArray  # (P, K): d estimate / d theta (history gradient)
    Iinv: FloatArray | None = None  # (|o|, |o|)
    ref: int = -1
    others: npt.NDArray[np.int64] | None = None


def _face(p: FloatArray, ref: int | None = None) -> tuple[int, npt.NDArray[np.int64]]:
    A = np.flatnonzero(p > 0)
    e = int(A[np.argmax(p[A])]) if ref is None else int(ref)
    return e, A[A != e]


def _psi(lam: FloatArray, p: FloatArray, e: int, o: npt.NDArray[np.int64]) -> FloatArray:
    f = np.exp(lam - lam.max(axis=1, keepdims=True))
    out: FloatArray = (f[:, o] - f[:, [e]]) / (f @ p)[:, None]
    return out


def _score_influence(d: confusion_model.Design, D: FloatArray, P: int, lam: FloatArray, p: FloatArray,
                     ref: int | None = None, resid_shift: FloatArray | None = None) -> _ScoreParts:
    """Influence of the simplex score-equation estimate with confusion parameters from the history.

    On the active face A with reference e (largest) and others o:
    ``p_o - p ~= I^-1 [mean psi_i + G (theta_hat - theta)]`` with
    ``psi_ic = (f_ic - f_ie) / D_i``, ``I = mean psi psi'`` and
    ``G = mean d psi / d theta``; ``p_e = 1 - sum p_o``; inactive classes stay 0.
    """
    n, K = lam.shape
    J, q = D.shape[0], D.shape[3]
    A = np.flatnonzero(p > 0)
    cur = np.zeros((n, K))
    C = np.zeros((P, K))
    if A.size <= 1:
        return _ScoreParts(cur, C)
    e, o = _face(p, ref)
    f = np.exp(lam - lam.max(axis=1, keepdims=True))
    Dn = f @ p
    psi = (f[:, o] - f[:, [e]]) / Dn[:, None]
    Iinv = np.linalg.pinv(psi.T @ psi / n, hermitian=True)
    resid = psi if resid_shift is None else psi - resid_shift
    phi = (resid - resid.mean(axis=0)) @ Iinv
    cur[:, o] = phi
    cur[:, e] = -phi.sum(axis=1)
    # kappa[i, c, d] = d psi_ic / d lambda_id = (f_id / D_i) ([d = c] - [d = e] - psi_ic p_d)
    fr = f / Dn[:, None]
    ind = np.zeros((o.size, K))
    ind[np.arange(o.size), o] = 1.0
    ind[:, e] -= 1.0
    kappa = fr[:, None, :] * (ind[None] - psi[:, :, None] * p[None, None, :])  # (n, |o|, K)
    Da = D[d.lab, :, d.lbl, :]  # (n_ann, K, q)
    per = np.einsum("acd,adq->acq", kappa[d.item_of], Da).reshape(d.n_ann, o.size * q)
    Gl = np.asarray(d.lab_ind @ per).reshape(J, o.size, q) / n  # (J, |o|, q)
    Gm = np.zeros((o.size, P))
    Gm[:, : J * q] = Gl.transpose(1, 0, 2).reshape(o.size, J * q)
    Co = Gm.T @ Iinv  # (P, |o|)
    C[:, o] = Co
    C[:, e] = -Co.sum(axis=1)
    return _ScoreParts(cur, C, Iinv, e, o)


def hero2_multiclass(current: MultiClassData | AnnotationSet, calibration: MultiClassCalibration, *,
                     ridge: float = 0.0, exclude_new_labelers: bool = False) -> MultiClassEstimate:
    """HERO-2 per component: HERO-1 on the simplex with a score-level control variate.

    On HERO-1's active face (reference = its largest class e, others o), the
    scores ``psi_i`` (n x |o|) at the HERO-1 estimate are regressed on the
    centred current covariates, ``Gamma = (S_XX + ridge diag S_XX)^-1 S_Xpsi``
    (one column per component, as the binary HERO-2 for each), and the
    estimate solves ``mean_i psi_i(p) = Gamma' (Xbar - m_X)`` with ``m_X`` the
    history's covariate mean (Newton on the face). Influence: current
    ``I^-1 (psi_i - Gamma' (X_i - Xbar))``, history
    ``I^-1 (G H^-1 s_r + Gamma' (X_r - m_X) / N)``. Needs covariates on both
    sides and the history in this process. With K = 2 it is :func:`heroeval.hero2`.
    """
    cur = _check_current(current)
    cal = _check_cal(calibration, cur)
    if not (math.isfinite(ridge) and ridge >= 0):
        raise HeroEvalError(f"ridge must be a non-negative number, got {ridge!r}")
    hist = cal.history
    if cur.annotations.covariates is None or hist is None or hist.annotations.covariates is None:
        raise HeroEvalError("hero2 needs covariates for the current round and for the history, and the history "
                            "itself (calibrate in this process from a history read with covariates=)")
    if tuple(cur.annotations.covariate_names) != tuple(hist.annotations.covariate_names):
        raise HeroEvalError(f"covariate columns differ: current {list(cur.annotations.covariate_names)}, "
                            f"history {list(hist.annotations.covariate_names)}")
    assert cal.information is not None
    al = _align(cur, cal, exclude_new_labelers)
    K = cal.n_classes
    d = _cur_design(al, K, cal.n_labelers)
    lam = confusion_model.item_loglik(d, np.log(cal.confusion))
    p1, st = solve_simplex(lam)
    if st == "unidentified":
        return _finish_score("hero2", cal, al, d, cal.derivatives(), lam, p1, st)
    e, o = _face(p1)
    X = al.data.covariates
    assert X is not None
    Xh = hist.annotations.covariates
    m_hist = Xh.mean(axis=0)
    n = X.shape[0]
    xbar = X.mean(axis=0)
    Xc = X - xbar
    Sxx = Xc.T @ Xc / n
    ps1 = _psi(lam, p1, e, o)
    Sxp = Xc.T @ ps1 / n
    var = np.diag(Sxx).copy()
    scale = np.maximum(np.mean(X**2, axis=0), np.finfo(float).tiny)
    live = var > 1e-12 * scale
    Gam = np.zeros((X.shape[1], o.size))
    if live.any():
        S = Sxx[np.ix_(live, live)] + ridge * np.diag(var[live])
        Gam[live] = np.linalg.lstsq(S, Sxp[live], rcond=None)[0]
    offset = Gam.T @ (xbar - m_hist)
    p = p1.copy()
    status_note: tuple[str, ...] = ()
    for _ in range(100):
        ps = _psi(lam, p, e, o)
        g = ps.mean(axis=0) - offset
        step = np.linalg.lstsq(ps.T @ ps / n, g, rcond=None)[0]
        p[o] += step
        p[e] -= step.sum()
        if (p < 0).any():
            p = np.maximum(p, 0.0)
            p /= p.sum()
            status_note = ("the control-variate shift pushed a class below 0: clipped to the simplex",)
            break
        if np.max(np.abs(step)) < 1e-15:
            break
    parts = _score_influence(d, cal.derivatives(), cal.n_parameters, lam, p, ref=e, resid_shift=Xc @ Gam)
    assert parts.Iinv is not None and parts.others is not None
    N = Xh.shape[0]
    h_o = cal.information.item_influence(parts.C)[:, o] + ((Xh - m_hist) @ Gam / N) @ parts.Iinv
    hist_inf = np.zeros((N, K))
    hist_inf[:, o] = h_o
    hist_inf[:, e] = -h_o.sum(axis=1)
    n_items, n_ann, n_lab = _counts(al)
    details = {"gamma": Gam.tolist(), "offset": offset.tolist(), "hero1_estimate": p1.tolist(), "ridge": ridge,
               "reference_class": cal.classes[e]}
    return MultiClassEstimate("hero2", cal.classes, cal.values, p, n_items, n_ann, n_lab, parts.current,
                              history=hist_inf, calibration_id=hash(cal.token), component_status=_component_status(p),
                              details=details, notes=(*al.notes, *status_note))


def _counts(c: _Cur) -> tuple[int, int, int]:
    return c.data.n_items, c.data.n_annotations, int(np.unique(c.data.labeler).size)


def hero1_multiclass(current: MultiClassData | AnnotationSet, calibration: MultiClassCalibration, *,
                     exclude_new_labelers: bool = False) -> MultiClassEstimate:
    """HERO-1 on the simplex: the class-prevalence vector maximising the current round's likelihood.

    With the calibration's confusion matrices fixed, ``p`` maximises
    ``sum_i log sum_c p_c prod_labels pi_j[c, l]`` (see :func:`solve_simplex`).
    Its influence values add the history's: current ``I^-1 psi_i`` and history
    ``I^-1 G H^-1 s_r`` per history item (the sandwich, as the binary HERO-1).
    With K = 2 and the full structure it is the binary :func:`heroeval.hero1`.
    """
    cur = _check_current(current)
    cal = _check_cal(calibration, cur)
    al = _align(cur, cal, exclude_new_labelers)
    K = cal.n_classes
    d = _cur_design(al, K, cal.n_labelers)
    lam = confusion_model.item_loglik(d, np.log(cal.confusion))
    p, st = solve_simplex(lam)
    return _finish_score("hero1", cal, al, d, cal.derivatives(), lam, p, st)


def _finish_score(method: str, cal: MultiClassCalibration, al: _Cur, d: confusion_model.Design,
                  D: FloatArray, lam: FloatArray, p: FloatArray, st: str,
                  gold_conf: FloatArray | None = None) -> MultiClassEstimate:
    """The estimate ``p`` (status ``st``) of a score method on the current round's design ``d`` (item
    log-likelihoods ``lam``; ``D`` the log confusion's derivatives in the parameters), with its current-round
    influence and the history's: from the calibration's information or parameter covariance, or, with
    ``gold_conf`` (the gold-proportion confusion rows), per gold-label cell (:func:`_gold_units`)."""
    n, n_ann, n_lab = _counts(al)
    if st == "unidentified":
        return MultiClassEstimate(method, cal.classes, cal.values, p, n, n_ann, n_lab, None,
                                  component_status=("unidentified",) * cal.n_classes,
                                  notes=(*al.notes, "no current label carries information"))
    P = cal.n_parameters if gold_conf is None else cal.n_labelers * cal.n_classes * (cal.n_classes - 1)
    parts = _score_influence(d, D, P, lam, p)
    notes = al.notes
    if any(v == 0 for v in p) and cal.n_classes > 2:
        notes = (*notes, "some classes are estimated at 0: the other classes' intervals hold them fixed there")
    base: dict[str, Any] = {"method": method, "classes": cal.classes, "values": cal.values, "estimate": p, "n_items": n,
            "n_annotations": n_ann, "n_labelers": n_lab, "current": parts.current,
            "component_status": _component_status(p), "notes": notes}
    if gold_conf is not None:
        return MultiClassEstimate(**base, history=_gold_units(cal, gold_conf, parts.C),
                                  calibration_id=hash((cal.token, "gold")))
    if cal.information is not None:
        hist = cal.information.item_influence(parts.C)
        return MultiClassEstimate(**base, history=hist, calibration_id=hash(cal.token))
    if cal.parameter_covariance is None:
        notes = (*notes, "the calibration has neither history nor parameter covariance: current-round variance only")
    return MultiClassEstimate(**{**base, "notes": notes}, history_grad=parts.C, gram=cal.parameter_covariance,
                              calibration_id=hash(cal.token))


def _gold_units(cal: MultiClassCalibration, conf: FloatArray, C: FloatArray) -> FloatArray:
    """History influence of gold-proportion confusion rows, one unit per (labeler, gold class, label) cell.

    Row ``(j, c)`` is ``(n[j, c, :] + 1) / (n[j, c, :].sum() + K)``; one gold
    label l moves its free entries by ``(e_l - pi_jc)[free] / (N_jc + K)``.
    Cells with n labels enter with weight sqrt(n) (labels independent).
    """
    J, K, _ = conf.shape
    n = cal.gold_counts.astype(np.float64)
    ref = confusion_model.row_refs(conf)
    cols = confusion_model._nonref_cols(ref, K)  # (J, K, K-1)
    Cl = C[: J * K * (K - 1)].reshape(J, K, K - 1, K)  # (j, row c, param m, class)
    units = np.zeros((J, K, K, K))
    tot = n.sum(axis=2)
    for lab in range(K):
        el = (cols == lab).astype(np.float64)  # (J, K, K-1): e_l at the free entries
        u = (el - np.take_along_axis(conf, cols, axis=2)) / (tot + K)[:, :, None]  # (J, K, K-1)
        units[:, :, lab, :] = np.einsum("jcm,jcmk->jck", u, Cl) * np.sqrt(n[:, :, lab])[:, :, None]
    out: FloatArray = units.reshape(J * K * K, K)
    return out


def gold_proportion_multiclass(current: MultiClassData | AnnotationSet, calibration: MultiClassCalibration, *,
                               exclude_new_labelers: bool = False) -> MultiClassEstimate:
    """Gold-proportion calibration: confusion rows from the history's gold items only (Laplace +1), then HERO-1.

    ``pi[j, c, l] = (n_gold[j, c, l] + 1) / (n_gold[j, c, :].sum() + K)``; with
    K = 2 this is the binary baseline's ``(tp + 1) / (tp + fn + 2)``.
    """
    cur = _check_current(current)
    cal = _check_cal(calibration, cur)
    al = _align(cur, cal, exclude_new_labelers)
    K = cal.n_classes
    n = cal.gold_counts.astype(np.float64)
    conf = (n + 1.0) / (n.sum(axis=2, keepdims=True) + K)
    d = _cur_design(al, K, cal.n_labelers)
    lam = confusion_model.item_loglik(d, np.log(conf))
    p, st = solve_simplex(lam)
    return _finish_score("gold_proportion", cal, al, d, confusion_model.derivs("full", conf, None), lam, p, st,
                         gold_conf=conf)


def plurality_votes(current: MultiClassData) -> FloatArray:
    """Each item's plurality vote as a class distribution (n_items, K): its most frequent label, ties split."""
    ds = current.annotations
    cnt = np.zeros((ds.n_items, current.n_classes))
    np.add.at(cnt, (ds.annotation_item, ds.label.astype(np.int64)), 1.0)
    top = cnt == cnt.max(axis=1, keepdims=True)
    out: FloatArray = top / top.sum(axis=1, keepdims=True)
    return out


def majority_vote_multiclass(current: MultiClassData | AnnotationSet) -> MultiClassEstimate:
    """Plurality vote shares: each item's vote goes to its most frequent label, ties split equally.

    With K = 2 this is :func:`heroeval.majority_vote` with ``tie="half"``.
    Its interval is for the plurality-label shares, not the gold shares.
    """
    cur = _check_current(current)
    ds = cur.annotations
    vote = plurality_votes(cur)
    top = vote > 0
    p = vote.mean(axis=0)
    return MultiClassEstimate("majority_vote", cur.classes, cur.values, p, ds.n_items, ds.n_annotations,
                              int(np.unique(ds.labeler).size), vote - p,
                              details={"n_ties": int((top.sum(axis=1) > 1).sum())},
                              notes=("its interval is for the plurality-label shares, not the gold shares",))


def _prev_selector(P: int, offset: int, K: int) -> FloatArray:
    C = np.zeros((P, K - 1))
    C[offset + np.arange(K - 1), np.arange(K - 1)] = 1.0
    return C


def _expand_prev(IF: FloatArray, prev: FloatArray) -> FloatArray:
    """Influence of a round's K-vector from that of its K-1 free entries (reference = largest)."""
    K = prev.size
    ref = int(np.argmax(prev))
    cols = confusion_model._nonref_cols(np.array(ref), K)
    out = np.zeros((IF.shape[0], K))
    out[:, cols] = IF
    out[:, ref] = -IF.sum(axis=1)
    return out


def dawid_skene_multiclass(current: MultiClassData | AnnotationSet, *, structure: str = "full", tol: float = 1e-8,
                           max_iter: int = 10_000) -> MultiClassEstimate:
    """K-class Dawid–Skene on the current round alone (unsupervised EM, no history).

    Starts from the soft plurality vote (each item's label shares), which
    fixes the labelling of the classes. The interval is from the fit's
    sandwich (influence values ``H^-1 s_r`` of the prevalence).
    """
    cur = _check_current(current)
    ds = cur.annotations
    K = cur.n_classes
    d = confusion_model.make_design(ds.item_ptr, ds.labeler, ds.label, np.full(ds.n_items, -1), np.zeros(ds.n_items), K,
                           ds.n_labelers, 1)
    fit = confusion_model.run_unsupervised(d, structure, tol=tol, max_iter=max_iter)
    if not fit.converged:
        warnings.warn(f"Dawid-Skene EM did not converge in {fit.n_iter} iterations", ConvergenceWarning, stacklevel=2)
    conv = ConvergenceInfo(fit.converged, fit.n_iter, fit.loglik, fit.max_change, tol, max_iter, "parameters", False)
    info = confusion_model.Information(d, structure, fit)
    IF = info.item_influence(_prev_selector(info.P, ds.n_labelers * info.q, K))
    cur_inf = _expand_prev(IF, fit.prev[0]) * ds.n_items
    p = fit.prev[0]
    return MultiClassEstimate("dawid_skene", cur.classes, cur.values, p, ds.n_items, ds.n_annotations,
                              int(np.unique(ds.labeler).size), cur_inf, convergence=conv,
                              component_status=_component_status(p, confusion_model.BOUND_TOL))


def hero_joint_multiclass(current: MultiClassData | AnnotationSet, calibration: MultiClassCalibration, *,
                          exclude_new_labelers: bool = False) -> MultiClassEstimate:
    """Joint fit: Stage A on the history plus the current round as one more gold-free round.

    Starts from the calibration (and HERO-1 for the current prevalence), same
    structure and EM settings. Needs the history itself.
    """
    cur = _check_current(current)
    cal = _check_cal(calibration, cur)
    if cal.history is None:
        raise HeroEvalError("hero_joint needs the history, not only a calibration file: calibrate in this process")
    al = _align(cur, cal, exclude_new_labelers)
    K, J = cal.n_classes, cal.n_labelers
    hist = cal.history.annotations
    dh = design_of(hist, K)
    dc = _cur_design(al, K, J)
    lam = confusion_model.item_loglik(dc, np.log(cal.confusion))
    p1, _ = solve_simplex(lam)
    p1 = np.where(np.isfinite(p1), p1, 1.0 / K)
    p1 = np.clip(p1, 0.01, 1.0)
    p1 /= p1.sum()
    d = confusion_model.concat_designs(dh, dc, dh.G)
    s = cal.settings
    tol = float(s.get("tol", 1e-8))
    max_iter = int(s.get("max_iter", 10_000))
    pseudo = float(s.get("pseudo_count", 0.0))
    fit = confusion_model.run_em(d, cal.structure, cal.confusion, cal.theta, np.vstack([cal.round_prevalence, p1]),
                        tol=tol, max_iter=max_iter, pseudo=pseudo)
    if not fit.converged:
        warnings.warn(f"joint EM did not converge in {fit.n_iter} iterations", ConvergenceWarning, stacklevel=2)
    conv = ConvergenceInfo(fit.converged, fit.n_iter, fit.loglik, fit.max_change, tol, max_iter, "parameters", False)
    info = confusion_model.Information(d, cal.structure, fit, pseudo)
    G = dh.G
    IF = info.item_influence(_prev_selector(info.P, J * info.q + G * (K - 1), K))
    full = _expand_prev(IF, fit.prev[G])
    N = dh.N
    n, n_ann, n_lab = _counts(al)
    p = fit.prev[G]
    return MultiClassEstimate("hero_joint", cal.classes, cal.values, p, n, n_ann, n_lab, full[N:] * n,
                              history=full[:N], calibration_id=hash((cal.token, "joint")), convergence=conv,
                              component_status=_component_status(p, confusion_model.BOUND_TOL), notes=al.notes)


def estimate_multiclass(current: MultiClassData | AnnotationSet, calibration: MultiClassCalibration, *,
                        method: str | Sequence[str] = "all", exclude_new_labelers: bool = True, ridge: float = 0.0
                        ) -> dict[str, MultiClassEstimate]:
    """Several methods at once (``"all"``: every method the inputs allow), by name.

    ``"all"`` skips ``hero2`` without covariates on both sides and
    ``hero_joint`` without the history itself. Labelers of the round unknown
    to the calibration are left out of the calibrated methods by default, each
    result's notes saying so (``he.estimate``'s rule for every method but
    HERO-1, and what ``hero estimate --classes`` does); majority vote and
    Dawid–Skene use them. ``exclude_new_labelers=False`` stops with
    :class:`~heroeval.errors.UnknownLabelerError` naming them, as the
    estimators called one by one do unless given ``True``.
    """
    wanted = list(MC_METHODS) if method == "all" else ([method] if isinstance(method, str) else list(method))
    out: dict[str, MultiClassEstimate] = {}
    for m in wanted:
        if m not in MC_METHODS:
            raise HeroEvalError(f"unknown multi-class method {m!r}; choose from {list(MC_METHODS)} or 'all'")
        if m == "hero_joint" and calibration.history is None and method == "all":
            continue
        if m == "hero2" and method == "all" and (
                as_multiclass(current).annotations.covariates is None or calibration.history is None
                or calibration.history.annotations.covariates is None):
            continue
        if m == "majority_vote":
            out[m] = majority_vote_multiclass(current)
        elif m == "dawid_skene":
            out[m] = dawid_skene_multiclass(current)
        elif m == "gold_proportion":
            out[m] = gold_proportion_multiclass(current, calibration, exclude_new_labelers=exclude_new_labelers)
        elif m == "hero1":
            out[m] = hero1_multiclass(current, calibration, exclude_new_labelers=exclude_new_labelers)
        elif m == "hero2":
            out[m] = hero2_multiclass(current, calibration, ridge=ridge, exclude_new_labelers=exclude_new_labelers)
        else:
            out[m] = hero_joint_multiclass(current, calibration, exclude_new_labelers=exclude_new_labelers)
    return out


# ---------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MultiClassComparison:
    """Difference of two rounds' prevalence vectors (A - B) sharing one calibration."""

    method: str
    classes: tuple[str, ...]
    values: FloatArray
    difference: FloatArray
    covariance: FloatArray

    def standard_errors(self) -> FloatArray:
        out: FloatArray = np.sqrt(np.maximum(np.diag(self.covariance), 0.0))
        return out

    def functional(self, weights: Sequence[float] | FloatArray, confidence_level: float = 0.95) -> dict[str, float]:
        w = np.asarray(weights, dtype=np.float64)
        est = float(w @ self.difference)
        se = math.sqrt(max(float(w @ self.covariance @ w), 0.0))
        lo, hi = _wald(est, se, confidence_level)
        p = float(2 * norm.sf(abs(est) / se)) if se > 0 else math.nan
        return {"estimate": est, "standard_error": se, "ci_low": lo, "ci_high": hi, "p_value": p}

    def to_dict(self, confidence_level: float = 0.95) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method, "classes": {}}
        for k, c in enumerate(self.classes):
            w = np.zeros(len(self.classes))
            w[k] = 1
            out["classes"][c] = {a: _num(b) for a, b in self.functional(w, confidence_level).items()}
        out["mean_score"] = {a: _num(b) for a, b in self.functional(self.values, confidence_level).items()}
        return out


def compare_multiclass(a: MultiClassEstimate, b: MultiClassEstimate) -> MultiClassComparison:
    """A - B: current parts independent (variances add); history parts subtracted item by item."""
    if a.method != b.method or a.classes != b.classes:
        raise HeroEvalError("compare the same method on the same classes")
    if a.current is None or b.current is None:
        K = len(a.classes)
        return MultiClassComparison(a.method, a.classes, a.values, a.estimate - b.estimate, np.full((K, K), np.nan))
    V = a.current.T @ a.current / a.current.shape[0] ** 2 + b.current.T @ b.current / b.current.shape[0] ** 2
    if a.history is not None or b.history is not None or a.history_grad is not None:
        if a.calibration_id != b.calibration_id:
            raise HeroEvalError("the two estimates do not share one calibration: their history terms cannot be combined")
        if a.history is not None and b.history is not None and a.history.shape == b.history.shape:
            h = a.history - b.history
            V = V + h.T @ h
        elif a.history_grad is not None and b.history_grad is not None and a.gram is not None:
            g = a.history_grad - b.history_grad
            V = V + g.T @ a.gram @ g
        elif a.method == "hero_joint":
            # the two joint fits refit the history separately; their history terms are treated as independent
            assert a.history is not None and b.history is not None
            V = V + a.history.T @ a.history + b.history.T @ b.history
    return MultiClassComparison(a.method, a.classes, a.values, a.estimate - b.estimate, V)
