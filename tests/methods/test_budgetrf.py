"""BudgetRF: the threshold-Pairs impurity's properties, GreedyTree's node choice against a brute-force Python
reference, trees against the forest core's routing, the budget on validation rows, bad input."""

from __future__ import annotations

import itertools
import textwrap

import numpy as np
import pytest
from conftest import run_python
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.utils.estimator_checks import parametrize_with_checks

from lightgbm_cegb import CEGBError, FeatureCosts, LazyPredictor, prediction_cost
from lightgbm_cegb._budgetrf import best_split, grow_tree, pairs_impurity
from lightgbm_cegb.methods.budgetrf import BudgetRFClassifier, _forest


def reference_impurity(counts, alpha):
    return sum(max(max(a - alpha, 0) * max(b - alpha, 0) - alpha**2, 0)
               for (i, a), (j, b) in itertools.permutations(enumerate(counts), 2))


counts_st = st.lists(st.integers(0, 50), min_size=1, max_size=6).map(lambda c: np.array(c, dtype=float))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(counts_st, st.sampled_from([0.0, 1.0, 2.5, 7.0]), st.data())
def test_impurity_properties(counts, alpha, data):
    value = pairs_impurity(counts, alpha)
    assert value == pytest.approx(reference_impurity(counts, alpha), rel=1e-12, abs=1e-12)
    # zero exactly on pure-enough nodes: at most one class has more than alpha rows
    if (counts > alpha).sum() <= 1:
        assert value == 0.0
    # monotone under refinement: a subset of the rows is never more impure
    part = np.array([data.draw(st.integers(0, int(c))) for c in counts], dtype=float)
    assert pairs_impurity(part, alpha) <= value
    if alpha == 0.0:
        assert value == 0.0 or (counts > 0).sum() >= 2


def reference_choice(X, y, rows, cost, used, classes, alpha, drawn, group_of=None, group_cost=()):
    """Every (feature, drawn threshold) scored as the module docstring says, the best by (risk, tie, feature,
    threshold); used: flags per feature, then per group."""
    group_of = np.full(X.shape[1], -1) if group_of is None else group_of
    total = np.bincount(y[rows], minlength=classes).astype(float)
    impurity = reference_impurity(total, alpha)
    best = None
    for t in range(X.shape[1]):
        c = (0.0 if used[t] else cost[t]) + (group_cost[group_of[t]] if group_of[t] >= 0
                                              and not used[X.shape[1] + group_of[t]] else 0.0)
        for v in drawn[t][~np.isnan(drawn[t])]:
            left = np.bincount(y[rows][X[rows, t] <= v], minlength=classes).astype(float)
            right = total - left
            if left.sum() in (0, len(rows)):
                continue
            drops = impurity - reference_impurity(left, alpha), impurity - reference_impurity(right, alpha)
            if min(drops) <= 0:
                continue
            tie = 1 / min(drops)
            key = (c * tie, tie)
            if best is None or key < best[0]:
                best = (key, t, v)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_node_choice_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, m, classes = int(rng.integers(30, 700)), int(rng.integers(1, 5)), int(rng.integers(2, 4))
    X = np.round(rng.normal(size=(n, m)), int(rng.integers(0, 3)))  # rounding: ties and repeated values
    y = rng.integers(0, classes, n).astype(np.int32)
    rows = rng.choice(n, size=int(rng.integers(2, n)), replace=True).astype(np.int32)
    cost = rng.choice([0.0, 1.0, 2.0, 5.0], m)
    group_of = rng.integers(-1, 2, m).astype(np.int32)  # groups 0 and 1 (possibly empty), -1: none
    group_cost = rng.choice([0.0, 3.0, 8.0], 2)
    used = (rng.random(m + 2) < 0.3).astype(np.uint64)
    alpha = float(rng.choice([0.0, 1.0, 3.0]))
    feature, threshold, risk, tie, drawn = best_split(X, y, rows, cost, group_of, group_cost, used, classes, alpha,
                                                      seed + 1)
    expected = reference_choice(X, y, rows, cost, used, classes, alpha, drawn, group_of, group_cost)
    if expected is None:
        assert feature == -1
        return
    assert (feature, threshold) == (expected[1], expected[2])
    assert (risk, tie) == pytest.approx(expected[0], rel=1e-12)
    size = len(rows)
    k = 80 if size > 2000 else 40 if size > 500 else 20
    assert (~np.isnan(drawn)).sum(axis=1).max() <= k


