"""Independent references shared by the tests: leaf paths read from LightGBM's model text, per-row costs
rebuilt from them in Python, and random LightGBM and scikit-learn models with the rows to score them on;
running a script."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import dask.array as da
import lightgbm as lgb
import numpy as np
import pytest
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
        feature, left, right = ([int(v) for v in fields[k].split()]
                                for k in ("split_feature", "left_child", "right_child"))
        paths, stack = {}, [(0, [])]
        while stack:
            node, path = stack.pop()
            if node < 0:
                paths[~node] = path
            else:
                stack += [(left[node], [*path, feature[node]]), (right[node], [*path, feature[node]])]
        out.append(paths)
    return out


def row_paths(model, X) -> list[list[list[int]]]:
    """Per row, per tree, the features of the split nodes the row passes: from LightGBM's pred_leaf and the
    model text (a Booster, or an estimator with booster_) or each scikit-learn tree's decision_path."""
    booster = model if isinstance(model, lgb.Booster) else getattr(model, "booster_", None)
    if booster is not None:
        tree_paths = leaf_paths(booster)
        leaves = booster.predict(X, pred_leaf=True).reshape(len(X), -1)
        return [[tree_paths[t][leaves[i, t]] for t in range(leaves.shape[1])] for i in range(len(X))]
    estimators = np.ravel(getattr(model, "estimators_", [model]))
    subsets = getattr(model, "estimators_features_", None) or [None] * len(estimators)
    X = np.asarray(X, dtype=np.float32)
    rows: list[list[list[int]]] = [[] for _ in range(len(X))]
    for estimator, subset in zip(estimators, subsets):  # each tree's own decision_path, on the columns it saw
        indicator = estimator.decision_path(X if subset is None else X[:, subset])
        leaf = estimator.tree_.children_left < 0
        features = np.where(leaf, -1, estimator.tree_.feature)
        if subset is not None:
            features[~leaf] = np.asarray(subset)[features[~leaf]]
        for i in range(len(X)):
            nodes = indicator.indices[indicator.indptr[i]:indicator.indptr[i + 1]]
            rows[i].append([int(features[v]) for v in nodes if not leaf[v]])
    return rows


def reference_costs(booster, X, lazy, split, trees_per_iteration=1, groups=None, tree=0.0):
    """Costs from LightGBM's own pred_leaf and the dump's paths, row by row in Python. ``groups``:
    (group id of each feature or -1, lazy cost of each group id), a group paid once per row; ``tree``: paid per
    row for each tree. Usage: per feature, then per group id that some feature has, in increasing order (ids are
    labels: an id no feature has is no group)."""
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
            ev += tree
            for f in paths[t][leaves[i, t]]:
                used.add(f)
                ev += split[f]
            if (t + 1) % trees_per_iteration == 0:
                curve[t // trees_per_iteration] += paid(used) + ev
        acquisition[i], evaluation[i] = paid(used), ev
        usage[list(used) + [len(lazy) + g for g in {group_of[f] for f in used} if g >= 0]] += 1
    present = sorted({int(g) for g in group_of if g >= 0})
    usage = np.concatenate([usage[:len(lazy)], usage[len(lazy):][present]]) if len(group_lazy) else usage
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
    # rows to score: fresh values from the same distribution, plus categories never seen, negative, and fractions
    # in (-1, 0) that LightGBM truncates to category 0 (issue 48, item 2)
    Xt = X[rng.permutation(n)[:120]].copy()
    if categorical:
        Xt[:14, -1] = rng.choice([-3.0, 55.0, 1e10, 31.7, -0.5, -0.999, -1.0, 0.7], 14)
    return booster, Xt, rng


@st.composite
def sklearn_model_and_data(draw):
    """A random fitted scikit-learn tree model of a kind the package reads and rows to score it on, with values
    on both sides of each threshold's float32 rounding boundary: scikit-learn compares float32(x) <= threshold, so
    x just above a threshold can still go left, and x at it can go right (issue 48, item 1)."""
    from sklearn.ensemble import (
        BaggingClassifier,
        ExtraTreesRegressor,
        GradientBoostingClassifier,
        RandomForestClassifier,
    )
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    n, num_features = 200, draw(st.integers(1, 5))
    X = rng.normal(size=(n, num_features)) * rng.choice([1e-3, 1.0, 1e4], num_features)
    y = (X[:, 0] + rng.normal(0, 0.5 * np.abs(X[:, 0]).mean(), n) > 0).astype(int)
    kind = draw(st.sampled_from(["tree", "regression tree", "forest", "extra trees", "boosting", "bagging"]))
    if kind in ("tree", "forest") and draw(st.booleans()):  # scikit-learn's trees learn where NaN goes
        X[rng.random(X.shape) < 0.1] = np.nan
    model = {"tree": lambda: DecisionTreeClassifier(max_depth=6, random_state=seed),
             "regression tree": lambda: DecisionTreeRegressor(max_depth=6, random_state=seed),
             "forest": lambda: RandomForestClassifier(n_estimators=4, max_depth=5, random_state=seed),
             "extra trees": lambda: ExtraTreesRegressor(n_estimators=4, max_depth=5, random_state=seed),
             "boosting": lambda: GradientBoostingClassifier(n_estimators=4, max_depth=3, random_state=seed),
             "bagging": lambda: BaggingClassifier(DecisionTreeClassifier(max_depth=4), n_estimators=3,
                                                  max_features=0.7, random_state=seed)}[kind]().fit(X, y)
    estimators = getattr(model, "estimators_", [model])
    subsets = getattr(model, "estimators_features_", None) or [None] * np.size(estimators)
    Xt = X[rng.permutation(n)[:80]].copy()
    for estimator, subset in zip(np.ravel(estimators), subsets):
        tree = estimator.tree_
        for j in np.flatnonzero((tree.children_left >= 0) & (np.abs(tree.threshold) < 1e30)):  # not NaN-only splits
            t, f = tree.threshold[j], tree.feature[j]
            f = f if subset is None else subset[f]
            near = [t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf), float(np.float32(t)),
                    float(np.nextafter(np.float32(t), np.float32(np.inf)))]
            Xt[rng.integers(0, len(Xt), 2), f] = rng.choice(near, 2)
    return model, Xt, rng


