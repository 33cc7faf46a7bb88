"""The package's saved-model format: one folder per model, a JSON manifest and content-named artifacts.

Specification (format version 2; ``docs/SAVED_MODELS.md`` holds the same text for readers of the files)::

    <path>/manifest.json         the manifest (below), replaced atomically: a save is complete once it is there
    <path>/<name>-<sha256:16>.txt  artifacts (LightGBM model files, ...), named by their content

    manifest = {
      "format": "lightgbm_cegb", "format_version": 2,
      "estimator": "AdaptGBRT",            # the class, one of lightgbm_cegb's public names
      "package_version": "0.2.0", "lightgbm_version": "4.7.0+cegb.7",
      "params": {...},                     # get_params(deep=False), encoded (below); given-at-load ones absent
      "feature_names_in": [...] | null, "n_features_in": 5,
      "costs": {...} | null,               # FeatureCosts.to_dict of the fitted costs (costs_)
      "state": {...},                      # the estimator's fitted attributes (its own keys)
      "files": {"gate": "gate-0123456789abcdef.txt", ...}
    }

Encoded values: JSON numbers, strings, booleans, null and lists as themselves (numpy scalars and arrays as
numbers and lists); a mapping with keys that are not strings as ``{"__items__": [[key, value], ...]}``; a
FeatureCosts as ``{"__FeatureCosts__": its constructor's arguments}`` (by name or by column, as given).
Parameters that cannot be encoded (a fitted model, a callable) are not saved: ``load`` takes them as keyword
arguments, and says which ones it needs.

Saving is atomic: the artifacts are written first under new names, then the manifest replaces the old one
(``os.replace``), then artifacts the new manifest does not name are deleted: files named ``<name>-<16 hex
digits>.txt`` whose digits begin the sha256 of their content (what a save writes); no other file of the folder is
ever touched. A save that fails at any point leaves the
previous save as it was; the manifest is encoded before anything is written, so a value JSON cannot hold
fails before the folder is touched.

Versions: a reader refuses a ``format_version`` newer than its own (naming both); older versions are read by
the estimator's ``_upgrade`` (version 1: the per-class manifests of lightgbm_cegb 0.1.0, ADAPT's and CSTC's).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

import lightgbm as lgb
import numpy as np

from lightgbm_cegb._version import __version__
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.io.atomic import write_atomically

FORMAT = "lightgbm_cegb"
FORMAT_VERSION = 2
MANIFEST = "manifest.json"


class Fields(dict):
    """A mapping read from a manifest (the manifest, its ``state``, its ``costs``): a key it lacks is a CEGBError
    that names the key and the file, not a bare KeyError."""

    def __init__(self, values: Mapping, where: str) -> None:
        super().__init__(values)
        self.where = where

    def __missing__(self, key):
        raise CEGBError(f"{self.where} lacks the key {key!r}: the file is damaged, or was not written by "
                        "lightgbm_cegb")


def encode(value):
    """``value`` as JSON-ready data (see the module's doc), or CEGBError naming what cannot be encoded."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(value, np.ndarray):
        return encode(value.tolist())
    if isinstance(value, FeatureCosts):
        return {"__FeatureCosts__": encode(value.fields())}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if hasattr(value, "index") and hasattr(value, "to_dict") and getattr(value, "ndim", 0) == 1:  # pandas Series
        return encode(value.to_dict())
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: encode(v) for k, v in value.items()}
        return {"__items__": [[encode(k), encode(v)] for k, v in value.items()]}
    raise CEGBError(f"cannot save a value of type {type(value).__name__} ({value!r:.60}): not JSON data")


def _encode_params(params: Mapping) -> dict:
    out = {}
    for name, value in params.items():
        try:
            out[name] = encode(value)
        except CEGBError as exc:
            raise CEGBError(f"cannot save the parameter {name}: {str(exc).removeprefix('cannot save ')}") from None
    return out


