"""Issue 19: intervals by test inversion, one-sided bounds, rates at and near 0."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm
from typer.testing import CliRunner

import heroeval as he
from heroeval.cli import app
from heroeval.estimators.inversion import ScoreTest, invert, pattern_table
from heroeval.estimators.score_equation import psi
from heroeval.workflows.demo import example_paths

ROOT = Path(__file__).resolve().parents[2]


def wilson(x: int, n: int, z: float) -> tuple[float, float]:
    p = x / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(c - h, 0.0), min(c + h, 1.0)


def one_labeler_test(x: int, n: int, a: float, b: float, V: np.ndarray | None = None) -> ScoreTest:
    lab = np.zeros(n, dtype=np.int64)
    ptr = np.arange(n + 1, dtype=np.int64)
    z = np.r_[np.ones(x), np.zeros(n - x)]
    L = np.where(z == 1, math.log(a / (1 - b)), math.log((1 - a) / b))
    p = x / n
    center = min(max((p + b - 1) / (a + b - 1), 0.0), 1.0)
    return ScoreTest(center=center, L=L, counts=np.ones(n), item_ptr=ptr, labeler=lab, alpha=np.array([a]),
                     beta=np.array([b]), space=None if V is None else "stage_a", V=V, n_parameters=2)


@pytest.mark.parametrize(("x", "n"), [(0, 200), (1, 200), (7, 300), (150, 300)])
def test_near_perfect_labeler_gives_the_wilson_interval(x: int, n: int) -> None:
    # (at x = 0 the labeler's 1e-9 false-positive rate makes T(0) = -4e-4 < 0, and the boundary shift moves
    # the bound by a relative 4e-4)
    tol = {"rel": 1e-3} if x == 0 else {"abs": 1e-7}
    t = one_labeler_test(x, n, 1 - 1e-9, 1 - 1e-9)
    z2, z1 = norm.ppf(0.975), norm.ppf(0.95)
    lo, hi = t.interval(0.95, "two-sided")
    wl, wh = wilson(x, n, z2)
    assert lo == pytest.approx(wl, abs=1e-7) and hi == pytest.approx(wh, **tol)
    assert t.interval(0.95, "less")[1] == pytest.approx(wilson(x, n, z1)[1], **tol)
    assert t.interval(0.95, "greater")[0] == pytest.approx(wilson(x, n, z1)[0], abs=1e-7)
    if x == 0:  # the closed form z^2 / (n + z^2)
        assert t.interval(0.95, "less")[1] == pytest.approx(z1**2 / (n + z1**2), rel=1e-3)


@pytest.mark.parametrize(("x", "n", "a", "b"), [(10, 200, 0.8, 0.97), (40, 500, 0.9, 0.95), (40, 300, 0.7, 0.9)])
def test_one_labeler_without_history_is_the_binomial_score_test_mapped_through_rogan_gladen(
    x: int, n: int, a: float, b: float
) -> None:
    # T(mu0) = (x - n p0) / sqrt(n p0 (1 - p0)), p0 = mu0 a + (1 - mu0)(1 - b): Wilson's interval for p, mapped
    t = one_labeler_test(x, n, a, b)
    for alt, z in (("two-sided", norm.ppf(0.975)), ("less", norm.ppf(0.95))):
        wl, wh = wilson(x, n, z)
        lo, hi = t.interval(0.95, alt)
        rg = lambda p: min(max((p + b - 1) / (a + b - 1), 0.0), 1.0)  # noqa: E731
        assert hi == pytest.approx(rg(wh), abs=1e-7)
        if alt == "two-sided":
            assert lo == pytest.approx(rg(wl), abs=1e-7)


def test_history_term_is_the_delta_method_variance_of_p0() -> None:
    x, n, a, b = 12, 400, 0.85, 0.96
    V = np.array([[4e-4, -5e-5], [-5e-5, 1e-4]])
    t = one_labeler_test(x, n, a, b, V)
    for mu0 in (1e-4, 0.01, 0.05, 0.3):
        p0 = mu0 * a + (1 - mu0) * (1 - b)
        grad = np.array([mu0, -(1 - mu0)])
        want = (x / n - p0) / math.sqrt(p0 * (1 - p0) / n + grad @ V @ grad)
        assert t.stat(mu0) == pytest.approx(want, rel=1e-9)


def test_expected_score_moments_against_brute_force_enumeration() -> None:
    # two labelers on every item: E_mu0[psi^2] and E_mu0[d psi / d theta] by direct enumeration and finite differences
    a, b = np.array([0.8, 0.7]), np.array([0.95, 0.9])
    n = 5
    ptr = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
    lab = np.tile([0, 1], n).astype(np.int64)
    tab = pattern_table(ptr, lab, a, b)
    mu0 = 0.03

    def moments(a: np.ndarray, b: np.ndarray, a_true: np.ndarray, b_true: np.ndarray) -> tuple[float, float]:
        m2 = m1 = 0.0
        for z1 in (0, 1):
            for z2 in (0, 1):
                z = np.array([z1, z2])
                f1 = np.prod(np.where(z == 1, a_true, 1 - a_true))
                f0 = np.prod(np.where(z == 1, 1 - b_true, b_true))
                L = np.sum(np.where(z == 1, np.log(a / (1 - b)), np.log((1 - a) / b)))
                p = float(psi(mu0, np.array([L]))[0])
                w = mu0 * f1 + (1 - mu0) * f0
                m2 += w * p * p
                m1 += w * p
        return n * m2, n * m1

    v, g = tab.expected(mu0)
    assert v == pytest.approx(moments(a, b, a, b)[0], rel=1e-10)
    h = 1e-6
    for j in range(2):  # d/d theta of E_true[psi(theta)] at theta = true
        da = np.zeros(2)
        da[j] = h
        fd_a = (moments(a + da, b, a, b)[1] - moments(a - da, b, a, b)[1]) / (2 * h)
        fd_b = (moments(a, b + da, a, b)[1] - moments(a, b - da, a, b)[1]) / (2 * h)
        assert g[j] == pytest.approx(fd_a, rel=1e-5)
        assert g[2 + j] == pytest.approx(fd_b, rel=1e-5)


def test_invert_a_linear_statistic() -> None:
    lo, hi = invert(lambda m: (0.3 - m) / 0.1, 0.3, 0.95, "two-sided")
    z = norm.ppf(0.975)
    assert lo == pytest.approx(0.3 - 0.1 * z) and hi == pytest.approx(0.3 + 0.1 * z)
    assert invert(lambda m: (0.3 - m) / 0.1, 0.3, 0.95, "less")[1] == pytest.approx(0.3 + 0.1 * norm.ppf(0.95))
    # at an estimate of 0 with the data "below" the boundary model (T(0) < 0), the shift keeps a positive bound
    lo, hi = invert(lambda m: (-0.05 - m) / 0.01, 0.0, 0.95, "less")
    assert lo == 0.0 and hi == pytest.approx(0.01 * norm.ppf(0.95), rel=1e-6)


@pytest.fixture(scope="module")
def zero_round(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    ex = example_paths()
    d = pd.read_csv(ex["current"])
    d["label"] = 0
    p = tmp_path_factory.mktemp("zero") / "zero.csv"
    d.to_csv(p, index=False)
    return p, ex


LIKELIHOOD = ("gold_proportion", "hero1", "hero2", "hero_joint", "rogan_gladen")


def test_all_negative_round_api_gives_finite_positive_upper_bounds(zero_round: tuple[Path, dict[str, Path]]) -> None:
    p, ex = zero_round
    hist = he.read_annotations(ex["history"], gold=ex["gold"], covariates=ex["history_covariates"])
    cal = he.calibrate(hist)
    cur = he.read_annotations(p, covariates=ex["current_covariates"])
    res = he.estimate(cur, cal, method="all", recommend=True)
    for m in LIKELIHOOD:
        r = res[m]
        assert r.estimate < 1e-6 and r.status == "boundary_0"  # (an EM prevalence stops near 0)
        ci = r.confidence_interval(0.95)
        assert ci.low == 0.0 and 0 < ci.high < 0.1 and ci.alternative == "less" and ci.method == "score"
        assert ci.describe().startswith("at most ")
        assert r.bound(0.95) == ci.high
        # a higher level gives a larger bound
        assert r.bound(0.99) > ci.high
    rec = res.recommended
    assert rec is not None
    rci = rec.result.confidence_interval(0.95)
    assert 0 < rci.high < 0.1
    assert "one-sided bound: at most" in rec.reason and "no candidate could be scored" not in rec.reason
    d = rec.to_dict()
    assert d["upper_bound"] == pytest.approx(rci.high) and d["ci_text"].startswith("at most")
    assert "at most" in res.summary()


def test_all_negative_round_cli_json_table_and_report(zero_round: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    p, ex = zero_round
    src = ["--history", str(ex["history"]), "--gold", str(ex["gold"])]
    res = CliRunner().invoke(app, ["estimate", str(p), *src, "-f", "json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    for m in ("gold_proportion", "hero1", "hero_joint", "rogan_gladen"):
        e = d["estimates"][m]
        assert e["ci_low"] == 0.0 and 0 < e["ci_high"] < 0.1 and e["ci_alternative"] == "less"
        assert e["upper_bound"] == pytest.approx(e["ci_high"]) and e["ci_text"].startswith("at most")
    assert 0 < d["recommended"]["ci_high"] < 0.1 and d["recommended"]["upper_bound"] > 0
    table = CliRunner().invoke(app, ["estimate", str(p), *src])
    assert table.exit_code == 0 and "at most" in table.stdout
    out = tmp_path / "r.html"
    rep = CliRunner().invoke(app, ["report", str(p), *src, "-o", str(out)])
    assert rep.exit_code == 0, rep.output
    assert "at most" in out.read_text()


def test_alternative_on_an_interior_estimate() -> None:
    ex = example_paths()
    cal = he.calibrate(he.read_annotations(ex["history"], gold=ex["gold"]))
    r = he.estimate(he.read_annotations(ex["current"]), cal, method="hero1")
    two = r.confidence_interval(0.95)
    assert two.method == "logit" and two.alternative == "two-sided"  # unchanged away from the boundary
    less = r.confidence_interval(0.95, alternative="less")
    greater = r.confidence_interval(0.95, alternative="greater")
    assert less.low == 0.0 and r.estimate < less.high < two.high
    assert greater.high == 1.0 and two.low < greater.low < r.estimate
    sc = r.confidence_interval(0.95, method="score")
    assert sc.low == pytest.approx(two.low, abs=0.005) and sc.high == pytest.approx(two.high, abs=0.005)
    with pytest.raises(he.HeroEvalError):
        r.confidence_interval(0.95, alternative="upper")


def _study() -> object:
    from benchmarks import rare_rates  # the repository root is on pytest's path (pyproject: pythonpath)

    return rare_rates


@pytest.mark.slow
def test_one_sided_coverage_at_zero_and_a_small_rate() -> None:
    mod = _study()
    args = mod.parser().parse_args(  # type: ignore[attr-defined]
        ["--reps", "400", "--block", "20", "--mus", "0", "0.01", "--ns", "1000", "--designs", "sparse3", "--seed", "5"])
    df = mod.run(args)  # type: ignore[attr-defined]
    assert (df["cov1_score"] >= 0.92).all()  # 400 replicates: MC SE 0.011 at 0.95
    assert (df["mean_upper_score"] > 0).all()


def test_plan_bound_with_a_perfect_labeler_is_the_wilson_closed_form() -> None:
    # all gold, one labeler that never errs: at mu = 0 every round is all-negative and the bound is z^2 / (n + z^2)
    g = np.r_[np.ones(100, dtype=int), np.zeros(300, dtype=int)]
    ids = np.arange(400)
    cal = he.calibrate(he.AnnotationSet.from_arrays(ids, ["a"] * 400, g, gold=(ids, g)))
    x = 0.01
    p = he.plan(cal, mu=0.0, bound=x)
    z = norm.ppf(0.95)
    assert p.goal == "bound" and p.rows[0].n_items == pytest.approx(math.ceil(z * z * (1 - x) / x), abs=1)
    d = p.to_dict()
    assert d["rows"][0]["median_bound"] <= x
    res = CliRunner().invoke(app, ["plan", "--calibration", str(_save(cal)), "--mu", "0", "--bound", "0.01"])
    assert res.exit_code == 0 and "upper bound to fall below 0.01" in res.stdout


def _save(cal: he.Calibration) -> Path:
    import tempfile

    p = Path(tempfile.mkdtemp()) / "cal.json"
    cal.save(p)
    return p


def test_majority_vote_at_zero_has_the_wilson_bound_not_a_point() -> None:
    """0 of n majority votes: the interval is Wilson's [0, z^2/(n + z^2)], not the Wald interval's [0, 0]."""
    n = 150
    cur = he.AnnotationSet.from_arrays(np.repeat(np.arange(n), 3), ["a", "b", "c"] * n, np.zeros(3 * n, dtype=int))
    r = he.majority_vote(cur)
    z = float(norm.ppf(0.975))
    ci = r.confidence_interval(0.95)
    assert ci.low == 0.0 and ci.high == pytest.approx(z * z / (n + z * z), rel=1e-4)
    z1 = float(norm.ppf(0.95))
    assert r.bound(0.95) == pytest.approx(z1 * z1 / (n + z1 * z1), rel=1e-4)
    # away from the boundary the default interval is the logit one, as before
    lab = np.array([1, 1, 0] * (n // 2) + [0, 0, 0] * (n - n // 2))
    mid = he.majority_vote(he.AnnotationSet.from_arrays(np.repeat(np.arange(n), 3), ["a", "b", "c"] * n, lab))
    assert mid.confidence_interval(0.95).method == "logit"
