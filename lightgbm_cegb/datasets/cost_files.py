"""Cost files: the Yahoo! LTR format (one cost per line) with group lines, and JSON of FeatureCosts' arguments,
read into FeatureCosts.

A file format, off the ground floor: ``core.costs`` is the cost model, this module the text that data sets ship
their costs in (``yahoo_costs``, ``load_svmlight(costs=PATH)``) and that the command line's ``--costs`` reads;
``docs/CLI.md`` describes the format.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import check_number, read_utf8

#: The Yahoo! LTR cost file's cost of the feature ids that never occur in set 1.
UNUSED_ID_COST = 10000.0

_COLUMNS = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def _group_line(path, lineno: int, line: str) -> tuple[str, tuple[int, float, list[tuple[int, int]]]]:
    """A cost file's ``group NAME COST COLUMNS`` line: (NAME, (line number, COST, inclusive column ranges))."""
    tokens = line.split()
    if len(tokens) < 4:
        raise CEGBError(f"{path}:{lineno}: expected 'group NAME COST COLUMNS' (e.g. 'group soil 100 2-41,45'), "
                        f"got {line[:60]!r}")
    name = tokens[1]
    try:
        cost = float(tokens[2])
    except ValueError:
        cost = math.nan
    if not (math.isfinite(cost) and cost >= 0):
        raise CEGBError(f"{path}:{lineno}: group {name!r}: expected its cost, a finite number >= 0, got "
                        f"{tokens[2]!r}")
    ranges = []
    for item in ",".join(tokens[3:]).split(","):
        match = _COLUMNS.fullmatch(item)
        if item and (match is None or (match[2] is not None and int(match[2]) < int(match[1]))):
            raise CEGBError(f"{path}:{lineno}: group {name!r}: expected columns as numbers from 0 or ranges "
                            f"low-high (e.g. 2-41,45), got {item!r}")
        if item:
            ranges.append((int(match[1]), int(match[2] if match[2] is not None else match[1])))
    if not ranges:
        raise CEGBError(f"{path}:{lineno}: group {name!r} names no column")
    return name, (lineno, cost, ranges)