def test_trees_route_their_sample_to_their_leaves():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 5)).astype(np.float32).astype(np.float64)
    y = ((X[:, 0] > 0) + (X[:, 1] > 0.5) + (X[:, 4] < -1)).astype(np.int32)
    sample = rng.integers(0, 3000, 3000)
    for alpha, depth, free in [(0.0, 2**62, False), (3.0, 6, False), (0.0, 2**62, True)]:
        tree = grow_tree(X, y, sample, np.array([1.0, 2, 3, 4, 5]), np.array([-1, 0, 0, -1, -1], dtype=np.int32),
                         np.array([2.0]), 4, alpha, depth, 2, free, 9)
        forest = _forest([tree], 5, None)
        leaves = forest.apply(X[sample])
        counts = np.zeros_like(tree[4])
        np.add.at(counts, (leaves[:, 0], y[sample]), 1)
        np.testing.assert_array_equal(counts, tree[4])
        impurity = np.array([pairs_impurity(c, alpha) for c in tree[4]])
        assert (impurity == 0).mean() > 0.5 or depth < 2**62  # grown until pure unless the depth stops it


@pytest.fixture(scope="module")
def xor_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(6000, 6))
    y = ((X[:, 0] > 0) ^ (X[:, 1] > 0.5)).astype(int)
    return X[:3000], y[:3000], X[3000:4500], y[3000:4500], X[4500:], y[4500:]


def test_accuracy_cost_and_free_path(xor_data):
    X, y, Xv, yv, Xt, yt = xor_data
    costs = [1, 1, 5, 5, 5, 5]
    model = BudgetRFClassifier(feature_costs=costs, n_estimators=15, random_state=0).fit(X, y)
    assert (model.predict(Xt) == yt).mean() > 0.97
    report = model.prediction_cost(Xt)
    assert report.mean <= 2.0 + 1e-12 and report.usage[2:].max() < 0.05
    free = BudgetRFClassifier(feature_costs=costs, n_estimators=15, free_path=True, random_state=0).fit(X, y)
    assert (free.predict(Xt) == yt).mean() < 0.7  # the documented failure of "free on the path"


def test_groups(xor_data):
    """Groups of one member (own cost 0) grow the forest of per-feature costs; a group whose cost dominates
    steers the forest to the features outside it, and the budget holds with groups (the exact cost state)."""
    X, y, Xv, yv, Xt, _ = xor_data
    costs = [1.0, 1.0, 5.0, 5.0, 5.0, 5.0]
    plain = BudgetRFClassifier(feature_costs=costs, n_estimators=5, random_state=0).fit(X, y)
    single = FeatureCosts(lazy=np.zeros(6), groups=list(range(6)), group_lazy=costs)
    grouped = BudgetRFClassifier(feature_costs=single, n_estimators=5, random_state=0).fit(X, y)
    for field in ("feature", "threshold", "left", "right", "leaf_value"):
        np.testing.assert_array_equal(getattr(plain.forest_, field), getattr(grouped.forest_, field))
    heavy = FeatureCosts(lazy=np.ones(6), groups=[0, 0, -1, -1, -1, -1], group_lazy=[100.0])
    steered = BudgetRFClassifier(feature_costs=heavy, n_estimators=5, max_depth=3, random_state=0).fit(X, y)
    assert steered.prediction_cost(Xt).usage[:2].max() < plain.prediction_cost(Xt).usage[:2].max()
    budget = BudgetRFClassifier(feature_costs=heavy, budget=60.0, n_estimators=20, random_state=0).fit(X, y, X_valid=Xv)
    assert budget.valid_cost_ <= 60.0 and budget.prediction_cost(Xv).mean == pytest.approx(budget.valid_cost_)


