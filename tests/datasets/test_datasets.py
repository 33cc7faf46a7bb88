"""SVMlight files with qid: feature ids aligned with cost files (1-based and 0-based), queries, the bundled
Yahoo cost vector, bad files."""

from __future__ import annotations

import numpy as np
import pytest

from lightgbm_cegb import CEGBError
from lightgbm_cegb.datasets import load_svmlight, yahoo_costs
from lightgbm_cegb.datasets.cost_files import UNUSED_ID_COST

ROWS = """2 qid:7 1:0.5 3:1.5
0 qid:7 2:2.0
1 qid:9 1:-1 4:4.0
"""


def test_one_based_ids_align_with_the_cost_file(tmp_path):
    (tmp_path / "rank.txt").write_text(ROWS)
    (tmp_path / "cost.txt").write_text("1\n5\n20\n50\n10000\n")  # id 5 never occurs
    data = load_svmlight(tmp_path / "rank.txt", tmp_path / "cost.txt")
    assert data.X.shape == (3, 5)
    np.testing.assert_array_equal(data.X.toarray(), [[0.5, 0, 1.5, 0, 0], [0, 2.0, 0, 0, 0], [-1, 0, 0, 4.0, 0]])
    np.testing.assert_array_equal(data.costs.lazy, [1, 5, 20, 50, 10000])  # cost of column j is line j + 1
    np.testing.assert_array_equal(data.group, [2, 1])
    np.testing.assert_array_equal(data.y, [2, 0, 1])


def test_zero_based_ids(tmp_path):
    (tmp_path / "rank.txt").write_text("1 qid:1 0:3.0 2:1.0\n0 qid:1 1:2.0\n")
    data = load_svmlight(tmp_path / "rank.txt", zero_based=True, num_features=4)
    np.testing.assert_array_equal(data.X.toarray(), [[3.0, 0, 1.0, 0], [0, 2.0, 0, 0]])
    assert data.costs is None


def test_lightgbm_query_files(tmp_path):
    """LightGBM's PATH.query (one query size per line) groups rows without qid fields, and must agree with
    them when both are there."""
    (tmp_path / "plain.txt").write_text("2 1:0.5\n0 2:2.0\n1 1:-1\n1 2:1\n")
    (tmp_path / "plain.txt.query").write_text("3\n1\n")
    data = load_svmlight(tmp_path / "plain.txt", num_features=2)
    np.testing.assert_array_equal(data.group, [3, 1])
    np.testing.assert_array_equal(data.qid, [0, 0, 0, 1])
    (tmp_path / "other.query").write_text("2\n2\n")
    np.testing.assert_array_equal(load_svmlight(tmp_path / "plain.txt", num_features=2,
                                                query=tmp_path / "other.query").group, [2, 2])
    (tmp_path / "rank.txt").write_text(ROWS)
    (tmp_path / "rank.txt.query").write_text("2\n1\n")
    np.testing.assert_array_equal(load_svmlight(tmp_path / "rank.txt").group, [2, 1])  # agrees with the qids
    (tmp_path / "rank.txt.query").write_text("1\n2\n")
    with pytest.raises(CEGBError, match=r"its qid fields group the rows otherwise than .*rank.txt.query"):
        load_svmlight(tmp_path / "rank.txt")
    (tmp_path / "rank.txt.query").write_text("1\n1\n")
    with pytest.raises(CEGBError, match=r"query sizes should be > 0 and sum to the data's 3 rows, got 2 sizes "
                                         r"summing to 2"):
        load_svmlight(tmp_path / "rank.txt")
    with pytest.raises(CEGBError, match=r"query file .*missing.query' does not exist"):
        load_svmlight(tmp_path / "rank.txt", query=tmp_path / "missing.query")


def test_bundled_yahoo_costs():
    costs = yahoo_costs()
    assert costs.num_features == 700
    values, counts = np.unique(costs.lazy, return_counts=True)
    assert dict(zip(values.tolist(), counts.tolist())) == {1.0: 123, 5.0: 31, 20.0: 191, 50.0: 125, 100.0: 16,
                                                          150.0: 32, 200.0: 1, UNUSED_ID_COST: 181}


