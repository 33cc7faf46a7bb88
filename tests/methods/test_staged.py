"""StagedAcquisitionClassifier: the cascade against an independent row-by-row simulation (Python loops, one
LightGBM predict per row and stage, lazy costs summed by hand, split costs from LightGBM's own leaves), one
pass answering every setting to the bit, the ladder, lazy serving, the sweep, bad input and scikit-learn's
checks."""

from __future__ import annotations

import copy
import math
import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from references import (
    compiled_serves_as_policy_run,
    lightgbm_trainings,
    memo_shares_trainings,
    on_thresholds,
    reference_costs,
)
from references import staged_case as random_case
from sklearn.utils.estimator_checks import parametrize_with_checks

from lightgbm_cegb import CEGBError, FeatureCosts, LazyPredictor
from lightgbm_cegb.core.errors import RoundsWarning
from lightgbm_cegb.methods.ladder import StageMemo
from lightgbm_cegb.methods.staged import StagedAcquisitionClassifier
from lightgbm_cegb.selection import fit_within_budget, sweep
from lightgbm_cegb.selection.workflows import BUDGET_METHODS


def linked(raw: np.ndarray) -> np.ndarray:
    """Class probabilities of raw scores as LightGBM's binary (sigmoid at scale 1) and multiclass (softmax) outputs
    compute them, with the C library's exp (``math.exp``), row by row."""
    raw = np.atleast_2d(raw)
    out = np.empty((len(raw), 2 if raw.shape[1] == 1 else raw.shape[1]))
    for i, scores in enumerate(raw):
        if len(scores) == 1:
            out[i, 1] = 1.0 / (1.0 + math.exp(-scores[0]))
            out[i, 0] = 1.0 - out[i, 1]
            continue
        top = max(scores)
        out[i] = [math.exp(s - top) for s in scores]
        total = 0.0
        for value in out[i]:
            total += value
        out[i] /= total
    return out


def simulate(model: StagedAcquisitionClassifier, x: np.ndarray, costs: FeatureCosts):
    """The cascade on one row, written from the module's description: (stage it stops at, probabilities, lazy
    cost, split cost). Continued stages: the row's raw scores are the sum of each stage's on its own columns."""
    prices = np.concatenate([[0.0], np.cumsum(model.unit_cost_[model.order_])])[model.stage_units_]
    last = len(prices) - 1
    if model.max_cost is not None:
        last = max(k for k in range(len(prices)) if prices[k] <= model.max_cost * (1 + 1e-12))
    split = costs.arrays(len(x))[2]
    k, p, evaluation, raw = 0, np.asarray(model.prior_, dtype=float), 0.0, 0.0
    while k < last and p.max() < 1.0 - model.tradeoff:
        k += 1
        row = np.full((1, len(x)), np.nan)
        for u in model.order_[:model.stage_units_[k]]:
            for f in model.units_[u]:
                row[0, f] = x[f]
        booster = model.stages_[k - 1]
        if model.stage_models == "continued":
            raw = raw + booster.predict(row, raw_score=True)[0]
            p = linked(np.atleast_1d(raw))[0]
        else:
            q = booster.predict(row)[0]
            p = np.array([1.0 - q, q]) if np.ndim(q) == 0 else np.asarray(q)
        trees = booster.num_model_per_iteration()
        evaluation += reference_costs(booster, row, np.zeros(len(x)), split, trees)[1][0]
    lazy = costs.arrays(len(x))[0]
    group_of, group_lazy, _ = costs.group_arrays(len(x))
    features = {f for u in model.order_[:model.stage_units_[k]] for f in model.units_[u]}
    groups = {int(group_of[f]) for f in features if group_of[f] >= 0}
    return k, p, sum(lazy[f] for f in features) + sum(group_lazy[g] for g in groups), evaluation


@settings(max_examples=18, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.05, 0.2, 0.5]), st.sampled_from([None, 2.0, 6.0]),
       st.sampled_from(["importance", "search"]), st.sampled_from(["separate", "continued"]))
def test_the_cascade_equals_an_independent_simulation(seed, tradeoff, max_cost, order, stage_models):
    X, y, costs, _ = random_case(seed)
    model = StagedAcquisitionClassifier(feature_costs=costs, stages=6, n_estimators=30, random_state=seed,
                                        tradeoff=tradeoff, max_cost=max_cost, order=order,
                                        stage_models=stage_models).fit(X, y)
    result = model.predict_result(X[:60])
    for i, x in enumerate(X[:60]):
        k, p, lazy, evaluation = simulate(model, x, costs)
        np.testing.assert_allclose(result.proba[i], p, rtol=1e-12, atol=1e-15)
        assert result.steps[i] == model.stage_units_[k]
        assert result.cost.acquisition[i] == pytest.approx(lazy, rel=1e-12, abs=1e-12)
        assert result.cost.evaluation[i] == pytest.approx(evaluation, rel=1e-12, abs=1e-12)
        assert set(np.flatnonzero(result.known[i])) == {f for u in model.order_[:model.stage_units_[k]]
                                                        for f in model.units_[u]}


