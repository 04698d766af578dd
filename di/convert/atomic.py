"""Writing an output file so that a failed or interrupted write never leaves half a file under its name."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO


@contextmanager
def atomic_write(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary file to write; it replaces ``path`` when the block ends without an exception.

    The bytes go to a temporary sibling (``PATH.<pid>.tmp``), renamed into place at
    the end, or removed when the block raises.
    """
    path = os.fspath(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
