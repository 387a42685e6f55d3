"""Stage A's EM settings: one frozen, validated object, and the one place their key list is written.

The six settings that travel together through every layer (the fit, the model checks' refits, the
choice's refits at other weights, the store's calibrations) are the fields of :class:`EMSettings`;
:data:`EM_SETTING_KEYS` is derived from them, so the list is written once. Each field's rule lives in
one declarative table (:data:`EM_CONSTRAINTS`, in the manner of scikit-learn's
``_parameter_constraints``): a predicate and the phrase the error uses. The public functions keep their
keyword arguments (``calibrate(tol=..., max_iter=...)``); they validate through :func:`check_em_settings`,
and code that passes the settings on takes them from a calibration's ``settings`` with
:meth:`EMSettings.from_dict` / :func:`em_settings_of`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, TypedDict

from heroeval.errors import HeroEvalError

__all__ = [
    "EM_CONSTRAINTS",
    "EM_DEFAULTS",
    "EM_SETTING_KEYS",
    "PRIOR_KEYS",
    "SHRINKS",
    "STOPPING_RULE_KEYS",
    "EMOptions",
    "EMSettings",
    "FitSettings",
    "Shrink",
    "StoppingRule",
    "check_em_settings",
    "check_pseudo_count",
    "check_shrink",
    "check_weight",
    "em_settings_of",
    "stopping_rule",
]

Shrink = Literal["none", "eb"]
SHRINKS = ("none", "eb")
Criterion = Literal["parameters", "loglik"]


def _positive_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and v >= 1


def _non_negative_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v >= 0


EM_CONSTRAINTS: dict[str, tuple[Callable[[Any], bool], str] | None] = {
    "tol": (_positive_number, "a positive number"),
    "max_iter": (_positive_int, "a positive integer"),
    "criterion": (lambda v: v in ("parameters", "loglik"), "'parameters' or 'loglik'"),
    "accelerate": None,  # any truthy value switches the acceleration on (as before: not checked)
    "pseudo_count": (_non_negative_number, "a non-negative number"),
    "shrink": (lambda v: v in SHRINKS, "'none' or 'eb' (empirical Bayes)"),
}
"""Each EM setting's rule: a predicate and what the error message says the value must be (None: unchecked)."""


def _check(name: str, value: Any) -> None:
    rule = EM_CONSTRAINTS[name]
    if rule is not None and not rule[0](value):
        raise HeroEvalError(f"{name} must be {rule[1]}, got {value!r}")


@dataclass(frozen=True)
class EMSettings:
    """Stage A's EM settings (documented at :func:`heroeval.calibrate`), validated when made.

    ``tol`` and ``criterion`` are the stopping rule, ``max_iter`` its budget, ``accelerate`` the
    SQUAREM-style extrapolation, ``pseudo_count`` the symmetric Beta prior on each labeler's rates and
    ``shrink`` whether an empirical-Bayes prior fitted to the gold counts is added to it.
    """

    tol: float = 1e-8
    max_iter: int = 10_000
    criterion: Criterion = "parameters"
    accelerate: bool = True
    pseudo_count: float = 0.0
    shrink: Shrink = "none"

    def __post_init__(self) -> None:
        for f in fields(self):
            _check(f.name, getattr(self, f.name))

    def to_dict(self) -> dict[str, Any]:
        """The settings as a calibration file writes them (``pseudo_count`` as a float)."""
        out = asdict(self)
        out["pseudo_count"] = float(out["pseudo_count"])
        return out

    @classmethod
    def from_dict(cls, settings: Mapping[str, Any]) -> EMSettings:
        """The EM settings among a calibration's ``settings`` (other keys ignored; absent ones take defaults)."""
        return cls(**em_settings_of(settings))

    @property
    def stopping(self) -> StoppingRule:
        """The settings of the iteration itself (its stopping rule, budget and acceleration)."""
        return StoppingRule(self.tol, self.max_iter, self.criterion, self.accelerate)


@dataclass(frozen=True)
class StoppingRule:
    """The settings of Stage A's EM iteration itself, as every EM run takes them
    (:func:`heroeval.stage_a.two_coin.run_em`, whose design holds the prior): the stopping rule ``tol`` and
    ``criterion``, the budget ``max_iter`` and the ``accelerate`` switch. Its fields are
    :data:`STOPPING_RULE_KEYS`, with :class:`EMSettings`' defaults.

    Unlike :class:`EMSettings` it is not validated when made: it carries settings validated where they were given
    (:class:`EMSettings`, :func:`check_em_settings`) or taken from a calibration's ``settings``, and the refits'
    own budgets and tolerances.
    """

    tol: float = 1e-8
    max_iter: int = 10_000
    criterion: Criterion = "parameters"
    accelerate: bool = True


