"""The ladder every staged model shares (the classifier of ``methods.staged``, the ranker of ``methods.cascade``, the
regressor of ``methods.staged_regressor``): the units' order cut into nested stages, their prices, and the run of rows
up the ladder that ``predict_result`` and ``LazyPredictor`` drive."""

from __future__ import annotations

import copy
import hashlib
import sys
import threading
import warnings
from collections.abc import Mapping

import lightgbm as lgb
import numpy as np

from lightgbm_cegb._engine import StageStack
from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.parallel import resolve_n_jobs
from lightgbm_cegb.core.partitions import is_dask, over_partitions, partitions, query_parts
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.subsets import SubsetSearch, Unit, searched
from lightgbm_cegb.core.validation import checked_sequence
from lightgbm_cegb.io import saved
from lightgbm_cegb.io.lightgbm_text import loaded, model_text
from lightgbm_cegb.methods.acquisition import EvaluationCost, checked_data, compiled_stages, hidden
from lightgbm_cegb.methods.dask_stages import persisted, raw_scores

#: the orders of the units a staged model's stages are cut from (its ``order``)
ORDERS = ("importance", "search")
#: how a staged model's stages relate (its ``stage_models``): each its own model, or each adding trees to the scores of
#: the stage below (a row pays for each stage's trees once, and evaluates them once)
STAGE_MODELS = ("separate", "continued")


def continued_stages(train_on, parts: tuple, num_threads: int):
    """``stage_on`` of continued stage models (``StageLadder._fit_stages``): ``train_on(columns, init)`` trains each
    stage from the raw scores ``init`` (one per part of ``parts``: the training rows, then the early-stopping rows,
    None for a part that is not there) of the stages trained before it, and each stage's own raw scores on its columns
    are added to them (``below + own``: the scores a stage's rows hold when they reach the next; for the rows of a
    Dask array, on the workers)."""
    base = [None] * len(parts)

    def stage_on(columns: list[int]) -> lgb.Booster:
        booster = train_on(columns, base)
        for i, rows in enumerate(parts):
            if rows is None:
                continue
            own = raw_scores(booster, rows, columns) if is_dask(rows) else \
                booster.predict(hidden(rows, columns), raw_score=True, num_threads=num_threads)
            summed = own if base[i] is None else base[i] + own
            base[i] = persisted(summed) if is_dask(rows) else summed  # a Dask array's kept on the workers
        return booster

    return stage_on


#: held while a memo records a training's warnings and gives them again: ``warnings.catch_warnings`` changes the
#: process's filters, and two recordings at once in two threads would restore each other's
_RECORDING = threading.RLock()


def _module_of(filename: str) -> str | None:
    """The name of the imported module whose file is ``filename`` (what ``warnings.warn`` gives its filters), or None
    (then ``warn_explicit`` names it by the file)."""
    return next((name for name, module in list(sys.modules.items()) if getattr(module, "__file__", None) == filename),
                None)


