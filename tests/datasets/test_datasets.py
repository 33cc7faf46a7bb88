"""SVMlight files with qid: feature ids aligned with cost files (1-based and 0-based), queries, the bundled
Yahoo cost vector, bad files."""

from __future__ import annotations

import numpy as np
import pytest

from lightgbm_cegb import CEGBError
from lightgbm_cegb.core.costs import UNUSED_ID_COST
from lightgbm_cegb.datasets import load_svmlight, yahoo_costs

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
