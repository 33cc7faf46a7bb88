"""The cost file (``datasets.cost_files``): the Yahoo! LTR format, its group lines, and the errors that name the
file and line (moved from tests/core/test_costs.py with the reader)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lightgbm_cegb import CEGBError, FeatureCosts
from lightgbm_cegb.datasets import read_cost_file
from lightgbm_cegb.datasets.cost_files import read_costs


def test_yahoo_cost_file(tmp_path):
    path = tmp_path / "feature_cost.txt"
    path.write_text("1\n5\n\n20 # comment\n10000\n")
    costs = read_cost_file(path, num_features=3)
    np.testing.assert_array_equal(costs.lazy, [1.0, 5.0, 20.0])
    assert read_cost_file(path, kind="coupled").coupled.tolist() == [1.0, 5.0, 20.0, 10000.0]
    costs = read_cost_file(path, num_features=5, first_column=1)  # 1-based ids read by LightGBM
    np.testing.assert_array_equal(costs.lazy, [0.0, 1.0, 5.0, 20.0, 10000.0])
    with pytest.raises(CEGBError, match=r"has 4 costs for columns 0..3, but the data has 5 columns \(0..4\); if its "
                                        r"first line is the cost of feature id 1"):
        read_cost_file(path, num_features=5)
    with pytest.raises(CEGBError, match=r"has 4 costs for columns 0..3, but the data has 2 columns"):
        read_cost_file(path, num_features=2)  # only a tail of the never-used ids' 10000 is dropped
    path.write_text("1\nfree\n")
    with pytest.raises(CEGBError, match=r"feature_cost.txt:2: expected a number, got 'free'"):
        read_cost_file(path)


def test_cost_file_that_is_not_utf8_is_named(tmp_path):
    """A UnicodeDecodeError (a traceback in the CLI) before."""
    path = tmp_path / "feature_cost.txt"
    path.write_bytes(b"1\n2\n# caf\xe9\n3\n")
    with pytest.raises(CEGBError, match=r"cost file '.*feature_cost.txt' should be UTF-8 text, got byte 0xe9 on "
                                        r"line 3 \(offset 9\)"):
        read_cost_file(path)
    path.write_bytes("1\n2\n# café\n3\n".encode())
    np.testing.assert_array_equal(read_cost_file(path).lazy, [1.0, 2.0, 3.0])


def test_cost_file_with_group_lines(tmp_path):
    """Group lines: a group's cost of the file's kind, its columns LightGBM's (ranges inclusive), whatever
    first_column; the per-feature values as before."""
    path = tmp_path / "costs.txt"
    path.write_text("# soil survey: columns 2..4 for one fee\n1\n2\n0\n0\n0  # soil\n"
                    "group soil 100 2-3,4\ngroup wild 3.5 1\n")
    costs = read_cost_file(path, num_features=5)
    np.testing.assert_array_equal(costs.lazy, [1.0, 2.0, 0.0, 0.0, 0.0])
    assert costs.groups == {"soil": [2, 3, 4], "wild": [1]}
    group_of, group_lazy, group_coupled = costs.group_arrays(5)
    np.testing.assert_array_equal(group_of, [-1, 1, 0, 0, 0])
    np.testing.assert_array_equal(group_lazy, [100.0, 3.5])
    np.testing.assert_array_equal(group_coupled, [0.0, 0.0])
    coupled = read_cost_file(path, kind="coupled", first_column=1)  # values shift, columns do not
    np.testing.assert_array_equal(coupled.coupled, [0.0, 1.0, 2.0, 0.0, 0.0, 0.0])
    assert coupled.lazy is None and coupled.groups == {"soil": [2, 3, 4], "wild": [1]}
    np.testing.assert_array_equal(coupled.group_arrays(6)[2], [100.0, 3.5])
    path.write_text("1\n2\n3\n10000\ngroup g 1 0 2\n")  # the Yahoo tail is dropped first
    assert read_cost_file(path, num_features=3).groups == {"g": [0, 2]}


@pytest.mark.parametrize(("text", "message"), [
    ("1\n2\ngroup g 5\n", r"costs.txt:3: expected 'group NAME COST COLUMNS' \(e.g. 'group soil 100 2-41,45'\), got "
                          r"'group g 5'"),
    ("1\n2\ngroup g -1 0\n", r"costs.txt:3: group 'g': expected its cost, a finite number >= 0, got '-1'"),
    ("1\n2\ngroup g nan 0\n", r"costs.txt:3: group 'g': expected its cost, a finite number >= 0, got 'nan'"),
    ("1\n2\ngroup g 1 x\n", r"costs.txt:3: group 'g': expected columns as numbers from 0 or ranges low-high "
                            r"\(e.g. 2-41,45\), got 'x'"),
    ("1\n2\ngroup g 1 1-0\n", r"costs.txt:3: group 'g': expected columns .*got '1-0'"),
    ("1\n2\ngroup g 1 -1\n", r"costs.txt:3: group 'g': expected columns .*got '-1'"),
    ("1\n2\ngroup g 1 ,\n", r"costs.txt:3: group 'g' names no column"),
    ("1\n2\ngroup g 1 0-2000000000\n", r"costs.txt:3: group 'g' names column 2000000000, beyond the 2 columns the "
                                       r"file's costs cover \(0..1\)"),
    ("1\n2\ngroup g 1 0\ngroup h 1 1,0\n", r"costs.txt:4: column 0 is already in group 'g' \(line 3\); a column is "
                                           r"in one group at most"),
    ("1\n2\ngroup g 1 0,0\n", r"costs.txt:3: column 0 is already in group 'g'; a column is in one group at most"),
    ("1\n2\ngroup g 1 0\ngroup g 2 1\n", r"costs.txt:4: group 'g' is already defined on line 3"),
    ("1\ngroups g 1 0\n", r"costs.txt:2: expected a number, got 'groups g 1 0' \(a group is a line 'group NAME COST "
                          r"COLUMNS'\)"),
])
def test_cost_file_group_lines_refused(tmp_path, text, message):
    path = tmp_path / "costs.txt"
    path.write_text(text)
    with pytest.raises(CEGBError, match=message):
        read_cost_file(path)


def test_cost_files_that_are_not_costs_are_named(tmp_path):
    """Issue 48 (13): a missing cost file was a bare FileNotFoundError (the CLI said "[Errno 2] ..." without naming
    --costs), a directory IsADirectoryError, a file with a byte order mark "expected a number, got '\\ufeff1'"."""
    with pytest.raises(CEGBError, match=r"cost file '.*nope.txt' does not exist"):
        read_cost_file(tmp_path / "nope.txt")
    with pytest.raises(CEGBError, match=r"cost file '.*' is a directory, not a file"):
        read_cost_file(tmp_path)
    (tmp_path / "two.txt").write_text("1\n2\n")
    with pytest.raises(CEGBError, match=r"num_features should be an integer >= 1, got '3'"):
        read_cost_file(tmp_path / "two.txt", num_features="3")
    with pytest.raises(CEGBError, match=r"first_column should be an integer >= 0, got 1.5"):
        read_cost_file(tmp_path / "two.txt", first_column=1.5)
    (tmp_path / "bom.txt").write_bytes("\ufeff1\n2.5\n".encode())  # as Excel or Notepad writes UTF-8
    np.testing.assert_array_equal(read_cost_file(tmp_path / "bom.txt").lazy, [1.0, 2.5])


def test_kind_is_lazy_or_coupled():
    with pytest.raises(CEGBError, match=r"kind should be 'lazy' or 'coupled', got 'both'"):
        read_cost_file("x.txt", kind="both")


def test_read_costs_takes_json_of_the_arguments_or_a_cost_file(tmp_path):
    """``read_costs`` (the command line's ``--costs``): JSON of FeatureCosts' arguments gives the same costs as
    those arguments; any other text is a cost file; JSON that is not an object of those arguments is refused."""
    costs = FeatureCosts(lazy=[1.0, 2.0, 3.0], coupled=[0.0, 4.0, 0.0], groups={"g": [0, 2]}, group_lazy=[7.0])
    (tmp_path / "c.json").write_text(json.dumps(costs.fields()))
    assert read_costs(tmp_path / "c.json", 3) == costs
    (tmp_path / "c.txt").write_text("1\n2\n3\n")
    assert read_costs(tmp_path / "c.txt", 3) == read_cost_file(tmp_path / "c.txt", num_features=3)
    with pytest.raises(CEGBError, match=r"--one-based moves the lines of a cost file; '.*c.json' is JSON"):
        read_costs(tmp_path / "c.json", 3, first_column=1, one_based="--one-based")
    (tmp_path / "bad.json").write_text('{"lazy": [1, 2, 3], "lazzy": [2]}')
    with pytest.raises(CEGBError, match=r"should hold a JSON object of FeatureCosts' arguments .*, got the keys "
                                        r"\['lazzy'\]"):
        read_costs(tmp_path / "bad.json", 3)
    (tmp_path / "broken.json").write_text('{"lazy": [1, 2,')
    with pytest.raises(CEGBError, match=r"'.*broken.json' is not valid JSON"):
        read_costs(tmp_path / "broken.json", 3)
