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
block of trees per exit for the rows still in).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from lightgbm_cegb.base import COSTS, own_cost
from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.costs import resolve_costs
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.validation import CheckedElsewhere, NoneOr, Number, OneOf, validated
from lightgbm_cegb.io.models import booster_of, library_of, num_trees_used, to_forest

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
            self._other = _OtherLibrary(model)  # XGBoost, CatBoost, HistGradientBoosting; refuses anything else
            self.forest, self.kind = self._other.forest, self._other.kind
            if task is not None and KINDS[task] != self.kind:
                raise CEGBError(f"task: this {self._other.library} model's objective {self._other.objective!r} is "
                                f"not a {task} one, got task={task!r}")
        else:
            self.forest = to_forest(model)
            self.kind = _kind(self.forest.objective, task)
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
        queries = self._queries(group, len(result.rank))
        return (np.bincount(queries)[queries] - 1 - result.rank).astype(np.float64)

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
                               n_jobs: int | None = None) -> CostReport:
        """How :func:`lightgbm_cegb.prediction_cost` prices the exits: :meth:`prediction_cost` (classification; a
        ranker needs the queries: call its own), under ``feature_costs`` (see :func:`lightgbm_cegb.base.own_cost`).
        """
        return own_cost(self, self.prediction_cost, X, costs, self.forest.num_features, self.forest.feature_names,
                        num_iteration=num_iteration, per_iteration=per_iteration, trees=False)

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
        tpi = self.forest.trees_per_iteration
        n = len(X)
        iterations = self.iterations
        if n == 0:
            raise CEGBError("X should hold at least one row")
        queries = self._queries(group, n)
        active = np.arange(n)
        done_at = np.full(n, iterations)
        prediction = None
        state = CostState(n, self.costs_, self.forest.num_features)
        exits = list(range(self.every, iterations, self.every)) + [iterations]
        scores = _RunningScores(self.forest, X, iterations) if self._adds_scores(n) else None
        start = 0
        for stop in exits:
            state.add(self.forest, X[active], trees=(start * tpi, stop * tpi), rows=active)
            if not len(active):
                break
            if scores is not None:
                partial = scores.through(active, start, stop)
            else:
                partial = self._other.predict(X[active], stop) if self.booster is None else \
                    self.booster.predict(X[active], num_iteration=stop, raw_score=self.kind == "rank")
            start = stop
            if prediction is None:
                prediction = np.zeros((n,) + partial.shape[1:])
            prediction[active] = partial
            if stop == iterations:
                break
            leaving = self._leaving(partial, active, queries, stop, iterations)
            done_at[active[leaving]] = stop
            active = active[~leaving]
        used = self.forest.used_features(iterations * tpi)
        cost = CostReport(acquisition=state.acquisition, evaluation=state.evaluation,
                          coupled=self.costs_.model_cost(used, self.forest.num_features),
                          usage=state.feature_paid.mean(axis=0),
                          feature_names=self.forest.feature_names)
        rank = self._ranks(prediction, done_at, queries) if self.kind == "rank" else None
        return EarlyExitResult(prediction=prediction, iterations=done_at, cost=cost, rank=rank)

    def _adds_scores(self, n: int) -> bool:
        """Whether a ranker's scores at the exits are its trees' outputs added up as the rows go (one routing of the
        rows, :class:`_RunningScores`) rather than LightGBM's ``predict`` from the first tree at each exit: a
        LightGBM model of plain trees whose leaves for ``n`` rows fit in RUNNING_LEAVES."""
        return self.booster is not None and self.kind == "rank" and self.forest.linear is None and \
            not self.forest.average_output and self.forest.trees_per_iteration == 1 and \
            n * self.iterations <= RUNNING_LEAVES

    def _queries(self, group, n: int) -> np.ndarray | None:
        if self.kind != "rank":
            return None
        if group is None:
            raise CEGBError("group: a ranker's early exits compare documents of a query; pass the query sizes")
        sizes = np.asarray(group)
        if sizes.ndim != 1 or (sizes < 0).any() or sizes.sum() != n:
            raise CEGBError(f"group should hold query sizes summing to the {n} rows of X, got {sizes.sum()} "
                            f"over {sizes.size} queries")
        return np.repeat(np.arange(len(sizes)), sizes)

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


#: the most leaf indices (rows x trees) a ranker's exits hold to add its scores up as the rows go (about 200 MB)
RUNNING_LEAVES = 50_000_000


