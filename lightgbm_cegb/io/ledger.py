"""CEGB's per-row ledger (patch 0006): what each training row has paid for (lazy penalties) and what the model
has bought (coupled penalties), shared between boosters, declared by hand, saved and restored.

The exchange format is LightGBM's (``LGBM_BoosterGetCEGBState``, version 1): 8 bytes ``CEGBLDGR``, uint32
version, uint32 0, int64 rows, int64 features F (all the training data's columns), int64 groups G
(``max(cegb_feature_group) + 1``), then little-endian uint64 words: the bought bits (bit k: column k for
k < F, group k - F otherwise), then the paid bits row-major (bit ``row * (F + G) + k``).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import lightgbm as lgb
import numpy as np

from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.io.atomic import write_atomically

MAGIC = b"CEGBLDGR"
VERSION = 1
_HEADER = struct.Struct("<8sIIqqq")


def _words(num_bits: int) -> int:
    return (num_bits + 63) // 64


def _pack(bits: np.ndarray) -> bytes:
    """Bits as little-endian uint64 words (bit i: word i // 64, bit i % 64)."""
    packed = np.packbits(bits.ravel().astype(bool), bitorder="little")
    return packed.tobytes() + bytes(_words(bits.size) * 8 - len(packed))


def _unpack(data: bytes, num_bits: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(data, dtype=np.uint8), count=num_bits, bitorder="little").astype(bool)


@dataclass
class CEGBState:
    """The ledger of a training set of ``paid.shape[0]`` rows.

    ``paid[i, k]``: row i has paid column k's lazy penalty (k < num_features) or group k - num_features's;
    ``bought[k]``: the model has paid that column's or group's coupled penalty.

    Parameters
    ----------
    paid : array-like of bool of shape (n_rows, num_features + n_groups)
        ``paid[i, k]``: row i has paid column k's lazy penalty (k < num_features) or group
        k - num_features's.
    bought : array-like of bool of shape (num_features + n_groups,)
        ``bought[k]``: the model has paid column k's (or group k - num_features's) coupled penalty.
    num_features : int
        The training data's number of columns (all of them, used or not).

    Raises
    ------
    CEGBError
        When the shapes of ``paid`` and ``bought`` do not agree, or ``num_features`` exceeds their columns.

    See Also
    --------
    lightgbm_cegb.lgbm.start_from : Start a training from a ledger.
    """

    paid: np.ndarray
    bought: np.ndarray
    num_features: int

    def __post_init__(self) -> None:
        self.paid = np.asarray(self.paid, dtype=bool)
        self.bought = np.asarray(self.bought, dtype=bool)
        if self.paid.ndim != 2 or self.bought.shape != (self.paid.shape[1],) or \
                not 0 <= self.num_features <= self.paid.shape[1]:
            raise CEGBError(f"CEGBState: paid should be [rows, features + groups] and bought [features + groups], got "
                            f"{self.paid.shape} and {self.bought.shape} with {self.num_features} features")

    @property
    def num_rows(self) -> int:
        """Number of training rows."""
        return self.paid.shape[0]

    @property
    def num_groups(self) -> int:
        """Number of feature groups (``max(cegb_feature_group) + 1``)."""
        return self.paid.shape[1] - self.num_features

    @classmethod
    def empty(cls, num_rows: int, num_features: int, num_groups: int = 0) -> CEGBState:
        """Nothing paid, nothing bought: the state a training starts from.

        Parameters
        ----------
        num_rows : int
            Number of training rows.
        num_features : int
            Number of columns of the training data.
        num_groups : int, default=0
            Number of feature groups.

        Returns
        -------
        CEGBState
            The empty ledger.
        """
        keys = num_features + num_groups
        return cls(np.zeros((num_rows, keys), dtype=bool), np.zeros(keys, dtype=bool), num_features)

    def pay(self, feature: int, rows=None) -> CEGBState:
        """Declare ``feature`` (a column index) paid for ``rows`` (indices or a mask; None: every row).

        Parameters
        ----------
        feature : int
            The column index.
        rows : array-like of int or bool, optional
            Row indices or a mask (None: every row).

        Returns
        -------
        CEGBState
            This ledger, changed in place (calls can be chained).

        Raises
        ------
        CEGBError
            When ``feature`` is not a column index.
        """
        self.paid[slice(None) if rows is None else rows, self._column(feature, "feature", self.num_features)] = True
        return self

    def pay_group(self, group: int, rows=None) -> CEGBState:
        """Declare group ``group`` (its cegb_feature_group id) paid for ``rows`` (None: every row).

        Parameters
        ----------
        group : int
            The group's id.
        rows : array-like of int or bool, optional
            Row indices or a mask (None: every row).

        Returns
        -------
        CEGBState
            This ledger, changed in place (calls can be chained).

        Raises
        ------
        CEGBError
            When ``group`` is not a group id.
        """
        self.paid[slice(None) if rows is None else rows,
                  self.num_features + self._column(group, "group", self.num_groups)] = True
        return self

    def buy(self, feature: int | None = None, *, group: int | None = None) -> CEGBState:
        """Declare a column's (or a group's) coupled penalty paid.

        Parameters
        ----------
        feature : int, optional
            The column index.
        group : int, optional
            The group's id (instead of ``feature``).

        Returns
        -------
        CEGBState
            This ledger, changed in place (calls can be chained).

        Raises
        ------
        CEGBError
            Unless exactly one of ``feature`` and ``group`` is given, a valid index.
        """
        if (feature is None) == (group is None):
            raise CEGBError("buy: give a feature or a group")
        if feature is not None:
            self.bought[self._column(feature, "feature", self.num_features)] = True
        else:
            self.bought[self.num_features + self._column(group, "group", self.num_groups)] = True
        return self

    @staticmethod
    def _column(index, what: str, count: int) -> int:
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < count:
            raise CEGBError(f"{what} should be an index in 0..{count - 1}, got {index!r}")
        return int(index)

    # ----------------------------------------------------------------------------- the exchange format

    def to_bytes(self) -> bytes:
        """The ledger in LightGBM's exchange format (see the module docstring).

        Returns
        -------
        bytes
            The header, then the bought bits and the paid bits as little-endian uint64 words.
        """
        header = _HEADER.pack(MAGIC, VERSION, 0, self.num_rows, self.num_features, self.num_groups)
        return header + _pack(self.bought) + _pack(self.paid)

    @classmethod
    def from_bytes(cls, data: bytes) -> CEGBState:
        """The ledger :meth:`to_bytes` (or ``LGBM_BoosterGetCEGBState``) wrote.

        Parameters
        ----------
        data : bytes
            The ledger in the exchange format.

        Returns
        -------
        CEGBState
            The ledger.

        Raises
        ------
        CEGBError
            When ``data`` is not a ledger, is of another format version, or has the wrong length.
        """
        if len(data) < _HEADER.size or data[:8] != MAGIC:
            raise CEGBError(f"CEGBState: not a ledger (it starts with {MAGIC.decode()}): got {len(data)} bytes "
                            f"starting {bytes(data[:8])!r}")
        _, version, _, rows, features, groups = _HEADER.unpack_from(data)
        if version != VERSION:
            raise CEGBError(f"CEGBState: format version {version}, this package reads version {VERSION}")
        for name, count in (("rows", rows), ("features", features), ("groups", groups)):
            if count < 0:
                raise CEGBError(f"CEGBState: the header's count of {name} should be >= 0, got {count}")
        keys = features + groups
        expected = _HEADER.size + 8 * (_words(keys) + _words(rows * keys))
        if len(data) != expected:
            raise CEGBError(f"CEGBState: {rows} rows x {keys} columns and groups take {expected} bytes, "
                            f"got {len(data)}")
        start = _HEADER.size + 8 * _words(keys)
        return cls(_unpack(data[start:], rows * keys).reshape(rows, keys),
                   _unpack(data[_HEADER.size:start], keys), features)

    @classmethod
    def from_booster(cls, booster: lgb.Booster) -> CEGBState:
        """The ledger of a booster that is training (or kept its training data: keep_training_booster=True).

        Parameters
        ----------
        booster : lightgbm.Booster
            The booster, of the patched LightGBM.

        Returns
        -------
        CEGBState
            Its ledger.
        """
        return cls.from_bytes(booster.get_cegb_state())

    def apply(self, booster: lgb.Booster) -> None:
        """Make this the ledger of ``booster`` (same training rows, features and groups).

        Parameters
        ----------
        booster : lightgbm.Booster
            A booster that holds its training data, of the same rows, features and groups.
        """
        booster.set_cegb_state(self.to_bytes())

    def save(self, path: str | os.PathLike) -> None:
        """Write the ledger to ``path`` (atomically).

        Parameters
        ----------
        path : str or os.PathLike
            The file written, in the exchange format.
        """
        data = self.to_bytes()
        write_atomically(Path(path), lambda tmp: Path(tmp).write_bytes(data))

    @classmethod
    def load(cls, path: str | os.PathLike) -> CEGBState:
        """The ledger :meth:`save` wrote.

        Parameters
        ----------
        path : str or os.PathLike
            The file, in the exchange format.

        Returns
        -------
        CEGBState
            The ledger.

        Raises
        ------
        CEGBError
            When the file is not a ledger this package reads.
        """
        return cls.from_bytes(Path(path).read_bytes())
