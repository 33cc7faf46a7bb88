"""The refinement of a sweep: each method's knob bisected around each budget, and a frontier gone on from where a
budget falls in a gap of its points.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import Number, Numbers
from lightgbm_cegb.selection import runner
from lightgbm_cegb.selection.registry import METHODS, Context, Method
from lightgbm_cegb.selection.runner import LOG, best_within, frozen

#: ``budget`` as sweep and fit_within_budget take it: one budget, or several for one sweep
BUDGETS = Numbers(Number(0.0), single=True)


def swept_budgets(budget) -> tuple[float, ...]:
    """``budget`` as sweep takes it (None or what BUDGETS allows, checked at the entry point) as a tuple of distinct
    floats in increasing order (empty for None)."""
    if budget is None:
        return ()
    if np.ndim(budget) == 0:
        return (float(budget),)
    return tuple(sorted({float(value) for value in budget}))


#: A frontier "has a gap" below a budget when its best point within the budget costs less than this fraction of
#: the budget while dearer points exist: a point nearer the budget may well be better (select warns, and a sweep
#: going on from the frontier refines there).
GAP = 0.8


def in_gap(costs: np.ndarray, qualities: np.ndarray, budget: float, sign: float) -> bool:
    """Whether ``budget`` falls in a gap of the points (``costs``, ``qualities``; ``sign`` 1 when greater is
    better): the best point within it (ties: the cheapest) costs less than GAP x budget while some point costs
    more than the budget. No point within it: not a gap (a refinement towards the cheap end finds those)."""
    within = costs <= budget
    if not within.any() or not (costs > budget).any():
        return False
    best = np.max(sign * qualities[within])
    return bool(np.min(costs[within][sign * qualities[within] == best]) < GAP * budget)


#: sweep(focus=True): a method behind the leader within a budget is no longer refined there after a round that
#: brought it nothing better, or too little to catch the leader in the rounds left at that pace, when it trails by
#: more than CLOSE x the spread of the qualities within the budget, else after PATIENCE such rounds in a row (on
#: letter, Greedy Miser's prefixes gained a little within a tenth of the cost every round, far behind: 7 rounds'
#: points of 105 s each); a knob read at prediction goes on while it improves at all
CLOSE, PATIENCE = 0.05, 2


#: sweep(focus=True): around each budget, only the CONTENDERS methods whose points are best within it (and those with
#: no point within it yet, and those whose knob is read at prediction: no fit) are refined (on MNIST 3 vs 8, Greedy
#: Miser's and ADAPT-LIN's refinement took 64 s, 44 plain fits, while they trailed the staged acquisition and CEGB;
#: on HIGGS the staged acquisition's grid had no point near a tenth of plain LightGBM's cost, where its refinement
#: found the best one)
CONTENDERS = 3


def leaders(rows: list[dict], budget: float, sign: float) -> list[str]:
    """The methods with a point within ``budget``, the one of the best such point first (ties: in the rows' order)."""
    best = {name: best_within(rows, name, budget, sign)
            for name in dict.fromkeys(row["method"] for row in rows if row["cost"] <= budget)}
    return sorted(best, key=lambda name: -best[name])


def contenders(rows: list[dict], budget: float, sign: float, count: int = CONTENDERS) -> list[str]:
    """The ``count`` methods whose points are best within ``budget``, and those with no point within it yet (their
    refinement walks towards the knob's cheap end)."""
    ahead = leaders(rows, budget, sign)
    return ahead[:count] + [name for name in dict.fromkeys(row["method"] for row in rows) if name not in ahead]


def _spread_within(rows: list[dict], budget: float, sign: float) -> float:
    """The best minus the worst validation quality (times ``sign``) of the points within ``budget``."""
    qualities = [sign * row["quality"] for row in rows if row["cost"] <= budget]
    return max(qualities) - min(qualities) if qualities else 0.0


def refine_around(rows: list[dict], pairs: set, states: dict, context: Context, rounds: int, focus: bool, sign: float,
            execution: runner.Execution, stage: str = "refine", free_rounds: int | None = None) -> list[dict]:
    """The rows of the refinement rounds around the budgets of ``pairs`` (method, budget), after ``rows``: ``rounds``
    of them, ``free_rounds`` (default ``rounds``) for a method whose knob is read at prediction.

    Each budget's bisection reads the points of ``rows`` (the grid's, the frontier's) and those refined for
    that budget, as a sweep for that budget alone would; a point several budgets ask for is fitted once. With
    ``focus``, only the methods that :func:`contenders` names for a budget (and those whose knob is read at
    prediction) are refined there, each while its rounds improve its best point within the budget enough to catch
    the leader in the rounds left (a knob read at prediction: at all), it leads the methods there, or it has no
    point within the budget yet; a method behind the leader is not refined there again after a round that did not
    when it trails far (CLOSE), else after PATIENCE such rounds (most of a sweep's time otherwise)."""
    new: list[dict] = []
    own: dict[float, list[dict]] = {budget: [] for _, budget in pairs}  # the rows refined for each budget
    fitted: dict[tuple, list[dict]] = {}  # the rows of each refinement point fitted
    active, idle = set(pairs), dict.fromkeys(pairs, 0)
    if focus:  # a knob read at prediction costs no fit: refined whatever its standing
        for budget in sorted(own):
            ahead = contenders(rows, budget, sign)
            behind = sorted(name for name, b in active if b == budget and name not in ahead
                            and not METHODS[name].knob.read_at_predict)
            if behind:
                LOG.info("sweep: budget %g: %s not refined (behind the %d leading methods within it)", budget,
                         ", ".join(behind), CONTENDERS)
            active -= {(name, budget) for name in behind}

    def best(pair) -> float:
        return best_within(rows + own[pair[1]], *pair, sign)

    free_rounds = rounds if free_rounds is None else free_rounds
    limit = {name: free_rounds if METHODS[name].knob.read_at_predict else rounds for name, _ in pairs}
    for round_ in range(max(limit.values(), default=0)):
        active = {pair for pair in active if round_ < limit[pair[0]]}
        before = {pair: best(pair) for pair in pairs}
        wanted: dict[tuple, tuple[str, dict, list[float]]] = {}
        shared = False
        for name, budget in sorted(active):
            seen = [row for row in rows + own[budget] if row["method"] == name]
            for point in refinements(METHODS[name], seen, budget, sign):
                key = (name, frozen(point))
                if key in fitted:  # fitted for another budget: this one reads it too
                    own[budget] += fitted[key]
                    shared = True
                else:
                    wanted.setdefault(key, (name, point, []))[2].append(budget)
        if not wanted and not shared:
            break
        jobs = [(METHODS[name], states[name], point, stage) for name, point, _ in wanted.values()]
        results = runner.execute(jobs, context, execution, flat=False)
        for (key, (_, _, budgets)), result in zip(wanted.items(), results):
            fitted[key] = result
            new += result
            for budget in budgets:
                own[budget] += result
        if focus:
            after = {pair: best(pair) for pair in pairs}
            leading = {budget: max(q for (_, b), q in after.items() if b == budget) for _, budget in pairs}
            close = {budget: CLOSE * _spread_within(rows + own[budget], budget, sign) for _, budget in pairs}
            for pair in active:
                gap, gain = leading[pair[1]] - after[pair], after[pair] - before[pair]
                catching = gain > 0 and (METHODS[pair[0]].knob.read_at_predict  # at this round's pace
                                         or gain * (limit[pair[0]] - round_ - 1) >= gap)
                idle[pair] = 0 if catching or gap <= 0 or before[pair] == -np.inf \
                    else idle[pair] + 1  # none within yet: walking to the cheap end
            active = {pair for pair in active if idle[pair] == 0
                      or (idle[pair] < PATIENCE and leading[pair[1]] - after[pair] <= close[pair[1]])}
    return new


def refinements(method: Method, rows: list[dict], budget: float, sign: float) -> list[dict]:
    """New knob values for ``method`` around the budget: for each setting of its other parameters, the knob
    value whose points (any prefix) reach the best validation quality within the budget, and the midpoints
    between it and its neighbours among the values tried (as a bisection: each round halves the gaps around
    the best). When no point of a setting is within the budget, the midpoint towards the knob's cheap end; when
    only prefixes are (every whole model over the budget, as a subsample's bracket can leave a finalist on every
    row), that midpoint too: a model trained for the budget is usually better than a cut-down costlier one."""
    knob = method.knob
    settings: dict[tuple, dict] = {}
    for row in rows:
        params = row["params"]
        if knob.name not in params:  # a raw knob (e.g. cegb_tradeoff) given instead: not refined
            continue
        rest = {k: v for k, v in params.items() if k not in (knob.name, knob.record, "trees")}
        setting = settings.setdefault(frozen(rest),
                                      {"rest": rest, "values": {}, "whole": {}})
        value = float(params[knob.name])
        best = setting["values"].setdefault(value, -np.inf)
        if row["cost"] <= budget:
            setting["values"][value] = max(best, sign * row["quality"])
        trees = params.get("trees", np.inf)  # the whole model: the most trees of the value's points
        if trees >= setting["whole"].get(value, (-np.inf, 0.0))[0]:
            setting["whole"][value] = (trees, row["cost"])
    new = []
    for setting in settings.values():
        values = sorted(setting["values"])
        qualities = [setting["values"][v] for v in values]
        targets = []
        if max(qualities) > -np.inf:
            i = int(np.argmax(qualities))
            targets = [knob.between(values[i], values[j]) for j in (i - 1, i + 1) if 0 <= j < len(values)]
        if knob.cheap_end is not None and all(cost > budget for _, cost in setting["whole"].values()):
            nearest = min(values, key=lambda v: abs(v - knob.cheap_end))
            targets.append(knob.between(nearest, knob.cheap_end))
        for target in targets:
            if all(abs(target - v) > 1e-9 * max(abs(v), 1e-12) for v in values):
                new.append({knob.name: target, **setting["rest"]})
    return new


def go_on_from(frontier: pd.DataFrame, context: Context, budgets: tuple[float, ...],
                sign: float) -> tuple[list[dict], list[float]]:
    """sweep(frontier=): the frame's points as rows (after checking it was swept as this sweep is), and the
    budgets to refine: those in a gap of its points (each budget's verdict logged)."""
    if not isinstance(frontier, pd.DataFrame) or "metric_object" not in frontier.attrs:
        raise CEGBError(f"frontier should be a frame that sweep returned, got {type(frontier).__name__}")
    attrs = frontier.attrs
    for key, value, mine in (("task", attrs.get("task"), context.task),
                             ("metric", attrs.get("metric"), context.metric.name),
                             ("costs", attrs.get("costs"), context.costs)):
        if value != mine:
            raise CEGBError(f"frontier: swept with {key} {value!r:.80}, this sweep has {mine!r:.80}")
    fields = ("method", "quality", "cost", "coupled", "params", "stage", "model")
    previous = [dict(zip(fields, values)) for values in zip(*(frontier[f] for f in fields))]
    swept, costs, qualities = swept_budgets(attrs.get("budget")), frontier["cost"].to_numpy(float), \
        frontier["quality"].to_numpy(float)
    refined = []
    for budget in budgets:
        if budget in swept:
            LOG.info("sweep: budget %g: the frontier given was swept for it", budget)
        elif in_gap(costs, qualities, budget, sign):
            LOG.info("sweep: budget %g falls in a gap of the frontier given: refining the knobs there", budget)
            refined.append(budget)
        else:
            LOG.info("sweep: budget %g: the frontier given has points close below it, no refinement", budget)
    return previous, refined