@settings(max_examples=10, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from(["separate", "continued"]))
def test_one_pass_answers_every_setting_to_the_bit(seed, stage_models):
    X, y, costs, rng = random_case(seed)
    model = StagedAcquisitionClassifier(feature_costs=costs, stages=8, n_estimators=30, random_state=seed,
                                        stage_models=stage_models).fit(X, y)
    settings_ = [{"tradeoff": float(t), "max_cost": c} for t in rng.uniform(0, 0.6, 4) for c in (None, 1.0, 4.0)]
    for setting, result in zip(settings_, model.predict_results(X, settings_)):
        own = copy.copy(model).set_params(**setting).predict_result(X)
        for field in ("proba", "order", "known"):
            np.testing.assert_array_equal(getattr(result, field), getattr(own, field))
        np.testing.assert_array_equal(result.cost.acquisition, own.cost.acquisition)
        np.testing.assert_array_equal(result.cost.evaluation, own.cost.evaluation)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.floats(0.0, 1.0), st.sampled_from(["separate", "continued"]))
def test_stages_above_max_stage_cost_are_not_trained_and_the_capped_runs_are_the_same(seed, fraction, stage_models):
    """A model fitted with max_stage_cost holds the first stages of the full ladder (the same boosters) and runs as
    the full model at any max_cost up to it, to the bit; without a cap, as the full model at that cap."""
    X, y, costs, rng = random_case(seed)
    full = StagedAcquisitionClassifier(feature_costs=costs, stages=8, n_estimators=30, random_state=seed,
                                       stage_models=stage_models).fit(X, y)
    ceiling = float(fraction * full.stage_costs()[-1])
    capped = StagedAcquisitionClassifier(feature_costs=costs, stages=8, n_estimators=30, random_state=seed,
                                         max_stage_cost=ceiling, stage_models=stage_models).fit(X, y)
    kept = int(np.sum(full.stage_costs() <= ceiling * (1 + 1e-12)))
    np.testing.assert_array_equal(capped.stage_units_, full.stage_units_[:kept])
    assert [b.model_to_string() for b in capped.stages_] == [b.model_to_string() for b in full.stages_[:kept - 1]]
    for max_cost in (None, ceiling, ceiling * float(rng.uniform(0, 1))):
        got = copy.copy(capped).set_params(tradeoff=0.1, max_cost=max_cost).predict_result(X)
        own = copy.copy(full).set_params(tradeoff=0.1, max_cost=ceiling if max_cost is None else max_cost)
        expected = own.predict_result(X)
        for field in ("proba", "order", "known"):
            np.testing.assert_array_equal(getattr(got, field), getattr(expected, field))
        np.testing.assert_array_equal(got.cost.per_instance, expected.cost.per_instance)


def lightgbm_ladder(model: StagedAcquisitionClassifier, X: np.ndarray) -> np.ndarray:
    """The cascade's probabilities on LightGBM's own ``predict`` of each stage, rows at a time (from the module's
    description); continued stages: the sum of the stages' raw scores (LightGBM's ``predict(raw_score=True)``), below
    + own, through ``linked``."""
    prices = np.concatenate([[0.0], np.cumsum(model.unit_cost_[model.order_])])[model.stage_units_]
    last = len(prices) - 1 if model.max_cost is None else \
        max(k for k in range(len(prices)) if prices[k] <= model.max_cost * (1 + 1e-12))
    proba = np.tile(model.prior_, (len(X), 1))
    raw = np.zeros((len(X), 1 if len(model.classes_) == 2 else len(model.classes_)))
    going = np.ones(len(X), dtype=bool)
    for k in range(1, last + 1):
        going &= proba.max(axis=1) < 1.0 - model.tradeoff
        if not going.any():
            break
        columns = sorted(f for u in model.order_[:model.stage_units_[k]] for f in model.units_[u])
        rows = np.full((int(going.sum()), X.shape[1]), np.nan)
        rows[:, columns] = X[going][:, columns]
        if model.stage_models == "continued":
            own = model.stages_[k - 1].predict(rows, raw_score=True).reshape(len(rows), -1)
            raw[going] = own if k == 1 else raw[going] + own
            proba[going] = linked(raw[going])
            continue
        q = model.stages_[k - 1].predict(rows)
        proba[going] = np.column_stack([1.0 - q, q]) if q.ndim == 1 else q
    return proba


