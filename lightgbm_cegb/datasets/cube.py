"""AFABench's CUBE data set (Schuetz et al., KDD 2026; ``CubeDataset`` of rezaarezvan/AFA-Benchmark, after the ODIN
paper), generated without PyTorch: the same draws from the same generator.

AFABench draws with a ``torch.Generator`` seeded with ``seed``: the labels (``torch.randint(0, 8)``), 1,000 x 10
"cube" values and 1,000 x 10 dummy values (``torch.normal(0.5, 0.3)``, float32), then, row by row, the three
informative values ``torch.normal(0, std, (3,)) + bit`` at columns ``label``, ``label + 1``, ``label + 2`` (the bits
of the label, least significant first); its splits shuffle the row indices with ``random.Random(seed)`` and take
60/20/20 %. PyTorch's CPU generator is the 32-bit Mersenne Twister that NumPy's legacy ``RandomState(seed)`` is,
so its outputs are read from there and turned into numbers as ATen does:

- ``randint``: the 32-bit output modulo the range;
- a float32 uniform: the low 24 bits times 2**-24; a float64 one: the low 53 bits of two outputs (first high);
- ``normal`` of 16 or more float32 values (``normal_fill``): every uniform first, then Box-Muller on blocks of 16
  (``u1`` the first 8, ``u2`` the next 8) with the AVX2 Cephes polynomials of ``avx_mathfun.h``, in float32 with
  fused multiply-adds;
- ``normal`` of fewer values: Box-Muller in float64 (``log1p``), the sine kept for the next draw.

On the five seeds of AFABench's configuration (42-46), checked against PyTorch 2.13.0 on an AVX2 machine
(``tests/datasets/test_cube.py``), labels and splits are identical and 99.94 % of the values equal to the last bit;
the others differ by one unit in the last place of float32 (at most 1.2e-7): PyTorch's compiler fuses a few more
or fewer multiply-adds than this replay.
"""

from __future__ import annotations

import random

import numpy as np

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import check_number

_F = np.float32
CUBE_FEATURES = 20
CUBE_CLASSES = 8
#: the splits AFABench's benchmark uses: (seed, instance) pairs 42-46
CUBE_SEEDS = (42, 43, 44, 45, 46)


def _raw(rs: np.random.RandomState, n: int) -> np.ndarray:
    """n consecutive 32-bit outputs of the Mersenne Twister."""
    return rs.randint(0, 2**32, size=n, dtype=np.uint32)


def _fma(a, b, c) -> np.ndarray:
    """float32 fused multiply-add: the product of two float32 values is exact in float64."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(_F)


def _log(x: np.ndarray) -> np.ndarray:
    """avx_mathfun's log256_ps (Cephes), for x in (0, 1]."""
    bits = x.view(np.uint32)
    exponent = (bits >> np.uint32(23)).astype(np.int32) - 0x7F
    x = ((bits & np.uint32(0x807FFFFF)) | np.uint32(0x3F000000)).view(_F)  # mantissa in [0.5, 1)
    e = exponent.astype(_F) + _F(1)
    small = x < _F(0.707106781186547524)
    x = (x - _F(1)) + np.where(small, x, _F(0))
    e = e - np.where(small, _F(1), _F(0))
    z = x * x
    y = np.full_like(x, _F(7.0376836292e-2))
    for c in (-1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
              2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1):
        y = _fma(y, x, _F(c))
    y = (y * x) * z
    y = _fma(e, _F(-2.12194440e-4), y)
    y = _fma(z, _F(-0.5), y)
    return _fma(e, _F(0.693359375), x + y)


