"""Stage A: closed forms, convergence control, and the calibration file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import heroeval as he
from heroeval.errors import CalibrationFileError, ConvergenceWarning, DataError, HeroEvalError
from heroeval.stage_a.gold import initial_values
from tests.conftest import Sim, simulate


def test_all_gold_history_gives_the_gold_mle() -> None:
    """With gold on every item there is nothing latent: alpha = tp / (tp + fn) exactly."""
    s = simulate(3, N=200, gold_rate=1.0)
    cal = he.calibrate(s.history)
    tp, fn, tn, fp = cal.gold_tp, cal.gold_fn, cal.gold_tn, cal.gold_fp
    np.testing.assert_allclose(cal.alpha, tp / (tp + fn), atol=1e-12)
    np.testing.assert_allclose(cal.beta, tn / (tn + fp), atol=1e-12)
    assert cal.round_prevalence[0] == pytest.approx(s.history.gold.mean(), abs=1e-12)
    assert cal.convergence.converged and cal.convergence.n_iter <= 4  # one SQUAREM cycle (3 maps) and the check


def test_counts(sim: Sim, calibration: he.Calibration) -> None:
    h = sim.history
    assert calibration.n_annotations.sum() == h.n_annotations
    assert calibration.n_gold_items == h.n_gold
    assert calibration.n_history_items == h.n_items
    g = h.gold[h.annotation_item]
    assert (calibration.gold_tp + calibration.gold_fn).sum() == np.count_nonzero(g == 1)
    assert calibration.covariate_mean is not None
    assert calibration.covariate_mean[0] == pytest.approx(h.covariates[:, 0].mean())  # type: ignore[index]


def test_squarem_and_plain_em_reach_the_same_fixed_point(sim: Sim) -> None:
    fast = he.calibrate(sim.history, tol=1e-11)
    slow = he.calibrate(sim.history, tol=1e-11, accelerate=False, max_iter=100_000)
    np.testing.assert_allclose(fast.alpha, slow.alpha, atol=1e-8)
    np.testing.assert_allclose(fast.beta, slow.beta, atol=1e-8)
    np.testing.assert_allclose(fast.round_prevalence, slow.round_prevalence, atol=1e-8)
    assert fast.convergence.loglik >= slow.convergence.loglik - 1e-8
    assert fast.convergence.n_iter < slow.convergence.n_iter


def test_em_never_decreases_the_likelihood(sim: Sim) -> None:
    cal = he.calibrate(sim.history, accelerate=False)
    assert cal.history_fit is not None
    tr = np.array(cal.history_fit.loglik_trace)
    assert np.all(np.diff(tr) >= -1e-9)


def test_paper_stopping_rule_is_available(sim: Sim) -> None:
    cal = he.calibrate(sim.history, tol=1e-6, max_iter=200, criterion="loglik", accelerate=False)
    assert cal.convergence.criterion == "loglik" and cal.convergence.n_iter <= 200


def test_not_converged_warns(sim: Sim) -> None:
    with pytest.warns(ConvergenceWarning, match=r"did not converge in 2 iterations"):
        cal = he.calibrate(sim.history, max_iter=2, accelerate=False)
    assert not cal.convergence.converged


def test_initial_values_use_the_pooled_rate_without_gold() -> None:
    ds = he.AnnotationSet.from_arrays(
        [1, 1, 2, 2, 3], ["a", "b", "a", "b", "c"], [1, 1, 0, 1, 1], gold=([1, 2], [1, 0])
    )
    a0, b0, p0 = initial_values(ds)
    # pooled sensitivity over gold positives: a 1/1, b 1/1 -> 1; c has no gold -> pooled
    assert a0[2] == pytest.approx(1.0)
    assert a0[0] == pytest.approx((1 + 1.0) / (1 + 0 + 1))
    # pooled specificity: a said 0 on the negative, b said 1 -> 1/2
    assert b0[0] == pytest.approx((1 + 0.5) / (1 + 1))
    assert b0[1] == pytest.approx((0 + 0.5) / (1 + 1))
    assert b0[2] == pytest.approx(0.5)
    assert p0[0] == pytest.approx(0.5)


def test_rounds_get_their_own_prevalence() -> None:
    a = simulate(5, N=300, hist_prev=0.2, gold_rate=0.3)
    b = simulate(5, N=300, hist_prev=0.7, gold_rate=0.3)
    # same labelers (same seed -> same alpha, beta); put the two histories in two rounds
    items = np.concatenate([np.char.add("A", a.history.item_ids[a.history.annotation_item].astype(str)),
                            np.char.add("B", b.history.item_ids[b.history.annotation_item].astype(str))])
    labs = np.concatenate([a.history.labeler_ids[a.history.labeler], b.history.labeler_ids[b.history.labeler]])
    z = np.concatenate([a.history.label, b.history.label])
    gi = np.concatenate([np.char.add("A", a.history.item_ids[a.history.gold >= 0].astype(str)),
                         np.char.add("B", b.history.item_ids[b.history.gold >= 0].astype(str))])
    gv = np.concatenate([a.history.gold[a.history.gold >= 0], b.history.gold[b.history.gold >= 0]])
    uniq = np.unique(items)
    rnd = (uniq, np.where(np.char.startswith(uniq.astype(str), "A"), "early", "late"))
    ds = he.AnnotationSet.from_arrays(items, labs, z, gold=(gi, gv), item_round=rnd)
    cal = he.calibrate(ds)
    assert cal.round_ids == ("early", "late")
    assert cal.round_prevalence[0] < 0.35 < 0.55 < cal.round_prevalence[1]
    assert cal.round_n_items.tolist() == [300, 300]


def test_history_without_gold_is_an_error() -> None:
    ds = he.AnnotationSet.from_arrays([1, 2], ["a", "a"], [1, 0], name="h0")
    with pytest.raises(DataError, match=r"history 'h0' has no gold labels: Stage A needs gold anchors"):
        he.calibrate(ds)


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"tol": 0}, r"tol must be a positive number, got 0"),
        ({"max_iter": 0}, r"max_iter must be a positive integer, got 0"),
        ({"criterion": "ll"}, r"criterion must be 'parameters' or 'loglik', got 'll'"),
    ],
)
def test_bad_settings(sim: Sim, kw: dict[str, object], msg: str) -> None:
    with pytest.raises(HeroEvalError, match=msg):
        he.calibrate(sim.history, **kw)  # type: ignore[arg-type]


def test_wrong_input_type() -> None:
    with pytest.raises(HeroEvalError, match=r"history must be an AnnotationSet .* got DataFrame"):
        import pandas as pd

        he.calibrate(pd.DataFrame())  # type: ignore[arg-type]


# ----------------------------------------------------------------- JSON file


def test_json_round_trip(tmp_path: Path, sim: Sim, calibration: he.Calibration) -> None:
    p = tmp_path / "cal.json"
    calibration.save(p)
    back = he.load_calibration(p)
    assert back.labeler_ids == calibration.labeler_ids
    for f in ("alpha", "beta", "round_prevalence", "gold_tp", "gold_fn", "gold_tn", "gold_fp",
              "n_annotations", "n_items", "covariate_mean", "covariate_cov"):
        np.testing.assert_array_equal(getattr(back, f), getattr(calibration, f))
    assert back.convergence == calibration.convergence
    assert back.history is None
    assert he.hero1(sim.current, back).estimate == he.hero1(sim.current, calibration).estimate
    obj = json.loads(p.read_text())
    assert obj["format"] == "heroeval.calibration" and obj["format_version"] == 1
    assert obj["heroeval_version"] == he.__version__


def _corrupt(tmp_path: Path, calibration: he.Calibration, edit: object) -> Path:
    obj = calibration.to_dict()
    edit(obj)  # type: ignore[operator]
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(obj))
    return p


@pytest.mark.parametrize(
    ("edit", "msg"),
    [
        (lambda o: o.update(format="pickle"), r"format: expected 'heroeval.calibration', got 'pickle'"),
        (lambda o: o.update(format_version=99), r"format_version: this heroeval reads version 1, file has 99"),
        (lambda o: o["labelers"][1].update(sensitivity=1.5), r"labelers\[1\].sensitivity: 1.5 is outside \[0, 1\]"),
        (lambda o: o["labelers"][0].update(specificity="x"), r"labelers\[0\].specificity: expected a finite number"),
        (lambda o: o["labelers"][0]["gold"].update(tp=-1), r"labelers\[0\].gold.tp: expected a non-negative integer"),
        (lambda o: o["labelers"][1].update(id=o["labelers"][0]["id"]), r"labelers: repeated labeler ids"),
        (lambda o: o.update(labelers=[]), r"labelers: expected a non-empty list"),
        (lambda o: o["rounds"][0].update(prevalence=None), r"rounds\[0\].prevalence: expected a finite number"),
        (lambda o: o["covariates"].update(mean=[1.0, 2.0]), r"covariates.mean: expected 1 finite numbers"),
        (lambda o: o.pop("fit"), r"fit: expected an object"),
    ],
)
def test_load_validates(tmp_path: Path, calibration: he.Calibration, edit: object, msg: str) -> None:
    p = _corrupt(tmp_path, calibration, edit)
    with pytest.raises(CalibrationFileError, match=msg):
        he.load_calibration(p)


def test_load_errors(tmp_path: Path) -> None:
    with pytest.raises(CalibrationFileError, match=r"does not exist"):
        he.load_calibration(tmp_path / "none.json")
    p = tmp_path / "x.json"
    p.write_text("{not json")
    with pytest.raises(CalibrationFileError, match=r"x.json: not valid JSON"):
        he.load_calibration(p)


def test_calibration_is_immutable(calibration: he.Calibration) -> None:
    with pytest.raises(ValueError, match="read-only"):
        calibration.alpha[0] = 0.5
    with pytest.raises(AttributeError):
        calibration.alpha = np.zeros(3)  # type: ignore[misc]
    assert replace(calibration, history=None).history is None


def test_pseudo_count_is_map_em() -> None:
    s = simulate(3, N=200, gold_rate=1.0)
    cal = he.calibrate(s.history, pseudo_count=2.0)
    tp, fn, tn, fp = cal.gold_tp, cal.gold_fn, cal.gold_tn, cal.gold_fp
    np.testing.assert_allclose(cal.alpha, (tp + 2) / (tp + fn + 4), atol=1e-12)
    np.testing.assert_allclose(cal.beta, (tn + 2) / (tn + fp + 4), atol=1e-12)
    assert cal.settings["pseudo_count"] == 2.0
    with pytest.raises(HeroEvalError, match=r"pseudo_count must be a non-negative number, got -1"):
        he.calibrate(s.history, pseudo_count=-1)


def test_labelers_at_bound_are_listed() -> None:
    # labeler 'p' is right on every gold item and every item agrees: fitted as perfect
    items = np.repeat(np.arange(40), 2)
    y = np.arange(40) % 2
    z = np.repeat(y, 2)
    z[1::2][:10] = 1 - z[1::2][:10]  # labeler 'q' errs on 10 items
    ds = he.AnnotationSet.from_arrays(items, np.tile(["p", "q"], 40), z, gold=(np.arange(40), y))
    assert he.calibrate(ds).labelers_at_bound == ("p",)
    assert he.calibrate(ds, pseudo_count=1.0).labelers_at_bound == ()


def test_csc_and_csr_m_step_agree(monkeypatch: pytest.MonkeyPatch, sim: Sim) -> None:
    from heroeval.stage_a import two_coin

    base = he.calibrate(sim.history, tol=1e-11)
    monkeypatch.setattr(two_coin, "CSC_ITEMS", 0)  # force the CSC path used for large histories
    csc = he.calibrate(sim.history, tol=1e-11)
    np.testing.assert_allclose(csc.alpha, base.alpha, atol=1e-12)
    np.testing.assert_allclose(csc.beta, base.beta, atol=1e-12)


def test_gold_counts_match_a_plain_count(sim: Sim) -> None:
    from heroeval.stage_a.gold import gold_counts

    h = sim.history
    g = h.gold[h.annotation_item]
    tp, fn, tn, fp = gold_counts(h)
    for j in range(h.n_labelers):
        m = h.labeler == j
        assert tp[j] == np.sum(m & (g == 1) & (h.label == 1))
        assert fn[j] == np.sum(m & (g == 1) & (h.label == 0))
        assert tn[j] == np.sum(m & (g == 0) & (h.label == 0))
        assert fp[j] == np.sum(m & (g == 0) & (h.label == 1))


def test_repeated_pairs_flag(sim: Sim) -> None:
    import pandas as pd

    df = pd.DataFrame({"item_id": ["x", "x", "y"], "labeler_id": ["a", "a", "a"], "label": [1, 1, 0]})
    assert he.read_annotations(df).repeated_pairs
    assert not he.read_annotations(df, duplicates="first").repeated_pairs
    assert not sim.history.repeated_pairs
    # skipping de-duplication when there is nothing to merge changes nothing
    forced = replace(sim.history, repeated_pairs=True)
    a, b = he.calibrate(sim.history, tol=1e-11), he.calibrate(forced, tol=1e-11)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-10)  # summation order differs, nothing else
    np.testing.assert_array_equal(a.n_items, b.n_items)
    np.testing.assert_allclose(a.parameter_covariance, b.parameter_covariance, rtol=1e-12, atol=1e-15)
