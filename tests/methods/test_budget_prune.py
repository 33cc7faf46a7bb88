"""BudgetPrune: the solver's pruning is optimal (brute force on tiny forests), the LP optimum is integral and
matches its dual bound, and the pruned model predicts and costs what the solution says."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from constraints import check_declared
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

from lightgbm_cegb import CEGBError, FeatureCosts, Pruner, budget_prune, budget_prune_path, prediction_cost


def random_case(seed: int, classes: int = 2, n: int = 60, f: int = 4, trees: int = 3, depth: int = 3,
                kind=RandomForestClassifier):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    score = X[:, 0] + rng.normal(0, 0.7, n) + (X[:, 1] * X[:, 2] if f > 2 else 0)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    model = kind(n_estimators=trees, max_depth=depth, random_state=seed, min_samples_leaf=1).fit(X, y)
    costs = rng.choice([0.0, 1.0, 2.0, 5.0, 10.0], size=f)
    return model, X, y, costs


# ------------------------------------------------------------------ an independent reference: brute force


def prunings(tree, node: int = 0) -> list[frozenset]:
    """Every set of new leaves of the subtree at node (a cut through all its root-to-leaf paths)."""
    left, right = tree.children_left[node], tree.children_right[node]
    if left < 0:
        return [frozenset([node])]
    return [frozenset([node])] + [a | b for a in prunings(tree, left) for b in prunings(tree, right)]


def route(tree, x: np.ndarray, leaves: frozenset) -> tuple[int, set]:
    """Walk one row down scikit-learn's own arrays, stopping at the first new leaf."""
    node, used = 0, set()
    while node not in leaves:
        used.add(int(tree.feature[node]))
        node = tree.children_left[node] if x[tree.feature[node]] <= tree.threshold[node] else tree.children_right[node]
    return node, used


def brute_force_optimum(model, X, y, costs, tradeoff, group_of=None, group_lazy=()):
    """The least objective over every combination of the trees' prunings; group_of[k] = g (-1: none) makes a
    row pay group_lazy[g] once when it uses any member of g."""
    X32 = X.astype(np.float32)
    label = np.searchsorted(model.classes_, y)
    options = []  # per tree: (error count, per-row bitmask of the features used) for every pruning
    for estimator in model.estimators_:
        tree = estimator.tree_
        per_tree = []
        for leaves in prunings(tree):
            error, masks = 0, np.zeros(len(X), dtype=np.int64)
            for i, x in enumerate(X32):
                node, used = route(tree, x, leaves)
                error += int(np.argmax(tree.value[node, 0]) != label[i])
                masks[i] = sum(1 << k for k in used)
            per_tree.append((error, masks))
        options.append(per_tree)
    group_of = np.full(len(costs), -1) if group_of is None else np.asarray(group_of)
    mask_cost = np.array([sum(costs[k] for k in range(len(costs)) if m >> k & 1)
                          + sum(c for g, c in enumerate(group_lazy)
                                if any(m >> k & 1 for k in np.flatnonzero(group_of == g)))
                          for m in range(1 << len(costs))])
    best = np.inf
    for combo in itertools.product(*options):
        error = sum(e for e, _ in combo)
        masks = np.bitwise_or.reduce([m for _, m in combo])
        best = min(best, error / len(X) + tradeoff * mask_cost[masks].sum() / len(X))
    return best


@pytest.mark.parametrize("solver", ["maxflow", "highs"])
@pytest.mark.parametrize("seed", range(8))
def test_optimal_against_brute_force(seed, solver):
    model, X, y, costs = random_case(seed, classes=2 + seed % 2, n=30, trees=2 + seed % 2, depth=3)
    for tradeoff in (0.0, 0.02, 0.1, 0.5):
        result = budget_prune(model, X, y, costs, tradeoff, solver=solver)
        assert result.objective == pytest.approx(brute_force_optimum(model, X, y, costs, tradeoff), rel=1e-9, abs=1e-12)
        assert result.lower_bound == pytest.approx(result.objective, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(40))
def test_maxflow_equals_the_highs_lp(seed):
    """Larger random forests than brute force can enumerate: the max-flow solver's objective is the LP
    optimum HiGHS finds (whose solution is checked integral), at several trade-offs."""
    kind = ExtraTreesClassifier if seed % 4 == 0 else RandomForestClassifier
    model, X, y, costs = random_case(300 + seed, classes=2 + seed % 4, n=150, f=5, trees=5, depth=6, kind=kind)
    for tradeoff in (0.0, 0.003, 0.03, 0.3):
        lp = budget_prune(model, X, y, costs, tradeoff, solver="highs")
        flow = budget_prune(model, X, y, costs, tradeoff, solver="maxflow")
        assert flow.objective == pytest.approx(lp.objective, rel=1e-9, abs=1e-12)
        assert flow.lower_bound == pytest.approx(flow.objective, rel=1e-9, abs=1e-12)


# ----------------------------------------------------------------------------- the LP and the pruned model


def stop_at_kept_leaf(model, result, X):
    """Class probabilities of "route each row in the input trees and stop at the first new leaf"."""
    X32 = X.astype(np.float32)
    proba = np.zeros((len(X), len(model.classes_)))
    for estimator, leaves in zip(model.estimators_, result.leaves):
        tree = estimator.tree_
        new_leaves = frozenset(np.flatnonzero(leaves).tolist())
        for i, x in enumerate(X32):
            node, _ = route(tree, x, new_leaves)
            proba[i] += tree.value[node, 0] / tree.value[node, 0].sum()
    return proba / len(model.estimators_)


