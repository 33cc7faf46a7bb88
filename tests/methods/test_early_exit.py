"""Early Exit against a row-by-row Python reference of the exit rules; predictions and costs against
LightGBM's predict and prediction_cost with the iterations each row went through."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pytest
from constraints import check_declared

from lightgbm_cegb import CEGBError, FeatureCosts, prediction_cost
from lightgbm_cegb.methods import early_exit
from lightgbm_cegb.methods.early_exit import EarlyExit

COSTS = FeatureCosts(lazy=[1.0, 2.0, 3.0, 5.0, 8.0, 13.0], tree=0.25)  # a row pays only the trees it went through


def data(seed=0, n=900):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    score = X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + 0.3 * X[:, 5] + rng.normal(0, 0.5, n)
    return X, score


def check_rows(booster, X, result, kind):
    for it in np.unique(result.iterations):
        rows = result.iterations == it
        expected = booster.predict(X[rows], num_iteration=int(it), raw_score=kind == "rank")
        np.testing.assert_array_equal(result.prediction[rows], expected)
        cost = prediction_cost(booster, X[rows], COSTS, num_iteration=int(it))
        np.testing.assert_allclose(result.cost.per_instance[rows], cost.per_instance, rtol=1e-12)


@pytest.mark.parametrize(("classes", "threshold"), [(2, 0.9), (3, 0.8), (2, 1.0)])
def test_classifier_exits(classes, threshold):
    X, score = data(classes)
    y = np.digitize(score, [0.0] if classes == 2 else [-0.5, 0.5])
    params = {"objective": "binary" if classes == 2 else "multiclass", "verbose": -1, "num_leaves": 7,
              **({"num_class": 3} if classes == 3 else {})}
    booster = lgb.train(params, lgb.Dataset(X, y), 40)
    result = EarlyExit(booster, threshold=threshold, every=5, feature_costs=COSTS).predict_result(X)
    check_rows(booster, X, result, "classify")
    for i in range(len(X)):  # the reference: the first exit where the top probability passes the threshold
        stop = 40
        for exit_at in range(5, 40, 5):
            p = booster.predict(X[i:i + 1], num_iteration=exit_at)[0]
            top = max(p, 1 - p) if classes == 2 else p.max()
            if top >= threshold:
                stop = exit_at
                break
        assert result.iterations[i] == stop, i
    if threshold < 1:
        assert (result.iterations < 40).any() and result.cost.mean < prediction_cost(booster, X, COSTS).mean


def reference_rank(booster, X, sizes, threshold, every, top_k=None, total=None):
    total = total or booster.current_iteration()
    starts = np.concatenate([[0], np.cumsum(sizes)])
    done = np.full(len(X), total)
    for q in range(len(sizes)):
        docs = list(range(starts[q], starts[q + 1]))
        for stop in range(every, total, every):
            scores = booster.predict(X[docs], num_iteration=stop, raw_score=True)
            order = sorted(range(len(docs)), key=lambda k: (-scores[k], k))
            if top_k is not None:
                leaving = {docs[k] for k in order[top_k:]}
            elif len(docs) <= 5:
                continue
            else:
                fifth = scores[order[4]]
                margin = threshold * (total - stop) / (total - 1)
                leaving = {docs[k] for k in order[5:] if scores[k] <= fifth - margin}
            for d in leaving:
                done[d] = stop
            docs = [d for d in docs if d not in leaving]
    return done


def ranking_data():
    X, score = data(7, n=600)
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 30, 40)
    sizes[-1] += len(X) - sizes.sum()
    assert sizes[-1] > 0
    return X, np.clip(np.digitize(score, [-0.5, 0.5, 1.5]), 0, 3), sizes


def check_ranks(result, sizes):
    starts = np.concatenate([[0], np.cumsum(sizes)])
    for q in range(len(sizes)):  # ranks: a permutation per query, stayed-longer first, then by score
        s, e = starts[q], starts[q + 1]
        assert sorted(result.rank[s:e]) == list(range(e - s))
        key = sorted(range(s, e), key=lambda i: (-result.iterations[i], -result.prediction[i], i))
        assert [result.rank[i] for i in key] == list(range(e - s))


@pytest.mark.parametrize("threshold", [0.0, 0.5, 3.0])
def test_ranker_exits_match_the_reference(threshold):
    X, y, sizes = ranking_data()
    booster = lgb.train({"objective": "lambdarank", "verbose": -1, "num_leaves": 7, "min_data_in_leaf": 5},
                        lgb.Dataset(X, y, group=sizes), 30)
    result = EarlyExit(booster, threshold=threshold, every=4, feature_costs=COSTS).predict_result(X, group=sizes)
    np.testing.assert_array_equal(result.iterations, reference_rank(booster, X, sizes, threshold, 4))
    check_rows(booster, X, result, "rank")
    check_ranks(result, sizes)
    if threshold == 0.0:
        assert (result.iterations < 30).any()


@pytest.mark.parametrize(("objective", "top_k", "num_iteration"),
                         [("lambdarank", 1, None), ("regression", 3, None), ("binary", 5, 17), ("regression", 40, 30)])
def test_the_cascade_cut_matches_the_reference(objective, top_k, num_iteration, monkeypatch):
    """top_k: at each exit a query's best top_k documents still in go on (a pointwise model ranks with
    task="ranking", as CEGB's paper trains rankers); a CEGB model's documents pay only the paths they take. The
    scores added up as the rows go are LightGBM's predict's to the bit (check_rows), as the path that calls it at
    every exit (more leaves than RUNNING_LEAVES)."""
    X, y, sizes = ranking_data()
    params = {"objective": objective, "verbose": -1, "num_leaves": 7, "min_data_in_leaf": 5,
              **COSTS.to_params(tradeoff=0.01)}
    booster = lgb.train(params, lgb.Dataset(X, y > 0 if objective == "binary" else y, group=sizes), 30)
    result = EarlyExit(booster, top_k=top_k, every=4, feature_costs=COSTS, task="ranking",
                       num_iteration=num_iteration).predict_result(X, group=sizes)
    total = num_iteration or 30
    np.testing.assert_array_equal(result.iterations, reference_rank(booster, X, sizes, None, 4, top_k, total))
    check_rows(booster, X, result, "rank")
    check_ranks(result, sizes)
    if top_k < 30:
        assert (result.iterations < total).any() and result.cost.mean < prediction_cost(
            booster, X, COSTS, num_iteration=total).mean
    else:  # no query holds more than top_k documents: every one goes through every tree
        assert (result.iterations == total).all()
    monkeypatch.setattr(early_exit, "RUNNING_LEAVES", 0)
    again = EarlyExit(booster, top_k=top_k, every=4, feature_costs=COSTS, task="ranking",
                      num_iteration=num_iteration).predict_result(X, group=sizes)
    np.testing.assert_array_equal(again.prediction, result.prediction)
    np.testing.assert_array_equal(again.rank, result.rank)


@pytest.mark.parametrize(("objective", "kwargs", "message"), [
    ("lambdarank", {"threshold": 1.0, "top_k": 3}, r"read one of them .* got threshold=1.0 and top_k=3"),
    ("lambdarank", {}, "got threshold=None and top_k=None"),
    ("binary", {"threshold": 0.9, "top_k": 3}, "top_k: a classifier's exits read threshold only, got top_k=3"),
    ("binary", {"top_k": 3}, r"threshold should be a probability in \(0, 1\] for a classifier, got None"),
    ("multiclass", {"top_k": 3, "task": "ranking"}, "task: a ranker's scores are read from a ranking or pointwise "
                                                    "objective .* got objective 'multiclass'"),
    ("lambdarank", {"threshold": 0.5, "task": "classification"}, "task: a classifier's exits read a classification "
                                                                 "objective .* got objective 'lambdarank'"),
    ("lambdarank", {"top_k": 3, "num_iteration": 11}, "num_iteration should be at most the 10 iterations the model "
                                                      "predicts with, got 11"),
    ("lambdarank", {"top_k": 0}, "top_k should be None or an integer >= 1, got 0"),
])
def test_the_rules_are_refused_by_name(objective, kwargs, message):
    X, y, sizes = ranking_data()
    params = {"objective": objective, "verbose": -1, "num_leaves": 7, **({"num_class": 4} if objective == "multiclass"
                                                                        else {})}
    booster = lgb.train(params, lgb.Dataset(X, y > 0 if objective == "binary" else y, group=sizes), 10)
    with pytest.raises(CEGBError, match=message):
        EarlyExit(booster, feature_costs=COSTS, **kwargs)


@pytest.mark.parametrize(("make", "kwargs", "message"), [
    (lambda X, y: lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, y), 3), {"threshold": 0.5},
     "neither a ranking one"),
    (lambda X, y: "model.txt", {"threshold": 0.5},
     "should be a LightGBM, XGBoost or CatBoost model or a HistGradientBoostingClassifier, got str"),
    (lambda X, y: lgb.train({"objective": "binary", "verbose": -1}, lgb.Dataset(X, y > 0), 3),
     {"threshold": 1.5}, r"threshold should be a probability in \(0, 1\]"),
    (lambda X, y: lgb.train({"objective": "binary", "verbose": -1}, lgb.Dataset(X, y > 0), 3),
     {"threshold": 0.5, "every": 0}, "every should be an integer >= 1, got 0"),
])
def test_bad_input(make, kwargs, message):
    X, score = data()
    with pytest.raises(CEGBError, match=message):
        EarlyExit(make(X, score), feature_costs=COSTS, **kwargs)


def test_the_declared_parameters_refuse_what_they_say():
    """EarlyExit declares every parameter (``_constraints``) and refuses each invalid value at entry, before it reads
    the model; a classifier's threshold is then held to (0, 1] (test_bad_input)."""
    assert check_declared(EarlyExit, {"model": None, "threshold": 0.5}) >= 10


