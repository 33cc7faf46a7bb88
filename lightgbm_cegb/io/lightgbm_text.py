"""LightGBM model text <-> ``Forest``.

``read_text`` reads what LightGBM 4.7.0's ``GBDT::LoadModelFromString`` (src/boosting/gbdt_model_text.cpp)
and ``Tree::Tree(const char*)`` (src/io/tree.cpp) read, and refuses with a clear error what they refuse,
and also what they would read as something else than the text says or not survive:
- the header is every line before the first ``Tree=`` line, with LightGBM's required keys and counts
  (``num_tree_per_iteration`` must equal ``num_class``: LightGBM writes outside its output otherwise;
  0 divides by zero);
- trees are read one after another up to the ``end of trees`` line; ``tree_sizes``, which LightGBM uses
  to jump to each tree (aborting, reading a tree twice or dropping trees when they do not match), must
  be each tree's length in bytes: a truncated file, a missing blank line or a deleted ``Tree=`` line is
  refused instead of read differently;
- a tree block is ``key=value`` lines up to a blank line, at most 22; every array has exactly its count
  of values, each a number (integers within range: LightGBM's parser pads, wraps or zeroes the rest);
- the ``parameters:`` section is ``[name: value]`` lines up to ``end of parameters``; the last line's
  ``pandas_categorical`` is read by LightGBM's own Python function. The package's line naming feature
  groups (:func:`with_group_names`) is read as the parameter ``cegb_group_names``.
The structure (children, features, categorical bitsets) is checked by ``Forest`` itself. ``write_text``
writes a forest read from LightGBM text back in LightGBM's format (``GBDT::SaveModelToString``,
``Tree::ToString``): ``write_text(read_text(t)) == t`` for the models LightGBM writes.

``READER`` is LightGBM's model reader (``io.model_readers``): Boosters and scikit-learn-API models by their model
text (``booster_of``), model files by their text; ``loaded`` and ``trained`` keep the text a Booster loaded or wrote,
so that it is read, not written again.

Its length: one format's reader, its checks, its writer and the text kept of Boosters, which share its fields.
"""

from __future__ import annotations

import hashlib
import weakref

import lightgbm as lgb
import numpy as np

from lightgbm_cegb._lgbtext import trees as compiled_trees
from lightgbm_cegb.core.costs import GROUP_NAMES_KEY, encode_group_names
from lightgbm_cegb.core.errors import CEGBError, NotFittedError
from lightgbm_cegb.core.forest import Forest
from lightgbm_cegb.io.model_readers import FileFormat, ModelReader

MAX_TREE_LINES = 22  # Tree::Tree(const char*) reads at most this many key=value lines
INT_FIELDS = {"split_feature", "decision_type", "left_child", "right_child", "leaf_count", "internal_count",
              "cat_boundaries", "cat_threshold", "num_features", "leaf_features"}


def _header(text: str) -> tuple[dict[str, str], int]:
    """The header's key=value pairs and the offset of the first ``Tree=`` line, or of the ``end of trees``
    line of a model without trees (len(text) if neither)."""
    fields: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        line = text[pos:end].rstrip("\r")
        if line.startswith("Tree=") or line == "end of trees":
            return fields, pos
        parts = [part for part in line.split("=") if part]  # LightGBM's Common::Split drops empty parts
        if parts:
            if len(parts) > 2 and parts[0] not in ("feature_names", "monotone_constraints"):
                raise CEGBError(f"LightGBM model: wrong line in the header: {line[:128]!r}")
            fields[parts[0]] = line.split("=", 1)[1] if len(parts) > 2 else (parts[1] if len(parts) == 2 else "")
        pos = end + 1
    return fields, len(text)


def _digits(value: str) -> str:
    """``value``, a field of numbers, when LightGBM reads its numbers as Python does: ASCII, no ``_`` (Python reads
    ``0.2_5`` as 0.25 and ``１`` as 1, where LightGBM stops at the ``_`` or refuses the text); a ValueError
    otherwise."""
    if "_" in value or not value.isascii():
        raise ValueError(value)
    return value