@pytest.mark.parametrize("seed", range(12))
def test_lp_is_integral_tight_and_the_pruned_model_agrees(seed):
    kind = ExtraTreesClassifier if seed % 3 == 0 else RandomForestClassifier
    model, X, y, costs = random_case(100 + seed, classes=2 + seed % 4, n=80, f=5, trees=4, depth=5, kind=kind)
    tradeoff = [0.0, 0.01, 0.05, 0.3][seed % 4]
    result = budget_prune(model, X, y, costs, tradeoff, solver="highs")
    assert result.lower_bound == pytest.approx(result.objective, rel=1e-9, abs=1e-12)
    assert result.objective == pytest.approx(result.error + tradeoff * result.cost, rel=1e-12)
    pruned = result.model
    assert type(pruned) is type(model) and pruned is not model
    np.testing.assert_allclose(pruned.predict_proba(X), stop_at_kept_leaf(model, result, X), rtol=1e-12)
    report = prediction_cost(pruned, X, FeatureCosts(lazy=costs))
    assert float(np.mean(report.per_instance)) == pytest.approx(result.cost, rel=1e-12, abs=1e-12)
    for estimator, kept, leaves in zip(pruned.estimators_, result.kept, result.leaves):
        assert estimator.tree_.node_count == kept.sum()
        assert estimator.tree_.n_leaves == leaves.sum()
    # error term: each pruned tree's misclassified rows, summed over trees, per row
    errors = sum((est.predict(X.astype(np.float32)).astype(int) != np.searchsorted(model.classes_, y)).sum()
                 for est in pruned.estimators_)
    assert result.error == pytest.approx(errors / len(X), rel=1e-12)


def test_input_model_is_untouched():
    model, X, y, costs = random_case(5, trees=3, depth=4)
    before = [est.tree_.node_count for est in model.estimators_]
    proba = model.predict_proba(X)
    budget_prune(model, X, y, costs, 1.0)
    assert [est.tree_.node_count for est in model.estimators_] == before
    np.testing.assert_array_equal(model.predict_proba(X), proba)


def test_path_is_a_monotone_frontier():
    model, X, y, costs = random_case(7, classes=3, n=120, f=5, trees=4, depth=6)
    tradeoffs = [0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0]
    path = budget_prune_path(model, X, y, costs, tradeoffs)
    costs_along, errors_along = [r.cost for r in path], [r.error for r in path]
    assert all(b <= a + 1e-12 for a, b in zip(costs_along, costs_along[1:]))
    assert all(b >= a - 1e-12 for a, b in zip(errors_along, errors_along[1:]))
    assert costs_along[0] > costs_along[-1] == 0.0


@pytest.mark.parametrize("solver", ["maxflow", "highs"])
def test_budget_target_is_the_least_error_pruning_within_budget(solver):
    model, X, y, costs = random_case(7, classes=3, n=120, f=5, trees=4, depth=6)
    grid = budget_prune_path(model, X, y, costs, np.linspace(0.0, 1.0, 201))
    full = grid[0].cost
    for budget in [0.0, 0.1 * full, 0.35 * full, 0.6 * full, 0.9 * full, full, 2 * full]:
        result = budget_prune(model, X, y, costs, budget=budget, solver=solver)
        assert result.cost <= budget + 1e-12
        assert result.error <= min(r.error for r in grid if r.cost <= budget) + 1e-12
        at = budget_prune(model, X, y, costs, result.tradeoff, solver=solver)  # optimal at its tradeoff
        assert at.objective == pytest.approx(result.objective, rel=1e-9, abs=1e-12)
        if budget < full:  # and the smallest such tradeoff: just below it the optimum costs more
            assert budget_prune(model, X, y, costs, result.tradeoff * (1 - 1e-6), solver=solver).cost > budget
        else:
            assert result.tradeoff == 0.0


def test_budget_target_bad_input(small):
    model, X, y, costs = small
    with pytest.raises(CEGBError, match="give either tradeoff or budget, got tradeoff=0.1 and budget=3"):
        budget_prune(model, X, y, costs, 0.1, budget=3)
    with pytest.raises(CEGBError, match="give either tradeoff or budget, got tradeoff=None and budget=None"):
        budget_prune(model, X, y, costs)
    with pytest.raises(CEGBError, match="budget should be None or a finite number >= 0, got -1"):
        budget_prune(model, X, y, costs, budget=-1)


# ------------------------------------------------------------------------------------------------ bad input


@pytest.fixture(scope="module")
def small():
    return random_case(3)


@pytest.mark.parametrize(("change", "message"), [
    (lambda m, X, y, c: (m, X, y, c, -0.1), r"tradeoff should be None or a finite number >= 0, got -0.1"),
    (lambda m, X, y, c: (m, X, y, c, float("nan")), r"tradeoff should be None or a finite number >= 0, got nan"),
    (lambda m, X, y, c: (m, X, y, c, "big"), r"tradeoff should be None or a finite number >= 0, got 'big'"),
    (lambda m, X, y, c: (m, X[:, :3], y, c, 0.1), r"X has 3 features but the model has 4"),
    (lambda m, X, y, c: (m, X[:0], y[:0], c, 0.1), r"X should hold at least one row"),
    (lambda m, X, y, c: (m, X, y[:-1], c, 0.1), r"y should have one label per row of X \(60\), got 59"),
    (lambda m, X, y, c: (m, X, np.where(y == 1, 7, y), c, 0.1), r"labels the model was not trained on: \[7\]"),
    (lambda m, X, y, c: (m, X, y, [1.0, np.inf, 1.0, 1.0], 0.1),
     r"lazy costs should be finite and >= 0, got inf for feature 1"),
    (lambda m, X, y, c: (m, X, y, [1.0, 1.0], 0.1), r"costs are for 2 features but the model has 4"),
    (lambda m, X, y, c: (object(), X, y, c, 0.1), r"model should be a fitted RandomForestClassifier, "
                                                    r"ExtraTreesClassifier, a lightgbm.Booster or a fitted "
                                                    r"LightGBM estimator, got object"),
])
def test_bad_input_is_rejected(small, change, message):
    with pytest.raises(CEGBError, match=message):
        model, X, y, costs, tradeoff = change(*small)
        budget_prune(model, X, y, costs, tradeoff)