def decode(value):
    """The inverse of :func:`encode`."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        if "__FeatureCosts__" in value:
            return FeatureCosts(**decode(value["__FeatureCosts__"]))
        if "__items__" in value:
            return {_hashable(decode(k)): decode(v) for k, v in value["__items__"]}
        decoded = {k: decode(v) for k, v in value.items()}
        return Fields(decoded, value.where) if isinstance(value, Fields) else decoded
    return value


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value


def save(path: str | os.PathLike, estimator, *, params: Mapping, state: Mapping,
         files: Mapping[str, str] | None = None) -> None:
    """Save ``estimator`` into the folder ``path``: ``params`` (encodable ones), ``state`` (its fitted
    attributes, encodable), ``files`` (name -> text, each written as an artifact)."""
    costs = getattr(estimator, "costs_", None)
    names = getattr(estimator, "feature_names_in_", None)
    texts = dict(files or {})
    named = {name: f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.txt" for name, text in texts.items()}
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "estimator": type(estimator).__name__,
                "package_version": __version__, "lightgbm_version": lgb.__version__,
                "params": _encode_params(params),
                "feature_names_in": None if names is None else [str(n) for n in names],
                "n_features_in": int(estimator.n_features_in_),
                "costs": None if costs is None else costs.to_dict(int(estimator.n_features_in_)),
                "state": encode(dict(state)), "files": named}
    text = json.dumps(manifest, indent=1, allow_nan=False)  # before anything is written
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise CEGBError(f"path: a model is saved into a folder; {str(folder)!r} is a file")
    folder.mkdir(parents=True, exist_ok=True)
    for name, file_name in named.items():
        if not (folder / file_name).exists():
            write_atomically(folder / file_name, lambda tmp, body=texts[name]: Path(tmp).write_text(body))
    write_atomically(folder / MANIFEST, lambda tmp: Path(tmp).write_text(text))
    for stale in folder.iterdir():
        if stale.name not in named.values() and _is_artifact(stale):
            stale.unlink()


def _is_artifact(path: Path) -> bool:
    """Whether ``path`` is an artifact a save wrote: ``<name>-<16 hex digits>.txt`` whose digits begin the sha256 of
    its content. Nothing else in a folder is ever deleted (a user's ``log-2024-11-27_12-30.txt`` stays)."""
    match = re.fullmatch(r".+-([0-9a-f]{16})\.txt", path.name)
    if match is None or not path.is_file():
        return False
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] == match.group(1)


def read(path: str | os.PathLike, estimator: str | None = None) -> tuple[dict, Path]:
    """(the manifest of the model saved in ``path``, the folder); ``estimator``: the class it must be."""
    folder = Path(path)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        raise CEGBError(f"path: {str(folder)!r} holds no saved model (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise CEGBError(f"path: {str(folder / MANIFEST)!r} cannot be read as JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise CEGBError(f"path: {str(folder / MANIFEST)!r} is not a model manifest")
    if manifest.get("format") == FORMAT:
        version = manifest.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise CEGBError(f"path: {str(folder)!r} was saved in format version {version!r}; this "
                            f"lightgbm_cegb reads versions up to {FORMAT_VERSION} (upgrade lightgbm_cegb)")
        kind = manifest.get("estimator")
    else:  # version 1 (lightgbm_cegb 0.1.0): "format": "lightgbm_cegb.<class>", "version": 1
        kind = str(manifest.get("format", "")).removeprefix("lightgbm_cegb.")
        if not str(manifest.get("format", "")).startswith("lightgbm_cegb.") or manifest.get("version") != 1:
            raise CEGBError(f"path: {str(folder)!r} is not a lightgbm_cegb model (manifest format "
                            f"{manifest.get('format')!r}, version {manifest.get('version')!r})")
        manifest = {**manifest, "format_version": 1, "estimator": kind}
    if estimator is not None and kind != estimator:
        raise CEGBError(f"path: {str(folder)!r} is not {_a(estimator)} model (it holds {_a(kind)} model)")
    where = f"path: the manifest {str(folder / MANIFEST)!r}"
    manifest = Fields(manifest, where)
    for key in ("state", "costs"):
        if isinstance(manifest.get(key), dict):
            manifest[key] = Fields(manifest[key], f"{where} ({key})")
    return manifest, folder


def _a(name: str) -> str:
    return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}"


def text_of(folder: Path, manifest: Mapping, name: str, legacy: str | None = None) -> str:
    """The artifact ``name`` of a saved model (``legacy``: its file name in format version 1)."""
    file_name = manifest["files"][name] if manifest["format_version"] >= 2 else legacy
    path = folder / str(file_name)
    if Path(file_name).name != file_name or not path.is_file():
        raise CEGBError(f"path: the saved model in {str(folder)!r} lacks its file {file_name!r}")
    return path.read_text()


def booster(folder: Path, manifest: Mapping, name: str, legacy: str | None = None) -> lgb.Booster:
    """The LightGBM model saved as the artifact ``name``."""
    return lgb.Booster(model_str=text_of(folder, manifest, name, legacy))


