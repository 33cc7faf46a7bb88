"""Early Exit (Cambazoglu et al., "Early exit optimizations for additive machine learned ranking systems",
WSDM 2010), as Greedy Miser's paper (Xu, Weinberger and Chapelle, ICML 2012) runs it: exits placed every ``every``
iterations of a LightGBM ranker or classifier, where inputs that are already decided stop.

- Classification: at an exit, a row whose top class probability (LightGBM's own ``predict`` with the
  iterations so far) passes ``threshold`` stops with that prediction.
- Ranking (proximity threshold): at the exit after i of T iterations, a document of a query stops when its
  score is at least ``threshold * (T - i) / (T - 1)`` below the query's fifth best score among the
  documents still in (queries with five or fewer left lose none). Stopped documents rank below those still
  in, later exits above earlier ones, and by score within an exit.
- Ranking (cascade cut, ``top_k``): at each exit, a query's best ``top_k`` documents still in go on and the
  others stop: a cascade whose stages are blocks of trees. On a CEGB model (``task="ranking"`` reads a
  pointwise objective's scores, as the CEGB paper trains its rankers) a document buys only the features on
  its paths through the trees it reaches (the sweep's ``cegb_cascade``).

``prediction_cost`` counts only the trees each row went through (the package's per-row cost state, one
block of trees per exit for the rows still in). ``LazyPredictor`` serves the exits (``ExitRun``): a row buys only
what its paths read before its exit.

Its length: the exits' loop (``_Exits``) is shared by ``predict_result`` and the lazy run, and both stay with the
class whose private rules (the cut, the ranks, the scores) they read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from lightgbm_cegb.base import COSTS, own_cost
from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.costs import resolve_costs
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.validation import CheckedElsewhere, NoneOr, Number, OneOf, validated
from lightgbm_cegb.io.models import booster_of, num_trees_used, to_forest
from lightgbm_cegb.methods.early_exit_libraries import OtherLibrary
from lightgbm_cegb.serving.outputs import kernel_output
from lightgbm_cegb.serving.runs import fetch_units

RANKING_OBJECTIVES = ("lambdarank", "rank_xendcg")
CLASSIFICATION_OBJECTIVES = ("binary", "multiclass", "multiclassova")
#: the objectives whose raw scores rank with ``task="ranking"``: one score per row, higher for the more relevant
POINTWISE_OBJECTIVES = ("regression", "regression_l1", "huber", "fair", "poisson", "quantile", "mape", "gamma",
                        "tweedie", "binary", "cross_entropy", "cross_entropy_lambda")
TASKS = ("ranking", "classification")


@dataclass(frozen=True)
class EarlyExitResult:
    """What an early-exit prediction computed for each row (:meth:`EarlyExit.predict_result`).

    Parameters
    ----------
    prediction : ndarray of shape (n_samples,) or (n_samples, n_classes)
        Classification: the class probabilities when the row stopped (LightGBM's ``predict``: two classes, the
        probability of the second); ranking: the (raw) score when the row stopped.
    iterations : ndarray of shape (n_samples,)
        Iterations each row went through.
    cost : CostReport
        Per-row cost of the trees each row went through.
    rank : ndarray of shape (n_samples,) or None, default=None
        Ranking: position in its query (0 = first), stopped rows last (later exits above earlier ones, by score
        within an exit); None for classification.
    """

    prediction: np.ndarray  # classification: class probabilities; ranking: the score when the row stopped
    iterations: np.ndarray  # iterations each row went through
    cost: CostReport  # per-row cost of the trees each row went through
    rank: np.ndarray | None = None  # ranking: position in its query (0 = first), stopped rows last


class EarlyExit:
    """Early exits on a fitted LightGBM ranker or classifier (Booster or scikit-learn API model), or an additive
    classifier or ranker of another library (XGBoost, CatBoost, scikit-learn's HistGradientBoostingClassifier).

    Exits are placed every ``every`` iterations (and after the last one, the best iteration if the model has
    one); at each exit, rows that are already decided stop (see the Notes). ``predict`` returns the
    predictions as an array; ``predict_result`` the iterations and costs as well.

    Parameters
    ----------
    model : lightgbm.Booster, LGBMRanker, LGBMClassifier, XGBoost or CatBoost model, HistGradientBoostingClassifier
        The fitted model, with a ranking objective (``lambdarank``, ``rank_xendcg``; XGBoost's ``rank:*``,
        CatBoost's ranking losses) or a classification one (``binary``, ``multiclass``, ``multiclassova``;
        XGBoost's ``binary:logistic``, ``multi:softprob``, ``multi:softmax``; CatBoost's ``Logloss``,
        ``CrossEntropy``, ``MultiClass``). Another library's exits read its own ``predict`` with the iterations so
        far (XGBoost's ``iteration_range``, CatBoost's ``ntree_end``, ``staged_predict_proba``); an XGBoost model
        with ``num_parallel_tree`` > 1 is refused.
    threshold : float or None, default=None
        Classification (required): a probability in (0, 1]; rows whose top class probability reaches it stop.
        Ranking: the proximity margin s >= 0 (0 stops every document below the fifth best at the first exit);
        give it or ``top_k``.
    top_k : int or None, default=None
        Ranking: the cascade cut, the documents of a query still in that go on at each exit (its best ``top_k``
        by the score so far; ties: the given order); the others stop. Give it or ``threshold``.
    every : int, default=10
        Iterations between exits.
    feature_costs : FeatureCosts, lazy costs per column, mapping by feature name or None, default=None
        As ``prediction_cost``'s ``costs`` (None: the model's cegb_* parameters).
    task : {"ranking", "classification"} or None, default=None
        What the model does (None: as its objective says). "ranking" also takes a LightGBM model of a pointwise
        objective (``POINTWISE_OBJECTIVES``: regression, binary, ...), ranking by its raw score.
    num_iteration : int or None, default=None
        The iterations the exits cover, the last exit after them (None: those ``predict`` uses, the best
        iteration if the model has one); at most those.

    Attributes
    ----------
    booster : lightgbm.Booster or None
        The model's booster (None for another library's model).
    forest : Forest
        The model's trees.
    kind : {"rank", "classify"}
        Ranking or classification, from the model's objective (and ``task``).
    threshold : float or None
        The threshold.
    top_k : int or None
        The cascade cut.
    every : int
        Iterations between exits.
    iterations : int
        The iterations the exits cover (``num_iteration``, or those ``predict`` uses).
    costs_ : FeatureCosts
        The costs aligned to the model's features.
    n_features_in_ : int
        The model's number of features.

    Raises
    ------
    CEGBError
        If the model is not a LightGBM model with a ranking or classification objective (or a pointwise one with
        ``task="ranking"``), ``every`` is not an integer >= 1, ``threshold`` is out of range or missing, a ranker is
        given both or neither of ``threshold`` and ``top_k``, a classifier ``top_k``, ``num_iteration`` is more
        than the model's iterations, or the costs cannot be resolved.

    Notes
    -----
    Classification: at an exit, a row whose top class probability (LightGBM's own ``predict`` with the
    iterations so far) reaches ``threshold`` stops with that prediction.

    Ranking (proximity threshold): at the exit after i of T iterations, a document of a query stops when its
    score is at least ``threshold * (T - i) / (T - 1)`` below the query's fifth best score among the documents
    still in (queries with five or fewer left lose none). Ranking (``top_k``): at each exit, a query's best
    ``top_k`` documents still in go on, the others stop. Stopped documents rank below those still in, later
    exits above earlier ones, and by score within an exit.

    ``prediction_cost`` counts only the trees each row went through.
    """

    _constraints = {"model": CheckedElsewhere("the readers of its library's model, with its objective"),
                    "threshold": NoneOr(Number(0.0)), "top_k": NoneOr(Number(1, integer=True)),
                    "every": Number(1, integer=True), "feature_costs": COSTS, "task": NoneOr(OneOf(TASKS)),
                    "num_iteration": NoneOr(Number(1, integer=True))}

    @validated(_constraints)
    def __init__(self, model, *, threshold: float | None = None, top_k: int | None = None, every: int = 10,
                 feature_costs=None, task: str | None = None, num_iteration: int | None = None) -> None:
        self.booster, self.forest = booster_of(model), None
        if self.booster is None:
            self._other = OtherLibrary(model)  # XGBoost, CatBoost, HistGradientBoosting; refuses anything else
            self.forest, self.kind = self._other.forest, self._other.kind
            if task is not None and KINDS[task] != self.kind:
                raise CEGBError(f"task: this {self._other.library} model's objective {self._other.objective!r} is "
                                f"not a {task} one, got task={task!r}")
        else:
            self.forest = to_forest(model)
            self.kind = _kind(self.forest.objective, task)
        self._output = None if self.booster is None else kernel_output(self.booster, self.forest)
        if self.kind == "classify":
            if threshold is None or not 0 < threshold <= 1:  # a ranker's margin: any number >= 0
                raise CEGBError(f"threshold should be a probability in (0, 1] for a classifier, got {threshold!r}")
            if top_k is not None:
                raise CEGBError(f"top_k: a classifier's exits read threshold only, got top_k={top_k!r}")
        elif (threshold is None) == (top_k is None):
            raise CEGBError(f"threshold or top_k: a ranker's exits read one of them (the proximity margin or the "
                            f"cascade cut), got threshold={threshold!r} and top_k={top_k!r}")
        self.threshold = None if threshold is None else float(threshold)
        self.top_k, self.every = None if top_k is None else int(top_k), int(every)
        tpi = self.forest.trees_per_iteration
        iterations = self._other.iterations if self.booster is None else \
            num_trees_used(self.booster, self.forest, None) // tpi  # as predict does: the best iteration, if any
        if num_iteration is not None and num_iteration > iterations:
            raise CEGBError(f"num_iteration should be at most the {iterations} iterations the model predicts with, "
                            f"got {num_iteration}")
        self.iterations = iterations if num_iteration is None else int(num_iteration)
        self.costs_ = resolve_costs(feature_costs, self.forest.num_features, self.forest.feature_names,
                                    self.forest.params, unpriced="refuse")

    @property
    def n_features_in_(self) -> int:
        """The model's number of features."""
        return int(self.forest.num_features)

    @property
    def feature_names_in_(self) -> np.ndarray | None:
        """The model's feature names (the keys ``LazyPredictor`` fetches them by, and a frame's columns it reads by
        name), None for a model trained without names (LightGBM's ``Column_i``: its columns are read by position)."""
        names = self.forest.feature_names
        if names is None or list(names) == [f"Column_{i}" for i in range(len(names))]:
            return None
        return np.asarray(names, dtype=object)

    @property
    def units_(self) -> list[tuple[int, ...]]:
        """What a row buys at once, as ``LazyPredictor`` fetches it: each feature in no group of the costs, then each
        group (its members, in the costs' order)."""
        num_features = self.forest.num_features
        ungrouped = np.flatnonzero(self.costs_.group_arrays(num_features)[0] < 0)
        return [(int(f),) for f in ungrouped] + \
            [tuple(int(f) for f in members) for members in (self.costs_.groups or {}).values() if len(members)]

    def __lightgbm_cegb_policy__(self, n: int, group=None) -> ExitRun:
        """A run for ``n`` rows (a ranker's: the documents of the queries ``group``, the sizes of its consecutive
        queries; None: one query, as a service scores the documents of a request) that are told the values of the
        features they ask for: how ``LazyPredictor`` serves the exits."""
        if self.forest.linear is not None or self.forest.pandas_categorical:
            raise CEGBError("model: an EarlyExit of a model with linear trees or pandas category columns cannot be "
                            "served lazily (a linear leaf reads features no split tests; a category's code would have "
                            "to be mapped); predict it with every value")
        return ExitRun(self, n, self._queries(([n] if n else []) if group is None else group, n))

    def _block_routing(self, start: int, stop: int):
        """The lazy routing of trees ``start`` to ``stop`` - 1 (a block between two exits): a ``LazyPredictor`` of
        their ``Forest.trees`` under the costs, built once per block and model (not pickled)."""
        from lightgbm_cegb.serving.lazy import LazyPredictor

        costs, routings = self.__dict__.get("_routings", (None, {}))
        if costs is not self.costs_:  # built under other costs (costs_ given anew): built again
            routings = {}
            self.__dict__["_routings"] = (self.costs_, routings)
        if (start, stop) not in routings:
            routings[start, stop] = LazyPredictor(self.forest.trees(start, stop), _never_fetched,
                                                  feature_costs=self.costs_)
        return routings[start, stop]

    def __getstate__(self) -> dict:
        return {name: value for name, value in self.__dict__.items() if name != "_routings"}

    @property
    def _policy_methods(self) -> dict:
        """LazyPredictor's methods of the model, and their arguments: what it passes to ``__lightgbm_cegb_policy__``
        (a ranker's query sizes)."""
        return {"predict": ("group",) if self.kind == "rank" else ()}

    def predict(self, X, group=None) -> np.ndarray:
        """Classification: each row's class probabilities when it stopped; ranking: the early-exit ranking.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows.
        group : array-like of shape (n_queries,) or None, default=None
            Ranking (required): the sizes of the consecutive queries of X. Unused for classification.

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
            Classification: ``predict_result(X, group).prediction``, the class probabilities (two classes: the
            probability of the second). Ranking: per document, the number of its query's documents ranked below
            it (``predict_result``'s ``rank`` turned round: stopped documents below those still in); the raw
            scores, which are not comparable across exits, are ``predict_result(X, group).prediction``.
        """
        result = self.predict_result(X, group)
        if self.kind != "rank":
            return result.prediction
        return _below(result.rank, self._queries(group, len(result.rank)))

    def prediction_cost(self, X, group=None) -> CostReport:
        """The per-row cost of the trees each row goes through before it stops.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows.
        group : array-like of shape (n_queries,) or None, default=None
            Ranking (required): the sizes of the consecutive queries of X. Unused for classification.

        Returns
        -------
        CostReport
            ``predict_result(X, group).cost``.
        """
        return self.predict_result(X, group).cost

    def __lightgbm_cegb_cost__(self, X, costs=None, *, num_iteration: int | None = None, per_iteration: bool = False,
                               n_jobs: int | None = None, group=None) -> CostReport:
        """How :func:`lightgbm_cegb.prediction_cost` prices the exits: :meth:`prediction_cost` (a ranker's with its
        queries, ``group``), under ``feature_costs`` (see :func:`lightgbm_cegb.base.own_cost`)."""
        return own_cost(self, lambda rows: self.prediction_cost(rows, group), X, costs, self.forest.num_features,
                        self.forest.feature_names, num_iteration=num_iteration, per_iteration=per_iteration,
                        trees=False)

    def predict_result(self, X, group=None) -> EarlyExitResult:
        """Predictions with early exits, with the iterations each row went through and their cost.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            The rows.
        group : array-like of shape (n_queries,) or None, default=None
            Ranking (required): the sizes of the consecutive queries of X. Unused for classification.

        Returns
        -------
        EarlyExitResult
            Each row's prediction, iterations and cost (and, ranking, its rank in its query).

        Raises
        ------
        CEGBError
            If X holds no row; for a ranker, if ``group`` is missing or its sizes do not sum to the rows of X.
        """
        X = self.forest.dense(X)
        n = len(X)
        if n == 0:
            raise CEGBError("X should hold at least one row")
        exits = _Exits(self, n, self._queries(group, n), X if self._adds_scores(n) else None)
        while not exits.finished:
            exits.step(X[exits.active])
        return exits.result()

    def _scores(self, X: np.ndarray, stop: int) -> np.ndarray:
        """The model's own prediction of the rows ``X`` with its first ``stop`` iterations (a ranker's raw score)."""
        if self.booster is None:
            return self._other.predict(X, stop)
        return self.booster.predict(X, num_iteration=stop, raw_score=self.kind == "rank")

    def _from_raw(self, raw: np.ndarray) -> np.ndarray:
        """``_scores`` of rows whose raw scores (n, trees per iteration) are ``raw``: a ranker's raw score, a
        classifier's probabilities by LightGBM's own arithmetic (``serving.outputs.kernel_output``)."""
        return raw[:, 0] if self.kind == "rank" else self._output(raw, "predict", {})

    def _adds_scores(self, n: int | None = None) -> bool:
        """Whether the scores at the exits are the trees' outputs added up as the rows go (:class:`_RunningScores`)
        rather than LightGBM's ``predict`` from the first tree at each exit: a LightGBM model of plain trees (a
        ranker of one output; a binary or multiclass classifier whose probabilities ``kernel_output`` computes), whose
        leaves for ``n`` rows, routed at once, fit in RUNNING_LEAVES (None: routed block by block)."""
        forest = self.forest
        plain = self.booster is not None and forest.linear is None and not forest.average_output
        fits = self._output is not None and self._output.link != "raw" if self.kind == "classify" else \
            forest.trees_per_iteration == 1
        return plain and fits and (n is None or n * self.iterations * forest.trees_per_iteration <= RUNNING_LEAVES)

    def _queries(self, group, n: int) -> np.ndarray | None:
        if self.kind != "rank":
            return None
        if group is None:
            raise CEGBError("group: a ranker's early exits compare documents of a query; pass the query sizes")
        sizes = np.asarray(group)
        if sizes.ndim != 1 or not (sizes.dtype.kind in "iu" or sizes.size == 0):
            raise CEGBError(f"group should hold query sizes (a 1-d array of integers), got an array of dtype "
                            f"{sizes.dtype} and shape {sizes.shape}")
        if (sizes < 0).any() or sizes.sum() != n:
            raise CEGBError(f"group should hold query sizes (>= 0) summing to the {n} rows of X, got {sizes.sum()} "
                            f"over {sizes.size} queries")
        return np.repeat(np.arange(len(sizes)), sizes.astype(np.int64))

    def _leaving(self, partial, active, queries, done: int, iterations: int) -> np.ndarray:
        """Which of the rows still in stop at the exit after ``done`` iterations."""
        if self.kind == "classify":
            top = np.maximum(partial, 1 - partial) if partial.ndim == 1 else partial.max(axis=1)
            return top >= self.threshold
        query = queries[active]
        order = np.lexsort((-partial, query))  # by query, best first (ties: the given order)
        sorted_query = query[order]
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order)) - np.searchsorted(sorted_query, sorted_query, side="left")
        if self.top_k is not None:
            return position >= self.top_k
        margin = self.threshold * (iterations - done) / max(iterations - 1, 1)
        fifth = np.full(int(queries.max()) + 1, -np.inf)
        fifth[query[position == 4]] = partial[position == 4]
        return (position >= 5) & (partial <= fifth[query] - margin)

    @staticmethod
    def _ranks(score: np.ndarray, done_at: np.ndarray, queries: np.ndarray) -> np.ndarray:
        order = np.lexsort((-score, -done_at, queries))  # by query; stayed longest first; best score first
        rank = np.empty(len(order), dtype=np.int64)
        sorted_queries = queries[order]
        rank[order] = np.arange(len(order)) - np.searchsorted(sorted_queries, sorted_queries, side="left")
        return rank


