"""Exception and warning classes of heroeval.

Every error raised on bad input is a :class:`HeroEvalError` (a ``ValueError``),
and its message names the file, row, column or parameter and the bad value.
"""

from __future__ import annotations

__all__ = [
    "CalibrationFileError",
    "ConvergenceWarning",
    "CovariateShiftWarning",
    "DataError",
    "HeroEvalError",
    "HeroEvalWarning",
    "MultipleRoundsWarning",
    "SharedCovariatesWarning",
    "TransportabilityWarning",
    "UnknownLabelerError",
]


class HeroEvalError(ValueError):
    """Base class of the errors heroeval raises on bad input or settings."""


class DataError(HeroEvalError):
    """Input data that cannot be ingested (bad label, missing column, ...)."""


class UnknownLabelerError(HeroEvalError):
    """The current round has labelers that the calibration does not know."""

    def __init__(self, message: str, labelers: tuple[str, ...]) -> None:
        super().__init__(message)
        self.labelers = labelers


class CalibrationFileError(HeroEvalError):
    """A calibration JSON file that is malformed or of an unknown version."""


class HeroEvalWarning(UserWarning):
    """Base class of heroeval's warnings."""


class ConvergenceWarning(HeroEvalWarning):
    """An EM fit stopped at its iteration limit before meeting its tolerance."""


class SparseGoldWarning(HeroEvalWarning):
    """A class has no gold item in the history, so a free (full) confusion row for it is not anchored by gold."""


class CovariateShiftWarning(HeroEvalWarning):
    """HERO-2's covariates differ between the current round and the history beyond chance.

    HERO-2 assumes the covariates' distribution is shared; when it is not, the
    control variate turns the difference into bias.
    """


class TransportabilityWarning(HeroEvalWarning):
    """Some labelers' current-round behaviour does not match their calibration (labeler drift).

    HERO assumes each labeler's sensitivity and specificity transport from the
    history to the current round; :func:`heroeval.checks.drift.check_drift` tests it
    and names the labelers whose observed positive rate disagrees.
    """


class SharedCovariatesWarning(HeroEvalWarning):
    """The current round's covariate rows repeat the history's item for item.

    HERO-2's standard error treats the current and history covariate means as
    independent samples; identical rows make them the same sample.
    """


class MultipleRoundsWarning(HeroEvalWarning):
    """The current round's data name several rounds: they are estimated as one pooled round."""