@settings(max_examples=16, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.05, 0.2, 0.5]), st.sampled_from([None, 4.0]),
       st.sampled_from(["separate", "continued"]))
def test_the_compiled_stages_predict_as_lightgbm_to_the_bit(seed, tradeoff, max_cost, stage_models):
    """The stages compiled as one (predict_proba's one call, and each stage's probabilities in a run) equal the cascade
    on LightGBM's own predict to the bit (continued stages: on its raw scores, added in stage order, and the link
    with the C library's exp), on rows with NaN and values on the splits' thresholds and next to them, in one thread
    and in two."""
    X, y, costs, rng = random_case(seed)
    model = StagedAcquisitionClassifier(feature_costs=costs, stages=6, n_estimators=30, random_state=seed,
                                        tradeoff=tradeoff, max_cost=max_cost, stage_models=stage_models).fit(X, y)
    Z = np.vstack([X, on_thresholds(model.stages_, X, rng)])
    expected = lightgbm_ladder(model, Z)
    for n_jobs in (1, 2):
        model.set_params(n_jobs=n_jobs)
        np.testing.assert_array_equal(model.predict_proba(Z), expected)
        np.testing.assert_array_equal(model.predict_result(Z).proba, expected)
        np.testing.assert_array_equal(model.predict(Z), model.classes_[expected.argmax(axis=1)])
    np.testing.assert_array_equal(model.predict_proba(Z[:1]), expected[:1])


def test_continued_stages_add_trees_to_the_raw_scores_of_the_stage_below():
    """Fitted on the same rows, columns and seed, the first stage is the same model of either kind and the continued
    later stages' trees are not the separate ones' (they start from the scores below); the scores a pass carries are
    the stages' raw scores added in stage order to the bit; the compiled stacks take the rows' scores only where they
    are continued, and a continued model whose stages the stack cannot compile is refused."""
    X, y, costs, _ = random_case(3)
    models = {kind: StagedAcquisitionClassifier(feature_costs=costs, stages=5, n_estimators=40, random_state=0,
                                                stage_models=kind).fit(X, y) for kind in ("separate", "continued")}
    separate, continued = models["separate"], models["continued"]
    np.testing.assert_array_equal(separate.stage_units_, continued.stage_units_)
    assert separate.stages_[0].model_to_string() == continued.stages_[0].model_to_string()
    assert all(a.model_to_string() != b.model_to_string() for a, b in zip(separate.stages_[1:], continued.stages_[1:]))
    raw, expected = continued._carried(len(X)), None
    for k in range(1, len(continued.stage_units_)):
        masked = continued._masked(X, k)
        continued._proba(k, masked, raw)
        own = continued.stages_[k - 1].predict(masked, raw_score=True).reshape(len(X), -1)
        expected = own if expected is None else expected + own
        np.testing.assert_array_equal(raw, expected, err_msg=f"stage {k}")
    proba = continued.predict_proba(X)
    np.testing.assert_array_equal(copy.copy(continued).set_params(stage_models="separate").predict_proba(X), proba)
    with pytest.raises(ValueError, match="continued stack takes the rows' scores"):
        continued._stack().proba(X, 1, 1)
    with pytest.raises(ValueError, match="by a continued stack only"):
        separate._stack().proba(X, 1, 1, raw)
    edited = copy.copy(continued)
    text = continued.stages_[0].model_to_string()
    edited.stages_ = [type(continued.stages_[0])(model_str=text.replace("sigmoid:1\n", "sigmoid:3\n"))] + \
        continued.stages_[1:]
    with pytest.raises(CEGBError, match="stage_models='continued'"):
        edited.predict_proba(X)