def test_bad_files(tmp_path):
    (tmp_path / "rank.txt").write_text(ROWS)
    (tmp_path / "short.txt").write_text("1\n5\n20\n")
    with pytest.raises(CEGBError, match=r"a feature id beyond the 3 that the costs cover \(1-based ids\)"):
        load_svmlight(tmp_path / "rank.txt", tmp_path / "short.txt")
    (tmp_path / "split.txt").write_text("1 qid:1 1:1\n0 qid:2 1:1\n1 qid:1 1:2\n")
    with pytest.raises(CEGBError, match="the rows of query 1 are not consecutive"):
        load_svmlight(tmp_path / "split.txt")
    with pytest.raises(CEGBError, match="num_features=9 but the costs list 5 features"):
        (tmp_path / "cost.txt").write_text("1\n5\n20\n50\n10000\n")
        load_svmlight(tmp_path / "rank.txt", tmp_path / "cost.txt", num_features=9)


def test_bundled_mslr_subset():
    from lightgbm_cegb.datasets import mslr_subset

    for split in ("train", "test"):
        data = mslr_subset(split)
        assert data.X.shape == (5000, 136) and data.group.sum() == 5000 and len(data.group) == 43
        assert data.costs.num_features == 136 and set(np.unique(data.costs.lazy)) <= {1.0, 10.0, 20.0, 50.0, 100.0}
        assert set(np.unique(data.y)) <= {0.0, 1.0, 2.0, 3.0, 4.0}
    with pytest.raises(CEGBError, match=r"split should be 'train' or 'test', got 'valid'"):
        mslr_subset("valid")


# ---- the papers' public data sets, from tiny files of their public formats ------------------------------------

def covtype_rows(classes):
    """Rows of ``covtype.data``: 10 quantitative integers, one-hot wilderness (4) and soil (40), the class."""
    rows = []
    for i, cls in enumerate(classes):
        quantitative = [2596 + i, 51, 3, 258, -i, 510, 221, 232, 148, 6279]
        wilderness, soil = [0] * 4, [0] * 40
        wilderness[i % 4], soil[(7 * i) % 40] = 1, 1
        rows.append(quantitative + wilderness + soil + [cls])
    return np.array(rows)


def write(path, text, compress=False):
    import gzip

    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def csv_lines(rows, fmt=str):
    return "".join(",".join(fmt(v) for v in row) + "\n" for row in rows)


@pytest.mark.parametrize("name", ["covtype.data", "covtype.data.gz"])
def test_covertype(tmp_path, name):
    import pandas as pd

    from lightgbm_cegb.datasets import COVERTYPE_FEATURES, covertype

    rows = covtype_rows([5, 2, 7, 2])
    path = write(tmp_path / name, csv_lines(rows), compress=name.endswith(".gz"))
    X, y = covertype(path)
    assert X.shape == (4, 54) and X.dtype == np.float64 and X.flags.c_contiguous
    np.testing.assert_array_equal(X, rows[:, :54])
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [5, 2, 7, 2])
    np.testing.assert_array_equal(covertype(path, binary=True)[1], [0, 1, 0, 1])  # class 2 versus the rest
    frame, target = covertype(path, as_frame=True)
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == COVERTYPE_FEATURES
    assert len(COVERTYPE_FEATURES) == 54 and COVERTYPE_FEATURES[9] == "Horizontal_Distance_To_Fire_Points"
    assert COVERTYPE_FEATURES[10] == "Wilderness_Area1" and COVERTYPE_FEATURES[-1] == "Soil_Type40"
    assert frame["Elevation"].tolist() == [2596, 2597, 2598, 2599] and frame["Soil_Type8"].tolist() == [0, 1, 0, 0]
    assert isinstance(target, pd.Series) and target.name == "Cover_Type" and target.tolist() == [5, 2, 7, 2]


