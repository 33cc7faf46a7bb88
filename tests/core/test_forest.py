"""The forest core's trust boundary: hostile or damaged models are refused with a clear error (never a
crash, a hang or a silently different reading), and LightGBM's model text is read and written as
LightGBM reads and writes it. Every call that crashed or hung before the forest core runs in a child
process (conftest.run_python), so that a regression fails the test instead of killing pytest."""

from __future__ import annotations

import copy
import json
import pickle
import re
import textwrap

import lightgbm as lgb
import numpy as np
import pytest
from conftest import run_python, with_tree_sizes
from hypothesis import given, settings
from hypothesis import strategies as st
from references import model_and_data

from lightgbm_cegb import CEGBError, FeatureCosts, budget_prune, prediction_cost, to_forest
from lightgbm_cegb.core import Forest
from lightgbm_cegb.io.lightgbm_text import read_text, write_text


@pytest.fixture(scope="module")
def categorical_model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[:, 3] = rng.integers(0, 8, 300)
    y = X[:, 0] + np.isin(X[:, 3], [1, 4, 6]) + rng.normal(0, 0.1, 300)
    booster = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 6, "min_data_per_group": 2,
                         "cat_smooth": 1}, lgb.Dataset(X, y, categorical_feature=[3]), 3)
    text = booster.model_to_string()
    assert "num_cat=1" in text
    return booster, text, X, y


def edit(text: str, tree: int, key: str, change) -> str:
    """The model text with line ``key=`` of tree ``tree`` replaced by change(old values list), and
    tree_sizes updated to match (so that the edit, not the sizes, is what is read)."""
    start = text.index(f"Tree={tree}\n")
    line_start = text.index(f"\n{key}=", start) + 1
    line_end = text.index("\n", line_start)
    values = text[line_start + len(key) + 1:line_end].split(" ")
    return with_tree_sizes(text[:line_start] + f"{key}=" + " ".join(map(str, change(values))) + text[line_end:])


def _field(text: str, tree: int, key: str) -> list[str]:
    start = text.index(f"Tree={tree}\n")
    line_start = text.index(f"\n{key}=", start) + 1
    return text[line_start + len(key) + 1:text.index("\n", line_start)].split(" ")


def categorical_node(text: str, tree: int = 0) -> int:
    return next(i for i, d in enumerate(_field(text, tree, "decision_type")) if int(d) & 1)


def replaced(values, index, value):
    out = list(values)
    out[index] = value
    return out


def child_outcome(code: str, timeout: float = 120) -> str:
    """Run code in a fresh interpreter; 'ok', 'error: <CEGBError message>', or the crash / hang."""
    script = textwrap.dedent("""
        import numpy as np, lightgbm as lgb
        from lightgbm_cegb import *
        from lightgbm_cegb.core import Forest
        from lightgbm_cegb.io.lightgbm_text import read_text
        try:
    """) + textwrap.indent(textwrap.dedent(code), "    ") + textwrap.dedent("""
            print("OUTCOME ok")
        except CEGBError as exc:
            print("OUTCOME error:", exc)
    """)
    proc = run_python(script, timeout=timeout)
    if proc.returncode is None:
        return f"timed out after {timeout} s"
    if proc.returncode != 0:
        return f"crashed (return code {proc.returncode}): {proc.stderr[-500:]}"
    return proc.stdout.split("OUTCOME ", 1)[1].strip()


@pytest.mark.parametrize(("threshold", "message"), [
    ("nan", r"threshold nan is not one of its 1 category bitsets"),
    ("-1000000000", r"threshold -1000000000.0 is not one of its 1 category bitsets"),
    ("-1", r"threshold -1.0 is not one of its 1 category bitsets"),
    ("1", r"threshold 1.0 is not one of its 1 category bitsets"),
])
def test_categorical_threshold_out_of_its_bitsets(categorical_model, threshold, message, tmp_path):
    _, text, X, _ = categorical_model
    node = categorical_node(text)
    path = tmp_path / "model.txt"
    path.write_text(edit(text, 0, "threshold", lambda v: replaced(v, node, threshold)))
    np.save(tmp_path / "X.npy", X)
    outcome = child_outcome(f"prediction_cost({str(path)!r}, np.load({str(tmp_path / 'X.npy')!r}), np.ones(4))")
    assert outcome.startswith("error:"), outcome
    with pytest.raises(CEGBError, match=message):
        read_text(path.read_text())


