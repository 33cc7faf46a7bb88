"""The CSTC family of a sweep: CSTC, CSCC and Cronus.

Knob: ``cstc``, ``cscc``, ``cronus``: ``relative_tradeoff`` r of ``CSTC`` / ``CSCC`` / ``Cronus`` (tradeoff = r x
``tradeoff_scale``, the variance of the targets they fit: the labels, or -1 / +1 for binary tasks and for the
cascades, whose ranking targets are relevant (y > 0) or not; CSTC's ranking regresses the relevance labels) on the
outputs of the plain LightGBM model's trees (the boosting trick), pruned on the validation rows; binary scores are
``(f + 1) / 2`` clipped to [0, 1] (squared-loss classifiers: accuracy and AUC, not log-loss). ``phi_trees`` (and
``phi_depth``, default 4) in a grid point: phi is instead the paper's own boosting trick, that many squared-loss
trees of that depth trained on the targets (one model per setting, shared by the trade-offs); the estimator's other
parameters (``depth``, ``polish``, ``n_stages``, ...) pass through.
"""

from __future__ import annotations

import lightgbm as lgb
import numpy as np

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.selection.points import (
    plain_model,
    scaled_knob,
    whole_model,
)
from lightgbm_cegb.selection.registry import Candidate, Context, Family, Knob, Rows

#: this module's methods, registered by the package (``lightgbm_cegb.selection``)
FAMILY = Family()


#: ``relative_tradeoff`` values of CSTC's default grid.
CSTC_RELATIVE_TRADEOFFS = (1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)


def _cstc_targets(context: Context, rows: Rows, binary: bool) -> np.ndarray:
    """The labels a CSTC-family estimator fits: -1 / +1 for binary tasks and for the cascades (relevant: y > 0),
    the labels themselves for CSTC's regression and ranking."""
    return np.where(rows.y > 0, 1.0, -1.0) if binary or context.task == "binary" else rows.y


def _boosting_trick(context: Context, targets: np.ndarray, trees: int, depth: int) -> lgb.Booster:
    """The CSTC paper's phi (section 5, 6.2): ``trees`` rounds of gradient boosting with the squared loss on the
    targets, CART trees of at most ``depth`` levels (no early stopping: every tree is a column)."""
    params = {"objective": "regression", "max_depth": depth, "num_leaves": 2 ** depth, "learning_rate": 0.1,
              "verbose": -1, "seed": 0, "deterministic": True, "num_threads": context.params.get("num_threads", 0)}
    return lgb.train(params, lgb.Dataset(context.train.X, targets), trees)


def _cstc_method(name: str, binary_estimator: str, regression_estimator: str | None) -> None:
    """Register ``name``: ``relative_tradeoff`` x the variance of the targets, phi = the plain model's trees (or,
    with ``phi_trees``, the paper's boosting trick: that many squared-loss trees of ``phi_depth`` levels, 4 by
    default), pruned on the validation rows; binary scores ``(f + 1) / 2`` clipped to [0, 1]."""
    binary_only = regression_estimator is None

    def prepare(context: Context):
        import lightgbm_cegb.methods.cstc as cstc
        cls = getattr(cstc, binary_estimator if binary_only or context.task == "binary" else regression_estimator)
        targets = _cstc_targets(context, context.train, binary_only)
        return plain_model(context), cls().tradeoff_scale(context.train.X, targets), {}

    def fit(context: Context, state, params: dict) -> list[Candidate]:
        import lightgbm_cegb.methods.cstc as cstc
        phi, scale, tricks = state
        params = dict(params)
        tradeoff, knob = scaled_knob(name, params, "relative_tradeoff", "tradeoff", scale)
        binary = binary_only or context.task == "binary"
        cls = getattr(cstc, binary_estimator if binary else regression_estimator)
        y_train, y_valid = (_cstc_targets(context, rows, binary_only) for rows in (context.train, context.valid))
        trick = {key: params.pop(key) for key in ("phi_trees", "phi_depth") if key in params}
        if trick:
            trees, depth = trick.get("phi_trees"), trick.get("phi_depth", 4)
            if not (isinstance(trees, (int, np.integer)) and trees >= 1 and isinstance(depth, (int, np.integer))
                    and 1 <= depth <= 16):
                raise CEGBError(f"{name}: phi_trees should be an integer >= 1 and phi_depth one in [1, 16], got "
                                f"phi_trees={trees!r}, phi_depth={depth!r}")
            if (trees, depth) not in tricks:  # one phi per setting, shared by the trade-offs (in this process)
                tricks[trees, depth] = _boosting_trick(context, y_train, int(trees), int(depth))
            phi = tricks[trees, depth]
        model = cls(tradeoff=tradeoff, feature_costs=context.costs, phi=phi, **params).fit(context.train.X, y_train,
                                                                          eval_set=(context.valid.X, y_valid))
        output = "cstc" if context.task == "binary" else "decision" if binary else "predict"
        return [whole_model(name, {**knob, **trick, **params}, model, output)]

    FAMILY.method(name, tasks=("binary", "ranking") if binary_only else ("binary", "regression", "ranking"),
             prepare=prepare, grid=lambda context: [{"relative_tradeoff": r} for r in CSTC_RELATIVE_TRADEOFFS],
             knob=Knob("relative_tradeoff", "tradeoff", log=True))(fit)


_cstc_method("cstc", "CSTCClassifier", "CSTC")
_cstc_method("cscc", "CSCC", None)
_cstc_method("cronus", "Cronus", None)
