"""XGBoost, CatBoost and scikit-learn's HistGradientBoosting models in the Forest, checked against each library's
own answers on random models (binary, multiclass, regression; depth >= 6; missing values; test values at every
threshold's float32 and float64 rounding boundaries): the leaf each row reaches in each tree (the library's own
leaf ids, mapped by an independent walk of its model), the raw scores, the per-row cost of the features on
the library's own paths, and LazyPredictor's predictions against the library's predict on the full rows."""

from __future__ import annotations

import json
import subprocess
import sys

import catboost as cb
import numpy as np
import pytest
import xgboost as xgb
from conftest import ROOT
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

from lightgbm_cegb import CEGBError, FeatureCosts, LazyPredictor, prediction_cost, to_forest
from lightgbm_cegb.serving import DONE

MODELS = 30  # random models per library


def _ascending(X) -> np.ndarray:
    """Lazy costs 1, 2, ... by column: each column's cost tells it apart."""
    return np.arange(1.0, X.shape[1] + 1)


def _data(rng: np.random.Generator, task: str, n: int = 300):
    num_features = int(rng.integers(4, 10))
    X = rng.normal(size=(n, num_features)) * rng.choice([1.0, 1e-3, 100.0], num_features)
    X[:, 0] = np.round(X[:, 0], 1)  # repeated values: thresholds between them
    X[rng.random(X.shape) < rng.uniform(0.0, 0.3)] = np.nan
    signal = np.nan_to_num(X[:, :3] / (np.nanstd(X[:, :3], axis=0) + 1e-12)) @ rng.normal(size=3)
    if task == "regression":
        y = signal + rng.normal(size=n)
    elif task == "binary":
        y = (signal + rng.normal(size=n) * 0.5 > 0).astype(int)
    else:
        y = np.digitize(signal + rng.normal(size=n) * 0.5, np.quantile(signal, [0.33, 0.66]))
    return X, y


def _at_boundaries(X: np.ndarray, feature: np.ndarray, threshold: np.ndarray, rng: np.random.Generator):
    """X's rows with, in about a third of the cells, a value at a threshold of the cell's feature: the threshold
    as float64, the float32 at it and the float32 values on each side, the float64 values on each side."""
    X = X.copy()
    for f in np.unique(feature):
        t = threshold[feature == f]
        with np.errstate(over="ignore"):  # thresholds beyond float32's range: infinite there
            t32 = t.astype(np.float32)
            up, down = np.nextafter(t32, np.float32(np.inf)), np.nextafter(t32, np.float32(-np.inf))
            candidates = np.concatenate([t, t32, up, down, np.nextafter(t, np.inf), np.nextafter(t, -np.inf)])
        candidates = candidates[np.isfinite(candidates)]
        rows = rng.random(len(X)) < 0.35
        X[rows, f] = rng.choice(candidates, rows.sum())
    return X


def _check_paths_and_costs(model, X: np.ndarray, paths: list[list[list]], raw: np.ndarray, *, rtol: float):
    """The forest's raw score against the library's, and prediction_cost against the features on the library's
    paths (``paths[i][t]``: the feature of each split node row i's path in tree t passes)."""
    forest = to_forest(model)
    leaves = forest.apply(X)
    ours = forest.raw_score(X, leaves)
    if rtol == 0:
        np.testing.assert_array_equal(ours, raw)
    else:  # the library adds in float32
        np.testing.assert_allclose(ours, raw, rtol=rtol, atol=rtol * np.abs(forest.leaf_value).max())
    rng = np.random.default_rng(len(X))
    _costs_on_paths(model, X, paths, rng.integers(0, 9, X.shape[1]).astype(float))
    return forest, leaves


def _costs_on_paths(model, X, paths, lazy: np.ndarray, *, num_iteration=None) -> None:
    """prediction_cost (lazy costs ``lazy``, split cost 0.25) against the features on the library's paths
    (``paths[i][t]``: the feature of each split node row i's path in tree t passes)."""
    costs = FeatureCosts(lazy=lazy, split=0.25)
    report = prediction_cost(model, X, costs, num_iteration=num_iteration)
    used = np.zeros(X.shape, dtype=bool)
    for i, row in enumerate(paths):
        for path in row:
            used[i, list(path)] = True
    np.testing.assert_array_equal(report.acquisition, used @ costs.lazy)
    np.testing.assert_allclose(report.evaluation, 0.25 * np.array([sum(len(p) for p in row) for row in paths]),
                               rtol=1e-12)


# ------------------------------------------------------------------------------------------------ XGBoost


