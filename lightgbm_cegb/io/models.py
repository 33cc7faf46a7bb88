"""Any model the package takes -> its ``Forest``, parsed once and cached.

A method of the package joins by exposing its fitted ``Forest`` as the attribute ``forest_`` (and the
``FeatureCosts`` it was fitted with as ``costs_``: the costs used when none are given).

LightGBM Boosters and scikit-learn-API models are read from their model text, XGBoost and CatBoost models
from their JSON model (``xgboost_json``, ``catboost_json``), model files from disk (LightGBM text, XGBoost
JSON or UBJSON, CatBoost JSON or binary), fitted scikit-learn trees from their ``tree_`` arrays and
HistGradientBoosting from its predictors (``sklearn_trees``). The forest of a Booster is cached (weakly, with the
Booster) until it holds another model (``model_from_string``), its iteration or tree count changes or its last
iteration's trees do (``rollback_one_iter`` then ``update``), so that ``prediction_cost`` on a few rows costs about
what ``predict`` does; a model file's until its size or modification time changes. Editing an earlier tree of a
Booster in place (``set_leaf_output``, ``shuffle_models``) is not seen: pass ``to_forest(model, cache=False)``'s
result instead.

Each library is read by its record in :data:`READERS` (``io.model_readers``): the one table of libraries.
"""

from __future__ import annotations

import json
import os
import weakref
from pathlib import Path

import lightgbm as lgb

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.core.validation import read_utf8
from lightgbm_cegb.io import catboost_json, lightgbm_text, sklearn_trees, xgboost_json
from lightgbm_cegb.io.lightgbm_text import booster_of
from lightgbm_cegb.io.model_readers import FileFormat, ModelReader

#: The model readers, in the order a model is offered to them: the first that recognises it reads it (the last,
#: scikit-learn's trees, takes any model and refuses what it cannot read); a model file is of the first format of
#: theirs that it matches. A new library: a module defining its record, imported above, and its line here.
READERS: tuple[ModelReader, ...] = (
    lightgbm_text.READER,
    xgboost_json.READER,
    catboost_json.READER,
    sklearn_trees.HIST_READER,
    sklearn_trees.READER,
)

_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_file_cache: dict[str, tuple[tuple, Forest]] = {}
_identity_cache: dict[int, tuple] = {}  # id -> (weak reference, fingerprint, forest): see _by_identity


def unwrap(model):
    """The model a method's result object stands for (one defining ``__lightgbm_cegb_model__``, as
    ``PruneResult``), else ``model`` itself: how serving and io take results without importing methods.

    Parameters
    ----------
    model : object
        A model, or a method's result object.

    Returns
    -------
    object
        The model.
    """
    get = getattr(type(model), "__lightgbm_cegb_model__", None)
    return model if get is None else get(model)


def num_trees_used(model, forest: Forest, num_iteration: int | None) -> int:
    """Trees that ``predict`` uses: the first ``num_iteration`` iterations; None: as the model's ``predict``.

    Parameters
    ----------
    model : object
        The model (a LightGBM one may have a best iteration).
    forest : Forest
        Its forest.
    num_iteration : int or None
        Iterations used (None: as the model's ``predict``: a LightGBM Booster's best iteration, an early-stopped
        XGBoost estimator's best round (an XGBoost Booster predicts with all), otherwise all; <= 0: all).

    Returns
    -------
    int
        The number of trees.
    """
    booster = booster_of(model)
    if num_iteration is None and booster is not None:
        num_iteration = booster.best_iteration
    elif num_iteration is None and library_of(model) == "xgboost" and hasattr(model, "get_booster"):
        best = getattr(model, "best_iteration", None)  # an early-stopped estimator predicts with its best rounds
        num_iteration = None if best is None else int(best) + 1
    return forest.num_trees_for(num_iteration)


