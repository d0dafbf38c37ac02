"""sha256 of a file's bytes: the one implementation the core, the artifact store and the inbox share.

Kept in a module of its own that imports nothing of the project beyond larev.errors, so every layer can use it
(storage/store.py, larev/data/sources.py, larev/models/pretrained.py, tasks/inbox.py).
"""

from __future__ import annotations

import hashlib
import os
from typing import IO

from larev.errors import InputError

#: Bytes read at a time.
CHUNK = 1 << 20


def sha256_stream(stream: IO[bytes]) -> str:
    """Hex sha256 of what a binary stream holds from its position to its end, read in 1 MiB blocks."""
    h = hashlib.sha256()
    for block in iter(lambda: stream.read(CHUNK), b""):
        h.update(block)
    return h.hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a local file's bytes."""
    with open(path, "rb") as f:
        return sha256_stream(f)


def file_digest(path: str | os.PathLike[str]) -> str:
    """sha256 of an input file's bytes, part of the cache key of the step that reads it; a missing file is an
    InputError naming it."""
    try:
        return sha256_file(path)
    except FileNotFoundError:
        raise InputError("file not found", file=str(path)) from None
