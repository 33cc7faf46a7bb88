"""``lightgbm-cegb``: prediction cost of a model on a data file, and CEGB training with LightGBM's CLI.

    lightgbm-cegb cost MODEL DATA [--costs FILE] [--split ALPHA] [--format table|json]
    lightgbm-cegb train CONFIG --costs FILE [--kind lazy|coupled] [--tradeoff LAMBDA] [-- key=value ...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .accounting import CostReport, prediction_cost
from .costs import CEGB_KEYS, FeatureCosts
from .ensemble import to_ensemble
from .errors import CEGBError

CHUNK_ROWS = 200_000


def read_rows(path: Path, label_column: int | None, header: bool, num_features: int):
    """Yield row blocks of a LightGBM data file: CSV/TSV (label column removed) or LibSVM."""
    with path.open() as fh:
        first = fh.readline()
    if ":" in first.split("#")[0] and not first.startswith(("#",)):
        from sklearn.datasets import load_svmlight_file

        X, _ = load_svmlight_file(str(path), n_features=num_features, zero_based=True)
        for start in range(0, X.shape[0], CHUNK_ROWS):
            yield X[start:start + CHUNK_ROWS].toarray()
        return
    delimiter = "\t" if "\t" in first else ("," if "," in first else None)
    with path.open() as fh:
        if header:
            fh.readline()
        while True:
            lines = [line for _, line in zip(range(CHUNK_ROWS), fh)]
            if not lines:
                return
            block = np.atleast_2d(np.genfromtxt(lines, delimiter=delimiter, dtype=np.float64,
                                                missing_values=("", "na", "NA", "nan", "NaN"), filling_values=np.nan))
            if label_column is not None:
                block = np.delete(block, label_column, axis=1)
            yield block


def cmd_cost(args) -> int:
    ensemble = to_ensemble(args.model)
    costs = None
    if args.costs:
        costs = FeatureCosts.from_file(args.costs, kind="lazy", num_features=ensemble.num_features)
        if args.split:
            costs = FeatureCosts(lazy=costs.lazy, split=args.split)
    elif args.split:
        raise CEGBError("--split needs --costs (without --costs the model's own cegb_* parameters are used)")
    reports, rows_done = [], 0
    for block in read_rows(Path(args.data), None if args.no_label else args.label_column, args.header,
                           ensemble.num_features):
        reports.append(prediction_cost(ensemble, block, costs, num_iteration=args.num_iteration))
        rows_done += len(block)
        if args.progress:
            print(f"[lightgbm-cegb] {rows_done} rows", file=sys.stderr, flush=True)
    if not reports:
        raise CEGBError(f"{args.data} holds no rows")
    report = CostReport(acquisition=np.concatenate([r.acquisition for r in reports]),
                        evaluation=np.concatenate([r.evaluation for r in reports]),
                        coupled=reports[0].coupled,
                        usage=sum(r.usage * len(r.acquisition) for r in reports) / rows_done)
    if args.format == "json":
        print(json.dumps({"model": str(args.model), "data": str(args.data), **report.to_dict()}, indent=2))
    else:
        print(f"rows                     {rows_done}")
        print(f"mean cost per row        {report.mean:.6g}")
        print(f"  acquisition (lazy)     {report.acquisition.mean():.6g}")
        print(f"  evaluation (splits)    {report.evaluation.mean():.6g}")
        print(f"coupled cost (per model) {report.coupled:.6g}")
        print("feature usage (share of rows):")
        names = ensemble.feature_names or [f"Column_{i}" for i in range(ensemble.num_features)]
        for i in np.argsort(-report.usage):
            if report.usage[i] > 0:
                print(f"  {names[i]:<24} {report.usage[i]:7.2%}")
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