class _RunningScores:
    """A ranker's raw scores through its first trees, each row's trees' outputs added in tree order from 0.0 as
    LightGBM's GBDT::PredictRaw adds them (the same bits as ``predict(raw_score=True, num_iteration=...)``), carried
    from exit to exit: every row is routed once (``Forest.apply``), instead of from the first tree at each exit."""

    def __init__(self, forest, X: np.ndarray, iterations: int) -> None:
        self.forest, self.leaves = forest, forest.apply(X, iterations)
        self.score = np.zeros(len(X))

    def through(self, rows: np.ndarray, start: int, stop: int) -> np.ndarray:
        """The scores of ``rows`` through tree ``stop`` - 1, from theirs through tree ``start`` - 1."""
        values = self.forest.leaf_value[self.forest.leaf_offset[start:stop] + self.leaves[rows, start:stop]]
        score = self.score[rows]
        for column in values.T:
            score = score + column
        self.score[rows] = score
        return score


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


#: XGBoost's and CatBoost's objectives (loss functions) that Early Exit reads as classification or ranking
XGBOOST_CLASSIFICATION = ("binary:logistic", "multi:softprob", "multi:softmax")
CATBOOST_CLASSIFICATION = ("Logloss", "CrossEntropy", "MultiClass")
CATBOOST_RANKING = ("YetiRank", "YetiRankPairwise", "PairLogit", "PairLogitPairwise", "QueryRMSE", "QuerySoftMax",
                    "LambdaMart", "StochasticRank")


class _OtherLibrary:
    """Early Exit's view of a model of XGBoost, CatBoost or scikit-learn's HistGradientBoostingClassifier:
    its forest, ``kind``, the iterations its ``predict`` uses and ``predict(X, stop)``, the library's own
    prediction with its first ``stop`` iterations (classification: class probabilities, two classes the
    second's; ranking: the raw score)."""

    def __init__(self, model) -> None:
        library = library_of(model)
        self.model, self.library, self.forest = model, library, to_forest(model) if library else None
        if library == "xgboost":
            booster = model.get_booster() if hasattr(model, "get_booster") else model
            self.objective = json.loads(booster.save_config())["learner"]["objective"]["name"]
            self.kind = "classify" if self.objective in XGBOOST_CLASSIFICATION else \
                "rank" if self.objective.startswith("rank:") else None
            rounds = booster.num_boosted_rounds()
            if self.forest.parallel_trees > 1:
                raise CEGBError("model: an XGBoost model of several trees per output and round (num_parallel_tree "
                                "> 1) has no exit between its trees' groups; not supported")
            best = getattr(model, "best_iteration", None) if hasattr(model, "get_booster") else None
            self.iterations, self.booster = rounds if best is None else best + 1, booster
        elif library == "catboost":
            self.objective = str(model.get_all_params()["loss_function"]).split(":")[0]
            self.kind = "classify" if self.objective in CATBOOST_CLASSIFICATION else \
                "rank" if self.objective in CATBOOST_RANKING else None
            self.iterations = model.tree_count_
        elif library == "hist":
            from sklearn.base import is_classifier
            self.objective = type(model).__name__
            self.kind = "classify" if is_classifier(model) else None
            self.iterations = model.n_iter_
        else:
            raise CEGBError(f"model should be a LightGBM, XGBoost or CatBoost model or a HistGradientBoosting"
                            f"Classifier, got {type(model).__name__}")
        if self.kind is None:
            raise CEGBError(f"model: {library}'s objective {self.objective!r} is neither a ranking nor a "
                            "classification one")

    def predict(self, X: np.ndarray, stop: int) -> np.ndarray:
        if self.library == "xgboost":
            import xgboost as xgb

            margin = self.kind == "rank" or self.objective == "multi:softmax"
            out = self.booster.predict(xgb.DMatrix(X, feature_names=self.booster.feature_names),
                                       iteration_range=(0, stop), output_margin=margin)
            if self.objective == "multi:softmax":  # its predict gives labels: the probabilities of softprob
                out = np.exp(out - out.max(axis=1, keepdims=True))
                out /= out.sum(axis=1, keepdims=True)
            return out
        if self.library == "catboost":
            if self.kind == "rank":
                return self.model.predict(X, prediction_type="RawFormulaVal", ntree_end=stop)
            proba = self.model.predict(X, prediction_type="Probability", ntree_end=stop)
            return proba[:, 1] if proba.shape[1] == 2 else proba
        for k, proba in enumerate(self.model.staged_predict_proba(X), start=1):
            if k == stop:
                return proba[:, 1] if proba.shape[1] == 2 else proba
        raise CEGBError(f"internal error: the model has fewer than {stop} iterations; please report this")
