"""The exceptions and warnings of lightgbm_cegb (the checks that raise them are in ``core.validation``).

Errors: ``CEGBError`` (a ValueError) for invalid input; ``NotFittedError`` (also scikit-learn's, so
``except sklearn.exceptions.NotFittedError`` catches it) when a model is used before ``fit``. Warnings derive
from ``CEGBWarning`` (a UserWarning) so that one filter silences them all, or one class its kind.
"""

from __future__ import annotations

from sklearn.exceptions import NotFittedError as _SklearnNotFittedError


class LightGBMCEGBError(Exception):
    """The root of the package's exceptions: ``except LightGBMCEGBError`` catches every error lightgbm_cegb raises
    on purpose (invalid input, :class:`CEGBError`; a failed fetch, ``LazyFetchError``)."""


class CEGBError(LightGBMCEGBError, ValueError):
    """Invalid input to lightgbm_cegb; the message names the parameter, what was expected and what was got.

    A subclass of ``ValueError``: ``except ValueError`` catches it too.
    """


class NothingToTradeOff(CEGBError):
    """A trade-off's scale was asked for costs that give it nothing to weigh (every feature free to the method):
    :func:`~lightgbm_cegb.selection.sweep` then leaves the method out with a warning."""


class NotFittedError(_SklearnNotFittedError, CEGBError):
    """The model is used before it was fitted (scikit-learn's NotFittedError and a CEGBError).

    ``except sklearn.exceptions.NotFittedError`` and ``except CEGBError`` both catch it.
    """


class CEGBWarning(UserWarning):
    """Base class of the package's warnings.

    A ``UserWarning``: ``warnings.simplefilter("ignore", CEGBWarning)`` silences every warning of the package,
    a subclass's filter one kind.
    """


class NoSplitWarning(CEGBWarning):
    """The fitted model (or a part of it, such as ADAPT's gate) reads no feature: the trade-off is too large."""


class BudgetWarning(CEGBWarning):
    """A budget cannot be met as asked (e.g. the first iteration already exceeds it)."""


class RoundsWarning(CEGBWarning):
    """Training reached its cap on boosting rounds while the validation metric was still improving."""


def still_improving(best_iteration: int, rounds: int, patience: int) -> bool:
    """Whether a model trained for at most ``rounds`` iterations, early stopped after ``patience`` without gain, was
    still improving at the cap: its best iteration is within ``patience`` of it. With ``rounds <= patience`` that
    window holds every iteration and early stopping never judged the model; the window is then the last half of the
    rounds (a best iteration of 1 in 20 is no model still improving)."""
    window = patience if rounds > patience else max(1, rounds // 2)
    return best_iteration > rounds - window