def _header_int(fields: dict, key: str, minimum: int) -> int:
    try:
        value = int(_digits(fields[key]))
    except KeyError:
        raise CEGBError(f"LightGBM model: the header has no '{key}' line") from None
    except ValueError:
        raise CEGBError(f"LightGBM model: {key} should be an integer, got {fields[key]!r}") from None
    if value < minimum:
        raise CEGBError(f"LightGBM model: {key} should be >= {minimum}, got {value}")
    return value


def _tree_block(data: bytes, pos: int, tree: int) -> tuple[dict[str, str], int]:
    """The key=value lines of the tree whose ``Tree=`` line starts at data[pos:]; returns them and the
    offset of the blank line that ends the block."""
    end = data.find(b"\n", pos)
    pos = len(data) if end < 0 else end + 1
    fields: dict[str, str] = {}
    while pos < len(data) and data[pos:pos + 1] not in (b"\n", b"\r"):
        if len(fields) == MAX_TREE_LINES:
            raise CEGBError(f"LightGBM model: tree {tree} has more than {MAX_TREE_LINES} lines "
                            "(LightGBM reads no more)")
        end = data.find(b"\n", pos)
        if end < 0:
            raise CEGBError(f"LightGBM model: the text ends inside tree {tree} (truncated?)")
        line = data[pos:end].rstrip(b"\r").decode(errors="replace")
        key, sep, value = line.partition("=")
        if not sep:
            raise CEGBError(f"LightGBM model: tree {tree}: line {line[:60]!r} is not key=value")
        if key == "Tree":
            raise CEGBError(f"LightGBM model: tree {tree} runs into the next tree's 'Tree=' line (a missing "
                            "blank line between trees?)")
        if key in fields:
            raise CEGBError(f"LightGBM model: tree {tree} has two '{key}' lines")
        fields[key] = value
        pos = end + 1
    if pos >= len(data):
        raise CEGBError(f"LightGBM model: the text ends inside tree {tree} (truncated?)")
    return fields, pos


def _trees(data: bytes, start: int, header: dict) -> tuple[list[dict[str, str]], int]:
    """The trees, found one after another from the first ``Tree=`` line as LightGBM does without
    tree_sizes, up to the ``end of trees`` line that LightGBM writes after them (and that line's offset). With
    tree_sizes (where LightGBM jumps to each tree by its size and aborts, reads a tree twice or drops trees when the
    sizes do not match the text) every size must be its tree's length in bytes."""
    trees, starts, pos = [], [], start
    while data.startswith(b"Tree=", pos):
        starts.append(pos)
        fields, pos = _tree_block(data, pos, len(trees))
        trees.append(fields)
        while data[pos:pos + 1] in (b"\n", b"\r"):
            pos += 1
    if not data.startswith(b"end of trees", pos):
        found = data[pos:data.find(b"\n", pos) if data.find(b"\n", pos) >= 0 else len(data)][:60]
        raise CEGBError(f"LightGBM model: after tree {len(trees) - 1} expected 'Tree=' or 'end of trees', found "
                        f"{found.decode(errors='replace')!r} (truncated, or a deleted 'Tree=' line?)")
    _check_tree_sizes(header, [*starts, pos])
    return trees, pos


def _check_tree_sizes(header: dict, starts) -> None:
    """The header's tree_sizes, where it has them, against the trees found at ``starts`` (then the ``end of trees``
    line's offset)."""
    if "tree_sizes" in header:
        sizes = [v for v in header["tree_sizes"].split(" ") if v]
        actual = [str(int(b) - int(a)) for a, b in zip(starts[:-1], starts[1:])]
        if sizes != actual:
            raise CEGBError(f"LightGBM model: tree_sizes ({len(sizes)} entries) do not match the {len(actual)} "
                            f"trees' lengths in bytes (first difference at tree "
                            f"{next(i for i, (a, b) in enumerate(zip(sizes + [''], actual + [''])) if a != b)}): "
                            "LightGBM would read other trees than the text holds")


OBJECTIVES = {"regression", "regression_l1", "quantile", "huber", "fair", "poisson", "binary", "lambdarank",
              "rank_xendcg", "multiclass", "multiclassova", "cross_entropy", "cross_entropy_lambda", "mape",
              "gamma", "tweedie", "custom", "none", "null", "na"}