def test_unknown_solver_is_rejected(small):
    with pytest.raises(CEGBError, match=r"solver should be one of \['maxflow', 'highs'\], got 'simplex'"):
        budget_prune(*small, 0.1, solver="simplex")


def test_the_declared_parameters_refuse_what_they_say(small):
    """budget_prune, budget_prune_path, Pruner and its methods declare every parameter and refuse each invalid value
    at entry (before the problem is built: a model of None is not reached); the functions leave what they build a
    Pruner from to its check."""
    unread = {"model": None, "X": None, "y": None, "costs": None}
    assert check_declared(budget_prune, unread) >= 8
    assert check_declared(budget_prune_path, {**unread, "tradeoffs": []}) >= 6
    assert check_declared(Pruner, unread) >= 4
    pruner = Pruner(*small)
    for method, valid in ((pruner.path, {"tradeoffs": [0.1]}), (pruner.at, {"tradeoff": 0.1}),
                          (pruner.within, {"budget": 1.0})):
        assert check_declared(method, valid) >= 4


# ------------------------------------------------------------------------------------------------ LightGBM

lgb = pytest.importorskip("lightgbm")  # always installed: the patched build
from lightgbm_cegb import to_forest  # noqa: E402
from lightgbm_cegb.io.lightgbm_text import write_text  # noqa: E402


def tree_nodes(forest):
    """Per tree: (parent, feature with -1 at leaves, node values) in Forest's one numbering."""
    out = []
    for t in range(forest.num_trees):
        s, s1 = forest.node_offset[t], forest.node_offset[t + 1]
        parent = forest.parents(t)
        feature = np.concatenate([forest.feature[s:s1], np.full(s1 - s + 1, -1)])
        value = np.concatenate([forest.internal_value[s:s1],
                                forest.leaf_value[forest.leaf_offset[t]:forest.leaf_offset[t + 1]]])
        out.append((parent, feature, value))
    return out


def cut_booster(forest, leaves):
    return lgb.Booster(model_str=write_text(forest.cut(leaves)))


def lightgbm_case(seed: int, objective: str, trees: int = 3, leaves: int = 5, n: int = 120,
                  categorical: bool = False, **extra):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random(X.shape) < 0.05] = np.nan
    signal = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1] * X[:, 2]) + rng.normal(0, 0.5, n)
    params = {"objective": objective, "num_leaves": leaves, "min_data_in_leaf": 3, "verbose": -1, "seed": seed,
              **extra}
    if categorical:  # feature 3: 8 categories, three of them shifting the signal
        X[:, 3] = rng.integers(0, 8, n)
        signal += 2.0 * np.isin(X[:, 3], (1, 4, 6))
        params.update(min_data_per_group=2, cat_smooth=1.0)
    if objective == "binary":
        y = (signal > 0).astype(float)
    elif objective == "multiclass":
        y = np.digitize(signal, [-0.5, 0.5]).astype(float)
        params["num_class"] = 3
    else:
        y = signal
    booster = lgb.train(params, lgb.Dataset(X, y, categorical_feature=[3] if categorical else "auto"), trees)
    return booster, X, y, rng.choice([0.0, 1.0, 3.0, 10.0], size=4)