def test_budget_is_respected_on_validation(xor_data):
    X, y, Xv, yv, _, _ = xor_data
    costs = [1, 3, 2, 2, 5, 5]
    full = BudgetRFClassifier(feature_costs=costs, n_estimators=12, tradeoff=2.0, random_state=4).fit(X, y)
    curve = [prediction_cost(full, Xv, costs, num_iteration=k).mean for k in range(1, 13)]
    for budget in (curve[0] + 1e-9, (curve[2] + curve[3]) / 2, curve[-1] + 1):
        model = BudgetRFClassifier(feature_costs=costs, n_estimators=12, tradeoff=2.0, random_state=4, budget=budget)
        model.fit(X, y, X_valid=Xv)
        k = model.n_estimators_
        assert model.valid_cost_ == pytest.approx(model.prediction_cost(Xv).mean, rel=1e-12)
        assert model.valid_cost_ <= budget
        assert k == 12 or curve[k] > budget  # the next tree would have passed the budget
        np.testing.assert_array_equal(model.forest_.feature, full.forest_.feature[:model.forest_.node_offset[-1]])
    with pytest.raises(CEGBError, match="the first tree alone costs more than"):
        BudgetRFClassifier(feature_costs=costs, n_estimators=3, random_state=4,
                           budget=curve[0] / 10).fit(X, y, X_valid=Xv)


