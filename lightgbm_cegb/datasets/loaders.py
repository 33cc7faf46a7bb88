"""Learning-to-rank files with their cost vectors: SVMlight/LibSVM rows with ``qid``, feature ids kept aligned
with a cost file (one value per line, line i for feature id i); the bundled data: the Yahoo! LTR cost vector,
the MSLR-WEB subset, UCI Letter Recognition; the synthetic quadrant data of the CSTC paper."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError


@dataclass(frozen=True)
class RankingData:
    """Rows of a ranking file: column j holds feature id j + 1 (1-based files) or j (0-based)."""

    X: sp.csr_matrix
    y: np.ndarray
    group: np.ndarray  # sizes of the consecutive queries, as lightgbm.Dataset(group=...) takes them
    qid: np.ndarray
    costs: FeatureCosts | None  # aligned to X's columns when a cost file was given


def _bundled(*parts: str):
    return resources.as_file(resources.files("lightgbm_cegb.datasets").joinpath("data", *parts))


NUM_LOW_LEVEL = 21
NUM_HIGH_LEVEL = 7
#: the UCI HIGGS data set's column names (after the label)
HIGGS_FEATURES = ["lepton_pT", "lepton_eta", "lepton_phi", "missing_energy_magnitude", "missing_energy_phi",
                  *(f"jet{j}_{v}" for j in range(1, 5) for v in ("pt", "eta", "phi", "btag")),
                  "m_jj", "m_jjj", "m_lv", "m_jlv", "m_bb", "m_wbb", "m_wwbb"]
HIGGS_COSTS = FeatureCosts(lazy=[1.0] * NUM_LOW_LEVEL + [10.0] * NUM_HIGH_LEVEL)


def higgs(split: str) -> tuple[np.ndarray, np.ndarray]:
    """(X, y): the bundled HIGGS subset (``split`` "train": 7,000 rows, "test": 500 rows; 28 features,
    ``HIGGS_FEATURES``; illustrative costs ``HIGGS_COSTS``: 1 per low-level feature, 10 per high-level one)."""
    if split not in ("train", "test"):
        raise CEGBError(f"split should be 'train' or 'test', got {split!r}")
    with _bundled("higgs", f"binary.{split}.gz") as path:
        data = np.loadtxt(path, dtype=np.float64)
    return data[:, 1:], data[:, 0]


def yahoo_costs() -> FeatureCosts:
    """The real Yahoo! LTR set 1 feature costs (700 lazy costs by 1-based id; 10000 for ids never used)."""
    with _bundled("yahoo_ltr_costs", "feature_cost.txt") as path:
        return FeatureCosts.from_file(path)


def letter() -> tuple[np.ndarray, np.ndarray]:
    """(X, y): the bundled UCI Letter Recognition rows in the file's order (X float64[20000, 16], y the letters,
    str[20000]; ``lightgbm_cegb/datasets/data/letter/README.md``)."""
    with _bundled("letter", "letter-recognition.data.gz") as path:
        raw = np.loadtxt(path, delimiter=",", skiprows=1, dtype=str)
    return raw[:, 1:].astype(np.float64), raw[:, 0]


QUADRANT_MEANS = {(1, 1): -8.8, (-1, 1): -10.5, (1, -1): 14.9, (-1, -1): 4.4}  # (sign x, sign z): label mean


def quadrants(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, FeatureCosts]:
    """(X, y, costs): the synthetic regression data of the CSTC paper (Xu et al. 2014, section 6.1). x, z uniform
    in [-1, 1]; columns sign(x), sign(z) (cost 1 each), then z++, z-+, z+-, z-- (cost 10 each, quadrants named
    (sign x, sign z)): a quadrant's column equals the label of its own rows and is a random N(0, 10^2) number
    elsewhere. Labels are N(mean, 1) with the quadrant's mean (``QUADRANT_MEANS``: the paper does not give
    them; these follow its figure 5, negative z higher, the two z > 0 means close). The best tree reads both
    signs and one expensive column per row: cost 12 and zero error; a model on every feature pays 42."""
    rng = np.random.default_rng(seed)
    signs = np.sign(rng.uniform(-1, 1, (n, 2)))
    signs[signs == 0] = 1
    mean = np.array([QUADRANT_MEANS[(a, b)] for a, b in signs.astype(int)])
    y = mean + rng.standard_normal(n)
    expensive = 10.0 * rng.standard_normal((n, 4))
    for q, key in enumerate(QUADRANT_MEANS):
        own = (signs[:, 0] == key[0]) & (signs[:, 1] == key[1])
        expensive[own, q] = y[own]
    return np.hstack([signs, expensive]), y, FeatureCosts(lazy=[1.0, 1.0, 10.0, 10.0, 10.0, 10.0])


def mslr_subset(split: str) -> RankingData:
    """The bundled MSLR-WEB subset (fold 1, 5,000 rows and 43 queries per split, 136 features, labels 0-4)
    with its cost vector (``lightgbm_cegb/datasets/data/mslr_subset/README.md``); ``split`` "train" or "test"."""
    if split not in ("train", "test"):
        raise CEGBError(f"split should be 'train' or 'test', got {split!r}")
    with _bundled("mslr_subset", "feature_cost.txt") as costs, \
            _bundled("mslr_subset", f"msn1.fold1.{split}.5k.txt.gz") as path:
        return load_svmlight(path, costs)


def load_svmlight(path: str | os.PathLike, costs: str | os.PathLike | FeatureCosts | None = None, *,
                  zero_based: bool = False, num_features: int | None = None,
                  query: str | os.PathLike | None = None) -> RankingData:
    """Read an SVMlight/LibSVM file with ``qid:`` fields, or with LightGBM's query file.

    ``zero_based=False`` (SVMlight's convention, Yahoo's and MSLR's files): id 1 is column 0. ``costs``: a
    cost file (line i for id i, in the same base) or FeatureCosts by column; the columns are as many as the
    costs list (or ``num_features``), so that cost j belongs to column j; data with a larger id than the
    costs cover is refused, as are queries split into separate runs of rows. ``query``: a file of query
    sizes, one per line, in row order (LightGBM's ``.query`` file); by default ``PATH.query`` when it exists,
    as LightGBM reads it. With both, the ``qid`` fields must group the rows as the query file does.
    """
    if isinstance(costs, (str, os.PathLike)):
        costs = FeatureCosts.from_file(costs)
    width = num_features if costs is None else costs.num_features
    if costs is not None and num_features is not None and num_features != width:
        raise CEGBError(f"num_features={num_features} but the costs list {width} features")
    try:
        X, y, qid = load_svmlight_file(os.fspath(path), query_id=True, zero_based=zero_based, n_features=width)
    except ValueError as exc:
        if width is not None and "n_features" in str(exc):
            raise CEGBError(f"{os.fspath(path)}: a feature id beyond the {width} that the costs cover "
                            f"({'0' if zero_based else '1'}-based ids): {exc}") from None
        raise CEGBError(f"{os.fspath(path)}: {exc}") from None
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    query_file = _query_file(path, query)
    if query_file is not None:
        group = _query_sizes(query_file, len(y))
        if len(starts) > 1 and not np.array_equal(np.diff(np.r_[starts, len(qid)]), group):
            raise CEGBError(f"{os.fspath(path)}: its qid fields group the rows otherwise than {query_file} does")
        return RankingData(X=X.tocsr(), y=y, group=group, qid=np.repeat(np.arange(len(group)), group), costs=costs)
    values, runs = np.unique(qid[starts], return_counts=True)
    if (runs > 1).any():
        raise CEGBError(f"{os.fspath(path)}: the rows of query {int(values[runs > 1][0])} are not consecutive; "
                        "LightGBM needs each query's rows together")
    group = np.diff(np.r_[starts, len(qid)])
    return RankingData(X=X.tocsr(), y=y, group=group, qid=qid, costs=costs)


def _query_file(path, query) -> Path | None:
    if query is not None:
        if not Path(query).is_file():
            raise CEGBError(f"query file {os.fspath(query)!r} does not exist")
        return Path(query)
    beside = Path(os.fspath(path) + ".query")  # LightGBM's convention
    return beside if beside.is_file() else None


def _query_sizes(path: Path, num_rows: int) -> np.ndarray:
    """The query sizes of a LightGBM query file: positive integers summing to the data's rows."""
    sizes = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                sizes.append(int(line))
            except ValueError:
                raise CEGBError(f"{path}:{lineno}: expected a query size, got {line.strip()!r}") from None
    group = np.array(sizes, dtype=np.int64)
    if (group <= 0).any() or group.sum() != num_rows:
        raise CEGBError(f"{path}: query sizes should be > 0 and sum to the data's {num_rows} rows, got "
                        f"{len(group)} sizes summing to {int(group.sum())}")
    return group
