"""StagedAcquisitionClassifier fitted from Dask collections (issue 59, item 3): the stopping rule every worker applies
against LightGBM's own ``early_stopping`` on random cases, and fits on a ``distributed.LocalCluster``'s two worker
processes (arrays and DataFrames, separate and continued stages, both orders, class weights, eval_set) against the
same rows fitted in memory, their served results against the in-memory ones, and the refusals."""

from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightgbm_cegb import CEGBError, FeatureCosts, LazyPredictor, StagedAcquisitionClassifier, prediction_cost
from lightgbm_cegb.core.errors import RoundsWarning
from lightgbm_cegb.methods import dask_stages
from lightgbm_cegb.methods.acquisition import class_weights
from lightgbm_cegb.methods.dask_stages import DaskRows, HeldOutStopping, l2, log_loss

COSTS = FeatureCosts(lazy=[1.0, 2.0, 4.0, 8.0, 1.0, 3.0, 6.0, 12.0], groups={"g": [6, 7]}, group_lazy=[2.0])
NAMES = [f"f{j}" for j in range(8)]


def make_rows(n: int, seed: int, num_class: int = 2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    X[rng.random(X.shape) < 0.05] = np.nan
    signal = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2]) + 0.7 * np.nan_to_num(X[:, 6])
    signal = signal + 0.5 * rng.normal(size=n)
    y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, num_class + 1)[1:-1]))
    return X, y


@pytest.fixture(scope="module")
def rows():
    X, y = make_rows(5000, 0)
    return X[:4000], y[:4000], X[4000:], y[4000:]


def accuracy(model, X, y) -> float:
    return float((model.predict(X) == y).mean())


# ------------------------------------------------------------------------------------ the rule on every worker

@settings(max_examples=16, deadline=None)
@given(seed=st.integers(0, 10_000), num_class=st.sampled_from([0, 2, 3]), weighted=st.booleans(), init=st.booleans(),
       patience=st.integers(1, 12), rounds=st.integers(5, 80))
def test_held_out_stopping_is_lightgbms_early_stopping(seed, num_class, weighted, init, patience, rounds):
    """Trained in memory with HeldOutStopping and with lgb.early_stopping on the same rows as a validation set
    (weights and starting scores as a Dataset holds them): the same last round trained, the same best iteration, the
    same best loss as LightGBM's metric computes it (num_class 0: regression, l2 of targets)."""
    X, y = make_rows(600, seed, max(num_class, 2))
    X_valid, y_valid = make_rows(300, seed + 1, max(num_class, 2))
    rng = np.random.default_rng(seed)
    if not num_class:  # targets: the classes' ranks plus noise
        y, y_valid = y + rng.normal(scale=0.5, size=len(y)), y_valid + rng.normal(scale=0.5, size=len(y_valid))
    weight = rng.uniform(0.2, 3.0, size=len(y_valid)) if weighted else None
    shape = (len(y_valid),) if num_class < 3 else (len(y_valid), num_class)
    start = rng.normal(scale=0.3, size=shape) if init else None
    train_start = rng.normal(scale=0.3, size=(len(y),) if num_class < 3 else (len(y), num_class)) if init else None
    objective = {0: "regression", 2: "binary"}.get(num_class, "multiclass")
    params = {"objective": objective, "num_leaves": 7, "learning_rate": 0.3, "min_data_in_leaf": 5, "verbose": -1,
              "seed": seed, "deterministic": True, **({"num_class": num_class} if num_class == 3 else {})}
    last = {}

    def recorder(name):
        def record(env):
            last[name] = env.iteration
        record.order = 20  # before the stopping callbacks: it sees the round they stop at
        return record

    loss = l2 if num_class == 0 else log_loss
    train = lgb.Dataset(X, y, init_score=train_start)
    ours = lgb.train(params, train, rounds, callbacks=[HeldOutStopping(X_valid, y_valid, weight, start, patience,
                                                                       loss=loss), recorder("ours")])
    valid = lgb.Dataset(X_valid, y_valid, weight=weight, init_score=start, reference=train)
    theirs = lgb.train(params, lgb.Dataset(X, y, init_score=train_start), rounds, valid_sets=[valid],
                       callbacks=[lgb.early_stopping(patience, first_metric_only=True, verbose=False),
                                  recorder("theirs")])
    assert last["ours"] == last["theirs"]
    assert ours.best_iteration == theirs.best_iteration
    metric = {0: "l2", 2: "binary_logloss"}.get(num_class, "multi_logloss")
    np.testing.assert_allclose(ours.best_score["held_out"][loss.__name__], theirs.best_score["valid_0"][metric],
                               rtol=1e-12)