@pytest.mark.parametrize(("key", "value", "message"), [
    ("cat_boundaries", "0 5", r"'cat_threshold' should have 5 values, got 1"),
    ("cat_boundaries", "3 1", r"cat_boundaries should rise from 0"),
    ("cat_boundaries", "0 -7", r"cat_boundaries should rise from 0"),
    ("cat_threshold", "nan", r"'cat_threshold' holds 'nan', not an integer"),
    ("cat_threshold", "-1", r"cat_threshold words should be 32-bit unsigned integers, got -1"),
    ("cat_threshold", "4294967296", r"cat_threshold words should be 32-bit unsigned integers, got 4294967296"),
])
def test_category_bitsets_are_checked(categorical_model, key, value, message, tmp_path):
    _, text, X, _ = categorical_model
    path = tmp_path / "model.txt"
    path.write_text(edit(text, 0, key, lambda v: value.split()))
    np.save(tmp_path / "X.npy", X)
    outcome = child_outcome(f"prediction_cost({str(path)!r}, np.load({str(tmp_path / 'X.npy')!r}), np.ones(4))")
    assert outcome.startswith("error:"), outcome
    with pytest.raises(CEGBError, match=message):
        read_text(path.read_text())


def test_child_pointing_to_an_ancestor_is_a_cycle_not_a_hang(categorical_model, tmp_path):
    _, text, X, _ = categorical_model
    left = _field(text, 0, "left_child")
    node = next(i for i, c in enumerate(left) if int(c) >= 0)
    path = tmp_path / "model.txt"
    path.write_text(edit(text, 0, "left_child", lambda v: replaced(v, int(v[node]), node)))  # child -> parent
    np.save(tmp_path / "X.npy", X)
    outcome = child_outcome(f"prediction_cost({str(path)!r}, np.load({str(tmp_path / 'X.npy')!r}), np.ones(4))",
                            timeout=300)
    assert outcome.startswith("error:") and "has a cycle through node" in outcome, outcome


def test_unreachable_node_routes_as_lightgbm_and_budget_prune_refuses_it(categorical_model, tmp_path):
    """A root whose left child is redirected to a leaf: LightGBM loads and predicts it; the accounting
    routes it exactly as LightGBM does, and budget_prune (which needs a tree) refuses it clearly
    (it wrote out of bounds before)."""
    _, text, X, y = categorical_model
    damaged = edit(text, 0, "left_child", lambda v: replaced(v, 0, -6))  # leaf 5, also reached elsewhere
    booster = lgb.Booster(model_str=damaged)
    np.testing.assert_array_equal(to_forest(booster).apply(X), booster.predict(X, pred_leaf=True))
    path = tmp_path / "model.txt"
    path.write_text(damaged)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    outcome = child_outcome(f"b = lgb.Booster(model_file={str(path)!r}); "
                            f"budget_prune(b, np.load({str(tmp_path / 'X.npy')!r}), "
                            f"np.load({str(tmp_path / 'y.npy')!r}), "
                            "np.ones(4), 0.1)")
    assert outcome.startswith("error:") and "is not a tree" in outcome, outcome


def hand_built(**change) -> dict:
    arrays = dict(node_offset=[0, 1], feature=[0], threshold=[0.5], decision=[2], left=[-1], right=[-2],
                  leaf_offset=[0, 2], leaf_value=[1.0, 2.0], cat_offset=[0, 0], cat_boundaries=[],
                  cat_threshold=[], num_features=2)
    arrays.update(change)
    return arrays


@pytest.mark.parametrize(("change", "message"), [
    ({"left": [100_000_000]}, r"tree 0 child 100000000 of node 0 is out of range"),
    ({"right": [-3]}, r"tree 0 child -3 of node 0 is out of range"),
    ({"left": [0]}, r"tree 0 has a cycle through node 0"),
    ({"node_offset": [0, 2], "feature": [0, 1], "threshold": [0.5, 0.5], "decision": [2, 2], "left": [-1, -2],
      "right": [1, 0], "leaf_offset": [0, 3], "leaf_value": [1.0, 2.0, 3.0]},
     r"tree 0 has a cycle through node 0"),  # from a right subtree back to the root
    ({"feature": [100_000_000]}, r"split feature 100000000 outside 0..1"),
    ({"feature": [-1]}, r"split feature -1 outside 0..1"),
    ({"left": [2**40]}, r"left should fit in int32"),
    ({"decision": [1], "threshold": [0.0]}, r"categorical split whose threshold 0.0 is not one of its 0 category"),
    ({"trees_per_iteration": 0}, r"trees_per_iteration .* should be an integer >= 1, got 0"),
    ({"trees_per_iteration": 2}, r"1 trees are not whole iterations of trees_per_iteration=2"),
    ({"leaf_value": [1.0]}, r"leaf_offset should give each tree one leaf more than split nodes"),
    ({"num_features": 0}, r"num_features should be an integer >= 1, got 0"),
    ({"cat_offset": [0, 5]}, r"cat_offset should rise from 0 to the 0 cat_boundaries"),
])
def test_public_constructor_checks_every_index(change, message):
    with pytest.raises(CEGBError, match=message):
        Forest(**hand_built(**change))