def tree_outputs(booster, X):
    """Each tree's output per row (raw score contribution), from LightGBM's own predict."""
    per_iteration = booster.num_model_per_iteration()
    out = []
    for it in range(booster.num_trees() // per_iteration):
        raw = booster.predict(X, raw_score=True, start_iteration=it, num_iteration=1).reshape(len(X), -1)
        out += [raw[:, c] for c in range(per_iteration)]
    return out


def random_cut(parent: np.ndarray, feature: np.ndarray, rng) -> np.ndarray:
    """New leaves: from the root down, stop at each internal node with probability 1/3."""
    leaf = np.zeros(len(parent), dtype=bool)
    stack = [0] if len(parent) > 1 else []
    if not stack:
        leaf[0] = True
    children = {h: np.flatnonzero(parent == h) for h in range(len(parent))}
    while stack:
        node = stack.pop()
        if feature[node] < 0 or rng.random() < 1 / 3:
            leaf[node] = True
        else:
            stack += list(children[node])
    return leaf


@pytest.mark.parametrize(("objective", "categorical"), [
    ("regression", False), ("binary", False), ("multiclass", False), ("regression", True)])
def test_lightgbm_pruned_model_text(objective, categorical, tmp_path):
    """Any cut (not only the optimal one) is written as a model that predicts "stop at the new leaf",
    and stock LightGBM loads it and predicts the same; cutting nothing rewrites the trees byte for byte.
    With a categorical feature, the kept categorical splits keep their category sets."""
    from conftest import run_python
    booster, X, y, _ = lightgbm_case(1, objective, trees=4, leaves=8, categorical=categorical)
    forest = to_forest(booster)
    nodes = tree_nodes(forest)
    original_leaves = [feature < 0 for _, feature, _ in nodes]
    same = cut_booster(forest, original_leaves)
    assert same.model_to_string().split("end of trees")[0] == booster.model_to_string().split("end of trees")[0]

    rng = np.random.default_rng(0)
    for _ in range(50):  # a cut that prunes something and, with categorical splits, keeps one
        leaves = [random_cut(p, f, rng) for p, f, _ in nodes]
        pruned = cut_booster(forest, leaves)
        num_cat = int(np.count_nonzero(to_forest(pruned).decision & 1))
        if (num_cat > 0) == categorical and sum(map(np.sum, leaves)) < sum((f < 0).sum() for _, f, _ in nodes):
            break
    else:
        pytest.fail("no suitable cut in 50 tries")
    expected = np.zeros((len(X), booster.num_model_per_iteration()))
    reached = forest.apply(X)
    for t, leaf in enumerate(leaves):
        parent, _, values = nodes[t]
        n = (len(parent) - 1) // 2
        for i, node in enumerate(n + reached[:, t]):  # the one new leaf on each row's path
            while not leaf[node]:
                node = parent[node]
            expected[i, t % expected.shape[1]] += values[node]
    got = pruned.predict(X, raw_score=True).reshape(len(X), -1)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    path = tmp_path / "pruned.txt"
    pruned.save_model(path)
    np.save(tmp_path / "X.npy", X)
    stock = run_python(f"import numpy as np, lightgbm as lgb; b = lgb.Booster(model_file={str(path)!r}); "
                       f"np.save({str(tmp_path / 'stock.npy')!r}, b.predict(np.load({str(tmp_path / 'X.npy')!r}), "
                       "raw_score=True))", stock=True)
    assert stock.returncode == 0, stock.stderr[-2000:]
    np.testing.assert_array_equal(np.load(tmp_path / "stock.npy").reshape(got.shape), got)


def lightgbm_loss(objective, score, y):
    if objective == "regression":
        return (score[:, 0] - y) ** 2
    if objective == "binary":
        return np.logaddexp(0, np.where(y == 1, -score[:, 0], score[:, 0]))
    return np.logaddexp.reduce(score, axis=1) - score[np.arange(len(y)), y.astype(int)]


@pytest.mark.parametrize(("objective", "extra"), [
    ("regression", {}), ("binary", {}), ("multiclass", {}),
    ("binary", {"boosting": "rf", "bagging_fraction": 0.6, "bagging_freq": 1}),
])
def test_lightgbm_optimal_against_brute_force(objective, extra):
    """The surrogate objective of every pruning, from the pruned boosters' own predictions."""
    trees = 1 if objective == "multiclass" else 2
    booster, X, y, costs = lightgbm_case(2, objective, trees=trees, leaves=4, n=60, **extra)
    forest = to_forest(booster)
    nodes = tree_nodes(forest)
    # rf: the model's score is the trees' average (raw_score=True gives their sum)
    scale = 1 / (booster.num_trees() // booster.num_model_per_iteration()) if "boosting" in extra else 1.0
    score = scale * booster.predict(X, raw_score=True).reshape(len(X), -1)
    outputs = tree_outputs(booster, X)
    options = []
    for parent, feature, _ in nodes:
        cuts = {frozenset(np.flatnonzero(random_cut(parent, feature, np.random.default_rng(s)))) for s in range(300)}
        options.append(sorted(cuts, key=sorted))
    for tradeoff in (0.0, 0.01, 0.1):
        best = np.inf
        for combo in itertools.product(*options):
            leaves = [np.isin(np.arange(len(p)), list(c)) for (p, _, _), c in zip(nodes, combo)]
            pruned = cut_booster(forest, leaves)
            error = 0.0
            for t, output in enumerate(tree_outputs(pruned, X)):
                changed = score.copy()
                changed[:, t % score.shape[1]] += scale * (output - outputs[t])
                error += lightgbm_loss(objective, changed, y).sum()
            cost = float(np.mean(prediction_cost(pruned, X, FeatureCosts(lazy=costs)).per_instance))
            best = min(best, error / len(X) + tradeoff * cost)
        for solver in ("maxflow", "highs"):
            result = budget_prune(booster, X, y, costs, tradeoff, solver=solver)
            assert result.objective == pytest.approx(best, rel=1e-9)
            assert result.lower_bound == pytest.approx(result.objective, rel=1e-9, abs=1e-12)


def test_lightgbm_estimator_comes_back_as_an_estimator():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] + 0.3 * X[:, 1] + 0.2 * X[:, 2] > 0).astype(int)
    model = lgb.LGBMClassifier(n_estimators=5, num_leaves=6, verbose=-1).fit(X, y)
    before = model.booster_.model_to_string()
    costs = FeatureCosts(lazy=[1.0, 5.0, 5.0, 5.0])
    result = budget_prune(model, X, y, costs, 0.05)
    assert isinstance(result.model, lgb.LGBMClassifier) and result.model is not model
    assert model.booster_.model_to_string() == before
    np.testing.assert_allclose(result.model.predict_proba(X)[:, 1], result.model.booster_.predict(X), rtol=1e-15)
    assert float(np.mean(prediction_cost(result.model, X, costs).per_instance)) == pytest.approx(result.cost, rel=1e-12)
    assert result.cost < float(np.mean(prediction_cost(model, X, costs).per_instance))