def test_reproducible_and_served_lazily(xor_data):
    X, y, _, _, Xt, _ = xor_data
    a = BudgetRFClassifier(n_estimators=6, random_state=3, n_jobs=1).fit(X, y)
    b = BudgetRFClassifier(n_estimators=6, random_state=3, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(a.forest_.threshold, b.forest_.threshold)
    np.testing.assert_array_equal(a.predict_proba(Xt), b.predict_proba(Xt))
    score = a.ranking_score(Xt)
    assert ((score >= 0) & (score <= 1)).all()
    lazy = LazyPredictor(a, lambda f, ids: Xt[ids, f], feature_keys="index").acquire(np.full_like(Xt, np.nan))
    np.testing.assert_array_equal(lazy.prediction, a.predict(Xt))
    np.testing.assert_allclose(lazy.per_instance, a.prediction_cost(Xt).per_instance)


@pytest.mark.parametrize(("kwargs", "fit_kwargs", "message"), [
    ({"budget": 0}, {}, "budget should be None or a finite number > 0, got 0"),
    ({"budget": 5.0}, {}, r"pass fit\(X, y, X_valid=...\)"),
    ({"tradeoff": -1}, {}, "tradeoff should be a finite number >= 0, got -1"),
    ({"max_depth": 0}, {}, "max_depth should be None or an integer >= 1, got 0"),
    ({"n_estimators": 0}, {}, "n_estimators should be an integer >= 1, got 0"),
    ({"feature_costs": [1.0, 2.0]}, {}, "costs are for 2 features but the model has 6"),
])
def test_bad_input(xor_data, kwargs, fit_kwargs, message):
    X, y = xor_data[:2]
    with pytest.raises(CEGBError, match=message):
        BudgetRFClassifier(**kwargs).fit(X, y, **fit_kwargs)


def test_a_missing_value_is_read_as_zero_in_fit_prediction_and_cost(xor_data):
    """30% NaN: the forest grown on the rows is the one grown on them with 0.0 in place of each NaN (the rule of
    missing type None, which its splits carry), and a row with NaN predicts, routes and pays as that row with
    0.0: a split on a feature the row misses is paid all the same."""
    X, y, Xv = xor_data[0].copy(), xor_data[1], xor_data[2].copy()
    rng = np.random.default_rng(3)
    X[rng.random(X.shape) < 0.3] = np.nan
    Xv[rng.random(Xv.shape) < 0.3] = np.nan
    zero_X, zero_Xv = np.nan_to_num(X), np.nan_to_num(Xv)
    costs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    kwargs = {"feature_costs": costs, "n_estimators": 8, "budget": 40.0, "random_state": 0}
    missing = BudgetRFClassifier(**kwargs).fit(X, y, X_valid=Xv)
    zeros = BudgetRFClassifier(**kwargs).fit(zero_X, y, X_valid=zero_Xv)
    assert missing.n_estimators_ == zeros.n_estimators_ and missing.valid_cost_ == zeros.valid_cost_
    for field in ("feature", "threshold", "left", "right", "leaf_value"):
        np.testing.assert_array_equal(getattr(missing.forest_, field), getattr(zeros.forest_, field))
    np.testing.assert_array_equal(missing.predict_proba(Xv), zeros.predict_proba(zero_Xv))
    np.testing.assert_array_equal(missing.forest_.apply(Xv), missing.forest_.apply(zero_Xv))
    np.testing.assert_array_equal(missing.prediction_cost(Xv).per_instance,
                                  missing.prediction_cost(zero_Xv).per_instance)


@parametrize_with_checks([BudgetRFClassifier(n_estimators=5, random_state=0)])
def test_scikit_learn_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("classes", [2, 3])
def test_lightgbm_export_predicts_identically_in_stock_lightgbm(tmp_path, classes):
    rng = np.random.default_rng(classes)
    X = rng.normal(size=(1500, 4))
    y = np.digitize(X[:, 0] + X[:, 1] * X[:, 2], [0.0] if classes == 2 else [-0.5, 0.5])
    costs = [1.0, 2.0, 4.0, 8.0]
    model = BudgetRFClassifier(feature_costs=costs, n_estimators=6, random_state=1).fit(X, y)
    # rows at, just below and just above where float32 rounding of each threshold changes
    threshold = model.forest_.threshold.astype(np.float32)
    edge = (threshold.astype(np.float64) + np.nextafter(threshold, np.float32(np.inf)).astype(np.float64)) / 2
    values = np.concatenate([edge, np.nextafter(edge, -np.inf), np.nextafter(edge, np.inf), threshold])
    Xt = rng.normal(size=(len(values), 4))
    Xt[np.arange(len(values)), np.tile(model.forest_.feature, 4)] = values
    missing = rng.normal(size=(300, 4))
    missing[rng.random(missing.shape) < 0.3] = np.nan  # read as 0.0 by both
    Xt = np.vstack([Xt, rng.normal(size=(500, 4)), missing])
    path = tmp_path / "budgetrf.txt"
    path.write_text(model.to_lightgbm())
    np.save(tmp_path / "X.npy", Xt)
    p_file, X_file = str(tmp_path / "p.npy"), str(tmp_path / "X.npy")
    result = run_python(textwrap.dedent(f"""
        import lightgbm, numpy as np
        assert "+cegb" not in lightgbm.__version__, lightgbm.__version__
        np.save({p_file!r}, lightgbm.Booster(model_file={str(path)!r}).predict(np.load({X_file!r})))
        """), stock=True)
    assert result.returncode == 0, result.stderr
    expected = model.predict_proba(Xt)
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), expected[:, 1] if classes == 2 else expected)
    exported = prediction_cost(str(path), Xt, costs)
    np.testing.assert_array_equal(exported.per_instance, model.prediction_cost(Xt).per_instance)


def test_a_prefix_is_the_forest_of_its_first_trees():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 5))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    forest = BudgetRFClassifier(feature_costs=FeatureCosts(lazy=[1.0, 2.0, 3.0, 4.0, 5.0]), n_estimators=6,
                                tradeoff=1.0, random_state=0).fit(X, y)
    for k in (1, 3, 6):
        small = forest.prefix(k)
        assert small.n_estimators_ == k and forest.n_estimators_ == 6
        np.testing.assert_array_equal(small.predict_proba(X), list(forest.staged_predict_proba(X))[k - 1])
        assert small.prediction_cost(X).mean == prediction_cost(forest, X, num_iteration=k).mean
    with pytest.raises(CEGBError, match=r"n_trees should be an integer in \[1, 6\], got 7"):
        forest.prefix(7)