def _sincos(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """avx_mathfun's sincos256_ps (Cephes), for x >= 0."""
    octant = (x * _F(1.27323954473516)).astype(np.int32)
    octant = (octant + 1) & ~1
    y = octant.astype(_F)
    sin_negative = (octant & 4) != 0
    cos_negative = (~(octant - 2) & 4) != 0
    sine_polynomial = (octant & 2) != 0
    for c in (-0.78515625, -2.4187564849853515625e-4, -3.77489497744594108e-8):
        x = _fma(y, _F(c), x)
    z = x * x
    cosine = _fma(_fma(np.full_like(x, _F(2.443315711809948e-5)), z, _F(-1.388731625493765e-3)), z,
                  _F(4.166664568298827e-2))
    cosine = _fma(z, _F(-0.5), (cosine * z) * z) + _F(1)
    sine = _fma(_fma(np.full_like(x, _F(-1.9515295891e-4)), z, _F(8.3321608736e-3)), z, _F(-1.6666654611e-1))
    sine = _fma(sine * z, x, x)
    s = np.where(sine_polynomial, cosine, sine)
    c = np.where(sine_polynomial, sine, cosine)
    return np.where(sin_negative, -s, s), np.where(cos_negative, -c, c)


def _normal_fill(rs: np.random.RandomState, n: int, mean: float, std: float) -> np.ndarray:
    """ATen's AVX2 normal_fill of n float32 values (n a multiple of 16)."""
    uniform = (_raw(rs, n) & np.uint32((1 << 24) - 1)).astype(_F) * _F(2.0**-24)
    blocks = uniform.reshape(-1, 16)
    radius = np.sqrt(_F(-2) * _log(_F(1) - blocks[:, :8]))
    sine, cosine = _sincos(_F(2.0 * np.pi) * blocks[:, 8:])
    return np.hstack([_fma(radius * cosine, _F(std), _F(mean)), _fma(radius * sine, _F(std), _F(mean))]).reshape(-1)


class _ScalarNormal:
    """ATen's normal_distribution<double>: Box-Muller on two float64 uniforms, the sine cached for the next draw."""

    def __init__(self, rs: np.random.RandomState) -> None:
        self.rs, self.cached = rs, None

    def __call__(self, mean: float, std: float) -> float:
        if self.cached is not None:
            value, self.cached = self.cached, None
            return value * std + mean
        words = _raw(self.rs, 4).astype(np.uint64)
        u1, u2 = (float(((words[k] << np.uint64(32)) | words[k + 1]) & np.uint64((1 << 53) - 1)) * 2.0**-53
                  for k in (0, 2))
        radius, theta = np.sqrt(-2.0 * np.log1p(-u2)), 2.0 * np.pi * u1
        self.cached = radius * np.sin(theta)
        return radius * np.cos(theta) * std + mean


def cube(seed: int = 42, *, n_samples: int = 1000, informative_std: float = 0.3):
    """AFABench's CUBE data set with the 60/20/20 split of its benchmark: 20 features, 8 classes, unit costs.

    A row of class c (0-7, uniform) has features c, c + 1 and c + 2 drawn around the bits of c (least
    significant first) with standard deviation ``informative_std``; every other feature (the other cube columns
    0-9 and the 10 dummy columns) is N(0.5, 0.3). Which features tell the class depends on the class: what
    to acquire next depends on what the row showed so far. Defaults are AFABench's ``cube.yaml`` (1,000 rows,
    informative standard deviation 0.3); its benchmark runs seeds 42-46 (:data:`CUBE_SEEDS`), each with its
    own data and split. See the module's doc for how the draws replay PyTorch's.

    Parameters
    ----------
    seed : int, default=42
        The seed of the data and of the split (AFABench uses one for both).
    n_samples : int, default=1000
        Rows, a multiple of 8 (PyTorch's vectorised draws of 10 x ``n_samples`` values are replayed in whole
        blocks of 16).
    informative_std : float, default=0.3
        Standard deviation of the informative values.

    Returns
    -------
    dict
        {"train", "valid", "test"}: (X float64[rows, 20], y int64[rows]) each, 60/20/20 % of the rows in
        AFABench's order, and "costs": unit lazy costs (FeatureCosts).

    Raises
    ------
    CEGBError
        If ``seed`` is not an integer in [0, 2**32), ``n_samples`` not a positive multiple of 8, or
        ``informative_std`` not a number > 0.

    Examples
    --------
    >>> from lightgbm_cegb.datasets import cube
    >>> data = cube(42)
    >>> X_train, y_train = data["train"]
    >>> X_train.shape, sorted(set(y_train.tolist())) == list(range(8))
    ((600, 20), True)
    """
    check_number(seed, "seed", 0, 2**32 - 1, integer=True)
    check_number(n_samples, "n_samples", 16, integer=True)
    check_number(informative_std, "informative_std", 0.0, low_open=True)
    if n_samples % 8:
        raise CEGBError(f"n_samples should be a multiple of 8 (its 10 x n_samples values are drawn in blocks of 16), "
                        f"got {n_samples}")
    rs = np.random.RandomState(int(seed))
    y = (_raw(rs, n_samples) % np.uint32(CUBE_CLASSES)).astype(np.int64)
    cube_values = _normal_fill(rs, n_samples * 10, 0.5, 0.3).reshape(n_samples, 10)
    dummy = _normal_fill(rs, n_samples * 10, 0.5, 0.3).reshape(n_samples, 10)
    normal = _ScalarNormal(rs)
    for i, label in enumerate(y.tolist()):
        for j in range(3):
            cube_values[i, label + j] = _F(normal(0.0, informative_std)) + _F((label >> j) & 1)
    X = np.hstack([cube_values, dummy]).astype(np.float64)
    order = list(range(n_samples))
    random.Random(seed).shuffle(order)
    train, valid = int(0.6 * n_samples), int(0.2 * n_samples)
    parts = {"train": order[:train], "valid": order[train:train + valid], "test": order[train + valid:]}
    data = {name: (X[rows], y[rows]) for name, rows in parts.items()}
    data["costs"] = FeatureCosts(lazy=np.ones(CUBE_FEATURES))
    return data
