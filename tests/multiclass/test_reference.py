"""Against an independent plain implementation, and finite-difference checks of scores and information."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp

from heroeval.multiclass import calibrate_multiclass, hero1_multiclass, multiclass_from_arrays, solve_simplex
from heroeval.multiclass import confusion_model as M
from heroeval.multiclass import estimators as E


def _random_data(seed: int, K: int = 3, J: int = 4, N: int = 180, n: int = 60):
    rng = np.random.default_rng(seed)
    # every confusion entry well inside (0, 1), so the maximum likelihood is interior
    conf = np.stack([[0.5 * (np.arange(K) == c) + 0.5 * rng.dirichlet(np.full(K, 8.0)) for c in range(K)]
                     for _ in range(J)])
    prev = rng.dirichlet(np.full(K, 3.0))

    def draw(m, prefix):
        y = rng.choice(K, m, p=prev)
        rows = []
        for i in range(m):
            for j in rng.choice(J, 3, replace=False):
                rows.append((f"{prefix}{i:03d}", f"L{j}", int(rng.choice(K, p=conf[j, y[i]]))))
        return rows, y

    h, yh = draw(N, "h")
    gi = np.arange(0, N, 2)
    hist = multiclass_from_arrays(*zip(*h, strict=True), classes=list(range(K)),
                                  gold=([f"h{i:03d}" for i in gi], yh[gi]))
    c, _ = draw(n, "c")
    cur = multiclass_from_arrays(*zip(*c, strict=True), classes=list(range(K)))
    return hist, cur


def _plain_em(hist, K, iters=5000):
    """Loop-by-loop gold-anchored Dawid-Skene EM, full confusion matrices, one round."""
    ds = hist.annotations
    J = ds.n_labelers
    items = [[(int(ds.labeler[a]), int(ds.label[a])) for a in range(ds.item_ptr[i], ds.item_ptr[i + 1])]
             for i in range(ds.n_items)]
    gold = [int(g) for g in ds.gold]
    # start: the same documented start (gold counts + one pooled pseudo-observation)
    cnt = np.zeros((J, K, K))
    for i, labs in enumerate(items):
        if gold[i] >= 0:
            for j, lab in labs:
                cnt[j, gold[i], lab] += 1
    pooled = cnt.sum(0) / cnt.sum(0).sum(1, keepdims=True)
    pi = (cnt + pooled) / (cnt.sum(2, keepdims=True) + 1)
    p = np.array([np.mean([g == c for g in gold if g >= 0]) for c in range(K)])
    p = np.clip(p, 0.01, 0.99) / np.clip(p, 0.01, 0.99).sum()
    for _ in range(iters):
        post = []
        for i, labs in enumerate(items):
            if gold[i] >= 0:
                w = np.zeros(K)
                w[gold[i]] = 1
            else:
                lw = np.log(p).copy()
                for j, lab in labs:
                    lw += np.log(pi[j, :, lab])
                w = np.exp(lw - logsumexp(lw))
            post.append(w)
        n = np.zeros((J, K, K))
        for i, labs in enumerate(items):
            for j, lab in labs:
                n[j, :, lab] += post[i]
        new_pi = n / n.sum(2, keepdims=True)
        new_p = np.mean(post, axis=0)
        done = max(np.abs(new_pi - pi).max(), np.abs(new_p - p).max()) < 1e-11
        pi, p = new_pi, new_p
        if done:
            break
    return pi, p


def _plain_hero1(cur, pi, K):
    """Maximise the current round's likelihood over the simplex with a generic optimiser (softmax)."""
    ds = cur.annotations
    lam = np.zeros((ds.n_items, K))
    for i in range(ds.n_items):
        for a in range(ds.item_ptr[i], ds.item_ptr[i + 1]):
            lam[i] += np.log(pi[ds.labeler[a], :, ds.label[a]])

    def nll(z):
        lp = z - logsumexp(z)
        return -logsumexp(lam + lp, axis=1).sum()

    r = minimize(nll, np.zeros(K), method="BFGS", options={"gtol": 1e-11})
    return np.exp(r.x - logsumexp(r.x))


