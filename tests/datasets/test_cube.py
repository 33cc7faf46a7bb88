"""datasets.cube: AFABench's CUBE replayed without PyTorch, against draws PyTorch made.

``cube_torch_2.13.0.npz`` holds, for seeds 42-46, what AFABench's ``CubeDataset`` (with its ``cube.yaml``: 1,000
rows, informative standard deviation 0.3) and its split (``random.Random(seed).shuffle``) gave under PyTorch
2.13.0 (CPU, AVX2): every label, the shuffled order, and the first 160 rows of values (float32). It was written by
AFABench's own generator code run with that PyTorch, outside this repository (PyTorch is not a dependency).
"""

from pathlib import Path

import numpy as np
import pytest

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.datasets import CUBE_SEEDS, cube

REFERENCE = np.load(Path(__file__).with_name("cube_torch_2.13.0.npz"))


@pytest.mark.parametrize("seed", CUBE_SEEDS)
def test_cube_replays_pytorchs_draws(seed):
    data = cube(seed)
    order = REFERENCE[f"order_{seed}"]
    train, valid, test = order[:600], order[600:800], order[800:]
    labels = REFERENCE[f"y_{seed}"]
    for name, rows in (("train", train), ("valid", valid), ("test", test)):
        X, y = data[name]
        assert X.shape == (len(rows), 20) and X.dtype == np.float64
        np.testing.assert_array_equal(y, labels[rows])
    # the first 160 rows of the data set, wherever the split put them
    X_all = np.empty((1000, 20))
    for name, rows in (("train", train), ("valid", valid), ("test", test)):
        X_all[rows] = data[name][0]
    expected = REFERENCE[f"X_{seed}"]
    got = X_all[:160].astype(np.float32)
    assert np.abs(got - expected).max() <= 2.4e-7  # at most one unit in float32's last place near 1
    assert (got == expected).mean() >= 0.998  # 99.94 % over all 20,000 values of each seed
    assert (X_all == X_all.astype(np.float32)).all()  # float32 values, as PyTorch's


def test_cube_rows_carry_their_class_in_three_features():
    X, y = cube(42)["train"]
    for label in range(8):
        rows = X[y == label]
        for j in range(3):
            bit = (label >> j) & 1
            assert abs(rows[:, label + j].mean() - bit) < 0.15
    assert abs(X[:, 10:].mean() - 0.5) < 0.02 and abs(X[:, 10:].std() - 0.3) < 0.02


def test_cube_costs_and_refusals():
    data = cube(43)
    np.testing.assert_array_equal(data["costs"].lazy, np.ones(20))
    for kwargs, match in (({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"), ({"n_samples": 100}, "multiple of 8"),
                          ({"informative_std": 0.0}, "informative_std")):
        with pytest.raises(CEGBError, match=match):
            cube(**kwargs)