def test_a_stage_whose_output_the_compiled_stages_do_not_repeat_is_predicted_by_lightgbm():
    """A stage whose objective is not binary's sigmoid or the multiclass softmax, or whose sigmoid scale the model
    text rounds (its parameters say another), is predicted by LightGBM itself."""
    from types import SimpleNamespace

    from lightgbm_cegb.methods.acquisition import output_scale

    plain = SimpleNamespace(params={})
    assert output_scale(plain, "binary sigmoid:2.5", 2) == 2.5
    assert output_scale(SimpleNamespace(params={"sigmoid": 2.5}), "binary sigmoid:2.5", 2) == 2.5
    assert output_scale(plain, "multiclass num_class:3", 3) == 0.0
    for booster, objective, classes in [
            (plain, "multiclassova num_class:3 sigmoid:1", 3), (plain, "multiclass num_class:4", 3),
            (plain, "binary sigmoid:0", 2), (plain, "cross_entropy", 2), (plain, None, 2),
            (SimpleNamespace(params={"sigmoid": 2.5000001}), "binary sigmoid:2.5", 2)]:
        assert output_scale(booster, objective, classes) is None

    X, y, costs, _ = random_case(11)
    model = StagedAcquisitionClassifier(feature_costs=costs, stages=4, n_estimators=20, random_state=0,
                                        tradeoff=0.1).fit(X, y)
    assert len(model.classes_) == 2 and model._stack() is not None
    edited = copy.copy(model)
    text = model.stages_[0].model_to_string()
    assert "objective=binary sigmoid:1\n" in text
    # another list of stages is compiled again; this one's objective line and parameters disagree
    edited.stages_ = [type(model.stages_[0])(model_str=text.replace("binary sigmoid:1\n", "binary sigmoid:3\n"))] + \
        model.stages_[1:]
    assert edited._stack() is None
    expected = lightgbm_ladder(edited, X)
    assert not np.array_equal(expected, model.predict_proba(X))
    np.testing.assert_array_equal(edited.predict_proba(X), expected)
    np.testing.assert_array_equal(edited.predict_result(X).proba, expected)


def test_the_ladder_and_the_order():
    X, y, costs, _ = random_case(3)
    model = StagedAcquisitionClassifier(feature_costs=costs, stages=4, n_estimators=30, random_state=0).fit(X, y)
    assert model.stage_units_[0] == 0 and (np.diff(model.stage_units_) > 0).all()
    assert model.stage_units_[-1] == len(model.order_) and len(model.stages_) == len(model.stage_units_) - 1
    prices = model.stage_costs()
    assert prices[0] == 0 and (np.diff(prices) >= 0).all()
    gain = model.stages_[-1].feature_importance("gain")
    assert all(gain[list(model.units_[u])].sum() >= 0 for u in model.order_)
    # tradeoff 1 - max(prior): every row stops at stage 0, buying nothing
    scale = model.first_value()
    nothing = copy.copy(model).set_params(tradeoff=scale).predict_result(X)
    assert nothing.cost.acquisition.sum() == 0 and (nothing.steps == 0).all()
    assert model.tradeoff_scale(X, y) == pytest.approx(scale)
    assert copy.copy(model).set_params(max_cost=0.0).predict_result(X).cost.acquisition.max() <= 0.0 + \
        sum(p for p in model.unit_cost_ if p == 0)


def test_the_search_order_buys_first_the_cheap_unit_a_costly_copy_hides_from_the_importance_order():
    """A costly feature carries the label, a cheap one the same signal with a little noise: a model of every feature
    splits on the costly one, so the importance order (gain per unit of cost) buys it first and the cheap one,
    which gains almost nothing beside it, late; the search measures each alone and buys the cheap one first, and
    within its price the search order's model is the better one (the importance order's has no stage there). The
    same units either way; the order is saved with the model."""
    rng = np.random.default_rng(0)
    signal = rng.normal(size=3000)
    X = np.column_stack([signal + rng.normal(0, 0.3, 3000), rng.normal(size=(3000, 3)), signal])
    y = (signal > 0).astype(int)
    costs = FeatureCosts(lazy=[1.0, 1.0, 1.0, 1.0, 8.0])
    train, valid = (X[:2000], y[:2000]), (X[2000:], y[2000:])
    by = {order: StagedAcquisitionClassifier(feature_costs=costs, order=order, stages=5, n_estimators=200,
                                             random_state=0).fit(*train, eval_set=valid)
          for order in ("importance", "search")}
    assert by["importance"].order_[0] == 4 and by["search"].order_[0] == 0
    assert sorted(by["importance"].order_) == sorted(by["search"].order_)
    assert by["search"].stage_costs()[1] == 1.0 and by["importance"].stage_costs()[1] == 8.0
    accuracy = {order: float((model.set_params(max_cost=1.0).predict(valid[0]) == valid[1]).mean())
                for order, model in by.items()}
    assert accuracy["search"] > 0.85 > accuracy["importance"], accuracy


