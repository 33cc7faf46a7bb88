"""The methods a sweep knows: Rows, Candidate, Method, Context, and register()."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.selection.metrics import Metric

TASKS = ("binary", "multiclass", "regression", "ranking")


@dataclass(frozen=True)
class Rows:
    """Rows, labels and, for ranking, the sizes of the consecutive queries (as ``lgb.Dataset(group=...)``)."""

    X: object
    y: np.ndarray
    group: np.ndarray | None = None

    @classmethod
    def of(cls, rows, name: str) -> Rows:
        if isinstance(rows, Rows):
            return rows
        if isinstance(rows, tuple) and len(rows) in (2, 3):
            X, y, *group = rows
            y = np.asarray(y)
            if y.ndim != 1 or y.shape[0] != np.shape(X)[0]:
                raise CEGBError(f"{name}: y should be 1-d with one label per row of X ({np.shape(X)[0]}), "
                                f"got shape {y.shape}")
            return cls(X, y, np.asarray(group[0]) if group and group[0] is not None else None)
        raise CEGBError(f"{name} should be (X, y) or (X, y, group), got {type(rows).__name__}")


# ---------------------------------------------------------------------------------------------- methods
@dataclass
class Candidate:
    """A fitted point of a sweep: ``predict(X)`` gives what the metric reads (class probabilities, scores
    or values) and ``cost(X)`` the exact per-row costs (a CostReport)."""

    method: str
    params: dict
    model: object
    predict: Callable = field(repr=False)
    cost: Callable = field(repr=False)

    def measure(self, rows: Rows, metric: Metric) -> tuple[float, float, float]:
        """(quality, mean cost per row, coupled cost) on ``rows``."""
        report = self.cost(rows.X)
        return metric.fn(rows.y, self.predict(rows.X), rows.group), float(report.mean), float(report.coupled)


@dataclass(frozen=True)
class Method:
    """A registered method: ``prepare(context) -> state`` once per sweep (e.g. the base model or the knob's
    scale), ``fit(context, state, params) -> [Candidate, ...]`` per grid point, ``grid(context)`` the
    default grid, ``tasks`` those it supports."""

    name: str
    fit: Callable
    grid: Callable
    tasks: tuple[str, ...]
    prepare: Callable = lambda context: None


#: The methods every sweep, plot and script knows, by name. Add one with :func:`register`.
METHODS: dict[str, Method] = {}


def register(name: str, *, grid: Callable, tasks: Sequence[str] = TASKS, prepare: Callable | None = None):
    """Decorator registering ``fit(context, state, params) -> list[Candidate]`` as method ``name``."""
    def decorate(fit: Callable) -> Callable:
        METHODS[name] = Method(name, fit, grid, tuple(tasks), prepare or (lambda context: None))
        return fit
    return decorate


@dataclass(frozen=True)
class Context:
    """What every fit of a sweep sees."""

    task: str
    train: Rows
    valid: Rows
    costs: FeatureCosts
    params: Mapping  # LightGBM parameters shared by the LightGBM-based methods
    num_boost_round: int
    early_stopping_rounds: int