def test_hand_built_forest_routes_and_checks_columns():
    forest = Forest(**hand_built())
    np.testing.assert_array_equal(forest.apply(np.array([[0.0, 9.0], [1.0, 9.0]])).ravel(), [0, 1])
    with pytest.raises(CEGBError, match=r"X has 1 features but the model has 2"):
        forest.apply(np.zeros((3, 1)))



def test_compiled_routing_pickles_and_copies(categorical_model):
    """The compiled routing structure (FlatEnsemble) pickles and copies as its arrays, categorical bitsets
    included, and the copy routes as the original: anything holding one pickles."""
    booster, text, X, _ = categorical_model
    forest = read_text(text)
    flat = forest.flat
    rows = np.ascontiguousarray(X)
    for again in (pickle.loads(pickle.dumps(flat)), copy.deepcopy(flat)):
        assert again is not flat and (again.num_trees, again.num_features) == (flat.num_trees, flat.num_features)
        np.testing.assert_array_equal(again.apply(rows, flat.num_trees, 1), flat.apply(rows, flat.num_trees, 1))
    holder = pickle.loads(pickle.dumps({"flat": flat, "forest": forest}))
    np.testing.assert_array_equal(holder["forest"].apply(X), forest.apply(X))
    np.testing.assert_array_equal(holder["flat"].apply(rows, flat.num_trees, 1), forest.apply(X))

@pytest.mark.parametrize(("leaves", "message"), [
    ([[10**9]], r"leaves\[0, 0\] should be a leaf of tree 0 \(0..1\), got 1000000000"),
    ([[0], [-1]], r"leaves\[1, 0\] should be a leaf of tree 0 \(0..1\), got -1"),
    ([[2]], r"leaves\[0, 0\] should be a leaf of tree 0 \(0..1\), got 2"),
    ([[2**40]], r"got 1099511627776"),  # not wrapped by the int32 conversion
    ([[0.0]], r"leaves should hold integers \(leaf indices\), got float64"),
    ([0], r"leaves should be a 2-d array of shape \(rows, trees used <= 1\), got shape \(1,\)"),
    ([[0, 0]], r"leaves should be a 2-d array of shape \(rows, trees used <= 1\), got shape \(1, 2\)"),
])
def test_leaves_given_to_raw_score_and_leaf_values_are_checked(leaves, message):
    """raw_score and leaf_values index the leaf arrays with the leaves: out of range, they crashed (10**9) or
    read before the array (-1). Run in a child so that a regression fails instead of killing pytest."""
    outcome = child_outcome(f"""
        forest = Forest(node_offset=[0, 1], feature=[0], threshold=[0.5], decision=[2], left=[-1], right=[-2],
                        leaf_offset=[0, 2], leaf_value=[1.0, 2.0], cat_offset=[0, 0], cat_boundaries=[],
                        cat_threshold=[], num_features=2)
        messages = []
        for call in (forest.raw_score, forest.leaf_values):
            try:
                call(np.zeros((len({leaves!r}), 2)), np.array({leaves!r}))
                messages.append("accepted")
            except CEGBError as exc:
                messages.append(str(exc))
        assert messages[0] == messages[1], messages
        raise CEGBError(messages[0])
    """)
    assert outcome.startswith("error:") and re.search(message, outcome), outcome


def test_raw_score_of_valid_leaves_and_given_values():
    forest = Forest(**hand_built())
    np.testing.assert_array_equal(forest.raw_score(None, np.array([[1], [0]], dtype=np.int64)), [[2.0], [1.0]])
    np.testing.assert_array_equal(forest.raw_score(None, np.array([[1]]), values=np.array([[5.0]])), [[5.0]])
    with pytest.raises(CEGBError, match=r"values should be numbers of shape \(1, 1\) .* got float64 values of "
                                         r"shape \(2, 1\)"):
        forest.raw_score(None, np.array([[1]]), values=np.zeros((2, 1)))


@pytest.mark.parametrize(("value", "message"), [
    ("0", r"num_tree_per_iteration should be >= 1, got 0"),
    ("-1", r"num_tree_per_iteration should be >= 1, got -1"),
])
def test_trees_per_iteration(categorical_model, value, message, tmp_path):
    _, text, X, _ = categorical_model
    path = tmp_path / "model.txt"
    path.write_text(text.replace("num_tree_per_iteration=1", f"num_tree_per_iteration={value}"))
    np.save(tmp_path / "X.npy", X)
    outcome = child_outcome(f"prediction_cost({str(path)!r}, np.load({str(tmp_path / 'X.npy')!r}), np.ones(4), "
                            "per_iteration=True)")
    assert outcome.startswith("error:") and "num_tree_per_iteration should be >= 1" in outcome, outcome


def damaged_texts(text: str) -> dict[str, str]:
    tree1 = text.index("Tree=1\n")
    return {
        "truncated inside a tree": text[:tree1 + 60],
        "truncated after the trees' header": text[:text.index("Tree=0")],
        "no blank line between trees": text[:tree1 - 2] + text[tree1:],
        "a deleted Tree= line": text[:tree1] + text[text.index("\n", tree1) + 1:],
        "an extra tree_sizes entry": text.replace("tree_sizes=", "tree_sizes=700 ", 1),
    }


