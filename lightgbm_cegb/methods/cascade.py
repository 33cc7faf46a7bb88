"""Staged acquisition for ranking: a cascade of rankers on nested feature sets, in which only the documents that can
still reach the top of their query buy the next, costlier stage.

:class:`StagedAcquisitionRanker` orders the units (a feature group of the cost model, whose members are bought
together, or an ungrouped feature) and cuts the order into nested stages as
:class:`~lightgbm_cegb.methods.staged.StagedAcquisitionClassifier` does (gain importance per unit of cost in a
model on every feature; a geometric ladder of prices). Each stage after stage 0 has a LightGBM lambdarank model,
trained on every training document with the units outside the stage hidden as missing values and early stopped on
held-out queries' NDCG@``eval_at``: its own model (``stage_models="separate"``), or trees added to the scores of the
stage below (``"continued"``: a document's score at stage k is the sum of the scores of stages 1 to k's trees, and
it evaluates each stage's trees once, as it would one model's).

Predicting, query by query (the cascade of Wang, Lin and Metzler, SIGIR 2011, on one cost-ordered ladder):

- every document buys stage 1 (stage 0 knows nothing and cannot tell two documents apart);
- after each later stage k, the query's documents that reached k are ranked by stage k's score, and the best
  ``max(top_k, ceil(keep * m))`` of them (m: the query's documents at stage k; ties: the given order) move on and
  buy stage k + 1's units, up to the deepest stage within ``max_cost``, where ``keep = 1 - tradeoff``
  (``cut="share"``); with ``cut="margin"``, the documents whose score at stage k lies within a margin of the query's
  best move on (and its best ``top_k`` whatever their margin): the margin of stage k is the ``1 - tradeoff``
  quantile of how far below their query's best the documents that end in the top ``eval_at`` of the last stage lay
  at stage k, on the held-out queries (scores in units of the stage's spread within a query), so that a cut loses
  about a share ``tradeoff`` of the eventual top documents, few where a stage already tells them apart and many
  more of the others;
- the query's ranking is by the stage a document reached, deepest first, then by its score there: the documents a
  cut left behind keep their order below the ones that went on.

``tradeoff``, ``cut``, ``top_k`` and ``max_cost`` are read when predicting: ``set_params`` on a fitted model gives
another point of the cost-quality curve without fitting again, and :meth:`StagedAcquisitionRanker.predict_results`
answers many settings from one pass of the stages' rankers. A document pays the lazy costs of the units of every
stage it reached (a group's own cost once) and the split and tree costs of every stage's ranker that scored it.

Its length: one estimator, whose fit (the held-out queries, the search's measure, separate or continued stage
models, in memory or from Dask collections), cuts, one-pass replay and saved state all read the same query structure,
and the run that ``predict`` and ``LazyPredictor`` drive; the ladder they share with the classifier and the regressor
is ``methods.ladder``, the Dask rows and the stopping rule every worker applies ``methods.dask_stages``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import partial

import lightgbm as lgb
import numpy as np
import scipy.sparse
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state

from lightgbm_cegb.base import COSTS, RANDOM_STATE, BudgetedEstimator
from lightgbm_cegb.core.cost_state import CostState
from lightgbm_cegb.core.errors import CEGBError, RoundsWarning
from lightgbm_cegb.core.parallel import N_JOBS, resolve_n_jobs
from lightgbm_cegb.core.partitions import computed, is_dask
from lightgbm_cegb.core.ranking_metrics import ndcg_at_k
from lightgbm_cegb.core.report import CostReport
from lightgbm_cegb.core.subsets import SEARCH_HELD_OUT, SEARCH_ROWS, query_subsample
from lightgbm_cegb.core.validation import NoneOr, Number, OneOf, check_params, checked_group
from lightgbm_cegb.io import saved
from lightgbm_cegb.methods import dask_stages
from lightgbm_cegb.methods.acquisition import (
    NUM_LEAVES,
    auto_value,
    checked_data,
    drive,
    early_stopped,
    restore_units,
    run_cost,
)
from lightgbm_cegb.methods.greedy_miser import first_eval
from lightgbm_cegb.methods.ladder import (
    ORDERS,
    STAGE_MODELS,
    LadderRun,
    StageLadder,
    continued_stages,
    hidden,
    stacked_result,
)

#: the most relevance a label may hold: LightGBM's lambdarank gains (``label_gain``) are given up to 30
MAX_LABEL = 30
#: what a cut stops (``cut``): a share of the query's documents, or those beyond the stage's margin of its best
CUTS = ("share", "margin")
#: the tradeoffs t at which a margin cut's margins are learned (``cut_levels_``: the 1 - t quantiles of the held-out
#: documents' gaps; between them a margin is interpolated linearly): every value of the sweep's grid (``selection``'s
#: CASCADE_MARGINS) among them, dense where a cut loses little (129 levels evenly from 0 to 1 made t = 0.005 the
#: interpolation between the 127/128 quantile and the largest gap, a cut that stopped 0.0001 to 0.002 of the top
#: documents)
CUT_TRADEOFFS = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8,
                 0.9, 1.0)
#: the quantile levels of a margin cut fitted before CUT_TRADEOFFS: 129 evenly from 0 to 1, the same margins for every
#: last stage
LEGACY_CUT_LEVELS = 129


def _queries_within(rows: tuple, size: int) -> tuple:
    """(X, y, group) of whole queries of ``rows`` (X, y, group): all of them, or a seeded subsample of about ``size``
    documents (``core.subsets.query_subsample``)."""
    X, y, group = rows
    if len(y) <= size:
        return rows
    index, kept = query_subsample(group, size)
    return X[index], y[index], kept


@dataclass(frozen=True)
class CascadeResult:
    """What the cascade did for each document (:meth:`StagedAcquisitionRanker.predict_result`).

    Parameters
    ----------
    score : ndarray of shape (n_documents,)
        ``predict``'s scores: the number of the query's documents the cascade ranks below the document.
    stage : ndarray of int of shape (n_documents,)
        The stage each document reached.
    stage_score : ndarray of shape (n_documents,)
        Its score at that stage (0 at stage 0).
    known : ndarray of bool of shape (n_documents, n_features)
        The features each document bought.
    cost : CostReport
        Each document's cost: the lazy costs of the units it bought (a group's own once), and the split and tree
        costs of each stage's ranker that scored it.
    """

    score: np.ndarray
    stage: np.ndarray
    stage_score: np.ndarray
    known: np.ndarray
    cost: CostReport

    @classmethod
    def stacked(cls, results: list[CascadeResult]) -> CascadeResult:
        """One result of the documents of several results of one model, in their order (the partitions of a Dask
        collection, each of whole queries).

        Parameters
        ----------
        results : list of CascadeResult
            At least one; of the same model.

        Returns
        -------
        CascadeResult
            The documents of all, in the results' order.
        """
        return stacked_result(cls, results, ("score", "stage", "stage_score", "known"))


class StagedAcquisitionRanker(StageLadder, BudgetedEstimator, BaseEstimator):
    """Ranker that buys nested feature sets stage by stage, per query only for the documents still near its top.

    See the module's doc for the stages and the cuts.

    Parameters
    ----------
    feature_costs : FeatureCosts, lazy costs per column, mapping or pandas Series by name, or None, default=None
        The cost model (None: every feature costs 1). A unit's price is its lazy cost (a group's own lazy cost
        plus its members'); when nothing has a lazy cost, its coupled cost.
    tradeoff : float, default=0.0
        The share of a query's documents at a stage that each cut stops: ``1 - tradeoff`` of them move on to the
        next stage (rounded up; 0: every document goes to the last stage, 1: only ``top_k``). Read when predicting.
    cut : {"share", "margin"}, default="share"
        What a cut stops: a share ``tradeoff`` of the query's documents at the stage, or the documents further below
        the query's best than the stage's margin, which lets about a share ``tradeoff`` of the documents that end in
        the last stage's top ``eval_at`` through (learned on the held-out queries; 0: no cut). Read when predicting.
    top_k : int, default=0
        The documents of a query that move on at every cut (if it has that many), whatever ``tradeoff``: a ranking
        judged on its top k (NDCG@k) wants at least k. Read when predicting.
    max_cost : float or None, default=None
        A hard cap on each document's acquisition cost: no document goes beyond the deepest stage within it. Read
        when predicting.
    stages : int, default=30
        Levels of the stage ladder (stages that would hold the same units are one).
    max_stage_cost : float or None, default=None
        Stages priced above it are not trained (None: every stage): the model then ranks as the one with every
        stage does with ``max_cost`` at most this, to the bit.
    order : {"importance", "search"}, default="importance"
        How the units are ordered: by the gain importance per unit of cost of a ranker of every feature, or led by
        a nested subset search (as :class:`~lightgbm_cegb.methods.staged.StagedAcquisitionClassifier`'s, each set
        of units measured by the NDCG@``eval_at`` of a stage's ranker of them on a quarter of the training queries,
        trained on the others; each part whole queries of at most about 5,000 documents).
    stage_models : {"separate", "continued"}, default="separate"
        Each stage's ranker its own model, or trees boosted from the scores of the stage below (a document's score at
        stage k adds stage k's trees to its score at stage k - 1; what it pays to evaluate the stages it reached is
        then what one model of all their trees costs).
    eval_at : int, default=10
        The k of the held-out NDCG@k that stops each stage's training.
    n_estimators : int, default=5000
        Most boosting rounds of each stage's ranker (early stopped; a RoundsWarning names a stage that still
        improved at the cap).
    learning_rate : float, default=0.1
        LightGBM's learning rate.
    num_leaves : int or "auto", default="auto"
        LightGBM's leaves per tree ("auto": 15 below 20,000 training documents, 31 below 200,000, 63 from there on).
    min_child_samples : int, default=10
        LightGBM's ``min_data_in_leaf``.
    validation_fraction : float, default=0.2
        Share of the training queries held out for early stopping when ``fit`` gets no ``eval_set`` (0: no early
        stopping).
    early_stopping_rounds : int, default=30
        Rounds without improvement of the held-out NDCG before a ranker stops.
    random_state : int, RandomState or None, default=None
        Seed of the held-out queries and of LightGBM.
    n_jobs : int or None, default=None
        Threads of LightGBM (None: the CPUs this process may use).

    Attributes
    ----------
    stages_ : list of lightgbm.Booster
        The ranker of each stage after stage 0 (its units' columns read, the others missing; with
        ``stage_models="continued"`` the trees stage k adds to stage k - 1's scores).
    stage_units_ : ndarray of int
        The number of units (of ``order_``) each stage holds, stage 0's (0) first.
    order_ : ndarray of int
        The units in the order the stages buy them (indices into ``units_``).
    stage_models_ : str
        The kind of stage models fitted (``stage_models`` at ``fit``; what prediction reads).
    cut_scale_ : ndarray of shape (n_stages,)
        Each stage's spread of scores within a query on the held-out queries (``cut="margin"``'s unit).
    cut_levels_ : ndarray of shape (n_levels,)
        The quantile levels of the margins, rising from 0 to 1 (``1 - CUT_TRADEOFFS``).
    cut_gaps_ : ndarray of shape (n_stages, n_stages, n_levels)
        ``cut_gaps_[last, k, i]``: the ``cut_levels_[i]`` quantile of how far below their query's best, in
        ``cut_scale_``, the held-out documents that stage ``last`` ranks in their query's top ``eval_at`` lay at
        stage k < last: ``cut="margin"``'s margins for a run whose last stage (within ``max_cost``) is ``last``.
    units_ : list of tuple of int
        The columns of each unit: the groups of the costs (in their order), then the ungrouped features.
    unit_cost_ : ndarray of shape (n_units,)
        Each unit's price.
    costs_ : FeatureCosts
        The costs aligned to the columns.
    n_features_in_ : int
        Number of features seen by ``fit``.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of the features seen by ``fit`` (a DataFrame's columns).

    Raises
    ------
    CEGBError
        When a parameter is out of range, a label is not a relevance grade (an integer from 0 to 30), the query
        sizes do not fit the rows, or the costs do not fit X.
    """

    _tradeoff = "tradeoff"
    _fitted_attribute = "stages_"
    _auto_leaves = (15, 31, 63)

    _policy_params = ("tradeoff", "cut", "top_k", "max_cost")
    _constraints = {
        "feature_costs": COSTS, "tradeoff": Number(0.0, 1.0), "cut": OneOf(CUTS), "top_k": Number(0, integer=True),
        "max_cost": NoneOr(Number(0.0)), "stages": Number(1, 1000, integer=True),
        "max_stage_cost": NoneOr(Number(0.0)), "order": OneOf(ORDERS),
        "stage_models": OneOf(STAGE_MODELS), "eval_at": Number(1, integer=True),
        "n_estimators": Number(1, integer=True), "learning_rate": Number(0.0, low_open=True),
        "num_leaves": NUM_LEAVES, "min_child_samples": Number(1, integer=True),
        "validation_fraction": Number(0.0, 0.9), "early_stopping_rounds": Number(1, integer=True),
        "random_state": RANDOM_STATE, "n_jobs": N_JOBS,
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def __init__(self, *, feature_costs=None, tradeoff: float = 0.0, cut: str = "share", top_k: int = 0,
                 max_cost: float | None = None,
                 stages: int = 30, max_stage_cost: float | None = None, order: str = "importance",
                 stage_models: str = "separate", eval_at: int = 10,
                 n_estimators: int = 5000, learning_rate: float = 0.1, num_leaves="auto", min_child_samples: int = 10,
                 validation_fraction: float = 0.2, early_stopping_rounds: int = 30, random_state=None,
                 n_jobs: int | None = None) -> None:
        self.feature_costs = feature_costs
        self.tradeoff = tradeoff
        self.cut = cut
        self.top_k = top_k
        self.max_cost = max_cost
        self.stages = stages
        self.max_stage_cost = max_stage_cost
        self.order = order
        self.stage_models = stage_models
        self.eval_at = eval_at
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.validation_fraction = validation_fraction
        self.early_stopping_rounds = early_stopping_rounds
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------------------------------------ fit

    def fit(self, X, y, *, group=None, eval_set=None, eval_group=None, memo=None):
        """Order the units, cut the order into stages and train each stage's ranker.

        Parameters
        ----------
        X : array-like of shape (n_documents, n_features), or a Dask array or DataFrame
            The training documents, query by query (NaN: a missing value; a sparse matrix is made dense). Documents
            in a Dask collection are trained on where they lie, with ``lightgbm.dask`` on the active ``distributed``
            client's workers (see ``methods.dask_stages``), each query whole in one partition.
        y : array-like of shape (n_documents,), or a Dask array or Series (with X a Dask collection)
            Their relevance grades (integers from 0, irrelevant, to 30).
        group : array-like of int, or a Dask array (with X a Dask collection)
            The sizes of X's consecutive queries (required); of a Dask X, the sizes of each partition's queries in a
            chunk of their own, as ``lightgbm.dask`` takes them.
        eval_set : list of (X_valid, y_valid) or (X_valid, y_valid), optional
            Queries for early stopping (the first set; in memory, a Dask collection is computed); without it,
            ``validation_fraction`` of the training queries are held out (from a Dask collection, partition by
            partition, about ``dask_stages.HELD_OUT_ROWS`` documents where that is fewer).
        eval_group : list of array-like, optional
            The query sizes of each set of ``eval_set`` (required with it).
        memo : StageMemo, optional
            Trainings shared with other fits on the same documents and settings (another ``order`` or
            ``stage_models``): a stage of the same columns is trained once, the same model to the bit
            (``methods.ladder.StageMemo``; documents in memory only).

        Returns
        -------
        StagedAcquisitionRanker
            The fitted estimator.
        """
        self._check_params()
        if group is None:
            raise CEGBError("group: a ranker needs the sizes of the training rows' queries (group=[...])")
        if is_dask(X):
            self._calibrate_cuts(self._fit_dask(X, y, group, eval_set, eval_group))
            return self
        X = checked_data(self, "X", _dense(X))
        y = _grades(y, len(X), "y")
        group = checked_group(group, len(X))
        n, num_features = X.shape
        self.costs_ = self._resolved_costs(num_features)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(0, 2**31 - 1))
        train = (X, y, group)
        valid = self._eval_queries(eval_set, eval_group)
        if valid is None:
            held = int(round(self.validation_fraction * len(group)))
            is_held = np.zeros(len(group), dtype=bool)
            is_held[rng.permutation(len(group))[:held]] = True
            rows_held = np.repeat(is_held, group)
            valid = (X[rows_held], y[rows_held], group[is_held]) if held else None
            train = (X[~rows_held], y[~rows_held], group[~is_held])
        params = self._units_and_params(num_features, len(train[0]), n, seed)

        def train_on(columns: list[int], init: list) -> lgb.Booster:
            train_set = lgb.Dataset(hidden(train[0], columns), train[1], group=train[2], init_score=init[0],
                                    feature_name=self._lightgbm_feature_names())
            valid_set = None if valid is None else lgb.Dataset(
                hidden(valid[0], columns), valid[1], group=valid[2], init_score=init[1], reference=train_set)
            return early_stopped(self, params, train_set, valid_set,
                                 f"the stage of {len(columns)} of the {num_features} columns",
                                 f"NDCG@{int(self.eval_at)}")

        train_on, measure = self._shared(memo, train_on, self._measure(params, train), params, *train,
                                         *(() if valid is None else valid))
        continued = continued_stages(train_on, (train[0], None if valid is None else valid[0]), params["num_threads"])
        self._fit_stages(partial(train_on, init=[None, None]), num_features, measure,
                         continued if self.stage_models == "continued" else None)
        self._calibrate_cuts(train if valid is None else valid)
        return self

    def _calibrate_cuts(self, queries: tuple) -> None:
        """Compile the stages, and learn ``cut="margin"``'s margins from ``queries`` (X, grades, sizes; the held-out
        ones, else the training ones): ``cut_scale_``, each stage's spread of scores within a query (the standard
        deviation of the scores less their query's mean), and ``cut_gaps_[last, k]``, the quantiles at ``1 -
        CUT_TRADEOFFS`` of how far below their query's best score, in that unit, the documents that stage ``last``
        ranks in their query's top ``eval_at`` lay at stage k (zeros where no cut reads them: k = 0 or k >= last). A
        run capped at a stage reads the margins of its own last stage: a model fitted up to ``max_stage_cost`` learns
        the margins the full model holds for that stage, to the bit."""
        self._compile("stages", self.stages_, [0.0])
        X, _, group = queries
        if not len(X):
            raise CEGBError("cut: the margins are learned on held-out queries, and none were given or drawn")
        scores, _ = self.stage_passes(X, len(self.stages_))
        query = _queries(group, len(X))  # the sizes checked: each query holds a document
        group = np.asarray(group)
        ends = np.r_[0, np.cumsum(group)]
        stages = len(scores)
        self.cut_scale_ = np.ones(stages)
        self.cut_levels_ = 1.0 - np.array(CUT_TRADEOFFS[::-1])
        self.cut_gaps_ = np.zeros((stages, stages, len(CUT_TRADEOFFS)))
        gaps = np.zeros((stages, len(X)))  # row k: each document's gap at stage k
        for k in range(1, stages - 1):
            means = np.add.reduceat(scores[k], ends[:-1]) / group
            spread = float(np.std(scores[k] - means[query]))
            self.cut_scale_[k] = spread if spread > 0 else 1.0
            gaps[k] = (np.maximum.reduceat(scores[k], ends[:-1])[query] - scores[k]) / self.cut_scale_[k]
        for last in range(2, stages):
            order = np.lexsort((np.arange(len(X)), -scores[last], query))
            place = np.empty(len(X), dtype=np.int64)
            place[order] = np.arange(len(X)) - np.repeat(ends[:-1], group)
            top = place < int(self.eval_at)
            self.cut_gaps_[last, 1:last] = np.quantile(gaps[1:last][:, top], self.cut_levels_, axis=1).T

    def _eval_queries(self, eval_set, eval_group) -> tuple | None:
        """(X, grades, query sizes) of ``eval_set``'s first set, checked (a Dask collection computed); None without
        one."""
        if eval_set is None:
            return None
        (X_valid, y_valid), _, valid_group = first_eval(eval_set, None, eval_group)
        if valid_group is None:
            raise CEGBError("eval_group: a ranker needs the query sizes of eval_set's rows (eval_group=[...])")
        X_valid, y_valid, valid_group = computed((X_valid, y_valid, valid_group))
        X_valid = checked_data(self, "eval_set: X_valid", _dense(X_valid), reset=False)
        return (X_valid, _grades(y_valid, len(X_valid), "eval_set: y_valid"),
                checked_group(valid_group, len(X_valid), "eval_group"))

    def _units_and_params(self, num_features: int, documents: int, n: int, seed: int) -> dict:
        """``units_`` and ``unit_cost_`` of the costs over ``num_features`` columns, and the stages' LightGBM parameters
        for ``documents`` training documents (of ``n`` in all, which set the threads)."""
        units = self.costs_.units(num_features)
        self.units_, self.unit_cost_ = [columns for _, columns, _ in units], np.array([p for _, _, p in units])
        leaves = auto_value(documents, self._auto_leaves) if self.num_leaves == "auto" else int(self.num_leaves)
        return {"objective": "lambdarank", "metric": "ndcg", "eval_at": [int(self.eval_at)],
                "learning_rate": self.learning_rate, "num_leaves": leaves, "min_data_in_leaf": self.min_child_samples,
                "seed": seed, "deterministic": True, "verbose": -1, "num_threads": resolve_n_jobs(self.n_jobs, n)}

    def _fit_dask(self, X, y, group, eval_set, eval_group) -> tuple:
        """``fit`` of documents in Dask collections (``methods.dask_stages``): every stage's ranker trained with
        ``lightgbm.dask`` on the active client's workers, on the documents where they lie (each query whole in its
        partition), early stopped on queries in memory by the NDCG@``eval_at`` every worker computes alike. Returns
        the queries in memory that learn the cuts' margins (the held-out ones, else a sample of the training ones)."""
        client = dask_stages.dask_client()
        rows = dask_stages.DaskQueries.of(self, X, y, group, _grades)
        num_features = rows.X.shape[1]
        self.costs_ = self._resolved_costs(num_features)
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(0, 2**31 - 1))
        train, valid = rows, self._eval_queries(eval_set, eval_group)
        if valid is None and self.validation_fraction > 0:
            train, valid = rows.held_out(self.validation_fraction, int(rng.randint(0, 2**31 - 1)))
            valid = valid if len(valid[2]) else None
        if train.n == 0:
            raise CEGBError(f"X: every training query was held out to stop the stages (validation_fraction="
                            f"{self.validation_fraction}): give more queries, or eval_set")
        train = train.spread(client)
        params = self._units_and_params(num_features, train.n, rows.n, seed)
        names = self._lightgbm_feature_names()
        loss = None if valid is None else dask_stages.NDCGLoss(valid[2], self.eval_at)
        on_workers = {name: value for name, value in params.items() if name not in ("metric", "eval_at")}

        def train_on(columns: list[int], init: list) -> lgb.Booster:
            stop = None if valid is None else (valid[0], valid[1])
            return dask_stages.trained(self, on_workers, train, None, columns, init, stop,
                                       f"the stage of {len(columns)} of the {num_features} columns", names, loss,
                                       f"NDCG@{int(self.eval_at)}")

        measure = None
        if self.order == "search":
            measure = self._measure(params, train.sample(dask_stages.SEARCH_SAMPLE, int(rng.randint(0, 2**31 - 1))))
        continued = continued_stages(train_on, (train.X, None if valid is None else valid[0]), params["num_threads"])
        self._fit_stages(partial(train_on, init=[None, None]), num_features, measure,
                         continued if self.stage_models == "continued" else None)
        return valid if valid is not None else train.sample(dask_stages.SEARCH_SAMPLE, int(rng.randint(0, 2**31 - 1)))

    def _measure(self, params: dict, train: tuple):
        """``order="search"``'s measure of a set of columns: the NDCG@``eval_at`` of a stage's ranker of them on
        SEARCH_HELD_OUT of the training documents (whole queries), trained on the other queries (each part whole
        queries of at most about SEARCH_ROWS documents); None for the importance order. The held-out queries that
        stop the stages are not read (a sweep chooses among its models on them)."""
        if self.order != "search":
            return None
        X, y, group = train
        starts = np.concatenate([[0], np.cumsum(group)[:-1]])
        held_rows, _ = query_subsample(group, max(1, round(SEARCH_HELD_OUT * len(y))))
        held = np.isin(starts, held_rows)
        if held.all():
            raise CEGBError(f"order='search' measures feature sets on a quarter of the training queries and trains on "
                            f"the others: the {len(group)} training queries are too few")
        rows = np.repeat(held, group)
        X_valid, y_valid, valid_group = _queries_within((X[rows], y[rows], group[held]), SEARCH_ROWS)
        X, y, group = _queries_within((X[~rows], y[~rows], group[~held]), SEARCH_ROWS)
        k = int(self.eval_at)

        def measure(columns: list[int]) -> float:
            if not columns:
                return ndcg_at_k(y_valid, np.zeros(len(y_valid)), valid_group, k)
            train_set = lgb.Dataset(X[:, columns], y, group=group)  # the columns alone, as the classifier's search
            valid_set = lgb.Dataset(X_valid[:, columns], y_valid, group=valid_group, reference=train_set)
            with warnings.catch_warnings():  # a capped search model is no stage: the stages warn for themselves
                warnings.simplefilter("ignore", RoundsWarning)
                booster = early_stopped(self, params, train_set, valid_set, "", "", cut=False)
            return ndcg_at_k(y_valid, booster.predict(X_valid[:, columns], num_iteration=booster.best_iteration),
                             valid_group, k)

        return measure

    # ------------------------------------------------------------------------------------------ the cuts

    def _check_policy(self) -> None:
        """Check the parameters read when predicting (``set_params`` changes them on a fitted model)."""
        check_params(self, self._constraints, self._policy_params)
        if self.cut == "margin" and getattr(self, "cut_gaps_", None) is None:
            raise CEGBError("cut: this model was saved before margin cuts and holds no margins (cut_gaps_); "
                            "cut='share', or fit it again")

    def _moving(self, k: int, rows: np.ndarray, query: np.ndarray, score: np.ndarray, last: int) -> np.ndarray:
        """Which of ``rows`` (the documents at stage ``k``, in order; ``query[rows]`` their queries,
        ``score[rows]`` their stage-k scores) move on to stage k + 1 of a run whose last stage is ``last``: all after
        stage 0, else per query its best ``top_k`` among them (ties: the given order) and, with ``cut="share"``, its
        best ``ceil((1 - tradeoff) * m)`` of its m documents there, with ``cut="margin"`` those whose score is within
        stage k's margin of its best (``cut_gaps_[last, k]`` at ``tradeoff``, in units of ``cut_scale_``; every one
        where tradeoff is 0)."""
        if k == 0 or not len(rows) or (self.cut == "margin" and self.tradeoff == 0):
            return np.ones(len(rows), dtype=bool)
        q = query[rows]
        order = np.lexsort((rows, -score[rows], q))  # by query, score falling, position
        starts = np.flatnonzero(np.r_[True, q[order][1:] != q[order][:-1]])
        sizes = np.diff(np.r_[starts, len(order)])
        place = np.arange(len(order)) - np.repeat(starts, sizes)
        go = np.empty(len(rows), dtype=bool)
        if self.cut == "margin":
            ranked = score[rows][order]
            margin = np.interp(1.0 - float(self.tradeoff), self.cut_levels_, self.cut_gaps_[last, k])
            below = (np.repeat(ranked[starts], sizes) - ranked) / self.cut_scale_[k]
            go[order] = (place < int(self.top_k)) | (below <= margin)
            return go
        share = np.ceil(np.round((1.0 - float(self.tradeoff)) * sizes, 9))  # 0.3 x 10: 3, not 3.0000000000000004
        go[order] = place < np.repeat(np.maximum(share, int(self.top_k)), sizes)
        return go

    def _stage_score(self, k: int, masked: np.ndarray) -> np.ndarray:
        if k == 0:
            return np.zeros(len(masked))
        compiled = self._compiled_outputs("stages", self.stages_, k, masked)
        if compiled is not None:
            return compiled[:, 0]
        return self.stages_[k - 1].predict(masked, num_threads=resolve_n_jobs(self.n_jobs, len(masked)))

    def _pay(self, state: CostState, unit: int, rows: np.ndarray) -> None:
        """Charge ``rows`` of ``state`` for ``unit``'s columns (a group's own cost once per document)."""
        for f in self.units_[unit]:
            state.pay(f, rows)

    def _inputs(self, X, group) -> tuple[np.ndarray, np.ndarray]:
        """X (checked) and each row's query (:func:`_queries`)."""
        self._check_fitted()
        X = checked_data(self, "X", _dense(X), reset=False)
        return X, _queries(group, len(X))

    # ------------------------------------------------------------------------------------- predicting

    def predict_result(self, X, *, group=None) -> CascadeResult:
        """What each document buys, its score and its cost.

        Parameters
        ----------
        X : array-like of shape (n_documents, n_features), or a Dask array or DataFrame
            The documents, query by query, every value known (only those bought are read); a Dask collection's
            partition by partition, where they lie, each query whole in one partition.
        group : array-like of int, a Dask array, or None, default=None
            The sizes of X's consecutive queries (None: X is one query); of a Dask X, each partition's in a chunk of
            their own (required).

        Returns
        -------
        CascadeResult
            The scores, the stages reached, the features bought and the costs.
        """
        if is_dask(X):
            return self._by_partition(X, CascadeResult.stacked, group=group)
        X, query = self._inputs(X, group)
        self._check_policy()
        run = CascadeRun(self, query)
        return drive(self, X, run).result()

    def predict(self, X, *, group=None) -> np.ndarray:
        """The cascade's ranking scores.

        Parameters
        ----------
        X : array-like of shape (n_documents, n_features), or a Dask array or DataFrame
            The documents, query by query (a Dask collection's: as for :meth:`predict_result`).
        group : array-like of int, a Dask array, or None, default=None
            The sizes of X's consecutive queries (None: X is one query); of a Dask X, each partition's in a chunk of
            their own (required).

        Returns
        -------
        ndarray of shape (n_documents,)
            Per document, the number of its query's documents ranked below it (higher: ranked first; equal: a
            tie, which ranking metrics break by the given order, as the cascade does).
        """
        return self.predict_result(X, group=group).score

    def prediction_cost(self, X, *, group=None, n_jobs: int | None = None) -> CostReport:
        """The exact per-document cost of what the cascade buys on X (and of the rankers' evaluations).

        Parameters
        ----------
        X : array-like of shape (n_documents, n_features), or a Dask array or DataFrame
            The documents, query by query (a Dask collection's: as for :meth:`predict_result`).
        group : array-like of int, a Dask array, or None, default=None
            The sizes of X's consecutive queries (None: X is one query; what a document buys depends on its
            query); of a Dask X, each partition's in a chunk of their own (required).
        n_jobs : int or None, default=None
            Unused (the rankers' threads are the estimator's ``n_jobs``); accepted as by every estimator.

        Returns
        -------
        CostReport
            ``predict_result(X, group=group).cost``.
        """
        return self.predict_result(X, group=group).cost

    def predict_results(self, X, settings, *, group=None) -> list[CascadeResult]:
        """:meth:`predict_result` at each of ``settings`` (dicts of ``tradeoff``, ``cut``, ``top_k`` and
        ``max_cost``, the model's own where a dict does not say), from one pass of every stage's ranker over X: each
        result equals ``predict_result`` with those parameters set, to the bit.

        Parameters
        ----------
        X : array-like of shape (n_documents, n_features), or a Dask array or DataFrame
            The documents, query by query, every value known (a Dask collection's: as for :meth:`predict_result`).
        settings : sequence of dict
            Each with ``tradeoff``, ``cut``, ``top_k`` and/or ``max_cost``.
        group : array-like of int, a Dask array, or None, default=None
            The sizes of X's consecutive queries (None: X is one query); of a Dask X, each partition's in a chunk of
            their own (required).

        Returns
        -------
        list of CascadeResult
            One per setting, in their order.
        """
        self._check_fitted()
        if is_dask(X):
            return self._by_partition(X, CascadeResult.stacked, settings, group=group)
        return self._results_at(X, settings, group)

    def _pass_rows(self, X) -> np.ndarray:
        return super()._pass_rows(_dense(X))

    def _stage_pass(self, k: int, X: np.ndarray, masked: np.ndarray, carried=None) -> tuple:
        """Stage ``k``'s ranker's scores of every document and what its evaluation costs each (stage 0: nothing)."""
        return self._stage_score(k, masked), self._added(self.stages_[k - 1], X, masked) if k else None

    def stage_passes(self, X, deepest: int | None = None) -> tuple[list, ...]:
        scores, added = super().stage_passes(X, deepest)
        for k in range(1, len(scores)):
            scores[k] = self._scored(scores[k - 1], scores[k])
        return scores, added

    stage_passes.__doc__ = StageLadder.stage_passes.__doc__

    def _scored(self, below: np.ndarray, own: np.ndarray) -> np.ndarray:
        """Documents' scores at a stage, from their scores at the stage below and the stage's ranker's ``own``: the
        sum where the stages are continued, else its own."""
        return below + own if self._continued() else own

    def replay(self, scores: list, added: list, group) -> CascadeResult:
        """The result of a run whose stages' scores (and evaluation costs) on every document of the queries
        ``group`` are known.

        Parameters
        ----------
        scores, added : list
            :meth:`stage_passes`'s result on the documents, for stages up to this model's last at least.
        group : array-like of int or None
            The query sizes, as ``predict`` takes them (None: one query).

        Returns
        -------
        CascadeResult
            As ``predict_result`` on the documents.
        """
        query = _queries(group, len(scores[0]))
        run = CascadeRun(self, query)
        rows = np.arange(len(query))
        for k in range(1, run.last + 1):
            rows = rows[self._moving(k - 1, rows, query, scores[k - 1], run.last)]
            for unit in self.order_[self.stage_units_[k - 1]:self.stage_units_[k]]:
                self._pay(run.state, int(unit), rows)
            if added[k] is not None:
                run.evaluation.cost[rows] += added[k][rows]
            run.stage[rows] = k
            run.score[rows] = scores[k][rows]
        return run.result()

    def __lightgbm_cegb_policy__(self, n: int, group=None) -> CascadeRun:
        """A run for ``n`` documents of the queries ``group`` (the sizes of their consecutive queries) that are told
        the values of the units they ask for: how ``predict_result`` and ``LazyPredictor`` drive it."""
        self._check_fitted()
        self._check_policy()
        return CascadeRun(self, _queries(group, n))

    def tradeoff_scale(self, X, y, **fit_params) -> float:
        """1.0: ``tradeoff`` is a share already, whose cheapest end (1) lets only ``top_k`` documents per query past
        stage 1. No setting reads nothing (stage 1 scores every document, as a cascade's first stage does).

        Parameters
        ----------
        X : array-like of shape (n_documents, n_features)
            The training documents (not read).
        y : array-like of shape (n_documents,)
            Their grades (not read).
        **fit_params : dict
            As for ``fit`` (not read).

        Returns
        -------
        float
            1.0.
        """
        return 1.0

    #: LazyPredictor's methods of the model, and their arguments: what it passes to ``__lightgbm_cegb_policy__``
    _policy_methods = {"predict": ("group",)}

    # --------------------------------------------------------------------------------------- save / load

    def _saved_state(self) -> tuple[dict, dict]:
        margins = {} if self.cut_gaps_ is None else \
            {"cut_scale": self.cut_scale_, "cut_levels": self.cut_levels_, "cut_gaps": self.cut_gaps_}
        return ({"units": [list(u) for u in self.units_], "unit_cost": self.unit_cost_, "order": self.order_,
                 "stage_units": self.stage_units_, "stage_models": self.stage_models_, **margins},
                {f"stage_{k}": booster.model_to_string() for k, booster in enumerate(self.stages_, start=1)})

    def _restore(self, state: dict, folder, manifest: dict) -> None:
        restore_units(self, state)
        self._restore_ladder(state)
        self.stages_ = [saved.booster(folder, manifest, f"stage_{k}", kinds=("ranking",), outputs=1)
                        for k in range(1, len(self.stage_units_))]
        self._restore_cuts(state, len(self.stage_units_))
        self._compile("stages", self.stages_, [0.0])

    def _restore_cuts(self, state: dict, stages: int) -> None:
        """``cut_scale_``, ``cut_levels_`` and ``cut_gaps_`` of a saved state, checked: none saved before margin cuts
        (share cuts only); saved before CUT_TRADEOFFS (no ``cut_levels``), each stage's quantiles at LEGACY_CUT_LEVELS
        levels, which every last stage reads, as they were (``_legacy_cuts``)."""
        self.cut_scale_ = self.cut_levels_ = self.cut_gaps_ = None
        if not any(key in state for key in ("cut_scale", "cut_levels", "cut_gaps")):
            return
        scale = saved.array(state, "cut_scale", (stages,), low=0.0)
        if "cut_levels" in state:
            levels = saved.array(state, "cut_levels", (None,), low=0.0)
            gaps = saved.array(state, "cut_gaps", (stages, stages, len(levels)), low=0.0)
        else:
            levels, gaps = _legacy_cuts(saved.array(state, "cut_gaps", (stages, LEGACY_CUT_LEVELS), low=0.0))
        if (scale == 0).any() or len(levels) < 2 or levels[0] != 0.0 or levels[-1] != 1.0 or \
                (np.diff(levels) <= 0).any() or (np.diff(gaps, axis=-1) < 0).any():
            raise saved.damaged(state, "cut_scale should hold numbers > 0, cut_levels quantile levels rising from 0 to "
                                       "1 and cut_gaps quantiles rising along them")
        self.cut_scale_, self.cut_levels_, self.cut_gaps_ = scale, levels, gaps

    def __setstate__(self, state: dict) -> None:
        """A pickle's state: one fitted before margin cuts (no ``cut_gaps_``) has none, one fitted before
        CUT_TRADEOFFS (``cut_gaps_`` of a row per stage, no ``cut_levels_``) its margins as every last stage reads
        them (``_legacy_cuts``)."""
        if "stages_" in state and state.get("cut_levels_") is None:
            gaps = state.get("cut_gaps_")
            state = {**state, "cut_scale_": state.get("cut_scale_"), "cut_levels_": None, "cut_gaps_": None}
            if gaps is not None:
                state["cut_levels_"], state["cut_gaps_"] = _legacy_cuts(gaps)
        super().__setstate__(state)