def _xgb_model(seed: int):
    rng = np.random.default_rng(seed)
    task = ("binary", "multiclass", "regression")[seed % 3]
    X, y = _data(rng, task)
    params = {"max_depth": int(rng.integers(6, 9)), "eta": float(rng.uniform(0.1, 0.5)), "seed": seed,
              "subsample": float(rng.uniform(0.6, 1.0)), "min_child_weight": 0.1, "nthread": 1,
              "objective": {"binary": "binary:logistic", "multiclass": "multi:softprob",
                            "regression": "reg:squarederror"}[task]}
    if task == "multiclass":
        params["num_class"] = 3
    if seed % 5 == 1:
        params.update(booster="dart", rate_drop=0.3, skip_drop=0.2)
    if seed % 7 == 2:
        params["num_parallel_tree"] = 3
    booster = xgb.train(params, xgb.DMatrix(X, y), int(rng.integers(3, 20)))
    return booster, _at_boundaries(X, *_xgb_splits(booster), rng)


def _xgb_splits(booster) -> tuple[np.ndarray, np.ndarray]:
    trees = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]
    trees = (trees["gbtree"] if trees["name"] == "dart" else trees)["model"]["trees"]
    split = [(f, c) for tree in trees for f, c, left in zip(tree["split_indices"], tree["split_conditions"],
                                                           tree["left_children"]) if left != -1]
    feature, condition = zip(*split) if split else ((), ())
    return np.asarray(feature, dtype=np.int64), np.asarray(condition, dtype=np.float64)


def _xgb_reference(booster, X):
    """Per forest tree, XGBoost's node id of each of its leaves in the forest's order (depth first, left child
    first, trees iteration-major by output), and each row's path features from XGBoost's own leaf ids."""
    model = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]
    model = (model["gbtree"] if model["name"] == "dart" else model)["model"]
    trees, info = model["trees"], model["tree_info"]
    outputs = max(info) + 1
    order = [t for i in range(len(info) // outputs) for t in [[u for u in range(len(info)) if info[u] == k][i]
                                                             for k in range(outputs)]]

    def leaves_of(tree, node=0):
        if tree["left_children"][node] == -1:
            return [node]
        return leaves_of(tree, tree["left_children"][node]) + leaves_of(tree, tree["right_children"][node])

    leaf_ids = booster.predict(xgb.DMatrix(X), pred_leaf=True).astype(np.int64).reshape(len(X), -1)
    paths = []
    for i in range(len(X)):
        row = []
        for t in order:
            tree, node, features = trees[t], int(leaf_ids[i, t]), []
            while tree["parents"][node] != 2147483647:
                node = tree["parents"][node]
                features.append(tree["split_indices"][node])
            row.append(features)
        paths.append(row)
    return order, [leaves_of(trees[t]) for t in order], leaf_ids, paths


@pytest.mark.parametrize("seed", range(MODELS))
def test_xgboost_routing_scores_and_costs(seed):
    booster, X = _xgb_model(seed)
    order, leaf_nodes, leaf_ids, paths = _xgb_reference(booster, X)
    margin = booster.predict(xgb.DMatrix(X), output_margin=True).reshape(len(X), -1)
    _, leaves = _check_paths_and_costs(booster, X, paths, margin, rtol=2e-6)
    for position, t in enumerate(order):
        np.testing.assert_array_equal(np.asarray(leaf_nodes[position])[leaves[:, position]], leaf_ids[:, t])


# ------------------------------------------------------------------------------------------------ CatBoost


def _cb_model(seed: int):
    rng = np.random.default_rng(1000 + seed)
    task = ("binary", "multiclass", "regression")[seed % 3]
    X, y = _data(rng, task)
    kind = cb.CatBoostRegressor if task == "regression" else cb.CatBoostClassifier
    model = kind(iterations=int(rng.integers(3, 15)), depth=int(rng.integers(6, 9)), random_seed=seed, verbose=0,
                 thread_count=1, nan_mode=("Min", "Max")[seed % 2], allow_writing_files=False,
                 learning_rate=float(rng.uniform(0.1, 0.5))).fit(X, y)
    borders = [(f, b) for f, feature in enumerate(json.loads(_cb_json(model))["features_info"]["float_features"])
               for b in feature["borders"]]
    feature, border = zip(*borders) if borders else ((), ())
    return model, _at_boundaries(X, np.asarray(feature, dtype=np.int64), np.asarray(border), rng)


def _cb_json(model) -> str:
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "m.json")
        model.save_model(path, format="json")
        with open(path, encoding="utf-8") as file:
            return file.read()


