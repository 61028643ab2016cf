"""``models.compiled.distinct``: ``np.unique`` without importing ``numpy.ma``."""

from __future__ import annotations

import numpy as np
import pytest

from models.compiled import distinct


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float64])
@pytest.mark.parametrize("size", [0, 1, 2, 7, 200])
def test_distinct_is_np_unique(dtype: type, size: int) -> None:
    rng = np.random.default_rng(size)
    values = rng.integers(-3, 9, size).astype(dtype)
    if dtype is np.float64 and size > 3:
        values[[0, 2]] = np.nan  # np.unique keeps one NaN; so does distinct
    expected = np.unique(values)
    got = distinct(values)
    assert got.dtype == expected.dtype
    assert np.array_equal(got, expected, equal_nan=dtype is np.float64)


def test_distinct_does_not_change_its_input() -> None:
    values = np.array([3, 1, 3, 2])
    assert distinct(values).tolist() == [1, 2, 3]
    assert values.tolist() == [3, 1, 3, 2]
