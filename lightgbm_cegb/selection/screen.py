"""The screen of a sweep with a budget on many rows: every method swept on a subsample, and only each budget's
finalists (their best points, the knob's neighbours) fitted on every training row.
"""

from __future__ import annotations

from dataclasses import replace

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import check_number
from lightgbm_cegb.selection import refinement, runner
from lightgbm_cegb.selection.registry import METHODS, Context, Method
from lightgbm_cegb.selection.runner import LOG, frozen, grid_jobs, prepared

#: sweep(screen=None): the training rows of the screen's subsample, and how many training rows a sweep with a
#: budget needs before it screens (below, a full sweep costs little more than the screen)
SCREEN_ROWS, SCREEN_FROM = 2_500, 20_000
#: a sweep with a budget also screens from 2 x SCREEN_ROWS training rows when they hold this many cells (rows x
#: columns x the trees of a boosting round: a multiclass task's classes): Fashion-MNIST's four tops, 16,800 x 336 x
#: 4 = 23 million, took 14 s a plain fit, 96 s the staged acquisition and 515 s the adaptive one unscreened (issue 59)
SCREEN_CELLS = 20_000_000
#: the validation rows the screen measures on, at most (the per-row policies' runs cost as many as the fits)
SCREEN_VALID = 2_500
#: the methods of the best screened points within each budget that are refitted on every training row
SCREEN_KEEP = 2
#: the methods the screen refines around a budget: those of its best grid points within it (one more than are kept)
SCREEN_CONTENDERS = SCREEN_KEEP + 1
#: the settings of a finalist's other parameters (e.g. the acquisitions' caps) whose best screened points are
#: refitted on every training row
SCREEN_SETTINGS = 2
#: the rounds of refinement on every training row after a screen (the screen's points bracket the knob already); a
#: knob read at prediction (``Knob.read_at_predict``: no fit per value) is refined for every round of ``refine``
SCREEN_REFINE = 2


def screen_size(screen, rows: int, budgets: tuple, frontier, cells: int = 0) -> int:
    """The training rows a sweep screens on (0: no screen), from ``screen`` as sweep takes it; ``cells``: the
    training rows x columns x trees per round."""
    if screen is None:
        many = rows >= SCREEN_FROM or (rows >= 2 * SCREEN_ROWS and cells >= SCREEN_CELLS)
        return SCREEN_ROWS if budgets and frontier is None and many else 0
    if screen is False:
        return 0
    size = SCREEN_ROWS if screen is True else screen
    check_number(size, "screen", 2, integer=True)
    if not budgets or frontier is not None:
        raise CEGBError(f"screen={screen!r}: a screen chooses the methods to fit on every row by their points "
                        "within a budget: it needs budget= and no frontier=")
    return int(size) if size < rows else 0


def screened(names: list[str], context: Context, grid: dict, size: int, refine: int, focus: bool, sign: float,
             execution: runner.Execution, fits: float | None = None
             ) -> tuple[list[tuple[str, dict]], dict[float, list[str]]]:
    """Sweep on a subsample of ``size`` training rows and of SCREEN_VALID validation rows (grids, and refinement of
    each budget's contenders);
    returns the points to refit on every training row, as (method, params), and each budget's finalists: the
    SCREEN_KEEP methods of the best points within it (none within: of the cheapest points), whose points
    :func:`finalist_points` chooses. With ``fits``, each method's allowance there is ``fits`` plain fits of the
    subsample (``runner.Allowance``)."""
    valid = context.valid.subsample(SCREEN_VALID, context.task) if len(context.valid.y) > SCREEN_VALID else \
        context.valid
    sub = replace(context, train=context.train.subsample(size, context.task), valid=valid, shared={},
                  screen_of=len(context.train.y))
    LOG.info("sweep: screening on %d of the %d training rows and %d of the %d validation rows", len(sub.train.y),
             len(context.train.y), len(valid.y), len(context.valid.y))
    execution = execution.limited(fits, sub, "screen")
    states = prepared(names, sub, execution)
    jobs = grid_jobs(states, grid, sub, "screen")
    rows = runner.walk(jobs, sub, execution, sign) if focus else runner.execute(jobs, sub, execution)
    pairs = {(name, budget) for budget in context.budgets
             for name in refinement.contenders(rows, budget, sign, SCREEN_CONTENDERS)
             if name in states and METHODS[name].knob is not None}
    rows += refinement.refine_around(rows, pairs, states, sub, refine, focus, sign, execution, stage="screen refine")
    finalists, points = {}, {}
    for budget in context.budgets:
        kept = refinement.leaders(rows, budget, sign) or \
            list(dict.fromkeys(row["method"] for row in sorted(rows, key=lambda row: row["cost"])))
        finalists[budget] = kept[:SCREEN_KEEP]
        LOG.info("sweep: budget %g: the screen keeps %s", budget, ", ".join(finalists[budget]))
        for name in finalists[budget]:
            for point in finalist_points(METHODS[name], [row for row in rows if row["method"] == name], budget, sign):
                points.setdefault((name, frozen(point)), (name, point))
    return list(points.values()), finalists


def finalist_points(method: Method, rows: list[dict], budget: float, sign: float) -> list[dict]:
    """The parameters of ``method``'s best screened point within ``budget`` (none within: its cheapest), each with
    its knob's nearest grid values on either side (a knob read at prediction: every grid value), in each of the
    SCREEN_SETTINGS settings of its other parameters whose best points within the budget are best."""
    knob = method.knob
    drop = {"trees"} | ({knob.record} if knob is not None and knob.record else set())

    def own(row) -> dict:  # what fits the point again: its parameters without the prefix and the knob's record
        return {k: v for k, v in row["params"].items() if k not in drop}

    def setting(row) -> tuple:
        return frozen({k: v for k, v in own(row).items() if knob is None or k != knob.name})

    within = [row for row in rows if row["cost"] <= budget] or [min(rows, key=lambda row: row["cost"])]
    best: dict[tuple, dict] = {}  # each setting's best point within the budget
    for row in sorted(within, key=lambda row: (-sign * row["quality"], row["cost"])):
        best.setdefault(setting(row), row)
    points = []
    for key, row in list(best.items())[:SCREEN_SETTINGS]:
        point = own(row)
        points.append(point)
        if knob is None or knob.name not in point:
            continue
        value = float(point[knob.name])
        grid = {float(other["params"][knob.name]) for other in rows if other["stage"] == "screen"
                and knob.name in other["params"] and setting(other) == key}
        rest = {k: v for k, v in point.items() if k != knob.name}
        if knob.read_at_predict:  # no fit per value: every grid value (the full rows' costs may leave the bracket)
            near = sorted(grid - {value})
        else:
            near = [v for v in (max((v for v in grid if v < value), default=None),
                                min((v for v in grid if v > value), default=None)) if v is not None]
        points += [{**rest, knob.name: v} for v in near]
    return points


