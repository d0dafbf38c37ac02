"""A Dask worker plugin that makes the project's top-level packages import as themselves on a worker.

A Dask worker puts its scratch directories first on `sys.path`, and its spill store is a folder named `storage`
inside one of them. Python would import that empty folder as a namespace package called `storage` in place of
the project's own, and every larev task sent to the worker would then fail on `from storage import ...`.
`ProjectImports.setup` imports the project's packages once with those shadowing folders left out of the path;
later imports find them in `sys.modules`.

This module imports nothing of the project, so a worker can unpickle the plugin before the fix is in place.
"""

from __future__ import annotations

import importlib
import os
import sys

from distributed.diagnostics.plugin import WorkerPlugin

PACKAGES = ("storage", "larev", "tasks", "flows")


def shadows(path_entries: list[str], packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """The entries of `path_entries` holding a folder named like one of `packages` but with no __init__.py
    (which Python would import as an empty namespace package)."""
    found = []
    for entry in path_entries:
        base = entry or os.getcwd()
        for name in packages:
            folder = os.path.join(base, name)
            if os.path.isdir(folder) and not os.path.exists(os.path.join(folder, "__init__.py")):
                found.append(entry)
                break
    return found


def import_past_shadows(packages: tuple[str, ...] = PACKAGES) -> None:
    """Import `packages` with the shadowing path entries set aside (and drop any namespace stand-in already
    imported); the path is restored afterwards."""
    hidden = set(shadows(sys.path, packages))
    if not hidden:
        return
    for name in packages:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None) is None:
            del sys.modules[name]
    saved = list(sys.path)
    sys.path[:] = [p for p in saved if p not in hidden]
    try:
        for name in packages:
            importlib.import_module(name)
    finally:
        sys.path[:] = saved


class ProjectImports(WorkerPlugin):
    """Runs `import_past_shadows` on every worker of the cluster, present and future."""

    name = "larev-project-imports"
    idempotent = True  # registering it again (a second run on the same cluster) changes nothing

    def setup(self, worker) -> None:
        import_past_shadows()

