"""scripts/bench_budget_workflow.py (issue 59): its covertype rows are issue 60's covertype benchmark (the user's UCI
file by path), and a run without the file says what to give."""

from __future__ import annotations

import numpy as np
import pytest

from scripts import bench_budget_workflow
from scripts.bench_quality import COVERTYPE_COSTS


def _covtype(path, classes) -> None:
    """A ``covtype.data`` of one row per class label in ``classes``: 54 integer columns (a row's own number in
    the first), then the class."""
    rows = [[i] + [(7 * i + j) % 5 for j in range(53)] + [label] for i, label in enumerate(classes)]
    path.write_text("".join(",".join(map(str, row)) + "\n" for row in rows))


@pytest.mark.parametrize("name, task", [("covertype", "binary"), ("covertype7", "multiclass")])
def test_the_covertype_rows_read_the_users_file(tmp_path, name, task):
    path = tmp_path / "covtype.data"
    classes = np.tile(np.arange(1, 8), 20)  # 20 rows of each of the seven classes
    _covtype(path, classes)
    got, train, valid, costs, got_task, budgets = next(bench_budget_workflow.data_sets([name], covertype=str(path)))
    assert (got, got_task, budgets) == (name, task, [10.0, 20.0, 30.0]) and costs is COVERTYPE_COSTS
    kept = np.flatnonzero(np.isin(classes, [1, 2])) if name == "covertype" else np.arange(len(classes))
    # the first column is the row's number: the training and the validation rows are 60% and 20% of the kept rows
    numbers = np.concatenate([train[0][:, 0], valid[0][:, 0]]).astype(int)
    assert len(np.unique(numbers)) == len(numbers) and set(numbers) <= set(kept)
    assert (len(train[1]), len(valid[1])) == (round(0.6 * len(kept)), round(0.2 * len(kept)))
    expected = (classes[numbers] == 2).astype(int) if name == "covertype" else classes[numbers]
    np.testing.assert_array_equal(np.concatenate([train[1], valid[1]]), expected)
    seconds, booster = bench_budget_workflow.plain_fit(train, valid, task)  # the run's unit: covertype's 1 to 7 too
    assert seconds > 0 and booster.num_model_per_iteration() == (1 if task == "binary" else 7)


def test_a_covertype_row_without_the_file_says_what_to_give():
    with pytest.raises(SystemExit, match="--covertype PATH"):
        next(bench_budget_workflow.data_sets(["covertype7"]))
    with pytest.raises(SystemExit, match="covertype7, large, cluster"):
        next(bench_budget_workflow.data_sets(["nope"]))
