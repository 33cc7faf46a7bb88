"""Files written atomically: a reader sees the old file or the new one, never a part; and a lock on a folder, which
serializes the writers of its files."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None


def write_atomically(path: str | os.PathLike, write) -> None:
    """``write(tmp)`` to a temporary file beside ``path``, flushed to the disk, then moved onto it and the move
    flushed too (nothing left on failure; after a crash or a power loss the old file or the new one). The new file
    keeps the mode of the one it replaces, else has the mode ``open`` would give it (0666 less the umask)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        _flushed(tmp, stat.S_IMODE(os.stat(path).st_mode) if path.exists() else 0o666 & ~_umask())
        os.replace(tmp, path)
        _flushed(path.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _flushed(path: str | os.PathLike, mode: int | None = None) -> None:
    """``fsync`` a file or a folder (a folder's: the names moved into it), given ``mode`` with the file's mode set on
    the open file first (a mode without the owner's read bit set before would keep it from being opened: its data
    unflushed). A file system that cannot (some network and virtual ones refuse a folder's) is left as it is."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        if mode is not None:
            os.chmod(path, mode)
        return
    try:
        if mode is not None:
            os.chmod(fd if os.chmod in os.supports_fd else path, mode)
        try:
            os.fsync(fd)
        except OSError:
            pass
    finally:
        os.close(fd)


def _umask() -> int:
    """The process's umask: read where Linux shows it (``os.umask`` sets it to read it, which a thread creating a
    file meanwhile would see)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def locked(folder: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` (an existing folder) while the block runs: blocks of other threads and
    processes that lock it wait for it (``flock`` on the folder itself, so no lock file is written; released when
    the block ends or the process dies). Where the system has no ``flock`` or the file system refuses it, the
    block runs unlocked."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:  # a file system without locks (some network ones)
                pass
        yield
    finally:
        os.close(fd)
