"""The methods a sweep knows: Rows, Candidate, Method, Context, and register()."""

from __future__ import annotations

import math
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


def class_labels(task: str, train: Rows, valid: Rows) -> np.ndarray | None:
    """The sorted classes of a classification task's labels (train's and valid's), or None for regression and
    ranking. binary: exactly two classes, both in train; multiclass: at least two. Every method then sees the
    labels as their indices in the classes (:func:`encoded`): 0 and 1, the larger value being 1 (the positive
    class, as scikit-learn's ``classes_[1]``), or 0..K-1."""
    if task not in ("binary", "multiclass"):
        return None
    try:
        found = np.unique(np.concatenate([train.y, valid.y]))
    except TypeError:
        raise CEGBError(f"task={task!r}: labels should be numbers or strings of one kind, got "
                        f"{train.y.dtype} and {valid.y.dtype} labels that cannot be ordered") from None
    if found.dtype.kind == "f" and not np.isfinite(found).all():
        raise CEGBError(f"task={task!r}: labels should be finite, got {found[~np.isfinite(found)][:3].tolist()}")
    shown = found[:10].tolist() + (["..."] if len(found) > 10 else [])
    if task == "binary" and len(found) != 2:
        raise CEGBError(f"task='binary' needs labels of exactly two classes (the larger is the positive class), "
                        f"got {len(found)} in train and valid: {shown}")
    if task == "binary" and len(np.unique(train.y)) != 2:
        raise CEGBError(f"task='binary': train should hold both classes {shown}, got only "
                        f"{np.unique(train.y).tolist()}")
    if task == "multiclass" and len(found) < 2:
        raise CEGBError(f"task='multiclass' needs labels of at least two classes, got {shown}")
    return found


def encoded(rows: Rows, classes: np.ndarray | None, name: str) -> Rows:
    """``rows`` with its labels as their indices in ``classes`` (None: as they are); a label that is not one
    of the classes is an error naming it."""
    if classes is None:
        return rows
    y = np.asarray(rows.y)
    kinds = {y.dtype.kind, classes.dtype.kind}
    if kinds <= set("biuf") or kinds == {"U"}:  # comparable: sorted search
        codes = np.searchsorted(classes, y)
        known = (codes < len(classes)) & (classes[np.minimum(codes, len(classes) - 1)] == y)
    else:  # objects, or strings against numbers: by value
        index = {c: i for i, c in enumerate(classes.tolist())}
        codes = np.array([index.get(v, -1) for v in y.tolist()], dtype=np.int64)
        known = codes >= 0
    if not known.all():
        raise CEGBError(f"{name}: labels should be among the sweep's classes {classes[:10].tolist()}, got "
                        f"{np.unique(y[~known].astype(object).astype(str))[:5].tolist()}")
    return Rows(rows.X, codes.astype(np.int64), rows.group)


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
    #: its training reached the sweep's num_boost_round while the validation metric still improved
    capped: bool = False
    #: for a prefix of ``model`` (shared by the points of one training), builds the model of this point alone
    prefix: Callable | None = field(default=None, repr=False)

    def fitted_model(self):
        """The model of this point: ``model``, or for a prefix a copy holding only its trees."""
        return self.model if self.prefix is None else self.prefix()

    def measure(self, rows: Rows, metric: Metric) -> tuple[float, float, float]:
        """(quality, mean cost per row, coupled cost) on ``rows``."""
        report = self.cost(rows.X)
        return metric.fn(rows.y, self.predict(rows.X), rows.group), float(report.mean), float(report.coupled)


@dataclass(frozen=True)
class Knob:
    """A method's knob that moves its cost monotonically (in theory; in practice up to noise), which a sweep
    with a budget refines: ``name`` the grid parameter, ``record`` a parameter the fit derives from it (the raw
    trade-off of a relative one: ignored when grouping points), ``log`` to bisect geometrically,
    ``cheap_end`` the value of the cheapest model (where to look when every point is over the budget)."""

    name: str
    record: str | None = None
    log: bool = False
    cheap_end: float | None = None

    def between(self, a: float, b: float) -> float:
        """The midpoint of two knob values (geometric for a log knob when both are positive)."""
        return math.sqrt(a * b) if self.log and a > 0 and b > 0 else (a + b) / 2


def _no_state(context) -> None:
    return None


@dataclass(frozen=True)
class Method:
    """A registered method: ``prepare(context) -> state`` once per sweep (e.g. the base model or the knob's
    scale), ``fit(context, state, params) -> [Candidate, ...]`` per grid point, ``grid(context)`` the
    default grid, ``tasks`` those it supports, ``knob`` the knob a sweep with a budget refines (None: none)."""

    name: str
    fit: Callable
    grid: Callable
    tasks: tuple[str, ...]
    prepare: Callable = _no_state
    knob: Knob | None = None


#: The methods every sweep, plot and script knows, by name. Add one with :func:`register`.
METHODS: dict[str, Method] = {}


def register(name: str, *, grid: Callable, tasks: Sequence[str] = TASKS, prepare: Callable | None = None,
             knob: Knob | None = None):
    """Decorator registering ``fit(context, state, params) -> list[Candidate]`` as method ``name``; ``knob``: the
    grid parameter a sweep with a budget refines around it (see :class:`Knob`)."""
    def decorate(fit: Callable) -> Callable:
        METHODS[name] = Method(name, fit, grid, tuple(tasks), prepare or _no_state, knob)
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
    metric: Metric | None = None  # the sweep's metric (a baseline that chooses features reads it)
    budget: float | None = None  # the sweep's budget: the longest prefix within it is a point too