def test_covertype_bad_files(tmp_path, monkeypatch):
    from lightgbm_cegb.datasets import covertype, loaders

    rows = covtype_rows([1, 2, 3, 4, 5])
    good = csv_lines(rows).splitlines(keepends=True)
    short = write(tmp_path / "short.data", "".join(good[:1] + [",".join(map(str, rows[1, 1:])) + "\n"] + good[2:]))
    with pytest.raises(CEGBError, match=r"covertype file '.*short.data', line 2: expected 55 comma-separated "
                                        r"numbers \(54 features, then the class\), got 54 fields"):
        covertype(short)
    long = write(tmp_path / "long.data", "".join(good[:2] + ["0," + good[2]] + good[3:]), compress=True)
    with pytest.raises(CEGBError, match=r"long.data', line 3: expected 55 .* got 56 fields"):
        covertype(long)
    word = write(tmp_path / "word.data", "".join(good[:3] + [good[3].replace("2596", "x", 1).replace("2599", "x")]))
    with pytest.raises(CEGBError, match=r"word.data', line 4, field 1: expected a number, got 'x'"):
        covertype(word)
    write(tmp_path / "empty.data", "".join(good[:1] + [good[1].replace(",51,", ",,", 1)] + good[2:]))
    with pytest.raises(CEGBError, match=r"empty.data', line 2, field 2: expected a number, got ''"):
        covertype(tmp_path / "empty.data")
    (tmp_path / "latin1.data").write_bytes("".join(good[:2]).encode() + b"\xff" + "".join(good[2:]).encode())
    with pytest.raises(CEGBError, match=r"latin1.data' should be UTF-8 text, got byte 0xff on line 3"):
        covertype(tmp_path / "latin1.data")
    eight = write(tmp_path / "eight.data", csv_lines(covtype_rows([1, 8])))
    with pytest.raises(CEGBError, match=r"the class \(column 55\) should be one of \[1, 2, 3, 4, 5, 6, 7\], got "
                                        r"8 in data row 2"):
        covertype(eight)
    with pytest.raises(CEGBError, match=r"covertype file '.*missing.data' does not exist"):
        covertype(tmp_path / "missing.data")
    with pytest.raises(CEGBError, match=r"binary should be True or False, got 1"):
        covertype(eight, binary=1)
    monkeypatch.setattr(loaders, "_CHUNK_ROWS", 2)  # chunked reading: the same rows, errors still by line
    path = write(tmp_path / "chunks.data", csv_lines(rows))
    np.testing.assert_array_equal(covertype(path)[0], rows[:, :54])
    np.testing.assert_array_equal(covertype(path)[1], [1, 2, 3, 4, 5])
    write(tmp_path / "chunks.data", "".join(good[:4] + [good[4].replace(",0,", ",", 1)]))
    with pytest.raises(CEGBError, match=r"chunks.data', line 5: expected 55 .* got 54 fields"):
        covertype(tmp_path / "chunks.data")


def miniboone_text(n_signal, n_background, rows):
    lines = [f"{n_signal:>10d}{n_background:>10d}"]  # the public file right-aligns, as here
    lines += ["".join(f"{v:>13.5E}" for v in row) for row in rows]  # and writes "  2.59413E+00 ..."
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("compress", [False, True])
def test_miniboone(tmp_path, compress):
    from lightgbm_cegb.datasets import miniboone

    rows = np.round(np.random.default_rng(0).normal(size=(5, 50)), 4)
    rows[4, 3] = -999.0  # the file's placeholder stays as it is
    path = write(tmp_path / "MiniBooNE_PID.txt", miniboone_text(3, 2, rows), compress=compress)
    X, y = miniboone(path)
    assert X.shape == (5, 50) and X.dtype == np.float64
    np.testing.assert_allclose(X, rows, rtol=1e-5)
    assert X[4, 3] == -999.0
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, [1, 1, 1, 0, 0])


