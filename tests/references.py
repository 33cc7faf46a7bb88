"""Independent references shared by the tests: leaf paths read from LightGBM's model text, per-row costs
rebuilt from them in Python, and random LightGBM models with the rows to score them on."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
from hypothesis import strategies as st


def leaf_paths(booster: lgb.Booster) -> list[dict[int, list[int]]]:
    """Per tree: leaf index -> features of the split nodes on its path, read from the model text's
    split_feature / left_child / right_child lines (dump_model's JSON cannot hold the inf thresholds
    some of these models have)."""
    out = []
    for block in booster.model_to_string().split("end of trees")[0].split("\nTree=")[1:]:
        fields = dict(line.split("=", 1) for line in block.splitlines()[1:] if "=" in line)
        if int(fields["num_leaves"]) == 1:
            out.append({0: []})
            continue
        feature, left, right = ([int(v) for v in fields[k].split()] for k in ("split_feature", "left_child", "right_child"))
        paths, stack = {}, [(0, [])]
        while stack:
            node, path = stack.pop()
            if node < 0:
                paths[~node] = path
            else:
                stack += [(left[node], [*path, feature[node]]), (right[node], [*path, feature[node]])]
        out.append(paths)
    return out


def reference_costs(booster, X, lazy, split, trees_per_iteration=1, groups=None):
    """Costs from LightGBM's own pred_leaf and the dump's paths, row by row in Python. ``groups``:
    (group of each feature or -1, lazy cost of each group), a group paid once per row."""
    leaves = booster.predict(X, pred_leaf=True).reshape(len(X), -1)
    paths = leaf_paths(booster)
    n_iter = leaves.shape[1] // trees_per_iteration
    group_of, group_lazy = groups if groups is not None else ([-1] * len(lazy), [])
    acquisition, evaluation = np.zeros(len(X)), np.zeros(len(X))
    usage, curve = np.zeros(len(lazy) + len(group_lazy)), np.zeros(n_iter)

    def paid(used):
        return sum(lazy[f] for f in used) + sum(group_lazy[g] for g in {group_of[f] for f in used} if g >= 0)
    for i in range(len(X)):
        used, ev = set(), 0.0
        for t in range(leaves.shape[1]):
            for f in paths[t][leaves[i, t]]:
                used.add(f)
                ev += split[f]
            if (t + 1) % trees_per_iteration == 0:
                curve[t // trees_per_iteration] += paid(used) + ev
        acquisition[i], evaluation[i] = paid(used), ev
        usage[list(used) + [len(lazy) + g for g in {group_of[f] for f in used} if g >= 0]] += 1
    return acquisition, evaluation, usage / len(X), curve / len(X)


@st.composite
def model_and_data(draw):
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    n, n_num = 300, draw(st.integers(1, 6))
    X = rng.normal(size=(n, n_num))
    X[rng.random(X.shape) < draw(st.sampled_from([0.0, 0.1, 0.3]))] = np.nan
    X[rng.random(X.shape) < draw(st.sampled_from([0.0, 0.2]))] = 0.0
    X[rng.random(X.shape) < 0.02] = draw(st.sampled_from([np.inf, -np.inf, 1e-40, -1e-40]))
    categorical = draw(st.booleans())
    if categorical:
        cat = rng.integers(0, 40, n).astype(float)
        cat[rng.random(n) < 0.1] = np.nan
        X = np.column_stack([X, cat])
    y = np.nan_to_num(X[:, 0]) + (np.nan_to_num(X[:, -1]) % 3 if categorical else 0) + rng.normal(0, 0.5, n)
    objective = draw(st.sampled_from(["regression", "binary", "multiclass"]))
    params = {"objective": objective, "num_leaves": draw(st.integers(2, 31)), "min_data_in_leaf": 5,
              "verbose": -1, "seed": seed, "num_threads": 1, "min_data_per_group": 5, "cat_smooth": 1.0,
              "zero_as_missing": draw(st.booleans()), "use_missing": draw(st.booleans())}
    if objective == "binary":
        y = (y > np.median(y)).astype(float)
    elif objective == "multiclass":
        params["num_class"] = 3
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    if objective == "regression" and not params["zero_as_missing"] and draw(st.booleans()):
        params["linear_tree"] = True
    ds = lgb.Dataset(X, y, categorical_feature=[X.shape[1] - 1] if categorical else "auto")
    booster = lgb.train(params, ds, draw(st.integers(1, 12)))
    # rows to score: fresh values from the same distribution, plus categories never seen and negative
    Xt = X[rng.permutation(n)[:120]].copy()
    if categorical:
        Xt[:10, -1] = rng.choice([-3.0, 55.0, 1e10, 31.7], 10)
    return booster, Xt, rng