@pytest.mark.parametrize("seed", range(MODELS))
def test_catboost_routing_scores_and_costs(seed):
    model, X = _cb_model(seed)
    trees = json.loads(_cb_json(model))["oblivious_trees"]
    index = model.calc_leaf_indexes(X)  # CatBoost's leaf of each row in each of its trees
    paths = [[[s["float_feature_index"] for s in tree["splits"]] for tree in trees] for _ in range(len(X))]
    raw = model.predict(X, prediction_type="RawFormulaVal").reshape(len(X), -1)
    classes = raw.shape[1]
    paths = [[p for p in row for _ in range(classes)] for row in paths]  # one forest tree per class
    _, leaves = _check_paths_and_costs(model, X, paths, raw, rtol=1e-12)
    for t, tree in enumerate(trees):
        depth = len(tree["splits"])
        # the forest numbers leaves depth first with split 0 at the root: leaf j's bits are CatBoost's reversed
        reversed_bits = np.array([int(format(j, f"0{depth}b")[::-1], 2) if depth else 0 for j in range(1 << depth)])
        for k in range(classes):
            np.testing.assert_array_equal(reversed_bits[leaves[:, t * classes + k]], index[:, t])


# ------------------------------------------------------------------------------------ HistGradientBoosting


def _hist_model(seed: int):
    rng = np.random.default_rng(2000 + seed)
    task = ("binary", "multiclass", "regression")[seed % 3]
    X, y = _data(rng, task)
    kind = HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier
    model = kind(max_iter=int(rng.integers(3, 15)), max_depth=int(rng.integers(6, 9)), max_leaf_nodes=None,
                 min_samples_leaf=3, learning_rate=float(rng.uniform(0.1, 0.5)), early_stopping=False,
                 random_state=seed).fit(X, y)
    nodes = np.concatenate([p.nodes for ps in model._predictors for p in ps])
    inner = nodes["is_leaf"] == 0
    return model, _at_boundaries(X, nodes["feature_idx"][inner], nodes["num_threshold"][inner], rng)


def _hist_paths(model, X) -> list[list[list]]:
    """Each row's features on its path in each tree, walking scikit-learn's nodes as its predictor does."""
    out = []
    for x in X:
        row = []
        for predictors in model._predictors:
            for predictor in predictors:
                nodes, node, features = predictor.nodes, 0, []
                while not nodes["is_leaf"][node]:
                    f = int(nodes["feature_idx"][node])
                    features.append(f)
                    left = nodes["missing_go_to_left"][node] if np.isnan(x[f]) else x[f] <= nodes["num_threshold"][node]
                    node = nodes["left"][node] if left else nodes["right"][node]
                row.append(features)
        out.append(row)
    return out


@pytest.mark.parametrize("seed", range(MODELS))
def test_hist_gradient_boosting_routing_scores_and_costs(seed):
    model, X = _hist_model(seed)
    raw = model._raw_predict(X).reshape(len(X), -1)
    _check_paths_and_costs(model, X, _hist_paths(model, X), raw, rtol=0)  # to the bit


# --------------------------------------------------------------------------------------- serving and files


@pytest.mark.parametrize("make", [_xgb_model, _cb_model, _hist_model])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lazy_predictions_equal_the_library_s(make, seed):
    model, X = make(seed)
    rng = np.random.default_rng(seed)
    groups = {"pair": [0, 1]}
    costs = FeatureCosts(lazy=rng.integers(1, 9, X.shape[1]).astype(float), groups=groups, group_lazy=[3.0])
    calls = []

    def fetch(key, ids):
        calls.append(key)
        return X[np.ix_(ids, groups[key])] if key in groups else X[ids, key]

    known = rng.random(X.shape) < 0.2
    result = LazyPredictor(model, fetch, feature_costs=costs, feature_keys="index").acquire(
        np.where(known, X, np.nan), known)
    assert (result.status == DONE).all()
    expected = model.predict(xgb.DMatrix(X)) if isinstance(model, xgb.Booster) else model.predict(X)
    np.testing.assert_array_equal(result.prediction, expected)
    report = prediction_cost(model, X, costs)
    assert (result.acquisition <= report.acquisition + 1e-9).all()  # values given in X are not paid
    full = LazyPredictor(model, fetch, feature_costs=costs, feature_keys="index").acquire(np.full_like(X, np.nan))
    np.testing.assert_allclose(full.per_instance, report.per_instance, rtol=1e-12)