@pytest.mark.parametrize("seed", [1])
def test_em_and_hero1_against_plain_loops(seed: int) -> None:
    K = 3
    hist, cur = _random_data(seed, K)
    cal = calibrate_multiclass(hist, tol=1e-12, max_iter=200_000)
    pi, p = _plain_em(hist, K)
    np.testing.assert_allclose(cal.confusion, pi, atol=1e-6)
    np.testing.assert_allclose(cal.round_prevalence[0], p, atol=1e-6)
    # the current round's labelers must be in the history
    est = hero1_multiclass(cur, cal, exclude_new_labelers=True)
    np.testing.assert_allclose(est.estimate, _plain_hero1(cur, cal.confusion, K), atol=1e-6)


def test_single_labeler_closed_form() -> None:
    """One labeler: the MLE solves confusion' p = observed label shares when that is in the simplex."""
    conf = np.array([[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.05, 0.15, 0.8]])
    q = np.array([0.3, 0.3, 0.4])
    counts = np.round(q * 1000).astype(int)
    lam = np.log(np.repeat(conf.T, counts, axis=0))  # an item labelled l has likelihood conf[:, l]
    p, st = solve_simplex(lam)
    np.testing.assert_allclose(p, np.linalg.solve(conf.T, q), atol=1e-10)
    assert st == "ok"


def test_simplex_boundary_kkt() -> None:
    """When the unconstrained solution leaves the simplex, a class sits at 0 and KKT holds."""
    conf = np.array([[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.05, 0.15, 0.8]])
    q = np.array([0.6, 0.05, 0.35])  # solve(conf.T, q) has a negative middle entry
    assert np.linalg.solve(conf.T, q)[1] < 0
    counts = np.round(q * 1000).astype(int)
    lam = np.log(np.repeat(conf.T, counts, axis=0))
    p, _ = solve_simplex(lam)
    assert p[1] == 0.0
    f = np.exp(lam)
    grad = (f / (f @ p)[:, None]).mean(axis=0)
    np.testing.assert_allclose(grad[[0, 2]], 1.0, atol=1e-9)
    assert grad[1] <= 1 + 1e-9
    r = minimize(lambda z: -np.log(np.exp(lam) @ np.exp(z - logsumexp(z))).sum(), np.zeros(3), method="BFGS",
                 options={"gtol": 1e-10})
    np.testing.assert_allclose(p, np.exp(r.x - logsumexp(r.x)), atol=1e-4)  # softmax can only approach 0


def _perturbed(structure, fit, k, h, J, q, K):
    """The fit's parameters moved by h along parameter k (labeler blocks then round blocks)."""
    pi, theta, prev = fit.pi.copy(), None if fit.theta is None else fit.theta.copy(), fit.prev.copy()
    if k < J * q:
        j, m = divmod(k, q)
        if structure == "full":
            c, mm = divmod(m, K - 1)
            ref = M.row_refs(fit.pi)[j, c]
            col = M._nonref_cols(np.array(ref), K)[mm]
            pi[j, c, col] += h
            pi[j, c, ref] -= h
        else:
            theta[j] += h
            pi = M.conf_from_theta(structure, theta, K)
    else:
        g, mm = divmod(k - J * q, K - 1)
        ref = M.row_refs(fit.prev)[g]
        col = M._nonref_cols(np.array(ref), K)[mm]
        prev[g, col] += h
        prev[g, ref] -= h
    return pi, theta, prev