@pytest.mark.parametrize("damage", ["truncated inside a tree", "truncated after the trees' header",
                                    "no blank line between trees", "a deleted Tree= line", "an extra tree_sizes entry"])
def test_damaged_files_are_refused_like_lightgbm(categorical_model, damage, tmp_path):
    """LightGBM refuses each of these texts (with tree_sizes, as it writes them); so does read_text,
    where it accepted them before and read trees differently from LightGBM."""
    _, text, _, _ = categorical_model
    damaged = damaged_texts(text)[damage]
    path = tmp_path / "model.txt"
    path.write_text(damaged)
    stock = run_python(f"import lightgbm as lgb; lgb.Booster(model_file={str(path)!r}); print('LOADED')")
    assert "LOADED" not in stock.stdout  # LightGBM refuses it (or aborts on it)
    with pytest.raises(CEGBError, match=r"LightGBM model: "):
        read_text(damaged)


@pytest.mark.parametrize(("key", "edit"), [
    ("threshold", lambda v: v[:3] + "_" + v[3:]), ("leaf_value", lambda v: v[:3] + "_" + v[3:]),
    ("leaf_count", lambda v: v[0] + "_" + v[1:]), ("num_leaves", lambda v: "1_" + v), ("shrinkage", lambda v: "0_1"),
    ("threshold", lambda v: v.replace("0", "\uff10", 1)),  # a fullwidth digit: Python's float reads it
])
def test_numbers_lightgbm_reads_otherwise_are_refused(categorical_model, key, edit):
    """Python reads ``0.2_5`` as 0.25 and a fullwidth digit as a digit; LightGBM stops at the ``_`` (0.2) or
    refuses the text: read_text refuses them, where it read other trees than LightGBM loads."""
    _, text, _, _ = categorical_model
    plain = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("tree_sizes="))
    start = plain.index(f"\n{key}=", plain.index("Tree=0\n")) + len(key) + 2
    end = plain.index("\n", start)
    first = plain[start:end].split(" ")[0]
    edited = plain[:start] + edit(first) + plain[start + len(first):]
    assert edited != plain
    with pytest.raises(CEGBError, match=f"LightGBM model: tree 0: '?{key}'? (holds|should be)"):
        read_text(edited)


def test_without_tree_sizes_trees_follow_one_another(categorical_model):
    """Without tree_sizes LightGBM reads the trees one after another: so does read_text, and a missing
    blank line is refused instead of read into the previous tree."""
    booster, text, X, _ = categorical_model
    plain = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("tree_sizes="))
    np.testing.assert_array_equal(read_text(plain).apply(X), booster.predict(X, pred_leaf=True))
    tree1 = plain.index("Tree=1\n")
    with pytest.raises(CEGBError, match=r"tree 0 runs into the next tree's 'Tree=' line"):
        read_text(plain[:tree1 - 2] + plain[tree1:])


def test_write_text_is_lightgbm_byte_for_byte(categorical_model):
    booster, text, _, _ = categorical_model
    assert write_text(read_text(text)) == text
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 6))
    y = rng.integers(0, 3, 400)
    for params in ({"objective": "multiclass", "num_class": 3}, {"objective": "binary", "boosting": "rf",
                                                                 "bagging_fraction": 0.5, "bagging_freq": 1},
                   {"objective": "regression", "min_data_in_leaf": 1000}):
        model = lgb.train({**params, "verbose": -1, "num_leaves": 9}, lgb.Dataset(X, y if "num_class" in params
                                                                                 else (y > 0).astype(float)), 4)
        assert write_text(read_text(model.model_to_string())) == model.model_to_string()


def test_model_without_trees_is_read_as_lightgbm_reads_it():
    """An untrained Booster's text (no Tree= line) loads in LightGBM and predicts 0: read_text gives a
    forest of no trees, which costs nothing and writes back byte for byte."""
    X = np.random.default_rng(2).normal(size=(50, 3))
    booster = lgb.Booster({"verbose": -1}, lgb.Dataset(X, X[:, 0]))
    text = booster.model_to_string()
    forest = read_text(text)
    assert forest.num_trees == 0 and forest.num_features == 3
    assert write_text(forest) == text
    assert lgb.Booster(model_str=text).predict(X).tolist() == [0.0] * 50
    assert prediction_cost(booster, X, FeatureCosts(lazy=[1.0, 2.0, 3.0])).mean == 0.0