def test_miniboone_bad_files(tmp_path):
    from lightgbm_cegb.datasets import miniboone

    rows = np.ones((5, 50))
    write(tmp_path / "count.txt", miniboone_text(3, 3, rows))
    with pytest.raises(CEGBError, match=r"miniboone file '.*count.txt': line 1 announces 3 signal and 3 background "
                                        r"rows \(6\), got 5 rows"):
        miniboone(tmp_path / "count.txt")
    write(tmp_path / "header.txt", "signal background\n" + miniboone_text(3, 2, rows).split("\n", 1)[1])
    with pytest.raises(CEGBError, match=r"header.txt', line 1: expected the counts 'n_signal n_background', got "
                                        r"'signal background'"):
        miniboone(tmp_path / "header.txt")
    write(tmp_path / "headerless.txt", miniboone_text(3, 2, rows).split("\n", 1)[1])
    with pytest.raises(CEGBError, match=r"headerless.txt', line 1: expected the counts"):
        miniboone(tmp_path / "headerless.txt")
    write(tmp_path / "width.txt", miniboone_text(3, 2, rows).replace("1.00000E+00\n", "\n", 1))
    with pytest.raises(CEGBError, match=r"width.txt', line 2: expected 50 whitespace-separated numbers, got 49 "
                                        r"fields"):
        miniboone(tmp_path / "width.txt")


HEPMASS_HEADER = "# label," + ",".join(f"f{i}" for i in range(27)) + ",mass\n"


@pytest.mark.parametrize("name", ["1000_train.csv", "all_test.csv.gz"])
def test_hepmass(tmp_path, name, monkeypatch):
    from lightgbm_cegb.datasets import hepmass, loaders

    features = np.round(np.random.default_rng(1).normal(size=(5, 28)), 6)
    features[:, 27] = [1000, 500, 750, 1250, 1000]  # mass
    labels = [1, 0, 0, 1, 1]
    text = HEPMASS_HEADER + csv_lines(np.column_stack([labels, features]), fmt=lambda v: f"{v:.6f}")
    path = write(tmp_path / name, text, compress=name.endswith(".gz"))
    monkeypatch.setattr(loaders, "_CHUNK_ROWS", 2)  # several chunks
    X, y = hepmass(path)
    assert X.shape == (5, 28) and X.dtype == np.float64 and X.flags.c_contiguous
    np.testing.assert_allclose(X, features)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, labels)


def test_hepmass_bad_files(tmp_path):
    from lightgbm_cegb.datasets import hepmass

    row = "1," + ",".join(["0.5"] * 28) + "\n"
    write(tmp_path / "noheader.csv", row * 3)
    with pytest.raises(CEGBError, match=r"hepmass file '.*noheader.csv', line 1: expected the header '# label, "
                                        r"f0, ..., f26, mass' \(29 comma-separated names\), got '1,0.5"):
        hepmass(tmp_path / "noheader.csv")
    write(tmp_path / "narrow.csv", HEPMASS_HEADER.replace(",mass", "") + row * 3)
    with pytest.raises(CEGBError, match=r"narrow.csv', line 1: expected the header"):
        hepmass(tmp_path / "narrow.csv")
    write(tmp_path / "width.csv", HEPMASS_HEADER + row + row.replace("1,0.5,", "1,", 1) + row, compress=True)
    with pytest.raises(CEGBError, match=r"width.csv', line 3: expected 29 comma-separated numbers \(the label, "
                                        r"then 28 features\), got 28 fields"):
        hepmass(tmp_path / "width.csv")
    write(tmp_path / "label.csv", HEPMASS_HEADER + row + "2" + row[1:])
    with pytest.raises(CEGBError, match=r"label.csv': the label \(column 1\) should be one of \[0, 1\], got 2 "
                                        r"in data row 2"):
        hepmass(tmp_path / "label.csv")


MSLR_SPLITS = {  # file: rows (label, qid, {feature id: value})
    "train.txt": [(2, 1, {1: 3.0, 136: 0.5}), (0, 1, {2: 1.0}), (1, 7, {135: -2.0}), (0, 7, {}), (4, 7, {1: 1})],
    "vali.txt": [(1, 10, {5: 2.0}), (3, 11, {6: 1.5})],
    "test.txt": [(0, 20, {1: 1.0}), (2, 20, {136: 9.0}), (1, 20, {})],
}


def write_mslr_fold(folder, fold, splits=MSLR_SPLITS):
    (folder / f"Fold{fold}").mkdir(parents=True)
    for name, rows in splits.items():
        lines = [" ".join([f"{label} qid:{qid}"] + [f"{k}:{v}" for k, v in sorted(feats.items())]) + " "
                 for label, qid, feats in rows]  # MSLR's lines end in a space
        (folder / f"Fold{fold}" / name).write_text("\n".join(lines) + "\n")