def test_model_files_of_each_library(tmp_path):
    booster, X = _xgb_model(3)
    for suffix in ("json", "ubj"):
        booster.save_model(tmp_path / f"model.{suffix}")
        forest = to_forest(tmp_path / f"model.{suffix}")
        np.testing.assert_array_equal(forest.apply(X), to_forest(booster).apply(X))
        np.testing.assert_array_equal(forest.leaf_value, to_forest(booster).leaf_value)
    model, X = _cb_model(4)
    for fmt, name in (("json", "model.json"), ("cbm", "model.cbm")):
        model.save_model(str(tmp_path / name), format=fmt)
        forest = to_forest(tmp_path / name)
        np.testing.assert_array_equal(forest.raw_score(X, forest.apply(X)),
                                      to_forest(model).raw_score(X, to_forest(model).apply(X)))
    (tmp_path / "other.json").write_text('{"a": 1}')
    with pytest.raises(CEGBError, match="not a model of LightGBM"):
        to_forest(tmp_path / "other.json")


def test_cli_cost_reads_an_xgboost_file(tmp_path):
    booster, X = _xgb_model(0)
    booster.save_model(tmp_path / "model.json")
    data = tmp_path / "data.csv"
    np.savetxt(data, np.column_stack([np.zeros(len(X)), X]), delimiter=",")
    costs = tmp_path / "costs.txt"
    costs.write_text("\n".join("1" for _ in range(X.shape[1])) + "\n")
    command = [sys.executable, "-m", "lightgbm_cegb.cli", "cost", str(tmp_path / "model.json"), str(data),
               "--costs", str(costs), "--format", "json"]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    np.testing.assert_allclose(report["mean"], prediction_cost(booster, X, FeatureCosts(lazy=np.ones(X.shape[1]))).mean)


# ------------------------------------------------------------------------------------------------ refusals


def test_refusals_name_what_is_not_supported():
    rng = np.random.default_rng(0)
    X, y = _data(rng, "binary")
    linear = xgb.train({"booster": "gblinear"}, xgb.DMatrix(X, y), 2)
    with pytest.raises(CEGBError, match="booster 'gblinear' has no trees"):
        to_forest(linear)
    codes = rng.integers(0, 4, len(X))
    import pandas as pd

    frame = pd.DataFrame({"c": pd.Categorical(codes), "x": X[:, 1]})
    categorical = xgb.train({"max_depth": 3}, xgb.DMatrix(frame, y, enable_categorical=True), 3)
    with pytest.raises(CEGBError, match="categorical split"):
        to_forest(categorical)
    vector = xgb.train({"multi_strategy": "multi_output_tree", "tree_method": "hist", "objective": "multi:softprob",
                        "num_class": 3}, xgb.DMatrix(X, codes % 3), 2)
    with pytest.raises(CEGBError, match="vector leaves"):
        to_forest(vector)
    with pytest.raises(CEGBError, match="not fitted"):
        to_forest(xgb.XGBClassifier())
    cat_model = cb.CatBoostClassifier(iterations=3, verbose=0, allow_writing_files=False).fit(
        pd.DataFrame({"c": codes.astype(str), "x": X[:, 1]}), y, cat_features=["c"])
    with pytest.raises(CEGBError, match="'OneHotFeature' split|'OnlineCtr' split"):
        to_forest(cat_model)
    depthwise = cb.CatBoostClassifier(iterations=3, verbose=0, grow_policy="Depthwise",
                                      allow_writing_files=False).fit(X, y)
    with pytest.raises(CEGBError, match="only symmetric trees"):
        to_forest(depthwise)
    with pytest.raises(CEGBError, match="not fitted"):
        to_forest(cb.CatBoostClassifier())
    hist = HistGradientBoostingClassifier(max_iter=3, categorical_features=[0]).fit(
        np.column_stack([codes, X[:, 1]]), y)
    with pytest.raises(CEGBError, match="categorical split"):
        to_forest(hist)
    with pytest.raises(CEGBError, match="not fitted"):
        to_forest(HistGradientBoostingClassifier())


def test_catboost_forests_are_cached_until_the_model_changes():
    """CatBoost's models compare by content (no hash): their forests are cached by identity, and fitting the model
    again (the same object) is seen."""
    model, X = _cb_model(2)
    first = to_forest(model)
    assert to_forest(model) is first
    model.fit(X, np.arange(len(X)) % 2)
    again = to_forest(model)
    assert again is not first
    np.testing.assert_allclose(again.raw_score(X, again.apply(X))[:, 0],
                               model.predict(X, prediction_type="RawFormulaVal"), rtol=1e-12)