def reference_tree(X, y, sample, cost, classes, alpha, max_depth, seed):
    """GreedyTree grown in Python as the module docstring says (no groups, free_path False, min_samples_split
    2): the tree's xorshift64* stream drawn node after node, depth first, left first; at a node, for each
    feature in turn, k row positions; the drawn values sorted stably and deduplicated keeping the first (so a
    zero keeps the sign of the first zero drawn); rows with x <= threshold swapped to the front."""
    mask, state, rows = 2**64 - 1, int(seed) | 1, [int(r) for r in sample]
    feature, threshold, left, right, leaves = [], [], [], [], []
    stack = [(0, len(rows), 0, -1, 0)]
    while stack:
        start, stop, depth, parent, side = stack.pop()
        node_rows = np.array(rows[start:stop])
        total = np.bincount(y[node_rows], minlength=classes).astype(float)
        best = None
        if reference_impurity(total, alpha) > 0 and depth < max_depth and stop - start >= 2:
            size = stop - start
            k = 80 if size > 2000 else 40 if size > 500 else 20
            drawn = np.full((X.shape[1], 80), np.nan)
            for t in range(X.shape[1]):
                values = []
                for _ in range(k):
                    state ^= state >> 12
                    state ^= (state << 25) & mask
                    state ^= state >> 27
                    values.append(X[node_rows[((state * 2685821657736338717) & mask) % size], t])
                values = sorted(values)
                distinct = [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]
                drawn[t, :len(distinct)] = distinct
            best = reference_choice(X, y, node_rows, cost, np.zeros(X.shape[1]), classes, alpha, drawn)
        if best is None:
            leaves.append(total)
            code = ~(len(leaves) - 1)
        else:
            mid = start
            for i in range(start, stop):
                if X[rows[i], best[1]] <= best[2]:
                    rows[i], rows[mid] = rows[mid], rows[i]
                    mid += 1
            feature.append(best[1])
            threshold.append(best[2])
            left.append(0)
            right.append(0)
            code = len(feature) - 1
            stack += [(mid, stop, depth + 1, code, 1), (start, mid, depth + 1, code, 0)]
        if parent >= 0:
            (left if side == 0 else right)[parent] = code
    return feature, threshold, left, right, leaves


@pytest.mark.parametrize(("n", "alpha", "max_depth"), [(300, 0.0, 2**62), (2600, 2.0, 6)])
def test_whole_tree_against_python_reference(n, alpha, max_depth):
    """Whole trees, not one node: the draws of every node (including those of small nodes, of k = 20, 40, 80,
    and zeros of both signs: np.round makes -0.0), the partition's order and the numbering, bit for bit,
    whatever X's memory order and however much of the tree is grown on a subtree's own copy of the values."""
    rng = np.random.default_rng(n)
    X = np.round(rng.normal(size=(n, 3)) * [1.0, 3.0, 0.7], 1)
    X[:, 2] = np.round(X[:, 2])  # zeros of both signs
    y = (np.digitize(X[:, 0] + X[:, 1] / 3, [-0.5, 0.5]) + (rng.random(n) < 0.15)) % 3
    y = y.astype(np.int32)
    sample = rng.integers(0, n, n)
    cost = np.array([1.0, 2.0, 0.5])
    expected = reference_tree(X, y, sample, cost, 3, alpha, max_depth, 21)
    assert len(expected[0]) > 20 and (np.signbit(X[:, 2]) & (X[:, 2] == 0)).any()
    for data, local_bytes in [(X, 1 << 24), (np.asfortranarray(X), 0), (X, 1 << 40), (np.asfortranarray(X), 2000)]:
        tree = grow_tree(data, y, sample, cost, np.full(3, -1, dtype=np.int32), np.zeros(0), 3, alpha, max_depth,
                         2, False, 21, local_bytes=local_bytes)
        np.testing.assert_array_equal(tree[0], expected[0])
        np.testing.assert_array_equal(tree[1].view(np.uint64), np.array(expected[1]).view(np.uint64))
        np.testing.assert_array_equal(tree[2], expected[2])
        np.testing.assert_array_equal(tree[3], expected[3])
        np.testing.assert_array_equal(tree[4], np.array(expected[4]))