def test_model_file_with_pandas_categories_routes_like_the_booster(tmp_path):
    """A model FILE trained on a DataFrame with a category column: its pandas_categorical line maps the
    DataFrame's categories to LightGBM's codes, as lgb.Booster(model_file=...) does."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    n = 400
    cities = np.array(["paris", "oslo", "rome", "lima", "kyiv"])
    frame = pd.DataFrame({"x": rng.normal(size=n),
                          "city": pd.Categorical(rng.choice(cities, n),
                                                 categories=["rome", "kyiv", "paris", "lima", "oslo"]),
                          "code": pd.Categorical(rng.choice([10, 3, 7, 42], n))})
    y = frame["x"] + (frame["city"] == "oslo") * 2 + (frame["code"] == 42) * 1.5 + rng.normal(0, 0.1, n)
    booster = lgb.train({"objective": "regression", "verbose": -1, "min_data_per_group": 5, "cat_smooth": 1,
                         "num_leaves": 8}, lgb.Dataset(frame, y), 5)
    path = tmp_path / "model.txt"
    booster.save_model(path)
    expected = lgb.Booster(model_file=path).predict(frame, pred_leaf=True)
    np.testing.assert_array_equal(to_forest(str(path)).apply(frame), expected)
    costs = FeatureCosts(lazy={"x": 1.0, "city": 10.0, "code": 5.0})
    assert prediction_cost(str(path), frame, costs).mean == prediction_cost(booster, frame, costs).mean
    for column in ("city", "code"):  # budget_prune on string and integer categories, by the model's codes
        pruned = budget_prune(booster, frame, y, costs, 0.0)
        np.testing.assert_allclose(pruned.model.predict(frame), booster.predict(frame), rtol=1e-12)
        assert column in frame


def test_bagging_and_isolation_forest_feature_subsets():
    """Trees fitted on a subset of the columns (max_features < 1) test the subset's columns: the cost is
    that of the features of X they test (it was computed on the subset's positions)."""
    from sklearn.ensemble import BaggingClassifier, IsolationForest
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 8))
    y = (X[:, 5] + X[:, 7] > 0).astype(int)
    lazy = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 20.0, 1.0, 30.0])
    for model in (BaggingClassifier(DecisionTreeClassifier(max_depth=3), n_estimators=5, max_features=0.5,
                                    random_state=0).fit(X, y),
                  IsolationForest(n_estimators=5, max_features=0.5, random_state=0).fit(X)):
        report = prediction_cost(model, X, lazy)
        for i in range(0, 300, 29):
            used = set()
            for estimator, features in zip(model.estimators_, model.estimators_features_):
                tree = estimator.tree_
                path = estimator.decision_path(X[i:i + 1, features].astype(np.float32)).indices
                used |= {int(features[tree.feature[k]]) for k in path if tree.children_left[k] != -1}
            assert report.acquisition[i] == pytest.approx(lazy[sorted(used)].sum(), rel=1e-12)


def test_sparse_rows_are_routed_without_densifying(tmp_path):
    """A CSR of 200,000 x 2,000 with 0.1% non-zeros (3.2 GB dense): routed in blocks, the child process's
    peak memory stays under 0.5 GB."""
    code = textwrap.dedent("""
        import resource, numpy as np, scipy.sparse as sp, lightgbm as lgb
        from lightgbm_cegb import prediction_cost, to_forest
        rng = np.random.default_rng(0)
        nnz = 400_000  # 0.1% of 200,000 x 2,000 (scipy's sp.random itself needs the dense size)
        big = sp.csr_matrix((rng.normal(size=nnz), (rng.integers(0, 200_000, nnz), rng.integers(0, 2_000, nnz))),
                            shape=(200_000, 2_000))
        small = big[:3000]
        y = np.asarray(small[:, :50].sum(axis=1)).ravel() + rng.normal(0, 0.01, 3000)
        booster = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 15}, lgb.Dataset(small, y), 20)
        report = prediction_cost(booster, big, np.ones(2000))
        leaves = to_forest(booster).apply(big[:5000])
        assert (leaves == booster.predict(big[:5000], pred_leaf=True)).all()
        print("PEAK_MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, report.mean)
    """)
    proc = run_python(code, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:] if proc.returncode is not None else "timed out"
    peak = float(proc.stdout.split("PEAK_MB")[1].split()[0])
    assert peak < 500, f"peak memory {peak:.0f} MB"


def test_costs_follow_names():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(rng.normal(size=(300, 3)), columns=["age", "blood test", "mri scan"])
    y = frame["blood test"] + frame["mri scan"]
    booster = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 4}, lgb.Dataset(frame, y), 5)
    assert to_forest(booster).feature_names == ["age", "blood_test", "mri_scan"]  # LightGBM's renaming
    by_name = prediction_cost(booster, frame, {"blood test": 20.0, "mri scan": 500.0, "age": 1.0})
    by_column = prediction_cost(booster, frame, [1.0, 20.0, 500.0])
    np.testing.assert_array_equal(by_name.per_instance, by_column.per_instance)
    series = pd.Series({"mri scan": 500.0, "age": 1.0, "blood test": 20.0})  # not in column order
    np.testing.assert_array_equal(prediction_cost(booster, frame, series).per_instance, by_column.per_instance)
    assert set(by_name.usage_by_name) == {"age", "blood_test", "mri_scan"}
    assert json.loads(json.dumps(by_name.to_dict()))["usage"]["mri_scan"] == by_name.usage[2]