def name_groups(booster: lgb.Booster, costs: FeatureCosts) -> lgb.Booster:
    """A copy of ``booster``, trained with ``costs.to_params()``, whose model text names its feature groups as
    ``costs`` does (LightGBM numbers them): ``prediction_cost(model, X)`` with the model's own costs, its
    saved file and ``lightgbm-cegb cost`` report ``group_usage`` by name. The copy is read from the model
    text (all its iterations, ``best_iteration`` kept): it predicts and continues training as ``booster``,
    but holds no training data (no CEGB ledger).

    Parameters
    ----------
    booster : lightgbm.Booster
        A booster trained with ``costs.to_params()`` (its ``cegb_feature_group``).
    costs : FeatureCosts
        The costs, with groups, the booster was trained with.

    Returns
    -------
    lightgbm.Booster
        The copy, whose model text names the groups.

    Raises
    ------
    CEGBError
        When ``booster`` is not a Booster, ``costs`` have no groups, the booster was not trained with groups,
        or its group ids exceed the groups of ``costs``.
    """
    if not isinstance(booster, lgb.Booster):
        raise CEGBError(f"booster should be a lightgbm.Booster, got {type(booster).__name__}")
    if not isinstance(costs, FeatureCosts) or not costs.groups:
        raise CEGBError(f"costs should be the FeatureCosts with groups the booster was trained with, got {costs!r:.80}")
    text = booster.model_to_string(num_iteration=-1)
    ids = [int(float(v)) for v in lightgbm_text.read_text(text).params.get("cegb_feature_group", "").split(",")
           if v.strip()]
    if not ids or max(ids) < 0:
        raise CEGBError("booster: its parameters have no cegb_feature_group: it was not trained with groups")
    if max(ids) >= len(costs.groups):
        raise CEGBError(f"costs have {len(costs.groups)} groups but the booster's cegb_feature_group has ids up to "
                        f"{max(ids)}: give the costs it was trained with")
    named = lgb.Booster(model_str=lightgbm_text.with_group_names(text, list(costs.groups)))
    named.best_iteration = booster.best_iteration
    return named


def has_split(model, num_iteration: int | None = None) -> bool:
    """Whether the trees ``predict`` uses (see :func:`num_trees_used`) hold at least one split.

    Parameters
    ----------
    model : object
        Any model :func:`to_forest` reads.
    num_iteration : int, optional
        Iterations used, as :func:`num_trees_used` reads it.

    Returns
    -------
    bool
        Whether a split node is among those trees.
    """
    forest = to_forest(model)
    return bool(forest.node_offset[num_trees_used(model, forest, num_iteration)] > 0)


def fitted_costs(model):
    """The FeatureCosts a package estimator was fitted with (``costs_``), else None.

    Parameters
    ----------
    model : object
        Any model.

    Returns
    -------
    FeatureCosts or None
        Its ``costs_``, when that is a FeatureCosts.
    """
    costs = getattr(model, "costs_", None)
    return costs if isinstance(costs, FeatureCosts) else None


def library_of(model) -> str | None:
    """The library of a model from XGBoost or CatBoost (by its classes' modules, without importing either), or
    scikit-learn's HistGradientBoosting: "xgboost", "catboost", "hist"; None for any other model.

    Parameters
    ----------
    model : object
        Any model.

    Returns
    -------
    str or None
        The library's name (its reader's, when the reader is ``named``).
    """
    reader = _reader_of(model)
    return reader.name if reader.named else None


def _reader_of(model) -> ModelReader:
    return next(reader for reader in READERS if reader.recognises(model))