def greedy_miser_reference(X, y, *, costs, lam, depth, trees, step=0.1, min_leaf=1, weight=None, num_class=1,
                           group_of=None, group_costs=()):
    """Greedy Miser as the paper states it, in NumPy, with none of LightGBM: per iteration the negative
    gradient of the loss (squared for ``num_class == 0``, logistic for 1, softmax for more) at the current
    scores, then per class a CART tree of depth ``depth``, grown level by level, that fits it with the
    (weighted) squared error, every candidate split on an exact threshold between two distinct values, a
    split on a feature no earlier tree used paying ``lam * cost`` (its group's cost too when no earlier tree
    used the group); a node splits when its best penalised decrease of the squared error is positive. The used
    set is refreshed after each tree. Gradients are rounded to float32 as LightGBM stores them.

    Returns per tree a nested node: ("leaf", value) or ("split", feature, left rows (a set of training row
    indices), left node, right node)."""
    n, num_features = X.shape
    weight = np.ones(n) if weight is None else np.asarray(weight, dtype=np.float64)
    group_of = np.full(num_features, -1) if group_of is None else np.asarray(group_of)
    used, group_used = np.zeros(num_features, dtype=bool), np.zeros(len(group_costs), dtype=bool)
    classes = max(num_class, 1)
    score = np.zeros((n, classes))
    out = []

    def penalty(f):
        p = 0.0 if used[f] else costs[f]
        if group_of[f] >= 0 and not group_used[group_of[f]]:
            p += group_costs[group_of[f]]
        return lam * p

    for _ in range(trees):
        if num_class == 0:
            gradient = score - y[:, None]
        elif num_class == 1:
            gradient = 1.0 / (1.0 + np.exp(-score)) - y[:, None]
        else:
            e = np.exp(score - score.max(axis=1, keepdims=True))
            gradient = e / e.sum(axis=1, keepdims=True)
            gradient[np.arange(n), y.astype(int)] -= 1.0
        g_all = (gradient * weight[:, None]).astype(np.float32).astype(np.float64)
        h = weight.astype(np.float32).astype(np.float64)
        for k in range(classes):
            g = g_all[:, k]
            tree_features = set()

            # grow is only called (recursively) within this iteration: the noqa: B023 below
            def grow(rows, level):
                G, H = g[rows].sum(), h[rows].sum()  # noqa: B023
                leaf = ("leaf", -G / H * step)
                if level == depth or len(rows) < 2 * min_leaf:
                    return leaf
                candidates = []
                for f in range(num_features):
                    order = rows[np.argsort(X[rows, f], kind="stable")]
                    values = X[order, f]
                    gl, hl = np.cumsum(g[order])[:-1], np.cumsum(h[order])[:-1]  # noqa: B023
                    count = np.arange(1, len(rows))
                    ok = (values[:-1] < values[1:]) & (count >= min_leaf) & (len(rows) - count >= min_leaf)
                    if not ok.any():
                        continue
                    gain = gl ** 2 / hl + (G - gl) ** 2 / (H - hl) - G ** 2 / H
                    gain[~ok] = -np.inf
                    i = int(np.argmax(gain))
                    if gain[i] <= 0:
                        continue
                    candidates.append((gain[i] - penalty(f), f, order[:i + 1], order[i + 1:]))
                best = max(candidates, key=lambda c: c[0], default=None)
                if best is None or best[0] <= 0:
                    return leaf
                tied = [c[1] for c in candidates if c is not best and abs(c[0] - best[0]) <= 1e-9 * abs(best[0])]
                if tied:  # float rounding, not the algorithm, would choose: the case cannot test anything
                    raise ValueError(f"ambiguous split: features {best[1]} and {tied} gain {best[0]!r}")
                _, f, left, right = best
                tree_features.add(f)  # noqa: B023
                return ("split", f, set(left.tolist()), grow(np.sort(left), level + 1), grow(np.sort(right), level + 1))

            tree = grow(np.arange(n), 0)
            out.append(tree)
            score[:, k] += tree_output(tree, n)
            for f in tree_features:
                used[f] = True
                if group_of[f] >= 0:
                    group_used[group_of[f]] = True
    return out