OBJECTIVE_ALIASES = {"regression_l2": "regression", "l2": "regression", "mean_squared_error": "regression",
                     "mse": "regression", "l2_root": "regression", "root_mean_squared_error": "regression",
                     "rmse": "regression", "l1": "regression_l1", "mean_absolute_error": "regression_l1",
                     "mae": "regression_l1", "softmax": "multiclass", "ova": "multiclassova",
                     "ovr": "multiclassova", "multiclass_ova": "multiclassova", "one_vs_all": "multiclassova",
                     "xentropy": "cross_entropy", "xentlambda": "cross_entropy_lambda",
                     "mean_absolute_percentage_error": "mape", "lambdarank": "lambdarank", "rank_xendcg": "rank_xendcg",
                     "xendcg": "rank_xendcg", "xe_ndcg": "rank_xendcg", "xe_ndcg_mart": "rank_xendcg",
                     "xendcg_mart": "rank_xendcg"}


def _check_objective(value: str) -> None:
    """The objective line as LightGBM's CreateObjectiveFunction takes it (an empty one crashes it)."""
    value = OBJECTIVE_ALIASES.get(value, value)
    tokens = value.split(" ")
    if not value or tokens[0] not in OBJECTIVES:
        raise CEGBError(f"LightGBM model: unknown objective {value!r}")
    options = dict(t.split(":", 1) for t in tokens[1:] if ":" in t)
    needs = {"binary": ("sigmoid",), "multiclass": ("num_class",), "multiclassova": ("num_class", "sigmoid")}
    for key in needs.get(tokens[0], ()):
        if key not in options:
            raise CEGBError(f"LightGBM model: objective {value!r} has no {key}: value")


def _numbers(fields: dict, key: str, count: int, tree: int, required: bool = True) -> np.ndarray | None:
    """Field ``key`` of a tree as ``count`` numbers (ints for the index fields)."""
    dtype = np.int64 if key in INT_FIELDS else np.float64
    if count == 0:
        return np.zeros(0, dtype=dtype)
    if key not in fields:
        if required:
            raise CEGBError(f"LightGBM model: tree {tree} has no '{key}' field")
        return None
    tokens = fields[key].split()
    if len(tokens) != count:
        raise CEGBError(f"LightGBM model: tree {tree}: '{key}' should have {count} values, got {len(tokens)}")
    try:
        _digits(fields[key])
        return np.array(tokens, dtype=dtype)
    except (ValueError, OverflowError):  # OverflowError: an integer outside int64
        bad = next(t for t in tokens if not _parses(t, dtype))
        raise CEGBError(f"LightGBM model: tree {tree}: '{key}' holds {bad!r}, not "
                        f"{'an integer' if dtype is np.int64 else 'a number'}") from None


def _parses(token: str, dtype) -> bool:
    try:
        dtype(_digits(token))
    except (ValueError, OverflowError):
        return False
    return True


def _int_value(fields: dict, key: str, tree: int, default: int | None = None) -> int:
    if key not in fields:
        if default is None:
            raise CEGBError(f"LightGBM model: tree {tree} has no '{key}' field")
        return default
    try:
        return int(_digits(fields[key]))
    except ValueError:
        raise CEGBError(f"LightGBM model: tree {tree}: {key} should be an integer, got {fields[key]!r}") from None