def test_the_search_order_reads_no_eval_set_and_is_saved(tmp_path):
    """The search measures on a part of the training rows: the rows that stop the stages (a sweep's validation rows,
    which choose among its models) do not change the order; with no held-out rows at all it still runs."""
    X, y, costs, _ = random_case(4)
    half = len(X) // 2
    orders = [StagedAcquisitionClassifier(feature_costs=costs, order="search", stages=4, n_estimators=30,
                                          random_state=0).fit(X[:half], y[:half], eval_set=rows).order_
              for rows in ((X[half:], y[half:]), (X[half:][::-1][:40], y[half:][::-1][:40]))]
    np.testing.assert_array_equal(orders[0], orders[1])
    model = StagedAcquisitionClassifier(feature_costs=costs, order="search", stages=4, n_estimators=30,
                                        validation_fraction=0.0, random_state=0).fit(X, y)
    with pytest.raises(CEGBError, match="order='search' measures .* the 2 training rows are too few"):
        StagedAcquisitionClassifier(order="search", validation_fraction=0.0).fit(X[:2], [0, 1])
    model.save(tmp_path / "m")
    again = StagedAcquisitionClassifier.load(tmp_path / "m")
    assert again.order == "search"
    np.testing.assert_array_equal(again.order_, model.order_)
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))


@pytest.mark.parametrize("seed", [6, 7])
def test_fits_sharing_a_memo_train_each_model_once_and_give_the_models_they_train_alone(seed):
    X, y, costs, _ = random_case(seed)
    half = len(X) // 2

    def fit(order, stage_models, memo, rows=half, **extra):
        return StagedAcquisitionClassifier(feature_costs=costs, order=order, stage_models=stage_models, stages=5,
                                           random_state=0, **{"n_estimators": 40, **extra}).fit(
            X[:rows], y[:rows], eval_set=(X[half:], y[half:]), memo=memo)

    memo_shares_trainings(fit)
    memo = StageMemo()
    fit("importance", "separate", memo)
    # other rows, another setting: trained again, as without the memo
    for extra in ({"rows": half - 10}, {"learning_rate": 0.2}):
        assert lightgbm_trainings(fit, "importance", "separate", memo, **extra)[1] == \
            lightgbm_trainings(fit, "importance", "separate", None, **extra)[1]
    again = pickle.loads(pickle.dumps(memo))
    assert lightgbm_trainings(fit, "importance", "separate", again)[1]  # pickled empty: trains
    capped = []
    for _ in range(2):  # the second fit recalls every training, and their warnings are given again
        with pytest.warns(RoundsWarning, match="reached n_estimators=3"):
            capped.append(lightgbm_trainings(fit, "importance", "separate", memo, n_estimators=3,
                                             learning_rate=0.01))
    assert capped[0][1] and not capped[1][1]
    assert [b.model_to_string() for b in capped[0][0].stages_] == [b.model_to_string() for b in capped[1][0].stages_]
    with warnings.catch_warnings():  # a filter by module: the recalled warnings are filtered as the trained ones
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=RoundsWarning, module="lightgbm_cegb")
        assert not lightgbm_trainings(fit, "importance", "separate", memo, n_estimators=3, learning_rate=0.01)[1]


def test_a_memo_tells_class_labels_apart_and_gives_each_fit_boosters_of_its_own():
    """A dict of class weights weighs labels: fits whose labels differ (the same codes) share nothing; a model edited
    in place after its fit changes neither the fits that recalled its training nor the memo."""
    X, y, costs, _ = random_case(1)
    y = (y > 0).astype(int)

    def fit(labels, memo, stage_models="separate"):
        return StagedAcquisitionClassifier(feature_costs=costs, stages=4, n_estimators=30, random_state=0,
                                           class_weight={1: 5.0}, stage_models=stage_models).fit(X, labels, memo=memo)

    def texts(model):
        return [b.model_to_string() for b in model.stages_]

    memo = StageMemo()
    fit(y, memo)
    shifted, made = lightgbm_trainings(fit, y + 1, memo)  # {1: 5.0} weighs the other class now
    assert made and texts(shifted) == texts(fit(y + 1, None))
    first, second = fit(y, memo), fit(y, memo)
    before = texts(second)
    first.stages_[0].set_leaf_output(0, 0, 123.0)
    assert texts(second) == before
    continued, made = lightgbm_trainings(fit, y, memo, "continued")
    assert texts(continued) == texts(fit(y, None, "continued"))