#: the most leaf indices (rows x trees) the exits hold to add the scores up as the rows go (about 200 MB)
RUNNING_LEAVES = 50_000_000


class _RunningScores:
    """Raw scores (n, trees per iteration) through the first trees, each row's trees' outputs added to their output's
    score in tree order from 0.0 as LightGBM's GBDT::PredictRaw adds them (the same bits as ``predict(raw_score=True,
    num_iteration=...)``), carried from exit to exit: every row is routed once, instead of from the first tree at each
    exit. ``X``: the rows, routed through the trees of ``iterations`` here (``Forest.apply``); None: each block's
    leaves are given (a lazy routing's)."""

    def __init__(self, forest, n: int, X: np.ndarray | None, iterations: int) -> None:
        per = forest.trees_per_iteration
        self.forest, self.leaves = forest, None if X is None else forest.apply(X, iterations * per)
        self.score = np.zeros((n, per))

    def through(self, rows: np.ndarray, start: int, stop: int, leaves: np.ndarray | None = None) -> np.ndarray:
        """The raw scores of ``rows`` through tree ``stop`` - 1, from theirs through tree ``start`` - 1 (whole
        iterations; ``leaves``: those they reach in trees ``start`` to ``stop`` - 1, if not routed here)."""
        leaves = self.leaves[rows, start:stop] if leaves is None else leaves
        values = self.forest.leaf_value[self.forest.leaf_offset[start:stop] + leaves]
        per = self.forest.trees_per_iteration
        score = self.score[rows]
        for j, column in enumerate(values.T):  # tree start + j adds to its output, (start + j) % per
            score[:, j % per] = score[:, j % per] + column
        self.score[rows] = score
        return score


