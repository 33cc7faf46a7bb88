"""scripts/bench_quality.py (issue 60): its reference search enumerates exactly the unions of units within a budget
(against itertools), its covertype and Fashion-MNIST cost models price the columns as documented, a run without the
data says what to give, and a file that is not IDX is refused."""

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


def _idx(path, array: np.ndarray, header: bytes | None = None) -> None:
    import gzip
    header = header if header is not None else bytes([0, 0, 8, array.ndim]) + b"".join(
        int(d).to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def test_the_fashion_cost_model_prices_each_resolution_by_its_pixels(tmp_path):
    """FASHION_COSTS: every column of the 4x4, 8x8 and 16x16 images in exactly one group, each quadrant the
    image's quarter (checked on an image whose pixels are their own positions), priced 1 per 16 pixels at 28x28."""
    units = bench_quality.FASHION_COSTS.units(336)
    assert sorted(c for _, columns, _ in units for c in columns) == list(range(336))
    assert {name: price for name, _, price in units} == {
        "4x4": 1.0, **{f"8x8 {q}": 1.0 for q in ("top left", "top right", "bottom left", "bottom right")},
        **{f"16x16 {q}": 4.0 for q in ("top left", "top right", "bottom left", "bottom right")}}
    image = np.arange(16 * 16).reshape(16, 16)
    quadrant = dict((name, columns) for name, columns, _ in units)["16x16 bottom left"]
    assert np.array_equal(np.array(quadrant) - 80, image[8:, :8].ravel())
    images = np.random.default_rng(0).integers(0, 256, (3, 28, 28))
    for part in ("train", "t10k"):
        _idx(tmp_path / f"{part}-images-idx3-ubyte.gz", images)
        _idx(tmp_path / f"{part}-labels-idx1-ubyte.gz", np.array([6, 0, 2]))
    name, train, valid, test, costs, task, metric, budgets = next(
        bench_quality.data_sets(["fashion_tops"], None, str(tmp_path)))
    assert (task, metric, budgets) == ("multiclass", "accuracy", [3.0, 6.0, 10.0])
    X = np.vstack([train[0], valid[0], test[0]])
    assert X.shape == (6, 336) and np.allclose(np.sort(X[:, 0]), np.sort(np.repeat(images[:, :7, :7].mean(
        axis=(1, 2)) / 255, 2)))
    assert sorted(np.concatenate([train[1], valid[1], test[1]])) == [0, 0, 1, 1, 3, 3]


def test_an_idx_file_that_is_not_one_is_refused(tmp_path):
    from lightgbm_cegb.core.errors import CEGBError
    from scripts.frontiers import read_idx

    _idx(tmp_path / "short.gz", np.zeros((2, 3)), header=bytes([0, 0, 8, 2]) + (2).to_bytes(4, "big") +
         (4).to_bytes(4, "big"))
    with pytest.raises(CEGBError, match=r"promises \[2, 4\] bytes after 12, it holds 6"):
        read_idx(tmp_path / "short.gz")
    _idx(tmp_path / "floats.gz", np.zeros(4), header=bytes([0, 0, 13, 1]) + (4).to_bytes(4, "big"))
    with pytest.raises(CEGBError, match="not an IDX file of unsigned bytes"):
        read_idx(tmp_path / "floats.gz")
    with pytest.raises(SystemExit, match="dataset-fashion-mnist"):
        next(bench_quality.data_sets(["fashion_shirt"], None, str(tmp_path)))