def test_tiny_cost_coefficients_are_not_lost_in_solver_tolerances():
    """tradeoff * c_k / N at HiGHS's default tolerance (1e-7): the solver must still not pay for pairs it does not
    need (it did once, caught by budget_prune's own check that the pruned model's objective is the LP's)."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 16, size=(3000, 16)).astype(float)
    y = (X[:, 0] + X[:, 1] + rng.normal(0, 4, 3000) > 15).astype(int) + (X[:, 2] > 10)
    model = RandomForestClassifier(n_estimators=8, max_depth=6, random_state=0).fit(X[:1500], y[:1500])
    result = budget_prune(model, X[1500:], y[1500:], np.ones(16), 1e-7 * 1500, solver="highs")
    assert result.lower_bound == pytest.approx(result.objective, rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_warm_started_path_equals_independent_solves(seed):
    """budget_prune_path reuses one flow along increasing trade-offs; any order of tradeoffs (repeats too) gives
    the results of solving each alone, in the given order."""
    model, X, y, costs = random_case(500 + seed, classes=3, n=200, f=5, trees=4, depth=7)
    tradeoffs = [0.3, 0.0, 0.01, 0.3, 0.003, 1.0, 0.03][seed % 3:]
    path = budget_prune_path(model, X, y, costs, tradeoffs)
    assert [r.tradeoff for r in path] == tradeoffs
    for result, tradeoff in zip(path, tradeoffs):
        alone = budget_prune(model, X, y, costs, tradeoff, solver="highs")
        assert result.objective == pytest.approx(alone.objective, rel=1e-9, abs=1e-12)
        assert result.lower_bound == pytest.approx(result.objective, rel=1e-9, abs=1e-12)
    assert budget_prune_path(model, X, y, costs, []) == []


# ------------------------------------------------------------- the implicit network at a larger scale


@pytest.mark.parametrize("seed", range(4))
def test_every_nodes_rows_are_one_range_of_the_layout(seed):
    """The row layout the max-flow network is built on: node h's rows perm[t, lo[h]:hi[h]] are exactly the
    rows scikit-learn's decision_path sends through h."""
    from lightgbm_cegb.io.sklearn_trees import node_ids
    from lightgbm_cegb.methods.budget_prune import _sklearn_problem
    model, X, y, _ = random_case(700 + seed, classes=3, n=400, f=6, trees=3, depth=None)
    problem = _sklearn_problem(model, to_forest(model), X, y, None)
    for t, estimator in enumerate(model.estimators_):
        reach = estimator.decision_path(X.astype(np.float32)).tocsc()
        assert sorted(problem.perm[t]) == list(range(len(X)))
        for node, sklearn_node in enumerate(node_ids(estimator.tree_)):
            expected = reach.indices[reach.indptr[sklearn_node]:reach.indptr[sklearn_node + 1]]
            np.testing.assert_array_equal(np.sort(problem.rows(t, node)), np.sort(expected))


def closure_max_flow_reference(model, X, y, costs, tradeoff, scale):
    """The closure's max-flow value from scipy's own maximum_flow on the explicit graph (built from
    decision_path), with all capacities multiplied by scale to make them integers."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_flow
    label = np.searchsorted(model.classes_, y)
    tails, heads, caps, constant, first, pair_id = [], [], [], 0, 0, {}
    nodes_total = sum(e.tree_.node_count for e in model.estimators_)
    for estimator in model.estimators_:
        tree = estimator.tree_
        reach = estimator.decision_path(X.astype(np.float32)).tocsc()
        wrong = np.array([np.sum(label[reach.indices[reach.indptr[h]:reach.indptr[h + 1]]]
                                 != np.argmax(tree.value[h, 0])) for h in range(tree.node_count)])
        constant += wrong[0]
        for h in range(tree.node_count):
            left, right = tree.children_left[h], tree.children_right[h]
            if left < 0:
                continue
            gain = wrong[h] - wrong[left] - wrong[right]
            constant -= max(gain, 0)
            if gain > 0:
                tails.append(-1), heads.append(first + h), caps.append(scale * gain)
            elif gain < 0:
                tails.append(first + h), heads.append(-2), caps.append(-scale * gain)
            for child in (left, right):
                if tree.children_left[child] >= 0:
                    tails.append(first + child), heads.append(first + h), caps.append(None)
            ancestors, up = set(), h
            while up != 0:
                up = int(np.flatnonzero((tree.children_left == up) | (tree.children_right == up))[0])
                ancestors.add(int(tree.feature[up]))
            k = int(tree.feature[h])
            if k not in ancestors and costs[k] > 0:
                for i in reach.indices[reach.indptr[h]:reach.indptr[h + 1]]:
                    pair = pair_id.setdefault((int(i), k), nodes_total + len(pair_id))
                    tails.append(first + h), heads.append(pair), caps.append(None)
        first += tree.node_count
    for (_, k), pair in pair_id.items():
        tails.append(pair), heads.append(-2), caps.append(round(scale * tradeoff * costs[k]))
    source, sink = nodes_total + len(pair_id), nodes_total + len(pair_id) + 1
    infinite = sum(c for c in caps if c is not None) + 1
    tails = [source if u == -1 else u for u in tails]
    heads = [sink if v == -2 else v for v in heads]
    caps = [infinite if c is None else int(c) for c in caps]
    graph = csr_matrix((np.array(caps, dtype=np.int32), (tails, heads)), shape=(sink + 1, sink + 1))
    graph.sum_duplicates()
    return constant, maximum_flow(graph, source, sink).flow_value / scale


@pytest.mark.parametrize("seed", range(2))
def test_maxflow_at_scale_equals_scipys_maximum_flow(seed, monkeypatch):
    """Thousands of rows and unlimited-depth trees, where push-relabel runs through several global
    relabellings and pairs receive flow from more than one node: the optimum and bound equal those of scipy's
    max-flow on the explicit graph (integer capacities: costs 1, 2, 5 at tradeoff = 0.01 and 0.03, counts and
    costs scaled by 100), also for the second trade-off of a path, which starts from the first one's flow."""
    import lightgbm_cegb._prune as engine
    networks = []

    class Recorded(engine.Network):
        def __init__(self, *args):
            super().__init__(*args)
            networks.append(self)

    monkeypatch.setattr(engine, "Network", Recorded)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(6000, 12))
    y = (X[:, :4].sum(axis=1) + X[:, 4] * X[:, 5] + rng.normal(0, 1, 6000) > 0).astype(int)
    model = RandomForestClassifier(n_estimators=6, min_samples_leaf=2, random_state=seed).fit(X, y)
    costs = rng.choice([1.0, 2.0, 5.0], size=12)
    path = budget_prune_path(model, X, y, costs, [0.03, 0.01])
    assert len(networks) == 1 and networks[0].global_relabels >= 3
    assert networks[0].pool_used > 0  # pairs fed by more than one node (the flows kept beyond one per pair)
    for tradeoff, result in zip([0.03, 0.01], path):
        constant, flow = closure_max_flow_reference(model, X, y, costs, tradeoff, scale=100)
        assert result.lower_bound == pytest.approx((constant + flow) / len(X), rel=1e-9)
        assert result.objective == pytest.approx(result.lower_bound, rel=1e-9)