def _legacy_cuts(quantiles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(``cut_levels_``, ``cut_gaps_``) of margins fitted before CUT_TRADEOFFS: each stage's quantiles at
    LEGACY_CUT_LEVELS levels evenly from 0 to 1, the same for every last stage (the rule of then, to the bit)."""
    stages = len(quantiles)
    return np.linspace(0.0, 1.0, LEGACY_CUT_LEVELS), np.broadcast_to(quantiles, (stages, *quantiles.shape)).copy()


def _queries(group, n: int) -> np.ndarray:
    """The query of each of ``n`` documents, from the sizes of their consecutive queries (None: one query)."""
    if group is None:
        return np.zeros(n, dtype=np.int64)
    sizes = checked_group(group, n)
    return np.repeat(np.arange(len(sizes)), sizes)


def _dense(X):
    """X as the rankers read it: a scipy sparse matrix made dense (its absent entries are zeros, as LightGBM reads
    them; a missing value is a NaN)."""
    return X.toarray() if scipy.sparse.issparse(X) else X


def _grades(y, n: int, name: str) -> np.ndarray:
    """Relevance labels: ``n`` integers from 0 to ``MAX_LABEL``, as float64."""
    y = np.asarray(y)
    if y.shape != (n,):
        raise CEGBError(f"{name} should hold {n} relevance grades (one per row of X), got shape {y.shape}")
    try:
        values = y.astype(np.float64)
    except (TypeError, ValueError):
        raise CEGBError(f"{name} should hold relevance grades (integers from 0 to {MAX_LABEL}), got "
                        f"{y.dtype}") from None
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0) | (values > MAX_LABEL) | (values != np.round(values)))
    if len(bad):
        raise CEGBError(f"{name} should hold relevance grades (integers from 0 to {MAX_LABEL}), got "
                        f"{values[bad[0]].item()!r} in row {bad[0]}")
    return values


class CascadeRun(LadderRun):
    """Documents on their way through the cascade (a :class:`~lightgbm_cegb.methods.ladder.LadderRun`): at each
    cut, each query's best documents at their stage go on.

    Parameters
    ----------
    model : StagedAcquisitionRanker
        The fitted model.
    query : ndarray of int
        Each document's query (consecutive).
    """

    def __init__(self, model: StagedAcquisitionRanker, query: np.ndarray) -> None:
        super().__init__(model, len(query))
        self.query = query
        self.score = np.zeros(len(query))

    def _going(self, k: int, rows: np.ndarray) -> np.ndarray:
        return self.model._moving(k, rows, self.query, self.score, self.last)

    def _entered(self, k: int, rows: np.ndarray) -> None:
        self.score[rows] = self.model._scored(self.score[rows], self.model._stage_score(k, self.X[rows]))

    def output(self, method: str) -> np.ndarray:
        """``predict``'s scores: per document, the number of its query's documents ranked below it (by stage
        reached, then score there)."""
        n = len(self.query)
        key = np.lexsort((self.score, self.stage, self.query))  # by query, then rising (stage, score)
        below = np.empty(n, dtype=np.float64)
        if n:
            q, s, t = self.query[key], self.stage[key], self.score[key]
            new_query = np.r_[True, q[1:] != q[:-1]]
            new_key = new_query | np.r_[True, (s[1:] != s[:-1]) | (t[1:] != t[:-1])]
            position = np.arange(n)
            first_of_query = np.maximum.accumulate(np.where(new_query, position, 0))
            first_of_key = np.maximum.accumulate(np.where(new_key, position, 0))
            below[key] = first_of_key - first_of_query
        return below

    def result(self) -> CascadeResult:
        """What the run did."""
        return CascadeResult(score=self.output("predict"), stage=self.stage.copy(), stage_score=self.score.copy(),
                             known=self._known(), cost=run_cost(self.model, self.state, self.evaluation.cost))
