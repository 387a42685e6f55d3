"""Stage A: gold-anchored EM on the history, and the calibration it produces."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from heroeval.core.jsonfile import dumps_json, read_json
from heroeval.errors import CalibrationFileError, HeroEvalError
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a import kernels, two_coin
from heroeval.stage_a.checks_record import ModelChecks
from heroeval.stage_a.covariance import ParameterCovariance
from heroeval.stage_a.gold import GoldLabels, GoldScores
from heroeval.version import __version__

__all__ = [
    "Calibration",
    "ConvergenceInfo",
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
        return asdict(self)

    @classmethod
    def from_fit(cls, fit: two_coin.EMFit, tol: float, max_iter: int, criterion: str, accelerate: bool) -> ConvergenceInfo:
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
    gold_labels : GoldLabels or None
        Every gold item's labels (up to 5 million), for the estimators that use the gold items alone
        (Rogan–Gladen's standard error); saved with the calibration, so that a reloaded calibration gives the
        same standard errors. None for files written before it was kept (the gold counts serve).
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
    history_fit: two_coin.EMFit | None = field(default=None, repr=False, compare=False)
    history_design: kernels.CompactDesign | None = field(default=None, repr=False, compare=False)
    history_information: FloatArray | None = field(default=None, repr=False, compare=False)
    checks: ModelChecks | None = field(default=None, repr=False, compare=False)
    gold_scores: GoldScores | None = field(default=None, repr=False, compare=False)
    gold_labels: GoldLabels | None = field(default=None, repr=False, compare=False)

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
            "gold_labels": None if self.gold_labels is None else self.gold_labels.to_dict(),
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

    glabels = None
    if obj.get("gold_labels") is not None:  # absent from files written before 0.2: the gold counts serve
        try:
            glabels = GoldLabels.from_dict(obj["gold_labels"], len(ids))
        except HeroEvalError as exc:
            raise fail("gold_labels", str(exc)) from exc

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
        gold_labels=glabels,
    )