@pytest.mark.parametrize("structure", ["full", "symmetric", "ordinal"])
def test_scores_and_information_by_finite_differences(structure: str) -> None:
    """Score = gradient of the log-likelihood; Louis information = minus its Hessian (at a non-optimal point)."""
    K = 3
    hist, _ = _random_data(5, K)
    hist = type(hist)(hist.annotations, hist.classes, hist.values, True)
    cal = calibrate_multiclass(hist, structure=structure, tol=1e-10)
    d = cal.information.d
    # move away from the optimum so the check is not only at a zero score
    fit0 = cal.information.fit
    pi, theta, prev = fit0.pi, fit0.theta, fit0.prev
    if structure == "full":
        pi = 0.9 * pi + 0.1 / K
    else:
        theta = theta * 0.9 + (0.02 if structure == "symmetric" else 0.1)
        pi = M.conf_from_theta(structure, theta, K)
    prev = 0.8 * prev + 0.2 / K

    def fit_at(pi_, th_, prev_):
        w, ll = M.e_step(d, pi_, prev_)
        return M.Fit(pi_, th_, prev_, w, ll, 0, True, 0.0)

    fit = fit_at(pi, theta, prev)
    info = M.Information(d, structure, fit)
    J, q = d.J, info.q
    score = np.asarray(info.S.sum(axis=0)).ravel()
    H = info.matvec(np.eye(info.P))
    h = 1e-5
    for k in range(info.P):
        up = fit_at(*_perturbed(structure, fit, k, h, J, q, K))
        dn = fit_at(*_perturbed(structure, fit, k, -h, J, q, K))
        assert abs((up.loglik - dn.loglik) / (2 * h) - score[k]) < 1e-5 * max(1, abs(score[k]))
        s_up = np.asarray(M.Information(d, structure, up).S.sum(axis=0)).ravel()
        s_dn = np.asarray(M.Information(d, structure, dn).S.sum(axis=0)).ravel()
        np.testing.assert_allclose(-(s_up - s_dn) / (2 * h), H[:, k], rtol=1e-4, atol=1e-4)
    # the dense build agrees with the matrix-free product
    f = info.free
    np.testing.assert_allclose(info.dense_free(), H[np.ix_(f, f)], atol=1e-8)


@pytest.mark.parametrize("structure", ["full", "symmetric"])
def test_hero1_gradient_by_finite_differences(structure: str) -> None:
    """d p_hat / d theta from the influence code equals the numerical derivative of the HERO-1 solution."""
    K = 3
    hist, cur = _random_data(3, K)
    cal = calibrate_multiclass(hist, structure=structure, tol=1e-12)
    al = E._align(cur, cal, True)
    d = E._cur_design(al, K, cal.n_labelers)
    fit = cal.information.fit
    lam = M.item_loglik(d, np.log(fit.pi))
    p, _ = solve_simplex(lam)
    assert (p > 0).all()
    parts = E._score_influence(d, cal.derivatives(), cal.n_parameters, lam, p)
    J, q = d.J, cal.information.q
    h = 1e-6
    free = cal.information.free
    for k in range(J * q):
        if not free[k]:  # boundary parameters: H^+ gives them no influence by design
            continue
        pu = solve_simplex(M.item_loglik(d, np.log(_perturbed(structure, fit, k, h, J, q, K)[0])))[0]
        pd_ = solve_simplex(M.item_loglik(d, np.log(_perturbed(structure, fit, k, -h, J, q, K)[0])))[0]
        np.testing.assert_allclose((pu - pd_) / (2 * h), parts.C[k], atol=1e-5)


def test_conjugate_gradient_path_matches_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond DENSE_MAX free parameters the solves use CG on the matrix-free product: same answer."""
    hist, _ = _random_data(4)
    cal = calibrate_multiclass(hist, tol=1e-12)
    info = cal.information
    C = np.random.default_rng(0).normal(size=(info.P, 2))
    dense = info.solve(C)
    monkeypatch.setattr(M, "DENSE_MAX", 3)
    info._Hinv = None
    np.testing.assert_allclose(info.solve(C), dense, rtol=1e-6, atol=1e-8)
    assert info.covariance() is None
