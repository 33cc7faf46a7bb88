"""A pandas DataFrame read as LightGBM's Python package reads one for prediction (``lightgbm.basic``'s
``_data_from_pandas``), without importing LightGBM: category columns become their codes in the model's
categories (``pandas_categorical``; a code of no category, -1, becomes NaN), and the frame becomes one float
array. ``tests/core/test_frames.py`` checks it against LightGBM's own function on random frames."""

from __future__ import annotations

import numpy as np

from lightgbm_cegb.core.errors import CEGBError


def _allowed(dtype: type) -> bool:
    """LightGBM's ``_is_allowed_numpy_dtype``: integers, floats and booleans, not timedelta or float128."""
    float128 = getattr(np, "float128", type(None))
    return issubclass(dtype, (np.integer, np.floating, np.bool_)) and not issubclass(dtype, (np.timedelta64, float128))


def lightgbm_frame_values(frame, pandas_categorical: list | None) -> np.ndarray:
    """The values LightGBM predicts on for ``frame``.

    Parameters
    ----------
    frame : pandas.DataFrame
        The rows (at least one).
    pandas_categorical : list of lists, or None
        The model's categories of its category columns, in their order (None: each column's own categories, as
        LightGBM reads a frame for a model trained without category columns).

    Returns
    -------
    ndarray of shape (n_rows, n_columns)
        The values, of the dtype LightGBM chooses (the columns' and float32's result type).

    Raises
    ------
    CEGBError
        When the frame's category columns are not the model's, or a column holds other than numbers or booleans.
    """
    import pandas as pd

    frame = frame.copy(deep=False)
    categorical = [column for column, dtype in zip(frame.columns, frame.dtypes)
                   if isinstance(dtype, pd.CategoricalDtype)]
    if pandas_categorical is not None:
        if len(categorical) != len(pandas_categorical):
            raise CEGBError(f"X: {len(categorical)} category columns, the model was trained with "
                            f"{len(pandas_categorical)} (LightGBM: train and valid dataset categorical_feature do "
                            "not match)")
        for column, categories in zip(categorical, pandas_categorical):
            if list(frame[column].cat.categories) != list(categories):
                frame[column] = frame[column].cat.set_categories(categories)
    if categorical:
        frame[categorical] = frame[categorical].apply(lambda column: column.cat.codes).replace({-1: np.nan})
    bad = [f"{column}: {dtype}" for column, dtype in frame.dtypes.items() if not _allowed(dtype.type)]
    if bad:
        raise CEGBError(f"X: pandas dtypes must be int, float or bool; columns with other dtypes: {', '.join(bad)}")
    dtype = np.result_type(*[dtype.type for dtype in frame.dtypes], np.float32)
    try:
        return frame.to_numpy(dtype=dtype, copy=False)
    except ValueError:  # nullable dtypes: pandas' NA as NaN
        return frame.to_numpy(dtype=dtype, na_value=np.nan)