def read_text(text: str) -> Forest:
    """A Forest from a LightGBM model file's text (``Booster.model_to_string()``)."""
    if "\0" in text:
        raise CEGBError("LightGBM model: the text holds a NUL byte (LightGBM's reader loops on it)")
    header, start = _header(text)
    if "num_class" not in header or "max_feature_idx" not in header:
        raise CEGBError("not a LightGBM model: the header has no 'num_class' or 'max_feature_idx' line")
    num_class = _header_int(header, "num_class", 1)
    _header_int(header, "label_index", -1)
    num_features = _header_int(header, "max_feature_idx", 0) + 1
    per_iteration = _header_int(header, "num_tree_per_iteration", 1) if "num_tree_per_iteration" in header \
        else num_class
    lists = {key: [v for v in header[key].split(" ") if v] for key in ("feature_names", "feature_infos",
                                                                      "monotone_constraints") if key in header}
    for key in ("feature_names", "feature_infos"):  # LightGBM requires both, one entry per feature
        if key not in lists:
            raise CEGBError(f"LightGBM model: the header has no '{key}' line")
    for key, values in lists.items():
        if len(values) != num_features:
            raise CEGBError(f"LightGBM model: {len(values)} {key} for max_feature_idx+1={num_features} features")
    names = lists["feature_names"]
    if per_iteration != num_class:
        raise CEGBError(f"LightGBM model: num_tree_per_iteration={per_iteration} should equal num_class={num_class} "
                        "(LightGBM writes outside its output otherwise)")
    if "objective" in header:
        _check_objective(header["objective"])
    head_bytes = len(text[:start].encode())
    data = text.encode()
    fast = compiled_trees(data, head_bytes)  # None: not what LightGBM writes, read (or refused) below
    if fast is None:
        trees, after = _trees(data, head_bytes, header)
        arrays = _arrays(trees)
    else:
        _check_tree_sizes(header, fast["starts"])
        arrays, after = _fast_arrays(fast), int(fast["starts"][-1])
    footer = data[after + len(b"end of trees\n"):].decode()
    forest = _forest(arrays, num_features, per_iteration, names, header)
    forest.params = _parse_params(footer)
    forest.objective = header.get("objective")
    forest.text_header = text[:start]
    forest.text_footer = footer
    from lightgbm.basic import _load_pandas_categorical  # LightGBM's own reading of its last line

    try:
        forest.pandas_categorical = _load_pandas_categorical(model_str=text)
    except ValueError as exc:
        raise CEGBError(f"LightGBM model: unreadable pandas_categorical line: {exc}") from None
    return forest


#: the Forest's arrays of the tree fields and their dtypes (counts are read as integers, kept as floats)
FIELD_DTYPES = {"split_feature": np.int64, "threshold": np.float64, "decision_type": np.int64, "left_child": np.int64,
                "right_child": np.int64, "split_gain": np.float64, "internal_value": np.float64,
                "internal_weight": np.float64, "internal_count": np.float64, "leaf_value": np.float64,
                "leaf_weight": np.float64, "leaf_count": np.float64, "cat_boundaries": np.int64,
                "cat_threshold": np.int64}


