"""Stage A: gold-anchored EM on the history, and the calibration it produces."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import os
import uuid
import warnings
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import scipy.sparse as sp

from heroeval._core import jit
from heroeval._core.jsonfile import dumps_json, read_json
from heroeval._version import __version__
from heroeval.errors import CalibrationFileError, ConvergenceWarning, DataError, HeroEvalError, HeroEvalWarning
from heroeval.ingest.annotations import AnnotationSet
from heroeval.ingest.compact import CompactHistory
from heroeval.stage_a import _em, _influence, _kernels
from heroeval.stage_a.checks_record import ModelChecks
from heroeval.stage_a.covariance import ParameterCovariance
from heroeval.stage_a.gold import GoldScores, gold_counts, initial_values, score_gold_items
from heroeval.stage_a.prior import EBPrior, PriorCounts, eb_counts
from heroeval.stage_a.settings import Shrink, check_em_settings, check_shrink

__all__ = [
    "Calibration",
    "ConvergenceInfo",
    "check_fit_settings",
    "fit_stage_a",
    "load_calibration",
]

FORMAT_NAME = "heroeval.calibration"
FORMAT_VERSION = 1

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ConvergenceInfo:
    """How an EM fit ended.

    ``n_iter`` counts EM map evaluations (an accelerated SQUAREM cycle costs
    three), ``max_change`` is the largest change of any probability parameter
    in the last plain EM step, ``loglik`` the final observed-data
    log-likelihood.
    """

    converged: bool
    n_iter: int
    loglik: float
    max_change: float
    tol: float
    max_iter: int
    criterion: str
    accelerate: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "converged": self.converged,
            "n_iter": self.n_iter,
            "loglik": self.loglik,
            "max_change": self.max_change,
            "tol": self.tol,
            "max_iter": self.max_iter,
            "criterion": self.criterion,
            "accelerate": self.accelerate,
        }

    @classmethod
    def from_fit(cls, fit: _em.EMFit, tol: float, max_iter: int, criterion: str, accelerate: bool) -> ConvergenceInfo:
        return cls(fit.converged, fit.n_iter, fit.loglik, fit.max_change, tol, max_iter, criterion, accelerate)


@dataclass(frozen=True, eq=False)
class Calibration:
    """Per-labeler sensitivity and specificity learned from a history (Stage A).

    Attributes
    ----------
    labeler_ids : tuple of str
    alpha, beta : ndarray, shape (J,)
        Sensitivity P(Z=1 | Y=1) and specificity P(Z=0 | Y=0) per labeler.
    n_annotations, n_items : ndarray of int, shape (J,)
        History annotations and distinct items per labeler.
    gold_tp, gold_fn, gold_tn, gold_fp : ndarray of int, shape (J,)
        Each labeler's labels on gold items: true positives, false negatives,
        true negatives, false positives (the gold-only calibration uses them).
    round_ids : tuple of str
    round_prevalence : ndarray, shape (G,)
        Estimated gold rate of each history round.
    round_n_items, round_n_gold : ndarray of int, shape (G,)
    covariate_names : tuple of str
    covariate_mean : ndarray, shape (p,), or None
        Historical covariate mean used by HERO-2.
    covariate_cov : ndarray, shape (p, p), or None
        Historical covariate covariance (for inference).
    n_covariate_items : int
    convergence : ConvergenceInfo
    covariance : heroeval.stage_a.covariance.ParameterCovariance or None
        Covariance of the history-estimated parameters (alpha, beta, round
        prevalences, covariate means, in that order): the Gram matrix
        ``sum_r h_r h_r'`` of the history items' influence values
        ``h_r = (H^-1 s_r, (x_r - m_X) / N)``, with ``H`` the observed
        information and ``s_r`` item r's score. Parameters fitted on the
        boundary (within 1e-6 of 0 or 1) get zero rows. Every standard error
        that involves the history is a quadratic form in this matrix
        (``covariance.quad(c)``). With many labelers it is kept factored and
        formed only when :attr:`parameter_covariance` is read.
    parameter_covariance : ndarray, shape (2J + G + p, 2J + G + p), or None
        ``covariance`` as a dense (read-only) matrix, formed on first access.
    checks : heroeval.checks.ModelChecks or None
        Model checks on the history's gold items (``calibrate(checks=True)``
        or ``history_weight="cv"``); saved with the calibration.
    gold_scores : GoldScores or None
        The history's gold items' labels and log-likelihood ratios under this
        calibration (at most 2,000 of them); saved with the calibration.
    history : AnnotationSet or None
        The history itself, when the calibration was fitted in this process
        (never saved to JSON). ``hero_joint`` needs it.
    """

    labeler_ids: tuple[str, ...]
    alpha: FloatArray
    beta: FloatArray
    n_annotations: IntArray
    n_items: IntArray
    gold_tp: IntArray
    gold_fn: IntArray
    gold_tn: IntArray
    gold_fp: IntArray
    round_ids: tuple[str, ...]
    round_prevalence: FloatArray
    round_n_items: IntArray
    round_n_gold: IntArray
    covariate_names: tuple[str, ...]
    covariate_mean: FloatArray | None
    covariate_cov: FloatArray | None
    n_covariate_items: int
    convergence: ConvergenceInfo
    covariance: ParameterCovariance | None = field(default=None, repr=False)
    settings: dict[str, Any] = field(default_factory=dict)
    heroeval_version: str = __version__
    created: str = ""
    token: str = field(default_factory=lambda: uuid.uuid4().hex, repr=False, compare=False)
    history: AnnotationSet | None = field(default=None, repr=False, compare=False)
    history_fit: _em.EMFit | None = field(default=None, repr=False, compare=False)
    history_design: _kernels.CompactDesign | None = field(default=None, repr=False, compare=False)
    history_information: FloatArray | None = field(default=None, repr=False, compare=False)
    checks: Any = field(default=None, repr=False, compare=False)
    gold_scores: GoldScores | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for a in (self.alpha, self.beta, self.n_annotations, self.n_items, self.gold_tp,
                  self.gold_fn, self.gold_tn, self.gold_fp, self.round_prevalence,
                  self.round_n_items, self.round_n_gold):
            a.setflags(write=False)

    # ----------------------------------------------------------------- sizes
    @property
    def parameter_covariance(self) -> FloatArray | None:
        """The parameter covariance as a dense matrix (see the class docstring), or None."""
        return None if self.covariance is None else self.covariance.matrix()

    @property
    def n_labelers(self) -> int:
        return len(self.labeler_ids)

    @property
    def n_history_items(self) -> int:
        return int(self.round_n_items.sum())

    @property
    def n_gold_items(self) -> int:
        return int(self.round_n_gold.sum())

    @property
    def n_history_annotations(self) -> int:
        return int(self.n_annotations.sum())

    @property
    def labelers_at_bound(self) -> tuple[str, ...]:
        """Labelers whose fitted sensitivity or specificity is within 1e-6 of 0 or 1."""
        a, b = self.alpha, self.beta
        hit = (np.minimum(a, 1 - a) < 1e-6) | (np.minimum(b, 1 - b) < 1e-6)
        return tuple(lab for lab, h in zip(self.labeler_ids, hit, strict=True) if h)

    @property
    def n_parameters(self) -> int:
        """Length of the parameter vector (alpha, beta, prevalences, covariate means)."""
        return 2 * self.n_labelers + len(self.round_ids) + len(self.covariate_names)

    def index_of(self) -> dict[str, int]:
        return {lab: k for k, lab in enumerate(self.labeler_ids)}

    def __repr__(self) -> str:
        return (
            f"Calibration(labelers={self.n_labelers}, history_items={self.n_history_items}, "
            f"gold_items={self.n_gold_items}, rounds={len(self.round_ids)}, "
            f"converged={self.convergence.converged}, n_iter={self.convergence.n_iter})"
        )

    def labeler_table(self) -> list[dict[str, Any]]:
        """One dict per labeler: id, sensitivity, specificity and counts."""
        return [
            {
                "id": lab,
                "sensitivity": float(self.alpha[k]),
                "specificity": float(self.beta[k]),
                "n_annotations": int(self.n_annotations[k]),
                "n_items": int(self.n_items[k]),
                "gold": {
                    "tp": int(self.gold_tp[k]),
                    "fn": int(self.gold_fn[k]),
                    "tn": int(self.gold_tn[k]),
                    "fp": int(self.gold_fp[k]),
                },
            }
            for k, lab in enumerate(self.labeler_ids)
        ]

    def labeler_frame(self) -> pd.DataFrame:
        """:meth:`labeler_table` as a pandas DataFrame indexed by labeler id.

        Columns: sensitivity, specificity, n_annotations, n_items, gold_tp, gold_fn, gold_tn, gold_fp, and
        at_bound (fitted within 1e-6 of 0 or 1). ``labeler_table()`` keeps returning its list of dicts.
        """
        bound = set(self.labelers_at_bound)
        return pd.DataFrame({
            "sensitivity": np.asarray(self.alpha, dtype=float), "specificity": np.asarray(self.beta, dtype=float),
            "n_annotations": np.asarray(self.n_annotations, dtype=np.int64),
            "n_items": np.asarray(self.n_items, dtype=np.int64),
            "gold_tp": np.asarray(self.gold_tp, dtype=np.int64), "gold_fn": np.asarray(self.gold_fn, dtype=np.int64),
            "gold_tn": np.asarray(self.gold_tn, dtype=np.int64), "gold_fp": np.asarray(self.gold_fp, dtype=np.int64),
            "at_bound": [lab in bound for lab in self.labeler_ids],
        }, index=pd.Index(list(self.labeler_ids), name="labeler_id"))

    # ------------------------------------------------------------- JSON I/O
    def to_dict(self) -> dict[str, Any]:
        cov: dict[str, Any] | None = None
        if self.covariate_mean is not None:
            assert self.covariate_cov is not None
            cov = {
                "names": list(self.covariate_names),
                "mean": self.covariate_mean.tolist(),
                "cov": self.covariate_cov.tolist(),
                "n_items": self.n_covariate_items,
            }
        return {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "heroeval_version": self.heroeval_version,
            "created": self.created,
            "labelers": self.labeler_table(),
            "rounds": [
                {
                    "id": r,
                    "prevalence": float(self.round_prevalence[g]),
                    "n_items": int(self.round_n_items[g]),
                    "n_gold": int(self.round_n_gold[g]),
                }
                for g, r in enumerate(self.round_ids)
            ],
            "covariates": cov,
            "parameter_covariance": None
            if self.covariance is None
            else {
                "dim": self.covariance.dim,
                "order": "sensitivity[J], specificity[J], round prevalence[G], covariate mean[p]",
                "float64_le_base64": base64.b64encode(
                    np.ascontiguousarray(self.covariance.matrix(), dtype="<f8").tobytes()
                ).decode("ascii"),
            },
            "fit": self.convergence.to_dict(),
            "settings": dict(self.settings),
            "checks": None if self.checks is None else self.checks.to_dict(),
            "gold_scores": None if self.gold_scores is None else self.gold_scores.to_dict(),
        }

    def to_json(self, indent: int | None = 1) -> str:
        return dumps_json(self.to_dict(), indent=indent)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the calibration as versioned JSON (never pickle)."""
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def from_dict(cls, obj: Any, source: str = "<dict>") -> Calibration:
        return _from_dict(obj, source)