def _mutated(document, rng: np.random.Generator):
    """A deep copy of a parsed JSON model with one random field replaced, deleted or truncated."""
    document = json.loads(json.dumps(document))
    paths, stack = [], [((), document)]
    while stack:  # every (container, key) below the root
        path, node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            paths.append(path + (key,))
            if isinstance(value, (dict, list)) and len(paths) < 20000:
                stack.append((path + (key,), value))
    path = paths[int(rng.integers(len(paths)))]
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    kind = int(rng.integers(6))
    if kind == 0 and isinstance(parent, dict):
        del parent[key]
    elif kind == 1 and isinstance(parent[key], list) and parent[key]:
        parent[key] = parent[key][:int(rng.integers(len(parent[key])))]
    else:
        parent[key] = [None, "x", -1, 2**40, -(2**40), float("nan"), float("inf"), 0.5, [], {}, True,
                       int(rng.integers(-3, 50))][int(rng.integers(12))]
    return document


@pytest.mark.parametrize("library", ["xgboost", "catboost"])
def test_a_damaged_json_model_is_refused_by_name_or_read_safely(library):
    """The readers are a trust boundary: a JSON model with a field deleted, truncated or replaced (wrong types, out
    of range, NaN) gives a CEGBError, or a Forest that routes rows without crashing; no other exception."""
    from lightgbm_cegb.io import catboost_json, xgboost_json

    if library == "xgboost":
        booster, X = _xgb_model(4)
        document, reader = json.loads(booster.save_raw("json")), xgboost_json.read_json
    else:
        model, X = _cb_model(5)
        document, reader = json.loads(_cb_json(model)), catboost_json.read_json
    rng = np.random.default_rng(0)
    outcomes = {"refused": 0, "read": 0}
    for _ in range(300):
        damaged = _mutated(document, rng)
        try:
            forest = reader(damaged)
        except CEGBError:
            outcomes["refused"] += 1
            continue
        outcomes["read"] += 1
        if forest.num_features == X.shape[1]:
            forest.raw_score(X, forest.apply(X))
    assert outcomes["refused"] > 20 and outcomes["read"] > 20, outcomes


# ------------------------------------------------- each library's reading of its input (issue 61, items 1-8)


def _xgb_path_features(booster, dmatrix, rounds: int | None = None) -> list[list[list]]:
    """Each row's path features in each of the first ``rounds`` rounds' trees (None: all), from XGBoost's own
    leaf ids of ``dmatrix`` (which carries the input's missing values as XGBoost reads them)."""
    model = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]
    trees = model["trees"]
    leaf_ids = booster.predict(dmatrix, pred_leaf=True, iteration_range=(0, rounds or 0)).astype(np.int64)
    leaf_ids = leaf_ids.reshape(dmatrix.num_row(), -1)
    paths = []
    for leaves in leaf_ids:
        row = []
        for t, node in enumerate(leaves):
            tree, node, features = trees[t], int(node), []
            while tree["parents"][node] != 2147483647:
                node = tree["parents"][node]
                features.append(tree["split_indices"][node])
            row.append(features)
        paths.append(row)
    return paths


def _lazy_equals_predict(model, X, predict) -> None:
    """LazyPredictor, fetching every value, predicts as the library does."""
    costs = FeatureCosts(lazy=np.ones(X.shape[1]))
    dense = X.toarray() if hasattr(X, "toarray") else X
    result = LazyPredictor(model, lambda key, ids: dense[ids, key], feature_costs=costs,
                           feature_keys="index").acquire(np.full(dense.shape, np.nan))
    assert (result.status == DONE).all()
    np.testing.assert_array_equal(result.prediction, predict)


@pytest.mark.parametrize("seed", range(6))
def test_xgboost_missing_value_is_read_as_xgboost_reads_it(seed):
    """An estimator's ``missing=`` value is missing to XGBoost: the forest routes it where XGBoost's default
    directions send it (it was routed as a number: costs and lazy predictions wrong)."""
    rng = np.random.default_rng(seed)
    task = ("binary", "regression")[seed % 2]
    X, y = _data(rng, task)
    X = np.where(rng.random(X.shape) < 0.3, 0.0, np.nan_to_num(X, nan=1.5))
    kind = xgb.XGBClassifier if task == "binary" else xgb.XGBRegressor
    model = kind(n_estimators=int(rng.integers(3, 12)), max_depth=4, missing=0.0, n_jobs=1).fit(X, y)
    margin = model.predict(X, output_margin=True).reshape(len(X), -1)
    forest = to_forest(model)
    np.testing.assert_allclose(forest.raw_score(X, forest.apply(X)), margin, rtol=2e-6,
                               atol=2e-6 * np.abs(forest.leaf_value).max())
    _costs_on_paths(model, X, _xgb_path_features(model.get_booster(), xgb.DMatrix(X, missing=0.0)), _ascending(X))
    _lazy_equals_predict(model, X, model.predict(X))
    from lightgbm_cegb.methods.early_exit import EarlyExit
    if task == "binary":
        costs = FeatureCosts(lazy=np.arange(1.0, X.shape[1] + 1))
        exits = EarlyExit(model, threshold=1.0, every=1000, feature_costs=costs).predict_result(X)  # at the end
        np.testing.assert_array_equal(exits.prediction, model.predict_proba(X)[:, 1])
        np.testing.assert_array_equal(exits.cost.acquisition, prediction_cost(model, X, costs).acquisition)


