"""Greedy Miser and the ADAPT family of a sweep (ADAPT's trees pay as Greedy Miser's: its knob's unit is Greedy
Miser's scale).

Knobs:

- ``greedy_miser``: ``relative_tradeoff`` r in [0, 1]: ``tradeoff = r * scale``, the scale being the smallest
  ``tradeoff`` at which the first tree has no split (``GreedyMiser*.tradeoff_scale``); ``tradeoff`` sets the raw
  value. Early stopping on the validation rows keeps the best iteration (``GreedyMiserRanker``: NDCG@5).
- ``adapt_gbrt``: ``p_full`` and ``relative_tradeoff`` of ``AdaptGBRT`` (tradeoff = r x Greedy Miser's
  ``tradeoff_scale``) in front of f0, the plain LightGBM model (classification).
- ``adapt_lin``: ``p_full`` and ``relative_tradeoff`` of ``AdaptLIN`` (tradeoff = r x
  ``AdaptLIN.tradeoff_scale``, the smallest tradeoff at which f1 reads no feature) in front of the same f0
  (classification; finite X).
- ``adapt_l1``: the ADAPT paper's L1 baseline, with ADAPT-LIN's knob and unit.
"""

from __future__ import annotations

from collections.abc import Callable

from lightgbm_cegb.selection.points import (
    PREFIX_TREES,
    check_capped,
    plain_model,
    prefixes,
    scaled_knob,
    shared,
    whole_model,
)
from lightgbm_cegb.selection.registry import Candidate, Context, Family, Knob

#: this module's methods, registered by the package (``lightgbm_cegb.selection``)
FAMILY = Family()


#: ``relative_tradeoff`` values of Greedy Miser's default grid (as CEGB's: 1 is a first tree without a split).
GREEDY_MISER_RELATIVE_TRADEOFFS = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.4, 0.7, 0.9)

def _greedy_miser(context: Context, **params):
    from lightgbm_cegb.methods.greedy_miser import (
        GreedyMiserClassifier,
        GreedyMiserRanker,
        GreedyMiserRegressor,
    )
    kind = {"binary": GreedyMiserClassifier, "multiclass": GreedyMiserClassifier,
            "regression": GreedyMiserRegressor, "ranking": GreedyMiserRanker}[context.task]
    return kind(feature_costs=context.costs, n_estimators=context.num_boost_round,
                early_stopping_rounds=context.early_stopping_rounds, random_state=0, **params)


def _greedy_miser_prepare(context: Context) -> float:
    """The unit of ``relative_tradeoff``: Greedy Miser's tradeoff_scale on the training rows (shared by the sweeps
    of the same rows, costs and parameters)."""
    train, model = context.train, _greedy_miser(context)
    key = {"greedy_miser": model.get_params(), "costs": context.costs.fields()}
    return shared(context, key, lambda: model.tradeoff_scale(train.X, train.y,
                                                             **({} if train.group is None else {"group": train.group})))


@FAMILY.method("greedy_miser", prepare=_greedy_miser_prepare,
          grid=lambda context: [{"relative_tradeoff": r} for r in GREEDY_MISER_RELATIVE_TRADEOFFS],
          knob=Knob("relative_tradeoff", "tradeoff", log=True, cheap_end=1.0))
def _fit_greedy_miser(context: Context, scale: float, params: dict) -> list[Candidate]:
    params = dict(params)
    trees = params.pop("trees", PREFIX_TREES)
    tradeoff, knob = scaled_knob("greedy_miser", params, "relative_tradeoff", "tradeoff", scale)
    train, valid = context.train, context.valid
    queries = {} if train.group is None else {"group": train.group, "eval_group": [valid.group]}
    model = _greedy_miser(context, tradeoff=tradeoff, **params).fit(train.X, train.y, eval_set=[(valid.X, valid.y)],
                                                                    callbacks=context.cut_callbacks(), **queries)
    output = {"binary": "positive", "multiclass": "proba"}.get(context.task, "predict")
    return check_capped("greedy_miser", context, model.best_iteration_,
                         prefixes(context, "greedy_miser", {**knob, **params}, model, output, trees))


def _adapt_prepare(context: Context):
    """f0 (plain LightGBM on the training rows) and the unit of ``relative_tradeoff`` (Greedy Miser's tradeoff_scale
    on the training rows: ADAPT's trees pay as Greedy Miser's)."""
    return plain_model(context), _greedy_miser_prepare(context)


def _adapt_fit(name: str, estimator: str, relative_key: str, raw_key: str) -> Callable:
    """The fit of an ADAPT estimator (``lightgbm_cegb.<estimator>``) in front of the prepared f0, its knob
    ``raw_key`` given as is or as ``relative_key`` times the prepared scale."""
    def fit(context: Context, state, params: dict) -> list[Candidate]:
        import lightgbm_cegb.methods.adapt.gbrt as adapt
        import lightgbm_cegb.methods.adapt.lin as adapt_lin
        f0, scale = state
        params = dict(params)
        value, knob = scaled_knob(name, params, relative_key, raw_key, scale)
        cls = getattr(adapt, estimator, None) or getattr(adapt_lin, estimator)
        model = cls(f0=f0, feature_costs=context.costs, **{raw_key: value}, **params).fit(context.train.X,
                                                                                          context.train.y)
        return [whole_model(name, {**knob, **params}, model, "positive" if context.task == "binary" else "proba")]
    return fit


#: ADAPT-GBRT's default grid: ``p_full`` x ``relative_tradeoff``.
ADAPT_GBRT_GRID = tuple({"p_full": p, "relative_tradeoff": r} for p in (0.1, 0.2, 0.3, 0.5) for r in (0.0, 0.01, 0.1))

FAMILY.method("adapt_gbrt", tasks=("binary", "multiclass"), prepare=_adapt_prepare,
         grid=lambda context: [dict(point) for point in ADAPT_GBRT_GRID],
         knob=Knob("relative_tradeoff", "tradeoff", log=True))(
    _adapt_fit("adapt_gbrt", "AdaptGBRT", "relative_tradeoff", "tradeoff"))


def _adapt_lin_prepare(context: Context):
    """f0 (plain LightGBM on the training rows) and the unit of ``relative_tradeoff`` (AdaptLIN.tradeoff_scale)."""
    from lightgbm_cegb.methods.adapt.lin import AdaptLIN
    f0 = plain_model(context)
    return f0, AdaptLIN(f0=f0, feature_costs=context.costs).tradeoff_scale(context.train.X, context.train.y)


FAMILY.method("adapt_lin", tasks=("binary", "multiclass"), prepare=_adapt_lin_prepare,
         grid=lambda context: [{"p_full": p, "relative_tradeoff": r} for p in (0.1, 0.3, 0.5)
                               for r in (0.01, 0.05, 0.2)], knob=Knob("relative_tradeoff", "tradeoff", log=True))(
    _adapt_fit("adapt_lin", "AdaptLIN", "relative_tradeoff", "tradeoff"))

# the ADAPT paper's L1 baseline: the same knob and unit as ADAPT-LIN (its first fit is AdaptLIN's)
FAMILY.method("adapt_l1", tasks=("binary", "multiclass"), prepare=_adapt_lin_prepare,
         grid=lambda context: [{"p_full": p, "relative_tradeoff": r} for p in (0.1, 0.3, 0.5)
                               for r in (0.01, 0.05, 0.2)], knob=Knob("relative_tradeoff", "tradeoff", log=True))(
    _adapt_fit("adapt_l1", "AdaptL1", "relative_tradeoff", "tradeoff"))