EM_SETTING_KEYS: tuple[str, ...] = tuple(f.name for f in fields(EMSettings))
"""The EM settings' names, in the order a calibration file writes them: the one place the list is written."""
assert tuple(EM_CONSTRAINTS) == EM_SETTING_KEYS, "every EM setting has one rule"



class EMOptions(TypedDict, total=False):
    """The EM settings as keyword options (``calibrate(history, tol=1e-6)``; :mod:`heroeval.core.options`):
    :class:`EMSettings`' fields, for the type checker."""

    tol: float
    max_iter: int
    criterion: Criterion
    accelerate: bool
    pseudo_count: float
    shrink: Shrink


assert tuple(EMOptions.__annotations__) == EM_SETTING_KEYS, "EMOptions declares EMSettings' fields"

EM_DEFAULTS: Mapping[str, Any] = asdict(EMSettings())
"""The EM settings' defaults, taken from :class:`EMSettings`."""

PRIOR_KEYS = ("pseudo_count", "shrink")
"""The EM settings that make the prior (a refit whose prior is set by other means leaves them out)."""

STOPPING_RULE_KEYS: tuple[str, ...] = tuple(k for k in EM_SETTING_KEYS if k not in PRIOR_KEYS)
"""The EM settings of the iteration itself: its stopping rule, budget and acceleration."""
assert STOPPING_RULE_KEYS == tuple(f.name for f in fields(StoppingRule)), "a StoppingRule holds those settings"


def em_settings_of(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The EM settings present in ``settings`` (a calibration's), as keyword arguments for a refit."""
    return {k: settings[k] for k in EM_SETTING_KEYS if k in settings}


Variance = Literal["sandwich", "model"]
Engine = Literal["auto", "numpy", "numba"]
VARIANCES = ("sandwich", "model")
ENGINES = ("auto", "numpy", "numba")


@dataclass(frozen=True)
class FitSettings:
    """How Stage A is fitted besides the EM (documented at :func:`heroeval.calibrate`), validated when made:
    the parameters' ``variance`` (``"sandwich"`` or ``"model"``), whether to compute their ``covariance`` at all,
    whether to ``compress`` identical label patterns, and the ``engine``."""

    variance: Variance = "sandwich"
    covariance: bool = True
    compress: bool = True
    engine: Engine = "auto"

    def __post_init__(self) -> None:
        if self.variance not in VARIANCES:
            raise HeroEvalError(f"variance must be 'sandwich' or 'model', got {self.variance!r}")
        if self.engine not in ENGINES:
            raise HeroEvalError(f"engine must be 'auto', 'numpy' or 'numba', got {self.engine!r}")


def check_em_settings(tol: Any, max_iter: Any, criterion: Any, pseudo_count: Any = 0.0, shrink: Any = "none") -> None:
    """Validate EM settings given one by one (a :class:`~heroeval.errors.HeroEvalError` naming the first bad one)."""
    for name, value in (("tol", tol), ("max_iter", max_iter), ("criterion", criterion),
                        ("pseudo_count", pseudo_count), ("shrink", shrink)):
        _check(name, value)


def check_shrink(shrink: Any) -> Shrink:
    """``shrink`` validated: ``"none"`` or ``"eb"``."""
    _check("shrink", shrink)
    out: Shrink = shrink
    return out


def check_pseudo_count(pseudo_count: Any) -> float:
    """A scalar pseudo-count (the EM's prior strength): a finite number >= 0."""
    if isinstance(pseudo_count, bool) or not (isinstance(pseudo_count, (int, float)) and math.isfinite(pseudo_count)
                                              and pseudo_count >= 0):
        raise HeroEvalError(f"pseudo_count must be a non-negative number, got {pseudo_count!r}")
    return float(pseudo_count)


def check_weight(w: Any) -> float:
    """The history weight of the gold-free items: a number in [0, 1] (``"cv"`` is resolved before this)."""
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not (0.0 <= float(w) <= 1.0):
        raise HeroEvalError(f"history_weight must be a number in [0, 1] or 'cv', got {w!r}")
    return float(w)


def stopping_rule(tol: float, max_iter: int, criterion: str, accelerate: bool) -> dict[str, Any]:
    """The stopping rule's part of a calibration's settings, keyed by :data:`STOPPING_RULE_KEYS`."""
    return dict(zip(STOPPING_RULE_KEYS, (tol, max_iter, criterion, accelerate), strict=True))
