"""The contract every budgeted estimator of the package follows (:class:`BudgetedEstimator`).

- ``__init__`` takes keyword arguments only, among them ``feature_costs`` (the cost model: FeatureCosts, lazy
  costs per column, or a mapping / pandas Series by feature name; None: every feature costs 1, unless said
  otherwise), the method's trade-off (``tradeoff``; ``cegb_tradeoff`` for the LightGBM estimators, whose
  keyword arguments are LightGBM parameters), ``random_state`` and ``n_jobs``.
- ``random_state``: None, an int or a numpy RandomState; the same value gives the same model whatever
  ``n_jobs``. ``n_jobs``: threads; None or -1 all the CPUs this process may use, k > 0 at most k, -k all
  but k - 1 (scikit-learn's convention).
- ``fit`` returns the estimator and sets ``costs_`` (the costs aligned to the columns), ``n_features_in_``
  (and ``feature_names_in_`` for a DataFrame).
- ``predict`` returns an array (result objects come from separately named methods).
- ``prediction_cost(X, *, n_jobs=None) -> CostReport``: the exact per-row cost of what ``predict`` does; the
  mixin's ``__lightgbm_cegb_cost__`` makes :func:`lightgbm_cegb.prediction_cost` (and every entry point that prices
  a model) use it.
- ``tradeoff_scale(X, y, **fit_params) -> float``: the smallest value of the trade-off at which the model
  reads no feature, so that ``r * scale`` with r in [0, 1] means the same on any data and costs (how
  ``lightgbm_cegb.selection`` turns its ``relative_tradeoff`` into the estimator's own).
- ``save(path)`` / ``load(path, **given)``: the package's saved-model format (:mod:`lightgbm_cegb.io.saved`).
- A method used before ``fit`` raises :class:`~lightgbm_cegb.core.errors.NotFittedError`.
"""

from __future__ import annotations

import os
import warnings
from inspect import signature

import numpy as np
from sklearn.base import clone, is_classifier

from lightgbm_cegb.core.costs import FeatureCosts, lightgbm_feature_names, resolve_costs
from lightgbm_cegb.core.errors import CEGBError, NoSplitWarning, NotFittedError
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.tradeoff_scales import no_split_scale
from lightgbm_cegb.core.validation import CheckedElsewhere, NoneOr, Number, check_params
from lightgbm_cegb.io import saved

__all__ = ["BudgetedEstimator", "check_fitted", "own_cost"]


def check_fitted(estimator, attribute: str) -> None:
    """Raise NotFittedError unless ``estimator`` has the fitted ``attribute``.

    Parameters
    ----------
    estimator : object
        The estimator to check.
    attribute : str
        An attribute its ``fit`` sets.

    Raises
    ------
    NotFittedError
        If ``estimator`` has no attribute ``attribute``.
    """
    if not hasattr(estimator, attribute):
        raise NotFittedError(f"this {type(estimator).__name__} is not fitted yet: call fit first")


