"""The subset search of core.subsets on set functions whose best answers are known (the cheap-subset baseline and
the staged acquisition's order measure LightGBM models with it: tests/selection/test_baseline.py,
tests/methods/test_staged.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightgbm_cegb.core.subsets import SubsetSearch, Unit, columns_of, query_subsample, subsample_index


def _coverage_search(weights, covers, costs):
    """A search whose subsets' quality is a weighted coverage (submodular): the sum of the weights of the elements
    its units' columns cover."""
    pool = [Unit(f"u{i}", (i,), float(c)) for i, c in enumerate(costs)]

    def score(columns):
        covered = set().union(*(covers[j] for j in columns)) if columns else set()
        return float(sum(weights[e] for e in covered))
    return SubsetSearch(score, 0.0), pool, lambda taken: score(tuple(columns_of(taken)))


def _random_coverage(seed: int):
    """A coverage search of 2 to 7 random units (``_coverage_search``) and its random generator."""
    rng = np.random.default_rng(seed)
    n_units, n_elements = int(rng.integers(2, 8)), 12
    weights = rng.integers(1, 10, n_elements).astype(float)
    covers = [set(rng.choice(n_elements, int(rng.integers(1, 5)), replace=False).tolist()) for _ in range(n_units)]
    return (*_coverage_search(weights, covers, rng.choice([0.5, 1.0, 2.0, 3.0], n_units)), rng)


def _plain_greedy(measure, pool, chosen: list, quality: float, budget, by_ratio: bool) -> list:
    """The greedy search with every unit measured at every step: units added to ``chosen`` (in place) within
    ``budget`` while one gains (the first in any case); each step's subset."""
    steps = []
    while True:
        spent = sum(u.cost for u in chosen)
        scores = [((measure(chosen + [u]) - quality) / (u.cost if by_ratio else 1.0), -i, u) for i, u in enumerate(pool)
                  if u not in chosen and (budget is None or spent + u.cost <= budget)]
        if not scores:
            return steps
        score, _, unit = max(scores, key=lambda s: s[:2])
        if score <= 0 and chosen:
            return steps
        chosen.append(unit)
        quality = measure(chosen)
        steps.append(list(chosen))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.booleans(), st.sampled_from([None, 3.0, 6.0]))
def test_the_lazy_search_is_the_greedy_search_on_submodular_gains(seed, by_ratio, budget):
    """On a coverage function (gains shrink as the subset grows) the lazy search measures fewer subsets and takes
    the units the plain greedy search (every unit measured at every step) takes."""
    search, pool, measure, _ = _random_coverage(seed)
    path: list = []
    search.forward([], 0.0, pool, budget, 20, path, by_ratio)
    expected = _plain_greedy(measure, pool, [], 0.0, budget, by_ratio)
    assert [[u.name for u in step] for step in path] == [[u.name for u in step] for step in expected]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(0, 10_000))
def test_the_nested_search_is_the_greedy_search_level_by_level(seed):
    """``nested`` (the staged acquisition's order) takes, level after rising level, the units the plain greedy search
    by gain per unit of cost takes within that level from the subset of the level below (every unit measured at
    every step), though its bounds are kept from level to level; each level's subset is within its price."""
    search, pool, measure, rng = _random_coverage(seed)
    levels = np.cumsum(rng.choice([0.5, 1.0, 2.0], int(rng.integers(1, 5))))
    measured = []
    score = search.score
    search.score = lambda columns: (measured.append(columns), score(columns))[1]
    taken = search.nested([], pool, levels)
    chosen: list = []  # the plain greedy search, level by level
    for level in levels:
        _plain_greedy(measure, pool, chosen, measure(chosen) if chosen else 0.0, level, True)
        assert sum(u.cost for u in chosen) <= level
    assert [u.name for u in taken] == [u.name for u in chosen]
    assert len(measured) == len(set(measured))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=40), st.integers(1, 400))
def test_a_query_subsample_holds_whole_queries_up_to_the_first_that_reaches_the_size(sizes, size):
    group = np.array(sizes)
    index, kept = query_subsample(group, size)
    starts = np.concatenate([[0], np.cumsum(group)[:-1]])
    queries = [q for q in range(len(group)) if starts[q] in set(index.tolist())]
    assert kept.tolist() == group[queries].tolist()  # in query order
    np.testing.assert_array_equal(index, np.concatenate([np.arange(starts[q], starts[q] + group[q]) for q in queries]))
    assert kept.sum() >= min(size, group.sum()) and kept.sum() - kept.max() < size  # up to the first that reaches it
    np.testing.assert_array_equal(query_subsample(group, size)[0], index)  # seeded


def test_pruning_drops_a_unit_the_later_ones_made_useless():
    a, b, c = Unit("a", (0,), 3.0), Unit("b", (1,), 1.0), Unit("c", (2,), 1.0)
    quality = {frozenset("a"): 0.6, frozenset("b"): 0.5, frozenset("c"): 0.5, frozenset("ab"): 0.7,
               frozenset("ac"): 0.7, frozenset("bc"): 0.8, frozenset("abc"): 0.8}
    names = {0: "a", 1: "b", 2: "c"}
    search = SubsetSearch(lambda columns: quality[frozenset(names[j] for j in columns)], 0.0)
    path = [[a], [a, b], [a, b, c]]
    kept, q = search.prune([a, b, c], 0.8, path)
    assert [u.name for u in kept] == ["b", "c"] and q == 0.8 and [u.name for u in path[-1]] == ["b", "c"]
    assert search.prune([b, c], 0.8, path)[0] == [b, c] and len(path) == 4  # nothing to drop: no new step


