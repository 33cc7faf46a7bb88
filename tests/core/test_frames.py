"""core.frames reads a DataFrame as LightGBM's Python package does for prediction: checked against LightGBM's own
``_data_from_pandas`` on random frames (category columns ordered or not, the model's categories reordered, cut
or extended, or none; integer, float, boolean and nullable columns), values, NaN and dtype alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lightgbm.basic import _data_from_pandas

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.frames import lightgbm_frame_values


def random_frame(rng: np.random.Generator) -> tuple[pd.DataFrame, list | None]:
    n = int(rng.integers(1, 30))
    columns, model_categories = {}, []
    for j in range(int(rng.integers(1, 6))):
        kind = rng.choice(["category", "float", "int", "bool", "Int64", "float32"])
        if kind == "category":
            labels = list(rng.choice(["a", "b", "c", "d", "e"], size=int(rng.integers(1, 5)), replace=False))
            values = rng.choice(labels + [None], size=n)
            column = pd.Categorical(values, categories=labels, ordered=bool(rng.integers(2)))
            known = list(labels)
            change = rng.integers(4)  # the model's categories: the same, reordered, cut, or with more
            if change == 1:
                known = list(rng.permutation(known))
            elif change == 2 and len(known) > 1:
                known = known[:-1]
            elif change == 3:
                known = known + ["z"]
            model_categories.append(known)
        elif kind == "float":
            column = np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n))
        elif kind == "float32":
            column = rng.normal(size=n).astype(np.float32)
        elif kind == "int":
            column = rng.integers(-5, 5, size=n)
        elif kind == "bool":
            column = rng.random(n) < 0.5
        else:
            column = pd.array(np.where(rng.random(n) < 0.3, None, rng.integers(0, 9, size=n)), dtype="Int64")
        columns[f"f{j}"] = column
    frame = pd.DataFrame(columns)
    return frame, (None if rng.integers(3) == 0 else model_categories)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_values_are_lightgbms(seed):
    frame, categories = random_frame(np.random.default_rng(seed))
    expected = _data_from_pandas(frame, "auto", "auto", categories)[0]
    got = lightgbm_frame_values(frame, categories)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_the_frame_given_is_not_changed():
    frame = pd.DataFrame({"c": pd.Categorical(["a", "b", None], categories=["a", "b"]), "x": [1.0, 2.0, 3.0]})
    copy = frame.copy()
    lightgbm_frame_values(frame, [["b", "a"]])
    pd.testing.assert_frame_equal(frame, copy)


def test_bad_frames_are_refused_where_lightgbm_refuses_them():
    text = pd.DataFrame({"x": [1.0, 2.0], "s": ["a", "b"]})
    with pytest.raises(ValueError, match="pandas dtypes must be int, float or bool"):
        _data_from_pandas(text, "auto", "auto", None)
    with pytest.raises(CEGBError, match="pandas dtypes must be int, float or bool; columns with other dtypes: s: "):
        lightgbm_frame_values(text, None)
    category = pd.DataFrame({"c": pd.Categorical(["a", "b"])})
    with pytest.raises(ValueError, match="categorical_feature do not match"):
        _data_from_pandas(category, "auto", "auto", [["a"], ["b"]])
    with pytest.raises(CEGBError, match="X: 1 category columns, the model was trained with 2"):
        lightgbm_frame_values(category, [["a"], ["b"]])
