"""Where the real datasets live: the one place that names the data directory.

`data_dir()` is `LAREV_DATA` when set, else `../shared/data` when it exists (the workplace's shared copy, relative to
the working directory), else `data/`, where `larev data get` writes by default. The directory holds
`esnli/{train,dev,test}.parquet`, `cose/{train,dev}.parquet` and `human/*.parquet` (docs/data.md); the Makefile's
`ESNLI`, `COSE` and `HUMAN` defaults make the same choice.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: The environment variable that names the data directory.
DATA_ENV = "LAREV_DATA"
#: The workplace's shared copy, relative to the working directory (a repository checked out beside `shared/`).
SHARED_DATA = Path("../shared/data")
#: Where `larev data get` writes when no --out is given, relative to the working directory.
DEFAULT_DATA = Path("data")


def data_dir(environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Path:
    """The data directory: `LAREV_DATA` when set (and not empty), else `../shared/data` when it exists, else
    `data/`. Relative paths stay relative (to `cwd`, default the working directory), so commands print the
    paths the user typed. `environ` and `cwd` default to the process's own."""
    environ = os.environ if environ is None else environ
    named = environ.get(DATA_ENV, "").strip()
    if named:
        return Path(named).expanduser()
    base = Path.cwd() if cwd is None else Path(cwd)
    return SHARED_DATA if (base / SHARED_DATA).is_dir() else DEFAULT_DATA


def data_file(*parts: str, environ: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Path:
    """A path inside the data directory, e.g. `data_file("esnli", "dev.parquet")`."""
    return data_dir(environ, cwd).joinpath(*parts)
