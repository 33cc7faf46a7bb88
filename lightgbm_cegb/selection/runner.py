"""A sweep's jobs: each grid point fitted and measured on the validation rows (here, in joblib's processes or on a
Dask cluster), each method's state prepared once, and the rule that reads a method's best point within a budget.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from lightgbm_cegb.core.errors import CEGBWarning, NothingToTradeOff
from lightgbm_cegb.core.validation import caller_stacklevel
from lightgbm_cegb.selection.registry import METHODS, Context, Method, NeedsFit

#: each fitted grid point is logged here (INFO): its method, parameters, points and best quality
LOG = logging.getLogger("lightgbm_cegb.selection")


def run_point(method: Method, context: Context, state, params: dict,
              stage: str) -> tuple[list[dict] | None, float, list[int]]:
    """The rows of one grid point (its model and prefixes; None: it would train a model where ``context.fits`` is
    False), the seconds its fit and measures took, and the rounds of each of its trainings that ``context.seconds``
    cut (``Context.cut_callbacks``)."""
    start = time.perf_counter()
    context = replace(context, cut=[])  # this point's own
    rows = []
    try:
        candidates = method.fit(context, state, dict(params))
    except NeedsFit:
        return None, time.perf_counter() - start, context.cut
    for candidate in candidates:
        quality, cost, coupled = candidate.measure(context.valid, context.metric, choose=True)
        rows.append({"method": method.name, "quality": quality, "cost": cost, "coupled": coupled,
                     "params": candidate.params, "stage": stage, "model": candidate})
    return rows, time.perf_counter() - start, context.cut


#: fit_within_budget's time for each method of its sweep, in each of its stages (the screen's subsample, every
#: row): this many plain LightGBM fits of the stage's rows (``method_fits``), and at least ALLOWANCE_FLOOR seconds
#: (on a few thousand rows a point's measures and its plan cost more than a plain fit of 0.1 s)
METHOD_FITS = 20
ALLOWANCE_FLOOR = 30.0


@dataclass
class Allowance:
    """Each method's seconds in one stage of a sweep (its preparation, its points' fits and measures), and the
    limit past which it starts no other point: ``fits`` plain LightGBM fits of ``unit`` seconds, at least
    ALLOWANCE_FLOOR."""

    fits: float
    unit: float
    used: dict = field(default_factory=dict)  # seconds by method
    skipped: dict = field(default_factory=dict)  # the points not fitted, by method
    cut: dict = field(default_factory=dict)  # the rounds of the trainings cut at the allowance, by method

    @classmethod
    def timed(cls, fits: float, context: Context) -> Allowance:
        """The allowance of a stage on ``context``'s rows, its unit the time of the plain model there (which the
        methods that start from it reuse: ``points.plain_model``)."""
        from lightgbm_cegb.selection.points import plain_model
        start = time.perf_counter()
        plain_model(context)
        return cls(fits, time.perf_counter() - start)

    @property
    def seconds(self) -> float:
        return max(self.fits * self.unit, ALLOWANCE_FLOOR)

    def allows(self, name: str) -> bool:
        """Whether ``name`` may start a point."""
        return self.used.get(name, 0.0) < self.seconds

    def stopped(self) -> dict[str, dict]:
        """The methods that reached the limit: their seconds, plain fits, points left unfitted and the rounds of each
        training cut inside its fit."""
        return {name: {"seconds": round(self.used[name], 1), "plain_fits": round(self.used[name] / self.unit, 1),
                       "not_fitted": self.skipped.get(name, 0), "cut": self.cut.get(name, [])}
                for name in sorted(set(self.skipped) | set(self.cut))}

    def left(self, name: str) -> float:
        """The seconds ``name`` may still spend."""
        return max(self.seconds - self.used.get(name, 0.0), 0.0)


@dataclass
class Execution:
    """How a sweep's jobs run: ``n_jobs`` joblib processes or a Dask ``client``, a tqdm ``bar`` (or None), the
    seconds ``spent`` by method over the whole sweep, and the stage's ``allowance`` (None: no limit)."""

    n_jobs: int = 1
    client: object = None
    bar: object = None
    spent: dict = field(default_factory=dict)
    allowance: Allowance | None = None
    allowances: dict = field(default_factory=dict)  # each stage's, by name; shared by the copies

    def limited(self, fits: float | None, context: Context, stage: str) -> Execution:
        """This execution with ``stage``'s allowance of ``fits`` plain fits of ``context``'s rows (itself without
        ``fits``)."""
        if fits is None:
            return self
        self.allowances[stage] = Allowance.timed(fits, context)
        return replace(self, allowance=self.allowances[stage])

    def count(self, name: str, seconds: float, cut: list[int] = ()) -> None:
        """Count a point's ``seconds`` (and the rounds of its trainings ``cut`` at the allowance) for ``name``."""
        self.spent[name] = self.spent.get(name, 0.0) + seconds
        if self.allowance is not None:
            self.allowance.used[name] = self.allowance.used.get(name, 0.0) + seconds
            if cut:
                LOG.info("sweep: %s's training cut at its allowance after %s round(s)", name, list(cut))
                self.allowance.cut[name] = [*self.allowance.cut.get(name, []), *cut]

    def context_for(self, method: Method, context: Context) -> Context | None:
        """The context a point of ``method`` runs in: ``context`` with the seconds its allowance has left
        (``Context.seconds``); past its allowance, a knob read when predicting runs only points that read a model
        fitted already (``Context.fits`` False), any other method none."""
        if self.allowance is None:
            return context
        if self.allowance.allows(method.name):  # a point's own boosting ends where the allowance does
            return replace(context, seconds=self.allowance.left(method.name))
        return replace(context, fits=False) if method.knob is not None and method.knob.read_at_predict else None

    def skip(self, name: str, points: int = 1) -> None:
        """Count ``points`` of ``name`` not fitted (over its allowance; logged the first time)."""
        skipped = self.allowance.skipped
        if name not in skipped:
            LOG.info("sweep: %s stopped after %.1f s, its allowance %.1f s (%g plain fits of %.2f s)", name,
                     self.allowance.used[name], self.allowance.seconds, self.allowance.fits, self.allowance.unit)
        skipped[name] = skipped.get(name, 0) + points
        if self.bar is not None:
            self.bar.update(points)


