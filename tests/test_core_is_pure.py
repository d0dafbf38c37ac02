"""The core package imports no Prefect: every larev module loads in a fresh interpreter without it."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import larev


def test_no_larev_module_imports_prefect():
    names = [m.name for m in pkgutil.walk_packages(larev.__path__, "larev.")]
    code = ("import importlib, sys\n"
            f"for name in {names!r}:\n"
            "    importlib.import_module(name)\n"
            "bad = sorted(m for m in sys.modules if m == 'prefect' or m.startswith('prefect.'))\n"
            "assert not bad, bad[:5]\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(names) > 20