def own_cost(model, price, X, costs, num_features: int, names: list[str] | None, *, num_iteration: int | None,
             per_iteration: bool, trees: bool) -> CostReport | None:
    """A model's own exact accounting as :func:`lightgbm_cegb.prediction_cost` asks for it (``__lightgbm_cegb_cost__``).

    Parameters
    ----------
    model : object
        The fitted model of the package (its ``costs_``: the costs it was fitted with).
    price : callable
        ``price(X) -> CostReport``: the model's own exact cost of what ``predict`` does.
    X : array-like of shape (n_samples, n_features)
        The rows.
    costs : FeatureCosts, lazy costs per column, or a mapping / pandas Series by feature name, or None
        The costs asked for (None: the fitted costs).
    num_features : int
        The model's number of columns.
    names : list of str or None
        Their names (to align costs given by name).
    num_iteration : int or None
        Iterations asked for (None: those ``predict`` uses).
    per_iteration : bool
        Whether the mean cost after each iteration is asked for.
    trees : bool
        Whether ``prediction_cost`` can price the model's trees instead.

    Returns
    -------
    CostReport or None
        ``price(X)`` when asked for the cost of what ``predict`` does under the fitted costs; None when the model's
        trees answer what is asked instead.

    Raises
    ------
    CEGBError
        If a model without trees is asked for other costs, ``num_iteration`` or ``per_iteration``.
    """
    fitted = getattr(model, "costs_", None)
    same = costs is None or (isinstance(fitted, FeatureCosts)
                             and resolve_costs(costs, num_features, names, unpriced="refuse") == fitted)
    if same and num_iteration is None and not per_iteration:
        return price(X)
    if trees:
        return None
    asked = ("other costs than those it was fitted with (costs_)" if not same else
             f"num_iteration={num_iteration!r}" if num_iteration is not None else "per_iteration=True")
    raise CEGBError(f"prediction_cost: a {type(model).__name__} is priced by its own exact accounting, of what predict "
                    f"does under the costs it was fitted with; got {asked}: pass costs=None (or its costs_), "
                    "num_iteration=None and per_iteration=False")


#: ``feature_costs``: checked by the one cost resolver (``core.costs.resolve_costs``) when ``fit`` resolves them
COSTS = CheckedElsewhere("the cost resolver, core.costs.resolve_costs")
#: ``random_state`` given to LightGBM as its seed: None (0) or an integer of its range
SEED = NoneOr(Number(-2**31, 2**31 - 1, integer=True))
#: ``random_state`` read by scikit-learn's ``check_random_state`` (None, an integer or a RandomState)
RANDOM_STATE = CheckedElsewhere("scikit-learn's check_random_state")


def names_in(estimator) -> list[str] | None:
    """The names of the columns ``estimator`` was fitted on (``feature_names_in_``: a DataFrame's), as str; None for
    X without names.

    Parameters
    ----------
    estimator : object
        A fitted estimator.

    Returns
    -------
    list of str or None
        The names.
    """
    names = getattr(estimator, "feature_names_in_", None)
    return None if names is None else [str(n) for n in names]


