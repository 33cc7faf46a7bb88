"""Patch 0005: feature groups, per-feature split costs, depth-wise growth and Greedy Miser's per-tree refresh.

The charges are checked against an independent reference: for every split of every tree, the penalty the
patched LightGBM subtracted (the split's gain recomputed here from its rows and the L2 gradients, minus the
split_gain it stored) equals what the reference charges from the rows' paid state and the bought set at that
split (splits taken in the order LightGBM made them: their split_index).
"""

from __future__ import annotations

import textwrap

import lightgbm as lgb
import numpy as np
import pytest
from conftest import run_python

BASE = {"objective": "regression", "learning_rate": 0.5, "verbose": -1, "deterministic": True, "num_threads": 2,
        "seed": 1, "boost_from_average": False, "min_data_in_leaf": 10, "num_leaves": 8, "max_bin": 63}


def train(X, y, rounds=3, init_model=None, **params):
    return lgb.train({**BASE, **params}, lgb.Dataset(X, y), num_boost_round=rounds, init_model=init_model)


def make_data(seed: int, n: int = 1500, f: int = 8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    y = X[:, 0] + 0.8 * X[:, 1] * (X[:, 2] > 0) + 0.5 * X[:, 3] - 0.4 * X[:, 5] + rng.normal(0, 0.5, n)
    return X, y


def before_parameters(booster: lgb.Booster) -> str:
    """The model text up to its parameters section (the trees, their sizes and the feature importances)."""
    text = booster.model_to_string()
    return text[:text.index("\nparameters:\n")]


# ------------------------------------------------------------------------------------------ the reference

def node_rows(node: dict, rows: np.ndarray, X: np.ndarray, out: list) -> None:
    """(split node, its rows) of the subtree, every split going left on x <= threshold (no missing values)."""
    if "split_index" not in node:
        return
    out.append((node, rows))
    left = X[rows, node["split_feature"]] <= node["threshold"]
    node_rows(node["left_child"], rows[left], X, out)
    node_rows(node["right_child"], rows[~left], X, out)


def raw_gain(g: np.ndarray, rows: np.ndarray, left: np.ndarray) -> float:
    """LightGBM's split gain without penalties, for L2 gradients (hessian 1, no regularisation)."""
    def leaf(sel):
        return g[sel].sum() ** 2 / len(sel)
    return leaf(rows[left]) + leaf(rows[~left]) - leaf(rows)


def check_charges(booster: lgb.Booster, X: np.ndarray, y: np.ndarray, costs: dict, start=None) -> int:
    """Every split's penalty against the reference; returns the number of splits checked. ``start``: the
    ledger (a lightgbm_cegb CEGBState) training started from."""
    n, f = X.shape
    t = costs.get("cegb_tradeoff", 1.0)
    zeros = [0.0] * f
    split, fsplit = costs.get("cegb_penalty_split", 0.0), costs.get("cegb_penalty_feature_split", zeros)
    lazy, coupled = costs.get("cegb_penalty_feature_lazy", zeros), costs.get("cegb_penalty_feature_coupled", zeros)
    group = costs.get("cegb_feature_group", [-1] * f)
    num_groups = max(group) + 1
    glazy = costs.get("cegb_penalty_group_lazy", [0.0] * num_groups)
    gcoupled = costs.get("cegb_penalty_group_coupled", [0.0] * num_groups)
    per_tree = costs.get("cegb_coupled_refresh", "split") == "tree"
    paid = np.zeros((n, f), dtype=bool)
    group_paid = np.zeros((n, max(num_groups, 1)), dtype=bool)
    bought, group_bought = np.zeros(f, dtype=bool), np.zeros(max(num_groups, 1), dtype=bool)
    if start is not None:
        paid[:], bought[:] = start.paid[:, :f], start.bought[:f]
        group_paid[:, :num_groups], group_bought[:num_groups] = start.paid[:, f:], start.bought[f:]
    label = y.astype(np.float32)
    checked = 0
    for tree, info in enumerate(booster.dump_model()["tree_info"]):
        score = booster.predict(X, num_iteration=tree, raw_score=True) if tree else np.zeros(n)
        g = (score - label).astype(np.float32).astype(np.float64)  # LightGBM's float gradients
        nodes = []
        node_rows(info["tree_structure"], np.arange(n), X, nodes)
        in_tree = []
        for node, rows in sorted(nodes, key=lambda item: item[0]["split_index"]):
            j = node["split_feature"]
            k = group[j]
            left = X[rows, j] <= node["threshold"]
            expected = t * (split * len(rows) + fsplit[j] * len(rows) + lazy[j] * np.count_nonzero(~paid[rows, j])
                            + coupled[j] * (not bought[j]))
            if k >= 0:
                expected += t * (glazy[k] * np.count_nonzero(~group_paid[rows, k])
                                 + gcoupled[k] * (not group_bought[k]))
            gain = raw_gain(g, rows, left)
            # LightGBM's gains differ from this float64 recomputation by ~2e-6 of the gain
            assert gain - node["split_gain"] == pytest.approx(expected, rel=0, abs=1e-4 + 1e-5 * abs(gain)), \
                f"tree {tree}, split {node['split_index']} on feature {j}"
            checked += 1
            paid[rows, j] = True
            if k >= 0:
                group_paid[rows, k] = True
            in_tree.append(j)
            if not per_tree:
                bought[j] = True
                if k >= 0:
                    group_bought[k] = True
        for j in in_tree:
            bought[j] = True
            if group[j] >= 0:
                group_bought[group[j]] = True
    return checked


def random_costs(rng: np.random.Generator, f: int) -> dict:
    group = rng.integers(-1, 3, f).tolist()
    num_groups = max(group) + 1
    costs = {"cegb_tradeoff": float(rng.choice([0.02, 0.1])), "cegb_feature_group": group}
    if rng.random() < 0.7 and num_groups:
        costs["cegb_penalty_group_lazy"] = rng.uniform(0, 2, num_groups).round(2).tolist()
    if rng.random() < 0.7 and num_groups:
        costs["cegb_penalty_group_coupled"] = rng.uniform(0, 200, num_groups).round(1).tolist()
    if rng.random() < 0.5:
        costs["cegb_penalty_feature_lazy"] = rng.uniform(0, 1, f).round(2).tolist()
    if rng.random() < 0.5:
        costs["cegb_penalty_feature_coupled"] = rng.uniform(0, 100, f).round(1).tolist()
    if rng.random() < 0.5:
        costs["cegb_penalty_feature_split"] = rng.uniform(0, 0.5, f).round(2).tolist()
    if rng.random() < 0.3:
        costs["cegb_penalty_split"] = 0.1
    if rng.random() < 0.4:
        costs["cegb_coupled_refresh"] = "tree"
    return costs


@pytest.mark.parametrize("seed", range(12))
def test_charges_match_the_reference(seed):
    X, y = make_data(seed)
    costs = random_costs(np.random.default_rng(100 + seed), X.shape[1])
    booster = train(X, y, rounds=4, **costs)
    assert check_charges(booster, X, y, costs) >= 4, costs


def test_reference_sees_a_wrong_charge():
    """The reference is not vacuous: charging a group model with the costs of its features alone fails."""
    X, y = make_data(0)
    costs = {"cegb_tradeoff": 0.1, "cegb_feature_group": [0, 0, 0, 0, 1, 1, 1, 1],
             "cegb_penalty_group_lazy": [1.0, 2.0]}
    booster = train(X, y, **costs)
    check_charges(booster, X, y, costs)
    with pytest.raises(AssertionError, match="tree 0"):
        check_charges(booster, X, y, {"cegb_tradeoff": 0.1, "cegb_penalty_feature_lazy": [1.0] * 4 + [2.0] * 4})


def test_group_lazy_is_paid_once_per_row():
    """Features 0 and 1 share a costly group: after the first split on one, the other is nearly free for the
    rows that paid, so the model uses both; with the same cost on each feature alone it uses fewer."""
    X, y = make_data(1)
    grouped = train(X, y, rounds=10, cegb_tradeoff=1.0, cegb_feature_group=[0, 0, -1, -1, -1, -1, -1, -1],
                    cegb_penalty_group_lazy=[0.5], cegb_penalty_feature_lazy=[0, 0] + [0.5] * 6)
    apart = train(X, y, rounds=10, cegb_tradeoff=1.0, cegb_penalty_feature_lazy=[0.5] * 8)
    used = np.asarray(grouped.feature_importance()) > 0
    assert used[0] and used[1]
    assert np.count_nonzero(grouped.feature_importance()[:2]) >= np.count_nonzero(apart.feature_importance()[:2])


# ---------------------------------------------------------------------------- groups of one = per feature

SINGLETON_CASES = {
    "lazy": ({"cegb_tradeoff": 0.05, "cegb_penalty_feature_lazy": [1, 4, 2, 8, 0.5, 3, 1, 6]},
             {"cegb_tradeoff": 0.05, "cegb_penalty_group_lazy": [1, 4, 2, 8, 0.5, 3, 1, 6]}),
    "coupled": ({"cegb_penalty_feature_coupled": [40, 5, 80, 10, 20, 60, 5, 30]},
                {"cegb_penalty_group_coupled": [40, 5, 80, 10, 20, 60, 5, 30]}),
    "both, refresh per tree": (
        {"cegb_tradeoff": 0.05, "cegb_penalty_feature_lazy": [1, 4, 2, 8, 0.5, 3, 1, 6],
         "cegb_penalty_feature_coupled": [400, 50, 800, 100, 200, 600, 50, 300], "cegb_coupled_refresh": "tree"},
        {"cegb_tradeoff": 0.05, "cegb_penalty_group_lazy": [1, 4, 2, 8, 0.5, 3, 1, 6],
         "cegb_penalty_group_coupled": [400, 50, 800, 100, 200, 600, 50, 300], "cegb_coupled_refresh": "tree"}),
}
MODES = {"plain": {}, "bagging": {"bagging_fraction": 0.6, "bagging_freq": 1},
         "goss": {"data_sample_strategy": "goss", "learning_rate": 0.3}}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", SINGLETON_CASES)
def test_groups_of_one_member_train_the_per_feature_model(case, mode):
    X, y = make_data(2)
    per_feature, per_group = SINGLETON_CASES[case]
    one = train(X, y, rounds=8, num_leaves=15, **MODES[mode], **per_feature)
    other = train(X, y, rounds=8, num_leaves=15, **MODES[mode], cegb_feature_group=list(range(8)), **per_group)
    plain = train(X, y, rounds=8, num_leaves=15, **MODES[mode])
    assert before_parameters(one) != before_parameters(plain)  # the costs change the model
    assert before_parameters(other) == before_parameters(one)
    # continued training: the init model's features are bought and its rows have paid, per group as per feature
    more = train(X, y, rounds=4, num_leaves=15, init_model=one, **MODES[mode], **per_feature)
    more_other = train(X, y, rounds=4, num_leaves=15, init_model=other, **MODES[mode],
                       cegb_feature_group=list(range(8)), **per_group)
    assert before_parameters(more_other) == before_parameters(more)


def test_per_feature_split_cost_adds_to_the_scalar_one():
    X, y = make_data(3)
    scalar = train(X, y, rounds=5, cegb_tradeoff=0.5, cegb_penalty_split=0.3)
    vector = train(X, y, rounds=5, cegb_tradeoff=0.5, cegb_penalty_feature_split=[0.3] * 8)
    assert before_parameters(vector) == before_parameters(scalar)
    most_used = int(np.argmax(scalar.feature_importance()))
    costs = {"cegb_tradeoff": 0.5, "cegb_penalty_split": 0.1,
             "cegb_penalty_feature_split": [2.0 * (j == most_used) for j in range(8)]}
    both = train(X, y, rounds=5, **costs)
    check_charges(both, X, y, costs)
    assert both.feature_importance()[most_used] < scalar.feature_importance()[most_used]


def test_groups_change_with_reset_parameter():
    X, y = make_data(4)
    costs = {**BASE, "cegb_tradeoff": 0.05, "cegb_feature_group": [0, 0, 0, 1, 1, 1, 2, 2],
             "cegb_penalty_group_lazy": [1, 1, 1]}
    callback = lgb.reset_parameter(cegb_penalty_group_lazy=[[1, 1, 1]] + [[200, 0.1, 200]] * 3)
    reset = lgb.train(costs, lgb.Dataset(X, y), 4, callbacks=[callback])
    fixed = lgb.train(costs, lgb.Dataset(X, y), 4)

    def trees(booster):
        return booster.model_to_string().split("end of trees")[0].split("\nTree=")[1:]
    assert trees(reset)[:1] == trees(fixed)[:1] and trees(reset)[1:] != trees(fixed)[1:]


# ------------------------------------------------------------------------------------ depth-wise growth

def split_order_depths(booster: lgb.Booster) -> list[list[tuple[int, int, float]]]:
    """Per tree: (split_index, depth, gain) of its splits, in split order."""
    out = []
    for info in booster.dump_model()["tree_info"]:
        nodes, stack = [], [(info["tree_structure"], 0)]
        while stack:
            node, depth = stack.pop()
            if "split_index" in node:
                nodes.append((node["split_index"], depth, node["split_gain"]))
                stack += [(node["left_child"], depth + 1), (node["right_child"], depth + 1)]
        out.append(sorted(nodes))
    return out


def path_splits(booster: lgb.Booster) -> list[set]:
    """Per tree: the set of (path from the root, feature, threshold) of its splits: the tree without the order
    it was grown in."""
    out = []
    for info in booster.dump_model()["tree_info"]:
        found, stack = set(), [(info["tree_structure"], ())]
        while stack:
            node, path = stack.pop()
            if "split_index" in node:
                found.add((path, node["split_feature"], node["threshold"]))
                stack += [(node["left_child"], (*path, "L")), (node["right_child"], (*path, "R"))]
        out.append(found)
    return out


def test_depthwise_makes_best_first_splits_on_full_trees():
    """CEGB off, num_leaves = 2^max_depth, positive gains everywhere: the same splits in another order."""
    X, y = make_data(5, n=4000)
    params = {"num_leaves": 16, "max_depth": 4, "min_data_in_leaf": 5}
    best = train(X, y, rounds=6, **params)
    depthwise = train(X, y, rounds=6, tree_growth="depthwise", **params)
    assert all(len(tree) == 15 for tree in path_splits(best))  # full trees: every split had a positive gain
    assert path_splits(depthwise) == path_splits(best)
    np.testing.assert_array_equal(depthwise.predict(X), best.predict(X))
    assert split_order_depths(depthwise) != split_order_depths(best)  # the order differs


@pytest.mark.parametrize("costs", [{}, {"cegb_tradeoff": 0.05, "cegb_penalty_feature_lazy": [1, 4, 2, 8, 0.5, 3, 1, 6]},
                                   {"cegb_penalty_feature_coupled": [40, 5, 80, 10, 20, 60, 5, 30],
                                    "cegb_coupled_refresh": "tree"}],
                         ids=["plain", "lazy", "coupled-per-tree"])
def test_depthwise_grows_level_by_level(costs):
    """Depth never decreases in split order, and within a depth the gains come best first (no promotion of
    cached splits can happen: no coupled penalty is bought inside a tree)."""
    X, y = make_data(6, n=3000)
    booster = train(X, y, rounds=5, num_leaves=11, tree_growth="depthwise", **costs)
    for tree in split_order_depths(booster):
        depths = [depth for _, depth, _ in tree]
        assert depths == sorted(depths)
        for depth in set(depths):
            gains = [gain for _, d, gain in tree if d == depth]
            assert gains == sorted(gains, reverse=True)
    best_first = train(X, y, rounds=5, num_leaves=11, **costs)
    assert max(max(d for _, d, _ in t) for t in split_order_depths(booster)) < \
        max(max(d for _, d, _ in t) for t in split_order_depths(best_first))
    if costs:
        check_charges(booster, X, y, costs)


def test_grow_policy_alias_and_linear_trees():
    X, y = make_data(7)
    a = train(X, y, grow_policy="depthwise", linear_tree=True)
    b = train(X, y, tree_growth="depthwise", linear_tree=True)
    assert a.params.get("grow_policy") == "depthwise" and before_parameters(a) == before_parameters(b)
    assert "[tree_growth: depthwise]" in a.model_to_string()
    assert before_parameters(b) != before_parameters(train(X, y, linear_tree=True))


# --------------------------------------------------------------------------------- refresh per tree

def test_refresh_per_tree_charges_every_use_inside_the_tree():
    X, y = make_data(8, n=3000)
    costs = {"cegb_penalty_feature_coupled": [30.0] * 8, "cegb_coupled_refresh": "tree"}
    booster = train(X, y, rounds=4, num_leaves=15, **costs)
    check_charges(booster, X, y, costs)
    # a feature used twice in tree 0 paid its coupled penalty twice (the reference checked the gains)
    assert np.bincount([n["split_feature"] for n in _splits(booster, 0)], minlength=8).max() >= 2
    per_split = train(X, y, rounds=4, num_leaves=15, cegb_penalty_feature_coupled=[30.0] * 8)
    assert before_parameters(per_split) != before_parameters(booster)


def _splits(booster, tree):
    out, stack = [], [booster.dump_model()["tree_info"][tree]["tree_structure"]]
    while stack:
        node = stack.pop()
        if "split_index" in node:
            out.append(node)
            stack += [node["left_child"], node["right_child"]]
    return out


# ------------------------------------------------------------------------------------- stock and input

def test_stock_lightgbm_loads_and_predicts_models_with_the_new_options():
    X, y = make_data(9)
    booster = train(X, y, rounds=5, tree_growth="depthwise", cegb_tradeoff=0.05, cegb_feature_group=[0] * 4 + [1] * 4,
                    cegb_penalty_group_lazy=[1.0, 2.0], cegb_penalty_group_coupled=[5.0, 5.0],
                    cegb_penalty_feature_split=[0.1] * 8, cegb_coupled_refresh="tree")
    text = booster.model_to_string()
    for key in ("tree_growth: depthwise", "cegb_feature_group: 0,0,0,0,1,1,1,1", "cegb_coupled_refresh: tree"):
        assert f"[{key}]" in text
    code = textwrap.dedent(f"""
        import sys, numpy as np, lightgbm as lgb
        X = np.array({X[:50].tolist()!r})
        sys.stdout.write(repr(lgb.Booster(model_str={text!r}).predict(X).tolist()))
    """)
    stock = run_python(code, stock=True)
    assert stock.returncode == 0, stock.stderr
    # stock LightGBM warns "Ignoring unrecognized parameter 'tree_growth' found in model string" (and the others)
    assert "Ignoring unrecognized parameter 'cegb_feature_group'" in stock.stdout
    assert eval(stock.stdout.splitlines()[-1]) == booster.predict(X[:50]).tolist()


@pytest.mark.parametrize(("params", "message"), [
    ({"cegb_feature_group": [0, -2, 0, 0, 0, 0, 0, 0], "cegb_penalty_group_lazy": [1.0]},
     r"cegb_feature_group should hold group ids >= 0, or -1 for no group, got -2 for feature 1"),
    ({"cegb_penalty_group_lazy": [1.0]}, r"cegb_penalty_group_lazy needs cegb_feature_group"),
    ({"cegb_feature_group": [0, 1, 2, 0, 0, 0, 0, 0], "cegb_penalty_group_coupled": [1.0, 2.0]},
     r"cegb_penalty_group_coupled should have one value per group of cegb_feature_group: expected 3 values "
     r"\(groups 0 to 2\), got 2"),
    ({"cegb_feature_group": [0] * 8, "cegb_penalty_group_lazy": [float("nan")]},
     r"cegb_penalty_group_lazy should hold finite numbers >= 0, got nan for group 0"),
    ({"cegb_feature_group": [0] * 8, "cegb_penalty_group_coupled": [-1.0]},
     r"cegb_penalty_group_coupled should hold finite numbers >= 0, got -1 for group 0"),
    ({"cegb_feature_group": [0] * 7, "cegb_penalty_group_lazy": [1.0]},
     r"cegb_feature_group should have one value per feature of the training data: expected 8 values, got 7"),
    ({"cegb_penalty_feature_split": [0.1] * 9},
     r"cegb_penalty_feature_split should have one value per feature of the training data: expected 8 values, got 9"),
    ({"cegb_penalty_feature_split": [0.1] * 7 + [float("inf")]},
     r"cegb_penalty_feature_split should hold finite numbers >= 0, got inf for feature 7"),
    ({"tree_growth": "lossguide"}, r"tree_growth should be best_first or depthwise, got lossguide"),
    ({"cegb_coupled_refresh": "iteration"}, r"cegb_coupled_refresh should be split or tree, got iteration"),
    ({"tree_growth": "depthwise", "device_type": "cuda"}, r"tree_growth=depthwise is not supported with "
                                                          r"device_type=cuda"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None)
def test_bad_input_is_refused_clearly(params, message):
    X, y = make_data(10, n=300)
    with pytest.raises(lgb.basic.LightGBMError, match=message):
        train(X, y, rounds=2, **params)


# -------------------------------------------------------------------------------------------- distributed

@pytest.mark.parametrize("case", ["groups", "groups, refresh per tree, split per feature"])
def test_groups_data_parallel_equals_serial(case):
    """On the 2-worker local Dask cluster of patch 0004's tests, as there for per-feature penalties."""
    import distributed
    from test_patch_0004 import BASE as DASK_BASE
    from test_patch_0004 import F, assert_same_model, fit_both
    from test_patch_0004 import make_data as dask_data
    params = {"cegb_tradeoff": 0.05, "cegb_feature_group": [0, 0, 1, 1, 2, 2, -1, 0],
              "cegb_penalty_group_lazy": [3.0, 1.0, 6.0], "cegb_penalty_group_coupled": [100.0, 20.0, 200.0],
              "cegb_penalty_feature_lazy": [0.5] * F}
    if case != "groups":
        params.update(cegb_coupled_refresh="tree", cegb_penalty_feature_split=[0.0, 0.2, 0.0, 0.5, 0.0, 0.0, 1.0, 0.0])
    data = dask_data()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1") as cluster, distributed.Client(cluster) as client:
        distributed_booster, serial = fit_both(client, data, params)
    assert_same_model(distributed_booster, serial)
    plain = lgb.train({**DASK_BASE, "num_threads": 1, "objective": "regression"}, lgb.Dataset(*data), 10)
    assert before_parameters(serial) != before_parameters(plain)
