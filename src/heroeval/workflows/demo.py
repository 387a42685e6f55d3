"""The bundled example: LLM judges grading TriviaQA answers (see examples/triviaqa/PROVENANCE.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from heroeval.estimators.collection import EstimateCollection
from heroeval.ingest.annotations import AnnotationSet
from heroeval.ingest.read import read_annotations
from heroeval.stage_a.calibration import Calibration
from heroeval.workflows.api import calibrate, estimate

__all__ = ["DemoResult", "example_paths", "run_demo"]


def example_paths() -> dict[str, Path]:
    """Paths of the bundled example's files (history, gold, covariates, current, truth)."""
    base = Path(str(resources.files("heroeval") / "examples" / "triviaqa"))
    return {
        "history": base / "history.csv.gz",
        "gold": base / "history_gold.csv",
        "history_covariates": base / "history_covariates.csv.gz",
        "current": base / "current.csv.gz",
        "current_covariates": base / "current_covariates.csv.gz",
        "truth": base / "truth.json",
        "provenance": base / "PROVENANCE.md",
    }


@dataclass(frozen=True)
class DemoResult:
    history: AnnotationSet
    current: AnnotationSet
    calibration: Calibration
    estimates: EstimateCollection
    truth: dict[str, Any]


def run_demo() -> DemoResult:
    """Run every method on the bundled example.

    Examples
    --------
    >>> from heroeval.workflows.demo import run_demo
    >>> d = run_demo()
    >>> sorted(d.estimates)
    ['dawid_skene', 'gold_proportion', 'hero1', 'hero2', 'hero_joint', 'majority_vote', 'rogan_gladen']
    """
    p = example_paths()
    hist = read_annotations(p["history"], gold=p["gold"], covariates=p["history_covariates"], name="history")
    cur = read_annotations(p["current"], covariates=p["current_covariates"], name="current")
    cal = calibrate(hist, checks=True)
    res = estimate(cur, cal, method="all", recommend=True)
    assert isinstance(res, EstimateCollection)
    truth = json.loads(p["truth"].read_text())
    return DemoResult(hist, cur, cal, res, truth)