def _arrays(trees: list[dict]) -> dict:
    """The concatenated fields of ``trees`` (each a dict of its key=value lines; a field some tree with nodes lacks:
    None), the offsets of each tree's nodes, leaves and categorical bitsets, the shrinkages and the linear leaves
    (None without linear trees)."""
    leaf_keys = ("leaf_value", "leaf_weight", "leaf_count")
    parts: dict[str, list] = {k: [] for k in FIELD_DTYPES}
    node_offset, leaf_offset, cat_offset, shrinkage = [0], [0], [0], []
    linear_parts: dict[str, list] = {"leaf_const": [], "counts": [], "features": [], "coeff": []}
    any_linear = False
    cat_words = 0
    for t, fields in enumerate(trees):
        num_leaves = _int_value(fields, "num_leaves", t)
        if num_leaves < 1:
            raise CEGBError(f"LightGBM model: tree {t} has num_leaves={num_leaves}, should be >= 1")
        num_cat = _int_value(fields, "num_cat", t)
        if num_cat < 0:
            raise CEGBError(f"LightGBM model: tree {t} has num_cat={num_cat}, should be >= 0")
        n = num_leaves - 1
        is_linear = _int_value(fields, "is_linear", t, 0) != 0
        for key in ("split_feature", "threshold", "decision_type", "left_child", "right_child"):
            parts[key].append(_numbers(fields, key, n, t, required=key != "decision_type" and (n > 0 or is_linear)))
        if parts["decision_type"][-1] is None:  # LightGBM's default: numerical, missing type None
            parts["decision_type"][-1] = np.zeros(n, dtype=np.int64)
        for key in ("split_gain", "internal_value", "internal_weight", "internal_count"):
            parts[key].append(_numbers(fields, key, n, t, required=False))
        for key in leaf_keys:
            if key == "leaf_weight" and n == 0 and not is_linear:  # LightGBM stops reading a one-leaf tree before it
                parts[key].append(np.zeros(1))
            else:
                parts[key].append(_numbers(fields, key, num_leaves, t, required=key == "leaf_value"))
        if num_cat:
            bounds = _numbers(fields, "cat_boundaries", num_cat + 1, t)
            if bounds[0] != 0 or (np.diff(bounds) < 0).any():
                raise CEGBError(f"LightGBM model: tree {t}: cat_boundaries should rise from 0, got "
                                f"{fields['cat_boundaries'][:60]!r}")
            words = _numbers(fields, "cat_threshold", int(bounds[-1]), t)
            if words.size and (words.min() < 0 or words.max() > 0xFFFFFFFF):
                raise CEGBError(f"LightGBM model: tree {t}: cat_threshold words should be 32-bit unsigned "
                                f"integers, got {int(words[(words < 0) | (words > 0xFFFFFFFF)][0])}")
            parts["cat_boundaries"].append(bounds + cat_words)
            parts["cat_threshold"].append(words)
            cat_words += len(words)
        cat_offset.append(cat_offset[-1] + (num_cat + 1 if num_cat else 0))
        if is_linear:
            any_linear = True
            counts = _numbers(fields, "num_features", num_leaves, t)
            if (counts < 0).any():
                raise CEGBError(f"LightGBM model: tree {t}: num_features of the linear leaves should be >= 0")
            linear_parts["leaf_const"].append(_numbers(fields, "leaf_const", num_leaves, t))
            linear_parts["counts"].append(counts)
            linear_parts["features"].append(_numbers(fields, "leaf_features", int(counts.sum()), t))
            linear_parts["coeff"].append(_numbers(fields, "leaf_coeff", int(counts.sum()), t))
        else:
            linear_parts["leaf_const"].append(parts["leaf_value"][-1])
            linear_parts["counts"].append(np.zeros(num_leaves, dtype=np.int64))
        try:
            shrinkage.append(float(_digits(fields.get("shrinkage", "1"))))
        except ValueError:
            raise CEGBError(f"LightGBM model: tree {t}: shrinkage should be a number, got {fields['shrinkage']!r}") \
                from None
        node_offset.append(node_offset[-1] + n)
        leaf_offset.append(leaf_offset[-1] + num_leaves)

    def cat(key):
        if any(p is None for p in parts[key]):
            return None
        return np.concatenate(parts[key]) if parts[key] else np.zeros(0)

    linear = None
    if any_linear:
        counts = np.concatenate(linear_parts["counts"])
        linear = {"leaf_const": np.concatenate(linear_parts["leaf_const"]),
                  "indptr": np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                  "features": np.concatenate(linear_parts["features"] or [np.zeros(0)]).astype(np.int64),
                  "coeff": np.concatenate(linear_parts["coeff"] or [np.zeros(0)])}
    return {**{key: cat(key) for key in FIELD_DTYPES}, "node_offset": node_offset, "leaf_offset": leaf_offset,
            "cat_offset": cat_offset, "shrinkage": shrinkage, "linear": linear}


def _fast_arrays(fast: dict) -> dict:
    """``_arrays``'s dict of what ``_lgbtext.trees`` read (no linear trees)."""
    leaves, cats = fast["num_leaves"], fast["num_cat"]
    offsets = {"node_offset": leaves - 1, "leaf_offset": leaves, "cat_offset": np.where(cats > 0, cats + 1, 0)}
    return {**{key: fast[key] for key in FIELD_DTYPES}, "shrinkage": fast["shrinkage"], "linear": None,
            **{key: np.concatenate([[0], np.cumsum(sizes)]) for key, sizes in offsets.items()}}


