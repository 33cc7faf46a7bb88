"""Learning-to-rank files with their cost vectors: SVMlight/LibSVM rows with ``qid``, feature ids kept aligned
with a cost file (one value per line, line i for feature id i); the bundled data: the Yahoo! LTR cost vector,
the MSLR-WEB subset, UCI Letter Recognition; the synthetic quadrant data of the CSTC paper; readers of the
papers' public data sets in their public formats, from a path the user gives (nothing is downloaded):
UCI Forest Covertype, MiniBooNE and HEPMASS, MSLR-WEB10K/30K."""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from lightgbm_cegb.core.costs import FeatureCosts
from lightgbm_cegb.core.errors import CEGBError
from lightgbm_cegb.core.validation import check_number
from lightgbm_cegb.datasets.cost_files import read_cost_file


@dataclass(frozen=True)
class RankingData:
    """Rows of a ranking file: column j holds feature id j + 1 (1-based files) or j (0-based).

    Parameters
    ----------
    X : scipy.sparse.csr_matrix of shape (n_rows, n_features)
        The feature values.
    y : ndarray of shape (n_rows,)
        The relevance labels (float64).
    group : ndarray of int of shape (n_queries,)
        The sizes of the consecutive queries, as ``lightgbm.Dataset(group=...)`` takes them.
    qid : ndarray of shape (n_rows,)
        Each row's query id (the file's ``qid:`` fields; with a query file, the query's index).
    costs : FeatureCosts or None
        The costs, aligned to X's columns when a cost file (or FeatureCosts) was given; else None.
    """

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
    ``HIGGS_FEATURES``; illustrative costs ``HIGGS_COSTS``: 1 per low-level feature, 10 per high-level one).

    Parameters
    ----------
    split : {"train", "test"}
        The part of the subset.

    Returns
    -------
    X : ndarray of shape (n_rows, 28)
        The features (float64), 21 low-level then 7 high-level ones.
    y : ndarray of shape (n_rows,)
        The labels, 1.0 (signal) or 0.0 (background).

    Raises
    ------
    CEGBError
        When ``split`` is neither "train" nor "test".
    """
    if split not in ("train", "test"):
        raise CEGBError(f"split should be 'train' or 'test', got {split!r}")
    with _bundled("higgs", f"binary.{split}.gz") as path:
        data = np.loadtxt(path, dtype=np.float64)
    return data[:, 1:], data[:, 0]


def yahoo_costs() -> FeatureCosts:
    """The real Yahoo! LTR set 1 feature costs (700 lazy costs by 1-based id; 10000 for ids never used).

    Returns
    -------
    FeatureCosts
        The 700 lazy costs by column: id i's at column i - 1, as :func:`load_svmlight` (``zero_based=False``)
        numbers the columns of a 1-based file.
    """
    with _bundled("yahoo_ltr_costs", "feature_cost.txt") as path:
        return read_cost_file(path)


def letter() -> tuple[np.ndarray, np.ndarray]:
    """(X, y): the bundled UCI Letter Recognition rows in the file's order (X float64[20000, 16], y the letters,
    str[20000]; ``lightgbm_cegb/datasets/data/letter/README.md``).

    Returns
    -------
    X : ndarray of shape (20000, 16)
        The features (float64).
    y : ndarray of str of shape (20000,)
        The letters.
    """
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
    signs and one expensive column per row: cost 12 and zero error; a model on every feature pays 42.

    Parameters
    ----------
    n : int
        Number of rows.
    seed : int, default=0
        Seed of the random generator (``numpy.random.default_rng``).

    Returns
    -------
    X : ndarray of shape (n, 6)
        sign(x), sign(z), then the four quadrants' columns.
    y : ndarray of shape (n,)
        The labels.
    costs : FeatureCosts
        Lazy costs 1, 1, 10, 10, 10, 10.
    """
    check_number(n, "n", 0, integer=True)
    check_number(seed, "seed", 0, integer=True)
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
    with its cost vector (``lightgbm_cegb/datasets/data/mslr_subset/README.md``); ``split`` "train" or "test".

    Parameters
    ----------
    split : {"train", "test"}
        The part of the subset.

    Returns
    -------
    RankingData
        The rows, labels, query sizes and ids, and the costs aligned to X's columns.

    Raises
    ------
    CEGBError
        When ``split`` is neither "train" nor "test".
    """
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

    Parameters
    ----------
    path : str or os.PathLike
        The SVMlight/LibSVM file.
    costs : str, os.PathLike or FeatureCosts, optional
        A cost file (line i for id i, in the same base) or FeatureCosts by column; sets the number of
        columns.
    zero_based : bool, default=False
        The file's feature ids start at 0 (False: id 1 is column 0).
    num_features : int, optional
        The number of columns, without ``costs`` (with them, it must agree).
    query : str or os.PathLike, optional
        A LightGBM query file (default: ``PATH.query`` when it exists).

    Returns
    -------
    RankingData
        The rows (CSR), labels, query sizes and ids, and the costs.

    Raises
    ------
    CEGBError
        When the file cannot be parsed, holds an id beyond the columns, splits a query into separate runs of
        rows, or disagrees with the query file; when ``num_features`` disagrees with the costs, or the query
        file does not exist or is invalid.
    """
    if isinstance(costs, (str, os.PathLike)):
        costs = read_cost_file(costs)
    elif costs is not None and not isinstance(costs, FeatureCosts):
        raise CEGBError(f"costs should be a cost file or FeatureCosts by column, got {type(costs).__name__}")
    if num_features is not None:
        check_number(num_features, "num_features", 1, integer=True)
    if not Path(path).is_file():
        raise CEGBError(f"SVMlight file {os.fspath(path)!r} does not exist" if not Path(path).exists() else
                        f"SVMlight file {os.fspath(path)!r} is not a file")
    width = num_features if costs is None else costs.num_features
    if costs is not None and num_features is not None and num_features != width:
        raise CEGBError(f"num_features={num_features} but the costs list {width} features")
    try:
        X, y, qid = load_svmlight_file(os.fspath(path), query_id=True, zero_based=zero_based, n_features=width)
    except ValueError as exc:
        if width is not None and "n_features" in str(exc):
            cover = "that the costs cover" if costs is not None else "of num_features"
            raise CEGBError(f"{os.fspath(path)}: a feature id beyond the {width} {cover} "
                            f"({'0' if zero_based else '1'}-based ids): {exc}") from None
        raise CEGBError(f"{os.fspath(path)}: {exc}") from None
    if len(y) == 0:
        raise CEGBError(f"{os.fspath(path)}: the file holds no row")
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