class _Exits:
    """The exits of a batch of ``n`` rows (``queries``: a ranker's query of each row), one block of trees at a time:
    the rows still in (:attr:`active`), the iterations each row went through, its cost state and its score when it
    stopped. ``step`` passes the next exit; ``result`` says what the rows did. ``X`` (the rows' values): the scores
    are added up as the rows go (:class:`_RunningScores`, routed here; ``EarlyExit._adds_scores``); with ``running``
    and no ``X``, added up from each block's leaves, given to ``step``; else the model's ``predict`` at each exit."""

    def __init__(self, model: EarlyExit, n: int, queries: np.ndarray | None, X: np.ndarray | None = None,
                 running: bool = False) -> None:
        self.model, self.n, self.queries = model, n, queries
        self.active = np.arange(n)
        self.done_at = np.full(n, model.iterations)
        self.prediction: np.ndarray | None = None
        self.state = CostState(n, model.costs_, model.forest.num_features)
        self.stops = list(range(model.every, model.iterations, model.every)) + [model.iterations]
        self.start = 0
        self.scores = _RunningScores(model.forest, n, X, model.iterations) if X is not None or running else None

    @property
    def finished(self) -> bool:
        """Whether every exit is passed (or no row is left)."""
        return not self.stops

    def step(self, X: np.ndarray, leaves: np.ndarray | None = None) -> None:
        """Pass the next exit: the rows still in go through its block of trees (``X``: their values, in the order of
        :attr:`active`; only those their paths through the block read are used; ``leaves``: the leaves they reach in
        the block's trees, where the scores are added up from them) and those decided stop."""
        model, tpi = self.model, self.model.forest.trees_per_iteration
        start, stop, active = self.start, self.stops.pop(0), self.active
        self.state.add(model.forest, X, trees=(start * tpi, stop * tpi), rows=active)
        self.start = stop
        if not len(active):
            self.stops = []
            return
        partial = model._scores(X, stop) if self.scores is None else \
            model._from_raw(self.scores.through(active, start * tpi, stop * tpi, leaves))
        if self.prediction is None:
            self.prediction = np.zeros((self.n,) + partial.shape[1:])
        self.prediction[active] = partial
        if not self.stops:
            return
        leaving = model._leaving(partial, active, self.queries, stop, model.iterations)
        self.done_at[active[leaving]] = stop
        self.active = active[~leaving]

    def drop(self, rows: np.ndarray) -> None:
        """Rows that cannot go on (a failed fetch) leave: no later exit reads them, and a ranker ranks them last."""
        self.active = self.active[~np.isin(self.active, rows)]
        self.done_at[rows] = -1

    def cost(self) -> CostReport:
        """The cost of the blocks each row went through so far."""
        model, forest, state = self.model, self.model.forest, self.state
        used = forest.used_features(model.iterations * forest.trees_per_iteration)
        usage = state.feature_paid.mean(axis=0) if self.n else np.zeros(forest.num_features)
        return CostReport(acquisition=state.acquisition, evaluation=state.evaluation,
                          coupled=model.costs_.model_cost(used, forest.num_features), usage=usage,
                          feature_names=forest.feature_names)

    def result(self) -> EarlyExitResult:
        """What the rows did (before the first exit: NaN predictions)."""
        outputs = self.model.forest.trees_per_iteration if self.model.kind == "classify" else 1
        prediction = np.full((self.n,) + ((outputs,) if outputs > 1 else ()), np.nan) if self.prediction is None \
            else self.prediction
        rank = self.model._ranks(prediction, self.done_at, self.queries) if self.model.kind == "rank" else None
        return EarlyExitResult(prediction=prediction, iterations=self.done_at, cost=self.cost(), rank=rank)