class BudgetedEstimator:
    """Mixin of the contract of the package's budgeted estimators (see the module's doc).

    It provides :meth:`tradeoff_scale`, :meth:`save` and :meth:`load`.

    Notes
    -----
    A subclass sets:

    ``_tradeoff`` : str
        The name of its trade-off parameter.
    ``_fitted_attribute`` : str
        An attribute ``fit`` sets (for :func:`check_fitted`).
    ``_probe`` : dict
        Parameters that make the fits of :meth:`tradeoff_scale`'s bisection cheap (e.g. one tree).
    ``_given_at_load`` : tuple of str
        Parameters the saved format does not hold (a costly model, a callable): ``load`` takes them.
    ``_constraints`` : dict
        Every ``__init__`` parameter's constraint (``core.validation``), checked by ``_check_params`` when
        ``fit`` starts.

    and implements ``prediction_cost``, ``_saved_state() -> (state, files)`` and ``_restore(state, folder,
    manifest)``.
    """

    _abstract = True  # a base of estimators, which holds no model: no manifest names it (estimator_class)

    _tradeoff = "tradeoff"
    _fitted_attribute = "costs_"
    _probe: dict = {}
    _given_at_load: tuple[str, ...] = ()
    _constraints: dict = {}

    def _check_params(self) -> None:
        """Check every declared parameter (``_constraints``); a CEGBError names the first bad one."""
        check_params(self, self._constraints)

    def _saved_state(self) -> tuple[dict, dict]:
        """(state, files) of the fitted model, as :meth:`save` writes them: each subclass's own."""
        raise NotImplementedError(f"{type(self).__name__} implements _saved_state")

    def _restore(self, state: dict, folder, manifest) -> None:
        """Set the fitted attributes from what :meth:`_saved_state` saved: each subclass's own."""
        raise NotImplementedError(f"{type(self).__name__} implements _restore")

    def _check_fitted(self) -> None:
        check_fitted(self, self._fitted_attribute)

    def _names_in(self) -> list[str] | None:
        return names_in(self)

    def _resolved_costs(self, num_features: int) -> FeatureCosts:
        """``feature_costs`` for fit's ``num_features`` columns (by name: fit's DataFrame's), through the one
        resolver; None prices every feature at 1 (``core.costs.UNPRICED``)."""
        return resolve_costs(self.feature_costs, num_features, self._names_in(), unpriced="unit")

    def _lightgbm_feature_names(self) -> list[str] | str:
        """``feature_name`` for the Datasets of the LightGBM models the estimator trains: the names of fit's
        DataFrame as LightGBM holds them, so that its models name the columns as X does; "auto" (LightGBM's
        Column_i) for X without names."""
        names = self._names_in()
        return "auto" if names is None else lightgbm_feature_names(names)

    def prediction_cost(self, X, *, n_jobs: int | None = None) -> CostReport:  # pragma: no cover - abstract
        """The exact per-row cost of what ``predict`` does on X, under the fitted costs (``costs_``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.
        n_jobs : int or None, default=None
            Threads (None: the CPUs this process may use).

        Returns
        -------
        CostReport
            The per-row acquisition and evaluation costs, and the features' usage.
        """
        raise NotImplementedError

    def __lightgbm_cegb_cost__(self, X, costs=None, *, num_iteration: int | None = None, per_iteration: bool = False,
                               n_jobs: int | None = None, group=None) -> CostReport | None:
        """How :func:`lightgbm_cegb.prediction_cost` prices the estimator (``cost_scorer`` and the command line too).

        Its own exact :meth:`prediction_cost` when asked for the cost of what ``predict`` does under the fitted
        costs (``costs`` None or the same costs); None, for ``prediction_cost`` to price the estimator's trees,
        when an estimator with trees (``forest_``, ``booster_``) is asked for other costs, ``num_iteration`` or
        ``per_iteration``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.
        costs : FeatureCosts, lazy costs per column, or a mapping / pandas Series by feature name, optional
            The costs asked for (None: the fitted costs).
        num_iteration : int, optional
            Iterations asked for (None: those ``predict`` uses).
        per_iteration : bool, default=False
            Whether the mean cost after each iteration is asked for.
        n_jobs : int or None, default=None
            Threads (None: the CPUs this process may use).
        group : array-like of shape (n_queries,), optional
            A ranker's query sizes (the staged acquisition ranker's ``prediction_cost`` takes them); an estimator that
            prices each row alone ignores them.

        Returns
        -------
        CostReport or None
            The estimator's own report, or None where its trees answer.

        Raises
        ------
        NotFittedError
            If the estimator is not fitted.
        CEGBError
            If an estimator without trees is asked for other costs, ``num_iteration`` or ``per_iteration``.
        """
        self._check_fitted()
        reads_group = any(parameter.name == "group" or parameter.kind is parameter.VAR_KEYWORD
                          for parameter in signature(self.prediction_cost).parameters.values())
        by_query = {"group": group} if group is not None and reads_group else {}
        return own_cost(self, lambda rows: self.prediction_cost(rows, n_jobs=n_jobs, **by_query), X, costs,
                        self.n_features_in_, self._names_in(), num_iteration=num_iteration, per_iteration=per_iteration,
                        trees=any(hasattr(self, trees) for trees in ("forest_", "booster_")))

    # ----------------------------------------------------------------------------------- trade-off scale

    def _reads_features(self, X) -> bool:
        """Whether the fitted model reads a feature for some row of X."""
        return bool(self.prediction_cost(X).usage.any())

    def tradeoff_scale(self, X, y, **fit_params) -> float:
        """The smallest value of the trade-off at which the model fitted on (X, y) reads no feature.

        The trade-off is the estimator's trade-off parameter (``tradeoff``; ``cegb_tradeoff`` for the LightGBM
        estimators). Found by bisection on fits with the other parameters as set (cheapened by ``_probe``, e.g.
        one tree); ``r * scale`` with r in [0, 1] then means the same on any data and costs. The estimator itself
        is not fitted (the fits are on clones).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training rows.
        y : array-like of shape (n_samples,)
            The targets.
        **fit_params : dict
            As for ``fit`` (validation sets, ``eval_set``, ``eval_group``, ``eval_sample_weight`` and ``X_valid``,
            are dropped).

        Returns
        -------
        float
            The smallest trade-off (to a relative tolerance of 1e-3) at which the fitted model reads no feature.

        Raises
        ------
        CEGBError
            If the model still reads a feature at every trade-off up to 1e30; NothingToTradeOff (a CEGBError, which
            a sweep answers by leaving the method out) if it reads none even without costs.
        """
        for key in ("eval_set", "eval_group", "eval_sample_weight", "X_valid"):
            fit_params.pop(key, None)

        def reads(value: float) -> bool:
            probe = clone(self).set_params(**{self._tradeoff: value, **self._probe})
            with warnings.catch_warnings():  # past the scale every probe reads nothing: that is the point
                warnings.simplefilter("ignore", NoSplitWarning)
                return probe.fit(X, y, **fit_params)._reads_features(X)

        return no_split_scale(reads, f"{type(self).__name__}.tradeoff_scale")

    # ------------------------------------------------------------------------------------- save / load

    def _saved_params(self) -> dict:
        return {k: v for k, v in self.get_params(deep=False).items() if k not in self._given_at_load}

    def save(self, path: str | os.PathLike) -> None:
        """Save the fitted model into the folder ``path`` in the package's saved-model format.

        The format is :mod:`lightgbm_cegb.io.saved`'s. The save is atomic: a failed save leaves an earlier one
        in ``path`` as it was. Parameters in ``_given_at_load`` are not saved: give them to :meth:`load`.

        Parameters
        ----------
        path : str or os.PathLike
            The folder (created with its parents if needed).

        Raises
        ------
        NotFittedError
            If the estimator is not fitted.
        CEGBError
            If ``path`` is a file.
        """
        params, state, files = self._saved_parts()
        saved.save(path, self, params=params, state=state, files=files)

    @classmethod
    def load(cls, path: str | os.PathLike, **given):
        """Load the model saved in ``path`` by :meth:`save` (or by lightgbm_cegb 0.1.0).

        Parameters
        ----------
        path : str or os.PathLike
            The folder of the saved model.
        **given : dict
            The parameters the format does not hold (``_given_at_load``; none for most estimators).

        Returns
        -------
        object
            The fitted estimator, of this class.

        Raises
        ------
        CEGBError
            If ``given`` holds a parameter the class does not take at load time, or the folder holds no model of
            this class.
        """
        unknown = sorted(set(given) - set(cls._given_at_load))
        if unknown:
            raise CEGBError(f"{cls.__name__}.load: unexpected arguments {unknown}; it takes "
                            f"{list(cls._given_at_load) or 'none'}")
        manifest, folder = saved.read(path, cls.__name__)
        return cls._from_manifest(manifest, folder, given)

    def _saved_parts(self) -> tuple[dict, dict, dict]:
        """(params, state, files) as :meth:`save` writes them (a Selection saves its estimator with its own)."""
        self._check_fitted()
        state, files = self._saved_state()
        return self._saved_params(), state, files

    @classmethod
    def _from_manifest(cls, manifest, folder, given: dict):
        """The estimator a manifest describes (read from ``folder``; ``given``: the parameters given at load)."""
        if manifest["format_version"] == 1:
            manifest = cls._upgrade(manifest)
        params = {**saved.decode(manifest["params"]), **given}
        try:
            model = cls(**params)
        except TypeError as exc:  # a parameter the class does not take
            raise saved.damaged(manifest, f"params are not {cls.__name__}'s parameters: {exc}") from None
        model._restore_inputs(int(manifest["n_features_in"]), manifest.get("feature_names_in"))
        if manifest["costs"] is not None:  # the fitted costs (the CEGB estimators restore theirs from their state)
            model.costs_ = FeatureCosts.from_dict(manifest["costs"])
        state = saved.decode(manifest["state"])
        if (state.get("classes") is not None) != is_classifier(model):  # a sibling's state (classifier, regressor)
            raise saved.damaged(state, f"{cls.__name__} is {'' if is_classifier(model) else 'not '}a classifier: its "
                                       f"state should {'' if is_classifier(model) else 'not '}hold class labels, "
                                       f"got classes {state.get('classes')!r:.60}")
        model._restore(state, folder, manifest)
        saved.every_file_used(manifest)
        return model

    def _restore_inputs(self, n_features: int, names: list[str] | None) -> None:
        """scikit-learn's ``n_features_in_`` and ``feature_names_in_`` of a loaded model."""
        self.n_features_in_ = n_features
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)

    @classmethod
    def _upgrade(cls, manifest: dict) -> dict:
        """A manifest of format version 1 (lightgbm_cegb 0.1.0) in the form of version 2."""
        raise CEGBError(f"{cls.__name__}: no model of this class was saved by lightgbm_cegb 0.1.0")


