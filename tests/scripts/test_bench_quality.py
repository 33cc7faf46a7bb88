"""scripts/bench_quality.py (issue 60): its reference search enumerates exactly the unions of units within a budget
(against itertools), its covertype cost model prices the UCI columns as documented, and a covertype run without the
file says what to give."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scripts import bench_quality


@pytest.mark.parametrize("budget", [0.5, 3.0, 7.5, 40.0])
def test_the_reference_enumerates_every_union_within_the_budget(budget):
    prices = [1.0, 2.0, 2.0, 4.0, 5.0, 0.5]
    units = [(None, (i,), p) for i, p in enumerate(prices)]
    expected = {combo for k in range(1, len(units) + 1) for combo in itertools.combinations(range(len(units)), k)
                if sum(prices[u] for u in combo) <= budget}
    found = bench_quality.subsets_within(units, budget)
    assert len(found) == len(set(found)) and set(found) == expected


def test_the_covertype_cost_model_and_its_file():
    units = bench_quality.COVERTYPE_COSTS.units(54)
    groups = {name: (columns, price) for name, columns, price in units if name is not None}
    assert groups == {"wilderness": (tuple(range(10, 14)), 4.0), "soil": (tuple(range(14, 54)), 30.0)}
    assert sum(price for _, _, price in units) == 52.0 and len(units) == 12
    with pytest.raises(SystemExit, match="--covertype PATH"):
        next(bench_quality.data_sets(["covertype"], None))
    name, train, valid, test, costs, task, metric, budgets = next(bench_quality.data_sets(["letter"], None))
    y = np.concatenate([train[1], valid[1], test[1]])
    assert (len(train[1]), len(valid[1]), len(test[1])) == (12000, 4000, 4000) and 0.10 < y.mean() < 0.15
