"""Files written atomically: a reader sees the old file or the new one, never a part; and a lock on a folder, which
serializes the writers of its files."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None


def write_atomically(path: str | os.PathLike, write) -> None:
    """``write(tmp)`` to a temporary file beside ``path``, then moved onto it (nothing left on failure)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 is for secrets: these are files to share
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


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