def tree_output(tree, n: int) -> np.ndarray:
    """A reference tree's value for each of the n training rows."""
    out = np.zeros(n)

    def fill(node, rows):
        if node[0] == "leaf":
            out[rows] = node[1]
        else:
            left = np.array(sorted(node[2] & set(rows.tolist())), dtype=np.int64)
            fill(node[3], left)
            fill(node[4], np.setdiff1d(rows, left))

    fill(tree, np.arange(n))
    return out


def script(name: str) -> list[str]:
    """The command that runs the experiment script ``scripts.<name>`` (as a module: cwd must be the clone's root)."""
    return [sys.executable, "-m", f"scripts.{name}"]


def run_script(name: str, *args: str, timeout: float = 1200):
    """``scripts.<name>`` run with ``args`` in a child Python from the clone's root; a clear failure when it times out
    or fails."""
    try:
        result = subprocess.run([*script(name), *args], capture_output=True, text=True, timeout=timeout,
                                cwd=Path(__file__).resolve().parents[1])
    except subprocess.TimeoutExpired:
        pytest.fail(f"scripts.{name} timed out after {timeout:g} s")
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def compiled_serves_as_policy_run(model, rows: np.ndarray, costs, rng, errors: str) -> None:
    """Serve ``model`` (a policy model with a compiled run) on ``rows`` both ways, on its compiled run
    (CompiledPolicyRun) and on its policy run driven by PolicyModelRun, and require the same fetch calls in the same
    order, predictions, statuses, values, costs, rounds and failures: about 20% of the values given in X, and (with
    ``errors="partial"``, or at random with "raise") every fetch of one feature, or of its group, failing for the
    calls holding row 3; with "partial", also under asyncio."""
    import asyncio

    from lightgbm_cegb import LazyFetchError, LazyPredictor
    from lightgbm_cegb.serving.runs import CompiledPolicyRun, PolicyModelRun

    given = rng.random(rows.shape) < 0.2
    failing = int(rng.integers(rows.shape[1])) if errors == "partial" or rng.random() < 0.5 else None
    members = {name: list(m) for name, m in (costs.groups or {}).items()}
    calls: list = []
    first = 1000 if errors == "raise" else 0  # the row ids fetch is called with: given, or the rows' positions

    def fetch(key, ids):
        calls.append((key, list(ids)))
        at = np.asarray(ids) - first
        if (key == failing or (key in members and failing in members[key])) and 3 in at:
            raise RuntimeError("store down")
        return rows[np.ix_(at, members[key])] if key in members else rows[at, key]

    lazy = LazyPredictor(model, fetch, feature_keys="index", errors=errors)
    outcomes = []
    for compiled in (True, False):
        calls.clear()
        start = np.where(given, rows, np.nan)
        run = lazy._run(start, given, first + np.arange(len(rows)) if first else None, {}) if compiled else \
            PolicyModelRun(lazy, start.copy(), given.copy(), first + np.arange(len(rows)), {})
        assert isinstance(run, CompiledPolicyRun) == compiled
        try:
            while requests := run.advance():
                run.deliver(requests, lazy._fetch_round(requests, run))
            result = run.finish("predict_proba", {})
        except LazyFetchError as exc:
            result = exc.result
        outcomes.append((result, list(calls)))
    (fast, fast_calls), (slow, slow_calls) = outcomes
    assert fast_calls == slow_calls
    done = fast.status == 0  # DONE: the model's own prediction of the full row (a group's members in its order)
    if done.any():
        np.testing.assert_array_equal(fast.prediction[done], model.predict_proba(rows[done]))
    for field in ("prediction", "status", "X", "known", "fetched", "acquisition", "evaluation", "rounds",
                  "fetch_calls"):
        np.testing.assert_array_equal(getattr(fast, field), getattr(slow, field), err_msg=field)
    assert [(f.feature, list(f.rows)) for f in fast.failures] == [(f.feature, list(f.rows)) for f in slow.failures]
    if errors == "partial":  # and under asyncio, a round's calls at once
        calls.clear()
        awaited = asyncio.run(lazy.aacquire(np.where(given, rows, np.nan), given, method="predict_proba"))
        assert sorted(calls, key=repr) == sorted(slow_calls, key=repr)
        for field in ("prediction", "status", "X", "fetched", "acquisition", "evaluation"):
            np.testing.assert_array_equal(getattr(awaited, field), getattr(slow, field), err_msg=field)