def test_estimators_costs_from_any_way_penalties_were_given():
    pd = pytest.importorskip("pandas")
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from lightgbm_cegb.lgbm.cegb_estimators import CEGBClassifier, CEGBRegressor

    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 3))
    y = X[:, 1] + X[:, 2]
    reference = prediction_cost(lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 4},
                                          lgb.Dataset(X, y), 5), X, [1.0, 20.0, 500.0]).mean
    as_kwargs = CEGBRegressor(cegb_penalty_feature_lazy=[1.0, 20.0, 500.0], cegb_tradeoff=0.0, n_estimators=5,
                              num_leaves=4, verbose=-1).fit(X, y)
    assert as_kwargs.prediction_cost(X).mean == pytest.approx(reference)
    named = CEGBRegressor(feature_costs={"b": 20.0, "c": 500.0, "a": 1.0}, cegb_tradeoff=0.0, n_estimators=5,
                          num_leaves=4, verbose=-1).fit(X, y, feature_name=["a", "b", "c"])
    assert named.prediction_cost(X).mean == pytest.approx(reference)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    pipeline = make_pipeline(StandardScaler(), CEGBClassifier(feature_costs={"c": 500.0}, n_estimators=3,
                                                              verbose=-1)).set_output(transform="pandas")
    pipeline.fit(frame, y > 0)
    assert pipeline[-1].booster_.feature_name() == ["a", "b", "c"]
    numpy_pipeline = make_pipeline(StandardScaler(), CEGBClassifier(feature_costs={"c": 500.0}, verbose=-1))
    with pytest.raises(CEGBError, match=r"set_output\(transform='pandas'\)"):
        numpy_pipeline.fit(frame, y > 0)


def test_parsed_model_is_cached(categorical_model, monkeypatch):
    from lightgbm_cegb.io import lightgbm_text as lightgbm_model

    _, _, X, y = categorical_model
    calls = []
    original = lightgbm_model.read_text
    monkeypatch.setattr(lightgbm_model, "read_text", lambda text: calls.append(1) or original(text))
    fresh = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 6}, lgb.Dataset(X, y), 3,
                      keep_training_booster=True)
    for _ in range(3):
        prediction_cost(fresh, X[:10], np.ones(4))
    assert len(calls) == 1
    fresh.rollback_one_iter()  # the cache follows the booster
    assert prediction_cost(fresh, X[:10], np.ones(4), per_iteration=True).curve.shape == (2,)
    assert len(calls) == 2


def _read_both(text: str):
    """read_text of ``text`` by the compiled pass and by the Python reader alone: each a Forest's arrays and
    attributes, or the error's message; and whether the compiled pass read it."""
    from unittest import mock

    from lightgbm_cegb.io import lightgbm_text

    def read():
        try:
            forest = read_text(text)
        except CEGBError as exc:
            return str(exc)
        return {k: (v.dtype.str, v.tobytes()) if isinstance(v, np.ndarray) else repr(v)
                for k, v in vars(forest).items() if not k.startswith("_")}

    compiled = read()
    with mock.patch.object(lightgbm_text, "compiled_trees", return_value=None):
        python = read()
    start = text.find("Tree=")
    taken = lightgbm_text.compiled_trees(text.encode(), len(text[:start].encode())) is not None if start >= 0 else None
    return compiled, python, taken


@settings(max_examples=60, deadline=None, derandomize=True)
@given(model_and_data())
def test_the_compiled_tree_reader_reads_lightgbm_s_models_as_the_python_reader(case):
    """Random models (categorical splits, NaN, zero as missing, one-leaf trees, linear trees, infinite thresholds):
    the compiled pass reads every tree LightGBM writes (linear trees are left to the Python reader), to the bit."""
    booster = case[0]
    text = booster.model_to_string()
    compiled, python, taken = _read_both(text)
    assert compiled == python
    assert taken == ("is_linear=1" not in text)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.floats(allow_nan=False, allow_infinity=True), st.sampled_from(["%r", "%.17g", "%.6g", "%.3e", "%.0f"]))
def test_the_compiled_tree_reader_reads_numbers_as_python_s_float(value, form):
    """A leaf value in any of the forms LightGBM and Python write it: the value ``float`` reads, to the bit."""
    token = form % value if form != "%r" else repr(value)
    text = f"Tree=0\nnum_leaves=1\nnum_cat=0\nleaf_value={token}\n\n\nend of trees\n"
    forest = _lgbtext_forest(text)
    assert forest is not None, token
    assert forest["leaf_value"].tobytes() == np.array([float(token)]).tobytes(), token