class StageMemo:
    """The trainings that fits of staged models on the same rows share.

    A stage model trained from LightGBM's start (a separate stage, the first continued one, the model of every column)
    and a search's measure of a set of columns are kept by a digest of everything the training reads (the rows, the
    labels, the early-stopping rows, LightGBM's parameters and seed, the estimator's training settings) and given to
    every other fit with the same digest: the classifier's and the ranker's orders and kinds of stage models in a
    sweep (``fit(..., memo=...)``). Each model is the one that fit would train, to the bit, and a Booster of the fit's
    own (a recalled one is loaded from the text written when it was trained: editing one fit's model leaves the
    others and the memo as they are); the warnings of its training are given again with it. Fits in several threads
    may use memos: the memos of the process record their trainings' warnings one at a time (Python's warning filters
    are the process's). Rows in memory only (a Dask fit does not use it); pickled empty.
    """

    def __init__(self) -> None:
        self._kept: dict = {}

    def __reduce__(self):
        return (StageMemo, ())

    @staticmethod
    def digest(*parts) -> str:
        """A digest of what a training reads.

        Parameters
        ----------
        *parts : object
            Arrays (read by their dtype, shape and bytes) and anything else (by its repr).

        Returns
        -------
        str
            The hexadecimal digest.
        """
        h = hashlib.blake2b(digest_size=20)
        for part in parts:
            if isinstance(part, np.ndarray):
                h.update(f"{part.dtype.str}{part.shape}".encode())
                h.update(np.ascontiguousarray(part).view(np.uint8).ravel())
            else:
                h.update(repr(part).encode())
            h.update(b"\0")
        return h.hexdigest()

    def recall(self, key: tuple, make):
        """What ``make()`` gives for ``key``, made the first time only.

        Parameters
        ----------
        key : tuple
            What tells the made things apart.
        make : callable
            ``make()``: the thing, made when ``key`` is new (its warnings are given each time it is recalled).

        Returns
        -------
        object
            What ``make()`` gave for ``key``.
        """
        with _RECORDING:
            if key not in self._kept:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    made = make()
                self._kept[key] = (made, caught)
            made, caught = self._kept[key]
            for w in caught:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, module=_module_of(w.filename))
        return made

    def trainings(self, train_on, digest: str):
        """``train_on`` sharing the models it trains from LightGBM's start.

        Parameters
        ----------
        train_on : callable
            ``train_on(columns, init)``: the Booster of a stage of ``columns`` boosted from the raw scores ``init``.
        digest : str
            The :meth:`digest` of everything ``train_on`` reads besides its arguments.

        Returns
        -------
        callable
            ``train_on`` recalling the models of ``init`` all None by their set of columns.
        """
        def made(columns: list[int], init) -> tuple[list, str]:
            booster = train_on(columns, init)
            return [booster], model_text(booster)  # the text its training wrote (a cut stage's), not written again

        def shared(columns: list[int], init=(None, None)) -> lgb.Booster:
            if any(part is not None for part in init):
                return train_on(columns, init)
            kept, text = self.recall(("stage", digest, tuple(sorted(columns))), lambda: made(columns, init))
            try:
                return kept.pop()  # the Booster trained, to the first fit (one pop of the list: one fit gets it)
            except IndexError:
                return loaded(text)  # to the others a Booster of their own
        return shared

    def measures(self, measure, digest: str):
        """A search's ``measure`` sharing its values.

        Parameters
        ----------
        measure : callable or None
            ``measure(columns)``: the held-out quality of a model of ``columns`` (None: no search).
        digest : str
            The :meth:`digest` of everything ``measure`` reads besides its columns.

        Returns
        -------
        callable or None
            ``measure`` recalling its values by the columns in their order (its model reads them in that order).
        """
        if measure is None:
            return None
        return lambda columns: self.recall(("measure", digest, tuple(columns)), lambda: measure(columns))