def load_calibration(path: str | os.PathLike[str]) -> Calibration:
    """Load and validate a calibration JSON file written by :meth:`Calibration.save`."""
    obj, p = read_json(path)
    return _from_dict(obj, str(p))


def _from_dict(obj: Any, src: str) -> Calibration:
    def fail(where: str, msg: str) -> CalibrationFileError:
        return CalibrationFileError(f"{src}: {where}: {msg}")

    if not isinstance(obj, dict):
        raise fail("top level", "expected a JSON object")
    if obj.get("format") != FORMAT_NAME:
        raise fail("format", f"expected {FORMAT_NAME!r}, got {obj.get('format')!r}")
    ver = obj.get("format_version")
    if ver != FORMAT_VERSION:
        raise fail("format_version", f"this heroeval reads version {FORMAT_VERSION}, file has {ver!r}")

    def num(x: Any, where: str, lo: float = -math.inf, hi: float = math.inf, integer: bool = False) -> Any:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise fail(where, f"expected a finite number, got {x!r}")
        if integer and (not float(x).is_integer() or x < 0):
            raise fail(where, f"expected a non-negative integer, got {x!r}")
        if not lo <= x <= hi:
            raise fail(where, f"{x!r} is outside [{lo}, {hi}]")
        return int(x) if integer else float(x)

    labs = obj.get("labelers")
    if not isinstance(labs, list) or not labs:
        raise fail("labelers", "expected a non-empty list")
    ids: list[str] = []
    cols: dict[str, list[Any]] = {k: [] for k in ("a", "b", "n", "ni", "tp", "fn", "tn", "fp")}
    for k, rec in enumerate(labs):
        w = f"labelers[{k}]"
        if not isinstance(rec, dict):
            raise fail(w, "expected an object")
        lid = rec.get("id")
        if not isinstance(lid, str):
            raise fail(f"{w}.id", f"expected a string, got {lid!r}")
        ids.append(lid)
        cols["a"].append(num(rec.get("sensitivity"), f"{w}.sensitivity", 0, 1))
        cols["b"].append(num(rec.get("specificity"), f"{w}.specificity", 0, 1))
        cols["n"].append(num(rec.get("n_annotations"), f"{w}.n_annotations", integer=True))
        cols["ni"].append(num(rec.get("n_items"), f"{w}.n_items", integer=True))
        g = rec.get("gold")
        if not isinstance(g, dict):
            raise fail(f"{w}.gold", "expected an object with tp, fn, tn, fp")
        for key in ("tp", "fn", "tn", "fp"):
            cols[key].append(num(g.get(key), f"{w}.gold.{key}", integer=True))
    if len(set(ids)) != len(ids):
        dup = sorted({x for x in ids if ids.count(x) > 1})
        raise fail("labelers", f"repeated labeler ids {dup[:5]}")
    rounds = obj.get("rounds")
    if not isinstance(rounds, list) or not rounds:
        raise fail("rounds", "expected a non-empty list")
    rid, rprev, rn, rg = [], [], [], []
    for g, rec in enumerate(rounds):
        w = f"rounds[{g}]"
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
            raise fail(w, "expected an object with a string id")
        rid.append(rec["id"])
        rprev.append(num(rec.get("prevalence"), f"{w}.prevalence", 0, 1))
        rn.append(num(rec.get("n_items"), f"{w}.n_items", integer=True))
        rg.append(num(rec.get("n_gold"), f"{w}.n_gold", integer=True))
    cov = obj.get("covariates")
    names: tuple[str, ...] = ()
    mean = covm = None
    ncov = 0
    if cov is not None:
        if not isinstance(cov, dict):
            raise fail("covariates", "expected an object or null")
        names_raw = cov.get("names")
        if not isinstance(names_raw, list) or not all(isinstance(x, str) for x in names_raw) or not names_raw:
            raise fail("covariates.names", "expected a non-empty list of strings")
        names = tuple(names_raw)
        p = len(names)
        try:
            mean = np.asarray(cov.get("mean"), dtype=np.float64)
            covm = np.asarray(cov.get("cov"), dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise fail("covariates", f"mean/cov are not numeric ({exc})") from exc
        if mean.shape != (p,) or not np.isfinite(mean).all():
            raise fail("covariates.mean", f"expected {p} finite numbers")
        if covm.shape != (p, p) or not np.isfinite(covm).all():
            raise fail("covariates.cov", f"expected a finite {p}x{p} matrix")
        ncov = num(cov.get("n_items"), "covariates.n_items", integer=True)
    pc = obj.get("parameter_covariance")
    pcov = None
    if pc is not None:
        dim = len(ids) * 2 + len(rid) + len(names)
        if not isinstance(pc, dict) or not isinstance(pc.get("float64_le_base64"), str):
            raise fail("parameter_covariance", "expected an object with float64_le_base64")
        try:
            raw = base64.b64decode(pc["float64_le_base64"], validate=True)
        except ValueError as exc:
            raise fail("parameter_covariance", f"not valid base64 ({exc})") from exc
        if len(raw) != 8 * dim * dim:
            raise fail("parameter_covariance", f"expected a {dim}x{dim} float64 matrix, got {len(raw)} bytes")
        pcov = np.frombuffer(raw, dtype="<f8").reshape(dim, dim).astype(np.float64)
        pcov.setflags(write=False)
        if not np.isfinite(pcov).all() or not np.allclose(pcov, pcov.T, rtol=1e-8, atol=1e-300):
            raise fail("parameter_covariance", "not a finite symmetric matrix")
        ev = np.linalg.eigvalsh(pcov) if dim else np.zeros(0)
        if ev.size and ev.min() < -1e-8 * max(1e-300, float(np.abs(ev).max())):
            raise fail("parameter_covariance", f"not positive semi-definite (smallest eigenvalue {ev.min():.3g})")
    fit = obj.get("fit")
    if not isinstance(fit, dict):
        raise fail("fit", "expected an object")
    try:
        conv = ConvergenceInfo(
            converged=bool(fit["converged"]),
            n_iter=int(fit["n_iter"]),
            loglik=float(fit["loglik"]),
            max_change=float(fit["max_change"]),
            tol=float(fit["tol"]),
            max_iter=int(fit["max_iter"]),
            criterion=str(fit["criterion"]),
            accelerate=bool(fit["accelerate"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise fail("fit", f"missing or bad field ({exc})") from exc
    settings = obj.get("settings", {})
    if not isinstance(settings, dict):
        raise fail("settings", "expected an object")
    checks = None
    if obj.get("checks") is not None:
        if not isinstance(obj["checks"], dict):
            raise fail("checks", "expected an object or null")
        try:
            checks = ModelChecks.from_dict(obj["checks"])
        except HeroEvalError as exc:
            raise fail("checks", str(exc)) from exc

    gscores = None
    if obj.get("gold_scores") is not None:
        try:
            gscores = GoldScores.from_dict(obj["gold_scores"])
        except HeroEvalError as exc:
            raise fail("gold_scores", str(exc)) from exc

    def ia(key: str) -> IntArray:
        return np.asarray(cols[key], dtype=np.int64)

    return Calibration(
        labeler_ids=tuple(ids),
        alpha=np.asarray(cols["a"], dtype=np.float64),
        beta=np.asarray(cols["b"], dtype=np.float64),
        n_annotations=ia("n"),
        n_items=ia("ni"),
        gold_tp=ia("tp"),
        gold_fn=ia("fn"),
        gold_tn=ia("tn"),
        gold_fp=ia("fp"),
        round_ids=tuple(rid),
        round_prevalence=np.asarray(rprev, dtype=np.float64),
        round_n_items=np.asarray(rn, dtype=np.int64),
        round_n_gold=np.asarray(rg, dtype=np.int64),
        covariate_names=names,
        covariate_mean=mean,
        covariate_cov=covm,
        n_covariate_items=ncov,
        convergence=conv,
        covariance=None if pcov is None else ParameterCovariance.from_matrix(pcov),
        settings=settings,
        token=hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest(),
        heroeval_version=str(obj.get("heroeval_version", "")),
        created=str(obj.get("created", "")),
        checks=checks,
        gold_scores=gscores,
    )


# ---------------------------------------------------------------------------
# Stage A
# ---------------------------------------------------------------------------


def parameter_covariance(
    d: _em.Design | _kernels.CompactDesign, fit: _em.EMFit, X: FloatArray | None, variance: str = "sandwich",
    information: list[FloatArray] | None = None, prior_meat: FloatArray | None = None,
    prior_cross: FloatArray | None = None,
) -> ParameterCovariance:
    """Covariance of (alpha, beta, prevalences[, covariate means]) from the history items' influence.

    Kept factored (:class:`heroeval.stage_a.covariance.ParameterCovariance`): the dense
    matrix is formed only when asked for. ``information``, a list, receives the
    observed information ``H`` (probability scale, P x P) the covariance was formed from.
    ``prior_meat`` (:func:`eb_prior_covariance`) is added to the sandwich's meat; with the model
    variance the meat is ``H`` plus it, so the covariance is ``H^-1 + H^-1 prior_meat H^-1``;
    ``prior_cross`` (the same function's) is added to the scores' cross sums with the covariates.
    """
    gram = variance == "sandwich"
    if isinstance(d, _em.Design):
        si = _influence.scores_and_information(d, fit.alpha, fit.beta, fit.prev, fit.gamma, gram=gram)
        H, StS, free = si.info, si.gram, si.free
        SX = None if X is None else np.asarray(si.scores.T @ (X - X.mean(axis=0)))
        del si
    else:
        H, StS, SX = d.covariance_sums(fit.alpha, fit.beta, fit.prev, fit.gamma, X, gram)
        free = _influence.free_parameters(fit.alpha, fit.beta, fit.prev)
    if information is not None:
        information.append(H)
    Xc = None if X is None else X - X.mean(axis=0)
    meat = StS if gram else None
    if prior_meat is not None:
        meat = (StS if gram else H) + prior_meat
    if prior_cross is not None and SX is not None:
        SX = SX + prior_cross
    return ParameterCovariance.from_information(H, free, meat, SX, Xc)


def eb_prior_covariance(gold_set: AnnotationSet, eb: EBPrior, alpha: FloatArray, beta: FloatArray,
                        prev: FloatArray, xc_gold: FloatArray | None = None) -> tuple[FloatArray, FloatArray | None]:
    """What the empirical-Bayes prior's estimated pooled rates add to the sandwich's meat (P x P) and, with
    ``xc_gold`` (the gold items' covariates less the history's mean), to the scores' cross sums with the
    covariates (``C U' xc_gold``, P x p; HERO-2's control variate reads them; else None).

    With ``shrink="eb"`` Stage A solves ``sum_r s_r(theta) + g(theta; m) = 0``,
    ``g`` the log prior's gradient, whose pooled rates ``m = (m_a, m_b)`` are
    themselves estimated from the gold: ``m_a = sum_r t_r / N_a`` over the
    gold positives' labels (``t_r`` the 1s among item r's ``n_r`` labels),
    ``m_b`` likewise over the gold negatives' 0s. Stacking the two estimating
    equations, item r's influence on ``theta`` is ``H^-1 (s_r + C u_r)``, with
    ``u_r = ((t_r - m_a n_r) / N_a, ...)`` its influence on ``m`` (non-zero on
    gold items only) and ``C = dg / dm``: ``k_a / (alpha_j (1 - alpha_j))`` on
    the sensitivities, ``k_b / (beta_j (1 - beta_j))`` on the specificities.
    The meat ``sum_r (s_r + C u_r)(s_r + C u_r)'`` is the plain one plus
    ``S_g' U C' + C U' S_g + C U'U C'`` (``S_g`` the gold items' score rows,
    which depend on their gold labels alone): so the interval carries the
    uncertainty of the pool every labeler is pulled towards, and the
    correlation it makes between labelers. The strengths ``k`` are treated
    as known: their influence enters through ``(m - alpha_j) / (alpha_j (1 -
    alpha_j))``, small for labelers near the pool but not of second order
    (a review measured up to 1.9 % more standard error with a capped ``k``'s
    influence included).
    """
    d = design_of(gold_set)
    S = _influence.scores_and_information(d, alpha, beta, prev, gold_set.gold.astype(np.float64),
                                          gram=False).scores  # gold items x P
    U, C = eb_prior_terms(gold_set, eb, alpha, beta, prev.size)
    SU = np.asarray(S.T @ U)
    meat: FloatArray = SU @ C.T + C @ SU.T + C @ (U.T @ U) @ C.T
    return meat, None if xc_gold is None else C @ (U.T @ xc_gold)


def eb_prior_terms(gold_set: AnnotationSet, eb: EBPrior, alpha: FloatArray, beta: FloatArray,
                   n_groups: int) -> tuple[FloatArray, FloatArray]:
    """``U`` (gold items x 2), each gold item's influence on the pooled rates ``(m_a, m_b)``, and ``C``
    (P x 2, P = 2J + ``n_groups``), the log prior's gradient's derivative in them (:func:`eb_prior_covariance`): item
    r's score gains ``C u_r``."""
    J = gold_set.n_labelers
    g = gold_set.gold
    n_r = np.diff(gold_set.item_ptr).astype(np.float64)
    ones = np.bincount(gold_set.annotation_item, weights=gold_set.label.astype(np.float64),
                       minlength=gold_set.n_items)
    U = np.zeros((gold_set.n_items, 2))
    pos, neg = g == 1, g == 0
    inside = 1e-6 < eb.m_a < 1 - 1e-6, 1e-6 < eb.m_b < 1 - 1e-6  # a pooled rate held at its clip does not move
    if eb.n_a > 0 and inside[0]:
        U[pos, 0] = (ones[pos] - eb.m_a * n_r[pos]) / eb.n_a
    if eb.n_b > 0 and inside[1]:
        U[neg, 1] = ((n_r[neg] - ones[neg]) - eb.m_b * n_r[neg]) / eb.n_b
    a = np.clip(alpha, _em.EPS, 1 - _em.EPS)
    b = np.clip(beta, _em.EPS, 1 - _em.EPS)
    C = np.zeros((2 * J + n_groups, 2))
    C[:J, 0] = eb.k_a / (a * (1 - a))
    C[J:2 * J, 1] = eb.k_b / (b * (1 - b))
    return U, C


def information_of(d: _em.Design | _kernels.CompactDesign) -> _em.Information:
    """The observed information of a design as ``f(alpha, beta, prev)``, for the EM's Newton phase."""
    if isinstance(d, _kernels.CompactDesign):
        return d.information

    def info(alpha: FloatArray, beta: FloatArray, prev: FloatArray) -> FloatArray:
        gamma, _ = _em.e_step(d, alpha, beta, prev, need_ll=False)
        return _influence.information(d, alpha, beta, prev, gamma)

    return info


def _distinct_items_per_labeler(ds: AnnotationSet) -> IntArray:
    """Number of distinct items each labeler labelled (repeated pairs count once)."""
    if not ds.repeated_pairs:
        return _em.bincount(ds.labeler, ds.n_labelers).astype(np.int64)
    m = sp.csr_matrix(
        (np.ones(ds.n_annotations), ds.labeler.copy(), ds.item_ptr.copy()), shape=(ds.n_items, ds.n_labelers)
    )
    m.sum_duplicates()
    return np.bincount(m.indices, minlength=ds.n_labelers).astype(np.int64)


def design_of(ds: AnnotationSet) -> _em.Design:
    return _em.make_design(
        ds.item_ptr, ds.labeler, ds.label, ds.n_labelers, ds.gold, ds.item_round, ds.n_rounds,
        repeated=ds.repeated_pairs,
    )


def check_fit_settings(history: Any, tol: float, max_iter: int, criterion: str, pseudo_count: float,
                       variance: str, shrink: str = "none") -> None:
    """Validate Stage A's inputs (a clear error naming the parameter) before any work is done."""
    if isinstance(history, CompactHistory):
        history = history.gold_set  # its report and gold are the history's
    if not isinstance(history, AnnotationSet):
        raise HeroEvalError(
            f"history must be an AnnotationSet (from read_annotations) or a CompactHistory (from read_compact), got "
            f"{type(history).__name__}"
        )
    check_em_settings(tol, max_iter, criterion, pseudo_count, shrink)
    if variance not in ("sandwich", "model"):
        raise HeroEvalError(f"variance must be 'sandwich' or 'model', got {variance!r}")
    if not history.has_gold:
        raise DataError(_no_gold_message(history))


def stage_a_prior(counts: tuple[IntArray, IntArray, IntArray, IntArray], pseudo_count: float,
                  shrink: str) -> tuple[PriorCounts, EBPrior | None]:
    """Stage A's pseudo-counts from per-labeler gold counts ``(tp, fn, tn, fp)``: the symmetric ``pseudo_count``
    alone (``shrink="none"``), or the empirical-Bayes prior fitted to the counts plus it (``"eb"``,
    :func:`heroeval.stage_a.prior.eb_counts`), and that prior."""
    if check_shrink(shrink) == "none":
        return float(pseudo_count), None
    eb = eb_counts(*counts)
    return eb.counts(pseudo_count), eb


def _prior_settings(pseudo_count: float, shrink: str, eb: EBPrior | None) -> dict[str, Any]:
    out: dict[str, Any] = {"pseudo_count": float(pseudo_count), "shrink": shrink}
    if eb is not None:
        out["prior"] = {**eb.as_dict(), "counts": [float(v) for v in eb.counts(pseudo_count)]}
    return out


def settings_prior(settings: dict[str, Any]) -> PriorCounts:
    """The pseudo-counts a calibration was fitted with, from its settings (``pseudo_count``, and with
    ``shrink="eb"`` the fitted prior's ``counts``), for a refit that must use the same prior."""
    prior = settings.get("prior")
    if settings.get("shrink", "none") == "eb" and isinstance(prior, dict) and "counts" in prior:
        return np.asarray(prior["counts"], dtype=np.float64)
    return float(settings.get("pseudo_count", 0.0))


def _no_gold_message(history: AnnotationSet) -> str:
    """Why the history has no gold: no gold table given, or a gold table none of whose rows matched an item."""
    g = next((t for t in history.report.tables if t.table == "gold"), None)
    if g is None:
        return (f"history {history.name!r} has no gold labels: Stage A needs gold anchors. "
                "Pass gold= to read_annotations, or use dawid_skene for a gold-free estimate.")
    unmatched = int(g.dropped.get("gold for an item with no silver label", 0))
    other = {k: v for k, v in g.dropped.items() if k != "gold for an item with no silver label"}
    why = f"{g.rows_read} gold rows read, {g.rows_read - unmatched - sum(other.values())} match a history item"
    if other:
        why += " (" + "; ".join(f"{v} dropped: {k}" for k, v in other.items()) + ")"
    return (f"history {history.name!r} has no gold labels: {why}. Check that the gold table's item column holds the "
            f"history's item ids (history ids look like {list(map(str, history.item_ids[:3]))}); "
            "name the gold table's columns with gold_item_col= and gold_col= if they differ.")


def fit_stage_a(
    history: AnnotationSet | CompactHistory,
    *,
    tol: float = 1e-8,
    max_iter: int = 10_000,
    criterion: Literal["parameters", "loglik"] = "parameters",
    accelerate: bool = True,
    pseudo_count: float = 0.0,
    shrink: Shrink = "none",
    variance: Literal["sandwich", "model"] = "sandwich",
    covariance: bool = True,
    history_weight: float = 1.0,
    model_checks: ModelChecks | None = None,
    compress: bool = True,
    engine: Literal["auto", "numpy", "numba"] = "auto",
    progress: bool | _em.Progress = False,
    keep_design: bool = False,
) -> Calibration:
    """Stage A at a fixed history weight: the fit behind :func:`heroeval.calibrate`.

    The parameters are those of :func:`heroeval.calibrate` (which documents
    them), except that ``history_weight`` is a number and the model checks,
    when given, are a record already computed (``model_checks``), kept in
    ``Calibration.checks``. Running the checks and choosing the weight by
    cross-validation is the composition layer's work
    (:mod:`heroeval.workflows.api`); this function knows nothing of them.
    ``keep_design=True`` keeps, for refits of the same history
    (:class:`FoldFits`), the compiled engine's design and the observed
    information at the fit (``Calibration.history_design``,
    ``history_information``; None with the NumPy engine or without the
    covariance); :func:`heroeval.calibrate` drops them before it returns.
    """
    check_fit_settings(history, tol, max_iter, criterion, pseudo_count, variance, shrink)
    w = _check_weight(history_weight)
    if isinstance(history, CompactHistory):
        if engine == "numpy":
            raise HeroEvalError("a CompactHistory is fitted by the compiled engine; engine='numpy' needs "
                                "read_annotations")
        jit.require_numba("fitting a CompactHistory")
        return _fit_compact(history, tol=tol, max_iter=max_iter, criterion=criterion, accelerate=accelerate,
                            pseudo_count=pseudo_count, shrink=shrink, variance=variance, covariance=covariance,
                            w=w, progress=progress)
    use_numba = _choose_engine(engine, history.n_annotations)
    a0, b0, p0 = initial_values(history)
    tp, fn, tn, fp = gold_counts(history)
    prior, eb = stage_a_prior((tp, fn, tn, fp), pseudo_count, shrink)
    dc: _em.Design | None = None
    d_fit: _em.Design | _kernels.CompactDesign
    if use_numba:
        d_fit = _kernels.compact_design(
            history.item_ptr, history.labeler, history.label, history.n_labelers, history.gold, history.item_round,
            history.n_rounds, weight=None if w == 1.0 else np.where(history.gold >= 0, 1.0, w),
            pseudo_count=prior)
    else:
        d = weighted_design(history, w, prior)
        dc = _em.compress(d) if compress and history.covariates is None else None
        d_fit = d if dc is None else dc
    fit, conv = _run_em(d_fit, (a0, b0, p0), tol, max_iter, criterion, accelerate, progress)
    J = history.n_labelers
    if isinstance(d_fit, _kernels.CompactDesign) and d_fit.weight is None:  # its code counts hold them already
        n_ann = np.rint(d_fit.code_counts[0::2] + d_fit.code_counts[1::2]).astype(np.int64)
    else:
        n_ann = _em.bincount(history.labeler, J).astype(np.int64)
    n_items = _distinct_items_per_labeler(history) if history.repeated_pairs else n_ann.copy()
    isg = history.gold >= 0
    G = history.n_rounds
    cov_mean = cov_cov = None
    if history.covariates is not None:
        X = history.covariates
        cov_mean = X.mean(axis=0)
        cov_cov = np.atleast_2d(np.cov(X, rowvar=False, ddof=1)) if X.shape[0] > 1 else np.zeros((X.shape[1],) * 2)
    info: list[FloatArray] = []
    pcov = None
    if covariance:
        meat = cross = None
        if eb is not None:
            gi = np.flatnonzero(history.gold >= 0)
            xh = history.covariates
            meat, cross = eb_prior_covariance(history.take_items(gi), eb, fit.alpha, fit.beta, fit.prev,
                                              None if xh is None else xh[gi] - xh.mean(axis=0))
        pcov = parameter_covariance(d_fit, fit, history.covariates, variance, info, meat, cross)
    kept = d_fit if keep_design and isinstance(d_fit, _kernels.CompactDesign) else None
    if dc is not None:
        assert dc.row_of_item is not None
        fit = replace(fit, gamma=fit.gamma[dc.row_of_item])  # posteriors per item again
    return Calibration(
        labeler_ids=tuple(str(x) for x in history.labeler_ids),
        alpha=fit.alpha,
        beta=fit.beta,
        n_annotations=n_ann,
        n_items=n_items,
        gold_tp=tp,
        gold_fn=fn,
        gold_tn=tn,
        gold_fp=fp,
        round_ids=history.round_ids,
        round_prevalence=fit.prev,
        round_n_items=_em.bincount(history.item_round, G).astype(np.int64),
        round_n_gold=np.bincount(history.item_round[isg], minlength=G).astype(np.int64),
        covariate_names=history.covariate_names,
        covariate_mean=cov_mean,
        covariate_cov=cov_cov,
        n_covariate_items=0 if history.covariates is None else history.n_items,
        convergence=conv,
        covariance=pcov,
        settings={"tol": tol, "max_iter": max_iter, "criterion": criterion, "accelerate": accelerate,
                  **_prior_settings(pseudo_count, shrink, eb), "variance": variance, "history_weight": w,
                  "init": "gold subset, one pseudo-observation at the pooled gold rate",
                  "engine": "numba" if use_numba else "numpy"},
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        history=history,
        history_fit=fit,
        history_design=kept,
        history_information=info[0] if kept is not None and info else None,
        checks=model_checks,
        gold_scores=score_gold_items(history, fit.alpha, fit.beta),
    )


def _run_em(d: _em.Design | _kernels.CompactDesign, start: tuple[FloatArray, FloatArray, FloatArray], tol: float,
            max_iter: int, criterion: Literal["parameters", "loglik"], accelerate: bool,
            progress: bool | _em.Progress) -> tuple[_em.EMFit, ConvergenceInfo]:
    """Stage A's EM on a design, and how it ended (a ConvergenceWarning when it did not converge)."""
    fit = _em.run_em(d, *start, tol=tol, max_iter=max_iter, criterion=criterion, accelerate=accelerate,
                     progress=_progress_callback(progress), information=information_of(d))
    if not fit.converged:
        warnings.warn(
            f"Stage A EM did not converge in {fit.n_iter} iterations (last parameter change "
            f"{fit.max_change:.2e} > tol {tol:.0e}); raise max_iter",
            ConvergenceWarning,
            stacklevel=3,
        )
    return fit, ConvergenceInfo.from_fit(fit, tol, max_iter, criterion, accelerate)


def _fit_compact(history: CompactHistory, *, tol: float, max_iter: int, criterion: Literal["parameters", "loglik"],
                 accelerate: bool, pseudo_count: float, shrink: Shrink, variance: Literal["sandwich", "model"],
                 covariance: bool, w: float, progress: bool | _em.Progress) -> Calibration:
    """:func:`fit_stage_a` on a :class:`CompactHistory`: the design is its arrays (no copy); the gold-based pieces
    (starting values, gold counts, gold scores) read its decoded gold items; the calibration keeps no history."""
    gs = history.gold_set
    a0, b0, p0 = initial_values(gs)
    tp, fn, tn, fp = gold_counts(gs)
    prior, eb = stage_a_prior((tp, fn, tn, fp), pseudo_count, shrink)
    d = _kernels.design_of_codes(
        history.ptr, history.code, history.gold, history.group, history.n_labelers, history.n_rounds,
        weight=None if w == 1.0 else np.where(history.gold >= 0, 1.0, w), pseudo_count=prior)
    fit, conv = _run_em(d, (a0, b0, p0), tol, max_iter, criterion, accelerate, progress)
    J, G = history.n_labelers, history.n_rounds
    # labels per code: the design counted them already unless it weights the items
    n_ann = (d.code_counts if d.weight is None else _em.bincount(history.code, 2 * J)).astype(np.int64)
    n_ann = n_ann[0::2] + n_ann[1::2]
    n_items = (_kernels.distinct_items_per_labeler(history.ptr, history.code, J) if history.repeated_pairs
               else n_ann.copy())
    isg = history.gold >= 0
    meat = None if eb is None or not covariance else eb_prior_covariance(gs, eb, fit.alpha, fit.beta, fit.prev)[0]
    pcov = parameter_covariance(d, fit, None, variance, prior_meat=meat) if covariance else None
    return Calibration(
        labeler_ids=tuple(str(x) for x in history.labeler_ids), alpha=fit.alpha, beta=fit.beta,
        n_annotations=n_ann, n_items=n_items, gold_tp=tp, gold_fn=fn, gold_tn=tn, gold_fp=fp,
        round_ids=history.round_ids, round_prevalence=fit.prev,
        round_n_items=_em.bincount(history.group, G).astype(np.int64),
        round_n_gold=np.bincount(history.group[isg], minlength=G).astype(np.int64),
        covariate_names=(), covariate_mean=None, covariate_cov=None, n_covariate_items=0,
        convergence=conv, covariance=pcov,
        settings={"tol": tol, "max_iter": max_iter, "criterion": criterion, "accelerate": accelerate,
                  **_prior_settings(pseudo_count, shrink, eb), "variance": variance, "history_weight": w,
                  "init": "gold subset, one pseudo-observation at the pooled gold rate",
                  "engine": "numba", "history_storage": "compact"},
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        history=None,
        history_fit=None,
        checks=None,
        gold_scores=score_gold_items(gs, fit.alpha, fit.beta),
    )


NUMBA_MIN_ANNOTATIONS = 1_000_000
"""``engine="auto"`` compiles (numba) from this many history annotations on."""

_log = logging.getLogger("heroeval")


_said_no_numba = False


def _choose_engine(engine: str, n_annotations: int) -> bool:
    """True for the compiled engine.

    ``"auto"`` takes it from :data:`NUMBA_MIN_ANNOTATIONS` annotations on (below
    that its one-off compilation costs more than it saves). numba is a regular
    dependency; where it cannot be imported (a platform without its wheels),
    ``"auto"`` falls back to the NumPy engine and says so once per process.
    """
    global _said_no_numba
    if engine not in ("auto", "numpy", "numba"):
        raise HeroEvalError(f"engine must be 'auto', 'numpy' or 'numba', got {engine!r}")
    if engine == "numba":
        if not jit.HAVE_NUMBA:
            raise HeroEvalError("engine='numba' needs numba, which is not installed: pip install numba")
        return True
    wanted = engine == "auto" and n_annotations >= NUMBA_MIN_ANNOTATIONS
    if wanted and not jit.HAVE_NUMBA and not _said_no_numba:
        _said_no_numba = True
        warnings.warn(
            f"numba is not installed: Stage A runs on the NumPy engine, about five times slower on "
            f"{n_annotations:,} annotations than the compiled one (pip install numba)",
            HeroEvalWarning,
            stacklevel=3,
        )
    return wanted and jit.HAVE_NUMBA


def _progress_callback(progress: bool | _em.Progress) -> _em.Progress | None:
    if progress is False or progress is None:
        return None
    if callable(progress):
        return progress
    if progress is True:
        def log(n: int, ll: float, change: float) -> None:
            _log.info("Stage A EM: %d map evaluations, log-likelihood %.6f, max parameter change %.2e", n, ll, change)

        return log
    raise HeroEvalError(f"progress must be True, False or a callable, got {progress!r}")


def _check_weight(w: Any) -> float:
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not (0.0 <= float(w) <= 1.0):
        raise HeroEvalError(f"history_weight must be a number in [0, 1] or 'cv', got {w!r}")
    return float(w)


def weighted_design(history: AnnotationSet, w: float, pseudo_count: PriorCounts = 0.0) -> _em.Design:
    """Stage A's design with gold-free items weighted by ``w`` (gold items keep weight 1)."""
    d = design_of(history)
    weight = None if w == 1.0 else np.where(history.gold >= 0, 1.0, w)
    return replace(d, pseudo_count=pseudo_count, weight=weight)