def _forest(arrays: dict, num_features: int, per_iteration: int, names, header: dict) -> Forest:
    """The Forest of the trees' ``arrays`` (``_arrays``, ``_fast_arrays``)."""
    fields = {key: None if arrays[key] is None else np.asarray(arrays[key]).astype(dtype, copy=False)
              for key, dtype in FIELD_DTYPES.items()}
    decision = fields["decision_type"]
    if decision.size and (decision.min() < 0 or decision.max() > 255):
        raise CEGBError(f"LightGBM model: unknown decision_type {int(decision[(decision < 0) | (decision > 255)][0])}")
    try:
        return Forest(
            node_offset=np.asarray(arrays["node_offset"], dtype=np.int64), feature=fields["split_feature"],
            threshold=fields["threshold"], decision=decision, left=fields["left_child"], right=fields["right_child"],
            leaf_offset=np.asarray(arrays["leaf_offset"], dtype=np.int64), leaf_value=fields["leaf_value"],
            cat_offset=np.asarray(arrays["cat_offset"], dtype=np.int64), cat_boundaries=fields["cat_boundaries"],
            cat_threshold=fields["cat_threshold"], num_features=num_features, trees_per_iteration=per_iteration,
            feature_names=names, average_output="average_output" in header, linear=arrays["linear"],
            internal_value=fields["internal_value"], internal_weight=fields["internal_weight"],
            internal_count=fields["internal_count"], split_gain=fields["split_gain"],
            leaf_weight=fields["leaf_weight"], leaf_count=fields["leaf_count"],
            shrinkage=np.asarray(arrays["shrinkage"], dtype=np.float64))
    except CEGBError as exc:
        raise CEGBError(f"LightGBM model: {str(exc).removeprefix('Forest: ')}") from None


def _parse_params(footer: str) -> dict[str, str]:
    """The ``parameters:`` section of a model file: ``[name: value]`` lines (LightGBM's GetLoadedParam reads
    past its buffer on any other line, and a section without its end line is a truncated file)."""
    params = {}
    inside = False
    for line in footer.splitlines():
        if line == "parameters:":
            inside = True
        elif line == "end of parameters":
            return params
        elif inside and line:
            if not (line.startswith("[") and line.endswith("]") and ": " in line):
                raise CEGBError(f"LightGBM model: parameter line {line[:60]!r} is not '[name: value]'")
            key, _, value = line[1:-1].partition(": ")
            if key.startswith(GROUP_NAMES_KEY + "=") and not value:  # with_group_names's line
                key, value = GROUP_NAMES_KEY, key[len(GROUP_NAMES_KEY) + 1:]
            params[key] = value
    if inside:
        raise CEGBError("LightGBM model: the parameters section has no 'end of parameters' line (truncated?)")
    return params


# ---------------------------------------------------------------------------------------------- writing


def with_group_names(text: str, names) -> str:
    """LightGBM model text whose parameters section names the feature groups: ``names[k]`` is group id k of
    ``cegb_feature_group`` (LightGBM numbers groups). ``names`` None or empty: the text without such a line.

    The line is ``[cegb_group_names=NAME,NAME: ]`` (each name percent-encoded), the last of the section: a
    parameter with an empty value, which LightGBM's reader of the section (``GBDT::GetLoadedParam``) skips
    without a word, stock 4.7.0 and patched alike (a line ``[cegb_group_names: ...]`` would be warned about
    as an unrecognized parameter at every load), and which LightGBM writes back when it saves a model it
    loaded.
    """
    marker = "\nend of trees\n"
    at = text.find(marker)
    if at < 0:
        raise CEGBError("LightGBM model: no 'end of trees' line: not a model text")
    head, footer = text[:at + len(marker)], text[at + len(marker):]
    lines = [line for line in footer.split("\n")
             if not (line.startswith(f"[{GROUP_NAMES_KEY}=") and line.endswith(": ]"))]
    if names:
        line = f"[{GROUP_NAMES_KEY}={encode_group_names(names)}: ]"
        if "end of parameters" in lines:
            end = lines.index("end of parameters")
            last = max((i for i in range(end) if lines[i]), default=end - 1)  # after the last parameter
            lines.insert(last + 1, line)
        else:  # no parameters section: one of its own, before the pandas_categorical line LightGBM's Python ends with
            last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("pandas_categorical:")),
                        len(lines) - (1 if lines and not lines[-1] else 0))
            lines[last:last] = ["parameters:", line, "end of parameters", ""]
    return head + "\n".join(lines)



def _join(values, fmt: str) -> str:
    values = values.tolist()
    if not values:
        return ""
    if fmt == "d":
        return " ".join(map(str, values))
    return " ".join([f"%.{fmt}" if fmt[0].isdigit() else f"%{fmt}"] * len(values)) % tuple(values)