class StageLadder:
    """The stages of a staged acquisition model (the classifier here, the ranker of ``methods.cascade``): the units'
    order, the ladder of nested stages cut from it, their prices and the deepest stage within ``max_cost``.

    A subclass has ``units_``, ``unit_cost_``, ``stages``, ``max_stage_cost``, ``max_cost`` and ``n_jobs``, trains a
    stage's model with the ``train_on(columns)`` it gives :meth:`_fit_stages`, and says what a stage gives each row in
    ``_stage_pass(k, X, masked, carried)`` (what :meth:`stage_passes` collects; ``carried``: what the pass carries
    from stage to stage, made by ``_carried(n)``).
    """

    def _shared(self, memo: StageMemo | None, train_on, measure, params: dict, *rows) -> tuple:
        """``train_on`` and ``measure`` sharing their trainings through ``memo`` (None: as they are) with the fits whose
        digest is the same: the class, LightGBM's ``params``, the rounds, the patience, the class weights and the class
        labels they weigh, the feature names and ``rows`` (every array the trainings read)."""
        if memo is None:
            return train_on, measure
        digest = StageMemo.digest(type(self).__name__, sorted(params.items()), self.n_estimators,
                                  self.early_stopping_rounds, getattr(self, "class_weight", None),
                                  list(getattr(self, "classes_", [])), self._lightgbm_feature_names(), *rows)
        return memo.trainings(train_on, digest), memo.measures(measure, digest)

    def _fit_stages(self, train_on, num_features: int, measure=None, stage_on=None) -> None:
        """``order_`` (the units by the gain importance per unit of cost of a model on every column, ties by index;
        units it never splits on left out; with ``order="search"`` the forward search's units first, see
        :meth:`_searched`), ``stage_units_`` (up to ``max_stage_cost``) and ``stages_``: ``stage_on(columns)`` of each
        stage in turn (default ``train_on``, whose model of every column is then the last stage's where it holds every
        unit)."""
        self.stage_models_ = getattr(self, "stage_models", "separate")  # the regressor has no stage_models
        full = train_on(list(range(num_features)))
        gain = full.feature_importance("gain")
        unit_gain = np.array([gain[list(columns)].sum() for columns in self.units_])
        with np.errstate(divide="ignore"):
            value = np.where(self.unit_cost_ > 0, unit_gain / self.unit_cost_, np.inf)
        useful = np.flatnonzero(unit_gain > 0)
        self.order_ = useful[np.lexsort((useful, -value[useful]))]  # ties: the unit's index
        if getattr(self, "order", "importance") == "search":  # the regressor has no order: importance
            self.order_ = self._searched(self.order_, unit_gain, measure)
        self.stage_units_ = self._ladder()
        if self.max_stage_cost is not None:
            self.stage_units_ = self.stage_units_[self._prices() <= float(self.max_stage_cost) * (1 + 1e-12)]
        if stage_on is not None:
            self.stages_ = [stage_on(self._columns(m)) for m in self.stage_units_[1:]]
            return
        every = len(self.order_) == len(self.units_)
        self.stages_ = [full if every and m == len(self.order_) else train_on(self._columns(m))
                        for m in self.stage_units_[1:]]

    def _searched(self, order: np.ndarray, unit_gain: np.ndarray, measure) -> np.ndarray:
        """``order`` (the useful units by importance per unit of cost) led by a nested subset search
        (``core.subsets.SubsetSearch.nested``: forward by measured gain per unit of cost within each of the ladder's
        levels of price in turn): each stage is then close to the best subset the search finds at its price that
        holds the stage below, not a prefix of one model's importance order; the units the search did not take follow
        in ``order``'s order. ``measure(columns)``: the held-out quality (greater is better) of a model of those
        columns (none: of the prior). At most MAX_UNITS priced units are searched (``core.subsets.searched``)."""
        units = [Unit(str(u), tuple(self.units_[u]), float(self.unit_cost_[u])) for u in order]
        pool = [units[i] for i in searched(self.unit_cost_[order], lambda: unit_gain[order]) if units[i].cost > 0]
        search = SubsetSearch(lambda columns: measure(list(columns)), measure([]))
        taken = [int(u.name) for u in search.nested([u for u in units if u.cost == 0], pool, self._levels(order))]
        return np.array(taken + [int(u) for u in order if int(u) not in set(taken)], dtype=np.int64)

    def _levels(self, order: np.ndarray) -> np.ndarray:
        """The search's levels of price for the units ``order``: doubling from the cheapest priced unit's price to
        the price of them all (none without a priced unit)."""
        prices = self.unit_cost_[order]
        positive = prices[prices > 0]
        if not len(positive):
            return np.empty(0)
        return np.append(positive.min() * 2.0 ** np.arange(int(np.log2(positive.sum() / positive.min())) + 1),
                         positive.sum())

    def _ladder(self) -> np.ndarray:
        """The number of units of each stage: 0, then the shortest prefix of the order whose price reaches each
        level (geometric from the first unit with a price to the whole order's price), the whole order last."""
        prices = np.cumsum(self.unit_cost_[self.order_])
        if not len(prices):
            return np.zeros(1, dtype=np.int64)
        positive = prices[prices > 0]
        if len(positive) and self.stages > 1:
            levels = np.geomspace(positive[0], positive[-1], int(self.stages))
            sizes = np.searchsorted(prices, levels * (1 - 1e-12), side="left") + 1
        else:
            sizes = np.empty(0, dtype=np.int64)
        sizes = np.concatenate([sizes, [len(prices)], [int(np.sum(prices == 0))] if prices[0] == 0 else []])
        return np.concatenate([[0], np.unique(np.clip(sizes, 1, len(prices)))]).astype(np.int64)

    def _continued(self) -> bool:
        """Whether the fitted stages add to the scores of the stages below (``stage_models_``: the kind they were
        fitted and saved as; ``set_params(stage_models=...)`` changes the next fit only)."""
        return getattr(self, "stage_models_", "separate") == "continued"

    def _compile(self, name: str, boosters: list, prior, continued: bool = False) -> StageStack | None:
        """``boosters`` (stage k's at k - 1) compiled with the stages' columns, stage 0 answering ``prior`` (one value:
        a raw score each; two or more: class probabilities), each stage's trees added to the scores of the stage below
        where ``continued``, kept as ``name`` for :meth:`_compiled_outputs`; None where a model's output is not one
        StageStack repeats."""
        columns = np.zeros((len(boosters) + 1, self.n_features_in_), dtype=np.uint8)
        for k in range(1, len(boosters) + 1):
            columns[k, self._columns(int(self.stage_units_[k]))] = 1
        prior = np.atleast_1d(np.asarray(prior, dtype=np.float64))
        stack = compiled_stages(boosters, len(prior), self.n_features_in_, columns, prior, continued)
        # a new dict: a copy of the model (copy.copy) may hold the old one
        self._compiled = {**self.__dict__.get("_compiled", {}), name: (boosters, stack)}
        return stack

    def _compiled_outputs(self, name: str, boosters: list, k: int, masked: np.ndarray,
                          raw: np.ndarray | None = None) -> np.ndarray | None:
        """Stage k's outputs of rows whose unknown values are NaN from ``boosters`` compiled as ``name``: each model's
        ``predict`` to the bit (continued stages: from the rows' scores at the stage below, in ``raw``, which is left
        holding stage k's); None where they were not compiled (or another list of models was)."""
        entry = self.__dict__.get("_compiled", {}).get(name)
        if entry is None or entry[0] is not boosters or entry[1] is None:
            return None
        threads = resolve_n_jobs(self.n_jobs, len(masked))
        return entry[1].proba(np.ascontiguousarray(masked, dtype=np.float64), k, threads, raw)

    def _columns(self, m: int) -> list[int]:
        """The columns of the first ``m`` units of the order."""
        return sorted(f for u in self.order_[:m] for f in self.units_[u])

    def stage_costs(self) -> np.ndarray:
        """Each stage's price per row: the price of its units (stage 0: 0).

        Returns
        -------
        ndarray of shape (n_stages,)
            The prices, rising.
        """
        self._check_fitted()
        return self._prices()

    def _prices(self) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(self.unit_cost_[self.order_])])[self.stage_units_]

    def _by_partition(self, X, stacked, settings=None, **queries):
        """``predict_result`` (``predict_results`` at ``settings``) of the rows of a Dask collection, partition by
        partition where they lie (a ranker's ``group=``: a Dask array of each partition's query sizes, each query
        whole in its partition), put together in memory in the partitions' order by ``stacked``; an empty partition is
        skipped."""
        self._check_fitted()
        self._check_policy()
        each = {"group": query_parts(queries["group"], len(partitions(X)))} if queries else None
        results = [r for r in over_partitions(_partition_result, X, self, settings, each=each) if r is not None]
        if not results:
            raise CEGBError("X: a Dask collection without rows")
        if settings is None:
            return stacked(results)
        return [stacked([r[i] for r in results]) for i in range(len(settings))]

    def stage_passes(self, X, deepest: int | None = None) -> tuple[list, ...]:
        """Every stage's outputs on every row of X (up to stage ``deepest``; None: the last within ``max_cost``) and
        what each stage's models cost each row to evaluate (None: nothing): the classifier's probabilities, the
        ranker's scores, the regressor's predictions and gaps.

        One pass serves every setting read at prediction (``tradeoff``, ``max_cost``, the ranker's ``cut`` and
        ``top_k``, up to ``deepest``): :meth:`replay` reads each setting's result from it, equal to its own
        ``predict_result`` to the bit (a sweep's points share it).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The rows.
        deepest : int, optional
            The last stage to pass (default: the last within ``max_cost``).

        Returns
        -------
        tuple of lists
            What :meth:`replay` takes, per stage.
        """
        X = self._pass_rows(X)
        deepest = self._last_stage() if deepest is None else deepest
        carried = self._carried(len(X))
        per_stage = [self._stage_pass(k, X, self._masked(X, k), carried) for k in range(deepest + 1)]
        return tuple(list(outputs) for outputs in zip(*per_stage))

    def _carried(self, n: int):
        """What a pass of n rows carries from stage to stage (none)."""
        return None

    def _pass_rows(self, X) -> np.ndarray:
        """X checked for a fitted model's pass."""
        self._check_fitted()
        return checked_data(self, "X", X, reset=False)

    def _added(self, model, X: np.ndarray, masked: np.ndarray) -> np.ndarray:
        """What evaluating ``model`` (a stage's) costs each row of X, whose acquired values ``masked`` holds."""
        return EvaluationCost(model, self.costs_, X.shape[1], len(X)).add(masked, np.arange(len(X)))

    def _last_stage(self) -> int:
        """The deepest stage within ``max_cost``."""
        if self.max_cost is None:
            return len(self.stage_units_) - 1
        within = self.stage_costs() <= float(self.max_cost) * (1 + 1e-12)
        return int(np.flatnonzero(within)[-1])

    def _masked(self, X: np.ndarray, k: int) -> np.ndarray:
        """X as stage k sees it: the columns of its units, the others missing."""
        return hidden(X, self._columns(int(self.stage_units_[k])))

    def _results_at(self, X, settings, *extra) -> list:
        """``predict_results``' work: each setting (a dict of ``_policy_params``) checked and set on a copy, one
        ``stage_passes`` over X up to the deepest stage a setting reaches, each copy's result ``replay`` from it (with
        ``extra``, e.g. the ranker's query sizes)."""
        names = self._policy_params
        either = f"{', '.join(names[:-1])} and/or {names[-1]}"
        models = []
        for setting in checked_sequence(settings, "settings", f"dicts of {either}"):
            if not isinstance(setting, Mapping):
                raise CEGBError(f"settings: each setting should be a dict of {either}, got {setting!r:.60}")
            unknown = set(setting) - set(names)
            if unknown:
                raise CEGBError(f"settings: a setting holds {', '.join(names[:-1])} and {names[-1]} only, got "
                                f"{sorted(unknown)}")
            model = copy.copy(self).set_params(**setting)
            model._check_policy()
            models.append(model)
        passes = self.stage_passes(X, max(model._last_stage() for model in models) if models else 0)
        return [model.replay(*passes, *extra) for model in models]

    def _restore_ladder(self, state: dict) -> None:
        """``order_`` and ``stage_units_`` of a saved state, checked against ``units_``."""
        units = self.units_
        order = saved.array(state, "order", (None,), np.int64, low=0)
        if len(np.unique(order)) != len(order) or (order >= len(units)).any():
            raise saved.damaged(state, f"order should hold distinct units below {len(units)}")
        self.order_ = order
        stage_units = saved.array(state, "stage_units", (None,), np.int64, low=0)
        if not len(stage_units) or stage_units[0] != 0 or (np.diff(stage_units) <= 0).any() \
                or stage_units[-1] > len(order):
            raise saved.damaged(state, f"stage_units should rise from 0 to at most the {len(order)} units of order")
        self.stage_units_ = stage_units
        kind = state.get("stage_models", getattr(self, "stage_models", "separate"))  # older files: the parameter's
        if kind not in STAGE_MODELS:
            raise saved.damaged(state, f"stage_models should be one of {', '.join(STAGE_MODELS)}, got {kind!r:.40}")
        self.stage_models_ = kind