def test_ranking_needs_groups():
    X, score = data(n=200)
    booster = lgb.train({"objective": "lambdarank", "verbose": -1}, lgb.Dataset(X, np.digitize(score, [0]),
                                                                                 group=[100, 100]), 3)
    exit_ = EarlyExit(booster, threshold=1.0, feature_costs=COSTS)
    with pytest.raises(CEGBError, match="pass the query sizes"):
        exit_.predict_result(X)
    with pytest.raises(CEGBError, match="summing to the 200 rows of X, got 150"):
        exit_.predict_result(X, group=[100, 50])


def test_exits_follow_the_best_iteration():
    X, score = data(3)
    y = (score > 0).astype(int)
    booster = lgb.train({"objective": "binary", "verbose": -1, "num_leaves": 7}, lgb.Dataset(X[:600], y[:600]), 60,
                        valid_sets=[lgb.Dataset(X[600:], y[600:])], callbacks=[lgb.early_stopping(5, verbose=False)],
                        keep_training_booster=True)
    assert 0 < booster.best_iteration < 60 and booster.current_iteration() > booster.best_iteration
    result = EarlyExit(booster, threshold=1.0, every=5, feature_costs=COSTS).predict_result(X)
    assert result.iterations.max() == booster.best_iteration
    np.testing.assert_array_equal(result.prediction[result.iterations == booster.best_iteration],
                                  booster.predict(X[result.iterations == booster.best_iteration]))


