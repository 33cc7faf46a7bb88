"""The record of a model reader: how the package recognises a library's models and model files, tells when a
model's trees changed, and reads them into a ``Forest``.

Each library's reader module defines its record (``lightgbm_text.READER``, ``xgboost_json.READER``,
``catboost_json.READER``, ``sklearn_trees.HIST_READER``, ``sklearn_trees.READER``) and ``io.models.READERS`` lists
them: the one table that ``to_forest``, ``library_of`` and ``load_file`` walk. A new library is a module defining
its record and its line in that table (docs/developer/model_readers.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.forest import Forest


@dataclass(frozen=True)
class FileFormat:
    """A library's model file format, recognised by one of ``heads``, ``json_key`` or ``text``.

    Parameters
    ----------
    load : callable
        ``load(path)``: the model the library loads from such a file (what ``io.models.load_file`` returns). It
        imports an optional library when called (:func:`import_library`), so that the package imports without it.
    read : callable or None, default=None
        ``read(content) -> Forest`` of a JSON format (``content`` its parsed JSON) or a text format (its text),
        read without the library; None for a binary format: the file is loaded with ``load``, then read as the
        loaded model is.
    heads : tuple of bytes, default=()
        The first bytes of a binary format's files.
    json_key : str or None, default=None
        The key of the JSON object that marks this library's JSON files.
    text : bool, default=False
        Whether the format is text that does not start with ``{`` (LightGBM's model text).
    """

    load: Callable[[Path], object]
    read: Callable[[object], Forest] | None = None
    heads: tuple[bytes, ...] = ()
    json_key: str | None = None
    text: bool = False


@dataclass(frozen=True)
class ModelReader:
    """How the package reads one library's models.

    Parameters
    ----------
    name : str
        The library's key: the first item of its models' fingerprints, and what ``library_of`` answers for them
        when ``named``.
    title : str
        The library as errors name it ("XGBoost").
    recognises : callable
        ``recognises(model) -> bool``: whether an in-memory model is this library's. It imports no optional
        library (:func:`from_library` reads the model's classes).
    fingerprint : callable
        ``fingerprint(model) -> tuple``: what changes when the model's trees do (``to_forest`` keeps the forest it
        read until then). It holds the model's objects themselves, not their ids: the cache keeps them alive, so an
        id is never another object's.
    read : callable
        ``read(model) -> Forest``: the model's trees, all its iterations (``NotFittedError`` for a model not
        fitted, ``CEGBError`` naming what is not supported).
    file_formats : tuple of FileFormat, default=()
        Its model files' formats.
    named : bool, default=True
        Whether ``library_of`` names its models: False for LightGBM's (``booster_of`` finds them) and scikit-learn's
        trees (read by their ``tree_`` arrays, predicted by their own ``predict``).
    read_again : callable or None, default=None
        ``read_again(model) -> Forest``: the trees read from the model itself, nothing the reader kept of it (what
        ``to_forest(model, cache=False)`` calls; None: ``read``).
    """

    name: str
    title: str
    recognises: Callable[[object], bool]
    fingerprint: Callable[[object], tuple]
    read: Callable[[object], Forest]
    file_formats: tuple[FileFormat, ...] = ()
    named: bool = True
    read_again: Callable[[object], Forest] | None = None


def from_library(model, library: str) -> bool:
    """Whether a class of ``model`` (a user's subclass too) comes from the top-level package ``library``, told
    without importing it.

    Parameters
    ----------
    model : object
        Any model.
    library : str
        A top-level package name ("xgboost").

    Returns
    -------
    bool
        Whether a class of its method resolution order is defined in that package.
    """
    return any(cls.__module__.split(".")[0] == library for cls in type(model).__mro__)


def import_library(name: str, path: Path):
    """The optional library ``name``, imported to load the model file ``path``.

    Parameters
    ----------
    name : str
        The library's package ("xgboost").
    path : Path
        The model file it is imported for (named in the error).

    Returns
    -------
    module
        The library.

    Raises
    ------
    CEGBError
        When it is not installed (naming the extra that installs it).
    """
    try:
        return importlib.import_module(name)
    except ImportError:
        raise CEGBError(f"model file {str(path)!r} is a {name} model: loading it needs {name} (pip install "
                        f"lightgbm-cegb[{name}]); without it, the package reads {name}'s JSON models for their "
                        "costs") from None