def read_cost_file(path: str | os.PathLike, kind: str = "lazy", num_features: int | None = None, *,
                   first_column: int = 0) -> FeatureCosts:
    """Load costs in the Yahoo! LTR format, one value per line, with optional group lines (blank lines
    and ``#`` comments ignored).

    Line i (from 1) of the values is the cost of column ``first_column + i - 1``; the columns before
    ``first_column`` cost 0. ``first_column=1`` is the reading of a 1-based SVMlight file by LightGBM,
    which puts id i in column i and leaves column 0 empty. ``num_features`` checks the length: the values
    must cover exactly those columns, except that a tail of :data:`UNUSED_ID_COST` values (the Yahoo
    file's cost of the ids that never occur) beyond them is dropped.

    A line ``group NAME COST COLUMNS`` makes a group of features whose cost ``COST`` is paid once, by the
    first member used (the members' own values are paid on top, usually 0). ``COLUMNS``: column numbers
    and inclusive ranges separated by commas or spaces (``2-41,45``), LightGBM's column numbers (from 0;
    a LibSVM file's feature ids), whatever ``first_column``; a column is in one group at most. Values and
    group costs are ``kind`` costs (lazy: per row; coupled: per model).

    Parameters
    ----------
    path : str or os.PathLike
        The cost file (UTF-8 text).
    kind : {"lazy", "coupled"}, default="lazy"
        The kind of the file's costs.
    num_features : int, optional
        The data's number of columns, checked as said above.
    first_column : int, default=0
        The column of the first value.

    Returns
    -------
    FeatureCosts
        The costs by column (and the groups, named as in the file).

    Raises
    ------
    CEGBError
        On a line that is neither a number nor a valid group line (the message gives the file and line), a
        group defined twice or naming a column beyond the values or already in another group, or values
        that do not cover ``num_features`` columns.
    """
    if kind not in ("lazy", "coupled"):
        raise CEGBError(f"kind should be 'lazy' or 'coupled', got {kind!r}")
    check_number(first_column, "first_column", 0, integer=True)
    if num_features is not None:
        check_number(num_features, "num_features", 1, integer=True)
    values: list[float] = []
    groups: dict[str, tuple[int, float, list[tuple[int, int]]]] = {}  # name -> (line, cost, column ranges)
    for lineno, line in enumerate(read_utf8(path, "cost file").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.split(None, 1)[0] == "group":
            name, group = _group_line(path, lineno, line)
            if name in groups:
                raise CEGBError(f"{path}:{lineno}: group {name!r} is already defined on line {groups[name][0]}")
            groups[name] = group
            continue
        try:
            values.append(float(line))
        except ValueError:
            raise CEGBError(f"{path}:{lineno}: expected a number, got {line[:60]!r} (a group is a line "
                            "'group NAME COST COLUMNS')") from None
    values = [0.0] * first_column + values
    if num_features is not None and len(values) != num_features:
        extra = values[num_features:]
        if len(values) < num_features or any(v != UNUSED_ID_COST for v in extra):
            raise CEGBError(
                f"{path} has {len(values) - first_column} costs for columns {first_column}.."
                f"{len(values) - 1}, but the data has {num_features} columns (0..{num_features - 1})"
                + ("; its values start at column 1 (1-based ids)" if first_column else
                   "; if its first line is the cost of feature id 1 of a 1-based SVMlight file, say so "
                   "(first_column=1, the CLI's --one-based)" if len(values) == num_features - 1 else ""))
        values = values[:num_features]
    if not groups:
        return FeatureCosts(**{kind: values})
    owner = np.full(len(values), -1, dtype=np.int64)
    members: dict[str, list[int]] = {}
    for g, (name, (lineno, _, ranges)) in enumerate(groups.items()):
        for low, high in ranges:
            if high >= len(values):
                raise CEGBError(f"{path}:{lineno}: group {name!r} names column {high}, beyond the {len(values)} "
                                f"columns the file's costs cover (0..{len(values) - 1})")
            taken = np.flatnonzero(owner[low:high + 1] >= 0)
            if taken.size:
                column = low + int(taken[0])
                other = list(groups)[int(owner[column])]
                raise CEGBError(f"{path}:{lineno}: column {column} is already in group {other!r}"
                                + ("" if other == name else f" (line {groups[other][0]})")
                                + "; a column is in one group at most")
            owner[low:high + 1] = g
        members[name] = [c for low, high in ranges for c in range(low, high + 1)]
    return FeatureCosts(**{kind: values}, groups=members,
                        **{f"group_{kind}": [cost for _, cost, _ in groups.values()]})


COST_FIELDS = ("lazy", "coupled", "split", "groups", "group_lazy", "group_coupled", "tree")


def read_costs(path: str | os.PathLike, num_features: int, *, first_column: int = 0,
               one_based: str = "") -> FeatureCosts:
    """FeatureCosts from a JSON object of its arguments (as ``FeatureCosts.fields()`` gives them), or from a cost
    file (its line i the cost of column ``first_column + i - 1``): what the command line's ``cost --costs`` and
    ``serve --costs`` take. ``one_based``: the option that set ``first_column`` (refused with JSON, which gives
    costs by column).

    Raises
    ------
    CEGBError
        When the file cannot be read, or holds no costs for ``num_features`` columns.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # the cost file's reader names the file and the problem
        text = ""
    if not text.lstrip().startswith("{"):
        return read_cost_file(path, num_features=num_features, first_column=first_column)
    if first_column:
        raise CEGBError(f"{one_based} moves the lines of a cost file; {str(path)!r} is JSON, whose costs are by "
                        "column (or by name): drop it")
    try:
        fields = json.loads(text)
    except ValueError as exc:
        raise CEGBError(f"{str(path)!r} is not valid JSON ({exc})") from None
    unknown = sorted(set(fields) - set(COST_FIELDS)) if isinstance(fields, dict) else None
    if unknown is None or unknown:
        raise CEGBError(f"{str(path)!r} should hold a JSON object of FeatureCosts' arguments "
                        f"{list(COST_FIELDS)}, got "
                        + (f"the keys {unknown}" if unknown else f"a JSON {type(fields).__name__}"))
    try:
        return FeatureCosts(**fields)
    except (TypeError, ValueError) as exc:
        raise CEGBError(f"{str(path)!r}: {exc}") from None
