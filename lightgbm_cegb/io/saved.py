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
numbers and lists); a number JSON cannot hold (infinite, NaN) as ``{"__float__": "inf" | "-inf" | "nan"}``; a
mapping with keys that are not strings as ``{"__items__": [[key, value], ...]}``; a FeatureCosts as
``{"__FeatureCosts__": its constructor's arguments}`` (by name or by column, as given).
Parameters that cannot be encoded (a fitted model, a callable) are not saved: ``load`` takes them as keyword
arguments, and says which ones it needs.

Saving is atomic: the artifacts are written first under new names (one already there is kept only if it holds
what its name says; a damaged one is written again), then the manifest replaces the old one (``os.replace``), then
artifacts the new manifest does not name are deleted: files named ``<name>-<16 hex digits>.txt`` whose digits
begin the sha256 of their content (what a save writes); no other file of the folder is ever touched. Saves into
one folder run one at a time (an exclusive ``flock`` on the folder, held from the first artifact to the last
deletion): concurrent saves, of processes or threads, leave the folder holding one of them whole. A save that fails
at any point leaves the previous save as it was; the manifest is encoded before anything is written, so a value
JSON cannot hold fails before the folder is touched.

Reading: every file read (the manifest, the artifacts) is a regular file, or a symbolic link to one (its content
is verified all the same), of at most ``MAX_FILE_BYTES``; a FIFO, a device, a folder or a larger file is refused
by name before a byte is read. The manifest's fields are checked (types, ranges; each estimator checks its state's
arrays against one another), then every artifact it names is read at once and verified against its name
(``<name>-<digits>.txt``, the digits beginning the sha256 of its bytes) and LightGBM model files by the package's
reader, before LightGBM sees them. An artifact that vanished because a save replaced the manifest meanwhile makes
the read start again on the new manifest: a load concurrent with a save returns the old model or the new one.

Versions: a reader refuses a ``format_version`` newer than its own (naming both); older versions are read by
the estimator's ``_upgrade`` (version 1: the per-class manifests of lightgbm_cegb 0.1.0, ADAPT's and CSTC's).
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

import lightgbm as lgb
import numpy as np

from lightgbm_cegb._version import __version__
from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import utf8_text
from lightgbm_cegb.io.atomic import locked, write_atomically
from lightgbm_cegb.io.lightgbm_text import loaded, read_text

FORMAT = "lightgbm_cegb"
FORMAT_VERSION = 2
MANIFEST = "manifest.json"


class Fields(dict):
    """A mapping read from a manifest (the manifest, its ``state``, its ``costs``): a key it lacks is a CEGBError
    that names the key and the file, not a bare KeyError. A manifest's ``texts``: its artifacts, as read; ``used``:
    the names of those the estimator has taken (:func:`text_of`)."""

    def __init__(self, values: Mapping, where: str) -> None:
        super().__init__(values)
        self.where = where
        self.texts: dict[str, str] | None = None
        self.used: set[str] = set()

    def __missing__(self, key):
        raise CEGBError(f"{self.where} lacks the key {key!r}: the file is damaged, or was not written by "
                        "lightgbm_cegb")