def test_predict_returns_the_array_and_prediction_cost_the_report():
    """The estimator contract: ``predict`` gives an array; the result object comes from ``predict_result``."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 6))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    booster = lgb.train({"objective": "binary", "verbose": -1}, lgb.Dataset(X, y), 20)
    model = EarlyExit(booster, threshold=0.9, every=5, feature_costs=COSTS)
    result = model.predict_result(X)
    prediction = model.predict(X)
    assert isinstance(prediction, np.ndarray)
    np.testing.assert_array_equal(prediction, result.prediction)
    np.testing.assert_array_equal(model.prediction_cost(X).per_instance, result.cost.per_instance)


def _library_models(classes: int):
    """(model, its own prediction with its first k iterations) of XGBoost, CatBoost and HistGradientBoosting."""
    import catboost as cb
    import xgboost as xgb
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, score = data(classes + 10, n=500)
    X[::7, 1] = np.nan
    y = np.digitize(score, [0.0] if classes == 2 else [-0.5, 0.5])
    boosted = xgb.XGBClassifier(n_estimators=30, max_depth=3, n_jobs=1).fit(X, y)
    symmetric = cb.CatBoostClassifier(iterations=30, depth=3, verbose=0, thread_count=1,
                                      allow_writing_files=False).fit(X, y)
    hist = HistGradientBoostingClassifier(max_iter=30, max_depth=3, early_stopping=False).fit(X, y)

    def second(p):
        return p[:, 1] if p.shape[1] == 2 else p
    own = [(boosted, lambda rows, k: second(boosted.predict_proba(rows, iteration_range=(0, k)))),
           (symmetric, lambda rows, k: second(symmetric.predict_proba(rows, ntree_end=k))),
           (hist, lambda rows, k: second(list(hist.staged_predict_proba(rows))[k - 1]))]
    return X, own


@pytest.mark.parametrize("classes", [2, 3])
def test_exits_of_other_libraries(classes):
    """Issue 45: Early Exit on XGBoost, CatBoost and HistGradientBoosting classifiers (additive models): each row
    stops at the first exit where the library's own probabilities with the iterations so far pass the threshold
    (a row-by-row reference), with those probabilities and the cost of the trees it went through."""
    X, own = _library_models(classes)
    for model, predict in own:
        result = EarlyExit(model, threshold=0.8, every=5, feature_costs=COSTS).predict_result(X)
        for i in range(len(X)):
            stop = 30
            for exit_at in range(5, 30, 5):
                p = predict(X[i:i + 1], exit_at)[0]
                if (max(p, 1 - p) if classes == 2 else p.max()) >= 0.8:
                    stop = exit_at
                    break
            assert result.iterations[i] == stop, (type(model).__name__, i)
        for k in np.unique(result.iterations):
            rows = result.iterations == k
            np.testing.assert_allclose(result.prediction[rows], predict(X[rows], int(k)), rtol=1e-6, atol=1e-7)
            forest_rows = lc_cost_of_first(model, X[rows], int(k) * (1 if classes == 2 else 3))
            np.testing.assert_allclose(result.cost.per_instance[rows], forest_rows, rtol=1e-12)
        assert (result.iterations < 30).any(), type(model).__name__


def lc_cost_of_first(model, X, trees: int) -> np.ndarray:
    """The package's per-row cost of the model's first ``trees`` trees (a Forest cut to them)."""
    from dataclasses import replace

    from lightgbm_cegb import to_forest
    forest = to_forest(model)
    cut = replace(forest, node_offset=forest.node_offset[:trees + 1], leaf_offset=forest.leaf_offset[:trees + 1],
                  cat_offset=forest.cat_offset[:trees + 1], feature=forest.feature[:forest.node_offset[trees]],
                  threshold=forest.threshold[:forest.node_offset[trees]],
                  decision=forest.decision[:forest.node_offset[trees]], left=forest.left[:forest.node_offset[trees]],
                  right=forest.right[:forest.node_offset[trees]],
                  leaf_value=forest.leaf_value[:forest.leaf_offset[trees]], internal_value=None, internal_weight=None,
                  internal_count=None, split_gain=None, leaf_weight=None, leaf_count=None)
    return prediction_cost(cut, X, COSTS).per_instance


def test_other_libraries_refused_by_name():
    import xgboost as xgb
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, score = data(1, n=200)
    with pytest.raises(CEGBError, match="objective 'reg:squarederror' is neither"):
        EarlyExit(xgb.XGBRegressor(n_estimators=3).fit(X, score), threshold=0.9)
    with pytest.raises(CEGBError, match="neither a ranking nor a classification"):
        EarlyExit(HistGradientBoostingRegressor(max_iter=3).fit(X, score), threshold=0.9)
    forest = xgb.XGBClassifier(n_estimators=3, num_parallel_tree=2).fit(X, score > 0)
    with pytest.raises(CEGBError, match="num_parallel_tree"):
        EarlyExit(forest, threshold=0.9)