def test_maxflow_node_ids_in_three_or_four_bytes(monkeypatch):
    """The network stores each pair's nodes in 3 bytes below 2^24 nodes and in 4 above: forced to 4 bytes, the
    pruning of a case with several global relabellings is the same, bit for bit; a width that cannot hold the
    nodes is refused."""
    import lightgbm_cegb._prune as engine
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 10))
    y = (X[:, :4].sum(axis=1) + rng.normal(0, 1, 3000) > 0).astype(int)
    model = RandomForestClassifier(n_estimators=5, min_samples_leaf=2, random_state=3).fit(X, y)
    costs = rng.choice([1.0, 2.0, 5.0], size=10)
    narrow = budget_prune_path(model, X, y, costs, [0.03, 0.01])

    class Wide(engine.Network):
        def __init__(self, *args):
            super().__init__(*args, node_bytes=4)

    monkeypatch.setattr(engine, "Network", Wide)
    wide = budget_prune_path(model, X, y, costs, [0.03, 0.01])
    for a, b in zip(narrow, wide):
        assert (a.objective, a.lower_bound, a.cost) == (b.objective, b.lower_bound, b.cost)
    one = np.zeros(1, dtype=np.int32)
    args = (np.zeros((1, 1), dtype=np.int32), one, one - 1, one, one + 1, one, np.ones(1, dtype=np.uint8),
            np.ones(1), np.ones(1), 0.0)
    with pytest.raises(ValueError, match="node_bytes should be 0, 3 .* or 4, got 5"):
        Wide.__mro__[1](*args, node_bytes=5)


# ------------------------------------------------------------------------------- costs as prediction_cost takes them


def test_costs_by_feature_name_and_from_a_cegb_model():
    """Costs by feature name (a forest fitted on a DataFrame) and costs=None (a CEGB-trained LightGBM model's own
    cegb_penalty_feature_lazy) give the same pruning as the plain per-feature vector."""
    import pandas as pd
    model, X, y, costs = random_case(11, n=120, f=4, trees=3, depth=4)
    names = ["a", "b", "c", "d"]
    frame = pd.DataFrame(X, columns=names)
    named = RandomForestClassifier(n_estimators=3, max_depth=4, random_state=11, min_samples_leaf=1).fit(frame, y)
    by_name = budget_prune(named, frame, y, FeatureCosts(lazy=dict(zip(names[::-1], costs[::-1]))), 0.05)
    plain = budget_prune(named, X, y, costs, 0.05)
    assert by_name.objective == plain.objective and by_name.cost == plain.cost

    booster, Xl, yl, lazy = lightgbm_case(5, "binary")
    cegb = lgb.train({"objective": "binary", "num_leaves": 5, "min_data_in_leaf": 3, "verbose": -1,
                      "cegb_tradeoff": 0.01, "cegb_penalty_feature_lazy": lazy.tolist()}, lgb.Dataset(Xl, yl), 3)
    from_params = budget_prune(cegb, Xl, yl, None, 0.01)
    given = budget_prune(cegb, Xl, yl, lazy, 0.01)
    assert from_params.objective == given.objective and from_params.cost == given.cost


def test_coupled_and_split_costs_are_refused_not_ignored(small):
    model, X, y, costs = small
    with pytest.raises(CEGBError, match=r"lazy \(per-row\) feature and group costs only; got coupled costs for "
                                        r"features \[1\]"):
        budget_prune(model, X, y, FeatureCosts(lazy=costs, coupled=[0, 2.0, 0, 0]), 0.1)
    with pytest.raises(CEGBError, match=r"costs is None and the model was not trained with cegb_\* parameters"):
        budget_prune(model, X, y, None, 0.1)