def encode(value):
    """``value`` as JSON-ready data (see the module's doc), or CEGBError naming what cannot be encoded."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
        value = value.item() if isinstance(value, np.generic) else value
        return {"__float__": str(value)} if isinstance(value, float) and not math.isfinite(value) else value
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
    """The inverse of :func:`encode`; a CEGBError for what :func:`encode` does not write (a ``__items__`` that is not
    a list of pairs, an unhashable key, costs with other fields, a nesting deeper than Python's recursion)."""
    try:
        return _decoded(value)
    except CEGBError:
        raise
    except (TypeError, ValueError, RecursionError) as exc:
        raise CEGBError(f"a saved value {value!r:.80} is not what lightgbm_cegb writes ({type(exc).__name__}: "
                        f"{str(exc):.80})") from None


def _decoded(value):
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    if isinstance(value, dict):
        if "__FeatureCosts__" in value:
            return FeatureCosts(**_decoded(value["__FeatureCosts__"]))
        if "__float__" in value:
            return _float(value["__float__"])
        if "__items__" in value:
            return {_hashable(_decoded(k)): _decoded(v) for k, v in value["__items__"]}
        decoded = {k: _decoded(v) for k, v in value.items()}
        return Fields(decoded, value.where) if isinstance(value, Fields) else decoded
    return value


def _float(text) -> float:
    if text not in ("inf", "-inf", "nan"):
        raise CEGBError(f"a saved number {{'__float__': {text!r:.20}}} should be 'inf', '-inf' or 'nan'")
    return float(text)


def _hashable(value):
    return tuple(value) if isinstance(value, list) else value


def save(path: str | os.PathLike, estimator, *, params: Mapping, state: Mapping,
         files: Mapping[str, str] | None = None) -> None:
    """Save ``estimator`` into the folder ``path``: ``params`` (encodable ones), ``state`` (its fitted
    attributes, encodable), ``files`` (name -> text, each written as an artifact)."""
    costs = getattr(estimator, "costs_", None)
    names = getattr(estimator, "feature_names_in_", None)
    bodies = {name: text.encode() for name, text in (files or {}).items()}  # the bytes hashed: UTF-8, newlines kept
    named = {name: f"{name}-{_digest(body)}.txt" for name, body in bodies.items()}
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "estimator": type(estimator).__name__,
                "package_version": __version__, "lightgbm_version": lgb.__version__,
                "params": _encode_params(params),
                "feature_names_in": None if names is None else [str(n) for n in names],
                "n_features_in": int(estimator.n_features_in_),
                "costs": None if costs is None else costs.to_dict(int(estimator.n_features_in_)),
                "state": encode(dict(state)), "files": named}
    text = json.dumps(manifest, indent=1, allow_nan=False).encode()  # before anything is written
    for name, body in [*bodies.items(), (MANIFEST, text)]:
        if len(body) > MAX_FILE_BYTES:
            raise CEGBError(f"cannot save the file {name!r}: it holds {len(body)} bytes, more than a load reads "
                            f"(MAX_FILE_BYTES, {MAX_FILE_BYTES})")
    folder = _folder(path)
    if folder.exists() and not folder.is_dir():
        raise CEGBError(f"path: a model is saved into a folder; {str(folder)!r} is a file")
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder):  # one save at a time: another's cleanup would delete this one's artifacts
        for file_name in [*named.values(), MANIFEST]:
            if (folder / file_name).is_dir() and not (folder / file_name).is_symlink():
                raise CEGBError(f"path: {str(folder / file_name)!r} is a folder where the save writes its file "
                                f"{file_name!r}: move it away")
        for name, file_name in named.items():
            if not _is_artifact(folder / file_name):  # absent, or damaged: written again
                write_atomically(folder / file_name, lambda tmp, body=bodies[name]: Path(tmp).write_bytes(body))
        write_atomically(folder / MANIFEST, lambda tmp: Path(tmp).write_bytes(text))
        for stale in folder.iterdir():
            if stale.name not in named.values() and _is_artifact(stale):
                stale.unlink(missing_ok=True)


def _folder(path) -> Path:
    """The folder of a saved model: a path (str or os.PathLike) that names one (not "", which would be the
    working directory)."""
    if not isinstance(path, (str, os.PathLike)) or str(path) == "":
        raise CEGBError(f"path should name a folder (a str or os.PathLike), got {path!r:.60}")
    return Path(path)


def _is_artifact(path: Path) -> bool:
    """Whether ``path`` is an artifact a save wrote: ``<name>-<16 hex digits>.txt`` whose digits begin the sha256 of
    its content. Nothing else in a folder is ever deleted (a user's ``log-2024-11-27_12-30.txt`` stays)."""
    match = re.fullmatch(r".+-([0-9a-f]{16})\.txt", path.name)
    if match is None:
        return False
    try:
        data, _ = _regular_bytes(path, "file")
    except (CEGBError, OSError):
        return False
    return _digest(data) == match.group(1)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


#: The largest file of a saved folder that a load reads (and a save writes), in bytes.
MAX_FILE_BYTES = 4 << 30

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _regular_bytes(path: Path, what: str) -> tuple[bytes, os.stat_result]:
    """(the bytes of ``path``, its status): a regular file, or a symbolic link to one, of at most MAX_FILE_BYTES.
    Anything else is a CEGBError naming ``what`` and the file, before a byte is read: reading a FIFO waits for a
    writer, a device (a link to /dev/zero) may never end. FileNotFoundError passes (a file that vanished)."""
    def check(status: os.stat_result) -> None:
        if not stat.S_ISREG(status.st_mode):
            kind = next((words for test, words in _KINDS if test(status.st_mode)), "not a regular file")
            raise CEGBError(f"path: {what} {str(path)!r} is {kind}: a load reads regular files only (or symbolic "
                            "links to them)")
        if status.st_size > MAX_FILE_BYTES:
            raise CEGBError(f"path: {what} {str(path)!r} holds {status.st_size} bytes, more than a load reads "
                            f"(MAX_FILE_BYTES, {MAX_FILE_BYTES}): it is not a file a save wrote")

    check(os.stat(path))  # before opening it: opening a device may do something
    with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as file:
        status = os.fstat(file.fileno())
        check(status)  # replaced since
        return file.read(status.st_size), status  # what was there at fstat: a save never grows a file in place