# ---- the papers' public data sets, read from the user's copy --------------------------------------------------

#: the UCI Forest Covertype columns before the class (``covtype.info``): 10 quantitative, 4 wilderness areas, 40
#: soil types (both one-hot)
COVERTYPE_FEATURES = ["Elevation", "Aspect", "Slope", "Horizontal_Distance_To_Hydrology",
                      "Vertical_Distance_To_Hydrology", "Horizontal_Distance_To_Roadways", "Hillshade_9am",
                      "Hillshade_Noon", "Hillshade_3pm", "Horizontal_Distance_To_Fire_Points",
                      *(f"Wilderness_Area{i}" for i in range(1, 5)), *(f"Soil_Type{i}" for i in range(1, 41))]
MSLR_NUM_FEATURES = 136
_CHUNK_ROWS = 500_000  # rows per pandas chunk: the full HEPMASS train file has 7M rows of 29 numbers


def _existing(path, what: str) -> Path:
    path = Path(os.fspath(path))
    if not path.is_file():
        raise CEGBError(f"{what} {str(path)!r} does not exist")
    return path


def _is_gzip(path: Path) -> bool:
    """By the gzip magic number, whatever the file's name."""
    with path.open("rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _open_binary(path: Path):
    """The file's bytes, gunzipped when it is gzip."""
    return gzip.open(path, "rb") if _is_gzip(path) else path.open("rb")


def _decoded(raw: bytes, path: Path, what: str, lineno: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CEGBError(f"{what} {str(path)!r} should be UTF-8 text, got byte 0x{raw[exc.start]:02x} on line "
                        f"{lineno}") from None


def _first_line(path: Path, what: str) -> str:
    with _open_binary(path) as f:
        return _decoded(f.readline(), path, what, 1).strip()


def _first_bad_line(path: Path, what: str, *, ncols: int, sep: str | None, skiprows: int,
                    expected: str) -> CEGBError | None:
    """The error at the first line that is not UTF-8 or not ``ncols`` numbers (None if there is none). A slow
    pass over the file, run only once the fast reader has failed, to name the line."""
    with _open_binary(path) as f:
        for lineno, raw in enumerate(f, 1):
            if lineno <= skiprows:
                continue
            line = _decoded(raw, path, what, lineno).strip()
            if not line:
                continue
            fields = line.split(sep)
            if len(fields) != ncols:
                return CEGBError(f"{what} {str(path)!r}, line {lineno}: expected {expected}, got {len(fields)} "
                                 f"fields: {line[:80]!r}")
            for j, field in enumerate(fields, 1):
                try:
                    float(field)
                except ValueError:
                    return CEGBError(f"{what} {str(path)!r}, line {lineno}, field {j}: expected a number, got "
                                     f"{field.strip()[:40]!r}")
    return None


def _read_table(path: Path, what: str, *, ncols: int, sep: str, skiprows: int, expected: str,
                label: int | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(X, labels): the rows of a numeric text table of ``ncols`` columns read by pandas' C parser in chunks,
    column ``label`` (if any) apart from the others; both C-contiguous float64."""
    compression = "gzip" if _is_gzip(path) else None
    features = [j for j in range(ncols) if j != label]
    parts, suspect, failure = [], False, None
    try:
        with pd.read_csv(path, sep=sep, header=None, names=range(ncols), dtype=np.float64, skiprows=skiprows,
                         compression=compression, encoding="utf-8", chunksize=_CHUNK_ROWS, engine="c") as reader:
            for chunk in reader:
                values = chunk.to_numpy(dtype=np.float64)
                suspect = suspect or bool(np.isnan(values).any())  # a short row or an empty field: NaN
                parts.append(values)
    except (OSError, EOFError) as exc:  # a damaged or truncated gzip file
        raise CEGBError(f"{what} {str(path)!r} cannot be read to its end: {exc}") from None
    except ValueError as exc:  # pandas' ParserError and UnicodeDecodeError are ValueErrors
        failure = exc
    if failure is not None or suspect:
        error = _first_bad_line(path, what, ncols=ncols, sep=None if sep == r"\s+" else sep, skiprows=skiprows,
                                expected=expected)
        if error is not None:
            raise error
        if failure is not None:
            raise CEGBError(f"{what} {str(path)!r}: expected {expected} per line: {failure}") from None
    n = sum(len(part) for part in parts)
    X = np.empty((n, len(features)), dtype=np.float64)
    y = None if label is None else np.empty(n, dtype=np.float64)
    start = 0
    while parts:  # copy and free chunk by chunk: the peak stays near one copy of the data
        part = parts.pop(0)
        X[start:start + len(part)] = part[:, features]
        if y is not None:
            y[start:start + len(part)] = part[:, label]
        start += len(part)
    return X, y


def _integer_labels(y: np.ndarray, allowed, path: Path, what: str, name: str) -> np.ndarray:
    allowed = np.asarray(allowed)
    bad = ~np.isin(y, allowed)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CEGBError(f"{what} {str(path)!r}: {name} should be one of {allowed.tolist()}, got {float(y[i]):g} "
                        f"in data row {i + 1}")
    return y.astype(np.int64)


def covertype(path: str | os.PathLike, *, binary: bool = False, as_frame: bool = False):
    """(X, y): UCI Forest Covertype from the user's ``covtype.data`` or ``covtype.data.gz`` (581,012 rows of 54
    comma-separated integers, ``COVERTYPE_FEATURES``, then the class 1..7), in the file's order.

    X is float64[n, 54]; y int64 holds the classes as in the file (1..7), or with ``binary=True`` 1 for class 2
    (Lodgepole Pine, the largest class: 283,301 rows) and 0 for the six others, the common "class 2 versus the
    rest" split. The CEGB and BudgetPrune papers use two classes without saying which; this is a choice, not
    theirs. ``as_frame=True``: X a DataFrame with the UCI column names and y a Series named "Cover_Type".

    Parameters
    ----------
    path : str or os.PathLike
        The user's ``covtype.data`` (gzipped or not).
    binary : bool, default=False
        y is 1 for class 2 and 0 for the others.
    as_frame : bool, default=False
        Return a pandas DataFrame and Series.

    Returns
    -------
    X : ndarray of shape (n_rows, 54) or pandas.DataFrame
        The features (float64).
    y : ndarray of int64 of shape (n_rows,) or pandas.Series
        The classes 1..7 (or 0/1 with ``binary``).

    Raises
    ------
    CEGBError
        When the file does not exist, cannot be read, or holds a line that is not 55 numbers or a class
        outside 1..7 (the message names the line), or when ``binary`` or ``as_frame`` is not a bool.
    """
    for name, flag in (("binary", binary), ("as_frame", as_frame)):
        if not isinstance(flag, bool):
            raise CEGBError(f"{name} should be True or False, got {flag!r}")
    what = "covertype file"
    path = _existing(path, what)
    X, y = _read_table(path, what, ncols=55, sep=",", skiprows=0, label=54,
                       expected="55 comma-separated numbers (54 features, then the class)")
    y = _integer_labels(y, range(1, 8), path, what, "the class (column 55)")
    if binary:
        y = (y == 2).astype(np.int64)
    if as_frame:
        return pd.DataFrame(X, columns=COVERTYPE_FEATURES, copy=False), pd.Series(y, name="Cover_Type")
    return X, y


def miniboone(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """(X, y): UCI MiniBooNE particle identification from the user's ``MiniBooNE_PID.txt`` (or gzipped): a first
    line "n_signal n_background", then that many rows of 50 whitespace-separated floats, the signal events
    first. X is float64[n, 50] as in the file (the file's -999 placeholders are kept); y int64 is 1 for the first
    n_signal rows (signal, electron neutrinos) and 0 after (background).

    Parameters
    ----------
    path : str or os.PathLike
        The user's ``MiniBooNE_PID.txt`` (gzipped or not).

    Returns
    -------
    X : ndarray of shape (n_rows, 50)
        The features (float64).
    y : ndarray of int64 of shape (n_rows,)
        1 for signal, 0 for background.

    Raises
    ------
    CEGBError
        When the file does not exist, its first line is not the two counts, a line is not 50 numbers, or the
        rows are not as many as announced.
    """
    what = "miniboone file"
    path = _existing(path, what)
    header = _first_line(path, what).split()
    if len(header) != 2 or not all(field.isdigit() for field in header):
        raise CEGBError(f"{what} {str(path)!r}, line 1: expected the counts 'n_signal n_background', got "
                        f"{' '.join(header)[:80]!r}")
    signal, background = int(header[0]), int(header[1])
    X, _ = _read_table(path, what, ncols=50, sep=r"\s+", skiprows=1, label=None,
                       expected="50 whitespace-separated numbers")
    if len(X) != signal + background:
        raise CEGBError(f"{what} {str(path)!r}: line 1 announces {signal} signal and {background} background rows "
                        f"({signal + background}), got {len(X)} rows")
    return X, np.r_[np.ones(signal, dtype=np.int64), np.zeros(background, dtype=np.int64)]


def hepmass(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """(X, y): UCI HEPMASS from one of the user's files (``all_train.csv.gz``, ``all_test.csv.gz``,
    ``1000_train.csv.gz``, ..., gzipped or not): a header line "# label, f0, ..., f26, mass", then rows of the
    label and 28 features, comma-separated. X is float64[n, 28] (f0..f26, then mass); y int64, 1 for signal and
    0 for background. Read in chunks by pandas' C parser (the full train file has 7M rows).

    Parameters
    ----------
    path : str or os.PathLike
        One of the user's HEPMASS files (gzipped or not).

    Returns
    -------
    X : ndarray of shape (n_rows, 28)
        The features (float64).
    y : ndarray of int64 of shape (n_rows,)
        1 for signal, 0 for background.

    Raises
    ------
    CEGBError
        When the file does not exist, its header is not the expected one, a line is not 29 numbers or a label
        is not 0 or 1.
    """
    what = "hepmass file"
    path = _existing(path, what)
    header = _first_line(path, what)
    if not header.startswith("# label") or len(header.split(",")) != 29:
        raise CEGBError(f"{what} {str(path)!r}, line 1: expected the header '# label, f0, ..., f26, mass' (29 "
                        f"comma-separated names), got {header[:80]!r}")
    X, y = _read_table(path, what, ncols=29, sep=",", skiprows=1, label=0,
                       expected="29 comma-separated numbers (the label, then 28 features)")
    return X, _integer_labels(y, (0, 1), path, what, "the label (column 1)")


def mslr(folder: str | os.PathLike, fold: int = 1) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """MSLR-WEB10K or MSLR-WEB30K from the user's unpacked folder (``Fold1/`` .. ``Fold5/``, each holding
    ``train.txt``, ``vali.txt``, ``test.txt`` in SVMlight format with ``qid:``, feature ids 1..136).

    Returns {"train": (X, y, group), "valid": ..., "test": ...} for ``fold``: X dense float64[n, 136] (column
    j is feature id j + 1; absent ids are 0), y the relevance labels 0..4 (float64, as ``load_svmlight`` and
    ``mslr_subset`` give them), group the sizes of the consecutive queries in file order.

    Parameters
    ----------
    folder : str or os.PathLike
        The unpacked data set's folder, holding ``Fold1/`` .. ``Fold5/``.
    fold : int, default=1
        The fold, 1 to 5.

    Returns
    -------
    dict of str to tuple of (ndarray, ndarray, ndarray)
        ``{"train": (X, y, group), "valid": (X, y, group), "test": (X, y, group)}``.

    Raises
    ------
    CEGBError
        When ``fold`` is not an integer in 1..5, or a file is missing or cannot be parsed.
    """
    check_number(fold, "fold", 1, 5, integer=True)
    fold_dir = Path(os.fspath(folder)) / f"Fold{fold}"
    out = {}
    for split, name in (("train", "train.txt"), ("valid", "vali.txt"), ("test", "test.txt")):
        path = _existing(fold_dir / name, f"MSLR {split} file")
        data = load_svmlight(path, num_features=MSLR_NUM_FEATURES)
        out[split] = (data.X.toarray(), data.y, data.group)
    return out