def _below(rank: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """A ranker's ``predict``: per document, the number of its query's documents ranked below it."""
    return (np.bincount(queries)[queries] - 1 - rank).astype(np.float64)


class ExitRun:
    """Rows on their way through an EarlyExit's exits, told the values of the features they ask for: how
    ``LazyPredictor`` drives the exits (the interface of the policy runs, ``serving.runs.PolicyModelRun``). In each
    block of trees between two exits the rows still in are routed as far as their values go (``LazyPredictor``'s
    compiled routing of the block's trees, ``Forest.trees``) and ask for the feature, or the whole group, at the node
    each stopped at; once all have left the block's trees, the exit reads their scores (added up from the leaves they
    reached where ``predict_result`` adds them up; else the model's ``predict`` on the values bought) and cuts. A row
    buys only what its paths read before its exit: its prediction and cost are ``predict_result``'s on the whole row.

    Parameters
    ----------
    model : EarlyExit
        The exits.
    n : int
        Number of rows.
    queries : ndarray of int or None
        A ranker's query of each row (consecutive); None for a classifier.
    """

    def __init__(self, model: EarlyExit, n: int, queries: np.ndarray | None) -> None:
        self.model, self.queries = model, queries
        num_features = model.forest.num_features
        self.X = np.full((n, num_features), np.nan)  # the values bought (a NaN of a known value: missing)
        self.known = np.zeros((n, num_features), dtype=bool)
        self.exits = _Exits(model, n, queries, running=model._adds_scores())
        self.units = [np.asarray(columns, dtype=np.intp) for columns in model.units_]
        self.group_of = group_of = model.costs_.group_arrays(num_features)[0]
        self.members = [np.asarray(members, dtype=np.int64) for members in (model.costs_.groups or {}).values()]
        state = self.exits.state
        self.prices = np.concatenate([state.lazy, state.group_lazy])  # of a feature, then of a group
        self.fetch_unit, self.unit_of = fetch_units(self.units, group_of, num_features)  # the lazy routing's and back
        self.routing = None  # the block's RoutingRun over the rows still in when it began
        self.block_rows = np.zeros(0, dtype=np.int64)  # those rows
        self.position = np.full(n, -1, dtype=np.int64)  # each row's place in the block's routing
        self.threads = None  # the blocks' routing threads (None: the block routing's default)

    def begin_serving(self, X: np.ndarray, known: np.ndarray, threads: int) -> None:
        """The values the caller gave (``X`` where ``known``): the routing reads them without asking for them, and
        they cost nothing (as ``LazyPredictor`` prices a routed model's values given up front); ``threads``: the
        serving predictor's, on which each block is routed."""
        self.threads = threads
        self.X[known] = X[known]
        self.known |= known
        self.exits.state.feature_paid[known] = 1

    def requests(self) -> list[tuple[int, np.ndarray]]:
        """(unit, rows) of the features the rows still in need to go on through their block's trees; the exits
        their values reach are passed on the way. Empty when every row has stopped or passed the last exit."""
        exits, model = self.exits, self.model
        while not exits.finished:
            if self.routing is None:
                self._begin_block()
            wanted = self.routing.batch.advance()
            if wanted:
                return [(self.unit_of[unit], self.block_rows[rows]) for unit, rows in wanted]
            active = exits.active  # the values they did not buy are 0.0: no path of theirs reads them
            leaves = self.routing.batch.leaves()[self.position[active]] if exits.scores is not None else None
            if len(active) < len(self.block_rows):  # rows dropped in the block: what they paid in it stays
                left = np.setdiff1d(self.block_rows, active)
                new, acquisition, evaluation = self._block_costs(left)
                exits.state.paid[left] |= new
                exits.state.acquisition[left] += acquisition
                exits.state.evaluation[left] += evaluation
            self.routing = None
            exits.step(model.forest.dense(np.where(self.known[active], self.X[active], 0.0)), leaves)
        return []

    def _begin_block(self) -> None:
        """The lazy routing of the next block's trees for the rows still in. A group member fetched in an earlier
        block that no path of the row has read yet goes in as its group's fetch (held), so that it is paid when a
        path reads it, as a whole row's accounting pays it."""
        from lightgbm_cegb.serving.runs import RoutingRun

        exits, forest = self.exits, self.model.forest
        rows, tpi = exits.active, forest.trees_per_iteration
        self.block_rows = rows
        self.position[rows] = np.arange(len(rows))
        known = self.known[rows]
        unread = known & ~exits.state.feature_paid[rows].astype(bool) & (self.group_of >= 0) if self.members else None
        self.routing = RoutingRun(self.model._block_routing(exits.start * tpi, exits.stops[0] * tpi), self.X[rows],
                                  known if unread is None else known & ~unread, None, threads=self.threads)
        for g in [] if unread is None else np.unique(self.group_of[np.nonzero(unread)[1]]):
            members = self.members[g]
            who = np.flatnonzero(unread[:, members].any(axis=1))
            values = self.X[rows[who][:, None], members]
            self.routing.batch.deliver(forest.num_features + int(g), who, forest.with_missing(values.ravel()))

    def _block_costs(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What ``rows`` paid in the block under way, beyond what they paid before it: (the features and groups newly
        paid, their lazy costs, the block's split and tree costs)."""
        batch, state = self.routing.batch, self.exits.state
        at = self.position[rows]
        new = batch.paid[at].astype(bool) & ~state.paid[rows].astype(bool)
        return new, new @ self.prices, batch.evaluation[at]

    def deliver(self, unit: int, rows: np.ndarray, values: np.ndarray, *, pay: bool = True) -> None:
        """Rows ``rows`` (that asked for ``unit``) have its columns' ``values`` (one row each), paid as their paths read
        them (``pay``: always; the values the caller gave are in the routing from the start, see
        :meth:`begin_serving`)."""
        at = rows[:, None], self.units[unit]
        self.X[at] = values
        self.known[at] = True
        forest = self.model.forest
        self.routing.batch.deliver(self.fetch_unit[unit], self.position[rows], forest.with_missing(values.ravel()))

    def evaluate(self) -> None:
        """The rows stopped at a member of a group they have read it."""
        if self.routing is not None:
            self.routing.batch.read_held()

    def drop(self, rows: np.ndarray) -> None:
        """Rows that cannot go on (a failed fetch) leave the run."""
        self.exits.drop(rows)
        if self.routing is not None:
            self.routing.batch.fail(self.position[rows])

    def output(self, method: str) -> np.ndarray:
        """``predict``: a classifier's probabilities, a ranker's early-exit ranking (a row that left on a failed
        fetch last in its query)."""
        result = self.exits.result()
        return result.prediction if self.model.kind != "rank" else _below(result.rank, self.queries)

    def result(self) -> EarlyExitResult:
        """What the rows did so far: in a block under way (a fetch failed), its rows have paid for what their paths
        read in it besides the blocks they passed."""
        result = self.exits.result()
        if self.routing is None:
            return result
        self.routing.batch.read_held()  # the members of the groups delivered, read where a path waits for them
        rows = self.block_rows
        _, paid, evaluation = self._block_costs(rows)
        cost = result.cost
        acquisition, total = cost.acquisition.copy(), cost.evaluation.copy()
        acquisition[rows] += paid
        total[rows] += evaluation
        return dataclasses.replace(result, cost=dataclasses.replace(cost, acquisition=acquisition, evaluation=total))


def _never_fetched(key, ids):  # pragma: no cover - ExitRun drives the routing's rounds itself
    raise CEGBError("internal error: an early exit's block routing fetched by itself; please report this")


#: EarlyExit's ``task`` as its ``kind``
KINDS = {"ranking": "rank", "classification": "classify"}


def _kind(objective: str | None, task: str | None) -> str:
    """EarlyExit's ``kind`` of a LightGBM model of ``objective`` (its model file's words) for ``task``."""
    objective = (objective or "").split(" ")[0]
    if task == "ranking" and objective in RANKING_OBJECTIVES + POINTWISE_OBJECTIVES:
        return "rank"
    if task is None and objective in RANKING_OBJECTIVES:
        return "rank"
    if task in (None, "classification") and objective in CLASSIFICATION_OBJECTIVES:
        return "classify"
    if task == "ranking":
        raise CEGBError(f"task: a ranker's scores are read from a ranking or pointwise objective "
                        f"{RANKING_OBJECTIVES + POINTWISE_OBJECTIVES}, got objective {objective or None!r}")
    if task == "classification":
        raise CEGBError(f"task: a classifier's exits read a classification objective {CLASSIFICATION_OBJECTIVES}, "
                        f"got objective {objective or None!r}")
    raise CEGBError(f"model: objective {objective or None!r} is neither a ranking one {RANKING_OBJECTIVES} nor a "
                    f"classification one {CLASSIFICATION_OBJECTIVES} (task='ranking' ranks by a pointwise one's "
                    "scores)")