@pytest.mark.parametrize("seed", range(6))
def test_xgboost_on_a_sparse_matrix_reads_absent_entries_as_missing(seed):
    import scipy.sparse as sparse

    rng = np.random.default_rng(seed)
    X, y = _data(rng, ("binary", "regression")[seed % 2])
    X = np.where(rng.random(X.shape) < 0.4, 0.0, np.nan_to_num(X, nan=0.7))
    params = {"max_depth": 4, "nthread": 1, "objective": "binary:logistic" if seed % 2 == 0 else
              "reg:squarederror"}
    csr = sparse.csr_matrix(X)
    booster = xgb.train(params, xgb.DMatrix(csr, y), int(rng.integers(3, 12)))
    forest = to_forest(booster)
    margin = booster.predict(xgb.DMatrix(csr), output_margin=True).reshape(len(X), -1)
    np.testing.assert_allclose(forest.raw_score(csr, forest.apply(csr)), margin, rtol=2e-6,
                               atol=2e-6 * np.abs(forest.leaf_value).max())
    _costs_on_paths(booster, csr, _xgb_path_features(booster, xgb.DMatrix(csr)), _ascending(X))


def test_an_early_stopped_xgboost_estimator_is_priced_for_the_rounds_it_predicts_with():
    rng = np.random.default_rng(3)
    X, y = _data(rng, "binary", 600)
    model = xgb.XGBClassifier(n_estimators=300, early_stopping_rounds=5, max_depth=4, n_jobs=1).fit(
        X[:400], y[:400], eval_set=[(X[400:], y[400:])], verbose=False)
    rounds = model.best_iteration + 1
    assert rounds < model.get_booster().num_boosted_rounds()
    _costs_on_paths(model, X, _xgb_path_features(model.get_booster(), xgb.DMatrix(X), rounds), _ascending(X))
    _lazy_equals_predict(model, X, model.predict(X))
    booster = model.get_booster()  # a Booster predicts with every round
    _costs_on_paths(booster, X, _xgb_path_features(booster, xgb.DMatrix(X)), _ascending(X))


@pytest.mark.parametrize("seed", range(4))
def test_xgboost_num_iteration_counts_rounds_of_parallel_trees(seed):
    rng = np.random.default_rng(seed)
    task = ("binary", "multiclass")[seed % 2]
    X, y = _data(rng, task)
    params = {"max_depth": 3, "nthread": 1, "num_parallel_tree": int(rng.integers(2, 5)), "subsample": 0.7,
              "objective": "binary:logistic" if task == "binary" else "multi:softprob",
              **({"num_class": 3} if task == "multiclass" else {})}
    booster = xgb.train(params, xgb.DMatrix(X, y), 6)
    for rounds in (1, 2, 5):
        _costs_on_paths(booster, X, _xgb_path_features(booster, xgb.DMatrix(X), rounds), _ascending(X),
                        num_iteration=rounds)
    assert to_forest(booster).num_iterations == 6


@pytest.mark.parametrize("categorical", ["list", "mask", "from_dtype"])
def test_hist_gradient_boosting_with_categorical_features_reads_x_s_columns(categorical):
    """scikit-learn puts the categorical columns first before its trees see them: a model whose trees make no
    categorical split (the categorical columns hold one category each) is read on X's columns."""
    import pandas as pd

    rng = np.random.default_rng(1)
    X, y = _data(rng, "binary")
    X[:, 1] = 2.0
    X[:, 3] = 5.0
    marks = [1, 3]
    if categorical == "from_dtype":
        frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
        for j in marks:
            frame[f"f{j}"] = pd.Categorical(frame[f"f{j}"])
        model = HistGradientBoostingClassifier(max_iter=8, categorical_features="from_dtype", random_state=0)
        model.fit(frame, y)
        X = frame
    else:
        features = marks if categorical == "list" else np.isin(np.arange(X.shape[1]), marks)
        model = HistGradientBoostingClassifier(max_iter=8, categorical_features=features, random_state=0).fit(X, y)
    forest = to_forest(model)
    assert not set(forest.used_features().tolist()) & set(marks)
    values = np.asarray(X, dtype=np.float64)
    np.testing.assert_array_equal(forest.raw_score(values, forest.apply(values)),
                                  model._raw_predict(X).reshape(len(values), -1))
    _lazy_equals_predict(model, values, model.predict(X))