def test_log_loss_floors_the_probability_as_lightgbm():
    raw = np.array([50.0, -50.0, 0.0])
    codes = np.array([0, 1, 1])
    np.testing.assert_allclose(log_loss(raw, codes, None), (2 * -np.log(1e-15) + np.log(2.0)) / 3)
    multi = np.array([[0.0, 0.0, 0.0], [100.0, 0.0, 0.0]])
    np.testing.assert_allclose(log_loss(multi, np.array([2, 1]), np.array([1.0, 3.0])),
                               (np.log(3.0) + 3 * -np.log(1e-15)) / 4)


# -------------------------------------------------------------------------------------------- on the cluster

def test_fit_from_a_dask_array_serves_as_the_rows_in_memory(rows, client):
    """A Dask array of uneven chunks: the stages stop before their cap and are cut at their best round (each kept
    tree lowers the held-out loss at the last one), the test accuracy within 0.015 of the in-memory fit's, and the
    fitted model's predictions, costs and lazy results of Dask rows equal its own of the rows in memory."""
    X, y, X_test, y_test = rows
    dX, dy = da.from_array(X, chunks=((1500, 1, 999, 1500), 8)), da.from_array(y, chunks=((1500, 1, 999, 1500),))
    settings_ = {"feature_costs": COSTS, "stages": 4, "tradeoff": 0.1, "random_state": 0}
    fitted = StagedAcquisitionClassifier(**settings_).fit(dX, dy, eval_set=(X_test[:500], y_test[:500]))
    memory = StagedAcquisitionClassifier(**settings_).fit(X, y, eval_set=(X_test[:500], y_test[:500]))
    assert abs(accuracy(fitted, X_test[500:], y_test[500:]) - accuracy(memory, X_test[500:], y_test[500:])) < 0.015
    assert len(fitted.stages_) == len(fitted.stage_units_) - 1 >= 2
    for k, stage in enumerate(fitted.stages_, start=1):
        assert 1 <= stage.num_trees() < fitted.n_estimators
        masked = np.full_like(X_test[:500], np.nan)
        columns = fitted._columns(int(fitted.stage_units_[k]))
        masked[:, columns] = X_test[:500, columns]
        losses = [log_loss(stage.predict(masked, raw_score=True, num_iteration=i), y_test[:500], None)
                  for i in range(1, stage.num_trees() + 1)]
        assert np.argmin(losses) == len(losses) - 1
    dX_test = da.from_array(X_test, chunks=(333, 8))
    np.testing.assert_array_equal(fitted.predict_proba(dX_test), fitted.predict_proba(X_test))
    np.testing.assert_array_equal(fitted.predict(dX_test), fitted.predict(X_test))
    np.testing.assert_array_equal(fitted.prediction_cost(dX_test).per_instance,
                                  fitted.prediction_cost(X_test).per_instance)
    np.testing.assert_array_equal(prediction_cost(fitted, dX_test).per_instance,
                                  fitted.predict_result(X_test).cost.per_instance)
    lazy = LazyPredictor(fitted, lambda key, ids: X_test[ids][:, [6, 7]] if key == "g" else X_test[ids, key],
                         feature_keys="index")
    np.testing.assert_array_equal(lazy.predict(da.from_array(np.full_like(X_test, np.nan), chunks=(333, 8)),
                                               ids=np.arange(len(X_test))), fitted.predict(X_test))


def test_class_weights_from_counts_are_those_from_the_rows():
    rng = np.random.default_rng(5)
    classes = np.array(["a", "b", "c"])
    for codes in (rng.integers(0, 3, size=50), np.repeat([0, 1, 2], [1, 7, 40])):
        counts = np.bincount(codes, minlength=3)
        for class_weight in ("balanced", {"a": 2.5, "c": 0.5}, None):
            expected = class_weights(class_weight, classes, codes)
            got = class_weights(class_weight, classes, None, counts=counts)
            assert (got is None) == (expected is None)
            if got is not None:
                np.testing.assert_array_equal(got, expected)
    with pytest.raises(CEGBError, match="class 'b' has none"):
        class_weights("balanced", classes, None, counts=np.array([3, 0, 2]))