def stacked_result(cls, results: list, arrays: tuple[str, ...]):
    """One ``cls`` result (the ranker's, the regressor's) of the rows of several results of one model, in their order
    (a Dask collection's partitions): its per-row ``arrays`` concatenated, its ``cost`` reports stacked."""
    return cls(*(np.concatenate([getattr(r, name) for r in results]) for name in arrays),
               CostReport.stacked([r.cost for r in results]))


def _partition_result(X, model: StageLadder, settings, group=None):
    """``model.predict_result`` (``predict_results`` at ``settings``) of one partition's rows (a ranker's: of the
    queries ``group``); None for an empty partition."""
    if not len(X):
        if group is not None and len(group):
            raise CEGBError(f"group: an empty partition of X should have no query sizes, got {len(group)}")
        return None
    queries = {} if group is None else {"group": np.asarray(group)}
    return model.predict_result(X, **queries) if settings is None else model.predict_results(X, settings, **queries)


class LadderRun:
    """Rows on their way up a staged model's ladder, stage by stage (the interface of the adaptive acquisition's
    ``PolicyRun``, which ``LazyPredictor`` drives): ``requests()`` says which units the rows that go on buy next
    (the others leave), ``deliver`` hands over the values bought, ``evaluate`` moves the rows that received them to
    the next stage and asks its model; ``result()`` once ``requests()`` is empty.

    A subclass says which rows at stage k go on (``_going(k, rows)``), keeps what stage k's model says of the rows
    that reach it (``_entered(k, rows)``), and gives ``output(method)`` and ``result()``.

    Parameters
    ----------
    model : StageLadder
        The fitted model.
    n : int
        Number of rows.
    """

    def __init__(self, model: StageLadder, n: int) -> None:
        self.model = model
        num_features = model.n_features_in_
        self.X = np.full((n, num_features), np.nan)  # the values bought (NaN elsewhere), as the stages see them
        self.stage = np.zeros(n, dtype=np.int64)
        self.state = CostState(n, model.costs_, num_features)
        self.evaluation = EvaluationCost(None, model.costs_, num_features, n)
        self.active = np.arange(n)
        self.last = model._last_stage()
        self.received = np.zeros(n, dtype=bool)

    def _going(self, k: int, rows: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _entered(self, k: int, rows: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def requests(self) -> list[tuple[int, np.ndarray]]:
        """(unit, rows) for every unit of the next stage of the rows that go on; the others leave the run."""
        model, active = self.model, self.active
        k = int(self.stage[active[0]]) if len(active) else self.last  # the rows that go on are all at one stage
        self.active = active[self._going(k, active)] if k < self.last else active[:0]
        if not len(self.active):
            return []
        units = model.order_[model.stage_units_[k]:model.stage_units_[k + 1]]
        return [(int(u), self.active) for u in units]

    def deliver(self, unit: int, rows: np.ndarray, values: np.ndarray, *, pay: bool = True) -> None:
        """Rows ``rows`` (that asked for ``unit``) bought it: its columns' ``values`` (one row each), paid unless
        ``pay`` is False (values the caller already had)."""
        self.X[np.ix_(rows, list(self.model.units_[unit]))] = values
        self.received[rows] = True
        if pay:
            self.model._pay(self.state, unit, rows)

    def drop(self, rows: np.ndarray) -> None:
        """Rows that cannot go on (a failed fetch) leave the run, at the stage they reached."""
        self.active = self.active[~np.isin(self.active, rows)]

    def evaluate(self) -> None:
        """The rows that received their stage's units move to it: its model on what they hold."""
        rows = np.intersect1d(self.active, np.flatnonzero(self.received))
        if len(rows):
            k = int(self.stage[rows[0]]) + 1
            self.stage[rows] = k
            self._entered(k, rows)
            self.evaluation.booster = self.model.stages_[k - 1]
            self.evaluation.add(self.X[rows], rows)
        self.active = rows
        self.received[:] = False

    def _known(self) -> np.ndarray:
        """The features each row holds: its stage's units' columns."""
        steps = self.model.stage_units_[self.stage]
        known = np.zeros((len(self.stage), self.model.n_features_in_), dtype=bool)
        for m in np.unique(steps):
            known[np.ix_(steps == m, self.model._columns(int(m)))] = True
        return known