@pytest.mark.parametrize("solver", ["maxflow", "highs"])
def test_forests_of_single_leaves(solver):
    """Trees without a split (a constant target) have nothing to prune: the model comes back as it was."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)), np.zeros(50)
    booster = lgb.train({"objective": "regression", "verbose": -1}, lgb.Dataset(X, y), 2)
    forest = RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y.astype(int))
    for model in (booster, forest):
        result = budget_prune(model, X, y, [1.0, 1.0, 1.0], 0.1, solver=solver)
        assert result.cost == 0 and result.objective == result.lower_bound == result.error
        assert [leaf.tolist() for leaf in result.leaves] == [[True]] * len(result.leaves)


@pytest.mark.parametrize("objective", ["multiclass num_class:4", "multiclass num_class:1", "binary sigmoid:1.5",
                                       "regression"])
def test_objective_loss_with_one_class_moved(objective):
    """The per-pair loss (one class's raw score moved by delta) equals the loss of the moved score vector."""
    from lightgbm_cegb.methods.budget_prune import _objective_loss

    rng = np.random.default_rng(5)
    num_class = int(objective.split("num_class:")[1]) if "num_class" in objective else 1
    score = rng.normal(0, 3, size=(200, num_class))
    score[:5, 0] = 40.0  # a class with probability ~1
    y = rng.integers(0, max(num_class, 2), 200).astype(np.float64) if num_class > 1 or "binary" in objective \
        else rng.normal(size=200)
    if num_class == 1 and "multiclass" in objective:
        y[:] = 0
    rows = rng.integers(0, 200, 500)
    delta = rng.normal(0, 2, 500)
    loss = _objective_loss(objective, y, score)
    for k in range(num_class):
        moved = score[rows].copy()
        moved[:, k] += delta
        if "multiclass" in objective:
            expected = np.logaddexp.reduce(moved, axis=1) - moved[np.arange(500), y[rows].astype(int)]
        elif "binary" in objective:
            expected = np.logaddexp(0.0, np.where(y[rows] == 1, -1.5, 1.5) * moved[:, 0])
        else:
            expected = (moved[:, 0] - y[rows]) ** 2
        np.testing.assert_allclose(loss(rows, k, delta), expected, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------------- feature groups


def random_groups(seed: int, f: int):
    """A random grouping of f features (some left out) with group costs, members keeping own costs or not."""
    rng = np.random.default_rng(seed)
    group_of = rng.permutation(np.concatenate([[0, 1], rng.integers(-1, 2, size=f - 2)]))
    return group_of, rng.choice([1.0, 3.0, 8.0], size=2)


def grouped_costs(costs, group_of, group_lazy) -> FeatureCosts:
    return FeatureCosts(lazy=costs, groups=group_of.tolist(), group_lazy=group_lazy.tolist())


@pytest.mark.parametrize("solver", ["maxflow", "highs"])
@pytest.mark.parametrize("seed", range(8))
def test_groups_optimal_against_brute_force(seed, solver):
    model, X, y, costs = random_case(seed, classes=2 + seed % 2, n=30, trees=2 + seed % 2, depth=3)
    group_of, group_lazy = random_groups(seed, len(costs))
    for tradeoff in (0.0, 0.02, 0.1, 0.5):
        result = budget_prune(model, X, y, grouped_costs(costs, group_of, group_lazy), tradeoff, solver=solver)
        expected = brute_force_optimum(model, X, y, costs, tradeoff, group_of, group_lazy)
        assert result.objective == pytest.approx(expected, rel=1e-9, abs=1e-12)
        assert result.lower_bound == pytest.approx(result.objective, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_groups_maxflow_equals_the_highs_lp_and_the_accounting(seed):
    """With groups (members with and without own costs: the max-flow network's carrier nodes), the max-flow
    objective is HiGHS's LP optimum, and the pruned model's cost is prediction_cost's with the same groups."""
    kind = ExtraTreesClassifier if seed % 4 == 0 else RandomForestClassifier
    model, X, y, costs = random_case(700 + seed, classes=2 + seed % 3, n=150, f=5, trees=5, depth=6, kind=kind)
    group_of, group_lazy = random_groups(seed, len(costs))
    grouped = grouped_costs(costs, group_of, group_lazy)
    for tradeoff in (0.0, 0.003, 0.03, 0.3):
        lp = budget_prune(model, X, y, grouped, tradeoff, solver="highs")
        flow = budget_prune(model, X, y, grouped, tradeoff, solver="maxflow")
        assert flow.objective == pytest.approx(lp.objective, rel=1e-9, abs=1e-12)
        assert flow.lower_bound == pytest.approx(flow.objective, rel=1e-9, abs=1e-12)
        report = prediction_cost(flow.model, X, grouped)
        assert float(np.mean(report.per_instance)) == pytest.approx(flow.cost, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("solver", ["maxflow", "highs"])
def test_groups_of_one_member_equal_per_feature_costs(solver):
    model, X, y, costs = random_case(5, n=120, f=5, trees=4, depth=5)
    single = FeatureCosts(lazy=np.zeros(5), groups=list(range(5)), group_lazy=costs.tolist())
    for tradeoff in (0.01, 0.1):
        a = budget_prune(model, X, y, single, tradeoff, solver=solver)
        b = budget_prune(model, X, y, costs, tradeoff, solver=solver)
        assert a.objective == pytest.approx(b.objective, rel=1e-12) and a.cost == pytest.approx(b.cost, rel=1e-12)
        for x, z in zip(a.leaves, b.leaves):
            np.testing.assert_array_equal(x, z)


def test_groups_on_a_lightgbm_model_and_group_coupled_costs_refused():
    import lightgbm as lgb

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 6))
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 4] > 0).astype(int)
    booster = lgb.train({"objective": "binary", "num_leaves": 8, "verbose": -1}, lgb.Dataset(X, y), 6)
    grouped = FeatureCosts(lazy=[1.0, 0.0, 0.0, 2.0, 0.5, 0.5], groups=[-1, 0, 0, -1, 1, 1], group_lazy=[5.0, 2.0])
    for tradeoff in (0.001, 0.01, 0.1):
        lp = budget_prune(booster, X, y, grouped, tradeoff, solver="highs")
        flow = budget_prune(booster, X, y, grouped, tradeoff, solver="maxflow")
        assert flow.objective == pytest.approx(lp.objective, rel=1e-9, abs=1e-12)
        assert float(prediction_cost(flow.model, X, grouped).mean) == pytest.approx(flow.cost, rel=1e-12, abs=1e-12)
    with pytest.raises(CEGBError, match=r"got coupled costs for features \[\] and groups \[1\]"):
        budget_prune(booster, X, y, FeatureCosts(lazy=np.ones(6), groups=[-1, 0, 0, -1, 1, 1], group_lazy=[1.0, 1.0],
                                                 group_coupled=[0.0, 3.0]), 0.1)