def on_thresholds(boosters: list, X: np.ndarray, rng) -> np.ndarray:
    """X with one value of each row moved onto a split threshold of one of ``boosters`` (LightGBM models), or to the
    next double below or above it."""
    splits = [(int(node["split_feature"]), float(node["threshold"])) for booster in boosters
              for tree in booster.dump_model()["tree_info"] for node in _nodes(tree["tree_structure"])
              if "split_feature" in node]
    Z = X.copy()
    if splits:
        for i in range(len(Z)):
            f, t = splits[int(rng.integers(len(splits)))]
            Z[i, f] = [np.nextafter(t, -np.inf), t, np.nextafter(t, np.inf)][int(rng.integers(3))]
    return Z


def _nodes(node: dict):
    yield node
    for side in ("left_child", "right_child"):
        if side in node:
            yield from _nodes(node[side])


def compiled_stages_predict_as_lightgbm(model, name: str, boosters: list, output, X: np.ndarray, rng) -> None:
    """A staged model's compiled ``boosters`` (kept as ``name``) answer each stage's LightGBM ``predict`` to the bit
    through ``output(k, masked)`` (the model's own stage output), on X's rows with NaN and values on the stages'
    thresholds and next to them, each stage reading its own columns, on one thread and two."""
    assert model._compiled[name][0] is boosters and model._compiled[name][1] is not None  # compiled by fit
    Z = np.vstack([X, on_thresholds(boosters, X, rng)])
    for n_jobs in (1, 2):
        model.set_params(n_jobs=n_jobs)
        for k in range(1, len(boosters) + 1):
            masked = np.full(Z.shape, np.nan)
            columns = sorted(f for u in model.order_[:model.stage_units_[k]] for f in model.units_[u])
            masked[:, columns] = Z[:, columns]
            np.testing.assert_array_equal(output(k, masked), boosters[k - 1].predict(masked), err_msg=f"stage {k}")