#: How many times :func:`read` starts again when a save replaced the model while it was being read.
READ_ATTEMPTS = 20


class _Replaced(Exception):
    """An artifact vanished while the model was read, and the manifest has changed since: read it again."""


def read(path: str | os.PathLike, estimator: str | None = None) -> tuple[dict, Path]:
    """(the manifest of the model saved in ``path``, the folder); ``estimator``: the class it must be.

    The manifest's fields are checked (their types and ranges), and in format version 2 every artifact it names
    is read at once (``manifest.texts``) and verified against its name: a file changed after saving is refused
    by name before LightGBM reads it. A save into the folder while it is read (it deletes the artifacts the old
    manifest names) makes the read start again on the new manifest: a reader sees the old model or the new one.
    """
    folder = _folder(path)
    for _ in range(READ_ATTEMPTS):
        raw, identity = _manifest_bytes(folder)
        manifest = _parsed(raw, folder, estimator)
        if manifest["format_version"] < 2:
            return manifest, folder
        try:
            manifest.texts = _artifacts(folder, manifest, identity)
        except _Replaced:
            continue
        return manifest, folder
    raise CEGBError(f"path: the model in {str(folder)!r} was replaced {READ_ATTEMPTS} times while it was read "
                    "(saves into the folder without a pause): load it again once they stop")


def _manifest_bytes(folder: Path) -> tuple[bytes, tuple]:
    """The manifest's bytes and the identity of the file they were read from (a save replaces the file: a new
    inode; the same bytes may come back, as when two models are saved in turn)."""
    try:
        data, status = _regular_bytes(folder / MANIFEST, "the manifest")
        return data, (status.st_ino, status.st_mtime_ns, status.st_size)
    except FileNotFoundError:
        raise CEGBError(f"path: {str(folder)!r} holds no saved model (no {MANIFEST})") from None
    except OSError as exc:
        raise CEGBError(f"path: {str(folder / MANIFEST)!r} cannot be read: {exc}") from None


#: the classes lightgbm_cegb 0.1.0 saved (format version 1)
VERSION_1_CLASSES = ("AdaptGBRT", "AdaptLIN", "CSTC", "CSTCClassifier", "CSCC", "Cronus")