@pytest.mark.parametrize("token", ["1e999999", "-1e999999", "1e-999999", "4.9406564584124654e-324", "-0", "0.0",
                                   "00012.5000", "1E+5", "-inf", "inf", "7."])
def test_the_compiled_tree_reader_reads_the_edge_numbers_as_python_s_float(token):
    text = f"Tree=0\nnum_leaves=1\nnum_cat=0\nleaf_value={token}\n\n\nend of trees\n"
    assert _lgbtext_forest(text)["leaf_value"].tobytes() == np.array([float(token)]).tobytes()


def _lgbtext_forest(text: str):
    from lightgbm_cegb.io.lightgbm_text import compiled_trees
    return compiled_trees(text.encode(), 0)


@pytest.mark.parametrize("edit", [
    ("\n", "\r\n"), ("split_feature=", "split_feature=\x0b"), ("leaf_count=", "leaf_count=+"),
    ("shrinkage=1\n", "shrinkage=1_0\n"), ("num_leaves=", "num_leaves= "), ("threshold=", "threshold=nan "),
    ("threshold=", "threshold=\t"), ("leaf_value=", "leaf_value=1e999999 "), ("is_linear=0", "is_linear=0\nextra=1"),
    ("num_cat=1", "num_cat=1\nnum_cat=1"), ("leaf_count=", "leaf_count=1 "), ("decision_type=", "decision_type=256 "),
    ("leaf_value=", "leaf_value=.5e"), ("leaf_value=", "leaf_value=" + "0" * 600), ("num_leaves=", "num_leaves=-"),
    ("cat_threshold=", "cat_threshold=42949672960"), ("num_leaves=", "num_leaves=99999999999"),
    ("\n\n\nTree=1", "\nTree=1"), ("end of trees", "end of tree"), ("split_gain=", "split_gain=é"),
    ("leaf_count=", "leaf_count=99999999999999999999"),  # outside int64: refused by name, not an OverflowError
])
def test_what_the_compiled_tree_reader_declines_the_python_reader_reads_or_refuses(categorical_model, edit):
    """Texts outside what LightGBM writes (carriage returns, white space, signs, underscores, nan, a huge exponent or
    count, an unknown or repeated key, values out of range, a truncated end): the compiled pass declines them and
    the Python reader gives its forest or its error, as before."""
    booster = categorical_model[0]
    text = booster.model_to_string()
    old, new = edit
    assert old in text[text.index("Tree="):]
    head = text[:text.index("Tree=")]
    damaged = re.sub(r"tree_sizes=.*\n", "", head) + text[len(head):].replace(old, new, 1)  # the edit, not the sizes
    compiled, python, taken = _read_both(damaged)
    assert compiled == python
    assert not taken


def test_the_footer_starts_where_the_trees_end(categorical_model):
    """A tree's first line may hold the words 'end of trees' (LightGBM reads only its number): the footer is what
    follows the trees, by either reader; a start outside the text is declined."""
    from lightgbm_cegb.io.lightgbm_text import compiled_trees

    text = categorical_model[1]
    head = re.sub(r"tree_sizes=.*\n", "", text[:text.index("Tree=")])
    edited = head + text[text.index("Tree="):].replace("Tree=0\n", "Tree=0 end of trees\n", 1)
    compiled, python, taken = _read_both(edited)
    assert compiled == python and taken
    assert compiled["text_footer"] == repr(read_text(text).text_footer)
    assert compiled_trees(text.encode(), -1) is None and compiled_trees(text.encode(), len(text) + 1) is None


def test_a_loaded_booster_s_forest_is_read_from_its_text_once(categorical_model, monkeypatch):
    """A Booster made by ``lightgbm_text.loaded`` is read from the text it loaded (or given the Forest read from it):
    LightGBM does not write the model again; once the Booster loads another model, it is written and read again."""
    from lightgbm_cegb.io import lightgbm_text

    _, _, X, y = categorical_model
    trained = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 6}, lgb.Dataset(X, y), 4)
    text = trained.model_to_string()
    written = []
    original = lgb.Booster.model_to_string
    monkeypatch.setattr(lgb.Booster, "model_to_string",
                        lambda self, num_iteration=None, **kw: written.append(num_iteration) or original(
                            self, num_iteration=num_iteration, **kw))
    booster = lightgbm_text.loaded(text)
    forest = to_forest(booster)
    assert -1 not in written  # only the last iteration's text for the cache's identity, no whole model
    assert write_text(forest) == text
    np.testing.assert_array_equal(forest.raw_score(X, forest.apply(X))[:, 0], booster.predict(X, raw_score=True))
    given = read_text(text)
    assert to_forest(lightgbm_text.loaded(text, given)) is given
    other = lgb.train({"objective": "regression", "verbose": -1, "num_leaves": 3}, lgb.Dataset(X, y), 2)
    booster = lightgbm_text.loaded(text)
    booster.model_from_string(other.model_to_string())  # another model: its own trees
    again = to_forest(booster)
    np.testing.assert_array_equal(again.raw_score(X, again.apply(X))[:, 0], other.predict(X, raw_score=True))
    assert -1 in written


