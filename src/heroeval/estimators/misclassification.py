"""Rogan–Gladen: each labeler's positive rate corrected by its gold-estimated sensitivity and specificity,
pooled over labelers with minimum-variance weights (and the empirical-Bayes lift of boundary counts)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from heroeval.errors import (
    HeroEvalError,
)
from heroeval.estimators.common import (
    FloatArray,
    align,
    check_calibration,
    check_current,
    result_of,
)
from heroeval.estimators.inversion import MomentTest
from heroeval.estimators.results import EstimateResult, Influence
from heroeval.ingest.annotations import AnnotationSet
from heroeval.stage_a.calibration import Calibration
from heroeval.stage_a.gold import GoldLabels
from heroeval.stage_a.prior import beta_binomial_prior

__all__ = ["rogan_gladen"]


def rogan_gladen(
    current: AnnotationSet,
    calibration: Calibration,
    *,
    weights: Literal["pooled", "diagonal", "correlated"] = "diagonal",
    min_youden: float = 0.05,
    exclude_new_labelers: bool = False,
    shrink: Literal["none", "eb"] = "none",
) -> EstimateResult:
    """Dependence-robust moment estimator: per-labeler Rogan–Gladen, pooled.

    Each labeler j of the current round with ``n_j`` labels and positive share
    ``p_j`` gives ``mu_j = (p_j + beta_j - 1) / (alpha_j + beta_j - 1)``, with
    its sensitivity and specificity from the history's gold items alone
    (the plain proportions ``tp / (tp + fn)`` and ``tn / (tn + fp)``: Laplace
    smoothing would bias every ``mu_j`` towards 1/2). ``E[p_j] = mu alpha_j +
    (1 - mu)(1 - beta_j)`` holds whatever the dependence between labelers, so
    each ``mu_j`` is unbiased for the rate when the labeler's error rates
    transport from history; no likelihood over label patterns is assumed.
    The estimate is ``sum_j w_j mu_j`` with ``sum_j w_j = 1``:

    * ``weights="diagonal"`` (default): ``w_j`` proportional to the inverse of
      ``mu_j``'s model variance ``[pbar_j (1 - pbar_j) / n_j + mu^2 var(alpha_j)
      + (1 - mu)^2 var(beta_j)] / (alpha_j + beta_j - 1)^2`` at a pooled
      preliminary rate (``pbar_j`` the implied positive share), so labelers
      with few labels or little gold count little;
    * ``weights="correlated"``: the minimum-variance non-negative weights for
      the covariance of the ``mu_j`` built from the per-item influence values
      (current items and history gold items), whose correlations capture
      labelers that err together; correlations are shrunk half-way to zero;
    * ``weights="pooled"``: the ratio ``sum_j c_j (p_j + beta_j - 1) / sum_j
      c_j (alpha_j + beta_j - 1)`` (the weighted mean of the ``mu_j`` with
      weights ``c_j (alpha_j + beta_j - 1)``, so a labeler's noisy Youden index
      is not squared into its weight), ``c_j`` the optimal weight of labeler
      j's moment equation (its Youden index over its variance) computed from
      empirical-Bayes (beta-binomial, method of moments) shrunk rates, and
      labelers selected by their shrunk Youden index. The ratio keeps the
      plain proportions, so shrinkage moves only the weights. Tried for
      crowds with little gold per labeler; it did not beat the diagonal
      weights on the real sets (docs/research/robustness.md).

    ``shrink="eb"`` replaces every labeler's gold proportions, in the moment
    equations, the weights and the choice of labelers alike, by their
    empirical-Bayes posterior means ``(tp + k m) / (n_pos + k)`` (and
    likewise for the specificity), under a ``Beta(k m, k (1 - m))`` prior per
    class fitted to the pool of labelers by the beta-binomial method of
    moments (the prior ``weights="pooled"`` uses; ``m`` the pooled proportion).
    A labeler with few gold items is pulled towards the pool; with no
    evidence of heterogeneity between labelers every labeler gets ``m``. The
    ``mu_j`` are then no longer unbiased one by one (shrinkage trades bias
    for variance), but a labeler's wild proportion from three gold items no
    longer makes a wild ``mu_j``. In the standard error ``k`` is held fixed
    and ``m`` is not: a gold item moves labeler j's shrunk rate by
    ``1 / (n_pos_j + k)`` per label of j (instead of ``1 / n_pos_j``) plus
    ``k / (n_pos_j + k)`` times its move of ``m`` (``1 / N_pos`` per label of
    any labeler), so the interval stays first-order correct for the shrunk
    estimator's target given ``k``. The variances in the weights are the
    posterior variances ``a (1 - a) / (n_pos + k + 1)``.
    Measured on the real sets in docs/research/robustness.md.

    Labelers whose Youden index ``alpha_j + beta_j - 1`` is at most
    ``min_youden`` (uninformative or adversarial on the gold) are left out and
    named in ``details``. The standard error comes from per-item influence
    values: current items carry every label on them (so labelers that err
    together on an item are not treated as independent), and, when the
    calibration holds its history, the history's gold items likewise;
    from a calibration file the gold counts' binomial variances are used.
    The weights are treated as fixed (to first order they do not matter
    when every ``mu_j`` targets the same rate).

    Examples
    --------
    >>> import heroeval as he
    >>> hist = he.AnnotationSet.from_arrays(
    ...     [1, 2, 3, 4], ["a"] * 4, [1, 1, 0, 0], gold=([1, 2, 3, 4], [1, 0, 0, 0]))
    >>> cal = he.calibrate(hist)       # a on the gold: sensitivity 1/1, specificity 2/3
    >>> cur = he.AnnotationSet.from_arrays([5, 6, 7, 8, 9], ["a"] * 5, [1, 1, 1, 0, 0])
    >>> round(he.rogan_gladen(cur, cal).estimate, 6)   # (3/5 + 2/3 - 1) / (1 + 2/3 - 1)
    0.4
    """
    data = check_current(current)
    cal = check_calibration(calibration)
    if weights not in ("pooled", "diagonal", "correlated"):
        raise HeroEvalError(f"weights must be 'pooled', 'diagonal' or 'correlated', got {weights!r}")
    if shrink not in ("none", "eb"):
        raise HeroEvalError(f"shrink must be 'none' or 'eb', got {shrink!r}")
    if not (isinstance(min_youden, (int, float)) and 0 <= min_youden < 1):
        raise HeroEvalError(f"min_youden must be in [0, 1), got {min_youden!r}")
    al = align(data, cal, exclude_new_labelers)
    cur = al.data
    J = cal.n_labelers
    npos = (cal.gold_tp + cal.gold_fn).astype(float)
    nneg = (cal.gold_tn + cal.gold_fp).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.where(npos > 0, cal.gold_tp / np.maximum(npos, 1.0), 0.5)
        b = np.where(nneg > 0, cal.gold_tn / np.maximum(nneg, 1.0), 0.5)
    # the rates in the moment equations: the plain proportions a, b, or their empirical-Bayes posterior means
    # lam a + (1 - lam) m with lam = n / (n + k); a gold label's influence is lifted onto the plain proportions
    # through the linear map _EbLift (k held fixed)
    lift_a = _EbLift.fit(cal.gold_tp.astype(float), npos, shrink == "eb")
    lift_b = _EbLift.fit(cal.gold_tn.astype(float), nneg, shrink == "eb")
    a_m = lift_a.rates(a)
    b_m = lift_b.rates(b)
    youden = a_m + b_m - 1
    lab = al.to_calib[cur.labeler]
    z = cur.label.astype(np.float64)
    n_j = np.bincount(lab, minlength=J).astype(np.float64)
    s_j = np.bincount(lab, weights=z, minlength=J)
    if weights == "pooled" and shrink == "eb":
        a_s, b_s, sel_youden = a_m, b_m, youden
    elif weights == "pooled":
        # empirical-Bayes (beta-binomial) shrinkage of each labeler's gold proportions towards the pool,
        # used only to choose which labelers count and how much: the estimating equation keeps the plain
        # (unbiased) proportions
        a_s = _eb_shrink(cal.gold_tp.astype(float), npos)
        b_s = _eb_shrink(cal.gold_tn.astype(float), nneg)
        sel_youden = a_s + b_s - 1
    else:
        a_s, b_s, sel_youden = a, b, youden
    use = (n_j > 0) & (sel_youden > min_youden) & (npos > 0) & (nneg > 0)
    present = n_j > 0
    dropped = [cal.labeler_ids[k] for k in np.flatnonzero(present & ~use)]
    details: dict[str, Any] = {**al.details, "weights": weights, "labelers_used": int(use.sum()),
                               "labelers_left_out": dropped, "min_youden": min_youden}
    if shrink == "eb":
        details["shrink"] = "eb"
        details["eb_prior"] = {"sensitivity": lift_a.summary(), "specificity": lift_b.summary()}
    if not use.any():
        return result_of("rogan_gladen", math.nan, cur, status="unidentified", details=details,
                       notes=(*al.notes, "no current labeler has gold-based sensitivity + specificity above "
                              f"1 + {min_youden}: the rate is not identified"))
    u = np.flatnonzero(use)
    p = s_j[u] / n_j[u]
    Y = youden[u]
    with np.errstate(invalid="ignore", divide="ignore"):
        mu_j = np.where(np.abs(Y) > 1e-12, (p + b_m[u] - 1) / np.where(np.abs(Y) > 1e-12, Y, 1.0), np.nan)
    pos_in_u = np.full(J, -1, dtype=np.int64)
    pos_in_u[u] = np.arange(u.size)
    k_of = pos_in_u[lab]
    ok = k_of >= 0
    item_of = cur.annotation_item
    # the gold items and their labels: kept in the calibration (and its file), else read from the history; with
    # neither (a file written before they were kept) the per-labeler gold counts serve
    hist: AnnotationSet | GoldLabels | None = cal.gold_labels if cal.gold_labels is not None else cal.history
    # every variant is sum_j c_j (p_j + beta_j - 1) / sum_j c_j (alpha_j + beta_j - 1) for some c_j, i.e.
    # sum_j w_j mu_j with w_j proportional to c_j Youden_j; below: the coefficients of each labeler's
    # (z - p_j) / n_j on current items (wcur) and of alpha_j, beta_j (wa, wb) in the linear term
    if weights == "pooled":
        Ys = sel_youden[u]
        if shrink == "eb":  # posterior variances
            va_s = lift_a.posterior_var(a_m)[u]
            vb_s = lift_b.posterior_var(b_m)[u]
        else:
            va_s = a_s[u] * (1 - a_s[u]) / npos[u]
            vb_s = b_s[u] * (1 - b_s[u]) / nneg[u]

        def c_of(m0: float) -> FloatArray:
            # optimal weights of the moment equations E[p_j] = m a_j + (1 - m)(1 - b_j): slope / variance,
            # at the shrunk rates (so a labeler's weight hardly depends on its own gold noise)
            pbar = np.clip(m0 * a_s[u] + (1 - m0) * (1 - b_s[u]), 1e-3, 1 - 1e-3)
            out: FloatArray = Ys / (pbar * (1 - pbar) / n_j[u] + m0**2 * va_s + (1 - m0) ** 2 * vb_s)
            return out

        num = p + b_m[u] - 1
        c = n_j[u] * Ys
        m0 = float(np.clip(c @ num / (c @ Y), 0.02, 0.98)) if c @ Y > 0 else 0.5
        for _ in range(2):
            c = c_of(m0)
            m0 = float(np.clip(c @ num / (c @ Y), 0.02, 0.98)) if c @ Y > 0 else 0.5
        D = float(c @ Y)
        if not D > 0:
            return result_of("rogan_gladen", math.nan, cur, status="unidentified", details=details,
                           notes=(*al.notes, "the pooled Youden index of the current labelers is not positive: "
                                  "the rate is not identified"))
        mu = float(c @ num) / D
        w = c * Y / D
        wcur = c / D
        wa = -mu * c / D
        wb = (1 - mu) * c / D
        var_a = va_s
        var_b = vb_s
    else:
        if shrink == "eb":  # posterior variances
            var_a = lift_a.posterior_var(a_m)[u]
            var_b = lift_b.posterior_var(b_m)[u]
        else:
            # binomial variances at Laplace-smoothed rates, so a labeler perfect on few gold items is not certain
            la = (cal.gold_tp[u] + 1.0) / (npos[u] + 2.0)
            lb = (cal.gold_tn[u] + 1.0) / (nneg[u] + 2.0)
            var_a = la * (1 - la) / npos[u]
            var_b = lb * (1 - lb) / nneg[u]

        def model_var(m0: float) -> FloatArray:
            pbar = np.clip(m0 * a_m[u] + (1 - m0) * (1 - b_m[u]), 1e-3, 1 - 1e-3)
            out: FloatArray = (pbar * (1 - pbar) / n_j[u] + m0**2 * var_a + (1 - m0) ** 2 * var_b) / Y**2
            return out

        w = n_j[u] * Y**2
        m0 = float(np.clip(w @ mu_j / w.sum(), 0.02, 0.98))
        for _ in range(2):  # the model variance depends on the rate only mildly: two refinements
            w = 1.0 / model_var(m0)
            m0 = float(np.clip(w @ mu_j / w.sum(), 0.02, 0.98))
        ca = -mu_j / Y  # d mu_j / d alpha_j
        cb = (1 - mu_j) / Y  # d mu_j / d beta_j
        if weights == "correlated" and u.size > 1:
            cv = (z[ok] - p[k_of[ok]]) / (n_j[u][k_of[ok]] * Y[k_of[ok]])
            M = np.zeros((cur.n_items, u.size))
            np.add.at(M, (item_of[ok], k_of[ok]), cv)
            S = M.T @ M
            if hist is not None:
                # each labeler's own gold only (the shrinkage's pull through the pooled m is left out of
                # these correlations, which only set the weights)
                Hm = _gold_item_influence(hist, u, a, b, npos, nneg, ca * lift_a.lam[u], cb * lift_b.lam[u],
                                          per_labeler=True)
                S = S + Hm.T @ Hm
            else:
                S = S + np.diag(ca**2 * var_a + cb**2 * var_b)
            w = _min_variance_weights(S, model_var(m0))
        w = w / w.sum()
        mu = float(w @ mu_j)
        wcur = w / Y
        wa = w * ca
        wb = w * cb
    cur_vals = (z[ok] - p[k_of[ok]]) / n_j[u][k_of[ok]]
    current_if = np.asarray(np.bincount(item_of[ok], weights=wcur[k_of[ok]] * cur_vals, minlength=cur.n_items),
                            dtype=np.float64) * float(cur.n_items)
    raw = mu
    status = "ok"
    if mu <= 0.0 or mu >= 1.0:
        status = "boundary_0" if mu <= 0.0 else "boundary_1"
        mu = min(max(mu, 0.0), 1.0)
    # the moment test behind the test-inversion interval: variances at the null rate
    n_u = n_j[u]
    indep = float(np.sum(wcur**2 * p * (1 - p) / n_u))
    obs = float(current_if @ current_if) / float(cur.n_items) ** 2
    deff = max(1.0, obs / indep) if indep > 0 else 1.0
    zero = np.zeros(u.size)

    def gold_if(ca_u: FloatArray, cb_u: FloatArray) -> FloatArray:
        # influence of each history item on sum_j ca_j a_m_j + cb_j b_m_j (labelers u)
        assert hist is not None
        if shrink == "none":
            return _gold_item_influence(hist, u, a, b, npos, nneg, ca_u, cb_u, per_labeler=False)[:, 0]
        return _gold_item_influence(hist, np.arange(J), a, b, npos, nneg, lift_a.lift(u, ca_u),
                                    lift_b.lift(u, cb_u), per_labeler=False)[:, 0]

    # the plain proportions' binomial variances (the gold-count form)
    va_plain = np.where(npos > 0, a * (1 - a) / np.maximum(npos, 1.0), 0.0)
    vb_plain = np.where(nneg > 0, b * (1 - b) / np.maximum(nneg, 1.0), 0.0)
    if hist is not None:
        hA = gold_if(wcur, zero)
        hB = gold_if(zero, wcur)
        hAA, hAB, hBB = float(hA @ hA), float(hA @ hB), float(hB @ hB)
    elif shrink == "none":
        hAA, hAB, hBB = float(np.sum(wcur**2 * va_plain[u])), 0.0, float(np.sum(wcur**2 * vb_plain[u]))
    else:
        hAA = float(np.sum(lift_a.lift(u, wcur) ** 2 * va_plain))
        hAB, hBB = 0.0, float(np.sum(lift_b.lift(u, wcur) ** 2 * vb_plain))
    test = MomentTest(center=mu, raw=raw, coef=np.asarray(wcur, dtype=float), a=a_m[u], b=b_m[u], n_j=n_u,
                      deff=deff, hAA=hAA, hAB=hAB, hBB=hBB)
    details["weight_by_labeler"] = {cal.labeler_ids[k]: float(x) for k, x in zip(u, w, strict=True)}
    details["labeler_estimates"] = {cal.labeler_ids[k]: float(x) for k, x in zip(u, mu_j, strict=True)}
    if hist is not None:
        infl = Influence(current_if, "items", gold_if(wa, wb), None, hash(cal.token))
    else:
        cc = np.zeros(2 * J)
        if shrink == "none":
            cc[u] = wa
            cc[J + u] = wb
        else:  # coefficients on the plain proportions, whose variances follow
            cc[:J] = lift_a.lift(u, wa)
            cc[J:] = lift_b.lift(u, wb)
        tp, fn, tn, fp = cal.gold_tp, cal.gold_fn, cal.gold_tn, cal.gold_fp
        va = (tp * (1 - a) ** 2 + fn * a**2) / np.maximum(npos, 1.0) ** 2
        vb = (tn * (1 - b) ** 2 + fp * b**2) / np.maximum(nneg, 1.0) ** 2
        infl = Influence(current_if, "gold_counts", cc, np.concatenate([va, vb]), hash(cal.token))
    return result_of("rogan_gladen", mu, cur, status=status, details=details, notes=al.notes, influence=infl,
                   test=test)


@dataclass(frozen=True)
class _EbLift:
    """Empirical-Bayes rates ``lam a + (1 - lam) m`` (``lam = n / (n + k)``) as a linear map of the plain ``a``.

    ``m = sum_l n_l a_l / N`` is the pooled proportion and ``k`` is held fixed, so a coefficient vector
    ``c`` on the shrunk rates is the coefficient vector ``lift(c) = c lam + (sum_j c_j (1 - lam_j)) n / N``
    on the plain proportions. ``active=False``: the identity (``lam = 1``).
    """

    m: float
    k: float
    lam: FloatArray
    n: FloatArray
    active: bool

    @classmethod
    def fit(cls, success: FloatArray, n: FloatArray, active: bool) -> _EbLift:
        if not active:
            return cls(math.nan, math.nan, np.ones(n.shape), n, False)
        m, k = beta_binomial_prior(success, n)
        lam = np.zeros(n.shape) if math.isinf(k) else n / (n + k)
        return cls(m, k, lam, n, True)

    def rates(self, plain: FloatArray) -> FloatArray:
        if not self.active:
            return plain
        out: FloatArray = self.lam * plain + (1 - self.lam) * self.m
        return out

    def posterior_var(self, rate: FloatArray) -> FloatArray:
        out: FloatArray = rate * (1 - rate) / (self.n + self.k + 1)  # 0 at k = inf
        return out

    def lift(self, u: npt.NDArray[np.int64], c_u: FloatArray) -> FloatArray:
        c = np.zeros(self.n.shape)
        c[u] = c_u
        if not self.active:
            return c
        N = float(self.n[self.n > 0].sum())
        out: FloatArray = c * self.lam + float(c @ (1 - self.lam)) * np.where(self.n > 0, self.n, 0.0) / N
        return out

    def summary(self) -> dict[str, float | None]:
        return {"mean": self.m, "strength": None if math.isinf(self.k) else self.k}


def _eb_shrink(success: FloatArray, n: FloatArray) -> FloatArray:
    """Empirical-Bayes posterior means of per-labeler proportions ``success / n`` (beta-binomial, moments).

    The prior ``Beta(k m, k (1 - m))`` has ``m`` the pooled proportion and ``k`` from the method of
    moments: the between-labeler variance ``tau^2`` is the variance of the labelers' proportions (weighted
    by ``n``) less their mean binomial variance, and ``k = m (1 - m) / tau^2 - 1``. Labelers with ``n = 0``
    get ``m``. With ``tau^2 <= 0`` (no evidence of heterogeneity) every labeler gets ``m``.

    Examples
    --------
    >>> from heroeval.estimators.misclassification import _eb_shrink
    >>> import numpy as np
    >>> _eb_shrink(np.array([1.0, 3.0]), np.array([2.0, 6.0])).round(3).tolist()   # both at the pool: 1/2
    [0.5, 0.5]
    """
    m, k = beta_binomial_prior(success, n)
    if math.isinf(k):
        return np.full(n.shape, m)
    out: FloatArray = (success + k * m) / (n + k)
    return out


def _gold_item_influence(
    hist: AnnotationSet | GoldLabels,
    u: npt.NDArray[np.int64],
    a: FloatArray,
    b: FloatArray,
    npos: FloatArray,
    nneg: FloatArray,
    ca: FloatArray,
    cb: FloatArray,
    per_labeler: bool,
) -> FloatArray:
    """Influence of each history item on ``ca_j alpha_j + cb_j beta_j`` (gold-only proportions) for labelers ``u``.

    Item g with gold 1 moves ``alpha_j`` by ``sum (z - alpha_j) / n_pos_j`` over j's labels on g;
    gold 0 moves ``beta_j`` likewise. Returns (history items x len(u)) when ``per_labeler``,
    else (history items x 1) summed over labelers (``hist`` the gold items alone: gold items instead of history items).
    """
    J = a.size
    coef_a = np.zeros(J)
    coef_b = np.zeros(J)
    coef_a[u] = ca
    coef_b[u] = cb
    item_of = hist.annotation_item
    g = hist.gold[item_of]
    lab = hist.labeler.astype(np.int64)
    z = hist.label.astype(np.float64)
    val = np.where(g == 1, (z - a[lab]) / np.maximum(npos[lab], 1.0), ((1 - z) - b[lab]) / np.maximum(nneg[lab], 1.0))
    coef = np.where(g == 1, coef_a[lab], np.where(g == 0, coef_b[lab], 0.0))
    if per_labeler:
        pos_in_u = np.full(J, -1, dtype=np.int64)
        pos_in_u[u] = np.arange(u.size)
        k = pos_in_u[lab]
        ok = (k >= 0) & (g >= 0)
        out = np.zeros((hist.n_items, u.size))
        np.add.at(out, (item_of[ok], k[ok]), (coef * val)[ok])
        return out
    ok = g >= 0
    res = np.bincount(item_of[ok], weights=(coef * val)[ok], minlength=hist.n_items).astype(np.float64)
    return res[:, None]


def _min_variance_weights(S: FloatArray, model_var: FloatArray, shrink: float = 0.5) -> FloatArray:
    """Non-negative weights summing to 1 minimising ``w' C w``.

    ``C`` has the model variances on its diagonal and the influence-value
    correlations of ``S``, shrunk by ``shrink`` towards zero, off it.
    """
    from scipy.optimize import minimize

    d = np.sqrt(np.maximum(np.diag(S), 1e-300))
    R = S / np.outer(d, d)
    R = (1 - shrink) * R + shrink * np.eye(R.shape[0])
    sd = np.sqrt(model_var)
    C = R * np.outer(sd, sd)
    k = C.shape[0]
    w0 = (1 / model_var) / np.sum(1 / model_var)
    if k > 300:  # the quadratic programme gets slow; the diagonal weights are the fallback
        return w0
    scale = float(w0 @ C @ w0)
    res = minimize(
        lambda x: float(x @ C @ x) / scale, w0, jac=lambda x: 2 * (C @ x) / scale, method="SLSQP",
        bounds=[(0.0, 1.0)] * k, constraints=[{"type": "eq", "fun": lambda x: float(x.sum()) - 1.0}],
        options={"maxiter": 200, "ftol": 1e-12},
    )
    w = np.clip(res.x, 0.0, None) if res.success else w0
    out: FloatArray = w / w.sum()
    return out