def staged_case(seed: int):
    """Rows of 3 to 8 features (5% missing) and 2 to 4 classes of a signal in the first three, and costs (a group of
    two at times, a split cost at times): the staged acquisition's tests' case (and the prepared rows')."""
    from lightgbm_cegb import FeatureCosts

    rng = np.random.default_rng(seed)
    n, num_features, num_class = 300, int(rng.integers(3, 9)), int(rng.integers(2, 5))
    X = rng.normal(size=(n, num_features))
    X[rng.random(X.shape) < 0.05] = np.nan
    signal = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) * (np.nan_to_num(X[:, 2]) > 0)
    y = np.digitize(signal + rng.normal(size=n) * 0.3, np.quantile(signal, np.linspace(0, 1, num_class + 1)[1:-1]))
    lazy = rng.choice([0.0, 1.0, 2.0, 5.0], size=num_features, p=[0.1, 0.4, 0.3, 0.2])
    groups = None
    if num_features >= 4 and rng.random() < 0.6:
        groups = {"pair": rng.choice(num_features, size=2, replace=False).tolist()}
    costs = FeatureCosts(lazy=lazy, groups=groups, split=rng.choice([0.0, 0.1]),
                         group_lazy=None if groups is None else [float(rng.integers(1, 4))])
    return X, y, costs, rng


def lightgbm_trainings(call, *args, **kwargs) -> tuple:
    """(``call(*args, **kwargs)``, the ``lgb.train`` calls it made: for each, whether it started from raw scores
    (``init_score``) and a digest of its training rows' values (a stage's: every column, the others missing; a
    search's measure: its columns alone, in their order))."""
    import hashlib
    from unittest import mock

    made = []

    def train(params, train_set, *args, **kwargs):
        data = np.ascontiguousarray(train_set.data, dtype=np.float64)
        made.append((train_set.init_score is not None, data.shape, hashlib.sha256(data.tobytes()).hexdigest()))
        return original(params, train_set, *args, **kwargs)

    original = lgb.train
    with mock.patch.object(lgb, "train", train):
        return call(*args, **kwargs), made


def memo_shares_trainings(fit) -> None:
    """``fit(order, stage_models, memo)`` (a staged model of every order and kind of stage models, on the same rows):
    with one StageMemo each fit's stages are the models it trains alone (their texts), Boosters of its own; a model
    trained from LightGBM's start (separate stages, the first continued stage, the model of every column) and a
    search's measure are trained once for their columns over all the fits (alone, each fit trains its own); the last
    fit (the search order's continued stages) trains only its continued stages above the first."""
    from lightgbm_cegb.methods.ladder import ORDERS, STAGE_MODELS, StageMemo
    kinds = [(order, models) for order in ORDERS for models in STAGE_MODELS]
    memo = StageMemo()
    alone = {kind: lightgbm_trainings(fit, *kind, None) for kind in kinds}
    shared = {kind: lightgbm_trainings(fit, *kind, memo) for kind in kinds}
    for kind in kinds:
        model = shared[kind][0]
        np.testing.assert_array_equal(model.order_, alone[kind][0].order_)
        assert [b.model_to_string() for b in model.stages_] == [b.model_to_string() for b in alone[kind][0].stages_]
    for kind, other in itertools.combinations(kinds, 2):  # a fit's Boosters are its own
        assert not {id(b) for b in shared[kind][0].stages_} & {id(b) for b in shared[other][0].stages_}
    started = [made for kind in kinds for made in shared[kind][1] if not made[0]]
    assert len(started) == len(set(started))  # from the start: once for the same training rows
    assert len(started) < sum(not made[0] for kind in kinds for made in alone[kind][1])
    last = shared[kinds[-1]]
    assert len(last[1]) == len(last[0].stages_) - 1 and all(made[0] for made in last[1]), last[1]


def by_queries(X, y, group, parts):
    """X, y and group as Dask arrays of ``parts`` partitions of whole queries (the queries dealt out as evenly as
    they go)."""
    cut = np.linspace(0, len(group), parts + 1).round().astype(int)
    queries = tuple(int(b - a) for a, b in zip(cut[:-1], cut[1:]))
    rows = tuple(int(group[a:b].sum()) for a, b in zip(cut[:-1], cut[1:]))
    return (da.from_array(X, chunks=(rows, X.shape[1])), da.from_array(y, chunks=(rows,)),
            da.from_array(group, chunks=(queries,)))