def _tree_text(forest: Forest, t: int) -> str:
    s, s1 = int(forest.node_offset[t]), int(forest.node_offset[t + 1])
    l0, l1 = int(forest.leaf_offset[t]), int(forest.leaf_offset[t + 1])
    c0, c1 = int(forest.cat_offset[t]), int(forest.cat_offset[t + 1])
    n = s1 - s

    def node(values, fmt, cast=None):
        part = np.zeros(n) if values is None else values[s:s1]
        return _join(part.astype(cast) if cast else part, fmt)

    def leaf(values, fmt, cast=None):
        part = np.zeros(l1 - l0) if values is None else values[l0:l1]
        return _join(part.astype(cast) if cast else part, fmt)

    lines = [f"num_leaves={l1 - l0}", f"num_cat={max(c1 - c0 - 1, 0)}",
             f"split_feature={node(forest.feature, 'd')}",
             f"split_gain={node(None if forest.split_gain is None else forest.split_gain.astype(np.float32), 'g')}",
             f"threshold={node(forest.threshold, '17g')}",
             f"decision_type={node(forest.decision, 'd', np.int64)}",
             f"left_child={node(forest.left, 'd')}", f"right_child={node(forest.right, 'd')}",
             f"leaf_value={leaf(forest.leaf_value, '17g')}",
             f"leaf_weight={leaf(forest.leaf_weight, '17g') if n else ''}",  # LightGBM: none in a one-leaf tree
             f"leaf_count={leaf(forest.leaf_count, 'd', np.int64)}",
             f"internal_value={node(forest.internal_value, 'g')}",
             f"internal_weight={node(forest.internal_weight, 'g')}",
             f"internal_count={node(forest.internal_count, 'd', np.int64)}"]
    if c1 > c0:
        bounds = forest.cat_boundaries[c0:c1]
        lines.append(f"cat_boundaries={_join(bounds - bounds[0], 'd')}")
        lines.append(f"cat_threshold={_join(forest.cat_threshold[bounds[0]:bounds[-1]].astype(np.int64), 'd')}")
    shrinkage = 1.0 if forest.shrinkage is None else float(forest.shrinkage[t])
    lines += ["is_linear=0", f"shrinkage={shrinkage:g}"]
    return f"Tree={t}\n" + "\n".join(lines) + "\n\n\n"


def _importances(forest: Forest, names: list[str]) -> str:
    """LightGBM's split-count feature importances (splits with gain > 0), by decreasing count."""
    gain = forest.split_gain if forest.split_gain is not None else np.ones(len(forest.feature))
    counts = np.bincount(forest.feature[gain.astype(np.float32) > 0], minlength=forest.num_features)
    order = np.argsort(-counts, kind="stable")
    return "".join(f"{names[f]}={counts[f]}\n" for f in order if counts[f] > 0)


def write_text(forest: Forest) -> str:
    """The forest as LightGBM model text (a forest read by read_text: its header and footer are reused,
    with tree_sizes and the split-count feature importances rewritten for the forest's trees)."""
    if forest.text_header is None or forest.text_footer is None:
        raise CEGBError("write_text needs a forest read from LightGBM model text")
    if forest.linear is not None:
        raise CEGBError("writing linear trees (linear_tree=True) is not supported")
    blocks = [_tree_text(forest, t) for t in range(forest.num_trees)]
    sizes = " ".join(str(len(b)) for b in blocks)
    header = "".join(f"tree_sizes={sizes}\n" if line.startswith("tree_sizes=") else line
                     for line in forest.text_header.splitlines(keepends=True))
    footer = forest.text_footer
    start = footer.find("feature_importances:\n")
    if start >= 0:
        stop = footer.find("\n\n", start)
        stop = len(footer) if stop < 0 else stop + 1
        names = forest.feature_names or [f"Column_{i}" for i in range(forest.num_features)]
        footer = footer[:start] + "feature_importances:\n" + _importances(forest, names) + footer[stop:]
    return header + "".join(blocks) + "end of trees\n" + footer