def test_mslr(tmp_path):
    from lightgbm_cegb.datasets import mslr

    write_mslr_fold(tmp_path, 3)
    data = mslr(tmp_path, fold=3)
    assert set(data) == {"train", "valid", "test"}
    for split, name in (("train", "train.txt"), ("valid", "vali.txt"), ("test", "test.txt")):
        X, y, group = data[split]
        rows = MSLR_SPLITS[name]
        assert isinstance(X, np.ndarray) and X.shape == (len(rows), 136) and X.dtype == np.float64
        expected = np.zeros((len(rows), 136))
        for i, (_, _, feats) in enumerate(rows):
            for k, v in feats.items():
                expected[i, k - 1] = v  # column j is feature id j + 1
        np.testing.assert_array_equal(X, expected)
        np.testing.assert_array_equal(y, [label for label, _, _ in rows])
    np.testing.assert_array_equal(data["train"][2], [2, 3])
    np.testing.assert_array_equal(data["valid"][2], [1, 1])
    np.testing.assert_array_equal(data["test"][2], [3])


def test_mslr_bad_folders(tmp_path):
    from lightgbm_cegb.datasets import mslr

    write_mslr_fold(tmp_path, 1)
    with pytest.raises(CEGBError, match=r"MSLR train file '.*Fold2.train.txt' does not exist"):
        mslr(tmp_path, fold=2)
    (tmp_path / "Fold1" / "vali.txt").unlink()
    with pytest.raises(CEGBError, match=r"MSLR valid file '.*Fold1.vali.txt' does not exist"):
        mslr(tmp_path)
    with pytest.raises(CEGBError, match=r"fold should be an integer in \[1, 5\], got 6"):
        mslr(tmp_path, fold=6)
    wide = {**MSLR_SPLITS, "train.txt": [(1, 1, {137: 1.0})]}
    write_mslr_fold(tmp_path / "wide", 1, wide)
    with pytest.raises(CEGBError, match=r"train.txt: a feature id beyond the 136 of num_features \(1-based ids\)"):
        mslr(tmp_path / "wide")
    split = {**MSLR_SPLITS, "test.txt": [(1, 1, {}), (0, 2, {}), (1, 1, {})]}
    write_mslr_fold(tmp_path / "split", 1, split)
    with pytest.raises(CEGBError, match=r"test.txt: the rows of query 1 are not consecutive"):
        mslr(tmp_path / "split")


def test_odd_svmlight_arguments_are_named(tmp_path):
    """Issue 48 (13): an empty file was an IndexError, a missing one scikit-learn's FileNotFoundError, costs as a
    list an AttributeError, num_features=0 "a feature id beyond the 0 of num_features"."""
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "rank.txt").write_text("1 qid:1 1:0.5\n0 qid:1 2:1.0\n")
    cases = [
        (lambda: load_svmlight(tmp_path / "empty.txt", num_features=2), r"empty.txt: the file holds no row"),
        (lambda: load_svmlight(tmp_path / "nope.txt"), r"SVMlight file '.*nope.txt' does not exist"),
        (lambda: load_svmlight(tmp_path), r"SVMlight file '.*' is not a file"),
        (lambda: load_svmlight(tmp_path / "rank.txt", costs=[1, 2]),
         r"costs should be a cost file or FeatureCosts by column, got list"),
        (lambda: load_svmlight(tmp_path / "rank.txt", num_features=0), r"num_features should be an integer >= 1"),
        (lambda: load_svmlight(tmp_path / "rank.txt", num_features="3"), r"num_features should be an integer"),
    ]
    for call, message in cases:
        with pytest.raises(CEGBError, match=message):
            call()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"n": -5}, r"n should be an integer >= 0, got -5"), ({"n": "10"}, r"n should be an integer >= 0, got '10'"),
    ({"n": 10, "seed": "x"}, r"seed should be an integer >= 0, got 'x'"),
])
def test_quadrants_names_its_arguments(kwargs, message):
    """Issue 48 (13): numpy's "negative dimensions are not allowed" or "cannot be interpreted as an integer"."""
    from lightgbm_cegb.datasets import quadrants
    with pytest.raises(CEGBError, match=message):
        quadrants(**kwargs)