def test_a_booster_s_cache_never_serves_the_trees_of_another_model():
    """A Booster that loads another model (often at the same handle address) or rolls back and trains again (the
    same counts) is read again."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 6))
    y = X[:, 0] + X[:, 1] * X[:, 2]

    def check(booster):
        forest = to_forest(booster)
        np.testing.assert_allclose(forest.raw_score(X, forest.apply(X))[:, 0], booster.predict(X, raw_score=True),
                                   rtol=1e-12, atol=1e-12)

    booster = lgb.train({"verbose": -1, "num_leaves": 7}, lgb.Dataset(X, y), 5)
    for seed in range(10):
        columns = rng.permutation(6)
        other = lgb.train({"verbose": -1, "num_leaves": 7, "seed": seed}, lgb.Dataset(X[:, columns], y), 5)
        to_forest(booster)
        booster.model_from_string(other.model_to_string())
        check(booster)
    booster = lgb.train({"verbose": -1, "num_leaves": 7}, lgb.Dataset(X, y, free_raw_data=False), 5,
                        keep_training_booster=True)
    check(booster)
    to_forest(booster)
    booster.rollback_one_iter()
    booster.reset_parameter({"learning_rate": 0.9})
    booster.update()
    check(booster)


def _xgb_document(edit):
    booster, _ = _xgb_model(0)
    document = json.loads(booster.save_raw("json"))
    edit(document["learner"]["gradient_booster"]["model"]["trees"])
    return document


@pytest.mark.parametrize("edit, message", [
    (lambda trees: trees[0]["default_left"].__setitem__(0, 2), "default_left should hold 0 or 1"),
    (lambda trees: trees[0].__setitem__("split_conditions", [str(c) for c in trees[0]["split_conditions"]]),
     "not strings or booleans"),
    (lambda trees: trees[0].__setitem__("split_indices", [bool(i) for i in trees[0]["split_indices"]]),
     "not strings or booleans"),
    (lambda trees: trees[1].__setitem__("id", 0), r"ids should be 0\.\.\d+, each once, got \[0\] repeated"),
])
def test_an_edited_xgboost_json_that_xgboost_reads_otherwise_is_refused(edit, message):
    from lightgbm_cegb.io import xgboost_json

    with pytest.raises(CEGBError, match=message):
        xgboost_json.read_json(_xgb_document(edit))


def test_xgboost_trees_are_placed_by_their_id():
    booster, X = _xgb_model(0)
    document = json.loads(booster.save_raw("json"))
    model = document["learner"]["gradient_booster"]["model"]
    model["trees"] = model["trees"][::-1]  # XGBoost places each by its id
    from lightgbm_cegb.io import xgboost_json

    expected = to_forest(booster)
    forest = xgboost_json.read_json(document)
    np.testing.assert_array_equal(forest.apply(X), expected.apply(X))
    np.testing.assert_array_equal(forest.leaf_value, expected.leaf_value)


def _cb_document(edit):
    model, X = _cb_model(0)
    document = json.loads(_cb_json(model))
    edit(document)
    return model, X, document


def test_catboost_float_features_are_read_by_position_as_catboost_reads_them():
    """CatBoost numbers its float features by their place in features_info, not by their feature_index field:
    swapping two features' feature_index changes nothing to CatBoost, nor to the reader."""
    from lightgbm_cegb.io import catboost_json

    def swap(document):
        features = document["features_info"]["float_features"]
        features[0]["feature_index"], features[1]["feature_index"] = features[1]["feature_index"], 0
    model, X, document = _cb_document(swap)
    forest = catboost_json.read_json(document)
    np.testing.assert_allclose(forest.raw_score(X, forest.apply(X))[:, 0],
                               model.predict(X, prediction_type="RawFormulaVal"), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("edit, message", [
    (lambda split: split.__setitem__("border", 0.123456), "is not float feature 0's border"),
    (lambda split: split.__setitem__("split_index", 10**6), "is not one of float feature 0's borders"),
    (lambda split: split.pop("split_index"), "has no field 'split_index'"),
])
def test_a_catboost_split_whose_border_catboost_reads_otherwise_is_refused(edit, message):
    """CatBoost reads a split's border from its split_index among the features' borders: a border field that
    disagrees (CatBoost would compare with another value) is refused by name."""
    from lightgbm_cegb.io import catboost_json

    def damage(document):
        for tree in document["oblivious_trees"]:
            for split in tree["splits"]:
                if split["float_feature_index"] == 0:
                    edit(split)
                    return
    _, _, document = _cb_document(damage)
    with pytest.raises(CEGBError, match=message):
        catboost_json.read_json(document)


def test_a_catboost_model_whose_binary_fields_are_not_utf8_is_read(tmp_path):
    """A binary model's guid may hold any bytes; CatBoost loads it and writes them into its JSON as they are."""
    model, X = _cb_model(1)
    path = tmp_path / "model.cbm"
    model.save_model(str(path))
    data = bytearray(path.read_bytes())
    guid = data.find(b"model_guid")
    assert guid >= 0
    data[data.find(b"-", guid) - 3] = 0xFF
    damaged = tmp_path / "damaged.cbm"
    damaged.write_bytes(bytes(data))
    loaded = cb.CatBoost()
    loaded.load_model(str(damaged))
    forest = to_forest(damaged)
    np.testing.assert_allclose(forest.raw_score(X, forest.apply(X)), loaded.predict(X, prediction_type="RawFormulaVal")
                               .reshape(len(X), -1), rtol=1e-12, atol=1e-12)


def _agrees(forest, predicted, X) -> bool:
    return np.allclose(forest.raw_score(X, forest.apply(X)).ravel(), np.ravel(predicted), rtol=0, atol=1e-5)


def test_the_forest_cache_sees_each_library_s_model_change_in_place(tmp_path):
    """Changes that keep a model's object, its tree and round counts (found by an independent review, each once read
    as the model before): a scikit-learn tree fitted twice more (its new tree_ may take the first tree_'s address:
    in the review's fresh process 20 times of 20, here as the allocator places it), XGBoost's load_model of another
    model of as many rounds and set_param of base_score, CatBoost's set_scale_and_bias, a model file replaced by a
    copy of the same size and time."""
    import os
    import shutil

    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    for _ in range(5):
        tree = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, X[:, 0])
        to_forest(tree)
        tree.fit(X, X[:, 1]).fit(X, X[:, 2] * 10)
        assert _agrees(to_forest(tree), tree.predict(X), X)
    params = {"max_depth": 2, "nthread": 1, "base_score": 0.0}
    first = xgb.train(params, xgb.DMatrix(X, X[:, 0] - X[:, 2]), 3)
    other = xgb.train(params, xgb.DMatrix(X, X[:, 1] * 5), 3)
    other.save_model(tmp_path / "other.json")
    estimator = xgb.XGBRegressor(n_estimators=3, max_depth=2, n_jobs=1, base_score=0.0).fit(X, X[:, 0])
    for model, booster in ((first, first), (estimator, None)):
        to_forest(model)
        model.load_model(tmp_path / "other.json")
        booster = booster or model.get_booster()
        assert _agrees(to_forest(model), booster.predict(xgb.DMatrix(X), output_margin=True), X)
    first.set_param({"base_score": 5.0})
    assert _agrees(to_forest(first), first.predict(xgb.DMatrix(X), output_margin=True), X)
    boosted = cb.CatBoostRegressor(iterations=5, depth=2, verbose=False, thread_count=1, random_seed=0,
                                   allow_writing_files=False).fit(X, X[:, 0] - X[:, 2])
    to_forest(boosted)
    boosted.set_scale_and_bias(2.0, 3.0)
    assert _agrees(to_forest(boosted), boosted.predict(X, prediction_type="RawFormulaVal"), X)
    import lightgbm as lgb

    text = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, X[:, 0]), 3).model_to_string()
    start = text.index("leaf_value=") + len("leaf_value=")
    digit = text.index(next(c for c in text[start + 2:] if c in "12345678"), start + 2)
    path, spare = tmp_path / "model.txt", tmp_path / "spare.txt"
    path.write_text(text)
    spare.write_text(text[:digit] + str(int(text[digit]) + 1) + text[digit + 1:])  # one leaf, as many bytes
    os.utime(spare, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    to_forest(path)
    shutil.copy2(spare, path)  # the same size and modification time: another file
    assert _agrees(to_forest(path), lgb.Booster(model_file=str(path)).predict(X, raw_score=True), X)