def execute(jobs: list, context: Context, execution: Execution, *, flat: bool = True, planned: bool = False) -> list:
    """The rows of every job (method, state, params, stage), in the order of the jobs (flat=False: a list of rows
    per job); each method's points are shown to its plan before the fits (``planned``: they were already); each
    job done is logged (``lightgbm_cegb.selection``, INFO) with its seconds (counted by method in ``execution``)
    and shown on the progress bar with its method and point (whose total grows by the jobs). A job whose method
    has spent its allowance when the job would start is not fitted (no rows). The jobs of a method that shares its
    fits (``Method.shares_fits``) run in this process, one after another, whatever ``n_jobs`` or the client."""
    bar = execution.bar
    if bar is not None:
        bar.total += len(jobs)
    for method, state, points in ([] if planned else _batches(jobs)):
        method.plan(context, state, points)
    results: list = [[] for _ in jobs]
    parallel = execution.client is not None or execution.n_jobs != 1
    here = [i for i, job in enumerate(jobs) if parallel and job[0].shares_fits]
    there = sorted(set(range(len(jobs))) - set(here))
    if execution.client is None:
        _with_joblib(jobs, here, context, execution, results, 1)
        _with_joblib(jobs, there, context, execution, results, execution.n_jobs)
    else:
        _on_client(jobs, there, context, execution, results, lambda between: _with_joblib(
            jobs, here, context, execution, results, 1, between))
    return [row for result in results for row in result] if flat else results


def _on_client(jobs: list, indices: list[int], context: Context, execution: Execution, results: list, local) -> None:
    """Fit the jobs at ``indices`` on the Dask client into ``results``; ``local(between)`` fits the others in this
    process meanwhile, calling ``between()`` after each job, which takes in the remote results ready by then: a
    remote method past its allowance has its pending jobs cancelled then, not only once the local jobs are done."""
    from distributed import as_completed
    futures = [execution.client.submit(run_point, method, context, state, point, stage, pure=False)
               for method, state, point, stage in (jobs[i] for i in indices)]
    order = {future.key: i for i, future in zip(indices, futures)}
    ready = as_completed(futures) if futures else None

    def take(future) -> None:
        i = order[future.key]
        if future.cancelled():
            return
        results[i], seconds, cut = future.result()
        _done(jobs[i], results[i], seconds, context.metric, execution, cut)
        method = jobs[i][0]
        if execution.context_for(method, context) is None:  # past its allowance: the jobs not finished are
            pending = [f for f, j in zip(futures, indices) if jobs[j][0] is method and not f.done()]
            if pending:  # dropped (submitted at once, they may fit)
                execution.client.cancel(pending)
                execution.skip(method.name, len(pending))

    def between() -> None:
        if ready is not None and ready.has_ready():
            for future in ready.next_batch(block=False):
                take(future)

    try:
        local(between)
    except BaseException:
        execution.client.cancel(futures)
        raise
    for future in [] if ready is None else ready:
        take(future)


