"""``lightgbm-cegb``: prediction cost of a model on a data file, CEGB training with LightGBM's CLI, and a service
of lazy feature acquisition.

    lightgbm-cegb cost MODEL DATA [--costs FILE [--one-based]] [--split ALPHA] [--config CONFIG | --header
                       [--label-column N|name:COLUMN|auto]] [--format table|json]
    lightgbm-cegb train CONFIG --costs FILE [--one-based] [--kind lazy|coupled] [--tradeoff LAMBDA] [key=value ...]
    lightgbm-cegb serve [--model MODEL [--costs FILE] (--store STORE.sqlite | --fetch MODULE:FUNCTION)] [--eager]
                        [--max-body-bytes N] [--host 127.0.0.1] [--port 8000]

Paths are relative to the directory the command runs in, as for ``lightgbm config=FILE``.

Cost file (both commands read the same; docs/CLI.md): one cost per line, line i for column i - 1 (with
--one-based, for LibSVM feature id i), blank lines and ``#`` comments ignored, and lines
``group NAME COST COLUMNS``: a group of columns whose cost is paid once, by the first member used (e.g.
``group soil 100 2-41``; columns from 0 as LightGBM numbers them, a LibSVM file's feature ids). ``train`` writes
the groups' names into the model file, where ``cost`` reads them. A cost file without group lines may come with
a config (or overrides) setting ``cegb_feature_group`` and ``cegb_penalty_group_*``; ``cost`` then takes the
model's groups.

Its length: three commands (``cost``, ``train``, ``serve``) and the readers of the files they take (LibSVM and CSV
rows, LightGBM configs, cost files); each command's checks stay beside its parser.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp

from lightgbm_cegb.accounting import prediction_cost
from lightgbm_cegb.core.costs import CEGB_KEYS, GROUP_KEYS, FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.validation import check_number, read_utf8
from lightgbm_cegb.datasets.cost_files import read_cost_file, read_costs
from lightgbm_cegb.io.atomic import write_atomically
from lightgbm_cegb.io.lightgbm_text import with_group_names
from lightgbm_cegb.io.models import fitted_costs, library_of, to_forest, unwrap

CHUNK_ROWS = 200_000


def _libsvm_block(numbered: list[tuple[int, str]], num_features: int):
    """LibSVM lines, (line number, line) (label, then index:value pairs; index i is column i, as LightGBM reads
    them; qid: ignored) as CSR."""
    data, indices, indptr = [], [], [0]
    for lineno, line in numbered:
        tokens = line.split("#", 1)[0].split()
        if tokens and not _is_number(tokens[0]):
            raise CEGBError(f"line {lineno}: expected a LibSVM row (a label, then index:value pairs), got "
                            f"{line.strip()[:60]!r}")
        for token in tokens[1:]:
            key, sep, value = token.partition(":")
            if not sep:
                raise CEGBError(f"line {lineno}: expected index:value, got {token!r}")
            if key == "qid":
                continue
            try:
                index, number = int(key), float(value)
            except ValueError:
                raise CEGBError(f"line {lineno}: expected index:value, got {token!r}") from None
            if not 0 <= index < num_features:
                raise CEGBError(f"line {lineno}: feature index {index} outside the model's 0..{num_features - 1}")
            indices.append(index)
            data.append(number)
        indptr.append(len(indices))
    return sp.csr_matrix((np.asarray(data, dtype=np.float64), np.asarray(indices, dtype=np.int64), indptr),
                         shape=(len(numbered), num_features))


_MISSING = ("", "na", "NA", "nan", "NaN")


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return token.strip() in _MISSING
    return True


_LIBSVM_PAIR = re.compile(r"(?:qid|[0-9]+):\S+")


def _is_libsvm(line: str) -> bool:
    """A LibSVM row: a label, then whitespace-separated index:value pairs (a CSV field with a ':' is not one)."""
    tokens = line.split("#", 1)[0].split()
    return len(tokens) >= 2 and _is_number(tokens[0]) and all(_LIBSVM_PAIR.fullmatch(t) for t in tokens[1:])


def _csv_block(numbered: list[tuple[int, str]], delimiter: str | None, width: int) -> np.ndarray:
    """CSV/TSV lines, (line number, line), as a float64 block: every line with ``width`` fields (the first
    line's), each a number or one of LightGBM's missing values (NaN)."""
    lines = [line for _, line in numbered]
    for lineno, line in numbered:
        fields = len(line.rstrip("\r\n").split(delimiter))
        if fields != width:
            raise CEGBError(f"line {lineno}: {fields} fields where the first row has {width}: every row should "
                            "have the same columns")
    block = np.atleast_2d(np.genfromtxt(lines, delimiter=delimiter, dtype=np.float64, missing_values=_MISSING,
                                        filling_values=np.nan))
    for i in np.flatnonzero(np.isnan(block).any(axis=1)):  # NaN: a missing value or a field that is no number
        fields = lines[i].rstrip("\r\n").split(delimiter)
        for j in np.flatnonzero(np.isnan(block[i])):
            if not _is_number(fields[j]):
                raise CEGBError(f"line {numbered[i][0]}, column {j}: expected a number or a missing value "
                                f"({', '.join(repr(m) for m in _MISSING)}), got {fields[j].strip()[:40]!r}")
    return block


#: ``label_column`` not said: the column a header names that is not one of the model's features, else column 0
AUTO = "auto"


def read_rows(fh, label_column: int | str | None, header: bool, num_features: int,
              feature_names: Sequence[str] | None = None):
    """Yield row blocks of a LightGBM data file read from the open text file ``fh`` once, front to back (so
    that stdin and pipes work): CSV/TSV (label column removed; ``label_column`` an index, LightGBM's
    ``name:COLUMN``, None for no label, or :data:`AUTO`) or LibSVM (sparse blocks). A CSV whose first line is not
    numeric needs ``header``; a header is read by name when the model names its features (``feature_names``, see
    :func:`_by_name`)."""
    names = fh.readline().rstrip("\r\n") if header else None
    first = fh.readline()
    if not first:
        return
    lines_in = itertools.chain([first], fh)
    libsvm = _is_libsvm(first)
    delimiter = "\t" if "\t" in first else ("," if "," in first else None)
    if isinstance(label_column, int) and label_column < 0:
        raise CEGBError(f"label_column should be a column index >= 0 (or name:COLUMN), got {label_column}")
    columns = None if names is None else [c.strip() for c in names.split(delimiter)]
    if isinstance(label_column, str) and label_column != AUTO:
        if columns is None:
            raise CEGBError(f"label_column={label_column!r} names a column: the file needs a header (--header or "
                            "header=true in the config)")
        if label_column[5:] not in columns:
            raise CEGBError(f"label_column={label_column!r}: no such column in the header {columns}")
        label_column = columns.index(label_column[5:])
    order = None
    if columns is not None and not libsvm:
        label_column, order = _by_name(columns, label_column, feature_names)
    elif label_column == AUTO:
        label_column = 0
    if not libsvm and names is None and not all(_is_number(t) for t in first.split(delimiter)):
        raise CEGBError(f"line 1 is not numeric ({first.strip()[:60]!r}): if it is a header, pass --header "
                        "(or header=true in the --config file)")
    numbered_in = enumerate(lines_in, 2 if header else 1)
    width = len(first.rstrip("\r\n").split(delimiter))
    while True:
        numbered = [(n, line) for _, (n, line) in zip(range(CHUNK_ROWS), numbered_in) if line.strip()]
        if not numbered:
            return
        if libsvm:
            yield _libsvm_block(numbered, num_features)
        else:
            block = _csv_block(numbered, delimiter, width)
            if label_column is not None:
                if label_column >= block.shape[1]:
                    raise CEGBError(f"label_column={label_column} is beyond the data file's {block.shape[1]} "
                                    f"columns (0..{block.shape[1] - 1})")
                block = np.delete(block, label_column, axis=1)
            yield block if order is None else block[:, order]


def _by_name(header: list[str], label: int | str | None, features: Sequence[str] | None):
    """(the label column, the position of each of the model's features among the other columns, or None: by
    position) of a CSV with a ``header``: by name when the model names its features (not LightGBM's default
    ``Column_i``), a header name matching a feature as it is or with spaces as "_" (LightGBM's renaming); the label
    (:data:`AUTO`) then the one column that is not a feature. By position, as LightGBM reads a file, when the model
    does not name its features (the label :data:`AUTO`: column 0).

    Raises
    ------
    CEGBError
        Naming the columns, when the header lacks a feature of the model, names one twice, holds columns that are
        neither the label nor a feature, or its label column is a feature.
    """
    features = None if features is None else [str(f) for f in features]
    if features is None or features == [f"Column_{i}" for i in range(len(features))]:
        return (0 if label == AUTO else label), None
    position: dict[str, list[int]] = {}
    for i, name in enumerate(header):
        for form in {name, name.replace(" ", "_")}:
            position.setdefault(form, []).append(i)
    missing = [f for f in features if f not in position]
    twice = [f for f in features if len(position.get(f, ())) > 1]
    if missing or twice:
        raise CEGBError(f"the header's columns {header} are read by name, as the model names its {len(features)} "
                        f"features {features}: " + (f"it lacks {missing}" if missing else f"it names {twice} twice"))
    used = [position[f][0] for f in features]
    rest = [i for i in range(len(header)) if i not in used]
    if label == AUTO:
        if len(rest) > 1:
            raise CEGBError(f"the header's columns {[header[i] for i in rest]} are not the model's features: name the "
                            "label with --label-column name:COLUMN (and remove the others)")
        label = rest[0] if rest else None
    elif label is not None and label in used:
        raise CEGBError(f"the label column {label} ({header[label]!r}) is a feature of the model (the header names "
                        "the columns): give the label's column")
    extra = [header[i] for i in rest if i != label]
    if extra:
        raise CEGBError(f"the header's columns {extra} are neither the label nor the model's features: the cost "
                        "command reads label and features only; remove them")
    kept = [i for i in range(len(header)) if i != label]  # the block's columns once the label is removed
    return label, [kept.index(i) for i in used]


def read_config(path: Path, overrides: Sequence[str] = ()) -> dict[str, str]:
    """The settings of LightGBM's CLI given ``overrides`` (command-line key=value) and the config file ``path``,
    as its ``Application::LoadParameters`` reads them: the overrides first, then the file's lines (``#`` starts a
    comment); a key set twice keeps its first value."""
    settings: dict[str, str] = {}
    lines = re.split(r"[\r\n]", read_utf8(path, "config file"))  # TextReader's lines: \n or \r ends one
    for line in [*overrides, *(line.split("#", 1)[0].strip(SPACE) for line in lines)]:
        pair = _key_value(line)
        if pair is not None:
            settings.setdefault(*pair)
    return settings


#: What LightGBM's Common::Trim strips.
SPACE = " \f\n\r\t\v"


def _key_value(text: str) -> tuple[str, str] | None:
    """``key=value`` as LightGBM's ``Config::KV2Map`` reads it: split at "=" (empty pieces dropped), one or two
    pieces, each trimmed of white space then of quotes; None for anything else (LightGBM warns and skips it)."""
    pieces = [piece for piece in text.split("=") if piece]
    if len(pieces) not in (1, 2):
        return None
    key, value = (piece.strip(SPACE).strip("'\"") for piece in (*pieces, "")[:2])
    return (key, value) if key else None


def _setting(settings: dict[str, str], name: str, *aliases: str) -> str | None:
    """The value of the LightGBM parameter ``name`` set under itself or one of its ``aliases``, as LightGBM's
    ``ParameterAlias::KeyAliasTransform`` chooses: the name itself, else the shortest alias (then the first in
    alphabetical order)."""
    if name in settings:
        return settings[name]
    given = sorted((a for a in aliases if a in settings), key=lambda a: (len(a), a))
    return settings[given[0]] if given else None


def _file_settings(args) -> tuple[int | str | None, bool]:
    """The label column and header of the data file: from the options, or LightGBM's keys in --config."""
    label, header = (None if args.no_label else _label_column(args.label_column, "--label-column")), args.header
    if args.config:
        config = Path(args.config)
        if not config.is_file():
            raise CEGBError(f"config file {str(config)!r} does not exist")
        settings = read_config(config)
        for key in ("weight_column", "weight", "group_column", "group", "group_id", "query_column", "query",
                    "query_id", "ignore_column", "ignore_feature", "blacklist"):
            if settings.get(key):
                raise CEGBError(f"{config} sets {key}={settings[key]}: the cost command reads label and features "
                                "only; remove that column from the data file or the setting")
        value = _setting(settings, "header", "has_header")
        if value is not None:
            header = value.lower() in ("true", "1", "+")
        value = _setting(settings, "label_column", "label")
        if value:
            label = _label_column(value, f"{config}: label_column")
    return label, header


def _label_column(value: str, name: str) -> int | str:
    """A label column as given: an index >= 0, ``name:COLUMN`` or :data:`AUTO`."""
    if value == AUTO or value.startswith("name:"):
        return value
    try:
        index = int(value)
    except ValueError:
        index = -1
    if index < 0:
        raise CEGBError(f"{name} should be a column index >= 0, name:COLUMN or auto, got {value!r}")
    return index


def _report_costs(args, num_features: int, params: dict) -> tuple[FeatureCosts | None, bool]:
    """The costs of the cost command (None: the model's own), and whether its groups are the model's: a cost file
    without group lines takes the groups (and their costs) the model was trained with (its ``params``)."""
    if not args.costs:
        if args.split:
            raise CEGBError("--split needs --costs (without --costs the model's own cegb_* parameters are used)")
        return None, False
    costs = read_costs(Path(args.costs), num_features, first_column=int(args.one_based), one_based="--one-based")
    fields = costs.fields()
    if args.split:
        fields["split"] = args.split
    own = FeatureCosts.from_params(params) if costs.groups is None else None
    from_model = own is not None and bool(own.groups)
    if from_model:
        model_fields = own.fields()
        fields.update({key: model_fields[key] for key in ("groups", "group_lazy", "group_coupled")})
    return FeatureCosts(**fields), from_model


def _priced(path: Path) -> tuple[object, int, list[str] | None, dict, bool]:
    """(what the cost command prices, its features, their names or None, its training parameters, whether it is
    priced by its own accounting) of the model at ``path``: a model file by its trees (read once, not loaded by its
    library), a saved folder's estimator or Selection as :func:`_columns` reads it."""
    model = to_forest(path) if path.is_file() else load_model(path)
    return model, *_columns(model)


def _columns(model) -> tuple[int, list[str] | None, dict, bool]:
    """(its features, their names or None, its training parameters, whether it is priced by its own accounting) of
    a model: a package estimator by its fitted columns, any other model (a Selection's too) by its trees."""
    inner = unwrap(model)
    if hasattr(type(inner), "__lightgbm_cegb_cost__") and hasattr(inner, "n_features_in_"):
        names = getattr(inner, "feature_names_in_", None)
        return int(inner.n_features_in_), None if names is None else [str(n) for n in names], {}, True
    forest = to_forest(model)
    return forest.num_features, forest.feature_names, forest.params, False


def cmd_cost(args) -> int:
    model, num_features, names, params, own = _priced(Path(args.model))
    costs, groups_from_model = _report_costs(args, num_features, params)
    label_column, header = _file_settings(args)
    if costs is None and fitted_costs(model) is None and not own and FeatureCosts.from_params(params) is None:
        raise CEGBError(f"--costs is needed: the model {args.model} holds no costs (it was not trained with "
                        "cegb_* parameters); give them with --costs FILE (a cost file, or JSON of FeatureCosts' "
                        "arguments)")
    reports, rows_done, has_id0 = [], 0, False
    data = Path(args.data)
    if not data.exists():
        raise CEGBError(f"data file {args.data!r} does not exist")
    with data.open(encoding="utf-8") as fh:
        try:
            for block in read_rows(fh, label_column, header, num_features, names):
                rows = block
                if own:  # an estimator reads dense rows, a DataFrame when it was fitted on one
                    rows = block.toarray() if sp.issparse(block) else block
                    rows = rows if names is None else pd.DataFrame(rows, columns=names, copy=False)
                reports.append(prediction_cost(model, rows, costs, num_iteration=args.num_iteration,
                                               n_jobs=args.n_jobs))
                rows_done += block.shape[0]
                has_id0 = has_id0 or not sp.issparse(block) or bool((block.indices == 0).any())
                if args.progress:
                    print(f"[lightgbm-cegb] {rows_done} rows", file=sys.stderr, flush=True)
        except UnicodeDecodeError as exc:
            raise CEGBError(f"data file {args.data!r} should be UTF-8 text, got byte 0x{exc.object[exc.start]:02x}"
                            + _where_not_utf8(data)) from None
    if not reports:
        raise CEGBError(f"{args.data} holds no rows")
    _check_base(args.data, args, has_id0)
    groups = reports[0].group_usage
    report = CostReport(acquisition=np.concatenate([r.acquisition for r in reports]),
                        evaluation=np.concatenate([r.evaluation for r in reports]),
                        coupled=reports[0].coupled,
                        usage=sum(r.usage * len(r.acquisition) for r in reports) / rows_done,
                        feature_names=reports[0].feature_names,
                        group_usage=None if groups is None else
                        {g: sum(r.group_usage[g] * len(r.acquisition) for r in reports) / rows_done for g in groups})
    if args.format == "json":
        print(json.dumps({"model": str(args.model), "data": str(args.data), **report.to_dict()}, indent=2))
    else:
        print(f"rows                     {rows_done}")
        print(f"mean cost per row        {report.mean:.6g}")
        print(f"  acquisition (lazy)     {report.acquisition.mean():.6g}")
        print(f"  evaluation (splits)    {report.evaluation.mean():.6g}")
        print(f"coupled cost (per model) {report.coupled:.6g}")
        print("feature usage (share of rows):")
        for name, share in sorted(report.usage_by_name.items(), key=lambda item: -item[1]):
            if share > 0:
                print(f"  {name:<24} {share:7.2%}")
        if report.group_usage is not None:
            print("group usage (share of rows paying the group's cost"
                  + ("; groups from the model's parameters):" if groups_from_model else "):"))
            for name, share in report.group_usage.items():
                print(f"  {name:<24} {share:7.2%}")
    return 0


def _where_not_utf8(path: Path) -> str:
    """' on line N' of the first line of a file that is not UTF-8 ('' if it cannot be read again: a pipe)."""
    try:
        with path.open("rb") as fh:
            for lineno, line in enumerate(fh, 1):  # a UTF-8 sequence never holds a newline byte
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    return f" on line {lineno}"
    except OSError:
        pass
    return ""


def find_cli(explicit: str | None) -> str:
    candidates = [explicit] if explicit else [str(Path(sys.executable).parent / "lightgbm"), shutil.which("lightgbm")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return candidate
    raise CEGBError("the patched LightGBM command-line program was not found next to this Python or on PATH; "
                    "pass --lightgbm PATH")


TRAIN_DATA_KEYS = ("data", "train", "train_data", "train_data_file", "data_filename")


def libsvm_id_range(path: Path) -> tuple[int, int] | None:
    """(smallest, largest) feature id of a LibSVM file, None for another format. Ids ascend within a line,
    as the format requires, so only the first and last pair of each line are read."""
    low, high = None, -1
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            head = line.split(b"#", 1)[0]
            # the two tokens after the label (qid: and the first pair), not a split of the whole line
            pairs = [t for t in head.split(None, 3)[1:3] if not t.startswith(b"qid:")]
            if not pairs:
                continue
            if b":" not in pairs[0]:
                return None
            try:
                first, last = int(pairs[0].partition(b":")[0]), int(head.rsplit(None, 1)[-1].partition(b":")[0])
            except ValueError:
                raise CEGBError(f"{path}:{lineno}: expected index:value pairs, got {line[:60]!r}") from None
            low, high = first if low is None else min(low, first), max(high, last)
    return None if low is None else (low, high)


def _check_base(data, args, has_id0: bool) -> None:
    """A LibSVM file without feature id 0 is most likely 1-based: then the base must be said, since reading
    its cost file from column 0 would shift every cost by one feature."""
    if args.costs and not has_id0 and not (args.one_based or args.zero_based):
        raise CEGBError(f"{data} has no feature id 0: if its ids start at 1 (SVMlight, Yahoo! LTR, MSLR), pass "
                        "--one-based (line 1 of the cost file is id 1); if they start at 0, pass --zero-based")


def cmd_train(args) -> int:
    config = Path(args.config)
    if not config.is_file():
        raise CEGBError(f"config file {str(config)!r} does not exist")
    overrides = args.overrides
    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise CEGBError(f"overrides should be key=value, got {bad[0]!r}")
    text = read_utf8(config, "config file")
    settings = read_config(config, overrides)
    if args.tradeoff is not None:
        check_number(args.tradeoff, "--tradeoff", 0.0)  # before LightGBM's own check, which names its source
    given = sorted(set(settings) & ({*CEGB_KEYS, "cegb_tradeoff"} - set(GROUP_KEYS)))
    if given:
        raise CEGBError(f"{config} or the overrides already set {given}; remove them or drop --costs/--tradeoff")
    data = _setting(settings, *TRAIN_DATA_KEYS)
    if not data:
        raise CEGBError(f"{config} names no training data (data=...) and no override does")
    if not Path(data).is_file():
        raise CEGBError(f"training data file {data!r} does not exist (paths are relative to the directory "
                        "lightgbm-cegb runs in, as for lightgbm config=...)")
    ids, num_features = libsvm_id_range(Path(data)), None
    if ids is not None:  # LightGBM's columns of a LibSVM file: its largest id + 1
        _check_base(data, args, ids[0] == 0)
        num_features = ids[1] + 1
    elif args.one_based:
        raise CEGBError(f"{data} is not a LibSVM file; --one-based is for LibSVM/SVMlight feature ids")
    costs = read_cost_file(args.costs, kind=args.kind, num_features=num_features, first_column=int(args.one_based))
    grouped = sorted(set(settings) & set(GROUP_KEYS))
    if grouped and costs.groups:
        raise CEGBError(f"{config} or the overrides set {grouped}, and the cost file {args.costs} has group lines: "
                        "give the groups in one of them")
    with tempfile.TemporaryDirectory(prefix="lightgbm-cegb-") as tmp:
        # the user's config is left untouched; its paths keep their meaning, since lightgbm runs where the
        # user does, as `lightgbm config=FILE` would
        conf = Path(tmp) / "train.conf"
        conf.write_text(text.rstrip("\n") + "\n# added by lightgbm-cegb train\n"
                        + costs.to_config(tradeoff=args.tradeoff))
        status = run_child([find_cli(args.lightgbm), f"config={conf}", *overrides])
    if status == 0 and costs.groups:
        _name_groups_of_model(settings, list(costs.groups))
    return status


def _name_groups_of_model(settings: dict[str, str], names: list[str]) -> None:
    """Write the names of the cost file's groups into the model LightGBM trained (which numbers them), so that
    the cost command and the package report group usage by name."""
    if (_setting(settings, "task", "task_type") or "train").strip().lower() != "train":
        return
    path = Path(_setting(settings, "output_model", "model_output", "model_out") or "LightGBM_model.txt")
    if not path.is_file():
        raise CEGBError(f"LightGBM ended without error but wrote no model file {str(path)!r}")
    text = with_group_names(read_utf8(path, "model file"), names)
    write_atomically(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def run_child(command: list[str]) -> int:
    """Run ``command`` and return its exit status, forwarding SIGTERM and SIGINT to it and waiting for it to
    end (killed by a signal: 128 + its number, as a shell says): a CLI stopped by its supervisor never leaves
    the training running, nor deletes the config it reads while it still runs.

    The handlers are set before the child starts: a signal in between is delivered to it once it exists, and the
    child starts with both signals at their default (exec resets a caught signal), also where this process
    inherited them ignored, as a background job of a non-interactive shell does SIGINT."""
    child, pending = None, []

    def forward(signum, _frame):
        if child is None:
            pending.append(signum)
        elif child.poll() is None:
            try:
                child.send_signal(signum)
            except ProcessLookupError:  # it has just ended
                pass

    previous = {}
    try:
        for signum in FORWARDED_SIGNALS:
            previous[signum] = signal.signal(signum, forward)
    except ValueError:  # not the main thread: signals cannot be handled here (they reach the main thread)
        pass
    try:
        child = subprocess.Popen(command)
        for signum in pending:
            forward(signum, None)
        status = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child is not None and child.poll() is None:  # an exception while waiting (e.g. SystemExit elsewhere)
            child.terminate()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
    return 128 - status if status < 0 else status


# ---------------------------------------------------------------------------------------------- serve


class OptionError(Exception):
    """A ``serve`` option's value cannot be used: reported as argparse reports its errors (status 2)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")


def load_model(path: Path):
    """A model file (LightGBM, XGBoost, CatBoost), or the estimator or Selection saved in a folder (its class named
    by the manifest): the models ``cost`` and ``serve`` take.

    Raises
    ------
    CEGBError
        When ``path`` does not exist, or holds no model of these.
    """
    from lightgbm_cegb.io.models import load_file
    from lightgbm_cegb.io.saved import read as read_saved
    from lightgbm_cegb.selection import Selection, estimator_class

    if path.is_dir():
        manifest, _ = read_saved(path)
        if manifest["estimator"] == "Selection":
            return Selection.load(path)
        estimator = estimator_class(str(manifest["estimator"]))
        if estimator is None:
            raise CEGBError(f"{str(path)!r} holds a {manifest['estimator']!r}, not an estimator of lightgbm_cegb")
        return estimator.load(path)
    if not path.exists():
        raise CEGBError(f"expected a model file or a folder saved by an estimator's save(), got {str(path)!r}, "
                        "which does not exist")
    to_forest(path)  # a clear error for a file that is not a model
    return load_file(path)


def _serve_model(path: Path, method: str):
    """:func:`load_model`, its errors an OptionError of --model; an XGBoost or CatBoost classifier's file as the
    library's scikit-learn classifier when ``method`` is one only that has (``predict_proba``)."""
    try:
        model = load_model(path)
    except CEGBError as exc:
        raise OptionError("--model", str(exc)) from None
    if callable(getattr(model, method, None)) or path.is_dir():
        return model
    library = library_of(model)
    if library == "xgboost":
        import xgboost as xgb

        objective = json.loads(model.save_config())["learner"]["objective"]["name"]
        classifier = xgb.XGBClassifier() if objective.startswith(("binary:", "multi:")) else None
    elif library == "catboost":
        import catboost as cb

        loss = str(model.get_all_params().get("loss_function", ""))
        classifier = cb.CatBoostClassifier() if loss in ("Logloss", "CrossEntropy", "MultiClass") else None
    else:
        return model
    if classifier is None or not callable(getattr(classifier, method, None)):
        return model
    classifier.load_model(str(path))
    return classifier


def _serve_costs(path: Path, num_features: int) -> FeatureCosts:
    """:func:`read_costs`, its errors an OptionError of --costs."""
    try:
        return read_costs(path, num_features)
    except CEGBError as exc:
        raise OptionError("--costs", str(exc)) from None


def _serve_function(spec: str):
    """The function ``module:function`` or ``path/to/file.py:function``."""
    import importlib
    import importlib.util

    module_name, _, name = spec.rpartition(":")
    if not module_name or not name:
        raise OptionError("--fetch", f"expected MODULE:FUNCTION or path/to/file.py:FUNCTION, got {spec!r}")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise OptionError("--fetch", f"expected MODULE:FUNCTION or path/to/file.py:FUNCTION, got {spec!r}, "
                                             f"and {module_name} does not exist")
            loader = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:  # a module next to where the service starts, as `python -m` finds it
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except OptionError:
        raise
    except Exception as exc:  # the user's module: whatever importing it raised
        raise OptionError("--fetch", f"cannot import {module_name} ({type(exc).__name__}: {exc})") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise OptionError("--fetch", f"{module_name} has no function {name!r}")
    return function


def _check_serve(args) -> None:
    """Options that cannot go together, or values out of range: OptionError."""
    if not 0 <= args.port <= 65535:
        raise OptionError("--port", f"expected a port number in 0..65535, got {args.port}")
    if args.max_body_bytes < 1:
        raise OptionError("--max-body-bytes", f"expected a number of bytes >= 1, got {args.max_body_bytes}")
    if args.latency_ms is not None and not args.latency_ms >= 0:
        raise OptionError("--latency-ms", f"expected a number of milliseconds >= 0, got {args.latency_ms}")
    if args.model is None:
        for option, value in (("--costs", args.costs), ("--store", args.store), ("--fetch", args.fetch),
                              ("--method", None if args.method == "predict" else args.method)):
            if value is not None:
                raise OptionError(option, "needs --model (without --model the bundled HIGGS example runs, with its "
                                          "own costs and store)")
        return
    if args.store is None and args.fetch is None:
        raise OptionError("--model", "needs a feature store: --store FILE.sqlite or --fetch MODULE:FUNCTION")
    if args.workdir is not None:
        raise OptionError("--workdir", "holds the bundled example's files; with --model the service writes none")
    if args.fetch is not None:
        for option, value in (("--query-log", args.query_log), ("--latency-ms", args.latency_ms)):
            if value is not None:
                raise OptionError(option, "applies to a SQLite --store, not to a --fetch function")


def _serve_predictor(args, workdir: Path | None):
    """The predictor the options describe, its store bound, and a description of the model."""
    from lightgbm_cegb.serving.bundled import bundled_example
    from lightgbm_cegb.serving.sqlite_store import SQLiteStore
    from lightgbm_cegb.serving.stores import StoreError, build_predictor

    if args.model is None:
        latency = 20.0 if args.latency_ms is None else args.latency_ms
        return bundled_example(workdir, latency, args.query_log)
    model = _serve_model(args.model, args.method)
    if args.fetch is not None:
        store = _serve_function(args.fetch)
    else:
        try:
            store = SQLiteStore(args.store, latency=(args.latency_ms or 0.0) / 1000, log=args.query_log)
        except CEGBError as exc:
            raise OptionError("--store", str(exc)) from None
    costs = None
    if args.costs is not None:
        try:
            num_features = _columns(model)[0]
        except CEGBError as exc:
            raise OptionError("--model", f"{args.model}: {exc}") from None
        costs = _serve_costs(args.costs, num_features)
    try:
        predictor = build_predictor(model, store, costs)
    except StoreError as exc:
        raise OptionError("--store" if args.fetch is None else "--fetch", str(exc)) from None
    except CEGBError as exc:  # with --costs, a refusal is reported as theirs (its message says "model:" if not)
        option, given = ("--model", args.model) if costs is None else ("--costs", args.costs)
        raise OptionError(option, f"{given}: {exc}") from None
    if not callable(getattr(predictor.model, args.method, None)):
        raise OptionError("--method", f"{type(predictor.model).__name__} has no method {args.method!r}")
    if args.eager and predictor.forest is None:
        raise OptionError("--eager", f"{type(predictor.model).__name__} decides itself what each row buys: it has "
                                     "no full-row prediction to compare with")
    return predictor, f"{type(model).__name__} from {args.model}"


def _stop(signum, frame) -> None:
    raise SystemExit(0)


def cmd_serve(args) -> int:
    """Start the service (lightgbm_cegb.serving.app) and run until stopped (SIGTERM, SIGINT)."""
    try:
        import uvicorn
    except ImportError:
        raise CEGBError("serve needs starlette and uvicorn: pip install 'lightgbm-cegb[serve]'") from None
    from lightgbm_cegb.serving.app import make_app

    _check_serve(args)
    with tempfile.TemporaryDirectory(prefix="lightgbm-cegb-serve-") as tmp:
        workdir = None
        if args.model is None:
            workdir = args.workdir or Path(tmp)
            workdir.mkdir(parents=True, exist_ok=True)
        predictor, description = _serve_predictor(args, workdir)
        files = "" if workdir is None else f"; working files in {workdir}" + \
            ("" if args.workdir else " (removed on exit)")
        mode = " (eager: every feature fetched)" if args.eager else ""
        print(f"serving {description}{mode} on http://{args.host}:{args.port}{files}", file=sys.stderr, flush=True)
        # uvicorn re-raises the SIGTERM it stopped on once it is done: an exit through this handler lets the
        # temporary folder be removed (the default action would end the process at once)
        signal.signal(signal.SIGTERM, _stop)
        uvicorn.run(make_app(predictor, description, args.method, eager=args.eager,
                             sequential=args.fetch_calls == "sequential", max_body_bytes=args.max_body_bytes),
                    host=args.host, port=args.port,
                    log_level="warning")
    return 0


def _serve_parser(sub) -> argparse.ArgumentParser:
    from lightgbm_cegb.serving.app import MAX_BODY_BYTES

    p_serve = sub.add_parser("serve", help="score rows by id with lazy feature acquisition from a feature store",
                             description="Score rows by id over HTTP, fetching from a feature store only the features "
                                         "each row's paths need (docs/guide/service.md).",
                             epilog="Without --model: the bundled HIGGS example (a SQLite store of the bundled test "
                                    "events, a CEGB model with the demo's costs).")
    p_serve.add_argument("--model", type=Path, help="model file (LightGBM, XGBoost, CatBoost), or a folder saved by "
                                                    "an estimator's or a Selection's save()")
    p_serve.add_argument("--costs", type=Path, help="costs and groups: JSON of FeatureCosts' arguments, or the CLI's "
                                                    "cost file (default: the model's own)")
    source = p_serve.add_mutually_exclusive_group()
    source.add_argument("--store", type=Path, help="SQLite feature store: tables with an id column and one column "
                                                   "per feature; a group's members in one table")
    source.add_argument("--fetch", help="MODULE:FUNCTION or path/to/file.py:FUNCTION, called as fetch(key, ids)")
    p_serve.add_argument("--method", default="predict", help="the model's method that predicts, e.g. predict_proba "
                                                             "(default: %(default)s)")
    p_serve.add_argument("--eager", action="store_true", help="fetch every feature of the rows, then predict on full "
                                                              "rows (the baseline of lazy acquisition)")
    p_serve.add_argument("--fetch-calls", choices=["concurrent", "sequential"], default="concurrent",
                         help="a round's fetch calls at once, each on a thread (default), or a request's one after the "
                              "other on one thread: faster when the store answers in microseconds")
    p_serve.add_argument("--query-log", type=Path, help="append a JSON line per store query to this file")
    p_serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s, this "
                                                             "machine only)")
    p_serve.add_argument("--port", type=int, default=8000, help="(default: %(default)s)")
    p_serve.add_argument("--max-body-bytes", type=int, default=MAX_BODY_BYTES,
                         help="the longest request body; a longer one answers 413 unread (default: %(default)s)")
    p_serve.add_argument("--workdir", type=Path, help="the bundled example's store and model (default: a temporary "
                                                      "folder removed on exit)")
    p_serve.add_argument("--latency-ms", type=float, help="simulated latency of each query: of the bundled store's "
                                                          "reconstruction table (default 20), of a --store (default 0)")
    return p_serve


COSTS_HELP = ("cost file: one value per feature, one per line (Yahoo! LTR format), and optional lines "
              "'group NAME COST COLUMNS' (columns from 0, e.g. 'group soil 100 2-41,45': the group's cost is paid "
              "once, by the first member used)")
ONE_BASED_HELP = ("LibSVM feature ids start at 1 (SVMlight, Yahoo! LTR, MSLR): line i of the cost file is id i, "
                  "which LightGBM reads into column i (column 0 stays empty and costs 0)")
ZERO_BASED_HELP = "LibSVM feature ids start at 0: line i of the cost file is column i - 1 (needed when no row has id 0)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lightgbm-cegb", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_cost = sub.add_parser("cost", help="prediction cost of a model on a data file")
    p_cost.add_argument("model", help="model file (LightGBM text, XGBoost JSON or UBJSON, CatBoost JSON or "
                                      "binary), or a folder saved by an estimator's or a Selection's save()")
    p_cost.add_argument("data", help="data file: CSV/TSV (label in --label-column) or LibSVM")
    p_cost.add_argument("--costs", help=f"{COSTS_HELP}, lazy costs; without group lines, the groups are the "
                                         "model's; or JSON of FeatureCosts' arguments; default: the model's own")
    base = p_cost.add_mutually_exclusive_group()
    base.add_argument("--one-based", action="store_true", help=ONE_BASED_HELP)
    base.add_argument("--zero-based", action="store_true", help=ZERO_BASED_HELP)
    p_cost.add_argument("--split", type=float, default=0.0, help="cost per split node (with --costs)")
    p_cost.add_argument("--label-column", default=AUTO,
                        help="the label's column: its index, name:COLUMN (with --header) or auto (default: with a "
                             "header naming the model's features, the column that is not one; otherwise column 0)")
    p_cost.add_argument("--no-label", action="store_true", help="the file has no label column")
    p_cost.add_argument("--header", action="store_true", help="the first line is a header")
    p_cost.add_argument("--config", help="LightGBM config file to read header and label_column from")
    p_cost.add_argument("--num-iteration", type=int, default=None)
    p_cost.add_argument("--format", choices=["table", "json"], default="table")
    p_cost.add_argument("--n-jobs", type=int, default=None, help="threads (default: the CPUs this process may use)")
    p_cost.add_argument("--progress", action=argparse.BooleanOptionalAction, default=sys.stderr.isatty(),
                        help="report rows done on stderr (default: when stderr is a terminal)")
    p_train = sub.add_parser("train", help="train with LightGBM's CLI and a cost file")
    p_train.add_argument("config", help="LightGBM CLI config file")
    p_train.add_argument("--costs", required=True, help=f"{COSTS_HELP}; without group lines, the config may set "
                                                        "cegb_feature_group and cegb_penalty_group_*")
    p_train.add_argument("--kind", choices=["lazy", "coupled"], default="lazy",
                         help="the costs of the file, features' and groups': per row (lazy) or per model (coupled)")
    p_train.add_argument("--tradeoff", type=float, default=None, help="cegb_tradeoff")
    base = p_train.add_mutually_exclusive_group()
    base.add_argument("--one-based", action="store_true", help=ONE_BASED_HELP)
    base.add_argument("--zero-based", action="store_true", help=ZERO_BASED_HELP)
    p_train.add_argument("--lightgbm", help="path of the patched lightgbm program")
    p_train.epilog = ("Settings key=value after the options (or after --) are passed to lightgbm "
                      "and win over the config.")
    p_serve = _serve_parser(sub)
    argv, rest = list(sys.argv[1:] if argv is None else argv), []
    if "--" in argv:
        argv, rest = argv[:argv.index("--")], argv[argv.index("--") + 1:]
    args, unknown = parser.parse_known_args(argv)
    args.overrides = [u for u in unknown if not u.startswith("-")] + rest
    if args.command in ("cost", "serve") and args.overrides or any(u.startswith("-") for u in unknown):
        parser.error(f"unrecognized arguments: {' '.join(unknown + rest)}")
    try:
        if args.command == "serve":
            try:
                return cmd_serve(args)
            except OptionError as exc:
                p_serve.error(str(exc))
        return cmd_cost(args) if args.command == "cost" else cmd_train(args)
    except (CEGBError, OSError) as exc:
        print(f"lightgbm-cegb: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