def test_a_trained_booster_is_lightgbm_s_own_and_its_forest_is_read_from_the_text_written(categorical_model,
                                                                                            monkeypatch):
    """``lightgbm_text.trained`` is ``lgb.train`` to the bit (the model text, best iteration and score, parameters; the
    training data freed), and ``to_forest`` reads the text it wrote when training ended instead of writing it again."""
    from lightgbm_cegb.io import lightgbm_text

    _, _, X, y = categorical_model
    params = {"objective": "regression", "verbose": -1, "num_leaves": 6, "seed": 3, "deterministic": True}

    def fit(train):
        return train(params, lgb.Dataset(X[:200], y[:200]), 200, valid_sets=[lgb.Dataset(X[200:], y[200:])],
                     callbacks=[lgb.early_stopping(5, verbose=False)])

    own, kept = fit(lgb.train), fit(lightgbm_text.trained)
    assert kept.model_to_string() == own.model_to_string() and 0 < kept.best_iteration == own.best_iteration
    assert kept.best_score == own.best_score and kept.params == own.params
    assert not hasattr(own, "train_set") and not hasattr(kept, "train_set")  # freed
    written = []
    original = lgb.Booster.model_to_string
    monkeypatch.setattr(lgb.Booster, "model_to_string",
                        lambda self, num_iteration=None, **kw: written.append(num_iteration) or original(
                            self, num_iteration=num_iteration, **kw))
    assert write_text(to_forest(kept)) == own.model_to_string()
    assert -1 not in written  # the cache's identity only


def test_to_forest_without_the_cache_reads_an_edited_loaded_or_trained_booster_again(categorical_model):
    """The text a Booster loaded (``loaded``) or wrote when its training ended (``trained``) is not what
    ``to_forest(cache=False)`` reads: an earlier tree edited in place since is in the forest it returns."""
    from lightgbm_cegb.io import lightgbm_text

    _, text, X, y = categorical_model
    params = {"objective": "regression", "verbose": -1, "num_leaves": 6}
    for booster in (lightgbm_text.loaded(text), lightgbm_text.trained(params, lgb.Dataset(X, y), 3)):
        booster.set_leaf_output(0, 0, 123.0)  # the first tree: the identity (the last iteration's text) is the same
        forest = to_forest(booster, cache=False)
        assert write_text(forest) == booster.model_to_string()
        np.testing.assert_array_equal(forest.raw_score(X, forest.apply(X))[:, 0], booster.predict(X, raw_score=True))


def test_cli_reads_stdin_once(categorical_model, tmp_path):
    import subprocess
    import sys

    booster, _, X, _ = categorical_model
    path = tmp_path / "model.txt"
    booster.save_model(path)
    rows = np.tile(X, (4, 1))[:1000]
    data = "\n".join(",".join(["0"] + [repr(float(v)) for v in row]) for row in rows) + "\n"
    assert len(data) > 8192 * 4
    proc = subprocess.run([sys.executable, "-m", "lightgbm_cegb.cli", "cost", str(path), "/dev/stdin",
                           "--costs", str(_cost_file(tmp_path)), "--format", "json"],
                          input=data, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rows"] == 1000


def _cost_file(tmp_path):
    path = tmp_path / "costs.txt"
    path.write_text("1\n2\n3\n4\n")
    return path


@settings(max_examples=40, deadline=None, derandomize=True)
@given(model_and_data(), st.data())
def test_a_slice_of_trees_routes_and_scores_as_the_forest(case, data):
    """Forest.trees(start, stop): random models (categorical splits, NaN, zero as missing, one-leaf trees, several
    classes) cut to whole iterations route every row to the leaves the whole forest's trees give, with their values."""
    booster, X, _ = case
    forest = to_forest(booster)
    if forest.linear is not None:
        with pytest.raises(CEGBError, match="slicing linear trees"):
            forest.trees(0, forest.trees_per_iteration)
        return
    per, iterations = forest.trees_per_iteration, forest.num_iterations
    first = data.draw(st.integers(0, iterations - 1))
    last = data.draw(st.integers(first + 1, iterations))
    part = forest.trees(first * per, last * per)
    leaves = forest.apply(X)[:, first * per:last * per]
    np.testing.assert_array_equal(part.apply(X), leaves)
    np.testing.assert_array_equal(part.leaf_values(X, part.apply(X)), forest.leaf_values(X, forest.apply(X))[
        :, first * per:last * per])
    assert set(part.used_features()) <= set(forest.used_features())
    for start, stop in ((per, per), (0, forest.num_trees + per), (1, per + 1) if per > 1 else (-1, per)):
        with pytest.raises(CEGBError, match="start and stop should be whole iterations"):
            forest.trees(start, stop)