def test_fit_from_a_dask_dataframe_with_names_weights_and_string_labels(client, monkeypatch):
    """A Dask DataFrame and Series of string labels, costs by column name, class_weight="balanced", the held-out rows
    drawn from the partitions: the names and classes as an in-memory fit sets them, the prior balanced, the stages
    trained with the weights (an imbalanced class still predicted), and accuracy near the in-memory fit's."""
    X, codes = make_rows(6000, 3, num_class=3)
    codes[(codes == 2) & (np.arange(len(codes)) % 4 != 0)] = 1  # class "c" rare
    labels = np.array(["a", "b", "c"])[codes]
    frame = pd.DataFrame(X, columns=NAMES)
    costs = {name: cost for name, cost in zip(NAMES, [1.0, 2.0, 4.0, 8.0, 1.0, 3.0, 6.0, 12.0])}
    settings_ = {"feature_costs": costs, "stages": 3, "class_weight": "balanced", "random_state": 1}
    seen = []

    def recorded(estimator, params, train, weights, *args):
        seen.append((train.labels.compute(), weights))
        return original(estimator, params, train, weights, *args)

    original = dask_stages.trained
    monkeypatch.setattr(dask_stages, "trained", recorded)
    fitted = StagedAcquisitionClassifier(**settings_).fit(
        dd.from_pandas(frame[:5000], npartitions=3), dd.from_pandas(pd.Series(labels[:5000]), npartitions=3))
    memory = StagedAcquisitionClassifier(**settings_).fit(frame[:5000], labels[:5000])
    assert list(fitted.feature_names_in_) == NAMES
    assert fitted.classes_.dtype == memory.classes_.dtype and list(fitted.classes_) == ["a", "b", "c"]
    np.testing.assert_allclose(fitted.prior_, np.full(3, 1 / 3))
    trained_codes, weights = seen[0]
    assert 3800 < len(trained_codes) < 4200  # the held-out fifth is not trained on
    np.testing.assert_array_equal(weights, class_weights("balanced", fitted.classes_, trained_codes))
    assert all(w is weights for _, w in seen)
    assert fitted.stages_[-1].feature_name() == memory.stages_[-1].feature_name() == NAMES
    predicted = fitted.predict(frame[5000:])
    assert (predicted == "c").sum() > 0.5 * (labels[5000:] == "c").sum()
    assert abs(float((predicted == labels[5000:]).mean()) - float((memory.predict(frame[5000:]) == labels[5000:])
                                                                   .mean())) < 0.03


@pytest.mark.parametrize("stage_models, order", [("continued", "importance"), ("separate", "search")])
def test_continued_stages_and_the_search_order_from_dask(rows, client, stage_models, order):
    """Continued stages train each stage from the lazily summed raw scores of the stages below on the workers;
    order="search" measures its subsets on a sample in memory: both near the in-memory fit."""
    X, y, X_test, y_test = rows
    settings_ = {"feature_costs": COSTS, "stages": 4, "stage_models": stage_models, "order": order,
                 "random_state": 2}
    fitted = StagedAcquisitionClassifier(**settings_).fit(da.from_array(X, chunks=(1000, 8)),
                                                          da.from_array(y, chunks=1000))
    memory = StagedAcquisitionClassifier(**settings_).fit(X, y)
    assert fitted.stage_models_ == stage_models
    assert abs(accuracy(fitted, X_test, y_test) - accuracy(memory, X_test, y_test)) < 0.02
    dX_test = da.from_array(X_test, chunks=(400, 8))
    np.testing.assert_array_equal(fitted.predict_proba(dX_test), fitted.predict_proba(X_test))


def test_empty_partitions_of_a_filter(rows, client):
    """A Dask DataFrame filtered so that its first partition (and another) holds no row: fit reads its rows past
    them, and predict_proba and prediction_cost answer the rows that are there, as in memory."""
    X, y, X_test, _ = rows
    frame = dd.from_pandas(pd.DataFrame(X, columns=NAMES).assign(label=y, row=np.arange(len(y))), npartitions=4)
    kept = frame[((frame.row >= 1000) & (frame.row < 2000)) | (frame.row >= 3000)]
    fitted = StagedAcquisitionClassifier(stages=2, random_state=0).fit(kept[NAMES], kept["label"])
    assert fitted.n_features_in_ == 8
    test = dd.from_pandas(pd.DataFrame(X_test, columns=NAMES).assign(row=np.arange(len(X_test))), npartitions=4)
    part = test[test.row >= 500][NAMES]  # the first two partitions of 250 rows left empty
    np.testing.assert_array_equal(fitted.predict_proba(part), fitted.predict_proba(pd.DataFrame(X_test[500:],
                                                                                                columns=NAMES)))
    np.testing.assert_array_equal(fitted.prediction_cost(part).per_instance,
                                  fitted.prediction_cost(pd.DataFrame(X_test[500:], columns=NAMES)).per_instance)
    assert fitted.predict_proba(test[test.row < 0][NAMES]).shape == (0, 2)
    with pytest.raises(CEGBError, match="without rows has no prediction cost"):
        fitted.prediction_cost(test[test.row < 0][NAMES])