# ------------------------------------------------------- scales: tolerances relative to the problem, not absolute


def lightgbm_brute_force(booster, X, y, costs, objective, tradeoffs):
    """The least surrogate objective over every pruning (random cuts cover a small forest's), per trade-off."""
    forest = to_forest(booster)
    nodes = tree_nodes(forest)
    score = booster.predict(X, raw_score=True).reshape(len(X), -1)
    outputs = tree_outputs(booster, X)
    options = [sorted({frozenset(np.flatnonzero(random_cut(parent, feature, np.random.default_rng(s))))
                       for s in range(300)}, key=sorted) for parent, feature, _ in nodes]
    points = []
    for combo in itertools.product(*options):
        pruned = cut_booster(forest, [np.isin(np.arange(len(p)), list(c)) for (p, _, _), c in zip(nodes, combo)])
        error = 0.0
        for t, output in enumerate(tree_outputs(pruned, X)):
            changed = score.copy()
            changed[:, t % score.shape[1]] += output - outputs[t]
            error += lightgbm_loss(objective, changed, y).sum()
        cost = float(np.mean(prediction_cost(pruned, X, FeatureCosts(lazy=costs)).per_instance))
        points.append((error / len(X), cost))
    return [min(error + tradeoff * cost for error, cost in points) for tradeoff in tradeoffs]


def tiny_regression(seed: int, trees: int, leaves: int, n: int):
    """A regression on targets of 1e-6: its errors (squared) are ~1e-12, its useful trade-offs ~1e-14."""
    _, X, y, costs = lightgbm_case(seed, "regression", trees=trees, leaves=leaves, n=n)
    y = y * 1e-6
    params = {"objective": "regression", "num_leaves": leaves, "min_data_in_leaf": 3, "verbose": -1, "seed": seed}
    return lgb.train(params, lgb.Dataset(X, y), trees), X, y, costs


@pytest.mark.parametrize("seed", range(3))
def test_tiny_scales_are_solved_exactly(seed):
    """Errors of 1e-12: HiGHS's absolute tolerances (1e-10) let it stop anywhere (3x the optimum), the max-flow's
    absolute floor of 1e-13 on its eps lost pairs, and budget_prune's own check (absolute 1e-12) let both pass.
    Both solvers now find the brute force's optimum to 1e-9 relative, with no absolute slack."""
    booster, X, y, costs = tiny_regression(seed, trees=2, leaves=4, n=60)
    tradeoffs = [0.0, 1e-15, 1e-14, 1e-13, 1e-12]
    best = lightgbm_brute_force(booster, X, y, costs, "regression", tradeoffs)
    assert max(best) < 1e-10
    for solver in ("maxflow", "highs"):
        for tradeoff, optimum in zip(tradeoffs, best):
            result = budget_prune(booster, X, y, costs, tradeoff, solver=solver)
            assert result.objective == pytest.approx(optimum, rel=1e-9, abs=0)
            assert result.lower_bound == pytest.approx(result.objective, rel=1e-9, abs=0)


@pytest.mark.parametrize("objective", ["regression", "binary", "multiclass"])
@pytest.mark.parametrize("tradeoffs", [[1e-5, 1e6], [1e-7, 1e-5, 1e5], [1e-12, 500.0, 1e-10]])
def test_path_across_far_apart_tradeoffs_equals_independent_solves(objective, tradeoffs):
    """Costs of 1e6: the max-flow's eps came from the path's largest pair capacity (1e6 x 1e6 x 1e-13 = 0.1),
    so that at tradeoff 1e-5 pairs and gains below it counted as zero: "internal error ... please report this".
    Each point of the path equals HiGHS solving its trade-off alone."""
    booster, X, y, costs = lightgbm_case(1, objective, trees=6, leaves=12, n=200)
    costs = costs * 1e6
    path = budget_prune_path(booster, X, y, costs, tradeoffs)
    for tradeoff, result in zip(tradeoffs, path):
        alone = budget_prune(booster, X, y, costs, tradeoff, solver="highs")
        assert result.objective == pytest.approx(alone.objective, rel=1e-9, abs=0)
        assert result.lower_bound == pytest.approx(result.objective, rel=1e-9, abs=0)
        assert alone.lower_bound == pytest.approx(alone.objective, rel=1e-9, abs=0)


@pytest.mark.parametrize("solver", ["maxflow", "highs"])
def test_budget_target_at_tiny_scales(solver):
    """The budget search's breakpoint test had an absolute floor of 1e-12: at errors of 1e-12 every trade-off
    looked like a breakpoint and the search returned the empty pruning (cost 0) for every budget."""
    booster, X, y, costs = tiny_regression(2, trees=6, leaves=12, n=300)
    costs = costs * 1e6
    grid = budget_prune_path(booster, X, y, costs, [0.0, *np.geomspace(1e-24, 1e-16, 161)])
    full = grid[0].cost
    for budget in [0.2 * full, 0.5 * full, 0.8 * full]:
        result = budget_prune(booster, X, y, costs, budget=budget, solver=solver)
        assert result.cost <= budget
        assert result.error <= min(r.error for r in grid if r.cost <= budget) * (1 + 1e-12)
        assert result.cost > 0  # this model has prunings within these budgets that keep splits
        assert budget_prune(booster, X, y, costs, result.tradeoff * (1 - 1e-6), solver=solver).cost > budget