def test_fits_in_threads_with_memos_leave_the_process_s_warning_filters_as_they_were():
    """A memo records a training's warnings with Python's filters, which are the process's: fits in two threads, each
    with its memo, record one at a time (two recordings at once restored each other's filters, and the process lost
    every later warning)."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] + rng.normal(0, 1, 1500) > 0.8).astype(int)

    def fit(seed):
        return StagedAcquisitionClassifier(stages=4, n_estimators=5, learning_rate=0.01, random_state=seed,
                                           n_jobs=1).fit(X, y, memo=StageMemo())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RoundsWarning)
        before = (list(warnings.filters), warnings.showwarning, warnings._showwarnmsg_impl)
        for trial in range(8):
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(fit, (trial, 1000 + trial)))
            assert (list(warnings.filters), warnings.showwarning, warnings._showwarnmsg_impl) == before, trial


def test_lazy_serving_fetches_the_stages_units_and_predicts_as_the_model():
    X, y, _, _ = random_case(5)
    costs = FeatureCosts(lazy=np.arange(1.0, X.shape[1] + 1), groups={"pair": [1, 2]}, group_lazy=[1.5])
    model = StagedAcquisitionClassifier(feature_costs=costs, stages=6, n_estimators=30, tradeoff=0.2,
                                        random_state=0).fit(X, y)
    rows = X[:50]
    calls = []

    def fetch(key, ids):
        calls.append((key, list(ids)))
        return rows[np.asarray(ids)][:, [1, 2]] if key == "pair" else rows[np.asarray(ids), key]

    lazy = LazyPredictor(model, fetch, feature_keys="index")
    result = lazy.acquire(np.full(rows.shape, np.nan), method="predict_proba")
    expected = model.predict_result(rows)
    np.testing.assert_array_equal(result.prediction, expected.proba)
    np.testing.assert_allclose(result.acquisition, expected.cost.acquisition, rtol=1e-12)
    np.testing.assert_array_equal(result.fetched, expected.known)
    pairs = [(key, i) for key, ids in calls for i in ids]
    assert len(pairs) == len(set(pairs))  # each (row, key) once; the group whole
    assert not {key for key, _ in calls} & {1, 2}
    # values given in X are neither fetched nor paid
    calls.clear()
    given = np.zeros(rows.shape, dtype=bool)
    given[:, 0] = True
    partial = lazy.acquire(np.where(given, rows, np.nan), given)
    np.testing.assert_array_equal(partial.prediction, model.predict(rows))
    assert all(key != 0 for key, _ in calls)
    assert (partial.acquisition <= expected.cost.acquisition + 1e-12).all()


@settings(max_examples=18, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.1, 0.3]), st.sampled_from(["raise", "partial"]),
       st.sampled_from(["separate", "continued"]))
def test_the_compiled_ladder_serves_as_the_policy_run(seed, tradeoff, errors, stage_models):
    """LazyPredictor serves a staged model on its compiled ladder (CompiledPolicyRun) with the fetches, payments,
    values, statuses and predictions of the model's own policy run driven by PolicyModelRun: groups, split and tree
    costs, values given in X, and failed fetches (every row of a failed call stops where it stands)."""
    X, y, costs, rng = random_case(seed)
    costs = FeatureCosts.from_dict({**costs.to_dict(X.shape[1]), "tree": float(rng.choice([0.0, 0.01]))})
    model = StagedAcquisitionClassifier(feature_costs=costs, stages=6, n_estimators=30, random_state=seed,
                                        tradeoff=tradeoff, stage_models=stage_models).fit(X, y)
    compiled_serves_as_policy_run(model, X[:40], costs, rng, errors)


@pytest.mark.parametrize("stage_models", ["separate", "continued"])
def test_save_and_load(tmp_path, stage_models):
    X, y, costs, _ = random_case(7)
    model = StagedAcquisitionClassifier(feature_costs=costs, stages=5, n_estimators=30, tradeoff=0.1,
                                        random_state=0, stage_models=stage_models).fit(X, y)
    model.save(tmp_path / "m")
    again = StagedAcquisitionClassifier.load(tmp_path / "m")
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(again.prediction_cost(X).per_instance, model.prediction_cost(X).per_instance)
    # the fitted kind is saved: a parameter changed after fit changes the next fit only
    other = "separate" if stage_models == "continued" else "continued"
    copy.copy(model).set_params(stage_models=other).save(tmp_path / "edited")
    again = StagedAcquisitionClassifier.load(tmp_path / "edited")
    assert again.stage_models == other and again.stage_models_ == stage_models
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))


@pytest.mark.parametrize("params, match", [
    ({"tradeoff": -0.1}, "tradeoff"), ({"tradeoff": 1.5}, "tradeoff"), ({"max_cost": -1.0}, "max_cost"),
    ({"stages": 0}, "stages"), ({"max_stage_cost": -1.0}, "max_stage_cost"), ({"order": "gain"}, "order"),
    ({"stage_models": "stacked"}, "stage_models"),
    ({"learning_rate": 0.0}, "learning_rate"), ({"num_leaves": 1}, "num_leaves"),
    ({"num_leaves": "many"}, "num_leaves"),
    ({"class_weight": "auto"}, "class_weight"),
    ({"class_weight": {7: 2.0}}, "class_weight should be .* by class label"),
    ({"validation_fraction": 0.95}, "validation_fraction")])
def test_bad_parameters_are_refused_by_name(params, match):
    X, y, _, _ = random_case(1)
    with pytest.raises(CEGBError, match=match):
        StagedAcquisitionClassifier(**params).fit(X, y)


def test_bad_settings_are_refused_by_name():
    X, y, costs, _ = random_case(2)
    model = StagedAcquisitionClassifier(feature_costs=costs, stages=3, n_estimators=20, random_state=0).fit(X, y)
    with pytest.raises(CEGBError, match="tradeoff and max_cost only"):
        model.predict_results(X, [{"threshold": 0.9}])
    with pytest.raises(CEGBError, match="max_cost"):
        model.predict_results(X, [{"max_cost": -2.0}])


def test_the_sweep_and_fit_within_budget_run_it():
    assert "staged_acquisition" in BUDGET_METHODS
    X, y, costs, _ = random_case(9)
    train, valid = (X[:200], y[:200]), (X[200:], y[200:])
    frame = sweep(["staged_acquisition"], train, valid, costs, task="multiclass" if len(np.unique(y)) > 2 else
                  "binary", progress=False)
    points = frame[frame["method"] == "staged_acquisition"]
    assert len(points) > 10 and points["cost"].min() < points["cost"].max()
    for _, point in points.sample(5, random_state=0).iterrows():  # each point is its own model's run
        model = point["model"].fitted_model()
        assert point["cost"] == pytest.approx(model.prediction_cost(valid[0]).mean, rel=1e-12)
    budget = float(points["cost"].median())
    chosen = fit_within_budget(train, valid, costs, budget, task="multiclass" if len(np.unique(y)) > 2 else
                               "binary", methods=["staged_acquisition"], progress=False)
    assert chosen.valid_cost <= budget * (1 + 1e-9)
    swept = chosen.frontier[(chosen.frontier["method"] == "staged_acquisition")
                            & (chosen.frontier["cost"] <= budget * (1 + 1e-9))]
    assert len(swept) and chosen.valid_quality >= swept["quality"].max()  # the cheap-subset baseline may win


@parametrize_with_checks([StagedAcquisitionClassifier(stages=4, n_estimators=20, random_state=0)])
def test_scikit_learn_checks(estimator, check):
    check(estimator)


def test_a_stage_still_improving_at_the_round_cap_warns_and_auto_leaves_grow_with_the_rows():
    from lightgbm_cegb.core.errors import RoundsWarning
    from lightgbm_cegb.methods.acquisition import AUTO_LEAVES_FROM, auto_value
    X, y, costs, _ = random_case(3)
    with pytest.warns(RoundsWarning, match=r"StagedAcquisitionClassifier: the stage of \d+ of the \d+ columns reached "
                                           r"n_estimators=3 while its held-out log loss was still improving"):
        StagedAcquisitionClassifier(feature_costs=costs, stages=3, n_estimators=3, learning_rate=0.01,
                                    random_state=0).fit(X, y)
    ladder = StagedAcquisitionClassifier._auto_leaves
    assert [auto_value(n, ladder) for n in (300, AUTO_LEAVES_FROM[0] - 1, AUTO_LEAVES_FROM[0],
                                             AUTO_LEAVES_FROM[1] - 1, AUTO_LEAVES_FROM[1])] == [15, 15, 31, 31, 63]
    model = StagedAcquisitionClassifier(feature_costs=costs, stages=3, n_estimators=30, random_state=0).fit(X, y)
    leaves = [tree["num_leaves"] for booster in model.stages_ for tree in booster.dump_model()["tree_info"]]
    assert max(leaves) <= 15 < 31  # 240 training rows: the bundled sets' 15 leaves
    wider = StagedAcquisitionClassifier(feature_costs=costs, stages=3, n_estimators=30, num_leaves=31,
                                        min_child_samples=2, random_state=0).fit(X, y)
    assert max(tree["num_leaves"] for booster in wider.stages_ for tree in booster.dump_model()["tree_info"]) > 15


def test_balanced_class_weights_make_stage_0_unsure_on_imbalanced_classes():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2000, 4))
    y = (X[:, 0] + 0.5 * rng.normal(size=2000) > 1.6).astype(int)  # about 7% positive
    costs = FeatureCosts(lazy=[1.0, 2.0, 3.0, 4.0])
    plain = StagedAcquisitionClassifier(feature_costs=costs, stages=3, random_state=0).fit(X, y)
    balanced = StagedAcquisitionClassifier(feature_costs=costs, stages=3, class_weight="balanced",
                                           random_state=0).fit(X, y)
    assert plain.prior_[1] < 0.1
    np.testing.assert_allclose(balanced.prior_, [0.5, 0.5], rtol=1e-12)
    # at the same tradeoff the unweighted cascade stops every row at stage 0 (0.93 >= 1 - 0.1), the balanced one buys
    at = {"tradeoff": 0.1}
    assert plain.set_params(**at).predict_result(X).cost.mean == 0.0
    result = balanced.set_params(**at).predict_result(X)
    assert result.cost.mean > 0 and result.steps.max() > 0
    # the weighted stages see the positives: balanced accuracy above the unweighted cascade's at no tradeoff
    from sklearn.metrics import balanced_accuracy_score
    full = {"tradeoff": 0.0}
    assert balanced_accuracy_score(y, balanced.set_params(**full).predict(X)) > \
        balanced_accuracy_score(y, plain.set_params(**full).predict(X))


def three_classes(n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 0.5)


@pytest.mark.parametrize(("key", "edit", "message"), [
    ("prior", lambda prior: [5.0] * len(prior), r"prior should hold probabilities that sum to 1, got a sum of 15"),
    ("prior", lambda prior: [0.0] * len(prior), r"prior should hold probabilities that sum to 1, got a sum of 0"),
    ("units", lambda units: [units[0] + units[1]] + units[1:], r"units should hold each of the 4 columns once \(a "
                                                               r"partition of the columns\), got column \d in 2 units"),
    ("units", lambda units: [units[0]] * len(units),
     r"units should hold each of the 4 columns once .*, got column \d in [04] units"),
    ("stage_models", lambda kind: "stacked", r"stage_models should be one of separate, continued, got 'stacked'"),
])
def test_a_saved_state_is_checked_for_meaning(tmp_path, key, edit, message):
    """Issue 61 (11): the saved state was checked for shape only: a prior of [5, 5, 5] loaded and predict_proba's
    rows summed to 15; units that share a column or leave one out loaded. A prior is a distribution, and the units
    partition the columns (as FeatureCosts.units makes them)."""
    import json
    X, y = three_classes()
    StagedAcquisitionClassifier(stages=3, n_estimators=10, random_state=0).fit(X, y).save(tmp_path / "m")
    path = tmp_path / "m" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["state"][key] = edit(manifest["state"][key])
    path.write_text(json.dumps(manifest))
    with pytest.raises(CEGBError, match=r"manifest\.json' \(state\): " + message):
        StagedAcquisitionClassifier.load(tmp_path / "m")


def test_purchases_are_named_by_group_and_feature(tmp_path):
    """A result names what each row bought (issue 61, item 17: the staged model reported column positions): its
    groups by name, its features by the frame's columns, or Column_<j> without names; a loaded model too."""
    import pandas as pd

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(400, 5)), columns=["age", "bp", "x1", "x2", "scan"])
    y = (X["age"] + X["bp"] * X["x1"] > 0).astype(int)
    costs = FeatureCosts(lazy=[1.0, 1.0, 0.0, 0.0, 5.0], groups={"lab": ["x1", "x2"]}, group_lazy=[3.0])
    model = StagedAcquisitionClassifier(feature_costs=costs, tradeoff=0.1, n_estimators=30, random_state=0).fit(X, y)
    result = model.predict_result(X)
    assert result.unit_names == ["lab", "age", "bp", "scan"]
    for row in range(len(X)):
        bought = result.purchases(row)
        assert bought == [result.unit_names[u] for u in result.order[row][:result.steps[row]]]
        columns = sorted(X.columns.get_loc(c) for name in bought for c in (["x1", "x2"] if name == "lab" else [name]))
        assert columns == np.flatnonzero(result.known[row]).tolist()
    model.save(tmp_path / "staged")
    assert StagedAcquisitionClassifier.load(tmp_path / "staged").predict_result(X).unit_names == result.unit_names
    plain = StagedAcquisitionClassifier(feature_costs=[1.0, 1.0, 0.0, 0.0, 5.0], n_estimators=30, random_state=0)
    assert plain.fit(X.to_numpy(), y).predict_result(X.to_numpy()[:2]).unit_names == [f"Column_{j}" for j in range(5)]