def test_every_subset_is_measured_once():
    calls = []

    def score(columns):
        calls.append(columns)
        return float(len(columns))
    search = SubsetSearch(score, 0.0)
    a, b = Unit("a", (3,), 1.0), Unit("b", (1, 2), 2.0)
    assert search.measure([a, b]) == search.measure([b, a]) == 3.0
    assert calls == [(1, 2, 3)]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.integers(1, 200), st.booleans())
def test_a_subsample_holds_each_class_in_proportion(seed, size, classes):
    y = np.random.default_rng(seed).choice([0, 1, 1, 2, 2, 2, 2], 400)
    index = subsample_index(y, size, classes)
    assert (np.diff(index) > 0).all() and np.array_equal(index, subsample_index(y, size, classes))
    if classes:
        for label in np.unique(y):
            share = size * np.mean(y == label)
            assert np.sum(y[index] == label) == max(1, round(share))
    else:
        assert len(index) == size


def test_a_run_below_a_price_finds_cheap_units_that_a_costly_one_crowds_out():
    """The costly unit gains the most per unit of cost alone; four cheap units gain little each but much together
    (not submodular): only the run among the units of price 1 reaches them within the budget."""
    pool = [Unit("costly", (0,), 4.0)] + [Unit(f"cheap{j}", (j,), 1.0) for j in range(1, 5)]

    def score(columns):
        cheap = sum(1 for j in columns if j > 0)
        return (0.6 if 0 in columns else 0.0) + 0.05 * cheap + (0.7 if cheap == 4 else 0.0)
    search = SubsetSearch(score, 0.0)
    paths = search.runs(pool, 6.0, 10)
    assert len(paths) == 3  # by ratio, by gain, below the price 1
    assert {u.name for u in paths[0][-1]} == {"costly", "cheap1", "cheap2"}  # by ratio: 0.7
    assert {u.name for u in paths[2][-1]} == {"cheap1", "cheap2", "cheap3", "cheap4"}  # 0.9
    best = max((path[-1] for path in paths), key=search.measure)
    assert search.measure(best) == pytest.approx(0.9)


def test_the_runs_below_a_price_cap_at_the_price_below_each_answer_s_costliest_unit():
    pool = [Unit(f"u{j}", (j,), float(j + 1)) for j in range(10)]  # ten prices
    caps = []
    search = SubsetSearch(lambda columns: sum(columns) + len(columns), 0.0)  # the costly gain the most
    original = search.run
    search.run = lambda pool, *args: caps.append(max(u.cost for u in pool)) or original(pool, *args)
    paths = search.runs(pool, 12.0, 5)
    answers = {max(u.cost for u in path[-1]) for path in paths[:2]}
    assert caps[:2] == [10.0, 10.0] and caps[2:] == sorted({price - 1 for price in answers})


def _named_search(quality: dict, names: str):
    """A search over one-column units named by the letters of ``names``, each subset's quality read from
    ``quality`` (by its letters, sorted; 0 for a subset not listed)."""
    search = SubsetSearch(lambda columns: quality.get("".join(sorted(names[j] for j in columns)), 0.0), 0.0)
    return search, [Unit(name, (j,), 1.0) for j, name in enumerate(names)]


def test_an_exchange_finds_three_quadrants_the_greedy_runs_pass_over():
    """The thumbnail T gains the most alone, so every greedy run takes it first and two quadrants after it (0.6);
    the three quadrants without it are worth 0.9, one exchange away."""
    quality = {"T": 0.5, "A": 0.3, "B": 0.3, "C": 0.3, "D": 0.3}
    quality.update({"".join(sorted("T" + q)): 0.55 for q in "ABCD"})
    quality.update({"".join(sorted("T" + a + b)): 0.6 for a in "ABCD" for b in "ABCD" if a < b})
    quality.update({a + b: 0.55 for a in "ABCD" for b in "ABCD" if a < b})
    quality.update({"ABC": 0.9, "ABD": 0.8, "ACD": 0.8, "BCD": 0.8})
    search, pool = _named_search(quality, "TABCD")
    paths = search.runs(pool, 3.0, 10)
    assert all("T" in {u.name for u in path[-1]} for path in paths[:-1])  # the greedy runs' answers
    assert [u.name for u in paths[-1][-1]] == ["A", "B", "C"] and search.measure(paths[-1][-1]) == 0.9
    assert [[u.name for u in s] for s in search.best(3.0, 2)] == [["A", "B", "C"], ["T", "A", "B"]]
    assert (1, 2, 4) not in search.measured  # lazily: A, B, D's bound (0.85) was below A, B, C's 0.9
    assert [[u.name for u in s] for s in search.best(1.0, 1)] == [["T"]]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(0, 10_000), st.sampled_from([None, 2.0, 3.5]))
def test_exchanges_never_lose_and_stay_within_the_budget(seed, budget):
    """On random set functions: every subset of an exchange's path is within the budget and better measured than the
    one before it was exchanged; best() answers the best measured subsets within the budget, in order."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 7))
    values = {}
    pool = [Unit(f"u{i}", (i,), float(c)) for i, c in enumerate(rng.choice([0.5, 1.0, 1.5], n))]

    def score(columns):
        return values.setdefault(columns, float(rng.random()))
    search = SubsetSearch(score, 0.0)
    paths = search.runs(pool, budget, 10)
    answers = [max(search.measure(step) for step in path) for path in paths[:-1] if path]
    for path in paths:
        assert all(budget is None or sum(u.cost for u in step) <= budget + 1e-12 for step in path)
    measured = [(q, columns) for columns, q in search.measured.items()
                if columns and (budget is None or sum(pool[j].cost for j in columns) <= budget)]
    best = search.best(budget, 3)
    assert [search.measure(s) for s in best] == sorted((q for q, _ in measured), reverse=True)[:3]
    if answers:
        assert search.measure(best[0]) >= max(answers)
