"""``lightgbm-cegb``: prediction cost of a model on a data file, and CEGB training with LightGBM's CLI.

    lightgbm-cegb cost MODEL DATA [--costs FILE] [--split ALPHA] [--format table|json]
    lightgbm-cegb train CONFIG --costs FILE [--kind lazy|coupled] [--tradeoff LAMBDA] [-- key=value ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .accounting import CostReport, prediction_cost
from .costs import CEGB_KEYS, FeatureCosts
from .errors import CEGBError
from .models import to_forest

CHUNK_ROWS = 200_000


def _libsvm_block(lines: list[str], num_features: int, first_line: int):
    """LibSVM lines (label, then index:value pairs with LightGBM's 0-based indices; qid: ignored) as CSR."""
    data, indices, indptr = [], [], [0]
    for lineno, line in enumerate(lines, first_line):
        for token in line.split("#", 1)[0].split()[1:]:
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
                         shape=(len(lines), num_features))


def read_rows(fh, label_column: int | None, header: bool, num_features: int):
    """Yield row blocks of a LightGBM data file read from the open text file ``fh`` once, front to back (so
    that stdin and pipes work): CSV/TSV (label column removed) or LibSVM (sparse blocks)."""
    if header:
        fh.readline()
    first = fh.readline()
    if not first:
        return
    lines_in = itertools.chain([first], fh)
    libsvm = ":" in first.split("#")[0]
    delimiter = "\t" if "\t" in first else ("," if "," in first else None)
    done = 0
    while True:
        lines = [line for _, line in zip(range(CHUNK_ROWS), lines_in) if line.strip()]
        if not lines:
            return
        if libsvm:
            yield _libsvm_block(lines, num_features, done + 1)
        else:
            block = np.atleast_2d(np.genfromtxt(lines, delimiter=delimiter, dtype=np.float64,
                                                missing_values=("", "na", "NA", "nan", "NaN"), filling_values=np.nan))
            if label_column is not None:
                block = np.delete(block, label_column, axis=1)
            yield block
        done += len(lines)


def cmd_cost(args) -> int:
    forest = to_forest(args.model)
    costs = None
    if args.costs:
        costs = FeatureCosts.from_file(args.costs, kind="lazy", num_features=forest.num_features)
        if args.split:
            costs = FeatureCosts(lazy=costs.lazy, split=args.split)
    elif args.split:
        raise CEGBError("--split needs --costs (without --costs the model's own cegb_* parameters are used)")
    reports, rows_done = [], 0
    data = Path(args.data)
    if not data.exists():
        raise CEGBError(f"data file {args.data!r} does not exist")
    with data.open() as fh:
        for block in read_rows(fh, None if args.no_label else args.label_column, args.header,
                               forest.num_features):
            reports.append(prediction_cost(forest, block, costs, num_iteration=args.num_iteration,
                                           n_jobs=args.n_jobs))
            rows_done += block.shape[0]
            if args.progress:
                print(f"[lightgbm-cegb] {rows_done} rows", file=sys.stderr, flush=True)
    if not reports:
        raise CEGBError(f"{args.data} holds no rows")
    report = CostReport(acquisition=np.concatenate([r.acquisition for r in reports]),
                        evaluation=np.concatenate([r.evaluation for r in reports]),
                        coupled=reports[0].coupled,
                        usage=sum(r.usage * len(r.acquisition) for r in reports) / rows_done,
                        feature_names=forest.feature_names)
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
    return 0


def find_cli(explicit: str | None) -> str:
    candidates = [explicit] if explicit else [str(Path(sys.executable).parent / "lightgbm"), shutil.which("lightgbm")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return candidate
    raise CEGBError("the patched LightGBM command-line program was not found next to this Python or on PATH; "
                    "pass --lightgbm PATH")


def cmd_train(args) -> int:
    config = Path(args.config)
    if not config.is_file():
        raise CEGBError(f"config file {str(config)!r} does not exist")
    text = config.read_text()
    given = sorted({line.split("=", 1)[0].strip() for line in text.splitlines()
                    if "=" in line and not line.lstrip().startswith("#")} & set(CEGB_KEYS + ("cegb_tradeoff",)))
    if given:
        raise CEGBError(f"{config} already sets {given}; remove them or drop --costs/--tradeoff")
    costs = FeatureCosts.from_file(args.costs, kind=args.kind)
    extra = costs.to_config(tradeoff=args.tradeoff)
    # a temporary config beside the original, so that relative paths in it keep their meaning
    fd, tmp = tempfile.mkstemp(prefix=".cegb-", suffix=".conf", dir=config.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text.rstrip("\n") + "\n# added by lightgbm-cegb train\n" + extra)
        proc = subprocess.run([find_cli(args.lightgbm), f"config={Path(tmp).name}", *args.overrides],
                              cwd=config.parent)
    finally:
        os.unlink(tmp)
    return proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lightgbm-cegb", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_cost = sub.add_parser("cost", help="prediction cost of a model on a data file")
    p_cost.add_argument("model", help="LightGBM model file")
    p_cost.add_argument("data", help="data file: CSV/TSV (label in --label-column) or LibSVM")
    p_cost.add_argument("--costs", help="lazy cost file, one value per line (Yahoo LTR format); "
                                         "default: the model's own cegb_* parameters")
    p_cost.add_argument("--split", type=float, default=0.0, help="cost per split node (with --costs)")
    p_cost.add_argument("--label-column", type=int, default=0, help="index of the label column (default 0)")
    p_cost.add_argument("--no-label", action="store_true", help="the file has no label column")
    p_cost.add_argument("--header", action="store_true", help="the first line is a header")
    p_cost.add_argument("--num-iteration", type=int, default=None)
    p_cost.add_argument("--format", choices=["table", "json"], default="table")
    p_cost.add_argument("--n-jobs", type=int, default=None, help="threads (default: the CPUs this process may use)")
    p_cost.add_argument("--progress", action=argparse.BooleanOptionalAction, default=sys.stderr.isatty(),
                        help="report rows done on stderr (default: when stderr is a terminal)")
    p_train = sub.add_parser("train", help="train with LightGBM's CLI and a cost file")
    p_train.add_argument("config", help="LightGBM CLI config file")
    p_train.add_argument("--costs", required=True, help="cost file, one value per line")
    p_train.add_argument("--kind", choices=["lazy", "coupled"], default="lazy")
    p_train.add_argument("--tradeoff", type=float, default=None, help="cegb_tradeoff")
    p_train.add_argument("--lightgbm", help="path of the patched lightgbm program")
    p_train.add_argument("overrides", nargs="*", help="extra key=value settings passed to lightgbm")
    args = parser.parse_args(argv)
    try:
        return cmd_cost(args) if args.command == "cost" else cmd_train(args)
    except (CEGBError, OSError) as exc:
        print(f"lightgbm-cegb: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