def _with_joblib(jobs: list, indices: list[int], context: Context, execution: Execution, results: list,
                 n_jobs: int, between=None) -> None:
    """Fit the jobs at ``indices`` in ``n_jobs`` joblib processes (1: in this one; -1, None: as joblib reads them)
    into ``results``, calling ``between()`` (if given) after each."""
    from joblib import Parallel, delayed, effective_n_jobs
    # with an allowance, in waves of as many jobs as joblib runs at once its methods may start: joblib dispatches
    # the next tasks from the thread that collects a result, before this one has counted its seconds
    waiting, size = list(indices), effective_n_jobs(n_jobs)
    while waiting:
        if execution.allowance is None:
            wave, waiting = [(i, context) for i in waiting], []
        else:
            wave = []  # (job, the context it runs in)
            while waiting and len(wave) < size:
                i = waiting.pop(0)
                own = execution.context_for(jobs[i][0], context)
                if own is not None:
                    wave.append((i, own))
                else:
                    execution.skip(jobs[i][0].name)
        for k, (result, seconds, cut) in enumerate(Parallel(n_jobs=n_jobs, return_as="generator")(
                delayed(run_point)(jobs[i][0], own, *jobs[i][1:]) for i, own in wave)):
            i = wave[k][0]
            if result is None:  # it would have trained a model past its allowance
                execution.count(jobs[i][0].name, seconds, cut)
                execution.skip(jobs[i][0].name)
            else:
                results[i] = result
                _done(jobs[i], result, seconds, context.metric, execution, cut)
            if between is not None:
                between()


#: sweep(focus=True) with a budget walks each setting of a method's grid (its other parameters fixed) from its
#: knob's cheap end, and fits no dearer value after WALK_PATIENCE values in a row whose whole model costs more
#: than every budget and whose points (prefixes included) improve on the cheaper values' within no budget: the
#: dearer models cost more still, and their prefixes within a budget are cut-down models (Greedy Miser's ten
#: grid points took 115 s each on letter's 26 classes, where a plain fit takes 2 s; its values below 0.01 buy
#: every feature)
WALK_PATIENCE = 2


def _walks(method: Method, point: dict) -> bool:
    """Whether a grid point is on a walk: its method's knob has a cheap end, is in the point, and costs a fit per
    value (a knob read at prediction costs none)."""
    knob = method.knob
    return knob is not None and knob.cheap_end is not None and not knob.read_at_predict and knob.name in point