def booster_of(model) -> lgb.Booster | None:
    """The LightGBM Booster behind model (a Booster or a fitted sklearn-API model), else None.

    Parameters
    ----------
    model : object
        Any model.

    Returns
    -------
    lightgbm.Booster or None
        The Booster, or None when ``model`` is not a LightGBM model.

    Raises
    ------
    NotFittedError
        When ``model`` is a LightGBM sklearn-API model that is not fitted (a :class:`CEGBError` too, as for
        scikit-learn models).
    """
    if isinstance(model, lgb.LGBMModel):
        if not model.__sklearn_is_fitted__():
            raise NotFittedError(f"model: this {type(model).__name__} is not fitted yet: call fit first")
        return model.booster_
    return model if isinstance(model, lgb.Booster) else None


def _identity(model) -> tuple:
    """What tells a Booster's trees apart: its handle object (a new one for every model it loads; held by the
    cache, so never reused), its iteration and tree counts, and its last iteration's text (``rollback_one_iter``
    then ``update`` keeps the counts and the handle)."""
    booster = booster_of(model)
    iterations = booster.current_iteration()
    last = booster.model_to_string(num_iteration=1, start_iteration=iterations - 1) if iterations else ""
    return (booster._handle, iterations, booster.num_trees(), hashlib.sha256(last.encode()).hexdigest())


#: the text (or the Forest read from it) of each Booster :func:`loaded` made, with its identity then: what
#: ``_read_model`` reads instead of having LightGBM write the model again, once (then ``to_forest``'s cache holds it)
_LOADED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def loaded(text: str, forest: Forest | None = None) -> lgb.Booster:
    """``lightgbm.Booster(model_str=text)``, whose Forest ``to_forest`` reads from ``text`` (or takes as ``forest``,
    read from it already) while the Booster holds the trees it loaded, instead of having LightGBM write them again
    (a model of 62,400 trees: about 3 s)."""
    booster = lgb.Booster(model_str=text)
    _LOADED[booster] = (_identity(booster), text if forest is None else forest)
    return booster


def trained(params: dict, train_set: lgb.Dataset, num_boost_round: int, **kwargs) -> lgb.Booster:
    """``lightgbm.train(params, train_set, num_boost_round, **kwargs)``, ending as LightGBM's own ``train`` does (the
    model written, read back and the training data freed: the same Booster), with the text it wrote kept for
    ``to_forest`` as :func:`loaded` keeps it (a Greedy Miser model of 62,400 trees was written twice: about 6 s
    each)."""
    booster = lgb.train(params, train_set, num_boost_round, keep_training_booster=True, **kwargs)
    text = booster.model_to_string()
    booster.model_from_string(text).free_dataset()
    _LOADED[booster] = (_identity(booster), text)
    return booster


def _kept(booster: lgb.Booster):
    """The text (or Forest) :func:`loaded` or :func:`trained` kept of ``booster`` while it holds those trees; None."""
    kept = _LOADED.get(booster)
    return kept[1] if kept is not None and kept[0] == _identity(booster) else None


def model_text(model) -> str:
    """The LightGBM model's text: the one its Booster loaded or wrote when its training ended (:func:`loaded`,
    :func:`trained`) while it holds those trees, else written by LightGBM now."""
    booster = booster_of(model)
    kept = _kept(booster)
    return kept if isinstance(kept, str) else booster.model_to_string(num_iteration=-1)


def _read_model(model) -> Forest:
    booster = booster_of(model)
    kept = _kept(booster)
    _LOADED.pop(booster, None)
    return kept if isinstance(kept, Forest) else read_text(kept if kept is not None else
                                                           booster.model_to_string(num_iteration=-1))


def _read_model_again(model) -> Forest:
    """The Booster's trees as LightGBM writes them now (the text it loaded or wrote when training ended dropped: an
    earlier tree edited in place since, ``set_leaf_output``, is not in it)."""
    booster = booster_of(model)
    _LOADED.pop(booster, None)
    return read_text(booster.model_to_string(num_iteration=-1))


READER = ModelReader(name="lightgbm", title="LightGBM", named=False,
                     recognises=lambda model: isinstance(model, (lgb.Booster, lgb.LGBMModel)),
                     fingerprint=_identity, read=_read_model, read_again=_read_model_again,
                     file_formats=(FileFormat(text=True, read=read_text,
                                              load=lambda path: lgb.Booster(model_file=str(path))),))
