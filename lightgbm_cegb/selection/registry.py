"""The methods a sweep knows: Rows, Candidate, Method, Context, and register()."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.subsets import query_subsample, subsample_index
from lightgbm_cegb.core.validation import checked_group
from lightgbm_cegb.selection.metrics import Metric, best_threshold, thresholded

TASKS = ("binary", "multiclass", "regression", "ranking")


@dataclass(frozen=True)
class Rows:
    """Rows, labels and, for ranking, the sizes of the consecutive queries (as ``lgb.Dataset(group=...)``).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The rows (numpy array, scipy sparse matrix or pandas DataFrame).
    y : ndarray of shape (n_samples,)
        The labels.
    group : ndarray of int or None, default=None
        The sizes of the consecutive queries (ranking), summing to n_samples; None without queries.
    """

    X: object
    y: np.ndarray
    group: np.ndarray | None = None

    @classmethod
    def of(cls, rows, name: str) -> Rows:
        """``rows`` as a :class:`Rows`: a Rows as it is, or a tuple (X, y) or (X, y, group).

        Parameters
        ----------
        rows : Rows or tuple
            A Rows, (X, y) or (X, y, group).
        name : str
            The argument's name, for the messages.

        Returns
        -------
        Rows
            The rows, their labels (as a numpy array) and their query sizes.

        Raises
        ------
        CEGBError
            When ``rows`` is none of these, X is not 2-dimensional with rows, y is not 1-d with one label per row
            of X, or the query sizes do not sum to the rows.
        """
        if isinstance(rows, Rows):
            return rows
        if isinstance(rows, tuple) and len(rows) in (2, 3):
            X, y, *group = rows
            if not hasattr(X, "shape"):  # a list of rows: as numpy, as scikit-learn reads it
                X = np.asarray(X)
            if len(X.shape) != 2 or X.shape[0] == 0:
                raise CEGBError(f"{name}: X should be 2-dimensional with at least one row, got shape {X.shape}")
            y = np.asarray(y)
            if y.ndim != 1 or y.shape[0] != X.shape[0]:
                raise CEGBError(f"{name}: y should be 1-d with one label per row of X ({X.shape[0]}), "
                                f"got shape {y.shape}")
            group = checked_group(group[0], X.shape[0], f"{name}: group") if group and group[0] is not None else None
            return cls(X, y, group)
        raise CEGBError(f"{name} should be (X, y) or (X, y, group), got {type(rows).__name__}")

    def subsample(self, size: int, task: str) -> Rows:
        """About ``size`` of the rows (seeded), in their order: whole queries for ranking, each class in proportion
        (at least one row) for classification (a sweep's screen; the subset search).

        Parameters
        ----------
        size : int
            The rows wanted (ranking: whole queries up to the first that reaches it).
        task : str
            The sweep's task.

        Returns
        -------
        Rows
            The subsample.
        """
        group = None
        if self.group is not None:
            index, group = query_subsample(self.group, size)
        else:
            index = subsample_index(self.y, size, task in ("binary", "multiclass"))
        return Rows(self.X.iloc[index] if hasattr(self.X, "iloc") else self.X[index], self.y[index], group)


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
    """A fitted point of a sweep: ``predict(X)`` gives what the metric reads and ``cost(X)`` the exact costs.

    Parameters
    ----------
    method : str
        The name of the method that fitted it.
    params : dict
        The grid point's parameters (and what the fit recorded, e.g. the raw trade-off and ``trees``).
    model : object
        The fitted model (for a prefix, the whole model the prefix is cut from).
    predict : callable
        ``predict(X)``: what the metric reads (class probabilities, scores or values).
    cost : callable
        ``cost(X)``: the exact per-row costs (a CostReport).
    capped : bool, default=False
        Its training reached the sweep's num_boost_round while the validation metric still improved.
    prefix : callable or None, default=None
        For a prefix of ``model`` (shared by the points of one training), builds the model of this point alone.
    decision_threshold : float or None, default=None
        With a threshold metric: the decision threshold chosen on the validation rows (a row is positive when its
        score is above it).
    measured : callable or None, default=None
        ``measured(X)``: the (prediction, CostReport) that ``predict`` and ``cost`` would give on X, from work shared
        with other points (a model's prefixes: ``points.PrefixPass``), or None where it has none; :meth:`measure`
        asks it first.
    """

    method: str
    params: dict
    model: object
    predict: Callable = field(repr=False)
    cost: Callable = field(repr=False)
    # its training reached the sweep's num_boost_round while the validation metric still improved
    capped: bool = False
    # for a prefix of ``model`` (shared by the points of one training), builds the model of this point alone
    prefix: Callable | None = field(default=None, repr=False)
    # a threshold metric's decision threshold, chosen on the validation rows (measure(..., choose=True))
    decision_threshold: float | None = None
    # measured(X): (prediction, CostReport) that predict and cost would give on X, from work shared with other points
    # (a model's prefixes: points.PrefixPass), or None where it has none
    measured: Callable | None = field(default=None, repr=False)

    def fitted_model(self):
        """The model of this point: ``model``, or for a prefix a copy holding only its trees.

        Returns
        -------
        object
            The fitted model of this point alone.
        """
        return self.model if self.prefix is None else self.prefix()

    def measure(self, rows: Rows, metric: Metric, *, choose: bool = False) -> tuple[float, float, float]:
        """(quality, mean cost per row, coupled cost) on ``rows``.

        Parameters
        ----------
        rows : Rows
            The rows to measure on (labels as the sweep's methods see them).
        metric : Metric
            The quality measure.
        choose : bool, default=False
            With a threshold metric: choose :attr:`decision_threshold` on these rows (the validation rows);
            otherwise the metric reads the labels at the threshold chosen (0.5 when none was).

        Returns
        -------
        quality : float
            The metric's value of ``predict`` on the rows.
        cost : float
            The mean prediction cost per row (``CostReport.mean``).
        coupled : float
            The coupled cost (once per model, not per row).
        """
        shared = None if self.measured is None else self.measured(rows.X)
        prediction, report = shared if shared is not None else (self.predict(rows.X), self.cost(rows.X))
        return self.quality(rows, prediction, metric, choose), float(report.mean), float(report.coupled)

    def quality(self, rows: Rows, prediction, metric: Metric, choose: bool = False) -> float:
        """The metric of ``prediction`` on ``rows``: a threshold metric's at :attr:`decision_threshold`, chosen here
        with ``choose`` (see :meth:`measure`).

        Parameters
        ----------
        rows : Rows
            The rows (their labels and query sizes).
        prediction : ndarray
            What the metric reads.
        metric : Metric
            The quality measure.
        choose : bool, default=False
            With a threshold metric, choose :attr:`decision_threshold` on these rows.

        Returns
        -------
        float
            The metric's value.
        """
        if not metric.threshold:
            return metric.fn(rows.y, prediction, rows.group)
        if choose:
            self.decision_threshold, quality = best_threshold(metric, rows.y, prediction, rows.group)
            return quality
        threshold = 0.5 if self.decision_threshold is None else self.decision_threshold
        return thresholded(metric, rows.y, prediction, rows.group, threshold)


@dataclass(frozen=True)
class Knob:
    """A method's knob that moves its cost monotonically (in theory; in practice up to noise).

    A sweep with a budget refines it.

    Parameters
    ----------
    name : str
        The grid parameter.
    record : str or None, default=None
        A parameter the fit derives from it (the raw trade-off of a relative one: ignored when grouping points).
    log : bool, default=False
        Bisect geometrically.
    cheap_end : float or None, default=None
        The value of the cheapest model (where to look when every point is over the budget).
    read_at_predict : bool, default=False
        A setting of a model the method's state fits once (e.g. the staged acquisition's trade-off): a new value
        costs no fit, so after a screen the finalists' knob is refined for every round of ``refine``.
    """

    name: str
    record: str | None = None
    log: bool = False
    cheap_end: float | None = None
    read_at_predict: bool = False

    def between(self, a: float, b: float) -> float:
        """The midpoint of two knob values (geometric for a log knob when both are positive).

        Parameters
        ----------
        a : float
            A knob value.
        b : float
            Another knob value.

        Returns
        -------
        float
            ``sqrt(a * b)`` for a log knob when both are positive, else ``(a + b) / 2``.
        """
        return math.sqrt(a * b) if self.log and a > 0 and b > 0 else (a + b) / 2


def _no_state(context) -> None:
    return None


def _no_plan(context, state, points) -> None:
    return None


@dataclass(frozen=True)
class Method:
    """A registered method (:func:`register` makes them).

    Parameters
    ----------
    name : str
        The method's name in :data:`METHODS`.
    fit : callable
        ``fit(context, state, params) -> [Candidate, ...]``, per grid point.
    grid : callable
        ``grid(context)``: the default grid (a list of parameter dicts).
    tasks : tuple of str
        The tasks it supports.
    prepare : callable, optional
        ``prepare(context) -> state``, once per sweep (e.g. the base model or the knob's scale); by default no
        state (None).
    knob : Knob or None, default=None
        The knob a sweep with a budget refines (None: none).
    plan : callable, optional
        ``plan(context, state, points)``: shown every point (params) of a batch of fits before they run, in the
        process that prepared the state; a state that fits one model for many points fits what they all need
        (e.g. the staged acquisition's stages up to their largest cap). By default nothing.
    shares_fits : bool, default=False
        Whether its points read models fitted once into its state (a cache the first point that needs a model fills
        and the others read): its points are fitted in the sweep's process whatever ``n_jobs`` or ``client``, one
        after another, since a copy of the state in another process would fit the models again for each point.
    """

    name: str
    fit: Callable
    grid: Callable
    tasks: tuple[str, ...]
    prepare: Callable = _no_state
    knob: Knob | None = None
    plan: Callable = _no_plan
    shares_fits: bool = False


#: The methods every sweep, plot and script knows, by name. Add one with :func:`register`.
METHODS: dict[str, Method] = {}


def register(name: str, *, grid: Callable, tasks: Sequence[str] = TASKS, prepare: Callable | None = None,
             knob: Knob | None = None, plan: Callable | None = None, shares_fits: bool = False):
    """Decorator registering ``fit(context, state, params) -> list[Candidate]`` as method ``name``.

    Parameters
    ----------
    name : str
        The method's name (replaces a method registered under it).
    grid : callable
        ``grid(context)``: the method's default grid (a list of parameter dicts).
    tasks : sequence of str, default=TASKS
        The tasks it supports ("binary", "multiclass", "regression", "ranking").
    prepare : callable or None, default=None
        ``prepare(context) -> state``, once per sweep (None: no state).
    knob : Knob or None, default=None
        The grid parameter a sweep with a budget refines around it (see :class:`Knob`).
    plan : callable or None, default=None
        ``plan(context, state, points)``, before each batch of the method's fits (see :class:`Method`).
    shares_fits : bool, default=False
        Its points read models fitted once into its state: fitted in the sweep's process (see :class:`Method`).

    Returns
    -------
    callable
        The decorator: it registers ``fit`` in :data:`METHODS` and returns it unchanged.
    """
    def decorate(fit: Callable) -> Callable:
        METHODS[name] = Method(name, fit, grid, tuple(tasks), prepare or _no_state, knob, plan or _no_plan,
                               shares_fits)
        return fit
    return decorate


class Family:
    """The methods of one module, defined beside their fits and registered together: defining a method registers
    nothing; the package registers each family of its methods (``lightgbm_cegb.selection``), a user's module may
    register its own the same way (or use :func:`register`).
    """

    def __init__(self) -> None:
        self.methods: list[tuple[str, dict, Callable]] = []

    def method(self, name: str, **spec) -> Callable:
        """Decorator recording ``fit`` as method ``name`` of this family (``spec``: :func:`register`'s keywords).

        Parameters
        ----------
        name : str
            The method's name.
        **spec
            :func:`register`'s keyword arguments (``grid``, ``tasks``, ``prepare``, ``knob``, ``plan``,
            ``shares_fits``).

        Returns
        -------
        callable
            The decorator: it records ``fit`` and returns it unchanged.
        """
        def decorate(fit: Callable) -> Callable:
            self.methods.append((name, spec, fit))
            return fit
        return decorate

    def register(self) -> None:
        """Register every method of the family in :data:`METHODS` (in the order defined)."""
        for name, spec, fit in self.methods:
            register(name, **spec)(fit)


class NeedsFit(Exception):
    """Raised by a method's fit for a point that would train a model where the context allows none
    (``Context.fits``): the runner counts the point as not fitted."""


class TimeCut:
    """A LightGBM callback that ends a training once ``seconds`` have passed since it was made (after a round that
    is not the last): the model keeps the rounds it trained, its best iteration the last of them (the early stopping's
    callback, called before it, stops it earlier as ever). The rounds trained are appended to ``record``."""

    def __init__(self, seconds: float, record: list) -> None:
        self.seconds, self.record, self.start = seconds, record, time.perf_counter()
        self.order = 40  # after lgb.early_stopping's 30 (lgb.train reads the instance's)

    def elapsed(self) -> float:
        """The seconds since it was made.

        Returns
        -------
        float
            The seconds passed.
        """
        return time.perf_counter() - self.start

    def __call__(self, env) -> None:
        if env.iteration < env.end_iteration - 1 and self.elapsed() > self.seconds:
            import lightgbm as lgb

            self.record.append(env.iteration + 1)
            raise lgb.callback.EarlyStopException(env.iteration, env.evaluation_result_list)


@dataclass(frozen=True)
class Context:
    """What every fit of a sweep sees.

    Parameters
    ----------
    task : str
        "binary", "multiclass", "regression" or "ranking".
    train : Rows
        The training rows (classification labels as their indices in the sweep's classes).
    valid : Rows
        The validation rows (early stopping, measures), labelled the same way.
    costs : FeatureCosts
        The cost model, aligned to the columns.
    params : Mapping
        LightGBM parameters shared by the LightGBM-based methods.
    num_boost_round : int
        The cap on boosting rounds.
    early_stopping_rounds : int
        The patience of early stopping on the validation rows.
    metric : Metric or None, default=None
        The sweep's metric (a baseline that chooses features reads it).
    budgets : tuple of float, default=()
        The sweep's budgets: the longest prefix within each is a point too (none: the grid only).
    shared : dict
        What the fits of one sweep share in this process, e.g. the plain model several methods start from
        (:func:`~lightgbm_cegb.selection.points.plain_model`); not compared, and each process has its own.
    screen_of : int or None, default=None
        In the context of a sweep's screen (its subsample), the number of training rows of the sweep: a method
        whose recipe depends on the rows (the adaptive acquisition's masked copies) follows the full sweep's.
    fits : bool, default=True
        False for the points of a method past its time allowance (``runner.Allowance``) whose knob is read when
        predicting: a point that reads a model the sweep fitted already runs, one that would train a model raises
        :class:`NeedsFit` instead.
    seconds : float or None, default=None
        The seconds a point's own boosting may run: its method's allowance left when the point started (None: no
        limit). A method whose point is one boosted model (CEGB, Greedy Miser) trains it with
        :meth:`cut_callbacks`, which end it there: the model keeps the rounds it trained, its prefixes the sweep's
        points as ever; the adaptive acquisition's classifiers too (a policy round after a cut one, or one the time
        left cannot hold, is not trained).
    cut : list
        The rounds each training cut by :meth:`cut_callbacks` had trained (the runner reads them).
    """

    task: str
    train: Rows
    valid: Rows
    costs: FeatureCosts
    params: Mapping  # LightGBM parameters shared by the LightGBM-based methods
    num_boost_round: int
    early_stopping_rounds: int
    metric: Metric | None = None  # the sweep's metric (a baseline that chooses features reads it)
    budgets: tuple[float, ...] = ()  # the sweep's budgets: the longest prefix within each is a point too
    shared: dict = field(default_factory=dict, compare=False, repr=False)
    screen_of: int | None = None  # a screen's context: the training rows of the sweep its subsample is drawn from
    fits: bool = True  # False: a point that would train a model raises NeedsFit (its method is past its allowance)
    seconds: float | None = None  # the seconds a point's own boosting may run (its method's allowance left)
    cut: list = field(default_factory=list, compare=False, repr=False)  # the rounds of each training cut there

    def cut_callbacks(self) -> list:
        """The LightGBM callbacks of a training of a point's own model.

        Returns
        -------
        list
            One that ends it ``seconds`` after now (:class:`TimeCut`), recording its rounds in ``cut``; none without a
            limit.
        """
        return [] if self.seconds is None else [TimeCut(self.seconds, self.cut)]

    @property
    def budget(self) -> float | None:
        """The largest of the sweep's budgets (None without one): what a method that searches within one budget
        (the cheap-subset baseline's feature path, whose every step is a point) searches within."""
        return max(self.budgets) if self.budgets else None