def _parsed(raw: bytes, folder: Path, estimator: str | None) -> Fields:
    """The manifest ``raw`` as Fields, its top-level fields checked."""
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise CEGBError(f"path: {str(folder / MANIFEST)!r} cannot be read as JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise CEGBError(f"path: {str(folder / MANIFEST)!r} is not a model manifest")
    if manifest.get("format") == FORMAT:
        version = manifest.get("format_version")
        if not isinstance(version, int) or isinstance(version, bool) or not 2 <= version:
            raise CEGBError(f"path: {str(folder)!r}: format_version should be an integer from 2 to "
                            f"{FORMAT_VERSION}, got {version!r}")
        if version > FORMAT_VERSION:
            raise CEGBError(f"path: {str(folder)!r} was saved in format version {version!r}; this "
                            f"lightgbm_cegb reads versions up to {FORMAT_VERSION} (upgrade lightgbm_cegb)")
        kind = manifest.get("estimator")
        if not isinstance(kind, str) or not kind:
            raise CEGBError(f"path: {str(folder / MANIFEST)!r}: estimator should be a class name, got {kind!r:.40}")
    else:  # version 1 (lightgbm_cegb 0.1.0): "format": "lightgbm_cegb.<class>", "version": 1
        kind = str(manifest.get("format", "")).removeprefix("lightgbm_cegb.")
        if not str(manifest.get("format", "")).startswith("lightgbm_cegb.") or manifest.get("version") != 1:
            raise CEGBError(f"path: {str(folder)!r} is not a lightgbm_cegb model (manifest format "
                            f"{manifest.get('format')!r}, version {manifest.get('version')!r})")
        if kind not in VERSION_1_CLASSES:
            raise CEGBError(f"path: {str(folder)!r}: format version 1 (lightgbm_cegb 0.1.0) saved only "
                            f"{', '.join(VERSION_1_CLASSES)}, got {kind!r:.40}")
        manifest = {**manifest, "format_version": 1, "estimator": kind}
    if estimator is not None and kind != estimator:
        raise CEGBError(f"path: {str(folder)!r} is not {_a(estimator)} model (it holds {_a(kind)} model)")
    return checked_fields(manifest, f"path: the manifest {str(folder / MANIFEST)!r}")


def checked_fields(manifest: dict, where: str) -> Fields:
    """``manifest`` (or a nested model's description) as Fields of ``where``, the types of the fields every
    estimator reads checked (a missing one is named when it is read), its state and costs Fields too."""
    manifest = Fields(manifest, where)
    _check_fields(manifest, where)
    for key in ("state", "costs"):
        if isinstance(manifest.get(key), dict):
            manifest[key] = Fields(manifest[key], f"{where} ({key})")
    return manifest


def _check_fields(manifest: Fields, where: str) -> None:
    """The types of the fields every estimator reads (a missing one is named when it is read)."""
    def refuse(key: str, expected: str) -> None:
        raise CEGBError(f"{where}: {key} should be {expected}, got {manifest[key]!r:.80}")

    n = manifest.get("n_features_in")
    if "n_features_in" in manifest and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        refuse("n_features_in", "an integer >= 1")
    names = manifest.get("feature_names_in")
    if names is not None and (not isinstance(names, list) or not all(isinstance(v, str) for v in names)
                              or (isinstance(n, int) and len(names) != n)):
        refuse("feature_names_in", f"null or a list of {n} strings")
    for key, kind in (("params", dict), ("state", dict), ("costs", (dict, type(None)))):
        if key in manifest and not isinstance(manifest[key], kind):
            refuse(key, "a mapping" if key != "costs" else "null or a mapping")
    if manifest["format_version"] >= 2 and "files" in manifest and (
            not isinstance(manifest["files"], dict)
            or not all(isinstance(v, str) for v in manifest["files"].values())):
        refuse("files", "a mapping of artifact names to file names")


def _artifacts(folder: Path, manifest: Fields, identity: tuple) -> dict[str, str]:
    """The text of every artifact ``manifest`` names, each verified against its name. _Replaced where one has
    vanished because a save replaced the manifest (the file of ``identity``) meanwhile."""
    texts = {}
    for name, file_name in manifest["files"].items():
        match = re.fullmatch(re.escape(name) + r"-([0-9a-f]{16})\.txt", file_name)
        if match is None:
            raise CEGBError(f"path: the saved model in {str(folder)!r} names its file {file_name!r} for {name!r}: "
                            f"expected {name}-<16 hex digits>.txt (the file is damaged)")
        try:
            data, _ = _regular_bytes(folder / file_name, "the saved model's file")
        except FileNotFoundError:
            try:
                now = os.stat(folder / MANIFEST)
            except OSError:
                now = None
            if now is not None and (now.st_ino, now.st_mtime_ns, now.st_size) != identity:
                raise _Replaced from None
            raise CEGBError(f"path: the saved model in {str(folder)!r} lacks its file {file_name!r}") from None
        except OSError as exc:
            raise CEGBError(f"path: the saved model's file {str(folder / file_name)!r} cannot be read: {exc}") from None
        if _digest(data) != match.group(1) and _digest(data.replace(b"\r\n", b"\n")) == match.group(1):
            data = data.replace(b"\r\n", b"\n")  # saved before 0.2.0's bytes on Windows: write_text wrote \r\n
        if _digest(data) != match.group(1):
            raise CEGBError(f"path: the saved model's file {str(folder / file_name)!r} does not hold what was saved "
                            f"(the SHA-256 of its content begins {_digest(data)}, its name says {match.group(1)}): "
                            "it was changed after saving")
        try:
            texts[name] = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CEGBError(f"path: the saved model's file {str(folder / file_name)!r} is not UTF-8 text ({exc})") \
                from None
    return texts


def _a(name: str) -> str:
    return f"{'an' if name[:1] in 'AEIOU' else 'a'} {name}"


def damaged(state: Mapping, message: str) -> CEGBError:
    """The error for a saved state's field that is not what the estimator wrote: ``message`` after the file's
    name (``state``: the manifest's Fields; a state built in memory is "saved state")."""
    return CEGBError(f"{getattr(state, 'where', 'saved state')}: {message}")


def array(state: Mapping, key: str, shape: tuple, dtype=np.float64, *, low: float | None = None,
          finite: bool = True) -> np.ndarray:
    """``state[key]`` (JSON numbers) as an array of ``dtype`` and ``shape`` (None: any size on that axis), every
    value finite (``finite=False``: or infinite; never NaN) and >= ``low``; a CEGBError naming the key and the file
    otherwise."""
    expected = f"an array of shape ({', '.join('n' if d is None else str(d) for d in shape)}{',' * (len(shape) == 1)})"
    try:
        values = np.asarray(state[key])
    except ValueError:  # ragged lists
        values = np.asarray(None)
    if values.dtype.kind not in "iuf":
        raise damaged(state, f"{key} should be {expected} of numbers, got {state[key]!r:.80}")
    if values.ndim != len(shape) or any(d is not None and d != v for d, v in zip(shape, values.shape)):
        raise damaged(state, f"{key} should be {expected}, got shape {values.shape}")
    values = values.astype(np.float64)
    bad = np.isnan(values) | (np.isinf(values) if finite else False) | (values < low if low is not None else False)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)  # float(info.max) + 1 is 2**63 (or 2**31): a larger value would wrap when cast
        bad |= ~np.isfinite(values) | (values != np.round(values)) | (values < info.min) | \
            (values >= float(info.max) + 1.0)
    if bad.any():
        kind = f"{np.dtype(dtype).name} integers" if np.dtype(dtype).kind in "iu" else \
            "finite numbers" if finite else "numbers (not NaN)"
        raise damaged(state, f"{key} should hold {kind}{'' if low is None else f' >= {low:g}'}")
    return values.astype(dtype)