def nested_parts(model: BudgetedEstimator, prefix: str) -> tuple[dict, dict]:
    """A fitted estimator saved inside another object's folder (a Selection holds its chosen model so): its
    description, for the outer state, and its files, named ``prefix`` + the estimator's own names.

    Parameters
    ----------
    model : BudgetedEstimator
        The fitted estimator.
    prefix : str
        The prefix of its files' names in the folder.

    Returns
    -------
    (dict, dict)
        The description (the estimator's class name, parameters, state, input shape and fitted costs) and the
        files {name: text}; :func:`nested_model` reads them back.
    """
    params, state, files = model._saved_parts()
    n = int(model.n_features_in_)
    names = getattr(model, "feature_names_in_", None)
    costs = getattr(model, "costs_", None)
    described = {"kind": "estimator", "estimator": type(model).__name__, "params": saved.encode(params),
                 "state": state, "n_features_in": n,
                 "feature_names_in": None if names is None else [str(name) for name in names],
                 "costs": None if costs is None else costs.to_dict(n)}
    return described, {f"{prefix}{name}": text for name, text in files.items()}


def nested_model(cls: type, described: dict, manifest, folder, prefix: str) -> BudgetedEstimator:
    """The estimator :func:`nested_parts` described, read back from the outer object's ``manifest`` and ``folder``.

    Parameters
    ----------
    cls : type
        The estimator's class (as the description names it).
    described : dict
        The description :func:`nested_parts` gave.
    manifest : lightgbm_cegb.io.saved.Fields
        The outer object's manifest (its files and their texts).
    folder : pathlib.Path
        The outer object's folder.
    prefix : str
        The prefix of the estimator's files' names.

    Returns
    -------
    BudgetedEstimator
        The fitted estimator.
    """
    files = {name.removeprefix(prefix): file_name for name, file_name in manifest["files"].items()
             if name.startswith(prefix)}
    missing = [key for key in ("params", "state", "n_features_in") if key not in described]
    if missing:
        raise saved.damaged(manifest, f"the chosen model's description lacks {missing}")
    inner = saved.checked_fields({"format_version": manifest["format_version"], "files": files,
                                  "estimator": cls.__name__,
                                  **{key: described.get(key) for key in ("params", "state", "n_features_in",
                                                                         "feature_names_in", "costs")}},
                                 f"{manifest.where} (the chosen model)")
    inner.texts = {name: manifest.texts[f"{prefix}{name}"] for name in files}
    model = cls._from_manifest(inner, folder, {})
    manifest.used.update(f"{prefix}{name}" for name in inner.used)
    return model