def _file_format(path: Path) -> tuple[ModelReader, FileFormat, object]:
    """(reader, format, content) of a model file: its text (a text format), its parsed JSON (a JSON format) or None
    (a binary format: only the library reads it)."""
    try:
        with open(path, "rb") as file:
            head = file.read(64)
    except OSError as exc:
        raise CEGBError(f"model file {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    formats = [(reader, form) for reader in READERS for form in reader.file_formats]
    for reader, form in formats:
        if form.heads and head.startswith(form.heads):
            return reader, form, None
    text = read_utf8(path, "model file")
    readable = [(reader, form) for reader, form in formats if form.text or form.json_key]
    plain = next((reader, form) for reader, form in readable if form.text)
    if not text.lstrip().startswith("{"):
        return *plain, text
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise CEGBError(f"model file {str(path)!r}: not a {plain[0].title} model, and not JSON ({exc})") from None
    for reader, form in readable:
        if form.json_key is not None and isinstance(parsed, dict) and form.json_key in parsed:
            return reader, form, parsed
    kinds = [f"{reader.title} (text)" if form.text else f"{reader.title} (no {form.json_key!r})"
             for reader, form in readable]
    raise CEGBError(f"model file {str(path)!r}: a JSON file that is not a model of {', '.join(kinds[:-1])} or "
                    f"{kinds[-1]}")


def _read_file(path: Path) -> Forest:
    """The Forest of a model file: read from its text or JSON, or loaded by its library then read."""
    reader, form, content = _file_format(path)
    return reader.read(form.load(path)) if form.read is None else form.read(content)


def load_file(path: str | os.PathLike):
    """The model in a model file, as its library loads it: a ``lightgbm.Booster`` (LightGBM text), an
    ``xgboost.Booster`` (JSON or UBJSON) or a ``catboost.CatBoost`` (JSON or binary); what ``LazyPredictor``
    predicts with when given a path.

    Parameters
    ----------
    path : str or os.PathLike
        The model file.

    Returns
    -------
    lightgbm.Booster, xgboost.Booster or catboost.CatBoost
        The model.

    Raises
    ------
    CEGBError
        When the file cannot be read, is not a model of these libraries, or its library is not installed.
    """
    path = Path(path)
    return _file_format(path)[1].load(path)


def _by_identity(model, reader: ModelReader, fingerprint: tuple) -> Forest:
    """``to_forest``'s cache for models that cannot be weak keys, by identity: the entry goes with the model."""
    key = id(model)
    entry = _identity_cache.get(key)
    if entry is not None and entry[0]() is model and entry[1] == fingerprint:
        return entry[2]
    forest = reader.read(model)
    try:
        ref = weakref.ref(model, lambda _, key=key: _identity_cache.pop(key, None))
    except TypeError:  # not weakly referenceable: not cached
        return forest
    _identity_cache[key] = (ref, fingerprint, forest)
    return forest


def to_forest(model, *, cache: bool = True) -> Forest:
    """The Forest of a LightGBM Booster or sklearn-API model, an XGBoost Booster or estimator, a CatBoost
    model, a fitted scikit-learn tree model (HistGradientBoosting too), or a model file of LightGBM, XGBoost
    (JSON, UBJSON) or CatBoost (JSON, binary) (a Forest is returned as it is).

    A package estimator's fitted ``forest_`` is returned as it is. The forest of a Booster is cached
    (weakly, with the Booster) until it loads another model, or its iteration count, tree count or last
    iteration's trees change (an XGBoost model's until its booster, what it saves or ``missing`` changes; a CatBoost
    model's until its tree count, leaf values, scale or bias change; a scikit-learn model's until its trees do); a
    model file's until its size, modification time or inode changes (the last file read only). Editing an earlier
    tree of a Booster in place (``set_leaf_output``, ``shuffle_models``), or rolling back more than one iteration
    and training again to the same count, is not seen by the cache: pass ``cache=False``.

    Parameters
    ----------
    model : lightgbm.Booster, LGBMModel, xgboost.Booster, XGBModel, CatBoost, str or os.PathLike, Forest, \
or fitted scikit-learn tree model
        The model, or the path of a model file (or an object standing for a model: a Selection, a PruneResult).
    cache : bool, default=True
        Use (and fill) the cache; False parses the model again.

    Returns
    -------
    Forest
        The model's trees (all its iterations).

    Raises
    ------
    CEGBError
        When the model file does not exist or cannot be read, when a model's text is given instead of a path,
        when the model is not fitted (a :class:`NotFittedError`, which scikit-learn's ``except NotFittedError``
        catches too), or when it is not supported.
    """
    model = unwrap(model)  # a method's result or a Selection: the model it stands for
    if isinstance(model, Forest):
        return model
    if isinstance(getattr(model, "forest_", None), Forest):  # the package's own estimators (BudgetRF, ...)
        return model.forest_
    if isinstance(model, (str, os.PathLike)):
        if isinstance(model, str) and "\n" in model:
            raise CEGBError(f"model should be a model file's path, got a string of {len(model)} characters over "
                            f"several lines ({model[:30]!r}...): for a model's text, pass "
                            "lightgbm.Booster(model_str=text)")
        path = Path(model)
        try:
            exists = path.is_file()
        except OSError as exc:  # e.g. a name too long for the file system
            raise CEGBError(f"model file {str(path)[:200]!r} cannot be read: {exc.strerror or exc}") from None
        if not exists:
            raise CEGBError(f"model file {str(path)!r} " + ("is a directory, not a file" if path.is_dir() else
                                                            "does not exist"))
        stat = path.stat()
        # a file replaced by a copy that keeps its size and time (cp -p, rsync -t) is another inode, or changed ctime
        key = (stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns)
        cached = _file_cache.get(str(path.resolve()))
        if cache and cached is not None and cached[0] == key:
            return cached[1]
        forest = _read_file(path)
        if cache:
            _file_cache.clear()  # keep one file's forest: enough for repeated calls on one model
            _file_cache[str(path.resolve())] = (key, forest)
        return forest
    reader = _reader_of(model)
    if not cache:
        return (reader.read_again or reader.read)(model)
    fingerprint = (reader.name, *reader.fingerprint(model))
    try:
        cached = _cache.get(model)
    except TypeError:  # not hashable (CatBoost's models compare by content) or not weakly referenceable
        return _by_identity(model, reader, fingerprint)
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    forest = reader.read(model)
    _cache[model] = (fingerprint, forest)
    return forest
