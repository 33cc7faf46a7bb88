"""Files written atomically: a reader sees the old file or the new one, never a part."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