#: How far from 1 a saved probability distribution may sum (rounding of float64 sums is about 1e-16 per term).
SUM_TOLERANCE = 1e-9


def distributions(state: Mapping, key: str, values: np.ndarray) -> np.ndarray:
    """``values`` (``state[key]`` as :func:`array` read it, >= 0) if each of its rows along the last axis is a
    probability distribution (sums to 1 within ``SUM_TOLERANCE``); a CEGBError naming the key, the first row that
    is not and its sum otherwise."""
    sums = values.sum(axis=-1)
    bad = np.argwhere(np.abs(sums - 1.0) > SUM_TOLERANCE)
    if len(bad):
        at = tuple(int(i) for i in bad[0])
        raise damaged(state, f"{key} should hold probabilities that sum to 1{' along its last axis' * bool(at)}, got a "
                             f"sum of {sums[at]:.6g}{f' at {list(at)}' * bool(at)}")
    return values


def _label_kind(label) -> type | None:
    """The kind of a saved class label: bool, str or float (a finite number); None for anything else."""
    if isinstance(label, (bool, np.bool_)):
        return bool
    if isinstance(label, str):
        return str
    return float if isinstance(label, numbers.Real) and math.isfinite(label) else None


def class_labels(state: Mapping, key: str = "classes", *, count: int | None = None, least: int = 2) -> np.ndarray:
    """``state[key]`` as the class labels fit gives (``np.unique`` of y): distinct, in sorted order, of one kind
    (finite numbers, strings or booleans), at least ``least`` of them, ``count`` where given (the model's classes); a
    CEGBError naming the key otherwise (labels out of order would give each of the model's outputs another class)."""
    labels = state.get(key)
    labels = labels.tolist() if isinstance(labels, np.ndarray) else labels  # a state restored in memory (a prefix)
    kinds = {_label_kind(c) for c in labels} if isinstance(labels, list) else {None}
    classes = np.asarray(labels) if len(kinds) == 1 and None not in kinds else None
    if classes is None or len(classes) < least or (count is not None and len(classes) != count) or \
            not np.array_equal(np.unique(classes), classes):
        raise damaged(state, f"{key} should be {count if count is not None else f'{least} or more'} distinct labels of "
                             f"one kind (finite numbers, strings or booleans) in sorted order, as fit gives them, got "
                             f"{labels!r:.80}")
    return classes


