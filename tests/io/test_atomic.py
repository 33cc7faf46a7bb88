"""Files written atomically (lightgbm_cegb.io.atomic): the mode a new file gets, the mode a replaced file keeps,
the data and the move flushed to the disk before and after the move, nothing left by a failed write."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lightgbm_cegb.io import atomic
from lightgbm_cegb.io.atomic import write_atomically


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002, 0o077])
def test_a_new_file_has_the_mode_open_gives_under_the_umask(tmp_path, mask):
    """A review (2026-12-07): every file was made 0644 whatever the umask (a umask of 077, kept for private
    models, still made them readable by every user)."""
    before = os.umask(mask)
    try:
        write_atomically(tmp_path / "new.txt", lambda tmp: Path(tmp).write_text("x"))
        with open(tmp_path / "plain.txt", "w") as handle:  # what open gives, the reference
            handle.write("x")
    finally:
        os.umask(before)
    assert _mode(tmp_path / "new.txt") == _mode(tmp_path / "plain.txt") == 0o666 & ~mask


@pytest.mark.parametrize("mode", [0o600, 0o444])
def test_a_replaced_file_keeps_its_mode_once_the_new_one_is_written(tmp_path, mode):
    """The mode is the old file's, set after the data is written: a read-only file (0444) is replaced by a read-only
    one, not refused (a review, 2026-12-07: the temporary file took 0444 before the write, which failed for a user
    without root's override)."""
    path = tmp_path / "model.txt"
    path.write_text("old")
    path.chmod(mode)
    modes = []

    def write(tmp):
        modes.append(_mode(Path(tmp)))
        Path(tmp).write_text("new")

    write_atomically(path, write)
    assert path.read_text() == "new" and _mode(path) == mode
    assert modes[0] & 0o200  # the owner could write the temporary file


def test_the_data_is_flushed_before_the_move_and_the_move_after_it(tmp_path, monkeypatch):
    """A review (2026-12-07): nothing was flushed, so after a power loss the new name could point at a file of
    no data (the old model lost)."""
    events = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 fsync(fd))[1])
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(("replace", str(b))), replace(a, b))[1])
    path = tmp_path / "model.txt"
    write_atomically(path, lambda tmp: Path(tmp).write_text("new"))
    assert [kind for kind, _ in events] == ["fsync", "replace", "fsync"]
    assert events[0][1].startswith(str(path)) and events[0][1].endswith(".tmp")  # the temporary file's data
    assert events[1][1] == str(path) and events[2][1] == str(tmp_path)  # then the folder that holds the new name


@pytest.mark.parametrize("mode", [0o200, 0o000])
def test_a_file_whose_mode_has_no_read_bit_is_flushed_too(tmp_path, monkeypatch, mode):
    """A review (2026-12-07): the mode was set before the flush, whose read-only open of a file of mode 0200 failed
    for a user without root's override, and the data went unflushed without a word. The file is now opened while
    still the owner's to read, its mode set on the open file and then flushed with its data: here every open of it
    after the mode is set fails, as it does for such a user."""
    events = []
    fsync, chmod, open_ = os.fsync, os.chmod, os.open
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))),
                                                 fsync(fd))[1])

    def refused(name, *args, **kwargs):  # what a user without root's override meets
        if str(name).endswith(".tmp"):
            raise PermissionError(13, "Permission denied", str(name))
        return open_(name, *args, **kwargs)

    def chmod_then_refuse(path, mode_):
        events.append(("chmod", str(path)))
        chmod(path, mode_)
        monkeypatch.setattr(os, "open", refused)

    monkeypatch.setattr(os, "chmod", chmod_then_refuse)
    path = tmp_path / "model.txt"
    path.write_text("old")
    chmod(path, mode)
    write_atomically(path, lambda tmp: Path(tmp).write_text("new"))
    assert [kind for kind, _ in events] == ["chmod", "fsync", "fsync"]
    assert events[1][1].endswith(".tmp") and _mode(path) == mode  # the data, and the mode set before it


def test_a_failed_write_leaves_the_old_file_and_nothing_else(tmp_path):
    path = tmp_path / "model.txt"
    path.write_text("old")

    def fail(tmp):
        Path(tmp).write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(path, fail)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["model.txt"]


def test_a_file_system_that_refuses_fsync_still_gets_the_file(tmp_path, monkeypatch):
    def refuse(fd):
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(os, "fsync", refuse)
    write_atomically(tmp_path / "model.txt", lambda tmp: Path(tmp).write_text("new"))
    assert (tmp_path / "model.txt").read_text() == "new"


def test_the_umask_is_read_without_changing_it():
    before = os.umask(0o027)
    try:
        assert atomic._umask() == 0o027
        assert os.umask(0o027) == 0o027  # unchanged by the read
    finally:
        os.umask(before)