def walk(jobs: list, context: Context, execution: Execution, sign: float) -> list:
    """The rows of ``jobs`` as :func:`execute` gives them (flat, in the jobs' order), each setting of a knob with a
    cheap end walked from it (``WALK_PATIENCE``) in waves: a wave fits the next value of every setting still
    walking (and, in the first, every job not on a walk), in parallel as :func:`execute` does; what is fitted does
    not depend on ``n_jobs`` or a cluster. Each setting stopped is logged with the values it left."""
    lines: dict[tuple, list[int]] = {}  # a setting's jobs, from its knob's cheap end; a job on no walk alone
    for i, (method, _, point, _) in enumerate(jobs):
        knob = method.knob
        key = (method.name, frozen({k: v for k, v in point.items() if k != knob.name})) \
            if _walks(method, point) else (i,)
        lines.setdefault(key, []).append(i)
    for line in lines.values():
        method = jobs[line[0]][0]
        if _walks(method, jobs[line[0]][2]):
            line.sort(key=lambda i: abs(float(jobs[i][2][method.knob.name]) - method.knob.cheap_end))
    budget = max(context.budgets)
    results: list = [None] * len(jobs)
    walking = {key: {"next": 0, "idle": 0, "best": dict.fromkeys(context.budgets, -np.inf)} for key in lines}
    for method, state, points in _batches(jobs):  # every point the walks may fit, shown to its plan once
        method.plan(context, state, points)
    while walking:
        wave = [(key, lines[key][walking[key]["next"]]) for key in walking]
        for (key, i), rows in zip(wave, execute([jobs[i] for _, i in wave], context, execution, flat=False,
                                                 planned=True)):
            results[i], line = rows, walking[key]
            line["next"] += 1
            if rows:
                best = {b: max([line["best"][b]] + [sign * row["quality"] for row in rows if row["cost"] <= b])
                        for b in line["best"]}
                whole = max(rows, key=lambda row: row["params"].get("trees", np.inf))["cost"]
                line["idle"] = line["idle"] + 1 if whole > budget and best == line["best"] else 0
                line["best"] = best
            if line["next"] == len(lines[key]):
                del walking[key]
            elif line["idle"] >= WALK_PATIENCE:
                del walking[key]
                method, knob = jobs[i][0], jobs[i][0].knob
                left = [jobs[j][2][knob.name] for j in lines[key][line["next"]:]]
                LOG.info("sweep: %s (%s) grid: from %s=%g on, %d value(s) not fitted (%s): the last %d cost more "
                         "than every budget and improved within none", method.name,
                         ", ".join(f"{k}={v}" for k, v in key[1]) or "defaults", knob.name, left[0], len(left),
                         ", ".join(f"{v:g}" for v in left), WALK_PATIENCE)
    return [row for result in results if result is not None for row in result]


def _batches(jobs: list) -> list[tuple]:
    """(method, state, points) of each method of ``jobs``, in their order."""
    batches: dict[str, tuple] = {}
    for method, state, point, _ in jobs:
        batches.setdefault(method.name, (method, state, []))[2].append(point)
    return list(batches.values())


def _done(job, rows: list[dict], seconds: float, metric, execution: Execution, cut: list[int]) -> None:
    """Report a finished job: its seconds (and trainings cut) counted, a log record and the progress bar's text."""
    method, _, point, stage = job
    execution.count(method.name, seconds, cut)
    shown = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in point.items()
                      if k != "trees")
    if rows:
        sign = 1.0 if metric.greater_is_better else -1.0
        best = max(rows, key=lambda row: sign * row["quality"])
        LOG.info("sweep: %s (%s) %s: %d point(s), best %s %.4g at cost %.4g (%.1f s)", method.name,
                 shown or "defaults", stage, len(rows), metric.name, best["quality"], best["cost"], seconds)
    else:
        LOG.info("sweep: %s (%s) %s: no point (%.1f s)", method.name, shown or "defaults", stage, seconds)
    if execution.bar is not None:
        execution.bar.set_postfix_str(f"{method.name} {shown}"[:60], refresh=False)
        execution.bar.update()


def _key(value):
    """A hashable stand-in for a parameter's value (lists and dicts as their repr)."""
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)


def frozen(params: Mapping) -> tuple:
    """A hashable stand-in for parameters, whatever the order of their keys."""
    return tuple(sorted((k, _key(v)) for k, v in params.items()))


def best_within(rows: list[dict], method: str, budget: float, sign: float) -> float:
    """The best validation quality (times ``sign``) of ``method``'s points within ``budget`` (-inf: none)."""
    return max((sign * row["quality"] for row in rows if row["method"] == method and row["cost"] <= budget),
               default=-np.inf)


def grid_jobs(states: dict, grid: dict, context: Context, stage: str, skip=()) -> list[tuple]:
    """The jobs (method, state, params, stage) of each prepared method's grid (``grid``'s, else its default),
    but for the methods in ``skip``."""
    return [(METHODS[name], state, point, stage) for name, state in states.items() if name not in skip
            for point in (grid[name] if name in grid else METHODS[name].grid(context))]


def prepared(names, context: Context, execution: Execution) -> dict:
    """Each method's state for the sweep (``Method.prepare``, its seconds counted in ``execution``), by name; a method
    every feature is free to, or whose first tree makes no split even without costs (NothingToTradeOff), is left
    out with a CEGBWarning (its points would all be plain models)."""
    states = {}
    for name in names:
        start = time.perf_counter()
        try:
            states[name] = METHODS[name].prepare(context)
        except NothingToTradeOff as exc:
            warnings.warn(f"sweep: {name} left out: {exc}", CEGBWarning, stacklevel=caller_stacklevel())
        execution.count(name, time.perf_counter() - start)
    return states