def every_file_used(manifest: Mapping) -> None:
    """A CEGBError naming the artifacts a format-2 manifest names that its estimator did not take (a count in the
    state edited down: the model would load without them, another model than the one saved)."""
    if isinstance(manifest, Fields) and manifest["format_version"] >= 2:
        unused = sorted(set(manifest["files"]) - manifest.used)
        if unused:
            raise damaged(manifest, f"files name {unused}, which the {manifest['estimator']} its state describes does "
                                    "not read (its state and its files are not of one save)")


def class_scores(n_classes: int) -> int:
    """The raw scores per row of a model of ``n_classes`` classes: one for two (or one), one per class for more."""
    return 1 if n_classes == 2 else n_classes


def integer(state: Mapping, key: str, low: int) -> int:
    """``state[key]`` as an int >= ``low`` (a JSON integer, not a bool); a CEGBError naming the key otherwise."""
    value = state[key]
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise damaged(state, f"{key} should be an integer >= {low}, got {value!r:.40}")
    return int(value)


def text_of(folder: Path, manifest: Mapping, name: str, legacy: str | None = None) -> str:
    """The artifact ``name`` of a saved model, as :func:`read` verified it (``legacy``: its file name in format
    version 1, read now)."""
    if manifest["format_version"] >= 2:
        texts = getattr(manifest, "texts", None) or {}
        if name not in texts:
            raise CEGBError(f"path: the saved model in {str(folder)!r} lacks its file for {name!r}")
        manifest.used.add(name)
        return texts[name]
    path = folder / str(legacy)
    try:
        data, _ = _regular_bytes(path, "the saved model's file")
    except FileNotFoundError:
        raise CEGBError(f"path: the saved model in {str(folder)!r} lacks its file {legacy!r}") from None
    except OSError as exc:
        raise CEGBError(f"path: the saved model's file {str(path)!r} cannot be read: {exc}") from None
    return utf8_text(data, path, "path")


#: the kinds of model a LightGBM objective trains, by the first word of a model file's objective line: the
#: package's own gradients (objective "none", no line) are "own", the cross-entropy objectives (probabilities, which
#: LightGBM's classifiers and regressors both fit) "probability"; every other objective is "regression"
OBJECTIVE_KINDS = {None: "own", "binary": "classification", "multiclass": "classification",
                   "multiclassova": "classification", "lambdarank": "ranking", "rank_xendcg": "ranking",
                   "cross_entropy": "probability", "cross_entropy_lambda": "probability"}


def objective_kind(objective: str | None) -> str:
    """The kind of model (``OBJECTIVE_KINDS``) a LightGBM objective (a model file's objective line) trains."""
    return OBJECTIVE_KINDS.get(None if objective is None else objective.split()[0], "regression")


KIND_NAMES = {"own": "the package's own gradients (objective none)", "classification": "a classification objective",
              "ranking": "a ranking objective", "regression": "a regression objective",
              "probability": "a cross-entropy objective"}


def booster(folder: Path, manifest: Mapping, name: str, legacy: str | None = None, *, kinds: tuple[str, ...],
            outputs: int | None = None) -> lgb.Booster:
    """The LightGBM model saved as the artifact ``name``, read by the package's checked reader first (LightGBM's
    own aborts the process on some damaged texts): its features the manifest's, its objective of one of
    ``kinds`` (:func:`objective_kind`) and, unless None, ``outputs`` scores per row (a model of another estimator
    in its place is refused by name; its hash cannot tell)."""
    text = text_of(folder, manifest, name, legacy)
    try:
        forest = read_text(text)
    except CEGBError as exc:
        raise CEGBError(f"path: the saved model's file for {name!r} in {str(folder)!r} is not a LightGBM model "
                        f"this package reads: {exc}") from None
    where = f"path: the saved model's file for {name!r} in {str(folder)!r}"
    if forest.num_features != manifest["n_features_in"]:
        raise CEGBError(f"{where} reads {forest.num_features} features, the manifest's n_features_in is "
                        f"{manifest['n_features_in']}")
    if objective_kind(forest.objective) not in kinds:
        raise CEGBError(f"{where} holds a model of objective {forest.objective or 'none'!r}, where "
                        f"{_a(manifest['estimator'])} keeps models of "
                        f"{' or '.join(KIND_NAMES[kind] for kind in kinds)} there")
    if outputs is not None and forest.trees_per_iteration != outputs:
        raise CEGBError(f"{where} gives {forest.trees_per_iteration} scores per row, where "
                        f"{_a(manifest['estimator'])} keeps a model of {outputs} there")
    return loaded(text, forest)