def test_spread_rows_are_in_even_partitions(client):
    X = np.arange(14.0).reshape(7, 2)
    spread = DaskRows(da.from_array(X, chunks=(5, 2)), da.from_array(np.arange(7), chunks=5), 7).spread(client)
    assert spread.X.chunks[0] == spread.labels.chunks[0] == (4, 3)
    np.testing.assert_array_equal(spread.X.compute(), X)
    three = DaskRows(da.from_array(X, chunks=(3, 2)), da.from_array(np.arange(7), chunks=3), 7).spread(client)
    assert three.X.chunks[0] == (3, 2, 2)


def test_held_out_rows_are_drawn_per_partition_and_capped(rows, client, monkeypatch):
    X, y, _, _ = rows
    estimator = StagedAcquisitionClassifier()
    dask_rows = DaskRows.of(estimator, da.from_array(X, chunks=(1000, 8)), da.from_array(y, chunks=1000))
    train, X_valid, valid_codes = dask_rows.held_out(0.2, 7)
    again = dask_rows.held_out(0.2, 7)[1]
    np.testing.assert_array_equal(X_valid, again)
    assert 650 < len(X_valid) < 950 and train.n == 4000 - len(X_valid)
    assert len(train.X.compute()) == train.n
    stacked = np.concatenate([train.X.compute(), X_valid])
    assert sorted(map(tuple, np.nan_to_num(stacked))) == sorted(map(tuple, np.nan_to_num(X)))
    monkeypatch.setattr(dask_stages, "HELD_OUT_ROWS", 100)
    assert 50 < len(dask_rows.held_out(0.2, 7)[1]) < 150


def test_dask_eval_set_is_computed(rows, client, monkeypatch):
    """eval_set of Dask collections: every stage stopped on its rows as the same rows in memory stop it; a stage
    still improving at its cap warns as in memory."""
    X, y, X_test, y_test = rows
    stops = []

    def recorded(estimator, params, train, weights, columns, init, stop, what, names):
        stops.append(stop)
        return original(estimator, params, train, weights, columns, init, stop, what, names)

    original = dask_stages.trained
    monkeypatch.setattr(dask_stages, "trained", recorded)
    with pytest.warns(RoundsWarning, match="the stage of .* columns reached n_estimators=5") as caught:
        StagedAcquisitionClassifier(feature_costs=COSTS, stages=2, n_estimators=5, random_state=0).fit(
            da.from_array(X, chunks=2000), da.from_array(y, chunks=2000),
            eval_set=(da.from_array(X_test, chunks=500), dd.from_pandas(pd.Series(y_test), npartitions=2)))
    assert len(stops) >= 2 and any("the stage of 8 of the 8 columns" in str(w.message) for w in caught)
    for X_stop, codes in stops:
        np.testing.assert_array_equal(X_stop, X_test)
        np.testing.assert_array_equal(codes, y_test)


def test_refusals_name_what_is_wrong(rows, client):
    X, y, _, _ = rows
    dX, dy = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    model = StagedAcquisitionClassifier(stages=2)
    cases = [
        ((dX, y), "y: with X a Dask collection, y should be a Dask array or Series"),
        ((da.from_array(X, chunks=(1000, 4)), dy), "chunked along its rows only"),
        ((dX, dy[:-1]), "y should hold 4000 labels"),
        ((dX, da.zeros(4000, chunks=1000)), "at least two classes"),
        ((da.where(da.arange(4000)[:, None] == 17, np.inf, dX), dy), "finite numbers or NaN"),
        ((dX, dy + 0.5), "y: Unknown label type"),
        ((dX[dX[:, 0] > 0], dy[dX[:, 0] > 0]), "chunk sizes are not known"),
    ]
    for (X_, y_), message in cases:
        with pytest.raises(CEGBError, match=message):
            model.fit(X_, y_)


def test_fit_without_a_client_says_to_start_one(rows, monkeypatch):
    X, y, _, _ = rows
    import distributed as dist

    def no_client():
        raise ValueError("No clients found")

    monkeypatch.setattr(dist, "default_client", no_client)
    with pytest.raises(CEGBError, match=r"needs an active distributed Client \(distributed.Client\(...\)\), got none"):
        StagedAcquisitionClassifier().fit(da.from_array(X, chunks=1000), da.from_array(y, chunks=1000))
