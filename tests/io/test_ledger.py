"""CEGBState's exchange format read from bytes: a damaged or hostile header is refused with a message naming
the count, never reshaped into an array (the format's round trips are in tests/patches/test_patch_0006.py)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from lightgbm_cegb import CEGBError
from lightgbm_cegb.io.ledger import MAGIC, VERSION, CEGBState


def ledger_bytes(rows: int, features: int, groups: int) -> bytes:
    """A header with these counts (the format of the module's doc) and as many uint64 words of bits as they ask
    for, so that only the counts are wrong."""
    keys = features + groups
    words = (keys + 63) // 64 + (rows * keys + 63) // 64
    return struct.pack("<8sIIqqq", MAGIC, VERSION, 0, rows, features, groups) + bytes(8 * max(words, 0))


@pytest.mark.parametrize(("counts", "message"), [
    ((-1, 1, 0), r"CEGBState: the header's count of rows should be >= 0, got -1"),
    ((-64, 1, 0), r"count of rows should be >= 0, got -64"),
    ((1, -1, 0), r"count of features should be >= 0, got -1"),
    ((0, -5, 0), r"count of features should be >= 0, got -5"),
    ((3, 5, -5), r"count of groups should be >= 0, got -5"),
])
def test_negative_counts_are_refused(counts, message):
    """A negative count could match the data's length and reached numpy (ValueError: -count larger than number
    of elements; cannot reshape), or built a state of the wrong shape."""
    with pytest.raises(CEGBError, match=message):
        CEGBState.from_bytes(ledger_bytes(*counts))


def test_a_valid_ledger_reads_back():
    state = CEGBState.empty(70, 3, 2).pay(1, [0, 69]).pay_group(1).buy(2)
    again = CEGBState.from_bytes(state.to_bytes())
    np.testing.assert_array_equal(again.paid, state.paid)
    np.testing.assert_array_equal(again.bought, state.bought)
    assert (again.num_features, again.num_groups) == (3, 2)
    empty = CEGBState.from_bytes(ledger_bytes(0, 0, 0))
    assert empty.paid.shape == (0, 0)
